"""Ascend C kernels written against pto-isa for the tests, and their declarations."""
import pytest

import pypto
from pypto.ascend_c import library
from pypto.backends.ptoisa import toolchain

try:
    library.tools("probe")
    MISSING = ""
except toolchain.ToolMissing as e:
    MISSING = str(e)

needs_tools = pytest.mark.skipif(bool(MISSING), reason=f"no pto-isa toolchain: {MISSING}")

TILE = 1024

# z = x + y over n float32 elements, one 1 x 1024 tile per block, the last one ragged
VADD = """#include <pto/pto-inst.hpp>
using namespace pto;

constexpr int TILE = 1024;            // elements per block

__global__ AICORE void vadd(__gm__ float *x, __gm__ float *y, __gm__ float *z, int64_t n) {
    const int64_t start = int64_t(get_block_idx()) * TILE;
    if (start >= n) return;
    const int64_t len = n - start < TILE ? n - start : TILE;
    using Shape1 = Shape<1, 1, 1, 1, DYNAMIC>;
    using Global = GlobalTensor<float, Shape1, Stride<1, 1, 1, 1, 1>>;
    using Vec = Tile<TileType::Vec, float, 1, TILE, BLayout::RowMajor, 1, DYNAMIC>;
    Global gx(x + start, Shape1(len)), gy(y + start, Shape1(len)), gz(z + start, Shape1(len));
    Vec tx(len), ty(len), tz(len);
    TASSIGN(tx, 0x0);
    TASSIGN(ty, 0x1000);
    TASSIGN(tz, 0x2000);
    TLOAD(tx, gx);
    TLOAD(ty, gy);
    set_flag(PIPE_MTE2, PIPE_V, EVENT_ID0);
    wait_flag(PIPE_MTE2, PIPE_V, EVENT_ID0);
    TADD(tz, tx, ty);
    set_flag(PIPE_V, PIPE_MTE3, EVENT_ID0);
    wait_flag(PIPE_V, PIPE_MTE3, EVENT_ID0);
    TSTORE(gz, tz);
}
"""

# Two outputs, roles marked as pto-isa's own kernels mark them: s = x + y, d = x - y (fp16)
SUM_DIFF = """#include <pto/pto-inst.hpp>
using namespace pto;

constexpr int TILE = 512;

__global__ AICORE void sum_diff(__gm__ half __in__ *x, __gm__ half __in__ *y,
                                __gm__ half __out__ *s, __gm__ half __out__ *d, int32_t n) {
    const int32_t start = int32_t(get_block_idx()) * TILE;
    const int32_t len = n - start < TILE ? n - start : TILE;
    using Shape1 = Shape<1, 1, 1, 1, DYNAMIC>;
    using Global = GlobalTensor<half, Shape1, Stride<1, 1, 1, 1, 1>>;
    using Vec = Tile<TileType::Vec, half, 1, TILE, BLayout::RowMajor, 1, DYNAMIC>;
    Global gx(x + start, Shape1(len)), gy(y + start, Shape1(len));
    Global gs(s + start, Shape1(len)), gd(d + start, Shape1(len));
    Vec tx(len), ty(len), ts(len), td(len);
    TASSIGN(tx, 0x0);
    TASSIGN(ty, 0x400);
    TASSIGN(ts, 0x800);
    TASSIGN(td, 0xC00);
    TLOAD(tx, gx);
    TLOAD(ty, gy);
    set_flag(PIPE_MTE2, PIPE_V, EVENT_ID0);
    wait_flag(PIPE_MTE2, PIPE_V, EVENT_ID0);
    TADD(ts, tx, ty);
    TSUB(td, tx, ty);
    set_flag(PIPE_V, PIPE_MTE3, EVENT_ID0);
    wait_flag(PIPE_V, PIPE_MTE3, EVENT_ID0);
    TSTORE(gs, ts);
    TSTORE(gd, td);
}
"""

