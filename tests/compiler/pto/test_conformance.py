"""Conformance of the printed ``.pto`` with the real PTOAS assembler.

Every kernel of the corpus (tests/compiler/pto/corpus.py) is compiled, its ``.pto`` text is
checked with ``pto-oracle check`` (PTOAS's parser and verifiers; one call for the whole corpus,
results reported per kernel) and lowered with ``pto-oracle lower --level3`` (ptoas to pto-isa
C++, keeping the tile addresses the printer gives).

The oracle is the directory ``$PTO_ORACLE``, else ``<repo root>/../shared/pto-oracle`` (for a
git worktree, also next to the main checkout). Without it, or if its ``bin/ptoas`` does not run
(``bash ../shared/pto-oracle/setup.sh`` installs its libraries), the module is skipped.
"""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest

ROOT = Path(__file__).resolve().parents[3]

# The families the corpus must cover, kept here (not only in corpus.py) so that a corpus edit
# cannot drop one unnoticed.
REQUIRED_TAGS = {
    "tutorial", "benchmark", "testsuite",
    "unary", "binary-tt", "binary-ts", "compare", "where", "cast", "reduce-sum", "reduce-max",
    "reduce-min", "reduce-prod", "reduce-axis0", "reduce-axis1", "broadcast", "reshape",
    "transpose", "slice", "concat", "arange", "full", "zeros",
    "f32", "f16", "bf16", "i32", "i16", "i8", "uint16", "uint32", "f8", "int4",
    "for-scalar-iter", "for-tile-iter", "if-else", "while", "num-stages", "static-range",
    "barrier", "signal-wait", "manual-sync", "async-load", "atomic",
    "matmul-f16", "matmul-f32", "matmul-i8", "matmul-bf16", "k-loop", "mixed",
    "tail-rows", "tail-cols", "grid-1d", "grid-2d", "grid-3d", "num-programs", "dynamic",
    "ascend910b1", "ascend910b2", "ascend910b3", "ascend910b4",
    "layout-nz", "layout-nc1hwc0", "gather", "scatter", "sort", "topk", "column-mask",
}


# -- finding the oracle ---------------------------------------------------------------------------

def _candidates() -> list[Path]:
    if os.environ.get("PTO_ORACLE"):
        return [Path(os.environ["PTO_ORACLE"])]
    found = [ROOT.parent / "shared" / "pto-oracle"]
    try:        # a linked worktree: also beside the main checkout
        common = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--path-format=absolute", "--git-common-dir"],
            capture_output=True, text=True, timeout=10)
        if common.returncode == 0 and common.stdout.strip():
            main = Path(common.stdout.strip()).parent
            if main != ROOT:
                found.append(main.parent / "shared" / "pto-oracle")
    except (OSError, subprocess.SubprocessError):
        pass
    return found


