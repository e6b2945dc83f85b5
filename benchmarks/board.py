"""pto-isa's hand-written board kernels written in PyPTO, modelled, beside the board's times.

    python benchmarks/board.py [--quick] [--reps N]

Each kernel is pto-isa's schedule (grid, tile sizes, loop order, buffering) written the way a
PyPTO user writes it, compiled, and run through the cycle model (``model_kernel``) on
``ascend910b2``, the board's chip (1.80 GHz, 24 AIC / 48 AIV); the table puts the model beside
the time pto-isa measured on a 24-core A3 / 910B2 board (shared/reference/ascend910b.md,
"Measured on silicon"), with the ratio model / board (1.00 = exact; issue 31 wants every ratio
within 0.75-1.25). The kernels also run on the host at a small size and are checked against
numpy, so the ports compute what they claim. --reps is accepted for the harness and unused
(nothing is timed on this machine). --quick models the small sizes only.

* GEMM fp16 -> fp32 (``kernels/manual/a2a3/gemm_performance``): a 4 x 6 grid of cube cores,
  each owning a (M/4) x (N/6) block of C walked in 128 x 256 tiles, K in steps of 64; b stored
  n x k (``b_trans``). As pto-isa's kernel, each (double-buffered) load brings 4 K steps to L1
  (128 x 256 of a, 256 x 256 of b: 512-byte rows) and each matmul takes a 64-wide slice,
  extracted into double-buffered L0A/L0B. Also the cube (M pipe) and TLOAD (MTE2) busy share
  of the cores' time against the board's TMATMUL and TLOAD ratios. "1 step/load" is the same
  kernel loading one K step (128-byte rows) per TLOAD, the obvious port: the board's figure is
  the schedule to beat, not that kernel's time.
* GEMM / flash attn / top-k pto-isa .pto: pto-isa's kernels instruction for
  instruction, built as PTO programs (``ptoisa_programs.py``) and modelled with
  ``model_launch``: the model held against the board on the board's own instruction stream,
  apart from what PyPTO emits (for flash attention: both AIVs, 4 QK tiles in flight, FIFOs
  through GM, TROWEXPANDSUB/MUL).
* Flash attention fp16, head 128, S0 = S1 = S (``kernels/manual/common/flash_atten``, the
  910B2 table): one program per 64 or 128 query rows (both shown: fewer blocks against fewer
  waves of them on the 24 cores, which wins depends on S), keys in blocks of 256, online
  softmax, S and P handed between cube and vector through global memory (tutorial 12's kernel
  without a mask). pto-isa's blocks are 128 query rows per cluster on its two vector cores,
  and it keeps 4 QK tiles in flight; a PyPTO mixed kernel's block is one AIC and both
  AIVs (half the rows each, pto/passes/split_rows.py, the UB planned for that half,
  compiler/passes/half_rows.py), each core running one iteration ahead of the other
  (pto/passes/run_ahead.py).
* Top-k fp32, k = 1000 of 1024 columns (of 1280), 48 vector cores (``kernels/manual/a2a3/
  topk``): each core takes rows / 48 rows, two at a time, double-buffered; ``pl.topk`` is the
  chip's TSORT32 / TMRGSORT / TGATHER as pto-isa's kernel uses them.
"""
from __future__ import annotations

import math
import time

import numpy as np
from _harness import main_table

import pypto
import pypto.language as pl
from pypto.backends.ascend.model.launch import model_kernel, model_launch
from pypto.backends.ascend.model.silicon import BOARD_TARGET, FA_BOARD, GEMM_BOARD, TOPK_BOARD
from ptoisa_programs import fa_program, gemm_program, topk_program
from ptoisa_programs import fa_args as fa_program_args
from ptoisa_programs import gemm_args as gemm_program_args
from ptoisa_programs import topk_args as topk_program_args

