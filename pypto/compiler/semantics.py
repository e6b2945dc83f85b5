"""What each kernel-language primitive means, expressed as the Tile IR it emits.

``BUILTINS`` maps a stub's name (see ``pypto.language.core``) to its handler; ``TILE_METHODS``
maps tile methods (``x.to``, ``x.sum`` …) to the same handlers. A handler takes the builder and
the call's arguments (IR values or compile-time Python objects), checks them, and raises
``TypeError``/``ValueError`` with a message for the user; the frontend turns those into a
``CompilationError`` at the call's line. Dtype promotion and broadcasting happen here, so the
Tile IR below is explicit: every binary op sees operands of one shape and one dtype.
"""
from __future__ import annotations

import numpy as np

from ..language import dtypes as dt
from .elementwise import BINARY, COMMUTATIVE, SWAPPED, UNARY
from .ir import ScalarType, TileType, Value

INDEX = dt.int64        # the scalar unit's integer type
FLOAT = dt.float32      # the scalar unit's float type

# Legal cube operand → accumulator dtypes on 910B.
MATMUL_ACC = {dt.float16: dt.float32, dt.bfloat16: dt.float32, dt.float32: dt.float32,
              dt.int8: dt.int32}
ROUNDINGS = (None, "rint", "floor", "ceil", "trunc")


def _is_number(x) -> bool:
    return isinstance(x, (bool, int, float, np.number, np.bool_)) and not isinstance(x, Value)


def _is_tile(x) -> bool:
    return isinstance(x, Value) and x.is_tile


def _kind(d: dt.dtype) -> str:
    return "b" if d == dt.bool_ else ("f" if d.is_floating else "i")


def _describe(x) -> str:
    if isinstance(x, Value):
        return f"a {x.type}"
    if type(x).__name__ == "TensorSlice":
        return ("a tensor window x[a:b] (only pl.async_load takes one; read a tile with "
                "pl.load(x, offsets=..., shape=...))")
    return f"{type(x).__name__} {x!r}"


# -- scalars ------------------------------------------------------------------------------------

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
        raise TypeError(f"{what} must be an integer, got {_describe(v)}")
    if not isinstance(v, Value):
        return const(b, int(v), INDEX)
    if not v.is_scalar or v.type.dtype.is_floating:
        raise TypeError(f"{what} must be an integer scalar, got {_describe(v)}")
    return scalar_cast(b, v, INDEX)


def to_loop_value(b, name: str, v) -> Value:
    if isinstance(v, Value):
        if v.is_tensor:
            raise TypeError(f"tensor '{name}' cannot be reassigned inside a loop or branch")
        return v
    if _is_number(v):
        return const(b, v, FLOAT if isinstance(v, (float, np.floating)) else INDEX)
    raise TypeError(f"'{name}' is {_describe(v)} and changes inside a loop or a branch on a "
                    "runtime condition; only tiles and numbers can")


def scalar_cast(b, v: Value, dtype: dt.dtype) -> Value:
    if v.type.dtype == dtype:
        return v
    return b.emit("arith.cast", [v], [ScalarType(dtype)], {"dtype": dtype}).result


def _scalar_operand(b, x) -> Value:
    if isinstance(x, Value):
        if not x.is_scalar:
            raise TypeError(f"expected a scalar, got {_describe(x)}")
        return x
    if not _is_number(x):
        raise TypeError(f"expected a number, got {_describe(x)}")
    if isinstance(x, (bool, np.bool_)):
        return const(b, x, dt.bool_)
    return const(b, x, FLOAT if isinstance(x, (float, np.floating)) else INDEX)


def to_bool(b, x) -> Value:
    """A runtime condition: scalars compare != 0."""
    if isinstance(x, Value) and x.is_tile:
        raise TypeError(f"a condition (if / while / and / or / not) must be a scalar, got "
                        f"{_describe(x)}: it picks one path for the whole block, and tile "
                        "data does not reach control flow. To choose per element, compute "
                        "both and select: pl.where(cond, a, b)")
    v = _scalar_operand(b, x)
    if v.type.dtype == dt.bool_:
        return v
    return compare(b, "ne", v, 0)


def _scalar_binary(b, name, x: Value, y: Value) -> Value:
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


# -- dtype promotion ------------------------------------------------------------------------------

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


