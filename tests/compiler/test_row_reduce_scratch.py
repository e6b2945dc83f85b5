"""The scratch of A2/A3's float row reductions (compiler/pto/isa.py ``row_reduce_scratch_cols``):
TROWMAX/TROWMIN keep one 256-byte repeat a row, TROWSUM half the row's repeats (pto-isa's
TRowReduceOps.hpp / TRowSum.hpp), instead of a copy of the whole source, so an RMSNorm row
block of 4 x 4096 fp32 fits the UB. Results on pto-isa's simulator, and the chip's headers
(npu-check, through the conformance corpus), hold the sizes to the implementation."""
import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.compiler.ir import Op, TileType, Value
from pypto.compiler.pto.lower import scratch_type
from pypto.language import dtypes as dt

from ..engines.tools import needs_tools


@pytest.mark.parametrize("opcode, shape, dtype, kept", [
    ("trowsum", (4, 4096), dt.float32, (4, 2048)),      # 64 repeats: the first level, 32
    ("trowsum", (8, 320), dt.float32, (8, 128)),        # 5 repeats: 2
    ("trowsum", (8, 100), dt.float32, (8, 64)),         # under two repeats: one
    ("trowsum", (8, 64), dt.float32, (8, 64)),          # one repeat: the source itself
    ("trowsum", (16, 1024), dt.float16, (16, 512)),     # fp16: 128 a repeat, 8 repeats: 4
    ("trowmax", (4, 4096), dt.float32, (4, 64)),        # max/min fold into one repeat
    ("trowmin", (16, 1024), dt.float16, (16, 128)),
    ("trowsum", (4, 4096), dt.int32, (4, 4096)),        # integers: the whole source
])
def test_scratch_sizes(opcode, shape, dtype, kept):
    src = Value(TileType(dtype, shape))
    op = Op("tile.reduce", [src], [TileType(dtype, (shape[0], 1))],
            {"op": opcode.removeprefix("trow"), "axis": 1})
    got = scratch_type(op)
    assert (got.shape, got.dtype) == (kept, dtype)


@pypto.jit(target="ascend910b1")
def rms_norm(x, w, out, BM: pl.constexpr, N: pl.constexpr):
    r = pl.program_id(0) * BM
    t = pl.load(x, offsets=(r, 0), shape=(BM, N)).to(pl.float32)
    ms = pl.sum(t * t, axis=1, keepdims=True) / N
    y = t / pl.sqrt(ms + 1e-6) * pl.load(w, offsets=(0, 0), shape=(1, N)).to(pl.float32)
    pl.store(out, offsets=(r, 0), value=y.to(pl.float16))


def test_an_rms_norm_block_of_4_x_4096_fits_the_ub():
    """It needed three 64 KiB fp32 tiles at once, the row sum's scratch a whole copy (an
    overflow of 229376 bytes against 188416); the scratch is half that now."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 4096)).astype(np.float16)
    w = rng.standard_normal((1, 4096)).astype(np.float16)
    out = np.zeros_like(x)
    rms_norm[(2,)](x, w, out, BM=4, N=4096)
    t = x.astype(np.float64)
    want = t / np.sqrt((t * t).mean(1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=2e-3, atol=2e-3)


@pypto.jit(engine="pto-isa")
def _reduced(x, s, m, n, BM: pl.constexpr, BN: pl.constexpr):
    r = pl.program_id(0) * BM
    t = pl.load(x, offsets=(r, 0), shape=(BM, BN), padding=0.0)
    pl.store(s, offsets=(r, 0), value=pl.sum(t, axis=1, keepdims=True))
    t = pl.load(x, offsets=(r, 0), shape=(BM, BN), padding=float("-inf"))
    pl.store(m, offsets=(r, 0), value=pl.max(t, axis=1, keepdims=True))
    t = pl.load(x, offsets=(r, 0), shape=(BM, BN), padding=float("inf"))
    pl.store(n, offsets=(r, 0), value=pl.min(t, axis=1, keepdims=True))


SLOW = pytest.mark.slow         # each case is a pto-isa build (~3 s): two in the default suite


@needs_tools
@pytest.mark.parametrize("dtype", [np.float32, pytest.param(np.float16, marks=SLOW)])
@pytest.mark.parametrize("rows, cols, bn", [
    (8, 320, 320), pytest.param(8, 100, 128, marks=SLOW), pytest.param(16, 1000, 1024, marks=SLOW),
    (64, 128, 128), pytest.param(8, 2048, 2048, marks=SLOW)])
def test_reductions_on_ptoisa_with_the_smaller_scratch(rows, cols, bn, dtype):
    x = np.random.default_rng(rows + cols).standard_normal((rows, cols)).astype(dtype)
    s, m, n = (np.zeros((rows, 1), dtype) for _ in range(3))
    _reduced[(1,)](x, s, m, n, BM=rows, BN=bn)
    tol = 1e-4 if dtype == np.float32 else 2e-2
    np.testing.assert_allclose(s[:, 0], x.astype(np.float64).sum(1), rtol=tol,
                               atol=tol * cols ** 0.5)
    np.testing.assert_array_equal(m[:, 0], x.max(1))
    np.testing.assert_array_equal(n[:, 0], x.min(1))
