"""Elementwise fusion (passes/fuse_elementwise.py + Codegen.fused) must not change results:
the fused loop reads and writes global memory directly only when that is equivalent."""
import numpy as np
import pytest

import pypto
import pypto.language as pl

from ...kernels import tile_softmax


@pypto.jit
def scale_shift(x, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    a = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(pid * BLOCK,), value=a * 2.0 + 1.0)


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
def test_ragged_edges_mask_loads_and_the_closing_store(n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    guard = np.full(n + 32, np.nan, np.float32)
    scale_shift[(pl.cdiv(n, 16),)](x, guard[:n], BLOCK=16)
    np.testing.assert_array_equal(guard[:n], x * np.float32(2.0) + np.float32(1.0))
    assert np.isnan(guard[n:]).all()


@pytest.mark.parametrize("rows,cols,bm", [(64, 100, 8), (33, 128, 4), (8, 1024, 8)])
def test_fused_softmax_matches_the_interpreter(rows, cols, bm, monkeypatch):
    x = np.random.default_rng(rows).standard_normal((rows, cols)).astype(np.float32)
    got = np.zeros_like(x)
    tile_softmax[(pl.cdiv(rows, bm),)](x, got, BM=bm, BN=128 if cols <= 128 else cols)
    monkeypatch.setenv("PYPTO_INTERPRET", "1")
    ref = np.zeros_like(x)
    tile_softmax[(pl.cdiv(rows, bm),)](x, ref, BM=bm, BN=128 if cols <= 128 else cols)
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-7)


@pypto.jit
def layer_norm(x, w, b, y, eps, BM: pl.constexpr, BN: pl.constexpr):
    row = pl.program_id(0) * BM
    N = x.shape[1]
    t = pl.load(x, offsets=(row, 0), shape=(BM, BN))
    mean = pl.sum(t, axis=1, keepdims=True) / N
    d = pl.where(pl.arange(0, BN)[None, :] < N, t - mean, 0.0)
    rstd = pl.rsqrt(pl.sum(d * d, axis=1, keepdims=True) / N + eps)
    wt = pl.load(w, offsets=(0,), shape=(BN,))
    bt = pl.load(b, offsets=(0,), shape=(BN,))
    pl.store(y, offsets=(row, 0), value=d * rstd * wt[None, :] + bt[None, :])


def test_layer_norm_runs_in_three_groups():
    """The weight rows' reshapes move in front of the last group instead of splitting it, and
    planning keeps the groups' inputs alive, so nothing splits them: load+mean, centre+variance,
    scale+store."""
    x = np.zeros((16, 1024), np.float32)
    w = np.zeros(1024, np.float32)
    ir = layer_norm.compile(x, w, w, x.copy(), 1e-5, BM=8, BN=1024).asm["tile_ir"]
    big = [line for line in ir.splitlines() if "8x1024xf32" in line or "tile.store" in line]
    groups = {line.split("fuse=")[1].split()[0] for line in big if "fuse=" in line}
    assert len(groups) == 3 and all("fuse=" in line for line in big), ir


@pytest.mark.parametrize("rows,cols", [(16, 1024), (21, 781), (3, 100)])
def test_layer_norm_groups_match_the_interpreter_at_ragged_edges(rows, cols, monkeypatch):
    rng = np.random.default_rng(cols)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    w, b = rng.standard_normal(cols).astype(np.float32), rng.standard_normal(cols).astype(np.float32)
    bn = 1 << (cols - 1).bit_length()
    guard = np.full((rows + 8, cols + 8), np.nan, np.float32)
    got = guard[:rows, :cols]
    layer_norm[(pl.cdiv(rows, 8),)](x, w, b, got, 1e-5, BM=8, BN=bn)
    assert np.isnan(guard[rows:]).all() and np.isnan(guard[:, cols:]).all()
    monkeypatch.setenv("PYPTO_INTERPRET", "1")
    ref = np.zeros((rows, cols), np.float32)
    layer_norm[(pl.cdiv(rows, 8),)](x, w, b, ref, 1e-5, BM=8, BN=bn)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


