"""TLOAD / TSTORE rows that move as host vectors (``lowering/memory._copy_row``): contiguous
rows of one dtype, cut by the tensor's edges anywhere, with the padding and the clipping the
element-by-element path gives. Windows start before, inside and past the tensor in both axes;
widths are not multiples of a vector (64 bytes: 16 float32, 32 float16, 64 int8, 16 int16)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pypto
import pypto.language as pl
from tests.quick import quick_cases


@pypto.jit
def window_copy(x, out, r0, c0, o0, p0, TR: pl.constexpr, TC: pl.constexpr):
    t = pl.load(x, offsets=(r0, c0), shape=(TR, TC), padding=7)
    pl.store(out, offsets=(o0, p0), value=t)


def _expected(x, out, r0, c0, o0, p0, tr, tc):
    tile = np.full((tr, tc), 7, x.dtype)
    for i in range(tr):
        for j in range(tc):
            if 0 <= r0 + i < x.shape[0] and 0 <= c0 + j < x.shape[1]:
                tile[i, j] = x[r0 + i, c0 + j]
    want = out.copy()
    for i in range(tr):
        for j in range(tc):
            if 0 <= o0 + i < out.shape[0] and 0 <= p0 + j < out.shape[1]:
                want[o0 + i, p0 + j] = tile[i, j]
    return want


@pytest.mark.parametrize("dtype", quick_cases([np.float32, np.float16, np.int8, np.int16], np.int8))
@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_windows_cut_anywhere_move_exactly(dtype, data):
    rows, cols = data.draw(st.integers(1, 9)), data.draw(st.integers(1, 150))
    tr, tc = data.draw(st.sampled_from([(3, 17), (4, 40), (2, 131)]))
    r0, o0 = data.draw(st.integers(-4, rows + 1)), data.draw(st.integers(-4, rows + 1))
    c0, p0 = data.draw(st.integers(-70, cols + 3)), data.draw(st.integers(-70, cols + 3))
    rng = np.random.default_rng(rows * 131 + cols)
    x = rng.integers(-100, 100, size=(rows, cols)).astype(dtype)
    out = np.full((rows, cols), -5, dtype)
    want = _expected(x, out, r0, c0, o0, p0, tr, tc)
    window_copy[(1,)](x, out, r0, c0, o0, p0, TR=tr, TC=tc)
    np.testing.assert_array_equal(out, want)
