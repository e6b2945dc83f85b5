"""Elementwise fusion for the host simulation.

Runs of consecutive vector instructions over tiles of one shape (elementwise ops, casts,
selects, fills, row/column expands) are marked as one group; the backend then computes the
whole run in a single loop with values kept in registers, so a softmax reads its row once.
The PTO program is unchanged (one instruction each, every tile in UB as the real chip needs):
this is how our simulator executes the instructions, not a change to what the NPU would do.

A result is "internal" (never stored) when every reader is later in the same group. Marking
runs before memory planning, which keeps every tile a group reads from outside alive until the
group's last op, so nothing the host writes in a group can clobber what the group still reads.
An op that does not depend on the open group and would only interrupt it (a reshape of a weight
row, a scalar computation) is moved in front of the group.
"""
from __future__ import annotations

from ..ir import VEC, Block, Module, Op, users
from ..pto import view2d

FUSABLE = {"tile.binary", "tile.unary", "tile.cast", "tile.where", "tile.full",
           "tile.broadcast", "tile.mov", "tile.load", "tile.reshape", "tile.col_expand",
           "tile.row_expand"}


def _shape2d(v):
    return view2d(v.type.shape)


def _closing_store(op: Op) -> bool:
    """A plain (non-atomic) store of a tile: it can end a group (written to GM directly)."""
    return op.name == "tile.store" and not op.attrs.get("atomic") and \
        op.operands[-1].type.space == VEC


def _row_reduction(op: Op) -> bool:
    """A sum/max/min/prod along the last axis: it can end a group (accumulated in registers)."""
    return (op.name == "tile.reduce" and op.attrs["op"] in ("sum", "max", "min", "prod")
            and op.attrs["axis"] == len(op.operands[0].type.shape) - 1
            and op.result.type.space == VEC)


def _fusable(op: Op) -> bool:
    if op.name not in FUSABLE or len(op.results) != 1:
        return False
    r = op.result
    if not r.is_tile or r.type.space != VEC:
        return False
    if op.name == "tile.mov" and (op.attrs.get("transpose") or
                                  op.operands[0].type.space != VEC):
        return False
    if op.name == "tile.reshape" and _shape2d(op.operands[0]) != _shape2d(op.result):
        return False          # only a reshape that keeps the 2-D view, e.g. (N,) -> (1, N)
    return all(not v.is_tile or v.type.space == VEC for v in op.operands)


def _hoistable(group: list, op: Op) -> bool:
    """Should ``op`` run before the open group instead of ending it? When it is pure, reads
    nothing the group computes, and is scalar work or a smaller tile (a weight row's reshape):
    a larger tile starts a group of its own."""
    if op.blocks or any(v.owner in group for v in op.operands):
        return False
    if op.name.startswith("arith."):
        return True
    return op.name in FUSABLE and op.name != "tile.load" and \
        op.result.type.numel < group[0].result.type.numel


def _groups(block: Block):
    """Split the block's ops into groups (lists of fusable ops) and single ops, keeping pure
    scalar ops that a group does not depend on in front of it."""
    out, group, hoisted = [], [], []

    def close():
        nonlocal group, hoisted
        out.extend(hoisted)
        if len(group) > 1:
            out.append(group)
        else:
            out.extend(group)
        group, hoisted = [], []

    for op in block.ops:
        if group and _closing_store(op) and \
                _shape2d(op.operands[-1]) == _shape2d(group[0].result):
            group.append(op)       # a store closes its group
            close()
        elif group and _row_reduction(op) and \
                _shape2d(op.operands[0]) == _shape2d(group[0].result):
            group.append(op)       # a row reduction closes its group
            close()
        elif _fusable(op) and (not group or _shape2d(op.result) == _shape2d(group[0].result)):
            group.append(op)
        elif group and _hoistable(group, op):
            hoisted.append(op)
        else:
            close()
            if _fusable(op):
                group.append(op)
            else:
                out.append(op)
    close()
    return out


def _mark(block: Block, uses, counter: list) -> None:
    new_ops = []
    for item in _groups(block):
        if isinstance(item, list):
            counter[0] += 1
            members = set(map(id, item))
            for op in item:
                op.attrs["_fuse"] = counter[0]
                if not op.results:
                    continue
                readers = uses.get(op.result, [])
                if readers and all(id(u) in members and item.index(u) > item.index(op)
                                   for u in readers):
                    op.attrs["_internal"] = True
            new_ops.extend(item)
        else:
            new_ops.append(item)
            for b in item.blocks:
                _mark(b, uses, counter)
    block.ops[:] = new_ops


def fuse_elementwise(module: Module) -> Module:
    body = module.kernel.body
    _mark(body, users(body), [0])
    return module
