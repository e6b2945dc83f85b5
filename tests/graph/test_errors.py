"""Bad input to the graph API gets an error naming the argument (or the input) at fault."""
import numpy as np
import pytest

import pypto

from .utils import rand


@pypto.tile_op
def add(a, b):
    return a + b


@pypto.tile_op
def mm(a, b):
    return pypto.matmul(a, b)


@pytest.fixture
def graph():
    g = pypto.TensorGraph(name="errors")
    g.placeholder((64, 100), pypto.float32, name="x")
    g.placeholder((64, 100), pypto.float32, name="y")
    return g


def xy(graph):
    return graph.placeholders[0], graph.placeholders[1]


@pytest.fixture
def module(graph):
    pypto.tile_map(add, list(xy(graph)), tile_size=(16, 32))
    return pypto.compile(graph)


# -- Module.run --------------------------------------------------------------------------------
def test_wrong_input_names_list_the_expected_ones(module):
    a = rand((64, 100), "float32")
    with pytest.raises(KeyError) as e:
        module.run(pypto.Context(), {"x": a})
    assert str(e.value) == ("Module.run(inputs=...): missing ['y']. Graph 'errors' expects "
                            "exactly ['x', 'y']")
    with pytest.raises(KeyError, match=r"missing \['y'\]; unknown \['z'\].*\['x', 'y'\]"):
        module.run(pypto.Context(), {"x": a, "z": a})
    with pytest.raises(TypeError, match="must be a dict of the graph's inputs"):
        module.run(pypto.Context(), [a, a])


def test_wrong_shape_and_dtype_name_the_input(module):
    a = rand((64, 100), "float32")
    with pytest.raises(ValueError, match=r"input 'y' has shape \(100, 64\), the placeholder "
                                         r"has shape \(64, 100\)"):
        module.run(pypto.Context(), {"x": a, "y": a.T})
    with pytest.raises(TypeError, match="input 'x' has dtype float16, the placeholder has "
                                        "dtype float32"):
        module.run(pypto.Context(), {"x": a.astype(np.float16), "y": a})
    with pytest.raises(TypeError, match="input 'x' must be a pypto.Tensor or an array"):
        module.run(pypto.Context(), {"x": "data", "y": a})
    with pytest.raises(TypeError, match="takes a pypto.Context"):
        module.run("npu:0", {"x": a, "y": a})


# -- tile_map ----------------------------------------------------------------------------------
def test_tile_size_of_the_wrong_rank(graph):
    with pytest.raises(ValueError, match=r"tile_map\(tile_size=256\) has 1 dimension\(s\) but "
                                         r"the output of add has shape \(64, 100\) \(rank 2\)"):
        pypto.tile_map(add, list(xy(graph)), tile_size=256)
    with pytest.raises(ValueError, match=r"tile_size=\(16, 16, 16\)\) has 3 dimension"):
        pypto.tile_map(add, list(xy(graph)), tile_size=(16, 16, 16))
    with pytest.raises(TypeError, match=r"tile_map\(tile_size=...\) must be an int"):
        pypto.tile_map(add, list(xy(graph)), tile_size=16.0)
    with pytest.raises(ValueError, match="tile extents must be positive"):
        pypto.tile_map(add, list(xy(graph)), tile_size=(0, 16))


def test_bad_strategy_lists_the_accepted_values(graph):
    with pytest.raises(ValueError, match=r"parallel_strategy='pipeline'\): accepted values "
                                         r"are 'auto', 'data_parallel', 'grid_stride'"):
        pypto.tile_map(add, list(xy(graph)), tile_size=(16, 16), parallel_strategy="pipeline")
    with pytest.raises(ValueError, match="model parallelism"):
        pypto.tile_map(add, list(xy(graph)), tile_size=(16, 16),
                       parallel_strategy="model_parallel")


def test_cutting_a_reduced_axis_is_refused(graph):
    @pypto.tile_op
    def centre(t):
        return t - pypto.mean(t, axis=1, keepdims=True)

    x, _ = xy(graph)
    with pytest.raises(ValueError, match=r"tile_map\(tile_size=\(16, 16\)\) cuts output axis 1 "
                                         r"into tiles of 16, but centre combines the elements "
                                         r"of input 'x' along its axis 1.*pl.sum\(axis=1\) at "
                                         r".*test_errors.py:\d+.*use 100 \(or more\)"):
        pypto.tile_map(centre, [x], tile_size=(16, 16))
    pypto.tile_map(centre, [x], tile_size=(16, 100))       # whole rows: fine


def test_unsupported_mappings(graph):
    @pypto.tile_op
    def outer(a):
        return a[:, None] * a[None, :]

    @pypto.tile_op
    def made_inside(a):
        return pypto.broadcast_to(a, (64, 100))

    @pypto.tile_op
    def total(a):
        return pypto.sum(a)

    v = graph.placeholder((50,), pypto.float32, name="v")
    col = graph.placeholder((64, 1), pypto.float32, name="col")
    with pytest.raises(ValueError, match="axis 0 of input 'v' reaches output axes"):
        pypto.tile_map(outer, [v], tile_size=(16, 16))
    with pytest.raises(ValueError, match="comes from no input"):
        pypto.tile_map(made_inside, [col], tile_size=(16, 16))
    with pytest.raises(ValueError, match=r"has shape \(\); tile_map writes outputs of rank 1 to 3"):
        pypto.tile_map(total, [v], tile_size=16)
    big = graph.placeholder((2, 3, 4, 5), pypto.float32, name="big")
    with pytest.raises(ValueError, match="input 'big' has shape"):
        pypto.tile_map(total, [big], tile_size=16)


