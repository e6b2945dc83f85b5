"""What each kernel-language primitive means, expressed as the Tile IR it emits.

``BUILTINS`` maps a stub's name (see ``pypto.language.core``) to its handler. A handler takes
the builder and the call's arguments (IR values or compile-time Python objects), checks them,
and raises ``TypeError``/``ValueError`` with a message for the user; the frontend turns those
into a ``CompilationError`` at the call's line.
"""
from __future__ import annotations

from ..language import dtypes as dt
from .elementwise import BINARY
from .ir import ScalarType, TensorType, TileType, Value

INDEX = dt.int64        # the scalar unit's integer type
FLOAT = dt.float32      # the scalar unit's float type

# Legal cube operand → accumulator dtypes on 910B.
MATMUL_ACC = {dt.float16: dt.float32, dt.bfloat16: dt.float32, dt.float32: dt.float32,
              dt.int8: dt.int32}


def _is_number(x) -> bool:
    return isinstance(x, (bool, int, float)) and not isinstance(x, Value)


def const(b, value, dtype: dt.dtype) -> Value:
    value = float(value) if dtype.is_floating else int(value)
    return b.emit("arith.constant", [], [ScalarType(dtype)], {"value": value}).result


def to_index(b, v, what: str) -> Value:
    if isinstance(v, bool) or (not isinstance(v, (int, Value))):
        raise TypeError(f"{what} must be an integer, got {type(v).__name__} {v!r}")
    if isinstance(v, int):
        return const(b, v, INDEX)
    if not v.is_scalar or not v.type.dtype.is_int:
        raise TypeError(f"{what} must be an integer scalar, got a {v.type}")
    return scalar_cast(b, v, INDEX)


def to_loop_value(b, name: str, v) -> Value:
    if isinstance(v, Value):
        if v.is_tensor:
            raise TypeError(f"tensor '{name}' cannot be reassigned inside a loop")
        return v
    if _is_number(v):
        return const(b, v, FLOAT if isinstance(v, float) else INDEX)
    raise TypeError(f"'{name}' is {type(v).__name__} {v!r} and changes inside a loop; only "
                    "tiles and numbers can be loop-carried")


def scalar_cast(b, v: Value, dtype: dt.dtype) -> Value:
    if v.type.dtype == dtype:
        return v
    return b.emit("arith.cast", [v], [ScalarType(dtype)], {"dtype": dtype}).result


def _scalar_operand(b, x) -> Value:
    if isinstance(x, Value):
        if not x.is_scalar:
            raise TypeError(f"expected a scalar, got a {x.type}")
        return x
    if not _is_number(x):
        raise TypeError(f"expected a number, got {type(x).__name__} {x!r}")
    return const(b, x, FLOAT if isinstance(x, float) else INDEX)


# -- dtype promotion ---------------------------------------------------------------------------

def promote(a: dt.dtype, c: dt.dtype) -> dt.dtype:
    """Tile–tile result dtype: the wider float wins; float beats int; f16 with bf16 is f32."""
    if a == c:
        return a
    if a.is_floating and c.is_floating:
        if a.bits == c.bits:
            return dt.float32
        return a if a.bits > c.bits else c
    if a.is_floating or c.is_floating:
        return a if a.is_floating else c
    import numpy as np
    return dt.from_any(np.result_type(a.to_numpy(), c.to_numpy()))


# -- scalar and tile arithmetic ----------------------------------------------------------------

def binary(b, name: str, lhs, rhs):
    lt = isinstance(lhs, Value) and lhs.is_tile
    rt = isinstance(rhs, Value) and rhs.is_tile
    if lt or rt:
        return _tile_binary(b, name, lhs, rhs)
    for x in (lhs, rhs):
        if isinstance(x, Value) and x.is_tensor:
            raise TypeError(f"arithmetic on a whole tensor is not supported; pl.load a tile "
                            f"of it first (operator '{name}')")
    return _scalar_binary(b, name, _scalar_operand(b, lhs), _scalar_operand(b, rhs))


def _scalar_binary(b, name, x: Value, y: Value) -> Value:
    is_float = x.type.dtype.is_floating or y.type.dtype.is_floating or name == "div"
    dtype = FLOAT if is_float else INDEX
    x, y = scalar_cast(b, x, dtype), scalar_cast(b, y, dtype)
    if is_float and name in ("floordiv", "mod"):
        raise TypeError(f"'{name}' on float scalars is not supported yet")
    return b.emit(f"arith.{name}", [x, y], [ScalarType(dtype)]).result


