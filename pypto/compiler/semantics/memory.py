"""Moving tiles between global memory and the core: which block this is (program_id), tile loads
and stores at offsets, and indexed gather / scatter. The checks here are what a tensor's layout
and dtype allow.
"""
from __future__ import annotations

from ...language import dtypes as dt
from ...layout import M0, c0_for
from ..ir import ScalarType, TileType, Value
from .scalar import INDEX, to_index
from .shapes import tile_shape
from .tile import cast, full
from .values import describe, is_number, is_tile


def _axis(axis) -> int:
    if not isinstance(axis, int) or isinstance(axis, bool) or not 0 <= axis <= 2:
        raise ValueError(f"axis must be the constant 0, 1 or 2, got {axis!r}")
    return axis


def program_id(b, axis=0):
    return b.emit("pto.program_id", [], [ScalarType(INDEX)], {"axis": _axis(axis)}).result


def num_programs(b, axis=0):
    return b.emit("pto.num_programs", [], [ScalarType(INDEX)], {"axis": _axis(axis)}).result


def _tensor(x, fn):
    if not (isinstance(x, Value) and x.is_tensor):
        raise TypeError(f"{fn}(): the first argument must be a tensor parameter of the kernel, "
                        f"got {describe(x)}")
    return x


def _offsets(b, tensor, offsets, fn):
    if not isinstance(offsets, (tuple, list)):
        offsets = (offsets,)
    if len(offsets) != tensor.type.rank:
        raise ValueError(f"{fn}(): {len(offsets)} offsets given for a rank-"
                         f"{tensor.type.rank} tensor")
    return [to_index(b, o, f"{fn}() offset") for o in offsets]


# Triton's keywords of tl.load / tl.store, and what PyPTO has instead: a window's offsets and
# shape, masked by the tensor's own extent (docs/language.md, "Memory")
_WINDOW = ("give the window as offsets=(...) (one per tensor dimension, ints or runtime "
           "scalars) and shape=(...) (the tile's: positive compile-time ints, one per tensor "
           "dimension), e.g. pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,), padding=0.0)")
TRITON_KEYWORDS = {
    "load": {
        "mask": "pl.load() has no mask= (Triton's): the tensor's own shape is the mask. "
                "Elements of the window past the tensor's edge read the padding= value "
                "(padding=0 by default, e.g. padding=float('-inf') before a max; padding=None "
                "promises the window lies inside). G" + _WINDOW[1:] + ". For any other condition, "
                "load and then pl.where(cond, t, value)",
        "other": "pl.load() has no other= (Triton's): padding= is the value read past the "
                 "tensor's edge (a compile-time number, 0 by default); " + _WINDOW,
    },
    "store": {
        "mask": "pl.store() has no mask= (Triton's): the tensor's own shape is the mask, and "
                "elements of the value tile past the tensor's edge are not written. Give the "
                "window as offsets=(...) with value= a tile (its shape is the window's: "
                "positive compile-time ints, one per tensor dimension), e.g. pl.store(out, "
                "offsets=(pid * BLOCK,), value=t). To leave elements inside the tensor "
                "unchanged, load them and store pl.where(cond, t, old)",
    },
}


def load(b, tensor, offsets, shape, padding=0):
    tensor = _tensor(tensor, "load")
    shape = tile_shape(shape)
    if tensor.type.layout != "ND":
        _layout_window(tensor.type, shape)
    elif len(shape) != tensor.type.rank:
        raise ValueError(f"load(): tile shape {shape} has rank {len(shape)} but the tensor has "
                         f"rank {tensor.type.rank}")
    if padding is not None and not is_number(padding):
        raise TypeError(f"load(): padding must be a compile-time number, or None for a "
                        f"window inside the tensor, got {describe(padding)}")
    offs = _offsets(b, tensor, offsets, "load")
    return b.emit("tile.load", [tensor] + offs, [TileType(tensor.type.dtype, shape)],
                  {"shape": shape, "padding": padding}).result


def _layout_window(ty, shape):
    """The tile shapes a load from a layout tensor can have (pypto.layout.load_window says
    what they mean): NZ, whole 16 x C0 fractals; NC1HWC0, (pixels, channels) with at most
    C0 channels, one 32-byte block per pixel."""
    if ty.layout == "INT4":
        return _int4_window(shape)
    c0 = c0_for(ty.dtype)
    if len(shape) != 2:
        raise ValueError(f"load(): a load from a {ty.layout} tensor gives a 2-D tile, got "
                         f"shape {shape}")
    if ty.layout == "NZ" and (shape[0] % M0 or shape[1] % c0):
        raise ValueError(f"load(): a tile loaded from an NZ tensor is made of whole "
                         f"{M0} x {c0} fractals ({ty.dtype}), got shape {shape}; use a "
                         f"multiple of {M0} rows and of {c0} columns")
    if ty.layout == "NC1HWC0" and shape[1] > c0:
        raise ValueError(f"load(): a tile loaded from an NC1HWC0 tensor is (pixels, "
                         f"channels) with at most C0 = {c0} channels (one group of the C1 "
                         f"axis), got shape {shape}; load each group of {c0} channels "
                         "separately")


