"""Matrix multiply: PyPTO's cube kernel against numpy (OpenBLAS) and torch on the host CPU.

    python benchmarks/matmul.py [--reps N] [--quick]

Cases: fp32 x fp32 -> fp32 at 256^3, 512^3, 1024^3, and fp16 x fp16 -> fp32 (fp32 accumulate)
at 512^3 and 1024^3. GFLOP/s counts 2*M*N*K flops.

Baselines:
  numpy  fp32 GEMM through its BLAS (OpenBLAS in the PyPI wheels). numpy has no fp16 GEMM (its
         fp16 matmul is a slow generic loop), so for the fp16 rows the baseline is the fp32 GEMM
         on fp32 copies of the inputs, made before timing: what a numpy user would do.
  torch  torch.matmul with the same dtypes. torch's CPU fp16 @ fp16 has no fast kernel (a few
         GFLOP/s, about 2 s at 1024^3), so it is timed once, without warm-up, marked '*'.

Goals (printed, not asserted): fp32 1024^3 >= 0.75x numpy's GFLOP/s; fp16 in / fp32 accumulate
1024^3 >= 0.6x numpy's fp32 GFLOP/s and >= 50x torch's fp16 (two rows). % limit: of the fp32
FMA peak measured in the same run (machine.py).

Each library is measured for every case before the next one starts, with a pause in between,
so only one thread pool is busy at a time; all three use PyPTO's thread count (torch through
torch.set_num_threads, numpy's OpenBLAS through threadpoolctl or openblas_set_num_threads).

Tile sizes are fixed choices, from a sweep on a 2-core host (GFLOP/s at 1024^3, median of 9):
  fp32: BMxBNxBK 64x64x64 186-193, 128x128x64 156-160, 64x128x64 150, 128x64x32 191-197,
        128x64x64 186-196, 128x64x128 199-203, 256x64x64 195  ->  128x64x64
  fp16: 64x64x64 75, 128x64x64 76, 128x128x64 135, 64x128x64 134, 128x128x32 138,
        64x256x64 172, 128x256x32 171-177, 128x256x64 174-179  ->  128x256x64
Wide tiles pay off for fp16 (each fp16 operand tile is half the bytes, and 128x256 fills
exactly the 128 KiB L0C accumulator in fp32); for fp32 a 128x256 accumulator would not fit,
and 128x64 was as good as any.
"""
from __future__ import annotations

import os

import numpy as np
from _harness import (
    TorchBaseline,
    at_least,
    blas_info,
    default_threads,
    import_torch,
    main_for,
    make_row,
    median_time,
    pct_of,
    settle,
    speedup,
    use_threads,
)

import pypto
import pypto.language as pl

TILES = {"float32": (128, 64, 64), "float16": (128, 256, 64)}   # BM, BN, BK


