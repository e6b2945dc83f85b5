"""``pypto.call_ascend_c(op, inputs)``: run a declared Ascend C kernel on arrays now
(``AscendCKernel.run``), or, on graph tensors, add it to their graph as a node. It is the
graph's because graph tensors are (``ascend_c`` sits below the graph).

The node is checked and bound when the user writes it: the inputs' shapes and dtypes against
the kernel's signature, the output rule, the scalars and the grid (shapes are static in a
graph), so a bad call is reported at the ``call_ascend_c`` line. Its outputs are graph tensors
like a tile_map's: they feed tile_maps and further calls. ``pypto.compile`` gives it a launch
step of its own (``plan`` never fuses it; ``compile`` builds its library, so C++ errors come
out there), and ``Module.run`` launches it in dependency order between the generated kernels,
on the memory of the graph's tensors.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ascend_c.kernel import GRAPH_CALL, AscendCKernel
from ..layout import as_array
from .graph import GraphTensor
from .naming import unique_name


def call_ascend_c(op, inputs, **scalars):
    """Run ``op`` on ``inputs``: arrays (numpy, torch CPU, pypto.Tensor) run now and return the
    output(s) as the same kind; graph tensors add a node to their graph and return its output
    graph tensor(s)."""
    if not isinstance(op, AscendCKernel):
        raise TypeError(f"pypto.call_ascend_c(op=...) takes a kernel made by "
                        f"pypto.ascend_c_kernel(source, name, outputs=...), got "
                        f"{type(op).__name__}")
    if not isinstance(inputs, (list, tuple)):
        inputs = [inputs]
    in_graph = [isinstance(x, GraphTensor) for x in inputs]
    if any(in_graph):
        if not all(in_graph):
            k = in_graph.index(False)
            raise TypeError(f"pypto.call_ascend_c({op.name}): inputs[{k}] is a "
                            f"{type(inputs[k]).__name__} among graph tensors; in a graph every "
                            "input is a placeholder or a node's output")
        return add_call(op, list(inputs), scalars)
    return op.run(list(inputs), scalars)


GRAPH_CALL[:] = [call_ascend_c]      # op(*inputs) on graph tensors, too


@dataclass(eq=False)
class AscendCNode:
    """``outputs = call_ascend_c(op, inputs)`` in a graph, with its bound call."""
    name: str
    op: object             # AscendCKernel
    inputs: list
    binding: object        # ascend_c.Binding: output specs, scalars, grid
    outputs: list = field(default_factory=list)
    fusible = False        # not a tile_map: no tiling, a launch step of its own

    @property
    def output(self) -> GraphTensor:
        return self.outputs[0]


@dataclass(eq=False)
class AscendCStep:
    """The launch of one ``AscendCNode`` in a compiled module."""
    name: str
    node: AscendCNode

    @property
    def params(self) -> list:
        return self.node.inputs

    @property
    def outputs(self) -> list:
        return self.node.outputs

    @property
    def grid(self) -> tuple:
        return self.node.binding.grid

    def build(self) -> None:
        self.node.op.build()

    def run(self, inputs: list, outputs: list) -> None:
        """Launch on the graph's tensors (pypto.Tensors or arrays), writing ``outputs``."""
        self.node.op.launch([as_array(x) for x in inputs], [as_array(o) for o in outputs],
                            self.node.binding)


def add_call(op, inputs: list, scalars: dict):
    """Add the node; its output graph tensor, or a tuple of them for several outputs."""
    where = f"pypto.call_ascend_c({op.name})"
    graph = inputs[0].graph
    for k, t in enumerate(inputs):
        if t.graph is not graph:
            raise ValueError(f"{where}: inputs[{k}] ({t.name!r}) belongs to graph "
                             f"{t.graph.name!r}, inputs[0] to {graph.name!r}; a node's inputs "
                             "must come from one graph")
    specs = op.check_inputs([(t.shape, t.dtype) for t in inputs], where)
    binding = op.bind(specs, scalars, where)
    name = unique_name(op.name, graph.names())
    node = AscendCNode(name, op, list(inputs), binding)
    single = len(binding.outputs) == 1
    taken = graph.names() | {name}
    for spec in binding.outputs:
        out_name = name if single else unique_name(f"{name}_{spec.name}", taken)
        taken.add(out_name)
        node.outputs.append(GraphTensor(graph, out_name, spec.shape, spec.dtype, "ND", node))
    graph.add_node(node)
    return node.outputs[0] if single else tuple(node.outputs)

