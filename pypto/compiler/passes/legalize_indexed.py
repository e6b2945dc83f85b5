"""Indexed memory access on A2/A3: ``tile.gather`` / ``tile.scatter`` as element loops.

A2/A3 has no instruction that moves elements between global memory and a tile by per-element
indices (PTO's ``mgather``/``mscatter`` are A5-only: PTOAS a56b18c3 rejects them elsewhere),
so each element becomes what the chip has: the scalar unit reads its index from the index
tile (``tile.getval`` → TGETVAL), a one-element window at the computed coordinates is loaded
or stored (``tile.load``/``tile.store`` → TLOAD/TSTORE, whose clipping makes an index outside
the tensor read the padding value or write nothing; a negative one is moved to the tensor's
extent first, since the chip clips windows at the end only), and the element moves between that
window and the big tile through the scalar unit (TGETVAL / TSETVAL). Slow — one small DMA per
element — but exact, and what pto-isa's own A2/A3 TSCATTER does inside UB (a scalar loop).
The loop runs in row-major element order, so of duplicate scatter indices the last wins, and
``reduce="add"`` stores with the atomic add so duplicates accumulate.
"""
from __future__ import annotations

from ...language import dtypes as dt
from ..ir import Block, Op, ScalarType, TileType, Value

INDEX = dt.int64
# attr of a load or store whose window cannot start before its tensor (its coordinates went
# through ``never_before``, or it was checked at run time): legalize_windows leaves it be
CHECKED = "_window_checked"


class _Loop:
    """Ops of one loop body, built in order."""

    def __init__(self, loc):
        self.ops: list[Op] = []
        self.loc = loc

    def emit(self, name, operands, result_types=(), attrs=None) -> Op:
        op = Op(name, operands, result_types, attrs, loc=self.loc)
        self.ops.append(op)
        return op

    def const(self, value: int) -> Value:
        return self.emit("arith.constant", [], [ScalarType(INDEX)], {"value": value}).result

    def arith(self, name, a, b) -> Value:
        return self.emit(f"arith.{name}", [a, b], [ScalarType(INDEX)]).result

    def getval(self, tile: Value, at: Value) -> Value:
        return self.emit("tile.getval", [tile, at], [ScalarType(tile.type.dtype)]).result


def position(body: _Loop, e: Value, shape: tuple) -> list:
    """Row and column (or the index alone, for a rank-1 tile) of element ``e`` of a tile of
    ``shape``, row-major."""
    if len(shape) == 2:
        cols = body.const(shape[1])
        return [body.arith("floordiv", e, cols), body.arith("mod", e, cols)]
    return [e]


def _coordinates(body: _Loop, e: Value, op: Op, indices: Value, offsets: list,
                 shape: tuple) -> list:
    """Tensor coordinates of element ``e`` of a tile of ``shape``: its index along ``axis``
    (the index tile's element ``e``, or its row's for whole rows), the element's own position
    along the other axis, each plus the window's offset."""
    at = position(body, e, shape)
    ix = body.getval(indices, e if len(indices.type.shape) == len(shape) else at[0])
    ix = body.emit("arith.cast", [ix], [ScalarType(INDEX)], {"dtype": INDEX}).result
    axis = op.attrs["axis"]
    coords = [body.arith("add", off, ix if a == axis else at[a])
              for a, off in enumerate(offsets)]
    return [never_before(body, op.operands[0], a, c) for a, c in enumerate(coords)]


def never_before(body: _Loop, tensor: Value, axis: int, c: Value) -> Value:
    """A negative coordinate becomes the tensor's extent: the chip's partition view would
    start before the tensor (its clipping only cuts at the end), while one at the extent
    is empty, so the load reads padding and the store writes nothing."""
    extent = body.emit("tensor.dim", [tensor], [ScalarType(INDEX)], {"axis": axis}).result
    below = body.emit("arith.cmp", [c, body.const(0)], [ScalarType(dt.bool_)],
                      {"pred": "lt"}).result
    return body.emit("arith.select", [below, extent, c], [ScalarType(INDEX)]).result


def _element_loop(n: int, carried: Value, build, loc) -> tuple[list, Op]:
    """``for e in range(n): carried = build(body, e, carried)``."""
    pre = _Loop(loc)
    lb, ub, step = pre.const(0), pre.const(n), pre.const(1)
    e = Value(ScalarType(INDEX), "e")
    arg = Value(carried.type, "acc")
    body = _Loop(loc)
    out = build(body, e, arg)
    body.emit("scf.yield", [out])
    loop = Op("scf.for", [lb, ub, step, carried], [carried.type],
              blocks=[Block([e, arg], body.ops)], loc=loc)
    return pre.ops, loop


def load_elements(tensor: Value, ty: TileType, pad, coords, loc) -> tuple[list, Value]:
    """(ops, the tile): a ``ty`` tile read element by element, element ``e`` from the
    one-element window at ``coords(body, e)`` (``pad`` where that lies outside)."""
    init = Op("tile.full", [], [ty], {"value": _typed(pad, ty.dtype)}, loc=loc)
    one = (1,) * len(ty.shape)

    def build(body, e, acc):
        elem = body.emit("tile.load", [tensor] + coords(body, e), [TileType(ty.dtype, one)],
                         {"shape": one, "padding": pad, CHECKED: True}).result
        v = body.getval(elem, body.const(0))
        return body.emit("tile.setval", [acc, e, v], [ty]).result

    pre, loop = _element_loop(ty.numel, init.result, build, loc)
    return [init] + pre + [loop], loop.result


