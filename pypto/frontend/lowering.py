"""From a traced CANN kernel to arrays: fused rank-2 kernels through the graph API.

Every write of the trace stores the value of one node tree. Evaluating a node:

* a row-local tree (elementwise ops, reductions over the last axis) becomes one *segment*:
  each tensor is seen as a rank-2 view (leading axes flattened into rows, the last axis kept),
  the tree is written as one ``@pypto.tile_op`` (``ops.EW`` / ``ops.REDUCE`` expressions), and
  ``tile_map`` cuts it by CANN's vec tile shape (rows = product of the leading extents, the
  last extent; a segment that reduces keeps rows whole) into a ``pypto.compile``d module: a
  generated ``@pypto.jit`` kernel, cached per source, shapes and tile;
* ``matmul`` is a cube tile op over 2-D operands, its batch axes looped; ``transpose`` of the
  last two axes is ``pl.trans``; a reduction over the first axis of a 2-D view is one too;
* shape ops (reshape, windows, concat, expand_clone, transposes of leading axes) and creation
  (full, arange) are data movement on the host arrays, which the cycle model does not see
  (docs/from_cann_pypto.md).

An operand broadcast over some leading axes only is copied out to full rows on the host;
a middle-axis reduction runs as first-axis ones over its slabs (``evaluate.py``); a transpose
of the last axis with a non-adjacent one is a last-two-axes kernel between two host swaps.
"""
from __future__ import annotations

import math
import warnings
from collections import OrderedDict

import numpy as np

from .. import language as pl
from ..errors import CompilationError
from ..graph import TensorGraph, compile as compile_graph, tile_map, tile_op
from ..graph.kernel_source import define
from . import ops
from .symbolic import SymTensor

_MODULES: OrderedDict = OrderedDict()   # (source, leaf shapes, dtypes, tile) -> graph Module
_MAX_MODULES = 256
DEFAULT_VEC_TILE = (8, 512)


def rows_cols(shape) -> tuple:
    """The rank-2 view of ``shape``: leading axes flattened into rows, the last axis kept."""
    shape = tuple(shape)
    return (math.prod(shape[:-1]), shape[-1]) if shape else (1, 1)


def seen_as(shape, within) -> tuple | None:
    """The rank-2 view of an operand of ``shape`` broadcast into a result of shape ``within``
    (rows all, or 1 when every leading axis broadcasts); None if that needs a rank-3 tile."""
    shape, within = tuple(shape), tuple(within)
    if not within:
        return (1, 1)
    shape = (1,) * (len(within) - len(shape)) + shape
    cols = shape[-1]
    if shape[:-1] == within[:-1]:
        return (math.prod(within[:-1]), cols)
    if all(e == 1 for e in shape[:-1]):
        return (1, cols)
    return None


def _last_axis_reduce(node) -> bool:
    return node.op in ops.REDUCE and node.attrs["axis"] == len(node.args[0]._shape) - 1


def _fusable(node, within) -> bool:
    """Whether ``node`` can be computed inside the segment of a parent of shape ``within``."""
    if not isinstance(node, SymTensor):
        return False
    view = seen_as(node._shape, within)
    if node.op in ops.EW:
        return view is not None
    if _last_axis_reduce(node):
        return view == (rows_cols(node.args[0]._shape)[0], 1) or view == (1, 1) == \
            rows_cols(node.args[0]._shape)
    return False