TARGET = BOARD_TARGET    # the board's chip: 24 AIC / 48 AIV at 1.80 GHz
# The board's figures: pypto/backends/ascend/model/silicon.py (GEMM_BOARD, FA_BOARD, TOPK_BOARD)

QUICK = {"gemm": (1536, 3072), "fa": (1024, 2048, 4096), "topk": (2304,)}


# -- GEMM --------------------------------------------------------------------------------------

GM_GRID = (4, 6)                 # 24 cube cores: 4 along M, 6 along N
BASE_M, BASE_N, BASE_K = 128, 256, 64
GEMM_STEPS = 4                   # K steps per TLOAD (pto-isa: 128 x 256 and 256 x 256 tiles)


@pypto.jit(target=TARGET)
def gemm_kernel(a, b, c, SM: pl.constexpr, SN: pl.constexpr, K: pl.constexpr,
                BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr, STEPS: pl.constexpr):
    """C = A @ B^T with b stored (N, K): program (pm, pn) owns C[pm*SM:, pn*SN:] and walks it
    in BM x BN tiles (M outer, N inner, as pto-isa's mLoop / nLoop); each load brings STEPS
    K steps of BK to L1 and each matmul takes its slice (TEXTRACT into L0A/L0B)."""
    m0 = pl.program_id(0) * SM
    n0 = pl.program_id(1) * SN
    for i in range(0, SM, BM):
        for j in range(0, SN, BN):
            acc = pl.zeros((BM, BN), dtype=pl.float32)
            for k in pl.range(0, K, BK * STEPS, num_stages=2):
                ta = pl.load(a, offsets=(m0 + i, k), shape=(BM, BK * STEPS), padding=None)
                tb = pl.load(b, offsets=(n0 + j, k), shape=(BN, BK * STEPS), padding=None)
                for s in pl.static_range(STEPS):
                    acc = pl.matmul(ta[:, s * BK:(s + 1) * BK], tb[:, s * BK:(s + 1) * BK],
                                    acc=acc, b_trans=True)
            pl.store(c, offsets=(m0 + i, n0 + j), value=acc)


def gemm_args(m, n, k, steps=GEMM_STEPS):
    a = np.zeros((m, k), np.float16)
    b = np.zeros((n, k), np.float16)
    c = np.zeros((m, n), np.float32)
    meta = dict(SM=m // GM_GRID[0], SN=n // GM_GRID[1], K=k, BM=BASE_M, BN=BASE_N, BK=BASE_K,
                STEPS=steps)
    return (a, b, c), meta


def gemm_check(rng) -> None:
    m, n, k = GM_GRID[0] * BASE_M, GM_GRID[1] * BASE_N, 4 * BASE_K
    (a, b, c), meta = gemm_args(m, n, k)
    a[:] = rng.standard_normal(a.shape)
    b[:] = rng.standard_normal(b.shape)
    gemm_kernel[GM_GRID](a, b, c, **meta)
    want = a.astype(np.float32) @ b.astype(np.float32).T
    np.testing.assert_allclose(c, want, rtol=1e-3, atol=1e-2, err_msg="board GEMM port")


# -- flash attention ---------------------------------------------------------------------------

FA_HEAD, FA_BN = 128, 256
FA_BMS = (64, 128)         # query rows per block: fewer blocks or fewer waves, by S


