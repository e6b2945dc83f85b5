"""Tutorial 09 -- reading a profile: host time and modelled NPU time, core utilization, the pipe
that bounds a kernel, per-block compute and memory time, a Chrome trace, memory analysis, and
the profile as one HTML page.

    python tutorials/09_profiling.py [--quick] [--reps N] [--trace PATH] [--html PATH]

One idea: there is no NPU here, yet PyPTO can tell you how your kernel would behave on one.
Every launch made inside `with pypto.Profiler() as prof:` is recorded; its PTO program (the
.pto the compiler emits), its grid and its arguments' shapes go through a cycle model of the
AI Core, which says how long the launch would take on the chip, how busy the cores are and
which pipe is the bottleneck. That modelled time, not the host's wall time, is the one to tune.
"""
import argparse
import json
import os
import tempfile
from collections import Counter

import numpy as np

import pypto
import pypto.language as pl

# ----------------------------------------------------------------------------------------------
# 1. Two clocks.
#
# A profile holds two times per launch, and the summary labels each:
#
#   host time   measured: the wall time of the launch on THIS machine, where host threads play
#               the AI Cores and run each block's instructions one after another. It says how
#               fast the simulation is. Flags and double buffering do not change it, and a host
#               with 2 cores cannot show what 48 cores would do.
#   NPU time    modelled: what the cycle model (pypto/backends/ascend/model/) predicts
#               for the target chip (ascend910b1 by default: 48 vector cores at 1.85 GHz). It
#               runs the block's PTO program on the core's pipes -- MTE2 loads, V computes,
#               MTE3 stores, S issues -- each with its cost from the chip's reference numbers,
#               the pipes running at the same time as the program's flags allow, and shares
#               the HBM bandwidth between the cores that are busy. It is an estimate, not a
#               measurement, and the profile never calls it anything else.
#
# Recording costs the launch almost nothing (the model runs lazily, when you first read the
# profile), so profile real runs: results are computed exactly as without the profiler.
#
# The kernel is tutorial 06's persistent row softmax: each block walks the row tiles pid,
# pid + blocks, ... so the grid can be anything from one block to one per core.
# ----------------------------------------------------------------------------------------------


@pypto.jit
def row_softmax(x, out, BM: pl.constexpr, BN: pl.constexpr, STAGES: pl.constexpr):
    pid = pl.program_id(0)
    for r in pl.range(pid * BM, x.shape[0], BM * pl.num_programs(0), num_stages=STAGES):
        t = pl.load(x, offsets=(r, 0), shape=(BM, BN), padding=float("-inf"))
        e = pl.exp(t - pl.max(t, axis=1, keepdims=True))
        pl.store(out, offsets=(r, 0), value=e / pl.sum(e, axis=1, keepdims=True))


# ----------------------------------------------------------------------------------------------
# 2. What to read in a profile.
#
#   prof.summary()          one line per kernel and grid: calls, host us (measured), NPU us and
#                           cycles (modelled), cores, utilization, the bounding pipe; then the
#                           instructions that took the most modelled time
#   prof.kernels            one KernelProfile per launch: host_time_ms, npu_time_ms, cycles,
#                           core_utilization, cores, blocks, pipe_busy, bound_pipe
#   prof.core_utilization   busy core-cycles / (cores x modelled makespan): 8 blocks on a
#                           48-core chip give at most 8/48 = 16.7 %, less the launch and each
#                           block's dispatch (targets.CostModel), when no core works
#   prof.tiles              one TileProfile per block: its span (time_ms) and, summed over its
#                           instructions, compute_time (V, cube, scalar), memory_time (MTE1/2/3,
#                           FIX), flops and bytes. Pipes overlap, so compute + memory can exceed
#                           the span: that overlap is what double buffering buys.
#   prof.operations         per PTO instruction (tload, texp, ...) over every block: count,
#                           compute_time, memory_time
#   prof.export_chrome_trace(path)   the whole timeline as Chrome trace JSON
#
# The bounding pipe is the one with the most busy cycles: if it is V, the kernel is compute
# bound and faster loads will not help; if it is MTE2 or MTE3, it is waiting for memory.
# ----------------------------------------------------------------------------------------------


