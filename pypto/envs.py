"""Every environment variable PyPTO reads, in one registry.

Each variable says whether it changes generated code. Those that do are folded into the
compilation cache key (see ``code_changing_environment``), so flipping one can never hand back
a binary built under another setting.
"""
from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class EnvVar:
    name: str
    default: str
    changes_code: bool
    doc: str
    chooses_runner: bool = False     # picks who runs a compiled kernel: in the launch key

    @property
    def in_launch_key(self) -> bool:
        """The warm launcher re-dispatches when this variable changes."""
        return self.changes_code or self.chooses_runner

    def get(self) -> str:
        return os.environ.get(self.name, self.default)

    def number(self, minimum: float = 0) -> float:
        """The variable as a number of at least ``minimum``, or a ValueError that names it."""
        raw = self.get()
        try:
            value = float(raw)
        except ValueError:
            value = float("nan")
        if not value >= minimum:            # also NaN
            raise ValueError(f"{self.name}={raw!r}: expected a number >= {minimum:g} "
                             f"({self.doc}); unset it for the default, {self.default}")
        return value


_REGISTRY: dict[str, EnvVar] = {}


def register(name: str, default: str, changes_code: bool, doc: str,
             chooses_runner: bool = False) -> EnvVar:
    var = EnvVar(name, default, changes_code, doc, chooses_runner)
    _REGISTRY[name] = var
    return var


PTO_TARGET = register("PTO_TARGET", "ascend910b1", True, "target chip description")
PTO_OPT_LEVEL = register("PTO_OPT_LEVEL", "O3", True, "host code optimization level, O0-O3")
PYPTO_CACHE_DIR = register("PYPTO_CACHE_DIR", "", False,
                           "on-disk kernel cache; default ~/.cache/pypto (XDG_CACHE_HOME honoured)")
PYPTO_CACHE_MAX_BYTES = register("PYPTO_CACHE_MAX_BYTES", "", False,
                                 "size limit of the disk cache (500M, 2G, bytes): least "
                                 "recently used entries are removed after each new one")
PYPTO_NUM_THREADS = register("PYPTO_NUM_THREADS", "", False,
                             "host threads simulating AI Cores; default: one per host core")
PYPTO_LOG = register("PYPTO_LOG", "", False,
                     "comma-separated log topics: compile, cache, recompile, autotune")
PYPTO_DUMP_IR = register("PYPTO_DUMP_IR", "", False, "print the IR after every pass")
PYPTO_INTERPRET = register("PYPTO_INTERPRET", "", False,
                           "1: run kernels in the reference interpreter, blocks in order",
                           chooses_runner=True)
PYPTO_SANITIZE = register("PYPTO_SANITIZE", "", False,
                          "1: every launch runs sanitized (out-of-range loads and stores, "
                          "unwritten outputs, races between blocks reported as warnings); "
                          "raise: findings raise SanitizerError", chooses_runner=True)
PYPTO_DEBUG = register("PYPTO_DEBUG", "", False,
                       "1: keep the compiler's own frames in CompilationError tracebacks")
PYPTO_DISABLE_CACHE = register("PYPTO_DISABLE_CACHE", "", False, "1: never read or write the disk cache")
PYPTO_SIM_OUTPUT = register("PYPTO_SIM_OUTPUT", "", False,
                            "where pypto.frontend RunMode.SIM calls write CANN's swim lane and "
                            "report (default ./output, as CANN); off: write nothing")
PYPTO_OVERRIDE_DIR = register("PYPTO_OVERRIDE_DIR", "", True,
                              "directory of hand-edited <kernel name>.pto files, compiled in "
                              "place of the generated PTO (their content is in the cache key)")

PYPTO_SYNC_TIMEOUT = register("PYPTO_SYNC_TIMEOUT", "10", True,
                              "seconds a barrier or pl.wait may make no progress before the "
                              "launch is reported as deadlocked; at least 1")

PYPTO_PTOAS = register("PYPTO_PTOAS", "", True,
                      "path of PTOAS's ptoas; default: ptoas on PATH. When found, every compile "
                      "prints its version's .pto and lowers it with it (compiled.asm['cpp']; "
                      "the assembler's identity is in the cache key)")

PYPTO_ENGINE = register("PYPTO_ENGINE", "native", False,
                        "which engine runs compiled kernels: native (PyPTO's own host code, "
                        "the default) or pto-isa (the .pto through ptoas into pto-isa's CPU "
                        "simulator); @pypto.jit(engine=...) overrides it per kernel",
                        chooses_runner=True)
PTO_ISA_ROOT = register("PTO_ISA_ROOT", "", False,
                        "pto-isa's headers (the directory holding pto/pto-inst.hpp, or the "
                        "checkout) for the pto-isa engine; default: $PTO_ORACLE/include")
PYPTO_CXX = register("PYPTO_CXX", "", False,
                     "C++ compiler for the pto-isa engine; default clang++-19, then clang++")

PYPTO_PTOISA_OPT = register("PYPTO_PTOISA_OPT", "O2", False,
                            "clang optimisation level of the pto-isa engine's libraries (O0 "
                            "builds about 3x faster, runs slower; it is in their cache key)")

PYPTO_VERIFY_PTO = register("PYPTO_VERIFY_PTO", "", False,
                            "1: after each compile, parse the printed .pto back and check that "
                            "it prints identically (the test suite sets it)")

PYPTO_PROGRESS = register("PYPTO_PROGRESS", "", False,
                          "autotuning sweeps' progress bar (@pypto.autotune without progress=, "
                          "tile_map(tile_size='auto')): 1 always, 0 never; default: when stderr "
                          "is a terminal")


def registry() -> dict[str, EnvVar]:
    return dict(_REGISTRY)


def code_changing_environment() -> tuple[tuple[str, str], ...]:
    """The (name, value) pairs that belong in a cache key."""
    return tuple((v.name, v.get()) for v in _REGISTRY.values() if v.changes_code)


def log_enabled(topic: str) -> bool:
    return topic in {t.strip() for t in PYPTO_LOG.get().split(",") if t.strip()}


def sanitize_mode() -> str:
    """``PYPTO_SANITIZE`` read: "" (off), "warn" or "raise"."""
    value = PYPTO_SANITIZE.get().strip().lower()
    if value in ("", "0", "off", "false", "no"):
        return ""
    return "raise" if value == "raise" else "warn"
