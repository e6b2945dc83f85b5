"""Reductions: sum, max, min, prod, argmax, argmin and mean over axis 0, 1 and None with
keepdims True and False, on 2-D and 1-D tiles of several dtypes; NaN handling of max/argmax
(numpy's: NaN wins, argmax gives the first NaN); cumsum along the last axis; and reductions of
partial tiles whose missing elements are filled by the load's padding.

What the NPU target refuses (NotOnChip, docs/pto.md): int64 tiles (A2/A3 has no 64-bit vector
arithmetic) and cumsum along a row (it is built from concatenations at column offsets 1, 2, 4,
..., which A2/A3 cannot move in 32-byte steps). cumsum is checked in the interpreter, and the
refusals have tests of their own.

Result dtypes: argmax/argmin → int32; sum/prod of bool and of ints narrower than 32 bits →
int32; mean of ints → float32; otherwise the input dtype (checked at compile time).

Tolerances. Integer results, max/min and argmax/argmin are exact. Float sums, means and
products are accumulated in float32 in an order that differs from numpy's (and the compiled
loops may reassociate), so with n terms and S = sum(|x|) over the reduced elements:
    |got - want| <= n * 2**-23 * S              (float32)
and a half-precision result adds its own rounding(s): + eps(dtype) * (S + |want|). Products
use the relative form n * 2**-22 * |want| (+ 2 eps(dtype) * |want| for half types).
"""
import ml_dtypes
import numpy as np
import pytest

import pypto
import pypto.language as pl
from tests.engines.tools import needs_tools, retarget
from pypto.errors import NotOnChip

from .utils import (INTS, assert_exact, compute_dtype, interpret_mode, is_float, npd, pld, rand,
                    run_both, to_dtype, ulp_distance)

M, N = 4, 16

# (axis, keepdims). axis=None without keepdims, and 1-D reductions without keepdims, give a
# rank-0 tile, which the kernel reshapes to (1,) to store it.
VARIANTS_2D = ((0, True), (0, False), (1, True), (1, False), (None, True), (None, False))
VARIANTS_ARG = VARIANTS_2D[:4]              # argmax/argmin of a 2-D tile need an axis
VARIANTS_1D = ((0, False), (None, True))
VARIANTS_ARG_1D = ((0, False),)            # axis=None: see test_argmax_axis_none_1d


@pypto.jit
def reduce_op(t, OP: pl.constexpr, AXIS: pl.constexpr, KEEP: pl.constexpr):
    """Functions and tile methods alike."""
    if OP == "sum":
        r = t.sum(axis=AXIS, keepdims=KEEP)
    elif OP == "max":
        r = pl.max(t, axis=AXIS, keepdims=KEEP)
    elif OP == "min":
        r = t.min(axis=AXIS, keepdims=KEEP)
    elif OP == "prod":
        r = pl.prod(t, axis=AXIS, keepdims=KEEP)
    elif OP == "argmax":
        r = t.argmax(axis=AXIS, keepdims=KEEP)
    elif OP == "argmin":
        r = pl.argmin(t, axis=AXIS, keepdims=KEEP)
    elif OP == "mean":
        r = t.mean(axis=AXIS, keepdims=KEEP)
    return r


@pypto.jit
def reduce_kernel(x, x1, o0, o1, o2, o3, o4, o5, p0, p1, M: pl.constexpr, N: pl.constexpr,
                  OP: pl.constexpr, V2: pl.constexpr, V1: pl.constexpr, RD: pl.constexpr,
                  PAD: pl.constexpr):
    """OP over each (axis, keepdims) of V2 on an (M, N) tile into o0.., and of V1 on an (N,)
    tile into p0, p1. Rank-0 results are stored as shape (1,)."""
    t = pl.load(x, offsets=(0, 0), shape=(M, N), padding=PAD)
    outs = (o0, o1, o2, o3, o4, o5)
    for k in pl.static_range(len(V2)):
        r = reduce_op(t, OP, V2[k][0], V2[k][1])
        pl.static_assert(r.dtype == RD, "reduction result dtype")
        if r.ndim == 0:
            r = pl.reshape(r, (1,))
        pl.store(outs[k], offsets=(0, 0) if r.ndim == 2 else (0,), value=r)
    if len(V1) > 0:
        t1 = pl.load(x1, offsets=(0,), shape=(N,), padding=PAD)
        outs1 = (p0, p1)
        for k in pl.static_range(len(V1)):
            r = reduce_op(t1, OP, V1[k][0], V1[k][1])
            pl.static_assert(r.dtype == RD, "reduction result dtype (1-D)")
            if r.ndim == 0:
                r = pl.reshape(r, (1,))
            pl.store(outs1[k], offsets=(0,), value=r)


