"""Semantics of the asynchrony and synchronisation primitives.

``async_load`` rebinds the buffer's name to the loaded tile (the frontend does the rebinding,
since a handler only sees values) and marks it pending until ``synchronize()``; reading a
pending tile is a compile error, which is what makes the explicit double-buffering style safe.
The chip-level order of the load and its readers is still the sync pass's job: ``synchronize``
is a promise checked at compile time, not an instruction.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...language import dtypes as dt
from ..ir import TileType, Value
from ..pto.isa import CROSS_CORE_FLAGS, EVENT_IDS, PIPES
from .memory import load
from .shapes import tile_shape
from .tile import cast
from .values import describe


@dataclass
class TensorSlice:
    """``x[a:b, c:d]`` on a kernel tensor: where a load starts, and its extent when known."""
    tensor: Value
    starts: list
    sizes: list          # int, or None when the bounds are runtime values


def slice_tensor(b, tensor: Value, index) -> TensorSlice:
    if not isinstance(index, tuple):
        index = (index,)
    if len(index) != tensor.type.rank:
        raise IndexError(f"a rank-{tensor.type.rank} tensor needs {tensor.type.rank} slices, "
                         f"got {len(index)}")
    starts, sizes = [], []
    for item in index:
        if not isinstance(item, slice):
            raise TypeError("a kernel does not index tensors element by element: read a tile "
                            "with pl.load(x, offsets=(i,), shape=(n,)) and write one with "
                            "pl.store (x[a:b] windows are only for pl.async_load)")
        if item.step not in (None, 1):
            raise TypeError("tensor windows are start:stop (step 1), e.g. "
                            "x[i * 512:(i + 1) * 512]; for strided data load a tile and "
                            "slice the tile")
        start = 0 if item.start is None else item.start
        starts.append(start)
        plain = all(isinstance(v, int) for v in (start, item.stop))
        sizes.append(item.stop - start if plain and item.stop is not None else None)
    return TensorSlice(tensor, starts, sizes)


def alloc_buffer(b, shape, dtype=None):
    """A tile with no contents yet (no instruction: on the chip it is just UB space); reading
    it before an async_load fills it is a compile error."""
    dtype = dt.float32 if dtype is None else dt.from_any(dtype)
    tile = b.emit("tile.alloc", [], [TileType(dtype, tile_shape(shape, "alloc_buffer() shape"))])
    b.unfilled[tile.result.id] = b.loc
    return tile.result


def async_load(b, src, buffer, offsets=None, padding=0):
    """The loaded tile that replaces ``buffer`` (same shape and dtype)."""
    if not (isinstance(buffer, Value) and buffer.is_tile):
        raise TypeError(f"async_load(): the buffer must come from pl.alloc_buffer, got "
                        f"{describe(buffer)}")
    shape = buffer.type.shape
    if isinstance(src, TensorSlice):
        if offsets is not None:
            raise TypeError("async_load(): give either a tensor slice or offsets=, not both")
        for size, want in zip(src.sizes, shape):
            if size is not None and size != want:
                raise ValueError(f"async_load(): the slice has shape {tuple(src.sizes)} but "
                                 f"the buffer has shape {shape}")
        tensor, offsets = src.tensor, src.starts
    else:
        tensor = src
        offsets = [0] * len(shape) if offsets is None else offsets
    tile = load(b, tensor, offsets, shape, padding)
    return cast(b, tile, buffer.type.dtype) if tile.type.dtype != buffer.type.dtype else tile


def _pipe(name, what):
    if not isinstance(name, str) or name.upper() not in PIPES:
        raise ValueError(f"{what} must be one of {', '.join(PIPES)}, got {name!r}")
    return name.upper()


def _small_int(x, limit, what):
    if not isinstance(x, int) or isinstance(x, bool) or not 0 <= x < limit:
        raise ValueError(f"{what} must be a compile-time integer in 0..{limit - 1}, got "
                         f"{describe(x)}")
    return x


def _count(x, what):
    if not isinstance(x, int) or isinstance(x, bool) or x < 1:
        raise ValueError(f"{what} must be a positive compile-time integer, got {describe(x)}")
    return x


def barrier(b):
    b.emit("pto.syncall")


def signal(b, flag, count=1):
    b.emit("pto.sync_set", attrs={"flag": _small_int(flag, CROSS_CORE_FLAGS, "signal() flag"),
                                  "count": _count(count, "signal() count")})


def wait(b, flag, count=1):
    b.emit("pto.sync_wait", attrs={"flag": _small_int(flag, CROSS_CORE_FLAGS, "wait() flag"),
                                   "count": _count(count, "wait() count")})


def flag_handler(op):
    def handler(b, src_pipe, dst_pipe, event_id):
        src, dst = _pipe(src_pipe, f"{op}() source pipe"), _pipe(dst_pipe, f"{op}() target pipe")
        if src == dst:
            raise ValueError(f"{op}(): a flag orders two different pipes, got {src} twice")
        b.emit(f"pto.{op}", attrs={"src": src, "dst": dst,
                                   "event": _small_int(event_id, EVENT_IDS, f"{op}() event id")})
    return handler


def pipe_barrier(b, pipe="ALL"):
    b.emit("pto.pipe_barrier", attrs={"pipe": "ALL" if pipe == "ALL" else
                                      _pipe(pipe, "pipe_barrier() pipe")})


def breakpoint(b, live: dict):
    """``debug.breakpoint`` reads the live local tiles (name → tile) so the interpreter can
    show them; it has no result and no side effect, so dead-code elimination removes it from
    compiled kernels."""
    names = tuple(live)
    b.emit("debug.breakpoint", [live[n] for n in names], attrs={"names": names})
