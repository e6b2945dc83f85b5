"""``import pypto.language as pl``: the primitives kernels are written with."""
from . import core as _core
from .core import builtin, cdiv, constexpr
from .dtypes import (bfloat16, bool_, dtype, float8_e4m3fn, float8_e5m2, float16, float32,
                     float64, int4, int8, int16, int32, int64, uint8, uint16, uint32)

_PRIMITIVES = [name for name, obj in vars(_core).items()
               if hasattr(obj, "__pypto_builtin__") and not name.startswith("_")]
globals().update({name: getattr(_core, name) for name in _PRIMITIVES})

__all__ = sorted(set(_PRIMITIVES) | {"builtin", "constexpr", "dtype", "bool_", "int8", "uint8",
                                     "int16", "int32", "int64", "float16", "bfloat16",
                                     "float32", "float64", "uint16", "uint32",
                                     "float8_e4m3fn", "float8_e5m2", "int4"})
