"""Elementwise add: PyPTO against numpy and torch on the host CPU.

    python benchmarks/vector_add.py [--reps N] [--quick]

out = x + y is memory bound: every element moves 3 x itemsize bytes (two loads, one store), so
the GB/s column (3 arrays x bytes / PyPTO time) is the figure to compare with the machine's
memory bandwidth. For small arrays the time is dominated by the fixed cost of one launch
(argument binding and handing the grid to the worker threads), not by the add.

Each library is measured for every size before the next library starts, with a pause in
between, so only one thread pool is ever busy (torch's OpenMP workers keep spinning for a while
after a call and would otherwise steal cores from PyPTO's).

BLOCK: 8192 elements per program, a fixed choice. Swept on a 2-core host (fp32, 1 M / 16 M
elements, median of 7): BLOCK=1024 355 us / 7.3 ms, 4096 322 us / 5.9 ms, 8192 296 us / 5.1 ms,
16384 321 us / 5.4 ms; fp16 behaves the same. Three fp32 tiles of 8192 use 96 KiB of the
192 KiB vector buffer (UB).
"""
from __future__ import annotations

import numpy as np

import pypto
import pypto.language as pl

from _harness import (fmt_num, fmt_size, fmt_time, import_torch, median_time, parse_args,
                      print_environment, print_load_during_run, print_table, settle)

BLOCK = 8192


@pypto.jit
def add_kernel(x, y, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    a = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    b = pl.load(y, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(pid * BLOCK,), value=a + b)


def pypto_add(x, y, out):
    add_kernel[(pl.cdiv(x.size, BLOCK),)](x, y, out, BLOCK=BLOCK)


def main(argv=None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv)
    torch = import_torch()
    print_environment(torch)

    if args.quick:
        cases = [(np.float32, 1 << 16), (np.float32, 100_003), (np.float16, 1 << 16)]
    else:
        cases = [(np.float32, 1 << 16), (np.float32, 1 << 20), (np.float32, 1 << 24),
                 (np.float16, 1 << 20)]

    rng = np.random.default_rng(0)
    data = []
    for dtype, n in cases:
        x = rng.standard_normal(n, dtype=np.float32).astype(dtype)
        y = rng.standard_normal(n, dtype=np.float32).astype(dtype)
        data.append((dtype, n, x, y, np.empty_like(x)))

    # Phase 1: PyPTO, checked against numpy. An add is exactly rounded in both (fp16 is added
    # in fp32 and rounded once more, which for fp16 gives the same bits), so equality is exact.
    t_pypto = []
    for dtype, n, x, y, out in data:
        out.fill(0)
        pypto_add(x, y, out)
        np.testing.assert_array_equal(out, np.add(x, y), err_msg=f"PyPTO add {dtype} {n}")
        t_pypto.append(median_time(lambda: pypto_add(x, y, out), args.reps))
    settle()

    # Phase 2: numpy.
    t_numpy = [median_time(lambda: np.add(x, y, out=out), args.reps)
               for _, _, x, y, out in data]
    settle()

    # Phase 3: torch, on the same memory (torch.from_numpy shares it).
    t_torch = [None] * len(data)
    if torch is not None:
        for i, (_, _, x, y, out) in enumerate(data):
            tx, ty, tout = (torch.from_numpy(a) for a in (x, y, out))
            t_torch[i] = median_time(lambda: torch.add(tx, ty, out=tout), args.reps)
        settle()

    rows = []
    for (dtype, n, x, _, _), tp, tn, tt in zip(data, t_pypto, t_numpy, t_torch):
        best = min(t for t in (tn, tt) if t is not None)
        gbps = 3 * n * x.itemsize / tp / 1e9
        rows.append([f"add {np.dtype(dtype).name}", fmt_size(n), fmt_time(tp), fmt_time(tn),
                     fmt_time(tt), f"{tp / best:.2f}", fmt_num(gbps)])
    print(f"\nvector add, median of {args.reps} after a warm-up; "
          "PyPTO/best = PyPTO time / faster baseline (< 1: PyPTO is faster)")
    print_table(["kernel", "size", "PyPTO", "numpy", "torch", "PyPTO/best", "PyPTO GB/s"], rows)
    print_load_during_run()


if __name__ == "__main__":
    main()
