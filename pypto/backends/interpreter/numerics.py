"""The numpy meaning of the IR's values: dtypes, the one conversion rule, the elementwise,
unary and reduction rules, and the part of a tile window inside a tensor.

A leaf of the interpreter (no ops, no execution), so that others who must agree with it -- the
cycle model's scalar evaluation, the sanitizer's windows -- import the rules without the
interpreter. Numerics follow the compiled backend (``backends/ascend/lowering_utils.py``):
half-width floats are computed in float32 and rounded once per op, integers wrap, float → int
truncates and saturates (or wraps from int32, as the chip's TCVT does for some pairs), integer
division by zero gives 0.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import InternalError
from ...compiler.ir import ScalarType, TensorType
from ...language import dtypes as dt
from ...target import WRAPPING_CONVERSIONS

# -- numerics: conversions -----------------------------------------------------------------------

_BY_NUMPY = {d.to_numpy(): d for d in dt.ALL if d.name not in dt.ML_DTYPES}
try:
    _BY_NUMPY.update({dt.BY_NAME[n].to_numpy(): dt.BY_NAME[n] for n in dt.ML_DTYPES})
except TypeError:  # pragma: no cover - no ml_dtypes
    pass

_HALF = (dt.float16, dt.bfloat16)

ROUNDINGS = {"rint": np.rint, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc}


def dtype_of(x) -> dt.dtype:
    """The PyPTO dtype of a numpy array or scalar (Python numbers go through numpy's defaults)."""
    npd = np.asarray(x).dtype
    d = _BY_NUMPY.get(npd)
    return d if d is not None else dt.from_any(npd)


def compute_dtype(d: dt.dtype) -> dt.dtype:
    """Half-width floats are computed in float32, as on the NPU; everything else in itself."""
    return dt.float32 if d in _HALF else d


def to_compute(x) -> np.ndarray:
    """``x`` as an array of its compute dtype (float16/bfloat16 widened exactly to float32)."""
    return convert(x, compute_dtype(dtype_of(x)))


def convert(x, dst: dt.dtype, rounding: str | None = None) -> np.ndarray:
    """The one conversion rule of the IR: floats round to nearest even, float → int truncates
    (or rounds as ``rounding`` says) and saturates with NaN → 0 (into int32 first, then
    keeping the low bits, for the chip's ``WRAPPING_CONVERSIONS``), ints wrap or extend, and
    anything → bool is ``!= 0``."""
    x = np.asarray(x)
    src = _BY_NUMPY.get(x.dtype) or dtype_of(x)
    if src is dst and rounding is None:     # the common case, before dtype's slower ==
        return x
    wraps = (src.name, dst.name) in WRAPPING_CONVERSIONS      # by the value's own dtype
    if rounding is not None and src.is_floating:
        if rounding not in ROUNDINGS:
            raise InternalError(f"unknown rounding mode {rounding!r}")
        x = ROUNDINGS[rounding](to_compute(x))
        src = dtype_of(x)
    if src == dst:
        return x
    if dst == dt.bool_:
        return to_compute(x) != 0
    if (dst == dt.bfloat16 or dst.storage_only) and src != dt.float32:
        # The backend reaches bfloat16 and float8 through float32 only; rounding twice is part
        # of the rule.
        x = convert(x, dt.float32)
    if src.is_floating and dst.is_int:
        if wraps:                                  # the chip's TCVT: int32, then its low bits
            return _float_to_int(x, dt.int32).astype(dst.to_numpy())
        return _float_to_int(x, dst)
    return x.astype(dst.to_numpy())


def _float_to_int(x: np.ndarray, dst: dt.dtype) -> np.ndarray:
    """Truncate toward zero, saturating at the target's range; NaN → 0 (``llvm.fptosi.sat``).
    numpy's own cast is undefined out of range, so the range test comes first, in float64 where
    the bounds -2**(b-1), 2**(b-1) and 2**b are exact."""
    npd = dst.to_numpy()
    f = np.asarray(x, dtype=np.float64)
    lo = -2.0 ** (dst.bits - 1) if dst.is_signed else 0.0
    hi_excl = 2.0 ** (dst.bits - 1) if dst.is_signed else 2.0 ** dst.bits
    inside = (f >= lo) & (f < hi_excl)          # False for NaN
    top = (1 << (dst.bits - 1 if dst.is_signed else dst.bits)) - 1    # int4 has no np.iinfo
    out = np.where(inside, f, 0.0).astype(npd)
    out = np.where(f >= hi_excl, npd.type(top), out)
    return np.where(f < lo, npd.type(int(lo)), out).astype(npd)


def to_type(value, ty, where: str = "value"):
    """A runtime value of IR type ``ty``: numpy scalar, array of the tile's dtype and shape, or
    the tensor itself. A tile of the wrong shape is an interpreter or compiler bug."""
    if isinstance(ty, TensorType):
        return value
    out = convert(value, ty.dtype)
    if isinstance(ty, ScalarType):
        if out.shape != ():
            raise InternalError(f"{where}: got an array of shape {out.shape} for a scalar")
        return out[()]
    if out.shape != tuple(ty.shape):
        raise InternalError(f"{where}: computed shape {out.shape}, but the IR says {ty}")
    return out


# -- numerics: elementwise rules on compute-dtype arrays -------------------------------------------

def _is_signed_int(x) -> bool:
    return dtype_of(x).is_signed


def _floordiv(x, y):
    """Python's ``//``; for ints ``x // 0`` is 0 and ``MIN // -1`` wraps to MIN, as the
    backend's ``safe_floordiv``."""
    if dtype_of(x).is_floating:
        return np.floor_divide(x, y)
    zero = y == 0
    q = np.floor_divide(x, np.where(zero, np.ones_like(y), y))
    if _is_signed_int(x):
        q = np.where(y == -1, np.negative(x), q)
    return np.where(zero, np.zeros_like(q), q)


def _mod(x, y):
    """Python's ``%`` (the divisor's sign); for ints ``x % 0`` is 0."""
    if dtype_of(x).is_floating:
        return np.mod(x, y)
    zero = y == 0
    r = np.mod(x, np.where(zero, np.ones_like(y), y))
    if _is_signed_int(x):
        r = np.where(y == -1, np.zeros_like(r), r)
    return np.where(zero, np.zeros_like(r), r)


def _pow(x, y):
    """Float power as numpy; integer power wraps, and a negative exponent gives the truncated
    quotient ``1 // x**-n``: 1 for x=1, ±1 for x=-1, 0 otherwise (x=0 included, as x // 0)."""
    if not dtype_of(x).is_int:
        return np.power(x, y)
    neg = y < 0
    p = np.power(x, np.where(neg, np.zeros_like(y), y))
    inv = np.where(x == 1, 1, 0)
    if _is_signed_int(x):
        inv = np.where(x == -1, np.where(y % 2 != 0, -1, 1), inv)
    return np.where(neg, inv.astype(p.dtype), p)


def _bits(x) -> int:
    return dtype_of(x).bits


def _shift_amount(n):
    """Negative counts are 0; the result is int64 so counts >= bits stay visible."""
    return np.maximum(np.asarray(n, dtype=np.int64), 0)


def _shl(x, n):
    """``x << n`` in x's dtype (wrapping); 0 once n >= bits."""
    bits = _bits(x)
    n = _shift_amount(n)
    big = n >= bits
    r = np.left_shift(x, np.where(big, 0, n).astype(x.dtype))
    return np.where(big, np.zeros_like(r), r)


def _shr(x, n):
    """``x >> n``: arithmetic for signed ints (n >= bits leaves the sign fill), logical for
    unsigned and bool (n >= bits gives 0)."""
    bits = _bits(x)
    n = _shift_amount(n)
    r = np.right_shift(x, np.minimum(n, bits - 1).astype(x.dtype))
    if _is_signed_int(x):
        return r
    return np.where(n >= bits, np.zeros_like(r), r)


BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "floordiv": _floordiv, "mod": _mod, "pow": _pow,
    "max": np.maximum, "min": np.minimum,   # NaN from either side propagates
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
    "shl": _shl, "shr": _shr,
}
SHIFTS = ("shl", "shr")
INT_ONLY = ("and", "or", "xor", "shl", "shr")
COMPARE = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
           "eq": np.equal, "ne": np.not_equal}


