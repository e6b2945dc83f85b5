"""Tiles of rank 3 and 4 (unrolled into rank-2 planes by passes/unbatch.py): loads and stores
with tails over every axis, broadcasting, elementwise ops, reductions over any axis, batched
matmul with transposes, loop-carried batched tiles; compiled against the interpreter and numpy.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pypto
import pypto.language as pl
from pypto.errors import BufferOverflow

from .utils import assert_close, run_both

RNG = np.random.default_rng(34)


def _rand(*shape, dtype=np.float32):
    return RNG.uniform(-1, 1, shape).astype(dtype)


def _window(x, offsets, shape, pad=0.0):
    """numpy's reading of a padded load: the tile at ``offsets``, padding past the end."""
    out = np.full(shape, pad, x.dtype)
    src = tuple(slice(o, min(o + n, d)) for o, n, d in zip(offsets, shape, x.shape))
    dst = tuple(slice(0, s.stop - s.start) for s in src)
    if all(s.stop > s.start for s in src):
        out[dst] = x[src]
    return out


def _store(y, offsets, tile):
    """numpy's reading of a clipped store."""
    src = tuple(slice(0, max(min(n, d - o), 0)) for o, n, d in zip(offsets, tile.shape, y.shape))
    y[tuple(slice(o, o + s.stop) for o, s in zip(offsets, src))] = tile[src]


# -- load, broadcast, elementwise, reduce, store ------------------------------------------------

@pypto.jit
def elementwise_reduce3(x, row, out, red, B: pl.constexpr, M: pl.constexpr, N: pl.constexpr,
                        AXIS: pl.constexpr, OP: pl.constexpr):
    """Planes pid*B.. of x: x * 2 + row (a (1, 1, N) row broadcast over planes and rows),
    exp, stored whole; a reduction over AXIS with keepdims stored into ``red``."""
    b0 = pl.program_id(0) * B
    t = pl.load(x, offsets=(b0, 0, 0), shape=(B, M, N))
    r = pl.load(row, offsets=(0, 0, 0), shape=(1, 1, N))
    y = pl.exp(t * 2.0 + r) - 1.0
    pl.store(out, offsets=(b0, 0, 0), value=y)
    if OP == "sum":
        s = pl.sum(t, axis=AXIS, keepdims=True)
    elif OP == "max":
        s = pl.max(t, axis=AXIS, keepdims=True)
    else:
        s = pl.min(t, axis=AXIS, keepdims=True)
    pl.store(red, offsets=(pl.program_id(0), 0, 0) if AXIS == 0 else (b0, 0, 0), value=s)


REDUCERS = {"sum": np.sum, "max": np.max, "min": np.min}


def _reference3(x, row, B, M, N, axis, op, blocks):
    out = np.zeros_like(x)
    red_shape = list(x.shape)
    red_shape[axis] = blocks if axis == 0 else 1
    red = np.zeros(red_shape, np.float32)
    for pid in range(blocks):
        t = _window(x, (pid * B, 0, 0), (B, M, N))
        _store(out, (pid * B, 0, 0), np.exp(t * 2 + row[:, :, :N]) - 1)
        s = REDUCERS[op](t, axis=axis, keepdims=True)
        _store(red, (pid, 0, 0) if axis == 0 else (pid * B, 0, 0), s)
    return out, red


@settings(max_examples=5, deadline=None, derandomize=True, database=None)
@given(dims=st.tuples(st.integers(1, 5), st.integers(1, 20), st.integers(1, 40)),
       tile=st.tuples(st.sampled_from([1, 2, 3]), st.sampled_from([8, 16]),
                      st.sampled_from([16, 32])),
       axis=st.integers(0, 2), op=st.sampled_from(sorted(REDUCERS)))
