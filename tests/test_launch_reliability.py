"""Issue 34's reliability round (part b): arguments numpy hands over in an unusual form
(non-native byte order, ndarray subclasses), grids that are empty or too large to number,
a launch interrupted by Ctrl-C, and a process that exits while a daemon thread is inside a
launch. Each one either works or is a clear Python exception -- never a wrong result or a
crash. The crash cases run in a subprocess."""
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np
import pytest

import pypto
import pypto.language as pl
from tests.engines.tools import needs_tools

N = 64
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pypto.jit
def add_one(x, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    a = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(pid * BLOCK,), value=a + 1.0)


def script_env(**extra) -> dict:
    return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
                **extra)


def run_script(body: str, timeout: float = 120, **extra_env):
    """Run ``body`` in a fresh interpreter with this checkout's pypto; returns the process."""
    path = script_file(body)
    try:
        return subprocess.run([sys.executable, path], env=script_env(**extra_env),
                              capture_output=True, text=True, timeout=timeout)
    finally:
        os.unlink(path)


def script_file(body: str) -> str:
    """``body`` as a file (kernels are compiled from their source file)."""
    fd, path = tempfile.mkstemp(suffix=".py", prefix="pypto_reliability_")
    with os.fdopen(fd, "w") as f:
        f.write(textwrap.dedent(body))
    return path


# -- 1. byte order --------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["x", "out"])
def test_big_endian_array_is_refused_with_the_fix(which):
    args = {"x": np.arange(N, dtype="f4"), "out": np.zeros(N, "f4")}
    args[which] = args[which].astype(">f4")
    with pytest.raises(TypeError, match=rf"argument '{which}'.*byte order.*astype\('<f4'\)"):
        add_one[(1,)](args["x"], args["out"], BLOCK=N)


def test_big_endian_refused_on_the_warm_path_too():
    x, out = np.arange(N, dtype="f4"), np.zeros(N, "f4")
    add_one[(1,)](x, out, BLOCK=N)          # the native-order key is warm now
    with pytest.raises(TypeError, match="byte order"):
        add_one[(1,)](x.astype(">f4"), out, BLOCK=N)
    np.testing.assert_array_equal(out, np.arange(N) + 1)


# -- 4. ndarray subclasses -------------------------------------------------------------------

class Tagged(np.ndarray):
    pass


def test_memmap_is_read_and_written_in_place(tmp_path):
    x = np.arange(N, dtype="f4")
    out = np.memmap(tmp_path / "out.bin", dtype="f4", mode="w+", shape=(N,))
    add_one[(1,)](x, out, BLOCK=N)
    np.testing.assert_array_equal(np.asarray(out), x + 1)
    out.flush()
    np.testing.assert_array_equal(np.fromfile(tmp_path / "out.bin", dtype="f4"), x + 1)


def test_user_subclass_is_its_base_array():
    x = np.arange(N, dtype="f4").view(Tagged)
    out = np.zeros(N, "f4").view(Tagged)
    for _ in range(2):                      # the slow path each time: same memory
        add_one[(1,)](x, out, BLOCK=N)
        np.testing.assert_array_equal(out.view(np.ndarray), np.arange(N) + 1)


def test_masked_array_is_refused():
    out = np.ma.MaskedArray(np.zeros(N, "f4"), mask=np.arange(N) % 2 == 0)
    with pytest.raises(TypeError, match=r"argument 'out'.*masked array.*mask"):
        add_one[(1,)](np.arange(N, dtype="f4"), out, BLOCK=N)


# -- 2. empty grids --------------------------------------------------------------------------

EMPTY_GRIDS = r"""
import numpy as np, pypto, pypto.language as pl

@pypto.jit
def vector(x, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    pl.store(out, offsets=(pid * BLOCK,), value=pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,)) + 1.0)

@pypto.jit
def cube(a, b, c):
    pl.store(c, offsets=(0, 0), value=pl.matmul(pl.load(a, offsets=(0, 0), shape=(16, 16)),
                                                 pl.load(b, offsets=(0, 0), shape=(16, 16))))

@pypto.jit
def mixed(a, b, c):
    acc = pl.matmul(pl.load(a, offsets=(0, 0), shape=(16, 16)), pl.load(b, offsets=(0, 0), shape=(16, 16)))
    pl.store(c, offsets=(0, 0), value=pl.exp(acc.to(pl.float32)))

@pypto.jit
def barrier(x, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    a = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.barrier()
    pl.store(x, offsets=(pid * BLOCK,), value=a + 1.0)

x = np.zeros(64, "f4"); m = np.ones((16, 16), "f4"); c = np.full((16, 16), 7, "f4")
for grid in [(pl.cdiv(0, 64),), (0, 4), (4, 0, 1), (1, 1, 0)]:
    vector[grid](x, x, BLOCK=64)
    cube[grid](m, m, c)
    mixed[grid](m, m, c)
    barrier[grid](x, BLOCK=16)
    barrier[grid](x, BLOCK=16)
assert not x.any() and (c == 7).all(), "an empty grid wrote"
barrier[(2,)](x, BLOCK=16)          # and a non-empty one still runs
assert (x[:32] == 1).all() and not x[32:].any()
print("empty grids ok")
"""


