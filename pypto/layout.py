"""The Ascend data layouts, and exact converters to and from them for numpy arrays and torch
tensors (each returns the kind it is given, contiguous; the data is copied).

C0 is 32 bytes of elements (16 for float16/bfloat16, 8 for float32, 32 for int8): one DMA
burst and one row of a cube fractal. M0 = N0 = 16 is the cube's fractal height.

- **NC1HWC0** (activations): ``(N, C, H, W)`` → ``(N, C1, H, W, C0)`` with ``C1 =
  ceil(C / C0)``; element ``(n, c, h, w)`` is at ``[n, c // C0, h, w, c % C0]``, the
  channels past ``C`` are zero. ``from_nc1hwc0(x, channels=C)`` drops them again.
- **NZ** (FRACTAL_NZ, the cube's matrix layout): ``(..., M, N)`` → ``(..., N1, M1, M0,
  C0)`` with ``M1 = ceil(M / 16)``, ``N1 = ceil(N / C0)``: the matrix cut into 16 × C0
  fractals, the fractals column by column ("N"), each fractal row by row ("Z"); element
  ``(m, n)`` is at ``[n // C0, m // 16, m % 16, n % C0]``.
- **FRACTAL_Z** (convolution weights): ``(Cout, Cin, KH, KW)`` → ``(C1 * KH * KW, N1, N0,
  C0)`` with ``C1 = ceil(Cin / C0)``, ``N1 = ceil(Cout / 16)``; element ``(o, i, kh, kw)`` is at
  ``[(i // C0) * KH * KW + kh * KW + kw, o // 16, o % 16, i % C0]``.

These are CANN's definitions (its format names: ``NC1HWC0``, ``FRACTAL_NZ``, ``FRACTAL_Z``).

- **INT4** (public also as ``pypto.packed_int4``): two signed 4-bit values per byte, low nibble
  first, each row packed on its own; ``int4_tensor`` tags the bytes for a kernel.

``as_array`` is how every layer sees a tensor argument's memory (numpy, a ``pypto.Tensor``,
a torch CPU tensor, ``__array_interface__`` or DLPack, never copied): it is here, with the
formats, so that they and everything above read arguments alike.
"""
from __future__ import annotations

import math

import numpy as np

from .language import dtypes as dt

M0 = N0 = 16                # the cube's fractal height / width in rows
BURST_BYTES = 32            # C0 in bytes

# layout -> the tensor rank it implies (None: any rank; NZ: at least 4, its batch in front)
LAYOUT_RANKS = {"ND": None, "NCHW": 4, "NHWC": 4, "NC1HWC0": 5, "NZ": None, "FRACTAL_Z": 4}


def c0_for(dtype) -> int:
    """Elements in 32 bytes of ``dtype`` (numpy, torch or PyPTO dtype)."""
    return BURST_BYTES // dt.from_any(dtype).itemsize


# -- array-kind neutral helpers (numpy or torch) ----------------------------------------------

def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


def _pad_to(x, axis: int, size: int):
    """``x`` zero-padded at the end of ``axis`` to ``size``."""
    extra = size - x.shape[axis]
    if extra == 0:
        return x
    if _is_torch(x):
        import torch  # lazy: torch loads on first use, never with pypto
        shape = list(x.shape)
        shape[axis] = extra
        return torch.cat([x, x.new_zeros(shape)], dim=axis)
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, extra)
    return np.pad(x, widths)


def _permute(x, order):
    return x.permute(*order) if _is_torch(x) else x.transpose(order)


def _contiguous(x):
    return x.contiguous() if _is_torch(x) else np.ascontiguousarray(x)


def _dtype(x):
    return x.dtype


def _rank(x, rank: int, what: str, shape_text: str):
    if len(x.shape) != rank:
        raise ValueError(f"{what} takes a rank-{rank} {shape_text} tensor, got shape "
                         f"{tuple(x.shape)}")


# -- NC1HWC0 ------------------------------------------------------------------------------------

