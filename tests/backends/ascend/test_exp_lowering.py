"""The float32 exp lowering, both of its forms: llvm.ldexp (hosts with AVX-512, VSCALEFPS)
and exponent bits (every other host). Whichever form this host uses, the other is forced by
patching ``host_has``, so both stay correct whatever machine runs the suite.

Checked against float64 numpy over the whole float32 range that gives a finite nonzero result
(at most 1.1 ulp for normal results), and at the edges: ±inf, NaN, ±0, the last finite and
first infinite inputs, and below the normal range (subnormal results for the ldexp form,
flushed to 0 for the bits form, as its docstring says)."""
import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.backends.ascend import llvm_driver

N = 4096


def exp_kernel(x, out, N: pl.constexpr):
    pid = pl.program_id(0)
    pl.store(out, offsets=(pid * N,), value=pl.exp(pl.load(x, offsets=(pid * N,), shape=(N,))))


def run_exp(x):
    """A kernel of its own per call: a jit function keeps its binaries in memory too."""
    kernel = pypto.jit(exp_kernel)
    x = np.concatenate([x, np.zeros((-len(x)) % N, np.float32)])
    out = np.empty_like(x)
    kernel[(len(x) // N,)](x, out, N=N)
    return out


@pytest.fixture(params=["ldexp", "bits"])
def form(request, monkeypatch, fresh_cache):
    """The exp form under test; a cache of the test's own, as the two forms share a key."""
    real = llvm_driver.host_has
    if request.param == "ldexp" and not real("avx512f"):
        pytest.skip("the ldexp form is chosen only on AVX-512 hosts")
    monkeypatch.setattr(llvm_driver, "host_has",
                        lambda feature: request.param == "ldexp" and real(feature))
    return request.param


def test_exp_accuracy_over_the_range(form):
    x = np.linspace(-87.3, 88.72, 400_000, dtype=np.float32)
    got = run_exp(x)[:len(x)].astype(np.float64)
    want = np.exp(x.astype(np.float64))
    ulps = np.abs(got - want) / np.spacing(want.astype(np.float32)).astype(np.float64)
    assert ulps.max() <= 1.1, f"{form}: {ulps.max():.2f} ulp at x={x[ulps.argmax()]}"


def test_exp_edges(form):
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 88.7228, 88.72284, 100.0, -104.0, -1e30],
                 np.float32)
    got = run_exp(x)[:len(x)]
    assert got[0] == np.inf and got[1] == 0 and np.isnan(got[2])
    assert got[3] == 1 and got[4] == 1
    assert np.isfinite(got[5]) and abs(got[5] / np.exp(x[5].astype(np.float64)) - 1) < 2e-7
    assert got[6] == np.inf and got[7] == np.inf
    assert got[8] == 0 and got[9] == 0


def test_exp_below_the_normal_range(form):
    x = np.linspace(-103.9, -87.4, 10_000, dtype=np.float32)
    got = run_exp(x)[:len(x)].astype(np.float64)
    if form == "bits":
        assert np.all(got == 0)
        return
    want = np.exp(x.astype(np.float64))
    tiny = float(np.finfo(np.float32).smallest_subnormal)
    assert np.max(np.abs(got - want)) <= tiny, "subnormal results off by more than one step"
