"""Arguments as a kernel is compiled for them: stand-in arrays of a shape and dtype (nothing of
the tensor's size allocated), and the torch dtype of a PyPTO dtype for the outputs handed back
to torch. (Views of real arguments are ``layout.as_array``.)"""
from __future__ import annotations

import numpy as np

from ..language import dtypes as dt


def standin(shape, dtype, strides=None) -> np.ndarray:
    """A read-only array of ``shape`` and ``dtype`` (C-contiguous, or ``strides`` in
    elements) over one element of memory: enough to specialise and compile a kernel, nothing
    of the tensor's size allocated."""
    dtype = dt.from_any(dtype).to_numpy()
    shape = tuple(int(n) for n in shape)
    if strides is None:
        strides, step = [], 1
        for n in reversed(shape):
            strides.insert(0, step)
            step *= n
    return np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape,
                                           tuple(s * dtype.itemsize for s in strides),
                                           writeable=False)


def to_torch(dtype):
    """The torch dtype of a PyPTO (or numpy, or torch) dtype (by name: both spell the types
    alike)."""
    import torch  # lazy: torch loads only for callers that hand tensors to torch
    d = dt.from_any(dtype)
    found = getattr(torch, d.name, None)
    if not isinstance(found, torch.dtype):
        raise TypeError(f"PyPTO dtype {d} has no torch counterpart")
    return found
