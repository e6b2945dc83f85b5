"""Windows that may start before their tensor.

A2/A3 cannot move one: the partition view a TLOAD or TSTORE takes is clipped at the tensor's
end only, and a UB tile moves in 32-byte steps, so the part of a window inside the tensor
cannot land a few columns into the tile. A load or store whose row or column offset the
compiler cannot bound below by 0 (``Bounds``) therefore checks it at run time: when both
are, the window moves as it is; else element by element (``legalize_indexed``'s loop: each element a
one-element window, a negative coordinate moved to the tensor's extent so it reads the
padding or writes nothing). The slow path is the boundary blocks' only: a halo or a causal
shift pays it on the first blocks, not on the others. A kernel that orders its own pipes
(``auto_sync=False``) keeps its windows as written: its flags cover what it wrote.
"""
from __future__ import annotations

import warnings

from ...errors import CheckedWindowWarning
from ...language import dtypes as dt
from ..ir import GRID_PARAMS, Block, Module, Op, ScalarType, Value
from .legalize_indexed import (CHECKED, _Loop, gather_elements, is_rows, load_elements,
                               never_before, position, scatter_elements, store_elements)

# a gather or scatter of whole rows whose column offset may be negative goes element by
# element when it is, as any window that starts before its tensor
ROWS = {"tile.gather": gather_elements, "tile.scatter": scatter_elements}


class Bounds:
    """Lower bounds of a kernel's index values, each worked out once: a number the value is
    never below, or None. Constants, block ids (0), the block count and a persistent kernel's
    grid extents (1), tensor extents (0),
    loop counters (their start, when they step up), and what sums, products, differences with
    a constant, quotients, remainders, minima and maxima of such keep."""

    def __init__(self, module: Module):
        self.counters = {}                     # id of a loop counter -> (start, step)
        self.known: dict = {}
        self.cube_operands: set = set()        # ids of tiles a matmul reads

        def walk(block: Block):
            for op in block.ops:
                if op.name == "scf.for" and op.blocks:
                    self.counters[id(op.blocks[0].args[0])] = (op.operands[0], op.operands[2])
                if op.name == "tile.matmul":
                    self.cube_operands.update(id(v) for v in op.operands[:2])
                for b in op.blocks:
                    walk(b)
        walk(module.kernel.body)

    def nonnegative(self, v: Value) -> bool:
        low = self.low(v)
        return low is not None and low >= 0

    def low(self, v: Value):
        if id(v) not in self.known:
            self.known[id(v)] = None           # a cycle through a loop counter: unknown
            self.known[id(v)] = self._low(v)
        return self.known[id(v)]

    def _low(self, v: Value):
        op = v.owner
        if op is None:
            bounds = self.counters.get(id(v))
            if bounds is None:
                return 1 if v.hint in GRID_PARAMS else None
            start, step = (self.low(x) for x in bounds)
            return start if step is not None and step >= 0 else None
        name, args = op.name, op.operands
        if name == "arith.constant":
            value = op.attrs.get("value")
            return value if isinstance(value, (int, float)) else None
        if name in ("pto.program_id", "tensor.dim"):
            return 0
        if name == "pto.num_programs":
            return 1
        if name == "arith.cast":
            return self.low(args[0])
        lows = [self.low(x) for x in (args[1:] if name == "arith.select" else args)]
        if name == "arith.max":
            known = [x for x in lows if x is not None]
            return max(known) if known else None
        if name == "arith.sub":                    # a - c, for a constant c
            c = args[1].owner
            if lows[0] is None or c is None or c.name != "arith.constant":
                return None
            return lows[0] - c.attrs["value"]
        if None in lows:
            return None
        if name in ("arith.add", "arith.min", "arith.select"):
            return sum(lows) if name == "arith.add" else min(lows)
        if name == "arith.mul" and all(x >= 0 for x in lows):
            return lows[0] * lows[1]
        if name in ("arith.floordiv", "arith.mod") and lows[0] >= 0 and lows[1] >= 1:
            return 0
        return None


