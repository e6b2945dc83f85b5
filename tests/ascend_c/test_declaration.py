"""Declaring an Ascend C kernel and checking calls: the signature read from the C++, roles,
rules, every mistake named, and the NPU build record. Nothing here compiles C++."""
import numpy as np
import pytest

import pypto
from pypto.ascend_c import OutputRuleError, signature
from pypto.backends.ptoisa import toolchain

from .kernels import MATMUL, SUM_DIFF, VADD, declare_matmul, declare_sum_diff, declare_vadd

def SAME(x, y):
    return pypto.OutputSpec(x.shape, x.dtype)


def test_signature_is_read_from_the_global_function():
    sig = signature.parse(MATMUL, "matmul")
    assert [(p.name, p.kind, p.dtype) for p in sig.params] == [
        ("a", "tensor", pypto.float16), ("b", "tensor", pypto.float16),
        ("c", "tensor", pypto.float32), ("m", "int", None), ("n", "int", None),
        ("k", "int", None)]
    assert MATMUL.splitlines()[sig.line - 1].startswith("__global__ AICORE void matmul(")
    marked = signature.parse(SUM_DIFF, "sum_diff")
    assert [p.role for p in marked.tensors] == ["in", "in", "out", "out"]


def test_untyped_pointers_and_comments():
    source = """// __global__ AICORE void old(__gm__ float *x);
    __global__ AICORE void k(__gm__ void *out, GM_ADDR src, /* n */ uint32_t n, float alpha) {}"""
    sig = signature.parse(source, "k")
    assert [(p.name, p.kind, p.cxx, p.dtype) for p in sig.params] == [
        ("out", "tensor", "void *", None), ("src", "tensor", "uint8_t *", None),
        ("n", "int", "uint32_t", None), ("alpha", "float", "float", None)]
    with pytest.raises(ValueError, match=r"input `GM_ADDR src` is untyped; give its dtype with "
                                         r"dtypes=\{'src': 'float16'\}"):
        pypto.ascend_c_kernel(source, "k", outputs=lambda src: pypto.OutputSpec(4, "float32"))
    op = pypto.ascend_c_kernel(source, "k", outputs=lambda src: pypto.OutputSpec(4, "float32"),
                               dtypes={"src": "float16"})
    assert (op.inputs, op.outputs) == (["src"], ["out"])


def test_roles_from_the_output_rules_parameter_names():
    op = declare_matmul()
    assert (op.inputs, op.outputs) == (["a", "b"], ["c"])
    op = pypto.ascend_c_kernel(MATMUL, "matmul", inputs=["b", "a"],
                               outputs=lambda b, a: pypto.OutputSpec((64, 64), "float32"))
    assert (op.inputs, op.outputs) == (["b", "a"], ["c"])
    with pytest.raises(ValueError, match=r"which pointer parameters \(a, b, c\) are inputs\? "
                                         r"Name them with inputs="):
        pypto.ascend_c_kernel(MATMUL, "matmul", outputs=lambda p, q: None)
    with pytest.raises(ValueError, match="a kernel needs at least one output parameter"):
        pypto.ascend_c_kernel(MATMUL, "matmul", inputs=["a", "b", "c"], outputs=[])


def test_declaration_errors_name_the_fix():
    with pytest.raises(ValueError, match=r"no `__global__ ... void vad\(...\)` in the source; "
                                         r"the source defines vadd"):
        pypto.ascend_c_kernel(VADD, "vad", outputs=SAME)
    with pytest.raises(ValueError, match="no PyPTO dtype"):
        pypto.ascend_c_kernel("__global__ AICORE void k(__gm__ double2 *x, __gm__ float *y) {}",
                              "k", outputs=lambda x: pypto.OutputSpec(1, "float32"))
    with pytest.raises(ValueError, match=r"scalars=...\): q are no scalar parameters of vadd "
                                         r"\(n\)"):
        pypto.ascend_c_kernel(VADD, "vadd", outputs=SAME, scalars={"q": 1})
    with pytest.raises(ValueError, match=r"dtypes=...\): 'x' is `__gm__ float \*x` \(float32\), "
                                         "not float16"):
        pypto.ascend_c_kernel(VADD, "vadd", outputs=SAME, dtypes={"x": "float16"})
    with pytest.raises(TypeError, match="must be C\\+\\+ source text or a path"):
        pypto.ascend_c_kernel(42, "vadd", outputs=SAME)


def test_signature_mismatches_name_the_argument():
    op = declare_matmul()
    a, b = np.zeros((64, 64), np.float16), np.zeros((64, 64), np.float16)
    with pytest.raises(TypeError, match=r"matmul takes 2 input\(s\) \(a, b\), got 3"):
        pypto.call_ascend_c(op, [a, b, b])
    with pytest.raises(TypeError, match=r"input 'b' \(inputs\[1\]\) must be float16 \(the "
                                        r"kernel's `__gm__ half \*b`\), got float32"):
        pypto.call_ascend_c(op, [a, b.astype(np.float32)])
    with pytest.raises(ValueError, match=r"input 'a' \(inputs\[0\]\) must have rank 2, got "
                                         r"shape \(4096,\)"):
        pypto.call_ascend_c(op, [a.reshape(-1), b])
    with pytest.raises(TypeError, match=r"inputs\[0\] must be an array"):
        pypto.call_ascend_c(op, [[1, 2], b])
    with pytest.raises(TypeError, match=r"call_ascend_c\(op=...\) takes a kernel made by "
                                        r"pypto.ascend_c_kernel"):
        pypto.call_ascend_c(lambda a, b: a, [a, b])


