"""The NPU cycle model (pypto/backends/ascend/model/): per-instruction costs against the
reference page's examples, pipes overlapping under double buffering, the launch over the
cores, barriers, cross-core flags of mixed kernels and trip counts taken from the arguments."""
import dataclasses
import itertools

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.backends.ascend.model.block import BlockEnv
from pypto.backends.ascend.model.costs import (dispatch_cycles, instruction_cycles, transfer_cycles,
                                               vector_family)
from pypto.backends.ascend.model.launch import model_kernel, model_launch, simulate_block
from pypto.target import TARGETS, CostModel, GiB, get_target
from pypto.compiler.pto import Inst, Scalar, TensorArg, Tile
from pypto.compiler.pto.reader import parse_program
from pypto.language import dtypes as dt
from tests.quick import quick_cases

from ..kernels import mm_bias_sigmoid, row_softmax, vadd

B1 = get_target("ascend910b1")
F16, F32, I8, I64 = dt.float16, dt.float32, dt.int8, dt.int64


def tile(loc, dtype, rows, cols):
    return Tile(f"{loc}{rows}x{cols}", loc, dtype, rows, cols, 0, rows, cols)


def cost(op, ins, outs, **kw):
    return instruction_cycles(Inst(op, ins, outs), B1, **kw)


def per_cycle(gibps):
    return gibps * GiB / (B1.clock_ghz * 1e9)


# -- the parameters -----------------------------------------------------------------------------

def test_every_variant_carries_the_same_per_instruction_parameters():
    for target in TARGETS.values():
        c = target.costs
        assert c == CostModel()                 # one set for the 910B, in cycles of its clock
        assert c.cube_head_cycles == 6 and c.cube_fractal_cycles["float32"] == 2
        assert c.dma[("gm", "vec")] == (264.0, 128.0)
        assert c.max_repeats == 255 and c.repeat_bytes == 256
    assert TARGETS["ascend910b4"].hbm_gbps == 800.0
    # the page's own check: L1 -> L0A 441 GiB/s is 256 bytes per cycle at 1.85 GHz
    assert per_cycle(441) == pytest.approx(256, rel=0.01)


# -- per instruction: the families as formulas --------------------------------------------------
# (tests/backends/test_calibration.py holds them against the chip's measured cycles)

def test_matmul_per_k_step_is_the_measured_262():
    cycles, _, _ = cost("tmatmul", [tile("left", F16, 128, 64), tile("right", F16, 64, 128)],
                        [tile("acc", F32, 128, 128)])
    assert cycles == 262


def dynamic(dtype, rows, cols):
    """A UB tile whose valid shape is known only at run time (printed ``?``)."""
    return Tile(f"d{rows}x{cols}", "vec", dtype, rows, cols, 0, None, None)


def test_vector_families_by_repeats():
    c = B1.costs
    a = tile("vec", F32, 32, 64)                            # 8 KiB, 32 repeats of 256 bytes
    assert vector_family("tadds") == "scalar" and vector_family("tadd") == "binary"
    assert vector_family("tcolmax") == "col_reduce" and vector_family("trowsum") == "row_reduce"
    assert vector_family("tsqrt") == "transcendental" and vector_family("tabs") == "unary"
    for op, family, operands in [("tabs", "unary", [a]), ("tadds", "scalar", [a, 1.0]),
                                 ("tmul", "binary", [a, a]), ("texp", "transcendental", [a]),
                                 ("tdiv", "divide", [a, a])]:
        spec = c.vector[family]
        cycles, flops, nbytes = cost(op, operands, [a])
        assert (cycles, flops, nbytes) == (spec.head_cycles + 32 * spec.repeat_cycles, 2048,
                                           8192), op
    # fp16 streams twice the elements a repeat: the same bytes cost the same
    h = tile("vec", F16, 32, 128)
    assert cost("tadds", [h, 1.0], [h])[0] == cost("tadds", [a, 1.0], [a])[0]


def test_rows_narrower_than_a_repeat_cost_a_repeat_each_when_issued_row_by_row():
    """A tile-scalar or tile-tile op on a tile whose valid shape is dynamic runs row by row
    (TMULS f32 256x16 measures 266 cycles for 16 KiB, four times a whole-tile pass); a
    unary op checks the rows at run time and streams the tile whole."""
    spec = B1.costs.vector["scalar"]
    narrow = dynamic(F32, 256, 16)
    assert cost("tmuls", [narrow, 2.0], [narrow])[0] == 2 * spec.head_cycles + 256
    static = tile("vec", F32, 256, 16)
    assert cost("tmuls", [static, 2.0], [static])[0] == spec.head_cycles + 64
    unary = B1.costs.vector["unary"]
    assert cost("tabs", [narrow], [narrow])[0] == unary.head_cycles + 64