def rule(op: Op, bounds: Bounds):
    """The checked form of a load or store that may start before its tensor, or None. A
    ``padding=None`` load is the user's promise that its window lies inside; a layout
    tensor's windows are whole fractals or pixels, clipped by the printer."""
    if op.attrs.get(CHECKED):
        return None
    if op.name in ROWS and is_rows(op):
        return _checked_rows(op, bounds)
    if op.name not in ("tile.load", "tile.store"):
        return None
    if op.name == "tile.load" and op.attrs.get("padding", 0) is None:
        return None
    tensor = op.operands[0]
    if tensor.type.layout != "ND":
        return None
    # the last two offsets (one for a rank-1 tensor) place the window; the leading ones pick
    # a plane, which the printer clamps into the tensor
    offsets = op.operands[1:1 + tensor.type.rank]
    lead = max(0, len(offsets) - 2)
    unsure = [o for o in offsets[lead:] if not bounds.nonnegative(o)]
    if not unsure:
        return None

    def coords(body, e):
        """The tensor coordinates of element ``e`` of the window; a negative one moves to
        the tensor's extent."""
        at = position(body, e, (op.result if op.results else op.operands[-1]).type.shape)
        inside = [body.arith("add", o, p) for o, p in zip(offsets[lead:], at)]
        return list(offsets[:lead]) + [never_before(body, tensor, lead + a, c)
                                       for a, c in enumerate(inside)]

    if op.results and id(op.result) in bounds.cube_operands:
        _warn_cube_operand(op)
    if op.results:
        pad = op.attrs.get("padding", 0)
        slow, value = load_elements(tensor, op.result.type, pad, coords, op.loc)
        return _branch(op, unsure, slow, [value])
    return _branch(op, unsure, store_elements(tensor, op.operands[-1], op.attrs.get("atomic"),
                                              coords, op.loc), [])


def _warn_cube_operand(op: Op) -> None:
    warnings.warn(CheckedWindowWarning(
        f"{op.loc}: this matmul operand's window may start before its tensor (an offset the "
        "compiler cannot bound below by 0, e.g. built from an integer argument), so it is "
        "checked at run time and loaded through the vector core (GM -> UB -> GM -> L1). "
        "Build offsets from block ids, loop counters and tensor extents (q.shape[0] // "
        "pl.num_programs(0)), clamp them with max(..., 0), or load with padding=None if the "
        "window always lies inside"), stacklevel=2)


def _checked_rows(op: Op, bounds: Bounds):
    """Whole rows move one transfer each when the column offset is not negative (the row
    itself is checked per row, legalize_indexed); else element by element."""
    col = op.operands[-1]
    if bounds.nonnegative(col):
        return None
    slow, value = ROWS[op.name](op)
    return _branch(op, [col], slow, [value] if op.results else [])


def _branch(op: Op, unsure: list, slow: list, yields: list):
    """``if all(unsure >= 0): op as it is, else: slow`` (its results ``yields``)."""
    pre = _Loop(op.loc)
    zero = pre.const(0)
    ok = None
    for o in unsure:
        ge = pre.emit("arith.cmp", [o, zero], [ScalarType(dt.bool_)], {"pred": "ge"}).result
        ok = ge if ok is None else pre.emit("arith.and", [ok, ge],
                                            [ScalarType(dt.bool_)]).result
    fast = Op(op.name, op.operands, [r.type for r in op.results],
              {**op.attrs, CHECKED: True}, loc=op.loc)
    then_block = Block([], [fast, Op("scf.yield", list(fast.results), loc=op.loc)])
    else_block = Block([], slow + [Op("scf.yield", yields, loc=op.loc)])
    branch = Op("scf.if", [ok], [r.type for r in op.results],
                blocks=[then_block, else_block], loc=op.loc)
    return pre.ops + [branch], (branch.result if op.results else None)
