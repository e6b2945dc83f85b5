"""Masks without block-sized temporaries: attention's causal and window masks in the UB.

``where(cols <= rows, s, -inf)`` with ``cols = arange(0, N)[None, :] + n0`` and ``rows`` an
(M, 1) column is, written out, two (M, N) int32 broadcasts, their compare and an (M, N) tile
of -inf: three block-sized tiles beside ``s``, which is why causal flash attention did not
fit the UB at 128 x 256 blocks. Two rewrites take them away:

- **Positions against positions.** ``(sa + j) + x <op> (sb + i) + y`` (j < N the row's arange,
  i < M the column's, x and y scalars) is ``(sa + j) <op> c_i`` with ``c = sb + i + d``, d
  = y - x taken in int64 (nothing wraps) and clamped to [sa - 1 - sb - M, sa + N - sb]:
  every outcome stays (a clamped c is still below or above every sa + j), and every value
  is within 2048, exact in float16. The compare runs on ``(sa + j) - c``: one float16
  broadcast of the row (half the bytes of int32) with the column subtracted in place
  (``expand.py`` makes that a ``trowexpandsub``), compared with 0 (TCMPS).
- **A select against a constant** takes the constant as a scalar: ``where(mask, x,
  full(c))`` is TSELS (mask, x, c) with no tile of c.

Runs after legalize-types (every op it emits is native) and before ``expand.py``.
"""
from __future__ import annotations

from ...language import dtypes as dt
from ..elementwise import BINARY, SWAPPED
from ..ir import Module, Op, ScalarType, TileType, Value, blocks, walk
from .dce import dead_code_elimination
from .legalize import Emitter, rewrite_block

EXACT_F16 = 2048          # float16 holds every integer up to 2048 (j, c and j - c)
TSELS_TYPES = (dt.float16, dt.float32, dt.int16, dt.int32)   # pto-isa a2a3/TSels.hpp


def narrow_masks(module: Module) -> Module:
    body = module.kernel.body
    readers: dict = {}
    for op in walk(body):
        for v in op.operands:
            readers[v.id] = readers.get(v.id, 0) + 1

    narrowed: dict = {}              # id of a key row -> its float16 cast, made once

    def rule(op: Op):
        if op.name == "tile.binary":
            return _row_against_column(op, narrowed)
        if op.name == "tile.where":
            return _select_scalar(op, readers)
        return None

    rewrite_block(body, body, rule)
    for row, cast in narrowed.values():         # right after the row: outside the loops
        for block in blocks(body):
            if row.owner in block.ops:
                block.ops.insert(block.ops.index(row.owner) + 1, cast)
                break
    return dead_code_elimination(module)


def _broadcast_source(v: Value):
    owner = v.owner
    return owner.operands[0] if owner is not None and owner.name == "tile.broadcast" else None


def _positions(v: Value):
    """(the (1, N) or (M, 1) tile of ``arange(start, ...)``, start, scalar or None) when ``v``
    is that tile plus an integer scalar of its dtype (or the tile alone), else None."""
    owner, scalar = v.owner, None
    if owner is not None and owner.name == "tile.binary" and owner.attrs.get("op") == "add":
        tiles = [x for x in owner.operands if x.is_tile]
        scalars = [x for x in owner.operands if not x.is_tile]
        if len(tiles) != 1 or len(scalars) != 1 or scalars[0].type.dtype != v.type.dtype:
            return None
        v, scalar = tiles[0], scalars[0]
        owner = v.owner
    if owner is None or owner.name != "tile.reshape":
        return None
    src = owner.operands[0].owner
    if src is None or src.name != "tile.arange":
        return None
    return v, src.attrs["start"], scalar


