"""A broadcast read by one arithmetic op becomes A2/A3's expand form of that op: a (1, N) row
over the rows → ``tile.col_expand`` (``tcolexpand<op>``: the row read with a repeat stride
of 0), an (M, 1) column over the columns → ``tile.row_expand`` (``trowexpand<op>``: pto-isa
broadcasts the column into eight copies a row with vbrcb, then one pass of the op; the
copies go to the UB's top 8 KiB, ``TMP_UB_OFFSET``, which PyPTO never allocates, as pto-isa's
own flash attention does: PTOAS keeps the three-operand form of a .pto with addresses). The
broadcast's full-size temporary and its pass over the UB go away: a GEMM epilogue's ``acc +
bias`` at 128 x 256 fp32, LayerNorm's ``* gamma + beta``, softmax's ``x - max`` and ``/ sum``,
attention's rescale of its accumulator.

Float16 and float32 only (TCOLEXPANDDIV and TROWEXPANDDIV take no integers on A2/A3; the
others would, but the rule stays one list); the full tile first, unless the op commutes.
"""
from __future__ import annotations

from ...language import dtypes as dt
from ..ir import Module, Op, walk
from ..pto.isa import EXPAND_OPS
from .dce import dead_code_elimination

COMMUTATIVE = ("add", "mul", "max", "min")
DTYPES = (dt.float16, dt.float32)
# the expand op for each shape of the broadcast source, given the result's (M, N)
FORMS = (("tile.col_expand", lambda m, n: (1, n)), ("tile.row_expand", lambda m, n: (m, 1)))


def fuse_expands(module: Module) -> Module:
    ops = list(walk(module.kernel.body))
    readers: dict = {}
    for op in ops:
        for v in op.operands:
            readers[v.id] = readers.get(v.id, 0) + 1
    for op in ops:
        match = _full_and_spread(op, readers)
        if match is not None:
            name, full, source = match
            op.name, op.operands = name, [full, source]
            op.attrs = {k: v for k, v in op.attrs.items() if k == "op" or k.startswith("_")}
    return dead_code_elimination(module)


def _full_and_spread(op: Op, readers: dict):
    """(the expand op, the full tile, the row or column) when ``op`` combines a tile with a
    broadcast of a row or a column over it that nothing else reads, else None."""
    if op.name != "tile.binary" or op.attrs.get("op") not in EXPAND_OPS:
        return None
    shape, dtype = op.result.type.shape, op.result.type.dtype
    # an (M, 1) or (1, N) result is printed through row views: no expand form
    if len(shape) != 2 or shape[0] == 1 or shape[1] == 1 or dtype not in DTYPES:
        return None
    orders = [(0, 1), (1, 0)] if op.attrs["op"] in COMMUTATIVE else [(0, 1)]
    for i, j in orders:
        full, spread = op.operands[i], op.operands[j]
        source = spread.owner
        if not (full.is_tile and full.type.shape == shape and full.type.dtype == dtype
                and source is not None and source.name == "tile.broadcast"
                and readers.get(spread.id) == 1
                and source.operands[0].type.dtype == dtype):
            continue
        for name, form in FORMS:
            if source.operands[0].type.shape == form(*shape):
                return name, full, source.operands[0]
    return None
