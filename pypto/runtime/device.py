"""Devices and device-resident tensors, as the seed's API spells them.

The simulated NPU's global memory is host memory, so a ``Tensor`` is an aligned numpy buffer
owned by PyPTO: ``from_numpy`` copies in (as a host→device transfer would), ``to_numpy`` copies
out, and passing a ``Tensor`` to a kernel costs nothing.
"""
from __future__ import annotations

import os

import numpy as np

from ..target import get_target
from ..envs import PTO_TARGET
from ..language import dtypes as dt

_current_target: dict = {}


def set_target(name: str) -> None:
    """Compile for ``name`` from now on (``PTO_TARGET`` and ``@jit(target=...)`` still win)."""
    get_target(name)     # validates
    _current_target["name"] = name


def current_target():
    from_env = os.environ.get(PTO_TARGET.name)
    try:
        return get_target(from_env or _current_target.get("name") or PTO_TARGET.default)
    except ValueError as e:
        if from_env:
            raise ValueError(f"{PTO_TARGET.name}={from_env!r}: {e}") from None
        raise


class Backend:
    """What ``pypto.get_backend()`` reports: the simulated NPU and how many there are."""

    name = "ascend-sim"

    @property
    def target(self):
        return current_target()

    @property
    def device_count(self) -> int:
        return 1

    def __repr__(self) -> str:
        return f"Backend(name={self.name!r}, device_count=1, target={self.target.name!r})"


def get_backend() -> Backend:
    return Backend()


class Context:
    """One simulated NPU: ``Context(device_id=0)``."""

    def __init__(self, device_id: int = 0):
        if device_id != 0:
            raise ValueError(f"device_id {device_id} does not exist: the simulator has one "
                             "device (0)")
        self.device_id = device_id
        self.target = current_target()

    @property
    def device_name(self) -> str:
        return f"{self.target.device_spec} (simulated on the host)"

    @property
    def device_count(self) -> int:
        return 1

    def __repr__(self) -> str:
        return f"Context(device_id={self.device_id}, device={self.device_name!r})"


def _is_annotation_call(args, kwargs) -> bool:
    """Whether ``pypto.Tensor(*args, **kwargs)`` means CANN's annotation, not a device tensor:
    no argument at all, or a shape (list or tuple) or None first."""
    if not args:
        return "data" not in kwargs
    return args[0] is None or isinstance(args[0], (list, tuple))


class Tensor:
    """A tensor in the simulated NPU's global memory.

    The same class is CANN PyPTO's kernel annotation: ``pypto.Tensor(shape, dtype)`` (a list or
    tuple first, or no argument) and ``pypto.Tensor[[shape], dtype]`` give a
    ``pypto.frontend.annotations.TensorSpec``, a subclass without data (docs/from_cann_pypto.md).
    """

    __pypto_device_tensor__ = True    # how layout.as_array knows it (layout sits below runtime)

    def __new__(cls, *args, **kwargs):
        if cls is Tensor and _is_annotation_call(args, kwargs):
            # back edge: CANN's pypto.Tensor(shape, dtype) is the front end's annotation (a
            # subclass over CANN's DT_* types); lazy, as only then the front end loads
            from ..frontend import annotations
            return annotations.make(args, kwargs)
        return super().__new__(cls)

    def __class_getitem__(cls, item):
        from ..frontend import annotations  # back edge: as in __new__
        return annotations.subscript(item)

    def __getnewargs__(self):
        """copy/pickle rebuild a device tensor (``Tensor()`` alone means an annotation)."""
        return (self._data,)

    def __init__(self, data: np.ndarray, ctx: Context | None = None):
        self._data = data
        self.ctx = ctx or Context()

    @classmethod
    def from_numpy(cls, array, ctx: Context | None = None) -> "Tensor":
        array = np.asarray(array)
        dt.from_any(array.dtype)       # rejects dtypes kernels cannot take
        buf = _aligned_empty(array.shape, array.dtype)
        buf[...] = array
        return cls(buf, ctx)

    def to_numpy(self) -> np.ndarray:
        return self._data.copy()

    def numpy(self) -> np.ndarray:
        """A view of the device memory (no copy): writes go to the device tensor."""
        return self._data

    @property
    def shape(self):
        return self._data.shape

    @property
    def dtype(self):
        return dt.from_any(self._data.dtype)

    @property
    def flags(self):
        return self._data.flags

    @property
    def nbytes(self) -> int:
        return self._data.nbytes

    def __array__(self, dtype=None, copy=None):
        return self._data if dtype is None else self._data.astype(dtype)

    def __repr__(self) -> str:
        return f"pypto.Tensor(shape={self.shape}, dtype={self.dtype}, device={self.ctx.device_id})"


def empty(shape, dtype, ctx: Context | None = None) -> Tensor:
    """An uninitialised device tensor."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return Tensor(_aligned_empty(shape, dt.from_any(dtype).to_numpy()), ctx)


def zeros(shape, dtype, ctx: Context | None = None) -> Tensor:
    t = empty(shape, dtype, ctx)
    t._data[...] = 0
    return t


def _aligned_empty(shape, np_dtype) -> np.ndarray:
    """64-byte aligned storage, like device allocations."""
    np_dtype = np.dtype(np_dtype)
    count = int(np.prod(shape)) if shape else 1
    raw = np.empty(count * np_dtype.itemsize + 64, dtype=np.uint8)
    offset = -raw.ctypes.data % 64
    return raw[offset:offset + count * np_dtype.itemsize].view(np_dtype).reshape(shape)
