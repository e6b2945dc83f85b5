"""The reference interpreter, op family by op family, on Functions built by hand.

Expected values are written with plain numpy (or Python) so each test states the rule of
docs/tile_ir.md it checks: padding at tensor edges, per-op rounding of half types, saturating
casts, integer division by zero, shifts, structured control flow.
"""
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pypto.errors import InternalError
from pypto.compiler.ir import Block, Function, Op, ScalarType, TensorType, TileType, Value
from pypto.backends.interpreter.numerics import convert
from pypto.backends.interpreter.run import run_function
from pypto.language import dtypes as dt

BF16 = ml_dtypes.bfloat16
I64, F32, BOOL = ScalarType(dt.int64), ScalarType(dt.float32), ScalarType(dt.bool_)


class Builder:
    """Appends ops to a block; ``op`` returns the single result, a list of several, or None."""

    def __init__(self, args=()):
        self.block = Block(args)

    def op(self, name, operands=(), types=(), blocks=(), **attrs):
        op = Op(name, operands, types, attrs, blocks)
        self.block.ops.append(op)
        if len(op.results) == 1:
            return op.result
        return op.results or None

    # shorthands for the ops most tests need
    def i64(self, v):
        return self.op("arith.constant", [], [I64], value=v)

    def f32(self, v):
        return self.op("arith.constant", [], [F32], value=v)

    def load(self, t, offs, shape, dtype=None, padding=0):
        dtype = dtype or t.type.dtype
        return self.op("tile.load", [t] + [self.i64(o) if isinstance(o, int) else o
                                           for o in offs],
                       [TileType(dtype, tuple(shape))], shape=tuple(shape), padding=padding)

    def store(self, t, offs, tile, atomic=None):
        return self.op("tile.store", [t] + [self.i64(o) if isinstance(o, int) else o
                                            for o in offs] + [tile], atomic=atomic)


def tensor(name, dtype, rank):
    return Value(TensorType(dtype, rank), name)


def scalar(name, dtype):
    return Value(ScalarType(dtype), name)


def run(params, build, args, grid=(1, 1, 1)):
    """Build a Function from ``build(builder, *params)`` and run it on ``args``."""
    b = Builder()
    build(b, *params)
    run_function(Function("k", list(params), b.block), args, grid)


def apply(x, build, out_dtype=None):
    """Load all of ``x``, apply ``build(b, tile) -> tile`` and store the result into a fresh
    tensor of ``out_dtype`` (default: the result tile's dtype), which is returned."""
    x = np.asarray(x)
    xt = tensor("x", dt.from_any(x.dtype), x.ndim)
    b = Builder()
    r = build(b, b.load(xt, [0] * x.ndim, x.shape))
    od = out_dtype or r.type.dtype
    yt = tensor("y", od, len(r.type.shape))
    b.store(yt, [0] * len(r.type.shape), r)
    y = np.zeros(r.type.shape, od.to_numpy())
    run_function(Function("k", [xt, yt], b.block), {"x": x, "y": y}, (1, 1, 1))
    return y


def unary(x, name, out=None):
    x = np.asarray(x)
    d = out or dt.from_any(x.dtype)
    return apply(x, lambda b, t: b.op("tile.unary", [t], [TileType(d, t.type.shape)], op=name))


def binary(x, y, name, out=None):
    """``x op y`` on two tiles of the same shape; y may also be a Python number, passed as an
    ``arith.constant`` of the tile's dtype."""
    x = np.asarray(x)
    d = dt.from_any(x.dtype)
    rd = out or (dt.bool_ if name in ("lt", "le", "gt", "ge", "eq", "ne") else d)
    xt, yt = tensor("x", d, x.ndim), tensor("y", d, x.ndim)
    o = np.zeros(x.shape, rd.to_numpy())
    ot = tensor("o", rd, x.ndim)

    def body(b, xt, yt, ot):
        a = b.load(xt, [0] * x.ndim, x.shape)
        if np.ndim(y) == 0:
            c = b.op("arith.constant", [], [ScalarType(d)], value=y)
        else:
            c = b.load(yt, [0] * x.ndim, x.shape)
        b.store(ot, [0] * x.ndim,
                b.op("tile.binary", [a, c], [TileType(rd, x.shape)], op=name))

    yv = np.zeros_like(x) if np.ndim(y) == 0 else np.asarray(y, x.dtype)
    run([xt, yt, ot], body, {"x": x, "y": yv, "o": o})
    return o


def scalar_op(name, x, y, dtype, out=None, **attrs):
    """Run ``arith.<name>`` on two constants of ``dtype`` and return the scalar result."""
    out = out or dtype
    o = np.zeros(1, out.to_numpy())
    ot = tensor("o", out, 1)

    def body(b, ot):
        a = b.op("arith.constant", [], [ScalarType(dtype)], value=x)
        c = b.op("arith.constant", [], [ScalarType(dtype)], value=y)
        r = b.op(f"arith.{name}", [a, c], [ScalarType(out)], **attrs)
        b.store(ot, [0], b.op("tile.full", [r], [TileType(out, (1,))], value=0))

    run([ot], body, {"o": o})
    return o[0]


# -- tile.load / tile.store ----------------------------------------------------------------------

