"""``pypto.tile_map``: add a node that applies a tile op to every tile of its output.

The node is checked and tiled here, when the user writes it (``tiling.decide`` traces the tile
op), so a bad mapping is reported at the ``tile_map`` line rather than at compile time. The
returned graph tensor can feed further tile_maps.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import CompilationError, compiler_frames_wanted
from ..runtime.jit import JITFunction
from .graph import GraphTensor
from .naming import unique_name
from .tile_op import TileOp
from .tiling import Tiling, decide

# parallel_strategy values: "auto" launches the kernel in whichever of the other two the cycle
# model ranks fastest (graph/launch_form.py; with the tuner off, plan.choose_form's
# tile-count rule); "data_parallel" launches one block per tile;
# "grid_stride" launches at most one block per core, each looping over tiles.
STRATEGIES = ("auto", "data_parallel", "grid_stride")


@dataclass(eq=False)
class Node:
    """One tile_map: ``output = tile_map(op, inputs, tile_size)``, tiled by ``tiling``."""
    name: str
    op: TileOp
    inputs: list
    tile_size: object
    strategy: str
    tiling: Tiling
    output: GraphTensor = None
    tuning: object = None          # the TuningReport of tile_size="auto"

    @property
    def outputs(self) -> list:
        return [self.output]


def tile_map(tile_op, inputs, tile_size, parallel_strategy="auto", *, input_tiles=None,
             out_shape=None, name=None) -> GraphTensor:
    """Apply ``tile_op`` to every output tile of ``tile_size`` (an int for 1-D outputs, a tuple
    for 2-D, or "auto": the size the cycle model ranks fastest on the current target,
    ``graph/autotile.py``; under ``parallel_strategy="auto"`` the launch form too). Each
    input is cut as ``tiling.decide`` says (``input_tiles=``/``out_shape=`` override it);
    returns the output as a graph tensor of the inputs' graph."""
    op = _check_op(tile_op)
    inputs = _check_inputs(inputs, op)
    graph = inputs[0].graph
    strategy = _check_strategy(parallel_strategy)
    name = _node_name(name, op, graph)
    tuning = None
    try:
        if isinstance(tile_size, str):
            tile_size, strategy, tuning = _tuned(tile_size, op, inputs, strategy, input_tiles,
                                                 out_shape)
        tiling = decide(op, inputs, tile_size, input_tiles, out_shape)
    except CompilationError as e:
        if not compiler_frames_wanted():
            raise e.with_traceback(None) from None     # the user's frames, not ours
        raise
    node = Node(name, op, list(inputs), tile_size, strategy, tiling, tuning=tuning)
    node.output = GraphTensor(graph, name, tiling.out_shape, tiling.out_dtype, "ND", node)
    graph.add_node(node)
    return node.output


def _tuned(tile_size, op, inputs, strategy, input_tiles, out_shape):
    if tile_size != "auto":
        raise ValueError(f"tile_map(tile_size={tile_size!r}): a tile size is an int, a tuple "
                         "of ints, or \"auto\" (tuned by the cycle model)")
    from .autotile import tune  # lazy: autotile builds one-node graphs with tile_map
    return tune(op, inputs, strategy, input_tiles, out_shape)


def _check_op(tile_op) -> TileOp:
    if isinstance(tile_op, TileOp):
        return tile_op
    if isinstance(tile_op, JITFunction) or callable(tile_op):
        what = getattr(tile_op, "__name__", type(tile_op).__name__)
        raise TypeError(f"tile_map(tile_op=...): {what} is not a tile op; decorate it with "
                        "@pypto.tile_op")
    raise TypeError(f"tile_map(tile_op=...) must be a @pypto.tile_op function, got "
                    f"{type(tile_op).__name__}")


def _check_inputs(inputs, op) -> list:
    if isinstance(inputs, GraphTensor):
        inputs = [inputs]
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise TypeError(f"tile_map(inputs=...) must be a non-empty list of graph tensors "
                        f"(placeholders or tile_map outputs), got {inputs!r:.80}")
    for i, t in enumerate(inputs):
        if not isinstance(t, GraphTensor):
            raise TypeError(f"tile_map(inputs=...): inputs[{i}] is a {type(t).__name__}, not a "
                            "graph tensor; create inputs with graph.placeholder(...)")
        if t.graph is not inputs[0].graph:
            raise ValueError(f"tile_map(inputs=...): inputs[{i}] ({t.name!r}) belongs to "
                             f"graph {t.graph.name!r}, inputs[0] to {inputs[0].graph.name!r}; "
                             "a node's inputs must come from one graph")
    params = op.tile_params
    if len(inputs) != len(params):
        raise TypeError(f"tile_map(inputs=...): {op.__name__} takes {len(params)} tile(s) "
                        f"({', '.join(params)}), got {len(inputs)} input(s)")
    return list(inputs)


def _check_strategy(strategy) -> str:
    if strategy in STRATEGIES:
        return strategy
    extra = ""
    if strategy == "model_parallel":
        extra = ("; model parallelism splits a model across devices, and one tile_map on the "
                 "one simulated device has nothing to split")
    raise ValueError(f"tile_map(parallel_strategy={strategy!r}): accepted values are "
                     f"{', '.join(map(repr, STRATEGIES))}{extra}")


def _node_name(name, op, graph) -> str:
    taken = graph.names()
    if name is not None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"tile_map(name=...) must be a non-empty string, got {name!r}")
        if name in taken:
            raise ValueError(f"tile_map(name={name!r}): graph {graph.name!r} already has a "
                             f"tensor named {name!r}")
        return name
    return unique_name(op.__name__, taken)
