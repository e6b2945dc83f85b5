"""The host pool: every block runs once, from any thread, after restarts and forks."""
import os
import threading

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.runtime import pool as runtime


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


def test_a_stopped_pool_still_runs_launches_on_the_calling_thread():
    runtime.set_num_threads(2)
    p = runtime.pool()
    p.stop()                         # what the interpreter's exit does
    try:
        assert p.helpers == 0 and (run_grid(37) == 1).all()
    finally:
        runtime.set_num_threads(3)   # a fresh pool for the other tests
        runtime.set_num_threads(runtime.num_threads())


# A fresh process with a 2-thread pool and a kernel that counts its blocks' runs.
SCRIPT_PRELUDE = """
import atexit, time
import numpy as np, pypto, pypto.language as pl
from pypto.runtime import pool as runtime
from pypto.backends.ascend.host_pool import GEN
@pypto.jit
def bump(hits, BLOCK: pl.constexpr):
    ones = pl.full((BLOCK,), 1, dtype=pl.int32)
    pl.store(hits, offsets=(pl.program_id(0) * BLOCK,), value=ones, atomic="add")
pypto.set_num_threads(2)
hits = np.zeros(64 * 8, np.int32)
"""


def run_script(tmp_path, body: str, timeout: float) -> None:
    """Run ``SCRIPT_PRELUDE + body`` in a fresh interpreter; it must exit cleanly."""
    import subprocess
    import sys
    script = tmp_path / "script.py"
    script.write_text(SCRIPT_PRELUDE + body)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])


@pytest.mark.heavy
def test_workers_are_gone_before_the_pool_state_is_freed(tmp_path):
    """Seen as a crash at exit after a test run. When the interpreter freed the pool's state,
    the allocator overwrote its first slot, the job generation; a worker still spinning took
    that for a new job and called the last kernel again with stale arguments. Without the
    exit handler this script crashed in 6 runs of 8."""
    for _ in range(3):
        run_script(tmp_path, """
for _ in range(20):
    bump[(64,)](hits, BLOCK=8)
atexit._run_exitfuncs()                      # the interpreter's first step at exit
runtime._state["pool"].state[GEN] += 1000    # what malloc does to the freed state block
time.sleep(0.2)
assert (hits == 20).all(), "a worker ran the last kernel again"
""", timeout=120)


@pytest.mark.heavy
def test_a_launch_does_not_wait_for_a_worker_that_never_comes(tmp_path):
    """A worker the host has descheduled (another tenant on its CPU) must not hold launches
    up: once the launching thread has run out of blocks it closes the launch to helpers and
    waits only for those that joined. Here the worker is gone for good; without that, the
    first launch waits forever."""
    run_script(tmp_path, """
p = runtime.pool()
p._stop(p.state.ctypes.data)                # the worker leaves, but launches still ask for it
p._join(p._handles.ctypes.data, p.threads - 1)
assert p.helpers == 1
for _ in range(50):
    bump[(64,)](hits, BLOCK=8)
assert (hits == 50).all()
""", timeout=60)


def test_set_num_threads_rejects_nonsense():
    with pytest.raises(ValueError):
        runtime.set_num_threads(0)


def _worker_cpus(p):
    from pypto.backends.ascend.host_pool import WORKER_CPUS
    mask = int(p.state[WORKER_CPUS])
    return [cpu for cpu in range(64) if mask >> cpu & 1]


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux and two CPUs")
def test_a_launch_moves_its_thread_off_a_pinned_worker_cpu():
    """Workers are pinned one per CPU; Linux sometimes kept the launching thread on a worker's
    CPU for long stretches (a 2-thread launch then ran at 1-thread speed), so a launch that
    finds itself there moves off (pool_keep_off_workers, called first thing by every pool
    launch) and leaves its own affinity as it was."""
    import ctypes
    previous = runtime.pool().threads
    mask = os.sched_getaffinity(0)
    try:
        runtime.set_num_threads(2)
        p = runtime.pool()
        workers = _worker_cpus(p)
        assert len(workers) == 1
        others = sorted(mask - set(workers))
        os.sched_setaffinity(0, {workers[0]})         # now on the worker's CPU ...
        os.sched_setaffinity(0, {workers[0], others[0]})   # ... and free to leave it
        getcpu = ctypes.CDLL(None).sched_getcpu
        assert getcpu() == workers[0]
        keep_off = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(
            p._object.address("pool_keep_off_workers"))
        keep_off(p.state_addr)
        assert getcpu() != workers[0]
        assert os.sched_getaffinity(0) == {workers[0], others[0]}
        assert (run_grid(64) == 1).all()
    finally:
        os.sched_setaffinity(0, mask)
        runtime.set_num_threads(previous)


@pypto.jit
def scale_into(x, out, s, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    pl.store(out, offsets=(pid * BLOCK,), value=pl.load(x, offsets=(pid * BLOCK,),
                                                        shape=(BLOCK,)) * s)


def test_two_kernels_alternating_over_many_small_launches():
    """Launches of different kernels (different entry points and arguments) back to back: a
    worker that comes late to one launch must never join the next one while its fields are
    being written (JOINED carries the job's generation)."""
    previous = runtime.pool().threads
    try:
        runtime.set_num_threads(2)
        hits = np.zeros(4 * 8, np.int32)
        x = np.arange(4 * 8, dtype=np.float32)
        out = np.zeros_like(x)
        for k in range(3000):
            count_blocks[(4,)](hits, BLOCK=8)
            scale_into[(4,)](x, out, float(k), BLOCK=8)
            assert out[-1] == x[-1] * k
        assert (hits == 3000).all()
    finally:
        runtime.set_num_threads(previous)


# -- the grid-less launch lint -------------------------------------------------------------------

@pypto.jit
def _blockwise_copy(x, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    pl.store(out, offsets=(pid * BLOCK,), value=pl.load(x, offsets=(pid * BLOCK,),
                                                        shape=(BLOCK,)))


@pypto.jit
def _strided_copy(x, out, BLOCK: pl.constexpr):
    for s in range(pl.program_id(0) * BLOCK, x.shape[0], BLOCK * pl.num_programs(0)):
        pl.store(out, offsets=(s,), value=pl.load(x, offsets=(s,), shape=(BLOCK,)))


def test_gridless_launch_of_a_blockwise_kernel_warns_once_at_the_call():
    import warnings
    x = np.ones(1 << 16, np.float32)
    out = np.zeros_like(x)
    with pytest.warns(pypto.LaunchWarning, match=r"_blockwise_copy was launched without a "
                      r"grid, so it ran one program per core: 48 programs .*launch it as "
                      r"_blockwise_copy\[\(pl.cdiv\(n, BLOCK\),\)\]") as caught:
        _blockwise_copy(x, out, BLOCK=256)
    assert caught[0].filename == __file__
    assert (out == 1).sum() == 48 * 256              # what the warning is about
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _blockwise_copy(x, out, BLOCK=256)           # once per kernel
        _blockwise_copy[(256,)](x, out, BLOCK=256)
        _strided_copy(x, out, BLOCK=256)             # it reads pl.num_programs: no warning
    assert np.all(out == 1)
