"""Fused row softmax: PyPTO against numpy and torch.softmax on the host CPU.

    python benchmarks/softmax.py [--reps N] [--quick]

softmax(x)[i, :] = exp(x[i, :] - max x[i, :]) / sum exp(x[i, :] - max x[i, :]), fp32, over
rows of 1024 and 4096 elements. The kernel is tutorial 02's: each program loads BLOCK_M whole
rows into the UB once (columns past the end padded with -inf), reduces and normalises them
there and stores them once, so it moves 2 x 4 bytes per element: the rate column, compared
with the STREAM copy bandwidth measured in the same run (% limit).

Goal (printed, not asserted): 4096 x 1024 >= 1.0x torch.softmax on the same thread count.
numpy's softmax (max, subtract, exp, sum, divide: five passes, single-threaded) is the other
baseline.

Rows per program: as many as make a ~16 KiB tile, at most BLOCK_M = 8, at least one, the tile
exactly as wide as the rows (``_harness.row_blocks``, which gives the sweep behind the rule).
"""
from __future__ import annotations

import numpy as np
from _harness import (
    TorchBaseline,
    at_least,
    default_threads,
    import_torch,
    main_for,
    make_row,
    pct_of,
    row_blocks,
    side_by_side,
    speedup,
    use_threads,
)

import pypto
import pypto.language as pl

BLOCK_M = 8
MAX_TILE_ELEMENTS = 8192        # fp32 elements of one tile that fit the UB three times over
GOALS = {(4096, 1024): 1.0}     # shape -> target ratio against torch


@pypto.jit
def softmax_kernel(x, out, BLOCK_M: pl.constexpr, BLOCK_N: pl.constexpr):
    pid = pl.program_id(0)
    row = pid * BLOCK_M
    t = pl.load(x, offsets=(row, 0), shape=(BLOCK_M, BLOCK_N), padding=float("-inf"))
    m = pl.max(t, axis=1, keepdims=True)
    e = pl.exp(t - m)
    s = pl.sum(e, axis=1, keepdims=True)
    pl.store(out, offsets=(row, 0), value=e / s)


def block_sizes(n_cols):
    return row_blocks(n_cols, BLOCK_M, MAX_TILE_ELEMENTS)


def pypto_softmax(x, out):
    block_m, block_n = block_sizes(x.shape[1])
    softmax_kernel[(pl.cdiv(x.shape[0], block_m),)](x, out, BLOCK_M=block_m, BLOCK_N=block_n)
    return out


def numpy_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def shapes(quick: bool):
    return [(1001, 781), (256, 1024)] if quick else [(1024, 1024), (4096, 1024), (4096, 4096)]


def run(args, limits=None) -> list[dict]:
    """One row per shape; ``limits`` from machine.measure() fills the % limit column."""
    from machine import bandwidth
    torch = import_torch()
    use_threads(default_threads(), torch)
    rng = np.random.default_rng(0)
    data = [(rng.standard_normal(s, dtype=np.float32) * 4, np.empty(s, np.float32))
            for s in shapes(args.quick)]

    # PyPTO checked against a float64 softmax (fp32 exp, sum and divide: a few units in the
    # last place), then the libraries timed taking turns (torch into a preallocated output,
    # like the others).
    t_pypto, t_numpy, t_torch = [], [], []
    for x, out in data:
        np.testing.assert_allclose(pypto_softmax(x, out), numpy_softmax(x.astype(np.float64)),
                                   rtol=1e-5, atol=1e-12, err_msg=f"PyPTO softmax {x.shape}")
        if torch is not None:
            base = TorchBaseline(torch)
            xt, ot = base.tensor(x), base.empty(x.shape, torch.float32)
        t = side_by_side({"pypto": lambda: pypto_softmax(x, out),
                          "numpy": lambda: numpy_softmax(x),
                          "torch": base.timed(lambda: torch.softmax(xt, dim=1, out=ot))
                          if torch else None},
                         args.reps)
        t_pypto.append(t["pypto"])
        t_numpy.append(t["numpy"])
        t_torch.append(t["torch"])

    rows = []
    for (x, _), tp, tn, tt in zip(data, t_pypto, t_numpy, t_torch):
        nbytes = 2 * x.size * 4
        target = GOALS.get(x.shape)
        ratio = speedup(tt, tp) if tt is not None else speedup(tn, tp)
        rows.append(make_row(
            "softmax fp32", f"{x.shape[0]}x{x.shape[1]}", tp, tn, tt, ratio=ratio,
            limit_pct=pct_of(nbytes, tp, bandwidth(limits, "copy")),
            goal=f">= {target:.1f}x torch" if target else "",
            met=at_least(speedup(tt, tp), target) if target else None,
            work=nbytes, unit="GB/s", family="softmax"))
    return rows


def main(argv=None) -> None:
    main_for(__doc__.splitlines()[0], run, lambda args: (
        f"softmax, median of {args.reps} (libraries taking turns, 3 rounds); ratio against torch (numpy without "
        f"torch); rows per program: ~16 KiB tiles, at most {BLOCK_M}; % limit: of the STREAM copy bandwidth (read x, write out)"),
             patterns=("copy",), flops=False, argv=argv)


if __name__ == "__main__":
    main()