@pytest.mark.parametrize("mode", ["native", "interpreter"])
def test_empty_grid_launches_nothing_for_every_kernel_kind(mode):
    env = {"PYPTO_INTERPRET": "1"} if mode == "interpreter" else {}
    done = run_script(EMPTY_GRIDS, **env)
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    assert "empty grids ok" in done.stdout


# -- 6. grids too large to number ------------------------------------------------------------

@pytest.mark.parametrize("grid", [(2**32, 2**32), (2**21, 2**21, 2**21), (2**62, 2)])
def test_grid_whose_block_count_overflows_is_refused(grid):
    out = np.zeros(N, "f4")
    with pytest.raises(ValueError, match=r"grid \(.*\) has \d+ blocks, more than a launch"):
        add_one[grid](np.arange(N, dtype="f4"), out, BLOCK=N)
    assert not out.any()
    with pytest.raises(ValueError, match="more than a launch"):      # callable grid: _grid
        add_one[lambda meta: grid](np.arange(N, dtype="f4"), out, BLOCK=N)


# -- 3. exit while a daemon thread is inside a launch ----------------------------------------

DAEMON_AT_EXIT = r"""
import threading, time
import numpy as np, pypto, pypto.language as pl

@pypto.jit
def slow(x, out, ITERS: pl.constexpr, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    a = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    for i in range(ITERS):
        a = a * 1.0001 + 0.5
    pl.store(out, offsets=(pid * BLOCK,), value=a)

x = np.arange(4096, dtype="f4"); out = np.zeros(4096, "f4")
slow[(64,)](x, out, ITERS=ITERS, BLOCK=64)

def loop():
    while True:
        slow[(64,)](x, out, ITERS=ITERS, BLOCK=64)

threading.Thread(target=loop, daemon=True).start()
time.sleep(0.1)
print("main returns", flush=True)
"""


@pytest.mark.parametrize("iters", [10, 1000])
def test_exit_while_a_daemon_thread_is_inside_a_launch(iters):
    """Segfaulted in most runs before the exit stopped launches in flight."""
    for _ in range(4):
        done = run_script(DAEMON_AT_EXIT.replace("ITERS=ITERS", f"ITERS={iters}"), timeout=60)
        assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
        assert "main returns" in done.stdout and "Traceback" not in done.stderr


# -- 5. Ctrl-C stops a launch ----------------------------------------------------------------

ENDLESS = r"""
import sys, time
import numpy as np, pypto, pypto.language as pl

@pypto.jit
def spin(x, out, n, step, BLOCK: pl.constexpr):
    a = pl.load(x, offsets=(0,), shape=(BLOCK,))
    i = 0
    while i < n:                    # step 0: never ends
        a = a * 1.0
        i = i + step
    pl.store(out, offsets=(0,), value=a)

@pypto.jit
def add(x, out, BLOCK: pl.constexpr):
    pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(BLOCK,)) + 1.0)

@pypto.jit
def count(x, out, n, BLOCK: pl.constexpr):
    a = pl.load(x, offsets=(0,), shape=(BLOCK,))
    for _ in range(n):              # n = 2**62: a for loop that outlives anyone
        a = a + 1.0
    pl.store(out, offsets=(0,), value=a)

@pypto.jit
def spin_then_meet(x, out, n, step, BLOCK: pl.constexpr):
    a = pl.load(x, offsets=(0,), shape=(BLOCK,))
    i = 0
    while i < n * (pl.program_id(0) == 0):   # block 0 spins, the others wait at the barrier
        a = a * 1.0
        i = i + step
    pl.barrier()
    pl.store(out, offsets=(0,), value=a)

x = np.zeros(64, "f4"); out = np.zeros(64, "f4")
add[(1,)](x, out, BLOCK=64)
spin[(1,)](x, out, 10, 1, BLOCK=64)            # compiled and warm
spin_then_meet[(4,)](x, out, 10, 1, BLOCK=64)
count[(1,)](x, out, 10, BLOCK=64)
print("ready", flush=True)
try:
    if sys.argv[1] == "while":
        spin[(2,)](x, out, 10, 0, BLOCK=64)
    elif sys.argv[1] == "barrier":
        spin_then_meet[(4,)](x, out, 10, 0, BLOCK=64)
    elif sys.argv[1] == "for":
        count[(1,)](x, out, 2**62, BLOCK=64)
    else:
        add[(int(sys.argv[2]),)](x, out, BLOCK=64)
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
out[:] = 0
add[(1,)](x, out, BLOCK=64)                     # the next launch runs as usual
print("after", out[0], flush=True)
"""


