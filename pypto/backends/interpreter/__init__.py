"""The reference interpreter: Tile IR executed with numpy, one grid block after another.

This module is the executable definition of every op in ``docs/tile_ir.md``; backends are
tested against it. Runtime values are numpy scalars (scalars), numpy arrays of the tile's dtype
(tiles, never mutated once made) and the caller's own arrays (tensors, written in place).

Numerics follow the compiled backend (``backends/ascend/lowering_utils.py``): half-width floats
are computed in float32 and rounded once per op, integers wrap, float → int truncates and
saturates, integer division by zero gives 0. Each handler computes in a convenient dtype and the
dispatcher converts its results to the result types written in the IR, so that final rounding
lives in one place.
"""
from __future__ import annotations

import itertools
import math
import threading

import numpy as np

from ...errors import InternalError
from ...compiler.ir import (
    CROSS_BLOCK_OPS,
    Block,
    Function,
    Op,
    ScalarType,
    TensorType,
    Value,
    walk)
from ...language import dtypes as dt

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
    (or rounds as ``rounding`` says) and saturates with NaN → 0, ints wrap or extend, and
    anything → bool is ``!= 0``."""
    x = np.asarray(x)
    src = _BY_NUMPY.get(x.dtype) or dtype_of(x)
    if src is dst and rounding is None:     # the common case, before dtype's slower ==
        return x
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


# -- op handlers: (run, op, operand values) -> result value(s) in any dtype --------------------

def _result(op: Op):
    return op.results[0].type


def _load(run, op, ins):
    """Padding everywhere, then the part of the window inside the tensor."""
    tensor, *offsets = ins
    ty = _result(op)
    padding = op.attrs.get("padding", 0)
    if padding is None:
        _check_inside(op, tensor.shape, offsets, ty.shape)
    out = np.full(ty.shape, convert(padding or 0, ty.dtype), dtype=ty.dtype.to_numpy())
    layout = op.operands[0].type
    if layout.layout != "ND":            # logical coordinates over the physical array
        from ...layout import load_window
        if run.watch is not None:
            run.watch.access("load", op, run.pid, tensor, offsets, ty.shape, layout=layout)
        try:
            where, values = load_window(layout.layout, tensor, layout.shape, offsets, ty.shape)
        except IndexError as e:
            raise IndexError(f"pl.load: {e}") from None
        out[where] = convert(values, ty.dtype)
        return out
    if run.watch is not None:
        run.watch.access("load", op, run.pid, tensor, offsets, ty.shape)
    w = window(tensor.shape, offsets, ty.shape)
    if w is not None:
        out[w[0]] = convert(tensor[w[1]], ty.dtype)
    return out


def _check_inside(op, tensor_shape, offsets, tile_shape) -> None:
    """``pl.load(padding=None)`` promised a window inside the tensor."""
    offs = tuple(int(o) for o in offsets)
    if any(o < 0 or o + n > dim for o, n, dim in zip(offs, tile_shape, tensor_shape)):
        raise IndexError(f"pl.load(padding=None): the window {tuple(tile_shape)} at {offs} "
                         f"is not inside the tensor of shape {tuple(tensor_shape)}; give a "
                         "padding value for windows that may cross its edge")


ATOMIC = {"add": np.add}


def _store(run, op, ins):
    """Only elements inside the tensor are written, converted to its dtype; an atomic store
    combines them with what is there in the tensor's compute dtype."""
    tensor, *offsets, tile = ins
    if run.watch is not None:
        run.watch.access("store", op, run.pid, tensor, offsets, tile.shape,
                         op.attrs.get("atomic"))
    if op.operands[0].type.layout == "INT4":
        from ...layout import store_int4_window
        store_int4_window(tensor, op.operands[0].type.shape, offsets, convert(tile, dt.int8))
        return []
    w = window(tensor.shape, offsets, tile.shape)
    if w is None:
        return []
    d = dtype_of(tensor)
    value = convert(tile[w[0]], d)
    atomic = op.attrs.get("atomic")
    if atomic:
        if atomic not in ATOMIC:
            raise InternalError(f"tile.store: unknown atomic kind {atomic!r}")
        cd = compute_dtype(d)
        value = convert(ATOMIC[atomic](convert(tensor[w[1]], cd), convert(value, cd)), d)
    tensor[w[1]] = value
    return []


