"""Sorting along the last axis of a tile: ``pl.sort``, ``pl.argsort``, ``pl.topk``.

Each kernel runs compiled and in the reference interpreter; both are compared exactly with
numpy's stable argsort (``kind="stable"``; descending as the stable argsort of the negated
values, which keeps equal values in index order). Values are drawn from a small range, so
rows have many ties and the stability of the order is checked on every example; widths
include tails (not multiples of 8 or 32) and k from 1 to the row's width.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pypto
import pypto.language as pl
from pypto.errors import CompilationError

from .utils import assert_exact, run_both


@pypto.jit
def topk_2d(x, v, i, M: pl.constexpr, N: pl.constexpr, K: pl.constexpr, LARGEST: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(M, N))
    values, indices = pl.topk(t, K, largest=LARGEST)
    pl.store(v, offsets=(0, 0), value=values)
    pl.store(i, offsets=(0, 0), value=indices)


@pypto.jit
def sort_2d(x, v, i, M: pl.constexpr, N: pl.constexpr, DESC: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(M, N))
    pl.store(v, offsets=(0, 0), value=pl.sort(t, descending=DESC))
    pl.store(i, offsets=(0, 0), value=pl.argsort(t, descending=DESC))


@pypto.jit
def sort_1d(x, v, i, N: pl.constexpr):
    t = pl.load(x, offsets=(0,), shape=(N,))
    pl.store(v, offsets=(0,), value=t.sort())
    pl.store(i, offsets=(0,), value=t.argsort())


def ref_order(x, descending):
    """numpy's stable order; NaN as the leading infinity (docs/language.md, Sorting)."""
    key = -x.astype(np.float64) if descending else x.astype(np.float64)
    key = np.where(np.isnan(key), -np.inf, key)
    return np.argsort(key, axis=-1, kind="stable").astype(np.int32)


DTYPES = [np.float32, np.float16, np.int32]


def _values(rng, shape, d, nan=0.0):
    """Small integers (many ties); for floats also halves, both infinities and, with ``nan``
    > 0, that share of NaNs."""
    v = rng.integers(-4, 5, shape)
    if np.dtype(d).kind == "f":
        p = [0.8 - nan, 0.1, 0.05, 0.05, nan]
        v = v + rng.choice([0.0, 0.5, -np.inf, np.inf, np.nan], shape, p=p)
    return v.astype(d)


def _check(kernel, x, k, descending, **consts):
    m = x.shape[0] if x.ndim == 2 else None
    out_shape = x.shape[:-1] + (k,)
    arrays = {"x": x, "v": np.zeros(out_shape, x.dtype), "i": np.full(out_shape, -9, np.int32)}
    got, interp = run_both(kernel, (1,), arrays, **consts)
    order = ref_order(x, descending)[..., :k]
    want_v = np.take_along_axis(x, order, axis=-1)
    for what, r in (("compiled", got), ("interpreter", interp)):
        assert_exact(r["i"], order, f"{what} indices", inputs=x)
        assert_exact(r["v"], want_v, f"{what} values", inputs=x)
    return m


@pytest.mark.heavy
@settings(max_examples=8, deadline=None, derandomize=True, database=None)
@given(st.integers(1, 4), st.integers(1, 70), st.sampled_from(DTYPES), st.booleans(),
       st.data())
def test_topk_matches_numpy(m, n, d, largest, data):
    k = data.draw(st.integers(1, n))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31 - 1)))
    x = _values(rng, (m, n), d)
    _check(topk_2d, x, k, largest, M=m, N=n, K=k, LARGEST=largest)


@settings(max_examples=5, deadline=None, derandomize=True, database=None)
@given(st.integers(1, 3), st.integers(1, 40), st.sampled_from(DTYPES), st.booleans(),
       st.integers(0, 2**31 - 1))
def test_sort_and_argsort_match_numpy(m, n, d, desc, seed):
    x = _values(np.random.default_rng(seed), (m, n), d)
    _check(sort_2d, x, n, desc, M=m, N=n, DESC=desc)


def test_sort_of_a_vector_is_stable():
    x = np.array([3, 1, 2, 1, 3, 0, 1, 2, 2, 3, -1, 1, 0], np.int32)
    _check(sort_1d, x, x.size, False, N=x.size)


def test_topk_keeps_values_equal_to_the_sentinel_apart():
    """-inf elements are real values, not 'taken' marks: each index comes out once."""
    x = np.array([[-np.inf, 1, -np.inf, -np.inf, 2, -np.inf]], np.float32)
    _check(topk_2d, x, 6, True, M=1, N=6, K=6, LARGEST=True)
    x = np.array([[2 ** 31 - 1, 5, 2 ** 31 - 1, -(2 ** 31)]], np.int32)
    _check(topk_2d, x, 4, False, M=1, N=4, K=4, LARGEST=False)


NAN, INF = np.nan, np.inf
# (row, k, largest, indices, values): docs/language.md, NaN is compared as the leading infinity
# (+inf descending, -inf ascending), so NaNs and that infinity leave together in index order,
# and in a row without it NaNs come first
NAN_ROWS = [
    ([1, NAN, 3, NAN, 2], 4, True, [1, 3, 2, 4], [NAN, NAN, 3, 2]),
    ([1, NAN, 3, NAN, 2], 4, False, [1, 3, 0, 4], [NAN, NAN, 1, 2]),
    ([1, INF, NAN, 3, INF, NAN, 2], 5, True, [1, 2, 4, 5, 3], [INF, NAN, INF, NAN, 3]),
    ([1, -INF, NAN, 3, -INF, NAN, 2], 5, False, [1, 2, 4, 5, 0], [-INF, NAN, -INF, NAN, 1]),
]