def _weak_scalar_dtype(tile_dtype: dt.dtype, scalar) -> dt.dtype:
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


# -- broadcasting ---------------------------------------------------------------------------------

def broadcast_shapes(s1: tuple, s2: tuple) -> tuple:
    try:
        shape = tuple(np.broadcast_shapes(s1, s2))
    except ValueError:
        raise ValueError(f"tile shapes {s1} and {s2} cannot be broadcast together") from None
    _check_rank(shape, "broadcast shape")
    return shape


def broadcast_to(b, x, shape):
    shape = _shape(shape, allow_empty=True)
    if not _is_tile(x):
        return full(b, shape, x, _dtype_of_number(b, x))
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


def _dtype_of_number(b, x) -> dt.dtype:
    if isinstance(x, Value):
        return x.type.dtype
    if isinstance(x, (bool, np.bool_)):
        return dt.bool_
    return dt.float32 if isinstance(x, (float, np.floating)) else dt.int32


# -- elementwise ----------------------------------------------------------------------------------

def binary(b, name: str, lhs, rhs):
    if name == "matmul":
        return matmul(b, lhs, rhs)
    if _is_tile(lhs) or _is_tile(rhs):
        return _tile_binary(b, name, lhs, rhs)
    for x in (lhs, rhs):
        if isinstance(x, Value) and x.is_tensor:
            raise TypeError(f"arithmetic on a whole tensor is not supported; pl.load a tile "
                            f"of it first (operator '{name}')")
    return _scalar_binary(b, name, _scalar_operand(b, lhs), _scalar_operand(b, rhs))


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
    if not _is_tile(lhs):                 # scalar ⊕ tile: put the tile first
        if name in COMMUTATIVE or name in SWAPPED:
            return _tile_binary(b, SWAPPED.get(name, name), rhs, lhs)
        lhs = full(b, rhs.type.shape, lhs, _weak_scalar_dtype(rhs.type.dtype, lhs))
    if _is_tile(rhs):
        shape = broadcast_shapes(lhs.type.shape, rhs.type.shape)
        dtype = promote(lhs.type.dtype, rhs.type.dtype)
        if op.promote_to_float and not dtype.is_floating:
            dtype = dt.float32
        _check_kinds(op, dtype)
        lhs = broadcast_to(b, cast(b, lhs, dtype), shape)
        rhs = broadcast_to(b, cast(b, rhs, dtype), shape)
    else:
        if isinstance(rhs, Value) and rhs.is_tensor:
            raise TypeError("a whole tensor cannot be an operand; pl.load a tile of it first")
        dtype = _weak_scalar_dtype(lhs.type.dtype, rhs)
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
        return scalar_cast(b, _scalar_operand(b, x), dtype)
    if not _is_number(x):
        raise TypeError(f"expected a number, got {_describe(x)}")
    return const(b, x, dtype)


def unary(b, name: str, x):
    op = UNARY[name]
    if not _is_tile(x):
        if name == "neg":
            return binary(b, "sub", 0, x)
        if name == "not" and isinstance(x, Value) and x.is_scalar:
            return compare(b, "eq", x, 0)
        raise TypeError(f"{name}() needs a tile, got {_describe(x)}")
    dtype = x.type.dtype
    if op.promote_to_float and not dtype.is_floating:
        dtype = dt.float32
    _check_kinds(op, dtype)
    x = cast(b, x, dtype)
    return b.emit("tile.unary", [x], [TileType(dtype, x.type.shape)], {"op": name}).result


def compare(b, pred: str, lhs, rhs) -> Value:
    if _is_tile(lhs) or _is_tile(rhs):
        return _tile_binary(b, pred, lhs, rhs)
    x, y = _scalar_operand(b, lhs), _scalar_operand(b, rhs)
    dtype = FLOAT if (x.type.dtype.is_floating or y.type.dtype.is_floating) else INDEX
    x, y = scalar_cast(b, x, dtype), scalar_cast(b, y, dtype)
    return b.emit("arith.cmp", [x, y], [ScalarType(dt.bool_)], {"pred": pred}).result


