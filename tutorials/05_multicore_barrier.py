"""Tutorial 05 -- multicore: pl.barrier() for a two-phase reduction, a producer and its
consumers, why such a grid must fit on the cores, and why A2/A3 has no block-to-block flag.

    python tutorials/05_multicore_barrier.py [--quick] [--reps N]

One idea: until now every block was independent (tutorial 01: "blocks must not depend on each
other's order"). Some jobs need the blocks to talk: a sum over the whole tensor, then a second
pass that uses it. Blocks cannot share on-chip memory, so they talk through global memory, and
a cross-core synchronisation says when what one block stored is there for the others to read.
"""
import argparse
import textwrap
import os
import re
import time

import numpy as np

import pypto
import pypto.language as pl

# ----------------------------------------------------------------------------------------------
# 1. Cores, and how they meet.
#
# An Ascend 910B1 has 24 AI Cores; each is one cube core and two vector cores, so a vector
# kernel has 48 cores to run on and a kernel using the cube 24. Each core has its own on-chip
# buffers (UB, L1, L0A/B/C); nothing on chip is shared. What the cores share is global memory
# (HBM, behind the L2 cache). So block A hands a value to block B by storing it to a tensor in
# global memory, and B loads it -- but B must not load before A's store has landed. For that
# the 910B (A2/A3) has cross-core flags, FFTS. An FFTS flag is set in one of three modes: 0
# reaches every core of one kind (all vector cores, or all cube cores), 1 the two vector cores
# of a cluster, 2 the cube and vector cores of a cluster. PyPTO uses mode 0 for
#
#   pl.barrier()   every block of the launch arrives before any goes on; in .pto it is
#                  pto-isa's SYNCALL (AscendC: SyncAll):
#                    pto.barrier #pto.pipe<PIPE_ALL>
#                    pto.sync.set #pto.pipe<PIPE_MTE3>, 14 {ffts_mode = 0 : i32}
#                    pto.sync.wait #pto.pipe<PIPE_MTE3>, 14
#
# and mode 2 for the hand-off of a matmul result from the cube to the vector cores. The
# `pto.barrier #pto.pipe<PIPE_ALL>` first matters: inside a core the store is issued to the
# MTE3 pipe (the GM-writing DMA engine), which runs on its own; the core must drain its pipes,
# so that the store is really in global memory, before it tells the other cores. PyPTO puts
# that pipe barrier in for you.
#
# No mode reaches one chosen block, and a flag carries no count. So the language's
# pl.signal(flag, count) / pl.wait(flag, count), which would let one block wake others, have
# no A2/A3 form: PyPTO refuses them (section 4).
#
# 2. Why the grid must fit on the cores.
#
# Ordinarily a grid may be far larger than the chip: a core finishes a block and takes the
# next. A barrier breaks that: the blocks already running wait at the barrier for blocks that
# have no core to run on, because every core is held by a waiting block -- a deadlock. So a
# kernel that uses pl.barrier or pl.wait needs every block running at once: its grid must be at
# most 48 blocks on 910B1 (24 if it uses the cube). PyPTO refuses a larger grid at launch with
# a ValueError rather than hanging. On the host the blocks of such a launch run as host threads
# all at once (one per block, even if there are fewer host cores).
# ----------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------
# 3. A two-phase reduction: out = x / sum(x), in one launch.
#
# Phase 1: block `pid` sums its share of x -- the chunks pid, pid + BLOCKS, pid + 2*BLOCKS, ...
#          (a grid-stride loop, so any length works) -- and stores the sum in partial[pid].
# Barrier: after it, all BLOCKS partial sums are in global memory.
# Phase 2: every block loads the BLOCKS partial sums (a tiny load), adds them up itself, and
#          divides its share of x by the total. (Block 0 alone could reduce the partials and
#          store the total, but then the others would need a second barrier to read it; adding
#          8 numbers in every block is cheaper than a barrier.)
#
# Without a barrier this needs two launches (one for the partial sums, one for the division):
# the end of a launch is the barrier. Here BLOCKS is a constexpr because it sizes the load of
# the partial sums, and the kernel must be launched with exactly BLOCKS blocks.
# ----------------------------------------------------------------------------------------------


