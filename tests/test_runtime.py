"""The host pool: every block runs once, from any thread, after restarts and forks."""
import os
import threading

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto import runtime


@pypto.jit
def count_blocks(hits, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    ones = pl.full((BLOCK,), 1, dtype=pl.int32)
    pl.store(hits, offsets=(pid * BLOCK,), value=ones, atomic="add")


def run_grid(blocks, block=16):
    hits = np.zeros(blocks * block, np.int32)
    count_blocks[(blocks,)](hits, BLOCK=block)
    return hits


@pytest.mark.parametrize("threads", [1, 2, 3, 5])
def test_fresh_pool_runs_every_block_once(threads):
    """Workers that start after the first job is published must still run it (a race once
    lost that job and hung the launch)."""
    previous = runtime.pool().threads
    try:
        for _ in range(20):
            runtime.set_num_threads(threads)
            runtime.set_num_threads(threads + 1)
            assert (run_grid(37) == 1).all()
    finally:
        runtime.set_num_threads(previous)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("blocks", [1, 2, 3, 7, 1000])
def test_each_thread_share_and_the_help_with_others_cover_the_grid_once(threads, blocks):
    """Blocks are split into one contiguous share per thread; a thread that finishes early
    takes blocks from the others' shares. Every block must run exactly once either way."""
    previous = runtime.pool().threads
    try:
        runtime.set_num_threads(threads)
        for _ in range(5):
            assert (run_grid(blocks, block=8) == 1).all()
    finally:
        runtime.set_num_threads(previous)


def test_a_kernel_launched_10000_times():
    """The warm launch path (binder, key, pool hand-off) stays correct over many calls."""
    hits = np.zeros(3 * 8, np.int32)
    for _ in range(10_000):
        count_blocks[(3,)](hits, BLOCK=8)
    assert (hits == 10_000).all()


def test_launches_from_many_python_threads():
    results = []

    def work():
        for _ in range(50):
            results.append(bool((run_grid(9) == 1).all()))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 200 and all(results)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_pool_after_fork():
    run_grid(8)                      # the parent's pool exists before the fork
    pid = os.fork()
    if pid == 0:                     # the child must start its own workers
        ok = (run_grid(33) == 1).all()
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0


def test_set_num_threads_rejects_nonsense():
    with pytest.raises(ValueError):
        runtime.set_num_threads(0)
