"""Cube tiles padded to whole fractal boxes (passes/cube_box.py) give the product on pto-isa's
CPU simulator, which runs PTOAS's C++ of the padded ``.pto`` (int8 kernels of 16 columns did
not build there before: pto-isa's ``Cols % InnerCols`` static_assert), as on the native
engine (tests/compiler/pto/test_cube_box.py)."""
from __future__ import annotations

import os
from unittest import mock

import numpy as np
import pytest

import pypto
from tests.compiler.pto.test_cube_box import I8, PADDED, _args, _reference
from tests.engines.tools import needs_tools

pytestmark = needs_tools


@pytest.mark.parametrize("case", PADDED, ids=lambda c: f"{c[0].__name__}-{np.dtype(c[1])}-"
                         f"{'x'.join(map(str, c[2:]))}")
def test_padded_kernels_compute_the_product_on_pto_isa(case):
    kernel, dtype, m, n, k = case
    simulated = pypto.jit(kernel.fn, engine="pto-isa")
    args, params = _args(kernel, dtype, m, n, k, seed=2)
    with mock.patch.dict(os.environ, {"PYPTO_PTOISA_OPT": "O0"}):
        simulated[(1,)](*args, **params)
    ref = _reference(kernel, args)
    tol = 0 if dtype == I8 else 1e-3 * max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(args[2], ref, rtol=0, atol=tol)


@pytest.mark.parametrize("engine_name", ["native", "pto-isa"])
def test_a_k_loop_that_does_not_run_leaves_zeros(engine_name):
    """The accumulator is then zeroed by a matmul of padded zero operands (acc_init.py)."""
    from tests.compiler.pto.test_cube_box import matmul_k_loop
    kernel = pypto.jit(matmul_k_loop.fn, engine=engine_name)
    (a, b, c, _), params = _args(matmul_k_loop, I8, 16, 16, 32)
    c[:] = 7
    with mock.patch.dict(os.environ, {"PYPTO_PTOISA_OPT": "O0"}):
        kernel[(1,)](a, b, c, 0, **params)
    assert not c.any()
