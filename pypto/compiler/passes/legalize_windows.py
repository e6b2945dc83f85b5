"""Windows that may start before their tensor.

A2/A3 cannot move one: the partition view a TLOAD or TSTORE takes is clipped at the tensor's
end only, and a UB tile moves in 32-byte steps, so the part of a window inside the tensor
cannot land a few columns into the tile. A load or store whose row or column offset the
compiler cannot prove non-negative (``nonnegative``) therefore checks it at run time: when both are, the
window moves as it is; else element by element (``legalize_indexed``'s loop: each element a
one-element window, a negative coordinate moved to the tensor's extent so it reads the
padding or writes nothing). The slow path is the boundary blocks' only: a halo or a causal
shift pays it on the first blocks, not on the others. A kernel that orders its own pipes
(``auto_sync=False``) keeps its windows as written: its flags cover what it wrote.
"""
from __future__ import annotations

from ...language import dtypes as dt
from ..ir import Block, Module, Op, ScalarType, Value
from .legalize_indexed import CHECKED, _element_loop, _Loop, _never_before, _typed


def loop_counters(module: Module) -> dict:
    """id of each ``scf.for`` counter → (lower bound, step): the values it takes."""
    out = {}

    def walk(block: Block):
        for op in block.ops:
            if op.name == "scf.for" and op.blocks:
                out[id(op.blocks[0].args[0])] = (op.operands[0], op.operands[2])
            for b in op.blocks:
                walk(b)
    walk(module.kernel.body)
    return out


def nonnegative(v: Value, counters: dict) -> bool:
    """Is ``v`` >= 0 whatever the arguments? (``lower_bound``)"""
    low = lower_bound(v, counters)
    return low is not None and low >= 0


def lower_bound(v: Value, counters: dict, depth: int = 0):
    """A number ``v`` is never below, or None: constants, block ids (0), the block count (1),
    tensor extents (0), loop counters (their start, when they step up), and what sums,
    products, differences with a constant, quotients, remainders, minima and maxima of such
    keep."""
    if depth > 48:
        return None
    low = lambda x: lower_bound(x, counters, depth + 1)      # noqa: E731
    op = v.owner
    if op is None:
        bounds = counters.get(id(v))
        if bounds is None:
            return None
        start, step = (low(x) for x in bounds)
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
        return low(args[0])
    if name == "arith.select":
        lows = [low(x) for x in args[1:]]
        return None if None in lows else min(lows)
    lows = [low(x) for x in args]
    if name == "arith.max":
        known = [x for x in lows if x is not None]
        return max(known) if known else None
    if name == "arith.sub":                     # a - c, for a constant c
        c = args[1].owner
        if lows[0] is not None and c is not None and c.name == "arith.constant":
            return lows[0] - c.attrs["value"]
        return None
    if None in lows:
        return None
    if name in ("arith.add", "arith.min"):
        return sum(lows) if name == "arith.add" else min(lows)
    if name == "arith.mul" and all(x >= 0 for x in lows):
        return lows[0] * lows[1]
    if name in ("arith.floordiv", "arith.mod") and lows[0] >= 0 and lows[1] >= 1:
        return 0
    return None


def _window_offsets(op: Op) -> tuple[list, int]:
    """(offsets, how many lead them) of a load or store: its last two offsets (one for a
    rank-1 tensor) place the window; the leading ones pick a plane, which the printer clamps
    into the tensor already."""
    tensor = op.operands[0]
    offsets = op.operands[1:1 + tensor.type.rank]
    lead = max(0, len(offsets) - 2)
    return offsets, lead