def test_rank3_elementwise_and_reductions_match_numpy(dims, tile, axis, op):
    """Tails on every axis: the last block's planes run past the tensor's end (padding 0 on
    load, no write on store); rows and columns of the tile past the tensor's likewise."""
    (D0, D1, D2), (B, M, N) = dims, tile
    M, N = max(M, 8), max(N, 16)
    D1, D2 = min(D1, M), min(D2, N)
    x = _rand(D0, D1, D2)
    row = _rand(1, 1, N)
    blocks = -(-D0 // B)
    red_shape = [D0, D1, D2]
    red_shape[axis] = blocks if axis == 0 else 1
    arrays = {"x": x, "row": row, "out": np.zeros_like(x),
              "red": np.zeros(red_shape, np.float32)}
    got, interp = run_both(elementwise_reduce3, (blocks,), arrays, B=B, M=M, N=N, AXIS=axis,
                           OP=op)
    want_out, want_red = _reference3(x, row, B, M, N, axis, op, blocks)
    for name, want in (("out", want_out), ("red", want_red)):
        assert_close(got[name], interp[name], 1e-5, 1e-6, what=f"{name} compiled vs interpreted")
        assert_close(got[name], want, 1e-5, 1e-5, what=f"{name} vs numpy")


@pypto.jit
def three_reductions(x, row, out, s0, s1, s2, B: pl.constexpr, M: pl.constexpr,
                     N: pl.constexpr):
    """elementwise_reduce3's three axes in one kernel (the .pto conformance corpus's entry)."""
    b0 = pl.program_id(0) * B
    t = pl.load(x, offsets=(b0, 0, 0), shape=(B, M, N))
    pl.store(out, offsets=(b0, 0, 0), value=pl.exp(t * 2.0 + pl.load(row, offsets=(0, 0, 0),
                                                                     shape=(1, 1, N))) - 1.0)
    pl.store(s0, offsets=(pl.program_id(0), 0, 0), value=pl.sum(t, axis=0, keepdims=True))
    pl.store(s1, offsets=(b0, 0, 0), value=pl.max(t, axis=1, keepdims=True))
    pl.store(s2, offsets=(b0, 0, 0), value=pl.min(t, axis=2, keepdims=True))


def test_three_reductions_in_one_kernel():
    x, row = _rand(3, 5, 20), _rand(1, 1, 32)
    arrays = {"x": x, "row": row, "out": np.zeros_like(x), "s0": np.zeros((2, 5, 20), np.float32),
              "s1": np.zeros((3, 1, 20), np.float32), "s2": np.zeros((3, 5, 1), np.float32)}
    got, interp = run_both(three_reductions, (2,), arrays, B=2, M=8, N=32)
    for name, (axis, op) in {"s0": (0, "sum"), "s1": (1, "max"), "s2": (2, "min")}.items():
        _, want = _reference3(x, row, 2, 8, 32, axis, op, 2)
        assert_close(got[name], interp[name], 1e-6, 1e-6, what=name)
        assert_close(got[name], want, 1e-5, 1e-5, what=name)
    # parameters named like the lowering's scalars (s1, s2) once gave the .pto two %s1
    pto = three_reductions.compile(*arrays.values(), B=2, M=8, N=32).asm["pto"]
    defined = re.findall(r"^\s*(%[\w.]+) = ", pto, re.M) + re.findall(r"(%\w+): !pto", pto)
    assert len(defined) == len(set(defined)) and "%s1" in defined
    # the cycle model charges what the planes move: the last block's second plane is past
    # x's end, and each plane's rows and columns past 5 x 20 are padding (x: 3 planes of
    # 5 x 20 floats; row: one (1, 32) plane per block)
    with pypto.Profiler() as prof:
        three_reductions[(2,)](*arrays.values(), B=2, M=8, N=32)
    ops = {o.name: o for o in prof.operations}
    assert ops["tload"].bytes == 4 * (3 * 5 * 20 + 2 * 32)


@pypto.jit
def rank4_reduce(x, out, A: pl.constexpr, B: pl.constexpr, M: pl.constexpr,
                 N: pl.constexpr, AXIS: pl.constexpr):
    """A rank-4 tile: the product of its sum over AXIS (dropped) with a (B, 1, N) tile."""
    t = pl.load(x, offsets=(0, 0, 0, 0), shape=(A, B, M, N))
    s = pl.sum(t, axis=AXIS)
    pl.store(out, offsets=(0,) * (4 if AXIS is None else 3), value=s * 0.5)


@pytest.mark.parametrize("axis", [0, pytest.param(1, marks=pytest.mark.slow),
                                  pytest.param(2, marks=pytest.mark.slow), 3])
def test_rank4_sum_over_each_axis_matches_numpy(axis):
    """Axis 0 folds planes across the outer leading axis, 3 reduces each plane (1 and 2, the
    inner leading axis and the rows, in the slow run)."""
    x = _rand(2, 3, 5, 7)
    shape = tuple(n for i, n in enumerate((2, 3, 8, 16)) if i != axis)
    arrays = {"x": x, "out": np.zeros(shape, np.float32)}
    got, interp = run_both(rank4_reduce, (1,), arrays, A=2, B=3, M=8, N=16, AXIS=axis)
    want = np.zeros(shape, np.float32)
    _store(want, (0, 0, 0), 0.5 * _window(x, (0, 0, 0, 0), (2, 3, 8, 16)).sum(axis=axis))
    assert_close(got["out"], interp["out"], 1e-6, 1e-6)
    assert_close(got["out"], want, 1e-5, 1e-6)


# -- batched matmul ---------------------------------------------------------------------------

@pypto.jit
def batched_matmul(a, b, c, B: pl.constexpr, M: pl.constexpr, K: pl.constexpr,
                   N: pl.constexpr, BK: pl.constexpr, A_BATCH: pl.constexpr,
                   B_BATCH: pl.constexpr, A_T: pl.constexpr, B_T: pl.constexpr):
    """c[p] = op(a[p]) @ op(b[p]) over a K loop with a (B, M, N) accumulator carried; an
    operand without a batch axis is shared by every plane."""
    b0 = pl.program_id(0) * B
    acc = pl.zeros((B, M, N), pl.float32)
    for k in pl.range(0, K, BK):
        if A_BATCH:
            ta = pl.load(a, offsets=(b0, 0, k) if not A_T else (b0, k, 0),
                         shape=(B, M, BK) if not A_T else (B, BK, M))
        else:
            ta = pl.load(a, offsets=(0, k) if not A_T else (k, 0),
                         shape=(M, BK) if not A_T else (BK, M))
        if B_BATCH:
            tb = pl.load(b, offsets=(b0, k, 0) if not B_T else (b0, 0, k),
                         shape=(B, BK, N) if not B_T else (B, N, BK))
        else:
            tb = pl.load(b, offsets=(k, 0) if not B_T else (0, k),
                         shape=(BK, N) if not B_T else (N, BK))
        acc = pl.matmul(ta, tb, acc=acc, a_trans=A_T, b_trans=B_T)
    pl.store(c, offsets=(b0, 0, 0), value=acc)


def _operand(batch, trans, P, rows, cols, dtype):
    shape = (cols, rows) if trans else (rows, cols)
    return _rand(*((P,) + shape if batch else shape), dtype=dtype)


@pytest.mark.parametrize("a_batch, b_batch, a_t, b_t, dtype", [
    (True, True, False, False, np.float16),
    (True, False, False, True, np.float16),
    (True, False, False, False, np.float32),
    (False, True, True, False, np.float16),
])
def test_batched_matmul_matches_numpy(a_batch, b_batch, a_t, b_t, dtype):
    """P = 5 planes in blocks of B = 2 (the last block's second plane is past the end), K = 40
    over BK = 16 (a K tail), M and N tails."""
    P, M, K, N = 5, 13, 40, 20
    a = _operand(a_batch, a_t, P, M, K, dtype)
    b = _operand(b_batch, b_t, P, K, N, dtype)
    arrays = {"a": a, "b": b, "c": np.zeros((P, M, N), np.float32)}
    got, interp = run_both(batched_matmul, (3,), arrays, B=2, M=16, K=K, N=32, BK=16,
                           A_BATCH=a_batch, B_BATCH=b_batch, A_T=a_t, B_T=b_t)
    ta = np.swapaxes(a, -1, -2) if a_t else a
    tb = np.swapaxes(b, -1, -2) if b_t else b
    want = np.matmul(ta.astype(np.float32), tb.astype(np.float32))
    want = np.broadcast_to(want, (P, M, N))
    assert_close(got["c"], interp["c"], 1e-5, 1e-5)
    assert_close(got["c"], want, 1e-3, 1e-3)


# -- reshapes, slices, concat, loop-carried and branch-merged tiles ---------------------------

@pypto.jit
def plane_shapes(x, out_cols, out_rows, out_mix, M: pl.constexpr, N: pl.constexpr):
    """(B, M, N) → per-row sums (B, M); the tile's planes sliced and joined along the batch
    axis; a plane picked with t[i]; a branch merging rank-3 tiles."""
    t = pl.load(x, offsets=(0, 0, 0), shape=(4, M, N))
    pl.store(out_cols, offsets=(0, 0), value=pl.sum(t, axis=2))
    pl.store(out_rows, offsets=(0, 0, 0), value=pl.expand_dims(pl.max(t, axis=1), 1))
    mixed = pl.concat((t[2:4], t[0:1] + t[3]), axis=0)
    if pl.program_id(0) == 0:
        mixed = mixed * 2.0
    pl.store(out_mix, offsets=(0, 0, 0), value=mixed)


def test_reshape_slice_concat_and_branch_match_numpy():
    x = _rand(4, 6, 16)
    arrays = {"x": x, "out_cols": np.zeros((4, 6), np.float32),
              "out_rows": np.zeros((4, 1, 16), np.float32),
              "out_mix": np.zeros((3, 6, 16), np.float32)}
    got, interp = run_both(plane_shapes, (1,), arrays, M=8, N=16)
    t = _window(x, (0, 0, 0), (4, 8, 16))
    want = {"out_cols": t.sum(axis=2)[:, :6], "out_rows": t.max(axis=1, keepdims=True),
            "out_mix": 2 * np.concatenate((t[2:4], t[0:1] + t[3]))[:, :6]}
    for name, w in want.items():
        assert_close(got[name], interp[name], 1e-6, 1e-6, what=name)
        assert_close(got[name], w, 1e-5, 1e-6, what=name)


@pypto.jit
def plane_ops(x, o_prod, o_mean, o_top, o_arg, o_cat, o_4d, M: pl.constexpr, N: pl.constexpr):
    """prod and mean over the batch axis, topk / argmax along the last axis, concat along
    the columns, a (4, M, N) -> (2, 2, M, N) reshape."""
    t = pl.load(x, offsets=(0, 0, 0), shape=(4, M, N), padding=1.0)
    pl.store(o_prod, offsets=(0, 0), value=pl.prod(t, axis=0))
    pl.store(o_mean, offsets=(0, 0, 0), value=pl.mean(t, axis=0, keepdims=True))
    values, _ = pl.topk(t, 2)
    pl.store(o_top, offsets=(0, 0, 0), value=values)
    pl.store(o_arg, offsets=(0, 0, 0), value=pl.argmax(t, axis=2, keepdims=True))
    pl.store(o_cat, offsets=(0, 0, 0), value=pl.concat((t, t * 2.0), axis=2))
    pl.store(o_4d, offsets=(0, 0, 0, 0), value=t.reshape((2, 2, M, N)) + 1.0)


def test_plane_ops_match_numpy():
    x = _rand(3, 8, 16)             # the fourth plane is padding (1.0)
    M, N = 8, 16
    arrays = {"x": x, "o_prod": np.zeros((M, N), np.float32),
              "o_mean": np.zeros((1, M, N), np.float32),
              "o_top": np.zeros((4, M, 2), np.float32),
              "o_arg": np.zeros((4, M, 1), np.int32), "o_cat": np.zeros((4, M, 2 * N), np.float32),
              "o_4d": np.zeros((2, 2, M, N), np.float32)}
    got, interp = run_both(plane_ops, (1,), arrays, M=M, N=N)
    t = _window(x, (0, 0, 0), (4, M, N), pad=1.0)
    want = {"o_prod": t.prod(axis=0), "o_mean": t.mean(axis=0, keepdims=True),
            "o_top": -np.sort(-t, axis=2)[..., :2],
            "o_arg": t.argmax(axis=2)[..., None].astype(np.int32),
            "o_cat": np.concatenate((t, 2 * t), axis=2), "o_4d": t.reshape(2, 2, M, N) + 1}
    for name, w in want.items():
        assert_close(got[name], interp[name], 1e-6, 1e-6, what=name)
        assert_close(got[name], w, 1e-5, 1e-5, what=name)


@pypto.jit
def window_at(x, y, R: pl.constexpr, P: pl.constexpr):
    """Constant windows: rows R.. of x (past its end when R >= 5), planes P.. of y."""
    t = pl.load(x, offsets=(R, 0), shape=(8, 16), padding=2.0)
    pl.store(y, offsets=(0, 0, 0), value=pl.expand_dims(t, 0))
    pl.store(y, offsets=(P, 0, 0), value=pl.broadcast_to(t, (2, 8, 16)) + 1.0)


def test_a_window_outside_the_tensor_at_compile_time_is_a_fill_or_nothing():
    """Its partition_view would have the constant size 0 that PTOAS rejects (it did, for a
    2-D window past the end and for planes past it): the load is a texpands of its padding,
    the store is gone."""
    x, y = _rand(5, 16), np.zeros((3, 5, 16), np.float32)
    got, interp = run_both(window_at, (1,), {"x": x, "y": y}, R=8, P=2)
    want = np.zeros_like(y)
    want[0] = 2.0
    want[2] = 3.0                    # plane 2 written, plane 3 past the end: nothing
    np.testing.assert_array_equal(got["y"], want)
    np.testing.assert_array_equal(interp["y"], want)
    pto = window_at.compile(x, y, R=8, P=2).asm["pto"]
    assert pto.count("pto.tload") == 0 and pto.count("pto.tstore") == 2
    pto = window_at.compile(x, y, R=0, P=1).asm["pto"]
    assert pto.count("pto.tload") == 1 and pto.count("pto.tstore") == 3


# -- misuse -----------------------------------------------------------------------------------

@pypto.jit
def misuse(x, y, CASE: pl.constexpr):
    if CASE == "rank5":
        pl.load(x, offsets=(0, 0, 0), shape=(1, 1, 1, 8, 8))
    elif CASE == "planes":
        pl.zeros((65, 8, 8))
    elif CASE == "tensor-rank":
        pl.load(x, offsets=(0, 0, 0), shape=(8, 8))
    elif CASE == "trans":
        pl.store(y, offsets=(0, 0, 0), value=pl.load(x, offsets=(0, 0, 0), shape=(2, 8, 8)).T)
    elif CASE == "batch":
        pl.matmul(pl.zeros((2, 8, 8), pl.float16), pl.zeros((3, 8, 8), pl.float16))
    elif CASE == "argmax":
        t = pl.load(x, offsets=(0, 0, 0), shape=(2, 8, 8))
        pl.store(y, offsets=(0, 0), value=pl.argmax(t, axis=0))
    elif CASE == "acc":
        pl.matmul(pl.zeros((2, 8, 8), pl.float16), pl.zeros((8, 8), pl.float16),
                  acc=pl.zeros((8, 8), pl.float32))


@pytest.mark.parametrize("case, message", [
    ("rank5", r"tiles of rank 5 are not supported \(rank 0 to 4\)"),
    ("planes", r"65 planes of \(8, 8\).*at most 64 rank-2 planes"),
    ("tensor-rank", r"tile shape \(8, 8\) has rank 2 but the tensor has rank 3"),
    ("trans", r"transposes are 2-D; for a batched matmul pass a_trans=True"),
    ("batch", r"batch axes of \(2, 8, 8\) and \(3, 8, 8\) cannot be broadcast"),
    ("argmax", r"argmax\(\) over the leading axis 0 of a rank-3 tile is not supported"),
    ("acc", r"acc must be a \(2, 8, 8\) tile"),
])
def test_misuse_names_the_problem_and_the_line(case, message):
    x, y = np.zeros((2, 8, 8), np.float32), np.zeros((2, 8, 8), np.float32)
    with pytest.raises(pypto.CompilationError, match=message) as e:
        misuse[(1,)](x, y if case != "argmax" else np.zeros((8, 8), np.int32), CASE=case)
    assert "test_rank34.py" in str(e.value)


# -- memory planning, memory analysis, the profiler's cycle model ------------------------------

def test_planes_are_planned_analysed_and_modelled_one_by_one():
    """B = 2 planes per block, 2 K steps, b shared: each plane has its own L0C accumulator,
    and the modelled program has one tmatmul per plane and K step and one tload per plane
    (b loaded once per step)."""
    P, M, K, N, B, BK, blocks = 4, 16, 32, 32, 2, 16, 2
    a, b = _rand(P, M, K, dtype=np.float16), _rand(K, N, dtype=np.float16)
    c = np.zeros((P, M, N), np.float32)
    kw = dict(B=B, M=M, K=K, N=N, BK=BK, A_BATCH=True, B_BATCH=False, A_T=False, B_T=False)
    report = pypto.memory.analyze(batched_matmul, a, b, c, grid=(blocks,), **kw)
    assert report.peak_memory["L0C"] == B * M * N * 4
    assert report.peak_memory["L1"] == B * M * BK * 2 + BK * N * 2
    with pypto.Profiler() as prof:
        batched_matmul[(blocks,)](a, b, c, **kw)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), 1e-3, 1e-3)
    ops = {o.name: o for o in prof.operations}
    steps = K // BK
    assert ops["tmatmul"].count + ops["tmatmul.acc"].count == blocks * B * steps
    assert ops["tload"].count == blocks * steps * (B + 1)
    assert ops["tmatmul"].flops + ops["tmatmul.acc"].flops == 2 * P * M * K * N
    assert prof.kernels[0].npu_time_ms > 0


def test_an_overflow_of_planes_names_the_planes_and_the_fitting_size():
    x, y = np.zeros((1, 48, 64, 64), np.float32), np.zeros((1, 48, 64), np.float32)
    with pytest.raises(BufferOverflow) as e:
        rank4_reduce[(1,)](x, y, A=1, B=48, M=64, N=64, AXIS=2)
    text = str(e.value)
    assert "UB (vec) overflow" in text and "(plane 0 of a tile<1x48x64x64xf32>)" in text
    assert "B=" in text.split("each of these fits")[1]
