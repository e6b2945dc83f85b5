"""Conversions, ``x.to(dtype)`` and ``pl.cast(x, dtype, rounding=...)``, between every pair of
the 9 dtypes (docs/tile_ir.md, "Numerics"):

- float → narrower float rounds to nearest even (bfloat16 is reached through float32);
- float → int truncates toward zero and saturates at the target's range, NaN → 0;
- int → int wraps or extends; int → float rounds to nearest even;
- anything → bool is ``!= 0`` (NaN → True);
- ``rounding="rint"|"floor"|"ceil"|"trunc"`` rounds a float to an integral value first.

int64 is left out of the compiled pairs: A2/A3's vector unit has no 64-bit arithmetic, so a
conversion from or to an int64 tile raises NotOnChip (``test_int64_tile_casts_are_refused``).

All conversions are exact functions of their input, so compiled, interpreted and numpy
results must agree bit for bit.
"""
import ml_dtypes
import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.errors import NotOnChip

from .utils import (BF16, FLOATS, INTS, TILE_ALL, assert_exact, interpret_mode, is_float, npd,
                    pld, rand, run_both)

M, N = 4, 32


@pypto.jit
def cast_kernel(x, o0, o1, o2, o3, o4, o5, M: pl.constexpr, N: pl.constexpr,
                TARGETS: pl.constexpr, ROUNDING: pl.constexpr, METHOD: pl.constexpr):
    """x converted to each dtype of TARGETS (at most 6), into o0, o1, ..."""
    t = pl.load(x, offsets=(0, 0), shape=(M, N))
    outs = (o0, o1, o2, o3, o4, o5)
    for k in pl.static_range(len(TARGETS)):
        if METHOD == "to":
            r = t.to(TARGETS[k])
        elif ROUNDING is None:
            r = pl.cast(t, TARGETS[k])
        else:
            r = pl.cast(t, TARGETS[k], rounding=ROUNDING)
        pl.static_assert(r.dtype == TARGETS[k], "cast result dtype")
        pl.store(outs[k], offsets=(0, 0), value=r)


# -- inputs ------------------------------------------------------------------------------------

FLOAT_EDGES = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997,
               -0.7, 127.0, 127.5, 128.0, -128.0, -128.5, -129.0, 255.0, 255.5, 256.0, -1.0,
               32767.0, 32768.0, -32769.0, 65504.0, 65520.0, 70000.0, -70000.0,
               2147483520.0, 2147483648.0, -2147483648.0, -2147483904.0, 1e10, -1e10,
               9.2e18, -9.3e18, 1e30, 1e-6, -1e-7, 6e-8, 1e-40,
               # round-to-nearest-even ties and near-ties for float16 and bfloat16
               1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8,
               1.0 + 2.0 ** -8 + 2.0 ** -20, -(1.0 + 3 * 2.0 ** -8), 3.140625, 0.1]


def cast_input(name, seed=0):
    rng = np.random.default_rng(seed)
    if name == "bool":
        return rand(rng, (M, N), name)
    if name in INTS:
        x = rand(rng, (M, N), name)
        info = np.iinfo(npd(name))
        edges = [v for v in (0, 1, -1, 127, 128, -128, -129, 255, 256, 32767, 32768, -32769,
                             2 ** 24 + 1, 2 ** 31 - 1, -2 ** 31, 2 ** 40 + 5, -2 ** 53 - 1)
                 if info.min <= v <= info.max]
        x.flat[:len(edges)] = edges
        return x
    x = (rng.standard_normal((M, N)) * 300).astype(np.float32)
    edges = np.array(FLOAT_EDGES, np.float32)
    x.flat[:edges.size] = edges
    with np.errstate(over="ignore"):          # 70000 and up are inf in float16
        return x.astype(npd(name))


# -- the numpy reference -----------------------------------------------------------------------

ROUND = {"rint": np.rint, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc}


