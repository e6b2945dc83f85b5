"""Narrow before widening: a max or min reduction (and the abs or neg in front of it) of a
tile just widened exactly (``x.to(float32)`` of float16 data) gives the same result in the
narrow type, where the vector unit does twice the elements a repeat. So it runs there and
only its small result is widened: a per-row int8 quantisation's ``max(abs(t))`` of a float16
row read as float32 costs ~40 % less. Both forms give identical bits (the widening is exact
and these ops only pick or negate an element), so the reference interpreter's meaning holds.

The rules are data: ``EXACT_WIDENING`` (source, destination) pairs, ``SELECTING`` the
reductions and ``ORDER_PRESERVING`` the unary ops that may run narrow, each only where the
narrow type is native (``legalize_types.VECTOR_TYPES``).
"""
from __future__ import annotations

from ...language import dtypes as dt
from ..ir import Block, Module, Op, TileType, blocks, replace_uses, users
from ..pto import view2d
from ..pto.lower import TILE_TO_PTO
from .legalize_types import VECTOR_TYPES
from .row_reduce import group_reducible

EXACT_WIDENING = {(dt.float16, dt.float32)}
SELECTING = ("max", "min")                            # reductions that return an element
ORDER_PRESERVING = ("abs", "neg")                     # unary ops exact in either type


def _narrow_chain(op: Op, readers: dict) -> list | None:
    """The ops from an exact widening cast to ``op`` (a selecting reduction): [cast,
    unary..., op], when every op between is read only by the next; else None."""
    chain = [op]
    x = op.operands[0]
    while x.owner is not None and x.owner.name == "tile.unary" and \
            x.owner.attrs.get("op") in ORDER_PRESERVING and len(readers.get(x, ())) == 1:
        chain.insert(0, x.owner)
        x = x.owner.operands[0]
    cast = x.owner
    if cast is None or cast.name != "tile.cast" or cast.attrs.get("rounding"):
        return None
    narrow = cast.operands[0].type.dtype
    if (narrow, x.type.dtype) not in EXACT_WIDENING or \
            group_reducible(x.type.dtype, view2d(x.type.shape)):
        return None                      # (pto-isa's fp32 group reduction beats float16's)
    natives = [VECTOR_TYPES.get(TILE_TO_PTO[o.name](o)[0], ()) for o in chain]
    return [cast, *chain] if all(narrow in n for n in natives) else None


def _rewrite(block: Block, chain: list, body: Block) -> None:
    """Rebuild ``chain`` on the cast's narrow operand and widen the reduction's result."""
    cast, *ops = chain
    value = cast.operands[0]
    new_ops = []
    for op in ops:
        new = Op(op.name, [value], [TileType(value.type.dtype, op.result.type.shape,
                                             op.result.type.space)], op.attrs, loc=op.loc)
        new_ops.append(new)
        value = new.result
    reduced = ops[-1]
    wide = reduced.result.type
    widen = Op("tile.cast", [value], [wide], {"dtype": wide.dtype}, loc=reduced.loc)
    at = block.ops.index(reduced)
    block.ops[at:at + 1] = [*new_ops, widen]
    for op in ops[:-1]:
        block.ops.remove(op)
    replace_uses(body, reduced.result, widen.result)


def narrow_before_widening(module: Module) -> Module:
    body = module.kernel.body
    readers = None                      # who reads what, found again after each rewrite
    for block in list(blocks(body)):
        for op in list(block.ops):
            if op.name == "tile.reduce" and op.attrs.get("op") in SELECTING:
                readers = readers or users(body)
                chain = _narrow_chain(op, readers)
                if chain is not None and all(o in block.ops for o in chain[1:]):
                    _rewrite(block, chain, body)
                    readers = None
    return module
