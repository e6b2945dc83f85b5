"""Integer ``//`` and ``%`` of tiles, as the chip computes them (passes/legalize.py,
``int_trunc_divmod``): A2/A3 divides floats only (pto-isa npu/a2a3/TFmod.hpp: "TFMOD
supports only float element type"; TDIV likewise), so the program divides in float32 and
corrects the quotient in integers. These tests check it bit for bit against numpy over the
whole range of each integer type, with the language's own rules for the divisors numpy does
not define (``x // 0`` and ``x % 0`` are 0; ``MIN // -1`` wraps to MIN), on the native
engine and on pto-isa's CPU simulator, and that no integer tile reaches a float-only
instruction in the printed program.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypto
import pypto.language as pl
from tests.engines.tools import needs_tools
from tests.language.utils import assert_exact

R, C = 8, 32            # one tile of 256 elements per example
SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@pypto.jit
def divmod_kernel(x, y, q, r, R: pl.constexpr, C: pl.constexpr):
    a = pl.load(x, offsets=(0, 0), shape=(R, C))
    b = pl.load(y, offsets=(0, 0), shape=(R, C))
    pl.store(q, offsets=(0, 0), value=a // b)
    pl.store(r, offsets=(0, 0), value=a % b)


@pypto.jit
def divmod_scalar_kernel(x, q, r, s, R: pl.constexpr, C: pl.constexpr):
    a = pl.load(x, offsets=(0, 0), shape=(R, C))
    pl.store(q, offsets=(0, 0), value=a // s)
    pl.store(r, offsets=(0, 0), value=a % s)


def reference(x, y):
    """numpy's floor division and modulo, with PyPTO's answers where numpy has none: a zero
    divisor gives 0 and 0, ``MIN // -1`` wraps to MIN (docs/tile_ir.md)."""
    x64, y64 = x.astype(np.int64), y.astype(np.int64)
    safe = np.where(y64 == 0, 1, y64)
    q = np.where(y64 == 0, 0, np.floor_divide(x64, safe))
    r = np.where(y64 == 0, 0, np.mod(x64, safe))
    info = np.iinfo(x.dtype)
    q = (q - info.min) % (1 << info.bits) + info.min          # wrap into the dtype
    return q.astype(x.dtype), r.astype(x.dtype)


def _values(dtype):
    """Any value of the dtype, with its edges, small numbers and near-edges often."""
    info = np.iinfo(dtype)
    edges = [info.min, info.min + 1, info.max, info.max - 1, 0, 1, 2, 3, 7]
    if info.min < 0:
        edges += [-1, -2, -3, -7]
    if info.bits == 32:
        edges += [2 ** 24, 2 ** 24 + 1, -(2 ** 24) - 1, 2 ** 30 + 1, 46341, -46341,
                  2 ** 31 - 129, -(2 ** 31) + 129]
    return st.one_of(st.integers(int(info.min), int(info.max)), st.sampled_from(edges),
                     st.integers(-300, 300).map(lambda v: max(min(v, info.max), info.min)))


def _tile(values, dtype):
    return np.resize(np.array(values, dtype=dtype), (R, C))


def _pairs(dtype):
    return st.lists(st.tuples(_values(dtype), _values(dtype)), min_size=1, max_size=R * C)


def _split(pairs, dtype):
    """Two tiles from the pairs, and a third pass of exact multiples (q·y for random q):
    the quotients a float32 division is most likely to round across."""
    x = _tile([p[0] for p in pairs], dtype)
    y = _tile([p[1] for p in pairs], dtype)
    info = np.iinfo(dtype)
    multiples = np.clip(x.astype(np.int64) // np.maximum(np.abs(y.astype(np.int64)), 1)
                        * y.astype(np.int64), info.min, info.max)
    x[R // 2:] = multiples[R // 2:].astype(dtype)
    return x, y


def _run(kernel, x, y):
    q, r = np.zeros_like(x), np.zeros_like(x)
    kernel[(1,)](x, y, q, r, R=R, C=C)
    return q, r


def _check(kernel, x, y, what):
    got_q, got_r = _run(kernel, x, y)
    want_q, want_r = reference(x, y)
    assert_exact(got_q, want_q, f"{what}: x // y")
    assert_exact(got_r, want_r, f"{what}: x % y")


@pytest.mark.parametrize("dtype", ["int32", "int16", "int8", "uint8"])
@SETTINGS
@given(data=st.data())
def test_floordiv_and_mod_are_exact_over_the_whole_range(dtype, data):
    """Every integer type's quotient and remainder equal numpy's, bit for bit, for any
    operands (int32 is the case a float32 division cannot hold: 2**24 and beyond)."""
    x, y = _split(data.draw(_pairs(np.dtype(dtype))), np.dtype(dtype))
    _check(divmod_kernel, x, y, dtype)


@needs_tools
@SETTINGS
@given(pairs=_pairs(np.dtype(np.int32)))
def test_int32_floordiv_and_mod_on_the_pto_isa_simulator(pairs):
    """The same instructions run by pto-isa's CPU simulator (the vendor's TDIV, TCVT, TMUL,
    TSUB, TCMP, TSEL) give numpy's answers too, so the exactness is not the host's."""
    x, y = _split(pairs, np.dtype(np.int32))
    _check(pypto.jit(divmod_kernel.fn, engine="pto-isa"), x, y, "pto-isa int32")


@pytest.mark.parametrize("s", [0, -1, 1, 3, -7, 2 ** 31 - 1, -(2 ** 31), 65537])
def test_int32_by_a_runtime_scalar(s):
    """A runtime scalar divisor (filled into a tile), the language's special ones included."""
    x = _tile(np.random.default_rng(7).integers(-2 ** 31, 2 ** 31, R * C), np.int32)
    x.flat[:4] = [-2 ** 31, 2 ** 31 - 1, 0, -1]
    q, r = np.zeros_like(x), np.zeros_like(x)
    divmod_scalar_kernel[(1,)](x, q, r, s, R=R, C=C)
    want_q, want_r = reference(x, np.full_like(x, s))
    assert_exact(q, want_q, f"x // {s}")
    assert_exact(r, want_r, f"x % {s}")


FLOAT_ONLY = ("tfmod", "tfmods", "tdiv", "tdivs", "trem", "trems")


@pytest.mark.parametrize("dtype", ["int32", "int16", "int8"])
def test_no_integer_tile_reaches_a_float_only_division(dtype):
    """The printed program divides integer tiles only through float32 tiles: A2/A3's TFMOD
    and TDIV static_assert on float types (the int32 ``%`` was once a ``tfmod`` of i32
    tiles, which pto-oracle npu-check refuses)."""
    x = np.zeros((R, C), dtype)
    pto = divmod_kernel.compile(x, x, x, x, R=R, C=C).asm["pto"]
    divisions = [line for line in pto.splitlines()
                 if re.search(rf"pto\.({'|'.join(FLOAT_ONLY)}) ", line)]
    assert divisions, "expected float32 divisions"
    for line in divisions:
        assert re.findall(r"dtype=(\w+)", line) and \
            all(d == "f32" for d in re.findall(r"dtype=(\w+)", line)), line
