"""conv2d over ResNet-50's convolution layers: PyPTO's implicit GEMM against torch on the host
CPU, and its modelled NPU time on the 910B.

    python benchmarks/conv2d.py [--reps N] [--quick]

The layers are the 23 distinct convolutions of torchvision's resnet50 (v1.5: the stride is in
each stage's first 3x3) at batch 1, 224 x 224, listed in LAYERS with how often each occurs
(53 convolutions in all). float16, no bias (ResNet's convs are followed by batch norm).

PyPTO gets its inputs in the chip's layouts, as a network running on the NPU keeps them: the
feature map NC1HWC0, the weights FRACTAL_Z, the output NC1HWC0. A padded layer runs one more
kernel, the padding copy of the feature map (the chip's img2col pads in hardware; PTOAS
a56b18c3 has no pto.timg2col: docs/language.md, "conv2d"). Host time: module.run, median of
reps after a warm-up. torch: torch.nn.functional.conv2d on NCHW CPU tensors, float32 (its
fast oneDNN path; its float16 CPU convolution is far slower) with the same thread count; the
two take turns in three rounds (_harness.side_by_side), as a shared host's speed drifts.
NPU: the cycle model's time for one run on ascend910b1, conv kernel and padding copy apart,
and the cube's fp16 rate it reaches.

Measured (2-core shared host, 3 rounds of 3, other engineers' jobs running): the 53
convolutions take 441 ms of PyPTO host time against torch's 161 ms (0.37x; per layer 0.1x to
4x, the noise of a busy machine included) and 1.09 ms of modelled NPU time (+ 0.16 ms of
padding copies), 2.6 to 13.9 TFLOP/s per layer: each cube product has K = C0 = 16 (one
filter tap of one channel block), so loads and per-product costs bound it, not the cube's
peak; pto.timg2col (not in PTOAS a56b18c3) would make K = C1*KH*KW*C0.
"""
from __future__ import annotations

import numpy as np
from _harness import (default_threads, fmt_time, import_torch, main_table, settle, side_by_side,
                      use_threads)

import pypto
from pypto import layout

# (name, Cin, Cout, kernel, stride, padding, input side, occurrences in resnet50)
LAYERS = [
    ("conv1 7x7/2", 3, 64, 7, 2, 3, 224, 1),
    ("layer1 1x1 64>64", 64, 64, 1, 1, 0, 56, 1),
    ("layer1 3x3 64", 64, 64, 3, 1, 1, 56, 3),
    ("layer1 1x1 64>256 (+ds)", 64, 256, 1, 1, 0, 56, 4),
    ("layer1 1x1 256>64", 256, 64, 1, 1, 0, 56, 2),
    ("layer2 1x1 256>128", 256, 128, 1, 1, 0, 56, 1),
    ("layer2 3x3/2 128", 128, 128, 3, 2, 1, 56, 1),
    ("layer2 1x1 128>512", 128, 512, 1, 1, 0, 28, 4),
    ("layer2 ds 1x1/2 256>512", 256, 512, 1, 2, 0, 56, 1),
    ("layer2 1x1 512>128", 512, 128, 1, 1, 0, 28, 3),
    ("layer2 3x3 128", 128, 128, 3, 1, 1, 28, 3),
    ("layer3 1x1 512>256", 512, 256, 1, 1, 0, 28, 1),
    ("layer3 3x3/2 256", 256, 256, 3, 2, 1, 28, 1),
    ("layer3 1x1 256>1024", 256, 1024, 1, 1, 0, 14, 6),
    ("layer3 ds 1x1/2 512>1024", 512, 1024, 1, 2, 0, 28, 1),
    ("layer3 1x1 1024>256", 1024, 256, 1, 1, 0, 14, 5),
    ("layer3 3x3 256", 256, 256, 3, 1, 1, 14, 5),
    ("layer4 1x1 1024>512", 1024, 512, 1, 1, 0, 14, 1),
    ("layer4 3x3/2 512", 512, 512, 3, 2, 1, 14, 1),
    ("layer4 1x1 512>2048", 512, 2048, 1, 1, 0, 7, 3),
    ("layer4 ds 1x1/2 1024>2048", 1024, 2048, 1, 2, 0, 14, 1),
    ("layer4 1x1 2048>512", 2048, 512, 1, 1, 0, 7, 2),
    ("layer4 3x3 512", 512, 512, 3, 1, 1, 7, 2),
]
QUICK = ["layer1 1x1 64>64", "layer4 3x3 512"]
TARGET = "ascend910b1"