def where(b, cond, x, y):
    if not _is_tile(cond):
        if isinstance(cond, Value):
            raise TypeError("where() with a scalar condition: use `x if cond else y`")
        return x if cond else y
    cond = cast(b, cond, dt.bool_)
    tiles = [v for v in (x, y) if _is_tile(v)]
    if tiles:
        dtype = tiles[0].type.dtype if len(tiles) == 1 else promote(x.type.dtype, y.type.dtype)
        if len(tiles) == 1:
            other = y if _is_tile(x) else x
            dtype = _weak_scalar_dtype(dtype, other)
    else:
        dtype = promote(_dtype_of_number(b, x), _dtype_of_number(b, y))
    shape = cond.type.shape
    for v in tiles:
        shape = broadcast_shapes(shape, v.type.shape)
    x, y = (broadcast_to(b, cast(b, v, dtype), shape) if _is_tile(v) else full(b, shape, v, dtype)
            for v in (x, y))
    cond = broadcast_to(b, cond, shape)
    return b.emit("tile.where", [cond, x, y], [TileType(dtype, shape)]).result


def _minmax(name):
    def handler(b, x, y):
        if not isinstance(x, Value) and not isinstance(y, Value):
            return min(x, y) if name == "min" else max(x, y)
        return binary(b, name, x, y)
    return handler


def clamp(b, x, lo, hi):
    return binary(b, "min", binary(b, "max", x, lo), hi)


def _unary_builtin(name):
    def handler(b, x):
        return unary(b, name, x)
    handler.__name__ = name
    return handler


# -- casts ----------------------------------------------------------------------------------------

def cast(b, x, dtype, rounding=None):
    dtype = dt.from_any(dtype)
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of 'rint', 'floor', 'ceil', 'trunc', got "
                         f"{rounding!r}")
    if isinstance(x, Value) and x.is_scalar:
        return scalar_cast(b, x, dtype)
    if not _is_tile(x):
        raise TypeError(f"cast(): expected a tile, got {_describe(x)}")
    if x.type.dtype == dtype and rounding is None:
        return x
    attrs = {"dtype": dtype}
    if rounding is not None:
        attrs["rounding"] = rounding
    return b.emit("tile.cast", [x], [TileType(dtype, x.type.shape)], attrs).result


# -- attributes and methods of runtime values ---------------------------------------------------------

def value_attribute(b, v: Value, attr: str):
    from .ast_to_ir import BoundMethod
    if attr == "dtype" and not v.is_scalar:
        return v.type.dtype
    if v.is_tile:
        if attr == "shape":
            return v.type.shape
        if attr == "ndim":
            return len(v.type.shape)
        if attr == "T":
            return trans(b, v)
        if attr in TILE_METHODS:
            return BoundMethod(attr, v)
    if v.is_tensor:
        if attr == "shape" and v.type.layout != "ND":
            return v.type.shape          # a layout tensor's logical shape: always specialised
        if attr == "shape":
            return tuple(b.emit("tensor.dim", [v], [ScalarType(INDEX)], {"axis": i}).result
                         for i in range(v.type.rank))
        if attr == "ndim":
            return v.type.rank
    if v.is_scalar and attr == "to":
        return BoundMethod(attr, v)
    raise TypeError(f"{_describe(v)} has no attribute '{attr}'")


def call_method(b, method, args, kwargs):
    return TILE_METHODS[method.name](b, method.receiver, *args, **kwargs)


def getitem(b, x, index):
    """Static slicing of a tile: ``t[0:16, :]``, ``t[:, None]``, ``t[3]``."""
    if not _is_tile(x):
        raise TypeError(f"indexing is supported on tiles only, got {_describe(x)}")
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
                            f"{_describe(item)}")
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


# -- creation ----------------------------------------------------------------------------------------

def full(b, shape, value, dtype=None):
    shape = _shape(shape, allow_empty=True)
    if dtype is None:
        dtype = _dtype_of_number(b, value)
    dtype = dt.from_any(dtype)
    if isinstance(value, Value):
        if not value.is_scalar:
            raise TypeError(f"full(): the fill value must be a number or a scalar, got "
                            f"{_describe(value)}")
        return b.emit("tile.full", [scalar_cast(b, value, dtype)], [TileType(dtype, shape)],
                      {}).result
    if not _is_number(value):
        raise TypeError(f"full(): value must be a number, got {_describe(value)}")
    value = float(value) if dtype.is_floating else (bool(value) if dtype == dt.bool_
                                                    else int(value))
    return b.emit("tile.full", [], [TileType(dtype, shape)], {"value": value}).result


