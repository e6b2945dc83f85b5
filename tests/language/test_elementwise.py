"""Elementwise ops, table-driven: every unary and binary op on every dtype it supports, in
every operand form (tile–tile, tile–Python number, number–tile, tile–runtime scalar,
scalar–tile) and with numpy broadcasting between (M, 1), (1, N), (M, N) and 1-D tiles.

Each kernel runs compiled and in the reference interpreter (the definition of the op); the two
must agree tightly, and both must agree with an independent numpy reference.

Tolerances (compiled vs interpreter, and vs numpy):
- ints and bools: exact. Floats: exact for neg, abs, relu, sqrt, rsqrt, reciprocal, floor,
  ceil, + - * / // % maximum minimum clamp where and comparisons (IEEE-exact or computed the
  same way on both sides; half types are computed in float32 and rounded once).
- transcendental ops (exp exp2 log log2 tanh sigmoid gelu erf pow) are not correctly rounded
  in either implementation: float32 within rtol 1e-5 + atol 1e-6; float16/bfloat16 within one
  ulp of the dtype (the float32 error is far below a half ulp, so only the final rounding can
  differ).
- sin/cos reduce the argument with a float32 multiple of pi (and cos adds pi/2 in float32
  first), so their absolute error grows like |x| * 2**-23; they are tested on |x| < 100 with
  atol 1e-6 + |x| * 2**-22 (about 2.4e-5 at |x| = 100) on top of the limits above.

int64 is not among the compiled dtypes: A2/A3's vector unit has no 64-bit arithmetic, so the NPU
target refuses int64 tiles with NotOnChip (``test_int64_tiles_are_refused``).
"""
import math
import zlib

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.errors import CompilationError, NotOnChip

from .utils import (FLOATS, HALF, TILE_ALL, TILE_INTS, TILE_INTS_BOOL, TILE_NUMERIC,
                    assert_close, assert_exact, assert_ulp, compute_dtype, is_float, npd, pld,
                    rand, run_both, to_dtype, weak)

M, N = 4, 16          # tile shape of most kernels


# -- kernels -----------------------------------------------------------------------------------

@pypto.jit
def unary_kernel(x, out, M: pl.constexpr, N: pl.constexpr, OP: pl.constexpr, RD: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(M, N))
    if OP == "neg":
        r = -t
    elif OP == "invert":
        r = ~t
    else:
        r = getattr(pl, OP)(t)
    pl.static_assert(r.dtype == RD, "unexpected result dtype")
    pl.store(out, offsets=(0, 0), value=r)


@pypto.jit
def unary_1d_kernel(x, out, N: pl.constexpr, OP: pl.constexpr):
    t = pl.load(x, offsets=(0,), shape=(N,))
    if OP == "neg":
        r = -t
    else:
        r = getattr(pl, OP)(t)
    pl.store(out, offsets=(0,), value=r)


@pypto.jit
def binop(a, b, OP: pl.constexpr):
    """``a OP b`` for an op name of the table below (inlined into the calling kernel)."""
    if OP == "add":
        r = a + b
    elif OP == "sub":
        r = a - b
    elif OP == "mul":
        r = a * b
    elif OP == "truediv":
        r = a / b
    elif OP == "floordiv":
        r = a // b
    elif OP == "mod":
        r = a % b
    elif OP == "pow":
        r = a ** b
    elif OP == "maximum":
        r = pl.maximum(a, b)
    elif OP == "minimum":
        r = pl.minimum(a, b)
    elif OP == "lt":
        r = a < b
    elif OP == "le":
        r = a <= b
    elif OP == "gt":
        r = a > b
    elif OP == "ge":
        r = a >= b
    elif OP == "eq":
        r = a == b
    elif OP == "ne":
        r = a != b
    elif OP == "and":
        r = a & b
    elif OP == "or":
        r = a | b
    elif OP == "xor":
        r = a ^ b
    elif OP == "shl":
        r = a << b
    elif OP == "shr":
        r = a >> b
    else:
        pl.static_assert(False, "unknown op")
    return r


@pypto.jit
def binary_forms_kernel(x, y, s, o_tt, o_tp, o_pt, o_ts, o_st, M: pl.constexpr,
                        N: pl.constexpr, OP: pl.constexpr, PY: pl.constexpr,
                        RDS: pl.constexpr, FORMS: pl.constexpr):
    """Up to five operand forms of one op: tile–tile, tile–number, number–tile, tile–runtime
    scalar, runtime scalar–tile (those named in FORMS; the other outputs are left alone).
    RDS are the expected result dtypes, checked at compile time."""
    a = pl.load(x, offsets=(0, 0), shape=(M, N))
    b = pl.load(y, offsets=(0, 0), shape=(M, N))
    if "tt" in FORMS:
        r = binop(a, b, OP)
        pl.static_assert(r.dtype == RDS[0], "tile-tile result dtype")
        pl.store(o_tt, offsets=(0, 0), value=r)
    if "tp" in FORMS:
        r = binop(a, PY, OP)
        pl.static_assert(r.dtype == RDS[1], "tile-number result dtype")
        pl.store(o_tp, offsets=(0, 0), value=r)
    if "pt" in FORMS:
        r = binop(PY, b, OP)
        pl.static_assert(r.dtype == RDS[2], "number-tile result dtype")
        pl.store(o_pt, offsets=(0, 0), value=r)
    if "ts" in FORMS:
        r = binop(a, s, OP)
        pl.static_assert(r.dtype == RDS[3], "tile-scalar result dtype")
        pl.store(o_ts, offsets=(0, 0), value=r)
    if "st" in FORMS:
        r = binop(s, b, OP)
        pl.static_assert(r.dtype == RDS[4], "scalar-tile result dtype")
        pl.store(o_st, offsets=(0, 0), value=r)


