"""Invariants of a PTO program, checked after lowering and after every PTO pass.

They are the cheap structural ones a pass can break and the printer would not notice: every
tile an instruction names is declared (so it is allocated), every scalar is defined before it
is used and in a region that encloses the use, and loops and branches yield what they return.
A failure is a compiler bug, so it raises ``InternalError`` naming the pass.
"""
from __future__ import annotations

from ...errors import InternalError
from .program import For, If, Inst, Program, Scalar, Tile, While
from .printer import print_program


def verify_program(program: Program, stage: str) -> Program:
    """``program`` unchanged, or ``InternalError`` listing what is wrong after ``stage``."""
    problems: list[str] = []
    declared = {id(t) for t in program.tiles}
    params = {id(p) for p in program.params if isinstance(p, Scalar)}
    for kind, body in program.parts:
        _Checker(declared, kind, problems).block(body or [], set(params))
    if problems:
        try:
            text = print_program(program)
        except Exception:  # noqa: BLE001 - a program broken enough not to print
            text = None
        raise InternalError(f"PTO verification failed after {stage}:\n  "
                            + "\n  ".join(problems[:20]), text)
    return program


class _Checker:
    """One part's walk: ``scope`` holds the ids of the scalars visible at each point."""

    def __init__(self, declared: set, part: str, problems: list):
        self.declared = declared
        self.part = part
        self.problems = problems

    def report(self, what: str) -> None:
        self.problems.append(f"{self.part} part: {what}")

    def uses(self, values, scope: set, where: str) -> None:
        for v in values:
            if isinstance(v, Scalar) and id(v) not in scope:
                self.report(f"{where} uses %{v.name} before it is defined")
            elif isinstance(v, Tile) and v.row_of is not None:     # a run-time row
                self.uses(v.row_of, scope, where)
            elif isinstance(v, Tile) and id(v) not in self.declared:
                self.report(f"{where} names tile {v.name}, which the program does not declare")

    def block(self, body: list, scope: set) -> set:
        """Checks ``body`` and returns the scope after it."""
        scope = set(scope)
        for node in body:
            if isinstance(node, Inst):
                self.inst(node, scope)
            elif isinstance(node, For):
                self.loop(node, scope)
            elif isinstance(node, If):
                self.branch(node, scope)
            elif isinstance(node, While):
                self.while_loop(node, scope)
            else:
                self.report(f"{type(node).__name__} {node!r} is not a PTO node")
        return scope

    def inst(self, inst: Inst, scope: set) -> None:
        # a store's outs are the tensor and offsets it writes at: uses, like its ins
        stored = inst.op == "tstore"
        self.uses(inst.ins + (inst.outs if stored else []) + [inst.attrs.get("tmp")],
                  scope, inst.op)
        if not stored:
            self.uses([o for o in inst.outs if isinstance(o, Tile)], scope, inst.op)
            scope.update(id(o) for o in inst.outs if isinstance(o, Scalar))

    def loop(self, f: For, scope: set) -> None:
        where = f"scf.for %{f.iv.name}"
        self.uses([f.lb, f.ub, f.step, *f.inits], scope, where)
        if not len(f.inits) == len(f.iter_args) == len(f.results) or \
                len(f.yields) != len(f.results):
            self.report(f"{where}: {len(f.inits)} inits, {len(f.iter_args)} iter_args, "
                        f"{len(f.yields)} yields and {len(f.results)} results")
        inner = self.block(f.body, scope | {id(f.iv)} | {id(a) for a in f.iter_args})
        self.uses(f.yields, inner, f"{where}'s yield")
        scope.update(id(r) for r in f.results)

    def branch(self, node: If, scope: set) -> None:
        self.uses([node.cond], scope, "scf.if")
        for body, yields in ((node.then_body, node.then_yields),
                             (node.else_body, node.else_yields)):
            if len(yields) != len(node.results):
                self.report(f"scf.if on %{node.cond.name}: a branch yields {len(yields)} "
                            f"values for {len(node.results)} results")
            self.uses(yields, self.block(body, scope), "scf.if's yield")
        scope.update(id(r) for r in node.results)

    def while_loop(self, node: While, scope: set) -> None:
        self.uses(node.inits, scope, "scf.while")
        if not len(node.inits) == len(node.before_args) == len(node.yields):
            self.report(f"scf.while: {len(node.inits)} inits, {len(node.before_args)} "
                        f"arguments and {len(node.yields)} yields")
        if not len(node.forwarded) == len(node.after_args) == len(node.results):
            self.report(f"scf.while: {len(node.forwarded)} forwarded values, "
                        f"{len(node.after_args)} after arguments and {len(node.results)} "
                        "results")
        before = self.block(node.before_body, scope | {id(a) for a in node.before_args})
        self.uses([node.cond, *node.forwarded], before, "scf.condition")
        after = self.block(node.after_body, scope | {id(a) for a in node.after_args})
        self.uses(node.yields, after, "scf.while's yield")
        scope.update(id(r) for r in node.results)
