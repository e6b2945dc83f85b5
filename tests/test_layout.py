"""pypto.layout: exact converters to and from NC1HWC0, NZ and FRACTAL_Z, for numpy and torch,
checked element by element against the index maps the module documents."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pypto
from pypto import layout

DTYPES = [np.float16, np.float32, np.int8]
dims = st.integers(1, 40)


def _values(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 20).astype(dtype)


def test_c0_is_32_bytes_of_elements():
    assert [layout.c0_for(d) for d in (np.float16, np.float32, np.int8)] == [16, 8, 32]
    assert layout.c0_for(pypto.bfloat16) == 16


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 3), c=dims, h=st.integers(1, 6), w=st.integers(1, 6),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2 ** 31))
def test_nc1hwc0_index_map_and_round_trip(n, c, h, w, dtype, seed):
    x = _values((n, c, h, w), dtype, seed)
    y = layout.to_nc1hwc0(x)
    c0 = layout.c0_for(dtype)
    assert y.shape == (n, -(-c // c0), h, w, c0) and y.flags.c_contiguous
    for (i, j, k, l) in [(0, 0, 0, 0), (n - 1, c - 1, h - 1, w - 1), (n // 2, c // 2, h // 2, 0)]:
        assert y[i, j // c0, k, l, j % c0] == x[i, j, k, l]
    assert np.count_nonzero(y) == np.count_nonzero(x)          # padding channels are zero
    np.testing.assert_array_equal(layout.from_nc1hwc0(y, c), x)


@settings(max_examples=40, deadline=None)
@given(batch=st.lists(st.integers(1, 3), max_size=2), m=dims, k=dims,
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2 ** 31))
def test_nz_index_map_and_round_trip(batch, m, k, dtype, seed):
    x = _values((*batch, m, k), dtype, seed)
    y = layout.to_nz(x)
    c0 = layout.c0_for(dtype)
    assert y.shape == (*batch, -(-k // c0), -(-m // 16), 16, c0)
    lead = (0,) * len(batch)
    for (i, j) in [(0, 0), (m - 1, k - 1), (m // 2, k // 3)]:
        assert y[(*lead, j // c0, i // 16, i % 16, j % c0)] == x[(*lead, i, j)]
    np.testing.assert_array_equal(layout.from_nz(y, x.shape), x)


@settings(max_examples=40, deadline=None)
@given(cout=dims, cin=dims, kh=st.integers(1, 3), kw=st.integers(1, 3),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2 ** 31))
def test_fractal_z_index_map_and_round_trip(cout, cin, kh, kw, dtype, seed):
    w = _values((cout, cin, kh, kw), dtype, seed)
    y = layout.to_fractal_z(w)
    c0 = layout.c0_for(dtype)
    assert y.shape == (-(-cin // c0) * kh * kw, -(-cout // 16), 16, c0)
    for (o, i, a, b) in [(0, 0, 0, 0), (cout - 1, cin - 1, kh - 1, kw - 1)]:
        assert y[(i // c0) * kh * kw + a * kw + b, o // 16, o % 16, i % c0] == w[o, i, a, b]
    np.testing.assert_array_equal(layout.from_fractal_z(y, w.shape), w)


def test_torch_tensors_convert_alike():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    x = torch.randn(2, 19, 3, 5).to(torch.float16)
    y = layout.to_nc1hwc0(x)
    assert isinstance(y, torch.Tensor) and y.is_contiguous()
    np.testing.assert_array_equal(y.numpy(), layout.to_nc1hwc0(x.numpy()))
    assert torch.equal(layout.from_nc1hwc0(y, 19), x)
    m = torch.randn(37, 21)
    assert torch.equal(layout.from_nz(layout.to_nz(m), m.shape), m)
    np.testing.assert_array_equal(layout.to_nz(m).numpy(), layout.to_nz(m.numpy()))
    wt = torch.randn(20, 9, 3, 3)
    assert torch.equal(layout.from_fractal_z(layout.to_fractal_z(wt), wt.shape), wt)


def test_bad_shapes_say_what_is_expected():
    with pytest.raises(ValueError, match=r"to_nc1hwc0 takes a rank-4 \(N, C, H, W\) tensor"):
        layout.to_nc1hwc0(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="holds 1 to 16 channels"):
        layout.from_nc1hwc0(np.zeros((1, 1, 2, 2, 16), np.float16), 17)
    with pytest.raises(ValueError, match=r"from_nz\(shape=\(40, 3\)\)"):
        layout.from_nz(layout.to_nz(np.zeros((20, 3), np.float32)), (40, 3))


def test_placeholders_take_the_layouts():
    g = pypto.TensorGraph("layouts")
    a = g.placeholder((1, 1, 224, 224, 16), pypto.float16, name="a", layout="NC1HWC0")
    b = g.placeholder((4, 2, 16, 16), pypto.float16, name="b", layout="NZ")
    c = g.placeholder((9, 1, 16, 16), pypto.float16, name="c", layout="FRACTAL_Z")
    assert (a.layout, b.layout, c.layout) == ("NC1HWC0", "NZ", "FRACTAL_Z")
    with pytest.raises(ValueError, match=r"layout='NZ'\) needs a \(\.\.\., N1, M1, 16, C0\)"):
        g.placeholder((16, 16), pypto.float16, name="d", layout="NZ")
