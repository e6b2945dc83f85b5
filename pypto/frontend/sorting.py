"""CANN's ``topk`` and ``argsort`` as ``pl.topk`` / ``pl.argsort`` kernels.

Both sort along the last axis of a tile, so the sorted axis is moved last on the host (data
movement, like a transpose of leading axes) and the rest flattened into rows; each block takes
a (rows x whole width) tile, as CANN requires the sorted axis whole in the tile. Indices are
int32, as CANN returns them; both are stable (CANN's argsort page: equal values keep their
index order) and NaN sorts first in either direction (docs/language.md, Sorting).
"""
from __future__ import annotations

import numpy as np

from .. import language as pl
from ..graph.kernel_source import make_kernel
from .lowering import fit_tile
from .unavailable import NotAvailableError

_TOPK = """def cann_topk(src, vals, idx):
    i = pl.program_id(0) * {tm}
    v, ix = pl.topk(pl.load(src, offsets=(i, 0), shape=({tm}, {n})), {k}, largest={largest})
    pl.store(vals, offsets=(i, 0), value=v)
    pl.store(idx, offsets=(i, 0), value=ix)
"""
_ARGSORT = """def cann_argsort(src, idx):
    i = pl.program_id(0) * {tm}
    t = pl.load(src, offsets=(i, 0), shape=({tm}, {n}))
    pl.store(idx, offsets=(i, 0), value=pl.argsort(t, descending={descending}))
"""
_SORTABLE = ("float16", "float32", "int8", "int16", "int32")


def topk(node, x, vec_tile) -> tuple:
    """(values, indices) of the ``k`` largest / smallest along ``node.attrs["axis"]``."""
    a = node.attrs
    rows = _rows(x, a["axis"], "topk")
    k = a["k"]
    vals = np.empty((rows.shape[0], k), rows.dtype)
    idx = np.empty((rows.shape[0], k), np.int32)
    _launch(lambda tm: _TOPK.format(tm=tm, n=rows.shape[1], k=k, largest=a["largest"]),
            "cann_topk", rows, (rows, vals, idx), vec_tile)
    return _back(vals, x, a["axis"], k), _back(idx, x, a["axis"], k)


def argsort(node, x, vec_tile) -> np.ndarray:
    a = node.attrs
    rows = _rows(x, a["axis"], "argsort")
    idx = np.empty(rows.shape, np.int32)
    _launch(lambda tm: _ARGSORT.format(tm=tm, n=rows.shape[1], descending=a["descending"]),
            "cann_argsort", rows, (rows, idx), vec_tile)
    return _back(idx, x, a["axis"], x.shape[a["axis"]])


def _rows(x, axis, what) -> np.ndarray:
    if x.dtype.name not in _SORTABLE:
        raise NotAvailableError(f"pypto.{what} of {x.dtype.name}",
                                f"pl.{what} sorts {', '.join(_SORTABLE)}")
    moved = np.moveaxis(x, axis, -1)
    return np.ascontiguousarray(moved.reshape(-1, moved.shape[-1]))


def _back(rows, x, axis, width) -> np.ndarray:
    """Rows of the sorted axis back to ``x``'s layout, that axis ``width`` long."""
    moved = np.moveaxis(x, axis, -1).shape[:-1] + (width,)
    return np.ascontiguousarray(np.moveaxis(rows.reshape(moved), -1, axis))


def _launch(source_for, name, rows, arrays, vec_tile):
    """One block per ``tm`` rows of the whole sorted axis: ``tm`` from CANN's tile rows,
    halved with a warning while UB overflows (``lowering.fit_tile``)."""
    tm = max(1, min(rows.shape[0], int(np.prod(vec_tile[:-1])) if vec_tile and
                    len(vec_tile) > 1 else 8))

    def run(tile):
        kernel = make_kernel(source_for(tile[0]), {"pl": pl}, name, None)
        kernel[(-(-rows.shape[0] // tile[0]),)](*arrays)
    fit_tile(run, (tm, rows.shape[1]), name.removeprefix("cann_"), whole_cols=True)
