"""Which dtype a mixed operation computes in: tile with tile (docs/tile_ir.md, "Dtype
promotion"), tile with a Python or runtime scalar (the tile's dtype mostly wins), and a bare
number made into a tile.
"""
from __future__ import annotations

import numpy as np

from ...language import dtypes as dt
from ..ir import Value


def promote(a: dt.dtype, c: dt.dtype) -> dt.dtype:
    """Tile–tile result dtype (docs/tile_ir.md, "Dtype promotion")."""
    if a == c:
        return a
    if a == dt.bool_ or c == dt.bool_:
        return c if a == dt.bool_ else a
    if a.is_floating and c.is_floating:
        if a.bits == c.bits:
            return dt.float32
        return a if a.bits > c.bits else c
    if a.is_floating or c.is_floating:
        return a if a.is_floating else c
    return dt.from_any(np.result_type(a.to_numpy(), c.to_numpy()))


def weak_scalar_dtype(tile_dtype: dt.dtype, scalar) -> dt.dtype:
    """Result dtype of tile ⊕ scalar: the tile wins unless the scalar is a float (int tile →
    float32) or an int meeting a bool tile (→ int32)."""
    is_float = isinstance(scalar, (float, np.floating)) or (
        isinstance(scalar, Value) and scalar.type.dtype.is_floating)
    is_int = not is_float and not isinstance(scalar, (bool, np.bool_)) and not (
        isinstance(scalar, Value) and scalar.type.dtype == dt.bool_)
    if is_float and not tile_dtype.is_floating:
        return dt.float32
    if is_int and tile_dtype == dt.bool_:
        return dt.int32
    return tile_dtype


def dtype_of_number(b, x) -> dt.dtype:
    if isinstance(x, Value):
        return x.type.dtype
    if isinstance(x, (bool, np.bool_)):
        return dt.bool_
    return dt.float32 if isinstance(x, (float, np.floating)) else dt.int32
