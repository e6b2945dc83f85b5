"""Tutorial 03 -- matmul: tiles, the cube, a loop-carried accumulator, fp16 in / fp32 out.

    python tutorials/03_matmul.py [--quick] [--reps N]

One idea: C = A @ B is cut into BM x BN output tiles, one program each; a program walks the K
dimension in steps of BK, feeding A and B tiles to the cube unit, which accumulates into a
tile that stays on chip for the whole loop.
"""
import argparse
import textwrap
import time

import numpy as np

import pypto
import pypto.language as pl
from pypto.backends.ascend.model.launch import model_kernel

# ----------------------------------------------------------------------------------------------
# 1. Tiles and the 2-D grid.
#
#        N                      program (pm, pn) computes the BM x BN tile of C at
#     +--+--+--+                rows [pm*BM, pm*BM+BM) and columns [pn*BN, pn*BN+BN),
#   M |  |  |  |   C            so the grid is (cdiv(M, BM), cdiv(N, BN)) and
#     +--+--+--+                pl.program_id(0) / pl.program_id(1) say which tile is ours.
#
# 2. The cube and its memories.
#
# An AI Core multiplies matrices in its cube unit, which only reads its operands from two small
# buffers and only writes to a third:
#
#   global memory --tload--> L1 ("mat") --tmov--> L0A ("left")  --\
#                                       --tmov--> L0B ("right") ---+--> cube --> L0C ("acc")
#
# You write only pl.load and pl.matmul; PyPTO sees that the loaded tiles feed a matmul, puts
# them in L1, and inserts the moves into L0A/L0B (you can see them in the Tile IR below).
#
# 3. The loop-carried accumulator.
#
# `acc` starts as zeros in L0C. `acc = pl.matmul(ta, tb, acc=acc)` adds ta @ tb into it; since
# `acc` is reassigned inside the loop, it becomes a loop-carried value (scf.for iter_args in the
# IR) that lives in L0C across all K steps and is never written back to memory until the final
# pl.store. Tails work as in tutorial 01: past the edge of A or B a load gives zeros
# (padding=0), and zeros add nothing to the dot products, so M, N and K need not be multiples
# of the tile sizes; the store drops what lies outside C.
#
# 4. fp16 in, fp32 accumulate.
#
# The cube multiplies fp16 (or bf16) operands and accumulates in fp32: acc is declared fp32,
# and `acc.to(c.dtype)` converts it on the way out (a no-op here, since C is fp32).
# ----------------------------------------------------------------------------------------------


