"""pypto.register_op: tile ops, compiled graphs and jit kernels as torch.library operators,
checked against torch's own ops, with torch.library.opcheck, torch.compile and gradcheck."""
import warnings

import numpy as np
import pytest

from .ops import (BIAS_GELU, GELU, ROW_SUM, SCALE_ADD, SCALE_ADD_K, SOFTMAX, gelu, scale_add,
                  scale_add_grad, torch)

import pypto  # noqa: E402
import pypto.language as pl  # noqa: E402

F32 = dict(rtol=2e-6, atol=2e-6)


def reference_gelu(x):
    return torch.nn.functional.gelu(x.float(), approximate="tanh").to(x.dtype)


def test_the_seed_example_runs_as_written():
    """The seed's TorchAir section, without ``import torch_npu`` (no NPU here)."""
    from pypto import register_op

    @pypto.tile_op
    def my_custom_op(x):
        return x * 2

    register_op("my_custom_op", my_custom_op)

    class MyModel(torch.nn.Module):
        def forward(self, x):
            return torch.ops.my_custom_op(x)

    x = torch.randn(3, 224, 224)
    assert torch.equal(MyModel()(x), x * 2)
    assert torch.ops.pypto.my_custom_op is torch.ops.my_custom_op


@pytest.mark.parametrize("shape", [(7,), (5000,), (33, 65), (2, 3, 40)])
def test_tile_op_matches_torch_for_any_rank(shape):
    x = torch.randn(shape)
    torch.testing.assert_close(GELU(x), reference_gelu(x), **F32)


@pytest.mark.parametrize("dtype,tol", [("float16", 1e-3), ("bfloat16", 8e-3)])
def test_tile_op_half_types(dtype, tol):
    x = torch.randn(64, 96).to(getattr(torch, dtype))
    y = GELU(x)
    assert y.dtype == x.dtype
    torch.testing.assert_close(y.float(), reference_gelu(x).float(), rtol=tol, atol=tol)


def test_tile_op_on_views_and_broadcast_inputs():
    base = torch.randn(40, 130)
    x = base[::2, 3:67]                                  # non-contiguous
    bias = torch.randn(64)
    v = x + bias
    expected = 0.5 * v * (1 + torch.tanh(0.7978845608028654 * (v + 0.044715 * v ** 3)))
    torch.testing.assert_close(BIAS_GELU(x, bias), expected, rtol=1e-5, atol=1e-5)


def test_row_reduction_tile_op_keeps_rows_whole():
    x = torch.randn(300, 257)
    torch.testing.assert_close(SOFTMAX(x), torch.softmax(x, dim=1), rtol=1e-5, atol=1e-6)


def test_kernel_with_a_launch_rule():
    x, y = torch.randn(5000), torch.randn(5000)
    torch.testing.assert_close(SCALE_ADD(x, y, 2.5), 2.5 * x + y, **F32)
    m = torch.randn(17, 300)
    torch.testing.assert_close(ROW_SUM(m), m.sum(1), rtol=1e-5, atol=1e-4)


def test_compiled_graph_as_an_op():
    graph = pypto.TensorGraph("graph_op")
    a = graph.placeholder((64, 128), pypto.float32, name="a")
    b = graph.placeholder((64, 128), pypto.float32, name="b")

    @pypto.tile_op
    def mul_add(x, y):
        return x * y + y

    pypto.tile_map(mul_add, [a, b], tile_size=(16, 128))
    op = pypto.register_op("test_graph_op", pypto.compile(graph))
    x, y = torch.randn(64, 128), torch.randn(64, 128)
    torch.testing.assert_close(op(x, y), x * y + y, **F32)
    assert torch.library.opcheck(op, (x, y))["test_faketensor"] == "SUCCESS"
    with pytest.raises(ValueError, match="has shape"):
        op(torch.randn(32, 128), torch.randn(32, 128))


def _opcheck(op, args):
    result = torch.library.opcheck(op, args)
    assert set(result.values()) == {"SUCCESS"}, result


