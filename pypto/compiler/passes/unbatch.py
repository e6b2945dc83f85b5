"""Rank-3 and rank-4 tiles unrolled into their rank-2 planes: later stages see 2-D tiles only.

A tile of shape (*lead, M, N) becomes ``prod(lead)`` tiles of (M, N), its planes in row-major
order of the leading axes (a static unroll: the leading extents are compile-time constants,
at most ``MAX_PLANES``; the graph API traces tile ops on whole tensors, so the limit is
checked here, on what is compiled, not in semantics). Each op on such tiles becomes one op
per plane:

* a load or store moves one plane per instruction: the tensor keeps its rank and the plane's
  leading offsets (``offset + index``) select it; a plane past the tensor's end loads padding
  and stores nothing (the clipping of ``tload``/``tstore`` over every axis);
* elementwise ops work plane by plane; a broadcast along a leading axis reuses the plane;
* a reduction over one of the last two axes reduces each plane; over a leading axis it folds
  the planes with the matching elementwise op (add, max, min, mul);
* a batched ``matmul`` is one 2-D matmul per plane (semantics made the batch axes explicit);
* reshapes keep, join (concat along columns) or split (column slices) planes of whole
  elements; loop-carried and branch-merged tiles are carried plane by plane.

``RULES`` maps an op name to its rewrite; an op on such tiles that has none is refused at the
user's line. The interpreter runs the IR from before this pass, so it keeps the definition.
"""
from __future__ import annotations

import itertools
import math

from ...errors import CompilationError
from ..ir import Block, Module, Op, ScalarType, TileType, Value
from ..semantics.scalar import INDEX
from .legalize import Emitter

MAX_PLANES = 64         # the unroll's limit: one PTO instruction per plane and op
# the host-hint attribute naming the rank-3/4 tile an op's result is a plane of
PLANE_OF = "_plane_of"
# a reduction over a leading axis: the elementwise op that folds two planes
FOLD = {"sum": "add", "max": "max", "min": "min", "prod": "mul"}


def is_batched(v) -> bool:
    return isinstance(v, Value) and v.is_tile and len(v.type.shape) > 2


class _Planes:
    """A rank-3/4 value's planes: ``lead`` (its leading extents) and one value per index."""

    def __init__(self, lead: tuple, values: list):
        self.lead = lead
        self.values = values

    def at(self, index: tuple) -> Value:
        return self.values[_flat(self.lead, index)]


def _flat(lead: tuple, index: tuple) -> int:
    n = 0
    for extent, i in zip(lead, index):
        n = n * extent + i
    return n


def _indices(lead: tuple):
    return itertools.product(*(range(n) for n in lead))


def _plane_type(t: TileType) -> TileType:
    return TileType(t.dtype, t.shape[-2:], t.space)