def test_reductions_pay_per_row():
    c = B1.costs
    src = tile("vec", F32, 64, 64)
    rows = cost("trowsum", [src], [tile("vec", F32, 64, 1)])[0]
    assert rows == c.vector_issue_cycles + 64 * c.row_reduce_cycles
    # a column reduction combines row after row, a barrier between each (pto-isa's TCOLMAX)
    cols = cost("tcolmax", [src], [tile("vec", F32, 1, 64)])[0]
    step = c.vector_issue_cycles + c.vector["binary"].repeat_cycles + c.vector_barrier_cycles
    assert cols == pytest.approx(256 / c.ub_copy_bytes_per_cycle + c.vector["unary"].head_cycles
                                 + 63 * step)
    # wider rows fold their repeats first: more work per row
    wide = cost("trowmax", [tile("vec", F32, 64, 256)], [tile("vec", F32, 64, 1)])[0]
    assert wide > rows + 64 * 3 * c.vector["binary"].repeat_cycles
    # one instruction and one barrier per repeat folded (pto-isa's TRowReduceOps/TRowSum):
    # two rows of 4096 fp32 take 63 of them; this was costed as 6 levels, 561 cycles, not 2839
    short = cost("trowsum", [tile("vec", F32, 2, 4096)], [tile("vec", F32, 2, 1)])[0]
    step = 2 * c.vector["binary"].repeat_cycles + c.vector_issue_cycles + c.vector_barrier_cycles
    assert short == pytest.approx(c.vector_issue_cycles + 63 * step + 2 * c.row_reduce_cycles)


def test_fp32_row_reductions_of_8192_elements_fold_in_groups():
    """pto-isa's A2/A3 TROWMAX/TROWSUM fold fp32 tiles of these static shapes into a column
    with vcgmax/vcgadd (TRowReduceOps.hpp, TryOptimizeFP32Reduce): one pass at a cycle a
    repeat and a few small steps, instead of binary folds and a vcmax a row."""
    c = B1.costs
    for rows, cols in ((64, 128), (32, 256), (16, 512), (8, 1024)):
        out = tile("vec", F32, rows, 1)
        grouped = cost("trowmax", [tile("vec", F32, rows, cols)], [out])[0]
        general = cost("trowmax", [dynamic(F32, rows, cols)], [out])[0]
        assert grouped < general
        steps = 4 * (c.vector_issue_cycles + c.vector_barrier_cycles)
        assert grouped <= c.vector_issue_cycles + 128 * c.group_reduce_cycles + steps
    # fp16, or another fp32 shape: the general path (TROWSUM f16 64x128 measured 495)
    half = cost("trowsum", [tile("vec", F16, 64, 128)], [tile("vec", F16, 64, 1)])[0]
    assert half == pytest.approx(495, rel=0.05)
    assert cost("trowsum", [tile("vec", F32, 64, 64)], [tile("vec", F32, 64, 1)])[0] == \
        c.vector_issue_cycles + 64 * c.row_reduce_cycles

def test_more_than_255_repeats_pay_the_issue_again():
    big = tile("vec", F32, 128, 256)                       # 128 KiB = 512 repeats: 3 issues
    spec = B1.costs.vector["scalar"]
    cycles, _, _ = cost("tadds", [big, 1.0], [big])
    assert cycles == 3 * spec.head_cycles + 512 * spec.repeat_cycles