def to_nc1hwc0(x, c0: int | None = None):
    """``(N, C, H, W)`` → ``(N, C1, H, W, C0)``; channels padded with zeros to C1 * C0."""
    _rank(x, 4, "to_nc1hwc0", "(N, C, H, W)")
    c0 = c0 or c0_for(_dtype(x))
    n, c, h, w = x.shape
    c1 = math.ceil(c / c0)
    x = _pad_to(x, 1, c1 * c0).reshape(n, c1, c0, h, w)
    return _contiguous(_permute(x, (0, 1, 3, 4, 2)))


def from_nc1hwc0(x, channels: int):
    """``(N, C1, H, W, C0)`` → ``(N, channels, H, W)`` (the padding channels dropped)."""
    _rank(x, 5, "from_nc1hwc0", "(N, C1, H, W, C0)")
    n, c1, h, w, c0 = x.shape
    if not 0 < channels <= c1 * c0:
        raise ValueError(f"from_nc1hwc0(channels={channels}): a tensor of C1 = {c1} groups of "
                         f"C0 = {c0} holds 1 to {c1 * c0} channels")
    x = _permute(x, (0, 1, 4, 2, 3)).reshape(n, c1 * c0, h, w)
    return _contiguous(x[:, :channels])


# -- NZ -------------------------------------------------------------------------------------------

def to_nz(x, c0: int | None = None):
    """``(..., M, N)`` → ``(..., N1, M1, 16, C0)``; rows padded to 16s, columns to C0s."""
    if len(x.shape) < 2:
        raise ValueError(f"to_nz takes a matrix (..., M, N), got shape {tuple(x.shape)}")
    c0 = c0 or c0_for(_dtype(x))
    *batch, m, n = x.shape
    m1, n1 = math.ceil(m / M0), math.ceil(n / c0)
    x = _pad_to(_pad_to(x, len(x.shape) - 2, m1 * M0), len(x.shape) - 1, n1 * c0)
    b = len(batch)
    x = x.reshape(*batch, m1, M0, n1, c0)
    return _contiguous(_permute(x, (*range(b), b + 2, b, b + 1, b + 3)))


def from_nz(x, shape):
    """``(..., N1, M1, 16, C0)`` → the ``(..., M, N)`` matrix of ``shape`` (padding dropped)."""
    if len(x.shape) < 4:
        raise ValueError(f"from_nz takes (..., N1, M1, 16, C0), got shape {tuple(x.shape)}")
    *batch, n1, m1, m0, c0 = x.shape
    m, n = shape[-2], shape[-1]
    if tuple(shape[:-2]) != tuple(batch) or m > m1 * m0 or n > n1 * c0:
        raise ValueError(f"from_nz(shape={tuple(shape)}): an NZ tensor of shape "
                         f"{tuple(x.shape)} holds (..., <= {m1 * m0}, <= {n1 * c0}) with "
                         f"batch {tuple(batch)}")
    b = len(batch)
    x = _permute(x, (*range(b), b + 1, b + 2, b, b + 3)).reshape(*batch, m1 * m0, n1 * c0)
    return _contiguous(x[..., :m, :n])


# -- FRACTAL_Z ----------------------------------------------------------------------------------

def to_fractal_z(w, c0: int | None = None):
    """Convolution weights ``(Cout, Cin, KH, KW)`` → ``(C1 * KH * KW, N1, 16, C0)``."""
    _rank(w, 4, "to_fractal_z", "(Cout, Cin, KH, KW)")
    c0 = c0 or c0_for(_dtype(w))
    cout, cin, kh, kw = w.shape
    c1, n1 = math.ceil(cin / c0), math.ceil(cout / N0)
    w = _pad_to(_pad_to(w, 0, n1 * N0), 1, c1 * c0).reshape(n1, N0, c1, c0, kh, kw)
    w = _permute(w, (2, 4, 5, 0, 1, 3))             # (C1, KH, KW, N1, N0, C0)
    return _contiguous(w.reshape(c1 * kh * kw, n1, N0, c0))


