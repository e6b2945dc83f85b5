"""Accumulators that start at zero, in instructions A2/A3 has.

The Tile IR zeroes an accumulator with a fill (``texpands`` on the ``acc`` tile), but on A2/A3
only the cube writes L0C: TEXPANDS takes UB or L1 tiles. So a zero-filled accumulator is made
by what comes next:

* its first writer is a ``tmatmul.acc`` at the same level: that one becomes a ``tmatmul``
  (which overwrites the accumulator), and the fill goes;
* its first writer is the first ``tmatmul.acc`` of a loop's body (the K loop): in the first
  iteration it is a ``tmatmul`` (an ``scf.if`` on the induction variable). A loop that may run
  no iteration keeps a zeroing before it, behind ``scf.if lb >= ub``;
* otherwise the accumulator is zeroed by a small matmul of zero operands: ``texpands`` into two
  L1 tiles (PIPE_MTE2 on the cube), ``tmov`` into L0A/L0B, ``tmatmul``. The L1 tiles are
  placed above everything else in L1; the L0A/L0B ones at the start of their buffers, since
  an L0A/L0B tile holds data only from its move to its matmul (``memory_space._insert_moves``)
  and so nothing there is live across the zeroing (the planner may have spread the operands
  over the whole buffer to alternate them: ``memory_plan._alternate``).

An accumulator that starts at a bias row (``passes/cube_epilogue.py``: a ``tcolexpand`` of the
bias table into L0C, which no instruction does) is made the same way, with ``tmatmul.bias``
where the above has ``tmatmul``: the cube adds the row as it writes the first product.
"""
from __future__ import annotations

from ....errors import BufferOverflow, InternalError, NotOnChip, overflow_summary
from ....language import dtypes as dt
from ..isa import place_above
from ..program import (For, If, Inst, Program, Scalar, Tile, While, constant_values,
                       fractal_box, nested_bodies, walk_insts)


# what starts an accumulator in the lowered program: a zero fill, or a bias row's broadcast
ACC_STARTS = ("texpands", "tcolexpand")


def init_accumulators(program: Program) -> Program:
    _Rewriter(program, constant_values(program)).block(program.body)
    return program


