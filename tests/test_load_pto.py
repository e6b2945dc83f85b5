"""pypto.load_pto: a hand-written (or hand-edited) .pto program as a launchable kernel --
results equal to the jit kernel it came from, on the native engine and on pto-isa's simulator;
hazard-checked, profiled, its layout assumptions enforced, bad text reported at its line."""
import os
import re

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.errors import CompilationError
from pypto.compiler.pto.passes.hazards import HazardError
from .kernels import tile_softmax

N = 4096
ORACLE = os.environ.get("PTO_ORACLE")


@pypto.jit
def axpy(x, y, out, a: float, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    t = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    u = pl.load(y, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(pid * BLOCK,), value=t * a + u)


def _arrays():
    rng = np.random.default_rng(0)
    return (rng.random(N, dtype=np.float32), rng.random(N, dtype=np.float32),
            np.zeros(N, np.float32))


def _axpy_text():
    x, y, out = _arrays()
    return axpy.compile(x, y, out, 2.0, BLOCK=1024).asm["pto"]


def test_a_compiled_kernels_pto_runs_as_the_kernel_did(tmp_path):
    x, y, out = _arrays()
    path = tmp_path / "axpy.pto"
    path.write_text(_axpy_text())
    kernel = pypto.load_pto(str(path))
    assert [p[:2] for p in kernel.params] == [("x", "tensor"), ("y", "tensor"),
                                             ("out", "tensor"), ("a", "float")]
    kernel[(4,)](x, y, out, 2.0)
    np.testing.assert_array_equal(out, x * np.float32(2) + y)
    m = np.random.default_rng(1).standard_normal((64, 256)).astype(np.float32)
    text = tile_softmax.compile(m, m, BM=8, BN=256).asm["pto"]
    got = np.zeros_like(m)
    pypto.load_pto(text)[(8,)](m, got)
    expected = np.zeros_like(m)
    tile_softmax[(8,)](m, expected, BM=8, BN=256)
    np.testing.assert_array_equal(got, expected)


def _sample_style(text: str) -> str:
    """The same program as PTOAS's own samples spell theirs (ptoas 0.60's test/samples):
    each tile type named once at the top (MLIR type aliases), an attribute alias, long
    operations broken over several lines, comments at line ends."""
    types = sorted(set(re.findall(r"!pto\.tile_buf<[^>]*>", text)))
    head = [f"!tile{i} = {t}" for i, t in enumerate(types)] + ["#rowmajor = #pto.layout<nd>"]
    for i, t in enumerate(types):
        text = text.replace(t, f"!tile{i}")
    text = (text.replace(", strides = ", ",\n        strides = ")
                .replace(", sizes = ", ",\n        sizes = ")
                .replace(") attributes {", ")\n      attributes {")
                .replace(" : !pto.tensor_view", "\n        : !pto.tensor_view")
                .replace("{layout = #pto.layout<nd>}", "{layout = #rowmajor}")
                .replace(" = arith.constant 0 : index", " = arith.constant 0 : index  // zero"))
    return "// a kernel in the samples' spelling\n" + "\n".join(head) + "\n" + text


def test_the_samples_spelling_reads_as_the_printers():
    """Type and attribute aliases, statements over several lines, comments and the
    ``pto.entry`` attribute (issue 30: load_pto reads what ptoas 0.60 reads, in the forms
    PTOAS's samples use): the same kernel, the same results."""
    x, y, out = _arrays()
    text = _sample_style(_axpy_text())
    assert "!tile0 = !pto.tile_buf<" in text and "\n        strides = " in text
    assert "attributes {pto.entry" in text
    pypto.load_pto(text)[(4,)](x, y, out, 2.0)
    np.testing.assert_array_equal(out, x * np.float32(2) + y)


def test_a_statement_over_several_lines_is_reported_at_its_first_line():
    text = _sample_style(_axpy_text()).replace(" outs(%", "\n        outs(%")
    text = text.replace("pto.tadd", "pto.tnonsense")
    line = next(no for no, s in enumerate(text.splitlines(), 1) if "pto.tnonsense" in s)
    assert text.splitlines()[line].strip().startswith("outs(")      # the statement goes on
    # PyPTO's reader names it, or PTOAS when installed (which reads the text first)
    with pytest.raises(CompilationError, match=rf":{line}:\d+: .*(no PTO instruction "
                                               r"'tnonsense'|'pto\.tnonsense' is unknown)"):
        pypto.load_pto(text)


@pytest.mark.heavy
@pytest.mark.skipif(not ORACLE, reason="PTO_ORACLE is not set (pto-isa's simulator)")
def test_the_same_program_on_the_pto_isa_engine():
    x, y, out = _arrays()
    pypto.load_pto(_axpy_text(), engine="pto-isa")[(4,)](x, y, out, 2.0)
    np.testing.assert_array_equal(out, x * np.float32(2) + y)


def test_a_hand_edit_that_drops_a_flag_is_caught_by_the_hazard_checker():
    text = _axpy_text()
    assert "pto.wait_flag" in text
    with pytest.raises(HazardError, match="is not correctly synchronised"):
        pypto.load_pto(text.replace("pto.wait_flag", "// pto.wait_flag", 1))


def test_an_unknown_instruction_is_reported_at_its_line():
    text = _axpy_text().replace("pto.tadd ", "pto.taddd ", 1)
    # PyPTO's reader names it, or PTOAS does first when it is installed (PYPTO_PTOAS)
    with pytest.raises(CompilationError, match="no PTO instruction 'taddd'|"
                                               "custom op 'pto.taddd' is unknown") as e:
        pypto.load_pto(text)
    assert "pto.taddd" in text.splitlines()[e.value.loc.line - 1]


def test_arguments_must_match_the_programs_layout():
    x, y, out = _arrays()
    kernel = pypto.load_pto(_axpy_text())
    with pytest.raises(ValueError, match=r"argument 'x' has shape \(100,\).*written for shape "
                                         r"\(4096,\)"):
        kernel[(4,)](x[:100], y, out, 2.0)
    with pytest.raises(ValueError, match="element strides"):
        kernel[(4,)](np.zeros(2 * N, np.float32)[::2], y, out, 2.0)
    with pytest.raises(TypeError, match="is float64, the program declares float32"):
        kernel[(4,)](x.astype(np.float64), y, out, 2.0)
    with pytest.raises(TypeError, match=r"takes 4 argument\(s\) \(x, y, out, a\)"):
        kernel[(4,)](x, y, out, 2.0, 5)


def test_profiled_like_any_launch():
    x, y, out = _arrays()
    kernel = pypto.load_pto(_axpy_text())
    with pypto.Profiler() as prof:
        kernel[(4,)](x, y, out, 2.0)
    [launch] = prof.kernels
    assert launch.name == "axpy" and launch.npu_time_ms > 0


def test_cached_by_content(fresh_cache):
    text = _axpy_text()
    before = pypto.cache_stats["disk_hits"]
    pypto.load_pto(text)
    pypto.load_pto(text)
    assert pypto.cache_stats["disk_hits"] == before + 1


@pytest.mark.skipif(not ORACLE, reason="PTO_ORACLE is not set (the PTOAS assembler)")
def test_the_assemblers_rejection_is_reported_at_its_line(monkeypatch):
    monkeypatch.setenv("PYPTO_PTOAS", os.path.join(ORACLE, "bin", "ptoas"))
    text = _axpy_text().replace("pad=0>", "pad=7>", 1)
    with pytest.raises(CompilationError, match="PTOAS rejects it: unknown pad: 7") as e:
        pypto.load_pto(text)
    assert "pad=7" in text.splitlines()[e.value.loc.line - 1]
