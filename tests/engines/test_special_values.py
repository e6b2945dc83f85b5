"""Rounding, NaN and infinity, saturation, overflow and padding: the native engine against
pto-isa's CPU simulator on the values where implementations part ways.

Each kernel below runs the same compiled program on both engines with inputs full of special
values (NaN, ±inf, ±0, subnormals, values just past an integer type's range, halfway cases of
float16 rounding); they must agree bit for bit. Where they did not, PyPTO now does what
pto-isa does (docs/tile_ir.md, "Numerics"; docs/engines.md lists each case).
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

import pypto
import pypto.language as pl
from tests.engines.tools import needs_tools

pytestmark = needs_tools

N = 64
F32_SPECIALS = np.array(
    [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1.1754942e-38, 3.4028235e38,
     -3.4028235e38, 2147483520.0, 2147483648.0, -2147483904.0, 32767.5, 32768.0, -32769.0,
     127.5, 128.0, -129.0, 0.5, 1.5, 2.5, -0.5, -1.5, 65504.0, 65520.0, 1e5, -1e5,
     1.00048828125, 1.000732421875, 2049.0, 1e-8, -7.0, 7.0, 3.0, -3.0],
    np.float32)


def _inputs(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(N).astype(np.float32) * 1000
    x[:F32_SPECIALS.size] = F32_SPECIALS
    return x


@pypto.jit
def casts(x, o32, o16, o8, oh, B: pl.constexpr):
    t = pl.load(x, offsets=(0,), shape=(B,))
    pl.store(o32, offsets=(0,), value=t.to(pl.int32))
    pl.store(o16, offsets=(0,), value=t.to(pl.int16))
    pl.store(o8, offsets=(0,), value=t.to(pl.int8))
    pl.store(oh, offsets=(0,), value=t.to(pl.float16))


@pypto.jit
def half_casts(x, o16, o8, ou8, B: pl.constexpr):
    t = pl.load(x, offsets=(0,), shape=(B,))
    pl.store(o16, offsets=(0,), value=t.to(pl.int16))
    pl.store(o8, offsets=(0,), value=t.to(pl.int8))
    pl.store(ou8, offsets=(0,), value=t.to(pl.uint8))


@pypto.jit
def float_ops(x, y, o_max, o_min, o_div, o_abs, o_exp, o_cmp, B: pl.constexpr):
    a = pl.load(x, offsets=(0,), shape=(B,))
    b = pl.load(y, offsets=(0,), shape=(B,))
    pl.store(o_max, offsets=(0,), value=pl.maximum(a, b))
    pl.store(o_min, offsets=(0,), value=pl.minimum(a, b))
    pl.store(o_div, offsets=(0,), value=a / b)
    pl.store(o_abs, offsets=(0,), value=pl.abs(a))
    pl.store(o_exp, offsets=(0,), value=pl.exp(a))
    pl.store(o_cmp, offsets=(0,), value=pl.where(a < b, 1.0, 0.0))


@pypto.jit
def int_ops(x, y, o_add, o_mul, o_max, o_shr, B: pl.constexpr):
    a = pl.load(x, offsets=(0,), shape=(B,))
    b = pl.load(y, offsets=(0,), shape=(B,))
    pl.store(o_add, offsets=(0,), value=a + b)
    pl.store(o_mul, offsets=(0,), value=a * b)
    pl.store(o_max, offsets=(0,), value=pl.maximum(a, b))
    pl.store(o_shr, offsets=(0,), value=a >> 3)


@pypto.jit
def padded_reductions(x, o_sum, o_max, R: pl.constexpr, C: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(R, C), padding=float("-inf"))
    pl.store(o_max, offsets=(0, 0), value=pl.max(t, axis=1, keepdims=True))
    z = pl.load(x, offsets=(0, 0), shape=(R, C))
    pl.store(o_sum, offsets=(0, 0), value=pl.sum(z, axis=1, keepdims=True))


@functools.lru_cache(maxsize=None)
def _on(fn, engine: str):
    """One kernel per function and engine, so that relaunches take its warm path."""
    return pypto.jit(fn, engine=engine)


def _both(kernel, make, grid=(1,), **constants):
    """Outputs of the native and the pto-isa run of ``kernel`` on fresh ``make()`` arrays."""
    results = []
    for engine in ("native", "pto-isa"):
        args = make()
        _on(kernel.fn, engine)[grid](*args, **constants)
        results.append([a for a in args if isinstance(a, np.ndarray)])
    return results


def _bits_equal(native, simulated, names):
    for name, a, b in zip(names, native, simulated):
        same = (a.view(np.uint8) == b.view(np.uint8)).reshape(a.shape + (-1,)).all(-1) \
            if a.dtype.kind == "f" else a == b
        if a.dtype.kind == "f":           # any NaN is the same NaN for this comparison
            same |= np.isnan(a) & np.isnan(b)
        bad = np.flatnonzero(~same.ravel())
        assert bad.size == 0, (f"{name}: {bad.size} elements differ, first inputs at "
                               f"{bad[:6]}: native {a.ravel()[bad[:6]]} vs pto-isa "
                               f"{b.ravel()[bad[:6]]}")


def _within_ulps(a: np.ndarray, b: np.ndarray, ulps: int, name: str) -> None:
    special = ~np.isfinite(a) | ~np.isfinite(b) | (a == 0) | (b == 0)
    _bits_equal([a[special]], [b[special]], [name])
    ia, ib = a[~special].view(np.int32).astype(np.int64), b[~special].view(np.int32)
    worst = int(np.abs(ia - ib).max(initial=0))
    assert worst <= ulps, f"{name}: {worst} ulps apart (bound {ulps})"


def test_float_to_half_conversion_agrees_on_every_value():
    x = _inputs()
    make = lambda: (x, np.zeros(N, np.int32), np.zeros(N, np.int16), np.zeros(N, np.int8),
                    np.zeros(N, np.float16))
    native, simulated = _both(casts, make, B=N)
    _bits_equal(native[4:], simulated[4:], ["float16"])


def test_float_to_int_conversions_agree_in_range():
    """Inside each type's range. Outside it the simulator's conversion is a C++ cast
    (undefined behaviour: x86 gives INT_MIN for NaN and overflow), while the chip saturates
    or wraps by the rule of npu/a2a3/TCvt.hpp (docs/engines.md)."""
    x = np.clip(_inputs(), -100.0, 100.0)
    x[np.isnan(x)] = 0.5
    make = lambda: (x, np.zeros(N, np.int32), np.zeros(N, np.int16), np.zeros(N, np.int8),
                    np.zeros(N, np.float16))
    native, simulated = _both(casts, make, B=N)
    _bits_equal(native[1:4], simulated[1:4], ["int32", "int16", "int8"])


def test_narrowing_conversions_wrap_on_both_engines():
    """float32 -> int16 and float16 -> int16/int8/uint8 outside the destination's range but
    inside int32's: A2/A3's TCVT keeps the low bits of the int32 value (npu/a2a3/TCvt.hpp,
    NonSatTorch); the simulator's C++ cast does too there. float32 -> int8 saturates (PyPTO
    converts it through int32 and float16, then TCVT with saturation on: no TCVT makes it)."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(N) * 1e6).astype(np.float32)
    make = lambda: (x, np.zeros(N, np.int32), np.zeros(N, np.int16), np.zeros(N, np.int8),
                    np.zeros(N, np.float16))
    native, simulated = _both(casts, make, B=N)
    _bits_equal(native[1:4], simulated[1:4], ["int32", "int16", "int8"])
    wide = np.trunc(x.astype(np.float64)).astype(np.int64)
    np.testing.assert_array_equal(native[2], wide.astype(np.int16))
    np.testing.assert_array_equal(native[3], np.clip(wide, -128, 127))
    h = (rng.standard_normal(N) * 20000).astype(np.float16)
    make = lambda: (h, np.zeros(N, np.int16), np.zeros(N, np.int8), np.zeros(N, np.uint8))
    native, simulated = _both(half_casts, make, B=N)
    _bits_equal(native[1:], simulated[1:], ["int16", "int8", "uint8"])
    wide = np.trunc(h.astype(np.float64)).astype(np.int64)
    for got, d in zip(native[1:], (np.int16, np.int8, np.uint8)):
        np.testing.assert_array_equal(got, wide.astype(d))


