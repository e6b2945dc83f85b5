"""Elementwise add: PyPTO against numpy and torch on the host CPU.

    python benchmarks/vector_add.py [--reps N] [--quick]

out = x + y is memory bound: every element moves 3 x itemsize bytes (two loads, one store), so
the rate column (3 arrays x bytes / PyPTO time) is the figure to compare with the machine's
memory bandwidth, measured in the same run (STREAM add, machine.py): that is the % limit
column. For small arrays the time is dominated by the fixed cost of one launch (argument
binding and handing the grid to the worker threads), not by the add.

Goals (printed, not asserted): fp32 at 16 M elements >= 0.95x the faster of numpy
(np.add(..., out=)) and torch; fp16 at 1 M elements >= 1.0x torch (numpy has no fp16 vector
kernels, ~1 GB/s).

Each library is measured for every size before the next library starts, with a pause in
between, so only one thread pool is ever busy (torch's OpenMP workers keep spinning for a while
after a call and would otherwise steal cores from PyPTO's). torch runs on as many threads as
PyPTO (torch.set_num_threads); numpy's add is single-threaded.

BLOCK: 8192 elements per program, a fixed choice. Swept on a 2-core host (fp32, 1 M / 16 M
elements, median of 7): BLOCK=1024 355 us / 7.3 ms, 4096 322 us / 5.9 ms, 8192 296 us / 5.1 ms,
16384 321 us / 5.4 ms; fp16 behaves the same. Three fp32 tiles of 8192 use 96 KiB of the
192 KiB vector buffer (UB).
"""
from __future__ import annotations

import numpy as np
from _harness import (
    TorchBaseline,
    at_least,
    default_threads,
    fmt_size,
    import_torch,
    main_for,
    make_row,
    pct_of,
    side_by_side,
    speedup,
    use_threads,
)

import pypto
import pypto.language as pl

BLOCK = 8192

# (dtype, n) -> (baseline the goal names, target ratio)
GOALS = {("float32", 1 << 24): ("best", 0.95), ("float16", 1 << 20): ("torch", 1.0)}


@pypto.jit
def add_kernel(x, y, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    a = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    b = pl.load(y, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(pid * BLOCK,), value=a + b)


def pypto_add(x, y, out):
    add_kernel[(pl.cdiv(x.size, BLOCK),)](x, y, out, BLOCK=BLOCK)


def cases(quick: bool):
    if quick:
        return [(np.float32, 1 << 16), (np.float32, 100_003), (np.float16, 1 << 16)]
    return [(np.float32, 1 << 16), (np.float32, 1 << 20), (np.float32, 1 << 24),
            (np.float16, 1 << 20)]


def time_add(data, reps, torch):
    """(PyPTO, numpy, torch) median times per (x, y, out) in ``data``, the libraries taking
    turns (``side_by_side``). PyPTO's result is checked against numpy first: an add is exactly
    rounded in both (fp16 is added in fp32 and rounded once more, which for fp16 gives the same
    bits), so equality is exact."""
    t_pypto, t_numpy, t_torch = [], [], []
    for x, y, out in data:
        out.fill(0)
        pypto_add(x, y, out)
        np.testing.assert_array_equal(out, np.add(x, y), err_msg=f"PyPTO add {x.dtype} {x.size}")
        # on the CPU torch works on the same memory (from_numpy shares it)
        base = TorchBaseline(torch)
        tx, ty, tout = (base.tensor(a) for a in (x, y, out)) if torch else (None,) * 3
        t = side_by_side({"pypto": lambda: pypto_add(x, y, out),
                          "numpy": lambda: np.add(x, y, out=out),
                          "torch": base.timed(lambda: torch.add(tx, ty, out=tout))
                          if torch else None},
                         reps)
        t_pypto.append(t["pypto"])
        t_numpy.append(t["numpy"])
        t_torch.append(t["torch"])
    return t_pypto, t_numpy, t_torch


def run(args, limits=None) -> list[dict]:
    """One row per (dtype, size); ``limits`` from machine.measure() fills the % limit column."""
    from machine import bandwidth
    torch = import_torch()
    use_threads(default_threads(), torch)
    rng = np.random.default_rng(0)
    data, meta = [], []
    for dtype, n in cases(args.quick):
        x = rng.standard_normal(n, dtype=np.float32).astype(dtype)
        y = rng.standard_normal(n, dtype=np.float32).astype(dtype)
        data.append((x, y, np.empty_like(x)))
        meta.append((np.dtype(dtype).name, n))
    t_pypto, t_numpy, t_torch = time_add(data, args.reps, torch)

    rows = []
    for (name, n), (x, _, _), tp, tn, tt in zip(meta, data, t_pypto, t_numpy, t_torch):
        nbytes = 3 * n * x.itemsize
        base, target = GOALS.get((name, n), ("best", None))
        if base == "torch":
            ratio, goal = speedup(tt, tp), f">= {target:.2f}x torch"
        else:
            best = min(t for t in (tn, tt) if t is not None)
            ratio = speedup(best, tp)
            goal = f">= {target:.2f}x best(numpy, torch)" if target else ""
        note = ""
        if name == "float16":
            note = (f"vector add fp16 {fmt_size(n)}: numpy has no fp16 vector kernels "
                    "(it converts element by element)")
        rows.append(make_row(f"vector add {name}", fmt_size(n), tp, tn, tt, ratio=ratio,
                             limit_pct=pct_of(nbytes, tp, bandwidth(limits, "add")),
                             goal=goal, met=at_least(ratio, target) if target else None,
                             work=nbytes, unit="GB/s", family="vector_add",
                             note=note))
    return rows


def main(argv=None) -> None:
    main_for(__doc__.splitlines()[0], run, lambda args: (
        f"vector add, median of {args.reps} (libraries taking turns, 3 rounds); % limit: of the STREAM add "
        "bandwidth (3 arrays)"),
             patterns=("add",), flops=False, argv=argv)


if __name__ == "__main__":
    main()
