"""Simulated AI Cores: host threads that run a launch's blocks.

Each host thread owns one scratch area (its AI Core's UB, L1, L0A, L0B, L0C). A launch hands the
compiled entry point a shared block counter; every participating thread calls it and takes
blocks until the grid is exhausted. The ctypes call releases the GIL, so blocks run in parallel.
Small grids run on the calling thread alone.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import envs

_local = threading.local()
_pool_lock = threading.Lock()
_pool: dict = {}


def num_threads() -> int:
    configured = envs.PYPTO_NUM_THREADS.get()
    if configured:
        try:
            n = int(configured)
        except ValueError:
            raise ValueError(f"PYPTO_NUM_THREADS must be a positive integer, got "
                             f"{configured!r}") from None
        if n < 1:
            raise ValueError(f"PYPTO_NUM_THREADS must be a positive integer, got {n}")
        return n
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def _scratch(nbytes: int) -> int:
    """This thread's AI Core buffers (64-byte aligned), grown on demand."""
    buf = getattr(_local, "scratch", None)
    if buf is None or buf.nbytes < nbytes + 64:
        buf = np.zeros(nbytes + 64, dtype=np.uint8)
        _local.scratch = buf
    addr = buf.ctypes.data
    return addr + (-addr % 64)


def _executor(workers: int) -> ThreadPoolExecutor:
    with _pool_lock:
        ex = _pool.get("executor")
        if ex is None or _pool.get("workers") != workers:
            ex = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pypto-core")
            _pool["executor"], _pool["workers"] = ex, workers
        return ex


def launch(entry, args_addr: int, grid: np.ndarray, scratch_bytes: int) -> None:
    """Run every block of ``grid`` through ``entry`` (a ctypes function pointer)."""
    blocks = int(grid[0]) * int(grid[1]) * int(grid[2])
    if blocks <= 0:
        return
    counter = np.zeros(1, dtype=np.int64)
    grid_addr, counter_addr = grid.ctypes.data, counter.ctypes.data
    threads = min(num_threads(), blocks)

    def work():
        entry(args_addr, grid_addr, _scratch(scratch_bytes), counter_addr)

    if threads == 1:
        work()
        return
    ex = _executor(max(1, num_threads() - 1))
    futures = [ex.submit(work) for _ in range(threads - 1)]
    work()
    for f in futures:
        f.result()
