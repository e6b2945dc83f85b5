"""Packed int4 tensors: two signed 4-bit values per byte, low nibble first.

Element ``[..., 2k]`` is the low nibble of byte ``[..., k]`` and ``[..., 2k + 1]`` its high
nibble (the order of torch's and ONNX's packed int4 and of ml_dtypes' ``int4`` packing); a
row of odd length ``n`` ends in a byte whose high nibble is padding (kernels write 0 there).
Each row is packed on its own, so the array holding a tensor of shape ``(..., n)`` has shape
``(..., ceil(n / 2))``: rows stay byte-aligned and a kernel's window of rows maps onto whole
bytes.

A kernel takes such a tensor as ``pypto.int4_tensor(packed, shape)`` (a ``LayoutTensor`` in the
"INT4" layout: the caller's bytes, never copied); its tiles are ``pl.int4`` (storage only:
convert them with ``.to(...)`` to compute). ``pack``/``unpack`` convert on the host.
"""
from __future__ import annotations

import numpy as np

from .layout import LayoutTensor, is_logical_shape, tag

LAYOUT = "INT4"


def packed_shape(shape) -> tuple:
    """The byte array's shape for a tensor of logical ``shape``."""
    *lead, n = shape
    return (*lead, -(-n // 2))


def pack(values) -> np.ndarray:
    """Integers in [-8, 7] (any int dtype, or ml_dtypes.int4), rows of the last axis packed
    low nibble first into uint8."""
    v = np.asarray(values).astype(np.int8)
    if v.ndim == 0:
        raise ValueError("pack: give an array of at least one dimension")
    if v.size and (v.min() < -8 or v.max() > 7):
        raise ValueError(f"pack: int4 values are in [-8, 7], got {v.min()} .. {v.max()}")
    if v.shape[-1] % 2:
        v = np.concatenate([v, np.zeros(v.shape[:-1] + (1,), np.int8)], axis=-1)
    nibbles = v.view(np.uint8) & 0xF
    return np.ascontiguousarray(nibbles[..., 0::2] | (nibbles[..., 1::2] << 4))


def unpack(packed, n: int) -> np.ndarray:
    """The int8 values of a packed array whose rows hold ``n`` elements each."""
    b = np.asarray(packed).view(np.uint8)
    lo = (b & 0xF).astype(np.int8)
    hi = (b >> 4).astype(np.int8)
    both = np.stack([lo, hi], axis=-1).reshape(b.shape[:-1] + (2 * b.shape[-1],))[..., :n]
    return np.where(both > 7, both - 16, both).astype(np.int8)


def int4_tensor(data, shape) -> LayoutTensor:
    """Tag ``data``, a C-contiguous uint8 (or int8) array of packed bytes, as an int4 tensor of
    logical ``shape`` for a kernel."""
    from .runtime.args import as_array
    arr = as_array(data)
    if arr is None:
        raise TypeError(f"pypto.int4_tensor: data must be an array of packed bytes, got "
                        f"{type(data).__name__}")
    if arr.dtype not in (np.uint8, np.int8):
        raise TypeError(f"pypto.int4_tensor: data must hold packed bytes (uint8 or int8), got a "
                        f"{arr.dtype} array; pack int values with pypto.packed_int4.pack(x)")
    if not is_logical_shape(shape, (1, 2)):
        raise ValueError(f"pypto.int4_tensor: shape must be the logical shape, 1 or 2 positive "
                         f"ints, got {shape!r}")
    return tag(arr, LAYOUT, shape, packed_shape(tuple(int(s) for s in shape)),
               "pypto.int4_tensor", f"an int4 tensor of shape {tuple(shape)} is held in bytes",
               "pypto.packed_int4.pack(x) makes them, two values a byte along the last axis")


def load_window(data: np.ndarray, shape, offsets, tile_shape):
    """``pl.load``'s meaning for an int4 tensor (the interpreter's definition): the window
    of the unpacked values, as ``(tile_index, values)`` of the elements inside the tensor."""
    values = unpack(data, shape[-1]).reshape(shape)
    return _inside(values, offsets, tile_shape)


def store_window(data: np.ndarray, shape, offsets, tile: np.ndarray) -> None:
    """``pl.store``'s meaning: the elements inside the tensor are written (wrapped to 4
    bits), the rest of the bytes kept; the padding nibble of an odd row is 0."""
    values = unpack(data, shape[-1]).reshape(shape)
    where, _ = _inside(values, offsets, tile.shape)
    pos = tuple(w + int(o) for w, o in zip(where, offsets))
    values[pos] = ((tile[where].astype(np.int64) + 8) % 16 - 8).astype(np.int8)
    data[...] = pack(values.reshape(data.shape[:-1] + (shape[-1],))).view(data.dtype)


def _inside(values: np.ndarray, offsets, tile_shape):
    idx = np.indices(tile_shape).reshape(len(tile_shape), -1)
    pos = [i + int(o) for i, o in zip(idx, offsets)]
    keep = np.ones(idx.shape[1], bool)
    for p, dim in zip(pos, values.shape):
        keep &= (p >= 0) & (p < dim)
    where = tuple(i[keep] for i in idx)
    return where, values[tuple(p[keep] for p in pos)]
