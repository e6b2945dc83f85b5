"""Tutorial 04 -- layer norm: masked statistics, a (N,) weight broadcast over rows, debug mode.

    python tutorials/04_layer_norm.py [--quick] [--reps N]

One idea: y = (x - mean(x)) / sqrt(var(x) + eps) * w + b over the last axis is two row
reductions and some elementwise work, all on one block of rows that stays on chip. The only
subtlety is the padded columns of the tile, which must be kept out of the variance.
"""
import argparse
import os
import textwrap

import numpy as np

import pypto
import pypto.language as pl

# ----------------------------------------------------------------------------------------------
# 1. The kernel.
#
# As in tutorial 02, program `pid` owns BLOCK_M whole rows and the tile is BLOCK_N >= N columns
# wide (rows of up to 8192 fp32 elements; longer rows would need a loop over column blocks).
#
# * N = x.shape[1]: a kernel can read a tensor's extents. The kernel is specialised on the
#   shapes it is called with, so N is a constant in the generated code.
# * eps is a float argument: a runtime f32 scalar, so changing it does not recompile.
# * .to(pl.float32) computes in fp32 whatever x holds (a no-op for fp32 x; fp16 and bf16
#   inputs are widened), and pl.store converts the result to y's dtype.
#
# 2. The mask.
#
# Columns past N load as 0 (the default padding), which is right for the sum: the mean is the
# sum over the tile divided by N, not by BLOCK_N. But in those columns t - mean = -mean, not 0,
# and its square would be added to the variance. pl.where keeps the real columns and zeros the
# rest: pl.arange(0, BLOCK_N) is the tile (0, 1, ..., BLOCK_N-1); [None, :] makes it a
# (1, BLOCK_N) row, `< N` a (1, BLOCK_N) bool mask, and pl.where broadcasts it over the
# BLOCK_M rows. (block_sizes below makes the tile exactly N wide, so here the mask keeps every
# column; it is what makes the kernel right for any wider tile.)
#
# 3. Broadcasting both ways.
#
# mean and rstd are (BLOCK_M, 1) columns, repeated along each row (PTO `trowexpand`); the
# weight and bias are loaded once per program as (BLOCK_N,) tiles and w[None, :] is a
# (1, BLOCK_N) row repeated down the rows (`tcolexpand`). rsqrt runs on the (BLOCK_M, 1)
# column: BLOCK_M square roots, not BLOCK_M * BLOCK_N.
#
# Because the row is on chip, the variance is computed the accurate way, as the mean of
# (x - mean)^2 in a second pass over the tile, rather than as E[x^2] - E[x]^2 (which loses
# digits when |mean| >> std): the second pass costs no memory traffic.
# ----------------------------------------------------------------------------------------------


@pypto.jit
def layer_norm_kernel(x, w, b, y, eps, BLOCK_M: pl.constexpr, BLOCK_N: pl.constexpr):
    pid = pl.program_id(0)
    row = pid * BLOCK_M
    N = x.shape[1]
    t = pl.load(x, offsets=(row, 0), shape=(BLOCK_M, BLOCK_N)).to(pl.float32)
    mean = pl.sum(t, axis=1, keepdims=True) / N                 # (BLOCK_M, 1)
    d = pl.where(pl.arange(0, BLOCK_N)[None, :] < N, t - mean, 0.0)
    var = pl.sum(d * d, axis=1, keepdims=True) / N              # (BLOCK_M, 1)
    rstd = pl.rsqrt(var + eps)                                  # (BLOCK_M, 1)
    wt = pl.load(w, offsets=(0,), shape=(BLOCK_N,))             # (BLOCK_N,)
    bt = pl.load(b, offsets=(0,), shape=(BLOCK_N,))
    pl.store(y, offsets=(row, 0), value=d * rstd * wt[None, :] + bt[None, :])


MAX_TILE_ELEMENTS = 8192        # BLOCK_M * BLOCK_N fp32 elements that fit the UB (192 KiB)
TILE_TARGET_ELEMENTS = 4096     # rows per tile: ~16 KiB, so a block's tiles stay in a host core's L1


