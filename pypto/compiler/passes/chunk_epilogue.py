"""A matmul result's vector epilogue in row chunks, when it does not fit the UB whole.

A matmul result that vector code reads reaches the vector core through a GM workspace slot
(``memory_space._spill``): one load of the whole (R, C) tile, its elementwise chain, its
stores. At a GEMM's 128 x 256 fp32 tile that is 128 KiB a tile, and an activation with a
temporary or two (GELU, SiLU) does not fit the UB's 184 KiB. Every op of such an epilogue
works row by row, so it can run as a loop over chunks of h rows: the workspace load, the
chain and the stores each take h rows at row offset r. ``plan_memory_in_chunks`` asks for it
when the UB overflows, halving h until the plan fits. The epilogue may be at the top level or
in the body of a top-level loop (the persistent form's programs' loop, whose hand-off load
reads its FIFO slot's rows).
"""
from __future__ import annotations

import copy

from ...errors import BufferOverflow
from ...language import dtypes as dt
from ..ir import VEC, Block, Module, Op, ScalarType, TileType, Value, users
from .memory_plan import plan_memory
from .memory_space import EPILOGUE
# ops that compute each row of their result from the same row of their operands
ROW_LOCAL = ("tile.binary", "tile.unary", "tile.cast", "tile.where", "tile.col_expand",
             "tile.row_expand", "tile.broadcast", "tile.reduce", "tile.full")
MIN_ROWS = 8


def plan_memory_in_chunks(module: Module) -> Module:
    """``plan_memory``; on a UB overflow, the kernel's epilogues in chunks of half the rows,
    a quarter, ... until the plan fits (the first error when none does)."""
    loads = _loads(module.kernel.body)
    if not loads:
        return plan_memory(module)
    try:           # on a copy: a failed plan may have inserted copies and dropped fusion marks
        return plan_memory(_copy(module))
    except BufferOverflow as error:
        if error.space != VEC:
            raise
        first = error
    h = min(load.result.type.shape[0] for _, load in loads) // 2
    while h >= MIN_ROWS:
        trial = _copy(module)
        chunked = [chunk(block, load, h) for block, load in _loads(trial.kernel.body)]
        if not any(chunked):
            break
        try:
            return plan_memory(trial)
        except BufferOverflow as error:
            if error.space != VEC:
                raise
        h //= 2
    raise first


def _copy(module: Module) -> Module:
    """A copy planning may change (it places tiles, inserts copies), the target shared."""
    return copy.deepcopy(module, {id(module.target): module.target})


def _loads(body: Block) -> list[tuple[Block, Op]]:
    """(block, load) of the epilogue loads in ``body`` and in the bodies of its loops."""
    blocks = [body] + [op.blocks[0] for op in body.ops if op.name == "scf.for"]
    return [(b, op) for b in blocks for op in b.ops
            if op.name == "tile.load" and op.attrs.get(EPILOGUE)]


def chunk(body: Block, load: Op, h: int) -> bool:
    """Rewrite ``load``'s epilogue as a loop over chunks of ``h`` rows; False (nothing
    changed) when some op of it is not row by row or ``h`` does not divide the rows."""
    members = _epilogue(body, load)
    rows = load.result.type.shape[0]
    if members is None or rows % h:
        return False
    order = [op for op in body.ops if id(op) in members]
    first, last = body.ops.index(order[0]), body.ops.index(order[-1])
    # the epilogue's loop goes after the scalars computed among its ops, before the flags
    # set among them (the acknowledgement that the slot has been read comes after the loop)
    between = [op for op in body.ops[first:last] if id(op) not in members]
    flags = [op for op in between if op.name.startswith("pto.sync")]
    if any(op.blocks or any(v.is_tile for v in op.results) or op.name == "tile.store"
           for op in between if op not in flags):
        return False
    consts = [Op("arith.constant", [], [ScalarType(dt.int64)], {"value": v}, loc=load.loc)
              for v in (0, rows, h)]
    r = Value(ScalarType(dt.int64), "r")
    rows_at, inner, mapping = [], [], {}
    for op in order:
        inner.append(_chunked(op, r, h, mapping, rows_at))
    # the stores' row offsets first: the rest keeps its order (and its fusion groups)
    inner = rows_at + inner + [Op("scf.yield", [], loc=load.loc)]
    loop = Op("scf.for", [c.result for c in consts], [], blocks=[Block([r], inner)],
              loc=load.loc)
    body.ops[first:last + 1] = [op for op in between if op not in flags] + consts + [loop] + \
        flags
    return True


def _epilogue(body: Block, load: Op) -> set | None:
    """ids of ``load`` and every op its value reaches, when all are top-level, row by row
    over the same rows, and end in 2-D stores; else None."""
    use_map = users(body)
    top = {id(op) for op in body.ops}
    rows = load.result.type.shape[0]
    members, todo = {id(load)}, [load.result]
    while todo:
        for user in use_map.get(todo.pop(), ()):
            if id(user) in members:
                continue
            if id(user) not in top or not _row_local(user, rows):
                return None
            members.add(id(user))
            todo.extend(user.results)
    for op in body.ops:                  # constant tiles only the epilogue reads come along
        if op.name == "tile.full" and not op.operands and _row_local(op, rows) and \
                use_map.get(op.result) and all(id(u) in members for u in use_map[op.result]):
            members.add(id(op))
    inside = {v for op in body.ops if id(op) in members for v in op.results}
    for op in body.ops:
        if id(op) in members and op is not load:
            for v in op.operands:
                if v.is_tile and v not in inside and v.type.shape[0] != 1:
                    return None          # a full-height tile from outside the epilogue
    return members


def _row_local(op: Op, rows: int) -> bool:
    if op.name == "tile.store":
        return len(op.operands) == 4                    # tensor, row, column, value
    if op.name not in ROW_LOCAL or op.blocks:
        return False
    if op.name == "tile.reduce" and op.attrs.get("axis") not in (1, -1):
        return False
    return all(len(r.type.shape) == 2 and r.type.shape[0] == rows for r in op.results)


def _chunked(op: Op, r: Value, h: int, mapping: dict, rows_at: list) -> Op:
    """``op`` over rows r .. r + h of its tiles (``mapping``: old value → chunk value; a
    load's or store's row offset + r goes to ``rows_at``)."""
    operands = [mapping.get(v, v) for v in op.operands]
    attrs = dict(op.attrs)
    if "shape" in attrs:
        attrs["shape"] = (h,) + tuple(attrs["shape"][1:])
    if op.name in ("tile.load", "tile.store"):
        row = Op("arith.add", [operands[1], r], [ScalarType(dt.int64)], loc=op.loc)
        rows_at.append(row)
        operands[1] = row.result
    types = [TileType(v.type.dtype, (h,) + tuple(v.type.shape[1:]), v.type.space)
             for v in op.results]
    new = Op(op.name, operands, types, attrs, loc=op.loc)
    for old, v in zip(op.results, new.results):
        v.hint = old.hint
        mapping[old] = v
    return new
