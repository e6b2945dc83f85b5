"""The persistent launch form (compiler/passes/persistent.py, issue 33 item 2): a grid with more
programs than cores runs as one block per core looping over the programs. Results must be the
launch's as written, whatever the grid's rank, extents and tail, on PyPTO's host code and on
pto-isa's simulator; kernels whose programs meet stay one block per program."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import pypto
import pypto.language as pl
from pypto.backends.ascend.model.launch import model_kernel
from pypto.compiler.ir import GRID_PARAMS

from ..engines.tools import needs_tools, retarget


@pypto.jit(dynamic=("x", "out"))       # one compile serves every grid the tests draw
def scaled_copy(x, out, BM: pl.constexpr, BN: pl.constexpr):
    """Program (i, j, k) scales tile (i, j) of matrix k by 1 + k + num_programs(0)."""
    i, j, k = pl.program_id(0), pl.program_id(1), pl.program_id(2)
    t = pl.load(x, offsets=(k * x.shape[0] // pl.num_programs(2) + i * BM, j * BN),
                shape=(BM, BN))
    pl.store(out, offsets=(k * x.shape[0] // pl.num_programs(2) + i * BM, j * BN),
             value=t * (1.0 + k + pl.num_programs(0)))


def _expected(x, grid, bm, bn):
    g0, g1, g2 = grid
    rows = x.shape[0] // g2
    out = np.zeros_like(x)
    for k in range(g2):
        for i in range(g0):
            for j in range(g1):
                r, c = k * rows + i * bm, j * bn
                window = x[r:r + bm, c:c + bn]
                out[r:r + window.shape[0], c:c + window.shape[1]] = window * (1.0 + k + g0)
    return out


def _launch(kernel, grid, bm=8, bn=16, tail=3):
    g0, g1, g2 = grid
    x = np.random.default_rng(0).standard_normal((g2 * (g0 * bm), g1 * bn - tail),
                                                 dtype=np.float32)
    out = np.zeros_like(x)
    kernel[grid](x, out, BM=bm, BN=bn)
    return x, out


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g0=st.integers(1, 40), g1=st.integers(1, 5), g2=st.integers(1, 3))
def test_any_grid_gives_the_result_of_one_block_per_program(g0, g1, g2):
    grid = (g0, g1, g2)
    x, out = _launch(scaled_copy, grid)
    np.testing.assert_array_equal(out, _expected(x, grid, 8, 16))


def test_a_large_grid_runs_persistent_and_a_small_one_does_not():
    with pypto.Profiler() as prof:
        x, out = _launch(scaled_copy, (50, 2, 1))          # 100 programs, 48 cores
        _launch(scaled_copy, (4, 2, 1))
    np.testing.assert_array_equal(out, _expected(x, (50, 2, 1), 8, 16))
    big, small = prof.kernels
    assert big.mode == "persistent" and big.grid == (48,) and big.blocks == 48
    assert small.mode == "compiled" and small.grid == (4, 2, 1)
    assert "scaled_copy (persist)" in prof.summary()
    pto = big.model and prof.report().launches[0].kernel.asm["pto"]
    assert all(f"%{name}: i64" in pto for name in GRID_PARAMS)


def test_the_persistent_form_models_faster_and_moves_the_same_bytes():
    x = np.zeros((480 * 8, 64), np.float32)
    grid_form = pypto.jit(launch_form="grid", dynamic=("x", "out"))(scaled_copy.fn)
    one_per_program = model_kernel(grid_form, (480, 4, 1), x, x, BM=8, BN=16)
    persistent = model_kernel(scaled_copy, (480, 4, 1), x, x, BM=8, BN=16)
    moved = lambda m: sum(r.bytes for b in m.blocks for r in b.records if r.name == "tload")
    assert moved(persistent) == moved(one_per_program) == x.nbytes
    assert persistent.cycles < 0.5 * one_per_program.cycles
    assert len(persistent.blocks) == 48 and len(one_per_program.blocks) == 480 * 4


def test_launch_form_grid_keeps_one_block_per_program():
    kernel = pypto.jit(launch_form="grid", dynamic=("x", "out"))(scaled_copy.fn)
    with pypto.Profiler() as prof:
        x, out = _launch(kernel, (60, 1, 1))
    np.testing.assert_array_equal(out, _expected(x, (60, 1, 1), 8, 16))
    assert prof.kernels[0].grid == (60, 1, 1) and prof.kernels[0].blocks == 60
    with pytest.raises(ValueError, match=r"launch_form='persistent'.*'auto', 'grid'"):
        pypto.jit(launch_form="persistent")(scaled_copy.fn)


@pypto.jit
def _meet(x, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    pl.store(out, offsets=(pid * BLOCK,), value=pl.load(x, offsets=(pid * BLOCK,),
                                                         shape=(BLOCK,)))
    pl.barrier()


def test_programs_that_meet_are_never_made_persistent():
    x = np.ones(64 * 16, np.float32)
    with pytest.raises(ValueError, match="needs every block running at once"):
        _meet[(64,)](x, np.zeros_like(x), BLOCK=16)


def test_a_bad_grid_is_refused_before_the_persistent_form():
    x = np.ones(16, np.float32)
    with pytest.raises(ValueError, match="grid dimensions must be >= 0"):
        scaled_copy[(-60, -2, 1)](x.reshape(1, 16), x.reshape(1, 16).copy(), BM=1, BN=16)


@needs_tools
def test_the_persistent_program_on_ptoisa_matches_numpy():
    """The .pto of the persistent form, run by pto-isa's CPU simulator over one block per
    core with the grid as its three int arguments."""
    sim = retarget(scaled_copy, "pto-isa")
    grid = (30, 2, 2)
    x = np.random.default_rng(1).standard_normal((2 * 30 * 8, 2 * 16 - 3), dtype=np.float32)
    out = np.zeros_like(x)
    bound = sim._bind((x, out), {"BM": 8, "BN": 16})
    kernel = sim._get_kernel(bound, persistent=True)[0]
    assert kernel.metadata["persistent"] in (1, 2)
    from pypto.backends.ptoisa.engine import load
    simulated = load(kernel, kernel.cache_key)
    args = {"x": x, "out": out, **dict(zip(GRID_PARAMS, grid))}
    simulated.launch((48,), {n: args[n] for n, _, _ in kernel.runtime_params})
    np.testing.assert_array_equal(out, _expected(x, grid, 8, 16))