def build(cin, cout, k, stride, pad, side):
    """(module, inputs in the chip's layouts, NCHW x, OIHW w) for one layer."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, cin, side, side)).astype(np.float16)
    w = (rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float16)
    graph = pypto.TensorGraph(name="resnet_conv")
    xin = graph.placeholder(layout.to_nc1hwc0(x).shape, pypto.float16, layout="NC1HWC0")
    win = graph.placeholder(layout.to_fractal_z(w).shape, pypto.float16, layout="FRACTAL_Z")
    pypto.conv2d(xin, win, stride=stride, padding=pad, out_channels=cout, name="conv")
    module = pypto.compile(graph, target=TARGET)
    return module, {"xin": layout.to_nc1hwc0(x), "win": layout.to_fractal_z(w)}, x, w


def check(out, x, w, stride, pad, torch) -> None:
    """Against float64 (torch, or numpy for 1x1 layers without torch): fp32 accumulation then
    fp16 rounding, |err| <= (K + 2) 2^-24 (|x| * |w|) + 2^-11 |y|."""
    got = layout.from_nc1hwc0(out, w.shape[0]).astype(np.float64)
    if torch is None:
        if w.shape[2] != 1:
            return
        xs = x[:, :, ::stride, ::stride].astype(np.float64)
        exact = np.einsum("ncij,oc->noij", xs, w[:, :, 0, 0].astype(np.float64))
        scale = np.einsum("ncij,oc->noij", np.abs(xs), np.abs(w[:, :, 0, 0]).astype(np.float64))
    else:
        f = torch.nn.functional.conv2d
        t = lambda a: torch.from_numpy(a.astype(np.float64))     # noqa: E731
        exact = f(t(x), t(w), stride=stride, padding=pad).numpy()
        scale = f(t(np.abs(x)), t(np.abs(w)), stride=stride, padding=pad).numpy()
    k = w.shape[1] * w.shape[2] * w.shape[3]
    err = np.abs(got - exact)
    assert (err <= (k + 2) * 2.0 ** -24 * scale + 2.0 ** -11 * np.abs(exact) + 1e-6).all(), \
        f"conv2d {w.shape}: max error {err.max()}"


def npu_times(module, inputs) -> tuple:
    """(conv kernel ms, other kernels ms) modelled for one run."""
    with pypto.Profiler() as prof:
        module.run(inputs)
    conv = sum(k.npu_time_ms for k in prof.kernels if k.name.endswith("_conv"))
    other = sum(k.npu_time_ms for k in prof.kernels if not k.name.endswith("_conv"))
    return conv, other


def run(args) -> list:
    torch = import_torch()
    use_threads(default_threads(), torch)
    rows = []
    totals = [0.0, 0.0, 0.0, 0.0]
    for name, cin, cout, k, stride, pad, side, count in LAYERS:
        if args.quick and name not in QUICK:
            continue
        module, inputs, x, w = build(cin, cout, k, stride, pad, side)
        out = module.run(inputs).numpy()
        check(out, x, w, stride, pad, torch)
        settle()
        fns = {"pypto": lambda: module.run(inputs), "torch": None}
        if torch is not None:
            tx, tw = torch.from_numpy(x.astype(np.float32)), torch.from_numpy(
                w.astype(np.float32))
            fns["torch"] = lambda: torch.nn.functional.conv2d(tx, tw, stride=stride,
                                                              padding=pad)
        times = side_by_side(fns, args.reps, rounds=1 if args.quick else 3)
        t_pypto, t_torch = times["pypto"], times["torch"]
        npu_conv, npu_other = npu_times(module, inputs)
        side_out = (side + 2 * pad - k) // stride + 1
        flops = 2.0 * cin * cout * k * k * side_out * side_out
        totals[0] += count * t_pypto
        totals[1] += count * (t_torch or 0.0)
        totals[2] += count * npu_conv
        totals[3] += count * npu_other
        rows.append([name, f"{cin}x{side}x{side}", count, fmt_time(t_pypto),
                     fmt_time(t_torch) if t_torch else "-",
                     f"{t_torch / t_pypto:.2f}x" if t_torch else "-",
                     f"{npu_conv * 1e3:.1f} us", f"{npu_other * 1e3:.1f} us" if npu_other else "-",
                     f"{flops / (npu_conv * 1e-3) / 1e12:.1f}"])
    rows.append(["network (x count)" if not args.quick else "quick subset (x count)", "",
                 sum(r[2] for r in rows), fmt_time(totals[0]),
                 fmt_time(totals[1]) if torch is not None else "-",
                 f"{totals[1] / totals[0]:.2f}x" if torch is not None else "-",
                 f"{totals[2] * 1e3:.1f} us", f"{totals[3] * 1e3:.1f} us", ""])
    return rows


HEADERS = ["layer", "input", "count", "PyPTO host", "torch fp32", "torch/PyPTO", "NPU conv",
           "NPU pad copy", "NPU TFLOP/s"]


def main(argv=None) -> None:
    main_table(__doc__.splitlines()[0], run, HEADERS, lambda args: (
        f"conv2d fp16 (fp32 accumulate), batch 1, median of 3 rounds of {args.reps} after a "
        f"warm-up each; NPU: cycle model, {TARGET}"), argv)


if __name__ == "__main__":
    main()