@pypto.jit
def cumsum_kernel(x, x1, o, o1, M: pl.constexpr, N: pl.constexpr, RD: pl.constexpr,
                  REV: pl.constexpr = False):
    t = pl.load(x, offsets=(0, 0), shape=(M, N))
    c = pl.cumsum(t, axis=-1, reverse=REV)
    c1 = pl.load(x1, offsets=(0,), shape=(N,)).cumsum(reverse=REV)
    pl.static_assert(c.dtype == RD, "cumsum dtype")
    pl.store(o, offsets=(0, 0), value=c)
    pl.store(o1, offsets=(0,), value=c1)


# -- reference ---------------------------------------------------------------------------------

def result_dtype(op, name):
    if op in ("argmax", "argmin"):
        return "int32"
    if op in ("sum", "prod") and (name == "bool" or (name in INTS and
                                                     npd(name).itemsize < 4)):
        return "int32"
    if op == "mean" and not is_float(name):
        return "float32"
    return name


def out_shape(shape, axis, keep):
    if axis is None:
        return (1,) * len(shape) if keep else (1,)
    s = list(shape)
    if keep:
        s[axis] = 1
    else:
        del s[axis]
    return tuple(s) if s else (1,)


NP_REDUCE = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod,
             "argmax": np.argmax, "argmin": np.argmin, "mean": np.mean}


def reference(op, x, axis, keep, rname):
    """numpy in float64 for float results (the tolerance covers float32 accumulation), in the
    result dtype for ints (wrapping like the kernel)."""
    shape = out_shape(x.shape, axis, keep)
    if op in ("argmax", "argmin"):
        return NP_REDUCE[op](x.astype(compute_dtype(name_of(x))), axis=axis,
                             keepdims=True).astype(np.int32).reshape(shape)
    if op in ("max", "min"):
        return NP_REDUCE[op](x, axis=axis, keepdims=True).reshape(shape)
    if is_float(rname):
        r = NP_REDUCE[op](x.astype(np.float64), axis=axis, keepdims=True)
        return r.reshape(shape)                      # float64: compared with a tolerance
    with np.errstate(over="ignore"):
        return NP_REDUCE[op](x.astype(npd(rname)), axis=axis, keepdims=True,
                             dtype=npd(rname)).reshape(shape)


def name_of(x):
    from .utils import name_of as _n
    return _n(x.dtype)


def check(op, got, interp, want, x, axis, rname, what):
    """Exact for ints and max/min/arg*; the accumulation bound of the module docstring for
    float sums, means and products (against both the interpreter and numpy)."""
    if not is_float(rname) or op in ("max", "min"):
        assert_exact(got, interp, f"{what}: compiled vs interpreter", x)
        assert_exact(got, want.astype(got.dtype), f"{what}: vs numpy", x)
        return
    n = x.size if axis is None else x.shape[axis]
    ax = np.abs(x.astype(np.float64))
    s = np.sum(ax, axis=axis, keepdims=True).reshape(want.shape)
    g, i = got.astype(np.float64), interp.astype(np.float64)
    eps = 0.0 if rname == "float32" else float(ml_dtypes.finfo(npd(rname)).eps)
    if op == "prod":
        tol = (n * 2.0 ** -22 + 2 * eps) * np.abs(want)
    else:
        if op == "mean":
            s = s / n
        tol = n * 2.0 ** -23 * s + eps * (s + np.abs(want)) + 1e-30
    for other, vs in ((i, "interpreter"), (want, "numpy")):
        bad = ~(np.abs(g - other) <= tol)
        tol_b = np.broadcast_to(tol, g.shape)
        assert not bad.any(), (f"{what}: compiled vs {vs}: got {g[bad][:4]}, "
                               f"expected {other[bad][:4]}, tol {tol_b[bad][:4]}")


