"""Row reductions of tiles taller than pto-isa's group-reduce shapes, as chunks of those shapes
(``compiler/pto/passes/group_reduce.py``): the .pto, the host, pto-isa's simulator, the
model."""
import re

import numpy as np
import pytest

import pypto
import pypto.language as pl
from tests.engines.tools import needs_tools, retarget


@pypto.jit
def row_stats(x, top, total, R: pl.constexpr, C: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(R, C))
    pl.store(top, offsets=(0, 0), value=pl.max(t, axis=1, keepdims=True))
    pl.store(total, offsets=(0, 0), value=pl.sum(t, axis=1, keepdims=True))


def _run(kernel, rows: int, cols: int) -> str:
    x = np.random.default_rng(rows + cols).standard_normal((rows, cols)).astype(np.float32)
    top, total = np.full((rows, 1), np.nan, np.float32), np.full((rows, 1), np.nan, np.float32)
    kernel[(1,)](x, top, total, R=rows, C=cols)
    np.testing.assert_array_equal(top, x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(total, x.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-4)
    return kernel.compile(x, top, total, R=rows, C=cols).asm["pto"]


def _reduced_shapes(pto: str, op: str) -> list:
    return re.findall(rf"pto\.{op} ins\(%\w+, %\w+ : !pto\.tile_buf<loc=vec, dtype=f32, "
                      r"rows=(\d+), cols=(\d+)", pto)


@pytest.mark.parametrize("rows, cols, chunk", [(64, 256, 32), (128, 128, 64), (24, 1024, 8)])
def test_a_tall_row_reduction_is_chunks_of_a_group_reduce_shape(rows, cols, chunk):
    pto = _run(row_stats, rows, cols)
    for op in ("trowmax", "trowsum"):
        assert _reduced_shapes(pto, op) == [(str(chunk), str(cols))] * (rows // chunk)


def test_rows_left_over_are_one_more_ordinary_reduction():
    """48 x 256 (flash attention's 96-row blocks, 48 rows an AIV): a 32-row group reduction
    and a 16-row remainder, where it was one reduction folding every row's repeats."""
    pto = _run(row_stats, 48, 256)
    for op in ("trowmax", "trowsum"):
        assert _reduced_shapes(pto, op) == [("32", "256"), ("16", "256")]


@pytest.mark.parametrize("rows, cols", [(64, 128), (32, 256), (64, 200)])
def test_other_shapes_are_reduced_as_they_are(rows, cols):
    """A group-reduce shape already (two of them), a width that has none."""
    pto = _run(row_stats, rows, cols)
    assert len(_reduced_shapes(pto, "trowmax")) == 1


@needs_tools
@pytest.mark.parametrize("rows", [64, 48])
def test_the_pto_isa_engine_runs_the_chunks(rows):
    _run(retarget(row_stats, "pto-isa"), rows, 256)


def test_the_model_charges_each_chunk_as_its_group_reduction():
    """Each 32 x 256 chunk of a 64 x 256 TROWMAX costs what a 32 x 256 tile's own does (the
    group reduction, ``costs._row_reduce_cycles``), not a share of the row-by-row fold."""
    from pypto.backends.ascend.model.launch import model_kernel

    def trowmax_cycles(rows: int) -> list:
        x = np.zeros((rows, 256), np.float32)
        top, total = np.zeros((rows, 1), np.float32), np.zeros((rows, 1), np.float32)
        model = model_kernel(row_stats, (1,), x, top, total, R=rows, C=256)
        return [r.end - r.start for blk in model.blocks for r in blk.records
                if r.name == "trowmax"]
    whole, = trowmax_cycles(32)
    assert trowmax_cycles(64) == [pytest.approx(whole)] * 2