@pypto.jit
def cast_chain(x0, out):
    x0t = pl.load(x0, offsets=(0,), shape=(9,), padding=1.0)
    v1 = pl.cast(x0t, pl.float16)
    pl.store(out, offsets=(0,), value=-(-v1))


def test_ragged_group_keeps_its_loaded_tile_while_writing_the_stored_value():
    """Found by the differential test: at a ragged edge the stored value was written over the
    loaded tile (planned into the same bytes, at another element size) while it was read."""
    out = np.zeros(9, np.float16)
    cast_chain[(1,)](np.array([0.25], np.float32), out)
    np.testing.assert_array_equal(out, np.array([0.25] + [1.0] * 8, np.float16))


def test_fusion_never_makes_a_kernel_too_big_for_the_chip(monkeypatch):
    """Keeping a group's inputs alive to its end costs UB; a kernel that fits the chip without
    that (a 2 x 6656 layer norm, over the 184 KiB usable with all its groups) runs the group
    that does not fit instruction by instruction and keeps the others fused (dropping every
    group made it 2.5x slower). (2 x 4096, this test's case before the memory plan learned
    to place the largest tiles first, 2 x 5120, before the weight rows stopped being
    broadcast into full tiles (passes/expand.py), and 2 x 6656, before a group's outside
    input could be overwritten in place (passes/in_place.py), now fit with every group.)"""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 6656)).astype(np.float32)
    w, b = rng.standard_normal(6656).astype(np.float32), rng.standard_normal(6656).astype(np.float32)
    got = np.zeros_like(x)
    layer_norm[(2,)](x, w, b, got, 1e-5, BM=2, BN=6656)
    ir = layer_norm.compile(x, w, b, got, 1e-5, BM=2, BN=6656).asm["tile_ir"]
    rows = [line for line in ir.splitlines() if "2x6656xf32" in line]
    fused = [line for line in rows if "fuse=" in line]
    assert fused and len(fused) < len(rows), ir
    monkeypatch.setenv("PYPTO_INTERPRET", "1")
    ref = np.zeros_like(x)
    layer_norm[(2,)](x, w, b, ref, 1e-5, BM=2, BN=6656)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


@pypto.jit
def shifted_window(x, out, BM: pl.constexpr, BN: pl.constexpr, SHIFT: pl.constexpr):
    row = pl.program_id(0) * BM
    t = pl.load(x, offsets=(row, SHIFT), shape=(BM, BN), padding=-1.0)
    pl.store(out, offsets=(row, 0), value=t * 2.0 + pl.sum(t, axis=1, keepdims=True))


@pytest.mark.parametrize("x_cols,out_cols", [(20, 12), (20, 16), (8 + 16, 16), (30, 5)])
def test_tiles_wider_than_their_rows_run_the_padding_columns_without_memory(x_cols, out_cols,
                                                                            monkeypatch):
    """Load windows that end past the tensor's last column: the valid columns run on global
    memory and the rest on the padding value (the row sum includes them, as on the chip).
    When the store's window has another number of valid columns the masked path runs; both
    must agree with the interpreter, and nothing past the output's columns is written."""
    rng = np.random.default_rng(x_cols * out_cols)
    x = rng.standard_normal((12, x_cols)).astype(np.float32)
    guard = np.full((12, out_cols + 4), np.nan, np.float32)
    got = guard[:, :out_cols]
    shifted_window[(3,)](x, got, BM=4, BN=16, SHIFT=8)
    assert np.isnan(guard[:, out_cols:]).all()
    monkeypatch.setenv("PYPTO_INTERPRET", "1")
    ref = np.zeros((12, out_cols), np.float32)
    shifted_window[(3,)](x, ref, BM=4, BN=16, SHIFT=8)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


