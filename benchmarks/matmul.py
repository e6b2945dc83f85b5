"""Matrix multiply: PyPTO's cube kernel against numpy (OpenBLAS) and torch on the host CPU.

    python benchmarks/matmul.py [--reps N] [--quick]

Cases: fp32 x fp32 -> fp32 at 256^3, 512^3, 1024^3, 2048^3, and fp16 x fp16 -> fp32 (fp32
accumulate) at 512^3, 1024^3 and 2048^3; batched, 8 x 512^3 of each (pl.matmul of rank-3
tiles, 2 planes per block; numpy's and torch's batched matmul). GFLOP/s counts 2*M*N*K flops.

Baselines:
  numpy  fp32 GEMM through its BLAS (OpenBLAS in the PyPI wheels), run in a subprocess whose
         environment lacks OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (OpenBLAS reads them once,
         when it loads), so it uses its own kernel and blocking for this CPU; the footnote names
         the kernel. numpy has no fp16 GEMM (its fp16 matmul is a slow generic loop), so for
         the fp16 rows the baseline is the fp32 GEMM on fp32 copies of the inputs, made before
         timing: what a numpy user would do.
  torch  torch.matmul with the same dtypes. torch's CPU fp16 @ fp16 has no fast kernel (a few
         GFLOP/s, about 2 s at 1024^3), so it is timed once, without warm-up, and only up to
         1024^3.

Goals (printed, not asserted): at 1024^3, 2048^3 and batched 8 x 512^3, fp32 >= 0.75x numpy's
GFLOP/s and fp16 in / fp32 accumulate >= 0.75x numpy's fp32 GFLOP/s (as fast per flop); fp16
1024^3 >= 50x torch's fp16. % limit: of the fp32 FMA peak measured in the same run
(machine.py).

Modelled NPU (printed after the host table): the plain kernel a user writes for the chip
(``npu_gemm_kernel``: one program per 128 x 256 output tile, ``pl.range(..., num_stages=2)``
over K in steps of 64, fp16 or bf16 in, fp32 out) at 3072^3 and 6144^3 (--quick: 3072^3),
modelled on ascend910b1 by the calibrated cycle model (docs/cycle_model.md), beside pto-isa's
hand-written GEMM on the 24-core A3 / 910B2 board (shared/reference/ascend910b.md: 206.7 us
and 1.506 ms, 281 and 308 TFLOPS; cube and TLOAD busy 79.0 / 90.9 % and 86.7 / 95.2 %). Goal
(issue 32): >= 0.8 x the board's TFLOPS. Then the same kernel with a fused epilogue (+ bias
row, ReLU or GELU, cast to the inputs' dtype: ``npu_gemm_epilogue_kernel``) against the plain
one; goal: at most 10 % more.

Each library is measured for every case before the next one starts, with a pause in between,
so only one thread pool is busy at a time; all three use PyPTO's thread count (torch through
torch.set_num_threads, numpy's OpenBLAS through OPENBLAS_NUM_THREADS and threadpoolctl or
openblas_set_num_threads).

Tile sizes are fixed choices, from a sweep on this 2-core Zen host (LLVM cpu znver1) with the
6 x 16 micro-kernel of lowering/cube.py: one thread, GFLOP/s of CPU time (the machine was shared
with other jobs; CPU time is what stays comparable), numpy's OpenBLAS 43-45 on the same core:
  fp32 1024^3: BMxBNxBK 128x64x64 34.0, 128x128x64 35.7, 128x256x32 35.4, 128x256x64 35.6-37.4,
        128x128x128 35.8-37.8, 256x128x64 37.3-37.8  ->  256x128x64 (2048^3: 36.2-37.0)
  fp16 1024^3: 128x256x64 38.1, 256x128x64 38.5, 128x128x128 39.2, 128x256x128 38.9,
        256x128x128 40.9  ->  256x128x128 (2048^3: 38.7)
The same tiles on a 2-core Zen 5 (LLVM cpu znver5, AVX-512) with the 12 x 32 micro-kernel, 2
threads, wall time: fp32 2048^3 256x128x64 298, 128x256x64 307, 128x128x128 284, 64x256x64 287
GFLOP/s (within this VM's noise of one another, so the tiles stayed); batched fp32 8 x 512^3
2x128x128x64 196, 1x256x128x64 195, 1x128x256x64 211, 2x128x128x128 152, 4x64x128x64 134.
Time the host threads spend waiting is CPU time too, so CPU time stopped being comparable
once one block ran much faster than another: sweep on wall time, on a quiet machine.
The big tiles copy less per flop (the copies around the cube, GM -> L1 -> L0A/L0B, move
BM*BK + BK*BN elements for BM*BN*BK multiply-adds) and fill L0C's 128 KiB; fp16 operand tiles
are half the bytes, so fp16 affords BK = 128 in the 64 KiB L0A. The kernel starts the
accumulator with the first K step's matmul: a zero-filled accumulator would need a zeroing
matmul whose operands do not fit in L0A beside the 64 KiB A tile.
"""
from __future__ import annotations

