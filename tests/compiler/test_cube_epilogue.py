"""A GEMM's epilogue on the cube's pipes (compiler/passes/cube_epilogue.py): a bias row added
by ``tmatmul.bias``, a ReLU and the cast done by the FIX pipe's store. Results against numpy
on the host, the interpreter and pto-isa's CPU simulator, what the .pto holds, and the
epilogues that must stay on the vector core."""
from __future__ import annotations

import os
from unittest import mock

import ml_dtypes
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import pypto
import pypto.language as pl
from pypto.backends.interpreter.run import run_function
from pypto.compiler.ast_to_ir import build_function
from pypto.compiler.ir import Module, walk
from pypto.compiler.passes import run_pipeline
from pypto.runtime.specialize import spec_key, specialise
from tests.engines.tools import needs_tools

F32, F16 = np.float32, np.float16
BF16 = np.dtype(ml_dtypes.bfloat16)


@pypto.jit
def gemm_epilogue(a, b, bias, c, M, N, K, BM: pl.constexpr, BN: pl.constexpr,
                  BK: pl.constexpr, ACT: pl.constexpr, ROW: pl.constexpr):
    """acc = A @ B over a K loop, + a bias row, an activation, the cast to c's dtype."""
    pm = pl.program_id(0)
    pn = pl.program_id(1)
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in pl.range(0, K, BK, num_stages=2):
        acc = pl.matmul(pl.load(a, offsets=(pm * BM, k), shape=(BM, BK)),
                        pl.load(b, offsets=(k, pn * BN), shape=(BK, BN)), acc=acc)
    if ROW == 2:
        acc = acc + pl.load(bias, offsets=(0, pn * BN), shape=(1, BN)).to(pl.float32)
    if ROW == 1:
        acc = acc + pl.load(bias, offsets=(pn * BN,), shape=(BN,)).to(pl.float32)
    if ACT == "relu":
        acc = pl.relu(acc)
    if ACT == "maximum":
        acc = pl.maximum(acc, 0.0)
    if ACT == "gelu":
        acc = pl.gelu(acc)
    if ACT == "sigmoid_of_sum":              # a row sum, broadcast back: still row by row
        acc = pl.sigmoid(acc - pl.sum(acc, axis=1, keepdims=True) * 0.01)
    if ACT == "relu_after_cast":
        pl.store(c, offsets=(pm * BM, pn * BN), value=pl.maximum(acc.to(c.dtype), 0.0))
    else:
        pl.store(c, offsets=(pm * BM, pn * BN), value=acc.to(c.dtype))