@pypto.jit
def add_two_widths(x, y, out, BN: pl.constexpr):
    row = pl.program_id(0) * 4
    a = pl.load(x, offsets=(row, 0), shape=(4, BN))
    b = pl.load(y, offsets=(row, 0), shape=(4, BN))
    pl.store(out, offsets=(row, 0), value=a + b)


def test_windows_with_different_valid_columns_take_the_masked_path():
    x = np.ones((8, 100), np.float32)
    y = np.full((8, 120), 2.0, np.float32)
    out = np.zeros((8, 128), np.float32)
    add_two_widths[(2,)](x, y, out, BN=128)
    expected = np.zeros((8, 128), np.float32)
    expected[:, :100] += 1.0
    expected[:, :120] += 2.0
    np.testing.assert_array_equal(out, expected)


def test_a_row_gives_the_same_bits_on_the_direct_and_the_masked_path():
    """Rows 0-7 run on the direct path, row 8 (a ragged last block) on the masked one. A
    float row sum must not be associated differently on the two, or equal rows would give
    different bits depending on where they sit."""
    row = np.random.default_rng(9).standard_normal(100).astype(np.float32) * 4
    x = np.tile(row, (9, 1))
    out = np.zeros_like(x)
    tile_softmax[(2,)](x, out, BM=8, BN=128)
    np.testing.assert_array_equal(out[8], out[0])


def test_layer_norm_rows_give_the_same_bits_on_both_paths_in_padded_tiles():
    """781 columns in 1024-wide tiles: the sums run on the direct path with their padding
    columns behind a guard, and row 8 (a ragged last block) on the masked path with the same
    guard, so equal rows still give equal bits, and both match the interpreter."""
    rng = np.random.default_rng(11)
    row = rng.standard_normal(781).astype(np.float32) * 3 + 1
    x = np.tile(row, (9, 1))
    w, b = rng.standard_normal(781).astype(np.float32), rng.standard_normal(781).astype(np.float32)
    got = np.zeros_like(x)
    layer_norm[(2,)](x, w, b, got, 1e-5, BM=8, BN=1024)
    np.testing.assert_array_equal(got[8], got[0])
    mean = row.astype(np.float64).mean()
    ref = (row - mean) / np.sqrt(((row - mean) ** 2).mean() + 1e-5) * w + b
    np.testing.assert_allclose(got[0], ref, rtol=1e-5, atol=1e-5)


@pypto.jit
def row_max_and_min_shift(x, out, m_out, BM: pl.constexpr, BN: pl.constexpr):
    row = pl.program_id(0) * BM
    t = pl.load(x, offsets=(row, 0), shape=(BM, BN))
    pl.store(m_out, offsets=(row, 0), value=pl.max(t, axis=1, keepdims=True))
    pl.store(out, offsets=(row, 0), value=t - pl.min(t, axis=1, keepdims=True))


@pytest.mark.parametrize("cols", [256, 77])
def test_fused_max_and_min_propagate_nan_from_anywhere_in_the_row(cols):
    """A NaN at the start, middle or end of a row, or an infinity, decides the row's max and
    min. With 77 columns the tile's other columns hold the load's padding (0), which the
    reductions see too."""
    x = np.random.default_rng(cols).random((64, cols), dtype=np.float32) + 1
    x[3, cols // 2] = x[7, 0] = x[9, cols - 1] = np.nan
    x[11, :] = -np.inf
    x[12, 5] = np.inf
    tile = np.pad(x, ((0, 0), (0, 256 - cols)))
    out, m = np.empty_like(x), np.empty((64, 1), np.float32)
    row_max_and_min_shift[(8,)](x, out, m, BM=8, BN=256)
    np.testing.assert_array_equal(m[:, 0], np.max(tile, axis=1))
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(out, x - np.min(tile, axis=1, keepdims=True))
