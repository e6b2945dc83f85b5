"""An Ascend C kernel as a node of a PyPTO graph: the seed's pattern (PyPTO node -> Ascend C
matmul -> PyPTO node), several outputs, debug mode, out=, and C++ errors at compile time."""
import numpy as np
import pytest

import pypto
from pypto.ascend_c import AscendCCompileError

from .kernels import VADD, declare_matmul, declare_sum_diff, needs_tools

pytestmark = needs_tools


@pypto.tile_op
def to_half_scaled(x):
    return (x * 0.5).to(pypto.float16)


@pypto.tile_op
def relu(x):
    return pypto.maximum(x, 0.0)


@pypto.tile_op
def add(x, y):
    return x + y


@pytest.fixture(scope="module")
def optimized_matmul():
    return declare_matmul()


def _seed_graph(op):
    g = pypto.TensorGraph("seed")
    a = g.placeholder((128, 256), pypto.float32)
    b = g.placeholder((256, 192), pypto.float16)
    a16 = pypto.tile_map(to_half_scaled, [a], (32, 256))
    c = pypto.call_ascend_c(op, [a16, b])
    out = pypto.tile_map(relu, [c], (32, 64))
    return g, out


def _reference(a, b):
    a16 = (a * np.float32(0.5)).astype(np.float16).astype(np.float64)
    return np.maximum(a16 @ b.astype(np.float64), 0)


def test_pypto_node_then_ascend_c_matmul_then_pypto_node(optimized_matmul):
    g, _ = _seed_graph(optimized_matmul)
    module = pypto.compile(g)
    assert [type(s).__name__ for s in module.steps] == ["Kernel", "AscendCStep", "Kernel"]
    rng = np.random.default_rng(7)
    a = rng.standard_normal((128, 256)).astype(np.float32)
    b = rng.standard_normal((256, 192)).astype(np.float16)
    out = module.run({"a": a, "b": b}).to_numpy()
    np.testing.assert_allclose(out, _reference(a, b), rtol=1e-5, atol=2e-3)
    text = module.tile_graph_ir
    assert "%matmul: float32[128, 192] = call_ascend_c(matmul, [%to_half_scaled, %b], m=128, " \
           "n=192, k=256)" in text
    assert "launch: call_matmul(6, stream, a, b, c, m=128, n=192, k=256)" in text


def test_debug_mode_interprets_the_pypto_nodes_and_simulates_the_ascend_c_one(optimized_matmul):
    g, _ = _seed_graph(optimized_matmul)
    rng = np.random.default_rng(8)
    a = rng.standard_normal((128, 256)).astype(np.float32)
    b = rng.standard_normal((256, 192)).astype(np.float16)
    out = pypto.debug.run(g, {"a": a, "b": b}).to_numpy()
    np.testing.assert_allclose(out, _reference(a, b), rtol=1e-5, atol=2e-3)


def test_several_outputs_feed_pypto_nodes_and_are_graph_outputs():
    g = pypto.TensorGraph("two")
    x = g.placeholder(1500, pypto.float16)
    y = g.placeholder(1500, pypto.float16)
    s, d = pypto.call_ascend_c(declare_sum_diff(), [x, y])
    both = pypto.tile_map(add, [s, d], 256)            # (x + y) + (x - y)
    module = pypto.compile(g)
    assert module.output_names == ["add"]
    rng = np.random.default_rng(9)
    xv, yv = rng.standard_normal((2, 1500)).astype(np.float16)
    out = np.zeros(1500, np.float16)
    module.run({"x": xv, "y": yv}, out=out)
    np.testing.assert_array_equal(out, (xv + yv) + (xv - yv))
    assert both.shape == (1500,)


def test_an_ascend_c_output_can_be_the_graphs_output(optimized_matmul):
    g = pypto.TensorGraph("alone")
    a = g.placeholder((64, 128), pypto.float16)
    b = g.placeholder((128, 64), pypto.float16)
    pypto.call_ascend_c(optimized_matmul, [a, b])
    module = pypto.compile(g)
    assert module.kernels == [] and len(module.ascend_c_steps) == 1
    av = np.eye(64, 128, dtype=np.float16)
    bv = np.arange(128 * 64, dtype=np.float16).reshape(128, 64) / 64
    out = module.run({"a": av, "b": bv}).to_numpy()
    np.testing.assert_array_equal(out, bv[:64].astype(np.float32))
    with pytest.raises(ValueError, match="has no generated kernels, only Ascend C calls"):
        pypto.memory.analyze(module)


def test_cpp_errors_come_out_at_compile():
    op = pypto.ascend_c_kernel(VADD.replace("TSTORE(gz, tz);", "TSTORE(gz, tz)"), "vadd",
                               outputs=lambda x, y: pypto.OutputSpec(x.shape, x.dtype),
                               scalars={"n": lambda x, y: x.size})
    g = pypto.TensorGraph("broken")
    x = g.placeholder(64, pypto.float32)
    pypto.tile_map(relu, [pypto.call_ascend_c(op, [x, x])], 64)
    with pytest.raises(AscendCCompileError, match="expected ';'"):
        pypto.compile(g)


def test_a_graph_with_an_ascend_c_call_is_a_torch_operator(optimized_matmul):
    torch = pytest.importorskip("torch")
    g, _ = _seed_graph(optimized_matmul)
    op = pypto.register_op("ascend_c_seed_graph", pypto.compile(g))
    a = torch.randn(128, 256)
    b = torch.randn(256, 192).half()
    got = op(a, b)
    want = torch.relu((a * 0.5).half().double() @ b.double())
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=2e-3)
