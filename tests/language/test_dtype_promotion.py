"""The dtype promotion rule of docs/tile_ir.md, as tables.

- tile ⊕ tile: two floats → the wider, float16 with bfloat16 → float32; float with int → the
  float; two ints → numpy.result_type; bool with anything → the other.
- tile ⊕ Python number or runtime scalar: the tile's dtype wins, except an int or bool tile
  with a float → float32, and a bool tile with an int → int32.
- ``/`` and ``**`` promote int operands to float32 first.

Every kernel checks its result dtypes at compile time (``pl.static_assert(r.dtype == ...)``),
stores into tensors of exactly that dtype (so the store converts nothing), and the values are
compared with the interpreter and with numpy computing in the promoted dtype.

int64 tiles are in the table but not compiled: A2/A3's vector unit has no 64-bit arithmetic, so
the NPU target refuses them (NotOnChip); the int64 rows run in the interpreter only.
"""
import re

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.errors import NotOnChip

from .utils import (ALL, INTS, TILE_ALL, assert_exact, assert_float_close, compute_dtype,
                    interpret_mode, is_float, npd, pld, promote, rand, run_both, to_dtype, weak)

M, N = 4, 16

# The rule written out in full: PROMOTION[a][b] for tile(a) ⊕ tile(b).
_NAMES = ["bool", "int8", "uint8", "int16", "int32", "int64", "float16", "bfloat16", "float32"]
_SHORT = {"b": "bool", "i8": "int8", "u8": "uint8", "i16": "int16", "i32": "int32",
          "i64": "int64", "f16": "float16", "bf16": "bfloat16", "f32": "float32"}
_TABLE = """
        b     i8    u8    i16   i32   i64   f16   bf16  f32
b       b     i8    u8    i16   i32   i64   f16   bf16  f32
i8      i8    i8    i16   i16   i32   i64   f16   bf16  f32
u8      u8    i16   u8    i16   i32   i64   f16   bf16  f32
i16     i16   i16   i16   i16   i32   i64   f16   bf16  f32
i32     i32   i32   i32   i32   i32   i64   f16   bf16  f32
i64     i64   i64   i64   i64   i64   i64   f16   bf16  f32
f16     f16   f16   f16   f16   f16   f16   f16   f32   f32
bf16    bf16  bf16  bf16  bf16  bf16  bf16  f32   bf16  f32
f32     f32   f32   f32   f32   f32   f32   f32   f32   f32
"""
PROMOTION = {}
for _line in _TABLE.strip().splitlines()[1:]:
    _row, *_cells = _line.split()
    PROMOTION[_SHORT[_row]] = {b: _SHORT[c] for b, c in zip(_NAMES, _cells)}

PAIRS = [(a, b) for a in ALL for b in ALL]
TILE_PAIRS = [(a, b) for a in TILE_ALL for b in TILE_ALL]        # what the NPU computes on
INT64_PAIRS = [(a, b) for a, b in PAIRS if "int64" in (a, b)]


# -- kernels -----------------------------------------------------------------------------------

@pypto.jit
def promote_kernel(x, y, c, o_ab, o_ba, o_where, o_lt, M: pl.constexpr, N: pl.constexpr,
                   RD: pl.constexpr, OPS: pl.constexpr):
    """a + b, b + a, where(c, a, b) and a < b (those named in OPS)."""
    a = pl.load(x, offsets=(0, 0), shape=(M, N))
    b = pl.load(y, offsets=(0, 0), shape=(M, N))
    if "ab" in OPS:
        ab = a + b
        pl.static_assert(ab.dtype == RD, "a + b: wrong dtype")
        pl.store(o_ab, offsets=(0, 0), value=ab)
    if "ba" in OPS:
        ba = b + a
        pl.static_assert(ba.dtype == RD, "b + a: wrong dtype")
        pl.store(o_ba, offsets=(0, 0), value=ba)
    if "where" in OPS:
        w = pl.where(pl.load(c, offsets=(0, 0), shape=(M, N)), a, b)
        pl.static_assert(w.dtype == RD, "where(c, a, b): wrong dtype")
        pl.store(o_where, offsets=(0, 0), value=w)
    if "lt" in OPS:
        lt = a < b                             # compares in the promoted dtype
        pl.static_assert(lt.dtype == pl.bool_, "a < b: not bool")
        pl.store(o_lt, offsets=(0, 0), value=lt)