@pypto.jit
def binary_bcast_kernel(x, xc, yr, y1, o0, o1, o2, o3, o4, M: pl.constexpr, N: pl.constexpr,
                        OP: pl.constexpr):
    """(M,1)⊕(1,N), (M,N)⊕(1,N), (M,1)⊕(M,N), (N,)⊕(M,1), (M,N)⊕(N,)."""
    a = pl.load(x, offsets=(0, 0), shape=(M, N))
    col = pl.load(xc, offsets=(0, 0), shape=(M, 1))
    row = pl.load(yr, offsets=(0, 0), shape=(1, N))
    vec = pl.load(y1, offsets=(0,), shape=(N,))
    pl.store(o0, offsets=(0, 0), value=binop(col, row, OP))
    pl.store(o1, offsets=(0, 0), value=binop(a, row, OP))
    pl.store(o2, offsets=(0, 0), value=binop(col, a, OP))
    pl.store(o3, offsets=(0, 0), value=binop(vec, col, OP))
    pl.store(o4, offsets=(0, 0), value=binop(a, vec, OP))


@pypto.jit
def clamp_kernel(x, lo, hi, slo, shi, o_tiles, o_nums, o_scalars, o_mixed, M: pl.constexpr,
                 N: pl.constexpr, LO: pl.constexpr, HI: pl.constexpr,
                 SLICE_ROW: pl.constexpr = True):
    a = pl.load(x, offsets=(0, 0), shape=(M, N))
    tlo = pl.load(lo, offsets=(0, 0), shape=(M, N))
    thi = pl.load(hi, offsets=(0, 0), shape=(M, N))
    pl.store(o_tiles, offsets=(0, 0), value=pl.clamp(a, tlo, thi))
    pl.store(o_nums, offsets=(0, 0), value=pl.clamp(a, LO, HI))
    pl.store(o_scalars, offsets=(0, 0), value=pl.clamp(a, slo, shi))
    # the (1, N) bound: a slice of thi, or (8-bit tiles, which A2/A3 cannot slice) a load
    row = thi[0:1, :] if SLICE_ROW else pl.load(hi, offsets=(0, 0), shape=(1, N))
    pl.store(o_mixed, offsets=(0, 0), value=pl.clamp(a, LO, row))


@pypto.jit
def where_kernel(c, x, y, cc, yr, o0, o1, o2, o3, o4, M: pl.constexpr, N: pl.constexpr,
                 PY: pl.constexpr, RD: pl.constexpr):
    cond = pl.load(c, offsets=(0, 0), shape=(M, N))
    a = pl.load(x, offsets=(0, 0), shape=(M, N))
    b = pl.load(y, offsets=(0, 0), shape=(M, N))
    ccol = pl.load(cc, offsets=(0, 0), shape=(M, 1))
    brow = pl.load(yr, offsets=(0, 0), shape=(1, N))
    r0 = pl.where(cond, a, b)
    r1 = pl.where(cond, a, PY)
    r2 = pl.where(cond, PY, b)
    r3 = pl.where(ccol, a, brow)
    r4 = pl.where(a, a, b)                 # a non-bool condition means != 0
    pl.static_assert(r0.dtype == RD, "where dtype")
    pl.static_assert(r1.dtype == RD, "where dtype (tile, number)")
    pl.static_assert(r2.dtype == RD, "where dtype (number, tile)")
    pl.store(o0, offsets=(0, 0), value=r0)
    pl.store(o1, offsets=(0, 0), value=r1)
    pl.store(o2, offsets=(0, 0), value=r2)
    pl.store(o3, offsets=(0, 0), value=r3)
    pl.store(o4, offsets=(0, 0), value=r4)


# -- unary ops ---------------------------------------------------------------------------------