@pytest.mark.parametrize("dtype,frac_k,per_fractal", [(F16, 16, 1), (F32, 8, 2), (I8, 32, 1)])
def test_cube_fractals_per_dtype(dtype, frac_k, per_fractal):
    m, k, n = 32, 64, 48
    cycles, flops, _ = cost("tmatmul", [tile("left", dtype, m, k), tile("right", dtype, k, n)],
                            [tile("acc", F32, m, n)])
    assert cycles == 6 + (m // 16) * (k // frac_k) * (n // 16) * per_fractal
    assert flops == 2 * m * k * n
    # ragged shapes are padded to whole fractals
    ragged, _, _ = cost("tmatmul", [tile("left", dtype, 17, k), tile("right", dtype, k, 1)],
                        [tile("acc", F32, 17, 1)])
    assert ragged == 6 + 2 * (k // frac_k) * 1 * per_fractal
    acc = tile("acc", F32, m, n)
    assert cost("tmatmul.acc", [acc, tile("left", dtype, m, k), tile("right", dtype, k, n)],
                [acc])[0] == cycles


def test_transfers_by_path():
    v, mat = tile("vec", F32, 64, 64), tile("mat", F16, 64, 64)     # 16 KiB, 8 KiB
    x = TensorArg("x", F32, (4096, 64), (64, 1))
    # GM -> UB and GM -> L1: a DMA start plus the bytes at the measured rate
    load, _, nbytes = cost("tload", [x, 0, 0], [v])
    assert nbytes == 16384
    assert load == 264 + 16384 / 128
    # an ND window into L1 is converted to NZ on the way (the board GEMM's rate); an NZ
    # tensor's window is a plain copy (the measured NC1HWC0 loads' rate)
    assert cost("tload", [x, 0, 0], [mat])[0] == pytest.approx(20 + 8192 / 88)
    xnz = TensorArg("xnz", F16, (4, 4, 16, 16), (1024, 256, 16, 1), layout="NZ")
    assert cost("tload", [xnz, 0, 0], [mat])[0] == pytest.approx(20 + 8192 / 134)
    assert cost("tstore", [v], [x, 0, 0])[0] == pytest.approx(16384 / per_cycle(188.5))
    assert cost("tstore", [mat], [x, 0, 0])[0] == pytest.approx(8192 / per_cycle(32))
    acc = tile("acc", F32, 64, 64)
    fix = B1.costs.transfer_gibps[("acc", "gm")]          # the FA board's lower bound
    assert cost("tstore", [acc], [x, 0, 0])[0] == pytest.approx(16384 / per_cycle(fix))
    assert cost("tmov", [acc], [tile("mat", F32, 64, 64)])[0] == \
        pytest.approx(16384 / per_cycle(128))
    assert cost("tmov", [mat], [tile("left", F16, 64, 64)])[0] == pytest.approx(8192 / 256, rel=1e-3)
    assert cost("tmov", [mat], [tile("right", F16, 64, 64)])[0] == \
        pytest.approx(8192 / per_cycle(220.5))
    assert cost("tmov", [v], [tile("vec", F32, 64, 64)])[0] == \
        pytest.approx(16384 / per_cycle(1024))
    # small loads are latency bound, big ones approach the rate
    small = transfer_cycles("gm", "vec", 32, B1)
    assert small > 200 and transfer_cycles("gm", "vec", 1 << 20, B1) < (1 << 20) / 120


def test_hbm_is_shared_between_active_cores():
    nbytes = 1 << 20
    alone = transfer_cycles("vec", "gm", nbytes, B1, active_cores=1)
    crowd = transfer_cycles("vec", "gm", nbytes, B1, active_cores=48)
    assert alone == pytest.approx(nbytes / per_cycle(188.5))          # the path's own limit
    assert crowd == pytest.approx(nbytes / (1600e9 / 48 / 1.85e9))    # 1/48 of the HBM
    b4 = get_target("ascend910b4")                                     # half the HBM
    assert transfer_cycles("vec", "gm", nbytes, b4, active_cores=40) == \
        pytest.approx(nbytes / (800e9 / 40 / 1.5e9))


def test_sync_and_scalar_instructions():
    assert instruction_cycles(Inst("set_flag", [], [], {"src": "MTE2", "dst": "V",
                                                         "event": 0}), B1) == (0, 0, 0)
    assert instruction_cycles(Inst("barrier", [], [], {"pipe": "ALL"}), B1)[0] == 0
    s = Scalar("s", I64)
    assert instruction_cycles(Inst("arith.add", [s, s], [s]), B1) == (1, 0, 0)


# -- kernels ------------------------------------------------------------------------------------


@pypto.jit
def scale(x, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    pl.store(out, [pid * BLOCK], pl.load(x, [pid * BLOCK], [BLOCK]) * 2.0)


# the same kernel launched one block per program however large the grid (the tests of the
# model's list scheduling); `scale` itself runs a larger grid in the persistent form
grid_scale = pypto.jit(launch_form="grid")(scale.fn)


@pytest.mark.heavy
def test_double_buffering_overlaps_loads_with_compute():
    """Single-buffered, each iteration loads (L on MTE2), then computes (C on V), then stores
    (S on MTE3): the next load waits for V to have read the tile, and the store overlaps the
    next load, so an iteration takes L + C. Double-buffered, the next tile is loaded while V
    computes. The division writes its result in place into the load's buffer, so the load
    two iterations on (into the same buffer) waits for this store, and V for that load; V's
    work of the other iteration, in the loop's second half, does not wait for the store (the
    sync pass waits inside that branch, before its first conflicting instruction): two
    iterations take max(2 L, C + max(C, S + L)). (This kernel's store is too short to tell
    that from a wait before the whole second half; test_hoist's softmax tells them apart.)"""
    rows = 1024
    x = np.zeros((rows, 64), np.float32)
    single = model_kernel(row_softmax, (1,), x, x, rows, N=64, BM=8, STAGES=1)
    double = model_kernel(row_softmax, (1,), x, x, rows, N=64, BM=8, STAGES=2)
    recs = single.blocks[0].records
    span = lambda name: next(r.end - r.start for r in recs if r.name == name)
    load, store = span("tload"), span("tstore")
    iterations = rows // 8
    compute = sum(r.end - r.start for r in recs if r.pipe == "V") / iterations
    expected = 2 * (load + compute) / max(2 * load, compute + max(compute, store + load))
    # the block's own span: the launch and dispatch costs come before it
    measured = single.blocks[0].cycles / double.blocks[0].cycles
    assert double.cycles < single.cycles
    assert measured == pytest.approx(expected, rel=0.1), (measured, expected)
    assert single.blocks[0].cycles == pytest.approx(iterations * (load + compute), rel=0.05)
    # the same work either way, but for the padding (the prefetch past the end loads nothing
    # and its tfillpad fills the whole tile; a whole window's padding is skipped at run time):
    # only the overlap differs
    fills = lambda m: sum(r.end - r.start for r in m.blocks[0].records  # noqa: E731
                          if r.name == "tfillpad")
    assert double.pipe_busy["V"] - fills(double) == pytest.approx(
        single.pipe_busy["V"] - fills(single))
    # one load per tile, plus the prefetch past the end, which moves nothing
    loads = [r.bytes for r in double.blocks[0].records if r.name == "tload"]
    assert len(loads) == iterations + 1 and loads.count(0) == 1
    # in the double-buffered loop a load runs while V computes
    drecs = double.blocks[0].records
    loads = [r for r in drecs if r.name == "tload"]
    vec = [r for r in drecs if r.pipe == "V"]
    assert any(v.start < ld.end and ld.start < v.end for ld in loads[1:5] for v in vec)


def test_one_block_uses_one_of_48_vector_cores():
    x = np.zeros(1024, np.float32)
    m = model_kernel(scale, (1,), x, x.copy(), BLOCK=1024)
    assert m.cores == 48
    block = m.blocks[0]
    # the block starts after the launch and its own dispatch (CostModel.launch_us and
    # task_dispatch_us): idle time the utilization counts
    assert block.start == pytest.approx(sum(dispatch_cycles(m.target)))
    assert m.core_utilization == pytest.approx(block.cycles / (48 * m.cycles))
    assert m.time_ms == pytest.approx(m.cycles / 1.85e6)
    assert block.pid == (0, 0, 0) and block.core == 0
    # the load's padding past the tensor's end is the chip's own instruction (tfillpad, V)
    assert [r.name for r in block.records] == ["tload", "tfillpad", "tmuls", "tstore"]
    assert [r.kind for r in block.records] == ["memory", "compute", "compute", "memory"]
    assert block.end == m.cycles == max(r.end for r in block.records)
    assert f"core utilization {m.core_utilization:.1%}" in m.summary()


def test_large_balanced_grid_keeps_the_cores_busy():
    blocks = 48 * 10
    x = np.zeros(blocks * 1024, np.float32)
    m = model_kernel(grid_scale, (blocks,), x, x.copy(), BLOCK=1024)
    assert {b.core for b in m.blocks} == set(range(48))
    assert [b.pid[0] for b in m.blocks] == list(range(blocks))
    # every core runs its blocks in waves, each one after its dispatch (2.8 us): 1024-element
    # blocks are short beside it, so the cores are mostly waiting for work
    _, dispatch = dispatch_cycles(m.target)
    first = [b for b in m.blocks if b.core == 0]
    assert len(first) == 10
    assert all(a.end + dispatch == pytest.approx(b.start) for a, b in itertools.pairwise(first))
    busy = sum(b.cycles for b in m.blocks)
    assert m.core_utilization == pytest.approx(busy / (48 * m.cycles))
    assert m.core_utilization < 0.2
    # 48 cores share the HBM: a block is slower than alone
    alone = model_kernel(scale, (1,), x[:1024], x[:1024].copy(), BLOCK=1024)
    assert m.blocks[0].cycles > alone.blocks[0].cycles


def test_a_grid_larger_than_the_cores_runs_persistent():
    """The launch form a launch runs: one block per core, each running its programs back to
    back, so the dispatch is paid once per core, not once per program (issue 33)."""
    blocks = 48 * 10
    x = np.zeros(blocks * 1024, np.float32)
    grid_form = model_kernel(grid_scale, (blocks,), x, x.copy(), BLOCK=1024)
    persistent = model_kernel(scale, (blocks,), x, x.copy(), BLOCK=1024)
    assert len(persistent.blocks) == 48 and {b.core for b in persistent.blocks} == set(range(48))
    assert persistent.grid == (48, 1, 1)
    moved = lambda m: sum(r.bytes for b in m.blocks for r in b.records if r.name == "tload")
    assert moved(persistent) == moved(grid_form) == blocks * 1024 * 4
    # nine dispatches per core fewer, less what the loop costs
    _, dispatch = dispatch_cycles(persistent.target)
    assert grid_form.cycles - persistent.cycles > 8 * dispatch
    out = np.zeros_like(x)
    x[:] = np.arange(x.size)
    scale[(blocks,)](x, out, BLOCK=1024)
    np.testing.assert_array_equal(out, 2 * x)


def test_grid_with_a_few_blocks_more_than_the_cores():
    x = np.zeros(49 * 1024, np.float32)
    m = model_kernel(grid_scale, (49,), x, x.copy(), BLOCK=1024)
    assert m.blocks[48].start == pytest.approx(m.blocks[0].end + dispatch_cycles(m.target)[1])
    # one core works a second round alone, with the whole HBM to itself (so faster)
    assert m.blocks[48].cycles < m.blocks[0].cycles
    expected = (48 * m.blocks[0].cycles + m.blocks[48].cycles) / (48 * m.cycles)
    assert m.core_utilization == pytest.approx(expected) and m.core_utilization < 0.65


@pypto.jit
def unbalanced_two_phase(x, partial, out, BLOCK: pl.constexpr):
    """Block p scales p + 1 tiles, then every block reads block 0's partial result."""
    pid = pl.program_id(0)
    for i in range(pid + 1):
        pl.store(partial, [pid * BLOCK], pl.load(x, [i * BLOCK], [BLOCK]) * 2.0)
    pl.barrier()
    pl.store(out, [pid * BLOCK], pl.load(partial, [0], [BLOCK]) + 1.0)


def test_barrier_makes_every_block_wait_for_the_slowest():
    blocks, block = 6, 256
    x = np.zeros(blocks * block, np.float32)
    m = model_kernel(unbalanced_two_phase, (blocks,), x, x.copy(), x.copy(), BLOCK=block)
    phase1_end, phase2_start = [], []
    for b in m.blocks:
        names = [r.name for r in b.records]
        second = names.index("tadds") - 2             # the load after the barrier, its pad
        assert names[second:second + 2] == ["tload", "tfillpad"]
        phase1_end.append(max(r.end for r in b.records[:second]))
        phase2_start.append(b.records[second].start)
    slowest = max(phase1_end)
    assert phase1_end[0] < phase1_end[-1]                 # the work is unbalanced
    assert all(s >= slowest for s in phase2_start)
    assert max(phase2_start) - min(phase2_start) < 5       # released together
    with pytest.raises(ValueError, match="more blocks than the 48 cores"):
        program = parse_program(unbalanced_two_phase.compile(
            np.zeros(64 * 16, np.float32), np.zeros(64 * 16, np.float32),
            np.zeros(64 * 16, np.float32), BLOCK=16).asm["pto"])
        model_launch(program, (64,), {"x": x, "partial": x, "out": x})


@pypto.jit
def broadcast(x, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    if pid == 0:
        pl.store(x, [0], pl.exp(pl.load(x, [0], [BLOCK])))
    pl.barrier()
    if pid != 0:
        pl.store(out, [pid * BLOCK], pl.load(x, [0], [BLOCK]) * 10.0)


def test_a_barrier_orders_the_consumers_after_the_producer():
    x, out = np.zeros(1024, np.float32), np.zeros(4 * 1024, np.float32)
    m = model_kernel(broadcast, (4,), x, out, BLOCK=1024)
    producer_store = next(r for r in m.blocks[0].records if r.name == "tstore")
    for b in m.blocks[1:]:
        load = next(r for r in b.records if r.name == "tload")
        assert load.start >= producer_store.end


def test_mixed_kernel_runs_cube_then_vector_in_one_cluster():
    M, N, K = 128, 128, 256
    a, b = np.zeros((M, K), np.float16), np.zeros((K, N), np.float16)
    bias, c = np.zeros((1, N), np.float32), np.zeros((M, N), np.float32)
    m = model_kernel(mm_bias_sigmoid, (2, 2), a, b, bias, c, K, BM=64, BN=64, BK=64)
    assert m.kind == "mixed" and m.cores == 24            # clusters: one AIC + its AIVs
    assert m.core_utilization == pytest.approx(sum(b.cycles for b in m.blocks) / (24 * m.cycles))
    for block in m.blocks:
        cube = [r for r in block.records if r.part == "cube"]
        vector = [r for r in block.records if r.part == "vector"]
        # the first K step starts the accumulator with the bias row (tmatmul.bias), the
        # others add to it
        assert [r.name for r in cube if r.name.startswith("tmatmul")] == \
            ["tmatmul.bias"] + ["tmatmul.acc"] * (K // 64 - 1)
        assert {r.pipe for r in cube} <= {"MTE2", "MTE1", "M", "FIX", "S"}
        assert {r.pipe for r in vector} <= {"MTE2", "V", "MTE3", "S"}
        handoff = next(r for r in cube if r.name == "tstore" and r.pipe == "FIX")
        workspace_load = vector[0]
        assert workspace_load.name == "tload"
        # the cross-core flag: the vector core reads the workspace after the FIX store
        assert workspace_load.start >= handoff.end
        assert block.end == max(r.end for r in block.records)
    matmuls = [r for b in m.blocks for r in b.records if r.name.startswith("tmatmul")]
    assert sum(r.end - r.start for r in matmuls) == 4 * (K // 64) * (6 + 4 * 4 * 4)
    flops = sum(r.flops for r in matmuls)
    assert flops == 2 * M * N * K



@pytest.mark.parametrize("n", quick_cases([256, 1000, 4096], 1000))
def test_trip_counts_come_from_the_scalar_arguments(n):
    x = np.zeros(n, np.float32)
    m = model_kernel(vadd, (2,), x, x, x.copy(), n, BLOCK=128)
    tiles = -(-n // 128)
    for p, block in enumerate(m.blocks):
        adds = sum(r.name == "tadd" for r in block.records)
        assert adds == len(range(p * 128, n, 256)) and block.pid == (p, 0, 0)
    assert sum(r.name == "tadd" for b in m.blocks for r in b.records) == tiles
    # the ragged last tile moves only the elements inside the tensor
    moved = sum(r.bytes for b in m.blocks for r in b.records if r.name == "tstore")
    assert moved == 4 * n


def test_trip_counts_come_from_dynamic_tensor_extents():
    @pypto.jit(dynamic={"x": (0,), "out": (0,)})
    def row_sums(x, out, TR: pl.constexpr, TC: pl.constexpr):
        for r in range(pl.program_id(0) * TR, x.shape[0], pl.num_programs(0) * TR):
            pl.store(out, [r, 0], pl.sum(pl.load(x, [r, 0], [TR, TC]), axis=1, keepdims=True))

    small = np.zeros((64, 16), np.float32)
    kernel = row_sums.compile(small, np.zeros((64, 1), np.float32), TR=8, TC=16)
    program = parse_program(kernel.asm["pto"])
    cycles = []
    for rows in (64, 640):
        x, out = np.zeros((rows, 16), np.float32), np.zeros((rows, 1), np.float32)
        m = model_launch(program, (1,), {"x": x, "out": out})
        assert sum(r.name == "trowsum" for r in m.blocks[0].records) == rows // 8
        cycles.append(m.blocks[0].cycles)       # the block's span, without launch/dispatch
    assert cycles[1] == pytest.approx(10 * cycles[0], rel=0.05)


@pytest.mark.heavy
def test_simulate_block_alone_matches_the_launch():
    x = np.zeros((256, 64), np.float32)
    kernel = row_softmax.compile(x, x, 256, N=64, BM=8, STAGES=2)
    program = parse_program(kernel.asm["pto"])
    args = {"x": x, "out": x, "M": 256}
    env = BlockEnv(B1, (0, 0, 0), (1, 1, 1), args, program.params)
    trace = simulate_block(program.body, env)
    launch = model_launch(program, (1,), args)
    assert trace.end == pytest.approx(launch.blocks[0].cycles)
    assert launch.cycles == pytest.approx(trace.end + sum(dispatch_cycles(B1)))
    assert len(trace.records) == len(launch.blocks[0].records)
    assert launch.pipe_busy["V"] == pytest.approx(trace.pipe_busy["V"])
    with pytest.raises(ValueError, match="no value for M"):
        model_launch(program, (1,), {"x": x, "out": x})


@pypto.jit
def stuck(x):
    pl.store(x, [0], pl.load(x, [0], [16]))
    if pl.program_id(0) == 0:
        pl.barrier()


def test_a_barrier_some_block_skips_is_a_modelled_deadlock():
    x = np.zeros(16, np.float32)
    with pytest.raises(ValueError, match="deadlocks"):
        model_kernel(stuck, (2,), x)


def test_no_grid_means_one_block_per_core():
    x = np.zeros(48 * 1024, np.float32)
    program = parse_program(scale.compile(x, x.copy(), BLOCK=1024).asm["pto"])
    m = model_launch(program, None, {"x": x, "out": x})
    assert m.grid == (48, 1, 1) and len({b.core for b in m.blocks}) == 48
    assert all(b.start == pytest.approx(sum(dispatch_cycles(m.target))) for b in m.blocks)


@pypto.jit
def streaming_increment(x, out, T: pl.constexpr):
    pid = pl.program_id(0)
    for s in range(pid * T, x.shape[0], T * pl.num_programs(0)):
        pl.store(out, offsets=(s,), value=pl.load(x, offsets=(s,), shape=(T,)) + 1.0)


def test_all_cores_streaming_never_exceed_the_chips_hbm_bandwidth():
    """A core's load and store in flight together split its share of HBM (they once each
    got all of it, modelling 48 cores at 1.7x the chip's bandwidth)."""
    from pypto.backends.ascend.model.launch import model_kernel
    x = np.zeros(48 * 8192 * 16, np.float32)
    m = model_kernel(streaming_increment, None, x, np.empty_like(x), T=8192)
    moved = sum(r.bytes for b in m.blocks for r in b.records if r.name in ("tload", "tstore"))
    gbps = moved / (m.time_ms * 1e-3) / 1e9
    assert 0.5 * get_target("ascend910b1").hbm_gbps < gbps <= get_target("ascend910b1").hbm_gbps


def _cluster(vector_cores, slow_aiv):
    """A mixed program: the cube sets flag 0 and waits for flag 1; each AIV waits for flag
    0, then AIV ``slow_aiv`` (by its sub-block index) adds a long vector op, then sets 1."""
    from pypto.compiler.pto import If, Program
    x = tile("vec", F32, 64, 64)
    big = tile("vec", F32, 256, 256)
    sb, slow = Scalar("sb", I64), Scalar("slow", dt.bool_)
    sync = lambda kind, pipe, flag: Inst(f"sync.{kind}", [], [], {"pipe": pipe, "flag": flag})
    cube = [sync("set", "S", 0), sync("wait", "S", 1)]
    vector = [Inst("pto.get_subblock_idx", [], [sb]),
              Inst("arith.cmp", [sb, slow_aiv], [slow], {"pred": "eq"}),
              sync("wait", "S", 0), Inst("tadd", [x, x], [x]),
              If(slow, [Inst("tadd", [big, big], [big])], [], [], [], []),
              sync("set", "V", 1)]
    return Program("cluster", "mixed", [], [], cube, B1, {}, vector,
                   vector_cores=vector_cores)


def test_ffts_mode_2_the_cube_waits_for_both_aivs_and_signals_both():
    """A flag the cube sets reaches every AIV; the cube's wait ends when every AIV has set
    its flag (pto-isa npu/a2a3/TPush.hpp, FFTS mode 2)."""
    def cube_resumes(program):
        m = model_launch(program, (1,), {})
        aivs = [r for r in m.blocks[0].records if r.part == "vector" and r.name == "tadd"]
        return m.blocks[0].end, aivs
    sync = B1.costs.cross_core_sync_cycles
    one_end, one = cube_resumes(_cluster(1, slow_aiv=1))      # the slow one is not run
    two_end, two = cube_resumes(_cluster(2, slow_aiv=1))
    assert len(one) == 1 and len(two) == 3                    # both AIVs got the cube's flag
    slow_done = max(r.end for r in two)
    assert two_end >= slow_done + sync > one_end
    # sub-block 0 slow instead: the same wait, whichever AIV is late
    assert cube_resumes(_cluster(2, slow_aiv=0))[0] == pytest.approx(two_end)


def test_both_aivs_of_a_cluster_have_their_own_trace_process():
    """The chip numbers a cluster's AIVs 2n and 2n + 1; the Chrome trace (and the profile page,
    which uses the same numbering) put both sub-blocks on "AIV core n" before, so two cores'
    instructions overlapped on one track."""
    from types import SimpleNamespace
    from pypto.tools.profiler.trace import launch_chrome_trace
    m = model_launch(_cluster(2, slow_aiv=1), (1,), {})
    k = SimpleNamespace(name="cluster", grid=(1,), kind="mixed", target=m.target.name, model=m)
    events = launch_chrome_trace([k], lambda model, target: 1 / (B1.clock_ghz * 1e6))
    names = {e["pid"]: e["args"]["name"] for e in events["traceEvents"]
             if e["name"] == "process_name"}
    assert names == {0: "AIV core 0", 1: "AIV core 1"}     # (the cube only sets flags)
    tadds = sorted(e["pid"] for e in events["traceEvents"] if e["name"] == "tadd")
    assert tadds == [0, 1, 1]          # sub-block 1 is the slow one: two adds


def test_the_write_back_of_evicted_lines_is_shared_by_every_core():
    """Blocks are simulated one after another, so the dirty lines a full L2 evicts fell on
    the cores simulated last: with an L2 of 1 MiB under 48 cores streaming 24 MiB each way,
    all but the first core ran 17 % longer than it (row softmax 8192 x 4096 on the real L2:
    the last 8 cores twice as long). Spread over the launch, every core pays its share and
    they end together; the HBM still carries what the L2 evicted."""
    small_l2 = dataclasses.replace(B1, l2_mib=1)
    n = 48 * 16 * 8192
    x = np.zeros(n, np.float32)
    program = parse_program(vadd.compile(x, x, x.copy(), n, BLOCK=8192).asm["pto"], small_l2)
    launch = model_launch(program, (48,), {"x": x, "y": x, "out": x, "n": n}, small_l2)
    ends = [b.end for b in launch.blocks]
    assert max(ends) < 1.1 * min(ends), (min(ends), max(ends))
    assert launch.memory.written_back > 0.9 * x.nbytes      # the output, all but the L2


def test_a_launch_takes_at_least_its_bytes_over_the_hbms_bandwidth():
    """Vector add of 16 M floats just fits the L2: its stores went at the L2's rate and
    stayed dirty, uncharged, and the load and store of a core each took a full share, so the
    launch came out at 1745 GB/s, 109 % of the HBM (streaming benchmarks up to 117 %).
    Every byte the HBM must carry, the outputs left dirty included, now bounds the launch,
    and the summary says so."""
    n = 1 << 24
    x = np.zeros(n, np.float32)
    launch = model_kernel(vadd, (n // 8192,), x, x, x.copy(), n, BLOCK=8192)
    gbps = 3 * x.nbytes / (launch.time_ms * 1e-3) / 1e9
    assert 0.8 * B1.hbm_gbps < gbps <= B1.hbm_gbps
    assert launch.bandwidth_bound and "HBM's bandwidth" in launch.summary()
    assert launch.memory.dirty() == x.nbytes


def test_a_row_expanded_division_costs_a_division():
    """TROWEXPANDDIV's op is a vdiv (pto-isa TRowExpandBinOp): it was costed as a multiply,
    so x / row_sum looked as cheap as x * (1 / row_sum)."""
    c = B1.costs
    x, col = tile("vec", F32, 8, 512), tile("vec", F32, 8, 1)
    div = cost("trowexpanddiv", [x, col], [x])[0]
    mul = cost("trowexpandmul", [x, col], [x])[0]
    repeats = 8 * 512 * 4 // c.repeat_bytes
    per_repeat = c.vector["divide"].repeat_cycles - c.vector["binary"].repeat_cycles
    per_issue = c.vector["divide"].head_cycles - c.vector["binary"].head_cycles
    assert div - mul == pytest.approx(repeats * per_repeat + 8 * per_issue)


@pypto.jit
def halve_rows(x, out, BM: pl.constexpr, N: pl.constexpr):
    """Each core streams row blocks of x in (fp32) and out (fp16), one buffer: every load
    after the first starts with the previous block's store, half its bytes."""
    for i in pl.range(pl.program_id(0), x.shape[0] // BM, pl.num_programs(0), num_stages=1):
        t = pl.load(x, offsets=(i * BM, 0), shape=(BM, N))
        pl.store(out, offsets=(i * BM, 0), value=(t * 0.5).to(pl.float16))


def test_a_load_beside_a_short_store_shares_the_bandwidth_only_while_they_overlap():
    """A load that started while the core's store was in flight got half the core's share
    of the HBM for all of it: here a 32 KiB load of 1819 cycles beside a 227-cycle store
    took 3637. It now pays the cycles the other transfers run beside it (2046)."""
    x = np.zeros((48 * 16 * 4, 2048), np.float32)
    m = model_kernel(halve_rows, (48,), x, np.zeros(x.shape, np.float16), BM=4, N=2048)
    recs = m.blocks[0].records
    loads = [r for r in recs if r.name == "tload" and r.bytes]
    stores = [(r.start, r.end) for r in recs if r.name == "tstore"]
    first = loads[0].end - loads[0].start
    for ld in loads[1:]:
        beside = sum(max(0.0, min(e, ld.end) - max(s, ld.start)) for s, e in stores)
        assert ld.end - ld.start <= first + beside + 1, (ld.end - ld.start, first, beside)
    assert max(ld.end - ld.start for ld in loads) < 1.5 * first
