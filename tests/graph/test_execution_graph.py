"""The Execution Graph (graph/execution.py): tasks per block, tile-level edges, printing, dot."""
import pytest

import pypto
from pypto.runtime.specialize import spec_key, specialise

from .mpmd_graphs import add, add_then_colsum, three_node


def _deps(module, step_index):
    """{task label: set of labels it waits for} of one step."""
    eg = module.execution_graph
    step = module.steps[step_index]
    return {t.label: {eg.tasks[d].label for d in t.deps} for t in eg.tasks_of(step)}


@pytest.mark.heavy
def test_consumer_tiles_wait_only_for_the_producer_tiles_they_read():
    m = pypto.compile(three_node(m=256, k=128, n=256, vt=(32, 256), st=(16, 256)))
    eg = m.execution_graph
    assert [len(eg.tasks_of(s)) for s in m.steps] == [4, 8, 16]
    gelu = _deps(m, 1)
    # a (32, 256) row band reads both column tiles of the (128, 128) matmul tile row above it
    for i in range(8):
        r = i // 4
        assert gelu[f"three_bias_gelu[tile {i},0]"] == {f"three_mm[tile {r},0]",
                                                        f"three_mm[tile {r},1]"}
    soft = _deps(m, 2)
    for i in range(16):
        assert soft[f"three_softmax[tile {i},0]"] == {f"three_bias_gelu[tile {i // 2},0]"}
    assert len(eg.edges) == 8 * 2 + 16


def test_a_reduction_over_a_whole_axis_waits_for_every_tile_along_it():
    m = pypto.compile(add_then_colsum(rows=64, cols=128, tile=(16, 32), out_tile=64))
    deps = _deps(m, 1)
    assert set(deps) == {"g_colsum[tile 0,0]", "g_colsum[tile 0,1]"}
    # output columns 0..63 of the column sum read every row band of columns 0..63
    assert deps["g_colsum[tile 0,0]"] == {f"g_add[tile {i},{j}]" for i in range(4)
                                           for j in range(2)}
    assert deps["g_colsum[tile 0,1]"] == {f"g_add[tile {i},{j}]" for i in range(4)
                                           for j in range(2, 4)}


def test_grid_stride_blocks_hold_their_runs_of_tiles():
    g = pypto.TensorGraph(name="many")
    x = g.placeholder((4096, 64), pypto.float32)

    @pypto.tile_op
    def twice(t):
        return t * 2.0

    @pypto.tile_op
    def plus1(t):
        return t + 1.0

    y = pypto.tile_map(twice, [x], tile_size=(8, 64), parallel_strategy="grid_stride")
    pypto.tile_map(plus1, [y], tile_size=(64, 64), name="p", parallel_strategy="data_parallel")
    m = pypto.compile(g, options={"tile_fusion": False})
    first, second = m.steps
    assert first.form == "stride" and second.form == "tile"
    eg = m.execution_graph
    tasks = eg.tasks_of(first)
    assert len(tasks) == 48 and sum(len(t.tiles) for t in tasks) == 512
    # each (64, 64) tile of the second node reads 8 producer tiles, held by one or two blocks
    for t in eg.tasks_of(second):
        (i, _), = t.tiles
        want = {b.index for b in tasks if any(8 * i <= r < 8 * i + 8 for r, _ in b.tiles)}
        assert set(t.deps) == want


def test_a_grid_stride_block_without_tiles_is_labelled_and_modelled():
    """64 tiles on 48 blocks: runs of 2, so blocks 32..47 have none (their label indexed an
    empty tuple and every report of the graph failed)."""
    g = pypto.TensorGraph(name="idle_blocks")
    x = g.placeholder((64 * 256,), pypto.float32)
    pypto.tile_map(add, [x, x], tile_size=256, parallel_strategy="grid_stride")
    m = pypto.compile(g)
    tasks = m.execution_graph.tasks_of(m.steps[0])
    assert [len(t.tiles) for t in tasks] == [2] * 32 + [0] * 16
    assert tasks[-1].label.endswith("[block 47, no tiles]")
    assert m.model("mpmd").time_us > 0


