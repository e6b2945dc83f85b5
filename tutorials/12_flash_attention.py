"""Tutorial 12 -- flash attention: attention in one kernel, the cube and the vector unit taking turns.

    python tutorials/12_flash_attention.py [--quick] [--reps N]

One idea: softmax(Q K^T / sqrt(D)) V never needs the (seq x seq) score matrix in memory. A
program owns BLOCK_M query rows and walks the keys in blocks of BLOCK_N, keeping per row the
running max m, the running sum l and an unnormalised output O, all in fp32 on chip ("online
softmax"); only O / l is written, once, in fp16.
"""
import argparse
import functools
import heapq
import math

import numpy as np

import pypto
import pypto.language as pl
from pypto.backends.ascend.model.launch import model_kernel

# ----------------------------------------------------------------------------------------------
# 1. The online softmax.
#
# For one query row and a new block of scores s (BLOCK_N of them):
#
#     m_new = max(m, max(s))          the row max so far
#     p     = exp(s - m_new)          this block's weights, relative to the new max
#     alpha = exp(m - m_new)          how much the old max overstated: rescale what we have
#     l     = l * alpha + sum(p)
#     O     = O * alpha + p @ V_block
#
# After the last block O / l is exactly softmax(s_all) @ V (up to rounding): every earlier term
# has been multiplied by exp(m_old - m_final) in total. m starts at -inf, so alpha = 0 the
# first time; the first block always holds an unmasked key (key 0), so m is finite after it.
#
# 2. Two units, one loop.
#
# S = Q @ K^T and P @ V run on the cube (fp16 operands, fp32 accumulation in L0C); the max,
# exp, sums and rescaling on the vector unit (fp32 in UB). On the 910B the two units share no
# buffer: every iteration the cube's S goes to the vector core through global memory (a
# per-block workspace slot and a cross-core flag), and P, cast to fp16 there, goes back to the
# cube the same way, as does P @ V. You write none of it: the compiler splits the kernel into
# a cube part and a vector part (the .pto has two functions, shown below) and places the
# hand-offs and flags. It also has each core run ahead, so neither waits for the other's
# half of every step: the cube computes S two key blocks ahead before it waits for this
# block's P (each hand-off goes through two workspace slots in turn), and the vector core's
# softmax of the next S comes before it adds this block's P @ V into O (the run-ahead pass;
# modelled, (1, 1, 2048, 128), 64 x 128 blocks: 152.7 us before it, 86.8 us one block ahead).
# On the host the two parts run interleaved on one thread.
#
# 3. Rank-2 views of rank-4 tensors.
#
# q, k, v and out are (batch, heads, seq, D) arrays, but tiles have rank <= 2 (rank-3/4 tiles
# are being added), so the kernel takes the zero-copy views q.reshape(batch*heads*seq, D):
# head bh's rows are bh*seq ... bh*seq + seq - 1. Two consequences for the tails:
#   * a K/V block that runs past the head's end reads the NEXT head's rows (only past the
#     tensor's end does the load pad with zeros), and a padded key would score 0, not -inf:
#     so key columns are masked by their position within the head (n0 + j < seq), never by
#     the tensor's end;
#   * a store drops only what lies outside the tensor, so a last query block running past
#     the head's end would overwrite the next head's output. The last block is moved back to
#     end at the head's end instead (m0 = min(mb*BLOCK_M, seq - BLOCK_M)): its first rows are
#     also computed by the block before, with the same key blocks, so both write the same
#     values. That needs seq >= BLOCK_M, which the launcher ensures.
#   * the offsets must be provably >= 0 for the loads to go straight to the cube: a window
#     that might start before its tensor is checked at run time, and a checked cube operand
#     travels through the vector core (GM -> UB -> GM -> L1), since only the UB can take it
#     element by element. A run-time `seq` argument could be anything, so the kernel derives
#     seq from the view's extent (rows / heads, both >= 0) and clamps m0 at 0; the compiler
#     then proves every offset non-negative (modelled, (1, 8, 1024, 64): 423 us when seq was
#     an argument, 272 us once it was not; 219 us since each hand-off's producer waits for
#     the acknowledgement only before its next store; 135 us since each core runs ahead).
#
# 4. Causal attention.
#
# Query row i sees keys j <= i. A program's rows end at m0 + BLOCK_M - 1, so key blocks from
# there on are fully masked: the loop stops at min(seq, m0 + BLOCK_M) (half the work overall),
# and the blocks on the diagonal (a key past the block's first row) are masked with an
# iota/compare/where on positions, the others not at all (modelled, (1, 1, 8192, 128):
# 246.9 us masking every block, 224.1 us the diagonal ones). The last query
# blocks then have the most key blocks, and blocks start on free cores in grid order: program
# (h, i) takes the i-th block from the end, so the long ones start first and the short ones
# fill in behind them, instead of a last wave of the longest blocks on a few cores (modelled,
# (1, 1, 2048, 128), one S slot: 43.6 us in grid order, 33.0 us longest first; 8192: 314 -> 277).
#
# 5. Masks that cost little.
#
# The keys past the head's end are masked by adding a (1, BLOCK_N) row of 0 / -inf, as
# Triton's attention tutorial does: the row is computed once per key block and added to
# every row of s (one TCOLEXPANDADD), where pl.where(keep, s, -inf) on the whole block is a
# select of two (BLOCK_M, BLOCK_N) tiles (on A2/A3 a TSEL per row: 644 cycles per 32 x 256
# half, modelled) and needs a -inf tile and a mask tile of the block's size in the UB. The
# sum is the select for every finite score (an infinite score is an overflow either way).
# The causal mask depends on both positions, so it stays a where. Written plainly it would be
# three block-sized tiles beside s (two int32 broadcasts of the positions and a -inf tile);
# the compiler compares the key row with the query column in float16 instead, relative to
# n0, and selects -inf as a scalar (TSELS): one float16 tile of the block's size
# (compiler/passes/masks.py), so causal blocks fit at 128 x 256 too.
# ----------------------------------------------------------------------------------------------


