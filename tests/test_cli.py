"""The pypto command: cache list / info / clear / prune, the size limit, and asm."""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.tools import cli
from pypto.cache import admin as cache_admin

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VECTOR_ADD = os.path.join(ROOT, "tutorials", "01_vector_add.py")


@pypto.jit
def _doubled(x, out, BLOCK: pl.constexpr):
    pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(BLOCK,)) * 2.0)


def _compile(block):
    x = np.ones(block, np.float32)
    _doubled[(1,)](x, np.zeros_like(x), BLOCK=block)


def _kernels():
    return [e for e in cache_admin.entries() if e.kind == "kernel"]


def test_cache_list_info_prune_clear(fresh_cache, capsys):
    _compile(64)
    _compile(128)
    assert cli.main(["cache", "list"]) == 0
    out = capsys.readouterr().out
    assert out.count("_doubled") == 2 and "entries" in out
    assert cli.main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"cache directory: {fresh_cache}" in out and "trusted: yes" in out
    assert cli.main(["cache", "prune", "--max-size", "0"]) == 0
    assert "removed" in capsys.readouterr().out and not cache_admin.entries()
    _compile(256)
    assert cli.main(["cache", "clear"]) == 0
    assert not cache_admin.entries()


def test_size_limit_keeps_the_most_recently_used(fresh_cache, monkeypatch):
    _compile(32)
    [old] = _kernels()
    time.sleep(0.05)
    _compile(48)
    sizes = sorted(e.size for e in _kernels())
    monkeypatch.setenv("PYPTO_CACHE_MAX_BYTES", str(sizes[-1] + sizes[0] // 2 + 8192))
    _compile(96)                         # a new entry: the limit is enforced after it
    names = {e.path for e in _kernels()}
    assert old.path not in names and len(names) <= 2


def test_parse_size():
    assert cache_admin.parse_size("500M") == 500 * 1024 ** 2
    assert cache_admin.parse_size("1.5GiB") == int(1.5 * 1024 ** 3)
    assert cache_admin.parse_size(4096) == 4096
    with pytest.raises(ValueError, match="write it as 500M"):
        cache_admin.parse_size("lots")


def test_asm_prints_a_stage_for_a_signature(capsys):
    args = [f"{VECTOR_ADD}::add_kernel", "x=f32[4096]", "y=f32[4096]", "out=f32[4096]",
            "BLOCK=1024"]
    assert cli.main(["asm", *args]) == 0
    assert "func.func @add_kernel" in capsys.readouterr().out
    assert cli.main(["asm", *args, "--stage", "tile_ir"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("func @add_kernel") and "tile.load %x_0" in out


@pytest.mark.parametrize("argv,message", [
    (["asm", "nofile.py::k"], "no such file"),
    (["asm", f"{VECTOR_ADD}::missing"], "no @pypto.jit kernel named 'missing'"),
    (["asm", f"{VECTOR_ADD}"], "FILE.py::kernel"),
    (["asm", f"{VECTOR_ADD}::add_kernel", "x=q[3]"], "unknown dtype name 'q'"),
    (["asm", f"{VECTOR_ADD}::add_kernel", "x"], "name=value"),
    (["cache", "prune", "--max-size", "big"], "write it as 500M"),
])
def test_cli_errors_are_one_line(argv, message, capsys):
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_the_console_entry_point_runs(fresh_cache):
    out = subprocess.run([sys.executable, "-m", "pypto.cli", "cache", "info"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYPTO_CACHE_DIR": str(fresh_cache)})
    assert out.returncode == 0 and "cache directory" in out.stdout
