"""A trace evaluated eagerly with torch, one op at a time: the reference for checking runs.

Each op has its torch meaning (CANN's API pages define its ops as torch's); nothing here is
compiled, tiled or fused, so comparing ``evaluate`` with this checks the lowering. The
examples runner (tests/frontend/test_cann_examples.py) uses it for every kernel call of an
example whose own check runs only on an NPU.
"""
from __future__ import annotations

import numpy as np

from ..layout import as_array
from ..runtime.args import to_torch
from . import ops
from .evaluate import read_after_overwrite
from .symbolic import SymTensor


def run(trace, arrays: list) -> None:
    """Run ``trace`` on ``arrays`` (numpy, modified in place) with torch ops: its writes as
    traced, loop iterations unmerged, so a wrong merge (``coalesce``) shows too."""
    import torch  # lazy: torch loads on first use, never with pypto
    tensors = {}
    for buf in trace.buffers:
        array = arrays[buf.arg_index] if buf.arg_index is not None else \
            np.zeros(buf.shape, buf.dtype.to_numpy())
        tensors[id(buf)] = _torch(array)
    memo: dict = {}
    versions = {id(b): 0 for b in trace.buffers}
    writes = trace.unmerged or trace.writes
    keep = read_after_overwrite(writes)
    for write in writes:
        value = _value(write.value, (tensors, versions), memo, torch)
        dest = tensors[id(write.buffer)]
        key = (id(write.buffer), versions[id(write.buffer)])
        if key in keep:                 # read after this write: its contents kept
            tensors[key] = dest.clone()
        versions[id(write.buffer)] = write.version
        for index in write.chain:
            dest = dest[index]
        dest.copy_(torch.broadcast_to(value, dest.shape).to(dest.dtype))
    for buf in trace.buffers:
        if buf.arg_index is not None:
            arrays[buf.arg_index][...] = as_array(tensors[id(buf)])


def _torch(array):
    import torch  # lazy: torch loads on first use, never with pypto
    if array.dtype.name == "bfloat16":
        return torch.from_numpy(array.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(array.copy())


def _value(node, state, memo, torch):
    if not isinstance(node, SymTensor):
        return node
    tensors, versions = state
    if node.op == "read":
        buf, version = id(node.attrs["buffer"]), node.attrs["version"]
        t = tensors[buf] if version == versions[buf] else tensors[(buf, version)]
        for index in node.attrs["chain"]:
            t = t[index]
        return t.clone()
    if id(node) in memo:
        return memo[id(node)]
    args = [_value(a, state, memo, torch) for a in node.args]
    dtype = to_torch(node.ptype)
    op, a = node.op, node.attrs
    if op == "cast":
        out = args[0].to(dtype)
    elif op == "clip":
        out = torch.clamp(args[0], args[1], args[2])
    elif op == "ceil_div":
        out = torch.div(args[0] + args[1] - 1, args[1], rounding_mode="floor")
    elif op in ops.EW:                  # the other elementwise ops are torch's of that name
        out = getattr(torch, op)(*args)
    elif op in ops.REDUCE:              # as the reductions are
        out = getattr(torch, op)(args[0], dim=a["axis"], keepdim=a["keepdim"])
    elif op == "matmul":
        x = args[0].transpose(-1, -2) if a["a_trans"] else args[0]
        y = args[1].transpose(-1, -2) if a["b_trans"] else args[1]
        out = torch.matmul(x.float(), y.float())
    elif op == "transpose":
        out = args[0].transpose(*a["axes"])
    elif op == "reshape":
        out = args[0].reshape(node._shape)
    elif op == "slice":
        out = args[0][a["index"]]
    elif op == "concat":
        out = torch.cat(args, dim=a["axis"])
    elif op == "expand":
        out = args[0].expand(node._shape).clone()
    elif op == "gather":
        out = torch.gather(args[0], a["axis"], args[1].long())
    elif op == "scatter":
        out = torch.scatter(args[0], a["axis"], args[1].long(), args[2],
                            **({"reduce": a["reduce"]} if a["reduce"] else {}))
    elif op == "topk":      # stable, as pl.topk and CANN's sort (torch.topk's ties are not)
        order = torch.sort(args[0], dim=a["axis"], descending=a["largest"], stable=True)
        part = order[0] if a["part"] == 0 else order[1]
        out = part.narrow(a["axis"], 0, a["k"])
    elif op == "argsort":
        out = torch.argsort(args[0], dim=a["axis"], descending=a["descending"], stable=True)
    elif op == "full":
        out = torch.full(node._shape, a["value"])
    elif op == "arange":
        out = a["start"] + a["step"] * torch.arange(node._shape[0])
    else:
        raise NotImplementedError(f"reference: no torch rule for {op}")
    out = torch.as_tensor(out).to(dtype)
    memo[id(node)] = out
    return out