def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _gelu(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


# op -> (dtypes, (lo, hi) input range, numpy reference, "exact" | "approx" | "trig").
# "exact" references run in the op's compute dtype (IEEE-exact or the same two roundings);
# the others in float64.
UNARY = {
    "neg": (TILE_NUMERIC, (-50, 50), np.negative, "exact"),
    "abs": (TILE_NUMERIC, (-50, 50), np.abs, "exact"),
    "relu": (TILE_NUMERIC, (-50, 50), lambda x: np.maximum(x, np.zeros_like(x)), "exact"),
    "invert": (TILE_INTS_BOOL, (None, None), np.invert, "exact"),
    "exp": (TILE_ALL, (-10, 10), np.exp, "approx"),
    "exp2": (TILE_ALL, (-14, 14), np.exp2, "approx"),
    "log": (TILE_ALL, (0.01, 100), np.log, "approx"),
    "log2": (TILE_ALL, (0.01, 100), np.log2, "approx"),
    "sqrt": (TILE_ALL, (0, 100), np.sqrt, "exact"),
    "rsqrt": (TILE_ALL, (0.01, 100), lambda x: np.ones_like(x) / np.sqrt(x), "exact"),
    "reciprocal": (TILE_ALL, (-100, 100), lambda x: np.ones_like(x) / x, "exact"),
    "sin": (TILE_ALL, (-99, 99), np.sin, "trig"),
    "cos": (TILE_ALL, (-99, 99), np.cos, "trig"),
    "tanh": (TILE_ALL, (-10, 10), np.tanh, "approx"),
    "sigmoid": (TILE_ALL, (-20, 20), lambda x: 1 / (1 + np.exp(-x)), "approx"),
    "gelu": (TILE_ALL, (-8, 8), _gelu, "approx"),
    "erf": (TILE_ALL, (-4, 4), _erf, "approx"),
    "floor": (TILE_ALL, (-100, 100), np.floor, "exact"),
    "ceil": (TILE_ALL, (-100, 100), np.ceil, "exact"),
}
FLOAT_ONLY_UNARY = [op for op, (d, *_) in UNARY.items() if d is TILE_ALL]


def unary_result(op, name):
    return "float32" if op in FLOAT_ONLY_UNARY and not is_float(name) else name


def unary_input(rng, op, name, shape=(M, N)):
    lo, hi = UNARY[op][1]
    if op in ("neg", "abs", "relu") and not is_float(name):
        lo = hi = None                         # the full range: wrapping, unsigned values
    x = rand(rng, shape, name, lo=lo, hi=hi)
    if is_float(name) and op in ("floor", "ceil"):
        x.flat[:6] = np.array([0.5, -0.5, 1.5, -2.5, 3.0, -0.0], np.float32).astype(npd(name))
    if op == "reciprocal":
        x = np.where(x == 0, np.ones_like(x), x)
    return x


def unary_reference(op, x, rname):
    ref, kind = UNARY[op][2], UNARY[op][3]
    with np.errstate(all="ignore"):          # log(0) = -inf, 1/0 = inf are intended
        if kind == "exact":
            return to_dtype(ref(x.astype(compute_dtype(rname))), rname)
        return to_dtype(ref(x.astype(np.float64)), rname)


def check_unary(op, x, got, interp, rname):
    kind = UNARY[op][3]
    want = unary_reference(op, x, rname)
    if kind == "exact":
        assert_exact(got, interp, f"{op} compiled vs interpreter", x)
        assert_exact(got, want, f"{op} vs numpy", x)
        return
    atol = 1e-6
    if kind == "trig":
        atol = 1e-6 + np.abs(x.astype(np.float64)) * 2.0 ** -22
    for other, what in ((interp, "interpreter"), (want, "numpy")):
        if rname in HALF:
            assert_ulp(got, other, 1, f"{op} compiled vs {what}", x, atol=atol)
        else:
            assert_close(got, other, 1e-5, atol, f"{op} compiled vs {what}", x)



def _default_unary(op, name):
    """Int and bool inputs of float-only ops are converted to float32 before the op; that
    conversion is checked on every int dtype for exp and sqrt, on int32 for the others (the
    rest of the cross product is slow)."""
    return is_float(name) or op not in FLOAT_ONLY_UNARY or name == "int32" or \
        op in ("exp", "sqrt")


def _unary_marks(op, name):
    return () if _default_unary(op, name) else pytest.mark.slow


UNARY_CASES = [pytest.param(op, d, id=f"{op}-{d}", marks=_unary_marks(op, d))
               for op, (dtypes, *_) in UNARY.items() for d in dtypes]


@pytest.mark.parametrize("op,name", UNARY_CASES)
def test_unary(op, name):
    rng = np.random.default_rng(zlib.crc32(f"{op}-{name}".encode()))
    x = unary_input(rng, op, name)
    rname = unary_result(op, name)
    got, interp = run_both(unary_kernel, (1,), {"x": x, "out": np.zeros((M, N), npd(rname))},
                           M=M, N=N, OP=op, RD=pld(rname))
    check_unary(op, x, got["out"], interp["out"], rname)


@pytest.mark.parametrize("op", ["neg", "exp", "sqrt", "sin"])
def test_unary_1d_partial_tile(op):
    """A 1-D tile larger than the tensor: only the elements inside are read and written."""
    rng = np.random.default_rng(3)
    x = unary_input(rng, op, "float32", shape=(45,))
    out = np.full(45, -7.0, np.float32)
    got, interp = run_both(unary_1d_kernel, (1,), {"x": x, "out": out}, N=64, OP=op)
    check_unary(op, x, got["out"], interp["out"], "float32")


@pytest.mark.parametrize("op", ["neg", "abs", "relu", "exp", "log", "sqrt", "rsqrt", "reciprocal",
                                "sin", "cos", "tanh", "sigmoid", "gelu", "erf", "floor", "ceil",
                                "exp2", "log2"])
def test_unary_float32_special_values(op):
    """inf, -inf, NaN, ±0, subnormals and huge values: compiled agrees with the interpreter
    (NaN where it gives NaN, the same infinities)."""
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-40, -1e-40, 3e38, -3e38, 1.0, -1.0,
                  88.0, 89.0, -104.0, 1e-30, 2.0] * 4, np.float32).reshape(M, N)
    got, interp = run_both(unary_kernel, (1,), {"x": x, "out": np.zeros((M, N), np.float32)},
                           M=M, N=N, OP=op, RD=pl.float32)
    g, i = got["out"], interp["out"]
    if UNARY[op][3] == "exact":
        # relu(-0.0): see test_relu_negative_zero
        assert_exact(g, i, f"{op} compiled vs interpreter", x, signed_zero=op != "relu")
    else:
        # the usual tolerance, infinities and NaNs matching exactly; sin/cos of huge
        # arguments are left to test_sin_cos_stay_in_range
        if op in ("sin", "cos"):
            big = np.abs(x) > 100
            assert np.all(np.isnan(g[np.isinf(x)]))
            g, i = np.where(big, 0, g).astype(np.float32), np.where(big, 0, i).astype(np.float32)
        assert_close(g, i, 1e-5, 1e-6, f"{op} compiled vs interpreter", x)