def from_fractal_z(x, shape):
    """``(C1 * KH * KW, N1, 16, C0)`` → the ``(Cout, Cin, KH, KW)`` weights of ``shape``."""
    _rank(x, 4, "from_fractal_z", "(C1 * KH * KW, N1, 16, C0)")
    cout, cin, kh, kw = shape
    rows, n1, n0, c0 = x.shape
    c1 = math.ceil(cin / c0)
    if rows != c1 * kh * kw or cout > n1 * n0:
        raise ValueError(f"from_fractal_z(shape={tuple(shape)}): a FRACTAL_Z tensor of shape "
                         f"{tuple(x.shape)} does not hold it (expected {c1 * kh * kw} rows "
                         f"and >= {cout} output channels)")
    x = _permute(x.reshape(c1, kh, kw, n1, n0, c0), (3, 4, 0, 5, 1, 2))
    x = x.reshape(n1 * n0, c1 * c0, kh, kw)
    return _contiguous(x[:cout, :cin])


# -- layout-tagged kernel arguments ---------------------------------------------------------------
#
# A kernel meets a tensor in a non-ND layout through a LayoutTensor: the physical array (what
# the converters above return) tagged with its layout and its logical shape. Inside the kernel
# ``x.shape`` is the logical shape and ``pl.load`` takes logical coordinates; the compiled code
# reads the physical array the way the chip's transfers do (docs/language.md, "Layouts").

KERNEL_LAYOUTS = ("NZ", "NC1HWC0")


def physical_shape(layout: str, shape, dtype) -> tuple:
    """The shape of the array that holds a tensor of logical ``shape`` in ``layout``."""
    c0 = c0_for(dtype)
    if layout == "NZ":
        m, n = shape
        return (math.ceil(n / c0), math.ceil(m / M0), M0, c0)
    if layout == "NC1HWC0":
        n, c, h, w = shape
        return (n, math.ceil(c / c0), h, w, c0)
    raise ValueError(f"layout must be one of {', '.join(KERNEL_LAYOUTS)}, got {layout!r}")


class LayoutTensor:
    """A physical array in ``layout`` holding a tensor of logical ``shape``.

    ``data`` is the physical array (C-contiguous, as ``to_nz``/``to_nc1hwc0`` return it);
    the launcher passes it to the kernel, so the kernel reads the caller's memory. For
    NC1HWC0 the array is handed over as its ``(N, C1, 1, H*W, C0)`` view: one image's pixels
    of one channel group are one contiguous run, which is how the load's window is cut
    (``pl.load`` over pixels that wrap from one row of the image to the next)."""

    __slots__ = ("data", "layout", "shape", "_data")

    def __init__(self, data, layout: str, shape):
        self.data, self.layout, self.shape = data, layout, tuple(int(s) for s in shape)
        if layout == "NC1HWC0":
            n, c1, h, w, c0 = data.shape
            self._data = data.reshape(n, c1, 1, h * w, c0)      # a view: same memory
        else:
            self._data = data

    @property
    def dtype(self):
        return self.data.dtype

    def __repr__(self) -> str:
        return (f"LayoutTensor({self.layout}, logical shape {self.shape}, physical "
                f"{tuple(self.data.shape)} {self.data.dtype})")


def as_layout(data, layout: str, shape) -> LayoutTensor:
    """Tag the physical array ``data`` (numpy or a torch CPU tensor) as holding a tensor of
    logical ``shape`` in ``layout`` ("NZ": shape (M, K), data (K1, M1, 16, C0);
    "NC1HWC0": shape (N, C, H, W), data (N, C1, H, W, C0)), for passing to a kernel."""
    if not isinstance(layout, str) or layout.upper() not in KERNEL_LAYOUTS:
        raise ValueError(f"as_layout(layout=...) must be one of {', '.join(KERNEL_LAYOUTS)}, "
                         f"got {layout!r}")
    layout = layout.upper()
    rank = 2 if layout == "NZ" else 4
    if not is_logical_shape(shape, (rank,)):
        what = "(M, K)" if layout == "NZ" else "(N, C, H, W)"
        raise ValueError(f"as_layout({layout!r}, shape=...) takes the logical shape {what} as "
                         f"{rank} positive ints, got {shape!r}")
    arr = as_array(data)
    if arr is None:
        raise TypeError(f"as_layout: data must be an array, got {type(data).__name__}")
    return tag(arr, layout, shape, physical_shape(layout, shape, arr.dtype), "as_layout",
               f"a {layout} tensor of logical shape {tuple(shape)} and dtype {arr.dtype} is "
               f"held in an array", f"convert it with pypto.layout.to_{layout.lower()}(x)")


