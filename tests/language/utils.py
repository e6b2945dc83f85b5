"""Shared helpers for the kernel-language tests: dtype tables, random inputs that keep an op
well defined, running a kernel compiled and in the reference interpreter, and comparisons.

Every test in this directory follows one pattern: run the kernel compiled, run it again with
``PYPTO_INTERPRET=1`` (the interpreter is the definition of each op), compare the two tightly,
then compare both with an independent numpy reference at a dtype-appropriate tolerance.
"""
from __future__ import annotations

import contextlib

import ml_dtypes
import numpy as np
import pytest

import pypto.language as pl

BF16 = np.dtype(ml_dtypes.bfloat16)
ML_FLOATS = (BF16, np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2))

# name -> (numpy dtype, pypto dtype)
DTYPES = {
    "bool": (np.dtype(np.bool_), pl.bool_),
    "int8": (np.dtype(np.int8), pl.int8),
    "uint8": (np.dtype(np.uint8), pl.uint8),
    "int16": (np.dtype(np.int16), pl.int16),
    "int32": (np.dtype(np.int32), pl.int32),
    "int64": (np.dtype(np.int64), pl.int64),
    "float16": (np.dtype(np.float16), pl.float16),
    "bfloat16": (BF16, pl.bfloat16),
    "float32": (np.dtype(np.float32), pl.float32),
}
ALL = list(DTYPES)
INTS = ["int8", "uint8", "int16", "int32", "int64"]
FLOATS = ["float16", "bfloat16", "float32"]
HALF = ["float16", "bfloat16"]
NUMERIC = INTS + FLOATS
INTS_BOOL = ["bool"] + INTS

# What the NPU target computes on (docs/pto.md, "What the NPU target refuses"): A2/A3's vector
# unit has no 64-bit arithmetic, so a kernel computing on an int64 tile raises NotOnChip. The
# compiled tests parametrise over these; int64 stays in the tables above for the reference
# helpers, scalars and global tensors, and each file has a test of the refusal.
TILE_INTS = [n for n in INTS if n != "int64"]
TILE_ALL = [n for n in ALL if n != "int64"]
TILE_NUMERIC = TILE_INTS + FLOATS
TILE_INTS_BOOL = ["bool"] + TILE_INTS


def npd(name: str) -> np.dtype:
    return DTYPES[name][0]


def pld(name: str):
    return DTYPES[name][1]


def name_of(d) -> str:
    """Name of a numpy or pypto dtype."""
    if isinstance(d, pl.dtype):
        return "bool" if d == pl.bool_ else d.name
    d = np.dtype(d)
    if d == BF16:
        return "bfloat16"
    return "bool" if d == np.bool_ else d.name


def is_float(name: str) -> bool:
    return name in FLOATS


def compute_dtype(name: str) -> np.dtype:
    """Half floats are computed in float32 and rounded once per op."""
    return np.dtype(np.float32) if name in HALF else npd(name)


# -- the promotion rule of docs/tile_ir.md, written out independently --------------------------

def promote(a: str, b: str) -> str:
    """tile ⊕ tile result dtype."""
    if a == b:
        return a
    if a == "bool":
        return b
    if b == "bool":
        return a
    if is_float(a) and is_float(b):
        bits = {"float16": 16, "bfloat16": 16, "float32": 32}
        if bits[a] == bits[b]:
            return "float32"
        return a if bits[a] > bits[b] else b
    if is_float(a) or is_float(b):
        return a if is_float(a) else b
    return name_of(np.result_type(npd(a), npd(b)))


def weak(tile: str, scalar_kind: str) -> str:
    """tile ⊕ scalar result dtype; scalar_kind is "bool", "int" or "float"."""
    if scalar_kind == "float" and not is_float(tile):
        return "float32"
    if scalar_kind == "int" and tile == "bool":
        return "int32"
    return tile


# -- random inputs -----------------------------------------------------------------------------

def rand(rng, shape, name, lo=None, hi=None, specials=False, nonzero=False):
    """Random values of dtype ``name`` in [lo, hi] (the full range for ints by default)."""
    d = npd(name)
    shape = tuple(shape) if not isinstance(shape, int) else (shape,)
    n = int(np.prod(shape))
    if name == "bool":
        x = rng.integers(0, 2, size=n).astype(bool)
    elif name in INTS:
        info = np.iinfo(d)
        lo = info.min if lo is None else max(lo, info.min)
        hi = info.max if hi is None else min(hi, info.max)
        x = rng.integers(lo, hi, size=n, endpoint=True, dtype=np.int64).astype(d)
        if lo == info.min and hi == info.max and n >= 8:          # edges of the range
            edges = np.array([info.min, info.max, 0, 1], dtype=np.int64)
            if info.min < 0:
                edges = np.append(edges, -1)
            x[rng.choice(n, size=edges.size, replace=False)] = edges.astype(d)
    else:
        lo = -50.0 if lo is None else lo
        hi = 50.0 if hi is None else hi
        x = rng.uniform(lo, hi, size=n).astype(np.float32).astype(d)
        if specials and n >= 8:
            sp = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0], np.float32).astype(d)
            x[rng.choice(n, size=sp.size, replace=False)] = sp
    if nonzero:
        if name == "bool":
            x[:] = True
        else:
            x = np.where(x == 0, np.ones_like(x), x)
    return x.reshape(shape)


# -- running -----------------------------------------------------------------------------------