def test_bad_tile_op_and_inputs(graph):
    x, y = xy(graph)
    with pytest.raises(TypeError, match="decorate it with @pypto.tile_op"):
        pypto.tile_map(lambda a, b: a + b, [x, y], tile_size=(16, 16))
    with pytest.raises(TypeError, match=r"add takes 2 tile\(s\) \(a, b\), got 1 input"):
        pypto.tile_map(add, [x], tile_size=(16, 16))
    with pytest.raises(TypeError, match=r"inputs\[1\] is a ndarray"):
        pypto.tile_map(add, [x, np.zeros((64, 100))], tile_size=(16, 16))
    other = pypto.TensorGraph(name="other").placeholder((64, 100), pypto.float32)
    with pytest.raises(ValueError, match="belongs to graph 'other'"):
        pypto.tile_map(add, [x, other], tile_size=(16, 16))
    with pytest.raises(ValueError, match="already has a tensor named 'x'"):
        pypto.tile_map(add, [x, y], tile_size=(16, 16), name="x")


def test_errors_in_the_tile_op_point_at_the_users_line(graph):
    @pypto.tile_op
    def typo(a, b):
        return a + bb

    with pytest.raises(pypto.CompilationError) as e:
        pypto.tile_map(typo, list(xy(graph)), tile_size=(16, 16))
    assert e.value.loc.filename == __file__
    assert e.value.loc.line == typo.source.first_line + 2
    assert "name 'bb' is not defined" in str(e.value)
    with pytest.raises(pypto.CompilationError) as e:        # found when tracing on tiles
        pypto.tile_map(mm, list(xy(graph)), tile_size=(16, 16))
    assert e.value.loc.filename == __file__ and "inner dimensions differ" in str(e.value)


def test_compile_errors_name_the_kernel_and_node():
    """Too big for the on-chip buffers: reported by the compiler, with the node named."""
    graph = pypto.TensorGraph(name="huge")
    x = graph.placeholder((4, 1 << 16), pypto.float32)
    pypto.tile_map(add, [x, x], tile_size=(4, 1 << 16))
    with pytest.raises(pypto.CompilationError, match=r"in kernel huge_add, generated for "
                                                     r"tile_map node\(s\) add"):
        pypto.compile(graph)


def test_barrier_with_data_parallel_and_more_tiles_than_cores():
    @pypto.tile_op
    def synced(a):
        pypto.barrier()
        return a + 1

    graph = pypto.TensorGraph(name="synced")
    x = graph.placeholder((100 * 64,), pypto.float32)
    pypto.tile_map(synced, [x], tile_size=64, parallel_strategy="data_parallel")
    with pytest.raises(ValueError, match="parallel_strategy='data_parallel'.*100 tiles"):
        pypto.compile(graph)


# -- compile -----------------------------------------------------------------------------------
def test_compile_arguments(graph):
    pypto.tile_map(add, list(xy(graph)), tile_size=(16, 16))
    with pytest.raises(ValueError, match="unknown target 'ascend310'"):
        pypto.compile(graph, target="ascend310")
    with pytest.raises(ValueError, match=r"unknown option\(s\) 'tile_fuse'; accepted: "
                                         "tile_fusion, layout_opt, loop_unroll"):
        pypto.compile(graph, options={"tile_fuse": True})
    with pytest.raises(TypeError, match="'loop_unroll' must be True or False"):
        pypto.compile(graph, options={"loop_unroll": "yes"})
    with pytest.raises(TypeError, match=r"pypto.compile\(graph=...\) takes a pypto.TensorGraph"):
        pypto.compile(add)
    with pytest.raises(TypeError, match=r"compile\(output=...\) must be a file path"):
        pypto.compile(graph, output=3)
    with pytest.raises(ValueError, match="has no tile_map nodes"):
        pypto.compile(pypto.TensorGraph(name="empty"))


# -- placeholders and what the seed uses but never defines ---------------------------------------
def test_placeholder_arguments():
    g = pypto.TensorGraph(name="ph")
    with pytest.raises(ValueError, match=r"placeholder\(shape=...\)"):
        g.placeholder(shape=(0, 3), dtype=pypto.float32)
    with pytest.raises(TypeError, match=r"placeholder\(dtype=...\)"):
        g.placeholder(shape=(3,), dtype="complex64")
    with pytest.raises(ValueError, match=r"placeholder\(layout=...\) must be one of"):
        g.placeholder(shape=(3,), dtype=pypto.float32, layout="ZN")
    with pytest.raises(ValueError, match="needs a rank-5 shape"):
        g.placeholder(shape=(1, 16, 4, 4), dtype=pypto.float16, layout="NC1HWC0")
    g.placeholder(shape=(3,), dtype=pypto.float32, name="a")
    with pytest.raises(ValueError, match="already has a tensor named 'a'"):
        g.placeholder(shape=(3,), dtype=pypto.float32, name="a")
    with pytest.raises(TypeError, match=r"TensorGraph\(name=...\)"):
        pypto.TensorGraph(name="")


def test_undefined_integrations_say_so():
    with pytest.raises(TypeError, match=r"call_ascend_c\(op=...\) takes a kernel made by"):
        pypto.call_ascend_c(object(), [])
    with pytest.raises(TypeError, match=r"conv2d\(input=...\) must be a graph tensor or an "
                       "array"):
        pypto.conv2d(None, None)
    with pytest.raises(TypeError, match="is a @pypto.tile_op, not a kernel"):
        add[(1,)]