def _coordinates(tensor_shape, indices, axis, offsets):
    """The tensor coordinates each index element names (torch.gather's rule over the window
    at ``offsets``) and whether they lie inside the tensor."""
    idx = np.asarray(indices, dtype=np.int64)
    coords = []
    for a, off in enumerate(offsets):
        along = idx if a == axis else np.indices(idx.shape)[a]
        coords.append(int(off) + along)
    inside = np.ones(idx.shape, dtype=bool)
    for c, dim in zip(coords, tensor_shape):
        inside &= (c >= 0) & (c < dim)
    return coords, inside


def _gather(run, op, ins):
    """``padding`` wherever the named element lies outside the tensor."""
    tensor, indices, *offsets = ins
    ty = _result(op)
    out = np.full(ty.shape, convert(op.attrs.get("padding", 0), ty.dtype),
                  dtype=ty.dtype.to_numpy())
    coords, inside = _coordinates(tensor.shape, indices, op.attrs["axis"], offsets)
    picked = tuple(c[inside] for c in coords)
    out[inside] = convert(tensor[picked], ty.dtype)
    return out


def _scatter(run, op, ins):
    """Element by element in row-major order, so the last of duplicate indices wins (or, for
    ``reduce="add"``, each adds in the tensor's compute dtype); elements outside the tensor
    are dropped."""
    tensor, indices, value, *offsets = ins
    coords, inside = _coordinates(tensor.shape, indices, op.attrs["axis"], offsets)
    if run.watch is not None:      # each element written; out of range is defined: dropped
        one = (1,) * tensor.ndim
        for e in zip(*np.nonzero(inside)):
            run.watch.access("store", op, run.pid, tensor, [c[e] for c in coords], one,
                             op.attrs.get("reduce"))
    d = dtype_of(tensor)
    cd = compute_dtype(d)
    values = convert(value, d)
    add = op.attrs.get("reduce") == "add"
    for e in zip(*np.nonzero(inside)):
        at = tuple(int(c[e]) for c in coords)
        v = values[e]
        if add:
            v = convert(np.add(convert(tensor[at], cd), convert(v, cd)), d)
        tensor[at] = v
    return []


def _getval(run, op, ins):
    """Element ``e`` (row-major) of a tile: what legalisation reads indices with."""
    tile, e = ins
    return np.asarray(tile).reshape(-1)[int(e)]


def _setval(run, op, ins):
    """A copy of the tile with element ``e`` (row-major) replaced."""
    tile, e, v = ins
    out = np.array(tile, copy=True)
    out.reshape(-1)[int(e)] = convert(v, dtype_of(out))
    return out


def _full(run, op, ins):
    """The operand, when present, overrides the ``value`` attribute."""
    ty = _result(op)
    value = ins[0] if ins else op.attrs["value"]
    return np.full(ty.shape, convert(value, ty.dtype), dtype=ty.dtype.to_numpy())


def _alloc(run, op, ins):
    """An unfilled buffer: zeros stand for its contents (on the chip, whatever that UB space
    last held). The frontend rejects a read no fill can reach; one a runtime branch skipped the
    fill of is the sanitizer's to report, so it is told which array this is."""
    ty = _result(op)
    buffer = np.zeros(ty.shape, dtype=ty.dtype.to_numpy())
    if run.watch is not None:
        run.unfilled[id(buffer)] = (buffer, op)
    return buffer


def _arange(run, op, ins):
    return np.arange(op.attrs["start"], op.attrs["end"], dtype=np.int64)


def _unary(run, op, ins):
    name = op.attrs["op"]
    if name not in UNARY:
        raise InternalError(f"the interpreter has no unary op '{name}'")
    return UNARY[name](convert(ins[0], compute_dtype(_result(op).dtype)))


def _tile_binary(run, op, ins):
    return apply_binary(op.attrs["op"], ins[0], ins[1], _result(op).dtype)


def _where(run, op, ins):
    d = _result(op).dtype
    return np.where(convert(ins[0], dt.bool_), convert(ins[1], d), convert(ins[2], d))


def _cast(run, op, ins):
    return convert(ins[0], _result(op).dtype, op.attrs.get("rounding"))


def _broadcast(run, op, ins):
    return np.broadcast_to(ins[0], _result(op).shape)


def _reduce(run, op, ins):
    """Values reduce in the result's compute dtype (so sums of ints wrap); arg-reductions look
    at the operand's compute values."""
    name = op.attrs["op"]
    if name not in REDUCE:
        raise InternalError(f"the interpreter has no reduction '{name}'")
    x = ins[0]
    x = to_compute(x) if name in INDEX_REDUCTIONS else convert(
        x, compute_dtype(_result(op).dtype))
    return REDUCE[name](x, op.attrs["axis"])