def zeros(b, shape, dtype=dt.float32):
    return full(b, shape, 0, dtype)


def ones(b, shape, dtype=dt.float32):
    return full(b, shape, 1, dtype)


def zeros_like(b, x, dtype=None):
    return full(b, _like(x).shape, 0, dtype or x.type.dtype)


def ones_like(b, x, dtype=None):
    return full(b, _like(x).shape, 1, dtype or x.type.dtype)


def full_like(b, x, value, dtype=None):
    return full(b, _like(x).shape, value, dtype or x.type.dtype)


def _like(x) -> TileType:
    if not _is_tile(x):
        raise TypeError(f"expected a tile, got {_describe(x)}")
    return x.type


def arange(b, start, end=None):
    if end is None:
        start, end = 0, start
    for v, what in ((start, "start"), (end, "end")):
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"arange(): {what} must be a compile-time integer "
                            f"(pl.constexpr), got {_describe(v)}")
    if end <= start:
        raise ValueError(f"arange(): end ({end}) must be greater than start ({start})")
    return b.emit("tile.arange", [], [TileType(dt.int32, (end - start,))],
                  {"start": start, "end": end}).result


# -- shapes ----------------------------------------------------------------------------------------

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


def _shape(shape, what="shape", allow_empty=False):
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
    _check_rank(tuple(shape), what)
    return tuple(shape)


MAX_TILE_RANK = 4       # rank 3 and 4 tiles are unrolled into rank-2 planes (passes/unbatch.py)


def _check_rank(shape: tuple, what: str) -> None:
    if len(shape) > MAX_TILE_RANK:
        raise ValueError(f"tiles of rank {len(shape)} are not supported (rank 0 to "
                         f"{MAX_TILE_RANK}); got {what} {shape}")


