"""Symbolic tensors: what a CANN kernel body computes with while it is traced.

The body runs once per shape signature as ordinary Python on ``SymTensor`` values. Nothing is
computed: every op adds a node (``op``, operands, attributes, shape, dtype), and every write
(``out[:] = e``, ``out[a:b] = e``, ``out.move(e)``, ``pypto.assemble``) is recorded by the
trace (``tracer.Trace``) with the node it stores. A node whose op is ``read`` is a view of a
*buffer* (a kernel argument or a ``pypto.tensor``). As in CANN, a tensor variable aliases its
buffer, so it sees later writes; an op (or a write) that takes it pins the buffer's version
at that point of the program (``pinned``), which is what the op computes with.
"""
from __future__ import annotations

import math

from . import dtypes as cann_dtypes
from .scalars import SymbolicScalar
from .unavailable import NotAvailableError


class Buffer:
    """Storage a kernel writes: argument ``index`` of the call, or a ``pypto.tensor``."""

    def __init__(self, name: str, shape: tuple, dtype, arg_index=None):
        self.name, self.shape, self.dtype, self.arg_index = name, tuple(shape), dtype, arg_index
        self.version = 0

    def __repr__(self) -> str:
        return f"Buffer({self.name}, {self.shape}, {self.dtype})"


class SymTensor:
    """A tensor of a traced CANN kernel (CANN's ``pypto.Tensor`` inside the body)."""

    def __init__(self, op: str, args: tuple, shape, dtype, **attrs):
        self.op, self.args, self.attrs = op, tuple(pinned(a) for a in args), attrs
        self._shape, self.ptype = tuple(int(e) for e in shape), dtype
        self.lowered = None     # lowering's form of the node, kept across calls (a Segment,
                                # or the last-axis reduction a (rows, axis, 1) one is)

    # -- what CANN's Tensor reports
    @property
    def shape(self) -> list:
        return [SymbolicScalar(e) for e in self._shape]

    @property
    def dtype(self):
        return cann_dtypes.from_pypto(self.ptype)

    @property
    def dim(self) -> int:
        return len(self._shape)

    def numel(self) -> int:
        return math.prod(self._shape)

    def __len__(self) -> int:
        return self._shape[0]

    def __repr__(self) -> str:
        return f"<traced pypto.Tensor {self.op} {self.shape} {self.ptype}>"

    def __bool__(self):
        raise NotAvailableError("a tensor's value as a Python condition",
                                "branch on a loop index or a scalar argument instead")

    # -- operators and methods: the ops of build.py with this tensor first
    def __getattr__(self, name):
        from . import build  # lazy: build imports this module (a cycle)
        fn = build.METHODS.get(name)
        if fn is None:
            raise AttributeError(f"CANN's pypto.Tensor has no method {name!r} in PyPTO "
                                 "(docs/from_cann_pypto.md lists what is available)")
        return lambda *args, **kwargs: fn(self, *args, **kwargs)

    def __getitem__(self, index):
        from . import build  # lazy: as in __getattr__
        return build.getitem(self, index)

    def __setitem__(self, index, value):
        from . import build  # lazy: as in __getattr__
        build.setitem(self, index, value)


def pinned(x):
    """``x``, or for an unpinned read of a buffer, that read at the buffer's current version."""
    if not isinstance(x, SymTensor) or x.op != "read" or x.attrs["version"] is not None:
        return x
    return SymTensor("read", (), x._shape, x.ptype, buffer=x.attrs["buffer"],
                     chain=x.attrs["chain"], version=x.attrs["buffer"].version)


def reads(value):
    """The ``read`` nodes of the tree ``value`` (each node visited once)."""
    seen, stack = set(), [value]
    while stack:
        node = stack.pop()
        if not isinstance(node, SymTensor) or id(node) in seen:
            continue
        seen.add(id(node))
        if node.op == "read":
            yield node
        stack.extend(node.args)


def _binary(op, reflected=False):
    def method(self, other):
        from . import build  # lazy: build imports this module (a cycle)
        return build.binary(op, other, self) if reflected else build.binary(op, self, other)
    method.__name__ = op
    return method


for _op, _names in {"add": ("__add__", "__radd__"), "sub": ("__sub__", "__rsub__"),
                    "mul": ("__mul__", "__rmul__"), "div": ("__truediv__", "__rtruediv__")}.items():
    setattr(SymTensor, _names[0], _binary(_op))
    setattr(SymTensor, _names[1], _binary(_op, reflected=True))
for _op, _name in {"eq": "__eq__", "ne": "__ne__", "lt": "__lt__", "le": "__le__",
                   "gt": "__gt__", "ge": "__ge__"}.items():
    setattr(SymTensor, _name, _binary(_op))
SymTensor.__hash__ = object.__hash__


def _neg(self):
    from . import build  # lazy: build imports this module (a cycle)
    return build.unary("neg", self)


SymTensor.__neg__ = _neg


class LoopIndex(SymbolicScalar):
    """A ``pypto.loop`` index: a concrete scalar (loops are unrolled when traced) that knows
    its loop's first and last values."""

    def __new__(cls, value, first, last):
        self = super().__new__(cls, value)
        self.first, self.last = first, last
        return self
