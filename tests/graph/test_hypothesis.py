"""Elementwise tile_maps over random sizes and tile sizes, 1-D and 2-D, against numpy."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import pypto

from .utils import rand


@pypto.tile_op
def blend(a, b):
    return a * 0.75 - b


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 5000), tile=st.sampled_from([1, 16, 100, 256, 1024, 8192]),
       strategy=st.sampled_from(["auto", "data_parallel", "grid_stride"]))
def test_elementwise_1d(n, tile, strategy):
    graph = pypto.TensorGraph(name="h1")
    x = graph.placeholder((n,), pypto.float32)
    y = graph.placeholder((n,), pypto.float32)
    pypto.tile_map(blend, [x, y], tile_size=tile, parallel_strategy=strategy)
    a, b = rand(n, "float32", 1), rand(n, "float32", 2)
    got = pypto.compile(graph).run(pypto.Context(), {"x": a, "y": b}).to_numpy()
    np.testing.assert_array_equal(got, a * np.float32(0.75) - b)


@settings(max_examples=10, deadline=None)
@given(m=st.integers(1, 70), n=st.integers(1, 70), tm=st.sampled_from([1, 8, 16, 64]),
       tn=st.sampled_from([8, 32, 128]), row_vector=st.booleans())
def test_elementwise_2d(m, n, tm, tn, row_vector):
    graph = pypto.TensorGraph(name="h2")
    x = graph.placeholder((m, n), pypto.float16)
    y = graph.placeholder((n,) if row_vector else (m, n), pypto.float16)
    pypto.tile_map(blend, [x, y], tile_size=(tm, tn))
    a, b = rand((m, n), "float16", 1), rand(y.shape, "float16", 2)
    got = pypto.compile(graph).run(pypto.Context(), {"x": a, "y": b}).to_numpy()
    np.testing.assert_array_equal(got, a * np.float16(0.75) - b)