@pypto.jit
def weak_scalar_kernel(x, si, sf, o_i, o_ir, o_f, o_fr, o_si, o_sf, o_b, M: pl.constexpr,
                       N: pl.constexpr, RDS: pl.constexpr, BOOL_SCALAR: pl.constexpr):
    a = pl.load(x, offsets=(0, 0), shape=(M, N))
    results = (a + 3, 3 + a, a + 2.5, 2.5 + a, a + si, a + sf)
    outs = (o_i, o_ir, o_f, o_fr, o_si, o_sf)
    for k in pl.static_range(6):
        pl.static_assert(results[k].dtype == RDS[k], "wrong weak-scalar result dtype")
        pl.store(outs[k], offsets=(0, 0), value=results[k])
    if BOOL_SCALAR:
        rb = a * True
        pl.static_assert(rb.dtype == RDS[6], "wrong bool-scalar result dtype")
        pl.store(o_b, offsets=(0, 0), value=rb)


@pypto.jit
def to_float_kernel(x, y, o_div, o_divs, o_pow, o_rdiv, M: pl.constexpr, N: pl.constexpr,
                    RD: pl.constexpr, RDS: pl.constexpr, POW: pl.constexpr):
    a = pl.load(x, offsets=(0, 0), shape=(M, N))
    b = pl.load(y, offsets=(0, 0), shape=(M, N))
    d = a / b
    ds = a / 4
    rd = 6 / b
    pl.static_assert(d.dtype == RD, "a / b dtype")
    pl.static_assert(ds.dtype == RDS, "a / 4 dtype")
    pl.store(o_div, offsets=(0, 0), value=d)
    pl.store(o_divs, offsets=(0, 0), value=ds)
    pl.store(o_rdiv, offsets=(0, 0), value=rd)
    if POW:
        p = a ** 2
        pl.static_assert(p.dtype == RDS, "a ** 2 dtype")
        pl.store(o_pow, offsets=(0, 0), value=p)


# -- the table itself --------------------------------------------------------------------------

def test_table_is_symmetric_and_matches_the_rule():
    for a, b in PAIRS:
        assert PROMOTION[a][b] == PROMOTION[b][a], (a, b)
        assert PROMOTION[a][b] == promote(a, b), (a, b)


# -- tile ⊕ tile -------------------------------------------------------------------------------

def small_values(rng, name, shape=(M, N)):
    """Values every dtype of the table holds exactly, so conversions to the promoted dtype are
    exact and only the rule is tested."""
    if name == "bool":
        return rand(rng, shape, name)
    if name == "uint8":
        return rand(rng, shape, name, lo=0, hi=60)
    if name in INTS:
        return rand(rng, shape, name, lo=-60, hi=60)
    x = rng.integers(-120, 120, size=shape) / 4.0
    return x.astype(np.float32).astype(npd(name))


# where() and comparisons promote with the same rule; they are checked on the mixed pairs
# below (every pair would cost ~80 more compiles).
WHERE_LT_PAIRS = {("bool", "bool"), ("bool", "uint8"), ("int8", "uint8"), ("uint8", "int16"),
                  ("int32", "uint8"), ("int32", "float16"), ("int16", "bfloat16"),
                  ("float16", "bfloat16"), ("bfloat16", "float32"), ("float16", "float32"),
                  ("bool", "float32")}


