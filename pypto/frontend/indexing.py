"""CANN's ``gather`` and ``scatter`` (torch's meaning) as ``pl.gather`` / ``pl.scatter`` kernels.

``pl.gather`` and ``pl.scatter`` address a GM tensor with a tile of indices, which a tile op
(tiles only) cannot express, so these two are generated ``@pypto.jit`` kernels of their own
(the way ``pypto/graph/kernel_source.py`` writes kernels) on rank-2 views; a rank-1 tensor is one row.
Gather runs one block per (rows, columns) tile of the index; scatter one block over the whole
index, so that a repeated index keeps the last value in row-major order, as ``pl.scatter``
defines it.
"""
from __future__ import annotations

import numpy as np

from .. import language as pl
from ..graph.kernel_source import make_kernel
from .unavailable import NotAvailableError

_GATHER = """def cann_gather(src, idx, out):
    i = pl.program_id(0) * {tm}
    j = pl.program_id(1) * {tn}
    ix = pl.load(idx, offsets=(i, j), shape=({tm}, {tn}))
    pl.store(out, offsets=(i, j), value=pl.gather(src, ix, axis={axis}, offsets={window}))
"""
_SCATTER = """def cann_scatter(idx, val, out):
    ix = pl.load(idx, offsets=(0, 0), shape=({r}, {c}))
    pl.scatter(out, ix, {value}, axis={axis}, offsets=(0, 0){reduce})
"""


def _index(index) -> np.ndarray:
    """The index as int32: A2/A3's vector unit has no 64-bit tiles, so an int64 index (torch's
    usual dtype) is narrowed on the host; indices are smaller than any tensor extent."""
    return np.ascontiguousarray(index, dtype=np.int32)


def _as_rows(array, axis, what):
    """A rank-2 view and the axis in it; rank 1 is one row."""
    if array.ndim == 1:
        return array.reshape(1, -1), 1
    if array.ndim != 2:
        raise NotAvailableError(f"pypto.{what} on a rank-{array.ndim} tensor",
                                "indexed ops run on rank-1 and rank-2 tensors")
    return array, axis


def gather(node, src, index, vec_tile) -> np.ndarray:
    """Rank N as rank-2 gathers: the axes after ``dim`` flattened (the index must span them
    whole), the axes before it looped; gathering the last axis flattens the ones before."""
    axis, index = node.attrs["axis"], _index(index)
    if src.ndim <= 2:
        return _gather2(node, src, index, axis, vec_tile)
    if axis == src.ndim - 1 and index.shape[:-1] == src.shape[:-1]:
        flat = _gather2(node, src.reshape(-1, src.shape[-1]),
                        index.reshape(-1, index.shape[-1]), 1, vec_tile)
        return flat.reshape(index.shape)
    if index.shape[axis + 1:] != src.shape[axis + 1:]:
        raise NotAvailableError(f"pypto.gather over axis {axis} of a rank-{src.ndim} tensor "
                                "with an index narrower than it after that axis",
                                "needs rank-3/4 tiles")
    out = np.empty(index.shape, src.dtype)
    for p in np.ndindex(*index.shape[:axis]):
        slab = src[p].reshape(src.shape[axis], -1)
        out[p] = _gather2(node, slab, index[p].reshape(index.shape[axis], -1), 0,
                          vec_tile).reshape(index.shape[axis:])
    return out


def _gather2(node, src, index, axis, vec_tile) -> np.ndarray:
    src2, axis = _as_rows(np.ascontiguousarray(src), axis, "gather")
    idx2, _ = _as_rows(index, axis, "gather")
    tm, tn = (vec_tile[-2:] if vec_tile and len(vec_tile) >= 2 else (8, 64))
    tm, tn = min(tm, idx2.shape[0]), min(tn, idx2.shape[1])
    window = "(0, j)" if axis == 0 else "(i, 0)"
    source = _GATHER.format(tm=tm, tn=tn, axis=axis, window=window)
    out = np.empty(idx2.shape, src.dtype)
    grid = (-(-idx2.shape[0] // tm), -(-idx2.shape[1] // tn))
    make_kernel(source, {"pl": pl}, "cann_gather", None)[grid](src2, idx2, out)
    return out.reshape(index.shape)


def scatter(node, src, index, value) -> np.ndarray:
    out = np.array(src, copy=True)
    out2, axis = _as_rows(out, node.attrs["axis"], "scatter")
    idx2, _ = _as_rows(_index(index), node.attrs["axis"], "scatter")
    r, c = idx2.shape
    reduce = node.attrs["reduce"]
    extra = "" if reduce is None else f", reduce={reduce!r}"
    if isinstance(value, np.ndarray) and value.ndim:
        val2, _ = _as_rows(np.ascontiguousarray(value, out.dtype), axis, "scatter")
        text = f"pl.load(val, offsets=(0, 0), shape=({r}, {c}))"
    else:
        val2 = np.zeros((1, 1), out.dtype)            # unused: the value is a constant
        text = f"pl.full(({r}, {c}), {float(value)!r}, pl.{_pl_name(out.dtype)})"
    source = _SCATTER.format(r=r, c=c, value=text, axis=axis, reduce=extra)
    make_kernel(source, {"pl": pl}, "cann_scatter", None)[(1,)](idx2, val2, out2)
    return out


def _pl_name(dtype) -> str:
    return pl.dtypes.from_any(dtype).name