@pytest.mark.parametrize("op", ["sin", "cos"])
def test_sin_cos_stay_in_range(op):
    x = np.array([10.0 ** k for k in range(6, 38)] * 2, np.float32).reshape(M, N)
    x[1::2] *= -1
    got, interp = run_both(unary_kernel, (1,), {"x": x, "out": np.zeros((M, N), np.float32)},
                           M=M, N=N, OP=op, RD=pl.float32)
    assert np.all(np.abs(interp["out"]) <= 1)
    bad = np.abs(got["out"]) > 1
    assert not bad.any(), f"{op}({x[bad][:4]}) = {got['out'][bad][:4]}"


def test_relu_negative_zero():
    x = np.full((M, N), -0.0, np.float32)
    got, interp = run_both(unary_kernel, (1,), {"x": x, "out": np.ones((M, N), np.float32)},
                           M=M, N=N, OP="relu", RD=pl.float32)
    assert_exact(got["out"], interp["out"], "relu(-0.0) compiled vs interpreter")


def test_relu_unsigned_keeps_large_values():
    """uint8 values >= 128 are positive: relu leaves every uint8 value alone."""
    x = np.arange(M * N, dtype=np.int64).reshape(M, N).astype(np.uint8) * 4 + 3
    got, interp = run_both(unary_kernel, (1,), {"x": x, "out": np.zeros((M, N), np.uint8)},
                           M=M, N=N, OP="relu", RD=pl.uint8)
    assert_exact(interp["out"], x, "interpreter")
    assert_exact(got["out"], x, "relu uint8 compiled")


@pytest.mark.parametrize("op,name", [("neg", "bool"), ("abs", "bool"), ("relu", "bool"),
                                     ("invert", "float32"), ("invert", "float16")])
def test_unary_unsupported_dtype_rejected(op, name):
    x = np.zeros((M, N), npd(name))
    with pytest.raises(CompilationError, match="not supported on"):
        unary_kernel[(1,)](x, x.copy(), M=M, N=N, OP=op, RD=pld(name))


# -- binary ops --------------------------------------------------------------------------------

ARITH = ["add", "sub", "mul", "maximum", "minimum", "floordiv", "mod"]
TO_FLOAT = ["truediv", "pow"]
COMPARE = ["lt", "le", "gt", "ge", "eq", "ne"]
BITWISE = ["and", "or", "xor"]
SHIFTS = ["shl", "shr"]

BINARY_DTYPES = {**{op: TILE_NUMERIC for op in ARITH},
                 **{op: TILE_ALL for op in TO_FLOAT + COMPARE},
                 **{op: TILE_INTS_BOOL for op in BITWISE}, **{op: TILE_INTS for op in SHIFTS}}

NP_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
    "floordiv": np.floor_divide, "mod": np.mod, "pow": np.power, "maximum": np.maximum,
    "minimum": np.minimum, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal, "and": np.bitwise_and,
    "or": np.bitwise_or, "xor": np.bitwise_xor,
}


def _np_shift(op, x, n):
    """The documented shift rule: counts >= bits give 0 (<<) or the sign fill (>>); negative
    counts are 0."""
    x = np.asarray(x)
    bits = x.dtype.itemsize * 8
    n = np.maximum(np.asarray(n, np.int64), 0)
    big = n >= bits
    k = np.minimum(n, bits - 1).astype(x.dtype)
    if op == "shl":
        return np.where(big, np.zeros_like(x), np.left_shift(x, k))
    r = np.right_shift(x, k)
    return r if x.dtype.kind == "i" else np.where(big, np.zeros_like(x), r)


def binary_reference(op, x, y, rname):
    """numpy on operands converted to the result's compute dtype (comparisons: to the promoted
    operand dtype), rounded to the result dtype."""
    x, y = np.asarray(x), np.asarray(y)
    if op in SHIFTS:
        return _np_shift(op, x.astype(npd(rname)), y)
    cd = compute_dtype(rname)
    with np.errstate(all="ignore"):
        r = NP_BINARY[op](x.astype(cd), y.astype(cd))
    return r if op in COMPARE else to_dtype(r, rname)


def operand_dtype(op, name):
    """Dtype both operands are converted to before the op."""
    if op in TO_FLOAT and not is_float(name):
        return "float32"
    return name


def binary_inputs(rng, op, name, shape=(M, N)):
    if op == "pow":
        if is_float(name):
            x = rand(rng, shape, name, lo=0.1, hi=8)
            y = rand(rng, shape, name, lo=-3, hi=3)
            ints = rng.random(shape) < 0.5          # integral exponents: negative bases too
            y = np.where(ints, np.round(y.astype(np.float32)) + 0.0, y.astype(np.float32))
            x = np.where(ints, -x.astype(np.float32), x.astype(np.float32))
            return x.astype(npd(name)), y.astype(npd(name))
        return rand(rng, shape, name, lo=-6, hi=6), rand(rng, shape, name, lo=0, hi=4)
    if op in SHIFTS:
        bits = npd(name).itemsize * 8
        return rand(rng, shape, name), rand(rng, shape, name, lo=-2, hi=bits + 2)
    nonzero = op in ("truediv", "floordiv", "mod")
    if is_float(name):
        return rand(rng, shape, name), rand(rng, shape, name, nonzero=nonzero)
    if op in ("floordiv", "mod"):
        y = rand(rng, shape, name, lo=-9, hi=9, nonzero=True)
        y.flat[:8] = rand(rng, 8, name, nonzero=True)      # large divisors too
        return rand(rng, shape, name), y
    return rand(rng, shape, name), rand(rng, shape, name, nonzero=nonzero)


