"""Whole-row gather and scatter (issue 30, item 4) under the chip's rules: on pto-isa's CPU
simulator, which runs ptoas's C++ of the printed ``.pto`` (one TLOAD / TSTORE per row at a
run-time tile address), the results equal the host's and numpy's, rows outside the tensor read
the padding or are dropped, and the bytes around the tensors stay as they were."""
import numpy as np
import pytest

import pypto
from tests.engines.tools import needs_tools
from tests.language.test_indexed import (index_select, rows_ref, scatter_rows,
                                         scatter_rows_ref)

GUARD = 77


def _guarded(rows, cols, d, values=None):
    """A (rows, cols) tensor inside an array with guard rows and columns around it."""
    big = np.full((rows + 4, cols + 16), GUARD, d)
    inner = big[2:-2, 8:-8]
    if values is not None:
        inner[...] = values
    return big, inner


def _run(engine, d):
    kw = {} if engine == "native" else {"engine": engine}
    rng = np.random.default_rng(5)
    x = rng.integers(-50, 50, (10, 48)).astype(d)
    ids = np.array([3, -1, 9, 3, 10, 0, 1 << 20, 7], np.int32)
    big, out = _guarded(8, 40, d)
    pypto.jit(index_select.fn, **kw)[(1,)](x, ids, out, 0, 12, M=8, D=40, PAD=-3)
    np.testing.assert_array_equal(out, rows_ref(x, ids, (0, 12), 40, -3))
    assert (big[:2] == GUARD).all() and (big[-2:] == GUARD).all()
    assert (big[:, :8] == GUARD).all() and (big[:, -8:] == GUARD).all()
    v = rng.integers(-50, 50, (8, 40)).astype(d)
    for add in (False, True):
        big, t = _guarded(10, 48, d, x)
        pypto.jit(scatter_rows.fn, **kw)[(1,)](t, ids, v, 0, 12, M=8, D=40, ADD=add)
        np.testing.assert_array_equal(t, scatter_rows_ref(x, ids, v, (0, 12), add))
        assert (big[:2] == GUARD).all() and (big[-2:] == GUARD).all()
        assert (big[:, :8] == GUARD).all() and (big[:, -8:] == GUARD).all()


@pytest.mark.parametrize("d", [np.float32, np.int32])
def test_rows_on_the_host(d):
    _run("native", d)


@needs_tools
@pytest.mark.heavy
@pytest.mark.parametrize("d", [np.float32, np.float16])
def test_rows_on_pto_isas_simulator(d):
    _run("pto-isa", d)
