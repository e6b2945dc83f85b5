"""Triton's ``mask=`` and ``other=`` on ``pl.load`` / ``pl.store`` (issue 34): a user coming
from Triton writes them first. The error was Python's "got an unexpected keyword argument
'mask'"; it now says what PyPTO uses instead (the tensor's own shape as the mask,
``padding=``, the window's offsets and shape) at the line, and what it shows compiles."""
from __future__ import annotations

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.errors import CompilationError


@pypto.jit
def load_masked(x, out, n, BLOCK: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    t = pl.load(x, offsets=(pl.program_id(0) * BLOCK,), shape=(BLOCK,), mask=offs < n)
    pl.store(out, offsets=(pl.program_id(0) * BLOCK,), value=t)


@pypto.jit
def load_other(x, out, BLOCK: pl.constexpr):
    t = pl.load(x, offsets=(pl.program_id(0) * BLOCK,), shape=(BLOCK,), other=0.0)
    pl.store(out, offsets=(pl.program_id(0) * BLOCK,), value=t)


@pypto.jit
def store_masked(x, out, n, BLOCK: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    t = pl.load(x, offsets=(pl.program_id(0) * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(pl.program_id(0) * BLOCK,), value=t, mask=offs < n)


@pypto.jit
def pointer_arithmetic(x, out, BLOCK: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    pl.store(out, offsets=(0,), value=pl.load(x + offs, offsets=(0,), shape=(BLOCK,)))


@pypto.jit
def the_pypto_way(x, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    t = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,), padding=0.0)
    pl.store(out, offsets=(pid * BLOCK,), value=t)


def _error(call) -> str:
    with pytest.raises(CompilationError) as got:
        call()
    assert "unexpected keyword argument" not in str(got.value)
    assert got.value.loc is not None and got.value.loc.filename == __file__
    return str(got.value)


@pytest.mark.parametrize("kernel, args, words", [
    (load_masked, (100,), ["pl.load() has no mask=", "padding=", "shape=(", "offsets=(",
                           "positive compile-time ints", "pl.where("]),
    (load_other, (), ["pl.load() has no other=", "padding= is the value read past"]),
    (store_masked, (100,), ["pl.store() has no mask=", "are not written", "offsets=(",
                            "pl.where(cond, t, old)"]),
    (pointer_arithmetic, (), ["there are no pointers", "pl.load(x, offsets="]),
])
def test_triton_keywords_name_what_pypto_uses(kernel, args, words):
    x = np.arange(100, dtype=np.float32)
    message = _error(lambda: kernel[(1,)](x, np.zeros_like(x), *args, BLOCK=128))
    for w in words:
        assert w in message


def test_what_the_message_shows_runs():
    x = np.arange(100, dtype=np.float32)
    out = np.zeros_like(x)
    the_pypto_way[(pl.cdiv(100, 64),)](x, out, BLOCK=64)
    np.testing.assert_array_equal(out, x)
