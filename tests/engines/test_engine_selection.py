"""Choosing the engine, and what happens when the pto-isa engine's tools are missing."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.backends.ptoisa import engine, toolchain
from tests.engines.tools import TOOLS, needs_tools


@pypto.jit
def scale(x, out, B: pl.constexpr):
    pid = pl.program_id(0)
    t = pl.load(x, offsets=(pid * B,), shape=(B,))
    pl.store(out, offsets=(pid * B,), value=t * 3.0 + pl.num_programs(0))


def _run(kernel, n=1000, grid=(4,)):
    x = np.arange(n, dtype=np.float32)
    out = np.zeros_like(x)
    kernel[grid](x, out, B=256)
    return x, out


def test_an_unknown_engine_is_refused_where_it_is_named(monkeypatch):
    def f():
        pass
    with pytest.raises(ValueError, match=r"@pypto.jit\(f\): engine must be one of 'native', "
                                         r"'pto-isa', got 'npu'"):
        pypto.jit(engine="npu")(f)
    monkeypatch.setenv("PYPTO_ENGINE", "sim")
    with pytest.raises(ValueError, match="PYPTO_ENGINE: engine must be one of"):
        _run(pypto.jit(scale.fn))


@pytest.mark.parametrize("variable, value, named", [
    ("PYPTO_CXX", "/nonexistent/clang++", "PYPTO_CXX"),
    ("PYPTO_PTOAS", "/nonexistent/ptoas", "PYPTO_PTOAS"),
])
def test_a_missing_tool_names_the_variable_to_set(monkeypatch, variable, value, named):
    monkeypatch.setenv(variable, value)
    with pytest.raises(toolchain.ToolMissing, match=named):
        _run(pypto.jit(scale.fn, engine="pto-isa"))


def test_every_missing_tool_is_named_at_once(monkeypatch, tmp_path):
    """With none of the three tools, one error names each variable to set (it once named only
    the first missing tool, so the PYPTO_CXX case above failed on a machine without ptoas)."""
    monkeypatch.setenv("PYPTO_PTOAS", "/nonexistent/ptoas")
    monkeypatch.setenv("PTO_ISA_ROOT", str(tmp_path))
    monkeypatch.setenv("PYPTO_CXX", "/nonexistent/clang++")
    monkeypatch.delenv("PTO_ORACLE", raising=False)
    with pytest.raises(toolchain.ToolMissing) as caught:
        toolchain.find()
    for variable in ("PYPTO_PTOAS", "PTO_ISA_ROOT", "PYPTO_CXX"):
        assert variable in str(caught.value)


def test_missing_headers_name_pto_isa_root(monkeypatch, tmp_path):
    monkeypatch.setenv("PTO_ISA_ROOT", str(tmp_path))
    monkeypatch.delenv("PTO_ORACLE", raising=False)
    with pytest.raises(toolchain.ToolMissing, match="PTO_ISA_ROOT"):
        toolchain.find_headers()


@needs_tools
def test_the_environment_and_the_decorator_choose_the_engine(monkeypatch):
    x, native = _run(pypto.jit(scale.fn))
    np.testing.assert_array_equal(native, x * 3 + 4)
    monkeypatch.setenv("PYPTO_ENGINE", "pto-isa")
    launched = []
    original = engine.PtoIsaKernel.launch
    monkeypatch.setattr(engine.PtoIsaKernel, "launch",
                        lambda self, *a: (launched.append(self.name), original(self, *a)))
    np.testing.assert_array_equal(_run(pypto.jit(scale.fn))[1], native)
    assert launched == ["scale"]
    np.testing.assert_array_equal(_run(pypto.jit(scale.fn, engine="native"))[1], native)
    assert launched == ["scale"]                 # the decorator wins over the variable


@needs_tools
def test_a_built_library_comes_from_the_disk_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path))
    _run(pypto.jit(scale.fn, engine="pto-isa"))
    def no_build(*args):
        raise AssertionError("rebuilt a cached library")
    monkeypatch.setattr(engine, "build", no_build)
    x, out = _run(pypto.jit(scale.fn, engine="pto-isa"))   # a new kernel object: no memory
    np.testing.assert_array_equal(out, x * 3 + 4)


@needs_tools
def test_a_touched_prelude_keeps_its_precompiled_header(monkeypatch, tmp_path):
    """The PCH is found by the prelude's and headers' contents, but clang also checked their
    mtimes: after a checkout, reinstall or stash touched the prelude (same bytes), every build
    failed with "has been modified since the precompiled header was built"."""
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path / "cache"))
    prelude = tmp_path / "prelude.hpp"
    shutil.copy(engine.PRELUDE, prelude)
    monkeypatch.setattr(engine, "PRELUDE", str(prelude))
    engine.precompiled_header(TOOLS)
    later = os.stat(prelude).st_mtime + 100
    os.utime(prelude, (later, later))
    x, out = _run(pypto.jit(scale.fn, engine="pto-isa"))
    np.testing.assert_array_equal(out, x * 3 + 4)


@needs_tools
def test_the_profiler_records_pto_isa_launches():
    with pypto.Profiler() as prof:
        _run(pypto.jit(scale.fn, engine="pto-isa"))
    (k,) = prof.kernels
    assert k.name == "scale" and k.mode == "pto-isa" and k.grid == (4,)
    assert k.host_time_ms > 0 and k.npu_time_ms > 0      # measured here, modelled for the NPU
    assert "scale" in prof.summary()


@needs_tools
def test_a_grid_too_large_for_a_barrier_is_refused():
    @pypto.jit(engine="pto-isa")
    def barrier_kernel(x, out, B: pl.constexpr):
        pid = pl.program_id(0)
        pl.store(out, offsets=(pid * B,), value=pl.load(x, offsets=(pid * B,), shape=(B,)))
        pl.barrier()
    with pytest.raises(ValueError, match="more blocks than the 48 cores"):
        _run(barrier_kernel, n=64 * 100, grid=(100,))