class _Unbatcher:
    def __init__(self):
        self.planes: dict[int, _Planes] = {}       # value id → its planes
        self.subst: dict[int, Value] = {}          # a value replaced by another

    # -- values -------------------------------------------------------------------------------
    def get(self, v: Value) -> Value:
        return self.subst.get(v.id, v)

    def of(self, v: Value) -> _Planes:
        """``v``'s planes; a tile of rank <= 2 is one plane of its own shape."""
        if is_batched(v):
            return self.planes[v.id]
        return _Planes((), [self.get(v)])

    def flat(self, values) -> list:
        """Operands as the rewritten op takes them: each batched value as its planes."""
        out = []
        for v in values:
            out += self.of(v).values if is_batched(v) else [self.get(v)]
        return out

    def bind(self, old: Value, lead: tuple, values: list) -> None:
        if is_batched(old):
            self.planes[old.id] = _Planes(lead, values)
            for i, v in enumerate(values):      # for messages about the plane (memory plan)
                if v.owner is not None and not v.owner.name.startswith("scf."):
                    v.owner.attrs.setdefault(PLANE_OF, f"plane {i} of a {old.type}")
        else:
            self.subst[old.id] = values[0]

    def fresh_args(self, args) -> list:
        """Block arguments: a batched one becomes one argument per plane."""
        out = []
        for a in args:
            if is_batched(a):
                news = [Value(_plane_type(a.type), a.hint) for _ in range(_count(a))]
                self.bind(a, a.type.shape[:-2], news)
                out += news
            else:
                out.append(a)
        return out

    # -- blocks -------------------------------------------------------------------------------
    def block(self, block: Block) -> None:
        ops = []
        for op in block.ops:
            ops += self.op(op)
        block.ops = ops

    def op(self, op: Op) -> list:
        touched = any(is_batched(v) for v in op.operands + op.results)
        if op.name.startswith("scf."):
            return [self.control(op)] if touched or op.blocks else self.keep(op)
        if not touched:
            return self.keep(op)
        _check_planes(op)
        rule = RULES.get(op.name)
        if rule is None:
            raise CompilationError(
                f"{_user_name(op)} is not supported on tiles of rank 3 or 4 (they are unrolled "
                "into rank-2 planes); apply it to each plane t[i] of the tile", op.loc)
        e = Emitter(op.loc)
        rule(self, e, op)
        return e.ops

    def keep(self, op: Op) -> list:
        op.operands = [self.get(v) for v in op.operands]
        return [op]

    def control(self, op: Op) -> Op:
        """scf.for / if / while / yield / condition with batched values carried per plane."""
        operands = self.flat(op.operands)
        blocks = []
        for blk in op.blocks:
            new = Block(self.fresh_args(blk.args), blk.ops)
            self.block(new)
            blocks.append(new)
        types = [t for r in op.results for t in _flat_types(r)]
        new = Op(op.name, operands, types, op.attrs, blocks, op.loc)
        it = iter(new.results)
        for r in op.results:
            self.bind(r, r.type.shape[:-2] if is_batched(r) else (),
                      [next(it) for _ in range(_count(r))])
        return new


def _check_planes(op: Op) -> None:
    for r in op.results:
        if _count(r) > MAX_PLANES:
            shape = r.type.shape
            raise CompilationError(
                f"a tile of shape {shape} has {_count(r)} planes of {shape[-2:]}; rank-3/4 "
                f"tiles are unrolled into at most {MAX_PLANES} rank-2 planes, so make the "
                "leading axes smaller (loop over the batch with pl.range and work on fewer "
                "planes at a time)", op.loc)


def _count(v: Value) -> int:
    return math.prod(v.type.shape[:-2]) if is_batched(v) else 1


def _flat_types(v: Value) -> list:
    return [_plane_type(v.type)] * _count(v) if is_batched(v) else [v.type]


def _user_name(op: Op) -> str:
    kind = op.attrs.get("op")
    return f"{op.name} ({kind})" if kind else op.name


# -- rules: (unbatcher, emitter, op) ----------------------------------------------------------

def _offset(e: Emitter, base: Value, i: int) -> Value:
    if i == 0:
        return base
    return e.emit("arith.add", [base, e.const(i, INDEX)], ScalarType(INDEX))


def _plane_offsets(e: Emitter, offsets: list, index: tuple) -> list:
    lead = [_offset(e, o, i) for o, i in zip(offsets, index)]
    return lead + list(offsets[len(index):])


def _load(u, e, op):
    tensor, *offsets = [u.get(v) for v in op.operands]
    t = op.result.type
    lead = t.shape[:-2]
    attrs = {**op.attrs, "shape": t.shape[-2:]}
    values = [e.emit("tile.load", [tensor] + _plane_offsets(e, offsets, ix), _plane_type(t),
                     attrs) for ix in _indices(lead)]
    u.bind(op.result, lead, values)


def _store(u, e, op):
    tensor, *offsets = [u.get(v) for v in op.operands[:-1]]
    planes = u.of(op.operands[-1])
    for ix in _indices(planes.lead):
        e.ops.append(Op("tile.store", [tensor] + _plane_offsets(e, offsets, ix) +
                        [planes.at(ix)], (), op.attrs, loc=op.loc))