def _cumsum(run, op, ins):
    x = convert(ins[0], compute_dtype(_result(op).dtype))
    return np.cumsum(x, axis=op.attrs.get("axis", -1), dtype=x.dtype)


def _sort(run, op, ins):
    """The first ``k`` of a stable sort along the last axis. NaN is compared as the leading
    infinity (+inf descending, -inf ascending: the chip's sort instructions never see a NaN,
    passes/legalize_sort32.py), so NaNs and that infinity come first, in index order."""
    x = to_compute(ins[0])
    k, descending = op.attrs["k"], op.attrs["descending"]
    key = np.negative(x.astype(np.float64)) if descending else x.astype(np.float64)
    if x.dtype.kind == "f":
        key = np.where(np.isnan(x), -np.inf, key)
    order = np.argsort(key, axis=-1, kind="stable")[..., :k]     # equal keys: index order
    return [np.take_along_axis(ins[0], order, axis=-1), order.astype(np.int32)]


def _reshape(run, op, ins):
    return np.reshape(ins[0], _result(op).shape)


def _bitcast(run, op, ins):
    """The same bytes seen as another dtype of the same width (legalize_storage's marker)."""
    return np.ascontiguousarray(ins[0]).view(_result(op).dtype.to_numpy())


def _transpose(run, op, ins):
    return np.transpose(ins[0])


def _slice(run, op, ins):
    starts, stops = op.attrs["starts"], op.attrs["stops"]
    return ins[0][tuple(slice(a, b) for a, b in zip(starts, stops))]


def _concat(run, op, ins):
    d = _result(op).dtype
    return np.concatenate([convert(x, d) for x in ins], axis=op.attrs["axis"])


def _matmul(run, op, ins):
    """``op(a) @ op(b) (+ acc)`` in the accumulator's dtype: float32 for float operands (a
    float32 matmul, not a float64 one, like the cube), int32 for int8; batched over the
    leading axes (numpy's rule), the transposes swapping the last two."""
    a, b, *acc = ins
    if op.attrs.get("a_trans"):
        a = np.swapaxes(a, -1, -2)
    if op.attrs.get("b_trans"):
        b = np.swapaxes(b, -1, -2)
    cd = compute_dtype(_result(op).dtype)
    out = np.matmul(convert(a, cd), convert(b, cd))
    if acc:
        out = out + convert(acc[0], cd)
    return out


def _mov(run, op, ins):
    return ins[0]


def _constant(run, op, ins):
    return op.attrs["value"]


def _scalar_cast(run, op, ins):
    return convert(ins[0], _result(op).dtype, op.attrs.get("rounding"))


def _select(run, op, ins):
    cond, a, b = ins
    return a if bool(cond) else b


def _cmp(run, op, ins):
    return apply_binary(op.attrs["pred"], ins[0], ins[1], dt.bool_)


def _scalar_binary(name):
    def handler(run, op, ins):
        return apply_binary(name, ins[0], ins[1], _result(op).dtype)
    handler.__name__ = f"_arith_{name}"
    return handler


def _program_id(run, op, ins):
    return run.pid[op.attrs["axis"]]


def _num_programs(run, op, ins):
    return run.grid[op.attrs["axis"]]


def _dim(run, op, ins):
    return ins[0].shape[op.attrs["axis"]]


def _for(run, op, ins):
    """``for iv in range(lb, ub, step)``; a non-positive step runs no iteration."""
    lb, ub, step, *values = ins
    body = op.blocks[0]
    if int(step) > 0:
        for iv in range(int(lb), int(ub), int(step)):
            values = run.block(body, [iv, *values])
    return values


def _if(run, op, ins):
    """The taken branch's yielded values; a missing else yields nothing."""
    branch = op.blocks[0] if bool(ins[0]) else (op.blocks[1] if len(op.blocks) > 1 else None)
    return run.block(branch, []) if branch is not None else []


def _while(run, op, ins):
    """``before`` computes the condition and the values it forwards; ``after`` runs while it
    holds; the results are the values of the condition that ended the loop."""
    before, after = op.blocks
    values = list(ins)
    while True:
        cond, *values = run.block(before, values)
        if not bool(cond):
            return values
        values = run.block(after, values)


def _nothing(run, op, ins):
    """Pipe flags order the chip's pipes; one numpy stream needs no ordering."""
    return []