def softmax_numpy(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def fmt_us(ms):
    return f"{ms * 1e3:9.2f} us"


def main():
    parser = argparse.ArgumentParser(description="PyPTO tutorial 09: profiling")
    parser.add_argument("--reps", type=int, default=5, help="launches per profiled run (default 5)")
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--trace", metavar="PATH",
                        help="write the Chrome trace here (default: a temporary file, deleted)")
    parser.add_argument("--html", metavar="PATH",
                        default=os.path.join(tempfile.gettempdir(), "pypto_tutorial09.html"),
                        help="write the profile page here (default: pypto_tutorial09.html in "
                             "the temporary directory)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)

    # 96 or 192 row tiles of 16 x 512 fp32 (32 KiB each): whole tiles for 8 and for 48 blocks
    n_rows, n_cols, BM = (1536 if args.quick else 3072), 512, 16
    x = rng.standard_normal((n_rows, n_cols), dtype=np.float32)
    out = np.empty_like(x)
    exact = softmax_numpy(x.astype(np.float64))

    # --- a profiled run ----------------------------------------------------------------------
    # Warm up first: the first launch compiles the kernel (or loads it from the cache), which
    # is not what we want to time. Then launch a few times inside the profiler.
    row_softmax[(8,)](x, out, BM=BM, BN=n_cols, STAGES=1)
    with pypto.Profiler() as prof:
        for _ in range(args.reps):
            row_softmax[(8,)](x, out, BM=BM, BN=n_cols, STAGES=1)
    np.testing.assert_allclose(out, exact, rtol=1e-5, atol=1e-12)
    print(f"row softmax {n_rows}x{n_cols}, BM={BM}, 8 blocks, num_stages=1, launched "
          f"{args.reps} time(s) under pypto.Profiler(); result matches numpy\n")
    print(prof.summary())

    # --- the two clocks, one launch ----------------------------------------------------------
    k = prof.kernels[-1]
    print(f"\none launch: host time {fmt_us(k.host_time_ms).strip()} (measured on this machine, "
          f"{os.cpu_count()} host cores simulating the chip)")
    print(f"            NPU time  {fmt_us(k.npu_time_ms).strip()} = {k.cycles:,.0f} cycles at "
          f"{pypto.get_target(k.target).clock_ghz} GHz (modelled for {k.target}, not measured)")
    # Every launch of the same kernel, grid and shapes has the same modelled time (the model
    # is deterministic), while the host times scatter with whatever else the machine does.
    assert len({kk.cycles for kk in prof.kernels}) == 1

    # --- core utilization --------------------------------------------------------------------
    assert abs(k.core_utilization - prof.core_utilization) < 1e-9    # every launch alike
    first = min(b.start for b in k.model.blocks)     # the launch and dispatch come first
    assert abs(k.core_utilization - k.blocks / k.cores * (1 - first / k.cycles)) < 0.01
    print(f"\ncore utilization {k.core_utilization:.1%}: {k.blocks} blocks kept {k.blocks} of the "
          f"{k.cores} vector cores busy after the launch and their dispatch "
          f"({first / k.cycles:.0%} of the time); the other {k.cores - k.blocks} idled the "
          "whole launch")

    # --- which pipe bounds it ----------------------------------------------------------------
    # pipe_busy is summed over every block: divide by the blocks' total span for each pipe's
    # share of the time a core was busy. (k.model is the cycle model's LaunchModel itself.)
    span = sum(b.end - b.start for b in k.model.blocks)
    print("busy cycles per pipe (all blocks), as a share of the blocks' time:")
    for pipe, busy in sorted(k.pipe_busy.items(), key=lambda kv: -kv[1]):
        if busy:
            print(f"    {pipe:<5} {busy:>12,.0f}  {busy / span:6.1%}")
    print(f"bound by {k.bound_pipe}: the vector unit (exp, the row max and sum, the broadcasts, "
          "the divide) is busier than the loads (MTE2) and stores (MTE3) together")
    assert k.bound_pipe == "V" and k.pipe_busy["V"] > k.pipe_busy["MTE2"] + k.pipe_busy["MTE3"]

    # --- per block: compute vs memory ------------------------------------------------------
    tiles = [t for t in prof.tiles if t.launch == len(prof.kernels) - 1]
    print("\nper block (prof.tiles, last launch; modelled, in us):")
    print(f"    {'block':<16} {'core':>4} {'span':>8} {'compute':>8} {'memory':>8} "
          f"{'MFLOP':>7} {'MB':>6}")
    for t in tiles[:3]:
        print(f"    {t.name:<16} {t.core:>4} {t.time_ms * 1e3:>8.2f} {t.compute_time * 1e3:>8.2f} "
              f"{t.memory_time * 1e3:>8.2f} {t.flops / 1e6:>7.2f} {t.bytes / 1e6:>6.2f}")
    print(f"    ... {len(tiles)} blocks in all")
    t0 = tiles[0]
    assert t0.compute_time + t0.memory_time >= t0.time_ms * 0.99
    # span < compute + memory, but not by much: with one buffer the load of tile i+1 waits for
    # the vector unit to finish with tile i, so loads and compute take turns; only the store
    # of tile i overlaps the next load. (bytes counts every byte an instruction touches,
    # on-chip vector traffic included, not only global memory.)

    # --- the seed's module-level API -------------------------------------------------------
    # The same report without a `with` block: pypto.enable_profiling(), run, then
    # pypto.get_profiling_report() (and disable_profiling() to stop).
    pypto.enable_profiling()
    row_softmax[(8,)](x, out, BM=BM, BN=n_cols, STAGES=1)
    report = pypto.get_profiling_report()
    pypto.disable_profiling()
    print("\npypto.get_profiling_report().operations, the top three (modelled ms, all blocks):")
    for op in report.operations[:3]:
        print(f"    {op.name:<10} compute_time {op.compute_time:.5f}  memory_time "
              f"{op.memory_time:.5f}")

    # --- a Chrome trace ------------------------------------------------------------------------
    # One process per core ("AIV core 0", ...), one track per pipe, one bar per instruction,
    # on the modelled NPU time axis. Open it at https://ui.perfetto.dev ("Open trace file") or
    # in Chrome at chrome://tracing ("Load"). Zoom into a core: with one buffer you see the
    # MTE2 bar (load), then the V bars, then MTE3 (store) overlapping the next load -- and
    # gaps on MTE2 while V works. That gap is what double buffering fills.
    with tempfile.TemporaryDirectory() as tmp:
        path = args.trace or os.path.join(tmp, "profile.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
        events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
        names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
                 if e["name"] == "process_name"}
        tracks = {(e["pid"], e["args"]["name"]) for e in trace["traceEvents"]
                  if e["name"] == "thread_name"}
        print(f"\nChrome trace: {len(events)} instruction events on {len(names)} cores "
              f"({', '.join(sorted(names.values())[:2])}, ...), tracks "
              f"{sorted({p for _, p in tracks})}")
        print("    " + (f"written to {path}" if args.trace else
                        "written to a temporary file (pass --trace PATH to keep it)")
              + "; open it in https://ui.perfetto.dev or chrome://tracing")
        assert Counter(e["name"] for e in events)["tload"] == n_rows // BM * args.reps

    # --- what double buffering and more blocks change ----------------------------------------
    # Four configurations, each launched `reps` times in one profile. The model answers the
    # two questions the host cannot: does prefetching the next tile hide the loads (it can
    # only hide what V does not already cover), and what do 40 more cores buy.
    configs = [(1, 8), (2, 8), (1, 48), (2, 48)]
    for stages, blocks in configs:                   # warm up (compile) outside the profile
        out.fill(np.nan)
        row_softmax[(blocks,)](x, out, BM=BM, BN=n_cols, STAGES=stages)
        np.testing.assert_allclose(out, exact, rtol=1e-5, atol=1e-12)
    with pypto.Profiler() as what_if:
        for stages, blocks in configs:
            for _ in range(args.reps):
                row_softmax[(blocks,)](x, out, BM=BM, BN=n_cols, STAGES=stages)
    rows = []
    for i, (stages, blocks) in enumerate(configs):
        ks = what_if.kernels[i * args.reps:(i + 1) * args.reps]
        host = sum(kk.host_time_ms for kk in ks) / len(ks)
        rows.append((stages, blocks, host, ks[0].npu_time_ms, ks[0].core_utilization,
                     ks[0].bound_pipe))
    print(f"\nrow softmax {n_rows}x{n_cols}: host time (measured, mean of {args.reps}) and NPU "
          f"time (modelled, {k.target})")
    print(f"{'stages':>6}  {'blocks':>6}  {'host time':>12}  {'NPU time':>12}  {'util':>6}  "
          f"{'bound by':>8}")
    for stages, blocks, host, npu, util, bound in rows:
        print(f"{stages:>6}  {blocks:>6}  {fmt_us(host)}  {fmt_us(npu)}  {util:6.1%}  {bound:>8}")
    npu = {(s, b): n for s, b, _, n, _, _ in rows}
    bound = {(s, b): p for s, b, _, _, _, p in rows}
    assert npu[(2, 8)] < npu[(1, 8)] and npu[(1, 48)] < npu[(1, 8)]
    # Per tile, on 8 blocks (from the first profile): the model's load, compute and store.
    per = {p: k.pipe_busy[p] / (n_rows // BM) for p in ("MTE2", "V", "MTE3")}
    print(f"per tile on 8 blocks: load {per['MTE2']:.0f}, compute {per['V']:.0f}, store "
          f"{per['MTE3']:.0f} cycles (modelled). num_stages=2 saves "
          f"{1 - npu[(2, 8)] / npu[(1, 8)]:.0%}: the next tile's load runs while V computes, and "
          "the result's store while V starts the next tile, so a tile costs about its compute "
          f"instead of load + compute + store.\n48 blocks are {npu[(1, 8)] / npu[(1, 48)]:.1f}x faster than 8, "
          f"not 6x: 48 cores share the HBM, each core's transfers slow down, and the kernel "
          f"becomes bound by {bound[(1, 48)]}; double buffering then saves "
          f"{1 - npu[(2, 48)] / npu[(1, 48)]:.0%}.")
    # The host column barely moves with num_stages (the host runs the same instructions in
    # the same order either way) and follows the HOST's cores, not the chip's, with blocks.

    # --- memory analysis ---------------------------------------------------------------------
    # pypto.memory.analyze compiles (or fetches) the kernel for these arguments and reads what
    # the compiler decided -- nothing runs: the on-chip peak per buffer, each buffer's
    # capacity, the global memory of the launch, and efficiency, the share of the allocated
    # on-chip bytes that hold tile data (alignment and fractal padding are what it loses).
    print()
    ub = {}
    for stages in (1, 2):
        mem = pypto.memory.analyze(row_softmax, x, out, BM=BM, BN=n_cols, STAGES=stages,
                                   grid=(8,))
        print(f"memory, num_stages={stages}: peak on chip {int(mem.peak_memory) / 1024:.0f} KiB "
              f"per core (UB {mem.peak_memory['UB'] / 1024:.0f} of "
              f"{mem.capacity['UB'] / 1024:.0f} KiB, {mem.utilization['UB']:.0%}), efficiency "
              f"{mem.efficiency:.0f}%, global memory {mem.global_memory / 2**20:.1f} MiB")
        assert mem.global_memory == x.nbytes + out.nbytes
        ub[stages] = mem.peak_memory["UB"]
    # one tile: without double buffering the whole chain runs in place in the loaded tile
    assert ub[2] - ub[1] == 3 * BM * n_cols * 4
    print(f"double buffering's price: a second (pong) buffer for the loaded tile, and the "
          f"loaded and the stored tiles kept out of the loop's temporaries (so no prefetch "
          f"overwrites one and no store makes V wait; with one stage the whole chain runs in "
          f"place in the loaded tile), {(ub[2] - ub[1]) // 1024} KiB more UB. "
          f"print(mem) shows the full table.")

    # --- one page to look at -----------------------------------------------------------------
    # prof.export_html(path) writes everything above as one self-contained HTML file: no
    # network needed to open it, so it works offline and can be mailed to a colleague. It has
    # the summary table, swim lanes (one row per core and pipe: zoom with the wheel, drag to
    # pan, hover a bar for its instruction and duration; the grey hatched bars are launch and
    # dispatch gaps, red arrows the cube -> vector hand-offs of a mixed kernel), a roofline
    # under the chip's roofs with the board's measured kernels marked, and the on-chip memory
    # per buffer. `pypto profile SCRIPT.py --html OUT.html` does the same for a whole script.
    path = what_if.export_html(args.html, title="Tutorial 09: row softmax, four configurations")
    with open(path, encoding="utf-8") as f:
        page = f.read()
    assert "<script src" not in page and "profile-data" in page
    print(f"\nprofile page: {path} ({len(page) / 1024:.0f} KiB, self-contained); open it in "
          "any browser")


if __name__ == "__main__":
    main()