def apply_binary(name: str, x, y, result: dt.dtype):
    """One elementwise binary op. Arithmetic happens in the result's compute dtype (shift
    counts stay int64); comparisons happen on both operands' compute values."""
    if name in COMPARE:
        return COMPARE[name](to_compute(x), to_compute(y))
    fn = BINARY.get(name)
    if fn is None:
        raise InternalError(f"the interpreter has no binary op '{name}'")
    cd = compute_dtype(result)
    if name in INT_ONLY and cd.is_floating:
        raise InternalError(f"binary op '{name}' needs int or bool operands, not {cd}")
    return fn(convert(x, cd), convert(y, dt.int64 if name in SHIFTS else cd))


def _k(x, v):
    """The constant ``v`` in x's dtype, so float32 math stays float32."""
    return np.asarray(v, dtype=x.dtype)


def _gelu(x):
    """The tanh form: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))."""
    inner = _k(x, math.sqrt(2.0 / math.pi)) * (x + _k(x, 0.044715) * x * x * x)
    return _k(x, 0.5) * x * (_k(x, 1.0) + np.tanh(inner))


_ERF = np.vectorize(math.erf, otypes=[np.float64])


def _erf(x):
    """``math.erf`` in float64, rounded once to x's dtype."""
    return _ERF(x).astype(x.dtype)


