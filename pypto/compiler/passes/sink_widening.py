"""Widen late: a cast to a wider type (``pl.load(u).to(float32)`` of float16 data) moves down
its block to just before its first reader. Written where the user loads, the wide copy lives
through all the work between; moved, only the narrow source does (half the bytes), and the
buffer the wide value needs is often one another temporary has just freed. SwiGLU's
``v = pl.load(u).to(f32)`` then needs two fp32 tiles at a time instead of three, which lets
an 8 x 1376 tile double-buffer in the UB.

Only the order changes: a cast is pure and reads an SSA value, so any later point before its
first reader computes the same; casts keep their relative order. A vector op moved later on
the vector pipe costs no time (the pipe runs its instructions in order either way).
"""
from __future__ import annotations

from ..ir import Block, Module, Op, blocks


def sink_widening_casts(module: Module) -> Module:
    for block in list(blocks(module.kernel.body)):
        _sink(block)
    return module


def _widening(op: Op) -> bool:
    if op.name != "tile.cast" or not op.operands[0].is_tile:
        return False
    return op.result.type.dtype.itemsize > op.operands[0].type.dtype.itemsize


def _reads(op: Op) -> set:
    """Ids of the values ``op`` reads, its nested blocks' reads included."""
    ids = {v.id for v in op.operands}
    for b in op.blocks:
        for inner in b.ops:
            ids |= _reads(inner)
    return ids


def _sink(block: Block) -> None:
    """Each widening cast of ``block`` placed just before the first op that reads it."""
    waiting: dict[int, list[Op]] = {}       # result id -> the casts waiting for that reader
    order: list[Op] = []
    for op in block.ops:
        read = _reads(op)
        for rid in [r for r in waiting if r in read]:
            order.extend(waiting.pop(rid))
        if _widening(op) and op is not block.ops[-1]:
            waiting[op.result.id] = [op]
        else:
            order.append(op)
    # a cast nobody reads in this block (the terminator reads every yield) stays last
    order[-1:-1] = [op for ops in waiting.values() for op in ops]
    block.ops[:] = order
