"""A mixed kernel's vector part on both AIVs of the cluster, half the rows each
(``compiler/pto/passes/split_rows.py``): the .pto, the host and pto-isa's simulator."""
import numpy as np
import pytest

import pypto
import pypto.language as pl
from tests.engines.tools import needs_tools, retarget


@pypto.jit
def mm_epilogue(a, b, c, d, K: pl.constexpr, BM: pl.constexpr, BN: pl.constexpr,
                COLSUM: pl.constexpr):
    """A matmul, then vector work row by row (and, with COLSUM, a column sum, which mixes
    the rows)."""
    pm, pn = pl.program_id(0), pl.program_id(1)
    acc = pl.matmul(pl.load(a, [pm * BM, 0], [BM, K]), pl.load(b, [0, pn * BN], [K, BN]))
    if COLSUM:
        pl.store(d, [pm, pn * BN], pl.sum(acc, axis=0, keepdims=True))
    pl.store(c, [pm * BM, pn * BN], pl.exp(acc * 0.01) + pl.max(acc, axis=1, keepdims=True))


def _run(kernel, m: int, bm: int, colsum: bool):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, 32)).astype(np.float16)
    b = rng.standard_normal((32, 64)).astype(np.float16)
    blocks = -(-m // bm)
    c = np.full((m, 64), np.nan, np.float32)
    d = np.full((blocks, 64), np.nan, np.float32)
    meta = dict(K=32, BM=bm, BN=32, COLSUM=colsum)
    kernel[(blocks, 2)](a, b, c, d, **meta)
    acc = a.astype(np.float32) @ b.astype(np.float32)
    want = np.exp(acc * 0.01) + acc.reshape(m, 2, 32).max(axis=2).repeat(32, axis=1)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)
    return kernel.compile(a, b, c, d, **meta).asm["pto"]


def _on_both_aivs(pto: str) -> bool:
    return "pto.get_subblock_idx" in pto and "%pypto_sb.p" not in pto


@pytest.mark.parametrize("m", [64, 40])      # 40: the last block's second half holds no row
def test_row_by_row_work_is_shared_by_the_two_vector_cores(m):
    pto = _run(mm_epilogue, m, 32, False)
    assert _on_both_aivs(pto)
    assert "rows=16, cols=32" in pto and "rows=32, cols=32, v_row=32" not in pto.split(
        "kernel_kind<vector>")[1]


@pytest.mark.parametrize("bm, colsum", [(32, True), (16, False)])
def test_work_across_rows_or_too_few_rows_stays_on_one_vector_core(bm, colsum):
    """A column sum needs every row on one core; 16 rows would leave halves of 8."""
    assert not _on_both_aivs(_run(mm_epilogue, 64, bm, colsum))


@needs_tools
@pytest.mark.parametrize("m", [64, 40])
def test_the_pto_isa_engine_runs_both_halves(m):
    """Both sub-blocks run the vector function one after the other on pto-isa (its entry
    called set_execution_context unqualified there: no kernel of that form compiled)."""
    _run(retarget(mm_epilogue, "pto-isa"), m, 32, False)


def test_the_model_runs_the_part_on_both_vector_cores():
    """Both AIVs of each cluster are modelled, and V's busy share is over both (it counted
    the second AIV's cycles against the clusters alone: 117.8 % for flash attention)."""
    from pypto.backends.ascend.model.launch import model_kernel
    a, b = np.zeros((256, 32), np.float16), np.zeros((32, 64), np.float16)
    c, d = np.zeros((256, 64), np.float32), np.zeros((8, 64), np.float32)
    model = model_kernel(mm_epilogue, (8, 2), a, b, c, d, K=32, BM=32, BN=32, COLSUM=False)
    assert {r.subblock for blk in model.blocks for r in blk.records if r.pipe == "V"} == {0, 1}
    clusters = len({blk.core for blk in model.blocks})
    assert model.busy_share("V") == pytest.approx(
        model.pipe_busy["V"] / (2 * clusters * model.cycles))