def test_float_special_values_agree():
    x, y = _inputs(0), np.roll(_inputs(1), 7)
    y[:6] = [0.0, -0.0, np.nan, np.inf, 0.0, -np.inf]
    make = lambda: (x, y, *(np.zeros(N, np.float32) for _ in range(6)))
    native, simulated = _both(float_ops, make, B=N)
    _bits_equal([native[4], native[7]], [simulated[4], simulated[7]], ["div", "cmp"])
    # exp is not correctly rounded anywhere: within 2 ulp, and the same inf, 0 and NaN
    _within_ulps(native[6], simulated[6], 2, "exp")
    # abs: the simulator's TABS is ``x < 0 ? -x : x`` (cpu/TAbs.hpp), so |-0| is -0 there;
    # IEEE 754 abs (and the chip's vabs) clears the sign: compare all but the zeros
    nonzero = x != 0
    _bits_equal([native[5][nonzero]], [simulated[5][nonzero]], ["abs"])
    # max/min: the simulator's std::max/std::min return the first operand when the other is
    # NaN or an equal zero (docs/engines.md); everywhere else they must agree
    ordinary = ~(np.isnan(x) | np.isnan(y) | ((x == 0) & (y == 0)))
    _bits_equal([a[ordinary] for a in native[2:4]], [b[ordinary] for b in simulated[2:4]],
                ["max", "min"])