@pytest.mark.parametrize("offs", [(0, 0), (2, 3), (-2, -1), (4, 5), (-3, 6), (10, 0), (0, -4)])
def test_load_pads_outside_the_tensor(offs):
    src = np.arange(30, dtype=np.float32).reshape(5, 6)
    out = np.zeros((3, 4), np.float32)
    t, o = tensor("t", dt.float32, 2), tensor("o", dt.float32, 2)
    run([t, o], lambda b, t, o: b.store(o, [0, 0], b.load(t, offs, (3, 4), padding=-1.5)),
        {"t": src, "o": out})
    expect = np.full((3, 4), -1.5, np.float32)
    for i in range(3):
        for j in range(4):
            r, c = offs[0] + i, offs[1] + j
            if 0 <= r < 5 and 0 <= c < 6:
                expect[i, j] = src[r, c]
    np.testing.assert_array_equal(out, expect)


@pytest.mark.parametrize("offs", [(2, 2), (0, 0)])
def test_load_without_padding_reads_a_window_inside(offs):
    src = np.arange(30, dtype=np.float32).reshape(5, 6)
    out = np.zeros((3, 4), np.float32)
    t, o = tensor("t", dt.float32, 2), tensor("o", dt.float32, 2)
    run([t, o], lambda b, t, o: b.store(o, [0, 0], b.load(t, offs, (3, 4), padding=None)),
        {"t": src, "o": out})
    np.testing.assert_array_equal(out, src[offs[0]:offs[0] + 3, offs[1]:offs[1] + 4])


@pytest.mark.parametrize("offs", [(3, 0), (0, 3), (-1, 0)])
def test_load_without_padding_outside_the_tensor_is_an_error(offs):
    t, o = tensor("t", dt.float32, 2), tensor("o", dt.float32, 2)
    with pytest.raises(IndexError, match=r"pl.load\(padding=None\): the window \(3, 4\)"):
        run([t, o], lambda b, t, o: b.store(o, [0, 0], b.load(t, offs, (3, 4), padding=None)),
            {"t": np.zeros((5, 6), np.float32), "o": np.zeros((3, 4), np.float32)})


def test_load_rank1_and_runtime_offsets_and_strided_tensor():
    base = np.arange(20, dtype=np.int32)
    src = base[::2]                      # a strided view: 0, 2, ..., 18
    out = np.zeros(4, np.int32)
    t, o, off = tensor("t", dt.int32, 1), tensor("o", dt.int32, 1), scalar("off", dt.int64)
    run([t, o, off], lambda b, t, o, off: b.store(o, [0], b.load(t, [off], (4,), padding=7)),
        {"t": src, "o": out, "off": 8})
    np.testing.assert_array_equal(out, [16, 18, 7, 7])


def test_padding_is_converted_to_the_tile_dtype():
    src = np.zeros(2, np.int8)
    out = np.zeros(4, np.int8)
    t, o = tensor("t", dt.int8, 1), tensor("o", dt.int8, 1)
    run([t, o], lambda b, t, o: b.store(o, [0], b.load(t, [0], (4,), padding=float("-inf"))),
        {"t": src, "o": out})
    np.testing.assert_array_equal(out, [0, 0, -128, -128])   # saturating


@pytest.mark.parametrize("offs", [(0, 0), (3, 4), (-1, -2), (-5, 0), (5, 0)])
def test_store_writes_only_inside(offs):
    dst = np.full((5, 6), -1.0, np.float32)
    tile = np.arange(12, dtype=np.float32).reshape(3, 4) + 100
    t, o = tensor("t", dt.float32, 2), tensor("o", dt.float32, 2)
    run([t, o], lambda b, t, o: b.store(o, offs, b.load(t, [0, 0], (3, 4))),
        {"t": tile, "o": dst})
    expect = np.full((5, 6), -1.0, np.float32)
    for i in range(3):
        for j in range(4):
            r, c = offs[0] + i, offs[1] + j
            if 0 <= r < 5 and 0 <= c < 6:
                expect[r, c] = tile[i, j]
    np.testing.assert_array_equal(dst, expect)


def test_store_converts_as_the_chip():
    """float32 -> int8 saturates; float32 -> int16 goes through int32 and keeps its low bits
    (A2/A3's TCVT, target.WRAPPING_CONVERSIONS)."""
    src = np.array([1e10, -1e10, np.nan, 2.9, -2.9, 40000.0], np.float32)
    for dtype, want in ((dt.int8, [127, -128, 0, 2, -2, 127]),
                        (dt.int16, [-1, 0, 0, 2, -2, -25536])):
        dst = np.zeros(6, dtype.to_numpy())
        t, o = tensor("t", dt.float32, 1), tensor("o", dtype, 1)
        run([t, o], lambda b, t, o: b.store(o, [0], b.load(t, [0], (6,))), {"t": src, "o": dst})
        np.testing.assert_array_equal(dst, want)


def test_atomic_add_over_the_grid():
    """Each block adds its tile; half types add in float32 and round once per add."""
    dst = np.zeros(4, np.float16)
    src = np.full(4, 0.1, np.float16)
    t, o = tensor("t", dt.float16, 1), tensor("o", dt.float16, 1)
    run([t, o], lambda b, t, o: b.store(o, [-2], b.load(t, [0], (4,)), atomic="add"),
        {"t": src, "o": dst}, grid=(3, 1, 1))
    acc = np.float16(0)
    for _ in range(3):
        acc = np.float16(np.float32(acc) + np.float32(np.float16(0.1)))
    np.testing.assert_array_equal(dst, [acc, acc, 0, 0])


def test_atomic_add_int_wraps():
    dst = np.array([120, 0], np.int8)
    src = np.array([10, -5], np.int8)
    t, o = tensor("t", dt.int8, 1), tensor("o", dt.int8, 1)
    run([t, o], lambda b, t, o: b.store(o, [0], b.load(t, [0], (2,)), atomic="add"),
        {"t": src, "o": dst})
    np.testing.assert_array_equal(dst, [-126, -5])


