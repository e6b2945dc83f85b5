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
        import torch
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