def _not(x):
    """Bitwise not for ints, logical not for bool."""
    if dtype_of(x).is_floating:
        raise InternalError("tile.unary 'not' on a float tile")
    return np.logical_not(x) if x.dtype == np.bool_ else np.invert(x)


UNARY = {
    "neg": np.negative, "abs": np.abs, "exp": np.exp, "exp2": np.exp2, "log": np.log,
    "log2": np.log2, "sqrt": np.sqrt,
    "rsqrt": lambda x: _k(x, 1.0) / np.sqrt(x),
    "reciprocal": lambda x: _k(x, 1.0) / x,
    "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
    "sigmoid": lambda x: _k(x, 1.0) / (_k(x, 1.0) + np.exp(-x)),
    "relu": lambda x: np.maximum(x, _k(x, 0)),
    "gelu": _gelu, "erf": _erf, "floor": np.floor, "ceil": np.ceil, "not": _not,
}

REDUCE = {
    "sum": lambda x, a: np.sum(x, axis=a, dtype=x.dtype, keepdims=True),
    "prod": lambda x, a: np.prod(x, axis=a, dtype=x.dtype, keepdims=True),
    "max": lambda x, a: np.max(x, axis=a, keepdims=True),
    "min": lambda x, a: np.min(x, axis=a, keepdims=True),
    # First index of the extreme; a NaN is picked first by both, as numpy does.
    "argmax": lambda x, a: np.argmax(x, axis=a, keepdims=True),
    "argmin": lambda x, a: np.argmin(x, axis=a, keepdims=True),
}
INDEX_REDUCTIONS = ("argmax", "argmin")


# -- memory: the part of a tile window inside a tensor ---------------------------------------------

def window(tensor_shape, offsets, tile_shape):
    """``(tile_index, tensor_index)`` slices of the tile positions whose global index
    ``offset + i`` lies inside the tensor, or None when no element does. Offsets may be
    negative or past the end."""
    if len(tensor_shape) != len(tile_shape) or len(offsets) != len(tile_shape):
        raise InternalError(f"a tile of shape {tuple(tile_shape)} with {len(offsets)} offsets "
                            f"does not match a tensor of shape {tuple(tensor_shape)}")
    tile_ix, tensor_ix = [], []
    for dim, off, size in zip(tensor_shape, offsets, tile_shape):
        off = int(off)
        lo = min(max(-off, 0), size)
        hi = min(max(dim - off, 0), size)
        if hi <= lo:
            return None
        tile_ix.append(slice(lo, hi))
        tensor_ix.append(slice(off + lo, off + hi))
    return tuple(tile_ix), tuple(tensor_ix)