def scalar_values(op, name):
    """(Python number, runtime scalar) used for the scalar forms of ``op`` on ``name`` tiles."""
    if name == "bool":
        return True, 3                        # a runtime bool is passed as an int
    if is_float(name):
        return (3.0, -2.0) if op == "pow" else (2.5, -1.75)
    if op in SHIFTS or op == "pow":
        return 3, 2
    return (3, 5) if name == "uint8" else (-3, 5)


def scalar_kind(v):
    return "bool" if isinstance(v, bool) else ("float" if isinstance(v, float) else "int")


def binary_result(op, operand):
    return "bool" if op in COMPARE else operand


def form_dtypes(op, name, py, s):
    """Operand dtypes of the five forms: tile–tile, tile–number, number–tile, tile–scalar,
    scalar–tile (the scalar is converted to the tile's weak dtype)."""
    tt = operand_dtype(op, name)
    tp = operand_dtype(op, weak(name, scalar_kind(py)))
    ts = operand_dtype(op, weak(name, scalar_kind(s)))
    return [tt, tp, tp, ts, ts]


def check_binary(op, got, interp, want, rname, what, inputs=None, signed_zero=True):
    """Exact against the interpreter and numpy, except pow (an exp/log decomposition)."""
    if op != "pow":
        assert_exact(got, interp, f"{what}: compiled vs interpreter", inputs, signed_zero)
        assert_exact(got, want, f"{what}: vs numpy", inputs, signed_zero)
        return
    for other, vs in ((interp, "interpreter"), (want, "numpy")):
        if rname in HALF:
            assert_ulp(got, other, 1, f"{what}: compiled vs {vs}", inputs)
        else:
            assert_close(got, other, 1e-5, 1e-6, f"{what}: compiled vs {vs}", inputs)


def full(v, name, shape=(M, N)):
    """A Python number as the kernel sees it in a tile of dtype ``name`` (runtime floats are
    float32 scalars first)."""
    v = np.float32(v) if isinstance(v, float) else v
    return np.full(shape, v).astype(npd(name))


ALL_FORMS = ("tt", "tp", "pt", "ts", "st")

# floordiv, mod and pow are decomposed by legalisation into ~15 ops each, which makes their
# five-form kernels slow to compile (~1 s). By default they get all forms on a few dtypes and
# the tile–tile form on the others; the full cross product is marked slow.
FULL_FORMS_DTYPES = {"floordiv": ("float32", "int32", "float16", "uint8"),
                     "mod": ("float32", "int8", "bfloat16", "int32"),
                     "pow": ("float32", "int32", "bfloat16")}


def default_forms(op, name):
    if op in FULL_FORMS_DTYPES and name not in FULL_FORMS_DTYPES[op]:
        return ("tt",)
    return ALL_FORMS


def run_forms(op, name, x, y, py=None, s=None, forms=None):
    d_py, d_s = scalar_values(op, name)
    py = d_py if py is None else py
    s = d_s if s is None else s
    forms = default_forms(op, name) if forms is None else forms
    operands = form_dtypes(op, name, py, s)
    results = [binary_result(op, d) for d in operands]
    outs = {f"o_{k}": np.zeros((M, N), npd(r)) for k, r in zip(ALL_FORMS, results)}
    got, interp = run_both(binary_forms_kernel, (1,), {"x": x, "y": y, **outs}, s=s, M=M, N=N,
                           OP=op, PY=py, RDS=tuple(pld(r) for r in results), FORMS=forms)
    return got, interp, operands, results, py, s


def check_forms(op, name, x, y, forms=None, signed_zero=True):
    got, interp, operands, results, py, s = run_forms(op, name, x, y, forms=forms)
    forms = default_forms(op, name) if forms is None else forms
    args = {"tt": (x, y), "tp": (x, py), "pt": (py, y), "ts": (x, s), "st": (s, y)}
    for (form, (lhs, rhs)), operand, rname in zip(args.items(), operands, results):
        if form not in forms:
            continue
        lhs, rhs = (full(v, operand) if not isinstance(v, np.ndarray) else v.astype(npd(operand))
                    for v in (lhs, rhs))
        want = binary_reference(op, lhs, rhs, operand)
        check_binary(op, got[f"o_{form}"], interp[f"o_{form}"], want, rname,
                     f"{op} {name} {form}", (lhs, rhs), signed_zero)


# float // and % give -0.0 where numpy gives +0.0 (see test_float_floordiv_mod_zero_sign);
# the sign of a zero result is checked there only
SIGNED_ZERO = {("floordiv", d): False for d in FLOATS} | {("mod", d): False for d in FLOATS}

# lt and eq run on every dtype; the other predicates share their lowering (one rule per
# signed/unsigned/float kind), so by default they run on one dtype of each kind and width
# class, the rest being slow.
COMPARE_SUBSET = ("bool", "int8", "uint8", "int32", "bfloat16", "float32")


def _binary_marks(op, name):
    if op in ("le", "gt", "ge", "ne") and name not in COMPARE_SUBSET:
        return pytest.mark.slow
    return ()


BINARY_CASES = [pytest.param(op, d, id=f"{op}-{d}", marks=_binary_marks(op, d))
                for op, dtypes in BINARY_DTYPES.items() for d in dtypes]


