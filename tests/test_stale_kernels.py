"""Everything a kernel's compile folds keys its cached binary (issue 34): the plain Python
helpers it calls at compile time (transitively) and the module attributes it reads
(``cfg.FACTOR``), not only its source and the jit functions it calls. An edit seen by a new
process compiles again; a global rebound in the running process recompiles the kernel with
the new value."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.cache import STATS
from tests import stale_kernel_globals as g

KERNEL = '''
import json, sys
import numpy as np
import pypto
import pypto.language as pl
import cfg
import helpers


def rows(b):
    return b * {ROWS} if "x" in {{"x", "y", "z", "w", "v"}} else 0     # (a frozenset constant)


@pypto.jit
def kern(x, out, B: pl.constexpr):
    a = pl.load(x, offsets=(0,), shape=(64,))
    pl.store(out, offsets=(0,), value=a * rows(B) + cfg.FACTOR + helpers.offset(B))


x = np.arange(64, dtype=np.float32)
out = np.zeros_like(x)
kern[(1,)](x, out, B=2)
print(json.dumps({{"out": float(out[1]), "compiles": pypto.cache_stats["compiles"]}}))
'''
HELPERS = '''
BASE = {BASE}


def shift(b):
    return b + BASE


def offset(b):
    return 10 * shift(b)
'''


def write(tmp_path, rows=3, factor=100, base=0):
    (tmp_path / "kern.py").write_text(KERNEL.format(ROWS=rows))
    (tmp_path / "cfg.py").write_text(f"FACTOR = {factor}\n")
    (tmp_path / "helpers.py").write_text(HELPERS.format(BASE=base))


def run(tmp_path, cache, seed="0"):
    env = dict(os.environ, PYPTO_CACHE_DIR=str(cache), PYTHONDONTWRITEBYTECODE="1",
               PYTHONHASHSEED=seed)
    env.pop("PYPTO_DISABLE_CACHE", None)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path)] + sys.path)
    proc = subprocess.run([sys.executable, str(tmp_path / "kern.py")], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def expected(rows=3, factor=100, base=0):
    return 1.0 * 2 * rows + factor + 10 * (2 + base)


@pytest.mark.parametrize("edit", ["helper", "module_constant", "helper_of_helper_module"])
def test_new_process_sees_the_edit(tmp_path, edit):
    """Edit what the compile folded, as a user edits a file; the next process must compute
    the new result (it loaded the old binary from the disk cache before)."""
    cache = tmp_path / "cache"
    write(tmp_path)
    first = run(tmp_path, cache)
    assert first == {"out": expected(), "compiles": 1}
    # unchanged: a hit, whatever the order of the helper's set (string hashes differ)
    assert run(tmp_path, cache, seed="1") == {"out": expected(), "compiles": 0}
    change = {"helper": {"rows": 5}, "module_constant": {"factor": 7},
              "helper_of_helper_module": {"base": 4}}[edit]
    write(tmp_path, **change)
    assert run(tmp_path, cache) == {"out": expected(**change), "compiles": 1}


def launch(kernel):
    x = np.arange(64, dtype=np.float32)
    out = np.zeros_like(x)
    kernel[(1,)](x, out, B=2)
    return float(out[1])


@pytest.fixture
def restore_globals():
    saved = (g.SCALE, g.cfg.FACTOR, g.rows)
    yield
    g.SCALE, g.cfg.FACTOR, g.rows = saved


def test_rebound_global_recompiles_in_process(fresh_cache, restore_globals, monkeypatch,
                                              capfd):
    monkeypatch.setenv("PYPTO_LOG", "recompile")
    kern = pypto.jit(g.kern)
    assert launch(kern) == 2 * 3 + 3 + 100
    before = dict(STATS)
    g.SCALE = 2.0                                  # a module constant the kernel reads
    assert launch(kern) == 2 * 2 + 3 + 100
    g.cfg.FACTOR = 7                               # an attribute of an imported module
    assert launch(kern) == 2 * 2 + 3 + 7
    g.rows = lambda b: b * 5                       # the helper itself
    assert launch(kern) == 2 * 2 + 5 + 7
    assert launch(kern) == 2 * 2 + 5 + 7
    assert STATS["compiles"] - before["compiles"] == 3
    assert kern.compile(np.zeros(64, np.float32), np.zeros(64, np.float32), B=2) \
        is next(iter(kern._kernels.values()))
    err = capfd.readouterr().err
    assert "global tests.stale_kernel_globals.SCALE changed" in err
    assert "cfg.FACTOR changed" in err and "rows changed" in err


def test_rebinding_to_an_equal_value_keeps_the_kernel(fresh_cache, restore_globals):
    kern = pypto.jit(g.kern)
    launch(kern)
    before = dict(STATS)
    g.SCALE = float("3.0")                # an equal float, another object
    g.cfg.FACTOR = int("100")
    assert launch(kern) == 2 * 3 + 3 + 100
    assert launch(kern) == 2 * 3 + 3 + 100
    assert STATS["compiles"] == before["compiles"]


def test_kernels_without_user_globals_check_nothing_at_launch(fresh_cache):
    """The warm path's cost is unchanged for kernels that read only pl, dtypes, math and
    their arguments: nothing to recheck."""
    kern = pypto.jit(g.plain)
    launch(kern)
    kernel = next(iter(kern._kernels.values()))
    assert kernel.reads == []
    kern = pypto.jit(g.kern)
    launch(kern)
    names = {r.name() for r in next(iter(kern._kernels.values())).reads}
    assert names == {"tests.stale_kernel_globals.SCALE", "tests.stale_kernel_globals.rows",
                     "tests.stale_kernel_globals.cfg.FACTOR"}


def _closure_kernel():
    scale = 2.0

    @pypto.jit
    def scaled(x, out):
        pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(8,)) * scale)

    def rebind(value):
        nonlocal scale
        scale = value
    return scaled, rebind


def test_a_rebound_closure_variable_recompiles_the_kernel(fresh_cache, monkeypatch, capsys):
    """A kernel reads its closure when it compiles (it kept the values of its definition
    and never noticed a rebinding), and a launch rechecks it like a folded global."""
    kern, rebind = _closure_kernel()
    x, out = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    kern[(1,)](x, out)
    np.testing.assert_array_equal(out, x * 2)
    monkeypatch.setenv("PYPTO_LOG", "recompile")
    rebind(3.0)
    kern[(1,)](x, out)
    np.testing.assert_array_equal(out, x * 3)
    assert "closure variable scale (closure of _closure_kernel.<locals>.scaled) changed" in \
        capsys.readouterr().err
    rebind(3.0)                                   # an equal value: the kernel stays
    kern[(1,)](x, out)
    np.testing.assert_array_equal(out, x * 3)


def test_an_installed_packages_helper_keys_the_kernel_by_its_version(monkeypatch):
    """A function of an installed package the compile may call (``np.prod`` here) is not the
    user's code, so its code is not hashed: its distribution's version is, so a new version
    compiles again instead of loading the binary the old one folded."""
    from pypto.runtime import dependencies

    @pypto.jit
    def uses_numpy(x, out, N: pl.constexpr):
        pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(N * int(np.prod((1, 1))),)))

    before = uses_numpy._dependencies()[0]
    monkeypatch.setattr(dependencies, "_version", lambda dist: "0.0-other")
    assert uses_numpy._dependencies()[0] != before
