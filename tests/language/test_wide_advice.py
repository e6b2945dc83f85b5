"""64-bit inputs get one piece of advice, and it works (issue 34).

A2/A3's vector unit has no 64-bit tiles and no conversion out of 64 bits, so a float64 or
int64 tensor must become 32 bits on the host. The gather error once said
``indices.to(pl.int32)``, which the compiler then refused ("a int64 tile ... give the tile a
32-bit type"): each message that meets a 64-bit tile now names the host conversion
(``dtypes.wide_tile_advice``), and doing what it says runs.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.errors import CompilationError

N = 32


@pypto.jit
def gather_kernel(x, idx, out, N: pl.constexpr):
    i = pl.load(idx, offsets=(0,), shape=(N,))
    pl.store(out, offsets=(0,), value=pl.gather(x, i))


@pypto.jit
def narrowed_gather(x, idx, out, N: pl.constexpr):
    i = pl.load(idx, offsets=(0,), shape=(N,))
    pl.store(out, offsets=(0,), value=pl.gather(x, i.to(pl.int32)))


@pypto.jit
def add_one(x, out, N: pl.constexpr):
    pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(N,)) + 1)


@pypto.jit
def to_f32(x, out, N: pl.constexpr):
    pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(N,)).to(pl.float32))


@pypto.jit
def matmul_kernel(a, b, c, M: pl.constexpr):
    x = pl.load(a, offsets=(0, 0), shape=(M, M))
    y = pl.load(b, offsets=(0, 0), shape=(M, M))
    pl.store(c, offsets=(0, 0), value=pl.matmul(x, y))


def _advice(call) -> str:
    with pytest.raises(CompilationError) as got:
        call()
    message = str(got.value)
    narrow = re.search(r"x\.astype\(np\.(int32|float32|float16)\)", message)
    assert narrow, f"no host conversion named: {message}"
    assert "indices.to(pl.int32)" not in message and "give the tile a 32-bit type" not in message
    assert "before the launch" in message
    return narrow.group(1)


def test_int64_indices_name_the_host_conversion_and_it_works():
    x = np.arange(N, dtype=np.float32) * 2
    idx = np.arange(N, dtype=np.int64)[::-1].copy()
    out = np.zeros(N, np.float32)
    for kernel in (gather_kernel, narrowed_gather):      # the advice and what it once said
        narrow = _advice(lambda: kernel[(1,)](x, idx, out, N=N))
        assert narrow == "int32"
    gather_kernel[(1,)](x, idx.astype(np.int32), out, N=N)
    np.testing.assert_array_equal(out, x[::-1])


@pytest.mark.parametrize("dtype, kernel", [
    ("float64", add_one), ("int64", add_one), ("float64", to_f32), ("int64", to_f32)])
def test_64bit_tensors_name_the_host_conversion_and_it_works(dtype, kernel):
    x = np.arange(N).astype(dtype)
    out_dtype = np.float32 if kernel is to_f32 else dtype
    narrow = _advice(lambda: kernel[(1,)](x, np.zeros(N, out_dtype), N=N))
    assert narrow == ("float32" if dtype == "float64" else "int32")
    fixed_out = np.zeros(N, np.float32 if kernel is to_f32 else narrow)
    kernel[(1,)](x.astype(narrow), fixed_out, N=N)
    np.testing.assert_array_equal(fixed_out, (x + (kernel is add_one)).astype(fixed_out.dtype))


def test_int64_matmul_names_the_host_conversion_and_it_works():
    a = np.ones((16, 16), np.int64)
    c = np.zeros((16, 16), np.float32)
    narrow = _advice(lambda: matmul_kernel[(1,)](a, a, c, M=16))
    matmul_kernel[(1,)](a.astype(narrow), a.astype(narrow), c, M=16)
    np.testing.assert_array_equal(c, np.full((16, 16), 16.0))
