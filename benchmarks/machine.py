"""The machine's limits, measured in the same run as the kernels they are compared with.

    python benchmarks/machine.py [--reps N] [--quick]

Bandwidth (STREAM-style, arrays far larger than the caches; 32 M fp32 = 128 MiB each):
  copy   a = b            2 arrays moved per element
  add    a = b + c        3 arrays
  triad  a = b + s * c    3 arrays
each done three ways: numpy (single-threaded ufuncs: np.copyto, np.add(out=); its triad is
two passes, multiply then add, as numpy has no fused form), torch (on PyPTO's thread count;
a.copy_(b), torch.add(out=), torch.add(b, c, alpha=s, out=a) which is one pass) and PyPTO
kernels (one load/store pass on the simulated AI Cores). Bytes are counted the STREAM way
(arrays x bytes, no write-allocate traffic). The machine's bandwidth for a pattern is the best
of the three: that is the "limit" a memory-bound kernel's % limit column is measured against
(copy for softmax and layer norm, which read one array and write one; add for vector add).

Compute:
  fp32 FMA peak  a JIT-compiled (llvmlite) loop of 12 independent FMA chains per thread, each
                 one vector register wide (<16 x float> with AVX-512, <8 x float> with AVX2),
                 on PyPTO's thread count: what the cores can do at best. The limit for
                 matmul's % limit column.
  sgemm 2048^3   numpy's BLAS (OpenBLAS in the PyPI wheels) on the same threads: the practical
                 peak; PyPTO's matmul and torch's are timed at the same size beside it. Which
                 BLAS kernel ran is printed (threadpoolctl when installed, else OpenBLAS's own
                 openblas_get_corename). When OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE is set in
                 the environment (they force a kernel or its blocking), sgemm is also run in a
                 subprocess without them.

Limits are the best of the repetitions (STREAM's convention: what the machine can do), not
the median.
"""
from __future__ import annotations

import ctypes
import threading
import time

import numpy as np
from _harness import (
    blas_info,
    default_threads,
    fmt_size,
    import_torch,
    make_row,
    openblas_tuning_set,
    parse_args,
    pct_of,
    print_environment,
    print_load_during_run,
    print_rows,
    run_without_openblas_tuning,
    settle,
    speedup,
    use_threads,
)

import pypto
import pypto.language as pl

BLOCK = 8192
PATTERNS = {"copy": 2, "add": 3, "triad": 3}       # arrays moved per element
TRIAD_SCALAR = 3.0


