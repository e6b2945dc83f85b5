"""tile_map's tiling rule at work: results against numpy for elementwise ops over same-shape and
broadcast inputs, ragged edges (1-D and 2-D), matmul panels, row-wise reductions, chains,
fusion, launch strategies, loop unrolling and the input_tiles / out_shape overrides."""
import warnings

import numpy as np
import pytest

import pypto
from pypto.graph.plan import AUTO_TILES_PER_CORE

from .utils import DTYPES, close, f32, rand, run


@pypto.tile_op
def add(a, b):
    return a + b


@pypto.tile_op
def axpy(a, b):
    return a * 2.5 + b


@pypto.tile_op
def mm(a, b):
    return pypto.matmul(a, b)


@pypto.tile_op
def row_softmax(t):
    e = pypto.exp(t - pypto.max(t, axis=1, keepdims=True))
    return e / pypto.sum(e, axis=1, keepdims=True)


@pypto.tile_op
def relu(t):
    return pypto.maximum(t, 0.0)


def one_node(op, shapes, dtype, tile_size, **kwargs):
    graph = pypto.TensorGraph(name=op.__name__)
    ins = [graph.placeholder(s, dtype, name=f"in{i}") for i, s in enumerate(shapes)]
    out = pypto.tile_map(op, ins, tile_size=tile_size, **kwargs)
    return graph, out


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_ragged_1d(dtype):
    graph, out = one_node(axpy, [(1000,), (1000,)], dtype, 256)
    assert out.producer.tiling.grid == (4,)
    a, b = rand(1000, dtype, 1), rand(1000, dtype, 2)
    close(run(pypto.compile(graph), in0=a, in1=b), f32(a) * 2.5 + f32(b), dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_ragged_2d_33x47(dtype):
    graph, out = one_node(axpy, [(33, 47), (33, 47)], dtype, (16, 16))
    assert out.producer.tiling.grid == (3, 3)
    a, b = rand((33, 47), dtype, 1), rand((33, 47), dtype, 2)
    got = run(pypto.compile(graph), in0=a, in1=b)
    assert got.dtype == DTYPES[dtype]
    close(got, f32(a) * 2.5 + f32(b), dtype)


def test_broadcast_inputs():
    graph, out = one_node(add, [(40, 70), (70,)], "float32", (16, 32))
    assert out.producer.tiling.in_tiles == ((16, 32), (32,))
    a, b = rand((40, 70), "float32"), rand(70, "float32", 1)
    np.testing.assert_array_equal(run(pypto.compile(graph), in0=a, in1=b), a + b)
    graph, out = one_node(add, [(40, 1), (1, 70)], "float32", (16, 32))
    assert out.shape == (40, 70) and out.producer.tiling.in_tiles == ((16, 1), (1, 32))
    a, b = rand((40, 1), "float32"), rand((1, 70), "float32", 1)
    np.testing.assert_array_equal(run(pypto.compile(graph), in0=a, in1=b), a + b)


def test_same_tensor_twice_and_tile_larger_than_tensor():
    graph = pypto.TensorGraph(name="twice")
    x = graph.placeholder((100,), pypto.float32)
    out = pypto.tile_map(add, [x, x], tile_size=4096)
    assert out.producer.tiling.tile == (100,)        # a tile never exceeds the tensor
    a = rand(100, "float32")
    np.testing.assert_array_equal(run(pypto.compile(graph), x=a), a + a)


@pytest.mark.parametrize("dtype,shape", [("float16", (128, 64, 128)),
                                         ("float32", (100, 70, 50)),
                                         ("bfloat16", (64, 64, 64))])
def test_matmul_panels(dtype, shape):
    m, k, n = shape
    graph, out = one_node(mm, [(m, k), (k, n)], dtype, (32, 16))
    t = out.producer.tiling
    assert t.maps == ((0, None), (None, 1)) and t.in_tiles == ((32, k), (k, 16))
    a, b = rand((m, k), dtype, 1), rand((k, n), dtype, 2)
    got = run(pypto.compile(graph), in0=a, in1=b)
    np.testing.assert_allclose(got, f32(a) @ f32(b), rtol=1e-5, atol=1e-4)


def test_matmul_panels_go_straight_to_the_cube(fresh_cache):
    """The generated kernel's tile offsets are provably >= 0 (its divisors max(n, 1)): no
    run-time window check, which would route the operands through the vector core."""
    graph, _ = one_node(mm, [(128, 64), (64, 128)], "float16", (16, 16))    # the seed's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pypto.compile(graph)
    assert not [w for w in caught if issubclass(w.category, pypto.CheckedWindowWarning)]


def test_square_matmul_is_not_mistaken_for_elementwise():
    """Both tilings compile for square inputs; only panels keep K whole."""
    graph, out = one_node(mm, [(48, 48), (48, 48)], "float32", (16, 16))
    assert out.producer.tiling.maps == ((0, None), (None, 1))
    a, b = rand((48, 48), "float32", 1), rand((48, 48), "float32", 2)
    np.testing.assert_allclose(run(pypto.compile(graph), in0=a, in1=b), a @ b, rtol=1e-5,
                               atol=1e-4)


def test_row_reduction_with_whole_rows():
    graph, out = one_node(row_softmax, [(50, 100)], "float32", (8, 100))
    x = rand((50, 100), "float32")
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(run(pypto.compile(graph), in0=x), e / e.sum(axis=1, keepdims=True),
                               rtol=1e-5, atol=1e-6)


def test_chain_of_two_tile_maps_fused_and_not():
    graph = pypto.TensorGraph(name="chain")
    x = graph.placeholder((33, 47), pypto.float16)
    y = graph.placeholder((33, 47), pypto.float16)
    s = pypto.tile_map(axpy, [x, y], tile_size=(16, 16))
    r = pypto.tile_map(relu, [s], tile_size=(16, 16))
    a, b = rand((33, 47), "float16", 1), rand((33, 47), "float16", 2)
    want = np.maximum((a * np.float16(2.5)) + b, 0)       # fp16 rounding after each op
    fused = pypto.compile(graph)
    assert [k.name for k in fused.kernels] == ["chain_axpy_relu"]
    unfused = pypto.compile(graph, options={"tile_fusion": False})
    assert [k.name for k in unfused.kernels] == ["chain_axpy", "chain_relu"]
    for module in (fused, unfused):
        np.testing.assert_array_equal(run(module, x=a, y=b), want)
    assert r.producer.tiling.maps == ((0, 1),)


def test_chain_after_matmul_is_not_fused():
    graph = pypto.TensorGraph(name="mm_relu")
    a = graph.placeholder((64, 32), pypto.float16)
    b = graph.placeholder((32, 48), pypto.float16)
    c = pypto.tile_map(mm, [a, b], tile_size=(16, 16))
    pypto.tile_map(relu, [c], tile_size=(16, 16))
    module = pypto.compile(graph)
    assert [k.group.uses_cube for k in module.kernels] == [True, False]
    x, y = rand((64, 32), "float16", 1), rand((32, 48), "float16", 2)
    np.testing.assert_allclose(run(module, a=x, b=y), np.maximum(f32(x) @ f32(y), 0),
                               rtol=1e-5, atol=1e-4)


def test_several_outputs_in_creation_order():
    graph = pypto.TensorGraph(name="two_outputs")
    x = graph.placeholder((300,), pypto.float32)
    first = pypto.tile_map(relu, [x], tile_size=128)
    second = pypto.tile_map(add, [x, x], tile_size=128)
    module = pypto.compile(graph)
    assert module.output_names == [first.name, second.name]
    a = rand(300, "float32")
    r1, r2 = module.run(pypto.Context(), {"x": pypto.Tensor.from_numpy(a)})
    np.testing.assert_array_equal(r1.to_numpy(), np.maximum(a, 0))
    np.testing.assert_array_equal(r2.to_numpy(), a + a)


@pytest.mark.parametrize("strategy", ["auto", "data_parallel", "grid_stride"])
@pytest.mark.parametrize("unroll", [False, True])
def test_strategies_and_unrolling_agree(strategy, unroll):
    n = 48 * 1024 + 5
    graph, out = one_node(axpy, [(n,), (n,)], "float32", 256, parallel_strategy=strategy)
    module = pypto.compile(graph, options={"loop_unroll": unroll})
    (kernel,) = module.kernels
    tiles = out.producer.tiling.num_tiles
    assert tiles == 193 and tiles > AUTO_TILES_PER_CORE * 48
    want_form = "tile" if strategy == "data_parallel" else "stride"
    if strategy == "auto":
        # the form the cycle model ranks fastest, as launched: 193 tiles one block each run
        # persistent (one block per core, double-buffered), the stride form as written
        times = [t.time_ms for t in kernel.tuning.trials if t.skipped is None]
        assert kernel.tuning.trials[kernel.tuning.winner].time_ms == min(times)
        want_form = kernel.form
    assert kernel.form == want_form
    assert kernel.grid == ((tiles,) if want_form == "tile" else (48,))
    if unroll and want_form == "stride":
        assert "num_stages=2" in kernel.source and "_pong" in kernel.compiled.asm["pto"]
    a, b = rand(n, "float32", 1), rand(n, "float32", 2)
    np.testing.assert_array_equal(run(module, in0=a, in1=b), a * np.float32(2.5) + b)


def test_with_the_tuner_off_auto_launches_one_block_per_tile_when_tiles_are_few():
    graph, _ = one_node(axpy, [(64 * 1024,), (64 * 1024,)], "float32", 1024)
    (kernel,) = pypto.compile(graph, options={"autotune": False}).kernels
    assert (kernel.form, kernel.grid) == ("tile", (64,))


def test_input_tiles_override():
    """A tile op that only compiles on (16, 16) tiles: the override tiles it."""
    @pypto.tile_op
    def fixed(a):
        return a + pypto.full((16, 16), 1.0)

    graph = pypto.TensorGraph(name="fixed")
    x = graph.placeholder((40, 40), pypto.float32)
    with pytest.raises(pypto.CompilationError, match="input_tiles"):
        pypto.tile_map(fixed, [x], tile_size=(16, 16))
    pypto.tile_map(fixed, [x], tile_size=(16, 16), input_tiles=[(0, 1)])
    a = rand((40, 40), "float32")
    np.testing.assert_array_equal(run(pypto.compile(graph), x=a), a + 1)


def test_input_tiles_override_is_checked():
    graph = pypto.TensorGraph(name="bad_override")
    a = graph.placeholder((64, 64), pypto.float32)
    b = graph.placeholder((64, 64), pypto.float32)
    with pytest.raises(ValueError, match="combines the elements of input 'a' along its axis 1"):
        pypto.tile_map(mm, [a, b], tile_size=(16, 16), input_tiles=[(0, 1), (0, 1)])


def test_tile_op_called_on_arrays_runs_the_interpreter():
    a, b = rand((5, 7), "float32", 1), rand((7, 3), "float32", 2)
    np.testing.assert_allclose(mm(a, b), a @ b, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(add(a, a), a + a)


def test_tile_op_inlines_into_a_jit_kernel():
    import pypto.language as pl

    @pypto.jit
    def kernel(x, y, out, B: pl.constexpr):
        o = pl.program_id(0) * B
        pl.store(out, [o], axpy(pl.load(x, [o], [B]), pl.load(y, [o], [B])))

    a, b = rand(256, "float32", 1), rand(256, "float32", 2)
    out = np.empty_like(a)
    kernel[(2,)](a, b, out, B=128)
    np.testing.assert_array_equal(out, a * np.float32(2.5) + b)


def test_default_graph_placeholder():
    graph = pypto.graph.reset_default_graph()
    x = pypto.placeholder(shape=(100,), dtype=pypto.float32)
    pypto.tile_map(relu, [x], tile_size=64)
    assert pypto.get_default_graph() is graph and graph.placeholders[0].name == "x"
    a = rand(100, "float32")
    np.testing.assert_array_equal(run(pypto.compile(graph), x=a), np.maximum(a, 0))


def test_tile_ops_made_by_a_factory_keep_their_own_constants():
    """The constant a tile op closes over is part of its kernel's cache key."""
    def scaler(scale):
        @pypto.tile_op
        def scaled(a):
            return a * scale
        return scaled

    a = rand(300, "float32")
    for scale in (2.0, 3.0):
        graph = pypto.TensorGraph(name="factory")
        x = graph.placeholder((300,), pypto.float32)
        pypto.tile_map(scaler(scale), [x], tile_size=128)
        np.testing.assert_array_equal(run(pypto.compile(graph), x=a), a * np.float32(scale))


def test_a_module_keeps_the_graph_it_was_compiled_from():
    graph = pypto.TensorGraph(name="snapshot")
    x = graph.placeholder((100,), pypto.float32)
    first = pypto.tile_map(relu, [x], tile_size=64)
    module = pypto.compile(graph)
    pypto.tile_map(add, [first, first], tile_size=64)        # added after compiling
    a = rand(100, "float32")
    np.testing.assert_array_equal(run(module, x=a), np.maximum(a, 0))
    assert module.output_names == ["relu"] and "tile_map(add" not in module.tile_graph_ir
    np.testing.assert_array_equal(run(pypto.compile(graph), x=a), 2 * np.maximum(a, 0))


@pypto.tile_op
def row_top3(t):
    values, indices = pypto.language.topk(t, 3)
    return values


def test_row_sort_tiles_rows_and_keeps_each_row_whole():
    """tile.sort combines the last axis only: row tiles are allowed (it was an unknown op,
    mixing every axis, which refused them), cutting the rows is not."""
    graph, out = one_node(row_top3, [(50, 100)], "float32", (8, 100))
    assert out.producer.tiling.grid == (7, 1)
    x = rand((50, 100), "float32")
    want = -np.sort(-x, axis=1, kind="stable")[:, :3]
    np.testing.assert_array_equal(run(pypto.compile(graph), in0=x), want)
    with pytest.raises(ValueError, match="cuts output axis 1"):
        one_node(row_top3, [(50, 100)], "float32", (8, 2))
