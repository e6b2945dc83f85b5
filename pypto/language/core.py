"""The kernel language: stubs the frontend recognises, never executed.

Each primitive is a Python function marked with ``@builtin``. Inside ``@pypto.jit`` the
frontend looks the marked object up in its semantics table (``pypto.compiler.semantics``) and
emits Tile IR; outside a kernel, calling one raises a clear error. Keeping the stubs apart from
their semantics is what lets the reference interpreter, the compiler and the docs agree on one
list of ops.
"""
from __future__ import annotations

import functools


class constexpr:
    """Annotation for compile-time constant parameters: ``BLOCK: pl.constexpr``."""

    def __init__(self, value=None):
        self.value = value

    def __repr__(self) -> str:
        return f"constexpr({self.value!r})"


def builtin(fn):
    """Mark ``fn`` as a kernel-language primitive named after itself."""

    @functools.wraps(fn)
    def outside_kernel(*args, **kwargs):
        raise RuntimeError(
            f"pypto.language.{fn.__name__}() can only be used inside a @pypto.jit kernel")

    outside_kernel.__pypto_builtin__ = fn.__name__
    return outside_kernel


def cdiv(a, b):
    """Ceiling division; usable both inside kernels and on the host (grid computations)."""
    return -(-a // b)


cdiv.__pypto_builtin__ = "cdiv"


@builtin
def program_id(axis):
    """Index of this block along grid axis 0, 1 or 2."""


@builtin
def num_programs(axis):
    """Number of blocks along grid axis 0, 1 or 2."""


@builtin
def load(tensor, offsets, shape, padding=0):
    """Read a tile of ``shape`` at ``offsets``; elements outside the tensor are ``padding``."""


@builtin
def store(tensor, offsets, value):
    """Write a tile at ``offsets``; elements outside the tensor are not written."""


@builtin
def zeros(shape, dtype):
    """A tile of zeros."""


@builtin
def full(shape, value, dtype):
    """A tile filled with ``value``."""


@builtin
def matmul(a, b, acc=None, out_dtype=None):
    """``a @ b (+ acc)`` on the cube; fp16/bf16/fp32 accumulate in fp32, int8 in int32."""


@builtin
def cast(x, dtype):
    """Convert a tile to ``dtype`` (same as ``x.to(dtype)``)."""


@builtin
def minimum(a, b):
    """Elementwise minimum (scalars or tiles)."""


@builtin
def maximum(a, b):
    """Elementwise maximum (scalars or tiles)."""
