"""TSORT32, TMRGSORT (both forms) and TGATHER's mask form in the ``.pto``: printed, read back
(print -> parse -> print is the identity), accepted by PTOAS (``pto-oracle check`` and
``lower --level3``: skipped with the reason when the oracle is absent, as test_conformance
finds it), and run on pto-isa's CPU simulator in agreement with the native engine
(tests/engines covers the engines at large)."""
import os
import subprocess
from unittest import mock

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.compiler.pto.printer import print_program
from pypto.compiler.pto.reader import parse_program
from tests.quick import quick_cases


@pypto.jit
def topk_rows(x, v, i, M: pl.constexpr, N: pl.constexpr, K: pl.constexpr,
              LARGEST: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(M, N))
    values, indices = pl.topk(t, K, largest=LARGEST)
    pl.store(v, offsets=(0, 0), value=values)
    pl.store(i, offsets=(0, 0), value=indices)


topk_rows_sim = pypto.jit(engine="pto-isa")(topk_rows.fn)

# (rows, width, k): a full sort's 4-run merges (blockLen) and 3-list merge (96 of 96); top-k
# trees (k below the width): one group of 4 (128), of 2 (64), 4 + 4 then 2 (1024), the
# 4-operand TSORT32 of a tail (40 -> 64 pairs), k not a multiple of 8 (72: 3 runs, k = 3;
# 300: 10 runs in groups 4, 4, 2, k = 5), five runs as 3 + 2 (160)
SHAPES = [(2, 128, 8), (4, 64, 8), (2, 96, 96), (3, 40, 8), (2, 1024, 8), (2, 72, 3),
          (3, 300, 5), (2, 160, 40)]


def _compile(m, n, k, largest=True):
    """The newest PTOAS's form (no assembler named), which these tests check with the oracle's
    default ptoas; test_conformance.py checks the sort kernels of the corpus per version."""
    x = np.zeros((m, n), np.float32)
    with mock.patch.dict(os.environ, {"PYPTO_PTOAS": ""}):
        return topk_rows.compile(x, np.zeros((m, k), np.float32), np.zeros((m, k), np.int32),
                                 M=m, N=n, K=k, LARGEST=largest)


def _forms(text):
    return {"tsort32": "pto.tsort32 " in text,
            "tsort32.tmp": any(l.count("pto.tsort32 ins(") and l.split(" : ")[0].count(",") == 2
                               for l in text.splitlines()),
            "blockLen": ", i32) outs(" in text,
            "lists": "{exhausted = false}" in text,
            "tgather": "#pto.mask_pattern<P0101>" in text and "#pto.mask_pattern<P1010>" in text}


@pytest.mark.heavy
def test_every_form_is_printed():
    seen = {}
    for shape in SHAPES:
        for key, there in _forms(_compile(*shape).asm["pto"]).items():
            seen[key] = seen.get(key, False) or there
    assert all(seen.values()), seen


@pytest.mark.parametrize("shape", quick_cases(SHAPES, (4, 64, 8)), ids=[f"{m}x{n}k{k}" for m, n, k in SHAPES])
def test_round_trip(shape):
    text = _compile(*shape).asm["pto"]
    assert print_program(parse_program(text)) == text


def _oracle():
    d = os.environ.get("PTO_ORACLE")
    if not d or not os.path.isfile(os.path.join(d, "pto-oracle")):
        pytest.skip("PTO_ORACLE is not set to the pto-oracle directory (export "
                    "PTO_ORACLE=/path/to/pto-oracle; bash $PTO_ORACLE/setup.sh once)")
    return os.path.join(d, "pto-oracle")


@pytest.mark.parametrize("shape", quick_cases(SHAPES, (4, 64, 8)), ids=[f"{m}x{n}k{k}" for m, n, k in SHAPES])
def test_ptoas_accepts_the_sort_instructions(shape, tmp_path):
    oracle = _oracle()
    path = tmp_path / "k.pto"
    path.write_text(_compile(*shape).asm["pto"])
    check = subprocess.run([oracle, "check", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    low = subprocess.run([oracle, "lower", str(path), "-o", str(tmp_path / "k.cpp"),
                          "--level3"], capture_output=True, text=True)
    assert low.returncode == 0, low.stderr[-2000:]
    cpp = (tmp_path / "k.cpp").read_text()
    assert "TSORT32(" in cpp and "TMRGSORT" in cpp and "TGATHER" in cpp


@pytest.mark.parametrize("shape", quick_cases([(4, 64, 8), (2, 128, 16), (2, 1024, 8)], (4, 64, 8)),
                         ids=lambda s: f"{s[0]}x{s[1]}k{s[2]}")
def test_simulator_agrees_with_the_native_engine(shape):
    """Widths and k that are multiples of 8: pto-isa's simulator selects (TSEL) whole mask
    bytes only (backends/ptoisa/engine.check_simulable)."""
    _oracle()
    m, n, k = shape
    rng = np.random.default_rng(n)
    x = rng.integers(-4, 5, (m, n)) + rng.choice([0.0, 0.5, np.inf, -np.inf, np.nan], (m, n),
                                                 p=[0.7, 0.1, 0.07, 0.07, 0.06])
    x = x.astype(np.float32)
    runs = []
    for kernel in (topk_rows, topk_rows_sim):
        v, i = np.zeros((m, k), np.float32), np.zeros((m, k), np.int32)
        kernel[(1,)](x, v, i, M=m, N=n, K=k, LARGEST=True)
        runs.append((v, i))
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
