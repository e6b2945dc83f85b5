"""CANN's ``SymbolicScalar``: concrete ints here, and named symbols outside kernels.

A trace knows every extent and loop index, so inside a kernel a symbolic scalar is always
concrete: ``SymbolicScalar`` is an ``int`` with CANN's methods whose arithmetic and
comparisons keep the type. ``pypto.symbolic_scalar("s")`` without a value is a
``SymbolicExpr``: CANN's properties and printed form (``((b>=2)*(b<8))``) work, but using it
as a number (an extent, an offset) raises: a trace needs a value.
"""
from __future__ import annotations

import operator

from .unavailable import NotAvailableError

_OPS = {"add": ("+", operator.add), "sub": ("-", operator.sub), "mul": ("*", operator.mul),
        "floordiv": ("/", operator.floordiv), "mod": ("%", operator.mod),
        "lt": ("<", operator.lt), "le": ("<=", operator.le), "gt": (">", operator.gt),
        "ge": (">=", operator.ge), "eq": ("==", operator.eq), "ne": ("!=", operator.ne)}


class SymbolicScalar(int):
    """A concrete symbolic scalar (CANN: ``is_immediate``)."""

    def min(self, other):
        return SymbolicScalar(min(int(self), int(other)))

    def max(self, other):
        return SymbolicScalar(max(int(self), int(other)))

    def is_concrete(self) -> bool:
        return True

    is_immediate = is_concrete

    def is_symbol(self) -> bool:
        return False

    is_expression = is_symbol

    def concrete(self) -> int:
        return int(self)


class SymbolicExpr:
    """A symbol (``symbolic_scalar("s")``) or an expression of one, with no value."""

    def __init__(self, text: str, symbol: bool):
        self.text, self._symbol = text, symbol

    def is_symbol(self) -> bool:
        return self._symbol

    def is_expression(self) -> bool:
        return not self._symbol

    def is_concrete(self) -> bool:
        return False

    is_immediate = is_concrete

    def concrete(self):
        raise NotAvailableError(f"the value of symbolic scalar {self.text}",
                                "it has none; give symbolic_scalar a value")

    def __index__(self):
        raise NotAvailableError(f"symbolic scalar {self.text} used as a number",
                                "a traced kernel needs a value: symbolic_scalar(name, value)")

    __int__ = __index__

    def __str__(self) -> str:
        return self.text

    __repr__ = __str__


def _method(name, reflected=False):
    sign, fn = _OPS[name]

    def method(self, other):
        a, b = (other, self) if reflected else (self, other)
        if isinstance(a, SymbolicExpr) or isinstance(b, SymbolicExpr):
            return SymbolicExpr(f"({a}{sign}{b})", symbol=False)
        if not (isinstance(a, int) and isinstance(b, int)):
            return fn(int(a) if isinstance(a, SymbolicScalar) else a,
                      int(b) if isinstance(b, SymbolicScalar) else b)
        return SymbolicScalar(int(fn(int(a), int(b))))
    return method


for _name in _OPS:
    for _cls in (SymbolicScalar, SymbolicExpr):
        setattr(_cls, f"__{_name}__", _method(_name))
        if _name in ("add", "sub", "mul", "floordiv", "mod"):
            setattr(_cls, f"__r{_name}__", _method(_name, reflected=True))
SymbolicScalar.__neg__ = lambda self: SymbolicScalar(-int(self))
SymbolicScalar.__hash__ = int.__hash__
SymbolicScalar.__bool__ = lambda self: int(self) != 0
SymbolicExpr.__hash__ = object.__hash__


class _Factory(type):
    def __instancecheck__(cls, value) -> bool:
        return isinstance(value, (SymbolicScalar, SymbolicExpr))

    def __call__(cls, *args, **_):
        """``symbolic_scalar(value)``, ``(other scalar)``, ``(name)``, ``(name, value)``."""
        if not args:
            raise TypeError("pypto.symbolic_scalar() takes a value, a name, or both")
        value = args[-1]
        if isinstance(value, str):
            return SymbolicExpr(value, symbol=True)
        if isinstance(value, SymbolicExpr):
            return value
        return SymbolicScalar(int(value))


class symbolic_scalar(metaclass=_Factory):  # noqa: N801 - CANN's spelling
    """``pypto.symbolic_scalar``: makes (and, with ``isinstance``, recognises) symbolic scalars."""
