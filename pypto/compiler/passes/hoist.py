"""Loop-invariant vector work moved in front of its loop.

A program's loop that reads the same weight row every iteration (RMSNorm's and LayerNorm's
``w`` and ``b``, a bias) loads and converts it once per iteration as written; in the
persistent launch form (``persistent.py``) that is once per program, a third of RMSNorm's
loads at two rows a program. Hoisted, the row is loaded and converted once per core and kept
in the UB for the loop.

What moves: an op of the loop's own body (not one nested in an ``if``) whose operands are all
defined before the loop, that has no effect but its result, and that is vector or scalar work
(``MOVABLE_*``). Loads move only from tensors the kernel never writes (a store in the loop
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

from ..ir import VEC, Block, Module, Op, walk

MOVABLE_TILE_OPS = {"tile.load", "tile.full", "tile.binary",
                    "tile.unary", "tile.cast", "tile.where", "tile.broadcast",
                    "tile.col_expand", "tile.row_expand", "tile.reshape", "tile.bitcast",
                    "tile.arange", "tile.reduce", "tile.mov"}
MOVABLE_SCALAR_OPS = {"pto.program_id", "pto.num_programs", "tensor.dim"}
# integer division by a divisor that may be zero when the loop does not run
STAYS = {"arith.floordiv", "arith.floordivsi", "arith.divsi", "arith.mod"}
STORES = ("tile.store", "tile.scatter", "tile.store_row")
# ops updating their operand ``index`` in place: (op name, operand index)
UPDATED_IN_PLACE = (("tile.matmul", 2), ("tile.setval", 0), ("tile.load_row", 0))


def hoist_invariants(module: Module) -> Module:
    """The move above, unless ``module.facts["hoist"]`` is False."""
    if module.facts.get("hoist", True) is False:
        return module
    body = module.kernel.body
    pinned = _pinned(body)
    moved = [0]

    def visit(block: Block) -> None:
        for op in list(block.ops):
            for inner in op.blocks:
                visit(inner)
            if op.name == "scf.for":
                hoisted = _invariants(op, pinned)
                at = block.ops.index(op)
                block.ops[at:at] = hoisted
                moved[0] += len(hoisted)

    visit(body)
    module.facts["hoisted"] = moved[0]
    return module


def _invariants(loop: Op, pinned: set) -> list[Op]:
    """The ops of ``loop``'s body that may run once before it, removed from the body."""
    body = loop.blocks[0]
    inside = {a.id for a in body.args}
    hoisted, kept = [], []
    for op in body.ops:
        if _movable(op, pinned) and not any(v.id in inside for v in op.operands):
            hoisted.append(op)
            continue
        kept.append(op)
        inside.update(r.id for o in [op, *_nested(op)] for r in o.results)
    body.ops[:] = kept
    return hoisted


def _nested(op: Op):
    for b in op.blocks:
        yield from walk(b)


def _movable(op: Op, pinned: set) -> bool:
    if op.blocks or any(r.id in pinned for r in op.results):
        return False
    if op.name.startswith("arith."):
        return op.name not in STAYS
    if op.name in MOVABLE_SCALAR_OPS:
        return True
    if op.name not in MOVABLE_TILE_OPS:
        return False
    if op.name == "tile.load" and op.operands[0].id in pinned:
        return False
    return all(r.is_tile and r.type.space == VEC for r in op.results) and \
        all(not v.is_tile or v.type.space == VEC for v in op.operands)


def _pinned(body: Block) -> set:
    """Ids that must stay where they are: tensors the kernel writes, tiles updated in place
    (and what they view, through bitcasts and reshapes), values a loop carries in or out
    (they share the buffer the loop updates)."""
    pinned = set()
    for op in walk(body):
        if op.name in STORES:
            pinned.add(op.operands[0].id)
        if op.name in ("scf.yield", "scf.while"):
            pinned.update(v.id for v in op.operands)
        if op.name == "scf.for":          # its inits share the carried values' buffers
            pinned.update(v.id for v in op.operands[3:])
        for name, index in UPDATED_IN_PLACE:
            if op.name == name and len(op.operands) > index:
                v = op.operands[index]
                while v is not None:
                    pinned.add(v.id)
                    owner = v.owner
                    v = owner.operands[0] if owner is not None and owner.name in (
                        "tile.bitcast", "tile.reshape") else None
    return pinned
