"""Differential testing of the kernel language: random programs run three ways.

Hypothesis generates small random kernels: a 1-D or 2-D tile shape (dims 1..64), a dtype
(float32, float16, bfloat16, int32, int8) and a chain of 1 to 6 steps drawn from elementwise
unary and binary ops (tile–tile with (M,1)/(1,N)/(M,N) broadcasting, tile–constant in either
order, tile–runtime scalar), ``pl.where`` forms, reductions with ``keepdims=True`` and casts.
Each program is written out as Python source into a module of its own (kernels are parsed from
their source file, never executed), imported, and run

* compiled (the normal path: Tile IR → PTO → LLVM → host code),
* interpreted (``PYPTO_INTERPRET=1``: the reference interpreter on the same Tile IR), and
* by the numpy model below, written from ``docs/tile_ir.md`` independently of both: half types
  are computed in float32 and rounded after each op, integers wrap, ``x // 0 == 0``, ...

Tolerances come from a running error bound that the model carries next to every value: each
op adds one ulp of its result dtype (two implementations may round a float32 value that differs
in the last place to neighbouring half values), a few float32 ulps for transcendental functions
(their implementations differ: the compiler decomposes tanh, erf, sin, ... in the legalisation
pass) and the summation-order slack of a float reduction, and propagates its operands' bounds
through its Lipschitz constant. Chains made only of correctly rounded operations (add, mul,
div, max, casts, ...) and integer chains must agree exactly. Value ranges are tracked while
generating so that no program can overflow, take the log of a negative number or divide by a
number near zero: ``log``/``sqrt``/``rsqrt``/``reciprocal`` are applied to ``abs(x) + 1`` and
tile divisors are ``abs(y) + 1``.

The default run is derandomized (same programs every time) and executes a few hundred programs;
``PYPTO_DIFF_EXAMPLES=N`` changes the count and the ``slow`` variant explores with a random seed.
"""
from __future__ import annotations

import atexit
import hashlib
import importlib.util
import math
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import pypto
import pypto.language as pl

BF16 = np.dtype(ml_dtypes.bfloat16)
NP = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16), "bfloat16": BF16,
      "int32": np.dtype(np.int32), "int8": np.dtype(np.int8), "bool": np.dtype(np.bool_)}
FLOATS = ("float32", "float16", "bfloat16")
HALVES = ("float16", "bfloat16")
INTS = ("int32", "int8")
DTYPES = FLOATS + INTS
BITS = {"float32": 32, "float16": 16, "bfloat16": 16, "int32": 32, "int8": 8, "bool": 1}
EPS = {"float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}
TINY = {"float32": 1.5e-45, "float16": 6.0e-8, "bfloat16": 1e-40}
EPS32 = EPS["float32"]
# largest magnitude a generated value may reach, so that nothing overflows to inf
LIMIT = {"float32": 1e30, "float16": 2e4, "bfloat16": 1e30}
INT_BOUND = {"int32": 2.0 ** 31, "int8": 128.0}

# -- the numpy model ------------------------------------------------------------------------------


@dataclass
class MV:
    """A model value: metadata always, arrays when evaluating (not while generating).

    ``bound`` is a static bound on |value| (floats; ints use their range), ``exact`` says every
    op that produced it is correctly rounded or integer, ``err`` an element-wise bound on how far
    two correct implementations may drift apart."""
    dtype: str
    shape: tuple
    bound: float
    exact: bool
    arr: np.ndarray | None = None
    err: np.ndarray | None = None


@dataclass
class Sc:
    """A scalar operand: a Python constant or a runtime scalar parameter ('s' float, 'k' int)."""
    value: float | int
    param: str | None = None

    @property
    def kind(self) -> str:
        return "f" if isinstance(self.value, float) else "i"


def promote(a: str, b: str) -> str:
    """Tile–tile dtype promotion (docs/tile_ir.md)."""
    if a == b:
        return a
    if a in FLOATS and b in FLOATS:
        if BITS[a] == BITS[b]:
            return "float32"
        return a if BITS[a] > BITS[b] else b
    if a in FLOATS or b in FLOATS:
        return a if a in FLOATS else b
    return np.result_type(NP[a], NP[b]).name


def weak(tile: str, kind: str) -> str:
    """Tile ⊕ scalar: the tile's dtype wins, except an int tile with a float scalar."""
    return "float32" if kind == "f" and tile not in FLOATS else tile


def bshape(*shapes) -> tuple:
    return tuple(np.broadcast_shapes(*shapes))


def ulp(x, dtype):
    """One unit in the last place of |x| in ``dtype`` (upper bound), as float64."""
    if dtype not in EPS:
        return np.zeros_like(x, dtype=np.float64)
    return EPS[dtype] * np.abs(x) + TINY[dtype]


def compute(v: MV, dtype: str) -> np.ndarray:
    """``v`` converted to ``dtype`` and widened to the compute dtype (float32 for halves)."""
    a = convert(v.arr, v.dtype, dtype)
    return a.astype(np.float32) if dtype in HALVES else a


def convert(a: np.ndarray, src: str, dst: str) -> np.ndarray:
    if src == dst:
        return a
    if dst == "bfloat16" and src != "float32":
        a = a.astype(np.float32)          # the IR reaches bfloat16 through float32 only
    return a.astype(NP[dst])


def scalar_array(s: Sc, dtype: str) -> np.ndarray:
    """A scalar operand converted to the op's dtype: constants directly, runtime scalars from
    the scalar unit's float32 / int64."""
    if s.param is not None:
        v = np.array(s.value, np.float32 if s.kind == "f" else np.int64)
        return convert(v, "float32" if s.kind == "f" else "int64", dtype)
    v = np.array(s.value, np.float64 if s.kind == "f" else np.int64)
    return convert(v, "float64" if s.kind == "f" else "int64", dtype)


def as_mv(x, dtype: str, shape=()) -> MV:
    """Scalars become 0-d model values already in ``dtype``."""
    if isinstance(x, MV):
        return x
    arr = None if shape is None else scalar_array(x, dtype)
    bound = abs(float(np.float32(x.value))) if dtype in FLOATS else INT_BOUND.get(dtype, 2.0 ** 63)
    return MV(dtype, (), bound, True, arr, None if arr is None else np.zeros((), np.float64))


def finish(dtype, shape, bound, exact, c, err, evaluating) -> MV:
    if not evaluating:
        return MV(dtype, shape, bound, exact)
    arr = np.broadcast_to(np.asarray(c).astype(NP[dtype]) if dtype not in HALVES
                          else np.asarray(c, np.float32).astype(NP[dtype]), shape)
    err = np.broadcast_to(np.asarray(err, np.float64), shape)
    if dtype in EPS:
        err = err + ulp(arr.astype(np.float64), dtype)
    return MV(dtype, shape, bound, exact, np.ascontiguousarray(arr), err)


FLOAT_UNARY = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tanh",
               "sigmoid", "gelu", "erf", "floor", "ceil")
