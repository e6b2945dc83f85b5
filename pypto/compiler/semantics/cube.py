"""The cube unit's primitive, matmul: the legal operand → accumulator dtypes on 910B, 2-D or
batched shapes (numpy's matmul rule), transposed operands and an optional accumulator.
"""
from __future__ import annotations

import numpy as np

from ...language import dtypes as dt
from ..ir import TileType
from .shapes import MAX_TILE_RANK, check_rank
from .tile import broadcast_to, cast
from .values import describe, is_tile


# Legal cube operand → accumulator dtypes on 910B.
MATMUL_ACC = {dt.float16: dt.float32, dt.bfloat16: dt.float32, dt.float32: dt.float32,
              dt.int8: dt.int32}


def matmul(b, a, c, acc=None, out_dtype=None, a_trans=False, b_trans=False):
    """2-D, or batched: a of (..., M, K) and b of (..., K, N) with broadcast batch axes (rank
    3 or 4, numpy's matmul rule); a_trans / b_trans transpose the last two axes."""
    for name, t in (("a", a), ("b", c)):
        if not (is_tile(t) and 2 <= len(t.type.shape) <= MAX_TILE_RANK):
            raise TypeError(f"matmul(): {name} must be a tile of rank 2 to {MAX_TILE_RANK}, "
                            f"got {describe(t)}")
    ashape = _last_two_swapped(a.type.shape) if a_trans else a.type.shape
    bshape = _last_two_swapped(c.type.shape) if b_trans else c.type.shape
    (m, k), (k2, n) = ashape[-2:], bshape[-2:]
    if k != k2:
        raise ValueError(f"matmul(): inner dimensions differ: {ashape} @ {bshape}")
    try:
        batch = tuple(np.broadcast_shapes(ashape[:-2], bshape[:-2]))
    except ValueError:
        raise ValueError(f"matmul(): the batch axes of {ashape} and {bshape} cannot be "
                         "broadcast together") from None
    check_rank(batch + (m, n), "matmul result shape")
    if a.type.dtype != c.type.dtype or a.type.dtype not in MATMUL_ACC:
        wide = next((d for d in (a.type.dtype, c.type.dtype) if d.bits == 64), None)
        raise TypeError(f"matmul(): operand dtypes ({a.type.dtype}, {c.type.dtype}) are not a "
                        "legal cube pair: (float16, float16), (bfloat16, bfloat16), "
                        "(float32, float32) or (int8, int8)"
                        + ("; A2/A3 cannot convert a 64-bit tile either (x.to(...) is refused): "
                           "pass the tensors in one of these dtypes (x.astype(np.float16), or "
                           "x.to(torch.float16), before the launch)" if wide is not None else ""))
    acc_dtype = MATMUL_ACC[a.type.dtype]
    if batch:               # explicit batch axes below: a broadcast plane is reused
        a = broadcast_to(b, a, batch + a.type.shape[-2:])
        c = broadcast_to(b, c, batch + c.type.shape[-2:])
    operands = [a, c]
    if acc is not None:
        if not is_tile(acc) or acc.type.shape != batch + (m, n):
            raise ValueError(f"matmul(): acc must be a {batch + (m, n)} tile, got "
                             f"{describe(acc)}")
        if acc.type.dtype != acc_dtype:
            raise TypeError(f"matmul(): acc must be {acc_dtype} for {a.type.dtype} operands, "
                            f"got {acc.type.dtype}")
        operands.append(acc)
    attrs = {}
    if a_trans:
        attrs["a_trans"] = True
    if b_trans:
        attrs["b_trans"] = True
    result = b.emit("tile.matmul", operands, [TileType(acc_dtype, batch + (m, n))],
                    attrs).result
    return cast(b, result, out_dtype) if out_dtype is not None else result


def _last_two_swapped(shape: tuple) -> tuple:
    return shape[:-2] + (shape[-1], shape[-2])
