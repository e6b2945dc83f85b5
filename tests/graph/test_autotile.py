"""tile_map(..., tile_size="auto"): the graph API's tile size chosen by the same tuner."""
import numpy as np
import pytest

import pypto
from pypto.graph.autotile import candidates


@pypto.tile_op
def softmax(t):
    e = pypto.exp(t - pypto.max(t, axis=1, keepdims=True))
    return e / pypto.sum(e, axis=1, keepdims=True)


@pypto.tile_op
def axpy(a, b):
    return a * 2.0 + b


def test_auto_picks_the_fastest_modelled_candidate_and_runs(fresh_cache):
    g = pypto.TensorGraph("auto_softmax")
    x = g.placeholder((512, 300), pypto.float32, name="x")
    out = pypto.tile_map(softmax, [x], tile_size="auto")
    node = out.producer
    report = node.tuning
    times = {t.config: t.time_ms for t in report.trials if t.skipped is None}
    assert report.best.config == min(times, key=times.get)
    assert report.best.config == f"tile_size={node.tiling.tile}, {node.strategy}"
    assert any("combines the elements" in (t.skipped or "") for t in report.trials)
    data = np.random.rand(512, 300).astype(np.float32)
    result = np.asarray(pypto.compile(g).run({"x": data}).to_numpy())
    e = np.exp(data - data.max(1, keepdims=True))
    np.testing.assert_allclose(result, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_a_fixed_strategy_is_kept_and_results_are_remembered(fresh_cache):
    def build():
        g = pypto.TensorGraph("auto_axpy")
        a = g.placeholder((100_000,), pypto.float32, name="a")
        b = g.placeholder((100_000,), pypto.float32, name="b")
        return pypto.tile_map(axpy, [a, b], tile_size="auto", parallel_strategy="data_parallel")

    first = build().producer
    assert first.strategy == "data_parallel"
    assert {t.config.split(", ")[1] for t in first.tuning.trials} == {"data_parallel"}
    assert build().producer.tuning.cached


def test_an_input_read_twice_is_one_placeholder_of_the_tuning_graph(fresh_cache):
    g = pypto.TensorGraph("auto_twice")
    a = g.placeholder((3000,), pypto.float32, name="a")
    out = pypto.tile_map(axpy, [a, a], tile_size="auto", parallel_strategy="data_parallel")
    assert all(t.skipped is None for t in out.producer.tuning.trials)
    data = np.random.rand(3000).astype(np.float32)
    np.testing.assert_allclose(pypto.compile(g).run({"a": data}).to_numpy(), data * 3.0,
                               rtol=1e-6)


def test_the_sweep_has_the_autotuners_progress_bar_and_switch(fresh_cache, monkeypatch, capsys):
    def sweep(n):
        g = pypto.TensorGraph("auto_progress")
        a = g.placeholder((n,), pypto.float32, name="a")
        b = g.placeholder((n,), pypto.float32, name="b")
        pypto.tile_map(axpy, [a, b], tile_size="auto", parallel_strategy="data_parallel")

    monkeypatch.setenv("PYPTO_PROGRESS", "1")
    sweep(3100)
    assert "autotune tile_map(axpy): " in capsys.readouterr().err        # tqdm's bar
    monkeypatch.setenv("PYPTO_PROGRESS", "0")
    sweep(5100)
    assert "autotune tile_map(axpy)" not in capsys.readouterr().err


def test_candidates_and_bad_values():
    assert candidates((300,)) == [256, 300]
    assert (4, 1024) in candidates((4096, 1024)) and (16, 16) in candidates((64, 64))
    g = pypto.TensorGraph("bad_auto")
    a = g.placeholder((64,), pypto.float32, name="a")
    with pytest.raises(ValueError, match="or \"auto\""):
        pypto.tile_map(axpy, [a, a], tile_size="best")
