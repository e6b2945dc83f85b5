"""Helpers for the graph tests: inputs of any dtype, tolerances per dtype, one-node graphs."""
import ml_dtypes
import numpy as np

import pypto

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16), "bfloat16": BF16}
# elementwise ops round once per op in the tensor's dtype, as numpy does for fp32/fp16; the
# references below compute in float32 and round at the end, so allow a few ulps
TOL = {"float32": dict(rtol=1e-6, atol=1e-6), "float16": dict(rtol=2e-3, atol=2e-3),
       "bfloat16": dict(rtol=2e-2, atol=2e-2)}


def rand(shape, dtype, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32) \
        .astype(DTYPES[dtype] if isinstance(dtype, str) else dtype)


def f32(a):
    return np.asarray(a).astype(np.float32)


def close(got, want, dtype):
    np.testing.assert_allclose(f32(got), f32(want), **TOL[dtype])


def run(module, **inputs):
    return module.run(pypto.Context(), inputs).to_numpy()
