"""The seed's graph API: a front end that writes ``@pypto.jit`` kernels.

``TensorGraph`` and ``placeholder`` declare inputs; ``@tile_op`` marks a function of tiles;
``tile_map`` adds a node that applies it to every output tile (``tiling`` decides how each
input is cut); ``compile`` generates one jit kernel per node or fused chain (``plan``,
``codegen``) and compiles it; ``Module.run`` launches them. Nothing here compiles code by
itself: every kernel goes through the ordinary jit frontend, passes and backend.
"""
from .graph import (GraphTensor, TensorGraph, get_default_graph, placeholder,
                    reset_default_graph)
from .module import OPTIONS, Module, compile  # noqa: A004 - the seed's pypto.compile
from .tile_map import STRATEGIES, tile_map
from .tile_op import TileOp, tile_op
from .ascend_c_node import call_ascend_c
from .convolution import conv2d

__all__ = ["TensorGraph", "GraphTensor", "placeholder", "get_default_graph",
           "reset_default_graph", "tile_op", "TileOp", "tile_map", "compile", "Module",
           "OPTIONS", "STRATEGIES", "call_ascend_c", "conv2d"]