def test_integer_wraparound_agrees():
    info = np.iinfo(np.int32)
    x = np.arange(N, dtype=np.int32) * 1000003 - 7
    x[:6] = [info.max, info.min, -1, 0, info.max - 1, info.min + 1]
    y = np.roll(x, 3)
    make = lambda: (x, y, *(np.zeros(N, np.int32) for _ in range(4)))
    native, simulated = _both(int_ops, make, B=N)
    _bits_equal(native[2:], simulated[2:], ["add", "mul", "max", "shr"])


def test_padding_of_a_partial_tile_agrees():
    x = np.round(np.nan_to_num(_inputs(2)).reshape(8, 8)[:, :5] % 1000)   # integers: any order sums alike
    x[0] = -np.inf                                          # 5 valid columns, 8-wide tiles
    make = lambda: (x, np.zeros((8, 1), np.float32), np.zeros((8, 1), np.float32))
    native, simulated = _both(padded_reductions, make, R=8, C=8)
    _bits_equal(native[1:], simulated[1:], ["sum", "max"])


@pypto.jit
def padded_copy(x, out, R: pl.constexpr, C: pl.constexpr, PAD: pl.constexpr):
    pl.store(out, offsets=(0, 0), value=pl.load(x, offsets=(0, 0), shape=(R, C), padding=PAD))


def test_a_pad_value_outside_a_partial_window_survives_the_load():
    """PyPTO fills the tile with the pad value, then loads the window. The simulator's TLOAD
    used to refill the whole tile with 0 (the chip's DMA writes only the window): every
    element outside a 2 x 3 window came back 0 instead of 100 / -2.5 (docs/engines.md)."""
    for dtype, pad in ((np.int32, 100), (np.float16, -2.5), (np.float32, 7.0)):
        x = np.arange(1, 7, dtype=dtype).reshape(2, 3)
        make = lambda: (x, np.zeros((9, 37), dtype))
        native, simulated = _both(padded_copy, make, R=9, C=37, PAD=pad)
        _bits_equal(native[1:], simulated[1:], [f"{np.dtype(dtype).name} padded with {pad}"])
        assert (simulated[1][2:] == pad).all() and (simulated[1][:2, :3] == x).all()


@pypto.jit
def shifts(x, n, k, o_shl, o_shr, o_shls, o_shrs, B: pl.constexpr):
    a = pl.load(x, offsets=(0,), shape=(B,))
    s = pl.load(n, offsets=(0,), shape=(B,))
    pl.store(o_shl, offsets=(0,), value=a << s)
    pl.store(o_shr, offsets=(0,), value=a >> s)
    pl.store(o_shls, offsets=(0,), value=a << k)
    pl.store(o_shrs, offsets=(0,), value=a >> k)


def test_shifts_by_any_amount_agree():
    """PyPTO defines a shift by every amount (n >= bits: 0 or the sign fill, n < 0: 0); the
    chip's shift instructions do not, and the simulator masked the amount to 5 bits (x >> 33
    was x >> 1). The program now clamps the amount (legalize_types._guarded_shift)."""
    from pypto.backends.interpreter.numerics import _shl, _shr
    for dtype in (np.int32, np.int8, np.uint8):
        info = np.iinfo(dtype)
        x = np.linspace(info.min, info.max, N).astype(dtype)
        amounts = [0, 1, 7, 8, 9, 15, 16, 31, 32, 33, 100, -1, -8, -(2 ** 31)]
        n = np.resize(np.array(amounts, np.int64).astype(dtype), N)   # wrapped into dtype
        for k in (-3, 3, 8, 31, 32, 40):
            make = lambda: (x, n, k, *(np.zeros(N, dtype) for _ in range(4)))
            native, simulated = _both(shifts, make, B=N)
            names = [f"{np.dtype(dtype).name} {op} (k={k})" for op in ("<<", ">>", "<< k", ">> k")]
            _bits_equal(native[2:], simulated[2:], names)
            scalar_k = np.array(k).astype(dtype)        # a weak scalar: the tile's dtype
            expected = [_shl(x, n), _shr(x, n), _shl(x, scalar_k), _shr(x, scalar_k)]
            _bits_equal(expected, simulated[2:], names)