# C = A @ B (fp16 in, fp32 out) on the cube: one 64 x 64 block of C per core, K in steps of 64
# through L1 (TLOAD), L0A/L0B (TMOV) and L0C (TMATMUL, TMATMUL_ACC), stored by the FIX pipe
MATMUL = """#include <pto/pto-inst.hpp>
using namespace pto;

constexpr int BM = 64, BN = 64, BK = 64;

__global__ AICORE void matmul(__gm__ half *a, __gm__ half *b, __gm__ float *c,
                              int32_t m, int32_t n, int32_t k) {
    const int32_t tiles_n = n / BN;
    const int32_t row = int32_t(get_block_idx()) / tiles_n * BM;
    const int32_t col = int32_t(get_block_idx()) % tiles_n * BN;
    using Rows = Stride<1, 1, 1, DYNAMIC, 1>;
    using GA = GlobalTensor<half, Shape<1, 1, 1, BM, BK>, Rows>;
    using GB = GlobalTensor<half, Shape<1, 1, 1, BK, BN>, Rows>;
    using GC = GlobalTensor<float, Shape<1, 1, 1, BM, BN>, Rows>;
    Tile<TileType::Mat, half, BM, BK, BLayout::ColMajor, BM, BK, SLayout::RowMajor, 512> a1;
    Tile<TileType::Mat, half, BK, BN, BLayout::ColMajor, BK, BN, SLayout::RowMajor, 512> b1;
    TileLeft<half, BM, BK, BM, BK> a0;
    TileRight<half, BK, BN, BK, BN> b0;
    TileAcc<float, BM, BN, BM, BN> acc;
    TASSIGN(a1, 0x0);
    TASSIGN(b1, 0x10000);
    TASSIGN(a0, 0x0);
    TASSIGN(b0, 0x0);
    TASSIGN(acc, 0x0);
    for (int32_t kk = 0; kk < k; kk += BK) {
        GA ga(a + row * k + kk, Shape<1, 1, 1, BM, BK>(), Rows(k));
        GB gb(b + kk * n + col, Shape<1, 1, 1, BK, BN>(), Rows(n));
        TLOAD(a1, ga);
        TLOAD(b1, gb);
        set_flag(PIPE_MTE2, PIPE_MTE1, EVENT_ID0);
        wait_flag(PIPE_MTE2, PIPE_MTE1, EVENT_ID0);
        TMOV(a0, a1);
        TMOV(b0, b1);
        set_flag(PIPE_MTE1, PIPE_M, EVENT_ID0);
        wait_flag(PIPE_MTE1, PIPE_M, EVENT_ID0);
        if (kk == 0)
            TMATMUL(acc, a0, b0);
        else
            TMATMUL_ACC(acc, acc, a0, b0);
        set_flag(PIPE_M, PIPE_MTE2, EVENT_ID0);
        wait_flag(PIPE_M, PIPE_MTE2, EVENT_ID0);
    }
    set_flag(PIPE_M, PIPE_FIX, EVENT_ID0);
    wait_flag(PIPE_M, PIPE_FIX, EVENT_ID0);
    GC gc(c + row * n + col, Shape<1, 1, 1, BM, BN>(), Rows(n));
    TSTORE(gc, acc);
}
"""


def matmul_outputs(a, b):
    """C's shape; the kernel computes whole 64 x 64 blocks, so other shapes are refused."""
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: {a.shape} @ {b.shape}")
    if any(d % 64 for d in (*a.shape, b.shape[1])):
        raise ValueError(f"every dimension must be a multiple of 64, got {a.shape} @ {b.shape}")
    return [pypto.OutputSpec((a.shape[0], b.shape[1]), "float32")]


def declare_vadd():
    return pypto.ascend_c_kernel(VADD, "vadd",
                                 outputs=lambda x, y: pypto.OutputSpec(x.shape, x.dtype),
                                 grid=lambda x, y: -(-x.size // TILE), ranks={"x": 1, "y": 1},
                                 scalars={"n": lambda x, y: x.size})


def declare_sum_diff():
    return pypto.ascend_c_kernel(SUM_DIFF, "sum_diff",
                                 outputs=lambda x, y: [pypto.OutputSpec(x.shape, x.dtype)] * 2,
                                 grid=lambda x, y: -(-x.size // 512),
                                 scalars={"n": lambda x, y: x.size})


def declare_matmul():
    return pypto.ascend_c_kernel(
        MATMUL, "matmul", outputs=matmul_outputs, ranks={"a": 2, "b": 2},
        grid=lambda a, b: (a.shape[0] // 64) * (b.shape[1] // 64),
        scalars={"m": lambda a, b: a.shape[0], "n": lambda a, b: b.shape[1],
                 "k": lambda a, b: a.shape[1]})
