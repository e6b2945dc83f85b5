"""Matmuls in L0-sized pieces (``compiler/pto/passes/cube_chunks.py``): an operand larger than
half its L0 buffer is multiplied in K pieces, extracted from L1 one by one; a product larger
than half of L0C handed to the vector core is computed and stored in column pieces. The .pto,
the host, pto-isa's simulator and the model."""
import re

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.backends.ascend.model.launch import model_kernel
from tests.engines.tools import needs_tools, retarget


@pypto.jit(target="ascend910b1")
def product(a, b, c, M: pl.constexpr, K: pl.constexpr, N: pl.constexpr, B_T: pl.constexpr):
    tb = pl.load(b, offsets=(0, 0), shape=(N, K) if B_T else (K, N))
    c_tile = pl.matmul(pl.load(a, offsets=(0, 0), shape=(M, K)), tb, b_trans=B_T)
    pl.store(c, offsets=(0, 0), value=c_tile)


@pypto.jit(target="ascend910b1")
def scores_softmax(q, k, p, M: pl.constexpr, N: pl.constexpr, D: pl.constexpr):
    """A product the vector core reads (through the workspace): S = Q K^T, then exp(S)."""
    s = pl.matmul(pl.load(q, offsets=(0, 0), shape=(M, D)),
                  pl.load(k, offsets=(0, 0), shape=(N, D)), b_trans=True)
    pl.store(p, offsets=(0, 0), value=pl.exp(s * 0.01))


def _operands(m, k, n, b_t, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k) if b_t else (k, n)).astype(np.float16)
    return a, b, a.astype(np.float32) @ (b.T if b_t else b).astype(np.float32)


def _moves(pto: str, loc: str) -> list:
    """(op, rows, cols) of every move or extract into ``loc``."""
    return re.findall(rf"pto\.(tmov|textract) ins\([^)]*\) outs\(%\w+ : !pto\.tile_buf<"
                      rf"loc={loc}, dtype=\w+, rows=(\d+), cols=(\d+)", pto)


@pytest.mark.parametrize("b_t", [False, True])
def test_operands_larger_than_half_their_buffer_are_multiplied_in_k_pieces(b_t):
    a, b, want = _operands(128, 256, 128, b_t)
    c = np.full((128, 128), np.nan, np.float32)
    meta = dict(M=128, K=256, N=128, B_T=b_t)
    product[(1,)](a, b, c, **meta)
    np.testing.assert_allclose(c, want, rtol=1e-3, atol=1e-2)
    pto = product.compile(a, b, c, **meta).asm["pto"]
    assert _moves(pto, "left") == [("textract", "128", "128")] * 2
    assert _moves(pto, "right") == [("textract", "128", "128")] * 2
    assert pto.count("pto.tmatmul ins") == 1 and pto.count("pto.tmatmul.acc ins") == 1


def test_operands_within_half_their_buffer_stay_whole():
    a, b, _ = _operands(128, 64, 128, False)
    c = np.zeros((128, 128), np.float32)
    pto = product.compile(a, b, c, M=128, K=64, N=128, B_T=False).asm["pto"]
    assert "textract" not in pto and pto.count("pto.tmatmul ins") == 1


def test_a_product_handed_to_the_vector_core_is_stored_in_column_pieces():
    """128 x 256 fp32 is all of L0C: two 128-column pieces, so FIX stores the first while
    the cube computes the second."""
    rng = np.random.default_rng(1)
    q = rng.standard_normal((128, 128)).astype(np.float16)
    k = rng.standard_normal((256, 128)).astype(np.float16)
    p = np.full((128, 256), np.nan, np.float32)
    scores_softmax[(1,)](q, k, p, M=128, N=256, D=128)
    want = np.exp(q.astype(np.float32) @ k.T.astype(np.float32) * 0.01)
    np.testing.assert_allclose(p, want, rtol=1e-3, atol=1e-3)
    cube = scores_softmax.compile(q, k, p, M=128, N=256, D=128).asm["pto"].split("_vector(")[0]
    stores = re.findall(r"pto\.tstore ins\(%\w+\.\w+ : !pto\.tile_buf<loc=acc, dtype=f32, "
                        r"rows=(\d+), cols=(\d+)", cube)
    assert stores == [("128", "128")] * 2
    assert _moves(cube, "right") == [("textract", "128", "128")] * 2


def test_the_pieces_overlap_the_cube_pipes():
    """The model: the K pieces let MTE1 extract the second piece while M multiplies the first,
    so the whole takes less than extract-all-then-multiply (the move of a 64 KiB L0B tile
    alone is 512 cycles)."""
    a, b, _ = _operands(128, 256, 128, False)
    c = np.zeros((128, 128), np.float32)
    model = model_kernel(product, (1,), a, b, c, M=128, K=256, N=128, B_T=False)
    block = model.blocks[0]
    extracts = [r for r in block.records if r.name == "textract"]
    matmuls = [r for r in block.records if r.name.startswith("tmatmul")]
    assert len(extracts) == 4 and len(matmuls) == 2
    assert any(e.start < matmuls[0].end and matmuls[0].start < e.end for e in extracts)


@needs_tools
@pytest.mark.parametrize("b_t", [False, True])
def test_pto_isa_runs_the_pieces(b_t):
    a, b, want = _operands(128, 256, 128, b_t, seed=2)
    c = np.full((128, 128), np.nan, np.float32)
    retarget(product, "pto-isa")[(1,)](a, b, c, M=128, K=256, N=128, B_T=b_t)
    np.testing.assert_allclose(c, want, rtol=1e-3, atol=1e-2)


@needs_tools
def test_pto_isa_runs_the_column_pieces():
    rng = np.random.default_rng(3)
    q = rng.standard_normal((128, 128)).astype(np.float16)
    k = rng.standard_normal((256, 128)).astype(np.float16)
    p = np.full((128, 256), np.nan, np.float32)
    retarget(scores_softmax, "pto-isa")[(1,)](q, k, p, M=128, N=256, D=128)
    want = np.exp(q.astype(np.float32) @ k.T.astype(np.float32) * 0.01)
    np.testing.assert_allclose(p, want, rtol=1e-3, atol=1e-3)
