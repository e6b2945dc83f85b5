"""Tutorial 06 -- double buffering: the AI Core's pipes, pl.range(num_stages=2), a pipelined
matmul K loop, and explicit ping-pong buffers with async_load / synchronize.

    python tutorials/06_double_buffering.py [--quick] [--reps N]

One idea: an AI Core moves data and computes at the same time, on different pipes. A loop that
loads a tile, computes on it and stores the result keeps only one pipe busy at a time unless
the next tile is loaded into a second buffer while the current one is being computed on.
"""
import argparse
import re

import numpy as np

import pypto
import pypto.language as pl

# ----------------------------------------------------------------------------------------------
# 1. Pipes and flags.
#
# A 910B vector core is not one processor but several units ("pipes"), each with its own
# instruction queue:
#
#   PIPE_S     the scalar unit: runs the loops and address arithmetic, and dispatches every
#              other instruction, in program order, to the queue of the pipe that executes it
#   PIPE_MTE2  a DMA engine: global memory -> on-chip buffer (pto.tload)
#   PIPE_V     the vector unit: pto.tadd, pto.texp, pto.trowmax, ...
#   PIPE_MTE3  a DMA engine: on-chip buffer -> global memory (pto.tstore)
#
# (a cube core has MTE2, then MTE1 for L1 -> L0A/L0B, M for the cube itself and FIX for
# L0C -> global memory). Each pipe runs its own queue in order, and the pipes run at the same
# time, without looking at each other. So when the vector unit must read a tile that MTE2 is
# loading, or MTE2 must not overwrite a tile the vector unit is still reading, the program says
# so with a flag: `pto.set_flag[<PIPE_MTE2>, <PIPE_V>, <EVENT_ID0>]` after the load and
# `pto.wait_flag[<PIPE_MTE2>, <PIPE_V>, <EVENT_ID0>]` before the first instruction that reads
# it. You never write these: PyPTO's sync pass inserts one pair per real dependence between
# pipes (event ids 0-7 per pair of pipes).
#
# 2. Why one buffer is slow, and what two buffers buy.
#
# In a loop over row blocks with ONE buffer for the loaded tile, load i+1 may only start once
# the vector unit has finished reading tile i (else it would overwrite it), and compute i+1
# only once load i+1 is done. The pipes take turns:
#
#     one buffer                               two buffers (ping, pong)
#     MTE2  [load 0]      [load 1]      ...     MTE2  [load 0][load 1][load 2][load 3]
#     V             [exp 0]       [exp 1]       V             [exp 0][exp 1][exp 2]
#     MTE3                 [st 0]        ...    MTE3                 [st 0] [st 1]
#
# With two buffers the load of block i+1 goes into the other buffer while block i is computed,
# so an iteration costs about max(load, compute) instead of load + compute. That is double
# buffering. `pl.range(..., num_stages=2)` asks PyPTO to do it: every load in the loop whose
# address depends only on the loop index is moved one iteration ahead into a second buffer.
# Tiles are fixed buffers in PTO, so the loop is unrolled by two to alternate them (`%vec9`
# and `%vec9_pong<n>` below), with a prologue load before the loop. A load is left alone when
# the loop also stores to the same tensor (the prefetch could read what the previous
# iteration has not written yet). The cost: a second buffer of on-chip memory per loaded tile
# (a tile too large for two is refused at compile time: use smaller tiles or num_stages=1),
# twice the loop body, and one extra load past the end in the last round (clamped to the
# tensor like every load, so it reads nothing it should not).
#
# 3. What to expect on the host.
#
# Here host threads play the cores and run the PTO instructions of a block one after another;
# flags compile to nothing. So double buffering changes the PTO program -- the .pto you would
# hand to the chip, and the NPU time the cycle model computes from it (tutorial 09,
# pypto.Profiler) -- but not the host run time, which the table at the end shows.
# ----------------------------------------------------------------------------------------------


