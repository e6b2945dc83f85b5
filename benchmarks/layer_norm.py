"""Layer norm over the last axis: PyPTO against numpy and torch.nn.functional.layer_norm.

    python benchmarks/layer_norm.py [--reps N] [--quick]

y = (x - mean(x)) / sqrt(var(x) + eps) * w + b over rows of 1024 and 4096 fp32 elements. The
kernel is tutorial 04's: each program loads BLOCK_M whole rows once, computes the mean, the
variance (as the mean of (x - mean)^2, padded columns masked out), normalises, scales and
shifts on chip, and stores once: 2 x 4 bytes per element (plus w and b, once per program, from
the cache). That is the rate column, compared with the STREAM copy bandwidth measured in the
same run (% limit).

Goal (printed, not asserted): 4096 x 1024 >= 1.0x torch.nn.functional.layer_norm on the same
thread count. numpy (seven passes, single-threaded) is the other baseline.

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
MAX_TILE_ELEMENTS = 8192
EPS = 1e-5
GOALS = {(4096, 1024): 1.0}     # shape -> target ratio against torch


@pypto.jit
def layer_norm_kernel(x, w, b, y, eps, BLOCK_M: pl.constexpr, BLOCK_N: pl.constexpr):
    pid = pl.program_id(0)
    row = pid * BLOCK_M
    N = x.shape[1]
    t = pl.load(x, offsets=(row, 0), shape=(BLOCK_M, BLOCK_N)).to(pl.float32)
    mean = pl.sum(t, axis=1, keepdims=True) / N
    d = pl.where(pl.arange(0, BLOCK_N)[None, :] < N, t - mean, 0.0)
    var = pl.sum(d * d, axis=1, keepdims=True) / N
    rstd = pl.rsqrt(var + eps)
    wt = pl.load(w, offsets=(0,), shape=(BLOCK_N,))
    bt = pl.load(b, offsets=(0,), shape=(BLOCK_N,))
    pl.store(y, offsets=(row, 0), value=d * rstd * wt[None, :] + bt[None, :])


def block_sizes(n_cols):
    return row_blocks(n_cols, BLOCK_M, MAX_TILE_ELEMENTS)


def pypto_layer_norm(x, w, b, y, eps=EPS):
    block_m, block_n = block_sizes(x.shape[1])
    layer_norm_kernel[(pl.cdiv(x.shape[0], block_m),)](x, w, b, y, eps,
                                                      BLOCK_M=block_m, BLOCK_N=block_n)
    return y


def numpy_layer_norm(x, w, b, eps=EPS):
    mean = x.mean(axis=1, keepdims=True)
    d = x - mean
    var = (d * d).mean(axis=1, keepdims=True)
    return d / np.sqrt(var + eps) * w + b


def shapes(quick: bool):
    return [(1001, 781), (256, 1024)] if quick else [(1024, 1024), (4096, 1024), (4096, 4096)]


def run(args, limits=None) -> list[dict]:
    """One row per shape; ``limits`` from machine.measure() fills the % limit column."""
    from machine import bandwidth
    torch = import_torch()
    use_threads(default_threads(), torch)
    rng = np.random.default_rng(0)
    data = []
    for n_rows, n_cols in shapes(args.quick):
        # an offset mean (3) and a spread of 2, so the centring matters
        x = rng.standard_normal((n_rows, n_cols), dtype=np.float32) * 2 + 3
        w = rng.standard_normal(n_cols, dtype=np.float32)
        b = rng.standard_normal(n_cols, dtype=np.float32)
        data.append((x, w, b, np.empty_like(x)))

    # PyPTO checked against float64 numpy (fp32 sums of ~1000 terms: errors of a few 1e-6 on
    # outputs of order 1), then the libraries timed taking turns (torch's layer_norm has no
    # out=; it allocates its result).
    t_pypto, t_numpy, t_torch = [], [], []
    for x, w, b, y in data:
        exact = numpy_layer_norm(*(a.astype(np.float64) for a in (x, w, b)))
        np.testing.assert_allclose(pypto_layer_norm(x, w, b, y), exact, rtol=1e-4, atol=1e-4,
                                   err_msg=f"PyPTO layer norm {x.shape}")
        if torch is not None:
            base = TorchBaseline(torch)
            xt, wt, bt = (base.tensor(a) for a in (x, w, b))
            torch_fn = base.timed(
                lambda: torch.nn.functional.layer_norm(xt, (x.shape[1],), wt, bt, EPS))
        t = side_by_side({"pypto": lambda: pypto_layer_norm(x, w, b, y),
                          "numpy": lambda: numpy_layer_norm(x, w, b),
                          "torch": torch_fn if torch is not None else None}, args.reps)
        t_pypto.append(t["pypto"])
        t_numpy.append(t["numpy"])
        t_torch.append(t["torch"])

    rows = []
    for (x, _, _, _), tp, tn, tt in zip(data, t_pypto, t_numpy, t_torch):
        nbytes = 2 * x.size * 4
        target = GOALS.get(x.shape)
        ratio = speedup(tt, tp) if tt is not None else speedup(tn, tp)
        rows.append(make_row(
            "layer norm fp32", f"{x.shape[0]}x{x.shape[1]}", tp, tn, tt, ratio=ratio,
            limit_pct=pct_of(nbytes, tp, bandwidth(limits, "copy")),
            goal=f">= {target:.1f}x torch" if target else "",
            met=at_least(speedup(tt, tp), target) if target else None,
            work=nbytes, unit="GB/s", family="layer_norm"))
    return rows


def main(argv=None) -> None:
    main_for(__doc__.splitlines()[0], run, lambda args: (
        f"layer norm, median of {args.reps} (libraries taking turns, 3 rounds); ratio against torch (numpy "
        f"without torch); rows per program: ~16 KiB tiles, at most {BLOCK_M}; % limit: of the STREAM copy bandwidth (read x, "
        "write y)"),
             patterns=("copy",), flops=False, argv=argv)


if __name__ == "__main__":
    main()