def _elementwise(u, e, op):
    """Tile operands have the result's shape (semantics broadcast them); scalars are shared."""
    t = op.result.type
    lead = t.shape[:-2]
    values = []
    for ix in _indices(lead):
        operands = [u.of(v).at(ix) if v.is_tile else u.get(v) for v in op.operands]
        values.append(e.emit(op.name, operands, _plane_type(t), op.attrs))
    u.bind(op.result, lead, values)


def _per_plane_last_axes(u, e, op):
    """Ops along the last axes (cumsum, sort): each plane alone, its axis renumbered."""
    src = u.of(op.operands[0])
    rank = len(op.operands[0].type.shape)
    attrs = dict(op.attrs)
    if "axis" in attrs:
        attrs["axis"] = attrs["axis"] - (rank - 2)
    outs = [[] for _ in op.results]
    for ix in _indices(src.lead):
        new = Op(op.name, [src.at(ix)], [_plane_type(r.type) for r in op.results], attrs,
                 loc=op.loc)
        e.ops.append(new)
        for out, r in zip(outs, new.results):
            out.append(r)
    for r, values in zip(op.results, outs):
        u.bind(r, src.lead, values)


def _broadcast(u, e, op):
    """Semantics gave source and result one rank: a leading extent of 1 reuses its plane; a
    plane that grows is broadcast once per source plane."""
    src, t = u.of(op.operands[0]), op.result.type
    lead, plane = t.shape[:-2], t.shape[-2:]
    grown = {}
    values = []
    for ix in _indices(lead):
        six = tuple(i if n > 1 else 0 for i, n in zip(ix, src.lead))
        v = src.at(six)
        if v.type.shape != plane:
            key = _flat(src.lead, six)
            if key not in grown:
                grown[key] = e.emit("tile.broadcast", [v], TileType(t.dtype, plane),
                                    {"shape": plane})
            v = grown[key]
        values.append(v)
    u.bind(op.result, lead, values)


def _reshape_plane(e, v: Value, shape: tuple) -> Value:
    if v.type.shape == shape:
        return v
    return e.emit("tile.reshape", [v], TileType(v.type.dtype, shape), {"shape": shape})


