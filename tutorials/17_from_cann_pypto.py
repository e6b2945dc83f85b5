"""Tutorial 17 -- CANN PyPTO kernels, unchanged, with real results on the host.

    python tutorials/17_from_cann_pypto.py [--quick] [--reps N]

(Number 17: tutorials/15_mpmd.py already exists.) Huawei's CANN PyPTO 0.2.0 writes kernels on
whole tensors with ``@pypto.frontend.jit``; without an NPU its simulation mode computes
nothing. Here the same source runs on torch CPU tensors or numpy arrays and fills its outputs:
the body is traced with symbolic tensors, each row-local chain becomes one fused ``@pypto.jit``
kernel cut by CANN's tile shape, and ``pypto.Profiler`` gives the modelled 910B time.
As in CANN, the kernel's first SIM call writes a swim lane (merged_swimlane.json, open it in
ui.perfetto.dev) and a report under ./output/output_<timestamp>_<pid>/CostModelSimulationOutput/;
PYPTO_SIM_OUTPUT=off turns that off. docs/from_cann_pypto.md says what works, what differs and
what is not available.
"""
import argparse
import time

import numpy as np

import pypto

M, N = 256, 512


@pypto.frontend.jit(runtime_options={"run_mode": pypto.RunMode.SIM})
def softmax_kernel(x: pypto.Tensor([M, N], pypto.DT_FP32),
                   out: pypto.Tensor([M, N], pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(16, 512)
    row_max = pypto.amax(x, dim=-1, keepdim=True)
    e = pypto.exp(x - row_max)
    out[:] = e / pypto.sum(e, dim=-1, keepdim=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    x = np.random.default_rng(0).standard_normal((M, N)).astype(np.float32)
    out = np.full((M, N), np.nan, np.float32)       # CANN's SIM mode would leave this NaN
    softmax_kernel(x, out)
    e = np.exp(x - x.max(-1, keepdims=True))
    want = e / e.sum(-1, keepdims=True)
    err = np.abs(out - want).max()
    assert np.allclose(out, want, rtol=1e-5, atol=1e-7)
    t0 = time.perf_counter()
    for _ in range(max(1, args.reps)):
        softmax_kernel(x, out)
    host = (time.perf_counter() - t0) / max(1, args.reps) * 1e3
    with pypto.Profiler() as prof:
        softmax_kernel(x, out)
    npu = sum(k.npu_time_ms for k in prof.kernels) * 1e3
    print("host: measured per call; NPU: modelled 910B time (pypto.Profiler)")
    print(f"{'kernel':<16}{'host':>10}{'NPU (model)':>14}{'max err':>10}")
    print(f"{'softmax':<16}{host:>8.2f}ms{npu:>12.1f}us{err:>10.1e}")


if __name__ == "__main__":
    main()