def is_logical_shape(shape, ranks) -> bool:
    """``shape`` is a tuple or list of positive ints whose length is one of ``ranks``."""
    return isinstance(shape, (tuple, list)) and len(shape) in ranks and all(
        isinstance(s, (int, np.integer)) and s > 0 for s in shape)


def tag(arr: np.ndarray, layout: str, shape, want: tuple, who: str, held: str,
        remedy: str) -> LayoutTensor:
    """``arr`` tagged as the ``layout`` tensor of logical ``shape`` (as_layout,
    int4_tensor), once kernels can read it in place with the strides of the physical
    shape ``want``: of exactly that shape and C-contiguous. The messages start with ``who``,
    say what ``held`` the tensor and end in ``remedy``, how to make such an array."""
    if tuple(arr.shape) != want:
        raise ValueError(f"{who}: {held} of shape {want}, got {tuple(arr.shape)} ({remedy})")
    if not arr.flags.c_contiguous:
        raise ValueError(f"{who}: the {layout} array must be C-contiguous ({remedy}), got "
                         f"strides {arr.strides}")
    return LayoutTensor(arr, layout, shape)


def nz(x) -> LayoutTensor:
    """``x`` (an (M, K) matrix) converted to NZ and tagged for a kernel."""
    return as_layout(to_nz(x), "NZ", tuple(x.shape))


def nc1hwc0(x) -> LayoutTensor:
    """``x`` (an (N, C, H, W) tensor) converted to NC1HWC0 and tagged for a kernel."""
    return as_layout(to_nc1hwc0(x), "NC1HWC0", tuple(x.shape))


