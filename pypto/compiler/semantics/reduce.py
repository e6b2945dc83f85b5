"""Reductions along an axis of a tile (sum, max, min, prod, argmax, argmin, mean) and the
running sum, with the dtypes they accumulate in (small integers sum in int32).
"""
from __future__ import annotations

from ...language import dtypes as dt
from ..ir import TileType, Value
from .arithmetic import binary
from .tile import cast, reshape
from .values import describe, tile_type


def _axis_of(t: TileType, axis):
    rank = len(t.shape)
    if not isinstance(axis, int) or isinstance(axis, bool):
        got = "a value known only at run time" if isinstance(axis, Value) else describe(axis)
        raise TypeError(f"axis must be a compile-time int (a literal or a pl.constexpr), "
                        f"got {got}")
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis!r} out of range for a tile of shape {t.shape}")
    return axis % rank


def _reduce_dtype(op: str, d: dt.dtype) -> dt.dtype:
    if op in ("argmax", "argmin"):
        return dt.int32
    if op in ("sum", "prod") and (d == dt.bool_ or (d.is_int and d.bits < 32)):
        return dt.int32
    return d


def reduce(b, x, op: str, axis=None, keepdims=False):
    t = tile_type(x)
    if not t.shape:
        return x
    if axis is None:
        if op in ("argmax", "argmin") and len(t.shape) > 1:
            raise ValueError(f"{op}() on a 2-D tile needs an axis")
        if op not in ("argmax", "argmin"):
            x = cast(b, x, _reduce_dtype(op, t.dtype))
        for ax in reversed(range(len(t.shape))):
            x = _reduce_axis(b, x, "sum" if op == "mean" else op, ax)
        return x if keepdims else reshape(b, x, ())
    ax = _axis_of(t, axis)
    x = _reduce_axis(b, x, op, ax)
    if not keepdims:
        x = reshape(b, x, tuple(s for i, s in enumerate(x.type.shape) if i != ax))
    return x


def _reduce_axis(b, x, op, axis):
    t = x.type
    shape = tuple(1 if i == axis else s for i, s in enumerate(t.shape))
    x = cast(b, x, t.dtype if op in ("argmax", "argmin") else _reduce_dtype(op, t.dtype))
    return b.emit("tile.reduce", [x], [TileType(_reduce_dtype(op, t.dtype), shape)],
                  {"op": op, "axis": axis}).result


def reduction(op):
    def handler(b, x, axis=None, keepdims=False):
        return reduce(b, x, op, axis, keepdims)
    handler.__name__ = op
    return handler


def mean(b, x, axis=None, keepdims=False):
    t = tile_type(x)
    dtype = t.dtype if t.dtype.is_floating else dt.float32
    x = cast(b, x, dtype)
    count = t.numel if axis is None else t.shape[_axis_of(t, axis)]
    total = reduce(b, x, "sum", axis, keepdims)
    return binary(b, "mul", total, 1.0 / count)


def cumsum(b, x, axis=-1, reverse=False):
    t = tile_type(x)
    if not t.shape:
        return x
    if _axis_of(t, axis) != len(t.shape) - 1:
        raise ValueError("cumsum() is supported along the last axis only")
    if not isinstance(reverse, bool):
        raise TypeError(f"cumsum(reverse=...) must be True or False, got {reverse!r}")
    dtype = _reduce_dtype("sum", t.dtype)
    x = cast(b, x, dtype)
    return b.emit("tile.cumsum", [x], [TileType(dtype, t.shape)],
                  {"axis": len(t.shape) - 1, **({"reverse": True} if reverse else {})}).result