@pypto.jit
def copy_kernel(x, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    pl.store(out, offsets=(pid * BLOCK,), value=pl.load(x, offsets=(pid * BLOCK,),
                                                         shape=(BLOCK,)))


@pypto.jit
def triad_kernel(b, c, out, s, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    tb = pl.load(b, offsets=(pid * BLOCK,), shape=(BLOCK,))
    tc = pl.load(c, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(pid * BLOCK,), value=tb + s * tc)


def best_time(fn, reps: int) -> float:
    """Fastest of ``reps`` calls after one warm-up."""
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


# ---------------------------------------------------------------------------------------------
# STREAM

def _stream_fns(pattern, a, b, c, torch):
    """{library: fn} doing ``pattern`` into ``a``."""
    from vector_add import add_kernel
    grid = (pl.cdiv(a.size, BLOCK),)
    s = TRIAD_SCALAR
    fns = {}
    if pattern == "copy":
        fns["PyPTO"] = lambda: copy_kernel[grid](b, a, BLOCK=BLOCK)
        fns["numpy"] = lambda: np.copyto(a, b)
    elif pattern == "add":
        fns["PyPTO"] = lambda: add_kernel[grid](b, c, a, BLOCK=BLOCK)
        fns["numpy"] = lambda: np.add(b, c, out=a)
    else:
        fns["PyPTO"] = lambda: triad_kernel[grid](b, c, a, s, BLOCK=BLOCK)
        fns["numpy"] = lambda: (np.multiply(c, s, out=a), np.add(a, b, out=a))
    if torch is not None:
        ta, tb, tc = (torch.from_numpy(x) for x in (a, b, c))
        if pattern == "copy":
            fns["torch"] = lambda: ta.copy_(tb)
        elif pattern == "add":
            fns["torch"] = lambda: torch.add(tb, tc, out=ta)
        else:
            fns["torch"] = lambda: torch.add(tb, tc, alpha=s, out=ta)
    return fns


def _expected(pattern, b, c):
    if pattern == "copy":
        return b
    if pattern == "add":
        return b + c
    return b + np.float32(TRIAD_SCALAR) * c


def stream(n: int, reps: int, patterns, torch) -> dict:
    """{pattern: {library: best seconds}}, one library at a time over every pattern."""
    rng = np.random.default_rng(1)
    a = np.zeros(n, np.float32)
    b = rng.standard_normal(n, dtype=np.float32)
    c = rng.standard_normal(n, dtype=np.float32)
    fns = {p: _stream_fns(p, a, b, c, torch) for p in patterns}
    times = {p: {} for p in patterns}
    for lib in ("PyPTO", "numpy", "torch"):
        for p in patterns:
            if lib not in fns[p]:
                continue
            a.fill(0)
            fns[p][lib]()
            # an fp32 add is exactly rounded everywhere; numpy's two-pass triad rounds the
            # product first, as the kernels do (no FMA contraction in either)
            np.testing.assert_allclose(a, _expected(p, b, c), rtol=1e-6, atol=1e-6,
                                       err_msg=f"{lib} STREAM {p}")
            times[p][lib] = best_time(fns[p][lib], reps)
        settle()
    return times


# ---------------------------------------------------------------------------------------------
# fp32 FMA peak: a JIT-compiled loop of independent vector FMA chains, one per thread.

# 12 chains, each one register wide, plus the two splatted operands fit the 16 registers of
# AVX2 as well as AVX-512's 32; enough independent chains to cover FMA latency x throughput
# (4-5 cycles x 1-2 per cycle). Wider chains than the registers spill to the stack (12 of
# <16 x float> on AVX2 are 24 ymm registers) and measured a third less than the machine does.
FMA_CHAINS = 12
_fma = {}


def fma_width(features: str) -> int:
    """fp32 lanes of the widest vector register the host has (LLVM feature string)."""
    flags = set(features.split(","))
    return 16 if "+avx512f" in flags else 8 if "+avx" in flags else 4


def _fma_ir(width: int, chains: int) -> str:
    v = f"<{width} x float>"
    fma = f"@llvm.fma.v{width}f32"
    out = [f"declare {v} {fma}({v}, {v}, {v})",
           "define float @fma_peak(i64 %n, float %m, float %c) {",
           "entry:",
           f"  %m0 = insertelement {v} poison, float %m, i64 0",
           f"  %mv = shufflevector {v} %m0, {v} poison, <{width} x i32> zeroinitializer",
           f"  %c0 = insertelement {v} poison, float %c, i64 0",
           f"  %cv = shufflevector {v} %c0, {v} poison, <{width} x i32> zeroinitializer",
           "  br label %loop",
           "loop:",
           "  %i = phi i64 [0, %entry], [%i.next, %loop]"]
    out += [f"  %a{k} = phi {v} [%cv, %entry], [%b{k}, %loop]" for k in range(chains)]
    out += [f"  %b{k} = call {v} {fma}({v} %a{k}, {v} %mv, {v} %cv)" for k in range(chains)]
    out += ["  %i.next = add i64 %i, 1",
            "  %done = icmp uge i64 %i.next, %n",
            "  br i1 %done, label %exit, label %loop",
            "exit:"]
    acc = "%b0"
    for k in range(1, chains):
        out.append(f"  %s{k} = fadd {v} {acc}, %b{k}")
        acc = f"%s{k}"
    out += [f"  %r = extractelement {v} {acc}, i64 0", "  ret float %r", "}"]
    return "\n".join(out)


def _fma_function():
    """The compiled loop as a ctypes function (fma_peak(n, m, c)); ctypes releases the GIL
    during the call, so several Python threads run it in parallel. The engine (which owns its
    TargetMachine) is kept for the life of the process."""
    if "fn" not in _fma:
        import llvmlite.binding as llvm
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        features = llvm.get_host_cpu_features().flatten()
        tm = llvm.Target.from_default_triple().create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=features, opt=3)
        width = fma_width(features)
        mod = llvm.parse_assembly(_fma_ir(width, FMA_CHAINS))
        mod.verify()
        engine = llvm.create_mcjit_compiler(mod, tm)
        engine.finalize_object()
        proto = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64, ctypes.c_float, ctypes.c_float)
        _fma["engine"] = engine
        _fma["fn"] = proto(engine.get_function_address("fma_peak"))
        _fma["cpu"] = llvm.get_host_cpu_name()
        _fma["width"] = width
    return _fma["fn"]


