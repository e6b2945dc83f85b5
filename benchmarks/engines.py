"""The pto-isa engine against the native engine: build time and run time, side by side.

    python benchmarks/engines.py [--reps N] [--quick]

For each kernel (vector add 1 M fp32, softmax 1024 x 1024 fp32, matmul 512^3 fp16 → fp32) the
table gives the cold build time of each engine in a fresh cache directory (native: PyPTO's
compile; pto-isa: ptoas and clang, the compile being cached by then, and in the first row
the one-time precompiled header of pto-isa), the median run time over ``--reps`` warm
launches, and the ratio pto-isa / native. Both engines run the same compiled PTO program, so their results are
checked against each other too. Figures, no goal: the pto-isa engine exists to check PyPTO
against the vendor's implementation of each instruction, not to be fast. It needs ptoas,
pto-isa's headers and clang++ 19 (docs/engines.md); without them it says which is missing.
"""
from __future__ import annotations

import os
import tempfile
import time

import numpy as np

import pypto
from _harness import fmt_time, median_time, parse_args, print_table
from matmul import TILES, matmul_kernel
from softmax import block_sizes, softmax_kernel
from vector_add import BLOCK, add_kernel


def cases(quick: bool):
    n, rows, cols, mm = (65536, 64, 1024, 128) if quick else (1 << 20, 1024, 1024, 512)
    rng = np.random.default_rng(0)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    s = rng.standard_normal((rows, cols), dtype=np.float32)
    a = rng.standard_normal((mm, mm)).astype(np.float16)
    b = rng.standard_normal((mm, mm)).astype(np.float16)
    # each benchmark's own tiles, but softmax's rows rounded up to 8: the simulator's TROWSUM
    # wants the row-sum column tile (whole 32 bytes: 8 floats) to have the source's rows
    bm, bn = block_sizes(cols)
    bm = -(-bm // 8) * 8
    tm, tn, tk = TILES["float16"]
    yield (f"vector add {n // 1024} K fp32", add_kernel, (-(-n // BLOCK),),
           lambda: (x, y, np.empty_like(x)), {"BLOCK": BLOCK})
    yield (f"softmax {rows}x{cols} fp32", softmax_kernel, (-(-rows // bm),),
           lambda: (s, np.empty_like(s)), {"BLOCK_M": bm, "BLOCK_N": bn})
    yield (f"matmul {mm}^3 fp16", matmul_kernel, (-(-mm // tm), -(-mm // tn)),
           lambda: (a, b, np.empty((mm, mm), np.float32), mm, mm, mm),
           {"BM": tm, "BN": tn, "BK": tk})


def build_and_time(kernel, engine: str, grid, make_args, constants, reps):
    jit = pypto.jit(kernel.fn, engine=engine)
    args = make_args()
    t0 = time.perf_counter()
    jit[grid](*args, **constants)             # cold: compile (and build) on first call
    build = time.perf_counter() - t0
    run = median_time(lambda: jit[grid](*args, **constants), reps, warmup=0)
    return build, run, args


def main(argv=None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv)
    from pypto.backends.ptoisa import toolchain
    try:
        toolchain.find()
    except toolchain.ToolMissing as e:
        print(f"skipped: {e}")
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="pypto-bench-engines-") as cache:
        os.environ["PYPTO_CACHE_DIR"] = cache          # cold builds for both engines
        for name, kernel, grid, make_args, constants in cases(args.quick):
            nb, nr, nargs = build_and_time(kernel, "native", grid, make_args, constants,
                                           args.reps)
            pb, pr, pargs = build_and_time(kernel, "pto-isa", grid, make_args, constants,
                                           args.reps)
            out = [a for a in nargs if isinstance(a, np.ndarray)][-1]
            sim = [a for a in pargs if isinstance(a, np.ndarray)][-1]
            agree = float(np.max(np.abs(out.astype(np.float64) - sim)))
            rows.append([name, fmt_time(nb), fmt_time(pb), fmt_time(nr), fmt_time(pr),
                         f"{pr / nr:.0f}x", f"{agree:.1e}"])
    print_table(["kernel", "native build", "pto-isa build", "native run", "pto-isa run",
                 "run ratio", "max |diff|"], rows)


if __name__ == "__main__":
    main()
