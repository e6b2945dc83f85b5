"""Launch overhead: the fixed cost of one kernel launch, warm (the kernel compiled and the fast
path taken), against the cost of a bare ctypes call and of small numpy / torch calls.

    python benchmarks/launch.py [--reps N] [--quick]

Rows:
  grid 1   add_n[(1,)](x, y, out, n, BLOCK=64): three 64-element fp32 arrays and a runtime int,
           one block on the calling thread. This is the user's call as written, including
           kernel[grid] (which builds the launcher each time), argument binding and the native
           call. Goal: <= 5 us. Beside it: numpy's np.add(x, y, out=out) and torch.add(out=) on
           the same arrays (a library call's own fixed cost).
  grid 1, torch arguments   the same launch with torch CPU tensors for x, y and out (the
           path a registered torch op takes): keyed by (dtype, shape, stride, is_cpu) and
           passed as data pointers. Goal: <= 1.3 x the numpy-argument launch, measured beside
           it (the "numpy" column of that row is the numpy-argument launch).
  grid 2   an empty kernel over a grid of 2 on 2 host threads: the second block goes to a pool
           worker, so this adds the hand-off. Goal: <= 10 us.
Beside them (footnotes): a bare ctypes call of libc's getpid() (the floor for any call from
Python into native code), getpid with three numpy pointers and an int (what reaching native
code with these arguments costs when each pointer is read through ndarray.ctypes), and
numba's dispatch of an @njit function of (x, y, out, n) when numba is installed.

Each figure is the mean over a batch of calls, the median over --reps batches.
"""
from __future__ import annotations

import ctypes

import numpy as np
from _harness import (
    TorchBaseline,
    default_threads,
    fmt_time,
    import_torch,
    make_row,
    parse_args,
    per_call_time,
    print_environment,
    print_load_during_run,
    print_rows,
    settle,
    use_threads,
)

import pypto
import pypto.language as pl

N = 64


@pypto.jit
def add_n(x, y, out, n, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    a = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    b = pl.load(y, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(pid * BLOCK,), value=pl.where(pl.arange(0, BLOCK) < n, a + b, 0.0))


@pypto.jit
def empty_kernel(x):
    pl.program_id(0)


def ctypes_baselines(x, y, out, n, calls, reps):
    """(getpid(), getpid(3 pointers, int)) per-call times."""
    getpid = ctypes.CDLL(None).getpid
    bare = per_call_time(lambda: getpid(), calls, reps)
    with_args = per_call_time(lambda: getpid(x.ctypes.data, y.ctypes.data, out.ctypes.data, n),
                              calls, reps)
    return bare, with_args


def numba_dispatch(x, y, out, n, calls, reps):
    """Per-call time of an @njit no-op of (x, y, out, n), or None without numba."""
    try:
        import numba
    except Exception:  # noqa: BLE001 - optional
        return None

    @numba.njit(cache=False)
    def noop(a, b, c, m):
        return m

    noop(x, y, out, n)
    return per_call_time(lambda: noop(x, y, out, n), calls, reps)


def side_by_side_calls(first, second, calls, reps):
    """Per-call times of two call forms, measured in alternating batches (the host's speed
    drifts; taking turns lets the drift touch both alike)."""
    a, b = [], []
    for _ in range(reps):
        a.append(per_call_time(first, calls, 1))
        b.append(per_call_time(second, calls, 1))
    return sorted(a)[len(a) // 2], sorted(b)[len(b) // 2]


def run(args, limits=None) -> list[dict]:
    torch = import_torch()
    threads = default_threads()
    use_threads(threads, torch)
    calls = 500 if args.quick else 20_000
    x = np.arange(N, dtype=np.float32)
    y = np.ones(N, np.float32)
    out = np.zeros(N, np.float32)
    n = N - 14                                  # a runtime int (not 1, not a multiple of 16)

    add_n[(1,)](x, y, out, n, BLOCK=N)
    expected = np.where(np.arange(N) < n, x + y, 0)
    np.testing.assert_array_equal(out, expected)
    t_grid1 = per_call_time(lambda: add_n[(1,)](x, y, out, n, BLOCK=N), calls, args.reps)
    t_torch_args = None
    if torch is not None:
        tx, ty, tout = (torch.from_numpy(a.copy()) for a in (x, y, out))
        add_n[(1,)](tx, ty, tout, n, BLOCK=N)
        np.testing.assert_array_equal(tout.numpy(), expected)
        t_torch_args, t_grid1 = side_by_side_calls(
            lambda: add_n[(1,)](tx, ty, tout, n, BLOCK=N),
            lambda: add_n[(1,)](x, y, out, n, BLOCK=N), calls, args.reps)

    use_threads(2, torch)
    empty_kernel[(2,)](x)
    t_grid2 = per_call_time(lambda: empty_kernel[(2,)](x), calls, args.reps)
    t_empty1 = per_call_time(lambda: empty_kernel[(1,)](x), calls, args.reps)
    use_threads(threads, torch)
    settle()

    t_numpy = per_call_time(lambda: np.add(x, y, out=out), calls, args.reps)
    t_torch = None
    if torch is not None:
        base = TorchBaseline(torch)
        tx, ty, tout = (base.tensor(a) for a in (x, y, out))
        t_torch = per_call_time(base.timed(lambda: torch.add(tx, ty, out=tout)), calls,
                                args.reps)
    settle()
    bare, with_args = ctypes_baselines(x, y, out, n, calls, args.reps)
    t_numba = numba_dispatch(x, y, out, n, calls, args.reps)

    beside = (f"beside it: bare ctypes call of libc getpid() {fmt_time(bare)}, "
              f"getpid(x.ctypes.data, y.ctypes.data, out.ctypes.data, n) {fmt_time(with_args)}, "
              + (f"numba @njit dispatch of f(x, y, out, n) {fmt_time(t_numba)}"
                 if t_numba is not None else "numba: not installed"))
    torch_row = [] if t_torch_args is None else [
        make_row("launch, grid 1, torch", "3 tensors + int", t_torch_args, t_grid1,
                 ratio=t_grid1 / t_torch_args, goal="<= 1.3x numpy args",
                 met=t_torch_args <= 1.3 * t_grid1, family="launch",
                 note="the numpy column here is the same launch with numpy arguments, timed "
                      "in turns with it")]
    return [
        make_row("launch, grid 1", "3 arrays + int", t_grid1, t_numpy, t_torch,
                 goal="<= 5 us", met=t_grid1 <= 5e-6, family="launch",
                 note=f"{beside}; numpy / torch: np.add / torch.add(out=) on the same "
                      f"{N}-element arrays"),
        *torch_row,
        make_row("launch, grid 2", "empty, 2 threads", t_grid2, goal="<= 10 us",
                 met=t_grid2 <= 10e-6, family="launch",
                 note=f"the same empty kernel on a grid of 1: {fmt_time(t_empty1)} (the "
                      f"difference is the hand-off of one block to a pool worker)"),
    ]


def main(argv=None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv)
    torch = import_torch()
    use_threads(default_threads(), torch)
    print_environment(torch)
    rows = run(args)
    print_rows(rows, f"warm launch overhead, per call: mean of a batch, median of {args.reps} "
                     "batches")
    print_load_during_run()


if __name__ == "__main__":
    main()