# (Lipschitz constant given |x| + err, float32 ulps of absolute slack, relative slack, exact)
_ERF = np.vectorize(math.erf, otypes=[np.float64])


def _gelu(x):
    k = np.float32
    inner = k(math.sqrt(2.0 / math.pi)) * (x + k(0.044715) * x * x * x)
    return k(0.5) * x * (k(1.0) + np.tanh(inner))


UNARY_FN = {
    "neg": np.negative, "abs": np.abs, "relu": lambda x: np.maximum(x, x.dtype.type(0)),
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "rsqrt": lambda x: np.float32(1) / np.sqrt(x), "reciprocal": lambda x: np.float32(1) / x,
    "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
    "sigmoid": lambda x: np.float32(1) / (np.float32(1) + np.exp(-x)),
    "gelu": _gelu, "erf": lambda x: _ERF(x).astype(np.float32), "floor": np.floor,
    "ceil": np.ceil, "not": np.invert,
}


def unary_slack(op, x64, r64):
    """(Lipschitz factor applied to the operand's error, extra absolute slack)."""
    ax = np.abs(x64)
    if op in ("neg", "abs", "relu", "floor", "ceil", "not"):
        return 1.0, 0.0
    if op == "exp":
        return np.abs(r64) * 1.01, 4 * EPS32 * np.abs(r64)
    if op == "exp2":
        return np.abs(r64) * 0.7, (4 + 2 * ax) * EPS32 * np.abs(r64)
    if op in ("log", "log2"):                 # only applied to abs(x) + 1 >= 1
        return 1.5, 4 * EPS32 * (np.abs(r64) + 1)
    if op == "sqrt":
        return 0.5, 0.0
    if op in ("rsqrt", "reciprocal"):
        return 1.0, 4 * EPS32 * np.abs(r64)
    if op == "sin":
        return 1.0, 64 * EPS32
    if op == "cos":
        return 1.0, 64 * EPS32
    if op == "tanh":
        return 1.0, 16 * EPS32
    if op == "sigmoid":
        return 0.25, 8 * EPS32
    if op == "erf":
        return 1.2, 32 * EPS32
    if op == "gelu":
        return 1.2, 16 * EPS32 * (1 + ax)
    raise AssertionError(op)


EXACT_UNARY = ("neg", "abs", "relu", "sqrt", "reciprocal", "floor", "ceil", "not")


def m_unary(op: str, x: MV, evaluating: bool) -> MV:
    dtype = x.dtype
    if op in FLOAT_UNARY and dtype not in FLOATS:
        dtype = "float32"
    b = x.bound
    bound = {"exp": math.exp(min(b, 700)), "exp2": 2.0 ** min(b, 1000), "log": math.log(b + 1),
             "log2": math.log2(b + 1), "sqrt": math.sqrt(b), "rsqrt": 1.0, "reciprocal": 1.0,
             "sin": 1.0, "cos": 1.0, "tanh": 1.0, "sigmoid": 1.0, "erf": 1.0,
             "gelu": b, "floor": b + 1, "ceil": b + 1}.get(op, b)
    exact = x.exact and op in EXACT_UNARY
    if not evaluating:
        return MV(dtype, x.shape, bound, exact)
    c = compute(x, dtype)
    with np.errstate(all="ignore"):
        r = UNARY_FN[op](c)
    if dtype not in FLOATS:
        return finish(dtype, x.shape, bound, exact, r, 0.0, True)
    x64, r64 = c.astype(np.float64), r.astype(np.float64)
    lip, slack = unary_slack(op, x64, r64)
    if op == "exp":
        lip = np.exp(np.minimum(x64 + x.err, 700.0))
    elif op == "exp2":
        lip = 0.7 * np.exp2(np.minimum(x64 + x.err, 1000.0))
    elif op == "sqrt":
        lip = 0.5 / np.sqrt(np.maximum(x64 - x.err, 1.0))
    elif op in ("rsqrt", "reciprocal", "log", "log2"):
        lip = 1.5 / np.maximum(x64 - x.err, 1.0)
    return finish(dtype, x.shape, bound, exact, r, lip * x.err + slack, True)