def reshape(b, x, shape, *more):
    if more:
        shape = (shape,) + more
    x_type = _like(x)
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(shape)
    if shape.count(-1) > 1:
        raise ValueError("reshape(): at most one -1")
    if -1 in shape:
        known = int(np.prod([s for s in shape if s != -1]))
        shape = tuple(x_type.numel // known if s == -1 else s for s in shape)
    shape = _shape(shape, "reshape() shape", allow_empty=True)
    if int(np.prod(shape)) != x_type.numel:
        raise ValueError(f"reshape(): cannot reshape a tile of shape {x_type.shape} "
                         f"({x_type.numel} elements) into {shape}")
    if shape == x_type.shape:
        return x
    return b.emit("tile.reshape", [x], [TileType(x_type.dtype, shape)], {"shape": shape}).result


def trans(b, x):
    t = _like(x)
    if len(t.shape) < 2:
        return x
    if len(t.shape) > 2:
        raise ValueError(f"trans() of a rank-{len(t.shape)} tile {t.shape}: transposes are "
                         "2-D; for a batched matmul pass a_trans=True / b_trans=True (they "
                         "transpose the last two axes), or transpose each plane t[i]")
    return b.emit("tile.transpose", [x], [TileType(t.dtype, t.shape[::-1])]).result


def expand_dims(b, x, axis):
    t = _like(x)
    rank = len(t.shape) + 1
    if not isinstance(axis, int) or not -rank <= axis < rank:
        raise ValueError(f"expand_dims(): axis {axis!r} out of range for the result rank {rank}")
    axis %= rank
    return reshape(b, x, t.shape[:axis] + (1,) + t.shape[axis:])


def concat(b, tiles, axis=0):
    if not isinstance(tiles, (tuple, list)) or len(tiles) < 1 or not all(map(_is_tile, tiles)):
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
    _shape(shape, "concat() result shape")
    return b.emit("tile.concat", [cast(b, t, dtype) for t in tiles], [TileType(dtype, shape)],
                  {"axis": axis}).result


# -- reductions ----------------------------------------------------------------------------------------

def _axis_of(t: TileType, axis):
    rank = len(t.shape)
    if not isinstance(axis, int) or isinstance(axis, bool) or not -rank <= axis < rank:
        raise ValueError(f"axis {axis!r} out of range for a tile of shape {t.shape}")
    return axis % rank


def _reduce_dtype(op: str, d: dt.dtype) -> dt.dtype:
    if op in ("argmax", "argmin"):
        return dt.int32
    if op in ("sum", "prod") and (d == dt.bool_ or (d.is_int and d.bits < 32)):
        return dt.int32
    return d


def reduce(b, x, op: str, axis=None, keepdims=False):
    t = _like(x)
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


def _reduction(op):
    def handler(b, x, axis=None, keepdims=False):
        return reduce(b, x, op, axis, keepdims)
    handler.__name__ = op
    return handler


def mean(b, x, axis=None, keepdims=False):
    t = _like(x)
    dtype = t.dtype if t.dtype.is_floating else dt.float32
    x = cast(b, x, dtype)
    count = t.numel if axis is None else t.shape[_axis_of(t, axis)]
    total = reduce(b, x, "sum", axis, keepdims)
    return binary(b, "mul", total, 1.0 / count)


def cumsum(b, x, axis=-1):
    t = _like(x)
    if not t.shape:
        return x
    if _axis_of(t, axis) != len(t.shape) - 1:
        raise ValueError("cumsum() is supported along the last axis only")
    dtype = _reduce_dtype("sum", t.dtype)
    x = cast(b, x, dtype)
    return b.emit("tile.cumsum", [x], [TileType(dtype, t.shape)],
                  {"axis": len(t.shape) - 1}).result


# -- sorting ---------------------------------------------------------------------------------------------

SORT_DTYPES = (dt.float16, dt.float32, dt.int8, dt.int16, dt.int32)


def _sorted(b, x, k, descending, fn):
    """``tile.sort``: the first ``k`` of the stable sort along the last axis, as (values,
    int32 indices) tiles of ``k`` columns."""
    if not _is_tile(x):
        raise TypeError(f"{fn}(): expected a tile, got {_describe(x)}")
    t = x.type
    if not t.shape:
        raise ValueError(f"{fn}(): a rank-0 tile has no axis to sort along")
    if t.dtype not in SORT_DTYPES:
        raise TypeError(f"{fn}() sorts {', '.join(map(str, SORT_DTYPES))} tiles, not "
                        f"{t.dtype}")
    if not isinstance(descending, (bool, np.bool_)):
        raise TypeError(f"{fn}(): the direction must be a compile-time bool, got "
                        f"{_describe(descending)}")
    n = t.shape[-1]
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"{fn}(): k must be a compile-time integer, got {_describe(k)}")
    if not 1 <= k <= n:
        raise ValueError(f"{fn}(): k = {k} but the last axis has {n} elements; use "
                         f"1 <= k <= {n}")
    shape = t.shape[:-1] + (k,)
    op = b.emit("tile.sort", [x], [TileType(t.dtype, shape), TileType(dt.int32, shape)],
                {"k": k, "descending": bool(descending)})
    return op.results[0], op.results[1]


def sort(b, x, descending=False):
    return _sorted(b, x, _like(x).shape[-1] if _is_tile(x) and x.type.shape else 1,
                   descending, "sort")[0]


def argsort(b, x, descending=False):
    return _sorted(b, x, _like(x).shape[-1] if _is_tile(x) and x.type.shape else 1,
                   descending, "argsort")[1]


def topk(b, x, k, largest=True):
    return _sorted(b, x, k, largest, "topk")


# -- memory ----------------------------------------------------------------------------------------------

def _axis(axis) -> int:
    if not isinstance(axis, int) or isinstance(axis, bool) or not 0 <= axis <= 2:
        raise ValueError(f"axis must be the constant 0, 1 or 2, got {axis!r}")
    return axis


def program_id(b, axis=0):
    return b.emit("pto.program_id", [], [ScalarType(INDEX)], {"axis": _axis(axis)}).result


def num_programs(b, axis=0):
    return b.emit("pto.num_programs", [], [ScalarType(INDEX)], {"axis": _axis(axis)}).result