# A2/A3's TCVT converts these without saturation: into int32 (saturated), then its low bits
# (pto-isa npu/a2a3/TCvt.hpp, kIsNarrowingCvt; docs/tile_ir.md)
CHIP_WRAPS = {("float32", "int16"), ("float16", "int16"), ("float16", "int8"),
              ("float16", "uint8")}


def reference_cast(x, src, dst, rounding=None):
    x = np.asarray(x)
    if (src, dst) in CHIP_WRAPS:
        wide = reference_cast(x, src, "int32", rounding)
        return wide.astype(npd(dst))                    # numpy keeps the low bits
    if rounding is not None and is_float(src):
        x = ROUND[rounding](x.astype(np.float32))       # halves are exact in float32
        if is_float(dst) or dst == "bool":
            return reference_cast(x, "float32", dst)
        src = "float32"
    if dst == "bool":
        return x.astype(np.float64) != 0 if is_float(src) else x != 0
    if is_float(src) and dst in INTS:
        info = np.iinfo(npd(dst))
        f = x.astype(np.float64)
        t = np.trunc(np.where(np.isnan(f), 0.0, f))
        # int64's max is not a float64 (it rounds to 2**63): saturate the top by hand
        big = t >= 2.0 ** 63
        t = np.clip(np.where(big, 0.0, t), float(info.min), float(info.max))
        return np.where(big, info.max, t.astype(npd(dst))).astype(npd(dst))
    if dst == "bfloat16":
        return x.astype(np.float32).astype(BF16)       # through float32, as the rule says
    if src == "bfloat16":
        with np.errstate(over="ignore"):
            return x.astype(np.float32).astype(npd(dst))
    with np.errstate(all="ignore"):
        return x.astype(npd(dst))


# -- every pair --------------------------------------------------------------------------------

TARGET_GROUPS = [("bool", "int8", "uint8", "int16", "int32"),
                 ("float16", "bfloat16", "float32")]


def run_casts(src, targets, x, rounding=None, method="cast"):
    outs = {f"o{k}": np.zeros((M, N), npd(t)) for k, t in enumerate(targets)}
    for k in range(len(targets), 6):
        outs[f"o{k}"] = np.zeros((1, 1), np.int8)        # unused
    got, interp = run_both(cast_kernel, (1,), {"x": x, **outs}, M=M, N=N,
                           TARGETS=tuple(pld(t) for t in targets), ROUNDING=rounding,
                           METHOD=method)
    return [(t, got[f"o{k}"], interp[f"o{k}"]) for k, t in enumerate(targets)]


@pytest.mark.parametrize("group", [0, 1], ids=["to-bool-and-ints", "to-floats"])
@pytest.mark.parametrize("src", TILE_ALL)
def test_cast_all_pairs(src, group):
    """Both spellings: ``x.to(d)`` for the first target group, ``pl.cast(x, d)`` for the
    second."""
    x = cast_input(src, seed=TILE_ALL.index(src))
    for dst, got, interp in run_casts(src, TARGET_GROUPS[group], x,
                                      method="to" if group == 0 else "cast"):
        what = f"{src} -> {dst}"
        assert_exact(got, interp, f"{what}: compiled vs interpreter", x)
        assert_exact(got, reference_cast(x, src, dst), f"{what}: vs numpy", x)