def _floordiv(x, y):
    """Python ``//``; for ints x // 0 == 0 and MIN // -1 wraps."""
    if x.dtype.kind == "f":
        return np.floor_divide(x, y)
    x, y = np.broadcast_arrays(x, y)
    safe = np.where(y == 0, 1, y).astype(x.dtype)
    q = np.where(y == -1, np.negative(x), np.floor_divide(x, np.where(safe == -1, 1, safe)))
    return np.where(y == 0, 0, q).astype(x.dtype)


def _mod(x, y):
    if x.dtype.kind == "f":
        return np.mod(x, y)
    x, y = np.broadcast_arrays(x, y)
    safe = np.where((y == 0) | (y == -1), 1, y).astype(x.dtype)
    return np.where((y == 0) | (y == -1), 0, np.mod(x, safe)).astype(x.dtype)


def _shl(x, n):
    n = np.asarray(n).astype(np.int64)
    big = n >= BITS[x.dtype.name]
    r = np.left_shift(x, np.clip(n, 0, BITS[x.dtype.name] - 1).astype(x.dtype))
    return np.where(big, 0, r).astype(x.dtype)


def _shr(x, n):
    n = np.asarray(n).astype(np.int64)
    return np.right_shift(x, np.clip(n, 0, BITS[x.dtype.name] - 1).astype(x.dtype))


BINARY_FN = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "max": np.maximum, "min": np.minimum, "floordiv": _floordiv, "mod": _mod,
    "pow": np.power, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
    "shl": _shl, "shr": _shr,
}
CMP_FN = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
          "eq": np.equal, "ne": np.not_equal}
EXACT_BINARY = ("add", "sub", "mul", "div", "max", "min", "floordiv", "mod", "and", "or",
                "xor", "shl", "shr")


def binary_dtype(op: str, a, b) -> str:
    """Result (compute-input) dtype of a ⊕ b, for tiles and scalars in either order."""
    if isinstance(a, MV) and isinstance(b, MV):
        d = promote(a.dtype, b.dtype)
    else:
        tile, s = (a, b) if isinstance(a, MV) else (b, a)
        d = weak(tile.dtype, s.kind)
    if op in ("div", "pow") and d not in FLOATS:
        d = "float32"
    return d


def m_binary(op: str, a, b, evaluating: bool) -> MV:
    dtype = binary_dtype(op, a, b)
    shape = bshape(*(v.shape for v in (a, b) if isinstance(v, MV)))
    # tile divisors are abs(y) + 1 >= 1; scalar ones are known
    smallest_divisor = abs(float(np.float32(b.value))) if isinstance(b, Sc) else 1.0
    a, b = as_mv(a, dtype, None if not evaluating else ()), as_mv(b, dtype, None if not
                                                                   evaluating else ())
    ba, bb = a.bound, b.bound
    if dtype in FLOATS:
        bound = {"add": lambda: ba + bb, "sub": lambda: ba + bb, "mul": lambda: ba * bb,
                 "div": lambda: ba / smallest_divisor, "max": lambda: max(ba, bb),
                 "min": lambda: max(ba, bb), "pow": lambda: ba ** bb if ba < 1e30 else math.inf,
                 "floordiv": lambda: ba / smallest_divisor + 1, "mod": lambda: bb}[op]()
    else:
        bound = INT_BOUND.get(dtype, 2.0 ** 63)
    exact = a.exact and b.exact and (op in EXACT_BINARY or dtype not in FLOATS)
    if not evaluating:
        return MV(dtype, shape, bound, exact)
    x, y = compute(a, dtype), compute(b, dtype)
    with np.errstate(all="ignore"):
        r = BINARY_FN[op](x, y)
    if dtype not in FLOATS:
        return finish(dtype, shape, bound, exact, r, 0.0, True)
    x64, y64, r64 = (np.asarray(v, np.float64) for v in (x, y, r))
    ea, eb = a.err, b.err
    if op in ("add", "sub"):
        err = ea + eb
    elif op == "mul":
        err = np.abs(x64) * eb + np.abs(y64) * ea + ea * eb
    elif op == "div":                     # divisors are constants or abs(.) + 1 >= 1
        den = np.maximum(np.abs(y64) - eb, 0.5)
        err = ea / den + (np.abs(x64) + ea) * eb / den ** 2
    elif op in ("max", "min"):
        err = np.maximum(ea, eb)
    elif op == "pow":                     # x ** c with a constant c: exp(c * log|x|)
        c = float(y64)
        err = abs(c) * (np.abs(x64) + ea) ** max(c - 1, 0) * ea + \
            8 * EPS32 * np.abs(r64) * (1 + np.abs(c * np.log(np.maximum(np.abs(x64), 1e-30))))
    else:                                 # floor division / mod: exact operands only
        err = np.zeros(shape)
    return finish(dtype, shape, bound, exact, r, err, True)