# Called at every ``debug.breakpoint`` as ``hook(pid, names, tiles, loc)`` (``pypto.debug`` sets
# it while debug mode is on); None: breakpoints do nothing.
BREAKPOINT_HOOK = None


def _breakpoint(run, op, ins):
    hook = BREAKPOINT_HOOK
    if hook is not None:
        hook(tuple(int(p) for p in run.pid), op.attrs["names"],
             [np.array(x, copy=True) for x in ins], op.loc)
    return []


def _syncall(run, op, ins):
    run.coop.barrier()
    return []


def _sync_set(run, op, ins):
    run.coop.signal(op.attrs["flag"], op.attrs.get("count", 1))
    return []


def _sync_wait(run, op, ins):
    run.coop.wait(op.attrs["flag"], op.attrs.get("count", 1))
    return []


SCALAR_BINARY = ("add", "sub", "mul", "div", "floordiv", "mod", "min", "max",
                 "and", "or", "xor", "shl", "shr")

HANDLERS = {
    "tile.load": _load, "tile.store": _store, "tile.gather": _gather, "tile.scatter": _scatter,
    "tile.getval": _getval, "tile.setval": _setval, "tile.sort": _sort, "tile.full": _full, "tile.alloc": _alloc, "tile.arange": _arange,
    "tile.unary": _unary, "tile.binary": _tile_binary, "tile.where": _where,
    "tile.cast": _cast, "tile.broadcast": _broadcast, "tile.reduce": _reduce,
    "tile.cumsum": _cumsum, "tile.reshape": _reshape, "tile.bitcast": _bitcast,
    "tile.transpose": _transpose,
    "tile.slice": _slice, "tile.concat": _concat, "tile.matmul": _matmul, "tile.mov": _mov,
    "arith.constant": _constant, "arith.cast": _scalar_cast, "arith.select": _select,
    "arith.cmp": _cmp, "pto.program_id": _program_id, "pto.num_programs": _num_programs,
    "pto.syncall": _syncall, "pto.sync_set": _sync_set, "pto.sync_wait": _sync_wait,
    "pto.set_flag": _nothing, "pto.wait_flag": _nothing, "pto.pipe_barrier": _nothing,
    "debug.breakpoint": _breakpoint,
    "tensor.dim": _dim, "scf.for": _for, "scf.if": _if, "scf.while": _while,
    **{f"arith.{name}": _scalar_binary(name) for name in SCALAR_BINARY},
}

# Ops that end a block and hand their operands to the op that owns it.
TERMINATORS = ("scf.yield", "scf.condition")


# -- execution -------------------------------------------------------------------------------------

class DeadlockError(RuntimeError):
    """Blocks of a launch wait for each other forever (a barrier some block never reaches, a
    flag nobody signals)."""


class _Cooperation:
    """Cross-block synchronisation of one launch whose blocks run as threads."""

    TIMEOUT = 10.0

    def __init__(self, blocks: int):
        self._barrier = threading.Barrier(blocks)
        self._flags = [0] * 16
        self._cond = threading.Condition()
        self._aborted = False

    def barrier(self) -> None:
        try:
            self._barrier.wait(self.TIMEOUT)
        except threading.BrokenBarrierError:
            raise DeadlockError("pl.barrier(): not every block of the launch reached it") \
                from None

    def signal(self, flag: int, count: int) -> None:
        with self._cond:
            self._flags[flag] += count
            self._cond.notify_all()

    def wait(self, flag: int, count: int) -> None:
        with self._cond:
            ready = self._cond.wait_for(lambda: self._aborted or self._flags[flag] >= count,
                                        self.TIMEOUT)
            if not ready or self._aborted:
                raise DeadlockError(f"pl.wait({flag}, {count}): the flag was not signalled "
                                    f"{count} time(s)")
            self._flags[flag] -= count

    def abort(self) -> None:
        with self._cond:
            self._aborted = True
            self._cond.notify_all()
        self._barrier.abort()


