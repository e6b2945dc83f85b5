"""The pto-isa engine and global memory: a TLOAD/TSTORE outside the launch's tensors is a
``SimulatorError`` that names the tensor, whichever ptoas lowered the kernel.

The CPU simulator reads and writes host memory directly. ptoas 0.27 cast a partition's offset
to ``unsigned``, so a window before a tensor landed gigabytes away and faulted (the fault
handler turned that into an error); ptoas 0.60 keeps the offset signed, so the same window read
and wrote the heap just before the array, and the process aborted later in ``free()`` (pytest
workers died: "node down"). The prelude now checks every window against the tensors."""
from __future__ import annotations

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.backends.ptoisa import engine
from tests.engines.tools import needs_tools

pytestmark = needs_tools

B = 64


def before(op: str, tensor: str) -> str:
    """The error for a window one block before ``tensor``: bytes -256..-1 as ptoas 0.60's C++
    computes the offset (signed); 0.27's casts it to unsigned, which lands it some 16 GiB
    away, where the nearest tensor is whichever the allocator put there."""
    return rf"{op} of bytes (-256\.\.-1 of tensor '{tensor}'|\d{{10,}}\.\.\d{{10,}} of tensor)"


@pypto.jit(engine="pto-isa")
def store_one_block_back(x, out, B: pl.constexpr):
    pid = pl.program_id(0)
    pl.store(out, offsets=(pid * B - B,), value=pl.load(x, offsets=(pid * B,), shape=(B,)))


@pypto.jit(engine="pto-isa")
def load_one_block_back(x, out, B: pl.constexpr):
    pid = pl.program_id(0)
    pl.store(out, offsets=(pid * B,), value=pl.load(x, offsets=(pid * B - B,), shape=(B,)))


@pypto.jit(engine="pto-isa")
def copy_rows(x, out, R: pl.constexpr, C: pl.constexpr):
    pid = pl.program_id(0)
    pl.store(out, offsets=(pid * R, 0),
             value=pl.load(x, offsets=(pid * R, 0), shape=(R, C)) + 1.0)


def test_a_store_before_its_tensor_writes_nothing_outside_it():
    """Block 0 stores one block before ``out``, a view into the middle of ``memory``: on
    ptoas 0.60's C++ that wrote ``memory[:B]`` (or the heap) without a word, then the
    simulator's window check made it an error; now the window is checked at run time
    (passes/legalize_windows.py) and the elements before the tensor are dropped."""
    memory = np.full(3 * B, 7.0, np.float32)
    x, out = np.arange(B, dtype=np.float32), memory[B:2 * B]
    store_one_block_back[(1,)](x, out, B=B)
    np.testing.assert_array_equal(memory, 7.0)


def test_a_load_before_its_tensor_reads_the_padding():
    x, out = np.arange(2 * B, dtype=np.float32), np.zeros(2 * B, np.float32)
    load_one_block_back[(2,)](x, out, B=B)
    np.testing.assert_array_equal(out, np.concatenate([np.zeros(B, np.float32), x[:B]]))


def test_windows_inside_strided_views_are_allowed():
    """The check follows each tensor's strides: rows of a wider array, every other row."""
    wide = np.arange(16 * 64, dtype=np.float32).reshape(16, 64)
    for x in (wide[:, 8:40], wide[::2, :32]):
        out = np.zeros((x.shape[0], 32), np.float32)
        copy_rows[(x.shape[0] // 4,)](x, out, R=4, C=32)
        np.testing.assert_array_equal(out, x + 1)