def block_sizes(n_cols):
    block_n = max(1, n_cols)                                  # whole rows, no padding
    if block_n > MAX_TILE_ELEMENTS:
        raise ValueError(f"rows of {n_cols} elements do not fit one tile in the UB; this "
                         f"kernel handles up to {MAX_TILE_ELEMENTS} columns")
    return max(1, min(8, TILE_TARGET_ELEMENTS // block_n)), block_n


def layer_norm(x, w, b, y, eps=1e-5):
    n_rows, n_cols = x.shape
    block_m, block_n = block_sizes(n_cols)
    layer_norm_kernel[(pl.cdiv(n_rows, block_m),)](x, w, b, y, eps,
                                                  BLOCK_M=block_m, BLOCK_N=block_n)
    return y


def layer_norm_numpy(x, w, b, eps=1e-5):
    mean = x.mean(axis=1, keepdims=True)
    d = x - mean
    var = (d * d).mean(axis=1, keepdims=True)
    return d / np.sqrt(var + eps) * w + b


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


def inputs(rng, n_rows, n_cols, dtype=np.float32):
    # an offset mean (3) and a spread of 2, so the centring matters
    x = (rng.standard_normal((n_rows, n_cols), dtype=np.float32) * 2 + 3).astype(dtype)
    w = rng.standard_normal(n_cols, dtype=np.float32).astype(dtype)
    b = rng.standard_normal(n_cols, dtype=np.float32).astype(dtype)
    return x, w, b


def main():
    parser = argparse.ArgumentParser(description="PyPTO tutorial 04: layer norm")
    parser.add_argument("--reps", type=int, default=5, help="timed repetitions (default 5)")
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    torch = import_torch()
    eps = 1e-5

    # --- correctness, with ragged sizes --------------------------------------------------------
    n_rows, n_cols = 1001, 781
    x, w, b = inputs(rng, n_rows, n_cols)
    y = np.empty_like(x)
    layer_norm(x, w, b, y, eps)
    block_m, block_n = block_sizes(n_cols)
    exact = layer_norm_numpy(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64),
                             eps)
    # fp32 sums of 781 terms: errors of a few 1e-6 on outputs of order 1.
    np.testing.assert_allclose(y, exact, rtol=1e-4, atol=1e-4)
    summary = (f"{n_rows}x{n_cols} fp32, BLOCK_M={block_m} BLOCK_N={block_n}: matches a float64 "
            f"numpy layer norm (max error {np.abs(y - exact).max():.1e})")
    if torch is not None:
        expected = torch.nn.functional.layer_norm(
            torch.from_numpy(x), (n_cols,), torch.from_numpy(w), torch.from_numpy(b), eps)
        np.testing.assert_allclose(y, expected.numpy(), rtol=1e-4, atol=1e-4)
        summary += " and torch.nn.functional.layer_norm"
    print(summary)

    # The same kernel on fp16 tensors: fp16 in, fp32 statistics, fp16 out (a new
    # specialisation, compiled on first use). The result is, almost everywhere, the exact one
    # rounded to fp16; the rare others are where fp32 rounding in the kernel tips the choice.
    x16, w16, b16 = (a.astype(np.float16) for a in (x, w, b))
    y16 = np.empty_like(x16)
    layer_norm(x16, w16, b16, y16, eps)
    exact16 = layer_norm_numpy(*(a.astype(np.float64) for a in (x16, w16, b16)), eps)
    np.testing.assert_allclose(y16.astype(np.float64), exact16, rtol=2e-3, atol=2e-3)
    rounded = np.mean(y16 == exact16.astype(np.float16))
    assert rounded > 0.99, rounded
    print(f"fp16 in/out: {rounded:.2%} of the outputs are the exact result rounded to fp16 "
          f"(max error {np.abs(y16 - exact16).max():.1e})")

    # --- debug mode: the reference interpreter -------------------------------------------------
    # With PYPTO_INTERPRET=1 a launch does not compile anything: the kernel's Tile IR is run op
    # by op by numpy (pypto/backends/interpreter/), block after block in order. It is the executable
    # definition of every op, so it is where to go when a compiled kernel looks wrong. The
    # variable is read at each launch, so it can be switched on for one call.
    y_debug = np.empty_like(x)
    saved = os.environ.get("PYPTO_INTERPRET")
    os.environ["PYPTO_INTERPRET"] = "1"
    try:
        layer_norm(x, w, b, y_debug, eps)
    finally:
        if saved is None:
            del os.environ["PYPTO_INTERPRET"]
        else:
            os.environ["PYPTO_INTERPRET"] = saved
    np.testing.assert_allclose(y_debug, y, rtol=1e-5, atol=1e-5)
    print(f"PYPTO_INTERPRET=1: same result as the compiled kernel, {np.mean(y_debug == y):.0%} "
          f"of the elements bit for bit, max difference {np.abs(y_debug - y).max():.1e}")
    # Not all bit for bit: the interpreter sums a row with numpy (pairwise), the compiled
    # trowsum in another order, and float addition is not associative.

    # --- what was generated ----------------------------------------------------------------------
    compiled = layer_norm_kernel.compile(x, w, b, y, eps, BLOCK_M=block_m, BLOCK_N=block_n)
    names = [line.strip().split()[0][4:] for line in compiled.asm["pto"].splitlines()
             if line.strip().startswith("pto.t")]
    print(f"\nPTO instructions of one block ({len(names)}):")
    print(textwrap.fill(" ".join(names), width=92, initial_indent="    ",
                        subsequent_indent="    "))
    # tci is pl.arange, tcmps the `< N` against a scalar, tsel is pl.where, texpands fills the
    # 0.0 tile, trowexpand / tcolexpand the two kinds of broadcast, tdivs / tadds take a scalar
    # operand (N, eps), treshape is the [None, :].

    # --- timing against numpy (and torch) ---------------------------------------------------------
    shapes = [(1001, 781)] if args.quick else [(1024, 1024), (4096, 1024), (4096, 4096),
                                              (2048, 8192)]
    rows = []
    for shape in shapes:
        x, w, b = inputs(rng, *shape)
        y = np.empty_like(x)
        ref = layer_norm_numpy(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64),
                               eps)
        np.testing.assert_allclose(layer_norm(x, w, b, y, eps), ref, rtol=1e-4, atol=1e-4)
        t_pypto = median_time(lambda: layer_norm(x, w, b, y, eps), args.reps)
        t_numpy = median_time(lambda: layer_norm_numpy(x, w, b, eps), args.reps)
        t_torch = None
        if torch is not None:
            xt, wt, bt = (torch.from_numpy(a) for a in (x, w, b))
            t_torch = median_time(
                lambda: torch.nn.functional.layer_norm(xt, (shape[1],), wt, bt, eps), args.reps)
        rows.append((f"{shape[0]}x{shape[1]}", t_pypto, t_numpy, t_torch))

    threads = f"torch: {torch.get_num_threads()} threads" if torch else "torch: not installed"
    print(f"\nfp32 layer norm, median of {args.reps} after a warm-up ({threads})")
    print(f"{'shape':>9}  {'PyPTO':>12}  {'numpy':>12}  {'torch':>12}  {'ratio':>7}")
    for shape, tp, tn, tt in rows:
        print(f"{shape:>9}  {fmt(tp)}  {fmt(tn)}  {fmt(tt)}  {tp / tn:7.2f}")
    print(textwrap.fill(
        'ratio = PyPTO / numpy. numpy makes seven passes over (M, N) arrays (the mean, x - '
        'mean, its square, the variance, the division, * w, + b), five of which write a new '
        'temporary; the kernel reads x once and writes y once. Host threads simulate the AI '
        'Cores, so these are times of the simulation on this machine, not of an NPU.', 96))


if __name__ == "__main__":
    main()