# -- inputs ------------------------------------------------------------------------------------

def reduce_input(rng, op, name, shape):
    if name == "bool":
        return rand(rng, shape, name)
    if op == "prod":
        if is_float(name):
            return rand(rng, shape, name, lo=0.5, hi=1.6)
        return rand(rng, shape, name, lo=-3, hi=3)
    if op in ("argmax", "argmin", "max", "min"):
        # few distinct values: ties, where the first index must win
        if is_float(name):
            return (rng.integers(-6, 6, size=shape) / 2).astype(npd(name))
        if name in INTS and op.startswith("arg"):
            return rand(rng, shape, name, lo=-3, hi=3) if name != "uint8" else \
                rand(rng, shape, name, lo=250, hi=255)
        return rand(rng, shape, name)
    if is_float(name):
        return rand(rng, shape, name, lo=-20, hi=20)
    return rand(rng, shape, name)                       # int sums wrap


def run_reduce(op, name, x, x1, v2, v1, pad=0):
    rname = result_dtype(op, name)
    outs = {f"o{k}": np.zeros(out_shape(x.shape, a, kd), npd(rname))
            for k, (a, kd) in enumerate(v2)}
    for k in range(len(v2), 6):
        outs[f"o{k}"] = np.zeros((1, 1), np.int8)
    outs.update({f"p{k}": np.zeros(out_shape(x1.shape, a, kd), npd(rname))
                 for k, (a, kd) in enumerate(v1)})
    for k in range(len(v1), 2):
        outs[f"p{k}"] = np.zeros(1, np.int8)
    got, interp = run_both(reduce_kernel, (1,), {"x": x, "x1": x1, **outs}, M=M, N=N, OP=op,
                           V2=v2, V1=v1, RD=pld(rname), PAD=pad)
    return got, interp, rname


REDUCE_CASES = {
    "sum": ["bool", "int8", "int16", "int32", "float16", "bfloat16", "float32"],
    "max": ["bool", "int8", "uint8", "int32", "float16", "float32"],
    "min": ["uint8", "int16", "bfloat16", "float32"],
    "prod": ["int16", "int32", "float32"],
    "argmax": ["bool", "uint8", "bfloat16", "float32"],
    "argmin": ["int32", "float16", "float32"],
    "mean": ["int32", "bfloat16", "float32"],
}
CASES = [(op, d) for op, ds in REDUCE_CASES.items() for d in ds]


@pytest.mark.parametrize("op,name", CASES, ids=[f"{o}-{d}" for o, d in CASES])
def test_reduce(op, name):
    rng = np.random.default_rng(len(op) * 31 + len(name))
    x = reduce_input(rng, op, name, (M, N))
    x1 = reduce_input(rng, op, name, (N,))
    v2, v1 = (VARIANTS_ARG, VARIANTS_ARG_1D) if op.startswith("arg") else \
        (VARIANTS_2D, VARIANTS_1D)
    got, interp, rname = run_reduce(op, name, x, x1, v2, v1)
    for k, (axis, keep) in enumerate(v2):
        want = reference(op, x, axis, keep, rname)
        check(op, got[f"o{k}"], interp[f"o{k}"], want, x, axis, rname,
              f"{op}({name} {x.shape}, axis={axis}, keepdims={keep})")
    for k, (axis, keep) in enumerate(v1):
        want = reference(op, x1, axis, keep, rname)
        check(op, got[f"p{k}"], interp[f"p{k}"], want, x1, axis, rname,
              f"{op}({name} {x1.shape}, axis={axis}, keepdims={keep})")


