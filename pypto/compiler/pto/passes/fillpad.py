"""A load's padding, as A2/A3 makes it.

TLOAD writes a window's valid region only (lower.py clips it to the tensor). Past it:

* a UB tile gets the pad value from ``tfillpad`` (V) where the hardware has that value (0,
  ±max): put just before the first instruction that uses the tile, past flags and scalar
  work, so the flags the sync pass places before that use (or that the kernel placed itself,
  under ``auto_sync=False``) order it after the load too;
* otherwise, and always in L1 (which has no TFILLPAD), the tile is filled with the value
  before the load (``texpands``, marked ``_prefill``: the host's own load pads, so the host
  skips it). In UB that fill is V and the load MTE2; without the sync pass nothing would
  order them, so such a kernel gets a pipe barrier between the two.

It runs after double buffering, so a prefetched load into a pong tile is padded like any. A
``pl.load(padding=None)`` (``_inside``: the kernel promises the window lies inside the tensor)
gets neither.
"""
from __future__ import annotations

from ..isa import is_scalar, is_sync, pad_kind
from ..program import For, If, Inst, Program, While, nested_bodies


def pad_loads(program: Program, auto_sync: bool = True) -> Program:
    for _, body in program.parts:
        _pad(body, auto_sync)
    return program


def _pad(body: list, auto_sync: bool) -> None:
    for node in body:
        for nested in nested_bodies(node):
            _pad(nested, auto_sync)
    for k in range(len(body) - 1, -1, -1):        # last first: each fill moves once
        load = body[k]
        if not (isinstance(load, Inst) and load.op == "tload"):
            continue
        if load.attrs.get("_inside"):       # pl.load(padding=None): nothing to pad
            continue
        tile, pad = load.outs[0], load.attrs["pad"]
        kind = pad_kind(pad, tile.dtype) if tile.loc == "vec" else None
        if kind is not None:
            fill = Inst("tfillpad", list(load.ins), [tile], {"pad": pad, **_hints(load)})
            j = k + 1
            while j < len(body) and _passes(body[j], tile):
                j += 1
            body.insert(j, fill)
            continue
        before = [Inst("texpands", [], [tile], {"value": pad, "_prefill": True})]
        if not auto_sync and tile.loc == "vec":
            before.append(Inst("barrier", [], [], {"pipe": "ALL"}))
        body[k:k] = before


def _passes(node, tile) -> bool:
    """May the tfillpad of ``tile`` go below ``node``?"""
    if isinstance(node, (For, If, While)):
        return False
    if is_sync(node) or is_scalar(node):
        return True
    return not any(x is tile for x in node.ins + node.outs + [node.attrs.get("tmp")])


def _hints(load: Inst) -> dict:
    return {k: v for k, v in load.attrs.items() if k.startswith("_")}
