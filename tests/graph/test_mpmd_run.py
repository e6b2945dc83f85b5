"""Module.run under MPMD on the host (graph/mpmd_run.py): bitwise the in-order run, tiles
streaming between nodes, and the fallbacks to in-order launches."""
import numpy as np
import pytest

import pypto
from pypto.runtime import pool as runtime

from .mpmd_graphs import add, add_then_colsum, softmax, three_node, three_node_inputs


@pytest.fixture(autouse=True)
def two_threads():
    if runtime.pool().threads < 2:
        runtime.set_num_threads(2)


def _both(module, inputs):
    want = module.run(inputs, parallel_strategy="data_parallel")
    module.last_task_order = None
    got = module.run(inputs, parallel_strategy="mpmd")
    assert module.last_task_order is not None, "the MPMD run fell back to in-order launches"
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g.to_numpy(), w.to_numpy())
    return got


def test_three_node_graph_is_bitwise_the_in_order_run():
    m = pypto.compile(three_node(m=512, k=128, n=512))
    x = three_node_inputs(512, 128, 512)
    (out,) = _both(m, x)
    a, b = x["a"].astype(np.float32), x["b"].astype(np.float32)
    y = a @ b + x["bias"]
    y = 0.5 * y * (1 + np.tanh(0.7978845608 * (y + 0.044715 * y ** 3)))
    e = np.exp(y - y.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out.to_numpy(), e / e.sum(axis=1, keepdims=True), rtol=2e-3,
                               atol=1e-5)


def test_a_consumer_tile_starts_before_its_producer_node_has_finished():
    m = pypto.compile(three_node(m=512, k=128, n=512))
    m.run(three_node_inputs(512, 128, 512), parallel_strategy="mpmd")
    order = m.last_task_order
    mm_step = m.steps[0]
    last_mm_end = max(k for k, (what, t) in enumerate(order)
                      if what == "end" and t.step is mm_step)
    first_gelu = min(k for k, (what, t) in enumerate(order)
                     if what == "start" and t.step is m.steps[1])
    assert first_gelu < last_mm_end
    # and no task ever starts before every task it depends on has ended
    ended = set()
    for what, t in order:
        if what == "start":
            assert set(t.deps) <= ended, t
        else:
            ended.add(t.index)


@pytest.mark.heavy
def test_reductions_broadcasts_grid_stride_and_two_outputs_match_in_order():
    rng = np.random.default_rng(1)
    g = add_then_colsum(rows=96, cols=160, tile=(16, 32), out_tile=64)
    m = pypto.compile(g)
    x = {"input0": rng.standard_normal((96, 160)).astype(np.float32),
         "input1": rng.standard_normal((96, 160)).astype(np.float32)}
    x = dict(zip(m.input_names, x.values()))
    (out,) = _both(m, x)
    np.testing.assert_allclose(out.to_numpy(), (x[m.input_names[0]] + x[m.input_names[1]])
                               .sum(axis=0, keepdims=True), rtol=1e-5, atol=1e-4)

    g = pypto.TensorGraph(name="two")
    p = g.placeholder((4096, 64), pypto.float32)
    q = g.placeholder((1, 64), pypto.float32)
    s = pypto.tile_map(add, [p, q], tile_size=(8, 64),        # stride form, broadcast q
                       parallel_strategy="grid_stride")
    pypto.tile_map(softmax, [s], tile_size=(32, 64), name="sm")
    pypto.tile_map(add, [s, s], tile_size=(64, 64), name="twice")
    m = pypto.compile(g)
    assert m.steps[0].form == "stride"
    x = {"p": rng.standard_normal((4096, 64)).astype(np.float32),
         "q": rng.standard_normal((1, 64)).astype(np.float32)}
    sm, twice = _both(m, x)
    np.testing.assert_array_equal(twice.to_numpy(), (x["p"] + x["q"]) * 2)


def test_arrays_unlike_the_compiled_layout_fall_back_to_in_order_launches():
    m = pypto.compile(three_node(m=256, k=128, n=256))
    x = three_node_inputs(256, 128, 256)
    want = m.run(x, parallel_strategy="data_parallel").to_numpy()
    wide = np.zeros((256, 256), np.float16)
    wide[:, :128] = x["a"]
    x["a"] = wide[:, :128]                  # strided: the kernels were compiled contiguous
    m.last_task_order = None
    got = m.run(x, parallel_strategy="mpmd").to_numpy()
    assert m.last_task_order is None
    np.testing.assert_array_equal(got, want)


def test_strategy_errors_name_the_argument():
    m = pypto.compile(three_node(m=256, k=128, n=256))
    with pytest.raises(ValueError, match="Module.run: parallel_strategy must be one of"):
        m.run(three_node_inputs(256, 128, 256), parallel_strategy="model_parallel")
    with pytest.raises(ValueError, match="pypto.compile: parallel_strategy"):
        pypto.compile(three_node(m=256, k=128, n=256), parallel_strategy="fast")


@pytest.mark.heavy
def test_kernel_nodes_run_as_tasks_and_out_arrays_are_written():
    """conv2d's kernel nodes (NCHW in and out: four steps, opaque to the tilings) under MPMD,
    into caller-given output arrays as pypto.register_op passes them."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 5, 8, 8)).astype(np.float32)
    wt = rng.standard_normal((7, 5, 3, 3)).astype(np.float32)
    g = pypto.TensorGraph(name="conv")
    xin = g.placeholder(x.shape, pypto.float32)
    win = g.placeholder(wt.shape, pypto.float32)
    pypto.conv2d(xin, win, padding=1, output_layout="NCHW", name="c1")
    m = pypto.compile(g)
    assert len(m.steps) == 4
    eg = m.execution_graph
    last = eg.tasks_of(m.steps[-1])
    assert all(set(t.deps) == {p.index for p in eg.tasks_of(m.steps[-2])} for t in last)
    want = m.run({"xin": x, "win": wt}, parallel_strategy="data_parallel").to_numpy()
    out = np.full(want.shape, np.nan, np.float32)
    m.last_task_order = None
    got = m.run({"xin": x, "win": wt}, out=out, parallel_strategy="mpmd")
    assert m.last_task_order is not None
    np.testing.assert_array_equal(out, want)
    assert np.shares_memory(got.to_numpy() if hasattr(got, "to_numpy") else got, out)


def test_auto_times_both_ways_on_the_host_and_keeps_the_faster():
    from pypto.graph.mpmd_run import HostChoice
    m = pypto.compile(three_node(m=256, k=128, n=256))
    x = three_node_inputs(256, 128, 256)
    want = m.run(x, parallel_strategy="data_parallel").to_numpy()
    seen = []
    for _ in range(2 * HostChoice.TRIALS + 2):
        m.last_task_order = None
        np.testing.assert_array_equal(m.run(x).to_numpy(), want)
        seen.append("mpmd" if m.last_task_order is not None else "data_parallel")
    trials = 2 * HostChoice.TRIALS
    assert sorted(seen[:trials]) == ["data_parallel"] * 3 + ["mpmd"] * 3
    choice = m._host_choice
    median = {s: sorted(t)[1] for s, t in choice.times.items()}
    assert choice.choice == min(median, key=median.get) == m.host_strategy
    assert seen[trials:] == [choice.choice] * 2
