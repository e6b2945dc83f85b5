"""A float row sum or product gives the same bits whether the codegen fuses it with the
instructions around it or runs each instruction alone: ``pypto.load_pto`` of a kernel's
``.pto`` has none of the host-only fusion hints (attributes starting with ``_`` are not
printed), so the program read back runs every instruction as its own loop. The reduction's
association is spelled out in the IR (``lowering/vector.py``: ``LANES`` partial accumulators
combined in a fixed tree), so neither the fusion nor the vector width LLVM picks for the host
changes it. Shapes include tails (valid columns fewer than the tile's) and widths that are not
a multiple of 8, 16 or the lanes."""
import numpy as np
import pytest

import pypto
import pypto.language as pl
from tests.quick import quick_cases

from ...kernels import tile_softmax


@pypto.jit
def row_sum_prod(x, sums, prods, BM: pl.constexpr, BN: pl.constexpr):
    """A sum and a product, each closing its fusion group, stored alone."""
    r = pl.program_id(0) * BM
    t = pl.load(x, offsets=(r, 0), shape=(BM, BN))
    pl.store(sums, offsets=(r, 0), value=pl.sum(t * 1.5, axis=1, keepdims=True))
    pl.store(prods, offsets=(r, 0), value=pl.prod(t * (1 / 64) + 1.0, axis=1, keepdims=True))


# (rows, columns, tile width): no padding; a tail of 28 columns; 13 valid of 16 (fewer than
# the lanes); 33 valid of 40
SHAPES = [(24, 781, 781), (20, 100, 128), (16, 13, 16), (8, 33, 40)]


def _both(kernel, m, out_shapes, bm, bn):
    """The outputs of ``kernel`` run as compiled (fused) and of its .pto read back (not)."""
    grid = (pl.cdiv(m.shape[0], bm),)
    fused = [np.zeros(shape, np.float32) for shape in out_shapes]
    kernel[grid](m, *fused, BM=bm, BN=bn)
    text = kernel.compile(m, *fused, BM=bm, BN=bn).asm["pto"]
    alone = [np.zeros(shape, np.float32) for shape in out_shapes]
    pypto.load_pto(text)[grid](m, *alone)
    return fused, alone


@pytest.mark.parametrize("rows, cols, bn", quick_cases(SHAPES[:2] + SHAPES[3:], *SHAPES[1:],
                                                       unpack=True))
def test_softmax_fused_and_unfused_agree_bitwise(rows, cols, bn):
    m = np.random.default_rng(cols).standard_normal((rows, cols)).astype(np.float32) * 4
    (fused,), (alone,) = _both(tile_softmax, m, [m.shape], 8, bn)
    e = np.exp(m.astype(np.float64) - m.max(axis=1, keepdims=True))
    np.testing.assert_allclose(fused, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(fused, alone)


@pytest.mark.parametrize("rows, cols, bn", SHAPES[2:])
def test_sum_and_prod_fused_and_unfused_agree_bitwise(rows, cols, bn):
    m = np.random.default_rng(cols).standard_normal((rows, cols)).astype(np.float32)
    (sums, prods), alone = _both(row_sum_prod, m, [(rows, 1), (rows, 1)], 8, bn)
    x = m.astype(np.float64)
    np.testing.assert_allclose(sums[:, 0], (x * 1.5).sum(axis=1), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(prods[:, 0], (x / 64 + 1).prod(axis=1), rtol=1e-4)
    np.testing.assert_array_equal(sums, alone[0])
    np.testing.assert_array_equal(prods, alone[1])