ENGINES = [pytest.param("native", id="native"),
           pytest.param("pto-isa", id="pto-isa", marks=[needs_tools, pytest.mark.heavy])]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("endless", ["while", "grid", "barrier", "for"])
def test_ctrl_c_stops_an_endless_launch(endless, engine):
    """On either engine: the pto-isa one polls the same stop bits at its loops' back edges,
    between blocks and in its waits."""
    blocks = 2 ** 40 if engine == "native" else 2 ** 32 - 1    # pto-isa numbers 32 bits
    out = interrupted(ENDLESS, [endless, str(blocks)], script_env(PYPTO_ENGINE=engine), 5)
    assert "KeyboardInterrupt" in out and "after 1.0" in out


def interrupted(body: str, args: list, env: dict, within: float) -> str:
    """The output of ``body`` run with ``args``, sent SIGINT a second after it prints "ready";
    it must then end, cleanly, within ``within`` seconds."""
    path = script_file(body)
    # SIGINT at its default in the child: a test run started in the background (nohup, &)
    # ignores it, the child would inherit that, and Python then never raises KeyboardInterrupt
    proc = subprocess.Popen([sys.executable, path, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        out, err = proc.communicate(timeout=within)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.unlink(path)
    assert time.monotonic() - sent < within
    assert proc.returncode == 0, err[-2000:]
    return out


ENDLESS_MPMD = r"""
import sys
import numpy as np, pypto
from pypto.graph.kernel_node import add_node

def source(fn):
    return f'''
def {fn}(x, out, n, step):
    a = pl.load(x, offsets=(0,), shape=(64,))
    i = 0
    while i < n:                    # step 0: never ends
        a = a * 1.0
        i = i + step
    pl.store(out, offsets=(0,), value=a + 1.0)
'''

def module(step):                   # two steps: a graph of one step runs in order
    g = pypto.TensorGraph(name=f"spin{step}")
    x = g.placeholder((64,), pypto.float32)
    y = add_node(g, "first", [x], (64,), pypto.float32, "ND", source, (8,),
                 lambda ins, out: (ins[0], out, 10, 1), "ends")
    add_node(g, "spin", [y], (64,), pypto.float32, "ND", source, (8,),
             lambda ins, out: (ins[0], out, 10, step), "endless unless step > 0")
    return pypto.compile(g), x.name

x = np.zeros(64, "f4")
ends, name = module(1)
ends.run({name: x}, parallel_strategy="mpmd")        # compiled and warm
spins, name = module(0)
print("ready", flush=True)
try:
    spins.run({name: x}, parallel_strategy="mpmd")
except KeyboardInterrupt:
    print("KeyboardInterrupt", spins.last_task_order is None, flush=True)
out = ends.run({name: x}, parallel_strategy="mpmd").to_numpy()
print("after", out[0], ends.last_task_order is not None, flush=True)
"""


def test_ctrl_c_stops_an_endless_mpmd_run():
    """The Execution Graph's tasks (kernel ranges on the main thread and on its helper
    threads) obey the stop bits of the thread that started the run: Ctrl-C stops them all,
    and the next run goes as usual."""
    out = interrupted(ENDLESS_MPMD, [], script_env(PYPTO_NUM_THREADS="2"), 10)
    assert "KeyboardInterrupt" in out and "after 2.0 True" in out, out


LATE_EXIT_HANDLER = r"""
import atexit

def late():                 # registered before pypto's own exit handler, so runs after it
    try:
        add[(1,)](x, out, BLOCK=64)
    except RuntimeError as e:
        print("refused:", e, flush=True)
    else:
        print("launched", flush=True)

atexit.register(late)
import numpy as np, pypto, pypto.language as pl

@pypto.jit
def add(x, out, BLOCK: pl.constexpr):
    pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(BLOCK,)) + 1.0)

x = np.zeros(64, "f4"); out = np.zeros(64, "f4")
add[(1,)](x, out, BLOCK=64)
"""


def test_a_launch_after_exit_began_is_a_clear_error():
    done = run_script(LATE_EXIT_HANDLER, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused: add: not launched, the interpreter is exiting" in done.stdout