@pypto.jit(target=TARGET)
def fa_kernel(q, k, v, out, sm_scale, S: pl.constexpr, BM: pl.constexpr, BN: pl.constexpr,
              D: pl.constexpr):
    """One head, no mask: program p owns query rows p*BM ... and walks the keys in blocks of
    BN with the online softmax (tutorial 12)."""
    m0 = pl.program_id(0) * BM
    tq = pl.load(q, offsets=(m0, 0), shape=(BM, D), padding=None)
    m = pl.full((BM, 1), float("-inf"), dtype=pl.float32)
    l = pl.zeros((BM, 1), dtype=pl.float32)
    o = pl.zeros((BM, D), dtype=pl.float32)
    for n0 in pl.range(0, S, BN):
        tk = pl.load(k, offsets=(n0, 0), shape=(BN, D), padding=None)
        tv = pl.load(v, offsets=(n0, 0), shape=(BN, D), padding=None)
        s = pl.matmul(tq, tk, b_trans=True) * sm_scale
        m_new = pl.maximum(m, pl.max(s, axis=1, keepdims=True))
        p = pl.exp(s - m_new)
        alpha = pl.exp(m - m_new)
        l = l * alpha + pl.sum(p, axis=1, keepdims=True)
        o = o * alpha + pl.matmul(p.to(pl.float16), tv)
        m = m_new
    pl.store(out, offsets=(m0, 0), value=(o / l).to(pl.float16))


def fa_args(s, bm=FA_BMS[0]):
    q, k, v, out = (np.zeros((s, FA_HEAD), np.float16) for _ in range(4))
    return (s // bm,), (q, k, v, out, 1.0 / math.sqrt(FA_HEAD)), dict(
        S=s, BM=bm, BN=FA_BN, D=FA_HEAD)


def fa_check(rng) -> None:
    grid, (q, k, v, out, scale), meta = fa_args(256)
    for x in (q, k, v):
        x[:] = rng.standard_normal(x.shape) * 0.5
    fa_kernel[grid](q, k, v, out, scale, **meta)
    s = q.astype(np.float32) @ k.astype(np.float32).T * scale
    p = np.exp(s - s.max(axis=1, keepdims=True))
    want = (p / p.sum(axis=1, keepdims=True)) @ v.astype(np.float32)
    np.testing.assert_allclose(out.astype(np.float32), want, atol=2e-2,
                               err_msg="board flash-attention port")


# -- top-k -------------------------------------------------------------------------------------

TOPK_CORES, TOPK_ROWS, TOPK_COLS, TOPK_WHOLE, TOPK_K = 48, 2, 1024, 1280, 1000


@pypto.jit(target=TARGET)
def topk_kernel(x, values, indices, ROWS_PER: pl.constexpr, R: pl.constexpr, N: pl.constexpr,
                K: pl.constexpr):
    """Program p takes rows p*ROWS_PER ... R at a time: the K largest of each row's first N
    columns, largest first, with their positions."""
    first = pl.program_id(0) * ROWS_PER
    for r in pl.range(first, first + ROWS_PER, R, num_stages=2):
        t = pl.load(x, offsets=(r, 0), shape=(R, N), padding=None)
        val, idx = pl.topk(t, K)
        pl.store(values, offsets=(r, 0), value=val)
        pl.store(indices, offsets=(r, 0), value=idx)


def topk_args(rows, k=TOPK_K):
    x = np.zeros((rows, TOPK_WHOLE), np.float32)
    values = np.zeros((rows, k), np.float32)
    indices = np.zeros((rows, k), np.int32)
    return (x, values, indices), dict(ROWS_PER=rows // TOPK_CORES, R=TOPK_ROWS, N=TOPK_COLS,
                                      K=k)


def topk_check(rng) -> None:
    (x, values, indices), meta = topk_args(TOPK_CORES * 2 * TOPK_ROWS, k=16)
    x[:] = rng.standard_normal(x.shape)
    topk_kernel[(TOPK_CORES,)](x, values, indices, **meta)
    order = np.argsort(-x[:, :TOPK_COLS], axis=1, kind="stable")[:, :16]
    np.testing.assert_array_equal(indices, order, err_msg="board top-k port indices")
    np.testing.assert_array_equal(values, np.take_along_axis(x, order, axis=1))


# -- the table ---------------------------------------------------------------------------------

