"""Turning call arguments into arrays without copying: numpy arrays, ``__array_interface__``
objects and DLPack producers (torch CPU tensors included, bfloat16 too)."""
from __future__ import annotations

import numpy as np

from ..language import dtypes as dt


def as_array(value):
    """A numpy view of ``value`` sharing its memory, or None if it is not a tensor."""
    if isinstance(value, np.ndarray):
        return value
    from .device import Tensor
    if isinstance(value, Tensor):
        return value._data
    if type(value).__module__.startswith("torch"):
        return _from_torch(value)
    if hasattr(value, "__array_interface__"):
        return np.asarray(value)
    if hasattr(value, "__dlpack__"):
        return np.from_dlpack(value)
    return None


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


def _from_torch(t):
    import torch
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
    if device == "meta":
        return ("; a meta tensor has no data (inside torch.compile or FakeTensorMode, call the "
                "kernel through pypto.register_op, whose fake implementation handles them)")
    if device == "npu":
        return ("; launching on a real Ascend NPU needs the CANN runtime, which this PyPTO "
                "does not have (the kernel's .pto is what it would run: kernel.compile(...)"
                ".asm['pto'])")
    return ""