def test_float_to_int_saturates_except_where_the_chip_wraps():
    """The documented special cases, spelled out: float32 -> int8, uint8, int32 saturate;
    float32 -> int16 goes through int32 and keeps the low 16 bits, as A2/A3's TCVT does."""
    x = np.array([np.nan, np.inf, -np.inf, 1e10, -1e10, 300.0, -300.0, -0.9, 0.9, -1.5,
                  40000.5, -40000.0] + [0.0] * (M * N - 12), np.float32).reshape(M, N)
    res = {dst: got for dst, got, _ in run_casts("float32", TARGET_GROUPS[0], x, method="to")}
    for dst in ("int8", "uint8", "int32"):
        info = np.iinfo(npd(dst))
        v = res[dst].ravel()[:10].tolist()
        assert v[:5] == [0, info.max, info.min, info.max, info.min], (dst, v)
        assert v[5] == min(300, info.max) and v[6] == max(-300, info.min), (dst, v)
        assert v[7:] == [0, 0, max(-1, info.min)], (dst, v)     # truncation toward zero
    # int16: int32's max (inf, 1e10) keeps 0xffff = -1, its min 0; 40000 wraps to -25536
    assert res["int16"].ravel()[:12].tolist() == [0, -1, 0, -1, 0, 300, -300, 0, 0, -1,
                                                  -25536, 25536]
    assert res["bool"].ravel()[:10].tolist() == [True] * 10     # NaN != 0, -0.9 != 0


def test_float16_to_8_and_16_bits_wraps_like_the_chip():
    """float16 -> int8/uint8/int16: TCVT through int32, then the low bits (pto-isa's
    NonSatTorch paths): 300 -> 44 in int8, -1 -> 255 in uint8, 65504 (0xffe0) -> -32 in int8
    and int16."""
    x = np.array([300.0, -1.0, 65504.0, -65504.0, np.inf, np.nan, 127.9, -129.0] +
                 [0.0] * (M * N - 8), np.float16).reshape(M, N)
    res = {dst: got for dst, got, _ in run_casts("float16", TARGET_GROUPS[0], x, method="to")}
    assert res["int8"].ravel()[:8].tolist() == [44, -1, -32, 32, -1, 0, 127, 127]
    assert res["uint8"].ravel()[:8].tolist() == [44, 255, 224, 32, 255, 0, 127, 127]
    assert res["int16"].ravel()[:8].tolist() == [300, -1, -32, 32, -1, 0, 127, -129]
    assert res["int32"].ravel()[:8].tolist() == [300, -1, 65504, -65504, 2 ** 31 - 1, 0,
                                                 127, -129]


def test_narrowing_float_rounds_to_nearest_even():
    x = np.array([1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8,
                  65520.0, 65519.0, -65520.0, 2.0 ** -25] + [0.0] * (M * N - 8),
                 np.float32).reshape(M, N)
    res = {dst: got for dst, got, _ in run_casts("float32", TARGET_GROUPS[1], x,
                                                  method="cast")}
    f16, bf16 = res["float16"].ravel()[:8], res["bfloat16"].ravel()[:8].astype(np.float32)
    assert f16[0] == 1.0 and f16[1] == 1.0 + 2.0 ** -9                # ties to even
    assert np.isinf(f16[4]) and f16[5] == 65504.0 and f16[6] == -np.inf
    assert f16[7] == 0.0                                               # half the min subnormal
    assert bf16[2] == 1.0 and bf16[3] == 1.0 + 2.0 ** -6


def test_int_conversions_wrap():
    x = np.zeros((M, N), np.int32)
    x.flat[:6] = [300, -1, 2 ** 20 + 5, -129, 65536 + 7, 2 ** 31 - 1]
    res = {dst: got for dst, got, _ in run_casts("int32", TARGET_GROUPS[0], x, method="to")}
    assert res["int8"].ravel()[:6].tolist() == [44, -1, 5, 127, 7, -1]
    assert res["uint8"].ravel()[:6].tolist() == [44, 255, 5, 127, 7, 255]
    assert res["int16"].ravel()[:6].tolist() == [300, -1, 5, -129, 7, -1]
    assert res["int32"].ravel()[:6].tolist() == [300, -1, 2 ** 20 + 5, -129, 65543, 2 ** 31 - 1]
    assert res["bool"].ravel()[:7].tolist() == [True] * 6 + [False]


@pytest.mark.parametrize("src, dst", [("int64", "int32"), ("int32", "int64"),
                                      ("float32", "int64"), ("int64", "float32")])
