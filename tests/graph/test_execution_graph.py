"""The Execution Graph (graph/execution.py): tasks per block, tile-level edges, printing, dot."""
import pypto

from .mpmd_graphs import add_then_colsum, three_node


def _deps(module, step_index):
    """{task label: set of labels it waits for} of one step."""
    eg = module.execution_graph
    step = module.steps[step_index]
    return {t.label: {eg.tasks[d].label for d in t.deps} for t in eg.tasks_of(step)}


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

    y = pypto.tile_map(twice, [x], tile_size=(8, 64))       # 512 tiles > 4 per core: stride
    pypto.tile_map(plus1, [y], tile_size=(64, 64), name="p")
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
