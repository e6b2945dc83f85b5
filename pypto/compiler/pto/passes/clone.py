"""Copies of PTO program fragments with fresh SSA names, and the walk that rewrites loops, for
the passes that repeat a loop's body (double buffering's unrolled halves, run-ahead)."""
from __future__ import annotations

import dataclasses

from ..isa import is_scalar
from ..program import For, If, Inst, Scalar, Tile, While, nested_bodies, walk_insts


class Cloner:
    """Copies instructions with fresh scalars (SSA names must stay unique: ``number()`` gives
    the suffix of each new one) and tile renames."""

    def __init__(self, number, scalars: dict, tiles: dict):
        self.number = number
        self.map = {**scalars, **tiles}

    def get(self, x):
        got = self.map.get(id(x))
        if got is not None:
            return got
        if isinstance(x, Tile) and x.row_of is not None:
            # a gathered row's view: its row is a scalar of the body (an inner loop's index),
            # renamed in the copy, so the copy reads its own row
            base, row = x.row_of
            if self.get(base) is not base or self.get(row) is not row:
                got = self.map[id(x)] = dataclasses.replace(x, row_of=(self.get(base),
                                                                       self.get(row)))
                return got
        return x

    def fresh(self, s: Scalar) -> Scalar:
        new = Scalar(f"{s.name}_{self.number()}", s.dtype)
        self.map[id(s)] = new
        return new

    def nodes(self, body: list) -> list:
        return [self.node(n) for n in body]

    def node(self, n):
        if isinstance(n, Inst):
            ins = [self.get(x) for x in n.ins]
            defines = is_scalar(n)        # a store's outs (tensor, offsets) are uses
            outs = [self.fresh(x) if defines else self.get(x) for x in n.outs]
            attrs = dict(n.attrs)
            if isinstance(attrs.get("tmp"), Tile):      # a scratch may be a moved view
                attrs["tmp"] = self.get(attrs["tmp"])
            return Inst(n.op, ins, outs, attrs)
        if isinstance(n, For):
            lb, ub, step = self.get(n.lb), self.get(n.ub), self.get(n.step)
            inits = [self.get(x) for x in n.inits]
            iv = self.fresh(n.iv)
            args = [self.fresh(a) for a in n.iter_args]
            body = self.nodes(n.body)
            yields = [self.get(y) for y in n.yields]
            results = [self.fresh(r) for r in n.results]
            return For(iv, lb, ub, step, inits, args, results, body, yields, n.stages)
        if isinstance(n, If):
            cond = self.get(n.cond)
            then_body = self.nodes(n.then_body)
            then_y = [self.get(y) for y in n.then_yields]
            else_body = self.nodes(n.else_body)
            else_y = [self.get(y) for y in n.else_yields]
            return If(cond, then_body, else_body, [self.fresh(r) for r in n.results],
                      then_y, else_y)
        inits = [self.get(x) for x in n.inits]
        before_args = [self.fresh(a) for a in n.before_args]
        before = self.nodes(n.before_body)
        cond, fwd = self.get(n.cond), [self.get(v) for v in n.forwarded]
        after_args = [self.fresh(a) for a in n.after_args]
        after = self.nodes(n.after_body)
        return While(inits, before_args, before, cond, fwd, after_args, after,
                     [self.get(y) for y in n.yields], [self.fresh(r) for r in n.results])


def rewrite_loops(body: list, rewrite) -> None:
    """Each loop of ``body``, inner loops first, replaced by the nodes ``rewrite(loop)``
    returns (None: left as it is)."""
    for node in list(body):
        for nested in nested_bodies(node):
            rewrite_loops(nested, rewrite)
        if isinstance(node, For):
            new = rewrite(node)
            if new is not None:
                at = next(k for k, n in enumerate(body) if n is node)
                body[at:at + 1] = new


def unfuse(body: list, groups: set) -> None:
    """Host fusion groups that a pass broke up (a load moved out, an instruction put in)
    run instruction by instruction (fusion is a host detail; the PTO program is unchanged)."""
    for n in walk_insts(body):
        if isinstance(n, Inst) and n.attrs.get("_fuse") in groups:
            del n.attrs["_fuse"]
