"""Where the padding of a load is filled in: just before the tile is first used.

A UB load is TLOAD (MTE2) then TFILLPAD (V) on the same tile (lower.py). TFILLPAD must wait
for the load like any vector instruction, so it is moved down to just before the first
instruction that uses the tile, past flags and scalar work: the flags the sync pass places
before that use (or that the kernel placed itself, under ``auto_sync=False``) then order it
too. A load whose pad value the hardware lacks is a fill (V) then the TLOAD (MTE2); without
the sync pass nothing orders the two, so such a kernel gets a pipe barrier between them.
"""
from __future__ import annotations

from ..isa import is_scalar, is_sync
from ..program import For, If, Inst, Program, While, nested_bodies


def place_fillpads(program: Program, auto_sync: bool = True) -> Program:
    for _, body in program.parts:
        _place(body, auto_sync)
    return program


def _place(body: list, auto_sync: bool) -> None:
    for node in body:
        for nested in nested_bodies(node):
            _place(nested, auto_sync)
    k = 0
    while k < len(body):
        node = body[k]
        if isinstance(node, Inst) and node.op == "tfillpad":
            j = k + 1
            while j < len(body) and _passes(body[j], node.outs[0]):
                j += 1
            body.insert(j - 1, body.pop(k))
            if j - 1 > k:
                continue                  # the node now at k has not been looked at
        elif not auto_sync and _prefills_ub(node):
            body.insert(k + 1, Inst("barrier", [], [], {"pipe": "ALL"}))
            k += 1
        k += 1


def _passes(node, tile) -> bool:
    """May a tfillpad of ``tile`` move below ``node``?"""
    if isinstance(node, (For, If, While)) or node.op == "tfillpad":
        return False                   # (two fills side by side would swap forever)
    if is_sync(node) or is_scalar(node):
        return True
    return not any(x is tile for x in node.ins + node.outs + [node.attrs.get("tmp")])


def _prefills_ub(node) -> bool:
    return isinstance(node, Inst) and node.op == "texpands" and node.attrs.get("_prefill") \
        and node.outs[0].loc == "vec"
