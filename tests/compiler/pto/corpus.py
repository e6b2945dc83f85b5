"""The ``.pto`` conformance corpus: small kernels whose printed ``.pto`` text the real PTOAS
assembler must accept (tests/compiler/pto/test_conformance.py checks each one with
``pto-oracle check`` and lowers it with ``pto-oracle lower --level3``).

Every :class:`Entry` is a name, a zero-argument callable that compiles one specialisation of a
kernel (``kernel.compile(...)`` with small numpy arrays, nothing is launched) and returns its
``asm["pto"]``, and ``covers``: space-separated tags saying what the kernel exercises (test_conformance.py's
``REQUIRED_TAGS`` must each be covered by some entry).

The corpus holds every tutorial kernel (tutorials/*.py, imported as modules: their ``main()``
runs only under ``__main__``), every benchmark kernel (benchmarks/*.py), kernels of the test
suite (imported from the test modules), and small kernels declared here for each op family,
dtype, control-flow form, sync form, cube form, edge shape, grid rank and target.

``python -m tests.compiler.pto.dump_corpus OUTDIR`` writes every entry to OUTDIR/<name>.pto.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np

import pypto
import pypto.language as pl

ROOT = Path(__file__).resolve().parents[3]

F32, F16, I32, I16, I8 = np.float32, np.float16, np.int32, np.int16, np.int8
BF16 = np.dtype(ml_dtypes.bfloat16)
TARGETS = ("ascend910b1", "ascend910b2", "ascend910b3", "ascend910b4")


@dataclass(frozen=True)
class Entry:
    name: str                   # unique; the file is <name>.pto
    build: Callable[[], str]    # compiles one specialisation, returns its .pto text
    covers: str                 # space-separated tags (test_conformance.REQUIRED_TAGS)
    refused: str = ""           # the NPU target refuses it: part of the NotOnChip message

    @property
    def tags(self) -> set[str]:
        return set(self.covers.split())


# -- loading the tutorials, benchmarks and test modules -------------------------------------------

@functools.cache
def _script(relpath: str):
    """tutorials/NN_x.py or benchmarks/x.py as a module (their main() is guarded by
    ``if __name__ == "__main__"``). Benchmarks import ``_harness`` from their own directory."""
    path = ROOT / relpath
    name = "pto_corpus_" + relpath.replace("/", "_").removesuffix(".py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module          # dataclasses look their module up there
    folder = str(path.parent)
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    finally:
        if added:
            sys.path.remove(folder)
    return module


def _tests(module: str):
    return importlib.import_module(f"tests.{module}")


# The environment the corpus compiles under. PTO_OPT_LEVEL=O0: the .pto is printed before the
# opt level is used (it only picks the LLVM passes for the host code), and O3 makes the corpus
# several times slower to build. PYPTO_VERIFY_PTO=0: the reader's print -> parse -> print round
# trip (which the test suite's conftest turns on) is test_pto_roundtrip's business; here only
# the printed text matters, and a reader lagging behind the printer must not hide it.
_COMPILE_ENV = {"PTO_OPT_LEVEL": "O0", "PYPTO_VERIFY_PTO": "0"}


@contextlib.contextmanager
def _compile_env():
    old = {name: os.environ.get(name) for name in _COMPILE_ENV}
    os.environ.update(_COMPILE_ENV)
    try:
        yield
    finally:
        for name, value in old.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


# The last ``_pto`` call of each build, so a differential test can launch the same kernel on the
# same arguments (tests/engines): (kernel, args, kwargs).
LAST_CALL: list = [None]


def _pto(kernel, *args, **kwargs) -> str:
    LAST_CALL[0] = (kernel, args, kwargs)
    with _compile_env():
        return kernel.compile(*args, **kwargs).asm["pto"]


def _persistent_pto(kernel, *args, **kwargs) -> str:
    """The persistent launch form's .pto (compiler/passes/persistent.py); no LAST_CALL: the
    engine tests launch corpus kernels in the grid form (tests/compiler/test_persistent.py
    runs this form on pto-isa)."""
    with _compile_env():
        return kernel._get_kernel(kernel._bind(args, kwargs), persistent=True)[0].asm["pto"]


@functools.cache
def _retargeted(kernel, target: str):
    """The same kernel function under another ``@pypto.jit(target=...)``."""
    return pypto.jit(kernel.fn, target=target, auto_sync=kernel.auto_sync)


def _z(*shape, dtype=F32):
    return np.zeros(shape, dtype)


def _nc1hwc0(*shape, dtype=F16):
    """An NC1HWC0 layout tensor of logical shape (N, C, H, W)."""
    return pypto.layout.nc1hwc0(_r(*shape, dtype=dtype))


def _nz(*shape, dtype=F16):
    """An NZ layout tensor of logical shape (M, K)."""
    return pypto.layout.nz(_r(*shape, dtype=dtype))


def _r(*shape, dtype=F32):
    rng = np.random.default_rng(0)
    return rng.random(shape).astype(dtype)


# -- kernels declared here: op families -----------------------------------------------------------

@pypto.jit
def unary_exp_log(x, out, M: pl.constexpr, N: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(M, N), padding=1.0)
    r = pl.exp(t) + pl.exp2(t) + pl.log(t) + pl.log2(t) + pl.sqrt(t) + pl.rsqrt(t) \
        + pl.reciprocal(t) + pl.abs(t) + (-t)
    pl.store(out, offsets=(0, 0), value=r)


@pypto.jit
def unary_activations(x, out, M: pl.constexpr, N: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(M, N))
    r = pl.sin(t) + pl.cos(t) + pl.tanh(t) + pl.sigmoid(t) + pl.relu(t) + pl.gelu(t) \
        + pl.erf(t) + pl.floor(t) + pl.ceil(t)
    pl.store(out, offsets=(0, 0), value=r)


@pypto.jit
def binary_tile_tile(x, y, o_arith, o_minmax, M: pl.constexpr, N: pl.constexpr):
    a = pl.load(x, offsets=(0, 0), shape=(M, N))
    b = pl.load(y, offsets=(0, 0), shape=(M, N), padding=1.0)
    pl.store(o_arith, offsets=(0, 0), value=(a + b) * (a - b) / b)
    pl.store(o_minmax, offsets=(0, 0), value=pl.maximum(a, b) + pl.minimum(a, b)
             + pl.clamp(a, b, 2.0))


@pypto.jit
def binary_tile_scalar(x, out, alpha, n, M: pl.constexpr, N: pl.constexpr):
    """Tile-number and tile-runtime-scalar forms, both operand orders."""
    t = pl.load(x, offsets=(0, 0), shape=(M, N))
    r = (t * 2.0 + 1.0) - (3.0 - t) + (1.0 / (t + 1.0)) + t * alpha + (alpha - t) \
        + pl.maximum(t, 0.5) + pl.minimum(t, alpha) + t / n
    pl.store(out, offsets=(0, 0), value=r)


@pypto.jit
def int_binary_i32(x, y, o_arith, o_bits, M: pl.constexpr, N: pl.constexpr):
    a = pl.load(x, offsets=(0, 0), shape=(M, N))
    b = pl.load(y, offsets=(0, 0), shape=(M, N), padding=1)
    pl.store(o_arith, offsets=(0, 0), value=(a + b) * (a - b) + a // b + a % b + a * 3 - 7)
    pl.store(o_bits, offsets=(0, 0), value=(a & b) | (a ^ 5) | (a << 2) | (b >> 1) | ~a)


@pypto.jit
def compare_where(x, y, o_tt, o_ts, M: pl.constexpr, N: pl.constexpr):
    a = pl.load(x, offsets=(0, 0), shape=(M, N))
    b = pl.load(y, offsets=(0, 0), shape=(M, N))
    pl.store(o_tt, offsets=(0, 0), value=pl.where(a < b, a, b) + pl.where(a >= b, 1.0, 0.0)
             + pl.where(a == b, b, 2.0) + pl.where(a != b, 3.0, a))
    pl.store(o_ts, offsets=(0, 0), value=pl.where(a > 0.5, a, -1.0) + pl.where(b <= 0.25, b, a))


@pypto.jit
def compare_to_bool(x, y, out, M: pl.constexpr, N: pl.constexpr):
    """Comparisons stored as bool, combined with & | and ~."""
    a = pl.load(x, offsets=(0, 0), shape=(M, N))
    b = pl.load(y, offsets=(0, 0), shape=(M, N))
    pl.store(out, offsets=(0, 0), value=((a < b) & (a > 0.1)) | ~(b < 0.9))


@pypto.jit
def cast_from_f32(x, o16, obf, o32, oi16, oi8, M: pl.constexpr, N: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(M, N))
    pl.store(o16, offsets=(0, 0), value=t.to(pl.float16))
    pl.store(obf, offsets=(0, 0), value=t.to(pl.bfloat16))
    pl.store(o32, offsets=(0, 0), value=pl.cast(t * 100.0, pl.int32, rounding="rint"))
    pl.store(oi16, offsets=(0, 0), value=pl.cast(t * 100.0, pl.int16))
    pl.store(oi8, offsets=(0, 0), value=pl.cast(t * 100.0, pl.int8, rounding="floor"))


@pypto.jit
def cast_to_f32(a16, abf, a32, ai16, ai8, out, M: pl.constexpr, N: pl.constexpr):
    r = pl.load(a16, offsets=(0, 0), shape=(M, N)).to(pl.float32) \
        + pl.load(abf, offsets=(0, 0), shape=(M, N)).to(pl.float32) \
        + pl.load(a32, offsets=(0, 0), shape=(M, N)).to(pl.float32) \
        + pl.load(ai16, offsets=(0, 0), shape=(M, N)).to(pl.float32) \
        + pl.load(ai8, offsets=(0, 0), shape=(M, N)).to(pl.float32)
    pl.store(out, offsets=(0, 0), value=r)


@pypto.jit
def cast_between_narrow(a16, ai8, ai32, obf, oi16, of16, M: pl.constexpr, N: pl.constexpr):
    """f16 -> bf16, i8 -> i16, i32 -> f16 (no f32 in sight)."""
    pl.store(obf, offsets=(0, 0), value=pl.load(a16, offsets=(0, 0), shape=(M, N))
             .to(pl.bfloat16))
    pl.store(oi16, offsets=(0, 0), value=pl.load(ai8, offsets=(0, 0), shape=(M, N))
             .to(pl.int16))
    pl.store(of16, offsets=(0, 0), value=pl.load(ai32, offsets=(0, 0), shape=(M, N))
             .to(pl.float16))


@pypto.jit
def reduce_rows(x, o_sum, o_max, o_min, o_prod, M: pl.constexpr, N: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(M, N))
    pl.store(o_sum, offsets=(0, 0), value=pl.sum(t, axis=1, keepdims=True))
    pl.store(o_max, offsets=(0, 0), value=pl.max(t, axis=1, keepdims=True))
    pl.store(o_min, offsets=(0, 0), value=pl.min(t, axis=1, keepdims=True))
    pl.store(o_prod, offsets=(0, 0), value=pl.prod(t, axis=1, keepdims=True))


@pypto.jit
def reduce_cols(x, o_sum, o_max, o_min, o_prod, M: pl.constexpr, N: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(M, N))
    pl.store(o_sum, offsets=(0, 0), value=pl.sum(t, axis=0, keepdims=True))
    pl.store(o_max, offsets=(0, 0), value=pl.max(t, axis=0, keepdims=True))
    pl.store(o_min, offsets=(0, 0), value=pl.min(t, axis=0, keepdims=True))
    pl.store(o_prod, offsets=(0, 0), value=pl.prod(t, axis=0, keepdims=True))


@pypto.jit
def reduce_other(x, o_all, o_arg, o_mean, M: pl.constexpr, N: pl.constexpr):
    """A full reduction, argmax/argmin and mean (cumsum is refused: see cumsum_row)."""
    t = pl.load(x, offsets=(0, 0), shape=(M, N))
    pl.store(o_all, offsets=(0, 0), value=pl.sum(t, keepdims=True) + pl.max(t, keepdims=True))
    pl.store(o_arg, offsets=(0, 0), value=pl.argmax(t, axis=1, keepdims=True)
             + pl.argmin(t, axis=1, keepdims=True))
    pl.store(o_mean, offsets=(0, 0), value=pl.mean(t, axis=1, keepdims=True))


@pypto.jit
def reduce_int(x, o_sum, o_max, M: pl.constexpr, N: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(M, N))
    pl.store(o_sum, offsets=(0, 0), value=pl.sum(t, axis=1, keepdims=True))
    pl.store(o_max, offsets=(0, 0), value=pl.max(t, axis=0, keepdims=True))


@pypto.jit
def broadcasts(x, row, col, out, M: pl.constexpr, N: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(M, N))
    r = pl.load(row, offsets=(0,), shape=(N,))
    c = pl.load(col, offsets=(0, 0), shape=(M, 1))
    b = pl.broadcast_to(r[None, :], (M, N)) + pl.expand_dims(r, 0) * c
    pl.store(out, offsets=(0, 0), value=t * b + pl.broadcast_to(c, (M, N)) + 1.0)


@pypto.jit
def reshape_transpose(x, o_t, o_r, M: pl.constexpr, N: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(M, N))
    pl.store(o_t, offsets=(0, 0), value=t.T)
    pl.store(o_r, offsets=(0, 0), value=pl.reshape(t, (M * N // 16, 16)) * 2.0)


@pypto.jit
def slice_concat(x, o_s, o_c0, o_c1, M: pl.constexpr, N: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(M, N))
    pl.store(o_s, offsets=(0, 0), value=t[2:6, 8:24])
    pl.store(o_c0, offsets=(0, 0), value=pl.concat((t[0:2, :], t[6:8, :]), axis=0))
    pl.store(o_c1, offsets=(0, 0), value=pl.concat((t[:, 0:8], t[:, 16:24]), axis=1))


@pypto.jit
def creation(o_f, o_i, o_h, M: pl.constexpr, N: pl.constexpr):
    """arange (iota), full, zeros, ones and their _like forms."""
    col = pl.arange(0, N)[None, :].to(pl.float32)
    row = pl.arange(3, 3 + M)[:, None]
    z = pl.zeros((M, N), dtype=pl.float32)
    pl.store(o_f, offsets=(0, 0), value=z + col + pl.ones((M, N)) + pl.full((M, N), 2.5)
             + pl.full_like(z, -1.0) + pl.ones_like(z))
    pl.store(o_i, offsets=(0, 0), value=pl.zeros_like(z, dtype=pl.int32) + row
             + pl.full((M, N), 7, dtype=pl.int32))
    pl.store(o_h, offsets=(0, 0), value=pl.full((M, N), 0.5, dtype=pl.float16))


# -- dtypes ---------------------------------------------------------------------------------------

@pypto.jit
def elementwise(x, y, out, M: pl.constexpr, N: pl.constexpr):
    """The same arithmetic in the tensors' own dtype (one specialisation per dtype)."""
    a = pl.load(x, offsets=(0, 0), shape=(M, N))
    b = pl.load(y, offsets=(0, 0), shape=(M, N))
    pl.store(out, offsets=(0, 0), value=pl.maximum(a + b, a * b) - b)


