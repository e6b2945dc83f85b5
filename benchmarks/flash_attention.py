"""Flash attention forward, fp16: PyPTO's one-kernel flash attention (tutorial 12) against
torch's scaled_dot_product_attention on the host CPU, with the kernel's modelled NPU time.

    python benchmarks/flash_attention.py [--reps N] [--quick]

out = softmax(Q K^T / sqrt(D)) V for (batch, heads, seq, D) fp16 arrays, causal and not. The
kernel keeps the online softmax's running max, sum and output in fp32 on chip, S = Q K^T and
P V on the cube; torch SDPA runs on the same thread count as PyPTO (fp16 in and out on the
CPU). Both are checked against an fp32 reference first. NPU: the cycle model's time for one
launch on ascend910b1 (modelled, not measured).

Then the board's case (issue 32): the same kernel at head 128, one head, S = 2k ... 32k
(--quick: 2k), causal and not, modelled on ascend910b1, its TFLOPS (4 S^2 D flops; causal
counts half) and the cube's and vector cores' busy share beside pto-isa's hand-written flash
attention on the 24-core 910B2 board (shared/reference/ascend910b.md: 32.5 us at 2k ...
3263 us at 32k, 66 ... 169 TFLOPS). Goal: >= 0.8 x the board's TFLOPS.
"""
from __future__ import annotations

import numpy as np
from pypto.backends.ascend.model.silicon import FA_BOARD
from _harness import (default_threads, fmt_time, import_torch, main_table, parse_args,
                      print_table, side_by_side, tutorial, use_threads)


def _tutorial():
    """Tutorial 12's module: the kernel, its launcher and its checks live there."""
    return tutorial("12_flash_attention.py")


def shapes(quick: bool):
    return [(1, 2, 100, 64)] if quick else [(4, 8, 1024, 64)]


def run(args) -> list:
    fa = _tutorial()
    torch = import_torch()
    use_threads(default_threads(), torch)
    rng = np.random.default_rng(0)
    rows = []
    for shape in shapes(args.quick):
        for causal in (False, True):
            q, k, v = fa.inputs(rng, *shape)
            out = np.empty_like(q)
            fa.check(fa.flash_attention(q, k, v, out, causal), q, k, v, causal, torch)
            fns = {"pypto": lambda: fa.flash_attention(q, k, v, out, causal), "torch": None}
            if torch is not None:
                tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
                sdpa = torch.nn.functional.scaled_dot_product_attention
                fns["torch"] = lambda: sdpa(tq, tk, tv, is_causal=causal)
            t = side_by_side(fns, args.reps, rounds=1 if args.quick else 3)
            npu = fa.modelled_npu_seconds(q, k, v, out, causal)
            rows.append([str(shape), str(causal), fmt_time(t["pypto"]), fmt_time(t["torch"]),
                         f"{t['torch'] / t['pypto']:.2f}x" if t["torch"] else "-",
                         fmt_time(npu)])
    return rows


HEADERS = ["shape (B, H, S, D)", "causal", "PyPTO host", "torch SDPA", "torch/PyPTO",
           "NPU (model)"]

# pto-isa flash_atten README, 910B2, head 128, S = 2k ... 32k (the range)
BOARD_US = {s: us for s, us in FA_BOARD.items() if s >= 2048}
BOARD_GOAL = 0.8


def board_rows(quick: bool) -> list:
    """Tutorial 12's kernel at the board's shapes, modelled, beside the board's TFLOPS."""
    fa = _tutorial()
    rows = []
    for s in (2048,) if quick else tuple(BOARD_US):
        board = 4 * s * s * 128 / BOARD_US[s] / 1e6
        for causal in (False, True):
            q = np.zeros((1, 1, s, 128), np.float16)
            m = fa.modelled_npu(q, q, q, np.empty_like(q), causal)
            flops = 4 * s * s * 128 / (2 if causal else 1)
            tflops = flops / m.time_ms / 1e9
            rows.append([f"(1, 1, {s}, 128)", str(causal), f"{m.time_ms * 1e3:,.1f}",
                         f"{tflops:.1f}", f"{board:.0f}", f"{tflops / board:.2f}",
                         f"{m.busy_share('M') * 100:.1f} / {m.busy_share('V') * 100:.1f}",
                         "yes" if tflops >= BOARD_GOAL * board else "NO"])
    return rows


BOARD_HEADERS = ["shape", "causal", "model us", "model TFLOPS", "board TFLOPS", "model/board",
                 "cube / vector busy %", f">= {BOARD_GOAL}x board"]


def main(argv=None) -> None:
    main_table(__doc__.splitlines()[0], run, HEADERS, lambda args: (
        f"flash attention fp16, median of {'1 round' if args.quick else '3 rounds'} of "
        f"{args.reps} after a warm-up each, both on {default_threads()} threads; "
        "NPU: cycle model, ascend910b1"), argv)
    print("\nthe board's case, modelled on ascend910b1, against pto-isa's flash attention on "
          "the 910B2 board (causal: half the flops)")
    print_table(BOARD_HEADERS, board_rows(parse_args(__doc__.splitlines()[0], argv).quick))


if __name__ == "__main__":
    main()
