"""An elementwise op's result takes the UB buffer of an operand it reads for the last time
(passes/in_place.py, ``share_dying_operands``): a chain over a 128 x 256 fp32 tile needs
one 128 KiB buffer, not two, so it fits the 192 KiB UB; results are unchanged (the chain also
runs on three engines and both assemblers from the conformance corpus, ``inplace_chain``)."""
import numpy as np
import pytest

import pypto
import pypto.language as pl


@pypto.jit
def chain(x, bias, out, R: pl.constexpr, C: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(R, C))
    y = pl.exp(pl.maximum(t * 2.0 + 1.0, 0.0) * -0.5) - 1.0
    pl.store(out, offsets=(0, 0), value=(y / 3.0).to(out.dtype))


def _args(r, c, dtype):
    rng = np.random.default_rng(r * c)
    x = rng.standard_normal((r, c)).astype(np.float32)
    return x, np.zeros((1, c), np.float32), np.zeros((r, c), dtype)


def test_a_chain_on_a_128_x_256_fp32_tile_fits_the_ub():
    x, bias, out = _args(128, 256, np.float32)
    kernel = chain.compile(x, bias, out, R=128, C=256)
    ub = kernel.metadata["buffer_bytes"]["vec"]
    # one 128 KiB buffer for the whole chain: before, each op's result was a buffer of its
    # own and the plan overflowed the UB
    assert ub == 128 * 256 * 4, ub
    chain[(1,)](x, bias, out, R=128, C=256)
    want = (np.exp(np.maximum(x * 2 + 1, 0) * -0.5) - 1) / 3
    np.testing.assert_allclose(out.astype(np.float32), want, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("r,c", [(8, 32), (33, 70)])
def test_in_place_results_match_numpy(r, c):
    x, bias, out = _args(r, c, np.float32)
    chain[(1,)](x, bias, out, R=r, C=c)
    want = (np.exp(np.maximum(x * 2 + 1, 0) * -0.5) - 1) / 3
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


@pypto.jit
def reciprocal_chain(x, out, R: pl.constexpr, C: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(R, C))
    pl.store(out, offsets=(0, 0), value=pl.reciprocal(t * 2.0) + 1.0)


def test_a_reciprocal_keeps_its_own_buffer():
    """ptoas 0.60 rejects an A3 TRECIP whose source is its destination ("expects A3 trecip src
    and dst to use different storage"; the hypothesis op chains met it): the in-place rule
    leaves it out (the compile goes through ptoas when PYPTO_PTOAS is set)."""
    x = np.random.default_rng(1).uniform(0.5, 2.0, (64, 256)).astype(np.float32)
    out = np.zeros_like(x)
    pto = reciprocal_chain.compile(x, out, R=64, C=256).asm["pto"]
    recip = next(line for line in pto.splitlines() if "pto.trecip" in line)
    src, dst = (recip.split(f"{side}(")[1].split(" :")[0] for side in ("ins", "outs"))
    assert src != dst, recip
    reciprocal_chain[(1,)](x, out, R=64, C=256)
    np.testing.assert_allclose(out, 1 / (x * 2) + 1, rtol=1e-6)


@pypto.jit
def masked_last(x, row, out, n, R: pl.constexpr, C: pl.constexpr):
    """Flash attention's key-tail mask: only one iteration's tile changes, the others pass
    through the branch unchanged."""
    t = pl.load(x, offsets=(0, 0), shape=(R, C)) * 2.0
    if n > 3:
        t = t + pl.load(row, offsets=(0, 0), shape=(1, C))
    pl.store(out, offsets=(0, 0), value=pl.exp(t))


@pytest.mark.parametrize("n", [1, 5])
def test_a_branch_that_passes_a_tile_through_shares_its_buffer(n):
    """The branch's result takes the buffer of the tile it passes through and the other
    branch adds into it in place: no copy on the pass-through path, one buffer for the
    three values (before, the result took a third 64 KiB buffer, which the UB does not have
    beside the loaded tile and the doubled one, and the pass-through path copied into it)."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal((64, 256)).astype(np.float32)
    row = rng.standard_normal((1, 256)).astype(np.float32)
    out = np.zeros_like(x)
    masked_last[(1,)](x, row, out, n, R=64, C=256)
    want = np.exp(x * 2 + (row if n > 3 else 0))
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    kernel = masked_last.compile(x, row, out, n, R=64, C=256)
    assert "pto.tmov" not in kernel.asm["pto"]
    assert kernel.metadata["buffer_bytes"]["vec"] <= 2 * 64 * 256 * 4 + 4096


@pypto.jit
def scaled_sum(x, out, n, R: pl.constexpr, C: pl.constexpr):
    """A loop-carried tile scaled, then added to: ``o * 0.5`` may take o's buffer, since the
    next write of o (the add) reads it and nothing reads o in between."""
    o = pl.zeros((R, C), dtype=pl.float32)
    for i in range(0, n):
        o = o * 0.5 + pl.load(x, offsets=(i * R, 0), shape=(R, C))
    pl.store(out, offsets=(0, 0), value=o)


def test_a_carried_tile_scaled_then_added_to_takes_one_buffer():
    """Flash attention's o * alpha + P V: before, the scaled copy took a buffer of its own
    (32 KiB of each AIV's UB at 128 x 256 blocks)."""
    x = np.random.default_rng(0).standard_normal((4 * 64, 256)).astype(np.float32)
    out = np.zeros((64, 256), np.float32)
    scaled_sum[(1,)](x, out, 4, R=64, C=256)
    want = np.zeros((64, 256), np.float32)
    for i in range(4):
        want = want * 0.5 + x[i * 64:(i + 1) * 64]
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
    ub = scaled_sum.compile(x, out, 4, R=64, C=256).metadata["buffer_bytes"]["vec"]
    assert ub <= 2 * 64 * 256 * 4 + 4096, ub          # o and the loaded tile


@pypto.jit
def softmax_rows(x, out, R: pl.constexpr, C: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(R, C))
    p = pl.exp(t - pl.max(t, axis=1, keepdims=True))
    pl.store(out, offsets=(0, 0), value=p / pl.sum(p, axis=1, keepdims=True))


def test_a_fusion_groups_outside_input_is_given_up_to_its_last_reader():
    """``exp(t - max)`` is one host fusion group that reads t: its result takes t's buffer
    (the host's loop writes the element it has just read); before, t lived to the group's
    end and the result needed a second 64 KiB buffer."""
    x = np.random.default_rng(1).standard_normal((64, 256)).astype(np.float32)
    out = np.zeros_like(x)
    softmax_rows[(1,)](x, out, R=64, C=256)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    ub = softmax_rows.compile(x, out, R=64, C=256).metadata["buffer_bytes"]["vec"]
    assert ub < 2 * 64 * 256 * 4, ub
