"""Streaming vector kernels (issue 33): modelled NPU time and share of HBM on 910B1, beside the
same kernels measured on this host against numpy.

    python benchmarks/streaming.py [--reps N] [--quick]

Each kernel is written the Triton way, one program per tile with the obvious tile, and
launched as a user launches it (a grid of more programs than cores runs in the persistent
form, double-buffered where the UB allows). Share of HBM = the kernel's compulsory bytes (its
inputs read and outputs written once) over the modelled time, against the target's HBM
bandwidth (1.6 TB/s); issue 33 asks for 80 %. The NPU column is the cycle model's
(pypto/backends/ascend/model), not a measurement. The host columns are measured on this
machine at the host shape (host threads simulate the cores), median of --reps, and the
results are checked against numpy first.
"""
from __future__ import annotations

import numpy as np
from _harness import fmt_time, main_table, median_time

import pypto
import pypto.language as pl
from pypto.backends.ascend.model.launch import model_kernel

TARGET = "ascend910b1"
HBM = pypto.get_target(TARGET).hbm_gbps * 1e9


@pypto.jit(target=TARGET)
def vector_add(x, y, out, BLOCK: pl.constexpr):
    p = pl.program_id(0) * BLOCK
    pl.store(out, offsets=(p,), value=pl.load(x, offsets=(p,), shape=(BLOCK,)) +
             pl.load(y, offsets=(p,), shape=(BLOCK,)))


@pypto.jit(target=TARGET)
def softmax(x, out, BM: pl.constexpr, N: pl.constexpr):
    r = pl.program_id(0) * BM
    t = pl.load(x, offsets=(r, 0), shape=(BM, N))
    e = pl.exp(t - pl.max(t, axis=1, keepdims=True))
    pl.store(out, offsets=(r, 0), value=e / pl.sum(e, axis=1, keepdims=True))


@pypto.jit(target=TARGET)
def rms_norm(x, w, out, BM: pl.constexpr, N: pl.constexpr):
    r = pl.program_id(0) * BM
    t = pl.load(x, offsets=(r, 0), shape=(BM, N)).to(pl.float32)
    scale = 1.0 / pl.sqrt(pl.sum(t * t, axis=1, keepdims=True) / N + 1e-6)
    y = t * scale * pl.load(w, offsets=(0, 0), shape=(1, N)).to(pl.float32)
    pl.store(out, offsets=(r, 0), value=y.to(pl.float16))


@pypto.jit(target=TARGET)
def layer_norm(x, w, b, out, BM: pl.constexpr, N: pl.constexpr):
    """As Triton's layer-norm tutorial writes it: rstd = 1 / sqrt(var + eps), then
    (x - mean) * rstd * w + b."""
    r = pl.program_id(0) * BM
    t = pl.load(x, offsets=(r, 0), shape=(BM, N)).to(pl.float32)
    mean = pl.sum(t, axis=1, keepdims=True) / N
    c = t - mean
    rstd = 1.0 / pl.sqrt(pl.sum(c * c, axis=1, keepdims=True) / N + 1e-5)
    y = c * rstd * pl.load(w, offsets=(0, 0), shape=(1, N)).to(pl.float32) + \
        pl.load(b, offsets=(0, 0), shape=(1, N)).to(pl.float32)
    pl.store(out, offsets=(r, 0), value=y.to(pl.float16))


@pypto.jit(target=TARGET)
def swiglu(g, u, out, BM: pl.constexpr, BN: pl.constexpr):
    r, c = pl.program_id(0) * BM, pl.program_id(1) * BN
    a = pl.load(g, offsets=(r, c), shape=(BM, BN)).to(pl.float32)
    v = pl.load(u, offsets=(r, c), shape=(BM, BN)).to(pl.float32)
    pl.store(out, offsets=(r, c), value=(a / (1.0 + pl.exp(-a)) * v).to(pl.float16))