class _Run:
    """One grid block in execution: the value of every SSA value seen so far, and its ids."""

    coop: _Cooperation | None = None
    watch = None            # a sanitizer.Watch: told of every load and store

    def __init__(self, pid: tuple, grid: tuple):
        self.pid = tuple(np.int64(p) for p in pid)
        self.grid = tuple(np.int64(g) for g in grid)
        self.env: dict[Value, object] = {}
        self.unfilled: dict[int, tuple] = {}    # sanitized: id -> (array, its tile.alloc)

    def read(self, v: Value):
        try:
            return self.env[v]
        except KeyError:
            raise InternalError(f"{v} is used before it is defined") from None

    def bind(self, v: Value, value, where: str) -> None:
        self.env[v] = to_type(value, v.type, where)

    def block(self, block: Block, args) -> list:
        """Run ``block`` with its arguments bound; returns its terminator's operand values."""
        if len(args) != len(block.args):
            raise InternalError(f"a block of {len(block.args)} arguments got {len(args)}")
        for v, a in zip(block.args, args):
            self.bind(v, a, "block argument")
        for op in block.ops:
            if op.name in TERMINATORS:
                return [self.read(v) for v in op.operands]
            self.execute(op)
        return []

    def execute(self, op: Op) -> None:
        handler = HANDLERS.get(op.name)
        if handler is None:
            raise InternalError(f"the interpreter has no rule for op '{op.name}'")
        ins = [self.read(v) for v in op.operands]
        if self.unfilled and op.name.startswith("tile."):
            self._check_filled(op, ins)
        outs = handler(self, op, ins)
        if not isinstance(outs, list):
            outs = [outs]
        if len(outs) != len(op.results):
            raise InternalError(f"{op.name} produced {len(outs)} values for "
                                f"{len(op.results)} results")
        for r, value in zip(op.results, outs):
            self.bind(r, value, op.name)

    def _check_filled(self, op: Op, ins: list) -> None:
        """Tell the sanitizer of each operand that is a pl.alloc_buffer no load filled (passing
        it on through scf results is not a read; a tile op is)."""
        for v, value in zip(op.operands, ins):
            entry = self.unfilled.get(id(value))
            if entry is not None and entry[0] is value:
                self.watch.unfilled_read(op, self.pid, v.hint or entry[1].results[0].hint,
                                         entry[1].loc)


def _argument(param: Value, args: dict):
    """The caller's value for ``param``: its array as is (stores write into it) or a number
    converted to the scalar's dtype."""
    if param.hint not in args:
        raise ValueError(f"no argument given for parameter '{param.hint}'")
    value = args[param.hint]
    if isinstance(param.type, TensorType):
        if not isinstance(value, np.ndarray):
            raise TypeError(f"parameter '{param.hint}' is a tensor; got {type(value).__name__}")
        rank = param.type.rank if param.type.layout == "ND" else value.ndim  # physical
        held = (dt.uint8, dt.int8) if param.type.layout == "INT4" else (param.type.dtype,)
        if value.ndim != rank or dtype_of(value) not in held:     # int4: its packed bytes
            raise TypeError(f"parameter '{param.hint}' is a {param.type}; got a {value.ndim}-D "
                            f"{value.dtype} array")
        return value
    return to_type(value, param.type, f"parameter '{param.hint}'")


def run_function(fn: Function, args: dict, grid: tuple[int, int, int], watch=None) -> None:
    """Run every block of the grid in order (pid0 fastest). args maps each param's `hint` (its
    name) to a numpy array (tensors; written in place by stores) or a Python int/float
    (scalars). ``watch``: a ``sanitizer.Watch`` told of every load and store."""
    grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
    values = [_argument(p, args) for p in fn.params]
    pids = [(p0, p1, p2) for p2, p1, p0 in itertools.product(*(range(g) for g in reversed(grid)))]

    def run_block(pid, coop=None):
        run = _Run(pid, grid)
        run.coop = coop
        run.watch = watch
        for p, v in zip(fn.params, values):
            run.env[p] = v
        with np.errstate(all="ignore"):
            run.block(fn.body, [])

    if not any(op.name in CROSS_BLOCK_OPS for op in walk(fn.body)):
        for pid in pids:
            run_block(pid)
        return
    _run_together(pids, run_block)



def _run_together(pids, run_block) -> None:
    """Blocks that meet at barriers or flags run as threads, all at once, like the chip's
    cores; the first failure is raised once every thread has stopped."""
    coop = _Cooperation(len(pids))
    errors: list[BaseException] = []

    def target(pid):
        try:
            run_block(pid, coop)
        except BaseException as e:  # noqa: BLE001 - re-raised on the calling thread
            errors.append(e)
            coop.abort()

    threads = [threading.Thread(target=target, args=(pid,)) for pid in pids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        real = [e for e in errors if not isinstance(e, DeadlockError)]
        raise (real or errors)[0]
