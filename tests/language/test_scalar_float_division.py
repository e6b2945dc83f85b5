"""Scalar float ``//`` and ``%`` follow numpy (the divisor's sign; x // 0.0 is inf or nan).
They once failed LLVM verification (integer compares on floats)."""
import numpy as np
import pytest

import pypto
import pypto.language as pl


@pypto.jit
def floordiv_and_mod(out, a, b):
    pick = pl.arange(0, 2) == 0
    pl.store(out, [0], pl.where(pick, pl.full((2,), a // b), pl.full((2,), a % b)))


@pytest.mark.parametrize("a, b", [(7.5, 2.0), (-7.5, 2.0), (7.5, -2.0), (-7.5, -2.0),
                                  (1.0, 0.0), (-1.0, 0.0), (0.3, 0.1), (5.0, 0.5), (0.0, 3.0)])
def test_scalar_float_floordiv_and_mod_match_numpy(a, b):
    out = np.zeros(2, np.float32)
    floordiv_and_mod[(1,)](out, a, b)
    fa, fb = np.float32(a), np.float32(b)
    with np.errstate(all="ignore"):
        ref = np.array([np.floor_divide(fa, fb), np.mod(fa, fb)], np.float32)
    np.testing.assert_array_equal(out, ref)
