"""End-to-end tests of cube (matmul) kernels against a float64 numpy reference.

Error bounds. The cube multiplies float16/bfloat16 operands exactly in float32 (11x11 and 8x8
significant bits fit in float32's 24) and accumulates in float32; float32 operands add one
rounding per product. Whatever the summation order (tiles, FMA contraction), the classic bound
for a float32 dot product of length K is

    |c - a @ b| <= gamma_{K+1} * (|a| @ |b|),  gamma_n = n u / (1 - n u),  u = 2**-24,

elementwise. The tests allow twice that, (K + 1) * 2**-23 * (|a| @ |b|), which is sound and still
tight enough to catch a dropped or doubled K tile. A half-width output adds one more rounding to
nearest: a relative 2**-11 (float16) or 2**-8 (bfloat16) of the value, plus half the smallest
subnormal. int8 x int8 accumulates exactly in int32.
"""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import pypto
import pypto.language as pl

BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32, I8, I32 = (np.dtype(t) for t in (np.float16, np.float32, np.int8, np.int32))

# (input dtype, output dtype)
DTYPE_PAIRS = [(F16, F32), (BF16, F32), (BF16, BF16), (F32, F32), (I8, I32), (F16, F16)]
DTYPE_IDS = ["f16-f32", "bf16-f32", "bf16-bf16", "f32-f32", "i8-i32", "f16-f16"]
SHAPES = [(77, 45, 130), (1, 1, 1), (33, 65, 17)]           # (M, N, K)
TILES = [(16, 16, 16), (32, 64, 32), (64, 64, 64), (128, 128, 32)]   # (BM, BN, BK)
TILE_IDS = ["16x16x16", "32x64x32", "64x64x64", "128x128x32"]


# -- kernels -----------------------------------------------------------------------------------