@pypto.jit(target=TARGET)
def rope(x, cos, sin, out, BM: pl.constexpr, D: pl.constexpr):
    """Rotary embedding, rotate-half form, on (tokens, heads x D): one program per block of
    tokens and one head; cos and sin are (tokens, D / 2)."""
    r, h = pl.program_id(0) * BM, pl.program_id(1) * D
    half = D // 2
    x1 = pl.load(x, offsets=(r, h), shape=(BM, half)).to(pl.float32)
    x2 = pl.load(x, offsets=(r, h + half), shape=(BM, half)).to(pl.float32)
    c = pl.load(cos, offsets=(r, 0), shape=(BM, half)).to(pl.float32)
    s = pl.load(sin, offsets=(r, 0), shape=(BM, half)).to(pl.float32)
    pl.store(out, offsets=(r, h), value=(x1 * c - x2 * s).to(pl.float16))
    pl.store(out, offsets=(r, h + half), value=(x2 * c + x1 * s).to(pl.float16))


@pypto.jit(target=TARGET)
def quant_int8(x, q, scale, BM: pl.constexpr, N: pl.constexpr):
    """Per-row (per-token) symmetric int8 quantisation, as vLLM's Triton kernel writes it."""
    r = pl.program_id(0) * BM
    t = pl.load(x, offsets=(r, 0), shape=(BM, N)).to(pl.float32)
    amax = pl.maximum(pl.max(pl.abs(t), axis=1, keepdims=True), 1e-10)
    pl.store(scale, offsets=(r, 0), value=amax / 127.0)
    pl.store(q, offsets=(r, 0), value=pl.cast(t * (127.0 / amax), pl.int8, rounding="rint"))


def _rows(m, n, dtype, rng):
    return rng.standard_normal((m, n)).astype(dtype)