def m_where(cmp: str, cl, cr, t, f, evaluating: bool) -> MV:
    """pl.where(cl <cmp> cr, t, f). The generator only uses forms that are continuous in the
    operands (max-like, |a-b|, leaky relu) unless everything is exact."""
    cdt = binary_dtype(cmp, cl, cr)
    tiles = [v for v in (t, f) if isinstance(v, MV)]
    if len(tiles) == 2:
        dtype = promote(t.dtype, f.dtype)
    elif len(tiles) == 1:
        other = f if isinstance(t, MV) else t
        dtype = weak(tiles[0].dtype, other.kind)
    else:
        raise AssertionError("where needs a tile")
    shape = bshape(*(v.shape for v in (cl, cr, t, f) if isinstance(v, MV)))
    mvs = [as_mv(v, cdt if i < 2 else dtype, None if not evaluating else ())
           for i, v in enumerate((cl, cr, t, f))]
    exact = all(v.exact for v in mvs)
    bound = max(mvs[2].bound, mvs[3].bound)
    if not evaluating:
        return MV(dtype, shape, bound, exact)
    cond = CMP_FN[cmp](compute(mvs[0], cdt), compute(mvs[1], cdt))
    r = np.where(cond, compute(mvs[2], dtype), compute(mvs[3], dtype))
    err = np.maximum(mvs[2].err, mvs[3].err) if dtype in FLOATS else 0.0
    return finish(dtype, shape, bound, exact, r, err, True)


def m_reduce(op: str, x: MV, axis: int, evaluating: bool) -> MV:
    dtype = "int32" if op == "sum" and x.dtype == "int8" else x.dtype
    ax = axis % len(x.shape)
    n = x.shape[ax]
    shape = tuple(1 if i == ax else s for i, s in enumerate(x.shape))
    bound = x.bound * n if op == "sum" and dtype in FLOATS else (
        x.bound if dtype in FLOATS else INT_BOUND[dtype])
    exact = x.exact and (op != "sum" or dtype not in FLOATS or n <= 2)
    if not evaluating:
        return MV(dtype, shape, bound, exact)
    c = compute(x, dtype)
    if op == "sum":
        r = np.sum(c, axis=ax, keepdims=True, dtype=c.dtype)
    else:
        r = (np.max if op == "max" else np.min)(c, axis=ax, keepdims=True)
    if dtype not in FLOATS:
        return finish(dtype, shape, bound, exact, r, 0.0, True)
    e = np.broadcast_to(x.err, x.shape)
    if op == "sum":
        err = np.sum(e, axis=ax, keepdims=True) + \
            n * EPS32 * np.sum(np.abs(c.astype(np.float64)), axis=ax, keepdims=True)
    else:
        err = np.max(e, axis=ax, keepdims=True)
    return finish(dtype, shape, bound, exact, r, err, True)


def m_cast(x: MV, dtype: str, evaluating: bool) -> MV:
    bound = x.bound if dtype in FLOATS else INT_BOUND[dtype]
    if not evaluating:
        return MV(dtype, x.shape, bound, x.exact)
    r = convert(x.arr, x.dtype, dtype)
    return finish(dtype, x.shape, bound, x.exact, r, x.err if dtype in FLOATS else 0.0, True)


def m_broadcast(x: MV, shape, evaluating: bool) -> MV:
    if not evaluating:
        return MV(x.dtype, shape, x.bound, x.exact)
    return MV(x.dtype, shape, x.bound, x.exact, np.broadcast_to(x.arr, shape),
              np.broadcast_to(x.err, shape))


# -- program representation: expression trees with a source spelling and a model meaning ----------

@dataclass
class Ref:
    name: str


@dataclass
class Un:
    op: str
    x: object
    style: str = "pl"          # pl: pl.op(x); neg: -x; invert: ~x; builtin: abs(x)


@dataclass
class Bin:
    op: str
    a: object
    b: object
    style: str = "op"          # op: a + b; pl: pl.maximum(a, b); builtin: max(a, b)


@dataclass
class Where:
    cmp: str
    cl: object
    cr: object
    t: object
    f: object


@dataclass
class Red:
    op: str
    x: object
    axis: int
    style: str = "pl"          # pl: pl.sum(x, ...); method: x.sum(...)


@dataclass
class Cast:
    x: object
    dtype: str
    style: str = "pl"          # pl: pl.cast(x, dtype); method: x.to(dtype)


@dataclass
class Bcast:
    x: object
    shape: tuple


@dataclass
class Clamp:
    x: object
    lo: Sc
    hi: Sc


OPSYM = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%",
         "pow": "**", "and": "&", "or": "|", "xor": "^", "shl": "<<", "shr": ">>",
         "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def src(e) -> str:
    if isinstance(e, Ref):
        return e.name
    if isinstance(e, Sc):
        return e.param if e.param else (f"({e.value!r})" if e.value < 0 else repr(e.value))
    if isinstance(e, Un):
        if e.style == "neg":
            return f"(-{src(e.x)})"
        if e.style == "invert":
            return f"(~{src(e.x)})"
        if e.style == "builtin":
            return f"{e.op}({src(e.x)})"
        return f"pl.{e.op}({src(e.x)})"
    if isinstance(e, Bin):
        if e.style == "pl":
            return f"pl.{'maximum' if e.op == 'max' else 'minimum'}({src(e.a)}, {src(e.b)})"
        if e.style == "builtin":
            return f"{e.op}({src(e.a)}, {src(e.b)})"
        return f"({src(e.a)} {OPSYM[e.op]} {src(e.b)})"
    if isinstance(e, Where):
        return f"pl.where({src(e.cl)} {OPSYM[e.cmp]} {src(e.cr)}, {src(e.t)}, {src(e.f)})"
    if isinstance(e, Red):
        if e.style == "method":
            return f"{src(e.x)}.{e.op}(axis={e.axis}, keepdims=True)"
        return f"pl.{e.op}({src(e.x)}, axis={e.axis}, keepdims=True)"
    if isinstance(e, Cast):
        if e.style == "method":
            return f"{src(e.x)}.to(pl.{e.dtype})"
        return f"pl.cast({src(e.x)}, pl.{e.dtype})"
    if isinstance(e, Bcast):
        return f"pl.broadcast_to({src(e.x)}, {e.shape})"
    if isinstance(e, Clamp):
        return f"pl.clamp({src(e.x)}, {src(e.lo)}, {src(e.hi)})"
    raise AssertionError(e)