def fma_peak(threads: int, reps: int, seconds: float) -> float:
    """Best fp32 FLOP/s over ``reps`` runs of the FMA loop on ``threads`` threads at once, each
    run about ``seconds`` long."""
    fn = _fma_function()
    flops_per_iter = FMA_CHAINS * _fma["width"] * 2
    t0 = time.perf_counter()
    fn(200_000, 0.999, 1e-3)                      # calibrate on one thread
    per_iter = max((time.perf_counter() - t0) / 200_000, 1e-12)
    n = max(10_000, int(seconds / per_iter))
    best = 0.0
    for _ in range(reps):
        workers = [threading.Thread(target=fn, args=(n, 0.999, 1e-3)) for _ in range(threads)]
        t0 = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        best = max(best, threads * n * flops_per_iter / (time.perf_counter() - t0))
    return best


# ---------------------------------------------------------------------------------------------
# sgemm at 2048^3: numpy (the practical peak), torch and PyPTO side by side.

_SGEMM_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
from _harness import blas_info, blas_set_threads
n, reps, threads = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
blas_set_threads(threads)
a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
c = np.empty_like(a)
np.matmul(a, a, out=c)
best = float("inf")
for _ in range(reps):
    t0 = time.perf_counter(); np.matmul(a, a, out=c); best = min(best, time.perf_counter() - t0)
