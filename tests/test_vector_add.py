"""End-to-end tests of vector (elementwise) kernels: parse → Tile IR → PTO → LLVM → run on the
simulated AI Cores, checked against numpy.

Half-width floats (float16, bfloat16) are computed in float32 and rounded once per op, so the
references below do exactly that in numpy and the comparisons are bit-exact.
"""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pypto
import pypto.language as pl

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BF16, np.dtype(np.int32)]
DTYPE_IDS = ["float32", "float16", "bfloat16", "int32"]
UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


# -- kernels -----------------------------------------------------------------------------------

@pypto.jit
def add_kernel(x, y, out, n, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    a = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    b = pl.load(y, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(pid * BLOCK,), value=a + b)


@pypto.jit
def scalar_ops_kernel(x, y, o_affine, o_sub, o_rsub, o_mix, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    a = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    b = pl.load(y, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.store(o_affine, offsets=(pid * BLOCK,), value=a * 2.0 + 1)
    pl.store(o_sub, offsets=(pid * BLOCK,), value=a - b)
    pl.store(o_rsub, offsets=(pid * BLOCK,), value=2 - a)
    pl.store(o_mix, offsets=(pid * BLOCK,), value=3 * a - b * 2)


@pypto.jit
def runtime_scalar_kernel(x, out, alpha, beta, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    a = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(pid * BLOCK,), value=a * alpha + beta)


@pypto.jit
def grid_stride_add_kernel(x, y, out, n, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    num_tiles = pl.cdiv(n, BLOCK)
    for t in range(pid, num_tiles, pl.num_programs(0)):
        a = pl.load(x, offsets=(t * BLOCK,), shape=(BLOCK,))
        b = pl.load(y, offsets=(t * BLOCK,), shape=(BLOCK,))
        pl.store(out, offsets=(t * BLOCK,), value=a + b)


@pypto.jit
def program_ids_kernel(out):
    """out[linear block index] = p0 * 10000 + p1 * 100 + p2, and out[n:] = num_programs."""
    p0 = pl.program_id(0)
    p1 = pl.program_id(1)
    p2 = pl.program_id(2)
    n0 = pl.num_programs(0)
    n1 = pl.num_programs(1)
    n2 = pl.num_programs(2)
    lin = (p2 * n1 + p1) * n0 + p0
    ids = pl.zeros((1,), dtype=pl.int32) + (p0 * 10000 + p1 * 100 + p2)
    pl.store(out, offsets=(lin,), value=ids)
    counts = pl.zeros((3,), dtype=pl.int32)
    pl.store(out, offsets=(n0 * n1 * n2,), value=counts + n0 * 10000 + n1 * 100 + n2)


@pypto.jit
def add_3d_grid_kernel(x, y, out, BLOCK: pl.constexpr):
    blk = (pl.program_id(2) * pl.num_programs(1) + pl.program_id(1)) * pl.num_programs(0) \
        + pl.program_id(0)
    a = pl.load(x, offsets=(blk * BLOCK,), shape=(BLOCK,))
    b = pl.load(y, offsets=(blk * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(blk * BLOCK,), value=a + b)


@pypto.jit
def add_2d_kernel(x, y, out, TR: pl.constexpr, TC: pl.constexpr):
    r = pl.program_id(0) * TR
    c = pl.program_id(1) * TC
    a = pl.load(x, offsets=(r, c), shape=(TR, TC))
    b = pl.load(y, offsets=(r, c), shape=(TR, TC))
    pl.store(out, offsets=(r, c), value=a + b)


@pypto.jit
def copy_kernel(x, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    pl.store(out, offsets=(pid * BLOCK,), value=pl.load(x, offsets=(pid * BLOCK,),
                                                         shape=(BLOCK,)))


@pypto.jit
def shift_kernel(x, out, shift, BLOCK: pl.constexpr, PAD: pl.constexpr):
    """out[i] = x[i + shift] (PAD where i + shift is outside x). Block 0 stores at -BLOCK."""
    start = (pl.program_id(0) - 1) * BLOCK
    t = pl.load(x, offsets=(start + shift,), shape=(BLOCK,), padding=PAD)
    pl.store(out, offsets=(start,), value=t)


@pypto.jit
def shift_2d_kernel(x, out, dr, dc, TR: pl.constexpr, TC: pl.constexpr, PAD: pl.constexpr):
    """out[i, j] = x[i + dr, j + dc] (PAD outside); the grid starts one tile before (0, 0)."""
    r = (pl.program_id(0) - 1) * TR
    c = (pl.program_id(1) - 1) * TC
    t = pl.load(x, offsets=(r + dr, c + dc), shape=(TR, TC), padding=PAD)
    pl.store(out, offsets=(r, c), value=t)


@pypto.jit
def padded_load_kernel(x, out, off, BLOCK: pl.constexpr, PAD: pl.constexpr):
    """Loads one tile at ``off`` and stores it whole into ``out`` (which has BLOCK elements)."""
    t = pl.load(x, offsets=(off,), shape=(BLOCK,), padding=PAD)
    pl.store(out, offsets=(0,), value=t)


@pypto.jit
def far_store_kernel(x, out, off, BLOCK: pl.constexpr):
    t = pl.load(x, offsets=(0,), shape=(BLOCK,))
    pl.store(out, offsets=(off,), value=t)


# -- helpers -----------------------------------------------------------------------------------

def random_array(rng, n, dtype, specials=True):
    """Random values of ``dtype``; floats include a few infinities, zeros and NaNs."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=n, endpoint=True, dtype=dtype)
    x = (rng.standard_normal(n) * 100).astype(np.float32).astype(dtype)
    if specials and n >= 8:
        idx = rng.choice(n, size=6, replace=False)
        x[idx] = np.array([np.inf, -np.inf, 0.0, -0.0, np.nan, 65504.0],
                          dtype=np.float32).astype(dtype)
    return x


def ref_add(x, y):
    """numpy reference: integers wrap; half floats are added in float32 and rounded once."""
    if x.dtype.kind in "iu":
        return x + y
    with np.errstate(over="ignore", invalid="ignore"):
        return (x.astype(np.float32) + y.astype(np.float32)).astype(x.dtype)


def bits(a):
    a = np.ascontiguousarray(a)
    return a.view(UINT_OF_SIZE[a.dtype.itemsize])


def assert_same(actual, expected):
    """Bit-exact equality, except that any NaN matches any NaN."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    if actual.dtype.kind == "f" or actual.dtype == BF16:
        nan_a = np.isnan(actual.astype(np.float32))
        nan_e = np.isnan(expected.astype(np.float32))
        np.testing.assert_array_equal(nan_a, nan_e, err_msg="NaN positions differ")
        ok = nan_a | (bits(actual) == bits(expected))
    else:
        ok = bits(actual) == bits(expected)
    if not ok.all():
        bad = np.flatnonzero(~ok.ravel())
        raise AssertionError(
            f"{bad.size} of {ok.size} elements differ, first at flat index {bad[0]}: "
            f"got {actual.ravel()[bad[:5]]}, expected {expected.ravel()[bad[:5]]}")


def canary_buffer(n, dtype, pad=37, value=-77):
    """A buffer of ``n + 2 * pad`` canaries; returns (buffer, out view, copy of the buffer)."""
    buf = np.full(n + 2 * pad, value, dtype=np.float32).astype(dtype)
    return buf, buf[pad:pad + n], buf.copy()


def assert_canaries(buf, original, pad=37):
    assert_same(buf[:pad], original[:pad])
    assert_same(buf[buf.size - pad:], original[original.size - pad:])


# -- vector add --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("n", [1, 1000, 100_003, 2 ** 20])
@pytest.mark.parametrize("block", [256, 1024])
def test_add(dtype, n, block):
    rng = np.random.default_rng(n + block)
    x, y = random_array(rng, n, dtype), random_array(rng, n, dtype)
    buf, out, original = canary_buffer(n, dtype)
    add_kernel[(pl.cdiv(n, block),)](x, y, out, n, BLOCK=block)
    assert_same(out, ref_add(x, y))
    assert_canaries(buf, original)


@pytest.mark.parametrize("dtype", DTYPES[:3], ids=DTYPE_IDS[:3])
def test_add_rounds_ties_to_even(dtype):
    """Sums exactly halfway between two representable values round to the even one."""
    eps = float(ml_dtypes.finfo(dtype).eps)
    x = np.array([1.0, 1.0 + eps, 3.0, -1.0], dtype=np.float32).astype(dtype)
    y = np.array([eps / 2, eps / 2, eps * 0.75, -eps / 2], dtype=np.float32).astype(dtype)
    out = np.zeros(4, dtype)
    add_kernel[(1,)](x, y, out, 4, BLOCK=16)
    assert_same(out, ref_add(x, y))
    assert float(out[0]) == 1.0                       # 1 + eps/2: tie, down to even
    assert float(out[1]) == 1.0 + 2 * eps             # 1 + 3 eps/2: tie, up to even
    assert float(out[3]) == -1.0


@pytest.mark.parametrize("block", [1, 3, 100, 4095])
def test_add_block_not_power_of_two(block):
    n = 3001
    rng = np.random.default_rng(block)
    x, y = random_array(rng, n, np.float32), random_array(rng, n, np.float32)
    buf, out, original = canary_buffer(n, np.float32)
    add_kernel[(pl.cdiv(n, block),)](x, y, out, n, BLOCK=block)
    assert_same(out, ref_add(x, y))
    assert_canaries(buf, original)


def test_add_size_zero():
    x = np.zeros(0, np.float32)
    buf, out, original = canary_buffer(0, np.float32)
    add_kernel[(1,)](x, x, out, 0, BLOCK=16)
    add_kernel[(0,)](x, x, out, 0, BLOCK=16)
    assert_canaries(buf, original)


def test_add_more_blocks_than_needed():
    """Blocks whose tile lies entirely past the end read and write nothing."""
    n, block = 1000, 128
    rng = np.random.default_rng(0)
    x, y = random_array(rng, n, np.float32), random_array(rng, n, np.float32)
    buf, out, original = canary_buffer(n, np.float32)
    add_kernel[(pl.cdiv(n, block) + 5,)](x, y, out, n, BLOCK=block)
    assert_same(out, ref_add(x, y))
    assert_canaries(buf, original)


def test_add_in_place():
    rng = np.random.default_rng(1)
    x, y = random_array(rng, 3000, np.float32), random_array(rng, 3000, np.float32)
    expected = ref_add(x, y)
    add_kernel[(pl.cdiv(3000, 256),)](x, y, x, 3000, BLOCK=256)
    assert_same(x, expected)


def test_read_only_output_rejected_and_read_only_inputs_accepted():
    x = np.arange(100, dtype=np.float32)
    x.flags.writeable = False
    out = np.zeros(100, np.float32)
    add_kernel[(1,)](x, x, out, 100, BLOCK=128)
    assert_same(out, x + x)
    with pytest.raises(ValueError, match="read-only"):
        add_kernel[(1,)](out, out, x, 100, BLOCK=128)


# -- tile-scalar arithmetic --------------------------------------------------------------------

def _round_op(dtype, f, *args):
    """One kernel op on half/single floats: compute in float32 and round to ``dtype``."""
    with np.errstate(over="ignore", invalid="ignore"):
        return f(*[a.astype(np.float32) for a in args]).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES[:3], ids=DTYPE_IDS[:3])
def test_tile_scalar_ops(dtype):
    n, block = 1500, 256
    rng = np.random.default_rng(7)
    x, y = random_array(rng, n, dtype), random_array(rng, n, dtype)
    outs = [np.zeros(n, dtype) for _ in range(4)]
    scalar_ops_kernel[(pl.cdiv(n, block),)](x, y, *outs, BLOCK=block)
    f32 = np.float32
    expected = {
        "a*2.0+1": _round_op(dtype, lambda v: v + f32(1), _round_op(dtype, lambda v: v * f32(2), x)),
        "a-b": _round_op(dtype, np.subtract, x, y),
        "2-a": _round_op(dtype, lambda v: f32(2) - v, x),
        "3*a-b*2": _round_op(dtype, np.subtract, _round_op(dtype, lambda v: v * f32(3), x),
                             _round_op(dtype, lambda v: v * f32(2), y)),
    }
    for (name, want), got in zip(expected.items(), outs):
        try:
            assert_same(got, want)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None


@pypto.jit
def int_scalar_ops_kernel(x, y, o_affine, o_sub, o_rsub, o_mix, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    a = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    b = pl.load(y, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.store(o_affine, offsets=(pid * BLOCK,), value=a * 2 + 1)
    pl.store(o_sub, offsets=(pid * BLOCK,), value=a - b)
    pl.store(o_rsub, offsets=(pid * BLOCK,), value=2 - a)
    pl.store(o_mix, offsets=(pid * BLOCK,), value=3 * a - b * 2)


def test_tile_scalar_ops_int32():
    """Integer tiles with integer scalars stay int32 and wrap like numpy."""
    n, block = 1500, 256
    rng = np.random.default_rng(8)
    x, y = random_array(rng, n, np.int32), random_array(rng, n, np.int32)
    outs = [np.zeros(n, np.int32) for _ in range(4)]
    int_scalar_ops_kernel[(pl.cdiv(n, block),)](x, y, *outs, BLOCK=block)
    with np.errstate(over="ignore"):
        expected = [x * np.int32(2) + np.int32(1), x - y, np.int32(2) - x,
                    np.int32(3) * x - y * np.int32(2)]
    for got, want in zip(outs, expected):
        assert_same(got, want)


def test_float_scalar_on_int_tile_stored_to_int():
    """``a * 2.0 + 1`` on an int32 tile promotes to float32; storing it into an int32 tensor
    converts back, truncating toward zero (numpy's astype)."""
    n, block = 1500, 256
    rng = np.random.default_rng(9)
    x = rng.integers(-2 ** 20, 2 ** 20, size=n).astype(np.int32)
    y = rng.integers(-2 ** 20, 2 ** 20, size=n).astype(np.int32)
    outs = [np.zeros(n, np.int32) for _ in range(4)]
    scalar_ops_kernel[(pl.cdiv(n, block),)](x, y, *outs, BLOCK=block)
    f32 = np.float32
    assert_same(outs[0], (x.astype(f32) * f32(2) + f32(1)).astype(np.int32))
    assert_same(outs[1], x - y)
    assert_same(outs[2], 2 - x)
    assert_same(outs[3], 3 * x - y * 2)


@pypto.jit
def to_int32_kernel(x, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    t = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(pid * BLOCK,), value=t.to(pl.int32))


def test_float_to_int_cast():
    x = np.array([1.5, -2.5, 3.0, -0.75, 1e6, -1e6, 0.0, 7.999], np.float32)
    out = np.zeros(8, np.int32)
    to_int32_kernel[(1,)](x, out, BLOCK=16)
    assert_same(out, x.astype(np.int32))


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16), BF16],
                         ids=DTYPE_IDS[:3])
def test_runtime_float_scalars(dtype):
    """Float kernel arguments reach the kernel as float32 scalars."""
    n = 777
    rng = np.random.default_rng(3)
    x = random_array(rng, n, dtype)
    out = np.zeros(n, dtype)
    alpha, beta = 0.1, -3.25
    runtime_scalar_kernel[(pl.cdiv(n, 128),)](x, out, alpha, beta, BLOCK=128)
    f32 = np.float32
    # the float32 scalar is converted to the tile's dtype, as TMULS/TADDS take a scalar of it
    a_s, b_s = (f32(np.array([v], f32).astype(dtype)[0]) for v in (alpha, beta))
    want = _round_op(dtype, lambda v: v + b_s, _round_op(dtype, lambda v: v * a_s, x))
    assert_same(out, want)


def test_runtime_int_scalars_into_int_tile():
    n = 300
    x = np.arange(n, dtype=np.int32) - 150
    out = np.zeros(n, np.int32)
    runtime_scalar_kernel[(pl.cdiv(n, 64),)](x, out, 3, -7, BLOCK=64)
    assert_same(out, x * 3 - 7)
    runtime_scalar_kernel[(pl.cdiv(n, 64),)](x, out, 1, 16, BLOCK=64)   # 1 and 16 specialise
    assert_same(out, x + 16)


# -- grids -------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 5000, 100_003])
def test_grid_stride_loop_without_grid(n):
    block = 512
    rng = np.random.default_rng(n)
    x, y = random_array(rng, n, np.float32), random_array(rng, n, np.float32)
    buf, out, original = canary_buffer(n, np.float32)
    grid_stride_add_kernel(x, y, out, n, BLOCK=block)
    assert_same(out, ref_add(x, y))
    assert_canaries(buf, original)


def test_default_grid_is_one_block_per_vector_core():
    assert not program_ids_kernel.compile(np.zeros(64, np.int32)).metadata["uses_cube"]
    out = np.full(64, -1, np.int32)
    program_ids_kernel(out)
    np.testing.assert_array_equal(out[:48], np.arange(48) * 10000)
    np.testing.assert_array_equal(out[48:51], 48 * 10000 + 101)
    np.testing.assert_array_equal(out[51:], -1)


@pytest.mark.parametrize("grid", [(5,), (3, 4), (2, 3, 4), (1, 1, 7), (4, 1, 2), [2, 2]])
def test_program_ids_multi_dimensional_grid(grid):
    full = tuple(grid) + (1,) * (3 - len(grid))
    total = int(np.prod(full))
    out = np.full(total + 3 + 5, -1, np.int32)
    program_ids_kernel[grid](out)
    p2, p1, p0 = np.meshgrid(*[np.arange(g) for g in reversed(full)], indexing="ij")
    expected = (p0 * 10000 + p1 * 100 + p2).ravel()
    np.testing.assert_array_equal(out[:total], expected)
    np.testing.assert_array_equal(out[total:total + 3],
                                  full[0] * 10000 + full[1] * 100 + full[2])
    np.testing.assert_array_equal(out[total + 3:], -1)


def test_grid_as_int_and_empty_grid():
    out = np.full(10, -1, np.int32)
    program_ids_kernel[4](out)
    np.testing.assert_array_equal(out[:4], np.arange(4) * 10000)
    out[:] = -1
    program_ids_kernel[(0, 3)](out)
    np.testing.assert_array_equal(out, -1)


def test_add_3d_grid():
    n, block = 10_000, 128
    grid = (3, 5, pl.cdiv(pl.cdiv(n, block), 15))
    rng = np.random.default_rng(11)
    x, y = random_array(rng, n, np.float16), random_array(rng, n, np.float16)
    buf, out, original = canary_buffer(n, np.float16)
    add_3d_grid_kernel[grid](x, y, out, BLOCK=block)
    assert_same(out, ref_add(x, y))
    assert_canaries(buf, original)


def test_grid_callable_of_meta_parameters():
    n = 12_345
    rng = np.random.default_rng(12)
    x, y = random_array(rng, n, np.float32), random_array(rng, n, np.float32)
    out = np.zeros(n, np.float32)
    seen = []

    def grid(meta):
        seen.append(dict(meta))
        return (pl.cdiv(meta["n"], meta["BLOCK"]),)

    add_kernel[grid](x, y, out, n, BLOCK=256)
    assert_same(out, ref_add(x, y))
    assert seen and seen[0]["n"] == n and seen[0]["BLOCK"] == 256
    assert set(seen[0]) == {"x", "y", "out", "n", "BLOCK"}

    out[:] = 0
    add_kernel[lambda meta: (pl.cdiv(meta["n"], meta["BLOCK"]),)](x, y, out, n=n, BLOCK=1024)
    assert_same(out, ref_add(x, y))


@pytest.mark.parametrize("grid", [(1, 2, 3, 4), (), (-1,), (2.0,), "3", (True,)])
def test_bad_grid_rejected(grid):
    x = np.zeros(16, np.float32)
    with pytest.raises(ValueError, match="grid"):
        add_kernel[grid](x, x, x, 16, BLOCK=16)


# -- mixed dtypes ------------------------------------------------------------------------------

@pytest.mark.parametrize("dx,dy", [(np.float16, np.float32), (np.float16, BF16), (BF16, np.float32)],
                         ids=["f16+f32", "f16+bf16", "bf16+f32"])
def test_add_mixed_float_dtypes_promote_to_float32(dx, dy):
    rng = np.random.default_rng(31)
    n = 700
    x, y = random_array(rng, n, dx), random_array(rng, n, dy)
    out = np.zeros(n, np.float32)
    add_kernel[(pl.cdiv(n, 256),)](x, y, out, n, BLOCK=256)
    assert_same(out, x.astype(np.float32) + y.astype(np.float32))
    out2 = np.zeros(n, np.float32)
    add_kernel[(pl.cdiv(n, 256),)](y, x, out2, n, BLOCK=256)
    assert_same(out2, out)


def test_add_mixed_signedness_is_commutative():
    """x + y and y + x must agree whatever the promotion rule for (uint8, int8) is."""
    x = np.array([200, 255, 0, 128, 1, 100], np.uint8)
    y = np.array([-1, -128, 127, -128, -2, 27], np.int8)
    xy, yx = np.zeros(6, np.int16), np.zeros(6, np.int16)
    add_kernel[(1,)](x, y, xy, 6, BLOCK=16)
    add_kernel[(1,)](y, x, yx, 6, BLOCK=16)
    assert_same(xy, yx)


def test_broadcast_view_with_zero_stride():
    x = np.broadcast_to(np.float32(3.25), (1000,))
    y = np.arange(1000, dtype=np.float32)
    out = np.zeros(1000, np.float32)
    add_kernel[(pl.cdiv(1000, 128),)](x, y, out, 1000, BLOCK=128)
    assert_same(out, x + y)


def test_strides_not_multiple_of_itemsize_rejected():
    rec = np.zeros(10, dtype=[("a", np.float32), ("b", np.int8)])["a"]
    out = np.zeros(10, np.float32)
    with pytest.raises(ValueError, match="strides"):
        add_kernel[(1,)](rec, rec, out, 10, BLOCK=16)


# -- 2-D tiles ---------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(1, 1), (50, 77), (129, 33), (16, 64)])
@pytest.mark.parametrize("tile", [(8, 32), (16, 16)])
def test_add_2d_tiles(shape, tile):
    rows, cols = shape
    tr, tc = tile
    rng = np.random.default_rng(rows * cols)
    x = random_array(rng, rows * cols, np.float32).reshape(shape)
    y = random_array(rng, rows * cols, np.float32).reshape(shape)
    # out is a window of a bigger canary buffer: its rows are not contiguous with each other
    big = np.full((rows + 4, cols + 6), -5.0, np.float32)
    original = big.copy()
    out = big[2:2 + rows, 3:3 + cols]
    add_2d_kernel[(pl.cdiv(rows, tr), pl.cdiv(cols, tc))](x, y, out, TR=tr, TC=tc)
    assert_same(out, ref_add(x, y))
    mask = np.ones(big.shape, bool)
    mask[2:2 + rows, 3:3 + cols] = False
    assert_same(big[mask], original[mask])

    out2 = np.zeros(shape, np.float32)                          # contiguous output too
    add_2d_kernel[(pl.cdiv(rows, tr), pl.cdiv(cols, tc))](x, y, out2, TR=tr, TC=tc)
    assert_same(out2, ref_add(x, y))


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16, np.dtype(np.int32)],
                         ids=["float16", "bfloat16", "int32"])
def test_add_2d_dtypes(dtype):
    shape = (37, 70)
    rng = np.random.default_rng(5)
    x = random_array(rng, 37 * 70, dtype).reshape(shape)
    y = random_array(rng, 37 * 70, dtype).reshape(shape)
    out = np.zeros(shape, dtype)
    add_2d_kernel[(pl.cdiv(37, 16), pl.cdiv(70, 32))](x, y, out, TR=16, TC=32)
    assert_same(out, ref_add(x, y))


# -- strided (non-contiguous) views ------------------------------------------------------------

def test_strided_1d_inputs_and_outputs():
    rng = np.random.default_rng(21)
    base_x = random_array(rng, 6001, np.float32)
    base_y = random_array(rng, 9000, np.float32)
    x = base_x[::2]                   # 3001 elements, stride 2
    y = base_y[::-3]                  # 3000 elements, negative stride
    x = x[:3000]
    n = 3000
    expected = ref_add(x, y)
    big = np.full(3 * n + 10, 9.0, np.float32)
    original = big.copy()
    out = big[5:5 + 3 * n:3]          # stride 3 output
    add_kernel[(pl.cdiv(n, 256),)](x, y, out, n, BLOCK=256)
    assert_same(out, expected)
    untouched = np.ones(big.size, bool)
    untouched[5:5 + 3 * n:3] = False
    assert_same(big[untouched], original[untouched])

    rev = np.zeros(n, np.float32)
    add_kernel[(pl.cdiv(n, 256),)](x, y, rev[::-1], n, BLOCK=256)   # reversed output
    assert_same(rev[::-1], expected)


def test_column_slice_and_transposed_views():
    rng = np.random.default_rng(22)
    m = random_array(rng, 45 * 60, np.float32).reshape(45, 60)
    col = m[:, 7]                                      # 1-D, stride 60
    out = np.zeros(45, np.float32)
    copy_kernel[(pl.cdiv(45, 16),)](col, out, BLOCK=16)
    assert_same(out, col.copy())

    dst = np.full((45, 60), -1.0, np.float32)
    copy_kernel[(pl.cdiv(45, 16),)](col, dst[:, 59], BLOCK=16)   # write a column
    assert_same(dst[:, 59], col.copy())
    assert_same(dst[:, :59], np.full((45, 59), -1.0, np.float32))

    # transposed 2-D views in and out: out.T = m.T + m2.T, i.e. out = m + m2
    m2 = random_array(rng, 45 * 60, np.float32).reshape(45, 60)
    out_t = np.full((45, 60), 3.0, np.float32)
    add_2d_kernel[(pl.cdiv(60, 16), pl.cdiv(45, 32))](m.T, m2.T, out_t.T, TR=16, TC=32)
    assert_same(out_t, ref_add(m, m2))

    # 2-D column block (non-contiguous rows) as input
    sub = m[:, 10:47]
    out_sub = np.zeros(sub.shape, np.float32)
    add_2d_kernel[(pl.cdiv(45, 8), pl.cdiv(37, 32))](sub, sub, out_sub, TR=8, TC=32)
    assert_same(out_sub, ref_add(sub, sub))


def test_fortran_ordered_arrays():
    rng = np.random.default_rng(23)
    x = np.asfortranarray(random_array(rng, 30 * 50, np.float16).reshape(30, 50))
    y = np.asfortranarray(random_array(rng, 30 * 50, np.float16).reshape(30, 50))
    out = np.asfortranarray(np.zeros((30, 50), np.float16))
    add_2d_kernel[(pl.cdiv(30, 16), pl.cdiv(50, 16))](x, y, out, TR=16, TC=16)
    assert_same(out, ref_add(x, y))


# -- out-of-range offsets and padding ----------------------------------------------------------

@pytest.mark.parametrize("shift", [0, -5, 3, -64, -70, 999, 1000, 5000, -5000,
                                   10 ** 12, -(10 ** 12)])
def test_negative_and_out_of_range_offsets(shift):
    n, block, pad = 1000, 64, -2.5
    x = np.arange(n, dtype=np.float32) + 1
    buf, out, original = canary_buffer(n, np.float32, value=123)
    # one block before index 0 and two past the end: their stores fall outside ``out``
    shift_kernel[(pl.cdiv(n, block) + 3,)](x, out, shift, BLOCK=block, PAD=pad)
    idx = np.arange(n) + shift
    expected = np.where((idx >= 0) & (idx < n), np.clip(idx, 0, n - 1) + 1.0, pad)
    assert_same(out, expected.astype(np.float32))
    assert_canaries(buf, original)


@pytest.mark.parametrize("dr,dc", [(0, 0), (-3, -5), (4, 7), (-20, 3), (100, 0), (0, -100)])
def test_negative_offsets_2d(dr, dc):
    rows, cols, tr, tc, pad = 27, 41, 8, 16, 7
    x = (np.arange(rows * cols, dtype=np.int32) + 1).reshape(rows, cols)
    big = np.full((rows + 40, cols + 40), -9, np.int32)
    original = big.copy()
    out = big[20:20 + rows, 20:20 + cols]
    grid = (pl.cdiv(rows, tr) + 2, pl.cdiv(cols, tc) + 2)
    shift_2d_kernel[grid](x, out, dr, dc, TR=tr, TC=tc, PAD=pad)
    padded = np.full((rows + 400, cols + 400), pad, np.int32)
    padded[200:200 + rows, 200:200 + cols] = x
    expected = padded[200 + dr:200 + dr + rows, 200 + dc:200 + dc + cols]
    assert_same(out, expected)
    mask = np.ones(big.shape, bool)
    mask[20:20 + rows, 20:20 + cols] = False
    assert_same(big[mask], original[mask])


@pytest.mark.parametrize("dtype,pad", [
    (np.dtype(np.float32), float("-inf")), (np.dtype(np.float32), 3.5),
    (np.dtype(np.float32), float("nan")), (np.dtype(np.float16), 7), (np.dtype(np.float16), -0.0),
    (BF16, 1.5), (BF16, float("inf")), (np.dtype(np.int32), -1), (np.dtype(np.int32), 2 ** 31 - 1),
], ids=lambda v: str(v))
def test_padding_values(dtype, pad):
    x = (np.arange(10) + 1).astype(dtype)
    out = np.zeros(32, dtype)
    padded_load_kernel[(1,)](x, out, -4, BLOCK=32, PAD=pad)
    expected = np.full(32, pad, dtype=np.float64).astype(dtype) if dtype.kind != "i" else \
        np.full(32, pad, dtype=dtype)
    expected[4:14] = x
    assert_same(out, expected)


def test_far_out_of_range_stores_write_nothing():
    x = np.arange(16, dtype=np.float32)
    buf, out, original = canary_buffer(100, np.float32)
    for off in [-16, -17, 100, 101, 10 ** 15, -(10 ** 15)]:
        far_store_kernel[(1,)](x, out, off, BLOCK=16)
        assert_same(buf, original)
    far_store_kernel[(1,)](x, out, -8, BLOCK=16)                # half inside
    assert_same(out[:8], x[8:])
    assert_same(out[8:], original[37 + 8:37 + 100])
    assert_canaries(buf, original)


# -- property-based ----------------------------------------------------------------------------

@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 5000), log_block=st.integers(4, 11), dtype_index=st.integers(0, 3),
       seed=st.integers(0, 2 ** 32 - 1))