def test_int64_tile_casts_are_refused(src, dst):
    """A2/A3's vector unit has no 64-bit arithmetic: converting an int64 tile, or into one,
    is refused at compile time at the kernel's line (int64 tensors in global memory are fine;
    the interpreter still defines the conversion)."""
    x = cast_input(src, seed=5)
    with pytest.raises(NotOnChip, match="int64 tile") as got:
        run_casts(src, (dst,), x)
    assert "A2/A3" in str(got.value) and got.value.loc is not None
    o = {"o0": np.zeros((M, N), npd(dst)),
         **{f"o{k}": np.zeros((1, 1), np.int8) for k in range(1, 6)}}
    with interpret_mode():
        cast_kernel[(1,)](x=x, **o, M=M, N=N, TARGETS=(pld(dst),), ROUNDING=None,
                          METHOD="cast")
    assert_exact(o["o0"], reference_cast(x, src, dst), f"{src} -> {dst}: interpreter")


# -- rounding modes ----------------------------------------------------------------------------

ROUNDING_TARGETS = {"float32": ("bool", "int8", "uint8", "int16", "int32", "float32"),
                    "float16": ("bool", "int8", "int16", "float16", "bfloat16", "float32"),
                    "bfloat16": ("uint8", "int16", "int32", "float16", "bfloat16")}


@pytest.mark.parametrize("rounding", ["rint", "floor", "ceil", "trunc"])
@pytest.mark.parametrize("src", FLOATS)
def test_cast_rounding(src, rounding):
    x = cast_input(src, seed=11)
    for dst, got, interp in run_casts(src, ROUNDING_TARGETS[src], x, rounding=rounding):
        what = f"{src} -> {dst} rounding={rounding}"
        assert_exact(got, interp, f"{what}: compiled vs interpreter", x)
        assert_exact(got, reference_cast(x, src, dst, rounding), f"{what}: vs numpy", x)


def test_rounding_modes_spelled_out():
    vals = [2.5, -2.5, 1.5, -1.5, 0.4, -0.4, 0.6, -0.6]
    x = np.array(vals + [0.0] * (M * N - 8), np.float32).reshape(M, N)
    expected = {"rint": [2, -2, 2, -2, 0, 0, 1, -1], "floor": [2, -3, 1, -2, 0, -1, 0, -1],
                "ceil": [3, -2, 2, -1, 1, 0, 1, 0], "trunc": [2, -2, 1, -1, 0, 0, 0, 0]}
    for rounding, want in expected.items():
        res = {d: g for d, g, _ in run_casts("float32", ROUNDING_TARGETS["float32"], x,
                                              rounding=rounding)}
        assert res["int32"].ravel()[:8].tolist() == want, rounding
        assert res["float32"].ravel()[:8].tolist() == want, rounding
        assert res["bool"].ravel()[:8].tolist() == [v != 0 for v in want], rounding


def test_rounding_ignored_for_int_sources():
    x = cast_input("int32", seed=3)
    for dst, got, interp in run_casts("int32", ("int8", "float32", "bool"), x, rounding="floor"):
        assert_exact(got, interp, f"int32 -> {dst} floor: compiled vs interpreter")
        assert_exact(got, reference_cast(x, "int32", dst), f"int32 -> {dst}: vs numpy")


def test_bad_rounding_rejected():
    from pypto.errors import CompilationError
    x = np.zeros((M, N), np.float32)
    with pytest.raises(CompilationError, match="rounding must be one of"):
        run_casts("float32", ("int32",), x, rounding="nearest")


def test_bfloat16_reference_helper():
    """The numpy reference itself: ml_dtypes rounds float32 → bfloat16 to nearest even."""
    f = np.array([1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8], np.float32)
    assert f.astype(ml_dtypes.bfloat16).astype(np.float32).tolist() == [1.0, 1.0 + 2.0 ** -6]