def _literal(value) -> str:
    """A number as kernel source (inf and nan have no literal)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float('{value}')"
    return repr(value)


class Segment:
    """One fused row-local tree written as a tile op over rank-2 leaves. It depends on the
    tree alone, so a node keeps its segment (``SymTensor.lowered``) for every later call;
    only the leaves' arrays are computed per call (``arrays``)."""

    def __init__(self, root):
        self.leaves = []            # (node, rank-2 view, full shape when copied out or None)
        self._named: dict = {}      # (id(node), rank-2 view, within) -> its parameter: loaded once
        self.reduces = False
        within = root.args[0]._shape if _last_axis_reduce(root) else root._shape
        expr = self._emit(root, within, top=True)
        self.source = (f"def segment({', '.join(f'p{k}' for k in range(len(self.leaves)))}):\n"
                       f"    return {expr}\n")
        self.out_form = (rows_cols(within)[0], 1) if _last_axis_reduce(root) else \
            rows_cols(root._shape)

    def _emit(self, node, within, top=False) -> str:
        if not isinstance(node, SymTensor):
            return _literal(node)
        if top or _fusable(node, within):
            if node.op in ops.EW:
                args = [self._emit(a, node._shape) for a in node.args]
                rounding = node.attrs.get("rounding")
                return ops.EW[node.op].format(*args, dtype=f"pl.{node.ptype.name}",
                                              rounding=f", {rounding!r}" if rounding else "")
            self.reduces = True
            arg = self._emit(node.args[0], node.args[0]._shape)
            return f"{ops.REDUCE[node.op]}({arg}, axis=1, keepdims=True)"
        return self._leaf(node, within)

    def _leaf(self, node, within) -> str:
        view = seen_as(node._shape, within)
        key = (id(node), view, tuple(within))
        if key not in self._named:
            full = None
            if view is None:        # a broadcast over a leading axis: copied out on the host
                full = tuple(within[:-1]) + (node._shape[-1],)
                view = rows_cols(full)
            self._named[key] = f"p{len(self.leaves)}"
            self.leaves.append((node, view, full))
        return self._named[key]

    def arrays(self, evaluate) -> list:
        """The leaves' rank-2 arrays, ``evaluate`` giving each leaf node's array."""
        out = []
        for node, view, full in self.leaves:
            array = evaluate(node)
            if full is not None:
                array = np.ascontiguousarray(np.broadcast_to(array, full))
            out.append(np.reshape(array, view))
        return out

    def tile(self, vec_tile) -> tuple:
        rows, cols = self.out_form
        vec = tuple(vec_tile or DEFAULT_VEC_TILE)
        tm = max(1, min(rows, math.prod(vec[:-1]) if len(vec) > 1 else 1))
        tn = cols if self.reduces else max(1, min(cols, vec[-1]))
        return (tm, tn)


def run_tile_op(source: str, arrays: list, tile: tuple, what: str) -> np.ndarray:
    """Run the one-function tile op ``source`` on rank-2 ``arrays`` cut into ``tile``s."""
    key = (source, tuple((a.shape, str(a.dtype)) for a in arrays), tile)
    module = _MODULES.get(key)
    if module is None:
        module = _fitting(source, arrays, tile, what)
        _MODULES[key] = module
        if len(_MODULES) > _MAX_MODULES:
            _MODULES.popitem(last=False)
    else:
        _MODULES.move_to_end(key)
    inputs = {f"p{k}": np.ascontiguousarray(a) for k, a in enumerate(arrays)}
    return module.run(inputs).numpy()


def _fitting(source, arrays, tile, what):
    """The module of the fused op ``source`` for the largest tile up to ``tile`` that fits."""
    return fit_tile(lambda t: _compile(source, arrays, t, what), tile, what)


def fit_tile(build, tile, what, whole_cols=False):
    """``build(t)`` for the largest tile ``t`` up to ``tile`` that fits on-chip: CANN's tile
    shapes assume its buffer reuse, so a tile PyPTO cannot hold is halved (rows first; its
    columns too unless ``whole_cols``) until it fits, with a warning in CANN's terms (CANN's
    own examples must run unchanged, so this is not an error); only a tile that cannot shrink
    further and still overflows is an error, in CANN's terms."""
    first_error, wanted = None, tile
    while True:
        try:
            result = build(tile)
        except CompilationError as e:
            if "overflow" not in str(e):
                raise
            first_error = first_error or e
            tile = _halved(tile, whole_cols)
            if tile is None:
                break
            continue
        if tile != wanted:
            warnings.warn(
                f"pypto.frontend {what}: the tile shape's {wanted[0]} x {wanted[1]} elements (the "
                f"set_vec_tile_shapes / set_cube_tile_shapes axes, leading ones multiplied) do "
                f"not fit the 910B's on-chip buffers with the buffers PyPTO keeps alive for "
                f"this fused op (CANN: 'in/output total size exceeds MEM_UB size'; CANN reuses "
                f"buffers PyPTO does not), so it ran {tile[0]} x {tile[1]} tiles instead; set "
                f"that tile shape to silence this. Compiler: {_first_line(first_error)}",
                TileShapeWarning, stacklevel=2)
        return result
    raise ValueError(f"pypto.frontend {what}: even one row of the tile shape does not fit the "
                     f"910B's on-chip buffers (CANN: 'in/output total size exceeds MEM_UB "
                     f"size'); the rows or the reduced axis are too long. Compiler: "
                     f"{first_error}") from None