def store_elements(tensor: Value, value: Value, atomic, coords, loc) -> list:
    """The ops writing tile ``value`` element by element, element ``e`` to the one-element
    window at ``coords(body, e)`` (dropped where that lies outside; ``atomic``: "add")."""
    one = TileType(value.type.dtype, (1,) * len(value.type.shape))
    init = Op("tile.full", [], [one], {"value": _typed(0, one.dtype)}, loc=loc)
    attrs = {"atomic": atomic, CHECKED: True} if atomic else {CHECKED: True}

    def build(body, e, elem):
        at = coords(body, e)
        v = body.getval(value, e)
        elem = body.emit("tile.setval", [elem, body.const(0), v], [one]).result
        body.emit("tile.store", [tensor] + at + [elem], attrs=attrs)
        return elem

    pre, loop = _element_loop(value.type.numel, init.result, build, loc)
    return [init] + pre + [loop]


def gather(op: Op):
    if by_rows(op):
        return gather_rows(op)
    return gather_elements(op)


def gather_elements(op: Op):
    tensor, indices, *offsets = op.operands
    shape = op.result.type.shape
    return load_elements(tensor, op.result.type, op.attrs.get("padding", 0),
                         lambda body, e: _coordinates(body, e, op, indices, offsets, shape),
                         op.loc)


def scatter(op: Op):
    if by_rows(op):
        return scatter_rows(op), None
    return scatter_elements(op)


def scatter_elements(op: Op):
    tensor, indices, value, *offsets = op.operands
    shape = value.type.shape
    return store_elements(tensor, value, op.attrs.get("reduce"),
                          lambda body, e: _coordinates(body, e, op, indices, offsets, shape),
                          op.loc), None


# -- whole rows: one transfer a row ---------------------------------------------------------

def is_rows(op: Op) -> bool:
    """A gather or scatter of whole rows (a rank-1 index tile into a rank-2 tensor)."""
    return len(op.operands[1].type.shape) < op.operands[0].type.rank


def by_rows(op: Op) -> bool:
    """Whole rows moved one transfer each: unless one column wide, when the tile is a
    column whose rows (one element each) do not start on the 32 bytes a transfer needs."""
    shape = (op.result if op.results else op.operands[2]).type.shape
    return is_rows(op) and (shape[1] > 1 or shape[0] == 1)


def _row_loop(op: Op, carried: Value | None, build) -> tuple[list, Value | None]:
    """``for r in range(rows)``: ``build(body, r, the tensor row, carried)`` with the row the
    index tile's element r names, plus the window's row offset; a negative row moves to the
    tensor's extent (the transfer is then empty: padding read, nothing written)."""
    tensor, indices = op.operands[0], op.operands[1]
    row0 = op.operands[-2]

    def body_fn(body, r, acc):
        ix = body.emit("arith.cast", [body.getval(indices, r)], [ScalarType(INDEX)],
                       {"dtype": INDEX}).result
        row = never_before(body, tensor, 0, body.arith("add", row0, ix))
        return build(body, r, row, acc)

    if carried is None:        # a scatter carries nothing: an index-typed dummy
        pre = _Loop(op.loc)
        carried = pre.const(0)
        ops, loop = _element_loop(indices.type.shape[0], carried, body_fn, op.loc)
        return pre.ops + ops + [loop], None
    ops, loop = _element_loop(indices.type.shape[0], carried, body_fn, op.loc)
    return ops + [loop], loop.result


def gather_rows(op: Op):
    """The result filled with the padding once, then each row one load into row r
    (``tile.load_row``), which writes the part of the row inside the tensor only: no
    padding work per row, so the loads stream on MTE2 with nothing between them."""
    ty, col0 = op.result.type, op.operands[-1]
    pad = op.attrs.get("padding", 0)
    init = Op("tile.full", [], [ty], {"value": _typed(pad, ty.dtype)}, loc=op.loc)
    attrs = {"padding": pad, CHECKED: True}

    def build(body, r, row, acc):
        return body.emit("tile.load_row", [acc, r, op.operands[0], row, col0], [ty],
                         attrs).result
    ops, result = _row_loop(op, init.result, build)
    return [init] + ops, result


def scatter_rows(op: Op) -> list:
    """Row r of the value stored at the row its index names (``tile.store_row``), in order,
    so a later duplicate wins (or adds, atomically)."""
    tensor, _, value, _, col0 = op.operands
    attrs = {CHECKED: True}
    if op.attrs.get("reduce"):
        attrs["atomic"] = op.attrs["reduce"]

    def build(body, r, row, carried):
        body.emit("tile.store_row", [tensor, row, col0, value, r], attrs=attrs)
        return carried
    return _row_loop(op, None, build)[0]


def _typed(value, d):
    return float(value) if d.is_floating else int(value)


RULES = {"tile.gather": gather, "tile.scatter": scatter}
