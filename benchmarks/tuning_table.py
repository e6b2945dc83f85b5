"""The seed's tuning table, reproduced with the cycle model: modelled NPU time before and after
each tuning, on ascend910b1.

    python benchmarks/tuning_table.py [--reps N] [--quick]

The seed's table names four tunings and what each bought on the chip:

    tuning          before          after                          seed's figure
    tile size       256             tuned                          fewer scheduling overheads
    multi-core      one core        all cores, MPMD                core utilization 12.5 % -> 87 %
    memory layout   NCHW            NC1HWC0                        bandwidth use +40 %
    sync            sync per tile   asynchronous within a block    latency -35 %

Each row here is a pair of real kernels, run on the host and checked against numpy, then
modelled by the cycle model (pypto/backends/ascend/model/: the kernel's PTO program on
the target's pipes, the grid over its cores, HBM shared between the active ones). The times in
the table are that model's NPU time for ascend910b1 (48 vector cores at 1.85 GHz): modelled, not
measured -- there is no NPU here. The host times of the same launches are printed after the
table, labelled as what they are (host threads simulating the cores).

* tile size: z = x + y over a large fp32 vector, one block per tile (grid = n / TILE): TILE=256
  against the TILE pypto.autotune chooses (objective "npu", the cycle model) from a sweep.
* multi-core: the same add as a grid-stride loop at the tuned TILE, launched with one block
  (one core) and with one block per core (no grid: 48 blocks).
* memory layout: a channel reduction y[n, h, w] = sum_c x[n, c, h, w] over fp16 activations,
  one block per (image, tile of P pixels). Over NCHW the channels of a pixel tile lie in C
  separate planes: one transfer of P x 2 bytes per channel. Over NC1HWC0 (pypto.layout.nc1hwc0,
  C0 = 16 fp16 = 32 bytes; the kernel loads in logical (n, c, h, w) coordinates) they are C/C0
  contiguous runs of P x 32 bytes.
* memory layout (cube): a tiled fp16 matmul with ND operands against the same kernel given
  pypto.layout.nz tensors (the cube's fractal layout): the same transfers, one GM run per tile
  row (converted to NZ on the way into L1) against one per column of 16 x 32-byte fractals.
* sync: a row softmax in advanced mode (@pypto.jit(auto_sync=False)) that orders its pipes
  with flags inside a tile and pl.pipe_barrier("ALL") after every tile, against the same
  softmax with the compiler's automatic flags and pl.range(..., num_stages=2).

Our figures need not equal the seed's: the note printed under the table says, per row, what
the model charges and therefore why ours differ.
"""
from __future__ import annotations

import os
import sys
import textwrap
from dataclasses import dataclass, field, replace

import numpy as np
from _harness import fmt_time, median_time, parse_args

import pypto
import pypto.language as pl
from pypto.backends.ascend.model.launch import model_kernel, model_launch
from pypto.target import GiB, get_target
from pypto.tools.memory import budget

TARGET = "ascend910b1"
T = get_target(TARGET)

# ----------------------------------------------------------------------------------------------
# Kernels. Every one names its target, so PTO_TARGET does not change what is modelled.
# ----------------------------------------------------------------------------------------------


@pypto.jit(target=TARGET, launch_form="grid")
def add_tiles(x, y, out, TILE: pl.constexpr):
    """One block per tile: grid = cdiv(n, TILE), each block dispatched on its own (the seed's
    comparison; PyPTO's default form runs a grid larger than the cores persistent)."""
    pid = pl.program_id(0)
    a = pl.load(x, offsets=(pid * TILE,), shape=(TILE,))
    b = pl.load(y, offsets=(pid * TILE,), shape=(TILE,))
    pl.store(out, offsets=(pid * TILE,), value=a + b)


add_tiles_persistent = pypto.jit(target=TARGET)(add_tiles.fn)    # launch_form="auto"