def _tensor(x, fn):
    if not (isinstance(x, Value) and x.is_tensor):
        raise TypeError(f"{fn}(): the first argument must be a tensor parameter of the kernel, "
                        f"got {_describe(x)}")
    return x


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
    if tensor.type.layout != "ND":
        _layout_window(tensor.type, shape)
    elif len(shape) != tensor.type.rank:
        raise ValueError(f"load(): tile shape {shape} has rank {len(shape)} but the tensor has "
                         f"rank {tensor.type.rank}")
    if padding is not None and not _is_number(padding):
        raise TypeError(f"load(): padding must be a compile-time number, or None for a "
                        f"window inside the tensor, got {_describe(padding)}")
    offs = _offsets(b, tensor, offsets, "load")
    return b.emit("tile.load", [tensor] + offs, [TileType(tensor.type.dtype, shape)],
                  {"shape": shape, "padding": padding}).result


def _layout_window(ty, shape):
    """The tile shapes a load from a layout tensor can have (pypto.layout.load_window says
    what they mean): NZ, whole 16 x C0 fractals; NC1HWC0, (pixels, channels) with at most
    C0 channels, one 32-byte block per pixel."""
    from ..layout import M0, c0_for
    if ty.layout == "INT4":
        return _int4_window(shape)
    c0 = c0_for(ty.dtype)
    if len(shape) != 2:
        raise ValueError(f"load(): a load from a {ty.layout} tensor gives a 2-D tile, got "
                         f"shape {shape}")
    if ty.layout == "NZ" and (shape[0] % M0 or shape[1] % c0):
        raise ValueError(f"load(): a tile loaded from an NZ tensor is made of whole "
                         f"{M0} x {c0} fractals ({ty.dtype}), got shape {shape}; use a "
                         f"multiple of {M0} rows and of {c0} columns")
    if ty.layout == "NC1HWC0" and shape[1] > c0:
        raise ValueError(f"load(): a tile loaded from an NC1HWC0 tensor is (pixels, "
                         f"channels) with at most C0 = {c0} channels (one group of the C1 "
                         f"axis), got shape {shape}; load each group of {c0} channels "
                         "separately")


def _int4_window(shape):
    """A packed int4 window is whole bytes: an even number of columns."""
    if shape[-1] % 2:
        raise ValueError(f"a packed int4 tile has an even last dimension (two values per "
                         f"byte), got shape {shape}; round the block size up to an even number "
                         "(the tensor itself may have an odd length: its tail is padded)")


ATOMICS = (None, "add")
ATOMIC_DTYPES = (dt.float32, dt.float16, dt.bfloat16, dt.int32, dt.int64)


def store(b, tensor, offsets, value, atomic=None):
    tensor = _tensor(tensor, "store")
    if tensor.type.layout not in ("ND", "INT4"):
        raise ValueError(f"store(): the tensor is in the {tensor.type.layout} layout, and "
                         "kernels store into ND tensors only; store into an ND tensor and "
                         "convert it on the host (pypto.layout.to_"
                         f"{tensor.type.layout.lower()})")
    if atomic not in ATOMICS:
        raise ValueError(f"store(): atomic must be None or 'add', got {atomic!r}")
    if atomic and tensor.type.dtype not in ATOMIC_DTYPES:
        raise TypeError(f"store(atomic='add') supports {', '.join(map(str, ATOMIC_DTYPES))} "
                        f"tensors, not {tensor.type.dtype}")
    if not _is_tile(value):
        hint = "; store a scalar as a one-element tile: pl.full((1,), value)" \
            if isinstance(value, Value) and value.is_scalar or _is_number(value) else ""
        raise TypeError(f"store(): value must be a tile, got {_describe(value)}{hint}")
    if len(value.type.shape) != tensor.type.rank:
        raise ValueError(f"store(): a tile of shape {value.type.shape} cannot be stored into a "
                         f"rank-{tensor.type.rank} tensor")
    if tensor.type.layout == "INT4":
        _int4_window(value.type.shape)
    offs = _offsets(b, tensor, offsets, "store")
    value = cast(b, value, tensor.type.dtype)   # stores convert to the tensor's dtype
    b.emit("tile.store", [tensor] + offs + [value], attrs={"atomic": atomic} if atomic else {})


# -- indexed memory access ------------------------------------------------------------------------

# value dtypes gather/scatter move: the ones A2/A3's scalar unit reads and writes in UB
# (TGETVAL / TSETVAL) and its vector unit keeps in tiles; 64-bit and bool tiles have no form
INDEXED_DTYPES = (dt.float16, dt.bfloat16, dt.float32, dt.int8, dt.uint8, dt.int16, dt.int32)