@pypto.jit
def row_softmax(x, out, BM: pl.constexpr, BN: pl.constexpr, STAGES: pl.constexpr):
    # A persistent kernel: launched without a grid, it runs one block per core (48 on 910B1)
    # and each block walks the row blocks pid, pid + 48, ... -- a long loop, worth pipelining.
    pid = pl.program_id(0)
    for r in pl.range(pid * BM, x.shape[0], BM * pl.num_programs(0), num_stages=STAGES):
        t = pl.load(x, offsets=(r, 0), shape=(BM, BN), padding=float("-inf"))
        e = pl.exp(t - pl.max(t, axis=1, keepdims=True))
        pl.store(out, offsets=(r, 0), value=e / pl.sum(e, axis=1, keepdims=True))


# ----------------------------------------------------------------------------------------------
# 4. The matmul K loop (tutorial 03), pipelined.
#
# On the cube core the loads go GM -> L1 (MTE2), then L1 -> L0A/L0B (MTE1, the pto.tmov), then
# the cube multiplies (M). With num_stages=2 the two L1 tiles (a's and b's) get a second
# buffer each, so MTE2 fetches the K step k+1 while MTE1 and the cube work on step k. The
# L1 memory the kernel uses doubles; L0A/L0B keep one buffer each.
# ----------------------------------------------------------------------------------------------


@pypto.jit
def matmul_kernel(a, b, c, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr,
                  STAGES: pl.constexpr):
    pm = pl.program_id(0)
    pn = pl.program_id(1)
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in pl.range(0, K, BK, num_stages=STAGES):
        ta = pl.load(a, offsets=(pm * BM, k), shape=(BM, BK))
        tb = pl.load(b, offsets=(k, pn * BN), shape=(BK, BN))
        acc = pl.matmul(ta, tb, acc=acc)
    pl.store(c, offsets=(pm * BM, pn * BN), value=acc)


# ----------------------------------------------------------------------------------------------
# 5. The explicit style: alloc_buffer, async_load, synchronize.
#
# The same pipelining by hand, when you want to say exactly which buffer each load goes to:
#
#   buf = pl.alloc_buffer(shape, dtype)          an on-chip buffer (pl.local_buffer is an alias)
#   pl.async_load(x, buf, offsets=(...))         start filling it: x with offsets, or a slice
#   pl.async_load(x[a:b, c:d], buf)              of x such as x[r:r + BM, 0:BN]
#   pl.synchronize()                             wait for every async_load issued so far
#
# The loop is unrolled by two with fixed names, ping and pong, exactly as num_stages=2 does it:
# start the load of the next block into one buffer, compute on the other, synchronize, swap.
# Reading a buffer before the synchronize() that completes its load is a compile error (the
# last part of the tutorial), so the overlap cannot read half-loaded data. synchronize() is a
# promise checked at compile time, not an instruction: the flags in the .pto still come from
# the sync pass, which sees the two buffers and orders only the real dependences.
# ----------------------------------------------------------------------------------------------


@pypto.jit
def softmax_tile(t):
    # a jit helper, inlined where it is called (docs/language.md, section 4)
    e = pl.exp(t - pl.max(t, axis=1, keepdims=True))
    return e / pl.sum(e, axis=1, keepdims=True)


@pypto.jit
def row_softmax_explicit(x, out, BM: pl.constexpr, BN: pl.constexpr):
    pid = pl.program_id(0)
    step = BM * pl.num_programs(0)
    ping = pl.alloc_buffer((BM, BN), pl.float32)
    pong = pl.alloc_buffer((BM, BN), pl.float32)
    pl.async_load(x, ping, offsets=(pid * BM, 0), padding=float("-inf"))
    pl.synchronize()
    for r in range(pid * BM, x.shape[0], 2 * step):
        pl.async_load(x, pong, offsets=(r + step, 0), padding=float("-inf"))    # next block
        pl.store(out, offsets=(r, 0), value=softmax_tile(ping))                  # this block
        pl.synchronize()
        pl.async_load(x[r + 2 * step:r + 2 * step + BM, 0:BN], ping, padding=float("-inf"))
        pl.store(out, offsets=(r + step, 0), value=softmax_tile(pong))
        pl.synchronize()
    # Loads and stores past the last row are clamped like any other (tutorial 01), so the
    # last round needs no test of its own: rows past the end read -inf and are never stored.


