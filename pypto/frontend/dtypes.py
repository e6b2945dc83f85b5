"""CANN PyPTO's ``pypto.DT_*`` dtypes, as PyPTO dtypes.

CANN names its element types ``DT_FP32``, ``DT_BF16``, ... (22 of them in 0.2.0). Here each
name is a ``DataType`` enum member that knows the PyPTO dtype computing it, or ``None`` when
PyPTO has no such type yet (the low-precision formats): using one raises a clear error rather
than computing in another type.
"""
from __future__ import annotations

import enum

from ..language import dtypes as pl_dtypes
from .unavailable import NotAvailableError

# CANN name -> PyPTO dtype name (None: not available in PyPTO yet)
_TABLE = {
    "DT_INT4": None, "DT_INT8": "int8", "DT_INT16": "int16", "DT_INT32": "int32",
    "DT_INT64": "int64", "DT_UINT8": "uint8", "DT_UINT16": None, "DT_UINT32": None,
    "DT_UINT64": None, "DT_FP8": None, "DT_FP16": "float16", "DT_BF16": "bfloat16",
    "DT_FP32": "float32", "DT_DOUBLE": "float64", "DT_BOOL": "bool_", "DT_HF4": None,
    "DT_HF8": None, "DT_FP8E4M3": None, "DT_FP8E5M2": None, "DT_FP8E8M0": None,
    "DT_FP4_E2M1X2": None, "DT_FP4_E1M2X2": None,
}


DataType = enum.Enum("DataType", {name: name for name in _TABLE})
DataType.__doc__ = "``pypto.DataType``: CANN's element types (``pypto.DT_FP32`` is one member)."
DataType.__repr__ = lambda self: f"pypto.{self.name}"


def _pypto(member):
    """The PyPTO dtype computing ``member``; raises if PyPTO has none yet."""
    name = _TABLE[member.name]
    if name is None:
        raise NotAvailableError(f"dtype pypto.{member.name}")
    return getattr(pl_dtypes, name)


DataType.pypto = property(_pypto)
BY_NAME = {m.name: m for m in DataType}


def to_pypto(dtype):
    """A ``DT_*`` member, a PyPTO/numpy/torch dtype or a name -> PyPTO dtype."""
    if isinstance(dtype, DataType):
        return dtype.pypto
    return pl_dtypes.from_any(dtype)


def from_pypto(dtype) -> DataType:
    """PyPTO (or numpy/torch) dtype -> the ``DT_*`` member CANN would report."""
    name = pl_dtypes.from_any(dtype).name
    for member in DataType:
        if _TABLE[member.name] == name:
            return member
    raise NotAvailableError(f"a DT_* type for {name}")
