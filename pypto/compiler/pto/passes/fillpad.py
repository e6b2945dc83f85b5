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

The fill is work only where the window is partial. Where the tensor's extents and the
offsets are constants the pass decides at compile time (a whole window gets no fill); else
the fill runs under ``if (the window is not whole)``, a few scalar compares per load on S
(a GEMM whose extents are run-time arguments no longer fills every L1 tile before its load).

It runs after double buffering, so a prefetched load into a pong tile is padded like any. A
``pl.load(padding=None)`` (``_inside``: the kernel promises the window lies inside the tensor)
gets neither.
"""
from __future__ import annotations

import itertools

from ....language import dtypes as dt
from ..isa import is_scalar, is_sync, pad_kind
from ..program import (For, If, Inst, Program, Scalar, TensorArg, While, constant_values,
                       nested_bodies)


def pad_loads(program: Program, auto_sync: bool = True) -> Program:
    consts, names = constant_values(program), itertools.count()
    for _, body in program.parts:
        _pad(body, auto_sync, consts, names)
    return program


def _pad(body: list, auto_sync: bool, consts: dict, names) -> None:
    for node in body:
        for nested in nested_bodies(node):
            _pad(nested, auto_sync, consts, names)
    for k in range(len(body) - 1, -1, -1):        # last first: each fill moves once
        load = body[k]
        if not (isinstance(load, Inst) and load.op == "tload"):
            continue
        if load.attrs.get("_inside"):       # pl.load(padding=None): nothing to pad
            continue
        tile, pad = load.outs[0], load.attrs["pad"]
        partial = _partial(load, consts, names)
        if partial is False:                # the window is whole: nothing to pad
            load.attrs["pad"] = None
            continue
        check, cond = ([], None) if partial is True else partial
        kind = pad_kind(pad, tile.dtype) if tile.loc == "vec" else None
        if kind is not None:
            fill = _when(cond, [Inst("tfillpad", list(load.ins), [tile],
                                     {"pad": pad, **_hints(load)})])
            j = k + 1
            while j < len(body) and _passes(body[j], tile):
                j += 1
            body[j:j] = fill
            body[k:k] = check
            continue
        before = [Inst("texpands", [], [tile], {"value": pad, "_prefill": True})]
        if not auto_sync and tile.loc == "vec":
            before.append(Inst("barrier", [], [], {"pipe": "ALL"}))
        body[k:k] = check + _when(cond, before)


def _when(cond, insts: list) -> list:
    """``insts``, under ``if cond`` unless ``cond`` is None (always)."""
    return insts if cond is None else [If(cond, insts, [], [], [], [])]


def _partial(load: Inst, consts: dict, names):
    """Is the load's window partial (some of the tile is padding)? True or False when the
    numbers are constants; else (the scalar instructions that compute it, its i1 result).
    A tile whose valid region is smaller than the tile or its fractal box (the cube reads the
    box's padding), a row view, a window of an NC1HWC0 or workspace tensor (or an NZ one of
    unknown extents) and a load of a host fusion group are always padded."""
    tensor, offsets, tile = load.ins[0], load.ins[1:], load.outs[0]
    if not isinstance(tensor, TensorArg):
        return True
    # an NZ tensor's window is given in its logical (rows, cols); its extents must be known
    dims = tuple(tensor.logical) if tensor.layout == "NZ" else tensor.dims
    if (tensor.layout not in ("ND", "NZ") or tensor.workspace or len(offsets) != len(dims)
            or (tensor.layout == "NZ" and None in dims)
            or "_fuse" in load.attrs     # the host's fused loop nest: one run, no branches
            or tile.row_of is not None or tile.v_row not in (None, tile.rows)
            or tile.alloc not in (None, (tile.rows, tile.cols))   # a fractal box's padding
            or tile.v_col not in (None, tile.cols)):
        return True
    rank = len(dims)
    sizes = [1] * (rank - 2) + [tile.rows, tile.cols][-min(rank, 2):]
    value = lambda x: consts.get(x.name) if isinstance(x, Scalar) else x   # noqa: E731
    known = [(value(o), d) for o, d in zip(offsets, dims)]
    if all(o is not None and d is not None for o, d in known):
        return any(o < 0 or o + n > d for (o, d), n in zip(known, sizes))
    return _window_check(tensor, offsets, dims, sizes, names)


def _window_check(tensor, offsets, dims, sizes, names) -> tuple[list, Scalar]:
    """The scalar instructions computing ``offset < 0 or offset + size > extent`` on some
    axis, and their i1 result."""
    insts: list = []

    def emit(op, ins, out_dtype, **attrs):
        out = Scalar(f"pad{next(names)}", out_dtype)
        insts.append(Inst(op, ins, [out], attrs))
        return out

    index = offsets[0].dtype if isinstance(offsets[0], Scalar) else dt.int64
    const = lambda v: emit("arith.constant", [], index, value=v)   # noqa: E731
    zero, cond = const(0), None
    for axis, (o, n) in enumerate(zip(offsets, sizes)):
        o = o if isinstance(o, Scalar) else const(o)
        d = (const(dims[axis]) if dims[axis] is not None
             else emit("tensor.dim", [tensor], index, axis=axis))
        end = emit("arith.add", [o, const(n)], index)
        for bad in (emit("arith.cmp", [o, zero], dt.bool_, pred="lt"),
                    emit("arith.cmp", [end, d], dt.bool_, pred="gt")):
            cond = bad if cond is None else emit("arith.or", [cond, bad], dt.bool_)
    return insts, cond


def _passes(node, tile) -> bool:
    """May the tfillpad of ``tile`` go below ``node``?"""
    if isinstance(node, (For, If, While)):
        return False
    if is_sync(node) or is_scalar(node):
        return True
    return not any(x is tile for x in node.ins + node.outs + [node.attrs.get("tmp")])


def _hints(load: Inst) -> dict:
    return {k: v for k, v in load.attrs.items() if k.startswith("_")}
