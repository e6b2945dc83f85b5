"""``tile.sort`` (sort, argsort, top-k along the last axis) as a selection loop of vector ops.

Each of the ``k`` steps takes, per row, the extreme of the elements not yet taken (TROWMAX /
TROWMIN over the row with the taken ones replaced by the sentinel -inf / +inf), then the first
position holding it among those not taken (an equality mask, TROWARGMAX over it: the first
index wins, so equal values leave in index order and the sort is stable), marks that position
taken and writes value and position into column ``i`` of the results. NaN propagates through
the max / min, so NaNs leave first, in index order (the interpreter's rule). Comparing with
the mask of untaken positions, not with the sentinel, keeps elements that equal the sentinel
(-inf in a descending sort) apart from those already taken.

Why not TSORT32 / TMRGSORT: they sort 32-element blocks descending into (value, index) pairs
and merge single-row lists; a whole-row sort of any width needs per-row views, merge passes
over runs that are not powers of four and a deinterleave of the pairs, which PyPTO does not
print yet. The selection loop uses instructions every A2/A3 core has, costs k passes over the
tile (cheap for top-k with small k, quadratic for a full sort of long rows).
"""
from __future__ import annotations

import math

import numpy as np

from ...language import dtypes as dt
from ..ir import Block, Op, ScalarType, TileType, Value

INDEX = dt.int64


def _work_dtype(d: dt.dtype) -> dt.dtype:
    """Half floats and narrow ints are compared in float32 / int32 (exactly)."""
    return dt.float32 if d.is_floating else dt.int32


def _sentinel(d: dt.dtype, descending: bool):
    if d.is_floating:
        return -math.inf if descending else math.inf
    info = np.iinfo(np.int32)
    return int(info.min if descending else info.max)


def sort(op: Op):
    from .legalize import Emitter
    e = Emitter(op.loc)
    x = op.operands[0]
    d, shape = x.type.dtype, x.type.shape
    k, descending = op.attrs["k"], op.attrs["descending"]
    n = shape[-1]
    rows = shape[0] if len(shape) == 2 else 1
    w = _work_dtype(d)
    xw = e.cast(x, w) if d != w else x
    if len(shape) == 1:
        xw = _reshape(e, xw, (1, n))
    full_t, out_t = (rows, n), (rows, k)
    cols = _bcast(e, _reshape(e, e.emit("tile.arange", [], TileType(dt.int32, (n,)),
                                        {"start": 0, "end": n}), (1, n)), full_t)
    kcols = _bcast(e, _reshape(e, e.emit("tile.arange", [], TileType(dt.int32, (k,)),
                                         {"start": 0, "end": k}), (1, k)), out_t)
    # nothing taken yet: a compare, not a fill, so the .pto says how wide the mask is
    inits = [e.binary("lt", cols, e.const(0, dt.int32)), e.full(0, TileType(w, out_t)),
             e.full(0, TileType(dt.int32, out_t))]
    lb, ub, step = (e.const(v, INDEX) for v in (0, k, 1))
    i = Value(ScalarType(INDEX), "i")
    args = [Value(v.type, h) for v, h in zip(inits, ("taken", "vals", "idxs"))]
    body = Emitter(op.loc)
    step_ops = _select_step(body, xw, cols, kcols, i, *args, descending)
    body.ops.append(Op("scf.yield", step_ops, loc=op.loc))
    loop = Op("scf.for", [lb, ub, step] + inits, [v.type for v in inits],
              blocks=[Block([i] + args, body.ops)], loc=op.loc)
    e.ops.append(loop)
    _, vals, idxs = loop.results
    if d != w:
        vals = e.cast(vals, d)
    if len(shape) == 1:
        vals, idxs = _reshape(e, vals, (k,)), _reshape(e, idxs, (k,))
    return e.ops, (vals, idxs)


def _select_step(e, x, cols, kcols, i, taken, vals, idxs, descending):
    """One selection: (taken, vals, idxs) after taking each row's next element."""
    rows = x.type.shape[0]
    masked = e.where(taken, _sentinel(x.type.dtype, descending), x)
    extreme = e.emit("tile.reduce", [masked], TileType(x.type.dtype, (rows, 1)),
                     {"op": "max" if descending else "min", "axis": 1})
    wide = _bcast(e, extreme, x.type.shape)
    same = e.binary("eq", masked, wide)
    if x.type.dtype.is_floating:          # NaN == NaN for this purpose
        both_nan = e.binary("and", e.binary("ne", masked, masked), e.binary("ne", wide, wide))
        same = e.binary("or", same, both_nan)
    free = e.binary("and", same, e.unary("not", taken))
    at = e.emit("tile.reduce", [e.cast(free, dt.int32)], TileType(dt.int32, (rows, 1)),
                {"op": "argmax", "axis": 1})
    taken = e.binary("or", taken, e.binary("eq", cols, _bcast(e, at, x.type.shape)))
    i32 = e.emit("arith.cast", [i], ScalarType(dt.int32), {"dtype": dt.int32})
    column = e.binary("eq", kcols, i32)
    out = kcols.type.shape
    vals = e.where(column, _bcast(e, extreme, out), vals)
    idxs = e.where(column, _bcast(e, at, out), idxs)
    return [taken, vals, idxs]


def _reshape(e, x, shape):
    return e.emit("tile.reshape", [x], TileType(x.type.dtype, shape), {"shape": shape})


def _bcast(e, x, shape):
    if x.type.shape == shape:
        return x
    return e.emit("tile.broadcast", [x], TileType(x.type.dtype, shape), {"shape": shape})


RULES = {"tile.sort": sort}