def test_add_property(n, log_block, dtype_index, seed):
    dtype, block = DTYPES[dtype_index], 2 ** log_block
    rng = np.random.default_rng(seed)
    x, y = random_array(rng, n, dtype), random_array(rng, n, dtype)
    buf, out, original = canary_buffer(n, dtype, pad=5)
    add_kernel[(pl.cdiv(n, block),)](x, y, out, n, BLOCK=block)
    assert_same(out, ref_add(x, y))
    assert_canaries(buf, original, pad=5)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 300_000), log_block=st.integers(4, 11), dtype_index=st.integers(0, 3),
       seed=st.integers(0, 2 ** 32 - 1))
def test_add_property_slow(n, log_block, dtype_index, seed):
    test_add_property.hypothesis.inner_test(n, log_block, dtype_index, seed)


# -- torch tensors -----------------------------------------------------------------------------

TORCH_DTYPES = ["float32", "float16", "bfloat16", "int32"]


@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_torch_tensors(name):
    torch = pytest.importorskip("torch")
    tdtype = getattr(torch, name)
    n = 5000
    gen = torch.Generator().manual_seed(0)
    if name == "int32":
        x = torch.randint(-2 ** 30, 2 ** 30, (n,), generator=gen, dtype=tdtype)
        y = torch.randint(-2 ** 30, 2 ** 30, (n,), generator=gen, dtype=tdtype)
    else:
        x = (torch.randn(n, generator=gen) * 10).to(tdtype)
        y = (torch.randn(n, generator=gen) * 10).to(tdtype)
    out = torch.full((n,), -1, dtype=tdtype)
    ptr = out.data_ptr()
    add_kernel[(pl.cdiv(n, 512),)](x, y, out, n, BLOCK=512)
    assert out.data_ptr() == ptr
    if name == "int32":
        expected = x + y
    else:
        expected = (x.float() + y.float()).to(tdtype)    # torch rounds f32 → half once too
    assert torch.equal(out, expected)


