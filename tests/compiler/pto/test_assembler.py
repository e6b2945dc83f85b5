"""``compiled.asm["cpp"]`` exists exactly when an assembler is installed (test_conformance.py
checks its content with the real one); a broken assembler is the compiler's error, named."""
import os
import re
import stat

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.backends.ascend.ptoas import AssemblerVersionWarning
from pypto.errors import InternalError
from pypto.compiler.pto.dialect import UnsupportedAssembler


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
    _fake_ptoas(tmp_path, 'case "$1" in --version) echo "ptoas 0.60 (fake 1)";; *) '
                          'echo "// lowered $1" > "$3";; esac\n')
    monkeypatch.setenv("PYPTO_PTOAS", "")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    x = np.arange(16, dtype=np.float32)
    compiled = pypto.jit(add_one.fn).compile(x, np.empty_like(x), BLOCK=16)
    assert compiled.asm["cpp"].startswith("// lowered ")


def test_a_rejecting_assembler_is_an_internal_error(fresh_cache, monkeypatch, tmp_path):
    fake = _fake_ptoas(tmp_path, 'case "$1" in --version) echo "ptoas 0.60 (fake 2)";; *) '
                                 'echo "kernel.pto:3:5: error: no good" >&2; exit 1;; esac\n')
    monkeypatch.setenv("PYPTO_PTOAS", fake)
    x = np.arange(16, dtype=np.float32)
    with pytest.raises(InternalError, match="rejected the .pto PyPTO printed: .*no good"):
        pypto.jit(add_one.fn).compile(x, np.empty_like(x), BLOCK=16)


@pypto.jit
def barrier_add(x, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    t = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.barrier()
    pl.store(out, offsets=(pid * BLOCK,), value=t + 1.0)


def _versioned(tmp_path, version: str) -> str:
    return _fake_ptoas(tmp_path, f'case "$1" in --version) echo "ptoas {version}";; *) '
                                 'echo "// lowered" > "$3";; esac\n')


@pytest.mark.parametrize("version, ffts, tci_tmp", [("0.27", "memref<256xi64>", False),
                                                    ("0.56", "!pto.ptr<i64>", False),
                                                    ("0.60", "!pto.ptr<i64>", True)])
def test_the_pto_is_printed_for_the_assemblers_version(fresh_cache, monkeypatch, tmp_path,
                                                       version, ffts, tci_tmp):
    """Each PTOAS version gets its own spelling (compiler/pto/dialect.py): the FFTS base's
    type, TCI's scratch operand."""
    monkeypatch.setenv("PYPTO_PTOAS", _versioned(tmp_path, version))
    x = np.arange(64, dtype=np.float32)
    text = pypto.jit(barrier_add.fn).compile(x, np.empty_like(x), BLOCK=16).asm["pto"]
    assert f"pto.set_ffts %pypto_ffts : {ffts}" in text
    assert "attributes {pto.entry, pto.kernel_kind" in text

    @pypto.jit
    def iota(out, B: pl.constexpr):
        pl.store(out, offsets=(0,), value=pl.arange(0, B))

    text = iota.compile(np.empty(16, np.int32), B=16).asm["pto"]
    assert bool(re.search(r"pto\.tci ins\(%\w+, %\w+ : i32, ", text)) == tci_tmp, text


def test_an_assembler_too_old_is_refused_naming_both_versions(fresh_cache, monkeypatch, tmp_path):
    monkeypatch.setenv("PYPTO_PTOAS", _versioned(tmp_path, "0.20"))
    x = np.arange(16, dtype=np.float32)
    with pytest.raises(UnsupportedAssembler, match=r"ptoas 0\.20, older than ptoas 0\.27.*"
                                                   r"install ptoas 0\.60"):
        pypto.jit(add_one.fn).compile(x, np.empty_like(x), BLOCK=16)


def test_an_assembler_newer_than_known_warns_once_and_gets_the_newest_form(
        fresh_cache, monkeypatch, tmp_path):
    monkeypatch.setenv("PYPTO_PTOAS", _versioned(tmp_path, "0.99"))
    x = np.arange(16, dtype=np.float32)
    with pytest.warns(AssemblerVersionWarning, match=r"ptoas 0\.99, newer than ptoas 0\.60") \
            as caught:
        pypto.jit(add_one.fn).compile(x, np.empty_like(x), BLOCK=16)
        pypto.jit(add_one.fn).compile(x, np.empty_like(x), BLOCK=32)
    assert len([w for w in caught if w.category is AssemblerVersionWarning]) == 1
    assert caught[0].filename == __file__