@pytest.mark.parametrize("op,name", BINARY_CASES)
def test_binary(op, name):
    rng = np.random.default_rng(zlib.crc32(f"{op}-{name}".encode()))
    x, y = binary_inputs(rng, op, name)
    check_forms(op, name, x, y, signed_zero=SIGNED_ZERO.get((op, name), True))


SLOW_CASES = [(op, d) for op in FULL_FORMS_DTYPES for d in BINARY_DTYPES[op]
              if default_forms(op, d) != ALL_FORMS]


@pytest.mark.slow
@pytest.mark.parametrize("op,name", SLOW_CASES, ids=[f"{o}-{d}" for o, d in SLOW_CASES])
def test_binary_all_forms(op, name):
    rng = np.random.default_rng(zlib.crc32(f"{op}-{name}".encode()))
    x, y = binary_inputs(rng, op, name)
    check_forms(op, name, x, y, forms=ALL_FORMS, signed_zero=SIGNED_ZERO.get((op, name), True))


@pytest.mark.parametrize("name", TILE_INTS)
@pytest.mark.parametrize("op", ["floordiv", "mod"])
def test_integer_division_by_zero_is_zero(op, name):
    """x // 0 and x % 0 are 0 for ints, whatever x (docs/tile_ir.md); reuses test_binary's
    kernel with zeros among the divisors."""
    rng = np.random.default_rng(5)
    x = rand(rng, (M, N), name)
    y = rand(rng, (M, N), name, lo=-4, hi=4)
    y.flat[::3] = 0
    got, interp, *_ = run_forms(op, name, x, y)
    for form in ("tt", "pt", "st"):      # the forms whose divisor is the tile y
        if form not in default_forms(op, name):
            continue
        out = f"o_{form}"
        assert_exact(got[out], interp[out], f"{out} compiled vs interpreter")
        assert np.all(got[out][y == 0] == 0), (op, name, out, got[out][y == 0])
    ok = y != 0
    with np.errstate(all="ignore"):
        assert_exact(got["o_tt"][ok], NP_BINARY[op](x, np.where(ok, y, 1))[ok], "nonzero y")


def test_integer_division_by_zero_scalar():
    """A zero divisor as a Python number and as a runtime scalar."""
    x = rand(np.random.default_rng(6), (M, N), "int32")
    y = np.ones((M, N), np.int32)
    for op in ("floordiv", "mod"):
        got, interp, *_ = run_forms(op, "int32", x, y, py=0, s=0, forms=("tp", "ts"))
        for out in ("o_tp", "o_ts"):
            assert_exact(got[out], interp[out], f"{op} {out}")
            assert_exact(got[out], np.zeros((M, N), np.int32), f"{op} {out}")


FLOAT_SPECIAL_OPS = ARITH + TO_FLOAT + COMPARE


