"""What a primitive's argument is: a runtime IR value (tile, scalar, tensor) or a compile-time
Python object, and how an error message names it. Every op family checks its operands with
these, so their messages read alike.
"""
from __future__ import annotations

import numpy as np

from ..ir import TileType, Value


def is_number(x) -> bool:
    return isinstance(x, (bool, int, float, np.number, np.bool_)) and not isinstance(x, Value)


def is_tile(x) -> bool:
    return isinstance(x, Value) and x.is_tile


def tile_type(x) -> TileType:
    if not is_tile(x):
        raise TypeError(f"expected a tile, got {describe(x)}")
    return x.type


def describe(x) -> str:
    if isinstance(x, Value):
        return f"a {x.type}"
    if type(x).__name__ == "TensorSlice":
        return ("a tensor window x[a:b] (only pl.async_load takes one; read a tile with "
                "pl.load(x, offsets=..., shape=...))")
    return f"{type(x).__name__} {x!r}"
