"""A (1, N) row broadcast over a tile's rows, read by one arithmetic op, becomes A2/A3's
column-expand form of that op (``tile.col_expand`` → ``tcolexpand<op>``, pto-isa's
TCOLEXPANDADD ...: the row is read with a repeat stride of 0). The broadcast's full-size
temporary and its pass over the UB go away: a GEMM epilogue's ``acc + bias`` at 128 x 256
fp32, LayerNorm's ``* gamma + beta``.

Float16 and float32 only (TCOLEXPANDDIV takes no integers on A2/A3; the others would, but
the rule stays one list); the full tile first, unless the op commutes.
"""
from __future__ import annotations

from ...language import dtypes as dt
from ..ir import Module, Op, walk
from .dce import dead_code_elimination

OPS = ("add", "sub", "mul", "div", "max", "min")
COMMUTATIVE = ("add", "mul", "max", "min")
DTYPES = (dt.float16, dt.float32)


def fuse_col_expand(module: Module) -> Module:
    ops = list(walk(module.kernel.body))
    readers: dict = {}
    for op in ops:
        for v in op.operands:
            readers[v.id] = readers.get(v.id, 0) + 1
    for op in ops:
        pair = _full_and_row(op, readers)
        if pair is not None:
            op.name, op.operands = "tile.col_expand", list(pair)
            op.attrs = {k: v for k, v in op.attrs.items() if k == "op" or k.startswith("_")}
    return dead_code_elimination(module)


def _full_and_row(op: Op, readers: dict):
    """(the full tile, the (1, N) row) when ``op`` combines a tile with a row broadcast over
    it that nothing else reads, else None."""
    if op.name != "tile.binary" or op.attrs.get("op") not in OPS:
        return None
    shape, dtype = op.result.type.shape, op.result.type.dtype
    # an (M, 1) tile is printed through its (1, M) row view: its valid shape is not the row's
    if len(shape) != 2 or shape[0] == 1 or shape[1] == 1 or dtype not in DTYPES:
        return None
    orders = [(0, 1), (1, 0)] if op.attrs["op"] in COMMUTATIVE else [(0, 1)]
    for i, j in orders:
        full, spread = op.operands[i], op.operands[j]
        source = spread.owner
        if (full.is_tile and full.type.shape == shape and full.type.dtype == dtype
                and source is not None and source.name == "tile.broadcast"
                and readers.get(spread.id) == 1
                and source.operands[0].type.shape == (1, shape[1])
                and source.operands[0].type.dtype == dtype):
            return full, source.operands[0]
    return None