@pypto.jit
def single_matmul_bias(a, b, bias, c, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    """One matmul, no K loop: the matmul itself becomes the ``tmatmul.bias``."""
    acc = pl.matmul(pl.load(a, offsets=(0, 0), shape=(BM, BK)),
                    pl.load(b, offsets=(0, 0), shape=(BK, BN)))
    pl.store(c, offsets=(0, 0), value=pl.relu(acc + pl.load(bias, offsets=(0, 0),
                                                            shape=(1, BN))))


def _reference(a, b, bias, act):
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if bias is not None:
        ref = ref + bias.astype(np.float64).reshape(1, -1)
    if act in ("relu", "maximum", "relu_after_cast"):
        ref = np.maximum(ref, 0)
    if act == "gelu":
        ref = 0.5 * ref * (1 + np.tanh(0.7978845608028654 * (ref + 0.044715 * ref ** 3)))
    if act == "sigmoid_of_sum":
        ref = 1 / (1 + np.exp(-(ref - ref.sum(axis=1, keepdims=True) * 0.01)))
    return ref


def _run(kernel, m, n, k, tiles, out, bias_dtype, row, act, seed=0):
    """``k`` 0: the K loop runs no step over operands of 32 columns."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k or 32)).astype(F16)
    b = rng.standard_normal((k or 32, n)).astype(F16)
    shape = (1, n) if row == 2 else (n,)
    bias = rng.standard_normal(shape).astype(bias_dtype)
    c = np.full((m, n), 7, out)
    bm, bn, bk = tiles
    kernel[(pl.cdiv(m, bm), pl.cdiv(n, bn))](a, b, bias, c, m, n, k, BM=bm, BN=bn, BK=bk,
                                               ACT=act, ROW=row)
    return c, _reference(a[:, :k], b[:k], bias if row else None, act)


def _close(c, ref, k):
    """fp16 inputs are exact in fp32; the fp32 sum's rounding grows with K, and an fp16 or
    bf16 output rounds once more (half an ulp of the value)."""
    out_eps = {F32: 0.0, F16: 2.0 ** -11, BF16: 2.0 ** -8}[c.dtype.type if c.dtype != BF16
                                                          else BF16]
    tol = (k + 2) * 2.0 ** -24 * (np.abs(ref) + 1) * 8 + out_eps * np.abs(ref) + 1e-6
    err = np.abs(c.astype(np.float64) - ref)
    assert np.all(err <= tol), f"max error {err.max()} (tolerance there {tol.flat[err.argmax()]})"


@settings(max_examples=12, deadline=None)
@given(m=st.integers(1, 150), n=st.integers(1, 150), k=st.integers(1, 130),
       tiles=st.sampled_from([(32, 32, 32), (64, 128, 64), (16, 64, 16)]),
       out=st.sampled_from([F32, F16, BF16]), bias_dtype=st.sampled_from([F32, F16]),
       row=st.sampled_from([0, 1, 2]),
       act=st.sampled_from(["none", "relu", "maximum", "relu_after_cast"]),
       seed=st.integers(0, 2 ** 32 - 1))
@example(m=100, n=70, k=96, tiles=(64, 128, 64), out=BF16, bias_dtype=F16, row=1,
         act="maximum", seed=1)
def test_epilogue_matches_numpy(m, n, k, tiles, out, bias_dtype, row, act, seed):
    c, ref = _run(gemm_epilogue, m, n, k, tiles, out, bias_dtype, row, act, seed)
    _close(c, ref, k)


@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_the_interpreter_agrees(act, monkeypatch):
    """The reference interpreter runs the kernel as written (the Tile IR before the passes)."""
    monkeypatch.setenv("PYPTO_INTERPRET", "1")
    c, ref = _run(gemm_epilogue, 70, 90, 80, (64, 64, 32), F16, F32, 2, act)
    _close(c, ref, 80)


def test_the_folded_tile_ir_computes_the_same():
    """The Tile IR after every pass (the bias as the accumulator's start, the ReLU on the
    store), run op by op by the interpreter: the rewrites are exact."""
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((64, 96)).astype(F16), rng.standard_normal((96, 64)).astype(F16)
    bias, c = rng.standard_normal((1, 64)).astype(F32), np.zeros((64, 64), F16)
    args, consts = (a, b, bias, c, 64, 64, 96), dict(BM=64, BN=64, BK=32, ACT="relu", ROW=2)
    bound = gemm_epilogue._bind(args, consts)
    spec_args, _, _ = specialise(gemm_epilogue, spec_key(gemm_epilogue, bound), bound)
    fn = build_function(gemm_epilogue.source, spec_args, gemm_epilogue.source.node.name)
    module = run_pipeline(Module(fn, gemm_epilogue.target()))
    ops = list(walk(module.kernel.body))
    assert any(op.name == "tile.store" and op.attrs.get("relu") for op in ops)
    assert not any(op.name == "tile.col_expand" for op in ops)
    run_function(module.kernel, {"a": a, "b": b, "bias": bias, "c": c, "M": 64, "N": 64,
                                 "K": 96}, (1, 1, 1))
    _close(c, _reference(a, b, bias, "relu"), 96)


@pytest.mark.parametrize("out", [F16, F32])
def test_no_k_step_leaves_the_bias(out):
    """The accumulator is then made by a matmul of zero operands with the bias (acc_init)."""
    c, ref = _run(gemm_epilogue, 64, 100, 0, (64, 128, 64), out, F32, 2, "relu")
    _close(c, ref, 0)


def test_a_single_matmul_takes_the_bias():
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal(s).astype(F16) for s in ((32, 64), (64, 48)))
    bias = rng.standard_normal((1, 48)).astype(F32)
    c = np.zeros((32, 48), F32)
    single_matmul_bias[(1,)](a, b, bias, c, BM=32, BN=48, BK=64)
    _close(c, _reference(a, b, bias, "relu"), 64)
    text = single_matmul_bias.compile(a, b, bias, c, BM=32, BN=48, BK=64).asm["pto"]
    assert "pto.tmatmul.bias" in text and "relu_pre_mode normal_relu" in text


def _compiled(act, row, out=F16, bias_dtype=F32, n=256):
    a, b = np.zeros((128, 64), F16), np.zeros((64, n), F16)
    bias = np.zeros((1, n) if row == 2 else (n,), bias_dtype)
    kernel = pypto.jit(gemm_epilogue.fn, target="ascend910b1")
    return kernel.compile(a, b, bias, np.zeros((128, n), out), 128, n, 64, BM=128, BN=n,
                          BK=64, ACT=act, ROW=row)


@pytest.mark.parametrize("bias_dtype", [F32, F16])
def test_bias_relu_and_cast_stay_on_the_cube_at_128x256(bias_dtype):
    """Before, the epilogue went through a GM workspace to the vector core, whose UB could
    not hold the fp32 tile and its fp16 copy (a BufferOverflow at 128 x 256)."""
    compiled = _compiled("relu", 2, bias_dtype=bias_dtype)
    text = compiled.asm["pto"]
    assert compiled.metadata["kind"] == "cube"
    assert "loc=vec" not in text and "pypto_workspace" not in text
    assert "pto.tmatmul.bias" in text and "loc=bias" in text
    assert "reluPreMode = #pto<relu_pre_mode normal_relu>" in text


def test_gelu_is_vector_work_after_the_cube_added_the_bias():
    """The FIX pipe has no GELU: the accumulator goes to the vector core, the bias added."""
    compiled = _compiled("gelu", 2, out=F32, n=64)
    assert compiled.metadata["kind"] == "mixed"
    assert "pto.tmatmul.bias" in compiled.asm["pto"]


@pytest.mark.parametrize("act", ["gelu", "sigmoid_of_sum"])
def test_a_vector_epilogue_too_big_for_the_ub_runs_in_row_chunks(act):
    """At 128 x 256 a GELU needs three fp32 tiles of 128 KiB: BufferOverflow before; now the
    vector core's part loops over chunks of rows (passes/chunk_epilogue.py), or, where the 64
    rows each AIV holds fit (memory_plan's half-row plan, pto/passes/split_rows.py), both
    AIVs take half."""
    kernel = pypto.jit(gemm_epilogue.fn, target="ascend910b1")
    c, ref = _run(kernel, 200, 256, 96, (128, 256, 32), F16, F32, 2, act)   # one column block:
    _close(c, ref, 96)                                       # the row sum is the whole row's
    text = _compiled(act, 2).asm["pto"]
    vector = text[text.index("_vector("):]
    assert "rows=128, cols=256" not in vector
    assert "scf.for" in vector or "rows=64, cols=256" in vector


def test_a_bias_wider_than_the_bias_table_stays_vector_work():
    """A2/A3's bias table holds 1 KiB: 256 fp32 columns."""
    a, b = np.zeros((16, 32), F16), np.zeros((32, 512), F16)
    bias, c = np.zeros((1, 512), F32), np.zeros((16, 512), F32)
    compiled = gemm_epilogue.compile(a, b, bias, c, 16, 512, 32, BM=16, BN=512, BK=32,
                                     ACT="none", ROW=2)
    assert "pto.tmatmul.bias" not in compiled.asm["pto"]
    c, ref = _run(gemm_epilogue, 16, 512, 32, (16, 512, 32), F32, F32, 2, "none")
    _close(c, ref, 32)


@needs_tools
@pytest.mark.parametrize("out, bias_dtype, k, act, shape", [
    (F16, F32, 80, "relu", (40, 64, 32, 64)), (F32, F16, 0, "relu", (40, 64, 32, 64)),
    pytest.param(F16, F32, 64, "gelu", (130, 256, 128, 256),    # the GELU in row chunks
                 marks=pytest.mark.slow)])
def test_pto_isas_simulator_agrees(out, bias_dtype, k, act, shape):
    """PTOAS's C++ of the .pto (TMATMUL_BIAS, TMOV into the bias table, TSTORE with
    NormalRelu; the chunked vector epilogue) on pto-isa's CPU simulator."""
    m, n, bm, bn = shape
    kernel = pypto.jit(gemm_epilogue.fn, target="ascend910b1", engine="pto-isa")
    with mock.patch.dict(os.environ, {"PYPTO_PTOISA_OPT": "O0"}):
        c, ref = _run(kernel, m, n, k, (bm, bn, 32), out, bias_dtype, 2, act)
    _close(c, ref, k)
