"""What docs/language.md once listed as known issues, kept working (or, where the NPU target
has no instruction for it, refused at compile time: see docs/pto.md)."""
import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.errors import NotOnChip


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


def test_float64_conversions_and_sin(monkeypatch):
    """float64 tiles: A2/A3's vector unit has no 64-bit arithmetic, so the NPU target refuses
    them at the kernel's line; the interpreter computes them."""
    x = np.random.default_rng(1).random(16)
    for kernel, out in ((f64_to_f16, np.zeros(16, np.float16)), (sin64, np.zeros(16))):
        with pytest.raises(NotOnChip, match="a float64 tile") as got:
            kernel[(1,)](x, out)
        assert got.value.loc is not None and got.value.loc.function == kernel.fn.__name__
    monkeypatch.setenv("PYPTO_INTERPRET", "1")
    out = np.zeros(16, np.float16)
    f64_to_f16[(1,)](x, out)
    np.testing.assert_array_equal(out, x.astype(np.float16))
    out64 = np.zeros(16)
    sin64[(1,)](x, out64)
    np.testing.assert_allclose(out64, np.sin(x), rtol=1e-9)   # the polynomial: ~1e-10


@pypto.jit
def scan(x, out):
    pl.store(out, [0], pl.cumsum(pl.load(x, [0], [256])))


def test_half_cumsum_compiles_and_matches_the_interpreter(monkeypatch):
    """A row cumsum was built from concatenations at unaligned columns, which A2/A3 cannot
    move, and refused; it is now a scan down the transposed tile's rows. Both sum in float32
    and round once."""
    x = np.random.default_rng(2).random(256).astype(np.float16)
    compiled = np.zeros(256, np.float16)
    scan[(1,)](x, compiled)
    monkeypatch.setenv("PYPTO_INTERPRET", "1")
    interpreted = np.zeros(256, np.float16)
    scan[(1,)](x, interpreted)
    want = np.cumsum(x.astype(np.float64)).astype(np.float32).astype(np.float16)
    for got in (compiled, interpreted):
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=2 ** -10)


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
