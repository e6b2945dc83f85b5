"""What each kernel-language primitive means, expressed as the Tile IR it emits.

``BUILTINS`` maps a stub's name (see ``pypto.language.core``) to its handler; ``TILE_METHODS``
maps tile methods (``x.to``, ``x.sum`` …) to the same handlers; ``PY_BUILTINS`` maps Python's
own builtins. A handler takes the builder and the call's arguments (IR values or compile-time
Python objects), checks them, and raises ``TypeError``/``ValueError`` with a message for the
user; the frontend turns those into a ``CompilationError`` at the call's line. Dtype promotion
and broadcasting happen here, so the Tile IR below is explicit: every binary op sees operands
of one shape and one dtype. The handlers live in one module per op family; the tables are here.
"""
from __future__ import annotations

from ..elementwise import UNARY
from ..ir import ScalarType, Value
from . import sync
from .arithmetic import cdiv, clamp, min_or_max, unary_handler, where
from .cube import matmul
from .memory import gather, load, num_programs, program_id, scatter, store
from .python import (loop_only, python_abs, python_float, python_int, python_range,
                     static_assert, static_print)
from .reduce import cumsum, mean, reduction
from .scalar import INDEX
from .sort import argsort, sort, topk
from .tile import (arange, broadcast_to, cast, concat, expand_dims, full, full_like, ones,
                   ones_like, reshape, trans, zeros, zeros_like)
from .values import describe


class BoundMethod:
    """``tile.to`` and friends: a method looked up on an IR value, called later."""

    def __init__(self, name: str, receiver: Value):
        self.name = name
        self.receiver = receiver


def value_attribute(b, v: Value, attr: str):
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
    raise TypeError(f"{describe(v)} has no attribute '{attr}'")


def call_method(b, method, args, kwargs):
    return TILE_METHODS[method.name](b, method.receiver, *args, **kwargs)


BUILTINS = {
    "static_assert": static_assert, "static_print": static_print,
    "static_range": loop_only("static_range"), "range": loop_only("pl.range"),
    "program_id": program_id, "num_programs": num_programs, "load": load, "store": store,
    "gather": gather, "scatter": scatter, "sort": sort, "argsort": argsort, "topk": topk,
    "zeros": zeros, "ones": ones, "full": full, "zeros_like": zeros_like,
    "ones_like": ones_like, "full_like": full_like, "arange": arange,
    "cast": cast, "matmul": matmul, "cdiv": cdiv, "where": where, "clamp": clamp,
    "minimum": min_or_max("min"), "maximum": min_or_max("max"),
    "reshape": reshape, "trans": trans, "expand_dims": expand_dims,
    "broadcast_to": broadcast_to, "concat": concat,
    "mean": mean, "cumsum": cumsum,
    **{op: reduction(op) for op in ("sum", "max", "min", "prod", "argmax", "argmin")},
    **{name: unary_handler(name) for name in UNARY if name not in ("neg", "not")},
    "alloc_buffer": sync.alloc_buffer, "local_buffer": sync.alloc_buffer,
    "barrier": sync.barrier, "signal": sync.signal, "wait": sync.wait,
    "set_flag": sync.flag_handler("set_flag"), "wait_flag": sync.flag_handler("wait_flag"),
    "pipe_barrier": sync.pipe_barrier,
}


TILE_METHODS = {
    "to": cast, "sort": sort, "argsort": argsort, "topk": topk, "reshape": reshape, "trans": trans, "expand_dims": expand_dims,
    "broadcast_to": broadcast_to, "mean": mean, "cumsum": cumsum,
    **{op: reduction(op) for op in ("sum", "max", "min", "prod", "argmax", "argmin")},
}


def python_len(b, x):
    """``len(t)``: a tile's or tensor's first extent, as Python gives an array's."""
    if isinstance(x, Value) and (x.is_tile or x.is_tensor):
        shape = value_attribute(b, x, "shape")
        if not shape:
            raise TypeError(f"len() of {describe(x)}, which has no axes")
        return shape[0]
    if isinstance(x, Value):
        raise TypeError(f"len() takes a tile, a tensor or a tuple, got {describe(x)}")
    return len(x)


PY_BUILTINS = {min: min_or_max("min"), max: min_or_max("max"), range: python_range,
               int: python_int, float: python_float, abs: python_abs, len: python_len}
