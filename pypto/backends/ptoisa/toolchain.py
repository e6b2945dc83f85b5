"""What the pto-isa engine needs from the machine: PTOAS's ``ptoas``, pto-isa's headers and a
C++ compiler that can build pto-isa's CPU simulator (clang++ 19; g++ 12 cannot).

Each is found from a variable first (``PYPTO_PTOAS``, ``PTO_ISA_ROOT``, ``PYPTO_CXX``), then
from ``PTO_ORACLE`` (the packaged toolchain's directory, which ``.ci/run`` exports), then from
``PATH``. A missing piece is a ``ToolMissing`` error that names the variable to set. The
identity of all three (paths, versions, a digest of the headers) goes into the engine's cache
key: the shared library is built from them.
"""
from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass

from ... import envs
from ..ascend import ptoas

# The CPU simulator's flags, as pto-oracle's ``cpusim-cxx`` prints them.
CPU_SIM_FLAGS = ("-std=c++20", "-D__CPU_SIM", "-Wno-macro-redefined", "-Wno-ignored-attributes",
                 "-pthread", "-include", "stdint.h", "-include", "stddef.h")
COMPILERS = ("clang++-19", "clang++")


ToolMissing = ptoas.ToolMissing       # the error when a tool is missing (defined beside ptoas)


@dataclass(frozen=True)
class Toolchain:
    ptoas: str
    headers: str          # the directory that holds pto/pto-inst.hpp
    cxx: str

    def identity(self) -> tuple:
        return (ptoas.identity(), self.headers, headers_digest(self.headers),
                self.cxx, _cxx_version(self.cxx))


def _oracle() -> str | None:
    root = os.environ.get("PTO_ORACLE", "")
    return root if root and os.path.isdir(root) else None


def find_ptoas() -> str:
    path = ptoas.find()
    if path is None and _oracle():
        candidate = os.path.join(_oracle(), "bin", "ptoas")
        path = candidate if os.access(candidate, os.X_OK) else None
    if path is None:
        raise ToolMissing(
            "the pto-isa engine needs PTOAS's assembler: set PYPTO_PTOAS to the ptoas binary "
            "(or PTO_ORACLE to the pto-oracle directory), or put ptoas on PATH")
    return path


def find_headers() -> str:
    candidates = [envs.PTO_ISA_ROOT.get()]
    candidates += [os.path.join(c, "include") for c in candidates if c]
    if _oracle():
        candidates.append(os.path.join(_oracle(), "include"))
    for c in candidates:
        if c and os.path.isfile(os.path.join(c, "pto", "pto-inst.hpp")):
            return os.path.abspath(c)
    raise ToolMissing(
        "the pto-isa engine needs pto-isa's headers: set PTO_ISA_ROOT to the directory that "
        "holds pto/pto-inst.hpp (or to the pto-isa checkout), or PTO_ORACLE to pto-oracle")


def find_cxx() -> str:
    configured = envs.PYPTO_CXX.get()
    found = shutil.which(configured) if configured else next(
        (p for p in map(shutil.which, COMPILERS) if p), None)
    if found is None:
        raise ToolMissing(
            "the pto-isa engine needs clang++ 19 to build pto-isa's CPU simulator: install "
            "clang-19 (bash ../shared/pto-oracle/setup.sh does) or set PYPTO_CXX"
            + (f" (PYPTO_CXX={configured!r} is not an executable)" if configured else ""))
    return found


def find() -> Toolchain:
    """All three tools, or one ``ToolMissing`` that names every missing one (and so every
    variable to set): a machine with none of them learns about each at once, not one per run."""
    found, missing = [], []
    for finder in (find_ptoas, find_headers, find_cxx):
        try:
            found.append(finder())
        except ToolMissing as e:
            missing.append(str(e))
    if missing:
        raise ToolMissing("; ".join(missing))
    return Toolchain(*found)


@functools.lru_cache(maxsize=8)
def headers_digest(root: str) -> str:
    """SHA-256 over every header's path and bytes: a different pto-isa is a different key."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in sorted(os.walk(os.path.join(root, "pto"))):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            h.update(os.path.relpath(path, root).encode())
            with open(path, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


@functools.lru_cache(maxsize=8)
def _cxx_version(cxx: str) -> str:
    try:
        done = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60)
    except OSError as e:
        return f"unusable: {e}"
    return done.stdout.splitlines()[0] if done.stdout else done.stderr.strip()
