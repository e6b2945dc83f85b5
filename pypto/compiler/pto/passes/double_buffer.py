"""Double buffering of ``pl.range(..., num_stages=2)`` loops, on the PTO program.

A load whose address depends only on the loop index is moved one iteration ahead, into the
other of two buffers (ping and pong), so MTE2 fetches iteration i+1 while V computes iteration
i. Tiles are fixed buffers in PTO, so the loop is unrolled by two to alternate them:

    tload ping <- slice(lb)
    for i = lb to ub step 2*step:
        tload pong <- slice(i + step)              # prefetch
        body(i) reading ping
        if i + step < ub:
            tload ping <- slice(i + 2*step)        # prefetch
            body(i + step) reading pong

The two halves also take the cube's operands (the L0A/L0B tiles the loop moves or extracts
into) in two buffers where they fit, so the move for iteration i+1 (MTE1) overlaps the matmul
of iteration i (M), as pto-isa's GEMM double-buffers L0A/L0B.

The flags that make the overlap safe come from the sync pass, which now sees two buffers
instead of one and only orders the real dependences. Loads past the end are clamped to the
tensor like every load, so the extra prefetch of the last round reads nothing it should not.
A loop of at most two iterations known at compile time is left as it is: there is nothing to
overlap, and MLIR inlines the unrolled loop's one trip, so PTOAS would see the prefetch past
the end as a window of the constant size 0, which it rejects.
A load is left in place when its tensor is also stored in the loop (the prefetch could read
data the previous iteration has not written yet) or its address depends on loop-carried state,
and so is a load from the GM workspace: the other core writes that slot, and only the flag
the load waits for says when (prefetched, the vector core read the slot before the cube had
stored the next tile, and flash attention with num_stages=2 computed zeros on pto-isa).
"""
from __future__ import annotations

import dataclasses
import itertools
import threading

from ....errors import BufferOverflow, overflow_summary
from ..isa import is_scalar, place_above, tile_extent
from ..program import For, If, Inst, Program, Scalar, Tile, constant_values, walk_insts
from .clone import Cloner, rewrite_loops, unfuse
from ....language import dtypes as dt

_local = threading.local()


def _next() -> int:
    """Numbers for new names, counted per program so the .pto does not depend on what was
    compiled before."""
    return next(_local.names)


def double_buffer(program: Program) -> Program:
    _local.names = itertools.count()
    consts = constant_values(program)

    def rewrite(loop: For) -> list | None:
        if loop.stages != 2:
            return None
        if _at_most_two(loop, consts):
            loop.stages = 1
            return None
        return _pipeline(loop, program)

    for _, body in program.parts:
        rewrite_loops(body, rewrite)
    return program


def _at_most_two(loop: For, consts: dict) -> bool:
    """Does the loop run at most two iterations, known at compile time?"""
    lb, ub, step = (consts.get(x.name) for x in (loop.lb, loop.ub, loop.step))
    return None not in (lb, ub, step) and 0 < step and ub - lb <= 2 * step


# -- which loads can run ahead --------------------------------------------------------------

def _address_slice(load: Inst, loop: For) -> list | None:
    """The loop-body scalar instructions computing ``load``'s offsets, in order, or None when
    they depend on anything but the index and values from before the loop."""
    defs = {id(i.outs[0]): i for i in loop.body if isinstance(i, Inst) and is_scalar(i)}
    # scalars the body defines: a store's outs (tensor, offsets) are uses, not definitions
    inside = {id(s) for n in walk_insts(loop.body)
              for s in (n.outs if isinstance(n, Inst) and is_scalar(n) else
                        getattr(n, "results", ())) if isinstance(s, Scalar)}
    inside |= {id(a) for a in loop.iter_args}
    needed, order = set(), []

    def need(s) -> bool:
        if not isinstance(s, Scalar) or s is loop.iv or id(s) in needed:
            return True
        if id(s) not in inside:
            return True          # defined before the loop
        inst = defs.get(id(s))
        if inst is None:
            return False
        if not all(need(x) for x in inst.ins):
            return False
        needed.add(id(s))
        order.append(inst)
        return True

    if not all(need(s) for s in load.ins[1:]):
        return None
    position = {id(i): k for k, i in enumerate(loop.body)}
    return sorted(order, key=lambda i: position[id(i)])