# -- tile.full / tile.arange --------------------------------------------------------------------

def test_full_attribute_and_operand():
    o1, o2 = np.zeros((2, 3), np.float16), np.zeros(3, np.int32)
    a, c = tensor("a", dt.float16, 2), tensor("c", dt.int32, 1)

    def body(b, a, c):
        b.store(a, [0, 0], b.op("tile.full", [], [TileType(dt.float16, (2, 3))], value=0.1))
        s = b.f32(-3.9)
        b.store(c, [0], b.op("tile.full", [s], [TileType(dt.int32, (3,))], value=5))

    run([a, c], body, {"a": o1, "c": o2})
    np.testing.assert_array_equal(o1, np.full((2, 3), np.float16(0.1)))
    np.testing.assert_array_equal(o2, [-3, -3, -3])     # the operand wins, truncated


def test_arange():
    o = np.zeros(5, np.int32)
    ot = tensor("o", dt.int32, 1)
    run([ot], lambda b, ot: b.store(ot, [0], b.op("tile.arange", [], [TileType(dt.int32, (5,))],
                                                  start=3, end=8)), {"o": o})
    np.testing.assert_array_equal(o, np.arange(3, 8))


# -- tile.unary ---------------------------------------------------------------------------------

X = np.array([[-2.5, -1.0, -0.25, 0.0], [0.3, 1.0, 2.0, 7.5]], np.float32)
POS = np.abs(X) + 0.5


def _gelu(x):
    return 0.5 * x * (1 + np.tanh(np.float32(math.sqrt(2 / math.pi))
                                  * (x + np.float32(0.044715) * x ** 3)))


UNARY_REF = {
    "neg": (X, np.negative), "abs": (X, np.abs), "exp": (X, np.exp), "exp2": (X, np.exp2),
    "log": (POS, np.log), "log2": (POS, np.log2), "sqrt": (POS, np.sqrt),
    "rsqrt": (POS, lambda x: 1 / np.sqrt(x)), "reciprocal": (X, lambda x: 1 / x),
    "sin": (X, np.sin), "cos": (X, np.cos), "tanh": (X, np.tanh),
    "sigmoid": (X, lambda x: 1 / (1 + np.exp(-x))), "relu": (X, lambda x: np.maximum(x, 0)),
    "gelu": (X, _gelu), "erf": (X, np.vectorize(math.erf)), "floor": (X, np.floor),
    "ceil": (X, np.ceil),
}


@pytest.mark.parametrize("name", sorted(UNARY_REF))
def test_unary_float32(name):
    x, ref = UNARY_REF[name]
    with np.errstate(all="ignore"):
        expect = np.asarray(ref(x), dtype=np.float64).astype(np.float32)
    np.testing.assert_allclose(unary(x, name), expect, rtol=2e-7, atol=1e-7)


@pytest.mark.parametrize("np_half", [np.float16, BF16])
@pytest.mark.parametrize("name", ["exp", "sqrt", "sigmoid", "gelu", "reciprocal"])
def test_unary_half_computes_in_float32_and_rounds_once(name, np_half):
    x, ref = UNARY_REF[name]
    xh = x.astype(np_half)
    with np.errstate(all="ignore"):
        expect = np.asarray(ref(xh.astype(np.float32)), np.float32).astype(np_half)
    got = unary(xh, name)
    assert got.dtype == np.dtype(np_half)
    np.testing.assert_array_equal(got.astype(np.float32), expect.astype(np.float32))


def test_unary_int_and_bool():
    i8 = np.array([-128, -1, 0, 5], np.int8)
    np.testing.assert_array_equal(unary(i8, "abs"), [-128, 1, 0, 5])        # wraps
    np.testing.assert_array_equal(unary(i8, "neg"), [-128, 1, 0, -5])
    np.testing.assert_array_equal(unary(i8, "not"), ~i8)
    np.testing.assert_array_equal(unary(i8, "relu"), [0, 0, 0, 5])
    np.testing.assert_array_equal(unary(np.array([True, False]), "not"), [False, True])


def test_unary_to_float_result_of_int_tile():
    got = unary(np.array([0, 1, 2], np.int32), "exp", out=dt.float32)
    np.testing.assert_array_equal(got, np.exp(np.array([0, 1, 2], np.float32)))


# -- tile.binary --------------------------------------------------------------------------------

A = np.array([[1.5, -2.0, 3.25, 0.0], [np.nan, 5.0, -0.5, 1e30]], np.float32)
B = np.array([[0.5, 4.0, -1.0, 0.0], [1.0, np.nan, 2.0, 1e30]], np.float32)


@pytest.mark.parametrize("name,ref", [
    ("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide),
    ("max", np.maximum), ("min", np.minimum), ("pow", np.power),
    ("floordiv", np.floor_divide), ("mod", np.mod),
    ("lt", np.less), ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal),
    ("eq", np.equal), ("ne", np.not_equal),
])
def test_binary_float32(name, ref):
    with np.errstate(all="ignore"):
        expect = ref(A, B)
    np.testing.assert_array_equal(binary(A, B, name), expect)


def test_max_min_propagate_nan_from_either_side():
    x = np.array([np.nan, 1.0, 2.0], np.float32)
    y = np.array([1.0, np.nan, 0.0], np.float32)
    assert np.isnan(binary(x, y, "max")[:2]).all() and np.isnan(binary(x, y, "min")[:2]).all()