@pytest.mark.parametrize("op", ["sum", "max"])
def test_int64_reduction_is_refused(op):
    """A2/A3's vector unit has no 64-bit arithmetic: reducing an int64 tile is a compile error
    at the reduction's line; the interpreter still defines it."""
    rng = np.random.default_rng(4)
    x = rand(rng, (M, N), "int64", lo=-1000, hi=1000)
    x1 = rand(rng, (N,), "int64", lo=-1000, hi=1000)
    with pytest.raises(NotOnChip, match="int64 tile") as got:
        run_reduce(op, "int64", x, x1, VARIANTS_2D, VARIANTS_1D)
    assert "A2/A3" in str(got.value) and got.value.loc is not None
    outs = {f"o{k}": np.zeros(out_shape((M, N), a, kd), np.int64)
            for k, (a, kd) in enumerate(VARIANTS_2D)}
    outs.update({f"p{k}": np.zeros(out_shape((N,), a, kd), np.int64)
                 for k, (a, kd) in enumerate(VARIANTS_1D)})
    with interpret_mode():
        reduce_kernel[(1,)](x=x, x1=x1, **outs, M=M, N=N, OP=op, V2=VARIANTS_2D,
                            V1=VARIANTS_1D, RD=pl.int64, PAD=0)
    for k, (axis, keep) in enumerate(VARIANTS_2D):
        assert_exact(outs[f"o{k}"], reference(op, x, axis, keep, "int64"),
                     f"interpreted {op}(int64, axis={axis}, keepdims={keep})")


def test_int_sum_wraps_and_widens():
    """int8 sums are int32 (no 8-bit wrap); int32 sums wrap at 32 bits."""
    x = np.full((M, N), 127, np.int8)
    got, _, rname = run_reduce("sum", "int8", x, x[0].copy(), VARIANTS_2D, VARIANTS_1D)
    assert rname == "int32" and got["o4"].tolist() == [[127 * M * N]]
    assert got["o5"].tolist() == [127 * M * N]
    x = np.full((M, N), 3 * 2 ** 29, np.int32)
    got, _, _ = run_reduce("sum", "int32", x, x[0].copy(), VARIANTS_2D, VARIANTS_1D)
    assert got["o3"].tolist() == [0] * M                  # 16 * 3 * 2**29 wraps to 0
    assert got["o1"].tolist() == [-2 ** 31] * N           # 4 * 3 * 2**29 wraps to -2**31


# -- NaN ---------------------------------------------------------------------------------------

