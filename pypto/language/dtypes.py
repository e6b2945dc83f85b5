"""Element types of tensors, tiles and scalars, and their mapping to numpy at the call boundary.

A dtype is a plain frozen record so it can live in cache keys, IR types and printed text alike.
bfloat16 has no numpy native type: it comes from ml_dtypes (or torch) when present.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ML_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2", "int4")   # numpy's come from ml_dtypes

try:  # bfloat16 and the float8 types on the numpy side
    import ml_dtypes as _ml_dtypes
    _NP_EXTRA = {name: np.dtype(getattr(_ml_dtypes, name)) for name in ML_DTYPES}
except ImportError:  # pragma: no cover - depends on the environment
    _ml_dtypes = None
    _NP_EXTRA = {}


@dataclass(frozen=True)
class dtype:
    name: str       # PyPTO name: float16, int32, ...
    bits: int
    kind: str       # "f" float, "i" signed int, "u" unsigned int, "b" bool
    mlir: str       # spelling in .pto / MLIR: f16, bf16, i32, ...

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    @property
    def is_floating(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind in ("i", "u")

    @property
    def is_signed(self) -> bool:
        return self.kind == "i"

    @property
    def storage_only(self) -> bool:
        """Kept in memory and converted, never computed in (docs/language.md, "Low-precision
        dtypes"): the float8 types and int4 on every target PyPTO has."""
        return self.name.startswith("float8") or self.name == "int4"

    def to_numpy(self) -> np.dtype:
        if self.name in ML_DTYPES:
            if self.name not in _NP_EXTRA:
                raise TypeError(f"{self.name} needs the ml_dtypes package (pip install ml_dtypes)")
            return _NP_EXTRA[self.name]
        return np.dtype(self.name if self.name != "bool" else np.bool_)

    def rounded(self, value: float) -> float:
        """``value`` as a number of this float dtype: to the nearest, past its range its
        infinity (a weak scalar takes its tile's dtype first: docs/tile_ir.md)."""
        with np.errstate(over="ignore"):
            return float(np.array(value, np.float64).astype(self.to_numpy()))

    def __repr__(self) -> str:
        return f"pl.{self.name}"

    def __str__(self) -> str:
        return self.name


bool_ = dtype("bool", 1, "b", "i1")
int4 = dtype("int4", 4, "i", "i4")          # packed two per byte in memory (pypto/layout.py, INT4)
int8 = dtype("int8", 8, "i", "i8")
uint8 = dtype("uint8", 8, "u", "ui8")
int16 = dtype("int16", 16, "i", "i16")
uint16 = dtype("uint16", 16, "u", "ui16")
int32 = dtype("int32", 32, "i", "i32")
uint32 = dtype("uint32", 32, "u", "ui32")
int64 = dtype("int64", 64, "i", "i64")
float16 = dtype("float16", 16, "f", "f16")
bfloat16 = dtype("bfloat16", 16, "f", "bf16")
float32 = dtype("float32", 32, "f", "f32")
float64 = dtype("float64", 64, "f", "f64")
float8_e4m3fn = dtype("float8_e4m3fn", 8, "f", "f8E4M3FN")   # no infinities; NaN is S.1111.111
float8_e5m2 = dtype("float8_e5m2", 8, "f", "f8E5M2")         # the top byte of a float16

ALL = (bool_, int4, int8, uint8, int16, uint16, int32, uint32, int64, float16, bfloat16, float32,
       float64, float8_e4m3fn, float8_e5m2)
BY_NAME = {d.name: d for d in ALL}
BY_NAME["bool"] = bool_
BY_MLIR = {d.mlir: d for d in ALL}


def from_any(x) -> dtype:
    """Accept a PyPTO dtype, a numpy dtype or type, a torch dtype or a name."""
    if isinstance(x, dtype):
        return x
    if isinstance(x, str):
        if x in BY_NAME:
            return BY_NAME[x]
        raise TypeError(f"unknown dtype name {x!r}")
    mod = type(x).__module__
    if mod.startswith("torch"):
        name = str(x).replace("torch.", "")
        if name in BY_NAME:
            return BY_NAME[name]
        raise TypeError(f"torch dtype {x} is not supported by PyPTO")
    try:
        npd = np.dtype(x)
    except TypeError:
        raise TypeError(f"{x!r} is not a dtype") from None
    for name, extra in _NP_EXTRA.items():
        if npd == extra:
            return BY_NAME[name]
    if npd == np.bool_:
        return bool_
    if npd.name in BY_NAME:
        return BY_NAME[npd.name]
    raise TypeError(f"numpy dtype {npd} is not supported by PyPTO")


def wide_tile_advice(dtype: "dtype") -> str:
    """What to do with a 64-bit tile, the same words in every message that meets one: A2/A3's
    vector unit has no 64-bit arithmetic and no conversion out of 64 bits either, so
    ``x.to(pl.int32)`` of such a tile is refused too. What works: 32-bit tensors from the host,
    and a 32-bit dtype for tiles made in the kernel."""
    narrow = "float32" if dtype.is_floating else "int32"
    article = "an" if dtype.name[0] in "aeiou" else "a"
    return (f"{article} {dtype.name} tile: A2/A3 has no 64-bit arithmetic and cannot convert "
            f"out of 64 bits either (x.to(pl.{narrow}) is refused as well): pass the tensor "
            f"as {narrow} (x.astype(np.{narrow}), or x.to(torch.{narrow}), before the launch) "
            f"and give tiles made in the kernel a 32-bit dtype (pl.full(shape, n, "
            f"dtype=pl.{narrow}))")
