"""The kernels the CANN frontend generates go through the real assembler like any other.

With ``PTO_ORACLE`` set, ``PYPTO_PTOAS`` is forced, so every generated kernel's ``.pto`` is
lowered by PTOAS (a rejection is an error of the call); the test also counts the kernels the
assembler saw, so it cannot pass by compiling nothing. Shapes no other test uses: the
in-memory caches do not key on the assembler.
"""
import os

import numpy as np
import pytest

import pypto

ORACLE = os.environ.get("PTO_ORACLE")


@pytest.mark.skipif(not ORACLE, reason="PTO_ORACLE is not set (the PTOAS assembler)")
def test_generated_kernels_pass_the_assembler(monkeypatch, tmp_path):
    torch = pytest.importorskip("torch", reason="the frontend's kernels take torch tensors here")
    from pypto.backends.ascend import ptoas
    monkeypatch.setenv("PYPTO_PTOAS", os.path.join(ORACLE, "bin", "ptoas"))
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path))
    lowered = []
    real_lower = ptoas.lower
    monkeypatch.setattr(ptoas, "lower", lambda text, *a, **k: lowered.append(text) or
                        real_lower(text, *a, **k))

    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([2, 24, 72], pypto.DT_FP32), w: pypto.Tensor([72, 40], pypto.DT_FP16),
               y: pypto.Tensor([2, 24, 40], pypto.DT_FP32), v: pypto.Tensor([2, 24, 3], pypto.DT_FP32),
               i: pypto.Tensor([2, 24, 3], pypto.DT_INT32), z: pypto.Tensor([2, 72, 24], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 8, 72)
        pypto.set_cube_tile_shapes([16, 16], [72, 72], [40, 40])
        s = pypto.softmax(x, -1)
        y[:] = pypto.matmul(pypto.cast(s, pypto.DT_FP16), w, pypto.DT_FP32)
        v[:], i[:] = pypto.topk(s, 3)
        z[:] = pypto.transpose(pypto.layer_norm(x), 1, 2)

    x, w = torch.randn(2, 24, 72), torch.randn(72, 40).half()
    y, v, z = torch.zeros(2, 24, 40), torch.zeros(2, 24, 3), torch.zeros(2, 72, 24)
    i = torch.zeros(2, 24, 3, dtype=torch.int32)
    kernel(x, w, y, v, i, z)
    s = torch.softmax(x, -1)
    torch.testing.assert_close(y, s.half().float() @ w.float(), rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(v, torch.topk(s, 3).values)
    torch.testing.assert_close(z, torch.layer_norm(x, [72]).transpose(1, 2), rtol=1e-4, atol=1e-5)
    assert len(lowered) >= 4, f"the assembler lowered {len(lowered)} kernels"