def _tile_binary(b, name, lhs, rhs) -> Value:
    op = BINARY.get(name)
    if op is None:
        raise TypeError(f"operator '{name}' on tiles is not supported yet")
    if not (isinstance(lhs, Value) and lhs.is_tile):
        if op.name in ("add", "mul", "max", "min"):
            lhs, rhs = rhs, lhs   # commutative: keep the tile first
        else:
            lhs = full(b, rhs.type.shape, lhs, rhs.type.dtype)
    if isinstance(rhs, Value) and rhs.is_tile:
        if lhs.type.shape != rhs.type.shape:
            raise ValueError(f"tile shapes {lhs.type.shape} and {rhs.type.shape} differ; "
                             "broadcasting between tiles is not supported yet")
        dtype = promote(lhs.type.dtype, rhs.type.dtype)
        lhs, rhs = cast(b, lhs, dtype), cast(b, rhs, dtype)
    else:
        scalar = _scalar_operand(b, rhs)
        dtype = lhs.type.dtype
        if scalar.type.dtype.is_floating and not dtype.is_floating:
            dtype = FLOAT
            lhs = cast(b, lhs, dtype)
        rhs = scalar_cast(b, scalar, dtype)
    if op.floats_only and not dtype.is_floating:
        raise TypeError(f"'/' on {dtype} tiles is not supported yet; cast to a float dtype "
                        "first with .to(pl.float32)")
    return b.emit("tile.binary", [lhs, rhs], [TileType(dtype, lhs.type.shape)],
                  {"op": name}).result


def compare(b, pred: str, lhs, rhs) -> Value:
    x, y = _scalar_operand(b, lhs), _scalar_operand(b, rhs)
    dtype = FLOAT if (x.type.dtype.is_floating or y.type.dtype.is_floating) else INDEX
    x, y = scalar_cast(b, x, dtype), scalar_cast(b, y, dtype)
    return b.emit("arith.cmp", [x, y], [ScalarType(dt.bool_)], {"pred": pred}).result


def _minmax(name):
    def handler(b, x, y):
        if not isinstance(x, Value) and not isinstance(y, Value):
            return min(x, y) if name == "min" else max(x, y)
        return binary(b, name, x, y)
    return handler


# -- attributes and methods of runtime values -----------------------------------------------------

def value_attribute(b, v: Value, attr: str):
    from .frontend import BoundMethod
    if attr == "dtype" and not v.is_scalar:
        return v.type.dtype
    if v.is_tile:
        if attr == "shape":
            return v.type.shape
        if attr in ("to",):
            return BoundMethod(attr, v)
    if v.is_tensor:
        if attr == "shape":
            return tuple(b.emit("tensor.dim", [v], [ScalarType(INDEX)], {"axis": i}).result
                         for i in range(v.type.rank))
        if attr == "ndim":
            return v.type.rank
    if v.is_scalar and attr == "to":
        return BoundMethod(attr, v)
    raise TypeError(f"a {v.type} has no attribute '{attr}'")


def call_method(b, method, args, kwargs):
    if method.name == "to":
        return cast(b, method.receiver, *args, **kwargs)
    raise TypeError(f"unknown method '{method.name}'")  # pragma: no cover


# -- builtins ----------------------------------------------------------------------------------

def _axis(axis) -> int:
    if not isinstance(axis, int) or isinstance(axis, bool) or not 0 <= axis <= 2:
        raise ValueError(f"axis must be the constant 0, 1 or 2, got {axis!r}")
    return axis


def program_id(b, axis):
    return b.emit("pto.program_id", [], [ScalarType(INDEX)], {"axis": _axis(axis)}).result


def num_programs(b, axis):
    return b.emit("pto.num_programs", [], [ScalarType(INDEX)], {"axis": _axis(axis)}).result


def _tensor(x, fn):
    if not (isinstance(x, Value) and x.is_tensor):
        raise TypeError(f"{fn}(): the first argument must be a tensor parameter of the kernel, "
                        f"got {x.type if isinstance(x, Value) else repr(x)}")
    return x


def _shape(shape, what="shape"):
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not shape or not all(
            isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape):
        raise ValueError(f"{what} must be a tuple of positive compile-time integers "
                         f"(pl.constexpr), got {shape!r}")
    if len(shape) > 2:
        raise ValueError(f"tiles of rank {len(shape)} are not supported yet (rank 1 or 2)")
    return tuple(shape)


def _offsets(b, tensor, offsets, fn):
    if not isinstance(offsets, (tuple, list)):
        offsets = (offsets,)
    if len(offsets) != tensor.type.rank:
        raise ValueError(f"{fn}(): {len(offsets)} offsets given for a rank-"
                         f"{tensor.type.rank} tensor")
    return [to_index(b, o, f"{fn}() offset") for o in offsets]


