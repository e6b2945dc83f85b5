"""parallel_strategy="auto" with a given tile size: the launch form is the tuner's, the one
the cycle model itself ranks fastest; the tile-count rule only with the tuner off."""
import numpy as np
import pytest

import pypto
from pypto.graph.plan import AUTO_TILES_PER_CORE
from pypto.graph.launch_form import kernel_time_ms


@pypto.tile_op
def axpy(a, b):
    return a * 2.5 + b


def _compiled(n, tile, strategy="auto", **options):
    g = pypto.TensorGraph("form_axpy")
    a = g.placeholder((n,), pypto.float32, name="a")
    b = g.placeholder((n,), pypto.float32, name="b")
    pypto.tile_map(axpy, [a, b], tile_size=tile, parallel_strategy=strategy)
    return pypto.compile(g, options=options or None)


@pytest.mark.parametrize("n, tile", [(48 * 1024 + 5, 256), (48 * 2 * 512, 512), (3000, 1024)])
def test_auto_launches_the_form_the_model_ranks_fastest(fresh_cache, n, tile):
    (kernel,) = _compiled(n, tile).kernels
    modelled = {s: kernel_time_ms(_compiled(n, tile, s).kernels[0])
                for s in ("data_parallel", "grid_stride")}
    chosen = {"tile": "data_parallel", "stride": "grid_stride"}[kernel.form]
    assert chosen == min(modelled, key=modelled.get)
    times = {t.config.split(",")[0]: t.time_ms for t in kernel.tuning.trials}
    assert times == pytest.approx(modelled, rel=1e-9)
    a, b = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
    out = _compiled(n, tile).run({"a": a, "b": b}).to_numpy()
    np.testing.assert_array_equal(out, a * np.float32(2.5) + b)
    assert _compiled(n, tile).kernels[0].tuning.cached


def test_the_rule_only_with_the_tuner_off(fresh_cache):
    n, tile = 48 * 1024 + 5, 256                   # 193 tiles > 4 per core: the rule's stride
    assert -(-n // tile) > AUTO_TILES_PER_CORE * 48
    (kernel,) = _compiled(n, tile, autotune=False).kernels
    assert (kernel.form, kernel.grid, kernel.tuning) == ("stride", (48,), None)
    (fixed,) = _compiled(n, tile, "data_parallel").kernels
    assert fixed.form == "tile" and fixed.tuning is None      # a fixed strategy is not tuned


def test_a_changed_tile_op_is_ranked_again(fresh_cache):
    """The kernel's source calls the tile op by name: its own source is in the key too."""
    def compiled(op):
        g = pypto.TensorGraph("form_changed")
        a = g.placeholder((48 * 1024,), pypto.float32, name="a")
        pypto.tile_map(op, [a, a], tile_size=512)
        return pypto.compile(g).kernels[0]

    @pypto.tile_op
    def op(a, b):
        return a + b

    first = compiled(op)

    @pypto.tile_op
    def op(a, b):  # noqa: F811 - the same name, another body
        return a * b

    assert not first.tuning.cached and not compiled(op).tuning.cached