@pypto.jit
def column_sum(x, out, R: pl.constexpr, C: pl.constexpr):
    pl.store(out, offsets=(0, 0), value=pl.sum(pl.load(x, offsets=(0, 0), shape=(R, C)),
                                               axis=0, keepdims=True))


def test_a_float16_column_sum_accumulates_in_float32():
    """The chip's float16 TCOLSUM rounds every partial sum to float16 (and so does the
    simulator); PyPTO's sum rounds once. The program now sums in float32 (legalize_types):
    55 rows were 0.047 apart before."""
    x = (np.random.default_rng(1).standard_normal((55, 30)) * 2).astype(np.float16)
    make = lambda: (x, np.zeros((1, 30), np.float16))
    native, simulated = _both(column_sum, make, R=55, C=30)
    _bits_equal(native[1:], simulated[1:], ["float16 column sum"])
    exact = x.astype(np.float64).sum(0, keepdims=True).astype(np.float16)
    assert np.abs(simulated[1].astype(np.float64) - exact).max() <= 2 ** -8 * np.abs(exact).max()


@pypto.jit
def scalar_float_division(x, o_div, o_mod, s, t, B: pl.constexpr):
    z = pl.load(x, offsets=(0,), shape=(B,))
    pl.store(o_div, offsets=(0,), value=z + s // t)
    pl.store(o_mod, offsets=(0,), value=z + s % t)


SCALAR_PAIRS = [(7.5, -2.0), (-7.5, 2.0), (7.5, 2.0), (-7.5, -2.0), (6.0, 3.0), (-6.0, 3.0),
                (0.5, 2.0), (-0.5, 2.0), (1.0, 0.0), (-1.0, 0.0), (0.0, 0.0), (1e30, 3.0),
                (-1e30, 7.0), (16777217.0, 1.0), (8388609.5, 1.0), (-8388607.5, 1.0),
                (5.0, float("inf")), (-5.0, float("inf")), (float("inf"), 2.0),
                (float("nan"), 2.0), (2.0, float("nan")), (1e-30, 1e30), (0.3, 0.1)]


def test_scalar_float_floordiv_and_mod_agree_with_numpy_on_both_engines():
    """A scalar float ``//`` or ``%`` was printed as ``arith.floordivf`` / ``arith.modf``,
    which MLIR's arith does not have: PTOAS rejected the kernel ('custom op
    arith.floordivf is unknown'). The printer now writes them as remf/divf/select lines
    (spelling.FLOAT_MACROS); both engines must give numpy's floor_divide and mod."""
    zeros = np.zeros(8, np.float32)
    for s, t in SCALAR_PAIRS:
        make = lambda: (zeros, np.empty(8, np.float32), np.empty(8, np.float32), s, t)
        native, simulated = _both(scalar_float_division, make, B=8)
        with np.errstate(all="ignore"):
            want = [np.full(8, np.floor_divide(np.float32(s), np.float32(t))),
                    np.full(8, np.mod(np.float32(s), np.float32(t)))]
        for name, got in (("native", native), ("pto-isa", simulated)):
            for what, a, b in zip(("//", "%"), got[1:], want):
                ok = (a == b) | (np.isnan(a) & np.isnan(b))
                assert ok.all(), f"{name}: {s} {what} {t} gave {a[0]}, numpy {b[0]}"


@pypto.jit
def add_one(x, out, B: pl.constexpr):
    pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(B,)) + 1.0)


def test_a_grid_beyond_32_bits_is_refused_on_pto_isa_not_truncated():
    """pto-isa numbers blocks with a uint32_t: 2**32 blocks ran none (the count truncated to
    0) and returned as if done. Now refused, naming the limit."""
    x, out = np.zeros(8, np.float32), np.zeros(8, np.float32)
    with pytest.raises(ValueError, match=r"32 bits .* at most 4294967295"):
        _on(add_one.fn, "pto-isa")[(2 ** 32,)](x, out, B=8)
