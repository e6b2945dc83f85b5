"""Making, converting and reshaping tiles: creation (full, arange …), casts, broadcasting,
reshapes and transposes, concatenation and static slicing (``t[0:16, :]``). The other op
families build on these.
"""
from __future__ import annotations

import numpy as np

from ...language import dtypes as dt
from ..ir import TileType, Value
from .promotion import dtype_of_number, promote
from .scalar import scalar_cast
from .shapes import check_rank, tile_shape
from .values import describe, is_number, is_tile, tile_type


# -- creation -------------------------------------------------------------------------------------

def full(b, shape, value, dtype=None):
    shape = tile_shape(shape, allow_empty=True)
    if dtype is None:
        dtype = dtype_of_number(b, value)
    dtype = dt.from_any(dtype)
    if isinstance(value, Value):
        if not value.is_scalar:
            raise TypeError(f"full(): the fill value must be a number or a scalar, got "
                            f"{describe(value)}")
        return b.emit("tile.full", [scalar_cast(b, value, dtype)], [TileType(dtype, shape)],
                      {}).result
    if not is_number(value):
        raise TypeError(f"full(): value must be a number, got {describe(value)}")
    value = float(value) if dtype.is_floating else (bool(value) if dtype == dt.bool_
                                                    else int(value))
    return b.emit("tile.full", [], [TileType(dtype, shape)], {"value": value}).result


def zeros(b, shape, dtype=dt.float32):
    return full(b, shape, 0, dtype)


def ones(b, shape, dtype=dt.float32):
    return full(b, shape, 1, dtype)


def zeros_like(b, x, dtype=None):
    return full(b, tile_type(x).shape, 0, dtype or x.type.dtype)


def ones_like(b, x, dtype=None):
    return full(b, tile_type(x).shape, 1, dtype or x.type.dtype)


def full_like(b, x, value, dtype=None):
    return full(b, tile_type(x).shape, value, dtype or x.type.dtype)


def arange(b, start, end=None):
    if end is None:
        start, end = 0, start
    for v, what in ((start, "start"), (end, "end")):
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"arange(): {what} must be a compile-time integer "
                            f"(pl.constexpr), got {describe(v)}")
    if end <= start:
        raise ValueError(f"arange(): end ({end}) must be greater than start ({start})")
    return b.emit("tile.arange", [], [TileType(dt.int32, (end - start,))],
                  {"start": start, "end": end}).result


# -- casts ----------------------------------------------------------------------------------------

ROUNDINGS = (None, "rint", "floor", "ceil", "trunc")


def cast(b, x, dtype, rounding=None):
    dtype = dt.from_any(dtype)
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of 'rint', 'floor', 'ceil', 'trunc', got "
                         f"{rounding!r}")
    if isinstance(x, Value) and x.is_scalar:
        return scalar_cast(b, x, dtype)
    if not is_tile(x):
        raise TypeError(f"cast(): expected a tile, got {describe(x)}")
    if x.type.dtype == dtype and rounding is None:
        return x
    attrs = {"dtype": dtype}
    if rounding is not None:
        attrs["rounding"] = rounding
    return b.emit("tile.cast", [x], [TileType(dtype, x.type.shape)], attrs).result


# -- broadcasting ---------------------------------------------------------------------------------

def broadcast_shapes(s1: tuple, s2: tuple) -> tuple:
    try:
        shape = tuple(np.broadcast_shapes(s1, s2))
    except ValueError:
        raise ValueError(f"tile shapes {s1} and {s2} cannot be broadcast together") from None
    check_rank(shape, "broadcast shape")
    return shape


def broadcast_to(b, x, shape):
    shape = tile_shape(shape, allow_empty=True)
    if not is_tile(x):
        return full(b, shape, x, dtype_of_number(b, x))
    if x.type.shape == shape:
        return x
    target = broadcast_shapes(x.type.shape, shape)
    if target != shape:
        raise ValueError(f"a tile of shape {x.type.shape} cannot be broadcast to {shape}")
    if len(x.type.shape) < len(shape):
        x = reshape(b, x, (1,) * (len(shape) - len(x.type.shape)) + x.type.shape)
    if x.type.shape == shape:
        return x
    return b.emit("tile.broadcast", [x], [TileType(x.type.dtype, shape)],
                  {"shape": shape}).result


# -- reshapes -------------------------------------------------------------------------------------