def _softmax_ref(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _rms_ref(x, w):
    t = x.astype(np.float32)
    return (t / np.sqrt((t * t).mean(1, keepdims=True) + 1e-6) * w).astype(np.float16)


def _ln_ref(x, w, b):
    t = x.astype(np.float32)
    c = t - t.mean(1, keepdims=True)
    return (c / np.sqrt((c * c).mean(1, keepdims=True) + 1e-5) * w + b).astype(np.float16)


def _swiglu_ref(g, u):
    a = g.astype(np.float32)
    return (a / (1 + np.exp(-a)) * u.astype(np.float32)).astype(np.float16)


def _rope_ref(x, cos, sin, d=128):
    xf = x.astype(np.float32).reshape(x.shape[0], -1, d)
    c, s = (a.astype(np.float32)[:, None, :] for a in (cos, sin))
    x1, x2 = xf[..., :d // 2], xf[..., d // 2:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1).reshape(x.shape).astype(
        np.float16)


def _quant_ref(x):
    t = x.astype(np.float32)
    amax = np.maximum(np.abs(t).max(1, keepdims=True), np.float32(1e-10))
    q = np.clip(np.rint(t * (np.float32(127) / amax)), -128, 127).astype(np.int8)
    return q, amax / np.float32(127)


def cases(quick: bool) -> list:
    """(name, NPU shape, host shape, make(shape, rng) -> (kernel, grid, args, meta, output(s),
    reference), tolerance)."""
    def add(shape, rng):
        (n,) = shape
        x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
        out = np.zeros_like(x)
        return vector_add, (n // 8192,), (x, y, out), dict(BLOCK=8192), out, lambda: x + y

    def soft(shape, rng):
        x = _rows(*shape, np.float32, rng)
        out = np.zeros_like(x)
        return (softmax, (shape[0] // 2,), (x, out), dict(BM=2, N=shape[1]), out,
                lambda: _softmax_ref(x))

    def rms(shape, rng):
        x, w = _rows(*shape, np.float16, rng), _rows(1, shape[1], np.float16, rng)
        out = np.zeros_like(x)
        return (rms_norm, (shape[0] // 2,), (x, w, out), dict(BM=2, N=shape[1]), out,
                lambda: _rms_ref(x, w))

    def ln(shape, rng):
        x = _rows(*shape, np.float16, rng)
        w, b = _rows(1, shape[1], np.float16, rng), _rows(1, shape[1], np.float16, rng)
        out = np.zeros_like(x)
        return (layer_norm, (shape[0] // 2,), (x, w, b, out), dict(BM=2, N=shape[1]), out,
                lambda: _ln_ref(x, w, b))

    def glu(shape, rng):
        g, u = _rows(*shape, np.float16, rng), _rows(*shape, np.float16, rng)
        out = np.zeros_like(g)
        return (swiglu, (shape[0] // 8, shape[1] // 1376), (g, u, out),
                dict(BM=8, BN=1376), out, lambda: _swiglu_ref(g, u))

    def rot(shape, rng):
        tokens = shape[0]
        x = _rows(*shape, np.float16, rng)
        angle = rng.standard_normal((tokens, 64))
        cos, sin = np.cos(angle).astype(np.float16), np.sin(angle).astype(np.float16)
        out = np.zeros_like(x)
        return (rope, (tokens // 64, shape[1] // 128), (x, cos, sin, out), dict(BM=64, D=128),
                out, lambda: _rope_ref(x, cos, sin))

    def quant(shape, rng):
        x = _rows(*shape, np.float16, rng)
        q, scale = np.zeros(shape, np.int8), np.zeros((shape[0], 1), np.float32)
        return (quant_int8, (shape[0] // 2,), (x, q, scale), dict(BM=2, N=shape[1]),
                (q, scale), lambda: _quant_ref(x))

    small = quick
    return [
        ("vector add fp32", (1 << 20,) if small else (64 << 20,), (1 << 20,), add, 0),
        ("row softmax fp32", (64, 4096) if small else (8192, 4096), (256, 4096), soft, 1e-5),
        ("RMSNorm fp16", (64, 4096) if small else (8192, 4096), (256, 4096), rms, 2e-3),
        ("LayerNorm fp16", (64, 4096) if small else (8192, 4096), (256, 4096), ln, 4e-3),
        ("SwiGLU fp16", (64, 11008) if small else (8192, 11008), (64, 11008), glu, 2e-3),
        ("RoPE fp16, 32 heads x 128", (64, 4096) if small else (8192, 4096), (256, 4096), rot,
         2e-3),
        ("int8 quant per row", (64, 4096) if small else (8192, 4096), (256, 4096), quant, 0),
    ]


def _nbytes(args) -> int:
    return sum(a.nbytes for a in args if isinstance(a, np.ndarray))


def run(args) -> list:
    rng = np.random.default_rng(0)
    rows = []
    for name, npu_shape, host_shape, make, tol in cases(args.quick):
        kernel, grid, arrays, meta, out, reference = make(host_shape, rng)
        kernel[grid](*arrays, **meta)
        outs, refs = (v if isinstance(v, tuple) else (v,) for v in (out, reference()))
        for got, want in zip(outs, refs):
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                       rtol=tol, atol=tol, err_msg=name)
        host = median_time(lambda: kernel[grid](*arrays, **meta), args.reps)
        base = median_time(reference, args.reps)
        npu_kernel, npu_grid, npu_arrays, npu_meta, _, _ = make(npu_shape, rng)
        model = model_kernel(npu_kernel, npu_grid, *npu_arrays, **npu_meta)
        us = model.time_ms * 1e3
        share = _nbytes(npu_arrays) / (us * 1e-6) / HBM
        rows.append([name, "x".join(map(str, npu_shape)), f"{us:,.1f} us", f"{share:.0%}",
                     "yes" if share >= 0.8 else "NO", "x".join(map(str, host_shape)),
                     fmt_time(host), fmt_time(base), f"{base / host:.2f}x"])
    return rows


HEADERS = ["kernel", "NPU shape", "NPU (model)", "share of HBM", ">= 80 %", "host shape",
           "PyPTO host", "numpy", "numpy/PyPTO"]


def main(argv=None) -> None:
    main_table(__doc__.splitlines()[0], run, HEADERS, lambda args: (
        f"modelled on {TARGET} (HBM {HBM / 1e9:.0f} GB/s), one program per tile as launched; "
        f"host: median of {args.reps} after a warm-up" +
        (" (--quick: small NPU shapes, the shares mean little)" if args.quick else "")),
        argv)
    print("The model stretches a launch to its bytes over the HBM's bandwidth (its misses, "
          "its write-backs and what it leaves dirty in the L2), so no share passes 100 %.")


if __name__ == "__main__":
    main()
