"""``import pypto.language as pl``: the primitives kernels are written with."""
from .core import (builtin, cast, cdiv, constexpr, full, load, matmul, maximum, minimum,
                   num_programs, program_id, store, zeros)
from .dtypes import (bfloat16, bool_, dtype, float16, float32, float64, int8, int16, int32,
                     int64, uint8)

__all__ = [
    "builtin", "cast", "cdiv", "constexpr", "full", "load", "matmul", "maximum", "minimum",
    "num_programs", "program_id", "store", "zeros",
    "dtype", "bool_", "int8", "uint8", "int16", "int32", "int64", "float16", "bfloat16",
    "float32", "float64",
]