def _find_oracle() -> tuple[Path | None, str]:
    """(the oracle directory, "") or (None, why not)."""
    tried = _candidates()
    for d in tried:
        if (d / "pto-oracle").is_file():
            break
    else:
        if os.environ.get("PTO_ORACLE"):
            return None, f"PTO_ORACLE={tried[0]} holds no pto-oracle script"
        return None, (f"pto-oracle not found in {' or '.join(map(str, tried))} (set PTO_ORACLE "
                      f"to the pto-oracle directory)")
    try:
        r = subprocess.run([str(d / "bin" / "ptoas"), "--version"], capture_output=True,
                           text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"{d}/bin/ptoas does not run ({e}); run bash {d}/setup.sh"
    if r.returncode != 0:
        first = (r.stderr or r.stdout).strip().splitlines()[:1]
        return None, (f"{d}/bin/ptoas --version fails ({first[0] if first else r.returncode}); "
                      f"run bash {d}/setup.sh")
    return d.resolve(), ""


ORACLE, _why = _find_oracle()
if ORACLE is None:
    pytest.skip(_why, allow_module_level=True)
PTO_ORACLE = str(ORACLE / "pto-oracle")
# Each PTOAS version the oracle has (PTO_ORACLE_VERSION selects it for pto-oracle): the corpus
# is printed for that version (PYPTO_PTOAS: PyPTO reads its --version) and checked with it.
ASSEMBLERS = {"0.60": ORACLE / "bin" / "ptoas", "0.27": ORACLE / "bin" / "0.27" / "ptoas"}
VERSIONS = [v for v, path in ASSEMBLERS.items() if path.is_file()]

from . import corpus   # noqa: E402  (after the skip: no oracle, no compiling)

NAMES = [entry.name for entry in corpus.CORPUS if not entry.refused]


# -- checking the whole corpus at once ------------------------------------------------------------

@dataclass
class Checked:
    path: Path
    compile_error: str | None = None     # the kernel did not compile
    check: str | None = None             # "OK" or the first error pto-oracle check printed


def _oracle(version: str, *args, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "PTO_ORACLE_VERSION": version}
    return subprocess.run([PTO_ORACLE, *args], capture_output=True, text=True, env=env,
                          **kwargs)


def _compile_all(directory: Path, version: str) -> dict[str, Checked]:
    with mock.patch.dict(os.environ, {"PYPTO_PTOAS": str(ASSEMBLERS[version])}):
        return _compile_each(directory)


def _compile_each(directory: Path) -> dict[str, Checked]:
    results = {}
    for entry in corpus.CORPUS:
        if entry.refused:            # test_refusals.py: the NPU target refuses these
            continue
        path = directory / f"{entry.name}.pto"
        try:
            text = entry.build()
        except Exception as e:      # noqa: BLE001  (reported by the kernel's own test)
            results[entry.name] = Checked(path, compile_error=f"{type(e).__name__}: {e}")
            continue
        path.write_text(text)
        results[entry.name] = Checked(path)
    return results


@pytest.fixture(scope="module", params=VERSIONS)
def version(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def checked(tmp_path_factory, version) -> dict[str, Checked]:
    """Every corpus kernel compiled for ``version`` into one directory and checked by one
    pto-oracle call."""
    results = _compile_all(tmp_path_factory.mktemp(f"pto-conformance-{version}"), version)
    files = [r for r in results.values() if r.compile_error is None]
    if not files:
        return results
    run = _oracle(version, "check", *(str(r.path) for r in files), timeout=600)
    lines = run.stdout.splitlines()
    for r in files:
        prefix = f"{r.path}: "
        line = next((s for s in lines if s.startswith(prefix)), None)
        if line is None:
            r.check = (f"no verdict for this file from pto-oracle check (exit "
                       f"{run.returncode}): {run.stdout[-2000:]}{run.stderr[-2000:]}")
        else:
            verdict = line[len(prefix):]
            r.check = "OK" if verdict == "OK" else verdict.removeprefix("FAIL: ")
    return results


def _located(message: str, path: Path) -> str:
    """The message plus the line of ``path`` it points at (``FILE:LINE:COL`` or
    ``loc("FILE":LINE:COL)``), with a caret under the column."""
    m = re.search(re.escape(str(path)) + r'"?:(\d+):(\d+)', message)
    if not m:
        return message
    line, col = int(m.group(1)), int(m.group(2))
    text = path.read_text().splitlines()
    if not 1 <= line <= len(text):
        return message
    src = text[line - 1]
    head = f"line {line}: "
    indent = len(src) - len(src.lstrip())
    return f"{message}\n  {head}{src.strip()}\n  {' ' * (len(head) + max(col - 1 - indent, 0))}^"


def _describe(name: str) -> str:
    return f"{name} (covers: {corpus.BY_NAME[name].covers})"


@pytest.mark.parametrize("name", NAMES)
def test_pto_conforms_to_ptoas(name, checked, version, tmp_path):
    r = checked[name]
    if r.compile_error is not None:
        pytest.fail(f"{_describe(name)} does not compile for ptoas {version}: "
                    f"{r.compile_error}", pytrace=False)
    if r.check != "OK":
        pytest.fail(f"pto-oracle check (ptoas {version}) rejects {_describe(name)}:\n"
                    f"{_located(r.check, r.path)}\n  file: {r.path}", pytrace=False)

    out = tmp_path / f"{name}.cpp"
    low = _oracle(version, "lower", str(r.path), "-o", str(out), "--level3", timeout=300)
    if low.returncode != 0:
        errors = [s for s in (low.stderr + low.stdout).splitlines() if "error" in s.lower()]
        first = errors[0] if errors else (low.stderr or low.stdout).strip()[-2000:]
        pytest.fail(f"pto-oracle lower --level3 (ptoas {version}) fails on {_describe(name)} "
                    f"(exit {low.returncode}):\n{_located(first, r.path)}\n  file: {r.path}",
                    pytrace=False)
    assert out.is_file() and out.stat().st_size > 0, \
        f"pto-oracle lower --level3 wrote no C++ for {_describe(name)} ({r.path})"


def test_corpus_is_large_and_covers_every_family():
    assert len(NAMES) >= 40
    assert len(set(NAMES)) == len(NAMES)
    tags = corpus.covered()
    assert not REQUIRED_TAGS - tags, f"no corpus kernel covers {sorted(REQUIRED_TAGS - tags)}"
    for entry in corpus.CORPUS:
        assert entry.covers.strip(), f"{entry.name} has no covers tags"


# -- compiled.asm["cpp"] ---------------------------------------------------------------------------

def test_asm_cpp_holds_the_assemblers_cpp_and_the_cache_keeps_it(fresh_cache, monkeypatch):
    import numpy as np

    import pypto
    from pypto.compiler import cache as cache_mod

    monkeypatch.setenv("PYPTO_PTOAS", str(ORACLE / "bin" / "ptoas"))
    fn = corpus._tut("01_vector_add").add_kernel.fn
    x = np.random.rand(1000).astype(np.float32)
    cpp = pypto.jit(fn).compile(x, x, np.empty_like(x), BLOCK=256).asm["cpp"]
    assert "TLOAD(" in cpp and "TADD(" in cpp and "TSTORE(" in cpp
    hits = cache_mod.STATS["disk_hits"]
    again = pypto.jit(fn).compile(x, x, np.empty_like(x), BLOCK=256)   # no in-memory copy
    assert cache_mod.STATS["disk_hits"] == hits + 1 and again.asm["cpp"] == cpp
