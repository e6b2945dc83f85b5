"""The per-op rules of the reference interpreter: ``HANDLERS`` maps each Tile IR op to
``handler(run, op, operand values) -> result value(s)``.

This table is the executable definition of every op in ``docs/tile_ir.md``. Each handler
computes in a convenient dtype; the runner converts its results to the result types written in
the IR, so that final rounding lives in one place (``run.py``).
"""
from __future__ import annotations

import numpy as np

from ...errors import InternalError
from ...compiler.ir import Op
from ...language import dtypes as dt
from ...layout import load_window, store_int4_window
from .numerics import (INDEX_REDUCTIONS, REDUCE, UNARY, apply_binary, compute_dtype, convert,
                       dtype_of, to_compute, window)

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
        store_int4_window(tensor, op.operands[0].type.shape, offsets, convert(tile, dt.int8))
        return []
    w = window(tensor.shape, offsets, tile.shape)
    if w is None:
        return []
    d = dtype_of(tensor)
    value = tile[w[0]]
    if op.attrs.get("relu"):          # the FIX pipe's, before its conversion (cube_epilogue)
        value = np.where(value < 0, np.zeros((), value.dtype), value)
    value = convert(value, d)
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


def _by_element(indices, tensor, shape):
    """The index of every element: a rank-1 tile of row numbers (whole rows) names row
    ``indices[i]`` for each element of row i of a tile of ``shape``."""
    idx = np.asarray(indices)
    if idx.ndim < np.ndim(tensor):
        idx = np.broadcast_to(idx.reshape(-1, 1), shape)
    return idx


def _gather(run, op, ins):
    """``padding`` wherever the named element lies outside the tensor."""
    tensor, indices, *offsets = ins
    ty = _result(op)
    indices = _by_element(indices, tensor, ty.shape)
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
    indices = _by_element(indices, tensor, np.shape(value))
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
    axis = op.attrs.get("axis", -1)
    if op.attrs.get("reverse"):
        return np.flip(np.cumsum(np.flip(x, axis), axis=axis, dtype=x.dtype), axis)
    return np.cumsum(x, axis=axis, dtype=x.dtype)


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
    "tile.col_expand": _tile_binary,       # the (1, N) row broadcasts over the rows
    "tile.row_expand": _tile_binary,       # the (M, 1) column over the columns
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