def _index_tile(indices, tensor, fn):
    """The index operand: an integer tile (at most 32 bits) of the tensor's rank."""
    if not _is_tile(indices):
        raise TypeError(f"{fn}(): indices must be an integer tile, got {_describe(indices)}")
    d = indices.type.dtype
    if not d.is_int or d.bits > 32:
        raise TypeError(f"{fn}(): indices must be an int8/int16/int32 tile, got a {d} tile; "
                        f"convert them with indices.to(pl.int32)")
    if len(indices.type.shape) != tensor.type.rank:
        raise ValueError(f"{fn}(): indices of shape {indices.type.shape} (rank "
                         f"{len(indices.type.shape)}) for a rank-{tensor.type.rank} tensor; "
                         "they must have the tensor's rank (torch.gather's rule)")
    return indices


def _indexed_tensor(tensor, fn):
    tensor = _tensor(tensor, fn)
    if tensor.type.layout != "ND":
        raise ValueError(f"{fn}(): the tensor is in the {tensor.type.layout} layout; indexed "
                         "access takes ND tensors only")
    if tensor.type.dtype not in INDEXED_DTYPES:
        raise TypeError(f"{fn}(): a {tensor.type.dtype} tensor; indexed access moves "
                        f"{', '.join(map(str, INDEXED_DTYPES))} elements")
    return tensor


def _index_axis(axis, tensor, fn) -> int:
    rank = tensor.type.rank
    if not isinstance(axis, int) or isinstance(axis, bool) or not -rank <= axis < rank:
        raise ValueError(f"{fn}(): axis {axis!r} out of range for a rank-{rank} tensor "
                         f"(use 0{' or 1' if rank == 2 else ''})")
    return axis % rank


def _window_offsets(b, tensor, offsets, fn):
    if offsets is None:
        offsets = (0,) * tensor.type.rank
    return _offsets(b, tensor, offsets, fn)


def gather(b, tensor, indices, axis=0, offsets=None, padding=0):
    tensor = _indexed_tensor(tensor, "gather")
    indices = _index_tile(indices, tensor, "gather")
    ax = _index_axis(axis, tensor, "gather")
    if not _is_number(padding):
        raise TypeError(f"gather(): padding must be a compile-time number, got "
                        f"{_describe(padding)}")
    offs = _window_offsets(b, tensor, offsets, "gather")
    return b.emit("tile.gather", [tensor, indices] + offs,
                  [TileType(tensor.type.dtype, indices.type.shape)],
                  {"axis": ax, "padding": padding}).result


SCATTER_REDUCE = (None, "add")


def scatter(b, tensor, indices, value, axis=0, offsets=None, reduce=None):
    tensor = _indexed_tensor(tensor, "scatter")
    indices = _index_tile(indices, tensor, "scatter")
    ax = _index_axis(axis, tensor, "scatter")
    if reduce not in SCATTER_REDUCE:
        raise ValueError(f"scatter(): reduce must be None or 'add', got {reduce!r}")
    if reduce and tensor.type.dtype not in ATOMIC_DTYPES:
        raise TypeError(f"scatter(reduce='add') supports {', '.join(map(str, ATOMIC_DTYPES))} "
                        f"tensors, not {tensor.type.dtype}")
    shape = indices.type.shape
    if _is_tile(value):
        if value.type.shape != shape:
            raise ValueError(f"scatter(): value of shape {value.type.shape} for indices of "
                             f"shape {shape}; they must have one shape")
    elif _is_number(value) or (isinstance(value, Value) and value.is_scalar):
        value = full(b, shape, value, tensor.type.dtype)
    else:
        raise TypeError(f"scatter(): value must be a tile or a number, got {_describe(value)}")
    offs = _window_offsets(b, tensor, offsets, "scatter")
    value = cast(b, value, tensor.type.dtype)      # stores convert to the tensor's dtype
    attrs = {"axis": ax}
    if reduce:
        attrs["reduce"] = reduce
    b.emit("tile.scatter", [tensor, indices, value] + offs, attrs=attrs)


# -- cube ------------------------------------------------------------------------------------------------

