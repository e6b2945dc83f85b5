"""``tile_map(..., tile_size="auto")``: the tile size (and, under ``parallel_strategy="auto"``,
the launch form) that the cycle model ranks fastest for this node on the current target.

Each candidate is compiled as the node alone (a graph of its inputs and one tile_map) and the
modelled NPU time of its kernels summed; candidates that do not tile (an axis the op
combines would be cut) or do not compile (a buffer overflows) are skipped with the reason,
as the jit autotuner does. The sweep is remembered per tile op source, input shapes and
dtypes, strategy and target, in memory and on disk (``tuning.results``). The graph's, like
``launch_form``: it builds graphs, and the tuner sits below the graph.
"""
from __future__ import annotations

from ..compiler.ir import TileType
from ..runtime.device import current_target
from ..runtime.kernel import __version__
from ..tuning import results
from ..tuning.report import TuningReport, compiling, sweep
from .graph import TensorGraph
from .launch_form import kernel_time_ms
from .module import compile as compile_graph
from .tile_map import tile_map
from .trace import trace

ELEMENTS = (256, 512, 1024, 2048, 4096, 8192, 16384)   # tile sizes tried, in elements
FORMS = ("data_parallel", "grid_stride")
_MEMO: dict = {}


def candidates(out_shape: tuple) -> list:
    """Tile sizes to try: for a vector, powers of two up to its length (and the whole of a
    short one); for a matrix, whole rows in several counts, then square tiles."""
    if len(out_shape) == 1:
        n = out_shape[0]
        return sorted({min(e, n) for e in ELEMENTS})
    m, n = out_shape
    rows = sorted({max(1, min(m, e // n)) for e in ELEMENTS})
    return [(r, n) for r in rows] + [(min(m, s), min(n, s)) for s in (16, 32, 64, 128)]


def tune(op, inputs, strategy, input_tiles=None, out_shape=None):
    """(tile_size, strategy, TuningReport) for ``tile_map(op, inputs, "auto", strategy)``."""
    target = current_target()
    shape = out_shape
    if shape is None:
        shape = trace(op, [TileType(t.dtype, t.shape) for t in inputs],
                      f"while finding the output shape of {op.__name__} to choose its "
                      "tile size").result.type.shape
    forms = FORMS if strategy == "auto" else (strategy,)
    points = [(tuple(t) if isinstance(t, tuple) else t, f) for t in candidates(tuple(shape))
              for f in forms]
    signature = ([(t.shape, str(t.dtype)) for t in inputs], strategy, input_tiles, out_shape,
                 target.name)
    digest = results.entry_digest((op.source_hash(), repr(signature), repr(points),
                                   __version__))
    key = ", ".join(f"{t.name}{list(t.shape)}" for t in inputs)
    fields = dict(kernel=f"tile_map({op.__name__})", key=key, objective="npu",
                  target=target.name)
    data, cached = results.memoised(
        _MEMO, digest, lambda: _sweep(op, inputs, points, input_tiles, out_shape, target, fields),
        lambda d: 0 <= d.get("winner", -1) < len(points))
    report = TuningReport.from_json(data, cached=cached, **fields)
    tile, form = points[report.winner]
    return tile, form, report


def _sweep(op, inputs, points, input_tiles, out_shape, target, fields) -> dict:
    report = sweep(points, lambda p: f"tile_size={p[0]}, {p[1]}",
                   lambda p, spent: _node_time(op, inputs, *p, input_tiles, out_shape, target,
                                               spent),
                   f"tile_map({op.__name__}, tile_size='auto'): no tile size works for "
                   f"{fields['key']}", fields)
    return {**report.to_json(), "kernel": fields["kernel"]}


def _node_time(op, inputs, tile, form, input_tiles, out_shape, target, spent) -> float:
    """Modelled NPU time of the node alone, tiled by ``tile`` and launched as ``form``
    (the seconds spent compiling it added to ``spent["compile"]``)."""
    graph = TensorGraph(f"{op.__name__}_tuning")
    placeholders = {}              # one per distinct input: tile_map(op, [a, a]) reads a twice
    for t in inputs:
        if id(t) not in placeholders:
            placeholders[id(t)] = graph.placeholder(t.shape, t.dtype, name=t.name)
    with compiling(spent):
        tile_map(op, [placeholders[id(t)] for t in inputs], tile, form, input_tiles=input_tiles,
                 out_shape=out_shape)
        module = compile_graph(graph, target=target.name)
    return sum(kernel_time_ms(kernel) for kernel in module.kernels)
