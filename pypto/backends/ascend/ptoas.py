"""The real assembler, when it is installed: PTOAS's ``ptoas`` lowers the ``.pto`` text to the
pto-isa C++ that bisheng builds for the NPU (``compiled.asm["cpp"]``).

``PYPTO_PTOAS`` names the binary; otherwise ``ptoas`` on ``PATH`` is used; otherwise nothing
happens and ``asm`` has no "cpp". PyPTO plans memory and places flags itself, so the text is
lowered at ``--pto-level=level3``, which keeps its addresses and flags. PyPTO promises that
the assembler accepts every kernel it prints, so a rejection is a compiler bug
(``InternalError``), never the user's.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
import warnings

from ... import envs
from ...errors import InternalError, user_stacklevel
from ...compiler.pto.dialect import DEFAULT as _DEFAULT, for_version

LEVEL = "--pto-level=level3"
TIMEOUT_SECONDS = 60


class ToolMissing(RuntimeError):
    """A tool PyPTO was told to use (by a variable) or needs (the pto-isa engine) is absent."""


def find() -> str | None:
    """The ptoas binary to use, or None."""
    configured = envs.PYPTO_PTOAS.get()
    if configured:
        if not os.access(configured, os.X_OK):
            raise ToolMissing(f"PYPTO_PTOAS={configured!r} is not an executable: set it to "
                              "PTOAS's ptoas binary, or unset it")
        return configured
    return shutil.which("ptoas")


@functools.lru_cache(maxsize=8)
def _version(path: str) -> str:
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True,
                              timeout=TIMEOUT_SECONDS)
    except OSError as e:
        return f"unusable: {e}"
    return (done.stdout or done.stderr).strip()


def dialect():
    """The ``.pto`` spelling of the assembler PyPTO will use (``compiler.pto.dialect``): its
    version's, or the newest PyPTO knows when there is none. One warning per assembler when
    its version is newer than PyPTO knows or unreadable; an error when it is too old."""
    path = find()
    return _DEFAULT if path is None else _dialect_of(path)


@functools.lru_cache(maxsize=8)
def _dialect_of(path: str):
    chosen, warning = for_version(_version(path), path)      # UnsupportedAssembler: too old
    if warning:
        warnings.warn(warning, AssemblerVersionWarning, stacklevel=user_stacklevel())
    return chosen


class AssemblerVersionWarning(UserWarning):
    """The assembler's version is not one PyPTO knows: it prints the newest form it knows."""


def identity() -> tuple[str, str] | None:
    """(path, version) of the assembler, for the cache key: its C++ is an artifact."""
    path = find()
    return None if path is None else (path, _version(path))


def lower(pto_text: str, path: str | None = None, level3: bool = True) -> str | None:
    """The C++ of ``pto_text`` (by ``path``, else the configured assembler), or None when no
    assembler is installed. ``level3=False`` lowers at PTOAS's default level 2, where the
    assembler plans the tiles' addresses (text that gives none: ``pypto.load_pto``)."""
    path = path or find()
    if path is None:
        return None
    with tempfile.TemporaryDirectory(prefix="pypto-ptoas-") as tmp:
        src, out = os.path.join(tmp, "kernel.pto"), os.path.join(tmp, "kernel.cpp")
        with open(src, "w") as f:
            f.write(pto_text)
        try:
            done = subprocess.run([path, src, "-o", out] + ([LEVEL] if level3 else []),
                                  capture_output=True,
                                  text=True, timeout=TIMEOUT_SECONDS)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise InternalError(f"the assembler {path} could not run: {e}", pto_text) from None
        if done.returncode != 0 or not os.path.exists(out):
            errors = [ln for ln in done.stderr.splitlines() if "error" in ln.lower()]
            first = errors[0] if errors else done.stderr.strip()[-500:]
            raise InternalError(f"PTOAS ({path}) rejected the .pto PyPTO printed: {first}",
                                pto_text)
        with open(out) as f:
            return f.read()
