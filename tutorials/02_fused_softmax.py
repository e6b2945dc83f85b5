"""Tutorial 02 -- fused softmax: row reductions, broadcasting, -inf padding, and fusion.

    python tutorials/02_fused_softmax.py [--quick] [--reps N]

One idea: softmax(x)[i, j] = exp(x[i, j] - max_j x[i, :]) / sum_j exp(x[i, j] - max_j x[i, :])
needs whole rows, so each program loads a block of whole rows into on-chip memory once, does
every step there, and writes the result once. Numpy makes a full pass over memory per step.
"""
import argparse
import textwrap
import re

import numpy as np

import pypto
import pypto.language as pl

# ----------------------------------------------------------------------------------------------
# 1. The kernel: one block of BLOCK_M whole rows per program.
#
#            BLOCK_N (>= n_cols)
#         +------------------+---+
#   pid 0 |  BLOCK_M rows    |pad|     program `pid` owns rows [pid*BLOCK_M, pid*BLOCK_M+BLOCK_M)
#   pid 1 |                  |pad|     and ALL the columns: the tile is BLOCK_N wide, BLOCK_N is
#   ...   +------------------+---+     at least n_cols, so a row is never split between tiles.
#
# This tutorial takes the simple road: one tile spans a whole row, which works for rows of up
# to 8192 fp32 elements (see section 5). Longer rows need an "online" softmax that walks the
# row in column blocks carrying a running max and sum; that is not what this kernel does.
#
# 2. Reductions keep their axis with keepdims=True.
#
# pl.max(t, axis=1, keepdims=True) reduces each row of the (BLOCK_M, BLOCK_N) tile to one value
# and returns a (BLOCK_M, 1) tile; without keepdims it would be (BLOCK_M,). pl.sum likewise.
#
# 3. Broadcasting (M, 1) against (M, N).
#
# `t - m` subtracts a (BLOCK_M, 1) tile from a (BLOCK_M, BLOCK_N) one: numpy's broadcasting
# rules, the single column is repeated across the row. The compiler makes the repetition
# explicit (a `trowexpand` instruction, below); `e / s` does the same with the row sums.
#
# 4. padding=-inf makes the columns past n_cols vanish.
#
# The last BLOCK_N - n_cols columns of the tile lie outside the tensor, so pl.load fills them
# with `padding`. With -inf: max ignores them, exp(-inf - m) = 0 so they add nothing to the
# sum, and pl.store drops them again. No mask, no n_cols argument: the tensor knows its shape.
# (Rows past the last row of x are all -inf, so their m is -inf and -inf - (-inf) is NaN;
# that is harmless because those rows are never stored.)
# ----------------------------------------------------------------------------------------------


@pypto.jit
def softmax_kernel(x, out, BLOCK_M: pl.constexpr, BLOCK_N: pl.constexpr):
    pid = pl.program_id(0)
    row = pid * BLOCK_M
    # GM -> UB, once. Columns past the end of x read as -inf.
    t = pl.load(x, offsets=(row, 0), shape=(BLOCK_M, BLOCK_N), padding=float("-inf"))
    m = pl.max(t, axis=1, keepdims=True)        # (BLOCK_M, 1): the row maxima
    e = pl.exp(t - m)                           # (BLOCK_M, BLOCK_N) - (BLOCK_M, 1), broadcast
    s = pl.sum(e, axis=1, keepdims=True)        # (BLOCK_M, 1): the row sums
    # UB -> GM, once. Only the n_cols real columns are written.
    pl.store(out, offsets=(row, 0), value=e / s)