def run_promote(a, b, x, y, c=None, ops=None):
    rd = PROMOTION[a][b]
    if ops is None:
        ops = ("ab",) if a != "bool" or b != "bool" else ()   # + is not defined on bools
        if (a, b) in WHERE_LT_PAIRS:
            ops += ("where", "lt")
    c = np.zeros((M, N), bool) if c is None else c
    outs = {k: np.zeros((M, N), npd(rd)) for k in ("o_ab", "o_ba", "o_where")}
    outs["o_lt"] = np.zeros((M, N), bool)
    got, interp = run_both(promote_kernel, (1,), {"x": x, "y": y, "c": c, **outs}, M=M, N=N,
                           RD=pld(rd), OPS=ops)
    return got, interp, ops


def pair_values(a, b):
    """Inputs of test_tile_tile: the values of each dtype depend on its name and position
    only, so the (a, b) and (b, a) cases add the same numbers in both orders."""
    x = small_values(np.random.default_rng(ALL.index(a)), a)
    y = small_values(np.random.default_rng(100 + ALL.index(b)), b)
    c = rand(np.random.default_rng(7), (M, N), "bool")
    return x, y, c


def tile_tile_expected(a, b, x, y, c):
    rd = PROMOTION[a][b]
    cd = compute_dtype(rd)
    xr, yr = x.astype(npd(rd)), y.astype(npd(rd))
    want = {"o_where": np.where(c, xr, yr), "o_lt": xr.astype(cd) < yr.astype(cd),
            "o_ab": to_dtype(xr.astype(cd) + yr.astype(cd), rd)}
    want["o_ba"] = want["o_ab"]
    return want


@pytest.mark.parametrize("a,b", TILE_PAIRS, ids=[f"{a}+{b}" for a, b in TILE_PAIRS])
def test_tile_tile(a, b):
    """The result dtype of every pair (checked at compile time) and the values of a + b."""
    rd = PROMOTION[a][b]
    x, y, c = pair_values(a, b)
    got, interp, ops = run_promote(a, b, x, y, c)
    want = tile_tile_expected(a, b, x, y, c)
    for key in ("o_" + op for op in ops):
        assert_exact(got[key], interp[key], f"{a} ⊕ {b} {key}: compiled vs interpreter")
        assert_exact(got[key], want[key], f"{a} ⊕ {b} {key}: vs numpy in {rd}")


@pytest.mark.parametrize("a,b", INT64_PAIRS, ids=[f"{a}+{b}" for a, b in INT64_PAIRS])
def test_int64_pairs_in_the_interpreter(a, b):
    """The int64 rows and columns of the table: result dtypes and values of a + b, b + a,
    where and < in the reference interpreter (the NPU target refuses int64 tiles)."""
    rd = PROMOTION[a][b]
    x, y, c = pair_values(a, b)
    ops = ("ab", "ba", "where", "lt")
    outs = {k: np.zeros((M, N), npd(rd)) for k in ("o_ab", "o_ba", "o_where")}
    outs["o_lt"] = np.zeros((M, N), bool)
    with interpret_mode():
        promote_kernel[(1,)](x=x, y=y, c=c, **outs, M=M, N=N, RD=pld(rd), OPS=ops)
    want = tile_tile_expected(a, b, x, y, c)
    for key in ("o_" + op for op in ops):
        assert_exact(outs[key], want[key], f"{a} ⊕ {b} {key}: interpreter vs numpy in {rd}")


@pytest.mark.parametrize("a,b", [("int32", "int64"), ("int64", "float32"), ("int64", "int64")])
def test_int64_tiles_are_refused_on_the_npu(a, b):
    """A tile promoted to (or loaded as) int64 is refused at compile time, at its line: A2/A3's
    vector unit has no 64-bit arithmetic."""
    x, y, c = pair_values(a, b)
    with pytest.raises(NotOnChip, match="int64 tile") as got:
        run_promote(a, b, x, y, c, ops=("ab",))
    assert "A2/A3" in str(got.value) and got.value.loc is not None


COMMUTE_PAIRS = [("int8", "uint8"), ("uint8", "int32"), ("bool", "int16"), ("float16", "bfloat16"),
                 ("int32", "bfloat16"), ("float16", "float32"), ("int16", "float16")]


