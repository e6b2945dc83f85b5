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
    (OpenMP, OpenBLAS) go idle before the next one starts: one thread pool at a time.
    (Measured: right after a numpy BLAS call, PyPTO's 1024^3 matmul runs at ~100 GFLOP/s
    instead of ~190 for the next 50-100 ms, while OpenBLAS's workers spin.)"""
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


class OtherLoad:
    """Cores kept busy by OTHER processes since ``start()``: the machine's busy time (from
    /proc/stat) minus this process's own CPU time, over the wall time. None where /proc/stat
    does not exist."""

    def start(self) -> "OtherLoad":
        self._t0, self._busy0, self._own0 = time.monotonic(), self._machine_busy(), _own_cpu()
        return self

    def cores(self):
        if self._busy0 is None:
            return None
        busy = self._machine_busy()
        wall = time.monotonic() - self._t0
        if busy is None or wall <= 0:
            return None
        return max(0.0, ((busy - self._busy0) - (_own_cpu() - self._own0)) / wall)

    @staticmethod
    def _machine_busy():
        """Seconds of CPU time all cores spent not idle since boot."""
        try:
            with open("/proc/stat") as f:
                v = [int(x) for x in f.readline().split()[1:9]]
            return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system


def busy_cores(seconds: float = 0.5):
    """How many cores other processes kept busy while this one slept for ``seconds``."""
    load = OtherLoad().start()
    time.sleep(seconds)
    return load.cores()


_run_load = None


def _load_note(busy) -> str:
    return " -- the machine is shared, expect noisy numbers" if busy >= 0.25 else ""


def print_environment(torch=None) -> None:
    """Say what the numbers were measured with, and whether the machine was quiet."""
    import numpy as np

    from pypto import runtime

    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, "
          f"host cores available: {len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()}")
    print(f"PyPTO: {runtime.num_threads()} host threads simulate the AI Cores "
          f"(PYPTO_NUM_THREADS={os.environ.get('PYPTO_NUM_THREADS', '') or 'unset'})")
    if torch is None:
        print("torch: not installed, its column is skipped")
    else:
        print(f"torch {torch.__version__}: {torch.get_num_threads()} threads "
              "(torch.get_num_threads())")
    global _run_load
    busy = busy_cores()
    if busy is not None:
        print(f"other processes kept {busy:.1f} cores busy just before the run{_load_note(busy)}")
    _run_load = OtherLoad().start()


def print_load_during_run() -> None:
    """After the tables: how busy other processes kept the cores while we measured."""
    busy = None if _run_load is None else _run_load.cores()
    if busy is not None:
        print(f"other processes kept {busy:.1f} cores busy during the measurements"
              f"{_load_note(busy)}")
