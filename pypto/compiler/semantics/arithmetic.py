"""Elementwise operators on tiles and scalars (``compiler/elementwise.py`` tables which exist and
on which dtypes). Operands are promoted to one dtype and broadcast to one shape here, so every
``tile.binary`` below sees operands of one shape and one dtype.
"""
from __future__ import annotations

from ...language import dtypes as dt
from ..elementwise import BINARY, COMMUTATIVE, SWAPPED, UNARY
from ..ir import TileType, Value
from .cube import matmul
from .promotion import dtype_of_number, promote, weak_scalar_dtype
from .scalar import const, scalar_binary, scalar_cast, scalar_compare, scalar_operand
from .tile import broadcast_shapes, broadcast_to, cast, full
from .values import describe, is_number, is_tile


def _kind(d: dt.dtype) -> str:
    return "b" if d == dt.bool_ else ("f" if d.is_floating else "i")


def binary(b, name: str, lhs, rhs):
    if name == "matmul":
        return matmul(b, lhs, rhs)
    if is_tile(lhs) or is_tile(rhs):
        return _tile_binary(b, name, lhs, rhs)
    for x in (lhs, rhs):
        if isinstance(x, Value) and x.is_tensor:
            raise TypeError(f"arithmetic on a whole tensor is not supported; pl.load a tile "
                            f"of it first (operator '{name}')")
    return scalar_binary(b, name, scalar_operand(b, lhs), scalar_operand(b, rhs))


def _check_kinds(op, dtype: dt.dtype):
    if _kind(dtype) not in op.kinds:
        allowed = {"f": "float", "i": "integer", "b": "bool"}
        names = " or ".join(allowed[k] for k in op.kinds)
        raise TypeError(f"'{op.name}' is not supported on {dtype} tiles; it needs {names} "
                        "operands")


def _tile_binary(b, name, lhs, rhs) -> Value:
    op = BINARY.get(name)
    if op is None:
        raise TypeError(f"operator '{name}' on tiles is not supported")
    if not is_tile(lhs):                 # scalar ⊕ tile: put the tile first
        if name in COMMUTATIVE or name in SWAPPED:
            return _tile_binary(b, SWAPPED.get(name, name), rhs, lhs)
        lhs = full(b, rhs.type.shape, lhs, weak_scalar_dtype(rhs.type.dtype, lhs))
    if is_tile(rhs):
        shape = broadcast_shapes(lhs.type.shape, rhs.type.shape)
        dtype = promote(lhs.type.dtype, rhs.type.dtype)
        if op.promote_to_float and not dtype.is_floating:
            dtype = dt.float32
        _check_kinds(op, dtype)
        lhs = broadcast_to(b, cast(b, lhs, dtype), shape)
        rhs = broadcast_to(b, cast(b, rhs, dtype), shape)
    else:
        if isinstance(rhs, Value) and rhs.is_tensor:
            raise TypeError("a whole tensor cannot be an operand; pl.load a tile of it first "
                            "(there are no pointers: Triton's x + offs is pl.load(x, "
                            "offsets=(start,), shape=(BLOCK,)))")
        dtype = weak_scalar_dtype(lhs.type.dtype, rhs)
        if op.promote_to_float and not dtype.is_floating:
            dtype = dt.float32
        _check_kinds(op, dtype)
        lhs = cast(b, lhs, dtype)
        rhs = _scalar_as(b, rhs, dtype)
    result = dt.bool_ if op.result == "bool" else dtype
    return b.emit("tile.binary", [lhs, rhs], [TileType(result, lhs.type.shape)],
                  {"op": name}).result


def _scalar_as(b, x, dtype: dt.dtype) -> Value:
    if isinstance(x, Value):
        return scalar_cast(b, scalar_operand(b, x), dtype)
    if not is_number(x):
        raise TypeError(f"expected a number, got {describe(x)}")
    return const(b, x, dtype)


def unary(b, name: str, x):
    op = UNARY[name]
    if not is_tile(x):
        if name == "neg":
            return binary(b, "sub", 0, x)
        if name == "not" and isinstance(x, Value) and x.is_scalar:
            return compare(b, "eq", x, 0)
        raise TypeError(f"{name}() needs a tile, got {describe(x)}")
    dtype = x.type.dtype
    if op.promote_to_float and not dtype.is_floating:
        dtype = dt.float32
    _check_kinds(op, dtype)
    x = cast(b, x, dtype)
    return b.emit("tile.unary", [x], [TileType(dtype, x.type.shape)], {"op": name}).result


def compare(b, pred: str, lhs, rhs) -> Value:
    if is_tile(lhs) or is_tile(rhs):
        return _tile_binary(b, pred, lhs, rhs)
    return scalar_compare(b, pred, lhs, rhs)


def where(b, cond, x, y):
    if not is_tile(cond):
        if not isinstance(cond, Value):
            return x if cond else y
        tiles = [v for v in (x, y) if is_tile(v)]
        if not tiles:
            raise TypeError("where() of two scalars with a runtime condition: write "
                            "`x if cond else y`")
        # a runtime scalar choosing between tiles: its 0/1 as an int32 tile, made a mask
        shape = tiles[0].type.shape
        for v in tiles[1:]:
            shape = broadcast_shapes(shape, v.type.shape)
        cond = cast(b, full(b, shape, scalar_cast(b, cond, dt.int32), dt.int32), dt.bool_)
    cond = cast(b, cond, dt.bool_)
    tiles = [v for v in (x, y) if is_tile(v)]
    if tiles:
        dtype = tiles[0].type.dtype if len(tiles) == 1 else promote(x.type.dtype, y.type.dtype)
        if len(tiles) == 1:
            other = y if is_tile(x) else x
            dtype = weak_scalar_dtype(dtype, other)
    else:
        dtype = promote(dtype_of_number(b, x), dtype_of_number(b, y))
    shape = cond.type.shape
    for v in tiles:
        shape = broadcast_shapes(shape, v.type.shape)
    x, y = (broadcast_to(b, cast(b, v, dtype), shape) if is_tile(v) else full(b, shape, v, dtype)
            for v in (x, y))
    cond = broadcast_to(b, cond, shape)
    return b.emit("tile.where", [cond, x, y], [TileType(dtype, shape)]).result


def min_or_max(name):
    def handler(b, x, y):
        if not isinstance(x, Value) and not isinstance(y, Value):
            return min(x, y) if name == "min" else max(x, y)
        return binary(b, name, x, y)
    return handler


def clamp(b, x, lo, hi):
    return binary(b, "min", binary(b, "max", x, lo), hi)


def unary_handler(name):
    def handler(b, x):
        return unary(b, name, x)
    handler.__name__ = name
    return handler


def cdiv(b, x, y):
    if not isinstance(x, Value) and not isinstance(y, Value):
        return -(-x // y)
    return binary(b, "floordiv", binary(b, "add", x, binary(b, "sub", y, 1)), y)
