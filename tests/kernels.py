"""Kernels several test files exercise (the target model, the cycle model, the profiler)."""
import pypto
import pypto.language as pl


@pypto.jit
def vadd(x, y, out, n, BLOCK: pl.constexpr):
    """A persistent vector add: each block strides over the tensor."""
    pid = pl.program_id(0)
    for i in range(pid * BLOCK, n, BLOCK * pl.num_programs(0)):
        pl.store(out, [i], pl.load(x, [i], [BLOCK]) + pl.load(y, [i], [BLOCK]))


@pypto.jit
def row_softmax(x, out, M, N: pl.constexpr, BM: pl.constexpr, STAGES: pl.constexpr):
    """Softmax over rows, BM rows per tile, double buffered when STAGES is 2."""
    pid = pl.program_id(0)
    for r in pl.range(pid * BM, M, BM * pl.num_programs(0), num_stages=STAGES):
        t = pl.load(x, [r, 0], [BM, N])
        e = pl.exp(t - pl.max(t, axis=1, keepdims=True))
        pl.store(out, [r, 0], e / pl.sum(e, axis=1, keepdims=True))


@pypto.jit
def tile_softmax(x, out, BM: pl.constexpr, BN: pl.constexpr):
    """Softmax over the rows of one BM x BN tile per block; columns past the tensor load as
    -inf (they take no share)."""
    r = pl.program_id(0) * BM
    t = pl.load(x, offsets=(r, 0), shape=(BM, BN), padding=float("-inf"))
    e = pl.exp(t - pl.max(t, axis=1, keepdims=True))
    pl.store(out, offsets=(r, 0), value=e / pl.sum(e, axis=1, keepdims=True))


@pypto.jit
def mm_bias_sigmoid(a, b, bias, c, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    """A matmul with a vector epilogue: the kernel the cube/vector split exists for (the cube
    adds the bias, ``tmatmul.bias``; the sigmoid, which the FIX pipe has not, is vector
    work)."""
    pm = pl.program_id(0)
    pn = pl.program_id(1)
    acc = pl.zeros((BM, BN), pl.float32)
    for k in range(0, K, BK):
        acc = pl.matmul(pl.load(a, [pm * BM, k], [BM, BK]), pl.load(b, [k, pn * BN], [BK, BN]),
                        acc=acc)
    out = pl.sigmoid(acc + pl.load(bias, [0, pn * BN], [1, BN]))
    pl.store(c, [pm * BM, pn * BN], out)
