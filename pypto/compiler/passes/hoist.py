"""Loop-invariant vector work moved in front of its loop.

A program's loop that reads the same weight row every iteration (RMSNorm's and LayerNorm's
``w`` and ``b``, a bias) loads and converts it once per iteration as written; in the
persistent launch form (``persistent.py``) that is once per program, a third of RMSNorm's
loads at two rows a program. Hoisted, the row is loaded and converted once per core and kept
in the UB for the loop.

What moves: an op of the loop's own body (not one nested in an ``if``) whose operands are all
defined before the loop, that has no effect but its result, and that is vector or scalar work
(``MOVABLE_TILE_OPS``, the pure scalar ops CSE merges). Loads move only from tensors the kernel never writes (a store in the loop
could change what they read). A tile updated in place (a matmul's accumulator, ``setval``'s
tile) or carried into or round a loop stays (a zeros tile an inner loop accumulates into
must start at zero each outer iteration), as does integer division (the loop may run zero
times and its divisor be zero then). Inner loops first, so work invariant in two loops
leaves both.

A hoisted tile is alive for the whole loop, so it can make a plan overflow that fitted:
``module.facts["hoisted"]`` counts the moved ops and ``pipeline`` builds again without this
pass (``module.facts["hoist"] = False``) when such a plan overflows.
"""
from __future__ import annotations

from ..ir import GM_WRITES, VEC, Block, Module, Op, walk
from .cse import pure_scalar
from .memory_plan import IN_PLACE

MOVABLE_TILE_OPS = {"tile.load", "tile.full", "tile.binary", "tile.unary", "tile.cast",
                    "tile.where", "tile.broadcast", "tile.col_expand", "tile.row_expand",
                    "tile.reshape", "tile.bitcast", "tile.arange", "tile.reduce", "tile.mov"}
# integer division by a divisor that may be zero when the loop does not run
STAYS = {"arith.div", "arith.floordiv", "arith.mod"}
# op -> its operand updated in place: a matmul's accumulator, the tile IN_PLACE ops rewrite
UPDATED_IN_PLACE = {"tile.matmul": 2, **dict.fromkeys(IN_PLACE, 0)}


def hoist_invariants(module: Module) -> Module:
    """The move above, unless ``module.facts["hoist"]`` is False."""
    if module.facts.get("hoist", True):
        module.facts["hoisted"] = _hoist(module.kernel.body, _pinned(module.kernel.body))
    return module


def _hoist(block: Block, pinned: set) -> int:
    """Hoists out of every loop under ``block``, inner loops first; the ops moved."""
    moved = 0
    for op in list(block.ops):
        moved += sum(_hoist(inner, pinned) for inner in op.blocks)
        if op.name == "scf.for":
            hoisted = _invariants(op.blocks[0], pinned)
            at = block.ops.index(op)
            block.ops[at:at] = hoisted
            moved += len(hoisted)
    return moved


def _invariants(body: Block, pinned: set) -> list[Op]:
    """The ops of a loop's ``body`` that may run once before it, removed from the body."""
    inside = {a.id for a in body.args}
    hoisted, kept = [], []
    for op in body.ops:
        if _movable(op, pinned) and not any(v.id in inside for v in op.operands):
            hoisted.append(op)
            continue
        kept.append(op)
        inside.update(r.id for o in [op, *(i for b in op.blocks for i in walk(b))]
                      for r in o.results)
    body.ops[:] = kept
    return hoisted


def _movable(op: Op, pinned: set) -> bool:
    if op.blocks or any(r.id in pinned for r in op.results) or op.name in STAYS:
        return False
    if pure_scalar(op):
        return True
    if op.name not in MOVABLE_TILE_OPS or \
            op.name == "tile.load" and op.operands[0].id in pinned:
        return False
    return all(r.is_tile and r.type.space == VEC for r in op.results) and \
        all(not v.is_tile or v.type.space == VEC for v in op.operands)


def _pinned(body: Block) -> set:
    """Ids that must stay where they are: tensors the kernel writes, tiles updated in place
    (and what they view, through bitcasts and reshapes), values a loop carries in or out
    (they share the buffer the loop updates)."""
    pinned = set()
    for op in walk(body):
        if op.name in GM_WRITES:
            pinned.add(op.operands[0].id)
        if op.name in ("scf.yield", "scf.while"):
            pinned.update(v.id for v in op.operands)
        if op.name == "scf.for":          # its inits share the carried values' buffers
            pinned.update(v.id for v in op.operands[3:])
        index = UPDATED_IN_PLACE.get(op.name, len(op.operands))
        v = op.operands[index] if index < len(op.operands) else None
        while v is not None:                # and the tiles it views
            pinned.add(v.id)
            owner = v.owner
            v = owner.operands[0] if owner is not None and owner.name in (
                "tile.bitcast", "tile.reshape") else None
    return pinned
