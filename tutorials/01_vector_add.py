"""Tutorial 01 -- vector add: blocks, program_id, the tail, the grid, and the generated PTO.

    python tutorials/01_vector_add.py [--quick] [--reps N]

One idea: a PyPTO kernel is written for ONE block of the data. You launch it over a grid of
blocks, each block asks "which one am I?" with pl.program_id, and works on its own slice.
"""
import argparse
import textwrap
import re

import numpy as np

import pypto
import pypto.language as pl

# ----------------------------------------------------------------------------------------------
# 1. The kernel.
#
# `@pypto.jit` does not run this function in Python. On the first call PyPTO reads its source,
# builds Tile IR from it, lowers that to PTO virtual instructions (the instruction set of an
# Ascend AI Core), compiles those to host machine code and caches the result on disk. Every
# call then launches that machine code.
#
# BLOCK is a `pl.constexpr`: a compile-time constant, so tile shapes are fixed numbers and the
# compiler knows exactly how much on-chip memory the kernel uses. A different BLOCK is a
# different kernel.
# ----------------------------------------------------------------------------------------------


@pypto.jit
def add_kernel(x, y, out, BLOCK: pl.constexpr):
    # Which block am I? Blocks are numbered 0, 1, 2, ... along grid axis 0.
    pid = pl.program_id(0)
    # This block owns elements [pid*BLOCK, pid*BLOCK + BLOCK).
    start = pid * BLOCK
    # pl.load copies that slice from global memory into a tile in the core's vector buffer
    # (the Unified Buffer, "vec"). The tile always has BLOCK elements...
    a = pl.load(x, offsets=(start,), shape=(BLOCK,))
    b = pl.load(y, offsets=(start,), shape=(BLOCK,))
    # ...the add runs on the whole tile at once (one vector instruction, `pto.tadd`)...
    c = a + b
    # ...and pl.store writes the tile back.
    pl.store(out, offsets=(start,), value=c)


# ----------------------------------------------------------------------------------------------
# 2. The tail, and why there is no `n` and no mask.
#
# With n = 10_000 and BLOCK = 4096 we need cdiv(10_000, 4096) = 3 blocks; the last one covers
# elements 8192..12287 but only 8192..9999 exist. In Triton you would build a mask from n.
# In PyPTO the tensor carries its own shape, and loads and stores are masked by it:
#   * pl.load gives `padding` (default 0) for elements past the end of the tensor;
#   * pl.store drops elements past the end: nothing beyond out[n-1] is ever written.
# (The kernel is specialised on the shapes it sees: a new length compiles a new kernel once,
# then it comes from the in-memory table or the disk cache.)
#
# 3. The grid.
#
# `add_kernel[grid](...)` launches one program per grid point. grid = (cdiv(n, BLOCK),) covers
# every element exactly once. The target chip has many AI Cores (48 vector cores on the
# default ascend910b1); here host threads play them (PYPTO_NUM_THREADS, default one per host
# core), each taking blocks until the grid is used up. Blocks must therefore not depend on
# each other's order.
# ----------------------------------------------------------------------------------------------


def add(x, y, out, block=4096):
    grid = (pl.cdiv(x.size, block),)
    add_kernel[grid](x, y, out, BLOCK=block)
    return out


def median_time(fn, reps):
    """Median seconds of ``reps`` calls after one warm-up call (which compiles or loads the
    kernel), with PyPTO's own benchmarking helper."""
    return pypto.testing.do_bench(fn, reps=reps) / 1e3


def fmt(seconds):
    return f"{seconds * 1e6:9.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:9.2f} ms"


def main():
    parser = argparse.ArgumentParser(description="PyPTO tutorial 01: vector add")
    parser.add_argument("--reps", type=int, default=5, help="timed repetitions (default 5)")
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    BLOCK = 4096

    # --- the tail, checked -------------------------------------------------------------------
    n = 10_000
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    # `out` is a view of the first n elements of a larger buffer full of NaN: if a store went
    # past the end of `out`, the NaNs after it would be overwritten.
    guard = np.full(n + BLOCK, np.nan, dtype=np.float32)
    out = guard[:n]
    add(x, y, out, BLOCK)
    # An fp32 add is exactly rounded both here and in numpy: the results are bit-identical.
    np.testing.assert_array_equal(out, x + y)
    assert np.isnan(guard[n:]).all(), "a store wrote past the end of the tensor"
    print(f"n={n}, BLOCK={BLOCK}: grid = ({pl.cdiv(n, BLOCK)},) blocks; result == numpy, and "
          f"the {guard.size - n} elements past the end were left untouched")

    # --- what was generated ------------------------------------------------------------------
    # .compile() builds (or fetches) the kernel for these arguments without running it.
    compiled = add_kernel.compile(x, y, out, BLOCK=BLOCK)
    print(f"\nkind={compiled.metadata['kind']} target={compiled.metadata['target']} "
          f"on-chip bytes={compiled.metadata['buffer_bytes']['vec']} of the vector buffer")
    print("PTO instructions of one block (print(compiled.asm['pto']) shows all of it):")
    for line in compiled.asm["pto"].splitlines():
        op = line.strip()
        if any(f"pto.{name}" in op for name in ("get_block_idx", "partition_view", "tload",
                                                 "tadd", "tstore")):
            # shorten the tile types to their location, dtype and shape
            op = re.sub(r"(!pto\.tile_buf<loc=\w+, dtype=\w+, rows=\d+, cols=\d+)[^>]*>",
                        r"\1, ...>", op)
            print("   ", op)
    # Read it as: get_block_idx is pl.program_id; partition_view names the window
    # [pid*BLOCK, pid*BLOCK + BLOCK) of a tensor (1-D tensors are viewed as 1 x n); tload
    # copies it into a tile buffer at a fixed address in the vector buffer, clipped to the
    # tensor's shape and filled with pad_value past its end (that is the mask); tadd adds two
    # tiles; tstore writes the result tile back, again clipped. The three 4096-element fp32
    # tiles take 3 x 16 KiB of the 192 KiB vector buffer.

    # --- timing against numpy -----------------------------------------------------------------
    sizes = [10_000, 1 << 16] if args.quick else [10_000, 1 << 16, 1 << 20, 1 << 22]
    rows = []
    for n in sizes:
        x = rng.standard_normal(n, dtype=np.float32)
        y = rng.standard_normal(n, dtype=np.float32)
        out = np.empty_like(x)
        add(x, y, out, BLOCK)
        np.testing.assert_array_equal(out, x + y)
        t_pypto = median_time(lambda: add(x, y, out, BLOCK), args.reps)
        t_numpy = median_time(lambda: np.add(x, y, out=out), args.reps)
        rows.append((n, t_pypto, t_numpy))

    print(f"\nfp32 vector add, median of {args.reps} after a warm-up")
    print(f"{'size':>9}  {'PyPTO':>12}  {'numpy':>12}  {'ratio':>7}")
    for n, tp, tn in rows:
        print(f"{n:>9}  {fmt(tp)}  {fmt(tn)}  {tp / tn:7.2f}")
    print(textwrap.fill(
        'ratio = PyPTO / numpy. For small arrays PyPTO pays a fixed launch cost (binding the '
        'arguments, handing blocks to threads) of the order of 100 us; for large ones both '
        'are limited by memory bandwidth.', 96))


if __name__ == "__main__":
    main()
