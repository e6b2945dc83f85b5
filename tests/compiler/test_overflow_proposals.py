"""What a buffer overflow proposes (issue 34): only tile constexprs shrink, never a data size
such as attention's head dimension ``D``, and the error always names a line of the kernel
(the second buffer of ``num_stages=2`` once came as a plain error with no line and no
proposal)."""
from __future__ import annotations

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.errors import BufferOverflow


@pypto.jit
def attention_like(q, k, out, n, BM: pl.constexpr, BN: pl.constexpr, D: pl.constexpr):
    tq = pl.load(q, offsets=(pl.program_id(0) * BM, 0), shape=(BM, D))
    o = pl.zeros((BM, D), dtype=pl.float32)
    for n0 in range(0, n, BN):
        tk = pl.load(k, offsets=(n0, 0), shape=(BN, D))
        s = pl.matmul(tq, tk, b_trans=True)
        p = pl.exp(s - pl.max(s, axis=1, keepdims=True))
        o = o + pl.matmul(p.to(pl.float16), tk)
    pl.store(out, offsets=(pl.program_id(0) * BM, 0), value=o)


@pypto.jit
def rows_scaled(x, out, BM: pl.constexpr, N: pl.constexpr):
    t = pl.load(x, offsets=(pl.program_id(0) * BM, 0), shape=(BM, N))
    u = pl.exp(t) * 2.0
    pl.store(out, offsets=(pl.program_id(0) * BM, 0), value=u + t)


@pypto.jit
def streamed(x, out, n, BM: pl.constexpr, BN: pl.constexpr):
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in pl.range(0, n, BN, num_stages=2):
        t = pl.load(x, offsets=(pl.program_id(0) * BM, k), shape=(BM, BN))     # +4
        acc = acc + t
    pl.store(out, offsets=(pl.program_id(0) * BM, 0), value=pl.sum(acc, axis=1, keepdims=True))


@pypto.jit
def k_loop(a, b, c, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    acc = pl.zeros((BM, BN), dtype=pl.float32)                                   # +2
    for k in range(0, K, BK):
        x = pl.load(a, offsets=(pl.program_id(0) * BM, k), shape=(BM, BK))
        y = pl.load(b, offsets=(k, pl.program_id(1) * BN), shape=(BK, BN))
        acc = pl.matmul(x, y, acc=acc)
    pl.store(c, offsets=(pl.program_id(0) * BM, pl.program_id(1) * BN), value=acc)


def _overflow(call) -> BufferOverflow:
    with pytest.raises(BufferOverflow) as got:
        call()
    error = got.value
    assert error.loc is not None and error.loc.filename == __file__
    return error


def test_the_head_dimension_is_never_proposed_and_a_scratch_overflow_names_a_line():
    """D spans the whole row of q and k (offset 0): halving it would drop data, yet it alone
    would fit here and was the proposal (``D=256 (instead of 512)``). The tile that did not
    fit is a reduction's scratch, which has no line of its own: the error had no line."""
    q = np.zeros((1024, 512), np.float16)
    out = np.zeros((1024, 512), np.float32)
    sizes = dict(BM=64, BN=128, D=512)
    error = _overflow(lambda: attention_like.compile(q, q, out, 512, **sizes))
    assert error.proposal and "D" not in error.proposal
    assert "D=" not in str(error)
    attention_like.compile(q, q, out, 512, **{**sizes, **error.proposal})


def test_a_row_length_is_never_proposed():
    x = np.zeros((1024, 4096), np.float32)
    error = _overflow(lambda: rows_scaled.compile(x, x, BM=64, N=4096))
    assert set(error.proposal) == {"BM"} and "N=" not in str(error)
    rows_scaled.compile(x, x, **{"N": 4096, **error.proposal})


def test_the_second_buffer_of_double_buffering_names_the_load_and_what_fits():
    x = np.zeros((1024, 4096), np.float32)
    out = np.zeros((1024, 1), np.float32)
    error = _overflow(lambda: streamed.compile(x, out, 4096, BM=64, BN=256))
    assert error.loc.line == streamed.fn.__code__.co_firstlineno + 4
    assert "double buffering (num_stages=2)" in str(error)
    assert error.proposal
    streamed.compile(x, out, 4096, **{**dict(BM=64, BN=256), **error.proposal})


def test_the_zero_operand_of_an_accumulator_shares_a_full_l0a():
    """The zero operand that starts the accumulator when the K loop may not run was placed
    above a full L0A and overflowed (with no line and no proposal, at first): nothing in
    L0A/L0B is live across the zeroing, so it now takes the buffer's start, and the kernel
    is right whether the loop runs or not."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 256)).astype(np.float16)
    b = rng.standard_normal((256, 128)).astype(np.float16)
    for k in (0, 256):
        c = np.full((256, 128), 7.0, np.float32)
        k_loop[(1, 1)](a, b, c, k, BM=256, BN=128, BK=128)
        want = a[:, :k].astype(np.float32) @ b[:k].astype(np.float32)
        np.testing.assert_allclose(c, want, rtol=1e-3, atol=1e-3)
