"""Issue 34's reliability round (part b): arguments numpy hands over in an unusual form
(non-native byte order, ndarray subclasses), grids that are empty or too large to number,
a launch interrupted by Ctrl-C, and a process that exits while a daemon thread is inside a
launch. Each one either works or is a clear Python exception -- never a wrong result or a
crash. The crash cases run in a subprocess."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import pypto
import pypto.language as pl

N = 64
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pypto.jit
def add_one(x, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    a = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(pid * BLOCK,), value=a + 1.0)


def run_script(body: str, timeout: float = 120, **popen):
    """Run ``body`` in a fresh interpreter with this checkout's pypto; returns the process."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(body)], env=env,
                          capture_output=True, text=True, timeout=timeout, **popen)


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