@pypto.jit
def flash_attention_kernel(q, k, v, out, sm_scale, BLOCK_M: pl.constexpr,
                           BLOCK_N: pl.constexpr, D: pl.constexpr, CAUSAL: pl.constexpr,
                           STAGES: pl.constexpr = 1):
    seq = q.shape[0] // pl.num_programs(0)               # rows per head: provably >= 0
    head = pl.program_id(0) * seq                        # the head's first row in the views
    mb = pl.program_id(1)
    if CAUSAL:
        mb = pl.num_programs(1) - 1 - mb                 # the longest rows first (section 4)
    m0 = max(min(mb * BLOCK_M, seq - BLOCK_M), 0)        # last block ends at the end
    tq = pl.load(q, offsets=(head + m0, 0), shape=(BLOCK_M, D))
    rows = pl.arange(0, BLOCK_M)[:, None] + m0           # query positions within the head
    m = pl.full((BLOCK_M, 1), float("-inf"), dtype=pl.float32)
    l = pl.zeros((BLOCK_M, 1), dtype=pl.float32)
    o = pl.zeros((BLOCK_M, D), dtype=pl.float32)
    end = seq
    if CAUSAL:
        end = min(m0 + BLOCK_M, seq)                     # later key blocks are all masked
    # STAGES=2 double-buffers the K and V loads as well: it compiles at every block size,
    # and is modelled within 0.3% of 1, since the cores already run key blocks ahead
    for n0 in pl.range(0, end, BLOCK_N, num_stages=STAGES):
        tk = pl.load(k, offsets=(head + n0, 0), shape=(BLOCK_N, D))
        tv = pl.load(v, offsets=(head + n0, 0), shape=(BLOCK_N, D))
        s = pl.matmul(tq, tk, b_trans=True) * sm_scale   # cube: (BLOCK_M, BLOCK_N) fp32
        cols = pl.arange(0, BLOCK_N)[None, :] + n0       # key positions within the head
        if n0 + BLOCK_N > seq:                           # the last block reaches past the head:
            s = s + pl.where(cols < seq, 0.0, float("-inf"))  # its keys past it, one row added
        if CAUSAL:
            if n0 + BLOCK_N - 1 > m0:                    # a key past the first row's
                s = pl.where(cols <= rows, s, float("-inf"))
        m_new = pl.maximum(m, pl.max(s, axis=1, keepdims=True))
        p = pl.exp(s - m_new)
        alpha = pl.exp(m - m_new)
        l = l * alpha + pl.sum(p, axis=1, keepdims=True)
        o = o * alpha + pl.matmul(p.to(pl.float16), tv)  # P back to the cube, in fp16
        m = m_new
    pl.store(out, offsets=(head + m0, 0), value=(o / l).to(pl.float16))