@pypto.jit(target=TARGET)
def add_stride(x, y, out, TILE: pl.constexpr):
    """A grid-stride loop: any grid covers the whole vector."""
    pid = pl.program_id(0)
    for s in range(pid * TILE, x.shape[0], TILE * pl.num_programs(0)):
        a = pl.load(x, offsets=(s,), shape=(TILE,))
        b = pl.load(y, offsets=(s,), shape=(TILE,))
        pl.store(out, offsets=(s,), value=a + b)


@pypto.jit(target=TARGET)
def chsum_nchw(x, y, C: pl.constexpr, P: pl.constexpr):
    """x: NCHW viewed as (N*C, H*W); y: (N, H*W). One (1, P) transfer per channel plane."""
    p0 = pl.program_id(0) * P
    n = pl.program_id(1)
    acc = pl.zeros((1, P), dtype=pl.float32)
    for c in range(C):
        acc = acc + pl.load(x, offsets=(n * C + c, p0), shape=(1, P)).to(pl.float32)
    pl.store(y, offsets=(n, p0), value=acc)


@pypto.jit(target=TARGET)
def chsum_nchw_one_load(x, y, C: pl.constexpr, P: pl.constexpr):
    """The NCHW kernel with all C channel rows in one strided (C, P) transfer (for the note)."""
    p0 = pl.program_id(0) * P
    n = pl.program_id(1)
    t = pl.load(x, offsets=(n * C, p0), shape=(C, P)).to(pl.float32)
    pl.store(y, offsets=(n, p0), value=pl.sum(t, axis=0, keepdims=True))


@pypto.jit(target=TARGET)
def chsum_nc1hwc0(x, y, P: pl.constexpr):
    """x: an NC1HWC0 tensor (pypto.layout.nc1hwc0), loaded in logical (n, c, h, w)
    coordinates; y: (N*H*W, 1). One contiguous (P pixels, C0 channels) transfer (P x 32
    bytes) per group of C0 channels."""
    N, C, H, W = x.shape
    p0 = pl.program_id(0) * P
    n = pl.program_id(1)
    acc = pl.zeros((P, 1), dtype=pl.float32)
    for c in range(0, C, 16):               # C0 = 16 fp16 channels: 32 bytes a pixel
        t = pl.load(x, offsets=(n, c, 0, p0), shape=(P, 16)).to(pl.float32)
        acc = acc + pl.sum(t, axis=1, keepdims=True)
    pl.store(y, offsets=(n * H * W + p0, 0), value=acc)