def rule(op: Op, counters: dict):
    """The checked form of a load or store that may start before its tensor, or None."""
    if op.name not in ("tile.load", "tile.store") or op.attrs.get(CHECKED):
        return None
    if op.name == "tile.load" and op.attrs.get("padding", 0) is None:
        return None            # padding=None: the user promises the window is inside
    tensor = op.operands[0]
    if tensor.type.layout != "ND":
        return None
    offsets, lead = _window_offsets(op)
    unsure = [o for o in offsets[lead:] if not nonnegative(o, counters)]
    if not unsure:
        return None
    pre = _Loop(op.loc)
    zero = pre.const(0)
    ok = None
    for o in unsure:
        ge = pre.emit("arith.cmp", [o, zero], [ScalarType(dt.bool_)], {"pred": "ge"}).result
        ok = ge if ok is None else pre.emit("arith.and", [ok, ge],
                                            [ScalarType(dt.bool_)]).result
    fast = Op(op.name, op.operands, [r.type for r in op.results],
              {**op.attrs, CHECKED: True}, loc=op.loc)
    slow_ops, slow_value = (_load_elements if op.name == "tile.load" else
                            _store_elements)(op, offsets)
    results = [r.type for r in op.results]
    then_block = Block([], [fast, Op("scf.yield", list(fast.results), loc=op.loc)])
    else_block = Block([], slow_ops + [Op("scf.yield", [slow_value] if results else [],
                                          loc=op.loc)])
    branch = Op("scf.if", [ok], results, blocks=[then_block, else_block], loc=op.loc)
    return pre.ops + [branch], (branch.result if results else None)


def _coords(body: _Loop, op: Op, offsets: list, e: Value, shape: tuple) -> list:
    """The tensor coordinates of element ``e`` of the window, each negative one moved to
    the tensor's extent."""
    tensor = op.operands[0]
    if len(shape) == 2:
        cols = body.const(shape[1])
        position = [body.arith("floordiv", e, cols), body.arith("mod", e, cols)]
    else:
        position = [e]
    lead = len(offsets) - len(position)
    coords = list(offsets[:lead]) + [body.arith("add", o, p)
                                     for o, p in zip(offsets[lead:], position)]
    return [_never_before(body, tensor, a, c) if a >= lead else c
            for a, c in enumerate(coords)]


def _load_elements(op: Op, offsets: list):
    ty = op.result.type
    pad = op.attrs.get("padding")
    pad = 0 if pad is None else pad
    init = Op("tile.full", [], [ty], {"value": _typed(pad, ty.dtype)}, loc=op.loc)
    one = (1,) * len(ty.shape)

    def build(body, e, acc):
        coords = _coords(body, op, offsets, e, ty.shape)
        elem = body.emit("tile.load", [op.operands[0]] + coords,
                         [ty.__class__(ty.dtype, one)],
                         {"shape": one, "padding": pad, CHECKED: True}).result
        v = body.getval(elem, body.const(0))
        return body.emit("tile.setval", [acc, e, v], [ty]).result

    pre, loop = _element_loop_over(op, ty, init.result, build)
    return [init] + pre + [loop], loop.result


def _store_elements(op: Op, offsets: list):
    tensor, value = op.operands[0], op.operands[-1]
    ty = value.type
    one = ty.__class__(ty.dtype, (1,) * len(ty.shape))
    init = Op("tile.full", [], [one], {"value": _typed(0, ty.dtype)}, loc=op.loc)
    atomic = {"atomic": op.attrs["atomic"]} if op.attrs.get("atomic") else {}

    def build(body, e, elem):
        coords = _coords(body, op, offsets, e, ty.shape)
        v = body.getval(value, e)
        elem = body.emit("tile.setval", [elem, body.const(0), v], [one]).result
        body.emit("tile.store", [tensor] + coords + [elem], attrs={**atomic, CHECKED: True})
        return elem

    pre, loop = _element_loop_over(op, ty, init.result, build)
    return [init] + pre + [loop], None


def _element_loop_over(op: Op, ty, carried: Value, build):
    """``legalize_indexed._element_loop`` over the elements of a ``ty`` tile."""
    stand_in = Op(op.name, [op.operands[0], Value(ty)], loc=op.loc)
    return _element_loop(stand_in, carried, build)

