"""Tutorial 13 -- the chip's data layouts: kernels that load NZ and NC1HWC0 tensors.

    python tutorials/13_layouts_and_conv.py [--quick] [--reps N]

One idea: a kernel is written against a tensor's LOGICAL shape, and the layout it lives in is
a property of the argument. pypto.layout converts arrays into the layouts the Ascend chip
moves fastest (NC1HWC0 for activations, NZ -- the cube's fractals -- for matrices) and tags
them; the same pl.load then reads the physical array the way the chip's transfers do, and
the cycle model charges those transfers by their runs of global memory. The second part is
pypto.conv2d: the cube multiplies 16 x C0 fractals, so the NPU keeps convolution weights as
FRACTAL_Z too, and a convolution becomes a sum of small matrix products, one per filter tap
and channel block; data in the chip's layouts needs no conversion, NCHW data is converted by
kernels of its own, whose cost the profiler shows.
"""
import argparse
import textwrap
import time

import numpy as np

import pypto
import pypto.language as pl
from pypto.backends.ascend.model.launch import model_kernel

from pypto import layout

try:
    import torch
except ImportError:
    torch = None

TARGET = "ascend910b1"

# ----------------------------------------------------------------------------------------------
# 1. NC1HWC0: channels in groups of C0 = 32 bytes (16 fp16), each pixel's group contiguous.
#
# pl.load(x, offsets=(n, c, h, w), shape=(P, 16)) is P pixels (from h * W + w on, wrapping to
# the next image row) x 16 channels from c: on the chip one contiguous run of P x 32 bytes.
# ----------------------------------------------------------------------------------------------


@pypto.jit(target=TARGET)
def channel_sum(x, y, P: pl.constexpr):
    N, C, H, W = x.shape                 # logical: a layout tensor's shape is always constant
    p0 = pl.program_id(0) * P
    n = pl.program_id(1)
    acc = pl.zeros((P, 1), dtype=pl.float32)
    for c in range(0, C, 16):
        t = pl.load(x, offsets=(n, c, 0, p0), shape=(P, 16)).to(pl.float32)
        acc = acc + pl.sum(t, axis=1, keepdims=True)
    pl.store(y, offsets=(n * H * W + p0, 0), value=acc)


# ----------------------------------------------------------------------------------------------
# 2. NZ: a matrix cut into 16 x C0 fractals. One kernel, ND or NZ operands: the loads take
# the same logical (row, column) either way; only the transfers differ (a run per tile row
# for ND, converted to fractals on the way into L1; a run per column of fractals for NZ).
# ----------------------------------------------------------------------------------------------


