"""Cheaper vector code for per-row quantisation: max/min reductions of an exactly widened tile
run in the narrow type (compiler/passes/narrow.py), and float -> int8 saturates in float16
after one rounding instead of wrapping int32 bits (passes/legalize_types.py). Both give the
interpreter's bits."""
import re

import numpy as np
from hypothesis import given, settings, strategies as st

import pypto
import pypto.language as pl


def _pto(kernel) -> str:
    (compiled,) = kernel._kernels.values()
    return compiled.asm["pto"]


def _dtype_of(pto: str, op: str) -> set:
    """The dtypes of the first operand of every ``op`` in the .pto."""
    return set(re.findall(rf"pto\.{op} ins\([^:]*: !pto\.tile_buf<loc=vec, dtype=(\w+)", pto))


@pypto.jit
def row_amax(x, out, MODE: pl.constexpr, REDUCE: pl.constexpr, BM: pl.constexpr,
             N: pl.constexpr):
    r = pl.program_id(0) * BM
    t = pl.load(x, offsets=(r, 0), shape=(BM, N)).to(pl.float32)
    if MODE == 1:
        t = pl.abs(t)
    if MODE == 2:
        t = -pl.abs(t)
    if REDUCE == 0:
        m = pl.max(t, axis=1, keepdims=True)
    else:
        m = pl.min(t, axis=1, keepdims=True)
    pl.store(out, offsets=(r, 0), value=m)


@settings(max_examples=12, deadline=None)
@given(mode=st.sampled_from([0, 1, 2]), reduce=st.sampled_from([0, 1]),
       rows=st.sampled_from([1, 2, 4]), cols=st.sampled_from([16, 128, 1024]),
       seed=st.integers(0, 2 ** 16))
def test_selecting_reductions_of_a_widened_tile_run_narrow_and_exact(mode, reduce, rows,
                                                                       cols, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows * 2, cols)) * 1e3).astype(np.float16)
    x[0, :3] = [np.inf, -np.inf, -0.0]
    out = np.zeros((rows * 2, 1), np.float32)
    row_amax[(2,)](x, out, MODE=mode, REDUCE=reduce, BM=rows, N=cols)
    t = x.astype(np.float32)
    t = {0: t, 1: np.abs(t), 2: -np.abs(t)}[mode]
    np.testing.assert_array_equal(out, (t.max if reduce == 0 else t.min)(1, keepdims=True))
    pto = row_amax.compile(x, out, MODE=mode, REDUCE=reduce, BM=rows, N=cols).asm["pto"]
    assert _dtype_of(pto, "trowmax" if reduce == 0 else "trowmin") == {"f16"}


@pypto.jit
def quantise(x, q, scale, BM: pl.constexpr, N: pl.constexpr):
    r = pl.program_id(0) * BM
    t = pl.load(x, offsets=(r, 0), shape=(BM, N)).to(pl.float32)
    amax = pl.max(pl.abs(t), axis=1, keepdims=True)
    pl.store(scale, offsets=(r, 0), value=amax)
    pl.store(q, offsets=(r, 0), value=pl.cast(t * (100.0 / amax), pl.int8, rounding="rint"))


def test_a_quantisation_reduces_in_float16_and_saturates_without_wrapping():
    """Its max(abs(t)) ran on float32 (twice the repeats) and its float32 -> int8 took 13
    vector instructions (a clamp in int32 through two filled tiles, then five to wrap bits
    the clamp had already bounded); now abs and max in float16 and 3 for the conversion
    (rint into int32, to float16, to int8 with TCVT's saturation on: the float16 clamp it
    replaced took two more)."""
    x = np.array([[1.0, -2.5, 3.0, 0.5] * 8, [np.inf, 7.0, -3.0, 0.0] * 8], np.float16)
    q, scale = np.zeros(x.shape, np.int8), np.zeros((2, 1), np.float32)
    quantise[(1,)](x, q, scale, BM=2, N=32)
    t = x.astype(np.float32)
    amax = np.abs(t).max(1, keepdims=True)
    with np.errstate(invalid="ignore"):
        want = np.clip(np.nan_to_num(np.rint(t * (np.float32(100) / amax)), nan=0.0), -128, 127)
    np.testing.assert_array_equal(scale, amax)
    np.testing.assert_array_equal(q, want.astype(np.int8))
    pto = _pto(quantise)
    assert _dtype_of(pto, "tabs") == {"f16"} and _dtype_of(pto, "trowmax") == {"f16"}
    for wrap in ("txor", "tshls", "tshrs"):
        assert f"pto.{wrap} " not in pto, wrap
    assert pto.count("pto.texpands ") == 1     # 100.0 for 100 / amax, no int32 bounds
    assert pto.count("pto.tcvt ") == 5         # x in; amax out; f32 -> i32 -> f16 -> i8
    assert "pto.tmaxs " not in pto and "pto.tmins " not in pto
    assert pto.count("#pto<saturation_mode ON>") == 1


@pypto.jit
def abs_twice(x, out, m, BM: pl.constexpr, N: pl.constexpr):
    """abs(t) is read by the max and by the store: it stays float32 (narrowing it would add
    a conversion, not save one)."""
    t = pl.abs(pl.load(x, offsets=(0, 0), shape=(BM, N)).to(pl.float32))
    pl.store(out, offsets=(0, 0), value=t)
    pl.store(m, offsets=(0, 0), value=pl.max(t, axis=1, keepdims=True))


def test_an_abs_with_another_reader_stays_wide():
    x = np.random.default_rng(3).standard_normal((4, 64)).astype(np.float16)
    out, m = np.zeros(x.shape, np.float32), np.zeros((4, 1), np.float32)
    abs_twice[(1,)](x, out, m, BM=4, N=64)
    np.testing.assert_array_equal(out, np.abs(x.astype(np.float32)))
    np.testing.assert_array_equal(m, np.abs(x.astype(np.float32)).max(1, keepdims=True))
    assert _dtype_of(_pto(abs_twice), "tabs") == {"f32"}