# ----------------------------------------------------------------------------------------------
# 5. Choosing the block sizes, and why fusing pays.
#
# The kernel keeps about three (BLOCK_M, BLOCK_N) fp32 tiles alive at once (t, the broadcast
# maxima, t - m; the planner reuses their buffers for exp, the sums and the quotient) in the
# Unified Buffer, the 192 KiB vector memory of an AI Core. So BLOCK_M * BLOCK_N may be at most
# 8192 elements. BLOCK_N = n_cols: any width >= n_cols works (the UB rows are padded to 32
# bytes by the compiler, the .pto marks the valid columns), but columns past n_cols are
# computed too, on padding values, and a row sum over a tile wider than the tensor's rows
# takes a slower, masked path (rows of 781 floats in 1024-wide tiles: 1.5x slower). Fewer rows
# than fit run faster here: the simulated cores are host cores, and a block whose tiles total
# ~16 KiB (BLOCK_M = 4096 // BLOCK_N rows, at least one, at most 8) keeps them in the core's
# L1 cache between the kernel's passes.
#
# Fusion: numpy's softmax is five passes over an (M, N) array in memory -- max reads x,
# x - m reads x and writes a temporary, exp reads and writes it, sum reads it, the division
# reads it and writes the result: five reads and three writes of M*N floats. The fused kernel
# reads x once and writes the result once; everything in between stays in the UB. On the NPU
# global memory bandwidth is what limits such kernels, so that is the whole game.
# ----------------------------------------------------------------------------------------------

MAX_TILE_ELEMENTS = 8192
TILE_TARGET_ELEMENTS = 4096     # rows per tile: ~16 KiB, so a block's tiles stay in a host core's L1


