"""The pto-isa engine runs the C++ of either ptoas: 0.27 (PTOAS a56b18c3) and 0.60 (e32488c9).

0.60's C++ differs where the engine meets it (pto-oracle's README): functions carrying
``pto.entry`` are ``extern "C" __global__ AICORE``; cube<->vector and SYNCALL flags are
``__builtin_cce_ffts_cross_core_sync`` / ``__builtin_cce_wait_flag_dev``; ``TCI`` and narrowing
``TCVT`` take a tmp tile. Each kernel is compiled with ``PYPTO_PTOAS`` naming the version, so
the printer writes that version's ``.pto`` (compiler/pto/dialect.py) and that ptoas lowers it.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from pypto.backends.ptoisa import engine
from tests.engines.tools import needs_tools, retarget

ORACLE = os.environ.get("PTO_ORACLE", "")
PTOAS = {"0.27": os.path.join(ORACLE, "bin", "0.27", "ptoas"),
         "0.60": os.path.join(ORACLE, "bin", "ptoas")}
pytestmark = [needs_tools,
              pytest.mark.skipif(not all(os.access(p, os.X_OK) for p in PTOAS.values()),
                                 reason="needs both ptoas versions of pto-oracle (PTO_ORACLE: "
                                        "bin/ptoas is 0.60, bin/0.27/ptoas 0.27)"),
              pytest.mark.filterwarnings("ignore::pypto.LaunchWarning")]


def _case(name: str):
    from tests.compiler.pto import corpus
    corpus.BY_NAME[name].build()
    return corpus.LAST_CALL[0]


def _launch(kernel, args, kwargs) -> list:
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    kwargs = {n: v.copy() if isinstance(v, np.ndarray) else v for n, v in kwargs.items()}
    grid = kwargs.pop("grid", None)
    (kernel if grid is None else kernel[grid])(*args, **kwargs)
    return [a for a in list(args) + list(kwargs.values()) if isinstance(a, np.ndarray)]


def _on_ptoas(kernel, version: str, args, kwargs, monkeypatch):
    """A pto-isa build of the kernel printed for, and lowered by, that ptoas."""
    monkeypatch.setenv("PYPTO_PTOAS", PTOAS[version])
    sim = retarget(kernel, "pto-isa")
    compiled = sim.compile(*args, **{n: v for n, v in kwargs.items() if n != "grid"})
    compiled.simulated = engine.load(compiled, compiled.cache_key)
    return sim, compiled


# mixed cube/vector (one after the other; both at once), a SYNCALL, tci, narrowing tcvt
CASES = ["rt_mixed", "matmul_softmax_mixed", "tut05_scale_barrier", "creation", "elementwise_i8"]


@pytest.mark.parametrize("version", ["0.27", "0.60"])
@pytest.mark.parametrize("name", CASES)
def test_a_corpus_kernel_agrees_with_native_on_either_ptoas(name, version, monkeypatch):
    kernel, args, kwargs = _case(name)
    sim, compiled = _on_ptoas(kernel, version, args, kwargs, monkeypatch)
    assert ('extern "C" __global__ AICORE' in compiled.asm["cpp"]) == (version == "0.60")
    want = _launch(retarget(kernel, "native"), args, kwargs)
    for i, (got, ref) in enumerate(zip(_launch(sim, args, kwargs), want)):
        if ref.dtype.kind in "iub":
            np.testing.assert_array_equal(got, ref, err_msg=f"{name} output {i}")
        else:
            np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64),
                                       rtol=1e-5, atol=1e-5 * max(1.0, np.abs(ref).max()),
                                       err_msg=f"{name} output {i}")


def test_a_never_met_barrier_is_a_deadlock_error_on_060(monkeypatch):
    """0.60's SYNCALL is __builtin_cce_*: a barrier one block skips still ends in an error."""
    monkeypatch.setenv("PYPTO_SYNC_TIMEOUT", "1")
    kernel, args, kwargs = _case("tut05_never_met")
    sim, _ = _on_ptoas(kernel, "0.60", args, kwargs, monkeypatch)
    with pytest.raises(engine.SimulatorError, match="deadlock"):
        _launch(sim, args, kwargs)


def test_two_kernels_of_one_name_share_a_060_library(monkeypatch):
    """0.60's ``extern "C"`` entry functions: two specialisations of one kernel in one batch
    (one C++ namespace each) were one C function defined twice."""
    kernel, args, kwargs = _case("tut01_vector_add")
    monkeypatch.setenv("PYPTO_PTOAS", PTOAS["0.60"])
    sim = retarget(kernel, "pto-isa")
    blocks = [256, 128]
    compiled = [sim.compile(*args, BLOCK=b) for b in blocks]
    built = engine.load_batch(compiled, [c.cache_key for c in compiled])
    x, y, out = (a.copy() for a in args)
    for c, b in zip(built, blocks):
        out[:] = 0
        c.launch((-(-x.size // b),), {"x": x, "y": y, "out": out})
        np.testing.assert_array_equal(out, x + y)


def test_flash_attention_parts_run_together_on_060(monkeypatch):
    """Tutorial 12's cube and vector parts hand tiles both ways every iteration: the vector
    function runs on a second thread, the 0.60 builtins meeting through the block's Cluster
    (and its workspace, which the window check must accept on both threads)."""
    from pypto.backends.ptoisa import entry
    from tests.test_flash_attention import fa
    q, k, v = fa.inputs(np.random.default_rng(7), 1, 2, 100, 64)
    out = np.full_like(q, np.nan)
    grid, args, meta = fa.launch_args(q, k, v, out, False)
    sim, compiled = _on_ptoas(fa.flash_attention_kernel, "0.60", args, meta, monkeypatch)
    assert entry.parts_run_together(compiled.asm["pto"])
    sim[grid](*args, **meta)
    np.testing.assert_allclose(out.astype(np.float32), fa.reference(q, k, v), **fa.TOLERANCE)