import json

import ml_dtypes
import numpy as np
from _harness import (
    OPENBLAS_TUNING_VARIABLES,
    TorchBaseline,
    at_least,
    default_threads,
    import_torch,
    main_for,
    make_row,
    median_time,
    parse_args,
    pct_of,
    print_table,
    run_without_openblas_tuning,
    settle,
    speedup,
    use_threads,
)

import pypto
import pypto.language as pl

TILES = {"float32": (256, 128, 64), "float16": (256, 128, 128)}   # BM, BN, BK
# batched: BB planes of BM x BN per block (rank-3 tiles, unrolled into planes by the compiler):
# fp32 2 x (128 x 64) A planes fill L0A's 64 KiB, 2 x (64 x 128) B planes L0B's, 2 x (128 x 128)
# accumulators L0C's 128 KiB; fp16 operands are half the bytes, so K steps are twice as long
BATCHED_TILES = {"float32": (2, 128, 128, 64), "float16": (2, 128, 128, 128)}
GOAL_SIZES = (1024, 2048)
GOAL_RATIO = 0.75           # of numpy's fp32 GFLOP/s, for fp32 and fp16 -> fp32 alike
GOAL_TEXT = {"float32": ">= 0.75x numpy", "float16": ">= 0.75x numpy fp32"}
TORCH_FP16_MAX = 1024       # torch's fp16 CPU matmul takes ~2 s at 1024^3, ~16 s at 2048^3


