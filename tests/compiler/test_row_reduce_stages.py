"""Wide-row reductions in two stages (compiler/passes/row_reduce.py): the chip's .pto views
the rows as pto-isa's group-reduce shape (fp32, 8192 elements) or as one-repeat rows, then
reduces the partials; our simulator reduces the row whole. Both assemblers, the chip's
headers and pto-isa's simulator take the staged form; the model prices it by pto-isa's
implementation (a fold of n repeats is n - 1 instructions, each behind a barrier)."""
import re

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.backends.ascend.model.launch import model_kernel

from ..engines.tools import needs_tools


@pypto.jit(target="ascend910b1")
def row_stats(x, s, m, BM: pl.constexpr, N: pl.constexpr):
    r = pl.program_id(0) * BM
    t = pl.load(x, offsets=(r, 0), shape=(BM, N))
    pl.store(s, offsets=(r, 0), value=pl.sum(t, axis=1, keepdims=True))
    pl.store(m, offsets=(r, 0), value=pl.max(t, axis=1, keepdims=True) -
             pl.min(t, axis=1, keepdims=True))


def _run(kernel, rows, cols, bm, dtype):
    x = np.random.default_rng(rows + cols).standard_normal((rows, cols)).astype(dtype)
    s, m = np.zeros((rows, 1), dtype), np.zeros((rows, 1), dtype)
    kernel[(rows // bm,)](x, s, m, BM=bm, N=cols)
    t = x.astype(np.float64)
    tol = 1e-4 if dtype == np.float32 else 2e-2
    np.testing.assert_allclose(s, t.sum(1, keepdims=True), rtol=tol, atol=tol * cols ** 0.5)
    np.testing.assert_array_equal(m, (x.max(1, keepdims=True) - x.min(1, keepdims=True)))
    return x


def _reductions(pto: str) -> list:
    """(opcode, source rows, source cols) of every row reduction in the .pto."""
    return [(op, int(r), int(c)) for op, r, c in re.findall(
        r"pto\.(trow(?:sum|max|min)) ins\(%[\w.]+, %[\w.]+ : !pto\.tile_buf<loc=vec, "
        r"dtype=\w+, rows=(\d+), cols=(\d+)", pto)]


@pytest.mark.parametrize("bm, cols, dtype, firsts", [
    (2, 4096, np.float32, [(64, 128)] * 3),     # 8192 fp32: pto-isa's group-reduce shape
    (4, 2048, np.float32, [(64, 128)] * 3),
    (1, 4096, np.float32, [(64, 64)] * 3),      # few rows: one-repeat rows
    (2, 2048, np.float16, [(64, 64), (32, 128), (32, 128)]),   # the sum in fp32
])
def test_wide_rows_reduce_in_two_stages_on_the_chip(bm, cols, dtype, firsts):
    _run(row_stats, 16, cols, bm, dtype)
    pto = row_stats.compile(np.zeros((16, cols), dtype), np.zeros((16, 1), dtype),
                            np.zeros((16, 1), dtype), BM=bm, N=cols).asm["pto"]
    stages = _reductions(pto)
    assert [s[1:] for s in stages[::2]] == firsts
    assert [s[2] for s in stages[1::2]] == [cols // first[1] for first in firsts]
    assert "pto.tmov" not in pto               # the views are the source's bytes


def test_many_rows_keep_one_instruction():
    """A fold's instructions serve every row: with 16 rows of 8 repeats one instruction wins."""
    pto = row_stats.compile(np.zeros((16, 512), np.float32), np.zeros((16, 1), np.float32),
                            np.zeros((16, 1), np.float32), BM=16, N=512).asm["pto"]
    assert _reductions(pto) == [(op, 16, 512) for op in ("trowsum", "trowmax", "trowmin")]


def test_the_model_prices_the_stages_below_the_fold():
    """Two rows of 4096 fp32: 63 folding steps, each an instruction and a barrier, ~2800
    cycles a reduction; staged, ~300. (Before the model costed the fold by levels, 561.)"""
    x = np.zeros((48 * 2, 4096), np.float32)
    model = model_kernel(row_stats, (48,), x, np.zeros((96, 1), np.float32),
                         np.zeros((96, 1), np.float32), BM=2, N=4096)
    v = sum(r.end - r.start for r in model.blocks[0].records if r.name.startswith("trow"))
    assert v < 3 * 400, v


@needs_tools
@pytest.mark.parametrize("bm, cols, dtype", [(1, 8192, np.float32), (1, 4096, np.float32),
                                             (1, 4096, np.float16)])
def test_the_stages_run_on_pto_isas_simulator(bm, cols, dtype):
    """Both first stages (the group shape, one-repeat rows) and their second stage on
    pto-isa's CPU simulator. (Its TROWSUM wants the source's rows equal to the result
    column's whole 32 bytes of them, engine.check_simulable, so a sum over fewer than 8 rows
    does not run there, staged or not.)"""
    _run(pypto.jit(row_stats.fn, engine="pto-isa", target="ascend910b1"), 4, cols, bm, dtype)


@needs_tools
def test_max_and_min_of_two_rows_run_on_pto_isas_simulator():
    x = np.random.default_rng(7).standard_normal((4, 4096)).astype(np.float32)
    m = np.zeros((4, 1), np.float32)
    pypto.jit(row_range.fn, engine="pto-isa", target="ascend910b1")[(2,)](x, m, BM=2, N=4096)
    np.testing.assert_array_equal(m, x.max(1, keepdims=True) - x.min(1, keepdims=True))


@pypto.jit(target="ascend910b1")
def row_range(x, m, BM: pl.constexpr, N: pl.constexpr):
    r = pl.program_id(0) * BM
    t = pl.load(x, offsets=(r, 0), shape=(BM, N))
    pl.store(m, offsets=(r, 0), value=pl.max(t, axis=1, keepdims=True) -
             pl.min(t, axis=1, keepdims=True))
