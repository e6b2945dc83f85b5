"""A graph node computed by a kernel written for it (not a ``tile_map`` of a tile op).

``pypto.conv2d`` adds such nodes: the implicit-GEMM kernel and the layout conversions around
it. Each carries its ``@pypto.jit`` source (written like ``codegen``'s, so it compiles,
caches, profiles and interprets as any graph kernel), its grid, and ``views``: how the graph
tensors' arrays are handed to the kernel (zero-copy reshapes or strided views, since kernels
see rank-2 tensors). Such a node is never fused with its neighbours.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .graph import GraphTensor
from .naming import unique_name


@dataclass(eq=False)
class KernelNode:
    """``output = kernel(*views(inputs, output))`` launched over ``grid``."""
    name: str
    inputs: list
    fn_name: str                # the kernel function's name: graph name + node name
    source: str                 # defines ``fn_name``
    grid: tuple
    views: object               # (list of input arrays, output array) -> kernel arguments
    role: str                   # what the node does, shown by tile_graph_ir
    uses_cube: bool = False
    output: GraphTensor = None
    scope: dict = field(default_factory=dict)
    # the output tile block (i, j) writes, (i, j) = (pid0, pid1), when each block writes one
    # tile of the output: the Execution Graph then gives its readers tile-level edges
    tile: tuple | None = None

    fusible = False
    strategy = "kernel"

    @property
    def outputs(self) -> list:
        return [self.output]

    @property
    def tiling(self):
        return self           # plan.Group asks a node's tiling about the cube and sync

    cross_block = False


def add_node(graph, name, inputs, shape, dtype, layout, source_fn, grid, views, role,
             uses_cube=False, tile=None) -> GraphTensor:
    """Add a kernel node producing a ``shape``/``dtype`` tensor in ``layout``.
    ``source_fn(kernel_name)`` returns the kernel's source. ``tile``: the output tile each
    block (pid0, pid1) writes, if it writes exactly one (``grid`` must be the tile grid)."""
    if tile is not None:
        want = tuple(-(-n // e) for n, e in zip(shape, tile))
        if len(tile) != len(shape) or tuple(grid) != want:
            raise ValueError(f"kernel node {name!r}: tile={tile} of a {tuple(shape)} output "
                             f"needs grid {want}, got {tuple(grid)}")
    name = unique_name(name, graph.names())
    fn_name = _identifier(f"{graph.name}_{name}")[:60]
    node = KernelNode(name, list(inputs), fn_name, source_fn(fn_name), tuple(grid), views,
                      role, uses_cube, tile=None if tile is None else tuple(tile))
    node.output = GraphTensor(graph, name, tuple(shape), dtype, layout, node)
    graph.add_node(node)
    return node.output


def _identifier(name: str) -> str:
    ident = re.sub(r"\W", "_", name)
    return ident if ident[0].isalpha() else f"k_{ident}"
