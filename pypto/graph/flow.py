"""Which input axes reach which result axes of a traced tile op, and which ones it combines.

This is what makes tiling safe. Cutting an input axis into tiles is correct only if the tile
op treats that axis elementwise: element ``j`` of the result along it depends on element ``j``
of the input only. Ops that combine elements along an axis (a reduction, a matmul's inner
dimension, a cumsum, a slice or concat, a reshape that moves elements between axes, a
broadcast of real data) need the axis whole inside one tile. The analysis follows every tile
value of the traced Tile IR and records, per axis, the set of input axes ("origins") that
reach it elementwise, and the input axes some op combined ("mixed", with the reason and the
source line). Unknown ops are treated as mixing everything they read: the rule may refuse a
tiling, never accept a wrong one.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..compiler.ir import Value

ELEMENTWISE = ("tile.binary", "tile.where", "tile.cast", "tile.unary", "tile.mov")
NO_DATA = ("tile.full", "tile.arange", "tile.alloc")


@dataclass
class Flow:
    """``result_axes[d]``: the input axes ``(input index, axis)`` that reach result axis ``d``
    elementwise; ``mixed``: input axis -> why some op needs it whole."""
    result_axes: list
    mixed: dict = field(default_factory=dict)


def analyse(trace, seeded) -> Flow:
    """``seeded[k][i]``: whether axis ``i`` of input ``k`` is tracked (an axis of extent 1 that
    only broadcasts is not)."""
    walker = _Walker()
    for k, (p, seeds) in enumerate(zip(trace.params, seeded)):
        walker.origins[p] = tuple(frozenset({(k, i)}) if s else frozenset()
                                  for i, s in enumerate(seeds))
    walker.block(trace.body)
    return Flow(list(walker.get(trace.result)), walker.mixed)


def _union(a: tuple, b: tuple) -> tuple:
    if len(a) != len(b):
        return a
    return tuple(x | y for x, y in zip(a, b))


def _where(op) -> str:
    return f" at {op.loc.filename}:{op.loc.line}" if op.loc is not None else ""


class _Walker:
    def __init__(self):
        self.origins: dict = {}
        self.mixed: dict = {}

    def get(self, v: Value) -> tuple:
        if v in self.origins:
            return self.origins[v]
        return (frozenset(),) * (len(v.type.shape) if v.is_tile else 0)

    def mix(self, axes, why: str) -> None:
        for a in axes:
            self.mixed.setdefault(a, why)

    def set(self, op, axes: tuple) -> None:
        self.origins[op.results[0]] = axes

    def block(self, block) -> None:
        for op in block.ops:
            self.op(op)

    # -- one op ---------------------------------------------------------------------------
    def op(self, op) -> None:
        name = op.name
        handler = getattr(self, "_" + name.replace(".", "_"), None)
        if handler is not None:
            handler(op)
        elif name in ELEMENTWISE:
            axes = ()
            for v in op.operands:
                if v.is_tile and len(v.type.shape) == len(op.results[0].type.shape):
                    axes = _union(axes, self.get(v)) if axes else self.get(v)
            self.set(op, axes or self.get(op.results[0]))
        elif name in NO_DATA or name.startswith(("arith.", "pto.", "tensor.", "debug.")) \
                or name in ("scf.yield", "scf.condition"):
            return
        else:      # an op this analysis does not know: everything it reads must be whole
            for v in op.operands:
                for axes in self.get(v):
                    self.mix(axes, f"{name}{_where(op)}")

    def _tile_broadcast(self, op) -> None:
        src, dst = op.operands[0].type.shape, op.results[0].type.shape
        axes = []
        for s, d, origin in zip(src, dst, self.get(op.operands[0])):
            if s != d:
                self.mix(origin, f"a broadcast{_where(op)}")
                origin = frozenset()
            axes.append(origin)
        self.set(op, tuple(axes))

    def _tile_reshape(self, op) -> None:
        """A reshape that only adds or drops axes of extent 1 keeps the others' origins; any
        other reshape moves elements between axes, so what it reads must be whole."""
        src, dst = op.operands[0].type.shape, op.results[0].type.shape
        origins = self.get(op.operands[0])
        kept = [(n, o) for n, o in zip(src, origins) if n != 1]
        if [n for n, _ in kept] != [n for n in dst if n != 1]:
            for o in origins:
                self.mix(o, f"a reshape {src} -> {dst}{_where(op)}")
            self.set(op, (frozenset(),) * len(dst))
            return
        for n, o in zip(src, origins):
            if n == 1 and o:
                self.mix(o, f"a reshape {src} -> {dst}{_where(op)}")
        it = iter(o for _, o in kept)
        self.set(op, tuple(next(it) if n != 1 else frozenset() for n in dst))

    def _tile_transpose(self, op) -> None:
        self.set(op, self.get(op.operands[0])[::-1])

    def _tile_reduce(self, op) -> None:
        axis = op.attrs["axis"]
        origins = list(self.get(op.operands[0]))
        self.mix(origins[axis], f"pl.{op.attrs['op']}(axis={axis}){_where(op)}")
        origins[axis] = frozenset()
        self.set(op, tuple(origins))

    def _tile_cumsum(self, op) -> None:
        origins = self.get(op.operands[0])
        self.mix(origins[op.attrs["axis"]], f"pl.cumsum{_where(op)}")
        self.set(op, origins)

    def _tile_sort(self, op) -> None:
        """sort / argsort / top-k: the last axis is combined, the others stay elementwise
        (both results: the values and the indices)."""
        origins = list(self.get(op.operands[0]))
        self.mix(origins[-1], f"a sort along the last axis{_where(op)}")
        origins[-1] = frozenset()
        for r in op.results:
            self.origins[r] = tuple(origins)

    def _tile_slice(self, op) -> None:
        origins = self.get(op.operands[0])
        shape = op.operands[0].type.shape
        for i, (a, b) in enumerate(zip(op.attrs["starts"], op.attrs["stops"])):
            if (a, b) != (0, shape[i]):
                self.mix(origins[i], f"a slice [{a}:{b}] of axis {i}{_where(op)}")
        self.set(op, origins)

    def _tile_concat(self, op) -> None:
        axis = op.attrs["axis"]
        axes = None
        for v in op.operands:
            o = self.get(v)
            self.mix(o[axis], f"pl.concat(axis={axis}){_where(op)}")
            axes = o if axes is None else _union(axes, o)
        axes = list(axes)
        axes[axis] = frozenset()
        self.set(op, tuple(axes))

    def _tile_matmul(self, op) -> None:
        a, b = (self.get(v) for v in op.operands[:2])
        m, ka = (a[-1], a[-2]) if op.attrs.get("a_trans") else (a[-2], a[-1])
        kb, n = (b[-1], b[-2]) if op.attrs.get("b_trans") else (b[-2], b[-1])
        self.mix(ka | kb, f"pl.matmul's inner dimension{_where(op)}")
        batch = tuple(x | y for x, y in zip(a[:-2], b[:-2]))    # broadcast by semantics
        axes = batch + (m, n)
        if len(op.operands) > 2:
            axes = _union(axes, self.get(op.operands[2]))
        self.set(op, axes)

    # -- control flow: loop-carried values reach a fixpoint (unions only grow) ---------------
    def _carry(self, args, values) -> None:
        for a, v in zip(args, values):
            self.origins[a] = v

    def _fixpoint(self, carried, step):
        """Run a loop body (``step(carried)`` walks it and returns (yields, its result))
        until the carried origins stop growing; returns the last result."""
        while True:
            yields, result = step(carried)
            new = [_union(c, y) for c, y in zip(carried, yields)]
            if new == carried:
                return result
            carried = new

    def _scf_for(self, op) -> None:
        body = op.blocks[0]

        def step(carried):
            self._carry(body.args[1:], carried)
            self.block(body)
            return [self.get(v) for v in body.ops[-1].operands], carried
        self._carry(op.results, self._fixpoint([self.get(v) for v in op.operands[3:]], step))

    def _scf_if(self, op) -> None:
        merged = None
        for blk in op.blocks:
            self.block(blk)
            if blk.ops and blk.ops[-1].name == "scf.yield":
                values = [self.get(v) for v in blk.ops[-1].operands]
                merged = values if merged is None else [_union(m, v)
                                                        for m, v in zip(merged, values)]
        self._carry(op.results, merged or [])

    def _scf_while(self, op) -> None:
        before, after = op.blocks

        def step(carried):
            self._carry(before.args, carried)
            self.block(before)
            forwarded = [self.get(v) for v in before.ops[-1].operands[1:]]
            self._carry(after.args, forwarded)
            self.block(after)
            return [self.get(v) for v in after.ops[-1].operands], forwarded
        self._carry(op.results, self._fixpoint([self.get(v) for v in op.operands], step))