@pytest.mark.parametrize("a,b", COMMUTE_PAIRS, ids=[f"{a}+{b}" for a, b in COMMUTE_PAIRS])
def test_commutativity(a, b):
    """a + b and b + a give the same dtype and bits (x + y with x of dtype a against y + x
    with y of dtype b, in one kernel; a + b alone is the kernel of test_tile_tile)."""
    x, y, _ = pair_values(a, b)
    got, interp, _ = run_promote(a, b, x, y, ops=("ab", "ba"))
    assert got["o_ab"].dtype == npd(PROMOTION[b][a])
    assert_exact(got["o_ab"], got["o_ba"], f"{a} + {b} vs {b} + {a}")
    swapped, _, _ = run_promote(b, a, y, x)
    assert_exact(swapped["o_ab"], got["o_ab"], f"kernel for ({b}, {a}) vs ({a}, {b})")


def test_mixed_signedness_values():
    """uint8 ⊕ int8 is int16, so values are neither wrapped to 8 bits nor compared unsigned."""
    x = np.array([200, 255, 0, 128] * 16, np.uint8).reshape(M, N)
    y = np.array([-1, -128, 127, 100] * 16, np.int8).reshape(M, N)
    got, _, _ = run_promote("uint8", "int8", x, y, ops=("ab", "where", "lt"))
    assert_exact(got["o_ab"], x.astype(np.int16) + y.astype(np.int16), "uint8 + int8")
    assert_exact(got["o_where"], y.astype(np.int16), "where picks int8 values")
    assert_exact(got["o_lt"], x.astype(np.int16) < y.astype(np.int16), "uint8 < int8")
    assert not got["o_lt"][0, 0] and not got["o_lt"][0, 1]     # 200 < -1, 255 < -128: false


def test_result_dtype_in_tile_ir():
    """The promoted dtype is explicit in the Tile IR: casts to int16, then an int16 add."""
    x, y = np.zeros((M, N), np.int8), np.zeros((M, N), np.uint8)
    outs = [np.zeros((M, N), np.int16)] * 3 + [np.zeros((M, N), bool)]
    ir = promote_kernel.compile(x, y, np.zeros((M, N), bool), *outs, M=M, N=N, RD=pl.int16,
                                OPS=("ab",)).asm["tile_ir"]
    adds = [line for line in ir.splitlines() if "tile.binary" in line and "op = add" in line]
    assert adds and all(re.search(r": tile<4x16xi16\b", line) for line in adds), ir
    assert re.search(r"tile\.cast .*\{dtype = int16\} : tile<4x16xi16", ir), ir


# -- tile ⊕ scalar -----------------------------------------------------------------------------

def weak_dtypes(name):
    """a + 3, 3 + a, a + 2.5, 2.5 + a, a + runtime int, a + runtime float, a * True."""
    return [weak(name, "int")] * 2 + [weak(name, "float")] * 2 + \
        [weak(name, "int"), weak(name, "float"), weak(name, "bool")]


@pytest.mark.parametrize("name", TILE_ALL)
def test_tile_scalar(name):
    rng = np.random.default_rng(ALL.index(name))
    x = small_values(rng, name)
    rds = weak_dtypes(name)
    bool_scalar = name != "bool"           # bool * True is bool, and * is not defined on bool
    keys = ("o_i", "o_ir", "o_f", "o_fr", "o_si", "o_sf", "o_b")
    outs = {k: np.zeros((M, N), npd(d)) for k, d in zip(keys, rds)}
    si, sf = 7, -1.25
    got, interp = run_both(weak_scalar_kernel, (1,), {"x": x, **outs}, si=si, sf=sf, M=M, N=N,
                           RDS=tuple(pld(d) for d in rds), BOOL_SCALAR=bool_scalar)
    expected = {"o_i": 3, "o_ir": 3, "o_f": 2.5, "o_fr": 2.5, "o_si": si, "o_sf": sf, "o_b": True}
    for key, rd in zip(keys, rds):
        if key == "o_b" and not bool_scalar:
            continue
        cd = compute_dtype(rd)
        v = expected[key]
        v = np.full((M, N), np.float32(v) if isinstance(v, float) else v).astype(npd(rd))
        op = np.multiply if key == "o_b" else np.add
        want = to_dtype(op(x.astype(npd(rd)).astype(cd), v.astype(cd)), rd)
        assert_exact(got[key], interp[key], f"{name} tile {key}: compiled vs interpreter")
        assert_exact(got[key], want, f"{name} tile {key}: vs numpy in {rd}")