class _Rewriter:
    def __init__(self, program: Program, consts: dict):
        self.p = program
        self.consts = consts
        self.zero_operands: dict[tuple, tuple] = {}
        self.n = 0
        self.loc = None

    def block(self, body: list) -> None:
        k = 0
        while k < len(body):
            node = body[k]
            for nested in nested_bodies(node):
                self.block(nested)
            if isinstance(node, Inst) and node.op in ACC_STARTS and node.outs[0].loc == "acc":
                del body[k]
                self.replace(node, body, k)
                continue
            k += 1

    def replace(self, fill: Inst, body: list, at: int) -> None:
        """Make what ``fill`` did (it stood at ``body[at]``) happen otherwise."""
        acc = fill.outs[0]
        bias = fill.ins[0] if fill.op == "tcolexpand" else None
        self.loc = fill.attrs.get("_loc")      # the pl.zeros line, for an overflow
        if bias is None and (fill.ins or fill.attrs.get("value") != 0):
            raise NotOnChip(
                "on A2/A3 an accumulator (L0C) can start only from zeros: start it with "
                "pl.zeros and add the constant to the result instead", fill.attrs.get("_loc"))
        k = next((j for j in range(at, len(body)) if _touches(body[j], acc)), None)
        first = body[k] if k is not None else None
        if isinstance(first, Inst) and first.op == "tmatmul.acc" and first.outs[0] is acc:
            body[k] = _overwrite(first, bias)
            return
        if isinstance(first, For):
            inner = next((n for n in first.body if _touches(n, acc)), None)
            if isinstance(inner, Inst) and inner.op == "tmatmul.acc" and inner.outs[0] is acc:
                self.peel(first, inner, bias)
                if not self.runs(first):       # bounds are defined by now: just before it
                    body[k:k] = self.guarded_zeroing(acc, first, bias)
                return
        body[at:at] = self.zeroing(acc, bias)

    def peel(self, loop: For, mm: Inst, bias: Tile | None) -> None:
        """In the loop's first iteration the ``tmatmul.acc`` overwrites instead."""
        self.n += 1
        first = Scalar(f"{loop.iv.name}_first{self.n}", dt.bool_)
        at = loop.body.index(mm)
        overwrite = _overwrite(mm, bias)
        loop.body[at:at + 1] = [Inst("arith.cmp", [loop.iv, loop.lb], [first], {"pred": "eq"}),
                                If(first, [overwrite], [mm], [], [], [])]

    def runs(self, loop: For) -> bool:
        """Does the loop run at least once, whatever the arguments?"""
        lb, ub, step = (self.consts.get(s.name) for s in (loop.lb, loop.ub, loop.step))
        return None not in (lb, ub, step) and step > 0 and lb < ub

    def guarded_zeroing(self, acc: Tile, loop: For, bias: Tile | None) -> list:
        self.n += 1
        empty = Scalar(f"{loop.iv.name}_empty{self.n}", dt.bool_)
        return [Inst("arith.cmp", [loop.lb, loop.ub], [empty], {"pred": "ge"}),
                If(empty, self.zeroing(acc, bias), [], [], [], [])]

    def zeroing(self, acc: Tile, bias: Tile | None = None) -> list:
        """acc = 0 @ 0 (+ bias), with operands as narrow as the cube takes (one fractal of K),
        allocated as the accumulator's M and N are (whole fractal boxes: passes/cube_box.py)."""
        operand = dt.int8 if acc.dtype == dt.int32 else dt.float16
        k = 32 // operand.itemsize
        m, n = acc.alloc_shape
        mat_a, left = self.zero_tiles(("mat", "left"), operand, acc.rows, k, (m, k))
        mat_b, right = self.zero_tiles(("mat", "right"), operand, k, acc.cols, (k, n))
        return [Inst("texpands", [], [mat_a], {"value": 0}),
                Inst("texpands", [], [mat_b], {"value": 0}),
                Inst("tmov", [mat_a], [left]), Inst("tmov", [mat_b], [right]),
                _overwrite(Inst("tmatmul.acc", [acc, left, right], [acc]), bias)]

    def zero_tiles(self, locs, dtype, rows, cols, alloc) -> list[Tile]:
        key = (locs, dtype, rows, cols, alloc)
        if key not in self.zero_operands:
            self.zero_operands[key] = [self.fresh(loc, dtype, rows, cols, alloc)
                                       for loc in locs]
        return self.zero_operands[key]

    def fresh(self, loc, dtype, rows, cols, alloc) -> Tile:
        target = self.p.target
        box = fractal_box(loc, dtype)
        if alloc[0] % box[0] or alloc[1] % box[1]:
            raise InternalError(f"the zero operand of a {rows}x{cols} accumulator would be "
                                f"allocated {alloc[0]}x{alloc[1]} in {loc}, not whole "
                                f"{box[0]}x{box[1]} fractal boxes")
        tile = Tile(f"zero_{loc}{len(self.p.tiles)}", loc, dtype, rows, cols, 0, rows, cols,
                    alloc=None if alloc == (rows, cols) else alloc)
        if loc in ("left", "right"):      # nothing is live in L0A/L0B across a zeroing
            self.p.tiles.append(tile)
            return tile

        def overflow(end):
            # at the accumulator's line; ``late``: found after memory planning
            # (compiler.pipeline.with_fitting_sizes checks proposals with whole builds)
            error = BufferOverflow(
                f"{overflow_summary(loc, target.name, end, target.buffers[loc])}: zeroing the "
                f"accumulator needs a {rows}x{cols} zero operand there; use smaller tiles or "
                f"start the accumulator with the first matmul", self.loc,
                space=loc, asked=end, capacity=target.buffers[loc], target=target.name)
            error.late = True
            return error
        return place_above(self.p, tile, overflow)


def _overwrite(mm: Inst, bias: Tile | None) -> Inst:
    """``mm`` (a ``tmatmul.acc``) as the first matmul of its accumulator: the product alone,
    or with the bias row added."""
    if bias is None:
        return Inst("tmatmul", mm.ins[1:], mm.outs, dict(mm.attrs))
    return Inst("tmatmul.bias", mm.ins[1:] + [bias], mm.outs, dict(mm.attrs))


def _touches(node, tile: Tile) -> bool:
    insts = [node] if isinstance(node, Inst) else [n for b in nested_bodies(node)
                                                    for n in walk_insts(b)]
    return any(isinstance(i, Inst) and any(x is tile for x in i.ins + i.outs) for i in insts)
