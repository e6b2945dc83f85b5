"""Wide-row reductions in two stages. A2/A3 reduces a row wider than one 256-byte repeat by
folding its repeats into one, an instruction and a pipe barrier per repeat over every row
(pto-isa TRowReduceOps.hpp, TRowSum.hpp): a softmax's two rows of 4096 fp32 take 63 steps,
~2800 cycles, for 32 KiB. The same bytes viewed as rows of one repeat (or of 128 fp32, the
group-reduce shapes pto-isa folds with vcgadd/vcgmax, a cycle a repeat) reduce in one or
three instructions, and a second small reduction finishes each row: 277 cycles.

Rules as data: ``isa.GROUP_REDUCE_SHAPES`` (pto-isa's TryOptimizeFP32Reduce),
``TWO_STAGE_MAX_ROWS`` (with more rows the fold's instructions are shared by them and win).
The view is a ``treshape`` of a row-major tile whose rows are whole 32 bytes: the same bytes,
no copy.
Sums add in another order, within float tolerance, as the chip's own instruction does.
"""
from __future__ import annotations

from ...language import dtypes as dt
from ..ir import Module, Op, walk
from ..pto.isa import GROUP_REDUCE_SHAPES, REPEAT_BYTES

GROUP_ROWS, GROUP_COLS = GROUP_REDUCE_SHAPES[0]     # the group shape a two-stage view takes
TWO_STAGE_MAX_ROWS = 7        # (n - 1)(40 + 2.3 R) cycles folding vs 7.5 R n as repeats
REDUCTIONS = ("sum", "max", "min")
FLOATS = (dt.float32, dt.float16)


def group_reducible(dtype, shape) -> bool:
    """Is a row reduction of this tile, or of its two-stage view, pto-isa's fast fp32 path?"""
    rows, cols = shape
    return dtype == dt.float32 and (rows * cols, cols % GROUP_COLS) == (
        GROUP_ROWS * GROUP_COLS, 0)


def first_stage_cols(dtype, shape) -> int | None:
    """The row width to view a (rows, cols) tile as for the first stage, or None to reduce
    it as it is."""
    rows, cols = shape
    per_repeat = REPEAT_BYTES // dtype.itemsize
    if dtype == dt.float32 and shape in GROUP_REDUCE_SHAPES:
        return None                                      # pto-isa's fast path already
    if group_reducible(dtype, shape) and cols > GROUP_COLS:
        width = GROUP_COLS
    elif rows <= TWO_STAGE_MAX_ROWS and cols % per_repeat == 0 and \
            4 <= cols // per_repeat <= per_repeat:
        width = per_repeat
    else:
        return None
    # the partials seen as (rows, cols / width) must be rows of whole 32 bytes (TRESHAPE)
    return width if rows == 1 or (cols // width * dtype.itemsize) % 32 == 0 else None


def _candidate(op: Op) -> int | None:
    if op.name != "tile.reduce" or op.attrs.get("op") not in REDUCTIONS:
        return None
    x = op.operands[0]
    if not x.is_tile or len(x.type.shape) != 2 or op.attrs.get("axis") != 1 or \
            x.type.dtype not in FLOATS:
        return None
    return first_stage_cols(x.type.dtype, x.type.shape)


def reduce_wide_rows_in_two_stages(module: Module) -> Module:
    """Mark each wide-row reduction with its first stage's row width (``_stages``): the
    program keeps one instruction (our simulator reduces the row as it is, fused with what
    computes it), its scratch holds both stages (pto/isa.staged_row_reduce) and the PTO
    lowering writes the two stages for the chip (pto/lower._tile_reduce)."""
    for op in walk(module.kernel.body):
        width = _candidate(op)
        if width is not None:
            op.attrs["_stages"] = width
    return module