@pypto.jit
def matmul_kernel(a, b, c, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    pm = pl.program_id(0)
    pn = pl.program_id(1)
    acc = pl.zeros((BM, BN), dtype=pl.float32)                  # in L0C
    for k in range(0, K, BK):
        ta = pl.load(a, offsets=(pm * BM, k), shape=(BM, BK))   # GM -> L1 -> L0A
        tb = pl.load(b, offsets=(k, pn * BN), shape=(BK, BN))   # GM -> L1 -> L0B
        acc = pl.matmul(ta, tb, acc=acc)                        # cube: acc += ta @ tb
    pl.store(c, offsets=(pm * BM, pn * BN), value=acc.to(c.dtype))


BM, BN, BK = 128, 128, 64


def matmul(a, b, c):
    (M, K), N = a.shape, b.shape[1]
    matmul_kernel[(pl.cdiv(M, BM), pl.cdiv(N, BN))](a, b, c, K, BM=BM, BN=BN, BK=BK)
    return c


def check(a, b, c):
    """Assert |C - A@B| <= (K+1) * 2^-24 * (|A| @ |B|), elementwise.

    That is the worst-case rounding error of an fp32 dot product of length K, whatever the
    order of the additions (fp16 inputs are exact in fp32). Returns the max error."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    exact = a64 @ b64
    bound = (a.shape[1] + 1) * 2.0 ** -24 * (np.abs(a64) @ np.abs(b64))
    err = np.abs(c - exact)
    assert np.all(err <= bound), f"error {err.max()} exceeds the fp32 bound"
    return err.max(), exact


def median_time(fn, reps):
    """Median seconds of ``reps`` calls after one warm-up call (which compiles or loads the
    kernel), with PyPTO's own benchmarking helper."""
    return pypto.testing.do_bench(fn, reps=reps) / 1e3


def fmt(seconds):
    return f"{seconds * 1e6:9.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:9.2f} ms"


def main():
    parser = argparse.ArgumentParser(description="PyPTO tutorial 03: matmul")
    parser.add_argument("--reps", type=int, default=5, help="timed repetitions (default 5)")
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    args = parser.parse_args()
    rng = np.random.default_rng(0)

    # --- correctness, with ragged sizes (no dimension is a multiple of its tile) ------------
    M, N, K = 300, 200, 250
    a = rng.standard_normal((M, K), dtype=np.float32).astype(np.float16)
    b = rng.standard_normal((K, N), dtype=np.float32).astype(np.float16)
    c = np.empty((M, N), dtype=np.float32)
    matmul(a, b, c)
    err, exact = check(a, b, c)
    # For comparison: merely storing the exact result in fp16 would cost this much.
    fp16_rounding = np.abs(exact.astype(np.float16).astype(np.float64) - exact).max()
    print(f"fp16 {M}x{K} @ {K}x{N} -> fp32: max error {err:.2e} (within the fp32 bound); "
          f"rounding the result to fp16 alone would give {fp16_rounding:.2e}")

    # --- what the compiler made of it -------------------------------------------------------
    compiled = matmul_kernel.compile(a, b, c, K, BM=BM, BN=BN, BK=BK)
    print(f"\nkind={compiled.metadata['kind']} (it uses the cube); Tile IR of the K loop:")
    for line in compiled.asm["tile_ir"].splitlines():
        if any(op in line for op in ("scf.for", "tile.load", "tile.mov", "tile.matmul")):
            print("   ", line.strip())
    # Each tile value is annotated with its memory (mat = L1, left = L0A, right = L0B,
    # acc = L0C) and its byte offset in that buffer (@N).

    # --- the on-chip memory it uses ---------------------------------------------------------
    used = compiled.metadata["buffer_bytes"]
    capacity = pypto.get_target(compiled.metadata["target"]).buffers
    print(f"\non-chip memory for BM={BM} BN={BN} BK={BK} (metadata['buffer_bytes']):")
    names = {"mat": "L1", "left": "L0A", "right": "L0B", "acc": "L0C", "vec": "UB"}
    for loc, label in names.items():
        print(f"    {label:<4}({loc:<5}) {used[loc] // 1024:4d} KiB of {capacity[loc] // 1024:4d} KiB")
    # L0C holds BM*BN fp32 = 64 KiB; L0A holds BM*BK fp16 = 16 KiB. Tiles that do not fit are
    # refused at compile time, with the tile that overflowed:
    try:
        matmul_kernel.compile(a, b, c, K, BM=256, BN=256, BK=64)
    except pypto.CompilationError as e:
        first_line = str(e).splitlines()[0]          # "file:line:col: in kernel: message"
        print("    BM=BN=256 ->", first_line.split(": in ", 1)[-1].split(" Tiles in it")[0])

    # --- what the NPU would take ------------------------------------------------------------
    # There is no NPU here: the cycle model of the 910B (docs/cycle_model.md, calibrated
    # against instruction timings and kernels measured on the chip) says how long one launch
    # would take, and how busy the cube (M pipe) and the loads (MTE2) would be. Beside it,
    # pto-isa's hand-written GEMM on a 24-core board (shared/reference/ascend910b.md).
    board = {1536: (38.8, 54.5, 72.2), 3072: (206.7, 79.0, 90.9)}   # us, cube %, TLOAD %
    n = 1536 if args.quick else 3072
    a = np.zeros((n, n), np.float16)
    c = np.zeros((n, n), np.float32)
    m = model_kernel(matmul_kernel, (n // BM, n // BN), a, a, c, n, BM=BM, BN=BN, BK=BK)
    core_time = len({blk.core for blk in m.blocks}) * m.cycles
    board_us, board_cube, board_tload = board[n]
    print(f"\nmodelled on {m.target.name}, {n}^3: {m.time_ms * 1e3:.1f} us = "
          f"{2 * n ** 3 / m.time_ms / 1e9:.0f} TFLOPS, cube busy "
          f"{m.pipe_busy['M'] / core_time:.0%}, TLOAD {m.pipe_busy['MTE2'] / core_time:.0%}; "
          f"pto-isa's GEMM on the board: {board_us} us = {2 * n ** 3 / board_us / 1e6:.0f} "
          f"TFLOPS, cube {board_cube:.0f}%, TLOAD {board_tload:.0f}%")
    print(textwrap.fill(
        "Each K step here waits for its loads: tutorial 06's num_stages=2 overlaps them with "
        "the cube, and with 128 x 256 tiles benchmarks/matmul.py models the same plain kernel "
        "at 0.8 x the board.", 96))

    # --- timing against numpy -----------------------------------------------------------------
    # numpy has no fp16 GEMM, so its side is the fp32 BLAS GEMM on fp32 copies of the inputs.
    sizes = [128] if args.quick else [256, 512, 1024]
    rows = []
    for n in sizes:
        a = rng.standard_normal((n, n), dtype=np.float32).astype(np.float16)
        b = rng.standard_normal((n, n), dtype=np.float32).astype(np.float16)
        c = np.empty((n, n), dtype=np.float32)
        check(a, b, matmul(a, b, c))
        a32, b32 = a.astype(np.float32), b.astype(np.float32)
        # check() used numpy's BLAS, whose worker threads keep spinning for ~0.1 s after a
        # call and would steal cores from PyPTO's threads: let them go idle before timing.
        time.sleep(0.2)
        t_pypto = median_time(lambda: matmul(a, b, c), args.reps)
        t_numpy = median_time(lambda: np.matmul(a32, b32, out=c), args.reps)
        rows.append((n, t_pypto, t_numpy))

    print(f"\nfp16 x fp16 -> fp32 matmul (numpy: fp32 GEMM), median of {args.reps} after a warm-up")
    print(f"{'size':>9}  {'PyPTO':>12}  {'numpy':>12}  {'ratio':>7}  {'PyPTO GFLOP/s':>13}")
    for n, tp, tn in rows:
        print(f"{str(n) + '^3':>9}  {fmt(tp)}  {fmt(tn)}  {tp / tn:7.2f}  "
              f"{2 * n ** 3 / tp / 1e9:13.1f}")
    print(textwrap.fill(
        'ratio = PyPTO / numpy (< 1: PyPTO faster). Host threads emulate the cube with '
        'vectorised loops over the tiles. numpy is OpenBLAS here, and slow on this host: '
        'alone, a 128^3 fp32 GEMM takes ~0.3 ms (~14 GFLOP/s), and timed right after '
        "PyPTO's launches its threads compete with PyPTO's pool threads for the cores, which "
        'can cost it milliseconds; so the ratio says more about the host than about the '
        'kernel. benchmarks/matmul.py compares tile sizes, torch and a tuned sgemm.', 96))


if __name__ == "__main__":
    main()
