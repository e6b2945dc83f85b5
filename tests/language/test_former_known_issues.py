"""What docs/language.md once listed as known issues, kept working."""
import numpy as np

import pypto
import pypto.language as pl


@pypto.jit
def total(x, out):
    pl.store(out, [0], pl.reshape(pl.sum(pl.load(x, [0], [16])), (1,)))


def test_rank0_reduction_compiles():
    x = np.random.default_rng(0).random(16).astype(np.float32)
    out = np.zeros(1, np.float32)
    total[(1,)](x, out)
    np.testing.assert_allclose(out[0], x.sum(), rtol=1e-6)


@pypto.jit
def f64_to_f16(x, out):
    pl.store(out, [0], pl.load(x, [0], [16]).to(pl.float16))


@pypto.jit
def sin64(x, out):
    pl.store(out, [0], pl.sin(pl.load(x, [0], [16])))


def test_float64_conversions_and_sin():
    x = np.random.default_rng(1).random(16)
    out = np.zeros(16, np.float16)
    f64_to_f16[(1,)](x, out)
    np.testing.assert_array_equal(out, x.astype(np.float16))
    out64 = np.zeros(16)
    sin64[(1,)](x, out64)
    np.testing.assert_allclose(out64, np.sin(x), rtol=1e-9)   # the polynomial: ~1e-10


@pypto.jit
def scan(x, out):
    pl.store(out, [0], pl.cumsum(pl.load(x, [0], [256])))


def test_half_cumsum_matches_the_interpreter(monkeypatch):
    x = np.random.default_rng(2).random(256).astype(np.float16)
    compiled, interpreted = np.zeros(256, np.float16), np.zeros(256, np.float16)
    scan[(1,)](x, compiled)
    monkeypatch.setenv("PYPTO_INTERPRET", "1")
    scan[(1,)](x, interpreted)
    np.testing.assert_array_equal(compiled, interpreted)


@pypto.jit
def activation(t, ACT: pl.constexpr):
    if ACT == "relu":
        return pl.maximum(t, 0.0)
    return t


@pypto.jit
def apply(x, out, ACT: pl.constexpr):
    pl.store(out, [0], activation(pl.load(x, [0], [16]), ACT))


def test_early_return_under_a_compile_time_if():
    x = np.random.default_rng(3).standard_normal(16).astype(np.float32)
    out = np.zeros(16, np.float32)
    apply[(1,)](x, out, ACT="relu")
    np.testing.assert_array_equal(out, np.maximum(x, 0))
    apply[(1,)](x, out, ACT="none")
    np.testing.assert_array_equal(out, x)