@pytest.mark.parametrize("np_half", [np.float16, BF16])
def test_half_binary_rounds_once_per_op(np_half):
    x = np.array([0.1, 1000.3, 3.0, -7.7], np_half)
    y = np.array([0.2, 0.7, 1e-3, 2.2], np_half)
    f = lambda v: v.astype(np.float32)          # noqa: E731
    for name, ref in (("add", np.add), ("mul", np.multiply), ("div", np.divide)):
        expect = ref(f(x), f(y)).astype(np_half)
        np.testing.assert_array_equal(f(binary(x, y, name)), f(expect))


def test_f16_with_f16_product_rounds_to_f16_then_adds():
    """Two ops, two roundings: (a*b)+c differs from the fused value here."""
    a = np.array([1 + 3 * 2 ** -10], np.float16)
    c = np.array([-1.0], np.float16)
    at, ct, ot = tensor("a", dt.float16, 1), tensor("c", dt.float16, 1), \
        tensor("o", dt.float16, 1)
    o = np.zeros(1, np.float16)

    def body(b, at, ct, ot):
        x, z = b.load(at, [0], (1,)), b.load(ct, [0], (1,))
        t = TileType(dt.float16, (1,))
        p = b.op("tile.binary", [x, x], [t], op="mul")
        b.store(ot, [0], b.op("tile.binary", [p, z], [t], op="add"))

    run([at, ct, ot], body, {"a": a, "c": c, "o": o})
    sq = np.float16(np.float32(a[0]) * np.float32(a[0]))
    assert o[0] == np.float16(np.float32(sq) - 1)
    assert o[0] != np.float16(np.float32(a[0]) ** 2 - 1)


def test_int_arithmetic_wraps():
    x = np.array([127, -128, 100], np.int8)
    y = np.array([1, -1, 2], np.int8)
    np.testing.assert_array_equal(binary(x, y, "add"), [-128, 127, 102])
    np.testing.assert_array_equal(binary(x, y, "mul"), [127, -128, -56])


def test_int_floordiv_mod_python_semantics_and_zero():
    x = np.array([7, -7, 7, -7, 5, -2 ** 31, -2 ** 31], np.int32)
    y = np.array([2, 2, -2, -2, 0, -1, 0], np.int32)
    np.testing.assert_array_equal(binary(x, y, "floordiv"), [3, -4, -4, 3, 0, -2 ** 31, 0])
    np.testing.assert_array_equal(binary(x, y, "mod"), [1, 1, -1, -1, 0, 0, 0])
    u = np.array([7, 200], np.uint8)
    np.testing.assert_array_equal(binary(u, np.array([0, 3], np.uint8), "floordiv"), [0, 66])
    np.testing.assert_array_equal(binary(u, np.array([0, 3], np.uint8), "mod"), [0, 2])


def test_int_pow():
    x = np.array([3, 2, -1, -1, 1, 2, 0], np.int32)
    y = np.array([3, 31, 3, -3, -5, -1, -2], np.int32)
    np.testing.assert_array_equal(binary(x, y, "pow"), [27, -2 ** 31, -1, -1, 1, 0, 0])


def test_bitwise_ops():
    x = np.array([0b1100, -1, 0], np.int16)
    y = np.array([0b1010, 0x0F0F, 3], np.int16)
    np.testing.assert_array_equal(binary(x, y, "and"), x & y)
    np.testing.assert_array_equal(binary(x, y, "or"), x | y)
    np.testing.assert_array_equal(binary(x, y, "xor"), x ^ y)
    p, q = np.array([True, True, False]), np.array([True, False, False])
    np.testing.assert_array_equal(binary(p, q, "and"), p & q)
    np.testing.assert_array_equal(binary(p, q, "xor"), p ^ q)


def test_shifts():
    x = np.array([1, 1, 64, -8, -8, -8, -8, 5], np.int8)
    n = np.array([3, 8, 1, 1, 7, 8, 100, -2], np.int8)
    np.testing.assert_array_equal(binary(x, n, "shl"), [8, 0, -128, -16, 0, 0, 0, 5])
    np.testing.assert_array_equal(binary(x, n, "shr"), [0, 0, 32, -4, -1, -1, -1, 5])
    u = np.array([200, 200, 200, 1], np.uint8)
    m = np.array([1, 7, 8, 9], np.uint8)
    np.testing.assert_array_equal(binary(u, m, "shr"), [100, 1, 0, 0])
    np.testing.assert_array_equal(binary(u, m, "shl"), [144, 0, 0, 0])


def test_tile_scalar_operand():
    x = np.array([1.0, 2.0, 3.0], np.float16)
    np.testing.assert_array_equal(binary(x, 0.1, "mul"),
                                  (x.astype(np.float32) * np.float32(np.float16(0.1)))
                                  .astype(np.float16))
    i = np.array([-5, 5], np.int32)
    np.testing.assert_array_equal(binary(i, 2, "floordiv"), [-3, 2])
    np.testing.assert_array_equal(binary(i, 0, "mod"), [0, 0])
    np.testing.assert_array_equal(binary(i, 0, "gt"), [False, True])


# -- tile.where / tile.cast ---------------------------------------------------------------------