def test_torch_strided_output_written_in_place():
    torch = pytest.importorskip("torch")
    n = 3000
    x = torch.arange(2 * n, dtype=torch.bfloat16)[::2]          # non-contiguous input
    y = torch.ones(n, dtype=torch.bfloat16)
    big = torch.full((3 * n,), -4.0, dtype=torch.bfloat16)
    out = big[1::3]                                              # non-contiguous output view
    add_kernel[(pl.cdiv(n, 256),)](x, y, out, n, BLOCK=256)
    expected = (x.float() + y.float()).to(torch.bfloat16)
    assert torch.equal(big[1::3], expected)                      # written through the view
    assert torch.equal(big[0::3], torch.full((n,), -4.0, dtype=torch.bfloat16))
    assert torch.equal(big[2::3], torch.full((n,), -4.0, dtype=torch.bfloat16))


def test_torch_2d_and_requires_grad():
    torch = pytest.importorskip("torch")
    x = torch.randn(40, 50, requires_grad=True)
    y = torch.randn(50, 40).t()                                  # transposed view
    out = torch.zeros(40, 50)
    add_2d_kernel[(pl.cdiv(40, 16), pl.cdiv(50, 16))](x, y, out, TR=16, TC=16)
    assert torch.equal(out, (x + y).detach())


def test_torch_and_numpy_mixed():
    torch = pytest.importorskip("torch")
    x = torch.arange(100, dtype=torch.float32)
    y = np.arange(100, dtype=np.float32)
    out = torch.zeros(100)
    add_kernel[(1,)](x, y, out, 100, BLOCK=128)
    assert torch.equal(out, 2 * x)
