"""Running a trace: each write's value computed (``lowering``) and stored into its buffer.

Buffers are the caller's arrays (numpy views of torch CPU tensors share their memory, so the
writes land in the caller's tensors) and zero-filled arrays for ``pypto.tensor``s. Computed
values are kept for the rest of the run, so a value stored twice is computed once.
"""
from __future__ import annotations

import math

import numpy as np

from . import build, indexing, lowering, ops, sorting
from .symbolic import SymTensor, reads
from .unavailable import NotAvailableError


class Evaluator:
    def __init__(self, trace, arrays: list):
        self.trace = trace
        self.arrays = {}
        for buf in trace.buffers:
            self.arrays[id(buf)] = arrays[buf.arg_index] if buf.arg_index is not None else \
                np.zeros(buf.shape, dtype=buf.dtype.to_numpy())
        self.versions = {id(b): 0 for b in trace.buffers}
        self.keep = read_after_overwrite(trace.writes)
        self.old = {}           # (buffer, version) -> its contents then, when read later
        self.memo = {}
        self.vec_tile = trace.tile_shapes("vec_tile_shapes")
        self.cube_tile = trace.tile_shapes("cube_tile_shapes")

    def run(self) -> None:
        for write in self.trace.writes:
            try:
                value = self.value(write.value)
            except (NotAvailableError, ValueError) as e:     # said at the kernel's line
                e.args = (f"{e.args[0] if e.args else e}\n  in the write at {write.line}",)
                raise e.with_traceback(None) from None
            key = (id(write.buffer), self.versions[id(write.buffer)])
            if key in self.keep:
                self.old[key] = self.arrays[id(write.buffer)].copy()
            dest = self.place(write.buffer, write.chain)
            np.copyto(dest, np.broadcast_to(value, dest.shape).astype(dest.dtype, copy=False))
            self.versions[id(write.buffer)] = write.version

    def place(self, buf, chain, version=None) -> np.ndarray:
        array = self.arrays[id(buf)]
        if version is not None and version != self.versions[id(buf)]:
            array = self.old[(id(buf), version)]
        for index in chain:
            array = array[index]
        return array

    def value(self, node) -> np.ndarray:
        """The array of ``node`` (its logical shape)."""
        if not isinstance(node, SymTensor):
            return np.asarray(node)
        kept = self.memo.get(id(node))
        if kept is not None and kept[0] is node:
            return kept[1]
        result = np.asarray(self._compute(node))
        if result.shape != tuple(node._shape):
            result = result.reshape(node._shape)
        if node.op not in _VIEWS:       # a fresh array: what the node meant when it was traced
            self.memo[id(node)] = (node, result)    # the node kept: its id stays its own
        return result

    def _compute(self, node):
        if node.op == "read":
            return self.place(node.attrs["buffer"], node.attrs["chain"], node.attrs["version"])
        if node.op in ops.EW or node.op in ops.REDUCE:
            return self._reduce_or_segment(node)
        rule = _RULES.get(node.op)
        if rule is None:
            raise NotAvailableError(f"pypto.{node.op}")
        return rule(self, node)

    def _reduce_or_segment(self, node):
        if node.op in ops.REDUCE and not lowering._last_axis_reduce(node):
            return self._other_axis_reduce(node)
        if node.lowered is None:
            node.lowered = lowering.Segment(node)
        segment = node.lowered
        return lowering.run_tile_op(segment.source, segment.arrays(self.value),
                                    segment.tile(self.vec_tile), "segment")

    def _other_axis_reduce(self, node):
        x = node.args[0]
        axis, shape = node.attrs["axis"], x._shape
        before, after = math.prod(shape[:axis]), math.prod(shape[axis + 1:])
        if before == 1:
            return lowering.first_axis_reduce(node, self.value(x), self.vec_tile)
        if after == 1:              # a last-axis reduction of the (before, axis) view
            if node.lowered is None:
                flat = build.reshape(x, (before, shape[axis]))
                node.lowered = build.reduce(node.op, flat, -1, True)
            return self.value(node.lowered)
        return self._middle_axis_reduce(node, before, after)

    def _middle_axis_reduce(self, node, before, after):
        """A middle axis reduced as the first axis of each (axis, rest) slab, slabs looped."""
        x = self.value(node.args[0])
        slabs = x.reshape(before, x.shape[node.attrs["axis"]], after)
        out = np.stack([lowering.first_axis_reduce(node, slab, self.vec_tile, (1, after))
                        for slab in slabs])
        return out.reshape(node._shape)


def read_after_overwrite(writes) -> set:
    """(buffer, version) pairs some write's value reads after a later version was written:
    their contents are kept when they are overwritten."""
    versions, keep = {}, set()
    for write in writes:
        for node in reads(write.value):
            buf = node.attrs["buffer"]
            if node.attrs["version"] < versions.get(id(buf), 0):
                keep.add((id(buf), node.attrs["version"]))
        versions[id(write.buffer)] = write.version
    return keep


def _full(ev, node):
    return np.full(node._shape, node.attrs["value"], dtype=node.ptype.to_numpy())


def _arange(ev, node):
    a = node.attrs
    return (a["start"] + a["step"] * np.arange(node._shape[0])).astype(node.ptype.to_numpy())


def _reshape(ev, node):
    return np.reshape(ev.value(node.args[0]), node._shape)


def _slice(ev, node):
    return ev.value(node.args[0])[node.attrs["index"]]


def _concat(ev, node):
    return np.concatenate([ev.value(t) for t in node.args], axis=node.attrs["axis"])


def _expand(ev, node):
    return np.ascontiguousarray(np.broadcast_to(ev.value(node.args[0]), node._shape))


def _matmul(ev, node):
    a, b = (ev.value(t) for t in node.args)
    return lowering.matmul(node, a, b, ev.cube_tile, ev.vec_tile)


def _gather(ev, node):
    return indexing.gather(node, *(ev.value(t) for t in node.args), ev.vec_tile)


def _scatter(ev, node):
    return indexing.scatter(node, *(ev.value(t) for t in node.args))


def _topk(ev, node):
    """Values and indices are two nodes of one sort: the second reads the first's result.
    Each node pins its own read of the operand (symbolic.pinned), so the sort is known by
    what it reads: the buffer, window and version, or the computed node itself."""
    a, x = node.attrs, node.args[0]
    source = (id(x.attrs["buffer"]), repr(x.attrs["chain"]), x.attrs["version"]) \
        if x.op == "read" else (id(x),)
    key = ("topk", *source, a["axis"], a["k"], a["largest"])
    kept = ev.memo.get(key)
    if kept is None:
        kept = ev.memo[key] = sorting.topk(node, ev.value(x), ev.vec_tile)
    return kept[a["part"]]


def _argsort(ev, node):
    return sorting.argsort(node, ev.value(node.args[0]), ev.vec_tile)


def _transpose(ev, node):
    return lowering.transpose(node, ev.value(node.args[0]), ev.vec_tile)


_VIEWS = {"read", "reshape", "slice"}      # views of buffers: never kept across writes
_RULES = {"full": _full, "arange": _arange, "reshape": _reshape, "slice": _slice,
          "concat": _concat, "expand": _expand, "matmul": _matmul, "transpose": _transpose,
          "gather": _gather, "scatter": _scatter, "topk": _topk, "argsort": _argsort}
