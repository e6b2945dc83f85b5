"""Python inside a kernel: the builtins it may call (``int``, ``float``, ``abs`` …; ``min`` and
``max`` are arithmetic's) and the primitives that act while compiling (``static_assert``,
``static_print``, the ranges only a for loop takes).
"""
from __future__ import annotations

from ..ir import Value
from .arithmetic import binary, unary
from .scalar import FLOAT, INDEX, scalar_cast


def static_assert(b, cond, msg=""):
    if isinstance(cond, Value):
        raise TypeError("static_assert() needs a compile-time condition; this one depends on "
                        "runtime values")
    if not cond:
        raise ValueError(f"static_assert failed{': ' + str(msg) if msg else ''}")


def static_print(b, *args):
    print(*(a if not isinstance(a, Value) else f"<runtime {a.type}>" for a in args))


def loop_only(name):
    def handler(b, *args, **kwargs):
        raise TypeError(f"{name}() can only be used as the iterable of a for loop")
    return handler


def python_range(b, *args):
    raise TypeError("range() can only be used as the iterable of a for loop")


def python_int(b, x):
    return scalar_cast(b, x, INDEX) if isinstance(x, Value) else int(x)


def python_float(b, x):
    return scalar_cast(b, x, FLOAT) if isinstance(x, Value) else float(x)


def python_abs(b, x):
    if isinstance(x, Value):
        if x.is_tile:
            return unary(b, "abs", x)
        return binary(b, "max", x, binary(b, "sub", 0, x))
    return abs(x)
