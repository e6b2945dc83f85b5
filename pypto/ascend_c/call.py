"""``pypto.call_ascend_c(op, inputs)``: run a declared Ascend C kernel on arrays now (numpy,
torch CPU tensors, ``pypto.Tensor``s; the outputs come back as the same kind), or, on graph
tensors, add it to their graph (``graph/ascend_c_node.py``)."""
from __future__ import annotations

import numpy as np

from ..runtime.args import as_array
from .kernel import AscendCKernel, _dtype


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
    from ..graph.graph import GraphTensor
    in_graph = [isinstance(x, GraphTensor) for x in inputs]
    if any(in_graph):
        if not all(in_graph):
            k = in_graph.index(False)
            raise TypeError(f"pypto.call_ascend_c({op.name}): inputs[{k}] is a "
                            f"{type(inputs[k]).__name__} among graph tensors; in a graph every "
                            "input is a placeholder or a node's output")
        from ..graph.ascend_c_node import add_call
        return add_call(op, list(inputs), scalars)
    return _run_now(op, list(inputs), scalars)


def _run_now(op: AscendCKernel, inputs: list, scalars: dict):
    where = f"pypto.call_ascend_c({op.name})"
    arrays = []
    for k, x in enumerate(inputs):
        try:
            a = as_array(x)
        except TypeError as e:
            raise TypeError(f"{where}: inputs[{k}]: {e}") from None
        if a is None:
            raise TypeError(f"{where}: inputs[{k}] must be an array (numpy, a torch CPU tensor "
                            f"or a pypto.Tensor), got {type(x).__name__}")
        arrays.append(a)
    specs = op.check_inputs([(a.shape, _dtype(a, where, k)) for k, a in enumerate(arrays)], where)
    binding = op.bind(specs, scalars, where)
    outs = [np.zeros(s.shape, s.dtype.to_numpy()) for s in binding.outputs]
    op.launch(arrays, outs, binding)
    results = [_like(inputs, o) for o in outs]
    return results[0] if len(results) == 1 else tuple(results)


def _like(inputs, array):
    """The output as the inputs' kind: torch if any input is torch, pypto.Tensor if any is."""
    from ..runtime.device import Tensor
    if any(type(x).__module__.startswith("torch") for x in inputs):
        import torch
        return torch.from_numpy(array)
    if any(isinstance(x, Tensor) for x in inputs):
        return Tensor.from_numpy(array)
    return array