@pypto.jit
def normalize_kernel(x, partial, out, CHUNK: pl.constexpr, BLOCKS: pl.constexpr):
    pid = pl.program_id(0)
    n = x.shape[0]
    # phase 1: this block's sum, first CHUNK-wide (one vector add per chunk), then across
    acc = pl.zeros((CHUNK,), dtype=pl.float32)
    for i in range(pid * CHUNK, n, CHUNK * BLOCKS):
        acc += pl.load(x, offsets=(i,), shape=(CHUNK,))
    pl.store(partial, offsets=(pid,), value=pl.sum(acc, axis=0, keepdims=True))   # (1,)
    pl.barrier()
    # phase 2: every partial sum is in global memory now
    total = pl.sum(pl.load(partial, offsets=(0,), shape=(BLOCKS,)), axis=0, keepdims=True)
    for i in range(pid * CHUNK, n, CHUNK * BLOCKS):
        pl.store(out, offsets=(i,), value=pl.load(x, offsets=(i,), shape=(CHUNK,)) / total)


# The same kernel without the barrier: a race. Nothing says partial[1..7] are written before
# block 0 reads them.
@pypto.jit
def racy_normalize_kernel(x, partial, out, CHUNK: pl.constexpr, BLOCKS: pl.constexpr):
    pid = pl.program_id(0)
    n = x.shape[0]
    acc = pl.zeros((CHUNK,), dtype=pl.float32)
    for i in range(pid * CHUNK, n, CHUNK * BLOCKS):
        acc += pl.load(x, offsets=(i,), shape=(CHUNK,))
    pl.store(partial, offsets=(pid,), value=pl.sum(acc, axis=0, keepdims=True))
    total = pl.sum(pl.load(partial, offsets=(0,), shape=(BLOCKS,)), axis=0, keepdims=True)
    for i in range(pid * CHUNK, n, CHUNK * BLOCKS):
        pl.store(out, offsets=(i,), value=pl.load(x, offsets=(i,), shape=(CHUNK,)) / total)


# The two-launch version, for the timing table: the end of the first launch is the barrier.
@pypto.jit
def partial_sums_kernel(x, partial, CHUNK: pl.constexpr, BLOCKS: pl.constexpr):
    pid = pl.program_id(0)
    acc = pl.zeros((CHUNK,), dtype=pl.float32)
    for i in range(pid * CHUNK, x.shape[0], CHUNK * BLOCKS):
        acc += pl.load(x, offsets=(i,), shape=(CHUNK,))
    pl.store(partial, offsets=(pid,), value=pl.sum(acc, axis=0, keepdims=True))


@pypto.jit
def divide_kernel(x, partial, out, CHUNK: pl.constexpr, BLOCKS: pl.constexpr):
    pid = pl.program_id(0)
    total = pl.sum(pl.load(partial, offsets=(0,), shape=(BLOCKS,)), axis=0, keepdims=True)
    for i in range(pid * CHUNK, x.shape[0], CHUNK * BLOCKS):
        pl.store(out, offsets=(i,), value=pl.load(x, offsets=(i,), shape=(CHUNK,)) / total)


CHUNK, BLOCKS = 4096, 8


def normalize(x, partial, out, blocks=BLOCKS):
    normalize_kernel[(blocks,)](x, partial, out, CHUNK=CHUNK, BLOCKS=blocks)
    return out


def normalize_two_launches(x, partial, out, blocks=BLOCKS):
    partial_sums_kernel[(blocks,)](x, partial, CHUNK=CHUNK, BLOCKS=blocks)
    divide_kernel[(blocks,)](x, partial, out, CHUNK=CHUNK, BLOCKS=blocks)
    return out