def test_where():
    c = np.array([True, False, True])
    x, y = np.array([1, 2, 3], np.float32), np.array([-1, -2, -3], np.float32)
    ct, xt, yt, ot = (tensor("c", dt.bool_, 1), tensor("x", dt.float32, 1),
                      tensor("y", dt.float32, 1), tensor("o", dt.float32, 1))
    o = np.zeros(3, np.float32)

    def body(b, ct, xt, yt, ot):
        ts = [b.load(t, [0], (3,)) for t in (ct, xt, yt)]
        b.store(ot, [0], b.op("tile.where", ts, [TileType(dt.float32, (3,))]))

    run([ct, xt, yt, ot], body, {"c": c, "x": x, "y": y, "o": o})
    np.testing.assert_array_equal(o, [1, -2, 3])


def cast(x, dtype, rounding=None):
    return apply(x, lambda b, t: b.op("tile.cast", [t], [TileType(dtype, t.type.shape)],
                                      dtype=dtype, rounding=rounding))


F = np.array([np.nan, np.inf, -np.inf, 1e20, -1e20, 2.5, -2.5, 3.5, -0.7, 127.9, 128.0, -129.0],
             np.float32)


def test_cast_float_to_int_truncates_and_saturates():
    np.testing.assert_array_equal(cast(F, dt.int8),
                                  [0, 127, -128, 127, -128, 2, -2, 3, 0, 127, 127, -128])
    np.testing.assert_array_equal(cast(F, dt.uint8),
                                  [0, 255, 0, 255, 0, 2, 0, 3, 0, 127, 128, 0])
    big = np.iinfo(np.int64)
    np.testing.assert_array_equal(cast(F, dt.int64)[:5], [0, big.max, big.min, big.max, big.min])
    np.testing.assert_array_equal(cast(F, dt.int32)[3:5], [2 ** 31 - 1, -2 ** 31])


@pytest.mark.parametrize("rounding,fn", [("rint", np.rint), ("floor", np.floor),
                                         ("ceil", np.ceil), ("trunc", np.trunc)])
def test_cast_rounding_modes(rounding, fn):
    x = np.array([2.5, -2.5, 3.5, -0.7, 0.7, 1.5], np.float32)
    np.testing.assert_array_equal(cast(x, dt.int32, rounding), fn(x).astype(np.int32))


def test_cast_rounding_saturates_after_rounding():
    x = np.array([127.6, -128.6, np.nan], np.float32)
    np.testing.assert_array_equal(cast(x, dt.int8, "rint"), [127, -128, 0])
    np.testing.assert_array_equal(cast(x, dt.int8, "ceil"), [127, -128, 0])


def test_cast_int_wraps_and_bool():
    x = np.array([300, -1, 128, 0], np.int32)
    np.testing.assert_array_equal(cast(x, dt.int8), [44, -1, -128, 0])
    np.testing.assert_array_equal(cast(x, dt.uint8), [44, 255, 128, 0])
    np.testing.assert_array_equal(cast(x, dt.bool_), [True, True, True, False])
    np.testing.assert_array_equal(cast(np.array([0.0, -0.0, 0.1, np.nan], np.float32),
                                       dt.bool_), [False, False, True, True])
    np.testing.assert_array_equal(cast(np.array([True, False]), dt.float32), [1.0, 0.0])


def test_cast_float_narrowing_is_rne():
    x = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -9, 1 + 2 ** -9, 70000.0, 1e-30], np.float32)
    np.testing.assert_array_equal(cast(x, dt.bfloat16).astype(np.float32),
                                  x.astype(BF16).astype(np.float32))
    with np.errstate(over="ignore"):
        expect = x.astype(np.float16)
    np.testing.assert_array_equal(cast(x, dt.float16), expect)


@settings(max_examples=200, deadline=None)
@given(st.floats(width=32, allow_nan=True, allow_infinity=True),
       st.sampled_from([dt.int8, dt.uint8, dt.int16, dt.int32, dt.int64]))
def test_convert_matches_python_saturating_truncation(f, d):
    """float32 -> int16 saturates into int32 first and keeps the low 16 bits (the chip)."""
    wraps = d == dt.int16
    info = np.iinfo((np.int32 if wraps else d.to_numpy()))
    if math.isnan(f):
        expect = 0
    elif math.isinf(f):
        expect = info.max if f > 0 else info.min
    else:
        expect = min(max(math.trunc(f), info.min), info.max)
    if wraps:
        expect = (expect + 2 ** 15) % 2 ** 16 - 2 ** 15
    assert int(convert(np.float32(f), d)) == expect


# -- shape ops ----------------------------------------------------------------------------------

M = np.arange(12, dtype=np.float32).reshape(3, 4) - 5


def _shaped(name, result_shape, dtype=dt.float32, **attrs):
    return lambda b, t: b.op(name, [t], [TileType(dtype, result_shape)], **attrs)


def test_broadcast_reshape_transpose_slice_mov():
    row = M[:1]
    np.testing.assert_array_equal(apply(row, _shaped("tile.broadcast", (3, 4), shape=(3, 4))),
                                  np.broadcast_to(row, (3, 4)))
    np.testing.assert_array_equal(apply(M, _shaped("tile.reshape", (2, 6), shape=(2, 6))),
                                  M.reshape(2, 6))
    np.testing.assert_array_equal(apply(M, _shaped("tile.transpose", (4, 3))), M.T)
    np.testing.assert_array_equal(
        apply(M, _shaped("tile.slice", (2, 2), starts=(1, 1), stops=(3, 3))), M[1:3, 1:3])
    np.testing.assert_array_equal(apply(M, _shaped("tile.mov", (3, 4))), M)


