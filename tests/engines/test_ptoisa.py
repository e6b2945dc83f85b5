"""The pto-isa engine against the native engine and the reference interpreter.

Every runnable kernel of the conformance corpus (tests/compiler/pto/corpus.py) and a few
hundred hypothesis-generated op chains (tests/language/test_differential.py's generator) run
on three engines: native (PyPTO's host code), the reference interpreter, and pto-isa (the
kernel's ``.pto`` through ``ptoas`` into pto-isa's CPU simulator). The pto-isa builds are
batched: one library holds many kernels, so pto-isa's headers are compiled once per batch.

Agreement: integer results bit for bit; float results bit for bit where the chain is exact
(the op-chain model says so), otherwise within the model's error bound (chains) or a few
ulps of the output's scale (corpus: reductions sum in another order, exp/log/division differ
in the last place). docs/engines.md lists the agreement per family and every divergence.
"""
from __future__ import annotations

import functools
import os

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import pypto
from pypto.backends.ptoisa import engine, toolchain

try:
    TOOLS = toolchain.find()
    MISSING = ""
except toolchain.ToolchainMissing as e:
    TOOLS, MISSING = None, str(e)

pytestmark = pytest.mark.skipif(TOOLS is None, reason=f"pto-isa engine unavailable: {MISSING}")

BF16 = np.dtype(ml_dtypes.bfloat16)
# Corpus kernels whose result is not a function of their input: racing blocks by design.
NONDETERMINISTIC = {"tut05_racy_normalize": "blocks race on purpose (tutorial 05)"}
# A float result within this many units of the output's largest magnitude is the same result.
ULPS = {np.dtype(np.float32): 2.0 ** -23 * 16, np.dtype(np.float16): 2.0 ** -10 * 2,
        BF16: 2.0 ** -7 * 2}


def _copy(value):
    return value.copy() if isinstance(value, np.ndarray) else value


def _retarget(kernel, engine_name: str):
    return pypto.jit(kernel.fn, target=kernel.target_name, auto_sync=kernel.auto_sync,
                     engine=engine_name, dynamic=dict(kernel.dynamic),
                     do_not_specialize=tuple(kernel.do_not_specialize))


def _outputs(args, kwargs) -> list:
    return [a for a in list(args) + list(kwargs.values()) if isinstance(a, np.ndarray)]