def model(e, env: dict, evaluating: bool):
    """The model value of expression ``e`` (arrays only when ``evaluating``)."""
    if isinstance(e, Ref):
        return env[e.name]
    if isinstance(e, Sc):
        return e
    if isinstance(e, Un):
        return m_unary(e.op, model(e.x, env, evaluating), evaluating)
    if isinstance(e, Bin):
        return m_binary(e.op, model(e.a, env, evaluating), model(e.b, env, evaluating),
                        evaluating)
    if isinstance(e, Where):
        return m_where(e.cmp, *(model(v, env, evaluating) for v in (e.cl, e.cr, e.t, e.f)),
                       evaluating)
    if isinstance(e, Red):
        return m_reduce(e.op, model(e.x, env, evaluating), e.axis, evaluating)
    if isinstance(e, Cast):
        return m_cast(model(e.x, env, evaluating), e.dtype, evaluating)
    if isinstance(e, Bcast):
        return m_broadcast(model(e.x, env, evaluating), e.shape, evaluating)
    if isinstance(e, Clamp):
        x = model(e.x, env, evaluating)
        return m_binary("min", m_binary("max", x, e.lo, evaluating), e.hi, evaluating)
    raise AssertionError(e)


@dataclass
class Input:
    name: str          # the tensor parameter; its tile is f"{name}t"
    shape: tuple       # of the tile
    dtype: str
    small: bool        # values in [-8, 8] (ints mixed into float programs)
    extent: tuple = None   # of the tensor, <= shape: the rest of the tile is padding
    padding: float | int = 0

    @property
    def bound(self) -> float:
        b = 8.0 if self.small else (2.0 if self.dtype in FLOATS else INT_BOUND[self.dtype])
        return max(b, abs(self.padding))


@dataclass
class Program:
    rank: int
    inputs: list = field(default_factory=list)
    steps: list = field(default_factory=list)      # (name, expr)
    scalars: dict = field(default_factory=dict)     # 's' / 'k' -> value
    out: MV | None = None
    out_extent: tuple | None = None    # of the output tensor, <= out.shape: stores are masked
    opt_level: str = "O3"

    def source(self) -> str:
        params = [i.name for i in self.inputs] + sorted(self.scalars) + ["out"]
        zero = "(0, 0)" if self.rank == 2 else "(0,)"
        lines = ['"""Generated by tests/language/test_differential.py."""',
                 "import pypto", "import pypto.language as pl", "", "",
                 f"@pypto.jit(opt_level={self.opt_level!r})",
                 f"def kernel({', '.join(params)}):"]
        for i in self.inputs:
            pad = f", padding={i.padding!r}" if i.padding else ""
            lines.append(f"    {i.name}t = pl.load({i.name}, offsets={zero}, shape={i.shape}"
                         f"{pad})")
        for name, expr in self.steps:
            lines.append(f"    {name} = {src(expr)}")
        lines.append(f"    pl.store(out, offsets={zero}, value={self.steps[-1][0]})")
        return "\n".join(lines) + "\n"

    def data(self, seed: int) -> dict:
        rng = np.random.default_rng(seed)
        arrays = {}
        for i in self.inputs:
            n = int(np.prod(i.extent))
            if i.dtype in FLOATS:
                x = rng.uniform(-2, 2, n)
                special = rng.random(n)
                x = np.where(special < 0.1, np.round(x * 2) / 2, x)   # ties, integers, zeros
                x = np.where(special > 0.95, 0.0, x)
                arr = x.astype(np.float32).astype(NP[i.dtype])
            elif i.small:
                arr = rng.integers(-8, 9, n).astype(NP[i.dtype])
            else:
                info = np.iinfo(NP[i.dtype])
                wide = rng.integers(info.min, info.max, n, endpoint=True)
                narrow = rng.integers(-20, 21, n)
                arr = np.where(rng.random(n) < 0.5, wide, narrow).astype(NP[i.dtype])
            arrays[i.name] = aligned(arr.reshape(i.extent))
        return arrays

    def evaluate(self, arrays: dict) -> MV:
        env = {}
        for i in self.inputs:
            tile = convert(np.full(i.shape, i.padding, np.float64 if isinstance(i.padding, float)
                                   else np.int64), "float64", i.dtype)
            tile[tuple(slice(0, e) for e in i.extent)] = arrays[i.name]
            env[f"{i.name}t"] = MV(i.dtype, i.shape, i.bound, True, tile,
                                   np.zeros(i.shape, np.float64))
        for name, expr in self.steps:
            env[name] = model(expr, env, True)
        return env[self.steps[-1][0]]


# -- generating programs --------------------------------------------------------------------------

CHEAP_FLOAT_UNARY = ("neg", "abs", "relu", "exp", "log", "sqrt", "rsqrt", "reciprocal")
COSTLY_FLOAT_UNARY = ("tanh", "sigmoid", "exp2", "log2", "gelu", "erf", "sin", "cos")
GUARDED = ("log", "log2", "sqrt", "rsqrt", "reciprocal")     # applied to abs(x) + 1
FLOAT_CONSTS = (0.5, 2.0, -1.5, 3.0, 0.1, 0.3, -0.75)
INT_CONSTS = (2, 3, -5, 7, 0, 1)
# legalised ops compile several times slower: at most one per program keeps the run short
# sin/cos are decomposed with a Cody-Waite reduction that is only accurate for moderate |x|
SIN_LIMIT = 1e5
COSTLY = ("tanh", "sigmoid", "exp2", "log2", "gelu", "erf", "sin", "cos", "pow", "floordiv",
          "mod")