def test_weak_scalar_does_not_widen():
    """int8 tile + 3 stays int8 and wraps; float16 tile + 2.5 stays float16."""
    x = np.array([126, 127, -128, 0] * 16, np.int8).reshape(M, N)
    rds = weak_dtypes("int8")
    outs = {k: np.zeros((M, N), npd(d)) for k, d in zip(
        ("o_i", "o_ir", "o_f", "o_fr", "o_si", "o_sf", "o_b"), rds)}
    got, _ = run_both(weak_scalar_kernel, (1,), {"x": x, **outs}, si=7, sf=-1.25, M=M, N=N,
                      RDS=tuple(pld(d) for d in rds), BOOL_SCALAR=True)
    assert got["o_i"].dtype == np.int8
    assert_exact(got["o_i"], (x.astype(np.int16) + 3).astype(np.int8), "int8 + 3 wraps")
    assert got["o_f"].dtype == np.float32       # int tile + float → float32
    assert_exact(got["o_f"], x.astype(np.float32) + np.float32(2.5), "int8 + 2.5")


# -- / and ** ----------------------------------------------------------------------------------

DIV_PAIRS = [("int8", "int8"), ("uint8", "int8"), ("int32", "int16"), ("bool", "int32"),
             ("bool", "bool"), ("float16", "int32"), ("bfloat16", "bfloat16"),
             ("float16", "bfloat16")]
POW_DTYPES = ("int8", "bool", "float16")     # ** is a costly decomposition: a few dtypes


@pytest.mark.parametrize("a,b", DIV_PAIRS, ids=[f"{a}/{b}" for a, b in DIV_PAIRS])
def test_division_and_power_give_floats(a, b):
    """int / int → float32 (also a / 4 and a ** 2 on an int tile); floats keep the promoted
    float dtype."""
    rng = np.random.default_rng(len(a) * 7 + len(b))
    x = small_values(rng, a)
    y = small_values(rng, b)
    y = np.where(y == 0, np.ones_like(y), y)
    rd = PROMOTION[a][b]
    rd = rd if is_float(rd) else "float32"
    rds = a if is_float(a) else "float32"
    rrd = b if is_float(b) else "float32"
    outs = {"o_div": np.zeros((M, N), npd(rd)), "o_divs": np.zeros((M, N), npd(rds)),
            "o_pow": np.zeros((M, N), npd(rds)), "o_rdiv": np.zeros((M, N), npd(rrd))}
    pow_ = a in POW_DTYPES
    got, interp = run_both(to_float_kernel, (1,), {"x": x, "y": y, **outs}, M=M, N=N,
                           RD=pld(rd), RDS=pld(rds), POW=pow_)
    f = np.float32
    want = {
        "o_div": to_dtype(x.astype(npd(rd)).astype(f) / y.astype(npd(rd)).astype(f), rd),
        "o_divs": to_dtype(x.astype(npd(rds)).astype(f) / f(4), rds),
        "o_pow": to_dtype(x.astype(npd(rds)).astype(f) ** 2, rds),
        "o_rdiv": to_dtype(f(6) / y.astype(npd(rrd)).astype(f), rrd),
    }
    for key, w in want.items():
        if key == "o_pow" and not pow_:
            continue
        if key == "o_pow":          # pow is exp(2 log|x|): not exact
            assert_float_close(got[key], w, rds, what=f"{a} ** 2 vs numpy")
            assert_float_close(got[key], interp[key], rds, what=f"{a} ** 2 vs interpreter")
            continue
        assert_exact(got[key], interp[key], f"{a} / {b} {key}: compiled vs interpreter")
        assert_exact(got[key], w, f"{a} / {b} {key}: vs numpy")
