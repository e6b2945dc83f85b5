"""Top-k along rows: PyPTO's pl.topk against torch.topk (and numpy) on the host CPU, with the
kernel's modelled NPU time.

    python benchmarks/topk.py [--reps N] [--quick]

values, indices = top k of each row of an fp32 (rows, cols) matrix, largest first, k = 8.
Each program takes BLOCK_M whole rows into the UB; pl.topk of float32 is the chip's sort
instructions (docs/language.md, "Sorting"): TSORT32 over 32-element blocks, a tree of list-form
TMRGSORTs over each block's first k pairs, TGATHER to split values from indices. numpy's baseline is argpartition + a sort of the k
(single-threaded); torch.topk runs on the same thread count as PyPTO. NPU: the cycle model's
time for one launch on ascend910b1 (modelled, not measured).
"""
from __future__ import annotations

import numpy as np
from _harness import default_threads, fmt_time, import_torch, main_table, side_by_side, use_threads

import pypto
import pypto.language as pl
from pypto.backends.ascend.model.launch import model_kernel

BLOCK_M = 4          # rows per program: the sort's key, payload and pair tiles (24 bytes an element) fill the UB
K = 8
TARGET = "ascend910b1"


@pypto.jit
def topk_kernel(x, values, indices, BLOCK_M: pl.constexpr, N: pl.constexpr, K: pl.constexpr):
    row = pl.program_id(0) * BLOCK_M
    t = pl.load(x, offsets=(row, 0), shape=(BLOCK_M, N), padding=float("-inf"))
    v, i = pl.topk(t, K)
    pl.store(values, offsets=(row, 0), value=v)
    pl.store(indices, offsets=(row, 0), value=i)


def grid(x):
    return (pl.cdiv(x.shape[0], BLOCK_M),)


def pypto_topk(x, v, i):
    topk_kernel[grid(x)](x, v, i, BLOCK_M=BLOCK_M, N=x.shape[1], K=K)
    return v, i


def numpy_topk(x):
    part = np.argpartition(-x, K - 1, axis=1)[:, :K]
    vals = np.take_along_axis(x, part, axis=1)
    order = np.argsort(-vals, axis=1, kind="stable")
    return np.take_along_axis(vals, order, axis=1), np.take_along_axis(part, order, axis=1)


def check(x, v, i):
    """Values and indices against numpy's stable order (random normal rows: no ties)."""
    order = np.argsort(-x, axis=1, kind="stable")[:, :K]
    np.testing.assert_array_equal(i, order, err_msg=f"topk indices {x.shape}")
    np.testing.assert_array_equal(v, np.take_along_axis(x, order, axis=1),
                                  err_msg=f"topk values {x.shape}")


def shapes(quick: bool):
    return [(301, 1000)] if quick else [(1024, 1024), (4096, 1024)]


def run(args) -> list:
    torch = import_torch()
    use_threads(default_threads(), torch)
    rng = np.random.default_rng(0)
    rows = []
    for shape in shapes(args.quick):
        x = rng.standard_normal(shape, dtype=np.float32)
        v, i = np.empty((shape[0], K), np.float32), np.empty((shape[0], K), np.int32)
        check(x, *pypto_topk(x, v, i))
        fns = {"pypto": lambda: pypto_topk(x, v, i), "numpy": lambda: numpy_topk(x),
               "torch": None}
        if torch is not None:
            xt = torch.from_numpy(x)
            tv, ti = torch.topk(xt, K, dim=1)
            np.testing.assert_array_equal(tv.numpy(), v, err_msg="torch.topk values")
            fns["torch"] = lambda: torch.topk(xt, K, dim=1)
        t = side_by_side(fns, args.reps, rounds=1 if args.quick else 3)
        npu = model_kernel(topk_kernel, grid(x), x, v, i, BLOCK_M=BLOCK_M, N=shape[1], K=K)
        rows.append([f"{shape[0]}x{shape[1]}", K, fmt_time(t["pypto"]), fmt_time(t["numpy"]),
                     fmt_time(t["torch"]) if t["torch"] else "-",
                     f"{t['torch'] / t['pypto']:.2f}x" if t["torch"] else "-",
                     f"{npu.time_ms * 1e3:.1f} us"])
    return rows


HEADERS = ["shape", "k", "PyPTO host", "numpy", "torch", "torch/PyPTO", "NPU (model)"]


def main(argv=None) -> None:
    main_table(__doc__.splitlines()[0], run, HEADERS, lambda args: (
        f"top-k fp32, largest first, median of {'1 round' if args.quick else '3 rounds'} of "
        f"{args.reps} after a warm-up each; {BLOCK_M} rows per program; NPU: cycle model, "
        f"{TARGET}"), argv)


if __name__ == "__main__":
    main()