def test_levels_print_and_the_dot_export_names_every_task_and_edge():
    m = pypto.compile(three_node(m=256, k=128, n=256, vt=(32, 256), st=(16, 256)))
    text = m.levels()
    for head in ('tensor graph "three"', 'tile graph "three"', 'block graph "three"',
                 'execution graph "three": 28 task(s), 32 edge(s)'):
        assert head in text
    dot = m.execution_graph.to_dot()
    assert dot.startswith('digraph "three"') and dot.rstrip().endswith("}")
    assert dot.count(" -> ") == 32
    assert dot.count("shape=box") == 4 and dot.count("shape=ellipse") == 24


# -- the edges against what the kernels really load and store ----------------------------------

class _Accesses:
    """A stand-in for sanitizer.Watch: every load and store, per linear block number."""

    def __init__(self, grid):
        self.grid = grid
        self.seen = []          # (what, block, id(tensor), offsets, shape)

    def access(self, what, op, pid, tensor, offsets, shape, atomic=None, layout=None):
        g0, g1, _ = self.grid
        block = int(pid[0]) + g0 * (int(pid[1]) + g1 * int(pid[2]))
        self.seen.append((what, block, id(tensor), [int(o) for o in offsets], tuple(shape)))


def _interpret(step, args):
    """Run a graph kernel in the reference interpreter; its accesses."""
    from pypto.compiler.ast_to_ir import build_function
    from pypto.backends.interpreter.run import run_function
    jitfn = step.jit
    bound = jitfn._bind(step.arguments(args[:-1], args[-1:]), {})
    spec_args, _, params = specialise(jitfn, spec_key(jitfn, bound), bound)
    fn = build_function(jitfn.source, spec_args, jitfn.source.node.name)
    grid = tuple(step.grid) + (1,) * (3 - len(step.grid))
    rec = _Accesses(grid)
    run_function(fn, {n: bound[n] for n, _, _ in params}, grid, rec)
    return rec.seen


def _window(arr, offsets, shape):
    return tuple(slice(max(o, 0), min(o + s, n)) for o, s, n in zip(offsets, shape, arr.shape))


def _true_deps(module):
    """{task index: producer task indices} from the kernels' own loads and stores, run in the
    interpreter: each element of an intermediate is owned by the block that stored it."""
    import numpy as np
    eg = module.execution_graph
    arrays = {id(t): np.zeros(t.shape, t.dtype.to_numpy()) for t in module.placeholders}
    owner = {}
    deps = {}
    for step in module.steps:
        out = np.zeros(step.output.shape, step.output.dtype.to_numpy())
        args = [arrays[id(t)] for t in step.params] + [out]
        task_of = {t.block: t.index for t in eg.tasks_of(step)}
        mine = np.full(out.shape, -1, np.int64)
        for what, block, tensor, offsets, shape in _interpret(step, args):
            if what == "store" and tensor == id(out):
                mine[_window(out, offsets, shape)] = task_of[block]
            elif what == "load" and tensor in owner:
                arr, who = owner[tensor]
                got = who[_window(arr, offsets, shape)]
                deps.setdefault(task_of[block], set()).update(int(v) for v in got.ravel())
        arrays[id(step.output)] = out
        owner[id(out)] = (out, mine)
    return deps


@pytest.mark.parametrize("build", [
    pytest.param(lambda: three_node(m=192, k=64, n=256, mt=(64, 128), vt=(32, 128),
                                    st=(16, 256)), marks=pytest.mark.heavy),
    lambda: add_then_colsum(rows=40, cols=96, tile=(16, 32), out_tile=48),
    lambda: _stride_graph(),
], ids=["matmul-gelu-softmax", "ragged-colsum", "grid-stride-broadcast"])
def test_edges_are_exactly_the_producer_tasks_whose_stores_a_task_loads(build):
    module = pypto.compile(build(), options={"tile_fusion": False})
    truth = _true_deps(module)
    for t in module.execution_graph.tasks:
        assert set(t.deps) == truth.get(t.index, set()), t


def _stride_graph():
    g = pypto.TensorGraph(name="st")
    x = g.placeholder((1000, 32), pypto.float32)
    b = g.placeholder((1, 32), pypto.float32)
    s = pypto.tile_map(add, [x, b], tile_size=(4, 32))          # 250 tiles: grid-stride
    pypto.tile_map(add, [s, s], tile_size=(96, 32), name="again")
    return g