def cases(quick: bool):
    """(kernel, size, board us, board busy or None, thunk -> LaunchModel)."""
    out = []
    for n in QUICK["gemm"] if quick else GEMM_BOARD:
        args, meta = gemm_args(n, n, n)
        ms, cube, tload = GEMM_BOARD[n]
        out.append(("GEMM fp16", f"{n}^3", ms * 1e3, (cube, tload),
                    lambda args=args, meta=meta: model_kernel(gemm_kernel, GM_GRID, *args,
                                                              **meta)))
    for n in QUICK["gemm"] if quick else GEMM_BOARD:
        args, meta = gemm_args(n, n, n, steps=1)
        ms, cube, tload = GEMM_BOARD[n]
        out.append(("GEMM fp16 1 step/load", f"{n}^3", ms * 1e3, (cube, tload),
                    lambda args=args, meta=meta: model_kernel(gemm_kernel, GM_GRID, *args,
                                                              **meta)))
    for n in QUICK["gemm"] if quick else GEMM_BOARD:
        ms, cube, tload = GEMM_BOARD[n]
        out.append(("GEMM pto-isa .pto", f"{n}^3", ms * 1e3, (cube, tload),
                    lambda n=n: model_launch(gemm_program(n, n, n, GM_GRID),
                                             GM_GRID, gemm_program_args(n, n, n))))
    for s in QUICK["fa"] if quick else FA_BOARD:
        for bm in FA_BMS:
            grid, args, meta = fa_args(s, bm)
            out.append((f"flash attn h128 {bm}x{FA_BN}", f"S={s // 1024}k", FA_BOARD[s], None,
                        lambda grid=grid, args=args, meta=meta: model_kernel(
                            fa_kernel, grid, *args, **meta)))
    for s in QUICK["fa"] if quick else FA_BOARD:
        out.append(("flash attn pto-isa .pto", f"S={s // 1024}k", FA_BOARD[s], None,
                    lambda s=s: model_launch(fa_program(s), (s // 128,), fa_program_args(s))))
    for rows in QUICK["topk"] if quick else TOPK_BOARD:
        args, meta = topk_args(rows)
        out.append(("top-k fp32 k=1000", f"{rows}x1024", TOPK_BOARD[rows], None,
                    lambda args=args, meta=meta: model_kernel(topk_kernel, (TOPK_CORES,),
                                                              *args, **meta)))
    for rows in QUICK["topk"] if quick else TOPK_BOARD:
        out.append(("top-k pto-isa .pto", f"{rows}x1024", TOPK_BOARD[rows], None,
                    lambda rows=rows: model_launch(topk_program(rows), (TOPK_CORES,),
                                                   topk_program_args(rows))))
    return out


def run(args) -> list:
    rng = np.random.default_rng(0)
    for check in (gemm_check, fa_check, topk_check):
        check(rng)
    print("host runs of the three ports at small sizes: match numpy")
    rows = []
    for kernel, size, board_us, busy, model_fn in cases(args.quick):
        t0 = time.perf_counter()
        model = model_fn()
        took = time.perf_counter() - t0
        us = model.time_ms * 1e3
        row = [kernel, size, f"{board_us:,.1f} us", f"{us:,.1f} us", f"{us / board_us:.2f}"]
        if busy:
            cube, tload = model.busy_share("M") * 100, model.busy_share("MTE2") * 100
            row += [f"{cube:.1f} / {busy[0]:.1f}", f"{tload:.1f} / {busy[1]:.1f}"]
        else:
            row += ["-", "-"]
        rows.append(row + [f"{took:.1f} s"])
    return rows


HEADERS = ["kernel", "size", "board", "model", "model/board", "cube % model/board",
           "TLOAD % model/board", "modelled in"]


def main(argv=None) -> None:
    main_table(__doc__.splitlines()[0], run, HEADERS, lambda args: (
        f"pto-isa's board kernels: the cycle model on {TARGET} (modelled) against the A3 / "
        f"910B2 board (measured){'; --quick: small sizes only' if args.quick else ''}"), argv)


if __name__ == "__main__":
    main()