@contextlib.contextmanager
def interpret_mode():
    """Kernels launched inside run in the reference interpreter (the monkeypatch API, usable
    outside a test function's fixtures)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYPTO_INTERPRET", "1")
        yield


def aligned(a, align=64):
    """A C-contiguous copy of ``a`` at a 64-byte aligned address. Kernels specialise on the
    alignment of their tensors, so tests that relaunch a kernel on new data use aligned
    copies to hit the compiled kernel instead of building a second one."""
    a = np.asarray(a)
    buf = np.empty(a.nbytes + align, np.uint8)
    off = (-buf.ctypes.data) % align
    out = buf[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def run_both(kernel, grid, arrays: dict, **scalars):
    """Launch ``kernel[grid]`` compiled and interpreted on fresh aligned copies of ``arrays``
    (name → array; passed by keyword with ``scalars``). Returns (compiled, interpreted): dicts
    name → array after the run."""
    results = []
    for interp in (False, True):
        args = {k: aligned(v) for k, v in arrays.items()}
        ctx = interpret_mode() if interp else contextlib.nullcontext()
        with ctx:
            kernel[grid](**args, **scalars)
        results.append(args)
    return results[0], results[1]


# -- comparisons -------------------------------------------------------------------------------

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view(_UINT[a.dtype.itemsize])


def _isfloat(a) -> bool:
    return a.dtype.kind == "f" or a.dtype in ML_FLOATS


def _f64(a):
    return np.asarray(a).astype(np.float64)


def _fail(ok, actual, expected, what, extra=None):
    if ok.all():
        return
    bad = np.flatnonzero(~ok.ravel())
    idx = bad[:6]
    lines = [f"{what}: {bad.size} of {ok.size} elements differ; first at flat {idx.tolist()}",
             f"  got      {np.asarray(actual).ravel()[idx]}",
             f"  expected {np.asarray(expected).ravel()[idx]}"]
    if extra is not None:
        lines.append(f"  input    {np.asarray(extra).ravel()[idx]}")
    raise AssertionError("\n".join(lines))


def _same_shape_dtype(actual, expected, what):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    return actual, expected


def assert_exact(actual, expected, what="", inputs=None, signed_zero=True):
    """Bit-exact, except that any NaN matches any NaN (and, with ``signed_zero=False``, +0
    matches -0)."""
    actual, expected = _same_shape_dtype(actual, expected, what)
    if _isfloat(actual):
        fa, fe = _f64(actual), _f64(expected)
        nan_a, nan_e = np.isnan(fa), np.isnan(fe)
        ok = (nan_a & nan_e) | (_bits(actual) == _bits(expected))
        if not signed_zero:
            ok |= (fa == 0) & (fe == 0)
    else:
        ok = _bits(actual) == _bits(expected)
    _fail(ok, actual, expected, what or "exact", inputs)


def assert_close(actual, expected, rtol, atol, what="", inputs=None):
    """|a - e| <= atol + rtol * |e| (atol may be an array); NaNs and infinities must match."""
    actual, expected = _same_shape_dtype(actual, expected, what)
    fa, fe = _f64(actual), _f64(expected)
    both_nan = np.isnan(fa) & np.isnan(fe)
    inf = np.isinf(fa) | np.isinf(fe)
    with np.errstate(invalid="ignore"):
        near = np.abs(fa - fe) <= atol + rtol * np.abs(fe)
    ok = both_nan | np.where(inf, fa == fe, near)
    _fail(ok, actual, expected, what or f"close(rtol={rtol}, atol={atol})", inputs)


def _ordered(a):
    """Map float bit patterns to integers ordered like the values (for ulp distances)."""
    bits = _bits(a).astype(np.int64)
    sign = np.int64(1) << (8 * a.dtype.itemsize - 1)
    return np.where(bits & sign, -(bits & (sign - 1)), bits)


def ulp_distance(actual, expected):
    actual, expected = np.asarray(actual), np.asarray(expected)
    return np.abs(_ordered(actual) - _ordered(expected))


def assert_ulp(actual, expected, max_ulp=1, what="", inputs=None, atol=0.0):
    """Floats within ``max_ulp`` units in the last place of their own dtype (or within
    ``atol``, which may be an array); NaN matches NaN."""
    actual, expected = _same_shape_dtype(actual, expected, what)
    fa, fe = _f64(actual), _f64(expected)
    with np.errstate(invalid="ignore"):
        near = np.abs(fa - fe) <= atol
    ok = (np.isnan(fa) & np.isnan(fe)) | (ulp_distance(actual, expected) <= max_ulp) | near
    ok &= np.isnan(fa) == np.isnan(fe)
    _fail(ok, actual, expected, what or f"within {max_ulp} ulp", inputs)


def assert_float_close(actual, expected, name, rtol=1e-5, atol=1e-6, max_ulp=1, what="",
                       inputs=None):
    """The tolerance for a float op that is not correctly rounded: rtol/atol for float32, a
    number of ulps for float16/bfloat16 (whose rounding dominates the float32 error)."""
    if name in HALF:
        assert_ulp(actual, expected, max_ulp, what, inputs)
    else:
        assert_close(actual, expected, rtol, atol, what, inputs)


def to_dtype(x, name):
    """numpy conversion of float64/float32 reference values to dtype ``name`` (round to
    nearest even; for ints and bools numpy's own rules)."""
    d = npd(name)
    x = np.asarray(x)
    with np.errstate(over="ignore"):          # overflow to inf is part of the rounding
        if d == BF16 and x.dtype != np.float32:
            x = x.astype(np.float32)
        return x.astype(d)
