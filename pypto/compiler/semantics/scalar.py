"""Scalars: constants, casts, arithmetic and comparisons on the scalar unit (int64 and float32),
and the conversions control flow needs (a condition, a loop bound, a value a loop carries).
"""
from __future__ import annotations

import numpy as np

from ...language import dtypes as dt
from ..ir import ScalarType, Value
from .values import describe, is_number

INDEX = dt.int64        # the scalar unit's integer type
FLOAT = dt.float32      # the scalar unit's float type


def const(b, value, dtype: dt.dtype) -> Value:
    if dtype.is_floating:
        value = float(value)
    elif dtype == dt.bool_:
        value = bool(value)
    else:
        value = int(value)
    return b.emit("arith.constant", [], [ScalarType(dtype)], {"value": value}).result


def to_index(b, v, what: str) -> Value:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer, Value)):
        raise TypeError(f"{what} must be an integer, got {describe(v)}")
    if not isinstance(v, Value):
        return const(b, int(v), INDEX)
    if not v.is_scalar or v.type.dtype.is_floating:
        raise TypeError(f"{what} must be an integer scalar, got {describe(v)}")
    return scalar_cast(b, v, INDEX)


def to_loop_value(b, name: str, v) -> Value:
    if isinstance(v, Value):
        if v.is_tensor:
            raise TypeError(f"tensor '{name}' cannot be reassigned inside a loop or branch")
        return v
    if is_number(v):
        return const(b, v, FLOAT if isinstance(v, (float, np.floating)) else INDEX)
    raise TypeError(f"'{name}' is {describe(v)} and changes inside a loop or a branch on a "
                    "runtime condition; only tiles and numbers can")


def scalar_cast(b, v: Value, dtype: dt.dtype) -> Value:
    if v.type.dtype == dtype:
        return v
    return b.emit("arith.cast", [v], [ScalarType(dtype)], {"dtype": dtype}).result


def scalar_operand(b, x) -> Value:
    if isinstance(x, Value):
        if not x.is_scalar:
            raise TypeError(f"expected a scalar, got {describe(x)}")
        return x
    if not is_number(x):
        raise TypeError(f"expected a number, got {describe(x)}")
    if isinstance(x, (bool, np.bool_)):
        return const(b, x, dt.bool_)
    return const(b, x, FLOAT if isinstance(x, (float, np.floating)) else INDEX)


def to_bool(b, x) -> Value:
    """A runtime condition: scalars compare != 0."""
    if isinstance(x, Value) and x.is_tile:
        raise TypeError(f"a condition (if / while / and / or / not) must be a scalar, got "
                        f"{describe(x)}: it picks one path for the whole block, and tile "
                        "data does not reach control flow. To choose per element, compute "
                        "both and select: pl.where(cond, a, b)")
    v = scalar_operand(b, x)
    if v.type.dtype == dt.bool_:
        return v
    return scalar_compare(b, "ne", v, 0)


def scalar_binary(b, name, x: Value, y: Value) -> Value:
    both_bool = x.type.dtype == dt.bool_ and y.type.dtype == dt.bool_
    if name in ("and", "or", "xor") and both_bool:
        return b.emit(f"arith.{name}", [x, y], [ScalarType(dt.bool_)]).result
    is_float = x.type.dtype.is_floating or y.type.dtype.is_floating or name == "div"
    if name == "pow":
        raise TypeError("'**' on runtime scalars is not supported; use tiles or constants")
    if is_float and name in ("and", "or", "xor", "shl", "shr"):
        raise TypeError(f"'{name}' needs integer scalars")
    dtype = FLOAT if is_float else INDEX
    x, y = scalar_cast(b, x, dtype), scalar_cast(b, y, dtype)
    return b.emit(f"arith.{name}", [x, y], [ScalarType(dtype)]).result


def scalar_compare(b, pred: str, lhs, rhs) -> Value:
    x, y = scalar_operand(b, lhs), scalar_operand(b, rhs)
    dtype = FLOAT if (x.type.dtype.is_floating or y.type.dtype.is_floating) else INDEX
    x, y = scalar_cast(b, x, dtype), scalar_cast(b, y, dtype)
    return b.emit("arith.cmp", [x, y], [ScalarType(dt.bool_)], {"pred": pred}).result
