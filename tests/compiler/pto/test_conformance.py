"""Conformance of the printed ``.pto`` with the real PTOAS assembler.

Once per PTOAS version the oracle has (0.60 and 0.27), every kernel of the corpus
(tests/compiler/pto/corpus.py) is compiled for that version, its ``.pto`` text is
checked with ``pto-oracle check`` (PTOAS's parser and verifiers; one call for the whole corpus,
results reported per kernel), lowered with ``pto-oracle lower --level3`` (ptoas to pto-isa
C++, keeping the tile addresses the printer gives), and that C++ compiled against pto-isa's
NPU implementation headers (``pto-oracle npu-check``'s build, A2/A3): their static_asserts are
the chip's rules (dtype lists, layouts, TLOAD forms) that neither PTOAS nor the CPU simulator
checks. The NPU compiles are batched, several kernels to one translation unit (each in a
namespace of its own), since parsing the headers is most of a compile; a batch that fails is
checked again file by file, so each kernel gets its own verdict.

The oracle is the directory ``$PTO_ORACLE``, else ``<repo root>/../shared/pto-oracle`` (for a
git worktree, also next to the main checkout). Without it, or if its ``bin/ptoas`` does not run
(``bash ../shared/pto-oracle/setup.sh`` installs its libraries), the module is skipped.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
from concurrent.futures import ThreadPoolExecutor
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
    "l1-slice",
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

from pypto.compiler.pto.dialect import Dialect          # noqa: E402
from pypto.compiler.pto.printer import print_program    # noqa: E402
from pypto.compiler.pto.reader import parse_program     # noqa: E402

from . import corpus   # noqa: E402  (after the skip: no oracle, no compiling)

NAMES = [entry.name for entry in corpus.CORPUS if not entry.refused]


# -- checking the whole corpus at once ------------------------------------------------------------

@dataclass
class Checked:
    path: Path
    compile_error: str | None = None     # the kernel did not compile
    check: str | None = None             # "OK" or the first error pto-oracle check printed
    lower: str | None = None             # "OK" or why pto-oracle lower --level3 failed
    npu: str | None = None               # "OK" or the first error of the NPU headers

    @property
    def cpp(self) -> Path:
        return self.path.with_suffix(".cpp")


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
    """Every corpus kernel compiled for ``version`` into one directory, checked by one
    pto-oracle call, lowered, and its C++ compiled against the NPU headers."""
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
    ok = [r for r in files if r.check == "OK"]
    with ThreadPoolExecutor(max(1, min(4, os.cpu_count() or 1))) as pool:
        list(pool.map(lambda r: _lower(r, version), ok))
    _npu_check([r for r in ok if r.lower == "OK"])
    return results


def _lower(r: Checked, version: str) -> None:
    """``pto-oracle lower --level3`` of one checked file into ``r.cpp``."""
    low = _oracle(version, "lower", str(r.path), "-o", str(r.cpp), "--level3", timeout=300)
    if low.returncode != 0:
        errors = [s for s in (low.stderr + low.stdout).splitlines() if "error" in s.lower()]
        first = errors[0] if errors else (low.stderr or low.stdout).strip()[-2000:]
        r.lower = f"(exit {low.returncode}):\n{_located(first, r.path)}"
    elif not r.cpp.is_file() or r.cpp.stat().st_size == 0:
        r.lower = "wrote no C++"
    else:
        r.lower = "OK"


NPU_BATCH = 40          # kernels per NPU compile (~5 s and ~300 MB for 40)
# bisheng's FFTS builtins and the TCI-with-tmp overload, which the cost model's headers lack
NPU_STAND_INS = Path(__file__).with_name("npu_stand_ins.hpp")


def _npu_cxx() -> list[str]:
    """The NPU build's compiler command (``pto-oracle npu-cxx``: pto-isa's a2a3 headers under
    its cost model's stand-ins for the CCE intrinsics); the first call builds the headers."""
    run = subprocess.run([PTO_ORACLE, "npu-cxx"], capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        pytest.fail(f"pto-oracle npu-cxx fails: {run.stderr.strip()[-2000:]}", pytrace=False)
    return shlex.split(run.stdout.strip()) + ["-include", str(NPU_STAND_INS)]


def _npu_check(lowered: list[Checked]) -> None:
    """Every lowered kernel's C++ compiled (-fsyntax-only) against the NPU headers, in
    batches; the kernels of a failing batch are compiled one by one for their own error."""
    if not lowered:
        return
    cxx = _npu_cxx()
    for start in range(0, len(lowered), NPU_BATCH):
        _npu_batch(cxx, lowered[start:start + NPU_BATCH])


def _npu_batch(cxx: list[str], batch: list[Checked]) -> None:
    """One translation unit for the batch. If it fails, the kernels its diagnostics point
    at (``#line`` names each kernel's file) are compiled alone, for their verdict and
    message, and the rest batched again; with no kernel named, the batch is halved."""
    if len(batch) == 1:
        r = batch[0]
        one = subprocess.run([*cxx, "-fsyntax-only", str(r.cpp)], capture_output=True,
                             text=True, timeout=300)
        r.npu = "OK" if one.returncode == 0 else _npu_error(one.stderr, r.cpp)
        return
    unit = batch[0].path.parent / f"npu_batch_{batch[0].path.stem}_{len(batch)}.cpp"
    parts = ['#include "pto/pto-inst.hpp"']
    for i, r in enumerate(batch):
        # the header once, outside; extern "C" names may repeat between kernels
        text = r.cpp.read_text().replace('#include "pto/pto-inst.hpp"', "") \
            .replace('extern "C" ', "")
        parts.append(f'namespace pypto_npu_{i} {{\n#line 1 "{r.cpp}"\n{text}\n}}')
    unit.write_text("\n".join(parts) + "\n")
    run = subprocess.run([*cxx, "-fsyntax-only", "-ferror-limit=0", str(unit)],
                         capture_output=True, text=True, timeout=900)
    if run.returncode == 0:
        for r in batch:
            r.npu = "OK"
        return
    named = [r for r in batch if f"{r.cpp}:" in run.stderr]
    rest = [r for r in batch if r not in named]
    if not named:
        half = len(batch) // 2
        named, rest = [], []
        _npu_batch(cxx, batch[:half])
        _npu_batch(cxx, batch[half:])
        return
    for r in named:
        _npu_batch(cxx, [r])
    if rest:
        _npu_batch(cxx, rest)


def _npu_error(stderr: str, cpp: Path) -> str:
    """The first error, and the line of the kernel's C++ whose instruction it is about."""
    lines = stderr.splitlines()
    first = next((i for i, s in enumerate(lines) if "error:" in s), None)
    if first is None:
        return stderr.strip()[-2000:] or "failed"
    message = re.sub(r"^\S*/include/", "include/", lines[first])
    where = next((s for s in lines[first:] if s.startswith(f"{cpp}:")), None)
    if where and where != lines[first]:
        m = re.match(re.escape(str(cpp)) + r":(\d+):", where)
        if m:
            src = cpp.read_text().splitlines()[int(m.group(1)) - 1].strip()
            message += f"\n  from {cpp.name}:{m.group(1)}: {src}"
    return message


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
def test_pto_conforms_to_ptoas(name, checked, version):
    r = checked[name]
    if r.compile_error is not None:
        pytest.fail(f"{_describe(name)} does not compile for ptoas {version}: "
                    f"{r.compile_error}", pytrace=False)
    if r.check != "OK":
        pytest.fail(f"pto-oracle check (ptoas {version}) rejects {_describe(name)}:\n"
                    f"{_located(r.check, r.path)}\n  file: {r.path}", pytrace=False)
    if r.lower != "OK":
        pytest.fail(f"pto-oracle lower --level3 (ptoas {version}) fails on {_describe(name)} "
                    f"{r.lower}\n  file: {r.path}", pytrace=False)
    if r.npu != "OK":
        pytest.fail(f"pto-oracle npu-check (pto-isa's A2/A3 headers) rejects ptoas {version}'s "
                    f"C++ of {_describe(name)}:\n{r.npu}\n  file: {r.cpp}", pytrace=False)
    # PyPTO's reader reads it back to the program that prints the same text (the corpus is
    # compiled with PYPTO_VERIFY_PTO=0, so this is where its kernels are held to it)
    text = r.path.read_text()
    again = print_program(parse_program(text), Dialect(tuple(map(int, version.split(".")))))
    if again != text:
        line = next(i for i, (a, b) in enumerate(zip(text.splitlines() + [""],
                                                     again.splitlines() + [""])) if a != b)
        pytest.fail(f"{_describe(name)}: the printed .pto does not read back identically; "
                    f"line {line + 1}:\n  printed {text.splitlines()[line:line + 1]}\n  "
                    f"re-read {again.splitlines()[line:line + 1]}\n  file: {r.path}",
                    pytrace=False)


def test_corpus_is_large_and_covers_every_family():
    assert len(NAMES) >= 40
    assert len(set(NAMES)) == len(NAMES)
    tags = corpus.covered()
    assert not REQUIRED_TAGS - tags, f"no corpus kernel covers {sorted(REQUIRED_TAGS - tags)}"
    for entry in corpus.CORPUS:
        assert entry.covers.strip(), f"{entry.name} has no covers tags"


_INT32_TFMOD = """#include "pto/pto-inst.hpp"
using namespace pto;

AICORE void int_fmod(__gm__ int32_t* v1) {
  using T = Tile<TileType::Vec, int32_t, 8, 32, BLayout::RowMajor, 8, 32, SLayout::NoneBox, 512,
                 PadValue::Null>;
  T a;
  TASSIGN(a, 0);
  TFMOD(a, a, a);
}
"""


def test_a_batched_npu_check_gives_each_kernel_its_own_verdict(checked, tmp_path):
    """A kernel the NPU headers refuse (an int32 TFMOD: "TFMOD supports only float element
    type") in the middle of a batch fails alone, with the header's message and its own line;
    the kernels batched with it still pass."""
    good = [r for r in checked.values() if r.npu == "OK"][:2]
    if len(good) < 2:
        pytest.skip("fewer than two corpus kernels pass npu-check")
    bad = Checked(tmp_path / "int_fmod.pto")
    bad.cpp.write_text(_INT32_TFMOD)
    batch = [Checked(good[0].path), bad, Checked(good[1].path)]
    _npu_batch(_npu_cxx(), batch)
    assert [r.npu == "OK" for r in batch] == [True, False, True]
    assert "TFMOD supports only float element type" in bad.npu
    assert "int_fmod.cpp:9: TFMOD(a, a, a);" in bad.npu


# -- compiled.asm["cpp"] ---------------------------------------------------------------------------

def test_asm_cpp_holds_the_assemblers_cpp_and_the_cache_keeps_it(fresh_cache, monkeypatch):
    import numpy as np

    import pypto
    from pypto import cache as cache_mod

    monkeypatch.setenv("PYPTO_PTOAS", str(ORACLE / "bin" / "ptoas"))
    fn = corpus._tut("01_vector_add").add_kernel.fn
    x = np.random.rand(1000).astype(np.float32)
    cpp = pypto.jit(fn).compile(x, x, np.empty_like(x), BLOCK=256).asm["cpp"]
    assert "TLOAD(" in cpp and "TADD(" in cpp and "TSTORE(" in cpp
    hits = cache_mod.STATS["disk_hits"]
    again = pypto.jit(fn).compile(x, x, np.empty_like(x), BLOCK=256)   # no in-memory copy
    assert cache_mod.STATS["disk_hits"] == hits + 1 and again.asm["cpp"] == cpp
