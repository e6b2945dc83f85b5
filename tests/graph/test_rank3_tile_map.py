"""tile_map over rank-3 tensors: 3-D tiles (one grid axis per tile axis) through tracing, the
tiling's flow analysis, the generated kernels, MPMD and the Execution Graph."""
import numpy as np
import pytest

import pypto


@pypto.tile_op
def exp_scale_minus_rowmax(x, y):
    return pypto.exp(x) * y - pypto.max(x, axis=2, keepdims=True)


@pypto.tile_op
def bmm(a, b):
    return pypto.matmul(a, b)


def _graph():
    g = pypto.TensorGraph(name="rank3")
    x = g.placeholder((5, 20, 48), pypto.float32, name="x")
    y = g.placeholder((1, 20, 48), pypto.float32, name="y")
    pypto.tile_map(exp_scale_minus_rowmax, [x, y], tile_size=(2, 8, 48))
    a = g.placeholder((5, 24, 64), pypto.float16, name="a")
    b = g.placeholder((5, 64, 32), pypto.float16, name="b")
    pypto.tile_map(bmm, [a, b], tile_size=(2, 16, 32))
    return g


def test_rank3_tile_maps_match_numpy_in_order_and_mpmd():
    """Tails on the batch axis (5 planes in tiles of 2) and on the rows (20 in 8, 24 in 16)."""
    rng = np.random.default_rng(3)
    inputs = {"x": rng.standard_normal((5, 20, 48)).astype(np.float32),
              "y": rng.standard_normal((1, 20, 48)).astype(np.float32),
              "a": rng.standard_normal((5, 24, 64)).astype(np.float16),
              "b": rng.standard_normal((5, 64, 32)).astype(np.float16)}
    module = pypto.compile(_graph())
    x, y, a, b = inputs.values()
    want = (np.exp(x) * y - x.max(axis=2, keepdims=True),
            a.astype(np.float32) @ b.astype(np.float32))
    in_order = [t.to_numpy() for t in module.run(inputs, parallel_strategy="data_parallel")]
    mpmd = [t.to_numpy() for t in module.run(inputs, parallel_strategy="mpmd")]
    for got, again, w in zip(in_order, mpmd, want):
        np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-4)
        np.testing.assert_array_equal(got, again)
    assert len(module.execution_graph.tasks) == 3 * 3 + 3 * 2
    assert module.model("mpmd").cycles > 0


def test_a_tile_that_cuts_the_reduced_axis_is_refused():
    g = pypto.TensorGraph(name="cut")
    x = g.placeholder((4, 8, 64), pypto.float32, name="x")
    y = g.placeholder((1, 8, 64), pypto.float32, name="y")
    with pytest.raises(ValueError, match="axis 2"):
        pypto.tile_map(exp_scale_minus_rowmax, [x, y], tile_size=(2, 8, 32))
