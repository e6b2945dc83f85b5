"""The tensor graph: placeholders (inputs given at run time) and the tile_map nodes over them.

A ``TensorGraph`` holds no data and compiles nothing by itself: it records what the user
declared, in creation order, so ``pypto.compile`` can turn each node into a ``@pypto.jit``
kernel and ``Module.run`` can launch them in dependency order. Creation order is a
topological order, because a node's inputs must exist before ``tile_map`` is called.
"""
from __future__ import annotations

import sys

from ..language import dtypes as dt
from ..layout import LAYOUT_RANKS
from .naming import assigned_name

# The layout is recorded with the placeholder and shown in the tile graph IR; tensors are
# always passed and tiled as their shape says (row-major), and no layout conversion is
# inserted (pypto.layout converts data to and from each layout).
LAYOUTS = LAYOUT_RANKS


class GraphTensor:
    """A tensor of a graph: a placeholder or the output of one tile_map node (``producer``).
    Only its name, shape, dtype and layout are known; data comes with ``Module.run``."""

    def __init__(self, graph, name: str, shape: tuple, dtype, layout: str = "ND",
                 producer=None):
        self.graph = graph
        self.name = name
        self.shape = shape
        self.dtype = dtype
        self.layout = layout
        self.producer = producer

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_placeholder(self) -> bool:
        return self.producer is None

    def __repr__(self) -> str:
        kind = "placeholder" if self.is_placeholder else f"output of {self.producer.name}"
        return (f"<pypto graph tensor {self.name!r}: {self.dtype}{list(self.shape)}, {kind}, "
                f"graph {self.graph.name!r}>")


class TensorGraph:
    """``pypto.TensorGraph(name=...)``: placeholders and nodes (tile_maps, Ascend C calls),
    in creation order."""

    def __init__(self, name: str = "graph"):
        if not isinstance(name, str) or not name:
            raise TypeError(f"TensorGraph(name=...) must be a non-empty string, got {name!r}")
        self.name = name
        self.placeholders: list[GraphTensor] = []
        self.nodes: list = []

    def placeholder(self, shape, dtype, name=None, layout=None) -> GraphTensor:
        """An input of the graph. Without ``name`` it is named after the variable the result
        is assigned to (``input_a = graph.placeholder(...)`` → ``"input_a"``), else
        ``input<i>``; ``Module.run`` takes the inputs by these names."""
        return self._placeholder(shape, dtype, name, layout, sys._getframe(1))

    def _placeholder(self, shape, dtype, name, layout, caller) -> GraphTensor:
        shape = _check_shape(shape)
        try:
            dtype = dt.from_any(dtype)
        except TypeError as e:
            raise TypeError(f"placeholder(dtype=...): {e}") from None
        layout = _check_layout(layout, shape)
        if name is None:
            name = self._free_name(assigned_name(caller))
        elif not isinstance(name, str) or not name:
            raise TypeError(f"placeholder(name=...) must be a non-empty string, got {name!r}")
        elif name in self.names():
            raise ValueError(f"placeholder(name={name!r}): graph {self.name!r} already has a "
                             f"tensor named {name!r}")
        tensor = GraphTensor(self, name, shape, dtype, layout)
        self.placeholders.append(tensor)
        return tensor

    def _free_name(self, inferred: str | None) -> str:
        """The inferred name if it is free, else the first free ``input<i>``."""
        taken = self.names()
        if inferred is not None and inferred not in taken:
            return inferred
        i = len(self.placeholders)
        while f"input{i}" in taken:
            i += 1
        return f"input{i}"

    def names(self) -> set:
        """Every tensor name in use: placeholders and node outputs."""
        return {t.name for t in self.placeholders} | {t.name for n in self.nodes
                                                      for t in n.outputs}

    def add_node(self, node) -> None:
        self.nodes.append(node)

    def consumers(self, tensor: GraphTensor) -> list:
        return [n for n in self.nodes if any(t is tensor for t in n.inputs)]

    def node_outputs(self) -> list[GraphTensor]:
        """Every node's outputs, in creation order (a tile_map has one, an Ascend C call one
        per output parameter)."""
        return [t for n in self.nodes for t in n.outputs]

    @property
    def inputs(self) -> list[GraphTensor]:
        return list(self.placeholders)

    @property
    def outputs(self) -> list[GraphTensor]:
        """Node outputs no other node reads, in creation order: what ``Module.run`` returns."""
        return [t for t in self.node_outputs() if not self.consumers(t)]

    def __repr__(self) -> str:
        return (f"<pypto.TensorGraph {self.name!r}: {len(self.placeholders)} placeholder(s), "
                f"{len(self.nodes)} node(s)>")


_default: list[TensorGraph] = []


def get_default_graph() -> TensorGraph:
    """The graph ``pypto.placeholder`` adds to (created on first use)."""
    if not _default:
        _default.append(TensorGraph(name="default"))
    return _default[0]


def reset_default_graph() -> TensorGraph:
    """Start a fresh default graph (the old one keeps its placeholders and nodes)."""
    _default.clear()
    return get_default_graph()


def placeholder(shape, dtype, name=None, layout=None) -> GraphTensor:
    """``pypto.placeholder(...)``: a placeholder of the default graph."""
    return get_default_graph()._placeholder(shape, dtype, name, layout, sys._getframe(1))


def _check_shape(shape) -> tuple:
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not shape or not all(
            isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape):
        raise ValueError(f"placeholder(shape=...) must be a non-empty tuple of positive ints, "
                         f"got {shape!r}")
    return tuple(int(s) for s in shape)


def _check_layout(layout, shape) -> str:
    layout = "ND" if layout is None else layout
    if not isinstance(layout, str) or layout.upper() not in LAYOUTS:
        raise ValueError(f"placeholder(layout=...) must be one of {', '.join(LAYOUTS)}, got "
                         f"{layout!r}")
    layout = layout.upper()
    rank = LAYOUTS[layout]
    if rank is not None and len(shape) != rank:
        raise ValueError(f"placeholder(layout={layout!r}) needs a rank-{rank} shape, got "
                         f"{shape}")
    if layout == "NZ" and len(shape) < 4:
        raise ValueError(f"placeholder(layout='NZ') needs a (..., N1, M1, 16, C0) shape, got "
                         f"{shape}")
    return layout
