"""Tutorial 08 -- safety nets: the sanitizer, the grid-less launch warning, errors that name the fix.

    python tutorials/08_safety_nets.py [--quick] [--reps N]

One idea: some mistakes compile and run. Loads past a tensor's end read the padding value and
stores past it are dropped -- defined behaviour, so a kernel with a grid too small, or a
launch that forgot its [grid], silently leaves outputs unwritten. The sanitizer watches every
load and store of a launch and says so, with the block and the source line.
"""
import argparse
import os
import platform
import sys
import warnings

import numpy as np

import pypto
import pypto.language as pl
from pypto.testing import do_bench

# ----------------------------------------------------------------------------------------------
# 1. A block-indexed kernel: program i adds the i-th block of BLOCK elements.
# ----------------------------------------------------------------------------------------------


@pypto.jit
def add(x, y, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    a = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    b = pl.load(y, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(pid * BLOCK,), value=a + b)


@pypto.jit
def last_block_wins(x, out, BLOCK: pl.constexpr):
    """Every block writes the same place: a race (the value left depends on core order)."""
    t = pl.load(x, offsets=(pl.program_id(0) * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(0,), value=t)


@pypto.jit
def softmax_rows(x, out, BM: pl.constexpr, BN: pl.constexpr):
    t = pl.load(x, offsets=(pl.program_id(0) * BM, 0), shape=(BM, BN))
    e = pl.exp(t - pl.max(t, axis=1, keepdims=True))
    pl.store(out, offsets=(pl.program_id(0) * BM, 0), value=e / pl.sum(e, axis=1, keepdims=True))


@pypto.jit
def fill_if_asked(x, out, n):
    """A buffer filled in a runtime branch only: with n == 0 the store reads it unfilled (the
    compiler refuses the read no fill reaches; only a run sees this one)."""
    buf = pl.alloc_buffer((16,))
    if n > 0:
        pl.async_load(x, buf, offsets=(0,))
        pl.synchronize()
    pl.store(out, offsets=(0,), value=buf)


def show(title, call):
    """Run ``call`` and print the warnings or error it gives."""
    print(f"\n--- {title}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            call()
        except pypto.CompilationError as e:
            print(f"CompilationError: {e}")
    for w in caught:
        print(f"{w.category.__name__}: {w.message}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args(argv)
    n = 1 << (16 if args.quick else 20)
    block = 1024
    x, y = np.ones(n, np.float32), np.ones(n, np.float32)
    out = np.zeros(n, np.float32)

    # -- 2. without the sanitizer: the grid-less launch warning, once per kernel -----------
    show("add(x, y, out) without [grid]: one program per core ran", lambda:
         add(x, y, out, BLOCK=block))
    print(f"(written: {int((out == 2).sum()):,} of {n:,} outputs)")

    # -- 3. with the sanitizer: each report ------------------------------------------------
    with pypto.sanitize():
        show("sanitized, forgotten [grid]", lambda: add(x, y, out, BLOCK=block))
        show("sanitized, grid one block short", lambda:
             add[(n // block - 1,)](x, y, out, BLOCK=block))
        show("sanitized, grid one block too many", lambda:
             add[(n // block + 1,)](x, y, out, BLOCK=block))
        show("sanitized, every block stores to the start", lambda:
             last_block_wins[(3,)](x, out[:block], BLOCK=block))
        show("sanitized, a buffer its branch did not fill", lambda:
             fill_if_asked[(1,)](x, out[:16], 0))
        show("sanitized, the right grid: no report", lambda:
             add[(n // block,)](x, y, out, BLOCK=block))

    # -- 4. what the sanitizer costs ---------------------------------------------------------
    m = np.random.default_rng(0).random((n // 256, 1024), dtype=np.float32)
    costs = [(f"add {n:,}, BLOCK={b}", lambda b=b: add[(n // b,)](x, y, out, BLOCK=b))
             for b in (1024, 4096)]
    costs.append((f"softmax {m.shape[0]}x1024, BM=8", lambda:
                  softmax_rows[(m.shape[0] // 8,)](m, m.copy(), BM=8, BN=1024)))
    print(f"\non {platform.machine()} with {os.cpu_count()} host cores (the median of "
          f"{args.reps} warm launches each):")
    print(f"{'kernel':>28}  {'native':>10}  {'sanitized':>10}  slowdown")
    for name, call in costs:
        native = do_bench(call, reps=args.reps)                  # ms, the median
        with pypto.sanitize():
            checked = do_bench(call, reps=args.reps)
        print(f"{name:>28}  {native:8.2f}ms  {checked:8.1f}ms  "
              f"{checked / native:6.0f}x")
    print("(sanitized: the reference interpreter runs every block, one numpy op per tile op, "
          "with every window checked; the more work each op does, the less the per-op Python "
          "cost counts. Off, none of it runs)")

    # -- 5. errors that name the fix ------------------------------------------------------------
    m = np.zeros((256, 1024), np.float32)
    show("a tile too big for the UB: the live tiles, and the constexprs that fit", lambda:
         softmax_rows[(4,)](m, m.copy(), BM=64, BN=1024))


if __name__ == "__main__":
    main(sys.argv[1:])
