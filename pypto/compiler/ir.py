"""Tile IR: SSA values of three kinds (scalars, GM tensors, on-chip tiles) and structured ops.

An op has operands, results, attributes and nested blocks (for ``scf.for``). Blocks have
arguments (the loop index and loop-carried values). Passes rewrite this structure in place; the
printer gives the readable text stored as ``asm["tile_ir"]`` and the verifier checks the
invariants every pass relies on.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from ..language.dtypes import dtype
from ..errors import SourceLoc

# Memory spaces of tiles (PTO "loc" names). None until memory-space inference has run.
VEC, MAT, LEFT, RIGHT, ACC, BIAS = "vec", "mat", "left", "right", "acc", "bias"

# Ops that make blocks of a launch wait for each other (pl.barrier / pl.signal / pl.wait), and
# every synchronisation op: no results, kept for their effect on the order of work.
CROSS_BLOCK_OPS = ("pto.syncall", "pto.sync_set", "pto.sync_wait")
SYNC_OPS = CROSS_BLOCK_OPS + ("pto.set_flag", "pto.wait_flag", "pto.pipe_barrier")
# Ops that write a GM tensor (operand 0).
GM_WRITES = ("tile.store", "tile.scatter", "tile.store_row")
# The grid's extents, int parameters of a kernel in the persistent launch form
# (passes/persistent.py), always >= 1.
GRID_PARAMS = ("_pypto_g0", "_pypto_g1", "_pypto_g2")
# A hand-off in a loop goes through a FIFO of this many workspace slots, iteration i in slot
# i % HAND_OFF_FIFO, with as many acknowledgements primed (compiler/passes/memory_space.py):
# the producer may run that many iterations ahead before it waits, as the cube's part does
# (passes/run_ahead.py). Modelled (1, 1, 2048, 128) flash attention: 46.7 us with one slot,
# 41.8 us with two, 43.4 us with three slots (three ahead).
HAND_OFF_FIFO = 2


@dataclass(frozen=True)
class ScalarType:
    dtype: dtype

    def __str__(self) -> str:
        return self.dtype.mlir


@dataclass(frozen=True)
class TensorType:
    """``rank`` counts the logical axes (what loads index). A tensor in a non-ND layout
    (``pypto.layout.LayoutTensor``) also has its logical ``shape``, always specialised."""
    dtype: dtype
    rank: int
    layout: str = "ND"
    shape: tuple = ()
    # the extents a launch specialised the kernel on (an int each, None where dynamic; empty
    # when unknown): what a shape no argument gives may be read from (pl.gather's rows)
    dims: tuple = ()

    def __str__(self) -> str:
        if self.layout != "ND":
            dims = "x".join(map(str, self.shape))
            return f"tensor<{dims}x{self.dtype.mlir}, {self.layout}>"
        return f"tensor<{'x'.join('?' * self.rank)}x{self.dtype.mlir}>"


@dataclass(frozen=True)
class TileType:
    dtype: dtype
    shape: tuple[int, ...]
    space: str | None = None

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def with_space(self, space: str) -> "TileType":
        return replace(self, space=space)

    def __str__(self) -> str:
        dims = "".join(f"{s}x" for s in self.shape)
        where = f", {self.space}" if self.space else ""
        return f"tile<{dims}{self.dtype.mlir}{where}>"


_ids = itertools.count()


class Value:
    """An SSA value. ``addr`` is the byte offset of a tile in its buffer, set by planning."""

    __slots__ = ("type", "hint", "id", "owner", "addr")

    def __init__(self, type, hint: str = ""):
        self.type = type
        self.hint = hint
        self.id = next(_ids)
        self.owner = None
        self.addr = None

    @property
    def is_tile(self) -> bool:
        return isinstance(self.type, TileType)

    @property
    def is_scalar(self) -> bool:
        return isinstance(self.type, ScalarType)

    @property
    def is_tensor(self) -> bool:
        return isinstance(self.type, TensorType)

    def __repr__(self) -> str:
        return f"Value({self.hint or self.id}: {self.type})"


class Block:
    def __init__(self, args=(), ops=None):
        self.args: list[Value] = list(args)
        self.ops: list[Op] = ops if ops is not None else []


class Op:
    __slots__ = ("name", "operands", "results", "attrs", "blocks", "loc")

    def __init__(self, name, operands=(), result_types=(), attrs=None, blocks=(), loc=None):
        self.name: str = name
        self.operands: list[Value] = list(operands)
        self.results: list[Value] = [Value(t) for t in result_types]
        for r in self.results:
            r.owner = self
        self.attrs: dict = dict(attrs or {})
        self.blocks: list[Block] = list(blocks)
        self.loc: SourceLoc | None = loc

    @property
    def result(self) -> Value:
        assert len(self.results) == 1, self.name
        return self.results[0]

    def __repr__(self) -> str:
        return f"Op({self.name})"


class Function:
    """The kernel: named parameters and a body. ``spec`` records what it was specialized on."""

    def __init__(self, name: str, params: list[Value], body: Block, spec=None):
        self.name = name
        self.params = params
        self.body = body
        self.spec = spec or {}


class Module:
    """What every pass takes and returns: one kernel plus facts learned along the way."""

    def __init__(self, kernel: Function, target=None):
        self.kernel = kernel
        self.target = target
        self.facts: dict = {}

    def __str__(self) -> str:
        from .ir_printer import print_function
        return print_function(self.kernel)


def walk(block: Block):
    """Every op under ``block``, outer before inner, in program order."""
    for op in block.ops:
        yield op
        for b in op.blocks:
            yield from walk(b)


def blocks(block: Block):
    """``block`` and every block nested in it, outer ones first."""
    yield block
    for op in list(block.ops):
        for inner in op.blocks:
            yield from blocks(inner)


def users(block: Block) -> dict[Value, list[Op]]:
    """Map from each value to the ops that read it (nested blocks included)."""
    out: dict[Value, list[Op]] = {}
    for op in walk(block):
        for v in op.operands:
            out.setdefault(v, []).append(op)
    return out


def replace_uses(block: Block, old: Value, new: Value) -> None:
    for op in walk(block):
        op.operands = [new if v is old else v for v in op.operands]
