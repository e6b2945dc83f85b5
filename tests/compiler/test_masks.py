"""Causal and window masks without block-sized temporaries (passes/masks.py): a compare of a
position row against a position column runs in float16 relative to the offsets, and a select
against a constant takes it as a scalar (TSELS). Results are numpy's for every compare, either
operand order, arange starts and offsets up to int32's range; the block-sized int32 and -inf
tiles are gone."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pypto
import pypto.language as pl

OPS = ("lt", "le", "gt", "ge", "eq", "ne")
NUMPY = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
         "eq": np.equal, "ne": np.not_equal}


@pypto.jit
def masked(s, out, x, y, M: pl.constexpr, N: pl.constexpr, SA: pl.constexpr,
           SB: pl.constexpr, OP: pl.constexpr, ROW_LEFT: pl.constexpr):
    t = pl.load(s, offsets=(0, 0), shape=(M, N))
    r = pl.arange(SA, SA + N)[None, :] + x          # key positions: a row
    c = pl.arange(SB, SB + M)[:, None] + y          # query positions: a column
    a, b = (r, c) if ROW_LEFT else (c, r)
    if OP == 0:
        keep = a < b
    elif OP == 1:
        keep = a <= b
    elif OP == 2:
        keep = a > b
    elif OP == 3:
        keep = a >= b
    elif OP == 4:
        keep = a == b
    else:
        keep = a != b
    pl.store(out, offsets=(0, 0), value=pl.where(keep, t, float("-inf")))


def _expected(s, x, y, sa, sb, op, row_left):
    m, n = s.shape
    r = (np.arange(sa, sa + n, dtype=np.int64) + x)[None, :]
    c = (np.arange(sb, sb + m, dtype=np.int64) + y)[:, None]
    a, b = (r, c) if row_left else (c, r)
    return np.where(NUMPY[op](a, b), s, -np.inf).astype(np.float32)


@settings(max_examples=12, deadline=None)
@given(m=st.sampled_from([8, 16, 48]), n=st.sampled_from([8, 64, 256]),
       sa=st.integers(-4, 4), sb=st.integers(-4, 4), op=st.sampled_from(OPS),
       row_left=st.booleans(), data=st.data())
def test_position_masks_match_numpy(m, n, sa, sb, op, row_left, data):
    limit = 2 ** 31 - 1 - 300               # the kernel's own int32 positions do not wrap
    near = st.integers(-600, 600)
    x = data.draw(st.one_of(near, st.integers(-limit, limit)), label="x")
    y = data.draw(st.one_of(near.map(lambda d: x + d).filter(lambda v: abs(v) < limit),
                            st.integers(-limit, limit)), label="y")
    s = np.random.default_rng(m * n).standard_normal((m, n)).astype(np.float32)
    out = np.zeros_like(s)
    masked[(1,)](s, out, x, y, M=m, N=n, SA=sa, SB=sb, OP=OPS.index(op), ROW_LEFT=row_left)
    np.testing.assert_array_equal(out, _expected(s, x, y, sa, sb, op, row_left))


def test_no_block_sized_position_or_constant_tiles():
    """Before, ``where(cols <= rows, s, -inf)`` at 64 x 256 planned two int32 broadcasts and a
    -inf tile of the block's size; now one float16 tile, and the select is a TSELS."""
    s = np.zeros((64, 256), np.float32)
    asm = masked.compile(s, s.copy(), 0, 0, M=64, N=256, SA=0, SB=0, OP=1,
                         ROW_LEFT=True).asm
    assert "64x256xi32" not in asm["tile_ir"]
    assert "tile.full {value = -inf} : tile<64x256" not in asm["tile_ir"]
    assert "64x256xf16" in asm["tile_ir"] and "pto.tsels" in asm["pto"]


def test_the_pto_isa_engine_agrees(monkeypatch):
    """The vendor's simulator runs PTOAS's C++: there, sitofp(subi(y, x)) became an unsigned
    difference (PTOAS 0.60, docs/pto.md), so a query block before the key block (y < x)
    kept every score. The offsets' difference is now clamped in int64 and added in int32."""
    from tests.engines.tools import needs_tools, TOOLS
    if TOOLS is None:
        pytest.skip(needs_tools.kwargs["reason"])
    monkeypatch.setenv("PYPTO_ENGINE", "pto-isa")
    s = np.random.default_rng(1).standard_normal((32, 64)).astype(np.float32)
    for x, y, op in ((300, 10, "le"), (10, 300, "gt"), (40, 50, "le"), (-2 ** 31 + 9, 2 ** 31 - 300,
                                                                         "lt")):
        out = np.zeros_like(s)
        masked[(1,)](s, out, x, y, M=32, N=64, SA=0, SB=0, OP=OPS.index(op), ROW_LEFT=True)
        np.testing.assert_array_equal(out, _expected(s, x, y, 0, 0, op, True))
