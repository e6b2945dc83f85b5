"""``tile.sort`` (sort, argsort, top-k along the last axis) as a selection loop of vector ops.

Where the chip's sort instructions do not apply (integer tiles: TSORT32 takes float16/float32
only; targets without them; rows whose pairs would not fit in UB: ``legalize_sort32``), each
of the ``k`` steps takes, per row, the extreme of the elements not yet taken (TROWMAX / TROWMIN
over the row with the taken ones replaced by the sentinel -inf / +inf), then the first position
holding it among those not taken (an equality mask, TROWARGMAX over it: the first index wins,
so equal values leave in index order and the sort is stable), marks that position taken and
writes value and position into column ``i`` of the results. Comparing with the mask of untaken
positions, not with the sentinel, keeps elements that equal the sentinel (-inf in a
descending sort) apart from those already taken.

NaN follows the sort instructions' rule (legalize_sort32): it is compared as the leading
infinity (+inf descending, -inf ascending), so NaNs and that infinity come first in index
order; the value written is the picked element's own (a row max of it alone), NaN included.
The loop costs k passes over the tile: cheap for top-k with small k, quadratic for a full sort
of long rows.
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


def sort_input(op: Op, work: dt.dtype):
    """What both sort decompositions start from: an emitter, the operand as a (rows, n)
    tile of ``work`` values, and k, the direction, rows, n."""
    from .legalize import Emitter
    e = Emitter(op.loc)
    x = op.operands[0]
    shape = x.type.shape
    n, rows = shape[-1], shape[0] if len(shape) == 2 else 1
    xw = e.cast(x, work) if x.type.dtype != work else x
    if len(shape) == 1:
        xw = reshaped(e, xw, (1, n))
    return e, xw, op.attrs["k"], op.attrs["descending"], rows, n


def sort(op: Op):
    from .legalize import Emitter
    d, shape = op.operands[0].type.dtype, op.operands[0].type.shape
    w = _work_dtype(d)
    e, xw, k, descending, rows, n = sort_input(op, w)
    key = xw
    if w.is_floating:     # NaN ties with the leading infinity (legalize_sort32's rule)
        key = e.where(e.binary("ne", xw, xw), math.inf if descending else -math.inf, xw)
    out_t = (rows, k)
    cols, kcols = column_indices(e, rows, n), column_indices(e, rows, k)
    # nothing taken yet: a compare, not a fill, so the .pto says how wide the mask is
    inits = [e.binary("lt", cols, e.const(0, dt.int32)), e.full(0, TileType(w, out_t)),
             e.full(0, TileType(dt.int32, out_t))]
    lb, ub, step = (e.const(v, INDEX) for v in (0, k, 1))
    i = Value(ScalarType(INDEX), "i")
    args = [Value(v.type, h) for v, h in zip(inits, ("taken", "vals", "idxs"))]
    body = Emitter(op.loc)
    step_ops = _select_step(body, key, xw, cols, kcols, i, *args, descending)
    body.ops.append(Op("scf.yield", step_ops, loc=op.loc))
    loop = Op("scf.for", [lb, ub, step] + inits, [v.type for v in inits],
              blocks=[Block([i] + args, body.ops)], loc=op.loc)
    e.ops.append(loop)
    _, vals, idxs = loop.results
    if d != w:
        vals = e.cast(vals, d)
    if len(shape) == 1:
        vals, idxs = reshaped(e, vals, (k,)), reshaped(e, idxs, (k,))
    return e.ops, (vals, idxs)


def _select_step(e, key, x, cols, kcols, i, taken, vals, idxs, descending):
    """One selection: (taken, vals, idxs) after taking each row's next element (``key``:
    ``x`` with NaN as the leading infinity; the value written is ``x``'s, NaN included)."""
    rows = x.type.shape[0]
    masked = e.where(taken, _sentinel(x.type.dtype, descending), key)
    extreme = e.emit("tile.reduce", [masked], TileType(x.type.dtype, (rows, 1)),
                     {"op": "max" if descending else "min", "axis": 1})
    wide = _bcast(e, extreme, x.type.shape)
    same = e.binary("eq", masked, wide)
    free = e.binary("and", same, e.unary("not", taken))
    at = e.emit("tile.reduce", [e.cast(free, dt.int32)], TileType(dt.int32, (rows, 1)),
                {"op": "argmax", "axis": 1})
    picked = e.binary("eq", cols, _bcast(e, at, x.type.shape))
    taken = e.binary("or", taken, picked)
    if x.type.dtype.is_floating:          # the picked element itself: NaN stays NaN
        extreme = e.emit("tile.reduce", [e.where(picked, x, -math.inf)],
                         TileType(x.type.dtype, (rows, 1)), {"op": "max", "axis": 1})
    i32 = e.emit("arith.cast", [i], ScalarType(dt.int32), {"dtype": dt.int32})
    column = e.binary("eq", kcols, i32)
    out = kcols.type.shape
    vals = e.where(column, _bcast(e, extreme, out), vals)
    idxs = e.where(column, _bcast(e, at, out), idxs)
    return [taken, vals, idxs]


def column_indices(e, rows: int, n: int):
    """A (rows, n) int32 tile whose every row is 0 .. n - 1."""
    cols = reshaped(e, e.emit("tile.arange", [], TileType(dt.int32, (n,)),
                              {"start": 0, "end": n}), (1, n))
    return _bcast(e, cols, (rows, n))


def reshaped(e, x, shape):
    return e.emit("tile.reshape", [x], TileType(x.type.dtype, shape), {"shape": shape})


def _bcast(e, x, shape):
    if x.type.shape == shape:
        return x
    return e.emit("tile.broadcast", [x], TileType(x.type.dtype, shape), {"shape": shape})


RULES = {"tile.sort": sort}
