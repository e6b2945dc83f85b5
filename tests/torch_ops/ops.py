"""Ops the torch tests register, once per process (torch cannot unregister an operator)."""
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[torch]')")

import pypto  # noqa: E402
import pypto.language as pl  # noqa: E402

SQRT_2_OVER_PI = 0.7978845608028654


@pypto.tile_op
def gelu(x):
    """tanh-approximated GELU, computed in float32."""
    v = x.to(pl.float32)
    u = SQRT_2_OVER_PI * (v + 0.044715 * v * v * v)
    return (0.5 * v * (1.0 + pl.tanh(u))).to(x.dtype)


@pypto.tile_op
def gelu_grad(x, grad):
    v = x.to(pl.float32)
    t = pl.tanh(SQRT_2_OVER_PI * (v + 0.044715 * v * v * v))
    du = SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * v * v)
    return (grad.to(pl.float32) * (0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * du)).to(x.dtype)


@pypto.tile_op
def softmax(x):
    e = pl.exp(x - pl.max(x, axis=1, keepdims=True))
    return e / pl.sum(e, axis=1, keepdims=True)


@pypto.tile_op
def softmax_grad(out, grad):
    return out * (grad - pl.sum(grad * out, axis=1, keepdims=True))


@pypto.tile_op
def bias_gelu(x, bias):
    v = x + bias
    return 0.5 * v * (1.0 + pl.tanh(SQRT_2_OVER_PI * (v + 0.044715 * v * v * v)))


@pypto.jit
def scale_add(x, y, out, n, alpha: float, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    a = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    b = pl.load(y, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(pid * BLOCK,), value=a * alpha + b)


@pypto.jit
def scale_add_grad(grad, dx, dy, n, alpha: float, BLOCK: pl.constexpr):
    """scale_add's backward as a kernel: d/dx = alpha * grad, d/dy = grad."""
    pid = pl.program_id(0)
    g = pl.load(grad, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.store(dx, offsets=(pid * BLOCK,), value=g * alpha)
    pl.store(dy, offsets=(pid * BLOCK,), value=g)


@pypto.jit
def row_sum(x, out, BLOCK_N: pl.constexpr):
    pid = pl.program_id(0)
    t = pl.load(x, offsets=(pid, 0), shape=(1, BLOCK_N))
    pl.store(out, offsets=(pid,), value=pl.reshape(pl.sum(t, axis=1), (1,)))


GELU = pypto.register_op("test_gelu", gelu, backward=gelu_grad)
SOFTMAX = pypto.register_op("test_softmax", softmax, backward=softmax_grad)
BIAS_GELU = pypto.register_op("test_bias_gelu", bias_gelu)
SCALE_ADD = pypto.register_op(
    "test_scale_add", scale_add, outputs={"out": "x"},
    args={"n": lambda x: x.numel(), "BLOCK": 1024},
    grid=lambda x, BLOCK: (-(-x.numel() // BLOCK),),
    backward=lambda alpha, grad: (grad * alpha, grad))
SCALE_ADD_K = pypto.register_op(
    "test_scale_add_k", scale_add, outputs={"out": "x"},
    args={"n": lambda x: x.numel(), "BLOCK": 1024},
    grid=lambda x, BLOCK: (-(-x.numel() // BLOCK),),
    backward=scale_add_grad, backward_launch={
        "outputs": {"dx": "grad", "dy": "grad"},
        "args": {"n": lambda grad: grad.numel(), "BLOCK": 1024},
        "grid": lambda grad, BLOCK: (-(-grad.numel() // BLOCK),)})
ROW_SUM = pypto.register_op(
    "test_row_sum", row_sum, outputs={"out": lambda x: ((x.shape[0],), x.dtype)},
    args={"BLOCK_N": lambda x: x.shape[1]}, grid=lambda x: (x.shape[0],))