def _halved(tile, whole_cols):
    """The next smaller tile to try, or None."""
    rows, cols = tile
    if rows > 1:
        return (max(1, rows // 2), cols)
    if whole_cols or cols == 1:
        return None
    return (1, max(1, cols // 2))


class TileShapeWarning(UserWarning):
    """A CANN tile shape PyPTO had to shrink to fit on-chip memory."""


def _first_line(error) -> str:
    return str(error).strip().splitlines()[0]


def _compile(source, arrays, tile, what):
    fn = define(source, {"pl": pl}, source[4:source.index("(")], "pypto.frontend")
    graph = TensorGraph(name=f"cann_{what}")
    leaves = [graph.placeholder(a.shape, a.dtype, name=f"p{k}") for k, a in enumerate(arrays)]
    tile_map(tile_op(fn), leaves, tile_size=tile)
    return compile_graph(graph)


def matmul(node, a, b, cube_tile, vec_tile) -> np.ndarray:
    """``pypto.matmul`` on 2-D operands, batch axes looped on the host; a transposed float32
    operand is transposed by a kernel first (A2/A3's float32 L1 fractal has no transposed
    view)."""
    at, bt = node.attrs["a_trans"], node.attrs["b_trans"]
    if at and a.dtype == np.float32:
        a, at = _swap_last(a, vec_tile), False
    if bt and b.dtype == np.float32:
        b, bt = _swap_last(b, vec_tile), False
    source = (f"def mm(p0, p1):\n    return pl.matmul(p0, p1, a_trans={at}, b_trans={bt}, "
              f"out_dtype=pl.{node.ptype.name})\n")
    m, n = node._shape[-2:]
    bm, bn = (cube_tile[0][0], cube_tile[2][0]) if cube_tile else (64, 64)
    tile = (max(1, min(m, bm)), max(1, min(n, bn)))
    batch = node._shape[:-2]
    out = np.empty(node._shape, dtype=node.ptype.to_numpy())
    a = np.broadcast_to(a, batch + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    for index in np.ndindex(*batch):
        out[index] = run_tile_op(source, [a[index], b[index]], tile, "matmul")
    return out


def transpose(node, x, vec_tile) -> np.ndarray:
    """Swapping leading axes moves whole rows: data movement on the host. Swapping the last
    two axes is a ``pl.trans`` kernel. Swapping the last axis with an earlier one, ``i``, is
    the three swaps (i, r-2), (r-2, r-1), (i, r-2): host, kernel, host."""
    rank = len(node._shape)
    i, j = sorted(node.attrs["axes"])
    if j != rank - 1:
        return np.ascontiguousarray(np.swapaxes(x, i, j))
    if i == j:
        return x
    if i == rank - 2:
        return _swap_last(x, vec_tile)
    near = np.ascontiguousarray(np.swapaxes(x, i, rank - 2))
    return np.ascontiguousarray(np.swapaxes(_swap_last(near, vec_tile), i, rank - 2))


def _swap_last(x, vec_tile) -> np.ndarray:
    """``x`` with its last two axes swapped by a ``pl.trans`` kernel, leading axes looped."""
    shape = x.shape[:-2] + (x.shape[-1], x.shape[-2])
    out = np.empty(shape, dtype=x.dtype)
    tile = tuple(vec_tile[-2:]) if vec_tile and len(vec_tile) >= 2 else (32, 32)
    tile = (min(tile[0], shape[-2]), min(tile[1], shape[-1]))
    for index in np.ndindex(*shape[:-2]):
        out[index] = run_tile_op("def tr(p0):\n    return pl.trans(p0)\n", [x[index]], tile,
                                 "transpose")
    return out


def first_axis_reduce(node, x, vec_tile, shape=None) -> np.ndarray:
    """A reduction over axis 0 of ``x`` seen as (that axis, the rest)."""
    view = x.reshape(x.shape[0], -1)
    tn = min(view.shape[1], (vec_tile or DEFAULT_VEC_TILE)[-1])
    source = (f"def col(p0):\n    return {ops.REDUCE[node.op]}(p0, axis=0, keepdims=True)\n")
    return run_tile_op(source, [view], (1, tn), "reduce").reshape(shape or node._shape)
