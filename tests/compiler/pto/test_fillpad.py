"""Padding work only where a window is partial (pto/passes/fillpad.py): decided at compile
time when the offsets and extents are constants, else under a run-time check; results stay
those of the padded load on the host (the pto-isa engine runs the corpus's partial windows,
tests/engines/test_ptoisa.py)."""
import re

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.backends.ascend.model.launch import model_kernel


@pypto.jit
def gemm(a, b, c, M, N, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    pm, pn = pl.program_id(0), pl.program_id(1)
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in pl.range(0, K, BK, num_stages=2):
        acc = pl.matmul(pl.load(a, offsets=(pm * BM, k), shape=(BM, BK)),
                        pl.load(b, offsets=(k, pn * BN), shape=(BK, BN)), acc=acc)
    pl.store(c, offsets=(pm * BM, pn * BN), value=acc)


@pypto.jit
def one_product(a, b, c, M: pl.constexpr, N: pl.constexpr, K: pl.constexpr):
    ta = pl.load(a, offsets=(0, 0), shape=(M, K))
    tb = pl.load(b, offsets=(0, 0), shape=(K, N))
    pl.store(c, offsets=(0, 0), value=pl.matmul(ta, tb))


def _fills(pto: str) -> list[tuple[str, bool]]:
    """(opcode, inside an scf.if) of each padding instruction of the .pto."""
    out, depth_if = [], []
    for line in pto.splitlines():
        indent = len(line) - len(line.lstrip())
        while depth_if and indent <= depth_if[-1]:
            depth_if.pop()
        if re.search(r"\bscf\.if\b", line):
            depth_if.append(indent)
        m = re.search(r"pto\.(texpands|tfillpad)\b", line)
        if m:
            out.append((m.group(1), bool(depth_if)))
    return out


def _gemm_args(m, n, k):
    return (np.zeros((m, k), np.float16), np.zeros((k, n), np.float16),
            np.zeros((m, n), np.float32), m, n, k)


def test_run_time_extents_put_each_l1_fill_under_a_check():
    pto = gemm.compile(*_gemm_args(64, 64, 256), BM=32, BN=32, BK=32).asm["pto"]
    fills = [inside for op, inside in _fills(pto) if op == "texpands"]
    # the accumulator's zero operands are filled unconditionally; every load's fill is checked
    assert fills.count(True) >= 4, pto


def test_whole_windows_do_no_padding_work_in_the_model():
    """A GEMM whose windows are all whole at run time fills only the prefetch past the end
    of each K loop (before: one fill of L1 before every load)."""
    model = model_kernel(gemm, (2, 2), *_gemm_args(64, 64, 256), BM=32, BN=32, BK=32)
    for block in model.blocks:
        loads = [r for r in block.records if r.name == "tload"]
        fills = [r for r in block.records if r.name == "texpands" and r.pipe == "MTE2"]
        assert len(loads) == 2 * (256 // 32 + 1)
        assert len(fills) == 2                # a's and b's prefetch past the end


def test_partial_windows_are_still_padded_in_the_model():
    model = model_kernel(gemm, (2, 2), *_gemm_args(50, 50, 250), BM=32, BN=32, BK=32)
    fills = sum(r.name == "texpands" and r.pipe == "MTE2"
                for block in model.blocks for r in block.records)
    # K = 250: the last K step is partial in every block; M, N = 50: the second row and
    # column of blocks load partial tiles at every step
    assert fills > 4 * 4


@pytest.mark.parametrize("k,fills", [(32, 0), (48, 2)])
def test_constant_windows_are_decided_at_compile_time(k, fills):
    """A 32 x 32 tile of a 32 x 32 tensor is whole: no fill; a 48-wide one is partial: an
    unchecked fill of each L1 operand (L1 has no TFILLPAD)."""
    rng = np.random.default_rng(k)
    a = rng.standard_normal((32, 32)).astype(np.float16)
    b = rng.standard_normal((32, 32)).astype(np.float16)
    c = np.zeros((32, 32), np.float32)
    pto = one_product.compile(a, b, c, M=32, N=32, K=k).asm["pto"]
    assert [inside for _, inside in _fills(pto)] == [False] * fills, pto
    one_product[(1,)](a, b, c, M=32, N=32, K=k)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=2e-3,
                               atol=2e-3)


@pytest.mark.parametrize("m,n,k", [(64, 64, 256), (50, 61, 250), (17, 33, 40)])
def test_checked_fills_give_the_padded_result(m, n, k):
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float32)
    gemm[(pl.cdiv(m, 32), pl.cdiv(n, 32))](a, b, c, m, n, k, BM=32, BN=32, BK=32)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=2e-3,
                               atol=2e-3)