def matmul(b, a, c, acc=None, out_dtype=None, a_trans=False, b_trans=False):
    """2-D, or batched: a of (..., M, K) and b of (..., K, N) with broadcast batch axes (rank
    3 or 4, numpy's matmul rule); a_trans / b_trans transpose the last two axes."""
    for name, t in (("a", a), ("b", c)):
        if not (_is_tile(t) and 2 <= len(t.type.shape) <= MAX_TILE_RANK):
            raise TypeError(f"matmul(): {name} must be a tile of rank 2 to {MAX_TILE_RANK}, "
                            f"got {_describe(t)}")
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
    _check_rank(batch + (m, n), "matmul result shape")
    if a.type.dtype != c.type.dtype or a.type.dtype not in MATMUL_ACC:
        raise TypeError(f"matmul(): operand dtypes ({a.type.dtype}, {c.type.dtype}) are not a "
                        "legal cube pair: (float16, float16), (bfloat16, bfloat16), "
                        "(float32, float32) or (int8, int8)")
    acc_dtype = MATMUL_ACC[a.type.dtype]
    if batch:               # explicit batch axes below: a broadcast plane is reused
        a = broadcast_to(b, a, batch + a.type.shape[-2:])
        c = broadcast_to(b, c, batch + c.type.shape[-2:])
    operands = [a, c]
    if acc is not None:
        if not _is_tile(acc) or acc.type.shape != batch + (m, n):
            raise ValueError(f"matmul(): acc must be a {batch + (m, n)} tile, got "
                             f"{_describe(acc)}")
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


def cdiv(b, x, y):
    if not isinstance(x, Value) and not isinstance(y, Value):
        return -(-x // y)
    return binary(b, "floordiv", binary(b, "add", x, binary(b, "sub", y, 1)), y)


def static_assert(b, cond, msg=""):
    if isinstance(cond, Value):
        raise TypeError("static_assert() needs a compile-time condition; this one depends on "
                        "runtime values")
    if not cond:
        raise ValueError(f"static_assert failed{': ' + str(msg) if msg else ''}")


def static_print(b, *args):
    print(*(a if not isinstance(a, Value) else f"<runtime {a.type}>" for a in args))


def _loop_only(name):
    def handler(b, *args, **kwargs):
        raise TypeError(f"{name}() can only be used as the iterable of a for loop")
    return handler


BUILTINS = {
    "static_assert": static_assert, "static_print": static_print,
    "static_range": _loop_only("static_range"), "range": _loop_only("pl.range"),
    "program_id": program_id, "num_programs": num_programs, "load": load, "store": store,
    "gather": gather, "scatter": scatter, "sort": sort, "argsort": argsort, "topk": topk,
    "zeros": zeros, "ones": ones, "full": full, "zeros_like": zeros_like,
    "ones_like": ones_like, "full_like": full_like, "arange": arange,
    "cast": cast, "matmul": matmul, "cdiv": cdiv, "where": where, "clamp": clamp,
    "minimum": _minmax("min"), "maximum": _minmax("max"),
    "reshape": reshape, "trans": trans, "expand_dims": expand_dims,
    "broadcast_to": broadcast_to, "concat": concat,
    "mean": mean, "cumsum": cumsum,
    **{op: _reduction(op) for op in ("sum", "max", "min", "prod", "argmax", "argmin")},
    **{name: _unary_builtin(name) for name in UNARY if name not in ("neg", "not")},
}

TILE_METHODS = {
    "to": cast, "sort": sort, "argsort": argsort, "topk": topk, "reshape": reshape, "trans": trans, "expand_dims": expand_dims,
    "broadcast_to": broadcast_to, "mean": mean, "cumsum": cumsum,
    **{op: _reduction(op) for op in ("sum", "max", "min", "prod", "argmax", "argmin")},
}


def _no_range(b, *args):
    raise TypeError("range() can only be used as the iterable of a for loop")


def _int(b, x):
    return scalar_cast(b, x, INDEX) if isinstance(x, Value) else int(x)


def _float(b, x):
    return scalar_cast(b, x, FLOAT) if isinstance(x, Value) else float(x)


def _abs(b, x):
    if isinstance(x, Value):
        if x.is_tile:
            return unary(b, "abs", x)
        return binary(b, "max", x, binary(b, "sub", 0, x))
    return abs(x)


PY_BUILTINS = {min: _minmax("min"), max: _minmax("max"), range: _no_range, int: _int,
               float: _float, abs: _abs, len: lambda b, x: len(x)}