# Block sizes, modelled on the 910B1 (us), non-causal / causal:
#
#                        64 x 128       64 x 256       128 x 128      128 x 256
#   (1, 1, 2048, 128)    56.6 / 31.5    43.8 / 26.3    43.8 / 44.3    33.9 / 34.6
#   (1, 1, 8192, 128)    539 / 264      368 / 190      422 / 225      278 / 158
#   (1, 8, 1024, 64)     82.9 / 60.7    70.7 / 58.9    56.0 / 41.2    52.8 / 43.8
#
# Wider blocks mean fewer hand-offs (and their cross-core latency) per key, and each AIV's
# 64 x 256 or 32 x 256 slice of S is a shape the chip reduces rows of fastest. They fit only
# because each AIV holds half the rows and the UB is planned for that half (and, causal, the
# mask takes no block-sized tiles: section 5). The blocks run in waves of one per cluster
# (24 on the 910B1), and a block of h rows takes about as long as h + 61 rows would at no
# fixed cost per key block (the pipeline's fill and drain: fitted to 64 x 256 and 128 x 256
# at 8k, 368 us in 6 waves, 278 us in 3). The launcher takes the height whose blocks end
# soonest, longest first: at S = 2k one head, 22 blocks of 96 rows fill the 24 clusters where
# 16 of 128 leave 8 idle (29.0 us against 33.9); at 16k, 6 waves of 128 rows (1048 us) beat
# 11 of 64 (1275). Causal blocks differ in length (a block's keys end at its last row), so
# at 2k the 32 blocks of 64 rows balance better than 16 of 128 (26.3 us against 34.6), and
# from 8k the 128-row blocks win (158 us against 190).
BLOCK_N = 256
BLOCK_MS = (64, 96, 128)          # halves of whole 16-row groups for the two AIVs
BLOCK_COST_ROWS = 61              # a block's fixed cost, in rows