def nan_input():
    x = (np.arange(M * N) % 7).astype(np.float32).reshape(M, N)
    x[0, 5] = x[0, 9] = np.nan         # row 0: two NaNs, the first at 5
    x[2, 0] = np.nan                   # row 2: NaN first
    x[3, 15] = np.nan                  # row 3: NaN last
    x1 = x[0].copy()
    return x, x1


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reductions_pick_first_nan(op):
    """numpy's rule: a NaN is the extreme, and the first NaN's index is returned."""
    x, x1 = nan_input()
    got, interp, _ = run_reduce(op, "float32", x, x1, VARIANTS_ARG, VARIANTS_ARG_1D)
    rows = got["o3"].tolist()
    assert [rows[0], rows[2], rows[3]] == [5, 0, 15]      # the first NaN of each row
    for k, (axis, keep) in enumerate(VARIANTS_ARG):
        want = NP_REDUCE[op](x, axis=axis, keepdims=keep).astype(np.int32)
        assert_exact(got[f"o{k}"], interp[f"o{k}"], f"{op} axis={axis}: vs interpreter")
        assert_exact(got[f"o{k}"], want.reshape(got[f"o{k}"].shape), f"{op} axis={axis}")
    assert got["p0"].tolist() == [5]


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax_axis_none_1d(op):
    x1 = np.array([0.1, 0.9, -0.4, 0.5] * (N // 4), np.float32)
    x1[7] = -0.9
    x = np.zeros((M, N), np.float32)
    got, interp, _ = run_reduce(op, "float32", x, x1, (), ((None, True),))
    want = NP_REDUCE[op](x1, keepdims=True).astype(np.int32)
    assert_exact(got["p0"], want, f"{op}(x) on 1-D")


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_propagate_nan(op):
    x, x1 = nan_input()
    got, interp, _ = run_reduce(op, "float32", x, x1, VARIANTS_2D, VARIANTS_1D)
    for k, (axis, keep) in enumerate(VARIANTS_2D):
        want = NP_REDUCE[op](x, axis=axis, keepdims=True).reshape(got[f"o{k}"].shape)
        assert_exact(interp[f"o{k}"], want, f"interpreter {op} axis={axis}")
        assert_exact(got[f"o{k}"], want, f"{op} axis={axis}")


# -- cumsum ------------------------------------------------------------------------------------

CUMSUM_DTYPES = ["bool", "int8", "int32", "float32", "float16", "bfloat16"]


def check_cumsum(got, interp, x, rname, what, reverse=False):
    if reverse:       # the reverse scan is the scan of the flipped rows, flipped back
        got, interp, x = (np.flip(a, -1) for a in (got, interp, x))
    if not is_float(rname):
        want = np.cumsum(x.astype(npd(rname)), axis=-1, dtype=npd(rname))
        assert_exact(got, interp, f"{what}: compiled vs interpreter", x)
        assert_exact(got, want, f"{what}: vs numpy", x)
        return
    n = x.shape[-1]
    s = np.cumsum(np.abs(x.astype(np.float64)), axis=-1)
    want = np.cumsum(x.astype(np.float64), axis=-1)
    eps = 0.0 if rname == "float32" else float(ml_dtypes.finfo(npd(rname)).eps)
    tol = n * 2.0 ** -23 * s + eps * (s + np.abs(want))
    g = got.astype(np.float64)
    for other, vs in ((interp.astype(np.float64), "interpreter"), (want, "numpy")):
        bad = ~(np.abs(g - other) <= tol)
        assert not bad.any(), f"{what}: vs {vs}: got {g[bad][:4]}, expected {other[bad][:4]}"


def interpret_cumsum(x, x1, rname, reverse=False):
    outs = {"o": np.zeros(x.shape, npd(rname)), "o1": np.zeros(x1.shape, npd(rname))}
    with interpret_mode():
        cumsum_kernel[(1,)](x=x, x1=x1, **outs, M=x.shape[0], N=x.shape[1], RD=pld(rname),
                            REV=reverse)
    return outs


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("name", CUMSUM_DTYPES)
def test_cumsum(name, reverse):
    """Compiled (a scan down the rows of the transposed tile: A2/A3 cannot shift a UB tile
    by a few columns) against the interpreter and numpy, 2-D and 1-D, forward and reverse."""
    rng = np.random.default_rng(len(name))
    x = rand(rng, (M, N), name, lo=-20, hi=20)
    x1 = rand(rng, (N,), name, lo=-20, hi=20)
    rname = result_dtype("sum", name)
    interp = interpret_cumsum(x, x1, rname, reverse)
    got = {"o": np.zeros(x.shape, npd(rname)), "o1": np.zeros(x1.shape, npd(rname))}
    cumsum_kernel[(1,)](x, x1, got["o"], got["o1"], M=M, N=N, RD=pld(rname), REV=reverse)
    check_cumsum(got["o"], interp["o"], x, rname, f"cumsum {name} 2-D", reverse)
    check_cumsum(got["o1"], interp["o1"], x1, rname, f"cumsum {name} 1-D", reverse)


@pytest.mark.parametrize("shape", [(1, 1000), (7, 33), (2, 8)])
def test_row_cumsum_any_width(shape):
    """Widths that are not a power of two nor a multiple of 8 (float32 and int32)."""
    rng = np.random.default_rng(shape[1])
    for name in ("float32", "int32"):
        x = rand(rng, shape, name, lo=-20, hi=20)
        x1 = x[0].copy()
        got = {"o": np.zeros(shape, npd(name)), "o1": np.zeros(shape[1], npd(name))}
        cumsum_kernel[(1,)](x, x1, got["o"], got["o1"], M=shape[0], N=shape[1],
                            RD=pld(name))
        interp = interpret_cumsum(x, x1, name)
        check_cumsum(got["o"], interp["o"], x, name, f"cumsum {name} {shape}")


@needs_tools
@pytest.mark.heavy                      # a pto-isa build per case
@pytest.mark.parametrize("name,reverse", [("float32", False), ("int32", True)])
def test_row_cumsum_on_the_pto_isa_simulator(name, reverse):
    """The .pto's scan (TTRANS, shifted row copies, adds) computed by pto-isa's simulator."""
    rng = np.random.default_rng(4)
    x, x1 = rand(rng, (M, N), name, lo=-20, hi=20), rand(rng, (N,), name, lo=-20, hi=20)
    got = {"o": np.zeros(x.shape, npd(name)), "o1": np.zeros(x1.shape, npd(name))}
    retarget(cumsum_kernel, "pto-isa")[(1,)](x, x1, got["o"], got["o1"], M=M, N=N,
                                             RD=pld(name), REV=reverse)
    interp = interpret_cumsum(x, x1, name, reverse)
    check_cumsum(got["o"], interp["o"], x, name, f"pto-isa cumsum {name}", reverse)
    check_cumsum(got["o1"], interp["o1"], x1, name, f"pto-isa cumsum {name} 1-D", reverse)


def test_half_cumsum_rounds_once():
    """With positive terms, float32 accumulation in any order is far within half an ulp of
    float16, so one final rounding puts every element of the interpreter's float16 cumsum
    within 1 ulp of the exact sums rounded once."""
    worst = 0
    for seed in range(20):
        x = np.random.default_rng(seed).uniform(0.5, 4, size=(M, N)).astype(np.float16)
        interp = interpret_cumsum(x, x[0].copy(), "float16")
        want = to_dtype(np.cumsum(x.astype(np.float64), axis=-1).astype(np.float32), "float16")
        worst = max(worst, int(ulp_distance(interp["o"], want).max()))
    assert worst <= 1, f"interpreted float16 cumsum is {worst} ulps from the rounded sums"


# -- partial tiles with padding ----------------------------------------------------------------

PADDED = [("max", "float32", float("-inf")), ("max", "float16", float("-inf")),
          ("min", "float32", float("inf")), ("sum", "float32", 0),
          ("sum", "int32", 0), ("argmax", "float32", float("-inf")),
          ("max", "int32", -2 ** 31)]


@pytest.mark.parametrize("op,name,pad", PADDED, ids=[f"{o}-{d}" for o, d, _ in PADDED])
def test_reduce_padded_partial_tile(op, name, pad):
    """A (4, 16) tile loaded from a (3, 11) tensor and a (16,) tile from a 9-element tensor:
    the padding is the reduction's identity, so the result is the reduction of the real
    elements (the softmax row-max pattern)."""
    rng = np.random.default_rng(17)
    x = reduce_input(rng, op, name, (3, 11))
    if is_float(name):
        x = (x.astype(np.float32) - 40).astype(npd(name))      # all negative: 0 would win
    x1 = reduce_input(rng, op, name, (9,))
    v2 = ((1, True), (0, False)) if op == "argmax" else ((1, True), (0, False), (None, True))
    got, interp, rname = run_reduce(op, name, x, x1, v2, ((0, True),), pad=pad)
    for k, (axis, keep) in enumerate(v2):
        want = reference(op, x, axis, keep, rname)       # the real elements only
        check(op, got[f"o{k}"], interp[f"o{k}"], want, x, axis, rname,
              f"padded {op} axis={axis}")
    want1 = reference(op, x1, 0, True, rname)
    check(op, got["p0"], interp["p0"], want1, x1, 0, rname, f"padded 1-D {op}")