class Gen:
    def __init__(self, draw, rank, dims, dtype):
        self.draw = draw
        self.rank = rank
        self.dims = dims
        self.dtype = dtype
        self.prog = Program(rank)
        self.env: dict[str, MV] = {}
        self.costly = 0

    def shapes(self):
        m, n = self.dims
        return [(m, n), (m, 1), (1, n), (1, 1)] if self.rank == 2 else [(n,), (1,)]

    def extent(self, shape) -> tuple:
        """Mostly the tile's own shape; sometimes a smaller tensor, to mask loads and stores."""
        if self.pick([False, False, False, True]):
            return tuple(self.draw(st.integers(1, d)) for d in shape)
        return shape

    def new_input(self, shape, dtype, small=False) -> str:
        name = f"x{len(self.prog.inputs)}"
        extent = self.extent(shape)
        padding = 0
        if extent != shape or self.pick([False, False, False, True]):
            padding = self.pick([0, 1.0, -2.5, 7.0] if dtype in FLOATS else [0, 1, -7, 100])
        inp = Input(name, shape, dtype, small, extent, padding)
        self.prog.inputs.append(inp)
        self.env[f"{name}t"] = MV(dtype, shape, inp.bound, True)
        return f"{name}t"

    def meta(self, e) -> MV:
        return model(e, self.env, False)

    def ok(self, e) -> bool:
        v = self.meta(e)
        return v.dtype not in FLOATS or v.bound <= LIMIT[v.dtype]

    def pick(self, options):
        # sampled_from / small integer ranges favour the first option several times over;
        # a wide integer taken modulo the count spreads choices evenly (and still shrinks to 0)
        return options[self.draw(st.integers(0, 2 ** 16 - 1)) % len(options)]

    def other(self, cur: MV):
        """A second operand: an earlier tile, a fresh input, a constant or a runtime scalar."""
        kind = self.pick(["tile", "tile", "input", "input", "const", "scalar"])
        if kind == "tile" and len(self.env) > 1:
            return Ref(self.pick(sorted(self.env)))
        if kind in ("tile", "input"):
            shape = self.pick(self.shapes())
            if cur.dtype in FLOATS:
                dtype = self.pick([cur.dtype] * 4 + list(FLOATS) + ["int8"])
            else:
                dtype = self.pick([cur.dtype] * 3 + list(INTS))
            return Ref(self.new_input(shape, dtype, small=dtype in INTS and cur.dtype in FLOATS))
        if kind == "const":
            if cur.dtype in FLOATS or self.draw(st.booleans()):
                return Sc(self.pick(FLOAT_CONSTS))
            return Sc(self.pick(INT_CONSTS))
        if cur.dtype in FLOATS:
            self.prog.scalars.setdefault("s", self.pick([0.5, -1.25, 0.1, 3.0]))
            return Sc(self.prog.scalars["s"], "s")
        self.prog.scalars.setdefault("k", self.pick([2, 5, -3, 1, 32, 300]))
        return Sc(self.prog.scalars["k"], "k")

    def step(self, cur_name: str):
        cur = self.env[cur_name]
        x = Ref(cur_name)
        is_float = cur.dtype in FLOATS
        kinds = ["unary"] * 4 + ["binary"] * (4 if is_float else 6) + ["where"] * 2 + \
            ["reduce"] * 2 + ["cast"]
        if cur.shape != self.shapes()[0]:
            kinds.append("broadcast")
        kind = self.pick(kinds)
        if kind == "unary":
            if is_float or self.draw(st.integers(0, 3)) == 0:
                ops = list(CHEAP_FLOAT_UNARY) + (list(COSTLY_FLOAT_UNARY) if not self.costly
                                                 else [])
                if cur.exact:
                    ops += ["floor", "ceil"]
                if cur.bound > SIN_LIMIT:           # see test_sin_cos_of_large_arguments
                    ops = [o for o in ops if o not in ("sin", "cos")]
            else:
                ops = ["neg", "abs", "relu", "not"]
            op = self.pick(ops)
            if op in GUARDED:       # abs of an int MIN is MIN again: go to float32 first
                e = Un(op, Bin("add", Un("abs", x if is_float else Cast(x, "float32")),
                               Sc(1.0)))
            elif op == "neg":
                e = Un("neg", x, "neg")
            elif op == "not":
                e = Un("not", x, "invert")
            elif op == "abs":
                e = Un("abs", x, self.pick(["pl", "builtin"]))
            else:
                e = Un(op, x)
            self.costly += op in COSTLY
            return e
        if kind == "binary":
            y = self.other(cur)
            ops = ["add", "sub", "mul", "max", "min", "div"]
            if not is_float:
                ops += ["floordiv", "mod", "and", "or", "xor", "shl", "shr"]
            elif cur.exact and not self.costly:
                ops += ["floordiv", "mod"]
            if not self.costly:
                ops.append("pow")
            op = self.pick(ops)
            if op == "pow":
                self.costly += 1
                form = self.pick(["square", "cube", "root"])
                if form == "root":                      # a fractional power of |x|
                    return Bin("pow", Un("abs", x), Sc(0.5))
                return Bin("pow", x, Sc(2 if form == "square" else 3))
            if op in ("floordiv", "mod"):
                self.costly += 1
                # on floats these jump: only exact operands (a constant divisor, here)
                if is_float or binary_dtype(op, cur, self.meta(y)) in FLOATS:
                    if not cur.exact:
                        return Bin("mul", x, Sc(self.pick(FLOAT_CONSTS)))
                    return Bin(op, x, Sc(self.pick([0.75, -1.5, 2.0])))
            if op == "div" and isinstance(y, Ref):
                y = Bin("add", Un("abs", y), Sc(1.0))
            elif op == "div" and isinstance(y, Sc) and y.value == 0:
                y = Sc(2)
            if op in ("shl", "shr") and isinstance(y, Sc) and y.param is None:
                y = Sc(self.pick([0, 1, 3, 7, 31, 40]))
            if op in ("and", "or", "xor", "shl", "shr") and (
                    isinstance(y, Sc) and y.kind == "f" or isinstance(y, Ref) and
                    self.env[y.name].dtype in FLOATS):
                y = Sc(self.pick(INT_CONSTS))
            style = "op"
            if op in ("max", "min"):
                style = self.pick(["pl", "builtin"])
            if isinstance(y, Sc) and op not in ("shl", "shr", "div") and style == "op" and \
                    self.draw(st.booleans()):
                return Bin(op, y, x, style)           # scalar on the left
            return Bin(op, x, y, style)
        if kind == "where":
            y = self.other(cur)
            if isinstance(y, Sc) and y.param is None and not is_float:
                y = Sc(int(y.value))
            forms = ["max", "absdiff"] + (["leaky"] if is_float else [])
            if cur.exact and (not isinstance(y, Ref) or self.meta(y).exact):
                forms += ["generic"]
            form = self.pick(forms)
            if form == "max":
                cmp = self.pick(["gt", "ge", "lt", "le"])
                t, f = (x, y) if cmp in ("gt", "ge") else (y, x)
                return Where(cmp, x, y, t, f)
            if form == "absdiff":
                return Where("gt", x, y, Bin("sub", x, y), Bin("sub", y, x))
            if form == "leaky":
                return Where("lt", x, Sc(0.0), Bin("mul", x, Sc(0.5)), x)
            cmp = self.pick(list(CMP_FN))
            return Where(cmp, x, y, x, Bin("add", x, Sc(1)))
        if kind == "reduce":
            axis = self.pick([0, 1, -1] if self.rank == 2 else [0, -1])
            return Red(self.pick(["sum", "max", "min"]), x, axis, self.pick(["pl", "method"]))
        if kind == "cast":
            if is_float:
                target = self.pick([d for d in FLOATS if d != cur.dtype] + ["int32"])
                if target == "int32":           # float -> int truncates: exact inputs only
                    if not cur.exact:
                        target = "float32" if cur.dtype != "float32" else "float16"
                    else:
                        x = Clamp(x, Sc(-1000.0), Sc(1000.0))
            else:
                target = self.pick([d for d in INTS if d != cur.dtype] + ["float32"])
            e = Cast(x, target, self.pick(["pl", "method"]))
            if target == "float16" and self.meta(x).bound > LIMIT["float16"]:
                e = Cast(Clamp(x, Sc(-1000.0), Sc(1000.0)), target)
            return e
        return Bcast(x, self.shapes()[0])