def test_opcheck_passes_for_every_test_op():
    x = torch.randn(8, 24, requires_grad=True)
    _opcheck(GELU, (x,))
    _opcheck(SOFTMAX, (torch.randn(6, 40, requires_grad=True),))
    _opcheck(BIAS_GELU, (torch.randn(8, 24), torch.randn(24)))
    _opcheck(SCALE_ADD, (torch.randn(3000, requires_grad=True), torch.randn(3000), 0.5))
    _opcheck(ROW_SUM, (torch.randn(9, 33),))
    _opcheck(SCALE_ADD_K, (torch.randn(3000, requires_grad=True), torch.randn(3000), 0.5))


def test_gradcheck_gelu_and_softmax():
    """float32 (PyPTO has no float64), so the finite differences use a larger step."""
    opts = dict(eps=1e-3, atol=2e-3, rtol=2e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)     # "not double precision"
        assert torch.autograd.gradcheck(GELU, (torch.randn(4, 8, requires_grad=True),), **opts)
        assert torch.autograd.gradcheck(SOFTMAX, (torch.randn(3, 7, requires_grad=True),),
                                        **opts)
        assert torch.autograd.gradcheck(lambda a, b: SCALE_ADD(a, b, 1.5), (
            torch.randn(20, requires_grad=True), torch.randn(20, requires_grad=True)), **opts)


def test_a_jit_kernel_backward_runs_as_its_own_op():
    """backward= a @pypto.jit kernel with its launch rule: registered as <name>_backward, its
    outputs (dx, dy) are the gradients of (x, y)."""
    x, y = torch.randn(3000, requires_grad=True), torch.randn(3000, requires_grad=True)
    SCALE_ADD_K(x, y, 1.5).pow(2).sum().backward()
    grad = 2 * (x.detach() * 1.5 + y.detach())
    torch.testing.assert_close(x.grad, grad * 1.5, **F32)
    torch.testing.assert_close(y.grad, grad, **F32)
    assert torch.ops.pypto.test_scale_add_k_backward is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)     # "not double precision"
        assert torch.autograd.gradcheck(lambda a, b: SCALE_ADD_K(a, b, 0.5), (
            torch.randn(20, requires_grad=True), torch.randn(20, requires_grad=True)),
            eps=1e-3, atol=2e-3, rtol=2e-3)


def test_a_meta_tensor_beside_a_cpu_one_is_refused_naming_both():
    """It dispatched to the fake kernel and returned uninitialised memory."""
    with pytest.raises(RuntimeError, match=r"one device, but got 'x' on cpu, 'bias' on meta"):
        BIAS_GELU(torch.randn(8, 24), torch.empty(24, device="meta"))
    with pytest.raises(RuntimeError, match=r"'x' on meta, 'y' on cpu"):
        SCALE_ADD(torch.empty(64, device="meta"), torch.randn(64), 1.0)


def test_backward_matches_torch_autograd():
    x = torch.randn(50, 70, requires_grad=True)
    GELU(x).pow(2).sum().backward()
    ours, x.grad = x.grad, None
    reference_gelu(x).pow(2).sum().backward()
    torch.testing.assert_close(ours, x.grad, rtol=1e-5, atol=1e-5)


class FusedMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(32, 48)

    def forward(self, x):
        return torch.ops.pypto.test_softmax(torch.ops.pypto.test_gelu(self.fc(x)))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_fullgraph_traces_through(backend):
    torch.manual_seed(0)
    model = FusedMLP()
    x = torch.randn(16, 32)
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-6)
    expected = torch.softmax(reference_gelu(model.fc(x)), dim=1)
    torch.testing.assert_close(model(x), expected, rtol=1e-5, atol=1e-6)


def test_torch_compile_dynamic_shapes_and_backward():
    torch.manual_seed(0)
    model = FusedMLP()
    compiled = torch.compile(model, fullgraph=True, dynamic=True, backend="aot_eager")
    for rows in (5, 9):
        x = torch.randn(rows, 32)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-6)
    compiled(torch.randn(7, 32)).sum().backward()
    assert model.fc.weight.grad is not None