def _int64(e: Emitter, x: Value | None) -> Value:
    """``x`` as an int64 scalar (0 for None), from before its cast to int32 where it was one."""
    if x is None:
        return e.const(0, dt.int64)
    if x.owner is not None and x.owner.name == "arith.cast" and \
            x.owner.operands[0].type.dtype == dt.int64:
        return x.owner.operands[0]
    return e.emit("arith.cast", [x], ScalarType(dt.int64), {"dtype": dt.int64})


def _int64_op(e: Emitter, name: str, a: Value, b) -> Value:
    b = b if isinstance(b, Value) else e.const(b, dt.int64)
    return e.emit(f"arith.{name}", [a, b], ScalarType(dt.int64))


def _row_against_column(op: Op, narrowed: dict):
    """``(sa + j) + x <op> (sb + i) + y`` over an (M, N) block (j < N and i < M the two
    aranges) as a float16 compare of ``(sa + j) - (sb + i + d)`` with 0, d = y - x in int64
    (no wrap) clamped to [sa - 1 - sb - M, sa + N - sb]: every value within 2048."""
    spec = BINARY.get(op.attrs.get("op"))
    shape = op.result.type.shape
    if spec is None or spec.result != "bool" or len(shape) != 2 or 1 in shape:
        return None
    m, n = shape
    cmp = op.attrs["op"]
    a, b = (_broadcast_source(v) for v in op.operands)
    if a is None or b is None:
        return None
    if a.type.shape == (m, 1) and b.type.shape == (1, n):
        a, b, cmp = b, a, SWAPPED.get(cmp, cmp)          # the row on the left
    if a.type.shape != (1, n) or b.type.shape != (m, 1) or \
            a.type.dtype not in (dt.int32, dt.int16) or b.type.dtype not in (dt.int32, dt.int16):
        return None
    row, col = _positions(a), _positions(b)
    if row is None or col is None or abs(row[1]) + n + m + 1 > EXACT_F16 or \
            abs(col[1]) + m > EXACT_F16:
        return None
    (j, sa, x), (i, sb, y) = row, col          # i holds sb + i
    e = Emitter(op.loc)
    d = _int64_op(e, "sub", _int64(e, y), _int64(e, x))
    # clamped so that sb + i + d stays small, then in i's dtype: no scalar float conversion
    # (PTOAS 0.60 writes sitofp(subi(a, b)) as (float)((int64_t)(uint64_t)a - (uint64_t)b),
    # an unsigned difference: docs/pto.md)
    d = _int64_op(e, "max", _int64_op(e, "min", d, sa + n - sb), sa - 1 - sb - m)
    d = e.emit("arith.cast", [d], ScalarType(i.type.dtype), {"dtype": i.type.dtype})
    c = e.cast(e.binary("add", i, d), dt.float16)      # within [sa - 1 - m, sa + n + m]
    if id(j) not in narrowed:
        narrowed[id(j)] = (j, Op("tile.cast", [j], [TileType(dt.float16, j.type.shape)],
                                 {"dtype": dt.float16}, loc=op.loc))
    spread = [e.emit("tile.broadcast", [v], TileType(dt.float16, shape), {"shape": shape})
              for v in (narrowed[id(j)][1].result, c)]
    return e.ops, e.binary(cmp, e.binary("sub", *spread), 0.0)


def _select_scalar(op: Op, readers: dict):
    """``where(mask, x, full(c))`` → ``where(mask, x, c)`` (TSELS), the full tile read by
    nothing else."""
    cond, x, y = op.operands
    full = y.owner if y.is_tile else None
    if full is None or full.name != "tile.full" or readers.get(y.id) != 1 or \
            not x.is_tile or op.result.type.dtype not in TSELS_TYPES or \
            len(op.result.type.shape) != 2 or \
            (full.operands and full.operands[0].type.dtype != y.type.dtype):
        return None         # (TSELS's scalar has the data's type)
    e = Emitter(op.loc)
    scalar = full.operands[0] if full.operands else e.const(full.attrs["value"],
                                                             y.type.dtype)
    return e.ops, e.emit("tile.where", [cond, x, scalar], op.result.type)