@st.composite
def programs(draw):
    rank = draw(st.sampled_from([2, 2, 1]))
    dims = (draw(st.integers(1, 64)), draw(st.integers(1, 64)))
    if rank == 1:
        dims = (1, dims[1])
    dtype = draw(st.sampled_from(DTYPES))
    g = Gen(draw, rank, dims, dtype)
    first = g.pick(g.shapes()[:1] * 3 + g.shapes()[1:])
    cur = g.new_input(first, dtype)
    for i in range(g.pick([3, 4, 5, 6, 5, 4, 2, 1])):     # shrinks towards 3 steps
        for _ in range(20):                # an op whose result could overflow is redrawn
            costly = g.costly
            e = g.step(cur)
            if g.ok(e):
                break
            g.costly = costly
        else:
            e = Un("tanh", Ref(cur)) if g.env[cur].dtype in FLOATS else Un("neg", Ref(cur),
                                                                            "neg")
        name = f"v{i + 1}"
        g.env[name] = g.meta(e)
        g.prog.steps.append((name, e))
        cur = name
    g.prog.out = g.env[cur]
    g.prog.out_extent = g.extent(g.prog.out.shape)
    # LLVM's O3 pipeline is most of the compile time (~20x O0); O3 is where wrapping flags,
    # reassociation and vectorisation bugs live, so a third of the programs get it
    g.prog.opt_level = g.pick(["O3", "O0", "O0"])
    return g.prog


# -- running a program three ways -----------------------------------------------------------------

_MODULE_DIR = tempfile.mkdtemp(prefix="pypto-diff-")
atexit.register(shutil.rmtree, _MODULE_DIR, True)
_MODULES: dict[str, object] = {}


def load_kernel(source: str):
    """Write ``source`` into a module of its own (named by its hash) and import it."""
    key = hashlib.sha1(source.encode()).hexdigest()[:16]
    if key not in _MODULES:
        name = f"pypto_diff_{key}"
        path = os.path.join(_MODULE_DIR, name + ".py")
        with open(path, "w") as f:
            f.write(source)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        _MODULES[key] = module
    return _MODULES[key].kernel