def _int4_window(shape):
    """A packed int4 window is whole bytes: an even number of columns."""
    if shape[-1] % 2:
        raise ValueError(f"a packed int4 tile has an even last dimension (two values per "
                         f"byte), got shape {shape}; round the block size up to an even number "
                         "(the tensor itself may have an odd length: its tail is padded)")


ATOMICS = (None, "add")
ATOMIC_DTYPES = (dt.float32, dt.float16, dt.bfloat16, dt.int32, dt.int64)


def store(b, tensor, offsets, value, atomic=None):
    tensor = _tensor(tensor, "store")
    if tensor.type.layout not in ("ND", "INT4"):
        raise ValueError(f"store(): the tensor is in the {tensor.type.layout} layout, and "
                         "kernels store into ND tensors only; store into an ND tensor and "
                         "convert it on the host (pypto.layout.to_"
                         f"{tensor.type.layout.lower()})")
    if atomic not in ATOMICS:
        raise ValueError(f"store(): atomic must be None or 'add', got {atomic!r}")
    if atomic and tensor.type.dtype not in ATOMIC_DTYPES:
        raise TypeError(f"store(atomic='add') supports {', '.join(map(str, ATOMIC_DTYPES))} "
                        f"tensors, not {tensor.type.dtype}")
    if not is_tile(value):
        hint = "; store a scalar as a one-element tile: pl.full((1,), value)" \
            if isinstance(value, Value) and value.is_scalar or is_number(value) else ""
        raise TypeError(f"store(): value must be a tile, got {describe(value)}{hint}")
    if len(value.type.shape) != tensor.type.rank:
        raise ValueError(f"store(): a tile of shape {value.type.shape} cannot be stored into a "
                         f"rank-{tensor.type.rank} tensor")
    if tensor.type.layout == "INT4":
        _int4_window(value.type.shape)
    offs = _offsets(b, tensor, offsets, "store")
    value = cast(b, value, tensor.type.dtype)   # stores convert to the tensor's dtype
    b.emit("tile.store", [tensor] + offs + [value], attrs={"atomic": atomic} if atomic else {})


# -- indexed memory access ------------------------------------------------------------------------

# value dtypes gather/scatter move: the ones A2/A3's scalar unit reads and writes in UB
# (TGETVAL / TSETVAL) and its vector unit keeps in tiles; 64-bit and bool tiles have no form
INDEXED_DTYPES = (dt.float16, dt.bfloat16, dt.float32, dt.int8, dt.uint8, dt.int16, dt.int32)


def _index_tile(indices, tensor, fn):
    """The index operand: an integer tile (at most 32 bits) of the tensor's rank, or a rank-1
    tile of row numbers for a rank-2 tensor (whole rows: ``rows_form``)."""
    if not is_tile(indices):
        raise TypeError(f"{fn}(): indices must be an integer tile, got {describe(indices)}")
    d = indices.type.dtype
    if d.bits > 32:
        raise TypeError(f"{fn}(): indices must be an int8/int16/int32 tile, got "
                        + dt.wide_tile_advice(d if d.is_int else dt.int64))
    if not d.is_int:
        raise TypeError(f"{fn}(): indices must be an int8/int16/int32 tile, got a {d} tile; "
                        f"convert them with indices.to(pl.int32)")
    if len(indices.type.shape) != tensor.type.rank and not rows_form(indices, tensor):
        raise ValueError(f"{fn}(): indices of shape {indices.type.shape} (rank "
                         f"{len(indices.type.shape)}) for a rank-{tensor.type.rank} tensor; "
                         "they must have the tensor's rank (torch.gather's rule), or be a "
                         "rank-1 tile of row numbers of a rank-2 tensor (whole rows, "
                         "torch.index_select's rule)")
    return indices


def rows_form(indices, tensor) -> bool:
    """A rank-1 index tile into a rank-2 tensor picks whole rows (``torch.index_select``)."""
    return len(indices.type.shape) == 1 and tensor.type.rank == 2


def _rows_axis(ax, fn):
    if ax != 0:
        raise ValueError(f"{fn}(): a rank-1 index tile picks rows (axis=0) only: a column "
                         "of a row-major tensor is not one contiguous transfer. Pick "
                         "columns with an index tile of the tensor's rank, or transpose the "
                         "tensor")


