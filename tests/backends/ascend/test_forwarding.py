"""Load forwarding (backends/ascend/forwarding.py): later fused groups read a loaded window
from global memory instead of the tile. Results must be exactly those of the reference
interpreter, and a window that changed since the load must never be read again."""
import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.backends.ascend import forwarding

from ...kernels import tile_softmax
from .test_fusion import layer_norm


def interpreted(kernel, grid, *args, monkeypatch, **meta):
    monkeypatch.setenv("PYPTO_INTERPRET", "1")
    kernel[grid](*args, **meta)
    monkeypatch.delenv("PYPTO_INTERPRET")


def test_layer_norm_reads_x_w_and_b_where_they_are(monkeypatch):
    """x (read by two later groups) and both weight rows (reshaped, then read by the last
    group) are forwarded; the two reshapes are not executed."""
    plans = []
    real = forwarding.plan
    monkeypatch.setattr(forwarding, "plan", lambda insts, target: plans.append(
        real(insts, target)) or plans[-1])
    monkeypatch.setenv("PYPTO_DISABLE_CACHE", "1")
    monkeypatch.setattr(layer_norm, "_kernels", {})    # test_fusion may have compiled it
    x = np.zeros((16, 1024), np.float32)
    w = np.zeros(1024, np.float32)
    layer_norm.compile(x, w, w.copy(), x.copy(), 1e-5, BM=8, BN=1024)
    (plan,) = plans
    assert len(plan.loads) == 3 and len(plan.reshapes) == 2


@pytest.mark.parametrize("rows,cols,bm", [(64, 1024, 8), (37, 100, 4), (5, 1024, 8)])
def test_layer_norm_in_place(rows, cols, bm, monkeypatch):
    """y is x: the last group stores each element right after reading it from x."""
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    w, b = rng.standard_normal(cols).astype(np.float32), rng.standard_normal(cols).astype(np.float32)
    bn = 1 << (cols - 1).bit_length()
    ref = np.zeros_like(x)
    interpreted(layer_norm, (pl.cdiv(rows, bm),), x, w, b, ref, 1e-5, BM=bm, BN=bn,
                monkeypatch=monkeypatch)
    layer_norm[(pl.cdiv(rows, bm),)](x, w, b, x, 1e-5, BM=bm, BN=bn)
    np.testing.assert_allclose(x, ref, rtol=1e-5, atol=1e-5)


@pypto.jit
def store_then_reuse(x, out, BN: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(4, BN))
    pl.store(x, offsets=(0, 0), value=t * 0.0)
    pl.store(out, offsets=(0, 0), value=t + 1.0)


def test_a_window_stored_to_is_not_read_again():
    """The second group must use the loaded values, not the zeros the first one stored."""
    x = np.arange(4 * 64, dtype=np.float32).reshape(4, 64)
    expected = x + 1.0
    out = np.zeros_like(x)
    store_then_reuse[(1,)](x, out, BN=64)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(x, 0.0)


@pypto.jit
def add_first_row(z, BN: pl.constexpr):
    first = pl.load(z, offsets=(0, 0), shape=(1, BN))
    total = pl.sum(first, axis=1, keepdims=True)       # closes the group that loads `first`
    rows = pl.load(z, offsets=(0, 0), shape=(4, BN))
    pl.store(z, offsets=(0, 0), value=rows + first + total * 0.0)


def test_a_broadcast_read_of_the_stored_window_sees_the_old_values():
    """Row 0 of z is rewritten while the group goes on reading it for rows 1-3: the in-place
    exemption must not apply to a tile read with broadcasting."""
    z = np.arange(4 * 32, dtype=np.float32).reshape(4, 32)
    expected = z + z[0]
    add_first_row[(1,)](z, BN=32)
    np.testing.assert_array_equal(z, expected)


@pypto.jit
def softmax_rows_in_a_loop(x, out, BM: pl.constexpr, BN: pl.constexpr):
    blocks = pl.cdiv(x.shape[0], BM)
    for i in pl.range(pl.program_id(0), blocks, pl.num_programs(0)):
        t = pl.load(x, offsets=(i * BM, 0), shape=(BM, BN), padding=float("-inf"))
        e = pl.exp(t - pl.max(t, axis=1, keepdims=True))
        pl.store(out, offsets=(i * BM, 0), value=e / pl.sum(e, axis=1, keepdims=True))


@pytest.mark.parametrize("rows,cols", [(40, 256), (13, 100)])
def test_forwarding_inside_a_loop_body(rows, cols, monkeypatch):
    x = np.random.default_rng(cols).standard_normal((rows, cols)).astype(np.float32)
    got, ref = np.zeros_like(x), np.zeros_like(x)
    softmax_rows_in_a_loop[(3,)](x, got, BM=4, BN=256)
    interpreted(softmax_rows_in_a_loop, (3,), x, ref, BM=4, BN=256, monkeypatch=monkeypatch)
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-7)


def test_softmax_in_place(monkeypatch):
    x = np.random.default_rng(3).standard_normal((24, 128)).astype(np.float32)
    ref = np.zeros_like(x)
    interpreted(tile_softmax, (3,), x, ref, BM=8, BN=128, monkeypatch=monkeypatch)
    tile_softmax[(3,)](x, x, BM=8, BN=128)
    np.testing.assert_allclose(x, ref, rtol=2e-6, atol=1e-7)