def aligned(a: np.ndarray) -> np.ndarray:
    """A copy of ``a`` at a 64-byte aligned address: the specialisation key includes the
    32-byte alignment of every tensor, and a random one would recompile programs."""
    buf = np.empty(a.nbytes + 64, np.uint8)
    start = -buf.ctypes.data % 64
    out = buf[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def run(kernel, prog: Program, arrays: dict, interpret: bool) -> np.ndarray:
    out = aligned(np.full(prog.out_extent, 77, NP[prog.out.dtype]))
    args = [arrays[i.name] for i in prog.inputs] + [prog.scalars[k] for k in sorted(prog.scalars)]
    saved = os.environ.get("PYPTO_INTERPRET")
    os.environ["PYPTO_INTERPRET"] = "1" if interpret else "0"
    try:
        kernel[(1,)](*args, out)
    finally:
        if saved is None:
            del os.environ["PYPTO_INTERPRET"]
        else:
            os.environ["PYPTO_INTERPRET"] = saved
    return out


def compare(what: str, got: np.ndarray, want: np.ndarray, expected: MV, factor: float = 2.0):
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype)
    if expected.exact or expected.dtype not in FLOATS:
        if not np.array_equal(got, want, equal_nan=expected.dtype in FLOATS):
            bad = np.flatnonzero(got.ravel() != want.ravel())
            raise AssertionError(f"{what}: {bad.size} of {got.size} elements differ in an "
                                 f"exact chain, first at {bad[0]}: {got.ravel()[bad[:4]]} vs "
                                 f"{want.ravel()[bad[:4]]}")
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan = np.isnan(g)
    assert (nan == np.isnan(w)).all(), f"{what}: NaN positions differ: {g} vs {w}"
    tol = factor * expected.err + 1e-30
    diff = np.where(nan, 0.0, np.abs(g - w))
    if not (diff <= tol).all():
        i = int(np.argmax(diff - tol))
        raise AssertionError(f"{what}: |{g.ravel()[i]} - {w.ravel()[i]}| = {diff.ravel()[i]:.3g}"
                             f" exceeds the bound {tol.ravel()[i]:.3g} at flat index {i}")


def check_program(prog: Program, seed: int):
    source = prog.source()
    note(source)
    kernel = load_kernel(source)
    arrays = prog.data(seed)
    with np.errstate(all="ignore"):
        expected = prog.evaluate(arrays)
    assert expected.dtype == prog.out.dtype and expected.shape == prog.out.shape
    window = tuple(slice(0, e) for e in prog.out_extent)
    expected = MV(expected.dtype, prog.out_extent, expected.bound, expected.exact,
                  np.ascontiguousarray(expected.arr[window]), expected.err[window])
    interpreted = run(kernel, prog, arrays, interpret=True)
    compiled = run(kernel, prog, arrays, interpret=False)
    compare("compiled vs interpreted", compiled, interpreted, expected)
    compare("interpreted vs numpy model", interpreted, expected.arr, expected)


N_EXAMPLES = int(os.environ.get("PYPTO_DIFF_EXAMPLES", "500"))


@settings(max_examples=N_EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(prog=programs(), seed=st.integers(0, 2 ** 32 - 1))
def test_random_programs(prog, seed):
    check_program(prog, seed)


@pytest.mark.slow
@settings(max_examples=2000, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(prog=programs(), seed=st.integers(0, 2 ** 32 - 1))
def test_random_programs_slow(prog, seed):
    check_program(prog, seed)


# -- focused regressions found by the generator ---------------------------------------------------

@pypto.jit
def sin_cos_kernel(x, out, N: pl.constexpr):
    t = pl.load(x, offsets=(0,), shape=(N,))
    pl.store(out, offsets=(0, 0), value=pl.expand_dims(pl.sin(t), 0))
    pl.store(out, offsets=(1, 0), value=pl.expand_dims(pl.cos(t), 0))


def test_sin_cos_of_moderate_float32_arguments():
    x = np.random.default_rng(0).uniform(-10, 10, 256).astype(np.float32)
    x[:4] = [0.0, 3.1415927, -1.5707964, 10.0]
    out = np.zeros((2, x.size), np.float32)
    sin_cos_kernel[(1,)](x, out, N=x.size)
    np.testing.assert_allclose(out, np.stack([np.sin(x), np.cos(x)]), atol=2e-6)
    big = np.random.default_rng(1).uniform(-1e5, 1e5, 256).astype(np.float32)
    sin_cos_kernel[(1,)](big, out, N=big.size)
    np.testing.assert_allclose(out[0], np.sin(big), atol=2e-6)


def test_cos_is_as_accurate_as_sin():
    x = np.random.default_rng(1).uniform(-1e4, 1e4, 256).astype(np.float32)
    out = np.zeros((2, x.size), np.float32)
    sin_cos_kernel[(1,)](x, out, N=x.size)
    np.testing.assert_allclose(out[0], np.sin(x), atol=2e-6)
    np.testing.assert_allclose(out[1], np.cos(x), atol=2e-6)


@pytest.mark.xfail(strict=True, reason="LIMIT: pl.sin/pl.cos use a three-part Cody-Waite "
                   "reduction, accurate for |x| < ~1e5; beyond that the result stays in [-1, 1] "
                   "but is not accurate (that needs a Payne-Hanek reduction)")
def test_sin_cos_of_large_float32_arguments_stay_accurate():
    x = np.array([1e6, 1e7, -1.9047894e8, 1e9, 2.0 ** 31, -3e9], np.float32)
    out = np.zeros((2, x.size), np.float32)
    sin_cos_kernel[(1,)](x, out, N=x.size)
    assert np.abs(out).max() <= 1.0
    np.testing.assert_allclose(out, np.stack([np.sin(x), np.cos(x)]), atol=1e-5)