def test_concat():
    def build(b, t):
        u = b.op("tile.unary", [t], [t.type], op="neg")
        return b.op("tile.concat", [t, u], [TileType(dt.float32, (3, 8))], axis=1)
    np.testing.assert_array_equal(apply(M, build), np.concatenate([M, -M], axis=1))


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("name,ref", [("sum", np.sum), ("max", np.max), ("min", np.min),
                                      ("prod", np.prod)])
def test_reduce_values(name, ref, axis):
    shape = (1, 4) if axis == 0 else (3, 1)
    got = apply(M, _shaped("tile.reduce", shape, op=name, axis=axis))
    np.testing.assert_array_equal(got, ref(M, axis=axis, keepdims=True))


def test_reduce_half_sums_in_float32():
    x = np.full((1, 64), 0.1, np.float16)
    got = apply(x, _shaped("tile.reduce", (1, 1), dt.float16, op="sum", axis=1))
    assert got[0, 0] == np.float16(np.sum(x.astype(np.float32)))


def test_reduce_int_sum_wraps():
    x = np.full((1, 3), 100, np.int8)
    got = apply(x, _shaped("tile.reduce", (1, 1), dt.int8, op="sum", axis=1))
    assert got[0, 0] == np.int8(300 - 256)


def test_argmax_argmin_first_index_and_nan():
    x = np.array([[1.0, 5.0, 5.0, 0.0], [2.0, np.nan, 9.0, np.nan], [3.0, 3.0, -1.0, -1.0]],
                 np.float32)
    amax = apply(x, _shaped("tile.reduce", (3, 1), dt.int32, op="argmax", axis=1))
    amin = apply(x, _shaped("tile.reduce", (3, 1), dt.int32, op="argmin", axis=1))
    assert amax.dtype == np.int32
    np.testing.assert_array_equal(amax[:, 0], [1, 1, 0])
    np.testing.assert_array_equal(amin[:, 0], [3, 1, 2])     # numpy: a NaN wins argmin too
    np.testing.assert_array_equal(
        apply(x[:, :1], _shaped("tile.reduce", (1, 1), dt.int32, op="argmax", axis=0)), [[2]])


def test_cumsum():
    np.testing.assert_array_equal(apply(M, _shaped("tile.cumsum", (3, 4), axis=1)),
                                  np.cumsum(M, axis=1))
    x = np.full((1, 4), 0.1, np.float16)
    got = apply(x, _shaped("tile.cumsum", (1, 4), dt.float16, axis=1))
    np.testing.assert_array_equal(got, np.cumsum(x.astype(np.float32), axis=1)
                                  .astype(np.float16))


# -- tile.matmul --------------------------------------------------------------------------------

def _matmul(a, b_, acc=None, a_trans=False, b_trans=False, acc_dtype=dt.float32):
    d = dt.from_any(a.dtype)
    at, bt = tensor("a", d, 2), tensor("b", d, 2)
    m = a.shape[1] if a_trans else a.shape[0]
    n = b_.shape[0] if b_trans else b_.shape[1]
    ct, ot = tensor("c", acc_dtype, 2), tensor("o", acc_dtype, 2)
    o = np.zeros((m, n), acc_dtype.to_numpy())
    c = acc if acc is not None else np.zeros((m, n), acc_dtype.to_numpy())

    def body(b, at, bt, ct, ot):
        ops = [b.load(at, [0, 0], a.shape), b.load(bt, [0, 0], b_.shape)]
        if acc is not None:
            ops.append(b.load(ct, [0, 0], (m, n)))
        b.store(ot, [0, 0], b.op("tile.matmul", ops, [TileType(acc_dtype, (m, n))],
                                 a_trans=a_trans, b_trans=b_trans))

    run([at, bt, ct, ot], body, {"a": a, "b": b_, "c": c, "o": o})
    return o


@pytest.mark.parametrize("np_dtype", [np.float16, BF16, np.float32])
def test_matmul_float_in_float32(np_dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 8)).astype(np_dtype)
    b = rng.standard_normal((8, 3)).astype(np_dtype)
    acc = rng.standard_normal((4, 3)).astype(np.float32)
    f = lambda v: v.astype(np.float32)           # noqa: E731
    np.testing.assert_array_equal(_matmul(a, b), f(a) @ f(b))
    np.testing.assert_array_equal(_matmul(a, b, acc), f(a) @ f(b) + acc)
    np.testing.assert_array_equal(_matmul(np.ascontiguousarray(a.T), np.ascontiguousarray(b.T),
                                          a_trans=True, b_trans=True), f(a) @ f(b))


def test_matmul_int8_in_int32():
    a = np.full((2, 64), 127, np.int8)
    b = np.full((64, 2), -128, np.int8)
    acc = np.full((2, 2), 5, np.int32)
    got = _matmul(a, b, acc, acc_dtype=dt.int32)
    np.testing.assert_array_equal(got, np.full((2, 2), 127 * -128 * 64 + 5, np.int32))


# -- scalar ops and grid ids --------------------------------------------------------------------

@pytest.mark.parametrize("name,x,y,expect", [
    ("add", 2 ** 62, 2 ** 62, -2 ** 63), ("sub", 3, 10, -7), ("mul", -4, 5, -20),
    ("floordiv", -7, 2, -4), ("floordiv", 7, -2, -4), ("floordiv", 7, 0, 0),
    ("floordiv", -2 ** 63, -1, -2 ** 63),
    ("mod", -7, 2, 1), ("mod", 7, -2, -1), ("mod", 7, 0, 0), ("min", 3, -3, -3),
    ("max", 3, -3, 3), ("and", 12, 10, 8), ("or", 12, 10, 14), ("xor", 12, 10, 6),
    ("shl", 1, 63, -2 ** 63), ("shl", 1, 64, 0), ("shr", -16, 2, -4), ("shr", -16, 99, -1),
    ("shl", 5, -1, 5),
])
def test_scalar_int_ops(name, x, y, expect):
    assert scalar_op(name, x, y, dt.int64) == expect


