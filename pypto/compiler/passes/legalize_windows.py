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


_GROWING = {"arith.add", "arith.mul", "arith.floordiv", "arith.mod", "arith.min", "arith.cast"}


def nonnegative(v: Value, counters: dict, depth: int = 0) -> bool:
    """Is ``v`` >= 0 whatever the arguments? Constants, block ids, tensor extents, loop
    counters that start at one and step by one, and sums, products, quotients and minima of
    such (a maximum needs one)."""
    if depth > 32:
        return False
    op = v.owner
    if op is None:
        bounds = counters.get(id(v))
        if bounds is None:
            return False
        lb, step = bounds                  # it starts at lb and moves by step
        return nonnegative(lb, counters, depth + 1) and nonnegative(step, counters, depth + 1)
    if op.name == "arith.constant":
        return op.attrs.get("value", -1) >= 0
    if op.name in ("pto.program_id", "pto.num_programs", "tensor.dim"):
        return True
    if op.name == "arith.max":
        return any(nonnegative(x, counters, depth + 1) for x in op.operands)
    if op.name in _GROWING or op.name == "arith.select":
        args = op.operands[1:] if op.name == "arith.select" else op.operands
        return all(nonnegative(x, counters, depth + 1) for x in args)
    return False


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