def _prefetchable(loop: For) -> list[tuple[Inst, list]]:
    stored = {id(n.outs[0]) for n in walk_insts(loop.body) if isinstance(n, Inst) and n.op == "tstore"}
    chosen = []
    for k, inst in enumerate(loop.body):
        if not (isinstance(inst, Inst) and inst.op == "tload") or id(inst.ins[0]) in stored \
                or getattr(inst.ins[0], "workspace", False):
            continue
        tile = inst.outs[0]
        earlier = [n for n in walk_insts(loop.body[:k]) if isinstance(n, Inst)]
        if any(x is tile for n in earlier for x in n.ins + n.outs):
            continue             # the tile carries a value into the iteration
        addr = _address_slice(inst, loop)
        if addr is not None:
            chosen.append((inst, addr))
    return chosen


# -- buffers ----------------------------------------------------------------------------------

def _fresh_tile(program: Program, like: Tile, load: Inst, at: int | None = None) -> Tile:
    """Another buffer for ``load``'s tile: at ``at`` (the pong memory planning reserved,
    passes/memory_plan._reserve), else above everything planned."""
    target = program.target
    tile = Tile(f"{like.name}_pong{_next()}", like.loc, like.dtype, like.rows, like.cols, 0,
                like.v_row, like.v_col, like.pad, like.alloc)
    if at is not None:
        tile.addr = at
        program.tiles.append(tile)
        return tile

    def overflow(end):
        # at the load's line; ``late``: found after memory planning, so the jit checks its
        # proposals with whole builds (compiler.pipeline.with_fitting_sizes)
        error = BufferOverflow(
            f"{overflow_summary(like.loc, target.name, end, target.buffers[like.loc])}: "
            f"double buffering (num_stages=2) needs a second {like.rows}x{like.cols} "
            f"{like.dtype} buffer for this load. Use smaller tiles or num_stages=1.",
            load.attrs.get("_loc"), space=like.loc, asked=end,
            capacity=target.buffers[like.loc], target=target.name)
        error.late = True
        return error
    return place_above(program, tile, overflow)


def _operand_pongs(loop: For, program: Program) -> dict:
    """A second L0A/L0B buffer for each matmul operand the loop body moves or extracts into,
    where the buffer has room (else that operand keeps one buffer)."""
    pongs = {}
    for n in walk_insts(loop.body):
        if not (isinstance(n, Inst) and n.op in ("tmov", "textract")):
            continue
        t = n.outs[0]
        if t.loc not in ("left", "right") or id(t) in pongs:
            continue
        tile = Tile(f"{t.name}_pong{_next()}", t.loc, t.dtype, t.rows, t.cols, 0, t.v_row,
                    t.v_col, t.pad, t.alloc)
        try:
            pongs[id(t)] = place_above(program, tile, lambda end: BufferOverflow("no room"))
        except BufferOverflow:
            continue
    return pongs


def _views(tile: Tile, loop: For) -> list:
    """The tiles the loop views ``tile``'s own bytes as (a ``treshape`` at its address, of
    it or of such a view: passes/row_reduce.py's wide rows): they move with it to its ping
    and pong buffers, or the printer would copy them back (a TMOV a reshape)."""
    views, seen = [], {id(tile)}
    for n in walk_insts(loop.body):
        if isinstance(n, Inst) and n.op == "treshape" and id(n.ins[0]) in seen:
            out = n.outs[0]
            if out.loc == tile.loc and out.addr == tile.addr and id(out) not in seen:
                seen.add(id(out))
                views.append(out)
    return views


def _moved_views(renames: dict, loads, views: dict, program: Program) -> dict:
    """``renames`` (load tile id -> its new buffer) with each moved tile's ``views`` (tile
    id -> ``_views``) at the new address, declared in the program."""
    out = dict(renames)
    for load, _ in loads:
        tile = load.outs[0]
        new = renames[id(tile)]
        for v in views[id(tile)] if new is not tile else ():
            out[id(v)] = dataclasses.replace(v, name=f"{v.name}_pong{_next()}", addr=new.addr)
            program.tiles.append(out[id(v)])
    return out