@pypto.jit
def matmul_kernel(a, b, c, M, N, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    pm = pl.program_id(0)
    pn = pl.program_id(1)
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in range(0, K, BK):
        ta = pl.load(a, offsets=(pm * BM, k), shape=(BM, BK))
        tb = pl.load(b, offsets=(k, pn * BN), shape=(BK, BN))
        acc = pl.matmul(ta, tb, acc=acc)
    pl.store(c, offsets=(pm * BM, pn * BN), value=acc.to(c.dtype))


@pypto.jit
def matmul_int8_kernel(a, b, c, M, N, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    pm = pl.program_id(0)
    pn = pl.program_id(1)
    acc = pl.zeros((BM, BN), dtype=pl.int32)
    for k in range(0, K, BK):
        ta = pl.load(a, offsets=(pm * BM, k), shape=(BM, BK))
        tb = pl.load(b, offsets=(k, pn * BN), shape=(BK, BN))
        acc = pl.matmul(ta, tb, acc=acc)
    pl.store(c, offsets=(pm * BM, pn * BN), value=acc)


@pypto.jit
def matmul_single_tile_kernel(a, b, c, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    """K fits in one tile: ``pl.matmul`` without ``acc``; loads pad K with zeros."""
    pm = pl.program_id(0)
    pn = pl.program_id(1)
    ta = pl.load(a, offsets=(pm * BM, 0), shape=(BM, BK))
    tb = pl.load(b, offsets=(0, pn * BN), shape=(BK, BN))
    pl.store(c, offsets=(pm * BM, pn * BN), value=pl.matmul(ta, tb).to(c.dtype))


@pypto.jit
def matmul_peeled_kernel(a, b, c, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    """The first K tile starts the accumulator with a plain ``pl.matmul``; no ``pl.zeros``."""
    pm = pl.program_id(0)
    pn = pl.program_id(1)
    acc = pl.matmul(pl.load(a, offsets=(pm * BM, 0), shape=(BM, BK)),
                    pl.load(b, offsets=(0, pn * BN), shape=(BK, BN)))
    for k in range(BK, K, BK):
        ta = pl.load(a, offsets=(pm * BM, k), shape=(BM, BK))
        tb = pl.load(b, offsets=(k, pn * BN), shape=(BK, BN))
        acc = pl.matmul(ta, tb, acc=acc)
    pl.store(c, offsets=(pm * BM, pn * BN), value=acc)


@pypto.jit
def matmul_out_dtype_kernel(a, b, c, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    """A single-K-tile matmul converted with ``out_dtype=`` rather than ``.to()``."""
    pm = pl.program_id(0)
    pn = pl.program_id(1)
    ta = pl.load(a, offsets=(pm * BM, 0), shape=(BM, BK))
    tb = pl.load(b, offsets=(0, pn * BN), shape=(BK, BN))
    pl.store(c, offsets=(pm * BM, pn * BN), value=pl.matmul(ta, tb, out_dtype=c.dtype))


@pypto.jit
def matmul_persistent_kernel(a, b, c, M, N, K, BM: pl.constexpr, BN: pl.constexpr,
                             BK: pl.constexpr):
    """Each program walks output tiles tile_id = pid, pid + P, ...; launched without a grid."""
    tiles_n = pl.cdiv(N, BN)
    num_tiles = pl.cdiv(M, BM) * tiles_n
    for t in range(pl.program_id(0), num_tiles, pl.num_programs(0)):
        pm = t // tiles_n
        pn = t % tiles_n
        acc = pl.zeros((BM, BN), dtype=pl.float32)
        for k in range(0, K, BK):
            ta = pl.load(a, offsets=(pm * BM, k), shape=(BM, BK))
            tb = pl.load(b, offsets=(k, pn * BN), shape=(BK, BN))
            acc = pl.matmul(ta, tb, acc=acc)
        pl.store(c, offsets=(pm * BM, pn * BN), value=acc.to(c.dtype))


@pypto.jit
def matmul_row_block_kernel(a, b, c, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    """Program p computes rows [p*BM, (p+1)*BM) only (one K tile, one N tile)."""
    pm = pl.program_id(0)
    ta = pl.load(a, offsets=(pm * BM, 0), shape=(BM, BK))
    tb = pl.load(b, offsets=(0, 0), shape=(BK, BN))
    pl.store(c, offsets=(pm * BM, 0), value=pl.matmul(ta, tb))


@pypto.jit
def matmul_k_steps_kernel(a, b, c, M, N, K, BM: pl.constexpr, BN: pl.constexpr,
                          BK: pl.constexpr, STEPS: pl.constexpr, B_TRANS: pl.constexpr = False,
                          STAGES: pl.constexpr = 1):
    """pto-isa's GEMM schedule: one load brings STEPS K tiles to L1, and each matmul takes a
    slice of it (extracted straight into L0A/L0B). ``b`` is (N, K) when B_TRANS."""
    pm = pl.program_id(0)
    pn = pl.program_id(1)
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in pl.range(0, K, BK * STEPS, num_stages=STAGES):
        ta = pl.load(a, offsets=(pm * BM, k), shape=(BM, BK * STEPS))
        if B_TRANS:
            tb = pl.load(b, offsets=(pn * BN, k), shape=(BN, BK * STEPS))
        else:
            tb = pl.load(b, offsets=(k, pn * BN), shape=(BK * STEPS, BN))
        for s in pl.static_range(STEPS):
            if B_TRANS:
                acc = pl.matmul(ta[:, s * BK:(s + 1) * BK], tb[:, s * BK:(s + 1) * BK],
                                acc=acc, b_trans=True)
            else:
                acc = pl.matmul(ta[:, s * BK:(s + 1) * BK], tb[s * BK:(s + 1) * BK, :],
                                acc=acc)
    pl.store(c, offsets=(pm * BM, pn * BN), value=acc.to(c.dtype))


# -- helpers -----------------------------------------------------------------------------------

def make_inputs(rng, m, n, k, dtype):
    if dtype == I8:
        a = rng.integers(-128, 128, size=(m, k), dtype=np.int8)
        b = rng.integers(-128, 128, size=(k, n), dtype=np.int8)
    else:
        a = rng.standard_normal((m, k)).astype(np.float32).astype(dtype)
        b = rng.standard_normal((k, n)).astype(np.float32).astype(dtype)
    return a, b


def assert_matmul_close(c, a, b):
    """``c`` against float64 ``a @ b`` within the bound derived in the module docstring."""
    k = a.shape[1]
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = a64 @ b64
    got = c.astype(np.float64)
    assert c.shape == ref.shape
    if c.dtype.kind in "iu":
        np.testing.assert_array_equal(got, ref)
        return
    bound = (k + 1) * 2.0 ** -23 * (np.abs(a64) @ np.abs(b64))
    if c.dtype != F32:
        info = ml_dtypes.finfo(c.dtype)
        u = float(info.eps) / 2                          # unit roundoff of the output dtype
        bound = bound + u * (np.abs(ref) + bound) + float(info.smallest_subnormal) / 2
    err = np.abs(got - ref)
    assert np.isfinite(got).all(), "non-finite results"
    bad = err > bound
    if bad.any():
        i = np.unravel_index(np.argmax(err - bound), err.shape)
        raise AssertionError(f"{bad.sum()} of {bad.size} elements outside the error bound; "
                             f"worst at {i}: got {got[i]}, expected {ref[i]}, "
                             f"error {err[i]:.3g} > bound {bound[i]:.3g}")


def run_matmul(a, b, c, tiles):
    bm, bn, bk = tiles
    m, k = a.shape
    n = b.shape[1]
    kernel = matmul_int8_kernel if a.dtype == I8 else matmul_kernel
    kernel[(pl.cdiv(m, bm), pl.cdiv(n, bn))](a, b, c, m, n, k, BM=bm, BN=bn, BK=bk)


def canary_output(m, n, dtype, pad=3, value=-7):
    big = np.full((m + 2 * pad, n + 2 * pad), value, dtype=np.float32).astype(dtype)
    return big, big[pad:pad + m, pad:pad + n], big.copy()


def assert_outside_untouched(big, original, pad=3):
    inside = np.zeros(big.shape, bool)
    inside[pad:big.shape[0] - pad, pad:big.shape[1] - pad] = True
    np.testing.assert_array_equal(big[~inside].astype(np.float64),
                                  original[~inside].astype(np.float64))


# -- dtypes and shapes -------------------------------------------------------------------------

@pytest.mark.parametrize("dtypes", DTYPE_PAIRS, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", SHAPES + [(512, 512, 512), (17, 65, 33), (1024, 1024, 1)],
                         ids=lambda s: "x".join(map(str, s)))
def test_matmul_dtypes(dtypes, shape):
    """(17, 65, 33): 17x33 @ 33x65, nothing a multiple of a fractal; (1024, 1024, 1): a
    1024x1 @ 1x1024 outer product, a K of one element in the micro-kernel."""
    in_dtype, out_dtype = dtypes
    m, n, k = shape
    rng = np.random.default_rng(m * 7 + n * 3 + k)
    a, b = make_inputs(rng, m, n, k, in_dtype)
    big, c, original = canary_output(m, n, out_dtype)
    run_matmul(a, b, c, (32, 64, 32))
    assert_matmul_close(c, a, b)
    assert_outside_untouched(big, original)


@pytest.mark.parametrize("block", ["AVX2_BLOCK", "AVX512_BLOCK"])
def test_matmul_each_register_block(block, monkeypatch, tmp_path):
    """Both host micro-kernels, whichever this host would pick (LLVM splits 16-lane vectors
    where AVX-512 is missing): rows past the last 12/6-row block, columns past the last 32/16
    panel and past the last vector, B in place (f32) and packed (f16, int8). The block is not
    in the cache key (the host's features choose it), so a fresh cache and kernel."""
    from pypto.backends.ascend.lowering import cube
    chosen = getattr(cube, block)
    monkeypatch.setattr(cube, "register_block", lambda: chosen)
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path))

    @pypto.jit
    def block_kernel(a, b, c, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
        acc = pl.zeros((BM, BN), dtype=c.dtype)
        for k in range(0, K, BK):
            ta = pl.load(a, offsets=(pl.program_id(0) * BM, k), shape=(BM, BK))
            tb = pl.load(b, offsets=(k, pl.program_id(1) * BN), shape=(BK, BN))
            acc = pl.matmul(ta, tb, acc=acc)
        pl.store(c, offsets=(pl.program_id(0) * BM, pl.program_id(1) * BN), value=acc)

    rng = np.random.default_rng(5)
    for in_dtype, out_dtype in [(F32, F32), (F16, F32), (I8, I32)]:
        m, n, k = 61, 90, 40            # BM 40: 3 x 12 + 4 and 6 x 6 + 4 rows; BN 88: 2 x 32 + 24
        a, b = make_inputs(rng, m, n, k, in_dtype)
        c = np.zeros((m, n), out_dtype)
        block_kernel[(pl.cdiv(m, 40), pl.cdiv(n, 88))](a, b, c, k, BM=40, BN=88, BK=24)
        assert_matmul_close(c, a, b)


@pytest.mark.parametrize("tiles", TILES, ids=TILE_IDS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtypes", [(F16, F32), (BF16, BF16), (I8, I32)],
                         ids=["f16-f32", "bf16-bf16", "i8-i32"])
def test_matmul_tile_configs(tiles, shape, dtypes):
    in_dtype, out_dtype = dtypes
    m, n, k = shape
    rng = np.random.default_rng(m + n + k)
    a, b = make_inputs(rng, m, n, k, in_dtype)
    big, c, original = canary_output(m, n, out_dtype)
    run_matmul(a, b, c, tiles)
    assert_matmul_close(c, a, b)
    assert_outside_untouched(big, original)


@pytest.mark.parametrize("tiles", [(3, 5, 7), (20, 24, 8), (48, 16, 16)],
                         ids=["3x5x7", "20x24x8", "48x16x16"])
@pytest.mark.parametrize("dtypes", [(F16, F32), (I8, I32)], ids=["f16-f32", "i8-i32"])
def test_matmul_tiles_not_multiple_of_fractal(tiles, dtypes):
    """Tiles smaller than or not multiples of the 16 x 32-byte cube fractal."""
    m, n, k = 45, 37, 29
    rng = np.random.default_rng(2)
    a, b = make_inputs(rng, m, n, k, dtypes[0])
    big, c, original = canary_output(m, n, dtypes[1])
    run_matmul(a, b, c, tiles)
    assert_matmul_close(c, a, b)
    assert_outside_untouched(big, original)


@pytest.mark.parametrize("tiles", TILES, ids=TILE_IDS)
@pytest.mark.parametrize("dtypes", [(F16, F32), (F32, F32)], ids=["f16-f32", "f32-f32"])
def test_matmul_512(tiles, dtypes):
    in_dtype, out_dtype = dtypes
    rng = np.random.default_rng(512)
    a, b = make_inputs(rng, 512, 512, 512, in_dtype)
    c = np.zeros((512, 512), out_dtype)
    run_matmul(a, b, c, tiles)
    assert_matmul_close(c, a, b)


def test_matmul_int8_extremes_exact():
    """All -128 operands at K = 512 give 8_388_608 per element: exact in int32."""
    m, n, k = 40, 24, 512
    a = np.full((m, k), -128, np.int8)
    b = np.full((k, n), -128, np.int8)
    b[:, 1] = 127
    c = np.zeros((m, n), np.int32)
    run_matmul(a, b, c, (16, 16, 64))
    assert_matmul_close(c, a, b)
    assert c[0, 0] == 128 * 128 * k and c[0, 1] == -128 * 127 * k


def test_error_bound_catches_a_dropped_k_tile():
    """Self-check of the tolerance: losing one K tile's contribution must fail the bound."""
    rng = np.random.default_rng(3)
    a, b = make_inputs(rng, 64, 64, 128, F16)
    wrong = (a[:, 32:].astype(np.float64) @ b[32:].astype(np.float64)).astype(np.float32)
    with pytest.raises(AssertionError, match="outside the error bound"):
        assert_matmul_close(wrong, a, b)


# -- variants ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtypes", [(F16, F32), (F16, F16), (BF16, F32), (F32, F32), (I8, I32)],
                         ids=["f16-f32", "f16-f16", "bf16-f32", "f32-f32", "i8-i32"])
@pytest.mark.parametrize("shape", [(50, 70, 20), (1, 1, 1), (64, 32, 32)],
                         ids=lambda s: "x".join(map(str, s)))
def test_matmul_without_acc(dtypes, shape):
    in_dtype, out_dtype = dtypes
    m, n, k = shape
    rng = np.random.default_rng(m + k)
    a, b = make_inputs(rng, m, n, k, in_dtype)
    big, c, original = canary_output(m, n, out_dtype)
    matmul_single_tile_kernel[(pl.cdiv(m, 32), pl.cdiv(n, 32))](a, b, c, BM=32, BN=32, BK=32)
    assert_matmul_close(c, a, b)
    assert_outside_untouched(big, original)


@pytest.mark.parametrize("dtypes", [(F16, F32), (BF16, F32), (I8, I32)],
                         ids=["f16-f32", "bf16-f32", "i8-i32"])
@pytest.mark.parametrize("k", [1, 16, 17, 100])
def test_matmul_peeled_first_tile(dtypes, k):
    in_dtype, out_dtype = dtypes
    m, n = 45, 37
    rng = np.random.default_rng(k)
    a, b = make_inputs(rng, m, n, k, in_dtype)
    c = np.zeros((m, n), out_dtype)
    matmul_peeled_kernel[(pl.cdiv(m, 16), pl.cdiv(n, 32))](a, b, c, k, BM=16, BN=32, BK=16)
    assert_matmul_close(c, a, b)


@pytest.mark.parametrize("dtypes", [(F16, F16), (F16, BF16), (BF16, BF16), (F32, F16)],
                         ids=["f16-f16", "f16-bf16", "bf16-bf16", "f32-f16"])
def test_matmul_out_dtype_argument(dtypes):
    in_dtype, out_dtype = dtypes
    m, n, k = 40, 50, 30
    rng = np.random.default_rng(4)
    a, b = make_inputs(rng, m, n, k, in_dtype)
    c = np.zeros((m, n), out_dtype)
    matmul_out_dtype_kernel[(pl.cdiv(m, 32), pl.cdiv(n, 32))](a, b, c, k, BM=32, BN=32, BK=32)
    assert_matmul_close(c, a, b)


def test_matmul_float16_output_rounding_is_nearest():
    """With exactly representable products and sums, the float16 output is the rounded exact
    result: 1 + 2**-11 (a tie) rounds to 1, 1 + 3 * 2**-11 to 1 + 2**-9 (ties to even)."""
    a = np.array([[1.0, 2.0 ** -11], [1.0, 3 * 2.0 ** -11], [2048.0, 1.0]], np.float16)
    b = np.array([[1.0], [1.0]], np.float16)
    c = np.zeros((3, 1), np.float16)
    run_matmul(a, b, c, (16, 16, 16))
    np.testing.assert_array_equal(c.astype(np.float64).ravel(), [1.0, 1.0 + 2.0 ** -9, 2048.0])


def test_matmul_large_values_overflow_to_inf_in_float16_output():
    a = np.full((2, 4), 200.0, np.float16)
    b = np.full((4, 2), 200.0, np.float16)
    c32 = np.zeros((2, 2), np.float32)
    c16 = np.zeros((2, 2), np.float16)
    run_matmul(a, b, c32, (16, 16, 16))
    run_matmul(a, b, c16, (16, 16, 16))
    np.testing.assert_array_equal(c32, 160000.0)     # fits in the float32 accumulator
    assert np.isposinf(c16.astype(np.float32)).all()


# -- grids and launches ------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(100, 70, 90), (16, 16, 16), (300, 200, 64)],
                         ids=lambda s: "x".join(map(str, s)))
def test_matmul_persistent_without_grid(shape):
    m, n, k = shape
    rng = np.random.default_rng(m)
    a, b = make_inputs(rng, m, n, k, F16)
    big, c, original = canary_output(m, n, F32)
    matmul_persistent_kernel(a, b, c, m, n, k, BM=32, BN=32, BK=32)
    assert_matmul_close(c, a, b)
    assert_outside_untouched(big, original)


def test_default_grid_is_one_block_per_cube_core():
    """Without a grid a cube kernel runs 24 programs on ascend910b1: rows past 24 * BM stay."""
    bm = 16
    m = 30 * bm
    rng = np.random.default_rng(5)
    a, b = make_inputs(rng, m, 16, 16, F16)
    c = np.full((m, 16), -1.0, np.float32)
    compiled = matmul_row_block_kernel.compile(a, b, c, BM=bm, BN=16, BK=16)
    assert compiled.metadata["uses_cube"]
    matmul_row_block_kernel(a, b, c, BM=bm, BN=16, BK=16)
    assert_matmul_close(c[:24 * bm], a[:24 * bm], b)
    np.testing.assert_array_equal(c[24 * bm:], -1.0)


def test_matmul_grid_callable():
    m, n, k = 70, 90, 40
    rng = np.random.default_rng(6)
    a, b = make_inputs(rng, m, n, k, BF16)
    c = np.zeros((m, n), np.float32)
    matmul_kernel[lambda meta: (pl.cdiv(meta["M"], meta["BM"]), pl.cdiv(meta["N"], meta["BN"]))](
        a, b, c, m, n, k, BM=32, BN=64, BK=32)
    assert_matmul_close(c, a, b)


# -- layouts -----------------------------------------------------------------------------------

def test_matmul_non_contiguous_operands_and_output():
    m, n, k = 37, 29, 53
    rng = np.random.default_rng(8)
    a = rng.standard_normal((k, m)).astype(np.float16).T        # (m, k), column-major view
    b = np.asfortranarray(rng.standard_normal((k, n)).astype(np.float16))
    big = np.full((2 * m, 3 * n), -3.0, np.float32)
    c = big[::2, 1::3]                                 # strided rows and columns
    original = big.copy()
    run_matmul(a, b, c, (16, 16, 16))
    assert_matmul_close(c, a, b)
    mask = np.ones(big.shape, bool)
    mask[::2, 1::3] = False
    np.testing.assert_array_equal(big[mask], original[mask])


def test_matmul_torch_tensors():
    torch = pytest.importorskip("torch")
    m, n, k = 48, 40, 72
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=gen).to(torch.bfloat16)
    b = torch.randn(n, k, generator=gen).to(torch.bfloat16).t()     # transposed view
    c = torch.zeros(m, n, dtype=torch.float32)
    ptr = c.data_ptr()
    matmul_kernel[(pl.cdiv(m, 32), pl.cdiv(n, 32))](a, b, c, m, n, k, BM=32, BN=32, BK=32)
    assert c.data_ptr() == ptr
    to_np = lambda t: t.float().numpy().astype(BF16)   # noqa: E731 - exact for bf16 values
    assert_matmul_close(c.numpy(), to_np(a), to_np(b))


# -- compiled artefacts ------------------------------------------------------------------------

def test_compiled_kernel_asm_and_metadata():
    a = np.zeros((64, 64), np.float16)
    c = np.zeros((64, 64), np.float32)
    compiled = matmul_kernel.compile(a, a, c, 64, 64, 64, BM=32, BN=64, BK=32)
    assert compiled.metadata["uses_cube"] and compiled.metadata["kind"] == "cube"
    assert compiled.metadata["written_tensors"] == ["c"]
    assert "tile.matmul" in compiled.asm["tile_ir"]
    assert "pto.tmatmul" in compiled.asm["pto"]
    assert "matmul_kernel_launch" in compiled.asm["llir"]
    assert isinstance(compiled.asm["obj"], bytes) and compiled.asm["obj"]


# -- property-based ----------------------------------------------------------------------------

@settings(max_examples=15, deadline=None)
@given(m=st.integers(1, 200), n=st.integers(1, 200), k=st.integers(1, 200),
       tiles=st.sampled_from(TILES), dtypes=st.sampled_from(DTYPE_PAIRS),
       seed=st.integers(0, 2 ** 32 - 1))
def test_matmul_property(m, n, k, tiles, dtypes, seed):
    in_dtype, out_dtype = dtypes
    rng = np.random.default_rng(seed)
    a, b = make_inputs(rng, m, n, k, in_dtype)
    big, c, original = canary_output(m, n, out_dtype)
    run_matmul(a, b, c, tiles)
    assert_matmul_close(c, a, b)
    assert_outside_untouched(big, original)


@settings(max_examples=10, deadline=None)
@given(m=st.integers(1, 90), n=st.integers(1, 90), k=st.integers(1, 60),
       tiles=st.tuples(st.integers(1, 40), st.integers(1, 56), st.integers(1, 24)),
       dtypes=st.sampled_from(DTYPE_PAIRS), seed=st.integers(0, 2 ** 32 - 1))
@example(m=40, n=61, k=30, tiles=(13, 29, 7), dtypes=(F32, F32), seed=0)
@example(m=40, n=61, k=30, tiles=(13, 29, 7), dtypes=(BF16, F32), seed=1)
@example(m=25, n=50, k=19, tiles=(12, 40, 5), dtypes=(I8, I32), seed=2)
@example(m=9, n=9, k=9, tiles=(5, 7, 3), dtypes=(F16, F32), seed=3)
def test_matmul_odd_tile_shapes(m, n, k, tiles, dtypes, seed):
    """Tile shapes that reach every path of the host's cube micro-kernel (lowering/cube.py):
    full 6-row blocks and the rows after them, full 16-column panels, one 8-column vector
    after them and the last columns in a plain loop (29 = 16 + 8 + 5), tiles with no full
    block at all (5 x 7), and the partial tiles at the matrix's edges; K spans several tiles,
    so the first matmul of each block and the accumulating ones both run."""
    test_matmul_property.hypothesis.inner_test(m, n, k, tiles, dtypes, seed)


@pytest.mark.slow
@pytest.mark.parametrize("dtypes", [(F16, F32), (BF16, BF16), (F32, F32), (I8, I32)],
                         ids=["f16-f32", "bf16-bf16", "f32-f32", "i8-i32"])
@pytest.mark.parametrize("tiles", [(16, 16, 16), (128, 128, 32)], ids=["16x16x16", "128x128x32"])
def test_matmul_large_slow(dtypes, tiles):
    in_dtype, out_dtype = dtypes
    m, n, k = 2048, 1999, 2051
    rng = np.random.default_rng(1)
    a, b = make_inputs(rng, m, n, k, in_dtype)
    big, c, original = canary_output(m, n, out_dtype)
    run_matmul(a, b, c, tiles)
    assert_matmul_close(c, a, b)
    assert_outside_untouched(big, original)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(m=st.integers(1, 300), n=st.integers(1, 300), k=st.integers(1, 600),
       tiles=st.sampled_from(TILES), dtypes=st.sampled_from(DTYPE_PAIRS),
       seed=st.integers(0, 2 ** 32 - 1))
def test_matmul_property_slow(m, n, k, tiles, dtypes, seed):
    test_matmul_property.hypothesis.inner_test(m, n, k, tiles, dtypes, seed)