def test_scalar_float_ops():
    assert scalar_op("div", 1.0, 3.0, dt.float32) == np.float32(1) / np.float32(3)
    assert scalar_op("div", 1.0, 0.0, dt.float32) == np.inf
    assert scalar_op("add", 0.1, 0.2, dt.float32) == np.float32(0.1) + np.float32(0.2)
    assert np.isnan(scalar_op("max", float("nan"), 1.0, dt.float32))
    assert scalar_op("floordiv", -7.0, 2.0, dt.float32) == -4.0
    assert scalar_op("mod", -7.0, 2.0, dt.float32) == 1.0


def test_scalar_div_of_ints_is_float_division():
    assert scalar_op("div", 7, 2, dt.int64, out=dt.float32) == 3.5


@pytest.mark.parametrize("pred,x,y,expect", [
    ("lt", 1, 2, True), ("le", 2, 2, True), ("gt", 1, 2, False), ("ge", 1, 2, False),
    ("eq", 3, 3, True), ("ne", 3, 3, False)])
def test_scalar_cmp(pred, x, y, expect):
    assert scalar_op("cmp", x, y, dt.int64, out=dt.bool_, pred=pred) == expect


def test_scalar_cmp_nan_is_unordered():
    nan = float("nan")
    assert scalar_op("cmp", nan, nan, dt.float32, out=dt.bool_, pred="eq") == False  # noqa
    assert scalar_op("cmp", nan, 1.0, dt.float32, out=dt.bool_, pred="ne") == True   # noqa


def test_scalar_cast_select_and_params():
    o = np.zeros(4, np.float32)
    ot, n, f = tensor("o", dt.float32, 1), scalar("n", dt.int64), scalar("f", dt.float32)

    def body(b, ot, n, f):
        fi = b.op("arith.cast", [f], [I64], dtype=dt.int64)               # trunc → -2
        fr = b.op("arith.cast", [f], [I64], dtype=dt.int64, rounding="floor")   # → -3
        c = b.op("arith.cmp", [n, fi], [BOOL], pred="gt")
        s = b.op("arith.select", [c, fi, fr], [I64])
        vals = [b.op("arith.cast", [v], [F32], dtype=dt.float32) for v in (fi, fr, s)] + [f]
        for k, v in enumerate(vals):
            b.store(ot, [k], b.op("tile.full", [v], [TileType(dt.float32, (1,))], value=0))

    run([ot, n, f], body, {"o": o, "n": 0, "f": -2.5})
    np.testing.assert_array_equal(o, [-2, -3, -2, -2.5])


def test_scalar_params_convert_to_their_dtype():
    o = np.zeros(2, np.float32)
    ot, f, i = tensor("o", dt.float32, 1), scalar("f", dt.float32), scalar("i", dt.int8)

    def body(b, ot, f, i):
        b.store(ot, [0], b.op("tile.full", [f], [TileType(dt.float32, (1,))], value=0))
        b.store(ot, [1], b.op("tile.full", [i], [TileType(dt.float32, (1,))], value=0))

    run([ot, f, i], body, {"o": o, "f": 0.1, "i": 300})
    np.testing.assert_array_equal(o, [np.float32(0.1), 44])