@pypto.jit(target=TARGET)
def matmul_tiles(a, b, c, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    """c = a @ b, one (BM, BN) block per program; a and b are ND arrays or NZ tensors
    (pypto.layout.nz), loaded in the same logical coordinates either way."""
    M, K = a.shape
    i = pl.program_id(0)
    j = pl.program_id(1)
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in range(0, K, BK):
        x = pl.load(a, offsets=(i * BM, k), shape=(BM, BK))
        w = pl.load(b, offsets=(k, j * BN), shape=(BK, BN))
        acc = pl.matmul(x, w, acc)
    pl.store(c, offsets=(i * BM, j * BN), value=acc)


@pypto.jit(target=TARGET, auto_sync=False)
def softmax_sync_per_tile(x, out, BM: pl.constexpr, BN: pl.constexpr):
    """Advanced mode: the kernel orders its own pipes. Inside a tile the load -> compute ->
    store chain needs a flag per hand-off; after the tile, a barrier on every pipe, so tile
    i + 1 starts only when tile i is stored."""
    pid = pl.program_id(0)
    for r in range(pid * BM, x.shape[0], BM * pl.num_programs(0)):
        t = pl.load(x, offsets=(r, 0), shape=(BM, BN), padding=float("-inf"))
        pl.set_flag("MTE2", "V", 0)
        pl.wait_flag("MTE2", "V", 0)
        e = pl.exp(t - pl.max(t, axis=1, keepdims=True))
        y = e / pl.sum(e, axis=1, keepdims=True)
        pl.set_flag("V", "MTE3", 0)
        pl.wait_flag("V", "MTE3", 0)
        pl.store(out, offsets=(r, 0), value=y)
        pl.pipe_barrier("ALL")


@pypto.jit(target=TARGET)
def softmax_async(x, out, BM: pl.constexpr, BN: pl.constexpr, STAGES: pl.constexpr):
    """The compiler's flags (only the real dependences) and, with STAGES=2, double buffering."""
    pid = pl.program_id(0)
    for r in pl.range(pid * BM, x.shape[0], BM * pl.num_programs(0), num_stages=STAGES):
        t = pl.load(x, offsets=(r, 0), shape=(BM, BN), padding=float("-inf"))
        e = pl.exp(t - pl.max(t, axis=1, keepdims=True))
        pl.store(out, offsets=(r, 0), value=e / pl.sum(e, axis=1, keepdims=True))


# ----------------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------------

def us(model) -> float:
    return model.time_ms * 1e3


def gm_bytes(model) -> int:
    """Bytes the modelled launch moved between global memory and the cores."""
    return sum(r.bytes for b in model.blocks for r in b.records if r.name in ("tload", "tstore"))


def gm_gbps(model) -> float:
    return gm_bytes(model) / (model.time_ms * 1e-3) / 1e9


def softmax_ref(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@dataclass
class Row:
    tuning: str
    before: str
    after: str
    m_before: object            # LaunchModel
    m_after: object
    ours: str                   # our result in the seed's terms
    seed: str
    host: tuple = ()            # (before_fn, after_fn): the same launches on the host
    note: list = field(default_factory=list)

    @property
    def gain(self) -> float:
        return self.m_before.cycles / self.m_after.cycles


# ----------------------------------------------------------------------------------------------
# The rows
# ----------------------------------------------------------------------------------------------

def sizes(quick: bool) -> dict:
    if quick:
        return {"n": 48 * 8192, "nchw": (4, 32, 16, 16), "p": 128,
                "softmax": (48 * 16 * 2, 256), "bm": 16, "matmul": (256, 256, 256),
                "mm_tiles": (64, 64, 32)}
    # n = 48 x 32768: every TILE of the sweep gives a whole number of tiles per core
    return {"n": 48 * 32768,
            "nchw": (12, 64, 32, 32), "p": 256, "softmax": (48 * 16 * 8, 256), "bm": 16,
            "matmul": (1024, 1024, 1024), "mm_tiles": (128, 128, 32)}


def tile_sweep(n, x, y, out) -> list:
    """TILE from 256, doubling until a size overflows the UB (that one included, so the sweep
    shows it skipped): the tuner then sees every size that fits and cannot pick the largest
    tried merely because the list stopped there."""
    tiles = [256]
    while tiles[-1] < n and budget(add_tiles, x, y, out, TILE=tiles[-1]).fits:
        tiles.append(tiles[-1] * 2)
    return tiles


def tile_size_row(s, rng) -> tuple[Row, int]:
    """The seed's "random 256 -> auto-tuned" row, tuned by pypto.autotune (objective "npu":
    the cycle model on this script's target) over the TILE sweep."""
    n = s["n"]
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    out = np.full_like(x, np.nan)
    tiles = tile_sweep(n, x, y, out)
    tuned = pypto.autotune([pypto.Config({"TILE": t}) for t in tiles], key=["x"],
                           cache_results=False, progress=False)(add_tiles)
    tuned[lambda META: (pl.cdiv(n, META["TILE"]),)](x, y, out)
    np.testing.assert_array_equal(out, x + y, err_msg="add_tiles, tuned TILE")
    best = tuned.best_config.kwargs["TILE"]
    trials = dict(zip(tiles, tuned.report.trials))
    times = {t: trial.time_ms for t, trial in trials.items() if trial.skipped is None}
    before = model_kernel(add_tiles, (pl.cdiv(n, 256),), x, y, out, TILE=256)
    after = model_kernel(add_tiles, (pl.cdiv(n, best),), x, y, out, TILE=best)
    persistent = model_kernel(add_tiles_persistent, (pl.cdiv(n, 256),), x, y, out, TILE=256)
    c = T.costs
    head, rate = c.dma[("gm", "vec")]
    half = head * rate              # the DMA's start, in bytes moved at its rate
    fixed = half / (half + 256 * 4)
    row = Row("tile size", f"TILE=256, {n // 256} blocks",
              f"TILE={best} (pypto.autotune), {n // best} blocks", before, after,
              f"{n // 256} -> {n // best} blocks", "fewer scheduling overheads",
              host=(lambda: add_tiles[(n // 256,)](x, y, out, TILE=256),
                    lambda: add_tiles[(n // best,)](x, y, out, TILE=best)))
    row.note = [
        f"pypto.autotune over TILE in {tiles} chose TILE={best}{_largest(best, trials)} "
        f"(tuned in {tuned.report.seconds:.2f} s, {tuned.report.compile_seconds:.2f} s of it "
        "compiling); its sweep (modelled NPU time): " +
        ", ".join(f"{t}: {ms * 1e3:.2f} us" for t, ms in times.items()),
        (f"Every block pays a dispatch of {c.block_dispatch_cycles:.0f} cycles on its core and "
         f"the launch {c.launch_us} us once (targets.CostModel: pto-isa's board-fitted block "
         f"dispatch and launch), so {n // 256} blocks on {T.vector_cores} cores pay "
         f"{-(-n // 256 // T.vector_cores)} dispatches each: most of the small tile's time. "
         "Within a block a small tile also pays per instruction: each GM->UB "
         f"load costs {head:.0f} cycles + bytes / {rate:.0f} B a cycle (measured on the "
         f"chip), so a 1 KiB load is {fixed:.0%} fixed cost, and each vector "
         f"instruction pays an issue overhead ({c.vector['binary'].head_cycles:.0f} cycles "
         f"for a tile-tile add). {_knee(best, times, half)}"),
        (f"PyPTO's default launch form (launch_form='auto') runs the TILE=256 grid persistent: "
         f"{T.vector_cores} blocks, each running its {-(-n // 256 // T.vector_cores)} tiles "
         f"back to back (double-buffered where the UB allows): {us(persistent):.2f} us, so "
         "only the per-instruction "
         "costs of the small tile remain."),
    ]
    return row, best


def _largest(best, trials) -> str:
    """Says so when the winner is the largest size that fits, and why the next does not."""
    bigger = [t for t in trials if t > best]
    if not bigger:
        return ", the largest size tried"
    nxt = trials[bigger[0]]
    if nxt.skipped is None:
        return ""
    return (f", the largest that fits: TILE={bigger[0]} is skipped "
            f"({nxt.skipped.split(': ', 1)[-1]})")


def _knee(best, times, half) -> str:
    """Where bigger tiles stop helping: the smallest tile within 10 % of the best, or, when no
    smaller one is, that each doubling still helped up to the best (never the best named as
    within 10 % of itself)."""
    close = [t for t in times if t < best and times[t] <= 1.1 * times[best]]
    if close:
        return ("Once the 48 cores' share of HBM, not the fixed cost, bounds the loads, bigger "
                f"tiles stop helping: TILE={min(close)} is within 10 % of TILE={best}.")
    smaller = [t for t in times if t < best]
    if not smaller:
        return f"TILE={best} is the smallest size tried."
    prev = max(smaller)
    return (f"No smaller tile comes within 10 % of TILE={best} (TILE={prev} takes "
            f"{times[prev] / times[best] - 1:.0%} longer): a TILE={best} load is still "
            f"{half / (half + best * 4):.0%} fixed cost where the UB stops the tile from "
            "growing.")


def multicore_row(s, rng, tile) -> Row:
    n = s["n"]
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    out = np.empty_like(x)
    ref = x + y
    for grid in ((1,), None):
        out.fill(np.nan)
        if grid is None:
            add_stride(x, y, out, TILE=tile)          # no grid: one block per core
        else:
            add_stride[grid](x, y, out, TILE=tile)
        np.testing.assert_array_equal(out, ref, err_msg=f"add_stride grid={grid}")
    before = model_kernel(add_stride, (1,), x, y, out, TILE=tile)
    after = model_kernel(add_stride, None, x, y, out, TILE=tile)
    row = Row("multi-core", "one core (grid 1)",
              f"all {after.cores} cores, one block per core", before, after,
              f"core utilization {before.core_utilization:.1%} -> "
              f"{after.core_utilization:.1%}", "core utilization 12.5 % -> 87 %",
              host=(lambda: add_stride[(1,)](x, y, out, TILE=tile),
                    lambda: add_stride(x, y, out, TILE=tile)))
    path = T.costs.dma[("gm", "vec")][1] * T.clock_ghz
    row.note = [
        (f"One core of {after.cores} is {1 / after.cores:.1%} (the seed's 12.5 % is one core of "
         "8). Utilization is busy core-cycles over cores x makespan, and the makespan holds "
         f"the launch ({T.costs.launch_us} us) and each block's dispatch "
         f"({T.costs.block_dispatch_cycles:.0f} cycles), idle time on every core; one block per core "
         "pays them once. The speedup is "
         f"{row.gain:.1f}x, not {after.cores}x: one core alone streams at its own path "
         f"bandwidth (GM->UB at most {path:.0f} GB/s, UB->GM "
         f"{T.costs.transfer_gibps[('vec', 'gm')] * GiB / 1e9:.0f} GB/s), while {after.cores} "
         f"share the {T.hbm_gbps:.0f} GB/s HBM; modelled GM traffic "
         f"{gm_gbps(before):.0f} GB/s -> {gm_gbps(after):.0f} GB/s."),
    ]
    return row


def layout_row(s, rng) -> Row:
    N, C, H, W = s["nchw"]
    P, C0, HW = s["p"], 16, s["nchw"][2] * s["nchw"][3]
    x = rng.standard_normal((N, C, H, W), dtype=np.float32).astype(np.float16)
    ref = x.astype(np.float64).sum(axis=1).reshape(N, HW)
    grid = (HW // P, N)
    x2 = x.reshape(N * C, HW)                         # NCHW as the kernel sees it
    y = np.empty((N, HW), np.float32)
    x5 = pypto.layout.nc1hwc0(x)                      # NC1HWC0, loaded in (n, c, h, w)
    C1 = x5.data.shape[1]
    y5 = np.empty((N * HW, 1), np.float32)
    tol = {"rtol": 1e-5, "atol": 1e-4}
    chsum_nchw[grid](x2, y, C=C, P=P)
    np.testing.assert_allclose(y, ref, **tol, err_msg="chsum over NCHW")
    chsum_nc1hwc0[grid](x5, y5, P=P)
    np.testing.assert_allclose(y5.reshape(N, HW), ref, **tol, err_msg="chsum over NC1HWC0")
    chsum_nchw_one_load[grid](x2, y, C=C, P=P)
    np.testing.assert_allclose(y, ref, **tol, err_msg="chsum over NCHW, one load")
    before = model_kernel(chsum_nchw, grid, x2, y, C=C, P=P)
    after = model_kernel(chsum_nc1hwc0, grid, x5, y5, P=P)
    one = model_kernel(chsum_nchw_one_load, grid, x2, y, C=C, P=P)
    useful = x.nbytes + y.nbytes                      # the same data either way (C % C0 == 0)
    bw_b, bw_a = useful / (before.time_ms * 1e-3) / 1e9, useful / (after.time_ms * 1e-3) / 1e9
    row = Row("memory layout", f"NCHW, {C} x {P * 2} B transfers",
              f"NC1HWC0, {C1} x {P * C0 * 2} B transfers", before, after,
              f"bandwidth use {bw_b:.0f} -> {bw_a:.0f} GB/s ({bw_a / bw_b - 1:+.0%})",
              "bandwidth use +40 %",
              host=(lambda: chsum_nchw[grid](x2, y, C=C, P=P),
                    lambda: chsum_nc1hwc0[grid](x5, y5, P=P)))
    c = T.costs
    head, rate = c.dma[("gm", "vec")]
    half = head * rate
    row.note = [
        (f"Channel sum of fp16 {N}x{C}x{H}x{W}, one block per (image, {P} pixels); the "
         "NC1HWC0 kernel takes a pypto.layout.nc1hwc0 tensor and loads (pixels, C0 channels) "
         "windows in logical (n, c, h, w) coordinates. The model charges a GM transfer its "
         f"bytes plus the DMA's start ({head:.0f} cycles, {half / 1024:.1f} "
         "KiB-equivalent per tload, measured), and per burst (contiguous run of GM) whole "
         f"{c.burst_block_bytes}-byte blocks plus {c.burst_overhead_bytes} bytes of start-up "
         "(none measured: 128 rows of 508 B load as fast as one run). The NCHW kernel pays the fixed cost "
         f"{C} times per tile ({C} runs of {P * 2} B), the NC1HWC0 one {C1} times (one run of "
         f"{P * C0 * 2} B each): the gain is fewer transfers far more than longer bursts. The "
         f"same NCHW kernel written with ONE strided (C, P) tload ({C} bursts of {P * 2} B) "
         f"is modelled at {us(one):.2f} us, "
         f"{'faster than' if one.cycles < after.cycles else 'as fast as or slower than'} "
         f"NC1HWC0 ({us(after):.2f} us): at {P * 2}-byte bursts the burst cost is small, "
         "and the NC1HWC0 kernel issues more tloads. The layout pays where NCHW's runs are "
         "short (a few pixels of a row, as convolution windows read) -- see the cube row."),
    ]
    return row


def gain_with_burst_overhead(kernel, grid, before_args, after_args, overhead: int,
                             **meta) -> float:
    """The row's gain if a burst's start-up cost ``overhead`` bytes (measured as none: this
    says what such a cost would change): the same programs and arguments on a target that
    differs only there."""
    from pypto.runtime.hooks import pto_program
    target = replace(T, costs=replace(T.costs, burst_overhead_bytes=overhead))
    cycles = []
    for args in (before_args, after_args):
        program = pto_program(kernel.compile(*args, **meta))
        names = [p.name for p in program.params]
        cycles.append(model_launch(program, grid, dict(zip(names, args)), target).cycles)
    return cycles[0] / cycles[1]


def nz_row(s, rng) -> Row:
    """ND -> NZ for the cube's operands: the same tiled matmul over ND arrays and over
    pypto.layout.nz tensors; the same transfers, only their burst shape differs."""
    M, K, N = s["matmul"]
    BM, BN, BK = s["mm_tiles"]
    a = rng.standard_normal((M, K), dtype=np.float32).astype(np.float16)
    b = rng.standard_normal((K, N), dtype=np.float32).astype(np.float16)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    out = np.empty((M, N), np.float32)
    grid = (M // BM, N // BN)
    an, bn = pypto.layout.nz(a), pypto.layout.nz(b)
    tol = {"rtol": 1e-3, "atol": 1e-2}
    for lhs, rhs, what in ((a, b, "ND"), (an, bn, "NZ")):
        out.fill(np.nan)
        matmul_tiles[grid](lhs, rhs, out, BM=BM, BN=BN, BK=BK)
        np.testing.assert_allclose(out, ref, **tol, err_msg=f"matmul over {what}")
    before = model_kernel(matmul_tiles, grid, a, b, out, BM=BM, BN=BN, BK=BK)
    after = model_kernel(matmul_tiles, grid, an, bn, out, BM=BM, BN=BN, BK=BK)
    row = Row("memory layout (cube)", f"ND operands, {BM} x {BK * 2} B runs",
              f"NZ operands, {BK // 16} x {BM * 32} B runs", before, after,
              f"bandwidth use {gm_gbps(before):.0f} -> {gm_gbps(after):.0f} GB/s "
              f"({gm_gbps(after) / gm_gbps(before) - 1:+.0%})",
              "(not in the seed)",
              host=(lambda: matmul_tiles[grid](a, b, out, BM=BM, BN=BN, BK=BK),
                    lambda: matmul_tiles[grid](an, bn, out, BM=BM, BN=BN, BK=BK)))
    c = T.costs
    meta = {"BM": BM, "BN": BN, "BK": BK}
    sensitivity = ", ".join(
        f"{o} B: {gain_with_burst_overhead(matmul_tiles, grid, (a, b, out), (an, bn, out), o, **meta):.2f}x"
        for o in (0, 16, 32, 64))
    row.note = [
        (f"fp16 {M}x{K} @ {K}x{N}, ({BM}, {BN}) blocks, K step {BK}. An ND operand tile is "
         f"read as one run per row ({BM} runs of {BK * 2} B for a, {BK} of {BN * 2} B for b) "
         "and converted to NZ on the way into L1; an NZ tensor's tile is whole 16 x 32-byte "
         f"fractals, one run per column of fractals ({BK // 16} runs of {BM * 32} B for a, "
         f"{BN // 16} of {BK * 32} B for b). Same transfers, same bytes: what differs is the "
         "DMA's work -- ND rows are converted to NZ fractals on the way into L1, at "
         f"{c.dma[('gm', 'mat.nd2nz')][1]:.0f} B a cycle (the board GEMM's rate), an NZ tile "
         f"is copied as it is, at {c.dma[('gm', 'mat')][1]:.0f} (measured). Both kernels are "
         f"bound by {before.bound_pipe()} -> {after.bound_pipe()}. A GM run costs nothing by "
         f"itself on GM->UB loads (measured); were it to cost something on GM->L1 ones, the "
         f"gain with a start-up of {sensitivity} (0 B leaves the conversion and the "
         "rounding of runs to 32-byte blocks, which 64-byte rows do not pay)."),
    ]
    return row


def sync_row(s, rng) -> Row:
    M, N = s["softmax"]
    BM = s["bm"]
    x = rng.standard_normal((M, N), dtype=np.float32)
    out = np.empty_like(x)
    ref = softmax_ref(x.astype(np.float64))
    tol = {"rtol": 1e-5, "atol": 1e-12}
    softmax_sync_per_tile(x, out, BM=BM, BN=N)        # no grid: one block per core
    np.testing.assert_allclose(out, ref, **tol, err_msg="softmax, sync per tile")
    for stages in (1, 2):
        out.fill(np.nan)
        softmax_async(x, out, BM=BM, BN=N, STAGES=stages)
        np.testing.assert_allclose(out, ref, **tol, err_msg=f"softmax, STAGES={stages}")
    before = model_kernel(softmax_sync_per_tile, None, x, out, BM=BM, BN=N)
    single = model_kernel(softmax_async, None, x, out, BM=BM, BN=N, STAGES=1)
    after = model_kernel(softmax_async, None, x, out, BM=BM, BN=N, STAGES=2)
    row = Row("sync", "sync per tile (barrier ALL)",
              "automatic flags, num_stages=2", before, after,
              f"latency {after.cycles / before.cycles - 1:+.0%}", "latency -35 %",
              host=(lambda: softmax_sync_per_tile(x, out, BM=BM, BN=N),
                    lambda: softmax_async(x, out, BM=BM, BN=N, STAGES=2)))
    recs = before.blocks[0].records
    span = {k: sum(r.end - r.start for r in recs if r.pipe == k) / (M // BM // before.cores)
            for k in ("MTE2", "V", "MTE3")}
    row.note = [
        (f"Row softmax fp32 {M}x{N}, BM={BM}, one block per core. Per tile the model charges "
         f"load {span['MTE2']:.0f}, compute {span['V']:.0f}, store {span['MTE3']:.0f} cycles "
         "(flags and barriers cost nothing themselves). A barrier on every pipe after each "
         "tile serialises them: about load + compute + store per tile. The automatic flags "
         f"alone (num_stages=1: {us(single):.2f} us) let tile i's store overlap tile i+1's "
         f"load; double buffering ({us(after):.2f} us) also overlaps tile i+1's load with tile "
         "i's compute, about max(load, compute + store) per tile. How much that saves depends "
         "only on this balance, so ours differs from the seed's -35 % by the kernel's mix, not "
         "by any sync cost."),
    ]
    return row


# ----------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------

def text_table(headers, rows, right=()) -> str:
    """A plain table: columns left-aligned except those whose index is in ``right``."""
    cells = [headers] + rows
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(r, widths))).rstrip()

    return "\n".join([line(headers), "  ".join("-" * w for w in widths)]
                     + [line(r) for r in rows])


def hbm_check(rows) -> list[str]:
    """Say so when a modelled launch moves more than the HBM can: the model gives a core's
    MTE2 and MTE3 each its whole HBM share, even while both are busy."""
    over = [(r.tuning, m) for r in rows for m in (r.m_before, r.m_after)
            if gm_gbps(m) > T.hbm_gbps]
    if not over:
        return []
    worst = max(gm_gbps(m) for _, m in over)
    text = (f"some launches are modelled above the {T.hbm_gbps:.0f} GB/s HBM (up to "
            f"{worst:.0f} GB/s, in: {', '.join(sorted({t for t, _ in over}))}): the model "
            "gives each core's concurrent loads (MTE2) and stores (MTE3) the core's whole "
            "share of HBM, so memory-bound all-core times are optimistic.")
    return [text]


def main(argv=None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv)
    rng = np.random.default_rng(0)
    s = sizes(args.quick)
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}; target {T.name}: "
          f"{T.vector_cores} vector cores at {T.clock_ghz} GHz, HBM {T.hbm_gbps:.0f} GB/s"
          f"{' (--quick: small sizes, the figures mean little)' if args.quick else ''}")

    row1, best = tile_size_row(s, rng)
    rows = [row1, multicore_row(s, rng, best), layout_row(s, rng), nz_row(s, rng),
            sync_row(s, rng)]

    print(f"\nThe seed's tuning table on {T.name}: modelled NPU time (cycle model of each "
          "kernel's PTO program; not a measurement), every kernel's result checked against "
          "numpy")
    headers = ["tuning", "before", "after", "NPU before", "NPU after", "gain", "ours",
               "seed's figure"]
    table = [[r.tuning, r.before, r.after, f"{us(r.m_before):.2f} us",
              f"{us(r.m_after):.2f} us", f"{r.gain:.2f}x", r.ours, r.seed] for r in rows]
    print(text_table(headers, table, right={3, 4, 5}))
    print("(gain = NPU before / NPU after; bound pipe before -> after: "
          + "; ".join(f"{r.tuning} {r.m_before.bound_pipe()} -> {r.m_after.bound_pipe()}"
                      for r in rows) + ")")

    print("\nWhy ours differ from the seed's figures (what the model charges):")
    notes = [(r.tuning + ":", r.note) for r in rows] + [("caution:", hbm_check(rows))]
    for label, texts in notes:
        for text in texts:
            lines = textwrap.wrap(text, 96)
            for line in lines:
                print(f"  {label:<22}{line}")
                label = ""

    print(f"\nThe same launches on this host (measured, median of {args.reps} after a warm-up; "
          f"{os.cpu_count()} host cores simulate the NPU, so these say nothing about it):")
    host = []
    for r in rows:
        tb, ta = (median_time(fn, args.reps) for fn in r.host)
        host.append([r.tuning, fmt_time(tb), fmt_time(ta), f"{tb / ta:.2f}x"])
    print(text_table(["tuning", "host before", "host after", "host gain"], host, right={1, 2, 3}))


if __name__ == "__main__":
    main()