@pypto.jit
def matmul_kernel(a, b, c, M, N, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    pm = pl.program_id(0)
    pn = pl.program_id(1)
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in range(0, K, BK):
        ta = pl.load(a, offsets=(pm * BM, k), shape=(BM, BK))
        tb = pl.load(b, offsets=(k, pn * BN), shape=(BK, BN))
        acc = pl.matmul(ta, tb, acc=acc)
    pl.store(c, offsets=(pm * BM, pn * BN), value=acc.to(c.dtype))


def pypto_matmul(a, b, c):
    (M, K), N = a.shape, b.shape[1]
    BM, BN, BK = TILES[a.dtype.name]
    matmul_kernel[(pl.cdiv(M, BM), pl.cdiv(N, BN))](a, b, c, M, N, K, BM=BM, BN=BN, BK=BK)


def check(a, b, c) -> None:
    """|C - A@B| <= (K+1) u (|A| @ |B|) elementwise, u = 2^-24: the worst-case bound of any
    fp32 summation order (inputs are exact in fp32, the accumulator is fp32)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = (a.shape[1] + 1) * 2.0 ** -24 * (np.abs(a64) @ np.abs(b64))
    err = np.abs(c.astype(np.float64) - a64 @ b64)
    assert np.all(err <= bound), f"PyPTO matmul {a.dtype} {a.shape}: max error {err.max()}"


def cases(quick: bool):
    if quick:
        return [("float32", 128), ("float16", 128)]
    return [("float32", 256), ("float32", 512), ("float32", 1024),
            ("float16", 512), ("float16", 1024)]


def run(args, limits=None) -> list[dict]:
    """One row per case (two for fp16 1024^3, one per goal); ``limits`` from machine.measure()
    fills the % limit column."""
    from machine import flops as flops_limit
    torch = import_torch()
    use_threads(default_threads(), torch)
    rng = np.random.default_rng(0)
    data = []
    for dtype, n in cases(args.quick):
        a = rng.standard_normal((n, n), dtype=np.float32).astype(dtype)
        b = rng.standard_normal((n, n), dtype=np.float32).astype(dtype)
        data.append((dtype, n, a, b, np.empty((n, n), np.float32)))

    # Phase 1: PyPTO, checked first.
    t_pypto = []
    for _, _, a, b, c in data:
        pypto_matmul(a, b, c)
        check(a, b, c)
        settle()    # check() ran BLAS: let its spinning worker threads go idle first
        t_pypto.append(median_time(lambda: pypto_matmul(a, b, c), args.reps))
    settle()

    # Phase 2: numpy, fp32 GEMM (fp16 inputs upcast before timing).
    t_numpy = []
    for _, _, a, b, c in data:
        a32, b32 = a.astype(np.float32), b.astype(np.float32)
        t_numpy.append(median_time(lambda: np.matmul(a32, b32, out=c), args.reps))
    settle()

    # Phase 3: torch with the inputs' own dtype.
    t_torch = [None] * len(data)
    if torch is not None:
        base = TorchBaseline(torch)
        for i, (dtype, _, a, b, _) in enumerate(data):
            ta, tb = base.tensor(a), base.tensor(b)
            if dtype == "float16" and not base.npu:
                t_torch[i] = median_time(lambda: torch.matmul(ta, tb), 1, warmup=0)
            elif dtype == "float16":
                t_torch[i] = median_time(base.timed(lambda: torch.matmul(ta, tb)), args.reps)
            else:
                tc = base.empty((a.shape[0], b.shape[1]), torch.float32)
                t_torch[i] = median_time(base.timed(lambda: torch.matmul(ta, tb, out=tc)),
                                         args.reps)
        settle()

    rows = []
    limit = flops_limit(limits)
    blas = f"numpy's BLAS: {blas_info()}"
    if os.environ.get("OPENBLAS_CORETYPE"):
        blas += (f" -- OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']} is set and forces "
                 "that kernel (machine.py's sgemm line shows OpenBLAS's own choice)")
    fp16_noted = False
    for (dtype, n, _, _, _), tp, tn, tt in zip(data, t_pypto, t_numpy, t_torch):
        fl = 2.0 * n ** 3
        common = dict(limit_pct=pct_of(fl, tp, limit), work=fl, unit="GFLOP/s",
                      family="matmul")
        goal = n == 1024
        ratio = speedup(tn, tp)
        if dtype == "float32":
            rows.append(make_row("matmul fp32", f"{n}^3", tp, tn, tt, ratio=ratio,
                                 goal=">= 0.75x numpy" if goal else "",
                                 met=at_least(ratio, 0.75) if goal else None,
                                 note=f"matmul fp32 {n}^3: {blas}" if goal else "", **common))
            continue
        note = ""
        if not fp16_noted:
            fp16_noted = True
            on_npu = torch is not None and TorchBaseline(torch).npu
            note = ("matmul fp16->fp32: numpy runs the fp32 GEMM on fp32 copies (it has no fp16 "
                    "GEMM); torch runs fp16 @ fp16" + (" on the NPU" if on_npu else
                                                       ", one rep without warm-up (it has no "
                                                       "fast CPU kernel for it)"))
        rows.append(make_row(
            "matmul fp16->fp32", f"{n}^3", tp, tn, tt, ratio=ratio,
            goal=">= 0.6x numpy fp32" if goal else "", met=at_least(ratio, 0.6) if goal else None,
            note=note, **common))
        if goal:
            ratio = speedup(tt, tp)
            rows.append(make_row("matmul fp16->fp32", f"{n}^3", tp, tn, tt, ratio=ratio,
                                 goal=">= 50x torch fp16", met=at_least(ratio, 50.0), **common))
    return rows


def main(argv=None) -> None:
    main_for(__doc__.splitlines()[0], run, lambda args: (
        f"matmul, median of {args.reps} after a warm-up; tiles BMxBNxBK: "
        + ", ".join(f"{d} {'x'.join(map(str, t))}" for d, t in TILES.items())
        + "; % limit: of the fp32 FMA peak"),
             patterns=(), flops=True, argv=argv)


if __name__ == "__main__":
    main()