def test_program_ids_grid_order_and_tensor_dim():
    """Every block records (its linear visit order, pid0, pid1, pid2, nums, dim) in its row."""
    g = (3, 2, 2)
    log = np.full((12, 8), -1, np.int64)
    counter = np.zeros(1, np.int64)
    lt, ct = tensor("log", dt.int64, 2), tensor("ctr", dt.int64, 1)

    def body(b, lt, ct):
        ids = [b.op("pto.program_id", [], [I64], axis=a) for a in range(3)]
        nums = [b.op("pto.num_programs", [], [I64], axis=a) for a in range(3)]
        row = b.op("arith.add", [ids[0], b.op("arith.mul", [nums[0], b.op(
            "arith.add", [ids[1], b.op("arith.mul", [nums[1], ids[2]], [I64])], [I64])],
            [I64])], [I64])
        order = b.load(ct, [0], (1,))
        vals = [order] + [b.op("tile.full", [v], [TileType(dt.int64, (1,))], value=0)
                          for v in ids + nums + [b.op("tensor.dim", [lt], [I64], axis=0)]]
        for k, v in enumerate(vals):
            b.store(lt, [row, b.i64(k)], b.op("tile.reshape", [v], [TileType(dt.int64, (1, 1))],
                                              shape=(1, 1)))
        b.store(ct, [0], b.op("tile.full", [], [TileType(dt.int64, (1,))], value=1),
                atomic="add")

    run([lt, ct], body, {"log": log, "ctr": counter}, grid=g)
    k = np.arange(12)
    expect = np.stack([k, k % 3, (k // 3) % 2, k // 6] + [np.full(12, v) for v in g]
                      + [np.full(12, 12)], axis=1)
    np.testing.assert_array_equal(log, expect)


# -- control flow -------------------------------------------------------------------------------

def _for_sum(lb, ub, step):
    """sum of iv over range(lb, ub, step), carried as a scalar and a (1,) float tile."""
    o = np.zeros(2, np.float32)
    ot = tensor("o", dt.float32, 1)

    def body(b, ot):
        zero = b.i64(0)
        acc0 = b.op("tile.full", [], [TileType(dt.float32, (1,))], value=0.0)
        iv, s, t = Value(I64, "i"), Value(I64, "s"), Value(acc0.type, "t")
        inner = Builder([iv, s, t])
        s2 = inner.op("arith.add", [s, iv], [I64])
        t2 = inner.op("tile.binary", [t, inner.op("arith.cast", [iv], [F32], dtype=dt.float32)],
                      [acc0.type], op="add")
        inner.op("scf.yield", [s2, t2])
        s_out, t_out = b.op("scf.for", [b.i64(lb), b.i64(ub), b.i64(step), zero, acc0],
                            [I64, acc0.type], [inner.block])
        b.store(ot, [0], b.op("tile.full", [s_out], [TileType(dt.float32, (1,))], value=0))
        b.store(ot, [1], t_out)

    run([ot], body, {"o": o})
    return list(o)


def test_scf_for():
    assert _for_sum(0, 10, 1) == [45, 45]
    assert _for_sum(3, 20, 4) == [sum(range(3, 20, 4))] * 2
    assert _for_sum(5, 5, 1) == [0, 0]
    assert _for_sum(0, 10, 0) == [0, 0]        # non-positive step: no iteration
    assert _for_sum(10, 0, -1) == [0, 0]


@pytest.mark.parametrize("flag", [0, 1])
def test_scf_if(flag):
    o = np.zeros(1, np.float32)
    ot, fl = tensor("o", dt.float32, 1), scalar("flag", dt.int64)

    def body(b, ot, fl):
        c = b.op("arith.cmp", [fl, b.i64(0)], [BOOL], pred="ne")
        ty = TileType(dt.float32, (1,))
        then, other = Builder(), Builder()
        then.op("scf.yield", [then.op("tile.full", [], [ty], value=1.5)])
        other.op("scf.yield", [other.op("tile.full", [], [ty], value=-2.0)])
        b.store(ot, [0], b.op("scf.if", [c], [ty], [then.block, other.block]))

    run([ot, fl], body, {"o": o, "flag": flag})
    assert o[0] == (1.5 if flag else -2.0)


def test_scf_if_without_else_and_results():
    o = np.zeros(1, np.int32)
    ot = tensor("o", dt.int32, 1)

    def body(b, ot):
        then = Builder()
        then.store(ot, [0], then.op("tile.full", [], [TileType(dt.int32, (1,))], value=9))
        then.op("scf.yield", [])
        c = b.op("arith.cmp", [b.i64(1), b.i64(0)], [BOOL], pred="gt")
        b.op("scf.if", [c], [], [then.block])
        c2 = b.op("arith.cmp", [b.i64(1), b.i64(0)], [BOOL], pred="lt")
        b.op("scf.if", [c2], [], [then.block])

    run([ot], body, {"o": o})
    assert o[0] == 9


@pytest.mark.parametrize("start,steps", [(27, 111), (1, 0), (6, 8)])
def test_scf_while_collatz(start, steps):
    """while n != 1: n = n//2 if n even else 3n+1; count the steps."""
    o = np.zeros(2, np.int64)
    ot, n0 = tensor("o", dt.int64, 1), scalar("n", dt.int64)

    def body(b, ot, n0):
        n, k = Value(I64, "n"), Value(I64, "k")
        before = Builder([n, k])
        one = before.i64(1)
        before.op("scf.condition", [before.op("arith.cmp", [n, one], [BOOL], pred="ne"), n, k])
        n2, k2 = Value(I64, "n"), Value(I64, "k")
        after = Builder([n2, k2])
        two, three, one_ = after.i64(2), after.i64(3), after.i64(1)
        even = after.op("arith.cmp", [after.op("arith.mod", [n2, two], [I64]), after.i64(0)],
                        [BOOL], pred="eq")
        half = after.op("arith.floordiv", [n2, two], [I64])
        up = after.op("arith.add", [after.op("arith.mul", [n2, three], [I64]), one_], [I64])
        after.op("scf.yield", [after.op("arith.select", [even, half, up], [I64]),
                               after.op("arith.add", [k2, one_], [I64])])
        nf, kf = b.op("scf.while", [n0, b.i64(0)], [I64, I64], [before.block, after.block])
        for j, v in enumerate((nf, kf)):
            b.store(ot, [j], b.op("tile.full", [v], [TileType(dt.int64, (1,))], value=0))

    run([ot, n0], body, {"o": o, "n": start})
    np.testing.assert_array_equal(o, [1, steps])


# -- errors -------------------------------------------------------------------------------------

def test_unknown_op_is_an_internal_error():
    with pytest.raises(InternalError, match="tile.frobnicate"):
        run([], lambda b: b.op("tile.frobnicate", [], [TileType(dt.float32, (1,))]), {})


def test_result_shape_mismatch_is_an_internal_error():
    with pytest.raises(InternalError, match="shape"):
        run([], lambda b: b.op("tile.arange", [], [TileType(dt.int32, (4,))], start=0, end=5),
            {})


def test_missing_and_mistyped_arguments():
    t = tensor("t", dt.float32, 1)
    with pytest.raises(ValueError, match="'t'"):
        run([t], lambda b, t: None, {})
    with pytest.raises(TypeError, match="'t'"):
        run([t], lambda b, t: None, {"t": np.zeros(2, np.float64)})
