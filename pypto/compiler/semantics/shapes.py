"""Tile shapes are compile-time tuples of rank 0 to 4: the check every op that makes a tile
runs, with an error that says where a runtime extent came from and what to write instead.
"""
from __future__ import annotations

from ..ir import Value

MAX_TILE_RANK = 4       # rank 3 and 4 tiles are unrolled into rank-2 planes (passes/unbatch.py)


def check_rank(shape: tuple, what: str) -> None:
    if len(shape) > MAX_TILE_RANK:
        raise ValueError(f"tiles of rank {len(shape)} are not supported (rank 0 to "
                         f"{MAX_TILE_RANK}); got {what} {shape}")


def tile_shape(shape, what="shape", allow_empty=False):
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    if isinstance(shape, Value) or (isinstance(shape, (tuple, list)) and any(
            isinstance(s, Value) for s in shape)):
        raise TypeError(f"{what} must be known at compile time, but it contains a runtime "
                        f"value{_runtime_origin(shape)}")
    if not isinstance(shape, (tuple, list)) or (not shape and not allow_empty) or not all(
            isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape):
        raise ValueError(f"{what} must be a tuple of positive compile-time integers "
                         f"(pl.constexpr), got {shape!r}")
    check_rank(tuple(shape), what)
    return tuple(shape)


def _runtime_origin(shape) -> str:
    """Where a runtime extent in a shape came from, as the fix to name."""
    values = [shape] if isinstance(shape, Value) else [s for s in shape if isinstance(s, Value)]
    if any(_from_tensor_extent(v) for v in values):
        return ("; a tensor's extents (x.shape[...]) are runtime values inside a kernel (one "
                "binary can serve several sizes), so a tile size cannot come from them: pass it "
                "as a pl.constexpr parameter (BLOCK: pl.constexpr, shape=(BLOCK,)); a ragged "
                "last tile is padded on load and clipped on store")
    return "; annotate the parameter it comes from as pl.constexpr"


def _from_tensor_extent(v, depth=6) -> bool:
    """Is ``v`` computed from a tensor's extent (``x.shape[i]``, through arithmetic)?"""
    op = getattr(v, "owner", None)
    if op is None or depth == 0:
        return False
    return op.name == "tensor.dim" or any(_from_tensor_extent(o, depth - 1)
                                          for o in op.operands if isinstance(o, Value))