def test_outputs_are_written_in_place_without_copies(monkeypatch):
    """The CPU implementation hands PyPTO views of the torch tensors' memory: the kernel sees
    the very storage of the inputs and of the output it returns."""
    seen = []
    original = pypto.graph.Module.run

    def spy(self, inputs, out=None):
        seen.append(([a.ctypes.data for a in inputs.values()], out.ctypes.data))
        return original(self, inputs, out=out)

    monkeypatch.setattr(pypto.graph.Module, "run", spy)
    x = torch.randn(16, 16)
    y = GELU(x)
    assert seen == [([x.data_ptr()], y.data_ptr())]


def test_a_kernel_op_launches_on_the_tensors_themselves(monkeypatch):
    """The launch-rule path hands the kernel the caller's tensors and the output it returns
    (the launch then passes their data pointers: tests/torch_ops/test_torch_launch.py)."""
    seen = []
    original = scale_add._launch

    def spy(*args, **kwargs):
        seen.append({n: kwargs[n] for n in ("x", "y", "out")})
        return original(*args, **kwargs)

    monkeypatch.setattr(scale_add, "_launch", spy)
    x, y = torch.randn(3000), torch.randn(3000)
    out = SCALE_ADD(x, y, 2.0)
    [given] = seen
    assert given["x"] is x and given["y"] is y and given["out"] is out
    torch.testing.assert_close(out, x * 2 + y, **F32)


def test_registration_errors_name_the_fix():
    with pytest.raises(TypeError, match="needs a launch rule: outputs="):
        pypto.register_op("no_rule", scale_add)
    with pytest.raises(ValueError, match=r"\['outt'\] are not parameters of scale_add"):
        pypto.register_op("bad_rule", scale_add, outputs={"outt": "x"})
    with pytest.raises(ValueError, match="already registered"):
        pypto.register_op("test_gelu", gelu)
    with pytest.raises(TypeError, match="launch rules for @pypto.jit kernels"):
        pypto.register_op("tile_with_grid", gelu, grid=(4,))
    with pytest.raises(TypeError, match="takes a @pypto.tile_op"):
        pypto.register_op("not_an_op", lambda x: x)
    with pytest.raises(ValueError, match="must be a Python identifier"):
        pypto.register_op("has-dash", gelu)
    with pytest.raises(ValueError, match=r"parameters \['dx'\] name nothing"):
        pypto.register_op("bad_backward", gelu, backward=lambda dx: dx)
    with pytest.raises(TypeError, match="needs its launch rule: backward_launch="):
        pypto.register_op("kernel_backward_no_rule", gelu, backward=scale_add_grad)
    with pytest.raises(TypeError, match="backward_launch=...\\) is the launch rule of a"):
        pypto.register_op("rule_without_kernel", gelu, backward=lambda grad: grad,
                          backward_launch={"outputs": {}})


def test_bare_alias_leaves_existing_namespaces_alone():
    torch.ops.aten  # noqa: B018 - the namespace exists
    with pytest.warns(UserWarning, match="torch.ops.pypto.aten"):
        pypto.register_op("aten", gelu)
    assert torch.ops.aten.add is not None


def test_tiling_errors_surface_at_the_call():
    from .ops import softmax
    op = pypto.register_op("cut_rows", softmax, tile_size=(2, 3))
    with pytest.raises(ValueError, match="combines the elements of input 'x' along its axis 1"):
        op(torch.randn(4, 8))


def test_tile_size_auto_is_tuned_by_the_cycle_model():
    from .ops import bias_gelu
    op = pypto.register_op("test_bias_gelu_auto", bias_gelu, tile_size="auto")
    x, b = torch.randn(64, 48), torch.randn(48)
    v = x + b
    expected = 0.5 * v * (1 + torch.tanh(0.7978845608028654 * (v + 0.044715 * v ** 3)))
    torch.testing.assert_close(op(x, b), expected, rtol=1e-5, atol=1e-5)