def _reshape(u, e, op):
    """Planes of whole elements: kept (one plane per plane), joined (k planes as one row,
    concat along columns) or split (column slices of one plane as a row)."""
    src, t = u.of(op.operands[0]), op.result.type
    lead, plane = (t.shape[:-2], t.shape[-2:]) if is_batched(op.result) else ((), t.shape)
    src_size, size = math.prod(op.operands[0].type.shape) // len(src.values), math.prod(plane)
    dtype = t.dtype
    if size == src_size:
        values = [_reshape_plane(e, v, plane) for v in src.values]
    elif size % src_size == 0:
        k = size // src_size
        values = []
        for j in range(len(src.values) // k):
            rows = [_reshape_plane(e, v, (1, src_size)) for v in src.values[j * k:(j + 1) * k]]
            joined = e.emit("tile.concat", rows, TileType(dtype, (1, size)), {"axis": 1})
            values.append(_reshape_plane(e, joined, plane))
    elif src_size % size == 0:
        values = []
        for v in src.values:
            row = _reshape_plane(e, v, (1, src_size))
            for j in range(src_size // size):
                piece = e.emit("tile.slice", [row], TileType(dtype, (1, size)),
                               {"starts": (0, j * size), "stops": (1, (j + 1) * size)})
                values.append(_reshape_plane(e, piece, plane))
    else:
        raise CompilationError(
            f"reshape of a {op.operands[0].type} into {t.shape}: its planes of "
            f"{src_size} elements do not divide or fill planes of {size}; reshape each plane "
            "t[i] instead", op.loc)
    u.bind(op.result, lead, values)


def _reduce(u, e, op):
    src = u.of(op.operands[0])
    rank = len(op.operands[0].type.shape)
    axis, kind = op.attrs["axis"], op.attrs["op"]
    t = op.result.type
    if axis >= rank - 2:
        plane = _plane_type(t)
        values = [e.emit("tile.reduce", [v], plane, {**op.attrs, "axis": axis - (rank - 2)})
                  for v in src.values]
        u.bind(op.result, src.lead, values)
        return
    if kind not in FOLD:
        raise CompilationError(
            f"{kind}() over the leading axis {axis} of a rank-{rank} tile is not supported "
            f"(they fold planes with an elementwise op, {', '.join(FOLD)}); move that axis "
            "into the last two (load the tile transposed)", op.loc)
    lead = t.shape[:-2]
    values = []
    for ix in _indices(lead):
        acc = None
        for i in range(src.lead[axis]):
            v = src.at(ix[:axis] + (i,) + ix[axis + 1:])
            acc = v if acc is None else e.emit("tile.binary", [acc, v], v.type,
                                               {"op": FOLD[kind]})
        values.append(acc)
    u.bind(op.result, lead, values)


def _matmul(u, e, op):
    """Semantics broadcast a and b to the batch axes: one 2-D matmul per plane."""
    t = op.result.type
    lead = t.shape[:-2]
    values = [e.emit("tile.matmul", [u.of(v).at(ix) for v in op.operands], _plane_type(t),
                     op.attrs) for ix in _indices(lead)]
    u.bind(op.result, lead, values)


def _slice(u, e, op):
    src, t = u.of(op.operands[0]), op.result.type
    starts, stops = op.attrs["starts"], op.attrs["stops"]
    n = len(src.lead)
    window = list(zip(starts[n:], stops[n:]))
    full = all(a == 0 and b == s for (a, b), s in zip(window, op.operands[0].type.shape[n:]))
    values = []
    for ix in itertools.product(*(range(a, b) for a, b in zip(starts[:n], stops[:n]))):
        v = src.at(ix)
        if not full:
            v = e.emit("tile.slice", [v], TileType(t.dtype, t.shape[n:]),
                       {"starts": tuple(starts[n:]), "stops": tuple(stops[n:])})
        values.append(v)
    u.bind(op.result, t.shape[:n], values)


def _concat(u, e, op):
    t = op.result.type
    axis, rank = op.attrs["axis"], len(t.shape)
    parts = [u.of(v) for v in op.operands]
    lead = t.shape[:-2]
    if axis >= rank - 2:
        values = [e.emit("tile.concat", [p.at(ix) for p in parts], _plane_type(t),
                         {"axis": axis - (rank - 2)}) for ix in _indices(lead)]
    else:
        values = []
        for ix in _indices(lead):
            i = ix[axis]
            for p in parts:
                if i < p.lead[axis]:
                    values.append(p.at(ix[:axis] + (i,) + ix[axis + 1:]))
                    break
                i -= p.lead[axis]
    u.bind(op.result, lead, values)


RULES = {
    "tile.load": _load, "tile.store": _store,
    **{name: _elementwise for name in ("tile.full", "tile.unary", "tile.binary", "tile.where",
                                       "tile.cast", "tile.mov")},
    "tile.broadcast": _broadcast, "tile.reshape": _reshape, "tile.reduce": _reduce,
    "tile.matmul": _matmul, "tile.slice": _slice, "tile.concat": _concat,
    "tile.cumsum": _per_plane_last_axes, "tile.sort": _per_plane_last_axes,
}


def unbatch(module: Module) -> Module:
    """Every tile of rank 3 or 4 replaced by its rank-2 planes (module docstring)."""
    fn = module.kernel
    if any(is_batched(v) for op in _all_ops(fn.body) for v in op.operands + op.results):
        _Unbatcher().block(fn.body)
    module.facts["unbatched"] = True
    return module


def _all_ops(block: Block):
    for op in block.ops:
        yield op
        for b in op.blocks:
            yield from _all_ops(b)