@pytest.mark.parametrize("row, k, largest, indices, values", NAN_ROWS)
def test_nan_order(row, k, largest, indices, values):
    x = np.array([row], np.float32)
    arrays = {"x": x, "v": np.zeros((1, k), np.float32), "i": np.zeros((1, k), np.int32)}
    for r in run_both(topk_2d, (1,), arrays, M=1, N=len(row), K=k, LARGEST=largest):
        assert r["i"].tolist() == [indices]
        np.testing.assert_array_equal(r["v"][0], values)


# -- misuse ---------------------------------------------------------------------------------------

@pypto.jit
def bad_k(x, v, i):
    a, b = pl.topk(pl.load(x, offsets=(0, 0), shape=(2, 8)), 9)
    pl.store(v, offsets=(0, 0), value=a)


@pypto.jit
def bad_runtime_k(x, v, k):
    a, b = pl.topk(pl.load(x, offsets=(0, 0), shape=(2, 8)), k)
    pl.store(v, offsets=(0, 0), value=a)


@pypto.jit
def bad_bool(x, v):
    pl.store(v, offsets=(0, 0), value=pl.sort(pl.load(x, offsets=(0, 0), shape=(2, 8)) > 0))


@pypto.jit
def bad_direction(x, v, flag):
    pl.store(v, offsets=(0, 0), value=pl.sort(pl.load(x, offsets=(0, 0), shape=(2, 8)),
                                              descending=flag > 0))


F = np.zeros((2, 8), np.float32)
MISUSE = [
    (bad_k, (F, F, F), "k = 9 but the last axis has 8 elements"),
    (bad_runtime_k, (F, F, 3), "k must be a compile-time integer"),
    (bad_bool, (F, F), "sort\\(\\) sorts .* tiles, not bool"),
    (bad_direction, (F, F, 2), "the direction must be a compile-time bool"),
]


@pytest.mark.parametrize("kernel, args, message", MISUSE, ids=[m[0].__name__ for m in MISUSE])
def test_misuse_is_a_clear_error(kernel, args, message):
    with pytest.raises(CompilationError, match=message):
        kernel.compile(*args)


@pytest.mark.heavy
def test_cycle_model_charges_one_pass_per_selected_element():
    """The selection loop's (int32 tiles: TSORT32 sorts floats only) modelled time grows
    linearly with k (the same passes over the tile per step, after a fixed load, setup and
    store)."""
    from pypto.backends.ascend.model.launch import model_kernel
    x = np.zeros((4, 256), np.int32)
    cycles = {}
    for k in (2, 5, 8):
        v, i = np.zeros((4, k), np.int32), np.zeros((4, k), np.int32)
        model = model_kernel(topk_2d, (1,), x, v, i, M=4, N=256, K=k, LARGEST=True)
        assert model.pipe_busy["V"] > 0
        cycles[k] = model.cycles
    step = (cycles[5] - cycles[2]) / 3
    assert step > 500
    assert abs((cycles[8] - cycles[5]) / 3 - step) < 0.1 * step


@pytest.mark.heavy
@settings(max_examples=12, deadline=None, derandomize=True, database=None)
@given(st.integers(1, 4), st.integers(1, 300), st.sampled_from([np.float32, np.float16]),
       st.booleans(), st.data())
def test_sort_instructions_match_numpy(m, n, d, largest, data):
    """TSORT32 + TMRGSORT (4-run, 2- and 3-list merges, top-k trees) + TGATHER: widths with
    tails (not multiples of 32, nor 32 times powers of four), k from 1 to the width,
    duplicates, NaN and both infinities."""
    k = data.draw(st.integers(1, n))
    x = _values(np.random.default_rng(data.draw(st.integers(0, 2**31 - 1))), (m, n), d, nan=0.06)
    _check(topk_2d, x, k, largest, M=m, N=n, K=k, LARGEST=largest)


@pytest.mark.heavy
def test_float_sorts_use_the_sort_instructions_and_ints_the_selection_loop():
    """docs/language.md, Sorting: float tiles become TSORT32, TMRGSORT and TGATHER, whose
    modelled time hardly depends on k; int32 tiles keep the selection loop."""
    from pypto.backends.ascend.model.launch import model_kernel
    for d in (np.float32, np.int32):
        x = np.zeros((4, 256), d)
        v, i = np.zeros((4, 8), d), np.zeros((4, 8), np.int32)
        pto = topk_2d.compile(x, v, i, M=4, N=256, K=8, LARGEST=True).asm["pto"]
        sorted_by_sfu = all(f"pto.{op} " in pto for op in ("tsort32", "tmrgsort", "tgather"))
        assert sorted_by_sfu == (d == np.float32)
        assert ("pto.trowargmax" in pto) == (d == np.int32)
    x, cycles = np.zeros((4, 256), np.float32), {}
    for k in (2, 8):
        v, i = np.zeros((4, k), np.float32), np.zeros((4, k), np.int32)
        cycles[k] = model_kernel(topk_2d, (1,), x, v, i, M=4, N=256, K=k,
                                 LARGEST=True).cycles
    assert abs(cycles[8] - cycles[2]) < 0.05 * cycles[2]
