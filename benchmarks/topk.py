"""Top-k along rows: PyPTO's pl.topk against torch.topk (and numpy) on the host CPU, with the
kernel's modelled NPU time.

    python benchmarks/topk.py [--reps N] [--quick]

values, indices = top k of each row of an fp32 (rows, cols) matrix, largest first, k = 8.
Each program takes BLOCK_M whole rows into the UB; pl.topk of float32 is the chip's sort
instructions (docs/language.md, "Sorting"): TSORT32 over 32-element blocks, a tree of list-form
TMRGSORTs over each block's first k pairs, TGATHER to split values from indices. numpy's baseline is argpartition + a sort of the k
(single-threaded); torch.topk runs on the same thread count as PyPTO. NPU: the cycle model's
time for one launch on ascend910b1 (modelled, not measured).

A second table sorts whole fp32 rows with pl.sort (issue 33: 4096 x 1024 at the rate its
instructions allow): host time against np.sort, the modelled time, and how much of a core's
time its vector pipe (which runs every sort instruction) is busy.
"""
from __future__ import annotations

import numpy as np
from _harness import (default_threads, fmt_time, import_torch, main_table, parse_args,
                      print_table, side_by_side, use_threads)

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


@pypto.jit(target=TARGET)
def sort_rows(x, out, R: pl.constexpr, N: pl.constexpr):
    """Each row sorted ascending, R rows per program."""
    r = pl.program_id(0) * R
    pl.store(out, offsets=(r, 0), value=pl.sort(pl.load(x, offsets=(r, 0), shape=(R, N))))


SORT_R = 2           # rows per program of the sort (4 leaves the UB no room to double-buffer)


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


def run_sort(args) -> list:
    """pl.sort of fp32 rows (issue 33 asks 4096 x 1024 at the rate its instructions allow):
    host time against np.sort, and the modelled time with the share of it the vector pipe,
    which runs every sort instruction, is busy on a core (near 100 %: the instructions set
    the time, not the loads, stores or flags)."""
    rng = np.random.default_rng(1)
    rows = []
    for shape in [(256, 1024)] if args.quick else [(1024, 1024), (4096, 1024)]:
        x = rng.standard_normal(shape, dtype=np.float32)
        out = np.empty_like(x)
        launch = lambda: sort_rows[(shape[0] // SORT_R,)](x, out, R=SORT_R, N=shape[1])
        launch()
        np.testing.assert_array_equal(out, np.sort(x, axis=1), err_msg=f"sort {shape}")
        t = side_by_side({"pypto": launch, "numpy": lambda: np.sort(x, axis=1)}, args.reps,
                         rounds=1 if args.quick else 3)
        npu = model_kernel(sort_rows, (shape[0] // SORT_R,), x, out, R=SORT_R, N=shape[1])
        block = npu.blocks[0]
        span = max(r.end for r in block.records) - min(r.start for r in block.records)
        vector = sum(r.end - r.start for r in block.records if r.pipe == "V")
        rows.append([f"{shape[0]}x{shape[1]}", fmt_time(t["pypto"]), fmt_time(t["numpy"]),
                     f"{t['numpy'] / t['pypto']:.2f}x", f"{npu.time_ms * 1e3:.1f} us",
                     f"{vector / span:.0%}"])
    return rows


SORT_HEADERS = ["shape", "PyPTO host", "np.sort", "numpy/PyPTO", "NPU (model)",
                "vector pipe busy"]


def main(argv=None) -> None:
    main_table(__doc__.splitlines()[0], run, HEADERS, lambda args: (
        f"top-k fp32, largest first, median of {'1 round' if args.quick else '3 rounds'} of "
        f"{args.reps} after a warm-up each; {BLOCK_M} rows per program; NPU: cycle model, "
        f"{TARGET}"), argv)
    args = parse_args(__doc__.splitlines()[0], argv)
    print(f"\npl.sort of fp32 rows, ascending, {SORT_R} rows per program; host: median of "
          f"{'1 round' if args.quick else '3 rounds'} of {args.reps}; NPU: cycle model, {TARGET},"
          " and the share of a core's time its vector pipe is busy")
    print_table(SORT_HEADERS, run_sort(args))


if __name__ == "__main__":
    main()