@pytest.mark.parametrize("op", FLOAT_SPECIAL_OPS)
def test_binary_float32_special_values(op):
    """inf, -inf, NaN and ±0 against every other value, compiled vs interpreter (reuses the
    kernel of test_binary[op-float32])."""
    vals = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1.0, -1.0, 2.5], np.float32)
    xx, yy = np.meshgrid(vals, vals)
    x, y = xx.reshape(M, N), yy.reshape(M, N)
    got, interp, *_ = run_forms(op, "float32", x, y)
    g, i = got["o_tt"], interp["o_tt"]
    keep = np.ones((M, N), bool)
    if op in ("maximum", "minimum"):       # see test_maximum_minimum_nan_from_either_side
        keep = ~np.isnan(y)
    if op == "pow":                        # see test_pow_special_cases
        keep = ~((np.abs(x) == 1) & ~np.isfinite(y)) & (x != -np.inf) & \
            ~((x == 0) & np.signbit(x))
    want = binary_reference(op, x, y, "float32")
    check_binary(op, g[keep], i[keep], want[keep], "float32", f"{op} specials", x[keep],
                 signed_zero=op not in ("floordiv", "mod"))


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_minimum_nan_from_either_side(op):
    x = np.tile(np.array([1.0, np.nan, -2.0, np.nan], np.float32), M * N // 4).reshape(M, N)
    y = np.tile(np.array([np.nan, 1.0, np.nan, np.nan], np.float32), M * N // 4).reshape(M, N)
    got, interp, *_ = run_forms(op, "float32", x, y)
    assert np.isnan(interp["o_tt"]).all()
    assert_exact(got["o_tt"], interp["o_tt"], f"{op} compiled vs interpreter", (x, y))


def test_float_floordiv_mod_zero_sign():
    x = np.tile(np.array([-0.5, 0.5, -5.0, 5.0], np.float32), M * N // 4).reshape(M, N)
    y = np.tile(np.array([-3.0, 3.0, 2.5, -2.5], np.float32), M * N // 4).reshape(M, N)
    for op in ("floordiv", "mod"):
        got, interp, *_ = run_forms(op, "float32", x, y)
        assert_exact(interp["o_tt"], NP_BINARY[op](x, y), "interpreter is numpy")
        assert_exact(got["o_tt"], interp["o_tt"], f"{op} compiled vs interpreter", (x, y))


def test_pow_special_cases():
    x = np.tile(np.array([1.0, 1.0, 1.0, -1.0, -1.0, -np.inf, -np.inf, -np.inf, -0.0, -0.0,
                          2.0], np.float32), 6)[:M * N].reshape(M, N)
    y = np.tile(np.array([np.nan, np.inf, -np.inf, np.inf, -np.inf, 2.5, -2.5, np.inf, 3.0,
                          -5.0, 2.0], np.float32), 6)[:M * N].reshape(M, N)
    got, interp, *_ = run_forms("pow", "float32", x, y)
    with np.errstate(divide="ignore"):
        assert_exact(interp["o_tt"], np.power(x, y), "interpreter is numpy")
    assert_exact(got["o_tt"], interp["o_tt"], "pow compiled vs interpreter", (x, y))


# -- broadcasting ------------------------------------------------------------------------------

# Broadcasting is made explicit by the frontend (tile.broadcast / reshape before the op), so the
# default set covers each dtype but uint8 once and the operand orders of non-commutative ops;
# kernels with five broadcast forms take ~0.4 s to compile, so the full op x dtype table is
# slow.
BCAST_DEFAULT = [("add", d) for d in ("float32", "bfloat16", "int8", "int32")] + \
    [("and", "bool"), ("sub", "float32"), ("truediv", "int8"), ("lt", "float16"),
     ("shl", "int32"), ("floordiv", "int16")]
BCAST_CASES = [pytest.param(op, d, id=f"{op}-{d}",
                            marks=() if (op, d) in BCAST_DEFAULT else pytest.mark.slow)
               for op, dtypes in BINARY_DTYPES.items() for d in dtypes]


@pytest.mark.parametrize("op,name", BCAST_CASES)
def test_binary_broadcasting(op, name):
    rng = np.random.default_rng(zlib.crc32(f"{op}-{name}-b".encode()))
    x, y = binary_inputs(rng, op, name)
    xc, yr, y1 = x[:, :1].copy(), y[:1, :].copy(), y[1, :].copy()
    if op in SHIFTS:          # the broadcast operand must hold shift counts
        xc = rand(rng, (M, 1), name, lo=0, hi=npd(name).itemsize * 8)
    operand = operand_dtype(op, name)
    rname = binary_result(op, operand)
    outs = {f"o{k}": np.zeros((M, N), npd(rname)) for k in range(5)}
    got, interp = run_both(binary_bcast_kernel, (1,), {"x": x, "xc": xc, "yr": yr, "y1": y1,
                                                        **outs}, M=M, N=N, OP=op)
    cases = {"o0": (xc, yr), "o1": (x, yr), "o2": (xc, x), "o3": (y1, xc), "o4": (x, y1)}
    for key, (lhs, rhs) in cases.items():
        lhs, rhs = np.broadcast_arrays(lhs, rhs)
        conv = (lambda v: v) if op in SHIFTS else (lambda v: v.astype(npd(operand)))
        want = binary_reference(op, conv(lhs), conv(rhs), operand)
        check_binary(op, got[key], interp[key], want, rname, f"{op} {name} broadcast {key}",
                     signed_zero=SIGNED_ZERO.get((op, name), True))


@pypto.jit
def mismatched_shapes_kernel(x, out, M: pl.constexpr, N: pl.constexpr):
    a = pl.load(x, offsets=(0, 0), shape=(M, N))
    b = pl.load(x, offsets=(0, 0), shape=(M + 1, N))
    pl.store(out, offsets=(0, 0), value=a + b)


def test_incompatible_broadcast_rejected():
    x = np.zeros((M + 1, N), np.float32)
    with pytest.raises(CompilationError, match="cannot be broadcast"):
        mismatched_shapes_kernel[(1,)](x, x, M=M, N=N)


# -- clamp and where ---------------------------------------------------------------------------

def _clamp_args(name):
    if name == "uint8":
        return 20, 200, 50, 100
    if is_float(name):
        return -10.5, 20.25, -3.5, 7.0
    return -20, 30, -5, 9


@pytest.mark.parametrize("name", TILE_NUMERIC)
def test_clamp(name):
    rng = np.random.default_rng(zlib.crc32(f"clamp-{name}".encode()))
    x = rand(rng, (M, N), name, specials=True) if is_float(name) else rand(rng, (M, N), name)
    a, b = rand(rng, (M, N), name), rand(rng, (M, N), name)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    LO, HI, slo, shi = _clamp_args(name)
    outs = {k: np.zeros((M, N), npd(name)) for k in ("o_tiles", "o_nums", "o_scalars",
                                                       "o_mixed")}
    got, interp = run_both(clamp_kernel, (1,), {"x": x, "lo": lo, "hi": hi, **outs}, slo=slo,
                           shi=shi, M=M, N=N, LO=LO, HI=HI,
                           SLICE_ROW=npd(name).itemsize > 1)
    cd = compute_dtype(name)

    def ref(lo_, hi_):
        lo_ = np.broadcast_to(np.asarray(lo_).astype(npd(name)), x.shape).astype(cd)
        hi_ = np.broadcast_to(np.asarray(hi_).astype(npd(name)), x.shape).astype(cd)
        return to_dtype(np.minimum(np.maximum(x.astype(cd), lo_), hi_), name)

    wants = {"o_tiles": ref(lo, hi), "o_nums": ref(LO, HI),
             "o_scalars": ref(np.float32(slo) if is_float(name) else slo,
                              np.float32(shi) if is_float(name) else shi),
             "o_mixed": ref(LO, hi[0:1, :])}
    for key, want in wants.items():
        assert_exact(got[key], interp[key], f"clamp {key}: compiled vs interpreter", x)
        assert_exact(got[key], want, f"clamp {key}: vs numpy", x)


def _where_py(name):
    return True if name == "bool" else (2.5 if is_float(name) else 7)


@pytest.mark.parametrize("name", TILE_ALL)
def test_where(name):
    rng = np.random.default_rng(zlib.crc32(f"where-{name}".encode()))
    c = rand(rng, (M, N), "bool")
    x = rand(rng, (M, N), name, specials=is_float(name))
    y = rand(rng, (M, N), name)
    x.flat[:5] = 0
    cc, yr = rand(rng, (M, 1), "bool"), y[:1].copy()
    py = _where_py(name)
    outs = {f"o{k}": np.zeros((M, N), npd(name)) for k in range(5)}
    got, interp = run_both(where_kernel, (1,), {"c": c, "x": x, "y": y, "cc": cc, "yr": yr,
                                                 **outs}, M=M, N=N, PY=py, RD=pld(name))
    pyv = np.full((M, N), py).astype(npd(name))
    wants = {"o0": np.where(c, x, y), "o1": np.where(c, x, pyv), "o2": np.where(c, pyv, y),
             "o3": np.where(cc, x, np.broadcast_to(yr, (M, N))),
             "o4": np.where(x.astype(np.float32) != 0 if is_float(name) else x != 0, x, y)}
    for key, want in wants.items():
        assert_exact(got[key], interp[key], f"where {key}: compiled vs interpreter")
        assert_exact(got[key], want, f"where {key}: vs numpy")


@pypto.jit
def where_by_scalar_kernel(x, yr, o, n, M: pl.constexpr, N: pl.constexpr):
    a = pl.load(x, offsets=(0, 0), shape=(M, N))
    brow = pl.load(yr, offsets=(0, 0), shape=(1, N))
    pl.store(o, offsets=(0, 0), value=pl.where(n > 0, a, brow))


@pytest.mark.parametrize("n", [3, 1, -2])          # 1 is folded to a constant when compiled
@pytest.mark.parametrize("name", ["float32", "float16", "int32", "int8"])
def test_where_by_a_runtime_scalar_picks_a_whole_tile(name, n):
    """A runtime scalar condition chooses between tiles for the whole tile (the row tile
    broadcast): it used to be refused, with advice (`x if cond else y`) that tiles refuse."""
    rng = np.random.default_rng(zlib.crc32(f"where-scalar-{name}".encode()))
    x, yr = rand(rng, (M, N), name), rand(rng, (1, N), name)
    got, interp = run_both(where_by_scalar_kernel, (1,),
                           {"x": x, "yr": yr, "o": np.zeros((M, N), npd(name))}, n=n, M=M, N=N)
    want = x if n > 0 else np.broadcast_to(yr, (M, N))
    assert_exact(got["o"], interp["o"], "compiled vs interpreter")
    assert_exact(got["o"], want, "vs numpy")


# -- unsupported combinations ------------------------------------------------------------------

@pytest.mark.parametrize("op,name", [("add", "bool"), ("floordiv", "bool"), ("maximum", "bool"),
                                     ("and", "float32"), ("xor", "bfloat16"),
                                     ("shl", "float16"), ("shr", "float32"), ("shl", "bool"),
                                     ("shr", "bool")])
def test_binary_unsupported_dtype_rejected(op, name):
    """Shifts take ints only (docs/language.md; docs/tile_ir.md still says "int or bool")."""
    x = np.zeros((M, N), npd(name))
    py, s = scalar_values(op, name)
    with pytest.raises(CompilationError, match="not supported on"):
        binary_forms_kernel[(1,)](x, x, s, *[x.copy() for _ in range(5)], M=M, N=N, OP=op,
                                  PY=py, RDS=(pld(name),) * 5, FORMS=("tt",))


# -- what the NPU target refuses -----------------------------------------------------------------

@pytest.mark.parametrize("form", ["unary", "binary", "where"])
def test_int64_tiles_are_refused(form):
    """A2/A3's vector unit has no 64-bit arithmetic: an op on int64 tiles is refused at compile
    time, at the op's line (the interpreter still defines it)."""
    x = rand(np.random.default_rng(1), (M, N), "int64", lo=-50, hi=50)
    with pytest.raises(NotOnChip, match="int64 tile") as got:
        if form == "unary":
            unary_kernel[(1,)](x, x.copy(), M=M, N=N, OP="neg", RD=pl.int64)
        elif form == "binary":
            run_forms("add", "int64", x, x.copy(), forms=("tt",))
        else:
            c = np.zeros((M, N), bool)
            where_kernel[(1,)](c, x, x.copy(), np.zeros((M, 1), bool), x[:1].copy(),
                               *[x.copy() for _ in range(5)], M=M, N=N, PY=7, RD=pl.int64)
    assert "A2/A3" in str(got.value) and got.value.loc is not None


@pytest.mark.parametrize("name", ["int8", "uint8"])
def test_slice_of_an_8bit_tile_is_refused(name):
    """clamp with a bound sliced from an 8-bit tile: A2/A3 copies UB tiles of 16- and 32-bit
    elements only, so the slice is refused (test_clamp loads the row instead)."""
    x = np.zeros((M, N), npd(name))
    outs = [np.zeros((M, N), npd(name)) for _ in range(4)]
    LO, HI, slo, shi = _clamp_args(name)
    with pytest.raises(NotOnChip, match=f"a slice of a {name} tile"):
        clamp_kernel[(1,)](x, x.copy(), x.copy(), slo, shi, *outs, M=M, N=N, LO=LO, HI=HI,
                           SLICE_ROW=True)