def assert_same(what: str, got: np.ndarray, want: np.ndarray) -> None:
    """Integers exactly; floats within ``ULPS`` of the larger of 1 and the output's scale."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind in "iub":
        bad = np.flatnonzero(got.ravel() != want.ravel())
        assert bad.size == 0, f"{what}: {bad.size} of {got.size} integers differ, first at " \
                              f"{bad[0]}: {got.ravel()[bad[0]]} vs {want.ravel()[bad[0]]}"
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    assert (np.isnan(g) == np.isnan(w)).all(), f"{what}: NaN positions differ"
    finite = np.isfinite(w)
    assert (g[~finite & ~np.isnan(w)] == w[~finite & ~np.isnan(w)]).all(), \
        f"{what}: infinities differ"
    scale = max(1.0, float(np.abs(w[finite]).max())) if finite.any() else 1.0
    diff = np.abs(np.where(finite, g - w, 0.0))
    bound = ULPS[want.dtype] * scale
    assert diff.max(initial=0.0) <= bound, \
        f"{what}: differs by {diff.max():.3g} (bound {bound:.3g}) at {int(np.argmax(diff))}"


# -- the conformance corpus -----------------------------------------------------------------------

@functools.cache
def _corpus_cases():
    from tests.compiler.pto import corpus
    cases = []
    for e in corpus.CORPUS:
        if e.refused:
            continue
        corpus.LAST_CALL[0] = None
        e.build()
        if corpus.LAST_CALL[0] is not None:        # graph kernels are covered by their ops
            cases.append((e.name, *corpus.LAST_CALL[0]))
    return cases


@pytest.fixture(scope="module")
def corpus_on_ptoisa():
    """Every corpus kernel, compiled for the pto-isa engine in one batch."""
    cases, compiled = {}, []
    for name, kernel, args, kwargs in _corpus_cases():
        k = _retarget(kernel, "pto-isa")
        kw = {n: v for n, v in kwargs.items() if n != "grid"}
        ck = k.compile(*args, **kw)
        compiled.append(ck)
        cases[name] = (kernel, k, args, kwargs)
    for ck, sim in zip(compiled, engine.load_batch(compiled, [c.cache_key for c in compiled])):
        ck.simulated = sim
    return cases


def _launch(kernel, args, kwargs):
    args, kwargs = [_copy(a) for a in args], {n: _copy(v) for n, v in kwargs.items()}
    grid = kwargs.pop("grid", None)
    (kernel if grid is None else kernel[grid])(*args, **kwargs)
    return _outputs(args, kwargs)


CORPUS_NAMES = [c[0] for c in _corpus_cases()] if TOOLS is not None else []


@pytest.mark.parametrize("name", CORPUS_NAMES)
def test_corpus_kernel_agrees_on_three_engines(name, corpus_on_ptoisa, monkeypatch):
    if name in NONDETERMINISTIC:
        pytest.skip(NONDETERMINISTIC[name])
    kernel, simulated, args, kwargs = corpus_on_ptoisa[name]
    if name == "tut05_never_met":          # a barrier one block never reaches: both refuse
        monkeypatch.setenv("PYPTO_SYNC_TIMEOUT", "1")
        with pytest.raises((RuntimeError, engine.SimulatorError), match="deadlock"):
            _launch(simulated, args, kwargs)
        return
    native = _launch(_retarget(kernel, "native"), args, kwargs)
    on_ptoisa = _launch(simulated, args, kwargs)
    monkeypatch.setenv("PYPTO_INTERPRET", "1")
    interpreted = _launch(_retarget(kernel, "native"), args, kwargs)
    for i, (n, p, r) in enumerate(zip(native, on_ptoisa, interpreted)):
        assert_same(f"{name} output {i}: pto-isa vs native", p, n)
        assert_same(f"{name} output {i}: pto-isa vs interpreter", p, r)


# -- hypothesis op chains -----------------------------------------------------------------------

N_CHAINS = int(os.environ.get("PYPTO_PTOISA_CHAINS", "300"))


def check_chains(programs_and_seeds):
    from tests.language import test_differential as td
    compiled, runs = [], []
    for prog, seed in programs_and_seeds:
        kernel = td.load_kernel(prog.source())
        k = pypto.jit(kernel.fn, engine="pto-isa")
        arrays = prog.data(seed)
        args = [arrays[i.name] for i in prog.inputs] + [prog.scalars[s]
                                                       for s in sorted(prog.scalars)]
        out = np.full(prog.out_extent, 77, td.NP[prog.out.dtype])
        compiled.append(k.compile(*args, out))
        runs.append((prog, k, kernel, arrays, args))
    for ck, sim in zip(compiled, engine.load_batch(compiled, [c.cache_key for c in compiled])):
        ck.simulated = sim
    for prog, k, kernel, arrays, args in runs:
        with np.errstate(all="ignore"):
            expected = prog.evaluate(arrays)
        window = tuple(slice(0, e) for e in prog.out_extent)
        expected = td.MV(expected.dtype, prog.out_extent, expected.bound, expected.exact,
                         np.ascontiguousarray(expected.arr[window]), expected.err[window])
        native = td.run(kernel, prog, arrays, interpret=False)
        out = np.full(prog.out_extent, 77, td.NP[prog.out.dtype])
        k[(1,)](*args, out)
        try:
            td.compare("pto-isa vs native", out, native, expected)
            td.compare("pto-isa vs numpy model", out, expected.arr, expected)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{prog.source()}") from None


def _chains(n):
    from tests.language import test_differential as td
    return st.lists(st.tuples(td.programs(), st.integers(0, 2 ** 32 - 1)), min_size=n,
                    max_size=n)


@settings(max_examples=1, deadline=None, derandomize=True, database=None,
          phases=[Phase.generate], suppress_health_check=list(HealthCheck))
@given(batch=_chains(N_CHAINS))
def test_op_chains_agree_with_native_and_model(batch):
    check_chains(batch)


@pytest.mark.slow
@settings(max_examples=10, deadline=None, database=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck))
@given(batch=_chains(300))
def test_op_chains_agree_slow(batch):
    """3 000 chains: ten random batches of 300."""
    check_chains(batch)