@pypto.jit
def reads_too_early(x, out, BLOCK: pl.constexpr):
    buf = pl.alloc_buffer((BLOCK,), pl.float32)
    pl.async_load(x, buf, offsets=(0,))
    pl.store(out, offsets=(0,), value=buf + 1.0)      # no pl.synchronize() before this read


MAX_TILE_ELEMENTS = 8192        # as in tutorial 02: BLOCK_M * BLOCK_N fp32 elements per tile
TILE_TARGET_ELEMENTS = 4096     # rows per tile: ~16 KiB, so a block's tiles stay in a host core's L1


def block_sizes(n_cols):
    block_n = max(1, n_cols)                                  # whole rows, no padding
    if block_n > MAX_TILE_ELEMENTS:
        raise ValueError(f"rows of {n_cols} elements do not fit one tile; this kernel handles "
                         f"up to {MAX_TILE_ELEMENTS} columns")
    return max(1, min(8, TILE_TARGET_ELEMENTS // block_n)), block_n


def softmax(x, out, stages):
    bm, bn = block_sizes(x.shape[1])
    row_softmax(x, out, BM=bm, BN=bn, STAGES=stages)   # no grid: one block per core
    return out


def softmax_numpy(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def short(line):
    """One .pto line in a few words: the instruction and its buffers, or a flag's pipes."""
    op = line.strip()
    m = re.match(r"pto\.(set_flag|wait_flag)\[<PIPE_(\w+)>, <PIPE_(\w+)>, <EVENT_ID(\d)>\]", op)
    if m:
        return f"{m.group(1):<9} {m.group(2)} -> {m.group(3)}, event {m.group(4)}"
    m = re.match(r"pto\.([\w.]+) ins\(([^:]*):.*outs\(([^:]*):", op)
    if m:
        return f"{m.group(1):<9} {m.group(2).strip()} -> {m.group(3).strip()}"
    if op.startswith(("scf.", "}")):
        return op.split(" : ")[0].rstrip(" {")
    return None                     # scalar arithmetic, views, allocations


def print_loop(pto, flags=True):
    """The first loop of a .pto text, one short line per instruction (and, with the flags,
    what follows the loop); a run of compute instructions (neither a load, a store nor a flag)
    is folded into one line naming them, with the buffers the first of them reads."""
    depth, run, reads = 0, [], ""

    def flush():
        if run:
            print("    " + "  " * depth + f"{' '.join(run)}   (first reads {reads})")
            run.clear()

    for line in pto[pto.index("scf.for"):].splitlines():
        text = short(line)
        if text is None or not flags and "flag" in text:
            continue
        name = text.split()[0]
        if name not in ("tload", "tstore", "set_flag", "wait_flag") and name[0] == "t":
            if not run:
                reads = text.split(None, 1)[1].split(" -> ")[0]
            run.append(name)
            continue
        flush()
        if text.startswith("}"):
            depth -= 1
            if depth < 0:                           # the end of the function
                break
        print("    " + "  " * depth + text)
        if not flags and depth == 0 and text == "}":  # the end of the loop
            break
        if text.startswith(("scf.for", "scf.if", "} else")):
            depth += 1


def median_time(fn, reps):
    """Median seconds of ``reps`` calls after one warm-up call (which compiles or loads the
    kernel), with PyPTO's own benchmarking helper."""
    return pypto.testing.do_bench(fn, reps=reps) / 1e3


def fmt(seconds):
    return f"{seconds * 1e6:9.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:9.2f} ms"


def main():
    parser = argparse.ArgumentParser(description="PyPTO tutorial 06: double buffering")
    parser.add_argument("--reps", type=int, default=5, help="timed repetitions (default 5)")
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    args = parser.parse_args()
    rng = np.random.default_rng(0)

    # --- num_stages=1 and num_stages=2 compute the same thing ---------------------------------
    n_rows, n_cols = 1001, 250
    x = rng.standard_normal((n_rows, n_cols), dtype=np.float32) * 4
    bm, bn = block_sizes(n_cols)
    out1, out2 = np.empty_like(x), np.empty_like(x)
    softmax(x, out1, stages=1)
    softmax(x, out2, stages=2)
    exact = softmax_numpy(x.astype(np.float64))
    np.testing.assert_allclose(out1, exact, rtol=1e-5, atol=1e-12)
    # the same instructions on the same data, only in another order: bit-identical
    np.testing.assert_array_equal(out1, out2)
    print(f"row softmax {n_rows}x{n_cols}, BM={bm} BN={bn}, one block per core: num_stages=1 "
          f"and num_stages=2 give bit-identical results, matching numpy "
          f"(max error {np.abs(out2 - exact).max():.1e})")

    # --- ... but not the same program ---------------------------------------------------------
    single = row_softmax.compile(x, out1, BM=bm, BN=bn, STAGES=1)
    double = row_softmax.compile(x, out2, BM=bm, BN=bn, STAGES=2)
    print(f"\n{'':>14}{'tiles in UB':>12}{'UB bytes':>10}{'tloads':>8}{'set_flags':>11}")
    for name, k in (("num_stages=1", single), ("num_stages=2", double)):
        pto = k.asm["pto"]
        print(f"{name:>14}{pto.count('pto.alloc_tile'):>12}{k.metadata['buffer_bytes']['vec']:>10}"
              f"{pto.count('pto.tload'):>8}{pto.count('pto.set_flag'):>11}")
    pto2 = double.asm["pto"]
    assert "_pong" in pto2 and "_pong" not in single.asm["pto"]
    print("\nthe num_stages=2 loop (after the prologue's load into %vec9, before the loop):")
    print_loop(pto2)
    # Read it as: each trip does two row blocks. It starts the load of block i+1 into the pong
    # buffer (after waiting V -> MTE2: the vector unit must be done with pong from the last
    # trip), then waits MTE2 -> V event 0 for ping (loaded by the prologue or the previous
    # trip) and computes on it WHILE the pong load runs; the store waits for the result
    # (V -> MTE3). Then, if there is a block i+1, the roles swap: ping is refilled with block
    # i+2 while pong is computed on. The wait MTE3 -> V before tsub is there because tsub
    # overwrites %vec12, which the previous store may still be reading out. The flags
    # before the `scf.if` are waited outside it so
    # that every set has its wait on every path; the sets at the end of the body are the
    # loop's back edges, pre-set before the loop and drained after it.

    # --- the matmul K loop --------------------------------------------------------------------
    M, N, K = 300, 200, 250
    a = rng.standard_normal((M, K), dtype=np.float32).astype(np.float16)
    b = rng.standard_normal((K, N), dtype=np.float32).astype(np.float16)
    BM, BN, BK = 128, 128, 64
    grid = (pl.cdiv(M, BM), pl.cdiv(N, BN))
    c1, c2 = np.empty((M, N), np.float32), np.empty((M, N), np.float32)
    matmul_kernel[grid](a, b, c1, K, BM=BM, BN=BN, BK=BK, STAGES=1)
    matmul_kernel[grid](a, b, c2, K, BM=BM, BN=BN, BK=BK, STAGES=2)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = (K + 1) * 2.0 ** -24 * (np.abs(a64) @ np.abs(b64))   # fp32 dot product bound
    assert np.all(np.abs(c2 - a64 @ b64) <= bound)
    np.testing.assert_array_equal(c1, c2)
    mm1 = matmul_kernel.compile(a, b, c1, K, BM=BM, BN=BN, BK=BK, STAGES=1)
    mm2 = matmul_kernel.compile(a, b, c2, K, BM=BM, BN=BN, BK=BK, STAGES=2)
    l1 = [k.metadata["buffer_bytes"]["mat"] // 1024 for k in (mm1, mm2)]
    print(f"\nfp16 matmul {M}x{K} @ {K}x{N}, BK={BK}, num_stages=2: same result as num_stages=1, "
          f"within the fp32 bound of numpy; L1 used {l1[0]} KiB -> {l1[1]} KiB; its L1 tiles:")
    for line in mm2.asm["pto"].splitlines():
        if "loc=mat" in line and "alloc_tile" in line:
            name = line.split("=")[0].strip()
            shape = re.search(r"rows=(\d+), cols=(\d+)", line).groups()
            print(f"    {name:<13} {shape[0]}x{shape[1]} f16 in L1")
    print("  and its K loop, without the flags:")
    print_loop(mm2.asm["pto"], flags=False)
    # The same pattern: prefetch step k+1 into the pong L1 tiles while step k's tiles are moved
    # to L0A/L0B (MTE1) and multiplied into the accumulator (M), then swap. The flags, which
    # the .pto has, now run between MTE2, MTE1 and M.

    # --- the explicit style -------------------------------------------------------------------
    out3 = np.empty_like(x)
    row_softmax_explicit[(48,)](x, out3, BM=bm, BN=bn)
    np.testing.assert_array_equal(out3, out2)
    pto3 = row_softmax_explicit.compile(x, out3, BM=bm, BN=bn).asm["pto"]
    loop3 = pto3[pto3.index("scf.for"):]
    loads = re.findall(r"pto\.tload .*?outs\((%\w+)", loop3)
    assert len(set(loads)) == 2
    print(f"\nexplicit ping/pong with pl.alloc_buffer / pl.async_load / pl.synchronize: the same "
          f"result, bit for bit; each trip of its loop loads into {loads[0]} (pong) and "
          f"{loads[1]} (ping), as num_stages=2 does")

    # Reading a buffer before synchronize() is refused at compile time, at the line that reads:
    try:
        reads_too_early[(1,)](np.zeros(16, np.float32), np.zeros(16, np.float32), BLOCK=16)
        raise AssertionError("the early read compiled")
    except pypto.CompilationError as e:
        message = str(e).splitlines()
        assert "is read before pl.synchronize()" in message[0], e
        print("a read before pl.synchronize() ->", message[0].split(": in ", 1)[-1])
        for line in message[1:]:
            print("   ", line)

    # --- timing: host run time of both versions, and numpy ------------------------------------
    shapes = [(1001, 250)] if args.quick else [(1024, 1024), (4096, 1024), (2048, 4096)]
    rows = []
    for shape in shapes:
        x = rng.standard_normal(shape, dtype=np.float32)
        out = np.empty_like(x)
        ref = softmax_numpy(x.astype(np.float64))
        for stages in (1, 2):
            np.testing.assert_allclose(softmax(x, out, stages), ref, rtol=1e-5, atol=1e-12)
        t1 = t2 = float("inf")
        for _ in range(2):      # alternate, so a burst of other work on the machine hits both
            t1 = min(t1, median_time(lambda: softmax(x, out, 1), args.reps))
            t2 = min(t2, median_time(lambda: softmax(x, out, 2), args.reps))
        t_numpy = median_time(lambda: softmax_numpy(x), args.reps)
        rows.append((f"{shape[0]}x{shape[1]}", t1, t2, t_numpy))

    print(f"\nfp32 row softmax on the host, median of {args.reps} after a warm-up (PyPTO: the "
          "better of two such medians)")
    print(f"{'shape':>9}  {'stages=1':>12}  {'stages=2':>12}  {'numpy':>12}  {'2 vs 1':>7}")
    for shape, t1, t2, tn in rows:
        print(f"{shape:>9}  {fmt(t1)}  {fmt(t2)}  {fmt(tn)}  {t2 / t1:7.2f}")
    # "2 vs 1" = stages=2 / stages=1: about 1, within the noise. The host runs the same
    # instructions either way (section 3): what double buffering changes is the order of
    # the instructions in each pipe's queue on the NPU, which the host does not model yet.


if __name__ == "__main__":
    main()