@functools.lru_cache(maxsize=None)       # every launch asks; the blocks are simulated once
def block_m_for(seq: int, causal: bool = False, programs: int = 1, clusters: int = 24) -> int:
    """BLOCK_M for ``programs`` heads of ``seq`` rows on ``clusters``: the height whose
    blocks, each costing its key blocks x (height + BLOCK_COST_ROWS), end soonest when the
    clusters take them longest first (the grid's order); the taller on a tie. Shrunk in steps
    of 16 (the cube's fractal) for sequences shorter than every height."""
    if seq < 16:
        raise ValueError(f"flash_attention: seq = {seq}; this kernel needs seq >= 16")
    heights = [h for h in BLOCK_MS if h <= seq]
    if not heights:
        return seq // 16 * 16

    def cost(h: int) -> int:
        blocks = []
        for mb in range(-(-seq // h)):
            m0 = max(min(mb * h, seq - h), 0)
            keys = min(m0 + h, seq) if causal else seq
            blocks += [-(-keys // BLOCK_N) * (h + BLOCK_COST_ROWS)] * programs
        ends = [0] * clusters
        for b in sorted(blocks, reverse=True):        # each to the cluster free first
            heapq.heapreplace(ends, ends[0] + b)
        return max(ends)
    return min(heights, key=lambda h: (cost(h), -h))


def launch_args(q, k, v, out, causal: bool):
    """The kernel's grid and arguments for (batch, heads, seq, D) fp16 arrays."""
    batch, heads, seq, d = q.shape
    bm = block_m_for(seq, causal, batch * heads, flash_attention_kernel.target().cube_cores)
    views = [x.reshape(batch * heads * seq, d) for x in (q, k, v, out)]    # zero-copy
    grid = (batch * heads, pl.cdiv(seq, bm))
    meta = dict(BLOCK_M=bm, BLOCK_N=BLOCK_N, D=d, CAUSAL=causal)
    return grid, (*views, 1.0 / math.sqrt(d)), meta


def flash_attention(q, k, v, out, causal=False):
    grid, args, meta = launch_args(q, k, v, out, causal)
    flash_attention_kernel[grid](*args, **meta)
    return out


def modelled_npu(q, k, v, out, causal=False):
    """One launch on ascend910b1 by the cycle model (modelled, not measured): its time, its
    pipes' busy cycles, its blocks (``LaunchModel``)."""
    grid, args, meta = launch_args(q, k, v, out, causal)
    return model_kernel(flash_attention_kernel, grid, *args, **meta)


def modelled_npu_seconds(q, k, v, out, causal=False) -> float:
    return modelled_npu(q, k, v, out, causal).time_ms / 1e3


def reference(q, k, v, causal=False):
    """fp32 attention of the fp16 inputs (numpy)."""
    q32, k32, v32 = (x.astype(np.float32) for x in (q, k, v))
    s = q32 @ np.swapaxes(k32, -1, -2) / np.float32(math.sqrt(q.shape[-1]))
    if causal:
        seq = q.shape[-2]
        s = np.where(np.tril(np.ones((seq, seq), bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v32


# fp16 output: half an ulp at 1 is 4.9e-4; P is rounded to fp16 (relative 4.9e-4) before P @ V
TOLERANCE = dict(rtol=2e-3, atol=2e-3)


def check(out, q, k, v, causal, torch=None):
    """Against the fp32 reference; and torch's SDPA (fp16 in and out), when torch is there."""
    np.testing.assert_allclose(out.astype(np.float32), reference(q, k, v, causal), **TOLERANCE)
    if torch is not None:
        t = torch.nn.functional.scaled_dot_product_attention(
            *(torch.from_numpy(x) for x in (q, k, v)), is_causal=causal)
        np.testing.assert_allclose(out.astype(np.float32), t.float().numpy(), **TOLERANCE)


def import_torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def inputs(rng, batch, heads, seq, d):
    return [rng.standard_normal((batch, heads, seq, d), dtype=np.float32).astype(np.float16)
            for _ in range(3)]


def median_seconds(fn, reps):
    return pypto.testing.do_bench(fn, reps=reps) / 1e3


def fmt(seconds):
    return "-" if seconds is None else (
        f"{seconds * 1e6:.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms")


def main():
    parser = argparse.ArgumentParser(description="PyPTO tutorial 12: flash attention")
    parser.add_argument("--reps", type=int, default=5, help="timed repetitions (default 5)")
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    args = parser.parse_args()
    torch = import_torch()
    if torch is not None:
        torch.set_num_threads(pypto.runtime.pool.num_threads())     # the same threads as PyPTO
    rng = np.random.default_rng(0)

    # --- correctness: odd sequence lengths, causal and not ------------------------------------
    # 100 (and 37, 200) are multiples of neither block size: the last query block moves back,
    # the last key block is masked by position (and reads the next head's rows, or zeros).
    # (--quick checks the shapes benchmarks/flash_attention.py --quick times: in the smoke
    # tests, which share a disk cache, those compile once.)
    cases = [(1, 2, 100, False), (1, 2, 100, True)]
    if not args.quick:
        cases += [(2, 1, 37, True), (2, 3, 200, False), (1, 1, 16, True)]
    for batch, heads, seq, causal in cases:
        q, k, v = inputs(rng, batch, heads, seq, 64)
        out = flash_attention(q, k, v, np.empty_like(q), causal)
        check(out, q, k, v, causal, torch)
        print(f"({batch}, {heads}, {seq}, 64) causal={causal}: matches the fp32 reference"
              + (" and torch SDPA" if torch is not None else " (torch absent)"))

    # --- what the compiler made of it ---------------------------------------------------------
    q, k, v = inputs(rng, 1, 2, 100, 64)
    grid, kargs, meta = launch_args(q, k, v, np.empty_like(q), False)
    compiled = flash_attention_kernel.compile(*kargs, **meta)
    pto = compiled.asm["pto"]
    print(f"\nkind={compiled.metadata['kind']}: two functions, the hand-offs inside the loop:")
    for line in pto.splitlines():
        if "func.func" in line or "pto.sync." in line:
            print("   ", line.strip()[:100])
    # Two flags per hand-off: the producer sets the first after its store (the cube from
    # PIPE_FIX, out of L0C; the vector core from PIPE_MTE3, out of UB), the consumer waits
    # for it before its load (PIPE_MTE2) and then sets the second, an acknowledgement the
    # producer waits for before its next store into the same workspace slot.

    # --- timing: host and modelled NPU --------------------------------------------------------
    shapes = [(1, 2, 100)] if args.quick else [(1, 8, 512), (4, 8, 1024)]
    rows = []
    for batch, heads, seq in shapes:
        for causal in (False,) if args.quick else (False, True):
            q, k, v = inputs(rng, batch, heads, seq, 64)
            out = np.empty_like(q)
            t_ours = median_seconds(lambda: flash_attention(q, k, v, out, causal), args.reps)
            check(out, q, k, v, causal, torch)
            t_torch = None
            if torch is not None:
                tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
                sdpa = torch.nn.functional.scaled_dot_product_attention
                t_torch = median_seconds(lambda: sdpa(tq, tk, tv, is_causal=causal), args.reps)
            npu = modelled_npu_seconds(q, k, v, out, causal)
            rows.append((f"({batch}, {heads}, {seq}, 64)", str(causal), fmt(t_ours),
                         fmt(t_torch), f"{t_torch / t_ours:.2f}x" if t_torch else "-",
                         fmt(npu)))
    print(f"\nfp16 attention, median of {args.reps}, {pypto.runtime.pool.num_threads()} threads "
          "for both; NPU: the cycle model of ascend910b1 (modelled, not measured)")
    headers = ("shape", "causal", "PyPTO", "torch SDPA", "torch/PyPTO", "NPU (model)")
    widths = [max(len(r[i]) for r in rows + [headers]) for i in range(len(headers))]
    for r in [headers] + rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)))

    # --- against the chip's own kernel ----------------------------------------------------------
    # pto-isa's hand-written flash attention (head 128, one head, S = 2048) takes 32.5 us on a
    # 24-core 910B2 board (shared/reference/ascend910b.md): 66 TFLOPS. This kernel, modelled:
    s = 2048
    q = np.zeros((1, 1, s, 128), np.float16)
    m = modelled_npu(q, q, q, np.empty_like(q))
    print(f"\nhead 128, S = {s}, modelled on {m.target.name}: {m.time_ms * 1e3:.1f} us = "
          f"{4 * s * s * 128 / m.time_ms / 1e9:.1f} TFLOPS, cube busy {m.busy_share('M'):.0%}, "
          f"vector busy {m.busy_share('V'):.0%}; pto-isa's kernel on the board: 32.5 us = "
          "66 TFLOPS, with 128-row blocks (one round of blocks on 24 clusters) and four QK "
          "tiles in flight (benchmarks/board.py)")


if __name__ == "__main__":
    main()