def test_output_rule_errors():
    a, b = np.zeros((64, 96), np.float16), np.zeros((96, 64), np.float16)
    with pytest.raises(OutputRuleError, match=r"matmul's output rule \(outputs=\) failed on "
                                              r"inputs a=float16\[64, 96\], b=float16\[96, 64\]: "
                                              r"ValueError: every dimension must be a multiple"):
        declare_matmul()(a, b)
    wrong_dtype = pypto.ascend_c_kernel(MATMUL, "matmul", scalars={"m": 1, "n": 1, "k": 1},
                                        outputs=lambda a, b: pypto.OutputSpec((64, 64), "float16"))
    with pytest.raises(OutputRuleError, match=r"gives 'c' dtype float16, but the kernel "
                                              r"declares `__gm__ float \*c` \(float32\)"):
        wrong_dtype(a, b)
    two = pypto.ascend_c_kernel(MATMUL, "matmul", scalars={"m": 1, "n": 1, "k": 1},
                                outputs=lambda a, b: [pypto.OutputSpec((64, 64), "float32")] * 2)
    with pytest.raises(OutputRuleError, match=r"must give 1 pypto.OutputSpec \(one per output "
                                              r"parameter c\), got \[OutputSpec, OutputSpec\]"):
        two(a, b)
    bad_grid = pypto.ascend_c_kernel(VADD, "vadd", outputs=SAME, grid=lambda x, y: 0,
                                     scalars={"n": 1})
    x = np.zeros(4, np.float32)
    with pytest.raises(OutputRuleError, match=r"the grid \(grid=\) must be a positive int"):
        bad_grid(x, x)
    with pytest.raises(ValueError, match=r"OutputSpec\(shape=...\) must be a non-empty tuple"):
        pypto.OutputSpec((0, 3), "float32")


def test_scalar_errors():
    op = pypto.ascend_c_kernel(VADD, "vadd", outputs=SAME)
    x = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match=r"scalar parameter 'n' \(`int64_t n`\) of vadd has no "
                                        r"value: pass n=... or declare scalars="):
        op(x, x)
    with pytest.raises(TypeError, match=r"vadd has no scalar parameter\(s\) q; its scalars are "
                                        r"\['n'\]"):
        op(x, x, n=4, q=1)
    with pytest.raises(TypeError, match=r"scalar 'n' \(`int64_t n`\) takes an int, got 4.5"):
        op(x, x, n=4.5)
    matmul = declare_matmul()
    a = np.zeros((64, 64), np.float16)
    with pytest.raises(ValueError, match=r"scalar 'm' \(`int32_t m`\) holds "
                                         r"-2147483648..2147483647, got 2147483648"):
        matmul(a, a, m=2 ** 31)


def test_graph_calls_are_checked_where_written():
    g = pypto.TensorGraph("checked")
    a = g.placeholder((64, 64), pypto.float32)
    b = g.placeholder((64, 64), pypto.float16)
    with pytest.raises(TypeError, match=r"input 'a' \(inputs\[0\]\) must be float16"):
        pypto.call_ascend_c(declare_matmul(), [a, b])
    with pytest.raises(TypeError, match=r"inputs\[1\] is a ndarray among graph tensors"):
        pypto.call_ascend_c(declare_matmul(), [b, np.zeros((64, 64), np.float16)])
    other = pypto.TensorGraph("other").placeholder((64, 64), pypto.float16, name="o")
    with pytest.raises(ValueError, match=r"inputs\[1\] \('o'\) belongs to graph 'other'"):
        pypto.call_ascend_c(declare_matmul(), [b, other])
    s, d = pypto.call_ascend_c(declare_sum_diff(),
                               [g.placeholder(1000, pypto.float16, name="x"),
                                g.placeholder(1000, pypto.float16, name="y")])
    assert (s.name, d.name, s.shape, d.dtype) == ("sum_diff_s", "sum_diff_d", (1000,),
                                                  pypto.float16)
    assert g.outputs == [s, d]


def test_the_npu_build_is_recorded():
    op = declare_matmul()
    build = op.npu_build
    assert build.command[:5] == ("bisheng", "-fPIC", "-shared", "-xcce", "--npu-arch=dav-2201")
    assert build.command[-2:] == ("-o", "libmatmul.so") and "-std=c++17" in build.command
    assert build.launcher == "call_matmul"
    assert ("matmul<<<blockDim, nullptr, stream>>>((__gm__ half *)a, (__gm__ half *)b, "
            "(__gm__ float *)c, m, n, k);") in build.launcher_source
    launch = op.npu_launch(np.zeros((128, 64), np.float16), np.zeros((64, 192), np.float16))
    assert launch.block_dim == 6
    assert launch.arguments == (("a", "input", "float16[128, 64]"),
                                ("b", "input", "float16[64, 192]"),
                                ("c", "output", "float32[128, 192]"),
                                ("m", "scalar", 128), ("n", "scalar", 192), ("k", "scalar", 64))
    assert launch.call == "call_matmul(6, stream, a, b, c, m=128, n=192, k=64)"


def test_vadd_declaration():
    op = declare_vadd()
    assert repr(op) == ("<pypto.ascend_c_kernel vadd: inputs ['x', 'y'], outputs ['z'], "
                        "scalars ['n']>")


def test_missing_tools_say_how_to_set_them_up(monkeypatch, tmp_path):
    for var in ("PTO_ORACLE", "PTO_ISA_ROOT"):
        monkeypatch.setenv(var, str(tmp_path / "nowhere"))
    op = declare_vadd()
    with pytest.raises(toolchain.ToolMissing,
                       match=r"(?s)Ascend C kernel 'vadd'.*pto-oracle/setup.sh.*PTO_ORACLE"):
        op(np.ones(4, np.float32), np.ones(4, np.float32))