print(json.dumps({"seconds": best, "blas": blas_info()}))
"""


def sgemm_without_coretype(n: int, reps: int, threads: int):
    """(best seconds, BLAS description) of numpy's sgemm in a subprocess whose environment
    lacks OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE, so OpenBLAS picks its kernel itself; None
    on failure."""
    out = run_without_openblas_tuning(_SGEMM_CHILD, [n, reps, threads], threads)
    return None if out is None else (out["seconds"], out["blas"])


def sgemm(n: int, reps: int, torch) -> dict:
    """{library: best seconds} for an n^3 fp32 matmul, one library at a time."""
    from matmul import pypto_matmul
    rng = np.random.default_rng(2)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), np.float32)
    times = {"PyPTO": best_time(lambda: pypto_matmul(a, b, c), reps)}
    settle()
    times["numpy"] = best_time(lambda: np.matmul(a, b, out=c), reps)
    settle()
    if torch is not None:
        ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c)
        times["torch"] = best_time(lambda: torch.matmul(ta, tb, out=tc), reps)
        settle()
    return times


# ---------------------------------------------------------------------------------------------

def measure(args, patterns=tuple(PATTERNS), flops: bool = True) -> dict:
    """The machine's limits: {"bandwidth": {pattern: bytes/s}, "flops": FLOP/s or None,
    "rows": table rows, "lines": a description of each limit}. ``patterns`` and ``flops`` pick
    what to measure (a family script needs only its own limit)."""
    torch = import_torch()
    threads = default_threads()
    use_threads(threads, torch)
    n = (1 << 20) if args.quick else (32 << 20)
    limits = {"bandwidth": {}, "flops": None, "rows": [], "lines": []}
    if patterns:
        times = stream(n, args.reps, patterns, torch)
        for p in patterns:
            nbytes = PATTERNS[p] * n * 4
            t = times[p]
            best_lib = min(t, key=t.get)
            limits["bandwidth"][p] = nbytes / t[best_lib]
            by = ", ".join(f"{lib} {nbytes / s / 1e9:.1f}" for lib, s in t.items())
            limits["lines"].append(f"STREAM {p:<5} {nbytes / t[best_lib] / 1e9:6.1f} GB/s "
                                   f"(best of: {by} GB/s; {fmt_size(n)} fp32)")
            base = min(s for lib, s in t.items() if lib != "PyPTO")
            limits["rows"].append(make_row(
                f"STREAM {p}", f"{fmt_size(n)} fp32", t["PyPTO"], t["numpy"], t.get("torch"),
                ratio=speedup(base, t["PyPTO"]),
                limit_pct=pct_of(nbytes, t["PyPTO"], limits["bandwidth"][p]),
                work=nbytes, unit="GB/s", family="machine"))
        if args.quick:
            limits["lines"].append("(--quick: arrays of 4 MiB, which sit in the caches; not a "
                                   "memory bandwidth)")
    if flops:
        try:
            peak = fma_peak(threads, max(3, args.reps), 0.02 if args.quick else 0.2)
        except Exception as e:  # noqa: BLE001 - fall back on sgemm as the limit
            peak = None
            limits["lines"].append(f"fp32 FMA peak: not measured ({type(e).__name__}: {e})")
        else:
            limits["lines"].append(
                f"fp32 FMA peak  {peak / 1e9:6.1f} GFLOP/s ({FMA_CHAINS} chains of "
                f"<{_fma.get('width')} x float> llvm.fma per thread, {threads} threads, "
                f"LLVM cpu {_fma.get('cpu')})")
        m = 256 if args.quick else 2048
        t = sgemm(m, args.reps, torch)
        fl = 2.0 * m ** 3
        by = ", ".join(f"{lib} {fl / s / 1e9:.1f}" for lib, s in t.items())
        limits["lines"].append(f"sgemm {m}^3   {fl / t['numpy'] / 1e9:6.1f} GFLOP/s numpy "
                               f"(practical peak; {by} GFLOP/s); numpy's BLAS: {blas_info()}")
        practical = fl / t["numpy"]
        note = ""
        tuning = openblas_tuning_set()
        if tuning:
            other = sgemm_without_coretype(m, args.reps, threads)
            if other is not None:
                practical = max(practical, fl / other[0])
                note = (f"{tuning} set in the environment chooses numpy's BLAS kernel or "
                        f"blocking; without them, in a subprocess: "
                        f"{fl / other[0] / 1e9:.1f} GFLOP/s ({other[1]})")
            else:
                note = (f"{tuning} set in the environment chooses numpy's BLAS kernel or "
                        "blocking (the run without them failed)")
            limits["lines"].append("  " + note)
        limits["flops"] = peak if peak else practical
        base = min(s for lib, s in t.items() if lib != "PyPTO")
        limits["rows"].append(make_row(
            "sgemm fp32", f"{m}^3", t["PyPTO"], t["numpy"], t.get("torch"),
            ratio=speedup(base, t["PyPTO"]), limit_pct=pct_of(fl, t["PyPTO"], limits["flops"]),
            work=fl, unit="GFLOP/s", family="machine", note=note))
    return limits


def bandwidth(limits, pattern):
    """The measured bandwidth of ``pattern`` in bytes/s, or None."""
    return None if limits is None else limits["bandwidth"].get(pattern)


def flops(limits):
    """The measured fp32 compute limit in FLOP/s, or None."""
    return None if limits is None else limits["flops"]


def print_limits(limits) -> None:
    print("\nthe machine's limits, measured in this run (best of the repetitions):")
    for line in limits["lines"]:
        print("  " + line)


def run(args, limits=None) -> list[dict]:
    """The STREAM and sgemm rows (measuring the limits unless given)."""
    return (limits or measure(args))["rows"]


def main(argv=None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv)
    torch = import_torch()
    use_threads(default_threads(), torch)
    print_environment(torch)
    limits = measure(args)
    print_limits(limits)
    print_rows(limits["rows"], f"STREAM and sgemm, best of {args.reps} after a warm-up; "
                               "ratio: PyPTO against the faster of numpy and torch")
    print_load_during_run()


if __name__ == "__main__":
    main()