def reshape(b, x, shape, *more):
    if more:
        shape = (shape,) + more
    x_type = tile_type(x)
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(shape)
    if shape.count(-1) > 1:
        raise ValueError("reshape(): at most one -1")
    if -1 in shape:
        known = int(np.prod([s for s in shape if s != -1]))
        shape = tuple(x_type.numel // known if s == -1 else s for s in shape)
    shape = tile_shape(shape, "reshape() shape", allow_empty=True)
    if int(np.prod(shape)) != x_type.numel:
        raise ValueError(f"reshape(): cannot reshape a tile of shape {x_type.shape} "
                         f"({x_type.numel} elements) into {shape}")
    if shape == x_type.shape:
        return x
    return b.emit("tile.reshape", [x], [TileType(x_type.dtype, shape)], {"shape": shape}).result


def trans(b, x):
    t = tile_type(x)
    if len(t.shape) < 2:
        return x
    if len(t.shape) > 2:
        raise ValueError(f"trans() of a rank-{len(t.shape)} tile {t.shape}: transposes are "
                         "2-D; for a batched matmul pass a_trans=True / b_trans=True (they "
                         "transpose the last two axes), or transpose each plane t[i]")
    return b.emit("tile.transpose", [x], [TileType(t.dtype, t.shape[::-1])]).result


def expand_dims(b, x, axis):
    t = tile_type(x)
    rank = len(t.shape) + 1
    if not isinstance(axis, int) or not -rank <= axis < rank:
        raise ValueError(f"expand_dims(): axis {axis!r} out of range for the result rank {rank}")
    axis %= rank
    return reshape(b, x, t.shape[:axis] + (1,) + t.shape[axis:])


def concat(b, tiles, axis=0):
    if not isinstance(tiles, (tuple, list)) or len(tiles) < 1 or not all(map(is_tile, tiles)):
        raise TypeError("concat() takes a tuple of tiles")
    rank = len(tiles[0].type.shape)
    if not isinstance(axis, int) or not -rank <= axis < rank:
        raise ValueError(f"concat(): axis {axis!r} out of range for rank {rank}")
    axis %= rank
    dtype = tiles[0].type.dtype
    for t in tiles[1:]:
        dtype = promote(dtype, t.type.dtype)
    ref = tiles[0].type.shape
    for t in tiles:
        s = t.type.shape
        if len(s) != rank or any(s[i] != ref[i] for i in range(rank) if i != axis):
            raise ValueError(f"concat(): tile shapes {[t.type.shape for t in tiles]} differ "
                             f"outside axis {axis}")
    shape = tuple(sum(t.type.shape[axis] for t in tiles) if i == axis else ref[i]
                  for i in range(rank))
    tile_shape(shape, "concat() result shape")
    return b.emit("tile.concat", [cast(b, t, dtype) for t in tiles], [TileType(dtype, shape)],
                  {"axis": axis}).result


# -- static slicing -------------------------------------------------------------------------------

def getitem(b, x, index):
    """Static slicing of a tile: ``t[0:16, :]``, ``t[:, None]``, ``t[3]``."""
    if not is_tile(x):
        raise TypeError(f"indexing is supported on tiles only, got {describe(x)}")
    if not isinstance(index, tuple):
        index = (index,)
    shape = x.type.shape
    starts, stops, out_shape, axis = [], [], [], 0
    for item in index:
        if item is None:
            out_shape.append(1)
            continue
        if axis >= len(shape):
            raise IndexError(f"too many indices for a tile of shape {shape}")
        n = shape[axis]
        if isinstance(item, slice):
            if not all(v is None or (isinstance(v, int) and not isinstance(v, bool))
                       for v in (item.start, item.stop, item.step)):
                raise TypeError("tile slices must have compile-time integer bounds")
            start, stop, step = item.indices(n)
            if step != 1:
                raise ValueError("tile slices must have step 1")
            if stop <= start:
                raise ValueError(f"empty slice {item} of a tile axis of size {n}")
            starts.append(start)
            stops.append(stop)
            out_shape.append(stop - start)
        elif isinstance(item, int) and not isinstance(item, bool):
            i = item + n if item < 0 else item
            if not 0 <= i < n:
                raise IndexError(f"index {item} out of range for a tile axis of size {n}")
            starts.append(i)
            stops.append(i + 1)
        else:
            raise TypeError(f"tile index must be a constant int, slice or None, got "
                            f"{describe(item)}")
        axis += 1
    for n in shape[axis:]:
        starts.append(0)
        stops.append(n)
        out_shape.append(n)
    if tuple(starts) != (0,) * len(shape) or tuple(stops) != shape:
        window = tuple(e - s for s, e in zip(starts, stops))
        x = b.emit("tile.slice", [x], [TileType(x.type.dtype, window)],
                   {"starts": tuple(starts), "stops": tuple(stops)}).result
    return reshape(b, x, tuple(out_shape))