@pypto.jit
def matmul_kernel(a, b, c, M, N, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    pm = pl.program_id(0)
    pn = pl.program_id(1)
    # The first K step starts the accumulator (see the docstring: 64 KiB B tiles fit).
    acc = pl.matmul(pl.load(a, offsets=(pm * BM, 0), shape=(BM, BK)),
                    pl.load(b, offsets=(0, pn * BN), shape=(BK, BN)))
    for k in range(BK, K, BK):
        ta = pl.load(a, offsets=(pm * BM, k), shape=(BM, BK))
        tb = pl.load(b, offsets=(k, pn * BN), shape=(BK, BN))
        acc = pl.matmul(ta, tb, acc=acc)
    pl.store(c, offsets=(pm * BM, pn * BN), value=acc.to(c.dtype))


@pypto.jit
def batched_matmul_kernel(a, b, c, K, BB: pl.constexpr, BM: pl.constexpr, BN: pl.constexpr,
                          BK: pl.constexpr):
    """c[i] = a[i] @ b[i] for BB matrices per block: pl.matmul of rank-3 tiles."""
    pb, pm, pn = pl.program_id(0), pl.program_id(1), pl.program_id(2)
    acc = pl.matmul(pl.load(a, offsets=(pb * BB, pm * BM, 0), shape=(BB, BM, BK)),
                    pl.load(b, offsets=(pb * BB, 0, pn * BN), shape=(BB, BK, BN)))
    for k in range(BK, K, BK):
        ta = pl.load(a, offsets=(pb * BB, pm * BM, k), shape=(BB, BM, BK))
        tb = pl.load(b, offsets=(pb * BB, k, pn * BN), shape=(BB, BK, BN))
        acc = pl.matmul(ta, tb, acc=acc)
    pl.store(c, offsets=(pb * BB, pm * BM, pn * BN), value=acc.to(c.dtype))


@pypto.jit(target="ascend910b1")
def npu_gemm_kernel(a, b, c, M, N, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    pm = pl.program_id(0)
    pn = pl.program_id(1)
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in pl.range(0, K, BK, num_stages=2):
        acc = pl.matmul(pl.load(a, offsets=(pm * BM, k), shape=(BM, BK)),
                        pl.load(b, offsets=(k, pn * BN), shape=(BK, BN)), acc=acc)
    pl.store(c, offsets=(pm * BM, pn * BN), value=acc)


@pypto.jit(target="ascend910b1")
def npu_gemm_epilogue_kernel(a, b, bias, c, M, N, K, BM: pl.constexpr, BN: pl.constexpr,
                             BK: pl.constexpr, ACT: pl.constexpr):
    """The plain kernel with an epilogue after the K loop: + bias row, ReLU, GELU or SiLU,
    cast to c's dtype (bias, ReLU and cast stay on the cube: tmatmul.bias and the FIX pipe's
    store; GELU and SiLU are vector work, through GM, in row chunks at 128 x 256, overlapped
    with the next program's K loop in the persistent form)."""
    pm = pl.program_id(0)
    pn = pl.program_id(1)
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in pl.range(0, K, BK, num_stages=2):
        acc = pl.matmul(pl.load(a, offsets=(pm * BM, k), shape=(BM, BK)),
                        pl.load(b, offsets=(k, pn * BN), shape=(BK, BN)), acc=acc)
    acc = acc + pl.load(bias, offsets=(0, pn * BN), shape=(1, BN))
    acc = pl.relu(acc) if ACT == "relu" else (
        pl.gelu(acc) if ACT == "gelu" else acc * pl.sigmoid(acc))        # SiLU
    pl.store(c, offsets=(pm * BM, pn * BN), value=acc.to(c.dtype))


BF16 = np.dtype(ml_dtypes.bfloat16)
NPU_TILE = (128, 256, 64)
NPU_BOARD = {3072: (206.7, 79.0, 90.9), 6144: (1506.0, 86.7, 95.2)}   # us, cube %, TLOAD %
NPU_GOAL = 0.8


def npu_rows(quick: bool) -> list:
    """The modelled NPU table: the plain GEMM per size and dtype beside the board, and the
    GEMM with a bias + ReLU + fp16 epilogue beside the plain one (``epilogue_rows``)."""
    from pypto.backends.ascend.model.launch import model_kernel
    rows, epilogue = [], []
    bm, bn, bk = NPU_TILE
    for n in (3072,) if quick else tuple(NPU_BOARD):
        board_us, board_cube, board_tload = NPU_BOARD[n]
        board_tflops = 2 * n ** 3 / board_us / 1e6
        grid = (n // bm, n // bn)
        for dtype in (np.float16, BF16):
            a, b = np.zeros((n, n), dtype), np.zeros((n, n), dtype)
            c = np.zeros((n, n), np.float32)
            model = model_kernel(npu_gemm_kernel, grid, a, b, c, n, n, n, BM=bm, BN=bn, BK=bk)
            tflops = 2 * n ** 3 / model.time_ms / 1e9
            ratio = tflops / board_tflops
            rows.append([f"GEMM {np.dtype(dtype).name}", f"{n}^3", f"{model.time_ms * 1e3:,.1f}",
                         f"{tflops:.0f}", f"{board_tflops:.0f}", f"{ratio:.2f}",
                         f"{model.busy_share('M') * 100:.1f} / {board_cube}",
                         f"{model.busy_share('MTE2') * 100:.1f} / {board_tload}",
                         "yes" if ratio >= NPU_GOAL else "NO"])
            acts = ("relu", "gelu", "silu") if dtype == np.float16 else ("relu",)
            if quick:        # each row is a whole compile and model: the fp16 ReLU one only
                acts = acts[:1] if dtype == np.float16 else ()
            for act in acts:
                fused = model_kernel(npu_gemm_epilogue_kernel, grid, a, b,
                                     np.zeros((1, n), np.float32), np.zeros((n, n), dtype),
                                     n, n, n, BM=bm, BN=bn, BK=bk, ACT=act)
                extra = fused.time_ms / model.time_ms - 1
                epilogue.append([f"GEMM {np.dtype(dtype).name} + bias, {act} -> "
                                 f"{np.dtype(dtype).name}", f"{n}^3",
                                 f"{fused.time_ms * 1e3:,.1f}", f"{model.time_ms * 1e3:,.1f}",
                                 f"{extra * 100:+.1f} %",
                                 "yes" if extra <= EPILOGUE_GOAL else "NO"])
    return rows, epilogue


EPILOGUE_GOAL = 0.10          # issue 32: a fused epilogue costs at most 10 % more
EPILOGUE_HEADERS = ["kernel", "size", "model us", "plain GEMM us", "extra",
                    f"<= {EPILOGUE_GOAL:.0%} extra"]


NPU_HEADERS = ["kernel", "size", "model us", "model TFLOPS", "board TFLOPS", "model/board",
               "cube % model/board", "TLOAD % model/board", f">= {NPU_GOAL}x board"]


def pypto_matmul(a, b, c):
    if a.ndim == 3:
        (G, M, K), N = a.shape, b.shape[2]
        BB, BM, BN, BK = BATCHED_TILES[a.dtype.name]
        grid = (pl.cdiv(G, BB), pl.cdiv(M, BM), pl.cdiv(N, BN))
        batched_matmul_kernel[grid](a, b, c, K, BB=BB, BM=BM, BN=BN, BK=BK)
        return
    (M, K), N = a.shape, b.shape[1]
    BM, BN, BK = TILES[a.dtype.name]
    matmul_kernel[(pl.cdiv(M, BM), pl.cdiv(N, BN))](a, b, c, M, N, K, BM=BM, BN=BN, BK=BK)


def check(a, b, c) -> None:
    """|C - A@B| <= (K+1) u (|A| @ |B|) elementwise, u = 2^-24: the worst-case bound of any
    fp32 summation order (inputs are exact in fp32, the accumulator is fp32)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = (a.shape[-1] + 1) * 2.0 ** -24 * (np.abs(a64) @ np.abs(b64))
    err = np.abs(c.astype(np.float64) - a64 @ b64)
    assert np.all(err <= bound), f"PyPTO matmul {a.dtype} {a.shape}: max error {err.max()}"


def cases(quick: bool):
    """(dtype, n, batch): batch > 1 multiplies that many n x n pairs (the same flops as one
    GEMM of (batch^(1/3) n)^3: 8 x 512^3 is 1024^3's)."""
    if quick:
        return [("float32", 128, 1), ("float16", 128, 1), ("float32", 128, 2)]
    return [("float32", 256, 1), ("float32", 512, 1), ("float32", 1024, 1), ("float32", 2048, 1),
            ("float16", 512, 1), ("float16", 1024, 1), ("float16", 2048, 1),
            ("float32", 512, 8), ("float16", 512, 8)]


def _shape(n: int, batch: int) -> tuple:
    return (batch, n, n) if batch > 1 else (n, n)


def inputs(case_list):
    """(a, b) per case: standard normal fp32 values, rounded to the case's dtype."""
    rng = np.random.default_rng(0)
    return [tuple(rng.standard_normal(_shape(n, batch), dtype=np.float32).astype(dtype)
                  for _ in range(2)) for dtype, n, batch in case_list]


# numpy's side, in a subprocess without OpenBLAS's tuning variables: the same inputs (the
# fp16 ones as fp32 copies, made before timing) and the median of reps after a warm-up.
_NUMPY_CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
from _harness import blas_info, blas_set_threads, median_time, settle
spec = json.loads(sys.argv[2])
blas_set_threads(spec["threads"])
rng = np.random.default_rng(0)
seconds = []
for dtype, n, batch in spec["cases"]:
    shape = (batch, n, n) if batch > 1 else (n, n)
    a, b = (rng.standard_normal(shape, dtype=np.float32).astype(dtype).astype(np.float32)
            for _ in range(2))
    c = np.empty(shape, np.float32)
    seconds.append(median_time(lambda: np.matmul(a, b, out=c), spec["reps"]))
    settle(spec["settle"])
print(json.dumps({"seconds": seconds, "blas": blas_info()}))
"""


def numpy_times(case_list, reps: int):
    """{"seconds": per case, "blas": which BLAS and kernel ran} of numpy's fp32 GEMM with
    OpenBLAS choosing its own kernel for this CPU, on PyPTO's thread count; None on failure."""
    import _harness
    threads = default_threads()
    spec = {"cases": list(case_list), "reps": reps, "threads": threads,
            "settle": _harness._settle_seconds}
    return run_without_openblas_tuning(_NUMPY_CHILD, [json.dumps(spec)], threads)


def run(args, limits=None) -> list[dict]:
    """One row per case (two for fp16 1024^3, one per goal); ``limits`` from machine.measure()
    fills the % limit column."""
    from machine import flops as flops_limit
    torch = import_torch()
    use_threads(default_threads(), torch)
    data = [(dtype, n, batch, a, b, np.empty(_shape(n, batch), np.float32))
            for (dtype, n, batch), (a, b) in zip(cases(args.quick), inputs(cases(args.quick)))]

    # Phase 1: PyPTO, checked first.
    t_pypto = []
    for *_, a, b, c in data:
        pypto_matmul(a, b, c)
        check(a, b, c)
        settle()    # check() ran BLAS: let its spinning worker threads go idle first
        t_pypto.append(median_time(lambda: pypto_matmul(a, b, c), args.reps))
    settle()

    # Phase 2: numpy, fp32 GEMM (fp16 inputs upcast before timing), in a subprocess.
    numpy_run = numpy_times(cases(args.quick), args.reps)
    t_numpy = numpy_run["seconds"] if numpy_run else [None] * len(data)
    settle()

    # Phase 3: torch with the inputs' own dtype.
    t_torch = [None] * len(data)
    if torch is not None:
        base = TorchBaseline(torch)
        for i, (dtype, n, _, a, b, _) in enumerate(data):
            ta, tb = base.tensor(a), base.tensor(b)
            if dtype == "float16" and not base.npu:
                if n > TORCH_FP16_MAX:
                    continue
                t_torch[i] = median_time(lambda: torch.matmul(ta, tb), 1, warmup=0)
            elif dtype == "float16":
                t_torch[i] = median_time(base.timed(lambda: torch.matmul(ta, tb)), args.reps)
            else:
                tc = base.empty(a.shape[:-1] + b.shape[-1:], torch.float32)
                t_torch[i] = median_time(base.timed(lambda: torch.matmul(ta, tb, out=tc)),
                                         args.reps)
        settle()

    blas = (f"numpy's BLAS: {numpy_run['blas']}, in a subprocess without "
            f"{' and '.join(OPENBLAS_TUNING_VARIABLES)}: OpenBLAS's own choice for this CPU"
            if numpy_run else "numpy's BLAS: the subprocess failed, no numpy times")
    on_npu = torch is not None and TorchBaseline(torch).npu
    return goal_rows(data, t_pypto, t_numpy, t_torch, flops_limit(limits), blas, on_npu)


def quick_case(n: int) -> bool:
    """The --quick sizes carry no goal (too small to say anything about speed)."""
    return n <= 128


def goal_rows(data, t_pypto, t_numpy, t_torch, limit, blas: str, on_npu: bool) -> list[dict]:
    """The table rows: one per case, plus the torch goal's row for fp16 at 1024^3; the
    footnotes (on the first row of each dtype) name numpy's BLAS kernel and the fp16
    baselines."""
    rows = []
    notes = {"float32": blas, "float16": (
        "matmul fp16->fp32: numpy runs the fp32 GEMM on fp32 copies (it has no fp16 GEMM); "
        "torch runs fp16 @ fp16" + (" on the NPU" if on_npu else ", one rep without warm-up "
                                    f"(it has no fast CPU kernel for it), up to "
                                    f"{TORCH_FP16_MAX}^3"))}
    for (dtype, n, batch, *_), tp, tn, tt in zip(data, t_pypto, t_numpy, t_torch):
        fl = 2.0 * batch * n ** 3
        common = dict(limit_pct=pct_of(fl, tp, limit), work=fl, unit="GFLOP/s",
                      family="matmul")
        kernel = "matmul fp32" if dtype == "float32" else "matmul fp16->fp32"
        size = f"{n}^3" if batch == 1 else f"{batch}x{n}^3"
        if batch > 1:
            kernel = "batched " + kernel
        goal = n in GOAL_SIZES or (batch > 1 and not quick_case(n))
        ratio = speedup(tn, tp)
        note = notes.pop(dtype, "")
        rows.append(make_row(kernel, size, tp, tn, tt, ratio=ratio,
                             goal=GOAL_TEXT[dtype] if goal else "",
                             met=at_least(ratio, GOAL_RATIO) if goal else None,
                             note=note, **common))
        if dtype == "float16" and n == GOAL_SIZES[0] and batch == 1:
            ratio = speedup(tt, tp)
            rows.append(make_row(kernel, f"{n}^3", tp, tn, tt, ratio=ratio,
                                 goal=">= 50x torch fp16", met=at_least(ratio, 50.0), **common))
    return rows


def main(argv=None) -> None:
    main_for(__doc__.splitlines()[0], run, lambda args: (
        f"matmul, median of {args.reps} after a warm-up; tiles BMxBNxBK: "
        + ", ".join(f"{d} {'x'.join(map(str, t))}" for d, t in TILES.items())
        + "; % limit: of the fp32 FMA peak"),
             patterns=(), flops=True, argv=argv)
    print(f"\nmodelled NPU time (ascend910b1, tiles {'x'.join(map(str, NPU_TILE))}, one program "
          "per tile, run in the persistent launch form) against pto-isa's hand-written GEMM on "
          "the board")
    plain, fused = npu_rows(parse_args(__doc__.splitlines()[0], argv).quick)
    print_table(NPU_HEADERS, plain)
    print("\nmodelled NPU time of the same GEMM with a fused epilogue (bias row, ReLU, cast) "
          "against the plain GEMM's")
    print_table(EPILOGUE_HEADERS, fused)


if __name__ == "__main__":
    main()
