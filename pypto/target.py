"""Ascend chip descriptions as data (reference: shared/reference/ascend910b.md).

A target decides capacities, legality and modelled time (``costs``, read by
``backends/ascend/model/``); it never decides host behaviour.
"""
from __future__ import annotations

from dataclasses import dataclass, field

KiB = 1024
GiB = 1024 ** 3


@dataclass(frozen=True)
class VectorCost:
    """One family of vector instructions: ``repeat_cycles`` per repeat (``repeat_bytes`` of
    the widest operand) and ``head_cycles`` once per issue (at most ``max_repeats`` repeats)."""
    repeat_cycles: float
    head_cycles: float


@dataclass(frozen=True)
class CostModel:
    """The cycle model's numbers (shared/reference/ascend910b.md, "Cycle model parameters").

    Every figure the model uses is here, so a calibration is a change of data. Vector issue
    overheads and the reduction rate are calibrated so that the reference page's examples come
    out exactly: TEXP fp32 16x16 = 41 + 1024/256 + 256*0.031 = 53, TADD fp16 64x64 =
    34 + 8192/128 = 98, TROWSUM fp32 64x64 = 19 + 16384/512 = 51; the cube's
    TMATMUL fp16 128x64x128 = 6 + 8*4*8 fractals = 262. Figures the page marks "approx." or
    does not give (division as a transcendental, loop and dispatch cycles) are marked below.
    """
    # cube: cycles per fractal of the operand dtype (16 rows x 32 bytes of K x 16 columns:
    # 16x16x16 fp16/bf16, 16x8x16 fp32 at 2 cycles, 16x32x16 int8) plus a head per instruction
    cube_fractal_cycles: dict = field(default_factory=lambda: {
        "float16": 1.0, "bfloat16": 1.0, "float32": 2.0, "int8": 1.0, "uint8": 1.0})
    cube_head_cycles: float = 6.0
    acc_fractal_bytes: int = 1024          # 16x16 fp32: one cube cycle to fill (approx.)
    # Vector instructions, calibrated on the single instructions pto-isa's cost-model tests
    # measured on a 910B (backends/ascend/model/ptoisa_st_cycles.csv; figure vs model per case:
    # benchmarks/calibration.py). A family is a line in repeats: see model/costs.vector_repeats
    # for how a tile's rows become repeats (whole tile at once, or row by row as pto-isa's
    # A2/A3 code issues a tile whose valid shape is only known at run time).
    vector: dict = field(default_factory=lambda: {
        "unary": VectorCost(1.0, 4.0),           # TABS f32 64x64 68, f16 16x256 36
        "scalar": VectorCost(1.0, 14.0),         # TADDS/TMULS/TMINS: 40-87 for 23-64 repeats,
                                                 # f32 256x16 (one repeat a row) 266
        "binary": VectorCost(2.3, 14.0),         # TADD/TSUB/TMUL 64 repeats 132-170, 32: 92-96
        "divide": VectorCost(4.0, 60.0),         # TDIV f32 64x64 288; TDIVS f32 205, f16 328
                                                 # (several instructions: a long head)
        "transcendental": VectorCost(2.3, 18.0),  # TEXP f32 64x64 159, f16 95, f16 32x32 47,
                                                 # f32 32x16 30; TSQRT f32 160-198, f16 102
        "reciprocal": VectorCost(1.0, 26.0),     # TRSQRT f16 64x64 58 (one fast instruction)
        "convert": VectorCost(1.0, 29.0),        # TCVT f32<->f16 4x64 33
        "transpose": VectorCost(1.95, 2.0),      # TTRANS f32 128x128 501
    })
    # instructions pto-isa issues one by one with a pipe_barrier(PIPE_V) between them (a
    # column reduction adds row after row): each such step pays an issue and the vector
    # pipeline's drain. TCOLMAX f32 64x64 2589 = 63 steps of 14 + 26 (+ the first row's
    # copy); TCOLSUM's binary tree f32 64x64 1263 = 63 adds + 12 barriers
    vector_issue_cycles: float = 14.0
    vector_barrier_cycles: float = 26.0
    # whole-row reductions (vcadd/vcmax, one repeat a row): TROWSUM f32 64x64 492, f16 64x128
    # 495, TROWMAX f32 64x64 480 -> 7.5 cycles a row; rows wider than a repeat first fold
    # their repeats with binary adds
    row_reduce_cycles: float = 7.5
    # a group reduction (vcgmax/vcgadd: each 32-byte block to one element) a repeat, pto-isa's
    # A2/A3 cost model (costmodel/a2a3/cce_costmodel/cce_costmodel_vector_compute.hpp: 14 +
    # 1 per repeat, where its vcadd line, 7 a repeat, matches the chip's 7.5 above); no
    # measured figure
    group_reduce_cycles: float = 1.0
    # broadcast of one element a row (a scalar read and a vector dup): TROWEXPAND 64x64 933
    row_expand_cycles: float = 14.4
    # a select sets the mask register from each row's bits before its vsel: TSEL f16 4x128 67,
    # 1x128 19, f32 4x64 67
    select_row_cycles: float = 16.0
    # copy_ubuf_to_ubuf moves one 32-byte block a cycle: TCOLSUM f32 1x3072 (a copy) 390
    ub_copy_bytes_per_cycle: float = 32.0
    repeat_bytes: int = 256
    max_repeats: int = 255
    # the SFU's sort instructions and the mask gather after them (pto-isa's cost model,
    # include/pto/costmodel/a2a3/cce_costmodel/cce_costmodel_vector_compute.hpp): vbitsort
    # one cycle per 32-element block (measured: TSORT32 f32 8x32 8, f16 32x16 32; pto-isa's
    # default line, 6 + 2, is uncalibrated); vmrgsort4 20 + 78 per
    # repeat, calibrated on a 910B3 for fp32 blockLen=64 (128 pairs a repeat), which we
    # apply per 128 pairs merged whatever the form (pto-isa leaves the list forms unmodelled);
    # vreducev2 (TGATHER's mask form) 14 + 14 per repeat of 256 bytes
    sort32: tuple = (0.0, 1.0)            # (head, cycles per 32-block)
    mrgsort: tuple = (20.0, 78.0)         # (head, cycles per 128 pairs)
    mask_gather: tuple = (14.0, 14.0)     # (head, cycles per 256-byte repeat)
    # transfers not measured one by one (the reference page's figures): GiB/s per core on
    # each (source, destination) path; "gm" is global memory. ``dma`` below wins for a path
    # it holds
    # L0C -> GM (FIX): at least what pto-isa's flash attention moved on the board (S = 32k:
    # the busiest cluster runs 11 of the 256 blocks, 128 key tiles each, 192 KiB of S and PV
    # out of L0C a tile, in 3263 us less launch and dispatch: >= 47.4 B/cycle = 79.5 GiB/s);
    # the reference page's 70 (pto-isa's cost-model starting value) is below that
    transfer_gibps: dict = field(default_factory=lambda: {
        ("vec", "gm"): 188.5,
        ("mat", "gm"): 32.0, ("vec", "vec"): 1024.0, ("acc", "gm"): 79.5,
        ("acc", "mat"): 128.0, ("mat", "left"): 441.0, ("mat", "right"): 220.5,
        # L1 -> bias table (hand-written tmatmul.bias): not measured; MTE1 like L1 -> L0B
        ("mat", "bias"): 220.5})
    # DMA paths measured on the chip: a transfer takes head + path bytes / rate cycles (the
    # head is the DMA's start, paid again by every instruction; pto-isa's TLOAD loops one DMA
    # per outer dimension). Value: (head cycles, bytes per cycle).
    #   GM -> UB: TLOAD f32 128x128 776, f32 128x127 773, i16 128x127 519, u8 128x127 392,
    #   32 DMAs of 512 B 8576 (268 each): 264 + bytes / 128
    #   GM -> L1: TLOAD NC1HWC0 f16 1 KiB 28, f32 12.5 KiB 116: 20 + bytes / 134
    #   GM -> L1 converting ND rows to NZ fractals (a matmul operand): 88 bytes a cycle, the
    #   board GEMM's (pto-isa gemm_performance, 6144^3 on 24 cores: 216 MiB of A and B per
    #   core in 95.2 % of 1.506 ms at 1.8 GHz; the reference page's GM -> L1 135 GiB/s is
    #   80), with the plain GM -> L1 start
    dma: dict = field(default_factory=lambda: {("gm", "vec"): (264.0, 128.0),
                                               ("gm", "mat"): (20.0, 134.0),
                                               ("gm", "mat.nd2nz"): (20.0, 88.0)})
    # GM transfers as the DMA runs them: a window is a number of bursts (contiguous runs of
    # global memory), and each burst moves whole ``burst_block_bytes`` blocks (the DMA
    # intrinsics count a burst's length in 32-byte blocks: pto-isa's
    # costmodel/a2a3/cce_costmodel/cce_costmodel_memory.hpp, copy_gm_to_cbuf) plus
    # ``burst_overhead_bytes`` of path time for starting it: none, as measured (128 bursts of
    # 508 B, TLOAD f32 128x127, take 773 cycles against 776 for one 64 KiB run; 254-byte and
    # 127-byte rows cost their rounding to 256 and 128 bytes, 519 and 392).
    # ND -> NZ conversion into L1 moves its bursts (one per row of the window) at the
    # "mat.nd2nz" rate above.
    burst_block_bytes: int = 32
    burst_overhead_bytes: int = 0
    # scalar unit: one instruction, one cycle; a loop iteration's increment and compare-branch
    # (approx.); each tile instruction takes one issue slot on the scalar unit (approx.);
    # flags and barriers are waits, not work
    scalar_cycles: float = 1.0
    loop_iteration_cycles: float = 2.0
    dispatch_cycles: float = 1.0
    sync_cycles: float = 0.0
    # Launch, dispatch and cross-core sync, measured on a2a3 silicon or fitted to boards
    # (shared/reference/ascend910b.md, "Overheads measured on a2a3 silicon"). A launch is
    # charged ``launch_us`` once: per kernel when a graph runs in order, once for the whole
    # graph under MPMD. 5.9 us is pto-isa's fitted launch overhead, 10,905 cycles
    # (kernels/manual/common/flash_atten/scripts/fa_cost_model.py, FitConstants.
    # launch_overhead_cycles = 10904.841) at 1.85 GHz.
    launch_us: float = 5.9
    # Each block of an SPMD launch pays this on its core before it starts: the same script's
    # board correction per block (NPU_BLOCK_DISPATCH_CYCLES = 2000, fitted to 910B3/B4 runs),
    # ~1.1 us, within the 0.3-5.6 us hw-native-sys/pypto measures for a core's first task.
    block_dispatch_cycles: float = 2000.0
    # Each task of an MPMD graph run pays this on its core: the measured pickup between tasks
    # on a core, ~0.8 us (hw-native-sys/pypto docs/en/user/performance/
    # 01-task-granularity.md; steady head overhead 0.2-0.5 us). It replaces CANN PyPTO's
    # simulated 2.8 us task gap (shared/reference/cann-pypto.md section 12), 3.5x the chip's.
    task_dispatch_us: float = 0.8
    # A cross-core flag (sync.set -> sync.wait: the cube<->vector hand-offs of a mixed kernel,
    # FFTS) reaches the other core this many cycles after its pipe sets it: pto-isa's board
    # correction per hand-off (fa_cost_model.py, NPU_LOGICAL_TILE_SYNC_CYCLES = 1000, the sync
    # its simulator does not model). Barriers (syncall) are not charged it.
    cross_core_sync_cycles: float = 1000.0
    # The L2's bandwidth over the HBM's, shared by the active cores like it (the model's L2:
    # ``backends/ascend/model/memory.py``). Not published; CANN's matmul guide puts it above
    # 3x, pto-isa's GEMM moves ~3.4 TB/s into 24 cores at 6144^3 (2.1x the HBM, bound by the
    # cores' own DMA), and pto-isa's flash attention at S = 32k moves 640 KiB a key tile
    # through GM per cluster (K, V, P into L1; S and PV out of L0C; S in and P out of the
    # UBs), 21 GB in its 3263 us on the board: >= 6.4 TB/s, 4x the HBM. 4x: the least the
    # board allows, 6400 GB/s on b1-b3, 3200 on b4
    l2_over_hbm: float = 4.0

