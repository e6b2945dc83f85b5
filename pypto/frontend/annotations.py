"""``pypto.Tensor(shape, dtype)`` / ``pypto.Tensor[[shape], dtype]`` as CANN kernel annotations.

``pypto.Tensor`` is PyPTO's device tensor (``pypto/runtime/device.py``). Called with a shape (a list or
tuple, possibly empty) or with no argument at all, or subscripted, it gives a ``TensorSpec``
instead: a subclass of the same class that carries a shape (ints, ``pypto.DYNAMIC`` or ``...``
for "taken from the argument"), a dtype and a name, and holds no data. So one class serves
both: ``isinstance(spec, pypto.Tensor)`` is true, and a device tensor is made from an array.
"""
from __future__ import annotations

from ..runtime.device import Tensor
from .dtypes import DataType, to_pypto


class _Dynamic:
    """``pypto.DYNAMIC`` (also ``pypto.DYN``): an extent known only at call time."""

    def __repr__(self) -> str:
        return "pypto.DYNAMIC"


DYNAMIC = _Dynamic()


class TensorSpec(Tensor):
    """An annotation (or a named placeholder made outside a kernel): shape, dtype, name."""

    def __init__(self, shape=None, dtype=None, name="", *, format=None):  # noqa: A002 - CANN's
        self.spec_shape = _check_shape(shape)
        self.spec_dtype = _check_dtype(dtype)
        self.name = name
        self.format = format
        self._data = None

    @property
    def shape(self):
        return self.spec_shape

    @property
    def dtype(self):
        return self.spec_dtype

    @property
    def dim(self) -> int:
        return len(self.spec_shape or ())

    def check(self, param: str, shape: tuple, dtype) -> None:
        """Raise if an argument of ``shape`` and ``dtype`` does not match this annotation."""
        if self.spec_dtype is not None and to_pypto(self.spec_dtype) != dtype:
            raise TypeError(f"argument {param!r}: the annotation says dtype "
                            f"{self.spec_dtype.name}, the tensor passed has {dtype}")
        if self.spec_shape is None:
            return
        fixed = self.spec_shape
        if ... in fixed:            # [DYNAMIC, ...]: the axes before ... checked, any after
            fixed = fixed[:fixed.index(...)]
            shape = shape[:len(fixed)] if len(shape) >= len(fixed) else shape
        if len(fixed) != len(shape):
            raise ValueError(f"argument {param!r}: the annotation has rank "
                             f"{len(self.spec_shape)} {list(self.spec_shape)}, the tensor passed "
                             f"has shape {tuple(shape)}")
        for axis, (want, got) in enumerate(zip(fixed, shape)):
            if isinstance(want, int) and want != got:
                raise ValueError(f"argument {param!r}: axis {axis} is {got}, the annotation "
                                 f"says {want} (mark it pypto.DYNAMIC if it varies)")

    def __repr__(self) -> str:
        dtype = self.spec_dtype.name if self.spec_dtype is not None else "inferred"
        return f"pypto.Tensor({list(self.spec_shape or [])}, {dtype})"


def _check_shape(shape):
    """None / [] -> None (taken from the argument); else a tuple of ints, DYNAMIC or ``...``."""
    if shape is None or (isinstance(shape, (list, tuple)) and len(shape) == 0):
        return None
    if not isinstance(shape, (list, tuple)):
        raise TypeError(f"pypto.Tensor(shape=...): a list or tuple of extents, got {shape!r}")
    out = []
    for k, e in enumerate(shape):
        if e is ...:
            out.append(...)
        elif isinstance(e, _Dynamic) or getattr(e, "is_symbolic", False):
            out.append(DYNAMIC)
        elif isinstance(e, int) and not isinstance(e, bool) and e >= 0:
            out.append(int(e))
        else:
            raise TypeError(f"pypto.Tensor(shape=...): extent {k} is {e!r}; use an int, "
                            "pypto.DYNAMIC or ...")
    return tuple(out)


def _check_dtype(dtype):
    if dtype is None or isinstance(dtype, DataType):
        return dtype
    raise TypeError(f"pypto.Tensor(dtype=...): a pypto.DT_* type, got {dtype!r}")


def make(args, kwargs):
    """``pypto.Tensor(...)`` when it is an annotation (``device._is_annotation_call``): a
    TensorSpec."""
    return TensorSpec(*args, **kwargs)


def subscript(item) -> TensorSpec:
    """``pypto.Tensor[[shape], dtype]`` (and ``pypto.Tensor[shape_only]``)."""
    if not isinstance(item, tuple):
        item = (item,)
    if isinstance(item[0], dict):
        return TensorSpec(**item[0])
    return TensorSpec(*item)