# ----------------------------------------------------------------------------------------------
# 4. Producer and consumers.
#
# Block 0 computes a per-column scale (the largest |value| of each column of a calibration
# matrix) and publishes it in global memory; every block then divides its rows by it. With a
# flag from block 0 to the others, the producer would never wait (scale_kernel_with_flags).
# A2/A3 has no such flag, so PyPTO refuses that kernel at compile time with NotOnChip, at the
# pl.signal line, saying what to use instead. The A2/A3 way is the barrier: block 0 stores the
# scale, everybody meets, everybody loads it.
#
# A block that never reaches the barrier would hang a real chip; in PyPTO the launch is
# reported as deadlocked after PYPTO_SYNC_TIMEOUT seconds (default 10).
# ----------------------------------------------------------------------------------------------


@pypto.jit
def scale_kernel(calib, x, scale, out, CAL: pl.constexpr, ROWS: pl.constexpr, N: pl.constexpr):
    pid = pl.program_id(0)
    if pid == 0:                                   # the producer
        pl.store(scale, offsets=(0, 0), value=pl.max(pl.abs(pl.load(
            calib, offsets=(0, 0), shape=(CAL, N))), axis=0, keepdims=True))   # (1, N)
    pl.barrier()                                   # the scale is in global memory now
    s = pl.load(scale, offsets=(0, 0), shape=(1, N))
    t = pl.load(x, offsets=(pid * ROWS, 0), shape=(ROWS, N))
    pl.store(out, offsets=(pid * ROWS, 0), value=t / s)


@pypto.jit
def scale_kernel_with_flags(calib, x, scale, out, CAL: pl.constexpr, ROWS: pl.constexpr,
                            N: pl.constexpr, BLOCKS: pl.constexpr):
    pid = pl.program_id(0)
    if pid == 0:
        s = pl.max(pl.abs(pl.load(calib, offsets=(0, 0), shape=(CAL, N))), axis=0,
                   keepdims=True)
        pl.store(scale, offsets=(0, 0), value=s)
        pl.signal(0, count=BLOCKS - 1)             # no A2/A3 instruction does this
    else:
        pl.wait(0)
        s = pl.load(scale, offsets=(0, 0), shape=(1, N))
    t = pl.load(x, offsets=(pid * ROWS, 0), shape=(ROWS, N))
    pl.store(out, offsets=(pid * ROWS, 0), value=t / s)


@pypto.jit
def never_met_kernel(x):
    i = pl.program_id(0) * 16
    pl.store(x, offsets=(i,), value=pl.load(x, offsets=(i,), shape=(16,)) + 1.0)
    if pl.program_id(0) == 0:
        pl.barrier()                               # block 1 never comes


def with_env(name, value, fn):
    """Run fn() with the environment variable `name` set to `value`, then restore it."""
    saved = os.environ.get(name)
    os.environ[name] = value
    try:
        return fn()
    finally:
        if saved is None:
            del os.environ[name]
        else:
            os.environ[name] = saved


def sync_lines(pto):
    """The cross-core lines of a .pto text, and the scf.if / else lines around them."""
    return [line.strip() for line in pto.splitlines()
            if re.search(r"pto\.(sync\.set|sync\.wait|barrier)\b|scf\.if|} else", line)]


def median_time(fn, reps):
    """Median seconds of ``reps`` calls after one warm-up call (which compiles or loads the
    kernel), with PyPTO's own benchmarking helper."""
    return pypto.testing.do_bench(fn, reps=reps) / 1e3


def fmt(seconds):
    return f"{seconds * 1e6:9.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:9.2f} ms"