def load(b, tensor, offsets, shape, padding=0):
    tensor = _tensor(tensor, "load")
    shape = _shape(shape)
    if len(shape) != tensor.type.rank:
        raise ValueError(f"load(): tile shape {shape} has rank {len(shape)} but the tensor has "
                         f"rank {tensor.type.rank}")
    if not _is_number(padding):
        raise TypeError(f"load(): padding must be a number, got {padding!r}")
    offs = _offsets(b, tensor, offsets, "load")
    return b.emit("tile.load", [tensor] + offs, [TileType(tensor.type.dtype, shape)],
                  {"shape": shape, "padding": padding}).result


def store(b, tensor, offsets, value):
    tensor = _tensor(tensor, "store")
    if not (isinstance(value, Value) and value.is_tile):
        raise TypeError("store(): value must be a tile")
    if len(value.type.shape) != tensor.type.rank:
        raise ValueError(f"store(): a tile of shape {value.type.shape} cannot be stored into a "
                         f"rank-{tensor.type.rank} tensor")
    offs = _offsets(b, tensor, offsets, "store")
    value = cast(b, value, tensor.type.dtype)   # stores convert to the tensor's dtype
    b.emit("tile.store", [tensor] + offs + [value])


def full(b, shape, value, dtype):
    shape = _shape(shape)
    dtype = dt.from_any(dtype)
    if isinstance(value, Value):
        raise TypeError("full(): the fill value must be a compile-time number for now")
    if not _is_number(value):
        raise TypeError(f"full(): value must be a number, got {value!r}")
    return b.emit("tile.full", [], [TileType(dtype, shape)], {"value": value}).result


def zeros(b, shape, dtype=dt.float32):
    return full(b, shape, 0, dtype)


def cast(b, x, dtype):
    dtype = dt.from_any(dtype)
    if isinstance(x, Value) and x.is_scalar:
        return scalar_cast(b, x, dtype)
    if not (isinstance(x, Value) and x.is_tile):
        raise TypeError(f"cast(): expected a tile, got {x!r}")
    if x.type.dtype == dtype:
        return x
    return b.emit("tile.cast", [x], [TileType(dtype, x.type.shape)], {"dtype": dtype}).result


def matmul(b, a, c, acc=None, out_dtype=None):
    for name, t in (("a", a), ("b", c)):
        if not (isinstance(t, Value) and t.is_tile and len(t.type.shape) == 2):
            raise TypeError(f"matmul(): {name} must be a 2-D tile")
    (m, k), (k2, n) = a.type.shape, c.type.shape
    if k != k2:
        raise ValueError(f"matmul(): inner dimensions differ: {a.type.shape} @ {c.type.shape}")
    if a.type.dtype != c.type.dtype or a.type.dtype not in MATMUL_ACC:
        raise TypeError(f"matmul(): operand dtypes ({a.type.dtype}, {c.type.dtype}) are not a "
                        "legal cube pair: (float16, float16), (bfloat16, bfloat16), "
                        "(float32, float32) or (int8, int8)")
    acc_dtype = MATMUL_ACC[a.type.dtype]
    operands = [a, c]
    if acc is not None:
        if not (isinstance(acc, Value) and acc.is_tile) or acc.type.shape != (m, n):
            raise ValueError(f"matmul(): acc must be a ({m}, {n}) tile")
        if acc.type.dtype != acc_dtype:
            raise TypeError(f"matmul(): acc must be {acc_dtype} for {a.type.dtype} operands, "
                            f"got {acc.type.dtype}")
        operands.append(acc)
    result = b.emit("tile.matmul", operands, [TileType(acc_dtype, (m, n))]).result
    return cast(b, result, out_dtype) if out_dtype is not None else result


def cdiv(b, x, y):
    if not isinstance(x, Value) and not isinstance(y, Value):
        return -(-x // y)
    return binary(b, "floordiv", binary(b, "add", x, binary(b, "sub", y, 1)), y)


BUILTINS = {
    "program_id": program_id, "num_programs": num_programs, "load": load, "store": store,
    "zeros": zeros, "full": full, "cast": cast, "matmul": matmul, "cdiv": cdiv,
    "minimum": _minmax("min"), "maximum": _minmax("max"),
}


def _no_range(b, *args):
    raise TypeError("range() can only be used as the iterable of a for loop")


def _int(b, x):
    return scalar_cast(b, x, INDEX) if isinstance(x, Value) else int(x)


def _float(b, x):
    return scalar_cast(b, x, FLOAT) if isinstance(x, Value) else float(x)


PY_BUILTINS = {min: _minmax("min"), max: _minmax("max"), range: _no_range, int: _int,
               float: _float, len: lambda b, x: len(x)}


def tensor_type(dtype, rank) -> TensorType:
    return TensorType(dtype, rank)
