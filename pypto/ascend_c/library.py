"""An Ascend C kernel built for pto-isa's CPU simulator, exactly as the pto-isa engine builds
the code ``ptoas`` emits (``backends/ptoisa``): the same compiler, flags, precompiled prelude
and generated host entry (``pypto_run``: blocks over host threads, each a simulated core), so
the kernel runs and fails (``SimulatorError``) as engine kernels do.

The translation unit is the user's source inside the entry's namespace, its ``#include`` lines
hoisted above it, and a ``#line`` directive so that the compiler's diagnostics name the
user's file and lines; a rejection becomes ``AscendCCompileError`` at that line. Libraries are
cached on disk (``cache/__init__.py``: content-addressed, atomic, trusted only if the user
alone can write them) under the source, the kernel's name, the toolchain's identity (headers'
digest, compiler and version), the prelude, the optimisation level and the code that writes
the entry.
"""
from __future__ import annotations

import functools
import hashlib
import json
import re

from ..backends.ptoisa import engine, entry, toolchain
from ..backends.ptoisa.engine import BuildFailed
from .. import cache as cache_mod
from ..errors import CompilationError, SourceLoc

ENTRY_FILE = "pypto-ascend-c-entry.cpp"
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include\b.*$", re.M)
_DIAGNOSTIC = re.compile(r"^(?P<file>.*?):(?P<line>\d+):(?P<col>\d+): (?P<kind>fatal error|error|"
                         r"note|warning): (?P<text>.*)$")
SETUP_HINT = ("run `bash ../shared/pto-oracle/setup.sh` (from the project's root; it installs "
              "clang-19) and set PTO_ORACLE to the pto-oracle directory, or set PTO_ISA_ROOT "
              "(pto-isa's headers) and PYPTO_CXX (clang++ 19)")


class AscendCCompileError(CompilationError):
    """The C++ compiler rejected an Ascend C kernel's source: its message, at the user's line."""


def tools(kernel_name: str) -> toolchain.Toolchain:
    """pto-isa's headers and clang++ 19 (no assembler: the source is already C++)."""
    try:
        return toolchain.Toolchain("", toolchain.find_headers(), toolchain.find_cxx())
    except toolchain.ToolMissing as e:
        raise toolchain.ToolMissing(
            f"Ascend C kernel {kernel_name!r}: building it for this host needs pto-isa's "
            f"headers and clang++ 19 (pto-isa's CPU simulator): {e}. To set it up, "
            f"{SETUP_HINT}") from None


@functools.lru_cache(maxsize=1)
def _code_digest() -> str:
    """What writes the translation unit: this module and the entry generator."""
    h = hashlib.sha256()
    for module in (__file__, entry.__file__):
        with open(module, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def cache_key(source: str, name: str, filename: str, tc: toolchain.Toolchain) -> str:
    identity = (tc.headers, toolchain.headers_digest(tc.headers), tc.cxx,
                toolchain._cxx_version(tc.cxx))
    return cache_mod.digest(("ascend-c", source, name, filename, identity,
                             engine._prelude_digest(), engine._opt_level(), _code_digest()))


def translation_unit(source: str, filename: str, signature, plan: list) -> str:
    """The user's kernel and its ``pypto_run`` entry, as one C++ file."""
    includes = _INCLUDE.findall(source)
    body = _INCLUDE.sub("", source)               # the lines stay, empty: numbers unchanged
    quoted = filename.replace("\\", "\\\\").replace('"', '\\"')
    kernel = f'#line 1 "{quoted}"\n{body}\n#line 1 "{ENTRY_FILE}"'
    funcs = [entry.Function(signature.name, "vector",
                            [(p.name, p.cxx) for p in signature.params])]
    return "\n".join(includes) + "\n" + entry.source(kernel, funcs, plan, {})


def slot_plan(signature) -> list:
    return [entry.Slot("ptr" if p.kind == "tensor" else p.kind, p.name)
            for p in signature.params]


def load(source: str, name: str, filename: str, signature, cores: int):
    """The kernel as a launchable ``PtoIsaKernel`` (from the disk cache, or built now)."""
    tc = tools(name)
    plan = slot_plan(signature)
    key = cache_key(source, name, filename, tc)

    def build() -> dict:
        unit = translation_unit(source, filename, signature, plan)
        try:
            library = engine.build(unit, tc)
        except BuildFailed as e:
            raise compile_error(e.stderr, source, filename, name) from None
        about = {"name": name, "file": filename}          # what `pypto cache list` shows
        return {engine.LIBRARY: library, "kernel.cpp": unit.encode(),
                "ascend_c.json": json.dumps(about).encode()}

    files = cache_mod.fetch_or_build(key, (engine.LIBRARY,), build, record=False)
    library = engine.Library(files[engine.LIBRARY])
    return engine.PtoIsaKernel(library, "pypto_run", plan, False, cores, name)


def compile_error(stderr: str, source: str, filename: str, name: str) -> AscendCCompileError:
    """The compiler's first error, located at the first line of the user's file its
    diagnostic names (the error itself, or the note of the instantiation that led to it)."""
    lines = stderr.splitlines()
    first = next((i for i, ln in enumerate(lines)
                  if (m := _DIAGNOSTIC.match(ln)) and m["kind"] in ("error", "fatal error")), None)
    if first is None:
        return AscendCCompileError(f"Ascend C kernel {name!r} does not compile:\n"
                                   f"{stderr.strip()[-2000:]}")
    error = _DIAGNOSTIC.match(lines[first])
    loc = None
    for i, ln in enumerate(lines[first:], first):
        m = _DIAGNOSTIC.match(ln)
        if m and m["file"] == filename:
            text = source.splitlines()
            number = int(m["line"])
            loc = SourceLoc(filename, number, int(m["col"]) - 1,
                            source_line=text[number - 1] if 0 < number <= len(text) else "",
                            function=name)
            break
        if m and m["kind"] in ("error", "fatal error") and i > first:
            break                                  # the next error: no user line for this one
    where = "" if error["file"] == filename else f" (in {error['file']}:{error['line']})"
    return AscendCCompileError(f"the C++ compiler rejects Ascend C kernel {name!r}: "
                               f"{error['kind']}: {error['text']}{where}", loc)
