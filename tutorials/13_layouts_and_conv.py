"""Tutorial 13 -- the chip's data layouts: kernels that load NZ and NC1HWC0 tensors.

    python tutorials/13_layouts_and_conv.py [--quick] [--reps N]

One idea: a kernel is written against a tensor's LOGICAL shape, and the layout it lives in is
a property of the argument. pypto.layout converts arrays into the layouts the Ascend chip
moves fastest (NC1HWC0 for activations, NZ -- the cube's fractals -- for matrices) and tags
them; the same pl.load then reads the physical array the way the chip's transfers do, and
the cycle model charges those transfers by their runs of global memory. (A later section of
this tutorial will add pypto.conv2d, which takes NC1HWC0 / FRACTAL_Z directly.)
"""
import argparse
import textwrap
import time

import numpy as np

import pypto
import pypto.language as pl
from pypto.backends.ascend.cycle_model import model_kernel

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


if __name__ == "__main__":
    main()