def main():
    parser = argparse.ArgumentParser(description="PyPTO tutorial 05: barriers and cross-core flags")
    parser.add_argument("--reps", type=int, default=5, help="timed repetitions (default 5)")
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    args = parser.parse_args()
    rng = np.random.default_rng(0)

    # --- the two-phase reduction, checked -----------------------------------------------------
    n = 100_003                                     # not a multiple of CHUNK * BLOCKS
    x = rng.random(n, dtype=np.float32)
    partial = np.full(BLOCKS, np.nan, dtype=np.float32)   # NaN: a partial never written shows
    out = np.empty_like(x)
    for _ in range(3):                              # the barrier is reset at every launch
        normalize(x, partial, out)
        exact = x / x.astype(np.float64).sum()
        # fp32 sums of ~12500 terms per block: a relative error of a few 1e-7
        np.testing.assert_allclose(out, exact, rtol=1e-5)
    np.testing.assert_allclose(partial.sum(), x.astype(np.float64).sum(), rtol=1e-5)
    print(f"x / sum(x), n={n}, {BLOCKS} blocks, one launch with pl.barrier(): matches numpy "
          f"(max relative error {np.abs(out / exact - 1).max():.1e}); the partial sums "
          f"{np.array2string(partial, precision=0, separator=' ')}")

    compiled = normalize_kernel.compile(x, partial, out, CHUNK=CHUNK, BLOCKS=BLOCKS)
    print("\nits .pto around the barrier (phase 1's loop, the barrier, phase 2's loop):")
    for line in compiled.asm["pto"].splitlines():
        op = line.strip()
        if op.startswith("scf.for") or re.match(r"pto\.(barrier|sync\.set|sync\.wait)\b", op):
            print("   ", op)

    # --- what goes wrong without the barrier --------------------------------------------------
    # The race is real but its outcome depends on timing, so we watch it where timing is fixed:
    # the reference interpreter (PYPTO_INTERPRET=1, tutorial 04) runs the blocks of a kernel
    # without cross-core sync one after another, in grid order. Block 0 then reaches phase 2
    # when blocks 1..7 have not started: it reads their partial sums as NaN.
    partial[:] = np.nan
    racy = np.empty_like(x)
    with_env("PYPTO_INTERPRET", "1", lambda: racy_normalize_kernel[(BLOCKS,)](
        x, partial, racy, CHUNK=CHUNK, BLOCKS=BLOCKS))
    owner = (np.arange(n) // CHUNK) % BLOCKS        # which block wrote each element
    wrong = sorted({int(b) for b in owner[~np.isclose(racy, exact, rtol=1e-5)]})
    assert wrong and BLOCKS - 1 not in wrong, wrong
    print(f"\nwithout pl.barrier() (run by the interpreter, blocks in order): blocks {wrong} "
          f"wrote wrong values; only block {BLOCKS - 1}, the last to run, saw every partial sum")
    # With the barrier, the interpreter runs the blocks as threads that meet at it, like the
    # compiled kernel does:
    partial[:] = np.nan
    checked = with_env("PYPTO_INTERPRET", "1", lambda: normalize(x, partial, np.empty_like(x)))
    np.testing.assert_allclose(checked, exact, rtol=1e-5)
    print("with pl.barrier() the interpreter gets it right too")

    # --- producer / consumers -----------------------------------------------------------------
    ROWS, N, CAL = 16, 128, 64
    calib = rng.standard_normal((CAL, N), dtype=np.float32)
    y = rng.standard_normal((BLOCKS * ROWS, N), dtype=np.float32)
    scale = np.full((1, N), np.nan, dtype=np.float32)
    scaled = np.empty_like(y)
    expected = y / np.abs(calib).max(axis=0, keepdims=True)
    try:
        scale_kernel_with_flags[(BLOCKS,)](calib, y, scale, scaled, CAL=CAL, ROWS=ROWS, N=N,
                                           BLOCKS=BLOCKS)
        raise AssertionError("pl.signal was accepted")
    except pypto.CompilationError as e:
        assert "A2/A3 has no flag from one block to another" in str(e), e
        print(f"\nproducer -> consumers with pl.signal / pl.wait: refused at compile time:\n"
              f"    {str(e).splitlines()[0]}")
    for _ in range(3):
        scaled[:] = np.nan
        scale_kernel[(BLOCKS,)](calib, y, scale, scaled, CAL=CAL, ROWS=ROWS, N=N)
        # one fp32 division per element, as numpy does: bit-identical
        np.testing.assert_array_equal(scaled, expected)
    print(f"with pl.barrier(): block 0 produces a (1, {N}) scale, blocks 1..{BLOCKS - 1} load "
          f"it after the barrier: result == numpy. Its .pto:")
    pto = scale_kernel.compile(calib, y, scale, scaled, CAL=CAL, ROWS=ROWS, N=N).asm["pto"]
    for op in sync_lines(pto):
        print("   ", op)
    # Read it as: every block drains its pipes (block 0's store of the scale must be in global
    # memory), sets the all-vector-cores flag 14 from MTE3 and waits until every core has.

    # --- a grid larger than the cores ---------------------------------------------------------
    cores = pypto.get_target(compiled.metadata["target"]).vector_cores
    big = 64
    try:
        normalize_kernel[(big,)](x, np.zeros(big, np.float32), out, CHUNK=CHUNK, BLOCKS=big)
        raise AssertionError("a barrier grid larger than the cores was accepted")
    except ValueError as e:
        assert f"more blocks than the {cores} cores" in str(e), e
        print(f"\ngrid ({big},) with a barrier, on {cores} vector cores -> ValueError:\n    {e}")
    # Blocks up to the core count are fine (e.g. BLOCKS=48, or a cube kernel's 24).

    # --- a barrier some blocks never reach -----------------------------------------------------
    # PYPTO_SYNC_TIMEOUT (seconds, default 10) is compiled into the kernel: after that long
    # without progress the waiting blocks give up and the launch raises. One second here.
    try:
        with_env("PYPTO_SYNC_TIMEOUT", "1",
                 lambda: never_met_kernel[(2,)](np.zeros(32, np.float32)))
        raise AssertionError("the deadlock was not reported")
    except RuntimeError as e:
        assert "deadlocked" in str(e), e
        print(f"a pl.barrier() block 1 never reaches, PYPTO_SYNC_TIMEOUT=1 -> RuntimeError:\n"
              f"    {e}")

    # --- timing: one launch with a barrier, two launches, numpy -------------------------------
    sizes = [100_003] if args.quick else [100_003, 1 << 20, 1 << 22]
    host_cores = os.cpu_count() or 1
    block_counts = sorted({BLOCKS, min(BLOCKS, host_cores)})
    rows = []
    for n in sizes:
        x = rng.random(n, dtype=np.float32)
        out = np.empty_like(x)
        exact = x / x.astype(np.float64).sum()
        for blocks in block_counts:
            partial = np.zeros(blocks, np.float32)
            np.testing.assert_allclose(normalize(x, partial, out, blocks), exact, rtol=1e-5)
            np.testing.assert_allclose(normalize_two_launches(x, partial, out, blocks), exact,
                                       rtol=1e-5)
            # the host pool's threads spin for a moment after the launches above and would
            # compete with the barrier launch's threads for the host cores: let them go idle
            time.sleep(0.01)
            t_one = median_time(lambda: normalize(x, partial, out, blocks), args.reps)
            t_two = median_time(lambda: normalize_two_launches(x, partial, out, blocks),
                                args.reps)
            t_numpy = median_time(lambda: np.divide(x, x.sum(), out=out), args.reps)
            rows.append((n, blocks, t_one, t_two, t_numpy))

    print(f"\nfp32 x / sum(x), median of {args.reps} after a warm-up ({host_cores} host cores)")
    print(f"{'size':>9}  {'blocks':>6}  {'1 launch':>12}  {'2 launches':>12}  {'numpy':>12}  "
          f"{'ratio':>7}")
    for n, blocks, t_one, t_two, t_numpy in rows:
        print(f"{n:>9}  {blocks:>6}  {fmt(t_one)}  {fmt(t_two)}  {fmt(t_numpy)}  "
              f"{t_one / t_numpy:7.2f}")
    print(textwrap.fill(
        'ratio = 1 launch / numpy. These are host times, and here the barrier is NOT free: '
        'the blocks of a barrier launch must all be alive at once, so each is a host thread '
        'of its own, created for the launch, and a block that reaches the barrier early spins '
        'there, yielding its core. With no more blocks than host cores that costs little; '
        'with more (8 blocks here on fewer host cores), the OS decides when the blocks still '
        'working get a core back, and the launch typically waits for a scheduler tick (a few '
        'milliseconds). The two-launch version runs on the host pool (a few threads taking '
        'blocks in turn). On the NPU the trade is different: the cores of a launch all run '
        'anyway, a syncall is a hardware handshake between them, and a second launch goes '
        'through the host runtime again; x is read from global memory twice either way.', 96))


if __name__ == "__main__":
    main()