def block_sizes(n_cols):
    block_n = max(1, n_cols)                                  # whole rows, no padding
    if block_n > MAX_TILE_ELEMENTS:
        raise ValueError(f"rows of {n_cols} elements do not fit one tile in the UB; this "
                         f"kernel handles up to {MAX_TILE_ELEMENTS} columns")
    return max(1, min(8, TILE_TARGET_ELEMENTS // block_n)), block_n


def softmax(x, out):
    n_rows, n_cols = x.shape
    block_m, block_n = block_sizes(n_cols)
    softmax_kernel[(pl.cdiv(n_rows, block_m),)](x, out, BLOCK_M=block_m, BLOCK_N=block_n)
    return out


def softmax_numpy(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def import_torch():
    try:
        import torch
    except Exception:  # noqa: BLE001 - torch is optional; a broken install counts as absent
        return None
    return torch


def median_time(fn, reps):
    """Median seconds of ``reps`` calls after one warm-up call (which compiles or loads the
    kernel), with PyPTO's own benchmarking helper."""
    return pypto.testing.do_bench(fn, reps=reps) / 1e3


def fmt(seconds):
    if seconds is None:
        return f"{'-':>12}"
    return f"{seconds * 1e6:9.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:9.2f} ms"


def main():
    parser = argparse.ArgumentParser(description="PyPTO tutorial 02: fused softmax")
    parser.add_argument("--reps", type=int, default=5, help="timed repetitions (default 5)")
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    torch = import_torch()

    # --- correctness, with ragged sizes: neither dimension is a multiple of its block --------
    n_rows, n_cols = 1001, 781
    x = rng.standard_normal((n_rows, n_cols), dtype=np.float32) * 4
    out = np.empty_like(x)
    softmax(x, out)
    block_m, block_n = block_sizes(n_cols)
    exact = softmax_numpy(x.astype(np.float64))
    # fp32 exp, sum and divide: a few units in the last place, well inside 1e-5 relative.
    np.testing.assert_allclose(out, exact, rtol=1e-5, atol=1e-12)
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)
    summary = (f"{n_rows}x{n_cols} fp32, BLOCK_M={block_m} BLOCK_N={block_n}, "
            f"grid=({pl.cdiv(n_rows, block_m)},): matches a float64 numpy softmax "
            f"(max error {np.abs(out - exact).max():.1e})")
    if torch is not None:
        expected = torch.softmax(torch.from_numpy(x), dim=1).numpy()
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-12)
        summary += " and torch.softmax"
    print(summary)

    # --- what was generated -------------------------------------------------------------------
    compiled = softmax_kernel.compile(x, out, BLOCK_M=block_m, BLOCK_N=block_n)
    vec = compiled.metadata["buffer_bytes"]["vec"]
    ub = pypto.get_target(compiled.metadata["target"]).buffers["vec"]
    print(f"\nkind={compiled.metadata['kind']}: uses {vec // 1024} KiB of the {ub // 1024} KiB "
          "UB; the PTO instructions between the one tload and the one tstore:")
    for line in compiled.asm["pto"].splitlines():
        op = line.strip()
        m = re.match(r"pto\.(\w+) ins\(([^:]*):", op)
        if m and m.group(1) not in ("tload", "tstore"):
            # the instruction, then each operand buffer with its rows x cols (all are f32 here)
            shapes = [f"{r}x{c}" for r, c in re.findall(r"rows=(\d+), cols=(\d+)", op)]
            names = [n.strip() for n in m.group(2).split(",")]
            names.append(re.search(r"outs\((%\w+)", op).group(1))
            ins = ", ".join(f"{n}:{s}" for n, s in zip(names[:-1], shapes))
            print(f"    {m.group(1):<11} {ins:<28} -> {names[-1]}:{shapes[-1]}")
    # Read it as: trowmax reduces each row of the 8x1024 tile into an 8x1 column; trowexpand
    # copies that column across a full tile (the broadcast of section 3); tsub, texp; trowsum
    # and trowexpand again for the sums; tdiv. Buffer names (%vecN) repeat: the memory planner
    # reuses a buffer as soon as the value in it is dead, which is why three tiles suffice.

    # Tiles that do not fit the UB are refused at compile time, with the tiles listed. (A
    # BLOCK_N smaller than n_cols, on the other hand, would compile and quietly normalise only
    # the first BLOCK_N columns: that is why softmax() picks the block sizes itself.)
    try:
        softmax_kernel.compile(x, out, BLOCK_M=1, BLOCK_N=2 * MAX_TILE_ELEMENTS)
    except pypto.CompilationError as e:
        msg = str(e).splitlines()[0].split(": in ", 1)[-1]
        print(f"\nBLOCK_N={2 * MAX_TILE_ELEMENTS} -> {msg.split(' Tiles in it')[0]}")

    # --- timing against numpy (and torch) -------------------------------------------------------
    shapes = [(1001, 781)] if args.quick else [(1024, 1024), (4096, 1024), (4096, 4096),
                                              (2048, 8192)]
    rows = []
    for shape in shapes:
        x = rng.standard_normal(shape, dtype=np.float32)
        out = np.empty_like(x)
        np.testing.assert_allclose(softmax(x, out), softmax_numpy(x.astype(np.float64)),
                                   rtol=1e-5, atol=1e-12)
        t_pypto = median_time(lambda: softmax(x, out), args.reps)
        t_numpy = median_time(lambda: softmax_numpy(x), args.reps)
        t_torch = None
        if torch is not None:
            xt = torch.from_numpy(x)
            t_torch = median_time(lambda: torch.softmax(xt, dim=1), args.reps)
        rows.append((f"{shape[0]}x{shape[1]}", t_pypto, t_numpy, t_torch))

    threads = f"torch: {torch.get_num_threads()} threads" if torch else "torch: not installed"
    print(f"\nfp32 row softmax, median of {args.reps} after a warm-up ({threads})")
    print(f"{'shape':>9}  {'PyPTO':>12}  {'numpy':>12}  {'torch':>12}  {'ratio':>7}")
    for shape, tp, tn, tt in rows:
        print(f"{shape:>9}  {fmt(tp)}  {fmt(tn)}  {fmt(tt)}  {tp / tn:7.2f}")
    print(textwrap.fill(
        'ratio = PyPTO / numpy. These are times of the host simulation: host threads play the '
        'AI Cores and run each PTO instruction as a vectorised loop over a tile that sits in '
        "the host's cache, so the memory traffic that fusion saves on the NPU barely shows "
        'here. numpy is single-threaded; torch uses its own thread pool and a fused softmax '
        'of its own.', 96))

if __name__ == "__main__":
    main()
