"""Elementwise fusion (passes/fuse_elementwise.py + Codegen.fused) must not change results:
the fused loop reads and writes global memory directly only when that is equivalent."""
import numpy as np
import pytest

import pypto
import pypto.language as pl


@pypto.jit
def scale_shift(x, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    a = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(pid * BLOCK,), value=a * 2.0 + 1.0)


@pypto.jit
def row_softmax(x, out, BM: pl.constexpr, BN: pl.constexpr):
    pid = pl.program_id(0)
    t = pl.load(x, offsets=(pid * BM, 0), shape=(BM, BN), padding=float("-inf"))
    e = pl.exp(t - pl.max(t, axis=1, keepdims=True))
    pl.store(out, offsets=(pid * BM, 0), value=e / pl.sum(e, axis=1, keepdims=True))


def test_the_group_reaches_global_memory():
    x = np.zeros(64, np.float32)
    ir = scale_shift.compile(x, x.copy(), BLOCK=16).asm["tile_ir"]
    assert ir.count("fuse=1") == 4                  # load, mul, add and the store
    assert "tile.store" in ir.splitlines()[-2] and "fuse=1" in ir.splitlines()[-2]


@pytest.mark.parametrize("shift", [1, -1, 3])
def test_store_overlapping_the_load_keeps_load_then_store_order(shift):
    """out is x shifted by a few elements: the unfused order (whole tile loaded, then stored)
    must be kept, so the fused direct path is not taken."""
    buf = np.arange(64, dtype=np.float32)
    ref = buf.copy()
    src, dst = slice(8, 24), slice(8 + shift, 24 + shift)
    ref[dst] = ref[src] * 2.0 + 1.0
    scale_shift[(1,)](buf[src], buf[dst], BLOCK=16)
    np.testing.assert_array_equal(buf, ref)


def test_in_place_update_uses_the_direct_path_and_is_exact():
    buf = np.arange(48, dtype=np.float32)
    ref = buf * 2.0 + 1.0
    scale_shift[(3,)](buf, buf, BLOCK=16)
    np.testing.assert_array_equal(buf, ref)


@pytest.mark.parametrize("n", [16, 37, 1000])
def test_ragged_edges_fall_back_to_masked_instructions(n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    guard = np.full(n + 32, np.nan, np.float32)
    scale_shift[(pl.cdiv(n, 16),)](x, guard[:n], BLOCK=16)
    np.testing.assert_array_equal(guard[:n], x * np.float32(2.0) + np.float32(1.0))
    assert np.isnan(guard[n:]).all()


@pytest.mark.parametrize("rows,cols,bm", [(64, 100, 8), (33, 128, 4), (8, 1024, 8)])
def test_fused_softmax_matches_the_interpreter(rows, cols, bm, monkeypatch):
    x = np.random.default_rng(rows).standard_normal((rows, cols)).astype(np.float32)
    got = np.zeros_like(x)
    row_softmax[(pl.cdiv(rows, bm),)](x, got, BM=bm, BN=128 if cols <= 128 else cols)
    monkeypatch.setenv("PYPTO_INTERPRET", "1")
    ref = np.zeros_like(x)
    row_softmax[(pl.cdiv(rows, bm),)](x, ref, BM=bm, BN=128 if cols <= 128 else cols)
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-7)
