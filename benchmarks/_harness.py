"""Shared helpers for the benchmark scripts: command line, timing and table printing.

Timing rule: one warm-up call (it compiles or fetches the kernel and faults the pages in), then
``reps`` timed calls; the median is reported, so one preempted rep on a busy machine does not
move the result.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def parse_args(description: str, argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--reps", type=int, default=5,
                   help="timed repetitions per measurement, after one warm-up call (default 5)")
    p.add_argument("--quick", action="store_true",
                   help="small sizes only (used by the smoke test)")
    args = p.parse_args(argv)
    if args.reps < 1:
        p.error("--reps must be >= 1")
    return args


def median_time(fn, reps: int, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` in seconds over ``reps`` calls, after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def settle(seconds: float = 0.2) -> None:
    """Pause between two libraries' runs so the previous thread pool's spinning workers
    (OpenMP, OpenBLAS) go idle before the next one starts: one thread pool at a time."""
    time.sleep(seconds)


def fmt_time(seconds) -> str:
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def fmt_size(n: int) -> str:
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return str(n)


def fmt_num(x, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def format_table(headers, rows) -> str:
    """A plain-text table: first column left-aligned, the others right-aligned."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(r, widths))).rstrip()

    out = [line(cells[0]), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells[1:]]
    return "\n".join(out)


def print_table(headers, rows) -> None:
    print(format_table(headers, rows), flush=True)


def import_torch():
    """torch, or None when it is not installed (it is an optional extra)."""
    try:
        import torch
    except Exception:  # noqa: BLE001 - a broken torch install is as good as none here
        return None
    return torch


def busy_cores(seconds: float = 0.5):
    """How many cores other processes kept busy while this one slept for ``seconds``
    (from /proc/stat; None where that file does not exist)."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        idle = v[3] + (v[4] if len(v) > 4 else 0)
        return sum(v[:8]), idle
    try:
        total0, idle0 = sample()
        time.sleep(seconds)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    ticks = os.sysconf("SC_CLK_TCK") * seconds
    return max(0.0, ((total1 - total0) - (idle1 - idle0)) / ticks)


def print_environment(torch=None) -> None:
    """Say what the numbers were measured with, and whether the machine was quiet."""
    import numpy as np

    from pypto import runtime

    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, "
          f"host cores available: {len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()}")
    print(f"PyPTO: {runtime.num_threads()} host threads simulate the AI Cores "
          f"(PYPTO_NUM_THREADS={os.environ.get('PYPTO_NUM_THREADS', '') or 'unset'})")
    if torch is None:
        print("torch: not installed, its column is skipped (pip install -e '.[torch]')")
    else:
        print(f"torch {torch.__version__}: {torch.get_num_threads()} threads "
              "(torch.get_num_threads())")
    busy = busy_cores()
    if busy is not None:
        note = " -- the machine is shared, expect noisy numbers" if busy >= 0.25 else ""
        print(f"other processes kept {busy:.1f} cores busy just before the run{note}")
