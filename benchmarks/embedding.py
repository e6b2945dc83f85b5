"""Embedding lookup (a whole-row gather): PyPTO against numpy and torch on the host CPU, with
the kernel's modelled NPU time against the HBM floor.

    python benchmarks/embedding.py [--reps N] [--quick]

out = table[ids]: a (tokens, D) fp16 tile of rows picked by an int32 index vector, written
``pl.gather(table, ids_tile, axis=0, offsets=(0, c0), shape=(R, BN))`` (one program per R
tokens x BN columns). On the NPU each row is one TLOAD at a run-time offset into its row of
the tile (docs/language.md, "Whole rows"). The floor is the bytes the lookup must move (each
output row read once and written once) at ascend910b1's HBM bandwidth, 1.6 TB/s; "share of
HBM" is floor / modelled time. The model counts every row the data picks as an L2 miss, and
a launch takes at least its bytes over the HBM's bandwidth (its misses, its write-backs and
what it leaves dirty in the L2), so no share passes 100 %.
numpy's baseline is ``np.take(table, ids, axis=0, out=)``; torch's is
``torch.index_select(..., out=)`` on the same thread count as PyPTO.
"""
from __future__ import annotations

import numpy as np
from _harness import default_threads, fmt_time, import_torch, main_table, side_by_side, use_threads

import pypto
import pypto.language as pl
from pypto.backends.ascend.model.launch import model_kernel
from pypto.target import get_target

TARGET = "ascend910b1"
R, BN = 16, 4096        # tokens x columns per program: 128 KiB of fp16, two thirds of the UB


@pypto.jit
def embedding(table, ids, out, R: pl.constexpr, BN: pl.constexpr):
    p, j = pl.program_id(0), pl.program_id(1)
    rows = pl.load(ids, offsets=(p * R,), shape=(R,))
    pl.store(out, offsets=(p * R, j * BN),
             value=pl.gather(table, rows, axis=0, offsets=(0, j * BN), shape=(R, BN)))


def shapes(quick: bool):
    """(vocabulary, D, tokens)."""
    return [(1000, 512, 64)] if quick else [(32000, 4096, 2048), (32000, 4096, 8192),
                                            (151936, 2048, 4096)]


def run(args) -> list:
    torch = import_torch()
    use_threads(default_threads(), torch)
    rng = np.random.default_rng(0)
    rows = []
    hbm = get_target(TARGET).hbm_gbps * 1e9
    for vocab, d, tokens in shapes(args.quick):
        table = rng.standard_normal((vocab, d), dtype=np.float32).astype(np.float16)
        ids = rng.integers(0, vocab, tokens).astype(np.int32)
        out, ref = np.empty((tokens, d), np.float16), np.empty((tokens, d), np.float16)
        bn = min(BN, d)
        grid = (pl.cdiv(tokens, R), pl.cdiv(d, bn))
        embedding[grid](table, ids, out, R=R, BN=bn)
        np.testing.assert_array_equal(out, table[ids], err_msg=f"embedding {vocab}x{d}")
        fns = {"pypto": lambda: embedding[grid](table, ids, out, R=R, BN=bn),
               "numpy": lambda: np.take(table, ids, axis=0, out=ref), "torch": None}
        if torch is not None:
            tt, ti, to = (torch.from_numpy(a) for a in (table, ids.astype(np.int64), ref))
            fns["torch"] = lambda: torch.index_select(tt, 0, ti, out=to)
        t = side_by_side(fns, args.reps, rounds=1 if args.quick else 3)
        npu_us = model_kernel(embedding, grid, table, ids, out, R=R, BN=bn).time_ms * 1e3
        floor_us = 2 * out.nbytes / hbm * 1e6
        rows.append([f"{tokens} x {d} of {vocab}", fmt_time(t["pypto"]), fmt_time(t["numpy"]),
                     fmt_time(t["torch"]) if t["torch"] else "-",
                     f"{t['numpy'] / t['pypto']:.2f}x", f"{npu_us:.1f} us",
                     f"{floor_us:.1f} us", f"{floor_us / npu_us:.0%}"])
    return rows


HEADERS = ["lookup (tokens x D of vocab)", "PyPTO host", "numpy", "torch", "numpy/PyPTO",
           "NPU (model)", "HBM floor", "share of HBM"]


def main(argv=None) -> None:
    main_table(__doc__.splitlines()[0], run, HEADERS, lambda args: (
        f"embedding fp16, median of {'1 round' if args.quick else '3 rounds'} of {args.reps} "
        f"after a warm-up each; {R} tokens x up to {BN} columns per program; NPU: cycle "
        f"model, {TARGET}"), argv)


if __name__ == "__main__":
    main()
