"""Loads and stores whose window is outside the tensor at compile time.

A window at constant offsets past a specialised extent (a plane of a rank-3/4 tile beyond the
tensor's end, ``passes/unbatch.py``, or a 2-D tile placed past it) moves no element. Printed
as is, its clipped ``partition_view`` has a constant size 0, which PTOAS rejects ("size at dim
0 must be positive"). So such a load becomes a ``texpands`` of its padding value over the tile
(what the load means), and such a store disappears. It runs right after lowering, so padding,
sync and the hazard checker see the result, and again after double buffering, whose prologue
loads the first iteration's window at the loop's lower bound: past a tensor extent
specialised to 0 (a K = 0 matmul with ``num_stages=2``) that window is empty too.
"""
from __future__ import annotations

from ..program import Inst, Program, Scalar, TensorArg, constant_values, nested_bodies


def fold_empty_windows(program: Program) -> Program:
    known = constant_values(program)      # offsets folded (the unbatch pass adds plane indices)
    for _, body in program.parts:
        _fold(body, known)
    return program


def _fold(body: list, known: dict) -> None:
    out = []
    for node in body:
        for nested in nested_bodies(node):
            _fold(nested, known)
        if isinstance(node, Inst):
            if node.op == "tload" and _empty(node.ins[0], node.ins[1:], node.outs[0], known):
                if node.attrs["pad"] is None:     # the tile holds its padding already
                    continue
                hints = {k: v for k, v in node.attrs.items() if k.startswith("_")
                         and k != "_inside"}
                out.append(Inst("texpands", [], list(node.outs),
                                {"value": node.attrs["pad"], **hints}))
                continue
            if node.op == "tstore" and _empty(node.outs[0], node.outs[1:], node.ins[0], known):
                continue
        out.append(node)
    body[:] = out


def _empty(tensor, offsets, tile, known: dict) -> bool:
    """Is some axis of the window wholly outside the tensor, all its numbers constant?"""
    if not isinstance(tensor, TensorArg) or tensor.layout != "ND" or tensor.workspace:
        return False
    sizes = (1,) * (tensor.rank - 2) + ((tile.rows, tile.cols) if tensor.rank > 1
                                        else (tile.cols,))
    for off, size, extent in zip(offsets, sizes, tensor.dims):
        o = known.get(off.name) if isinstance(off, Scalar) else None
        if o is not None and isinstance(extent, int) and (o >= extent or o + size <= 0):
            return True
    return False