# Float -> narrower int conversions A2/A3's TCVT makes without saturation (pto-isa
# npu/a2a3/TCvt.hpp, kIsNarrowingCvt and its NonSatTorch paths): the value is truncated (or
# rounded as asked), saturated to int32, and its low bits kept, two's complement, as torch
# does. Every other float -> int conversion saturates at the destination's range. By dtype
# name: (source, destination).
WRAPPING_CONVERSIONS = frozenset({("float32", "int16"), ("float16", "int16"),
                                  ("float16", "int8"), ("float16", "uint8")})

# The UB is 192 KiB, but pto-isa keeps its top 8 KiB (TMP_UB_OFFSET = 184 KiB,
# include/pto/common/constants.hpp) as the scratch of TROWEXPAND*'s broadcast, TCVT and
# TEXTRACT on A2/A3: a tile placed there would be overwritten by them.
UB_USABLE = 184 * KiB


@dataclass(frozen=True)
class Target:
    name: str
    device_spec: str          # spelling in .pto ("pto.device-spec")
    cube_cores: int
    vector_cores: int
    clock_ghz: float
    hbm_gib: int
    l2_mib: int               # 192 MiB on b1-b3, 96 on b4 (shared/reference/ascend910b.md)
    hbm_gbps: float
    # bytes per on-chip buffer, keyed by PTO location
    buffers: dict = field(default_factory=lambda: {
        "vec": UB_USABLE, "mat": 512 * KiB, "left": 64 * KiB, "right": 64 * KiB,
        "acc": 128 * KiB, "bias": 1 * KiB})
    alignment: int = 32
    max_vec_rows: int = 4095
    max_matmul_dim: int = 4095
    fractal_bytes: int = 32   # cube operand fractal: 16 rows x 32 bytes
    fractal_rows: int = 16
    # TSORT32 / TMRGSORT (the SFU's VBS32 / VMS4): every A2/A3 vector core has them
    sort_instructions: bool = True
    costs: CostModel = field(default_factory=CostModel)   # the cycle model's parameters

    @property
    def l2_gbps(self) -> float:
        return self.hbm_gbps * self.costs.l2_over_hbm

    def cores_for(self, uses_cube: bool) -> int:
        return self.cube_cores if uses_cube else self.vector_cores


TARGETS = {t.name: t for t in (
    Target("ascend910b1", "Ascend910B1", 24, 48, 1.85, 64, 192, 1600.0),
    Target("ascend910b2", "Ascend910B2", 24, 48, 1.80, 64, 192, 1600.0),
    Target("ascend910b3", "Ascend910B3", 20, 40, 1.80, 64, 192, 1600.0),
    Target("ascend910b4", "Ascend910B4", 20, 40, 1.50, 32, 96, 800.0),
)}
ALIASES = {"ascend910b": "ascend910b1"}


def get_target(name: str) -> Target:
    key = ALIASES.get(name.lower(), name.lower())
    if key not in TARGETS:
        raise ValueError(f"unknown target {name!r}; known: {', '.join(sorted(TARGETS))} "
                         f"(and the alias 'ascend910b')")
    return TARGETS[key]
