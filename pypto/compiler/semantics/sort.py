"""Sorting along a tile's last axis: sort, argsort and topk are one ``tile.sort`` op (the first k
of a stable sort, with int32 indices), of which each keeps its part.
"""
from __future__ import annotations

import numpy as np

from ...language import dtypes as dt
from ..ir import TileType
from .values import describe, is_tile, tile_type

SORT_DTYPES = (dt.float16, dt.float32, dt.int8, dt.int16, dt.int32)


def _sorted(b, x, k, descending, fn):
    """``tile.sort``: the first ``k`` of the stable sort along the last axis, as (values,
    int32 indices) tiles of ``k`` columns."""
    if not is_tile(x):
        raise TypeError(f"{fn}(): expected a tile, got {describe(x)}")
    t = x.type
    if not t.shape:
        raise ValueError(f"{fn}(): a rank-0 tile has no axis to sort along")
    if t.dtype not in SORT_DTYPES:
        raise TypeError(f"{fn}() sorts {', '.join(map(str, SORT_DTYPES))} tiles, not "
                        f"{t.dtype}")
    if not isinstance(descending, (bool, np.bool_)):
        raise TypeError(f"{fn}(): the direction must be a compile-time bool, got "
                        f"{describe(descending)}")
    n = t.shape[-1]
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"{fn}(): k must be a compile-time integer, got {describe(k)}")
    if not 1 <= k <= n:
        raise ValueError(f"{fn}(): k = {k} but the last axis has {n} elements; use "
                         f"1 <= k <= {n}")
    shape = t.shape[:-1] + (k,)
    op = b.emit("tile.sort", [x], [TileType(t.dtype, shape), TileType(dt.int32, shape)],
                {"k": k, "descending": bool(descending)})
    return op.results[0], op.results[1]


def sort(b, x, descending=False):
    return _sorted(b, x, tile_type(x).shape[-1] if is_tile(x) and x.type.shape else 1,
                   descending, "sort")[0]


def argsort(b, x, descending=False):
    return _sorted(b, x, tile_type(x).shape[-1] if is_tile(x) and x.type.shape else 1,
                   descending, "argsort")[1]


def topk(b, x, k, largest=True):
    return _sorted(b, x, k, largest, "topk")