def _shares_space(tile: Tile, views: list, loop: For, program: Program) -> bool:
    """Does another tile used in the loop overlap ``tile``'s bytes (planner reuse)? Its own
    ``views`` do not count."""
    buf, start, end = tile_extent(tile, program.target)
    own = {id(tile)} | {id(v) for v in views}
    for n in walk_insts(loop.body):
        if isinstance(n, Inst):
            for x in n.ins + n.outs:
                if isinstance(x, Tile) and id(x) not in own:
                    b2, s2, e2 = tile_extent(x, program.target)
                    if b2 == buf and s2 < end and start < e2:
                        return True
    return False


# -- the rewrite ------------------------------------------------------------------------------

def _scalar(op: str, ins: list, dtype, **attrs) -> tuple[Inst, Scalar]:
    out = Scalar(f"db{_next()}", dtype)
    return Inst(op, ins, [out], attrs), out


def _prefetch(loads, iv_value, loop: For, tiles: dict) -> list:
    """The address computations and loads of ``loads`` for index ``iv_value``."""
    out = []
    for load, addr in loads:
        c = Cloner(_next, {id(loop.iv): iv_value}, {})
        out += c.nodes(addr)
        copy = c.node(load)
        copy.outs = [tiles.get(id(load.outs[0]), load.outs[0])]
        copy.attrs.pop("_fuse", None)
        # the reserved second buffer belongs to this loop: an outer loop double-buffering the
        # copy (the persistent programs' loop) would otherwise take the same bytes for its
        # pong, and this loop's ping and pong would be one buffer in every other program
        copy.attrs.pop("_pong_addr", None)
        out.append(copy)
    return out


def _pipeline(loop: For, program: Program) -> list:
    loads = _prefetchable(loop)
    loop.stages = 1
    if not loads:
        return [loop]
    views = {id(l.outs[0]): _views(l.outs[0], loop) for l, _ in loads}
    ping = {id(l.outs[0]): (_fresh_tile(program, l.outs[0], l) if _shares_space(
        l.outs[0], views[id(l.outs[0])], loop, program) else l.outs[0]) for l, _ in loads}
    pong = {id(l.outs[0]): _fresh_tile(program, l.outs[0], l, l.attrs.get("_pong_addr"))
            for l, _ in loads}
    ping, pong = (_moved_views(r, loads, views, program) for r in (ping, pong))
    pong.update(_operand_pongs(loop, program))
    dropped = {id(l) for l, _ in loads}
    rest = [n for n in loop.body if id(n) not in dropped]
    unfuse(rest, {l.attrs.get("_fuse") for l, _ in loads} - {None})
    i64 = dt.int64

    two, c2 = _scalar("arith.constant", [], i64, value=2)
    step2, s2 = _scalar("arith.mul", [loop.step, c2], i64)
    prologue = [two, step2] + _prefetch(loads, loop.lb, loop, ping)

    next_iv, iv_b = _scalar("arith.add", [loop.iv, loop.step], i64)
    first = Cloner(_next, {}, ping)
    body_a = first.nodes(rest)
    yields_a = [first.get(y) for y in loop.yields]
    cmp, more = _scalar("arith.cmp", [iv_b, loop.ub], dt.bool_, pred="lt")
    after_iv, iv_c = _scalar("arith.add", [iv_b, loop.step], i64)
    carried = {id(a): y for a, y in zip(loop.iter_args, yields_a)}
    second = Cloner(_next, {id(loop.iv): iv_b, **carried}, pong)
    body_b = second.nodes(rest)
    then_body = [after_iv] + _prefetch(loads, iv_c, loop, ping) + body_b
    results = [Scalar(f"{a.name}_r{_next()}", a.dtype) for a in loop.iter_args]
    branch = If(more, then_body, [], results, [second.get(y) for y in loop.yields], yields_a)
    loop.body = [next_iv] + _prefetch(loads, iv_b, loop, pong) + body_a + [cmp, branch]
    loop.yields = results
    loop.step = s2
    loop.stages = 2
    return prologue + [loop]
