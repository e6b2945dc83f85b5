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
    """One family of vector instructions: each issue (at most ``max_repeats`` repeats of
    ``repeat_bytes``) pays ``issue_cycles``; the data streams at ``bytes_per_cycle``; some
    functions (exp, log, sqrt...) add ``cycles_per_element``."""
    bytes_per_cycle: float
    issue_cycles: float
    cycles_per_element: float = 0.0


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
    # vector families (see model/costs.VECTOR_FAMILY for which opcode is which)
    vector: dict = field(default_factory=lambda: {
        "unary": VectorCost(256.0, 41.0),             # unary and tile-scalar: 256 B/cycle
        "binary": VectorCost(128.0, 34.0),            # tile-tile: half the rate
        "reduce": VectorCost(512.0, 19.0),            # calibrated on TROWSUM fp32 64x64 = 51
        "transcendental": VectorCost(256.0, 41.0, 0.031),   # exp/log/sqrt (div: approx.)
    })
    repeat_bytes: int = 256
    max_repeats: int = 255
    # the SFU's sort instructions and the mask gather after them (pto-isa's cost model,
    # include/pto/costmodel/a2a3/cce_costmodel/cce_costmodel_vector_compute.hpp): vbitsort
    # 6 + 2 per 32-element block (pto-isa's uncalibrated default line); vmrgsort4 20 + 78 per
    # repeat, calibrated on a 910B3 for fp32 blockLen=64 (128 pairs a repeat), which we
    # apply per 128 pairs merged whatever the form (pto-isa leaves the list forms unmodelled);
    # vreducev2 (TGATHER's mask form) 14 + 14 per repeat of 256 bytes
    sort32: tuple = (6.0, 2.0)            # (head, cycles per 32-block)
    mrgsort: tuple = (20.0, 78.0)         # (head, cycles per 128 pairs)
    mask_gather: tuple = (14.0, 14.0)     # (head, cycles per 256-byte repeat)
    # transfers: GiB/s per core on each (source, destination) path; "gm" is global memory
    transfer_gibps: dict = field(default_factory=lambda: {
        ("gm", "vec"): 100.9, ("gm", "mat"): 135.0, ("vec", "gm"): 188.5,
        ("mat", "gm"): 32.0, ("vec", "vec"): 1024.0, ("acc", "gm"): 70.0,
        ("acc", "mat"): 128.0, ("mat", "left"): 441.0, ("mat", "right"): 220.5,
        # L1 -> bias table (hand-written tmatmul.bias): not measured; MTE1 like L1 -> L0B
        ("mat", "bias"): 220.5})
    # paths whose bandwidth saturates with size: bw(B) = peak * B / (K + B), i.e. a transfer
    # takes (K + B) / peak. Value: (peak GiB/s, K bytes), K = 30.6 KB read as KiB
    saturating: dict = field(default_factory=lambda: {("gm", "vec"): (247.0, 30.6 * KiB)})
    # GM transfers as the DMA runs them: a window is a number of bursts (contiguous runs of
    # global memory), and each burst moves whole ``burst_block_bytes`` blocks (the DMA
    # intrinsics count a burst's length in 32-byte blocks: pto-isa's
    # costmodel/a2a3/cce_costmodel/cce_costmodel_memory.hpp, copy_gm_to_cbuf) plus
    # ``burst_overhead_bytes`` of path time for starting it. The overhead is CHOSEN, not
    # published (neither the reference page nor pto-isa's cost model charges bursts): one
    # block per burst, so a 32-byte run moves at half the path's rate and a 1 KiB run at 97 %.
    # ND -> NZ conversion into L1 costs nothing beyond its bursts (one per row of the window),
    # as pto-isa's cost model charges copy_gm_to_cbuf_multi_nd2nz at the plain GM -> L1 rate.
    burst_block_bytes: int = 32
    burst_overhead_bytes: int = 32
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
    # L2 bandwidth in GB/s, shared by the active cores like the HBM's (the model's L2:
    # ``backends/ascend/model/memory.py``). Not published; CANN's matmul guide puts it above
    # 3x the HBM's, and pto-isa's GEMM moves ~3.4 TB/s into 24 cores at 6144^3 (2.1x the HBM),
    # so 3x the HBM: 4800 GB/s on b1-b3, 2400 on b4 (approx.).
    l2_gbps: float = 0.0
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

    def cores_for(self, uses_cube: bool) -> int:
        return self.cube_cores if uses_cube else self.vector_cores


TARGETS = {t.name: t for t in (
    Target("ascend910b1", "Ascend910B1", 24, 48, 1.85, 64, 192, 1600.0, 4800.0),
    Target("ascend910b2", "Ascend910B2", 24, 48, 1.80, 64, 192, 1600.0, 4800.0),
    Target("ascend910b3", "Ascend910B3", 20, 40, 1.80, 64, 192, 1600.0, 4800.0),
    Target("ascend910b4", "Ascend910B4", 20, 40, 1.50, 32, 96, 800.0, 2400.0),
)}
ALIASES = {"ascend910b": "ascend910b1"}


def get_target(name: str) -> Target:
    key = ALIASES.get(name.lower(), name.lower())
    if key not in TARGETS:
        raise ValueError(f"unknown target {name!r}; known: {', '.join(sorted(TARGETS))} "
                         f"(and the alias 'ascend910b')")
    return TARGETS[key]
