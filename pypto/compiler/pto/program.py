"""PTO programs: the placed Tile IR as PTO virtual instructions over explicit tile buffers.

A ``Program`` is what the backend lowers (one instruction → one LLVM snippet) and what prints as
``.pto`` text in the PTO-ISA MLIR dialect (shared/reference/pto-text.md). Tiles carry their
location, dtype, shape, valid region, layout and buffer offset; loop-carried tiles are simply the
same buffer, so only scalars flow through ``scf.for`` iter_args.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...language import dtypes as dt
from ..ir import ACC, LEFT, MAT, RIGHT, VEC

# Standard tile configurations on 910B: loc → (blayout, slayout, fractal)
LAYOUTS = {
    VEC: ("row_major", "none_box", 512),
    MAT: ("col_major", "row_major", 512),
    LEFT: ("row_major", "row_major", 512),
    RIGHT: ("row_major", "col_major", 512),
    ACC: ("col_major", "row_major", 1024),
}



@dataclass
class Tile:
    name: str
    loc: str
    dtype: dt.dtype
    rows: int
    cols: int
    addr: int
    v_row: int | None = None     # valid region; None prints as "?" (dynamic)
    v_col: int | None = None
    pad: int = 0

    @property
    def numel(self) -> int:
        return self.rows * self.cols

    def type_text(self) -> str:
        """The chip's tile type: a UB tile's rows (a one-column tile's column) are allocated
        in whole 32 bytes, so ``rows``/``cols`` may exceed the valid ``v_row``/``v_col``."""
        blayout, slayout, fractal = LAYOUTS[self.loc]
        rows, cols = self.rows, self.cols
        if self.loc == VEC and self.cols == 1 and self.rows > 1:
            blayout = "col_major"     # per-row scalars (reduction results, row operands)
            rows = _whole_32_bytes(rows, self.dtype)
        elif self.loc == VEC:
            cols = _whole_32_bytes(cols, self.dtype)
        vr = "?" if self.v_row is None else self.v_row
        vc = "?" if self.v_col is None else self.v_col
        return (f"!pto.tile_buf<loc={self.loc}, dtype={self.dtype.mlir}, rows={rows}, "
                f"cols={cols}, v_row={vr}, v_col={vc}, blayout={blayout}, "
                f"slayout={slayout}, fractal={fractal}, pad={self.pad}>")


def _whole_32_bytes(n: int, dtype) -> int:
    per = max(1, 32 // dtype.itemsize)
    return -(-n // per) * per


@dataclass
class Scalar:
    name: str
    dtype: dt.dtype


@dataclass
class TensorArg:
    """A kernel tensor parameter; ``dims``/``strides`` entries are ints where specialised."""
    name: str
    dtype: dt.dtype
    dims: tuple
    strides: tuple
    workspace: bool = False      # the hidden GM workspace of a cube/vector split (WORKSPACE)

    @property
    def rank(self) -> int:
        return len(self.dims)


@dataclass
class Inst:
    op: str                      # tload, tadd, tadds, arith.add, ...
    ins: list
    outs: list
    attrs: dict = field(default_factory=dict)


@dataclass
class For:
    iv: Scalar
    lb: Scalar
    ub: Scalar
    step: Scalar
    inits: list
    iter_args: list
    results: list
    body: list
    yields: list = field(default_factory=list)
    stages: int = 1              # 2: double-buffered (see pto/passes/double_buffer.py)


@dataclass
class If:
    cond: Scalar
    then_body: list
    else_body: list
    results: list            # scalar results (tiles are merged through their shared buffer)
    then_yields: list
    else_yields: list


@dataclass
class While:
    inits: list
    before_args: list
    before_body: list
    cond: Scalar
    forwarded: list          # values passed on by the condition (the loop's results)
    after_args: list
    after_body: list
    yields: list
    results: list


@dataclass
class Program:
    """``kind`` is "vector", "cube" or "mixed"; a mixed kernel has two parts (the cube part in
    ``body``, the vector part in ``vector_body``) that run on the two kinds of core of a
    cluster and exchange tiles through the GM workspace."""
    name: str
    kind: str
    params: list                 # TensorArg | Scalar, in call order
    tiles: list
    body: list
    target: object
    buffer_bytes: dict
    vector_body: list | None = None

    @property
    def parts(self) -> list[tuple[str, list]]:
        if self.kind == "mixed":
            return [("cube", self.body), ("vector", self.vector_body)]
        return [(self.kind, self.body)]


def nested_bodies(node) -> list[list]:
    """The instruction lists directly inside a loop or branch (none for an instruction)."""
    if isinstance(node, For):
        return [node.body]
    if isinstance(node, If):
        return [node.then_body, node.else_body]
    if isinstance(node, While):
        return [node.before_body, node.after_body]
    return []


def walk_insts(body: list):
    """Every node of ``body``, loops and branches before what they contain, in order."""
    for node in body:
        yield node
        for nested in nested_bodies(node):
            yield from walk_insts(nested)


def view2d(shape) -> tuple[int, int]:
    """PTO tiles are 2-D: a scalar tile is 1x1 and a vector is one row."""
    if not shape:
        return 1, 1
    return (1, shape[0]) if len(shape) == 1 else tuple(shape)


WORKSPACE = "pypto_workspace"     # parameter name of the GM workspace in .pto
