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

# a plain row: the bias table's layout, and that of the L1 row it is moved from (TMovToBt)
ROW_LAYOUT = ("row_major", "none_box", 512)
# Standard tile configurations on 910B: loc → (blayout, slayout, fractal)
LAYOUTS = {
    VEC: ("row_major", "none_box", 512),
    MAT: ("col_major", "row_major", 512),
    LEFT: ("row_major", "row_major", 512),
    RIGHT: ("row_major", "col_major", 512),
    ACC: ("col_major", "row_major", 1024),
    "bias": ROW_LAYOUT,                         # the bias table (tmatmul.bias)
}


# the buffers whose tiles are laid out in fractal boxes (the cube's: L1, L0A, L0B, L0C)
BOXED = tuple(loc for loc, (_, slayout, _) in LAYOUTS.items() if slayout != "none_box")


def fractal_box(loc: str, dtype) -> tuple[int, int] | None:
    """(rows, cols) of the inner box of a tile in ``loc`` (None: not boxed), as PTOAS's
    verifier (``getBoxedTileInnerShape``) and pto-isa (``Tile::InnerRows/InnerCols``,
    common/pto_tile.hpp) define it: a boxed tile's rows and columns must be multiples of it.
    L0C's box is 16 x 16 elements; L1/L0A/L0B's is 16 rows x 32 bytes, or 32 bytes x 16
    columns in the column-major (ZN) order of L0B."""
    _, slayout, fractal = LAYOUTS[loc]
    if slayout == "none_box":
        return None
    if fractal == 1024:
        return 16, 16
    per_32_bytes = 32 // dtype.itemsize
    return (16, per_32_bytes) if slayout == "row_major" else (per_32_bytes, 16)


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
    # a cube tile's (rows, cols) as allocated, rounded up to the fractal box of every tile its
    # shape must equal along the tload -> tmov -> tmatmul chain (passes/cube_box.py); None:
    # ``rows``/``cols``, which stay the matrix (and our simulation's dense tile)
    alloc: tuple[int, int] | None = None
    # (tile, row): this (1, cols) tile is row ``row`` (a run-time Scalar) of ``tile``, whose
    # name it has (a whole-row gather or scatter moves one; its address is computed where
    # it is used, ``row_address``)
    row_of: tuple | None = None
    # (blayout, slayout, fractal) when not LAYOUTS[loc]: an L1 row bound for the bias table
    layout: tuple | None = None

    @property
    def numel(self) -> int:
        return self.rows * self.cols

    @property
    def is_column_mask(self) -> bool:
        """An (M, 1) mask: the bits of a compare of (M, 1) tiles, which A2/A3 compares as
        their (1, M) rows, so it is the (1, M) row mask for every instruction (one form for
        compares, selects, mask ops and reshapes, which PTOAS accepts)."""
        return self.loc == VEC and self.cols == 1 and self.rows > 1 and self.dtype == dt.bool_

    @property
    def alloc_shape(self) -> tuple[int, int]:
        return self.alloc or (self.rows, self.cols)

    @property
    def is_column(self) -> bool:
        """An (M, 1) UB tile of numbers (per-row scalars: row reductions, row operands); a
        mask is rows of bits whatever its shape."""
        return self.loc == VEC and self.cols == 1 and self.rows > 1 and self.dtype != dt.bool_

    def type_text(self, dynamic: bool = False, pad: int | None = None,
                  row_view: bool = False) -> str:
        """The chip's tile type: a UB tile's rows (a one-column tile's column) are allocated
        in whole 32 bytes, so ``rows``/``cols`` may exceed the valid ``v_row``/``v_col``.

        An (M, 1) tile is column-major ("DN"): the layout A2/A3's row reductions write and
        row broadcasts read. Elementwise instructions want row-major tiles, so they see it
        through ``row_view``: the same M contiguous elements as a (1, M) row. ``dynamic``
        writes the valid region as ``?`` (an edge window's clipped tile); ``pad`` replaces the
        pad field (0 null, 1 zero, 2 max, 3 min). A cube tile is allocated ``alloc_shape``:
        whole fractal boxes, the matrix its valid region."""
        blayout, slayout, fractal = self.layout or LAYOUTS[self.loc]
        rows, cols, vr, vc = *self.alloc_shape, self.v_row, self.v_col
        if self.is_column and row_view:
            rows, cols, vr, vc = 1, _whole_32_bytes(rows, self.dtype), 1, vr
        elif self.is_column:
            blayout = "col_major"
            rows = _whole_32_bytes(rows, self.dtype)
        elif self.loc == VEC and self.dtype == dt.bool_:     # one bit per element
            if self.is_column_mask:         # what compares of the columns' row views write
                rows, cols, vr, vc = 1, self.rows, 1, vr
            cols, vc = mask_row_bytes(cols), None if vc is None else -(-vc // 8)
        elif self.loc == VEC:
            cols = _whole_32_bytes(cols, self.dtype)
        if dynamic:
            vr = vc = None
        vr = "?" if vr is None else vr
        vc = "?" if vc is None else vc
        return (f"!pto.tile_buf<loc={self.loc}, dtype={element_type(self.dtype)}, "
                f"rows={rows}, cols={cols}, v_row={vr}, v_col={vc}, blayout={blayout}, "
                f"slayout={slayout}, fractal={fractal}, "
                f"pad={self.pad if pad is None else pad}>")


def mask_row_bytes(cols: int) -> int:
    """Bytes of a mask row of ``cols`` elements: one bit each, in whole 32 bytes (PTOAS 0.60
    rejects a row-major tile whose row is not)."""
    return -(-cols // 256) * 32


def row_pitch(tile: Tile) -> int:
    """Elements from one row of a UB tile to the next in the chip's layout: its columns
    rounded up to 32 bytes (a one-column tile's elements are contiguous). TGETVAL/TSETVAL
    address elements by this layout."""
    return 1 if tile.is_column else _whole_32_bytes(tile.cols, tile.dtype)


def row_tile(tile: Tile, row: Scalar) -> Tile:
    """Row ``row`` of ``tile`` (``Tile.row_of``), a whole (1, cols) row."""
    return Tile(tile.name, tile.loc, tile.dtype, 1, tile.cols, tile.addr, 1, tile.cols,
                tile.pad, row_of=(tile, row))


def element_type(dtype) -> str:
    """A mask (bool tile) is what A2/A3's TCMP writes and TSEL reads: ui8 bytes holding one
    bit per element, least significant first, each row padded to 32 bytes."""
    return "ui8" if dtype == dt.bool_ else dtype.mlir


def rows_end_to_end(rows: int, cols: int, bits: int) -> bool:
    """Do a row-major UB tile's elements lie at consecutive addresses: one row, one column,
    or rows of whole 32 bytes (A2/A3 pads every row to 32 bytes)? A TRESHAPE needs it."""
    return rows == 1 or cols == 1 or (cols * bits) % 256 == 0


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
    # "NZ" / "NC1HWC0": dims and strides are the physical array's (NZ: (K1, M1, 16, C0);
    # NC1HWC0: (N, C1, 1, H*W, C0)) and ``logical`` is the tensor's logical shape
    # (pypto.layout.load_window says how a load's logical window maps onto the array)
    layout: str = "ND"
    logical: tuple = ()

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
    cluster and exchange tiles through the GM workspace. ``vector_cores``: how many of the
    cluster's two AIVs run ``vector_body`` (1: sub-block 0, sub-block 1 only keeping step; 2:
    both, each reading its own ``pto.get_subblock_idx``, as pto-isa's hand-written mixed
    kernels and PyPTO's row-by-row parts split their rows, passes/split_rows.py)."""
    name: str
    kind: str
    params: list                 # TensorArg | Scalar, in call order
    tiles: list
    body: list
    target: object
    buffer_bytes: dict
    vector_body: list | None = None
    vector_cores: int = 1
    # 2: the UB offsets are those of a plan for half the rows, doubled for the whole rows the
    # program has until passes/split_rows.py gives each AIV its half (half_rows.hand_off_rows)
    vec_scale: int = 1
    # the UB was planned for the vector part running ahead (compiler/passes/memory_plan.py)
    run_ahead_plan: bool = False

    @property
    def parts(self) -> list[tuple[str, list]]:
        if self.kind == "mixed":
            return [("cube", self.body), ("vector", self.vector_body)]
        return [(self.kind, self.body)]


_FOLD = {"arith.mul": lambda a, b: a * b, "arith.add": lambda a, b: a + b,
         "arith.sub": lambda a, b: a - b}


def constant_values(program: Program) -> dict:
    """Scalar name -> value, for the program's integer constants and their sums, differences
    and products (a double-buffered loop steps by 2 x its step; unbatched planes add their
    index to an offset)."""
    consts: dict = {}
    for _, body in program.parts:
        for i in walk_insts(body):
            if not isinstance(i, Inst):
                continue
            if i.op == "arith.constant" and isinstance(i.attrs.get("value"), int):
                consts[i.outs[0].name] = i.attrs["value"]
            elif i.op in _FOLD and all(getattr(x, "name", None) in consts for x in i.ins):
                consts[i.outs[0].name] = _FOLD[i.op](*(consts[x.name] for x in i.ins))
    return consts


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


class RunAheadRefused(Exception):
    """A program whose UB plan assumed the vector part runs ahead (memory_plan's run-ahead
    rules: a hand-off's tile kept for the loop body, more work in place) that
    passes/run_ahead.py then leaves as it is: the compile builds it again without them."""


class RowSplitRefused(Exception):
    """A program planned for half rows (``Program.vec_scale`` 2) that passes/split_rows.py
    cannot split: the compile builds it again with a plan for whole rows."""
