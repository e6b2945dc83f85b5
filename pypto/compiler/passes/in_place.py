"""In-place results for the memory plan: which UB operand a vector op's result may overwrite.

A2/A3's vector instructions read each repeat before they write it (pto-isa's kernels run
TADD(x, x, y), TEXP(x, x)), so a result may take the buffer of an operand read for the last
time. The run-ahead rules go further for a loop whose vector part runs ahead of the cube
(pto/passes/run_ahead.py): they keep a hand-off's tile for the whole loop body and let a
fusion group's outside input and a loop-carried tile be overwritten in place.
"""
from __future__ import annotations

from ..ir import VEC, Block, Op, Value, walk
from ..pto.isa import EXPAND_OPS
from ..pto.lower import TILE_TO_PTO

# PTO instructions whose result may take the buffer of an operand read for the last time:
# the arithmetic pto-isa's own kernels run in place (TADD(x, x, y), TMULS(x, x, s), TEXP(x,
# x)). Not TRECIP / TPRELU (ptoas 0.60's A3 verifier: "src and dst to use different
# storage"), TANDS / TORS / TXORS (the same, any arch), nor conversions or selections.
IN_PLACE_OPCODES = frozenset({"tadd", "tsub", "tmul", "tdiv", "tmax", "tmin", "tadds", "tsubs",
                              "tmuls", "tdivs", "tmaxs", "tmins", "texp", "tlog", "tsqrt",
                              "tabs", "trelu",
                              *(f"t{axis}expand{op}" for axis in ("row", "col")
                                for op in EXPAND_OPS)})


def received_after_sending(block: Block, op: Op) -> bool:
    """Is ``op`` a load from the workspace (a hand-off from the other core) that comes after
    a hand-off of its own core (a store to the workspace from the same side: UB for the
    vector core) in the same block?"""
    def workspace(v) -> bool:
        return v.owner is not None and v.owner.name == "tensor.workspace"
    if op.name != "tile.load" or not workspace(op.operands[0]):
        return False
    vector = op.result.type.space == VEC
    before = block.ops[:block.ops.index(op)]
    return any(o.name == "tile.store" and workspace(o.operands[0]) and
               (o.operands[-1].type.space == VEC) == vector for o in before)


def share_dying_operands(body: Block, intervals: dict, classes, pos: dict,
                         group_end: dict, rules: bool) -> None:
    """An elementwise op's result takes the buffer of a UB operand it reads for the last time
    (same shape and element size; ``IN_PLACE_OPCODES``): A2/A3's vector instructions read
    each repeat before they write it, so ``y = relu(acc * s)`` needs one 128 x 256 fp32
    buffer, not two. Not for a result that shares a buffer already (loop-carried), or an op
    with a scratch tile. ``rules``: the run-ahead rules too (a fusion group's outside input
    given up to its last reader, a carried tile taken in place, a result whose class starts
    at the op); off when the pipeline builds again because run_ahead refused the plan."""
    moved: dict = {}                  # class root id -> the interval it was merged into
    last_read: dict = {}
    readers: dict = {}
    for op in walk(body):
        for v in op.operands:
            last_read[v.id] = pos[id(op)]
            readers.setdefault(v.id, []).append(op)

    def interval(v: Value):
        key = classes.find(v).id
        while key in moved:
            key = moved[key]
        return key, intervals.get(key)

    def dies_at(op: Op, v: Value, viv: list) -> bool:
        group = op.attrs.get("_fuse")
        if not rules:
            return group is None and viv[1] == pos[id(op)]
        if group is None:
            return viv[1] == pos[id(op)] or _carried_through(op, v, viv)
        return viv[1] <= group_end[group] and \
            all(last_read.get(u, -1) <= pos[id(op)] for u in viv[3])

    def _carried_through(op: Op, v: Value, viv: list) -> bool:
        # o * alpha over o, which the loop carries: the next write of o's buffer reads the
        # result and is elementwise, and nothing reads o's buffer in between
        r = op.result
        after = readers.get(r.id, [])
        if len(after) != 1 or last_read.get(v.id) != pos[id(op)]:
            return False
        nxt = after[0]
        if _opcode(nxt) not in IN_PLACE_OPCODES or "_fuse" in nxt.attrs or \
                interval(nxt.result)[0] != interval(v)[0]:
            return False
        lo, hi = pos[id(op)], pos[id(nxt)]
        return not any(lo < last_read.get(u, -1) < hi for u in viv[3])

    for op in walk(body):
        if "_scratch" in op.attrs or _opcode(op) not in IN_PLACE_OPCODES:
            continue
        r = op.result
        rkey, riv = interval(r)
        # a result kept from before its op (a stored tile that a double-buffered loop keeps
        # to itself, a loop-carried value) has its bytes for a reason: no sharing; one whose
        # class starts here (an `if`'s result) may share under the run-ahead rules
        if r.type.space != "vec" or riv is None or riv[0] != pos[id(op)] or \
                (len(riv[3]) != 1 and not rules):
            continue
        for v in op.operands:
            if not (v.is_tile and v.type.space == "vec" and v.type.shape == r.type.shape
                    and v.type.dtype.itemsize == r.type.dtype.itemsize):
                continue
            vkey, viv = interval(v)
            if viv is None or vkey == rkey or not dies_at(op, v, viv):
                continue
            viv[1] = max(viv[1], riv[1])
            viv[3].update(riv[3])
            moved[rkey] = vkey
            del intervals[rkey]
            break


def _opcode(op: Op) -> str | None:
    """The PTO instruction a one-to-one Tile IR op becomes (lower.TILE_TO_PTO), else None."""
    rule = TILE_TO_PTO.get(op.name) if op.name in ("tile.binary", "tile.unary",
                                                   "tile.col_expand", "tile.row_expand") else None
    return rule(op)[0] if rule is not None else None