def _indexed_tensor(tensor, fn):
    tensor = _tensor(tensor, fn)
    if tensor.type.layout != "ND":
        raise ValueError(f"{fn}(): the tensor is in the {tensor.type.layout} layout; indexed "
                         "access takes ND tensors only")
    if tensor.type.dtype not in INDEXED_DTYPES:
        raise TypeError(f"{fn}(): a {tensor.type.dtype} tensor; indexed access moves "
                        f"{', '.join(map(str, INDEXED_DTYPES))} elements")
    return tensor


def _index_axis(axis, tensor, fn) -> int:
    rank = tensor.type.rank
    if not isinstance(axis, int) or isinstance(axis, bool) or not -rank <= axis < rank:
        raise ValueError(f"{fn}(): axis {axis!r} out of range for a rank-{rank} tensor "
                         f"(use 0{' or 1' if rank == 2 else ''})")
    return axis % rank


def _window_offsets(b, tensor, offsets, fn):
    if offsets is None:
        offsets = (0,) * tensor.type.rank
    return _offsets(b, tensor, offsets, fn)


def gather(b, tensor, indices, axis=0, offsets=None, padding=0, shape=None):
    tensor = _indexed_tensor(tensor, "gather")
    indices = _index_tile(indices, tensor, "gather")
    ax = _index_axis(axis, tensor, "gather")
    if not is_number(padding):
        raise TypeError(f"gather(): padding must be a compile-time number, got "
                        f"{describe(padding)}")
    out_shape = indices.type.shape
    if rows_form(indices, tensor):
        _rows_axis(ax, "gather")
        out_shape = _rows_shape(tensor, indices, shape)
    elif shape is not None and tile_shape(shape) != out_shape:
        raise ValueError(f"gather(): shape={shape} differs from the indices' shape "
                         f"{out_shape}, which is the result's; leave shape= out")
    offs = _window_offsets(b, tensor, offsets, "gather")
    return b.emit("tile.gather", [tensor, indices] + offs,
                  [TileType(tensor.type.dtype, out_shape)],
                  {"axis": ax, "padding": padding}).result


def _rows_shape(tensor, indices, shape) -> tuple:
    """The (rows, columns) a rank-1 index tile gathers: one row per index, and the columns
    ``shape`` gives, or else the tensor's whole rows."""
    rows = indices.type.shape[0]
    if shape is None:
        cols = (tensor.type.dims or (None, None))[1]
        if not isinstance(cols, int):
            raise ValueError("gather(): the tensor's row length is not a compile-time number; "
                             f"give the result's shape=({rows}, COLUMNS) (and offsets= for "
                             "where its columns start)")
        return rows, cols
    shape = tile_shape(shape)
    if len(shape) != 2 or shape[0] != rows:
        raise ValueError(f"gather(): shape={shape} for {rows} row indices; give "
                         f"shape=({rows}, COLUMNS)")
    return shape


SCATTER_REDUCE = (None, "add")


def scatter(b, tensor, indices, value, axis=0, offsets=None, reduce=None):
    tensor = _indexed_tensor(tensor, "scatter")
    indices = _index_tile(indices, tensor, "scatter")
    ax = _index_axis(axis, tensor, "scatter")
    if reduce not in SCATTER_REDUCE:
        raise ValueError(f"scatter(): reduce must be None or 'add', got {reduce!r}")
    if reduce and tensor.type.dtype not in ATOMIC_DTYPES:
        raise TypeError(f"scatter(reduce='add') supports {', '.join(map(str, ATOMIC_DTYPES))} "
                        f"tensors, not {tensor.type.dtype}")
    shape = indices.type.shape
    if rows_form(indices, tensor):
        _rows_axis(ax, "scatter")
        shape = (shape[0], value.type.shape[-1]) if is_tile(value) else \
            _rows_shape(tensor, indices, None)
    if is_tile(value):
        if value.type.shape != shape:
            want = (f"a ({shape[0]}, COLUMNS) tile, one row per index" if rows_form(
                indices, tensor) else "the indices' shape")
            raise ValueError(f"scatter(): value of shape {value.type.shape} for indices of "
                             f"shape {indices.type.shape}; the value must be {want}")
    elif is_number(value) or (isinstance(value, Value) and value.is_scalar):
        value = full(b, shape, value, tensor.type.dtype)
    else:
        raise TypeError(f"scatter(): value must be a tile or a number, got {describe(value)}")
    offs = _window_offsets(b, tensor, offsets, "scatter")
    value = cast(b, value, tensor.type.dtype)      # stores convert to the tensor's dtype
    attrs = {"axis": ax}
    if reduce:
        attrs["reduce"] = reduce
    b.emit("tile.scatter", [tensor, indices, value] + offs, attrs=attrs)