# -- control flow ---------------------------------------------------------------------------------

@pypto.jit
def for_scalar_iter(out, n, BLOCK: pl.constexpr):
    acc = 0
    f = 1.0
    for i in range(0, n, 2):
        acc = acc + i * 3 - (i // 4)
        f = f * 0.5 + i
    pl.store(out, offsets=(0,), value=pl.full((BLOCK,), f) + acc)


@pypto.jit
def for_tile_iter(x, out, n, BLOCK: pl.constexpr):
    acc = pl.zeros((8, BLOCK), dtype=pl.float32)
    m = pl.full((8, BLOCK), float("-inf"), dtype=pl.float32)
    for r in range(0, n, 8):
        t = pl.load(x, offsets=(r, 0), shape=(8, BLOCK))
        acc = acc + t
        m = pl.maximum(m, t)
    pl.store(out, offsets=(0, 0), value=acc + m)


@pypto.jit
def nested_loops(x, out, rows, cols, TR: pl.constexpr, TC: pl.constexpr):
    for r in range(0, rows, TR):
        for c in range(0, cols, TC):
            t = pl.load(x, offsets=(r, c), shape=(TR, TC))
            pl.store(out, offsets=(r, c), value=t * 2.0)


@pypto.jit
def if_else_results(x, out, sout, flag, BLOCK: pl.constexpr):
    t = pl.load(x, offsets=(0,), shape=(BLOCK,))
    scale = 1.0
    if flag > 0:
        t = t * 2.0 + 1.0
        scale = 3.0
    else:
        t = pl.maximum(t, 0.0)
    pl.store(out, offsets=(0,), value=t * scale)
    pl.store(sout, offsets=(0,), value=pl.full((1,), scale, dtype=pl.float32))


@pypto.jit
def if_without_else(x, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    t = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    if pid == 0:
        pl.store(out, offsets=(0,), value=t + 1.0)


@pypto.jit
def while_loop(x, out, iters, limit):
    t = pl.load(x, offsets=(0,), shape=(16,))
    i = 0
    while i < limit:
        t = t * 0.5
        i += 1
    pl.store(out, offsets=(0,), value=t)
    pl.store(iters, offsets=(0,), value=pl.full((2,), i, dtype=pl.int32))


@pypto.jit
def static_range_unrolled(x, out, N: pl.constexpr):
    acc = pl.zeros((16,), dtype=pl.float32)
    for i in pl.static_range(N):
        acc = acc + pl.load(x, offsets=(i * 16,), shape=(16,)) * (i + 1)
    pl.store(out, offsets=(0,), value=acc)


@pypto.jit
def pipelined_2d(x, out, n, BM: pl.constexpr, BN: pl.constexpr):
    """pl.range(num_stages=2) over 2-D tiles with a tile carried through the loop."""
    acc = pl.zeros((1, BN), dtype=pl.float32)
    for r in pl.range(0, n, BM, num_stages=2):
        acc = acc + pl.sum(pl.load(x, offsets=(r, 0), shape=(BM, BN)), axis=0, keepdims=True)
    pl.store(out, offsets=(0, 0), value=acc)


# -- sync -----------------------------------------------------------------------------------------

@pypto.jit(auto_sync=False)
def manual_sync(x, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    t = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.set_flag("MTE2", "V", 1)
    pl.wait_flag("MTE2", "V", 1)
    r = pl.exp(t) * 2.0
    pl.pipe_barrier("V")
    r = r + 1.0
    pl.set_flag("V", "MTE3", 2)
    pl.wait_flag("V", "MTE3", 2)
    pl.store(out, offsets=(pid * BLOCK,), value=r)
    pl.pipe_barrier("ALL")


@pypto.jit
def async_load_1d(x, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    buf = pl.alloc_buffer((BLOCK,), pl.float32)
    pl.async_load(x[pid * BLOCK:(pid + 1) * BLOCK], buf)
    other = pl.local_buffer((BLOCK,), pl.float32)
    pl.async_load(x, other, offsets=((pid + 1) * BLOCK,), padding=0.0)
    pl.synchronize()
    pl.store(out, offsets=(pid * BLOCK,), value=buf + other)


@pypto.jit
def atomic_add(x, out, M: pl.constexpr, N: pl.constexpr):
    pid = pl.program_id(0)
    t = pl.load(x, offsets=(pid * M, 0), shape=(M, N))
    pl.store(out, offsets=(0, 0), value=pl.sum(t, axis=0, keepdims=True), atomic="add")


@pypto.jit
def cumsum_row(x, out, M: pl.constexpr, N: pl.constexpr, REV: pl.constexpr = False):
    pl.store(out, offsets=(0, 0), value=pl.cumsum(pl.load(x, offsets=(0, 0), shape=(M, N)),
                                                  reverse=REV))


@pypto.jit
def int64_tile(out, n, BLOCK: pl.constexpr):
    pl.store(out, offsets=(0,), value=pl.full((BLOCK,), n) * 3)


@pypto.jit
def concat_unaligned(x, out):
    a = pl.load(x, offsets=(0, 0), shape=(8, 3))
    b = pl.load(x, offsets=(0, 3), shape=(8, 29))
    pl.store(out, offsets=(0, 0), value=pl.concat([a, b], axis=1))


@pypto.jit
def slice_unaligned(x, out):
    pl.store(out, offsets=(0, 0), value=pl.load(x, offsets=(0, 0), shape=(8, 32))[:, 3:11])


@pypto.jit
def mask_compares(x, y, lt, eq, B: pl.constexpr):
    """Masks compared: once printed as a tcmp of i8 tiles, which A2/A3 rejects."""
    a = pl.load(x, offsets=(0,), shape=(B,))
    b = pl.load(y, offsets=(0,), shape=(B,))
    pl.store(lt, offsets=(0,), value=a < b)
    pl.store(eq, offsets=(0,), value=a == True)   # noqa: E712 - the tile-scalar form


@pypto.jit
def running_argmax(x, out_v, out_i, N, BM: pl.constexpr, BN: pl.constexpr):
    """The running-argmax idiom: (BM, 1) compares whose mask selects (BM, 1) tiles (an (M, 1)
    mask: Tile.is_column_mask; once printed as a (BM, 32) mask PTOAS rejected)."""
    pid = pl.program_id(0)
    best = pl.full((BM, 1), float("-inf"), dtype=pl.float32)
    best_i = pl.zeros((BM, 1), dtype=pl.int32)
    for k in range(0, N, BN):
        t = pl.load(x, offsets=(pid * BM, k), shape=(BM, BN), padding=float("-inf"))
        m = pl.max(t, axis=1, keepdims=True)
        better = m > best
        best = pl.where(better, m, best)
        best_i = pl.where(better, pl.argmax(t, axis=1, keepdims=True) + k, best_i)
    pl.store(out_v, offsets=(pid * BM, 0), value=best)
    pl.store(out_i, offsets=(pid * BM, 0), value=best_i)


@pypto.jit
def column_mask_ops(x, y, v, o1, o2, o3, o4, M: pl.constexpr):
    """(M, 1) masks from compares, mask ops, an expanded (M,) mask and a reshaped (1, M) one,
    each selecting (M, 1) tiles: one mask form for them all (Tile.is_column_mask)."""
    a = pl.load(x, offsets=(0, 0), shape=(M, 1))
    b = pl.load(y, offsets=(0, 0), shape=(M, 1))
    r = pl.load(v, offsets=(0,), shape=(M,))
    gt, lt = a > b, a < 0.5
    pl.store(o1, offsets=(0, 0), value=pl.where(gt & lt, a, b))
    pl.store(o2, offsets=(0, 0), value=pl.where(gt | ~lt, a, -b))
    pl.store(o3, offsets=(0, 0), value=pl.where(pl.expand_dims(r > 0.5, 1) & gt, a, b))
    pl.store(o4, offsets=(0, 0), value=pl.where(pl.reshape(r[None, :] > 0.25, (M, 1)), a, 0.0))


@pypto.jit
def matmul_f32_transposed(a, b, c):
    ta = pl.load(a, offsets=(0, 0), shape=(32, 16))
    tb = pl.load(b, offsets=(0, 0), shape=(32, 16))
    pl.store(c, offsets=(0, 0), value=pl.matmul(ta, tb, a_trans=True))


@pypto.jit
def signal_wait_pair(x, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    if pid == 0:
        pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(BLOCK,)))
        pl.signal(3, count=2)
    else:
        pl.wait(3, count=1)
        pl.store(out, offsets=(pid * BLOCK,),
                 value=pl.load(out, offsets=(0,), shape=(BLOCK,)) * 2.0)


# -- cube -----------------------------------------------------------------------------------------

@pypto.jit
def matmul_single(a, b, c, M: pl.constexpr, N: pl.constexpr, K: pl.constexpr):
    ta = pl.load(a, offsets=(0, 0), shape=(M, K))
    tb = pl.load(b, offsets=(0, 0), shape=(K, N))
    pl.store(c, offsets=(0, 0), value=pl.matmul(ta, tb))


@pypto.jit
def matmul_b_trans(a, b, c, M: pl.constexpr, N: pl.constexpr, K: pl.constexpr):
    ta = pl.load(a, offsets=(0, 0), shape=(M, K))
    tb = pl.load(b, offsets=(0, 0), shape=(N, K))
    pl.store(c, offsets=(0, 0), value=pl.matmul(ta, tb, b_trans=True))


@pypto.jit
def matmul_pipelined_static_k(a, b, c, K: pl.constexpr, BM: pl.constexpr, BN: pl.constexpr,
                              BK: pl.constexpr):
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in pl.range(0, K, BK, num_stages=2):
        acc = pl.matmul(pl.load(a, offsets=(0, k), shape=(BM, BK)),
                        pl.load(b, offsets=(k, 0), shape=(BK, BN)), acc=acc)
    pl.store(c, offsets=(0, 0), value=acc)


@pypto.jit
def matmul_softmax(a, b, c, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    """A K loop on the cube feeding a row softmax on the vector unit (the mixed split)."""
    pm = pl.program_id(0)
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in range(0, K, BK):
        acc = pl.matmul(pl.load(a, offsets=(pm * BM, k), shape=(BM, BK)),
                        pl.load(b, offsets=(k, 0), shape=(BK, BN)), acc=acc)
    e = pl.exp(acc - pl.max(acc, axis=1, keepdims=True))
    pl.store(c, offsets=(pm * BM, 0), value=e / pl.sum(e, axis=1, keepdims=True))


# -- shapes, grids --------------------------------------------------------------------------------

@pypto.jit
def tail_2d(x, y, out, TR: pl.constexpr, TC: pl.constexpr):
    r = pl.program_id(0) * TR
    c = pl.program_id(1) * TC
    a = pl.load(x, offsets=(r, c), shape=(TR, TC))
    b = pl.load(y, offsets=(r, c), shape=(TR, TC), padding=1.0)
    pl.store(out, offsets=(r, c), value=a / b)


@pypto.jit
def grid_3d(x, out, R: pl.constexpr, TR: pl.constexpr, TC: pl.constexpr):
    """A (batch, row-tile, col-tile) grid over a (batch * R, C) tensor (tiles are at most
    2-D)."""
    b = pl.program_id(0)
    r = b * R + pl.program_id(1) * TR
    c = pl.program_id(2) * TC
    t = pl.load(x, offsets=(r, c), shape=(TR, TC))
    pl.store(out, offsets=(r, c), value=t * (pl.num_programs(2) + b))


@pypto.jit(dynamic={"x": 0, "out": 0})
def dynamic_rows(x, out, BM: pl.constexpr, BN: pl.constexpr):
    pid = pl.program_id(0)
    for r in range(pid * BM, x.shape[0], BM * pl.num_programs(0)):
        t = pl.load(x, offsets=(r, 0), shape=(BM, BN))
        pl.store(out, offsets=(r, 0), value=pl.sum(t, axis=1, keepdims=True) + x.shape[0])


# -- the corpus -----------------------------------------------------------------------------------

def _tut(n: str):
    return _script(f"tutorials/{n}.py")


def _bench(n: str):
    return _script(f"benchmarks/{n}.py")


def _flash_attention_pto(causal: bool, block_m: int | None = None) -> str:
    """Tutorial 12's kernel over four key blocks of 256 (run_ahead.py with the cube two ahead
    through the hand-offs' FIFOs, split_rows.py, the half-row UB plan; the causal diagonal's
    branch); ``block_m`` 128: each AIV's 64 x 256 S reduced in group_reduce.py's chunks."""
    t = _tut("12_flash_attention")
    q = _r(1, 1, 1024, 64, dtype=F16)
    grid, args, meta = t.launch_args(q, q, q, np.empty_like(q), causal)
    if block_m is not None:
        meta["BLOCK_M"], grid = block_m, (grid[0], -(-1024 // block_m))
    return _pto(t.flash_attention_kernel, *args, **meta, grid=grid)


def _graph_pto(which: str) -> str:
    """One kernel of tutorial 07's graphs: pypto.compile writes @pypto.jit kernels."""
    t = _tut("07_graph_api")
    if which == "silu":
        graph = t.silu_graph(1000, 256)
    else:
        graph = pypto.TensorGraph(name="simple_matmul")
        a = graph.placeholder(shape=(64, 32), dtype=pypto.float16)
        b = graph.placeholder(shape=(32, 64), dtype=pypto.float16)
        pypto.tile_map(t.matmul_tile, [a, b], tile_size=(16, 16))
    with _compile_env():
        module = pypto.compile(graph, target="ascend910b1")
    return module.kernels[0].compiled.asm["pto"]


def _conv_pto(which: str, index: int) -> str:
    """Kernel ``index`` of a pypto.conv2d graph (graph/convolution.py writes the kernels)."""
    graph = pypto.TensorGraph(name=f"conv_{which}")
    f16 = pypto.float16
    if which == "nc1hwc0":       # FRACTAL_Z read directly; strided views; bias
        x = graph.placeholder((2, 2, 9, 8, 16), f16, layout="NC1HWC0")
        w = graph.placeholder((2 * 9, 2, 16, 16), f16, layout="FRACTAL_Z")
        b = graph.placeholder((32,), f16)
        pypto.conv2d(x, w, b, stride=2, padding=1)
    elif which == "nchw_f32":     # NCHW in and out, OIHW weights, groups, dilation
        x = graph.placeholder((2, 12, 8, 8), pypto.float32)
        w = graph.placeholder((6, 4, 3, 3), pypto.float32)
        pypto.conv2d(x, w, padding=2, dilation=2, groups=3, output_layout="NCHW")
    else:                         # float32 FRACTAL_Z: transposed to K x N first
        x = graph.placeholder((1, 2, 6, 6, 8), pypto.float32, layout="NC1HWC0")
        w = graph.placeholder((2, 1, 16, 8), pypto.float32, layout="FRACTAL_Z")
        pypto.conv2d(x, w)
    with _compile_env():
        module = pypto.compile(graph, target="ascend910b1")
    return module.kernels[index].compiled.asm["pto"]


def _entries() -> list[Entry]:
    e = []

    def add(name, covers, build, refused=""):
        e.append(Entry(name, build, covers, refused))

    rt = lambda: _tests("compiler.pto.test_pto_roundtrip")      # noqa: E731
    va = lambda: _tests("test_vector_add")                      # noqa: E731
    mm = lambda: _tests("test_matmul")                          # noqa: E731
    kn = lambda: _tests("kernels")                              # noqa: E731

    # tutorials --------------------------------------------------------------------------------
    add("tut01_vector_add", "tutorial binary-tt f32 grid-1d ascend910b1",
        lambda: _pto(_tut("01_vector_add").add_kernel, _r(1000), _r(1000), _z(1000),
                     BLOCK=256))
    add("tut02_softmax", "tutorial unary reduce-max reduce-sum reduce-axis1 broadcast f32 "
        "tail-rows tail-cols",
        lambda: _pto(_tut("02_fused_softmax").softmax_kernel, _r(37, 100), _z(37, 100),
                     BLOCK_M=8, BLOCK_N=128))
    add("tut03_matmul", "tutorial matmul-f16 k-loop grid-2d cast zeros",
        lambda: _pto(_tut("03_matmul").matmul_kernel, _r(64, 96, dtype=F16),
                     _r(96, 64, dtype=F16), _z(64, 64), 96, BM=32, BN=32, BK=32))
    add("tut04_layer_norm", "tutorial where compare arange broadcast unary reduce-sum f32 "
        "binary-ts tail-cols",
        lambda: _pto(_tut("04_layer_norm").layer_norm_kernel, _r(10, 100), _r(100), _r(100),
                     _z(10, 100), 1e-5, BLOCK_M=8, BLOCK_N=128))
    add("tut05_normalize_barrier", "tutorial barrier for-tile-iter reduce-sum reduce-axis0",
        lambda: _pto(_tut("05_multicore_barrier").normalize_kernel, _r(4096), _z(8),
                     _z(4096), CHUNK=256, BLOCKS=8))
    add("tut05_racy_normalize", "tutorial for-tile-iter reduce-sum",
        lambda: _pto(_tut("05_multicore_barrier").racy_normalize_kernel, _r(4096), _z(8),
                     _z(4096), CHUNK=256, BLOCKS=8))
    add("tut05_partial_sums", "tutorial for-tile-iter reduce-sum zeros",
        lambda: _pto(_tut("05_multicore_barrier").partial_sums_kernel, _r(4096), _z(8),
                     CHUNK=256, BLOCKS=8))
    # the persistent launch form: the programs' loop double-buffered (a vector kernel), and
    # around a K loop of its own (a cube kernel)
    add("tut01_vector_add_persistent", "tutorial binary-tt grid-1d num-stages",
        lambda: _persistent_pto(_tut("01_vector_add").add_kernel, _r(1000), _r(1000),
                                _z(1000), BLOCK=256))
    add("tut03_matmul_persistent", "tutorial matmul-f16 k-loop grid-2d",
        lambda: _persistent_pto(_tut("03_matmul").matmul_kernel, _r(64, 96, dtype=F16),
                                _r(96, 64, dtype=F16), _z(64, 64), 96, BM=32, BN=32, BK=32))
    # the persistent GEMM at the board's tiles: the programs' loop prefetches the K loop's first
    # step into buffers of its own, the K loop double-buffered in both halves, and flags per
    # buffer around each loop (sync.py back edges)
    add("bench_gemm_persistent_128x256x64", "benchmark matmul-f16 k-loop num-stages grid-2d",
        lambda: _persistent_pto(_bench("matmul").npu_gemm_kernel, _r(256, 512, dtype=F16),
                                _r(512, 512, dtype=F16), _z(256, 512), 256, 512, 512,
                                BM=128, BN=256, BK=64))
    # a cube + vector kernel in the persistent form: the GELU epilogue's hand-off through a
    # FIFO of two slots in the programs' loop, in row chunks there (chunk_epilogue.py)
    add("bench_gemm_gelu_persistent", "benchmark mixed matmul-f16 k-loop unary",
        lambda: _persistent_pto(_bench("matmul").npu_gemm_epilogue_kernel,
                                _r(256, 256, dtype=F16), _r(256, 512, dtype=F16), _r(1, 512),
                                _z(256, 512, dtype=F16), 256, 512, 256, BM=128, BN=256, BK=64,
                                ACT="gelu"))
    # operands larger than half of L0A/L0B: K pieces extracted from L1 (cube_chunks.py)
    add("matmul_k_pieces", "testsuite matmul-f16",
        lambda: _pto(_tests("compiler.pto.test_cube_chunks").product, _r(128, 256, dtype=F16),
                     _r(128, 256, dtype=F16), _z(128, 128), M=128, K=256, N=128, B_T=True))
    add("tut05_divide", "tutorial binary-tt broadcast",
        lambda: _pto(_tut("05_multicore_barrier").divide_kernel, _r(4096), _z(8), _z(4096),
                     CHUNK=256, BLOCKS=8))
    add("tut05_scale_barrier", "tutorial barrier if-else unary reduce-max",
        lambda: _pto(_tut("05_multicore_barrier").scale_kernel, _r(16, 64), _r(64, 64),
                     _z(1, 64), _z(64, 64), CAL=16, ROWS=16, N=64))
    add("tut05_scale_with_flags", "tutorial signal-wait if-else",
        lambda: _pto(_tut("05_multicore_barrier").scale_kernel_with_flags, _r(16, 64),
                     _r(64, 64), _z(1, 64), _z(64, 64), CAL=16, ROWS=16, N=64, BLOCKS=4),
        refused="pl.signal")
    add("tut05_never_met", "tutorial barrier if-else",
        lambda: _pto(_tut("05_multicore_barrier").never_met_kernel, _r(64)))
    add("tut06_row_softmax_stages2", "tutorial num-stages num-programs tail-cols",
        lambda: _pto(_tut("06_double_buffering").row_softmax, _r(64, 100), _z(64, 100),
                     BM=8, BN=128, STAGES=2))
    add("tut06_matmul_stages2", "tutorial num-stages matmul-f16 k-loop grid-2d",
        lambda: _pto(_tut("06_double_buffering").matmul_kernel, _r(64, 128, dtype=F16),
                     _r(128, 64, dtype=F16), _z(64, 64), 128, BM=32, BN=32, BK=32,
                     STAGES=2))
    # K = 0: the prologue's prefetch of the first K step is a window past the specialised
    # extent 0, which PTOAS refused as a partition of size 0 (folded since: empty_windows.py)
    add("tut06_matmul_stages2_empty_k", "tutorial num-stages matmul-f16 k-loop edge",
        lambda: _pto(_tut("06_double_buffering").matmul_kernel, np.zeros((64, 0), F16),
                     np.zeros((0, 64), F16), _z(64, 64), 0, BM=32, BN=32, BK=32, STAGES=2))
    add("tut06_softmax_explicit_ping_pong", "tutorial async-load num-programs",
        lambda: _pto(_tut("06_double_buffering").row_softmax_explicit, _r(64, 128),
                     _z(64, 128), BM=8, BN=128))
    add("tut09_row_softmax", "tutorial num-programs reduce-max reduce-sum",
        lambda: _pto(_tut("09_profiling").row_softmax, _r(64, 128), _z(64, 128), BM=8,
                     BN=128, STAGES=1))
    add("tut07_graph_axpy_silu", "tutorial unary binary-ts tail-cols",
        lambda: _graph_pto("silu"))
    add("tut07_graph_matmul", "tutorial matmul-f16 grid-2d", lambda: _graph_pto("matmul"))
    for causal in (False, True):     # both cores running ahead, the rows on both AIVs
        add(f"tut12_flash_attention{'_causal' if causal else ''}",
            "tutorial mixed matmul-f16 where arange unary reduce-max reduce-sum",
            functools.partial(_flash_attention_pto, causal))
    add("tut12_flash_attention_128_rows", "tutorial mixed matmul-f16 arange unary reduce-max "
        "reduce-sum", functools.partial(_flash_attention_pto, False, 128))
    # 48 rows an AIV: group reductions of 32 rows and an ordinary one of 16; the causal
    # diagonal's float16 compare and TSELS (compiler/passes/masks.py)
    add("tut12_flash_attention_causal_96_rows", "tutorial mixed matmul-f16 where arange unary "
        "reduce-max reduce-sum", functools.partial(_flash_attention_pto, True, 96))

    # pypto.conv2d's kernels (graph/conv_kernels.py) ---------------------------------------------
    add("conv_fmap_pad_nc1hwc0", "testsuite f16 if-else", lambda: _conv_pto("nc1hwc0", 0))
    add("conv_f16_fractal_z_stride2_bias", "testsuite matmul-f16 k-loop grid-3d",
        lambda: _conv_pto("nc1hwc0", 1))
    add("conv_fmap_nchw_f32", "testsuite f32 transpose where arange",
        lambda: _conv_pto("nchw_f32", 0))
    add("conv_weight_groups_dense", "testsuite f32 zeros", lambda: _conv_pto("nchw_f32", 1))
    add("conv_weight_oihw_to_kn", "testsuite f32 transpose reshape slice",
        lambda: _conv_pto("nchw_f32", 2))
    add("conv_f32_dilated", "testsuite matmul-f32 k-loop", lambda: _conv_pto("nchw_f32", 3))
    add("conv_to_nchw_f32", "testsuite f32 transpose slice if-else",
        lambda: _conv_pto("nchw_f32", 4))
    add("conv_weight_fractal_z_to_kn_f32", "testsuite f32 transpose",
        lambda: _conv_pto("fz_f32", 0))

    # benchmarks -------------------------------------------------------------------------------
    add("bench_vector_add", "benchmark binary-tt f32",
        lambda: _pto(_bench("vector_add").add_kernel, _r(4096), _r(4096), _z(4096),
                     BLOCK=1024))
    add("bench_launch_add_n", "benchmark where compare arange",
        lambda: _pto(_bench("launch").add_n, _r(256), _r(256), _z(256), 200, BLOCK=256))
    add("bench_launch_empty", "benchmark grid-1d",
        lambda: _pto(_bench("launch").empty_kernel, _r(16)))
    add("bench_machine_copy", "benchmark f32",
        lambda: _pto(_bench("machine").copy_kernel, _r(4096), _z(4096), BLOCK=1024))
    add("bench_machine_triad", "benchmark binary-ts",
        lambda: _pto(_bench("machine").triad_kernel, _r(4096), _r(4096), _z(4096), 3.0,
                     BLOCK=1024))
    add("bench_matmul_f32", "benchmark matmul-f32 k-loop grid-2d tail-rows tail-cols",
        lambda: _pto(_bench("matmul").matmul_kernel, _r(40, 64), _r(64, 50), _z(40, 50),
                     40, 50, 64, BM=32, BN=32, BK=32))
    add("bench_softmax", "benchmark reduce-max reduce-sum unary",
        lambda: _pto(_bench("softmax").softmax_kernel, _r(16, 128), _z(16, 128),
                     BLOCK_M=8, BLOCK_N=128))
    add("bench_layer_norm_bf16", "benchmark bf16 cast where arange rsqrt",
        lambda: _pto(_bench("layer_norm").layer_norm_kernel, _r(16, 128, dtype=BF16),
                     _r(128), _r(128), _z(16, 128), 1e-5, BLOCK_M=8, BLOCK_N=128))
    st = lambda: _bench("streaming")                             # noqa: E731
    # wide rows: two-stage row reductions (compiler/passes/row_reduce.py), fp32's group shape
    # and float16's one-repeat rows; the quantisation's float16 max and int8 conversion
    add("bench_streaming_softmax", "benchmark reduce-max reduce-sum reshape f32",
        lambda: _pto(st().softmax, _r(4, 4096), _z(4, 4096), BM=2, N=4096))
    add("bench_streaming_softmax_persistent", "benchmark num-stages reshape f32",
        lambda: _persistent_pto(st().softmax, _r(192, 4096), _z(192, 4096), BM=2, N=4096))
    add("bench_streaming_layer_norm", "benchmark reduce-sum f16 cast",
        lambda: _pto(st().layer_norm, _r(4, 4096, dtype=F16), _r(1, 4096, dtype=F16),
                     _r(1, 4096, dtype=F16), _z(4, 4096, dtype=F16), BM=2, N=4096))
    add("bench_streaming_quant_int8", "benchmark reduce-max cast f16 i8",
        lambda: _pto(st().quant_int8, _r(4, 4096, dtype=F16), _z(4, 4096, dtype=I8),
                     _z(4, 1), BM=2, N=4096))
    # double buffering in the UB memory planning reserved: the loads' second buffers planned,
    # the loads and the store kept out of the temporaries (passes/memory_plan._reserve)
    add("bench_streaming_swiglu_persistent", "benchmark num-stages grid-2d f16 cast",
        lambda: _persistent_pto(st().swiglu, _r(24, 2752, dtype=F16), _r(24, 2752, dtype=F16),
                                _z(24, 2752, dtype=F16), BM=8, BN=1376))
    add("bench_streaming_rope", "benchmark grid-2d f16 cast",
        lambda: _pto(st().rope, _r(64, 256, dtype=F16), _r(64, 64, dtype=F16),
                     _r(64, 64, dtype=F16), _z(64, 256, dtype=F16), BM=64, D=128))
    add("bench_topk", "benchmark topk sort f32 tail-rows",
        lambda: _pto(_bench("topk").topk_kernel, _r(10, 1024), _z(10, 8), _z(10, 8, dtype=I32),
                     BLOCK_M=4, N=1024, K=8))
    tt = lambda: _bench("tuning_table")                          # noqa: E731
    add("bench_tuning_add_tiles", "benchmark binary-tt",
        lambda: _pto(tt().add_tiles, _r(4096), _r(4096), _z(4096), TILE=1024))
    add("bench_tuning_add_stride", "benchmark num-programs for-scalar-iter",
        lambda: _pto(tt().add_stride, _r(4096), _r(4096), _z(4096), TILE=1024))
    add("bench_tuning_chsum_nchw_f16", "benchmark f16 cast for-tile-iter grid-2d",
        lambda: _pto(tt().chsum_nchw, _r(2 * 4, 64, dtype=F16), _z(2, 64), C=4, P=64))
    add("bench_tuning_chsum_nchw_one_load", "benchmark reduce-sum reduce-axis0 cast",
        lambda: _pto(tt().chsum_nchw_one_load, _r(2 * 4, 64, dtype=F16), _z(2, 64), C=4,
                     P=64))
    add("bench_tuning_chsum_nc1hwc0", "benchmark reduce-sum reduce-axis1 for-tile-iter "
        "layout-nc1hwc0", lambda: _pto(tt().chsum_nc1hwc0, _nc1hwc0(2, 32, 4, 4),
                                       _z(2 * 16, 1), P=16))
    add("bench_tuning_matmul_nz", "benchmark matmul-f16 k-loop grid-2d layout-nz",
        lambda: _pto(tt().matmul_tiles, _nz(64, 64), _nz(64, 32), _z(64, 32),
                     BM=32, BN=32, BK=32))
    add("bench_tuning_softmax_sync_per_tile", "benchmark manual-sync",
        lambda: _pto(tt().softmax_sync_per_tile, _r(32, 128), _z(32, 128), BM=8, BN=128))
    add("bench_tuning_softmax_async", "benchmark num-stages",
        lambda: _pto(tt().softmax_async, _r(32, 128), _z(32, 128), BM=8, BN=128, STAGES=2))

    # the test suite ---------------------------------------------------------------------------
    add("rt_control_flow", "testsuite for-scalar-iter for-tile-iter if-else while compare "
        "where cast i8 i16 i32 f16 bf16 full num-programs",
        lambda: _pto(rt().control_kernel, _r(128), _z(128), _z(128), 11, 1.5, BLOCK=128))
    add("rt_tile_ops", "testsuite cast compare where full arange reduce-sum reduce-max "
        "reduce-min reduce-axis0 reduce-axis1 slice concat transpose reshape atomic tail-rows "
        "tail-cols",
        lambda: _pto(rt().tile_ops_kernel, *rt().tile_ops_args(), M=8, N=16))
    add("rt_dynamic_strided", "testsuite dynamic",
        lambda: _pto(rt().dynamic_kernel, *rt().dynamic_args(), BLOCK=8))
    add("rt_cube_trans_int8", "testsuite matmul-f32 matmul-i8",
        lambda: _pto(rt().cube_kernel, *rt().cube_args(), M=16, N=16, K=32))
    add("rt_mixed", "testsuite mixed matmul-f16",
        lambda: _pto(rt().mixed_kernel, *rt().mixed_args()))
    add("rt_double_buffered", "testsuite num-stages for-tile-iter",
        lambda: _pto(rt().double_buffered_kernel, _r(320), _z(64), 320, BLOCK=64))
    add("ts_kernels_vadd_persistent", "testsuite num-programs",
        lambda: _pto(kn().vadd, _r(4096), _r(4096), _z(4096), 4096, BLOCK=512))
    add("ts_kernels_row_softmax", "testsuite num-stages",
        lambda: _pto(kn().row_softmax, _r(64, 64), _z(64, 64), 64, N=64, BM=8, STAGES=2))
    add("ts_kernels_mm_bias_sigmoid", "testsuite mixed k-loop matmul-f16 broadcast",
        lambda: _pto(kn().mm_bias_sigmoid, _r(64, 64, dtype=F16), _r(64, 64, dtype=F16),
                     _r(1, 64), _z(64, 64), 64, BM=32, BN=32, BK=32))
    add("ts_program_ids_3d", "testsuite grid-3d num-programs i32 zeros",
        lambda: _pto(va().program_ids_kernel, _z(64, dtype=I32)))
    add("ts_add_3d_grid", "testsuite grid-3d num-programs",
        lambda: _pto(va().add_3d_grid_kernel, _r(2048), _r(2048), _z(2048), BLOCK=256))
    add("ts_add_2d_tails", "testsuite grid-2d tail-rows tail-cols",
        lambda: _pto(va().add_2d_kernel, _r(37, 100), _r(37, 100), _z(37, 100), TR=8,
                     TC=128))
    add("ts_shift_negative_offsets", "testsuite tail-cols",
        lambda: _pto(va().shift_kernel, _r(1000), _z(1000), 3, BLOCK=256, PAD=-1.0))
    add("ts_matmul_int8_kloop", "testsuite matmul-i8 k-loop i8 i32 grid-2d",
        lambda: _pto(mm().matmul_int8_kernel, _r(48, 64, dtype=I8), _r(64, 48, dtype=I8),
                     _z(48, 48, dtype=I32), 48, 48, 64, BM=32, BN=32, BK=32))
    add("ts_matmul_peeled", "testsuite matmul-f16 k-loop",
        lambda: _pto(mm().matmul_peeled_kernel, _r(32, 96, dtype=F16), _r(96, 32, dtype=F16),
                     _z(32, 32), 96, BM=32, BN=32, BK=32))
    add("ts_matmul_persistent", "testsuite matmul-f16 k-loop num-programs",
        lambda: _pto(mm().matmul_persistent_kernel, _r(64, 64, dtype=F16),
                     _r(64, 64, dtype=F16), _z(64, 64), 64, 64, 64, BM=32, BN=32, BK=32))
    # pto-isa's GEMM schedule: STEPS K tiles per load, each matmul extracting its slice of
    # the L1 tiles straight into L0A/L0B (TEXTRACT), the operands double-buffered in L0
    add("ts_matmul_k_steps", "testsuite matmul-f16 k-loop num-stages l1-slice tail-cols",
        lambda: _pto(mm().matmul_k_steps_kernel, _r(64, 200, dtype=F16),
                     _r(200, 64, dtype=F16), _z(64, 64), 64, 64, 200, BM=32, BN=32, BK=16,
                     STEPS=4, STAGES=2))
    add("ts_matmul_k_steps_b_trans", "testsuite matmul-f16 k-loop l1-slice transpose",
        lambda: _pto(mm().matmul_k_steps_kernel, _r(32, 128, dtype=F16),
                     _r(48, 128, dtype=F16), _z(32, 48), 32, 48, 128, BM=32, BN=48, BK=32,
                     STEPS=2, B_TRANS=True))
    # elementwise results in the buffer of the operand they read last (memory_plan): the
    # chain fits the UB only so (host fusion groups dropped), one 128 KiB buffer
    add("inplace_chain", "testsuite unary binary-ts f32",
        lambda: _pto(_tests("compiler.test_in_place").chain, _r(128, 256), _z(1, 256),
                     _z(128, 256), R=128, C=256))
    # a (1, N) row / an (M, 1) column broadcast into add/sub/mul/div/max/min:
    # tcolexpand<op> / trowexpand<op> with its scratch (passes/expand.py)
    for name, dtype in (("col_expand_ops", F32), ("col_expand_ops_f16", F16)):
        add(name, "testsuite broadcast binary-tt " + ("f32" if dtype is F32 else "f16"),
            lambda dtype=dtype: _pto(_tests("language.test_expand").row_ops,
                                     *_tests("language.test_expand").row_ops_args(
                                         13, 40, dtype), M=13, N=40))
    add("row_expand_ops", "testsuite broadcast binary-tt reduce f32",      # f16: on the host
        lambda: _pto(_tests("language.test_expand").column_ops,
                     *_tests("language.test_expand").column_ops_args(13, 40, F32), M=13, N=40))
    # a pipelined loop of two iterations known at compile time: MLIR inlines its one unrolled
    # trip, and PTOAS rejected the prefetch past the end as a window of the constant size 0
    add("matmul_two_iterations_stages2", "matmul-f16 k-loop num-stages",
        lambda: _pto(matmul_pipelined_static_k, _r(32, 64, dtype=F16), _r(64, 32, dtype=F16),
                     _z(32, 32), K=64, BM=32, BN=32, BK=32))

    ep = lambda: _tests("compiler.test_cube_epilogue")          # noqa: E731
    add("gemm_bias_sigmoid_fix_pipe", "testsuite matmul-f16 k-loop num-stages grid-2d cast zeros",
        lambda: _pto(ep().gemm_epilogue, _r(64, 96, dtype=F16), _r(96, 128, dtype=F16),
                     _r(1, 128), _z(64, 128, dtype=F16), 64, 128, 96, BM=64, BN=128, BK=32,
                     ACT="relu", ROW=2))
    add("gemm_gelu_epilogue_in_chunks", "testsuite mixed matmul-f16 k-loop unary",
        lambda: _pto(ep().gemm_epilogue, _r(128, 64, dtype=F16), _r(64, 256, dtype=F16),
                     _r(1, 256), _z(128, 256, dtype=F16), 128, 256, 64, BM=128, BN=256,
                     BK=32, ACT="gelu", ROW=2))
    add("matmul_f16_bias_widened", "testsuite matmul-f16",       # fp16 row -> fp32 bias table
        lambda: _pto(ep().gemm_epilogue, _r(32, 64, dtype=F16), _r(64, 64, dtype=F16),
                     _r(64, dtype=F16), _z(32, 64), 32, 64, 64, BM=32, BN=64, BK=64,
                     ACT="maximum", ROW=1))

    # op families ------------------------------------------------------------------------------
    add("unary_exp_log", "unary f32 tail-rows tail-cols",
        lambda: _pto(unary_exp_log, _r(6, 30) + 0.5, _z(6, 30), M=8, N=32))
    add("unary_activations", "unary f32",
        lambda: _pto(unary_activations, _r(8, 32), _z(8, 32), M=8, N=32))
    add("binary_tile_tile", "binary-tt f32",
        lambda: _pto(binary_tile_tile, _r(8, 32), _r(8, 32), _z(8, 32), _z(8, 32), M=8, N=32))
    add("binary_tile_scalar", "binary-ts f32",
        lambda: _pto(binary_tile_scalar, _r(8, 32), _z(8, 32), 0.75, 5, M=8, N=32))
    add("int_binary_i32", "binary-tt binary-ts i32",
        lambda: _pto(int_binary_i32, _z(8, 32, dtype=I32), _z(8, 32, dtype=I32),
                     _z(8, 32, dtype=I32), _z(8, 32, dtype=I32), M=8, N=32))
    add("compare_where", "compare where f32",
        lambda: _pto(compare_where, _r(8, 32), _r(8, 32), _z(8, 32), _z(8, 32), M=8, N=32))
    add("compare_to_bool", "compare f32",
        lambda: _pto(compare_to_bool, _r(8, 32), _r(8, 32), _z(8, 32, dtype=np.bool_),
                     M=8, N=32))
    add("cast_from_f32", "cast f32 f16 bf16 i32 i16 i8",
        lambda: _pto(cast_from_f32, _r(8, 32), _z(8, 32, dtype=F16), _z(8, 32, dtype=BF16),
                     _z(8, 32, dtype=I32), _z(8, 32, dtype=I16), _z(8, 32, dtype=I8),
                     M=8, N=32))
    add("cast_to_f32", "cast f32 f16 bf16 i32 i16 i8",
        lambda: _pto(cast_to_f32, _z(8, 32, dtype=F16), _z(8, 32, dtype=BF16),
                     _z(8, 32, dtype=I32), _z(8, 32, dtype=I16), _z(8, 32, dtype=I8),
                     _z(8, 32), M=8, N=32))
    add("cast_between_narrow", "cast f16 bf16 i8 i16 i32",
        lambda: _pto(cast_between_narrow, _z(8, 32, dtype=F16), _z(8, 32, dtype=I8),
                     _z(8, 32, dtype=I32), _z(8, 32, dtype=BF16), _z(8, 32, dtype=I16),
                     _z(8, 32, dtype=F16), M=8, N=32))
    add("reduce_rows", "reduce-sum reduce-max reduce-min reduce-prod reduce-axis1 f32",
        lambda: _pto(reduce_rows, _r(8, 32), *[_z(8, 1) for _ in range(4)], M=8, N=32))
    add("reduce_cols", "reduce-sum reduce-max reduce-min reduce-prod reduce-axis0 f32",
        lambda: _pto(reduce_cols, _r(8, 32), *[_z(1, 32) for _ in range(4)], M=8, N=32))
    add("reduce_other", "reduce-sum reduce-max argmax mean f32 i32",
        lambda: _pto(reduce_other, _r(8, 32), _z(1, 1), _z(8, 1, dtype=I32), _z(8, 1),
                     M=8, N=32))
    add("reduce_int16", "reduce-sum reduce-max reduce-axis0 reduce-axis1 i16",
        lambda: _pto(reduce_int, _z(8, 32, dtype=I16), _z(8, 1, dtype=I32),
                     _z(1, 32, dtype=I16), M=8, N=32))
    add("broadcasts", "broadcast f32",
        lambda: _pto(broadcasts, _r(8, 32), _r(32), _r(8, 1), _z(8, 32), M=8, N=32))
    add("reshape_transpose", "reshape transpose f32",
        lambda: _pto(reshape_transpose, _r(8, 32), _z(32, 8), _z(16, 16), M=8, N=32))
    add("slice_concat", "slice concat f32",
        lambda: _pto(slice_concat, _r(8, 32), _z(4, 16), _z(4, 32), _z(8, 16), M=8, N=32))
    add("creation", "arange full zeros f32 i32 f16",
        lambda: _pto(creation, _z(8, 32), _z(8, 32, dtype=I32), _z(8, 32, dtype=F16),
                     M=8, N=32))
    sh = lambda: _tests("language.test_shapes")                 # noqa: E731
    add("creation_bf16_runtime", "full zeros arange bf16 testsuite",     # a run-time bf16 fill
        lambda: _pto(sh().create_kernel, -2.5, _z(4, 16), *(_z(4, 16, dtype=BF16)
                                                           for _ in range(3)),
                     _z(16, dtype=I32), _z(16, dtype=I32), M=4, N=16, D=pl.bfloat16, V=1.5))
    for dtype, tag in ((F16, "f16"), (BF16, "bf16"), (I32, "i32"), (I16, "i16"), (I8, "i8")):
        add(f"elementwise_{tag}", f"binary-tt {tag}",
            lambda dtype=dtype: _pto(elementwise, _z(8, 32, dtype=dtype), _z(8, 32, dtype=dtype),
                                     _z(8, 32, dtype=dtype), M=8, N=32))

    # control flow -----------------------------------------------------------------------------
    add("for_scalar_iter", "for-scalar-iter full",
        lambda: _pto(for_scalar_iter, _z(64), 9, BLOCK=64))
    add("for_tile_iter", "for-tile-iter full zeros",
        lambda: _pto(for_tile_iter, _r(64, 32), _z(8, 32), 64, BLOCK=32))
    add("nested_loops", "for-scalar-iter tail-rows tail-cols",
        lambda: _pto(nested_loops, _r(37, 100), _z(37, 100), 37, 100, TR=8, TC=32))
    add("if_else_results", "if-else full",
        lambda: _pto(if_else_results, _r(16), _z(16), _z(1), 1 + 2, BLOCK=16))
    add("if_without_else", "if-else grid-1d",
        lambda: _pto(if_without_else, _r(64), _z(16), BLOCK=16))
    add("while_loop", "while i32",
        lambda: _pto(while_loop, _r(16), _z(16), _z(2, dtype=I32), 5))
    cf = lambda: _tests("language.test_control_flow")           # noqa: E731
    for name in ("while_result_in_if", "while_result_in_for", "whiles_in_a_for",
                 "float_and_bool_while_results"):     # results used in other blocks
        add(name, "testsuite while if-else for-scalar-iter",
            lambda name=name: _pto(getattr(cf(), name), _r(16), _z(16), 3))
    add("halve_until", "testsuite while compare where",
        lambda: _pto(cf().halve_until, _r(16), _z(16), _z(2, dtype=I32), 3))
    el = lambda: _tests("language.test_elementwise")              # noqa: E731
    add("where_by_runtime_scalar", "testsuite where broadcast f16",
        lambda: _pto(el().where_by_scalar_kernel, _r(8, 32, dtype=F16), _r(1, 32, dtype=F16),
                     _z(8, 32, dtype=F16), 3, M=8, N=32))
    add("static_range_unrolled", "static-range",
        lambda: _pto(static_range_unrolled, _r(64), _z(16), N=4))
    add("pipelined_2d", "num-stages for-tile-iter reduce-axis0",
        lambda: _pto(pipelined_2d, _r(64, 32), _z(1, 32), 64, BM=8, BN=32))

    # sync -------------------------------------------------------------------------------------
    add("manual_sync", "manual-sync",
        lambda: _pto(manual_sync, _r(1024), _z(1024), BLOCK=256))
    add("async_load_1d", "async-load",
        lambda: _pto(async_load_1d, _r(1024), _z(1024), BLOCK=256))
    add("atomic_add", "atomic reduce-sum reduce-axis0",
        lambda: _pto(atomic_add, _r(32, 32), _z(1, 32), M=8, N=32))
    add("signal_wait_pair", "signal-wait if-else",
        lambda: _pto(signal_wait_pair, _r(64), _z(192), BLOCK=64), refused="pl.signal")
    add("cumsum_row", "ttrans", lambda: _pto(cumsum_row, _r(8, 32), _z(8, 32), M=8, N=32))
    add("cumsum_row_reverse_int", "ttrans",
        lambda: _pto(cumsum_row, _r(3, 100, dtype=np.int32), _z(3, 100, dtype=np.int32),
                     M=3, N=100, REV=True))
    add("int64_tile", "i64", lambda: _pto(int64_tile, _z(64, dtype=np.int64), 5, BLOCK=64),
        refused="int64 tile")
    add("concat_unaligned", "concat", lambda: _pto(concat_unaligned, _r(8, 32), _z(8, 32)),
        refused="a concatenation at column")
    add("slice_unaligned", "slice", lambda: _pto(slice_unaligned, _r(8, 32), _z(8, 8)),
        refused="a slice at column 3")
    add("matmul_f32_transposed", "matmul-f32",
        lambda: _pto(matmul_f32_transposed, _r(32, 16), _r(32, 16), _z(16, 16)),
        refused="transposed float32 matmul operand")

    # cube -------------------------------------------------------------------------------------
    add("matmul_f16_single", "matmul-f16 f16",
        lambda: _pto(matmul_single, _r(16, 32, dtype=F16), _r(32, 16, dtype=F16), _z(16, 16),
                     M=16, N=16, K=32))
    add("matmul_f32_single", "matmul-f32 f32",
        lambda: _pto(matmul_single, _r(16, 16), _r(16, 16), _z(16, 16), M=16, N=16, K=16))
    add("matmul_i8_single", "matmul-i8 i8",
        lambda: _pto(matmul_single, _z(16, 32, dtype=I8), _z(32, 16, dtype=I8),
                     _z(16, 16, dtype=I32), M=16, N=16, K=32))
    add("matmul_bf16_single", "matmul-bf16 bf16",
        lambda: _pto(matmul_single, _z(16, 32, dtype=BF16), _z(32, 16, dtype=BF16),
                     _z(16, 16), M=16, N=16, K=32))
    add("matmul_bf16_b_trans", "matmul-bf16 bf16 transpose",
        lambda: _pto(matmul_b_trans, _z(16, 32, dtype=BF16), _z(16, 32, dtype=BF16),
                     _z(16, 16), M=16, N=16, K=32))
    add("matmul_f32_kloop_tails", "matmul-f32 k-loop tail-rows tail-cols grid-2d",
        lambda: _pto(mm().matmul_kernel, _r(37, 40), _r(40, 50), _z(37, 50), 37, 50, 40,
                     BM=16, BN=32, BK=16))
    r34 = lambda: _tests("language.test_rank34")                 # noqa: E731
    add("rank3_reductions", "testsuite rank3 broadcast unary reduce-sum reduce-max reduce-min "
        "tail-rows tail-cols grid-1d",
        lambda: _pto(r34().three_reductions, _r(3, 5, 20), _r(1, 1, 32), _z(3, 5, 20),
                     _z(2, 5, 20), _z(3, 1, 20), _z(3, 5, 1), B=2, M=8, N=32, grid=(2,)))
    add("rank3_batched_matmul", "testsuite rank3 matmul-f16 k-loop transpose tail-rows",
        lambda: _pto(r34().batched_matmul, _r(5, 13, 40, dtype=F16), _r(20, 40, dtype=F16),
                     _z(5, 13, 20), B=2, M=16, K=40, N=32, BK=16, A_BATCH=True,
                     B_BATCH=False, A_T=False, B_T=True, grid=(3,)))
    add("rank3_planes_past_the_end", "testsuite rank3 rank4 reduce-prod topk concat reshape",
        lambda: _pto(r34().plane_ops, _r(3, 8, 16), _z(8, 16), _z(1, 8, 16), _z(4, 8, 2),
                     _z(4, 8, 1, dtype=I32), _z(4, 8, 32), _z(2, 2, 8, 16), M=8, N=16))
    add("window_past_the_end", "testsuite tail-rows",
        lambda: _pto(r34().window_at, _r(5, 16), _z(3, 5, 16), R=8, P=2))
    lk = lambda: _tests("test_layout_kernels")                  # noqa: E731
    add("layout_nc1hwc0_window_tails", "layout-nc1hwc0 tail-rows tail-cols f32",
        lambda: _pto(lk().nc1hwc0_window, _nc1hwc0(2, 20, 5, 7, dtype=F32),
                     _z(2 * 8 * 40, 8), C=20, P=16, CB=8))
    add("layout_nz_matmul_f32_tails", "layout-nz matmul-f32 k-loop tail-rows tail-cols",
        lambda: _pto(lk().nz_matmul, _nz(40, 24, dtype=F32), _nz(24, 40, dtype=F32),
                     _z(40, 40), BM=16, BN=16, BK=16))
    add("layout_nc1hwc0_conv1x1", "layout-nc1hwc0 matmul-f16 k-loop grid-2d",
        lambda: _pto(lk().conv1x1, _nc1hwc0(2, 40, 4, 8), _r(48, 32, dtype=F16),
                     _z(2 * 32, 32), P=32, O=32))
    add("layout_nz_into_ub", "layout-nz", lambda: _pto(lk().nz_vector_load,
                                                       _nz(32, 32), _z(32, 32, dtype=F16)),
        refused="a load from an NZ tensor into a vector (UB) tile")
    add("matmul_softmax_mixed", "mixed matmul-f16 k-loop reduce-max reduce-sum unary",
        lambda: _pto(matmul_softmax, _r(32, 64, dtype=F16), _r(64, 32, dtype=F16),
                     _z(32, 32), 64, BM=16, BN=32, BK=32))

    # indexed memory access -----------------------------------------------------------------------
    ix = lambda: _tests("language.test_indexed")                 # noqa: E731
    idx2 = np.array([[0, 3, -1, 9], [2, 2, 40, 1], [5, 0, 0, 7]], I32)
    add("gather_2d_axis0", "gather testsuite f32 i32 tail-cols",
        lambda: _pto(ix().gather_2d, _r(9, 6), idx2, _z(3, 4), 0, 1, M=3, K=4, AXIS=0, PAD=0))
    add("gather_2d_axis1_f16", "gather testsuite f16",
        lambda: _pto(ix().gather_2d, _r(5, 9, dtype=F16), idx2, _z(3, 4, dtype=F16), 0, 0,
                     M=3, K=4, AXIS=1, PAD=-1))
    add("gather_rows_i32", "gather testsuite i32 broadcast",
        lambda: _pto(ix().gather_rows, _z(12, 20, dtype=I32), idx2[0], _z(4, 20, dtype=I32),
                     M=4, D=20))
    add("index_select_f16", "gather testsuite f16 tail-cols",
        lambda: _pto(ix().index_select_whole, _r(12, 40, dtype=F16), idx2[0],
                     _z(4, 40, dtype=F16), M=4))
    add("index_select_window_i8", "gather testsuite i8",
        lambda: _pto(ix().index_select, _z(12, 70, dtype=np.int8), idx2[1],
                     _z(4, 64, dtype=np.int8), 1, 3, M=4, D=64, PAD=5))
    add("scatter_rows_add", "scatter atomic testsuite f32",
        lambda: _pto(ix().scatter_rows, _z(9, 16), idx2[2], _r(3, 16), 0, 0, M=3, D=16,
                     ADD=True))
    add("scatter_2d_add", "scatter atomic testsuite f32",
        lambda: _pto(ix().scatter_2d, _z(9, 6), idx2, _r(3, 4), 0, 0, M=3, K=4, AXIS=0,
                     ADD=True))
    add("scatter_2d_i32", "scatter testsuite i32",
        lambda: _pto(ix().scatter_2d, _z(9, 6, dtype=I32), idx2, _z(3, 4, dtype=I32), 1, 0,
                     M=3, K=4, AXIS=1, ADD=False))
    add("scatter_1d_add", "scatter atomic testsuite f32",
        lambda: _pto(ix().scatter_1d, _z(7), idx2[1], _r(4), M=4))

    so = lambda: _tests("language.test_sorting")                 # noqa: E731
    add("topk_f32_tails", "sort topk testsuite f32 tail-cols",
        lambda: _pto(so().topk_2d, _r(3, 40), _z(3, 5), _z(3, 5, dtype=I32), M=3, N=40, K=5,
                     LARGEST=True))
    add("topk_smallest_i32", "sort topk testsuite i32",
        lambda: _pto(so().topk_2d, _z(2, 16, dtype=I32), _z(2, 3, dtype=I32),
                     _z(2, 3, dtype=I32), M=2, N=16, K=3, LARGEST=False))
    add("sort_argsort_f16", "sort testsuite f16",
        lambda: _pto(so().sort_2d, _r(2, 24, dtype=F16), _z(2, 24, dtype=F16),
                     _z(2, 24, dtype=I32), M=2, N=24, DESC=True))

    add("running_argmax", "compare where column-mask reduce-max for-tile-iter f32 i32",
        lambda: _pto(running_argmax, _r(40, 200), _z(40, 1), _z(40, 1, dtype=I32), 200,
                     BM=16, BN=64))
    add("column_mask_ops", "compare where column-mask reshape f32",
        lambda: _pto(column_mask_ops, _r(40, 1), _r(40, 1) * 0.5 + 0.25, _r(40),
                     *(_z(40, 1) for _ in range(4)), M=40))
    # integer // and % from float32 quotients (legalize.int_trunc_divmod: no TFMOD on ints)
    idv = lambda: _tests("language.test_int_division")          # noqa: E731
    for dtype, tag in ((I16, "i16"), (I8, "i8")):
        add(f"int_divmod_{tag}", f"testsuite binary-tt {tag}",
            lambda dtype=dtype: _pto(idv().divmod_kernel, *[_z(8, 32, dtype=dtype)] * 4,
                                     R=8, C=32))
    add("int_divmod_i32_scalar", "testsuite binary-ts i32",
        lambda: _pto(idv().divmod_scalar_kernel, *[_z(8, 32, dtype=I32)] * 3, 7, R=8, C=32))
    add("mask_compares", "compare binary-tt binary-ts",
        lambda: _pto(mask_compares, _z(40, dtype=np.bool_), _z(40, dtype=np.bool_),
                     _z(40, dtype=np.bool_), _z(40, dtype=np.bool_), B=64))
    # low-precision storage dtypes (passes/legalize_storage.py) ---------------------------------
    lp = lambda: _tests("language.test_lowp_dtypes")             # noqa: E731
    E4M3, E5M2 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)
    add("lowp_float8_encode", "testsuite cast f32 f8 tail-rows tail-cols",
        lambda: _pto(lp().convert3, _r(6, 40), _z(6, 40, dtype=E4M3), _z(6, 40, dtype=E5M2),
                     _z(6, 40, dtype=np.uint16), R=4, C=32))
    add("lowp_float8_decode", "testsuite cast f8 f16 bf16",
        lambda: _pto(lp().convert3, _z(8, 32, dtype=E4M3), _z(8, 32, dtype=F16),
                     _z(8, 32, dtype=BF16), _z(8, 32, dtype=E5M2), R=4, C=32))
    for name in ("uint16", "uint32"):
        add(f"lowp_{name}_ops", f"testsuite binary-tt binary-ts compare where {name}",
            lambda name=name: _pto(lp().unsigned_ops, *[_z(8, 64, dtype=np.dtype(name))] * 9,
                                   R=4, C=32))
        add(f"lowp_{name}_casts", f"testsuite cast {name} f32 f16 i32",
            lambda name=name: _pto(lp().convert3, _z(8, 32, dtype=np.dtype(name)),
                                   _z(8, 32), _z(8, 32, dtype=F16), _z(8, 32, dtype=I32),
                                   R=4, C=32))
    add("lowp_int4_load", "testsuite cast int4 f32 tail-rows tail-cols",
        lambda: _pto(lp().convert, pypto.int4_tensor(np.zeros((5, 19), np.uint8), (5, 37)),
                     _z(5, 37), R=4, C=32))
    add("lowp_int4_store", "testsuite cast int4 f32 tail-rows tail-cols",
        lambda: _pto(lp().convert, _r(5, 37),
                     pypto.int4_tensor(np.zeros((5, 19), np.uint8), (5, 37)), R=4, C=32))
    add("lowp_uint16_divide", "testsuite uint16 reduce-max",
        lambda: _pto(lp().u16_divide, *[_z(1, 64, dtype=np.uint16)] * 4,
                     _z(1, 1, dtype=np.uint16), N=64))

    # shapes, grids ------------------------------------------------------------------------------
    add("tail_2d_37x100", "tail-rows tail-cols grid-2d",
        lambda: _pto(tail_2d, _r(37, 100), _r(37, 100), _z(37, 100), TR=8, TC=128))
    add("grid_3d", "grid-3d num-programs",
        lambda: _pto(grid_3d, _r(2 * 24, 48), _z(2 * 24, 48), R=24, TR=8,
                     TC=16))
    add("dynamic_rows", "dynamic num-programs reduce-sum",
        lambda: _pto(dynamic_rows, _r(37, 32), _z(37, 1), BM=8, BN=32))

    # targets ----------------------------------------------------------------------------------
    for target in TARGETS[1:]:
        short = target.removeprefix("ascend")
        add(f"target_{short}_vector_add", f"{target} binary-tt",
            lambda target=target: _pto(_retargeted(_tut("01_vector_add").add_kernel, target),
                                       _r(1000), _r(1000), _z(1000), BLOCK=256))
        add(f"target_{short}_matmul", f"{target} matmul-f16 k-loop",
            lambda target=target: _pto(_retargeted(_tut("03_matmul").matmul_kernel, target),
                                       _r(64, 64, dtype=F16), _r(64, 64, dtype=F16),
                                       _z(64, 64), 64, BM=32, BN=32, BK=32))
    add("target_b3_mixed", "ascend910b3 mixed",
        lambda: _pto(_retargeted(kn().mm_bias_sigmoid, "ascend910b3"), _r(32, 32, dtype=F16),
                     _r(32, 32, dtype=F16), _r(1, 32), _z(32, 32), 32, BM=32, BN=32, BK=32))
    return e


CORPUS: list[Entry] = _entries()
BY_NAME: dict[str, Entry] = {entry.name: entry for entry in CORPUS}
assert len(BY_NAME) == len(CORPUS), "corpus names must be unique"


def covered() -> set[str]:
    return set().union(*(entry.tags for entry in CORPUS))
