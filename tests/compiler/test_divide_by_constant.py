"""Division by a constant: by a power of two it becomes ``x * (1 / c)`` (compiler/passes/legalize.py):
the same bits, a multiply's cost on the vector unit instead of a divide's."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pypto
import pypto.language as pl


@pypto.jit
def divide(x, out, C: pl.constexpr):
    pl.store(out, offsets=(0, 0), value=pl.load(x, offsets=(0, 0), shape=(8, 64)) / C)


def _pto(x, c) -> str:
    return divide.compile(x, np.zeros_like(x), C=c).asm["pto"]


@settings(max_examples=20, deadline=None)
@given(k=st.integers(-20, 40), dtype=st.sampled_from([np.float32, np.float16]),
       seed=st.integers(0, 2 ** 16))
def test_a_power_of_two_divides_as_a_multiply_with_the_same_bits(k, dtype, seed):
    rng = np.random.default_rng(seed)
    with np.errstate(over="ignore"):
        x = (rng.standard_normal((8, 64)) * 10.0 ** rng.integers(-30, 30, (8, 64))).astype(dtype)
    x.flat[:5] = [np.inf, -np.inf, np.nan, 0.0, np.finfo(dtype).smallest_subnormal]
    c = 2.0 ** k
    out = np.zeros_like(x)
    divide[(1,)](x, out, C=c)
    with np.errstate(all="ignore"):       # a weak scalar: it takes the tile's dtype first
        want = (x.astype(np.float32) / np.float32(dtype(c))).astype(dtype)
    np.testing.assert_array_equal(out, want)
    with np.errstate(over="ignore"):      # c and 1 / c numbers of the dtype
        exact = list(np.array([c, 1.0 / c]).astype(dtype).astype(float)) == [c, 1.0 / c]
    pto = _pto(x, c)
    assert ("pto.tmuls " in pto) == exact and ("pto.tdivs " in pto) != exact


@pytest.mark.parametrize("c", [3.0, 0.3, -6.0])
def test_another_constant_still_divides(c):
    x = np.random.default_rng(1).standard_normal((8, 64)).astype(np.float32)
    out = np.zeros_like(x)
    divide[(1,)](x, out, C=c)
    np.testing.assert_array_equal(out, x / np.float32(c))
    assert "pto.tdivs " in _pto(x, c)


@pytest.mark.parametrize("engine", ["native", "pto-isa"])
@pytest.mark.parametrize("dtype, c", [(np.float16, 1e6), (np.float32, 1e39)])
def test_a_scalar_past_the_tiles_range_is_its_infinity(engine, dtype, c):
    """The scalar takes the tile's dtype (docs/tile_ir.md, weak scalars): 1e6 is float16's
    infinity, 1e39 float32's. float16 crashed the host's code generation (llvmlite cannot
    pack 1e6 as a half), and ptoas lowered the .pto's ``1000000.0 : f16`` (and ``1.0e+39 :
    f32``) to C++ that named an undeclared ``Inf``."""
    if engine == "pto-isa":
        from ..engines.tools import TOOLS, MISSING
        if TOOLS is None:
            pytest.skip(f"pto-isa engine unavailable: {MISSING}")
    kernel = pypto.jit(divide.fn, engine=engine)
    x = np.full((8, 64), 1000.0, dtype)
    out = np.ones_like(x)
    kernel[(1,)](x, out, C=c)
    np.testing.assert_array_equal(out, np.zeros_like(x))