def load_window(layout: str, data: np.ndarray, shape, offsets, tile_shape):
    """The meaning of ``pl.load`` from a layout tensor (the interpreter's definition; the
    native lowering and the chip's transfers do the same): ``(tile_index, values)`` pairs of
    numpy index arrays, positions outside the tensor left out (they get the padding value).

    NZ, logical (M, K), offsets (r, k), tile (BM, BK): element (i, j) is logical
    (r + i, k + j), read from ``data[(k+j) // C0, (r+i) // 16, (r+i) % 16, (k+j) % C0]``
    where it lies inside the physical array (rows up to M1 * 16, columns up to K1 * C0: the
    padding of a converted tensor, zeros, is read as stored). r must be a multiple of 16 and
    k of C0: the transfer moves whole fractals.

    NC1HWC0, logical (N, C, H, W), offsets (n, c, h, w), tile (P, CB): row i is pixel
    q = h * W + w + i of image n (pixels run along W, then on to the next row), column j is
    channel c + j; they must stay in c's group of C0 channels (c % C0 + j < C0: one 32-byte
    block per pixel). Pixels outside [0, H * W) are padding.

    INT4, logical (..., n): the window of the unpacked values (``_inside``)."""
    if layout == INT4:
        return _inside(unpack(data, shape[-1]).reshape(shape), offsets, tile_shape)
    rows, cols = tile_shape
    i = np.arange(rows)[:, None]
    j = np.arange(cols)[None, :]
    if layout == "NZ":
        r, k = (int(o) for o in offsets)
        k1, m1, m0, c0 = data.shape
        if r % m0 or k % c0:
            raise IndexError(f"load from an NZ tensor at offsets ({r}, {k}): an NZ transfer "
                             f"moves whole {m0} x {c0} fractals, so the row offset must be a "
                             f"multiple of {m0} and the column offset of {c0}")
        gr, gc = r + i, k + j
        inside = (gr >= 0) & (gr < m1 * m0) & (gc >= 0) & (gc < k1 * c0)
        inside = np.broadcast_to(inside, (rows, cols))
        ti = np.nonzero(inside)
        gr, gc = np.broadcast_to(gr, (rows, cols))[ti], np.broadcast_to(gc, (rows, cols))[ti]
        return ti, data[gc // c0, gr // m0, gr % m0, gc % c0]
    if layout == "NC1HWC0":
        n, c, h, w = (int(o) for o in offsets)
        width = shape[3]
        pixels = data.reshape(data.shape[0], data.shape[1], -1, data.shape[-1])
        nn, c1s, hw, c0 = pixels.shape
        group, cc = c // c0, c % c0
        if not (0 <= n < nn and 0 <= group < c1s):      # the whole window is padding
            return (np.zeros(0, np.intp), np.zeros(0, np.intp)), np.zeros(0, data.dtype)
        q = h * width + w + i
        ch = cc + j
        inside = np.broadcast_to((q >= 0) & (q < hw) & (ch < c0), (rows, cols))
        ti = np.nonzero(inside)
        q, ch = np.broadcast_to(q, (rows, cols))[ti], np.broadcast_to(ch, (rows, cols))[ti]
        return ti, pixels[n, group, q, ch]
    raise ValueError(f"no kernel loads from layout {layout!r}")


# -- INT4: packed int4 tensors ------------------------------------------------------------------
#
# Element ``[..., 2k]`` is the low nibble of byte ``[..., k]`` and ``[..., 2k + 1]`` its high
# nibble (the order of torch's and ONNX's packed int4 and of ml_dtypes' ``int4`` packing); a
# row of odd length ``n`` ends in a byte whose high nibble is padding (kernels write 0 there).
# Each row is packed on its own, so the array holding a tensor of shape ``(..., n)`` has shape
# ``(..., ceil(n / 2))``: rows stay byte-aligned and a kernel's window of rows maps onto whole
# bytes. A kernel takes such a tensor as ``pypto.int4_tensor(packed, shape)`` (a
# ``LayoutTensor`` in the "INT4" layout: the caller's bytes, never copied); its tiles are
# ``pl.int4`` (storage only: convert them with ``.to(...)`` to compute). ``pack``/``unpack``
# convert on the host.

INT4 = "INT4"


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
    return tag(arr, INT4, shape, packed_shape(tuple(int(s) for s in shape)),
               "pypto.int4_tensor", f"an int4 tensor of shape {tuple(shape)} is held in bytes",
               "pypto.packed_int4.pack(x) makes them, two values a byte along the last axis")


def store_int4_window(data: np.ndarray, shape, offsets, tile: np.ndarray) -> None:
    """``pl.store``'s meaning for an int4 tensor (the interpreter's definition): the elements
    inside the tensor are written (wrapped to 4 bits), the rest of the bytes kept; the padding
    nibble of an odd row is 0."""
    values = unpack(data, shape[-1]).reshape(shape)
    where, _ = _inside(values, offsets, tile.shape)
    pos = tuple(w + int(o) for w, o in zip(where, offsets))
    values[pos] = ((tile[where].astype(np.int64) + 8) % 16 - 8).astype(np.int8)
    data[...] = pack(values.reshape(data.shape[:-1] + (shape[-1],))).view(data.dtype)


def _inside(values: np.ndarray, offsets, tile_shape):
    """(tile index, values) of the window of ``tile_shape`` at ``offsets`` inside ``values``."""
    idx = np.indices(tile_shape).reshape(len(tile_shape), -1)
    pos = [i + int(o) for i, o in zip(idx, offsets)]
    keep = np.ones(idx.shape[1], bool)
    for p, dim in zip(pos, values.shape):
        keep &= (p >= 0) & (p < dim)
    where = tuple(i[keep] for i in idx)
    return where, values[tuple(p[keep] for p in pos)]


# -- tensor arguments as arrays ---------------------------------------------------------------

def as_array(value):
    """A numpy view of ``value`` sharing its memory, or None if it is not a tensor: a numpy
    array, a torch CPU tensor (bfloat16 and float8 too, through ml_dtypes), a ``pypto.Tensor``
    (known by its ``__pypto_device_tensor__`` mark), an ``__array_interface__`` object or a
    DLPack producer."""
    if isinstance(value, np.ndarray):
        return _plain(value) if type(value) is not np.ndarray else _native(value)
    if type(value).__module__.startswith("torch"):
        return _from_torch(value)
    if getattr(type(value), "__pypto_device_tensor__", False):   # pypto.Tensor: no runtime import
        return value._data
    if hasattr(value, "__array_interface__"):
        return _native(np.asarray(value))
    if hasattr(value, "__dlpack__"):
        return _native(np.from_dlpack(value))
    return None


def argument_array(value, where: str):
    """``as_array(value)``, a refusal's reason prefixed with ``where`` (the argument)."""
    try:
        return as_array(value)
    except TypeError as e:
        raise TypeError(f"{where}: {e}") from None


def _plain(arr: np.ndarray) -> np.ndarray:
    """An ndarray subclass (``np.memmap``, a user's subclass) as its base-class view: the
    same memory, read and written in place. A masked array is refused: a kernel would
    ignore its mask."""
    if isinstance(arr, np.ma.MaskedArray):
        raise TypeError("it is a numpy masked array, and a kernel would read and write its "
                        "data ignoring the mask; pass arr.filled(value) (a copy with the "
                        "masked elements set) or arr.data (the raw values, in place)")
    return _native(arr.view(np.ndarray))


def _native(arr: np.ndarray) -> np.ndarray:
    """``arr`` if its elements are in the host's byte order; a big-endian (or other
    non-native) array is refused rather than converted, since a converted output would be
    a copy the caller never sees."""
    if not arr.dtype.isnative:
        return _not_native(arr)
    return arr


def _not_native(arr: np.ndarray):
    native = arr.dtype.newbyteorder("=")
    raise TypeError(f"it is an array of non-native byte order (dtype {arr.dtype.str!r}), "
                    "which kernels would read as native; convert it with "
                    f"x.astype({native.str!r}) or np.ascontiguousarray(x, "
                    "dtype=x.dtype.newbyteorder('=')) (and copy an output back after the "
                    "launch)")


def _from_torch(t):
    import torch  # lazy: torch loads only when a caller passes torch tensors
    if t.device.type != "cpu":
        raise TypeError(f"it is a torch tensor on device '{t.device}', and PyPTO runs kernels "
                        "on the host's simulated AI Cores, which read host memory: pass a CPU "
                        f"tensor (tensor.cpu()){device_hint(t.device.type)}")
    t = t.detach()
    name = str(t.dtype).removeprefix("torch.")
    if name in _VIEWED_FROM_TORCH:      # numpy has no such dtype: the bits, seen by ml_dtypes
        bits = getattr(torch, _VIEWED_FROM_TORCH[name])
        return t.view(bits).numpy().view(dt.BY_NAME[name].to_numpy())
    return t.numpy()


# torch dtypes ``Tensor.numpy()`` refuses → a same-width integer dtype it takes
_VIEWED_FROM_TORCH = {"bfloat16": "int16", "float8_e4m3fn": "uint8", "float8_e5m2": "uint8"}


def device_hint(device: str) -> str:
    """What to add to the error for a torch tensor on ``device`` (meta, npu), else ""."""
    if device == "meta":
        return ("; a meta tensor has no data (inside torch.compile or FakeTensorMode, call the "
                "kernel through pypto.register_op, whose fake implementation handles them)")
    if device == "npu":
        return ("; launching on a real Ascend NPU needs the CANN runtime, which this PyPTO "
                "does not have (the kernel's .pto is what it would run: kernel.compile(...)"
                ".asm['pto'])")
    return ""
