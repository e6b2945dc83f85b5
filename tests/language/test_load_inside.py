"""``pl.load(..., padding=None)``: a window the kernel promises lies inside its tensor. The
chip's program then has no fill before the load (an L1 tile otherwise gets a ``texpands`` of
the pad value before every ``tload``, a UB tile a ``tfillpad`` after it), and the result is
the same; the interpreter checks the promise."""
import numpy as np
import pytest

import pypto
import pypto.language as pl


@pypto.jit
def windowed_matmul(a, b, c, off, PAD: pl.constexpr):
    if PAD:
        x = pl.load(a, offsets=(off, 0), shape=(32, 16))
        y = pl.load(b, offsets=(0, 0), shape=(16, 16))
    else:
        x = pl.load(a, offsets=(off, 0), shape=(32, 16), padding=None)
        y = pl.load(b, offsets=(0, 0), shape=(16, 16), padding=None)
    pl.store(c, offsets=(0, 0), value=pl.matmul(x, y))


@pypto.jit
def shifted_copy(x, out, off):
    pl.store(out, offsets=(0, 0), value=pl.load(x, offsets=(off, 0), shape=(8, 32),
                                                 padding=None) * 2.0)


def _operands():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((64, 16)).astype(np.float16),
            rng.standard_normal((16, 16)).astype(np.float16), np.zeros((32, 16), np.float32))


def test_no_fill_before_the_cube_loads_and_the_same_result():
    a, b, c = _operands()
    padded = windowed_matmul.compile(a, b, c, 8, PAD=True).asm["pto"]
    inside = windowed_matmul.compile(a, b, c, 8, PAD=False).asm["pto"]
    # padded: b's window at (0, 0) is whole at compile time (no fill); a's at a run-time
    # offset is filled under its window check (passes/fillpad.py)
    assert padded.count("pto.texpands") == 1 and "pto.texpands" not in inside
    windowed_matmul[(1,)](a, b, c, 8, PAD=False)
    np.testing.assert_allclose(c, a[8:40].astype(np.float32) @ b.astype(np.float32),
                               rtol=1e-6, atol=1e-5)


def test_no_tfillpad_after_a_vector_load():
    x = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    out = np.zeros((8, 32), np.float32)
    assert "pto.tfillpad" not in shifted_copy.compile(x, out, 4).asm["pto"]
    shifted_copy[(1,)](x, out, 4)
    np.testing.assert_array_equal(out, x[4:12] * 2)


def test_a_broken_promise_is_an_error_in_the_interpreter(monkeypatch):
    monkeypatch.setenv("PYPTO_INTERPRET", "1")
    x, out = np.zeros((16, 32), np.float32), np.zeros((8, 32), np.float32)
    with pytest.raises(IndexError, match=r"pl.load\(padding=None\): the window \(8, 32\) at "
                                         r"\(12, 0\) is not inside the tensor of shape"):
        shifted_copy[(1,)](x, out, 12)


def test_padding_must_be_a_number_or_none():
    @pypto.jit
    def bad(x, out):
        pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(8,), padding="zero"))
    with pytest.raises(pypto.CompilationError, match="padding must be a compile-time number, "
                                                     "or None for a window inside the tensor"):
        bad[(1,)](np.zeros(8, np.float32), np.zeros(8, np.float32))
