"""A (1, N) row or an (M, 1) column broadcast into an arithmetic op is one expand
instruction (passes/expand.py: ``tcolexpand<op>`` / ``trowexpand<op>``), not a full-size
broadcast tile and the op: the results are numpy's, the .pto has no broadcast temporary, and a
GEMM epilogue's bias add at 128 x 256 fp32 fits the UB. The corpus's ``col_expand_ops`` and
``row_expand_ops`` run them on pto-isa and through both assemblers and npu-check."""
import re

import numpy as np
import pytest

import pypto
import pypto.language as pl


@pypto.jit
def row_ops(x, r, o_add, o_sub, o_mul, o_div, o_max, o_min, o_rsub, M: pl.constexpr,
            N: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(M, N))
    row = pl.load(r, offsets=(0, 0), shape=(1, N))
    pl.store(o_add, offsets=(0, 0), value=t + row)
    pl.store(o_sub, offsets=(0, 0), value=t - row)
    pl.store(o_mul, offsets=(0, 0), value=row * t)          # commutes: the row may come first
    pl.store(o_div, offsets=(0, 0), value=t / row)
    pl.store(o_max, offsets=(0, 0), value=pl.maximum(t, row))
    pl.store(o_min, offsets=(0, 0), value=pl.minimum(row, t))
    pl.store(o_rsub, offsets=(0, 0), value=row - t)         # does not commute: a broadcast


def _args(m, n, dtype, side: tuple, seed: int):
    """x, the broadcast operand of shape ``side`` (magnitudes 0.5-2, either sign: safe to
    divide by) and the seven outputs."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, n)).astype(dtype)
    r = (rng.uniform(0.5, 2.0, side) * rng.choice([-1, 1], side)).astype(dtype)
    return x, r, *(np.zeros((m, n), dtype) for _ in range(7))


def row_ops_args(m, n, dtype):
    return _args(m, n, dtype, (1, n), m * n)


def _want_rows(x, r):
    x, r = x.astype(np.float64), r.astype(np.float64)
    return [x + r, x - r, r * x, x / r, np.maximum(x, r), np.minimum(r, x), r - x]


@pypto.jit
def column_ops(x, c, o_add, o_sub, o_mul, o_div, o_max, o_min, o_soft, M: pl.constexpr,
               N: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(M, N))
    col = pl.load(c, offsets=(0, 0), shape=(M, 1))
    pl.store(o_add, offsets=(0, 0), value=col + t)          # commutes: the column may come first
    pl.store(o_sub, offsets=(0, 0), value=t - col)
    pl.store(o_mul, offsets=(0, 0), value=t * col)
    pl.store(o_div, offsets=(0, 0), value=t / col)
    pl.store(o_max, offsets=(0, 0), value=pl.maximum(col, t))
    pl.store(o_min, offsets=(0, 0), value=pl.minimum(t, col))
    e = pl.exp(t - pl.max(t, axis=1, keepdims=True))         # softmax: two row expands
    pl.store(o_soft, offsets=(0, 0), value=e / pl.sum(e, axis=1, keepdims=True))


def column_ops_args(m, n, dtype):
    return _args(m, n, dtype, (m, 1), m + n)


def _want_columns(x, c):
    x, c = x.astype(np.float64), c.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return [c + x, x - c, x * c, x / c, np.maximum(c, x), np.minimum(x, c),
            e / e.sum(axis=1, keepdims=True)]


# kernel, its arguments, numpy's results, the float16 tolerance (the softmax's exp and sums
# round more than one op)
FORMS = {"row": (row_ops, row_ops_args, _want_rows, 1e-3),
         "column": (column_ops, column_ops_args, _want_columns, 2e-3)}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("m,n", [(8, 64), (13, 40)])
def test_broadcast_ops_match_numpy(form, m, n, dtype):
    kernel, make_args, want, half_tol = FORMS[form]
    tol = 1e-6 if dtype == np.float32 else half_tol
    args = make_args(m, n, dtype)
    kernel[(1,)](*args, M=m, N=n)
    for got, expected in zip(args[2:], want(*args[:2])):
        np.testing.assert_allclose(got.astype(np.float64), expected, rtol=tol, atol=tol)


def test_each_column_op_is_one_row_expand_instruction():
    """No full-size broadcast tile is left; the column's copies go to the UB's reserved top
    8 KiB (pto-isa's TMP_UB_OFFSET), so the instruction names no scratch."""
    pto = column_ops.compile(*column_ops_args(13, 40, np.float32), M=13, N=40).asm["pto"]
    for op in ("add", "sub", "mul", "div", "max", "min"):
        assert re.search(rf"pto\.trowexpand{op} ins\(%\S+, %\S+ :", pto), op
    assert "pto.trowexpand " not in pto


def test_each_op_is_one_column_expand_instruction():
    pto = row_ops.compile(*row_ops_args(8, 64, np.float32), M=8, N=64).asm["pto"]
    for op in ("add", "sub", "mul", "div", "max", "min"):
        assert f"pto.tcolexpand{op} " in pto, op
    assert pto.count("pto.tcolexpand ") == 1          # only row - t keeps its broadcast


@pypto.jit
def gemm_bias(a, b, bias, c, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    pm, pn = pl.program_id(0), pl.program_id(1)
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in pl.range(0, K, BK, num_stages=2):
        acc = pl.matmul(pl.load(a, offsets=(pm * BM, k), shape=(BM, BK)),
                        pl.load(b, offsets=(k, pn * BN), shape=(BK, BN)), acc=acc)
    y = pl.relu(acc + pl.load(bias, offsets=(0, pn * BN), shape=(1, BN)))
    pl.store(c, offsets=(pm * BM, pn * BN), value=y)


def test_a_bias_relu_epilogue_fits_at_128_x_256():
    """Before: the broadcast bias (128 KiB) beside the accumulator (128 KiB) and their sum
    overflowed the 184 KiB UB; now the sum and the ReLU are written over the accumulator."""
    rng = np.random.default_rng(3)
    m, n, k = 128, 512, 128
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    bias = rng.standard_normal((1, n)).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    kernel = gemm_bias.compile(a, b, bias, c, k, BM=128, BN=256, BK=64)
    assert kernel.metadata["buffer_bytes"]["vec"] <= 128 * 256 * 4 + 256 * 4 + 64
    gemm_bias[(1, 2)](a, b, bias, c, k, BM=128, BN=256, BK=64)
    want = np.maximum(a.astype(np.float32) @ b.astype(np.float32) + bias, 0)
    np.testing.assert_allclose(c, want, rtol=2e-3, atol=2e-3)


def test_a_one_column_tile_keeps_its_broadcast():
    """An (M, 1) tile is printed through its (1, M) row view, whose valid shape is not the
    row's: ptoas 0.60 rejected its tcolexpandadd ("expects src1 valid_shape[1] to equal dst
    valid_shape[1]"; the hypothesis differential test met it), so it stays a broadcast."""
    x = np.arange(4, dtype=np.float32).reshape(4, 1)
    r = np.full((1, 1), 0.5, np.float32)
    outs = [np.zeros((4, 1), np.float32) for _ in range(7)]
    pto = row_ops.compile(x, r, *outs, M=4, N=1).asm["pto"]
    assert "tcolexpandadd" not in pto
    row_ops[(1,)](x, r, *outs, M=4, N=1)
    for got, want in zip(outs, _want_rows(x, r)):
        np.testing.assert_allclose(got, want, rtol=1e-6)