@pypto.jit(target=TARGET)
def matmul(a, b, c, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    M, K = a.shape
    i, j = pl.program_id(0), pl.program_id(1)
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in range(0, K, BK):
        acc = pl.matmul(pl.load(a, offsets=(i * BM, k), shape=(BM, BK)),
                        pl.load(b, offsets=(k, j * BN), shape=(BK, BN)), acc)
    pl.store(c, offsets=(i * BM, j * BN), value=acc)


def host_ms(fn, reps):
    fn()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps * 1e3


# ----------------------------------------------------------------------------------------------
# 3. The converters (pypto.layout): exact converters, both ways, for numpy arrays and torch tensors.
#
#   NC1HWC0   (N, C, H, W) -> (N, ceil(C/C0), H, W, C0); x[n, c, h, w] is at
#             [n, c // C0, h, w, c % C0]; the channels past C are zeros.
#   FRACTAL_Z (Cout, Cin, KH, KW) -> (C1*KH*KW, ceil(Cout/16), 16, C0); w[o, i, kh, kw] is at
#             [(i // C0)*KH*KW + kh*KW + kw, o // 16, o % 16, i % C0]: for each tap and input
#             channel block, a Cout x C0 matrix -- the cube's right operand, read transposed.
#
# C0 is 16 for float16, 8 for float32.
#
# 4. pypto.conv2d as an implicit GEMM. The output pixels (n, oh, ow0..ow0+TM) of one block are
# the rows of a (TM, C0) x (C0, Cout) product per tap (c1, kh, kw): the tap's TM input pixels
# are one rectangular window of the (N*C1*H*W, C0) view of the padded feature map (a strided
# view when the stride is > 1), loaded into L1, multiplied into accumulators in L0C. The chip
# can also build that operand with pto.timg2col, but the PTOAS this PyPTO targets (a56b18c3)
# does not define the instruction, so the windows are loaded one by one.
# ----------------------------------------------------------------------------------------------


def show_layouts():
    x = np.arange(2 * 20 * 3 * 3, dtype=np.float16).reshape(2, 20, 3, 3)
    x5 = layout.to_nc1hwc0(x)
    print(f"to_nc1hwc0: {x.shape} float16 -> {x5.shape}; x[1, 17, 2, 0] = {x[1, 17, 2, 0]} "
          f"is x5[1, 1, 2, 0, 1] = {x5[1, 1, 2, 0, 1]}; padding channels all zero: "
          f"{not x5[:, 1, :, :, 4:].any()}")
    print(f"from_nc1hwc0(x5, 20) == x: {np.array_equal(layout.from_nc1hwc0(x5, 20), x)}")
    w = np.random.default_rng(0).standard_normal((24, 20, 3, 3)).astype(np.float32)
    wz = layout.to_fractal_z(w)
    print(f"to_fractal_z: {w.shape} float32 -> {wz.shape} (C0 = {layout.c0_for(w.dtype)}); "
          f"round trip exact: {np.array_equal(layout.from_fractal_z(wz, w.shape), w)}")


def seed_example():
    """The article's example, as it is written, plus the `weight` it never defines."""
    import pypto
    import numpy as np

    pypto.graph.reset_default_graph()
    # the article leaves `weight` undefined: here a 1x1 convolution from its 256 channels to
    # 32, already in the cube's layout
    weight = pypto.placeholder(shape=(16, 2, 16, 16), dtype=pypto.float16, layout="FRACTAL_Z")

    # 指定输入布局为NC1HWC0
    input_tensor = pypto.placeholder(
        shape=(1, 16, 224, 224, 16),  # C1=16, C0=16
        dtype=pypto.float16,
        layout="NC1HWC0"
    )

    # 编译时自动推断输出布局
    output = pypto.conv2d(input_tensor, weight)
    #  NC1HWC0布局让Cube单元一次读取16个通道，最大化内存带宽利用

    print(f"\nthe seed's conv2d: input {input_tensor.shape} NC1HWC0, weight {weight.shape} "
          f"FRACTAL_Z -> output {output.shape} {output.layout}")
    return pypto.compile(pypto.get_default_graph())


def reference(x, w, stride=1, padding=0):
    """float64 NCHW result: torch when installed, else numpy (1x1 kernels only here)."""
    if torch is not None:
        t = lambda a: torch.from_numpy(a.astype(np.float64))     # noqa: E731
        return torch.nn.functional.conv2d(t(x), t(w), stride=stride, padding=padding).numpy()
    assert w.shape[2:] == (1, 1)
    return np.einsum("ncij,oc->noij", x.astype(np.float64), w[:, :, 0, 0].astype(np.float64))


def profile_rows(module, inputs):
    with pypto.Profiler() as prof:
        out = module.run(inputs)
    return out.numpy(), [(k.name, k.host_time_ms, k.npu_time_ms) for k in prof.kernels]


def conv_part(args):
    """Sections 3 and 4: the converters, the seed's conv2d, an NCHW graph under the profiler."""
    rng = np.random.default_rng(1)
    print("\n-- pypto.conv2d " + "-" * 60)
    show_layouts()

    # -- the seed's example: NC1HWC0 in, FRACTAL_Z weights, nothing to convert ---------------
    module = seed_example()
    x = rng.standard_normal((1, 256, 224, 224)).astype(np.float16)
    w = (rng.standard_normal((32, 256, 1, 1)) / 16).astype(np.float16)
    inputs = {"input_tensor": layout.to_nc1hwc0(x), "weight": layout.to_fractal_z(w)}
    out, seed_profile = profile_rows(module, inputs)
    y = layout.from_nc1hwc0(out, 32)
    seed_err = np.abs(y - reference(x, w)).max()
    rows = [("seed 1x1, NC1HWC0 in/out", len(module.kernels),
             host_ms(lambda: module.run(inputs), args.reps) / 1e3,
             sum(r[2] for r in seed_profile), seed_err)]

    # -- NCHW in and out: the conversions are kernels of their own ------------------------------
    side = 28 if args.quick else 56
    x2 = rng.standard_normal((1, 64, side, side)).astype(np.float16)
    w2 = (rng.standard_normal((64, 64, 3, 3)) / 24).astype(np.float16)
    graph = pypto.TensorGraph(name="nchw_conv")
    xin = graph.placeholder(x2.shape, pypto.float16)          # NCHW (layout ND)
    win = graph.placeholder(w2.shape, pypto.float16)          # OIHW
    pypto.conv2d(xin, win, padding=1, output_layout="NCHW", name="conv3x3")
    module2 = pypto.compile(graph)
    inputs2 = {"xin": x2, "win": w2}
    out2, nchw_profile = profile_rows(module2, inputs2)
    err2 = np.abs(out2 - reference(x2, w2, padding=1)).max() if torch is not None else None
    rows.append((f"3x3 pad 1, NCHW in/out ({side}x{side})", len(module2.kernels),
                 host_ms(lambda: module2.run(inputs2), args.reps) / 1e3,
                 sum(r[2] for r in nchw_profile), err2))

    print("\nthe profiler, one run of each graph (host: measured here; NPU: cycle model, "
          "ascend910b):")
    print(f"  {'kernel':<28} {'host ms':>9} {'NPU us':>9}")
    for name, host, npu in seed_profile + nchw_profile:
        print(f"  {name:<28} {host:>9.3f} {npu * 1e3:>9.1f}")
    conv_npu = sum(r[2] for r in nchw_profile if r[0].endswith("conv3x3"))
    other = sum(r[2] for r in nchw_profile) - conv_npu
    print(f"  the NCHW graph spends {other * 1e3:.1f} us of {(other + conv_npu) * 1e3:.1f} us "
          f"converting layouts: data kept in NC1HWC0 between layers does not pay it")

    t_torch = None
    if torch is not None:
        tx, tw = torch.from_numpy(x2.astype(np.float32)), torch.from_numpy(w2.astype(np.float32))
        t_torch = host_ms(lambda: torch.nn.functional.conv2d(tx, tw, padding=1), args.reps) / 1e3

    print(f"\n{'graph':<36} {'kernels':>7} {'PyPTO host':>11} {'NPU (model)':>12} "
          f"{'max error':>10}")
    for name, kernels, host, npu, err in rows:
        err_text = "-" if err is None else f"{err:.2g}"
        print(f"{name:<36} {kernels:>7} {host * 1e3:>8.2f} ms {npu * 1e3:>9.1f} us "
              f"{err_text:>10}")
    if t_torch is not None:
        print(f"torch fp32 conv2d (CPU) on the 3x3 layer: {t_torch * 1e3:.2f} ms")
    else:
        print("torch: not installed (the 3x3 result is not checked)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []

    # -- NC1HWC0 --------------------------------------------------------------------------
    N, C, H, W = (2, 32, 8, 8) if args.quick else (8, 64, 28, 28)
    P = 64 if args.quick else 112
    x = rng.standard_normal((N, C, H, W)).astype(np.float16)
    x5 = pypto.layout.nc1hwc0(x)              # = as_layout(to_nc1hwc0(x), "NC1HWC0", x.shape)
    print(f"{x5!r}")
    y = np.empty((N * H * W, 1), np.float32)
    grid = (H * W // P, N)
    channel_sum[grid](x5, y, P=P)
    err = np.abs(y.reshape(N, H * W) - x.astype(np.float64).sum(axis=1).reshape(N, -1)).max()
    m = model_kernel(channel_sum, grid, x5, y, P=P)
    rows.append(("NC1HWC0", f"channel sum {N}x{C}x{H}x{W}",
                 host_ms(lambda: channel_sum[grid](x5, y, P=P), args.reps), m.time_ms, err))

    # -- NZ -------------------------------------------------------------------------------
    S = 256 if args.quick else 1024
    BM = BN = 64 if args.quick else 128
    a = rng.standard_normal((S, S)).astype(np.float16)
    b = rng.standard_normal((S, S)).astype(np.float16)
    c = np.empty((S, S), np.float32)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    grid = (S // BM, S // BN)
    for name, lhs, rhs in (("ND", a, b), ("NZ", pypto.layout.nz(a), pypto.layout.nz(b))):
        matmul[grid](lhs, rhs, c, BM=BM, BN=BN, BK=32)
        err = np.abs(c - ref).max() / np.abs(ref).max()
        m = model_kernel(matmul, grid, lhs, rhs, c, BM=BM, BN=BN, BK=32)
        rows.append((name, f"matmul fp16 {S}^3, BK=32",
                     host_ms(lambda: matmul[grid](lhs, rhs, c, BM=BM, BN=BN, BK=32),
                             args.reps), m.time_ms, err))

    print(f"\n{'layout':<8}  {'kernel':<28}  {'host':>9}  {'NPU (model)':>11}  {'max err':>8}")
    for layout, kernel, host, npu, err in rows:
        print(f"{layout:<8}  {kernel:<28}  {host:7.3f} ms  {npu * 1e3:8.2f} us  {err:8.1e}")
    print("\n(host: measured on this machine's threads; NPU: the cycle model of "
          f"{TARGET}, not a measurement)")

    # -- what the chip is told -------------------------------------------------------------
    pto = matmul.compile(pypto.layout.nz(a), pypto.layout.nz(b), c, BM=BM, BN=BN,
                         BK=32).asm["pto"]
    print("\nThe NZ operand in the .pto (pto-isa's NZ GlobalTensor, whole fractals):")
    for line in pto.splitlines():
        if "%a_tv = " in line or ("partition_view %a_tv" in line):
            print(textwrap.fill(line.strip(), 96, initial_indent="    ",
                                subsequent_indent="        "))
            if "partition_view" in line:
                break

    # -- mistakes get clear errors ---------------------------------------------------------
    try:
        pypto.layout.as_layout(np.zeros((4, 4), np.float16), "NZ", shape=(64, 64))
    except ValueError as e:
        print(f"\nas_layout with the wrong array: {e}")

    conv_part(args)


if __name__ == "__main__":
    main()
