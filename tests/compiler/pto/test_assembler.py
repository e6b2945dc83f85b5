"""``compiled.asm["cpp"]`` exists exactly when an assembler is installed (test_conformance.py
checks its content with the real one); a broken assembler is the compiler's error, named."""
import os
import stat

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.compiler.errors import InternalError


@pypto.jit
def add_one(x, out, BLOCK: pl.constexpr):
    pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(BLOCK,)) + 1.0)


def _fake_ptoas(tmp_path, body: str) -> str:
    path = tmp_path / "ptoas"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_no_assembler_no_cpp_and_nothing_else_changes(fresh_cache, monkeypatch, tmp_path):
    monkeypatch.setenv("PYPTO_PTOAS", "")
    monkeypatch.setenv("PATH", str(tmp_path))           # no ptoas on PATH either
    x = np.arange(16, dtype=np.float32)
    compiled = pypto.jit(add_one.fn).compile(x, np.empty_like(x), BLOCK=16)
    assert "cpp" not in compiled.asm and "pto" in compiled.asm


def test_the_assembler_on_path_is_used_and_its_output_kept(fresh_cache, monkeypatch, tmp_path):
    _fake_ptoas(tmp_path, 'case "$1" in --version) echo fake 1;; *) '
                          'echo "// lowered $1" > "$3";; esac\n')
    monkeypatch.setenv("PYPTO_PTOAS", "")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    x = np.arange(16, dtype=np.float32)
    compiled = pypto.jit(add_one.fn).compile(x, np.empty_like(x), BLOCK=16)
    assert compiled.asm["cpp"].startswith("// lowered ")


def test_a_rejecting_assembler_is_an_internal_error(fresh_cache, monkeypatch, tmp_path):
    fake = _fake_ptoas(tmp_path, 'case "$1" in --version) echo fake 2;; *) '
                                 'echo "kernel.pto:3:5: error: no good" >&2; exit 1;; esac\n')
    monkeypatch.setenv("PYPTO_PTOAS", fake)
    x = np.arange(16, dtype=np.float32)
    with pytest.raises(InternalError, match="rejected the .pto PyPTO printed: .*no good"):
        pypto.jit(add_one.fn).compile(x, np.empty_like(x), BLOCK=16)
