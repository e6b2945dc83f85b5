"""Simulated AI Cores: the process-wide host pool and each thread's own core buffers.

A launch is one native call (see ``backends/ascend/host_pool.py``): the calling thread runs
blocks itself and, when the grid has more than one block, wakes the pool's workers to take the
rest. One launch owns the pool at a time; a launch from another Python thread meanwhile runs
all its blocks on its own thread rather than wait.
"""
from __future__ import annotations

import atexit
import os
import threading

import numpy as np

from .. import envs
from ..backends.ascend.entry import scratch_layout
from ..backends.ascend.host_pool import HostPool, begin_exit, chain_sigint, note_main_thread
from ..target import TARGETS

SCRATCH_BYTES = max(scratch_layout(t)[1] for t in TARGETS.values())

_local = threading.local()
_lock = threading.Lock()
_state: dict = {}


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


def pool():
    """The host pool, started on first use with ``PYPTO_NUM_THREADS`` threads (default: one per
    host core); ``set_num_threads`` changes it later."""
    p = _state.get("pool")
    if p is None:
        with _lock:
            p = _state.get("pool")
            if p is None:
                p = _start_pool(num_threads())
    return p


def set_num_threads(n: int) -> None:
    """Simulate the AI Cores with ``n`` host threads from now on."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads() takes a positive int, got {n!r}")
    with _lock:
        old = _state.get("pool")
        if old is not None and old.threads == n:
            return
        _start_pool(n)
        if old is not None:
            old.stop()


def _start_pool(threads: int):
    p = HostPool(threads, SCRATCH_BYTES)
    _state["pool"] = p
    chain_sigint()
    return p


def interruptible() -> None:
    """Let Ctrl-C stop launches (again, if a handler was installed and removed since)."""
    chain_sigint()


@atexit.register
def _stop_pool_at_exit() -> None:
    """Nothing native may run on what the interpreter frees as it finalises: first every
    launch in flight is stopped and later ones refused (a daemon thread looping over
    launches crashed the interpreter at exit: its kernel read arrays and scratch already
    freed), then the workers leave (a worker still spinning on freed memory could read a
    changed generation there and call the last kernel again with stale arguments)."""
    begin_exit()
    p = _state.get("pool")
    if p is not None:
        p.stop()


def own_scratch() -> int:
    """This thread's AI Core buffers (64-byte aligned)."""
    addr = getattr(_local, "scratch_addr", None)
    if addr is None:
        buf = np.zeros(SCRATCH_BYTES + 64, dtype=np.uint8)
        _local.scratch = buf
        addr = buf.ctypes.data + (-buf.ctypes.data % 64)
        _local.scratch_addr = addr
    return addr


_PAD = (1, 1, 1)


def run(entry, grid: tuple, args: tuple) -> int:
    """One launch through a kernel's native entry ``entry(state, g0, g1, g2, helpers, own,
    *args)``; returns its status (non-zero: a negative grid dimension)."""
    p = _state.get("pool") or pool()
    own = getattr(_local, "scratch_addr", None) or own_scratch()
    g = grid + _PAD[len(grid):]
    if p.helpers and p.lock.acquire(False):
        try:
            return entry(p.state_addr, g[0], g[1], g[2], p.helpers, own, *args)
        finally:
            p.lock.release()
    return entry(p.state_addr, g[0], g[1], g[2], 0, own, *args)


def _after_fork_in_child() -> None:
    """The pool's threads do not survive a fork: the child starts its own on first use."""
    _state.clear()
    _local.__dict__.clear()
    note_main_thread()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
