"""Tutorial 12's flash attention kernel: one mixed kernel whose cube and vector parts hand S,
P and P @ V to each other every iteration. Checked against an fp32 numpy reference (and torch
SDPA when torch is installed) at sequence lengths that are multiples of neither block size,
causal and not; its .pto against the real assembler when PTO_ORACLE is set."""
import importlib.util
import os

import numpy as np
import pytest

from pypto.compiler.pto.passes.run_ahead import VECTOR_DEPTH
from pypto.compiler.ir import HAND_OFF_FIFO
from tests.quick import quick_cases

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORACLE = os.environ.get("PTO_ORACLE")


def _tutorial():
    path = os.path.join(ROOT, "tutorials", "12_flash_attention.py")
    spec = importlib.util.spec_from_file_location("flash_attention_tutorial", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fa = _tutorial()


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


@pytest.mark.parametrize("shape, causal", quick_cases([
    ((1, 2, 100, 64), False),      # the last key block reads the next head's rows
    ((1, 2, 100, 64), True),
    ((2, 1, 37, 64), True),        # BLOCK_M shrinks to 32, the last block moves back
    ((1, 3, 64, 32), False),       # whole blocks, another head size
], ((1, 2, 100, 64), True), unpack=True))
def test_flash_attention_matches_the_reference(shape, causal):
    q, k, v = fa.inputs(np.random.default_rng(sum(shape)), *shape)
    out = fa.flash_attention(q, k, v, np.full_like(q, np.nan), causal)
    fa.check(out, q, k, v, causal, _torch())


def test_a_padded_key_is_masked_not_scored_zero():
    # seq 100: the second head's keys 100..127 lie past the tensor's end and load as zeros,
    # which would score 0 and take weight exp(0 - max) unless masked by position
    q, k, v = fa.inputs(np.random.default_rng(5), 1, 2, 100, 64)
    q *= np.float16(0.1)                      # scores near 0: a zero score would matter
    out = fa.flash_attention(q, k, v, np.empty_like(q))
    np.testing.assert_allclose(out.astype(np.float32), fa.reference(q, k, v), **fa.TOLERANCE)


def test_short_sequences_are_refused_with_the_reason():
    q, k, v = fa.inputs(np.random.default_rng(0), 1, 1, 8, 64)
    with pytest.raises(ValueError, match="seq >= 16"):
        fa.flash_attention(q, k, v, np.empty_like(q))


@pytest.mark.skipif(not ORACLE, reason="PTO_ORACLE is not set (the PTOAS assembler)")
@pytest.mark.parametrize("causal", quick_cases([False, True], True))
def test_the_assembler_accepts_the_kernel(monkeypatch, causal):
    monkeypatch.setenv("PYPTO_PTOAS", os.path.join(ORACLE, "bin", "ptoas"))
    # a shape no other test compiles: the kernel's in-memory cache does not key on PTOAS
    q, k, v = fa.inputs(np.random.default_rng(0), 1, 2, 80, 64)
    grid, args, meta = fa.launch_args(q, k, v, np.empty_like(q), causal)
    compiled = fa.flash_attention_kernel.compile(*args, **meta)
    assert "cpp" in compiled.asm and compiled.metadata["kind"] == "mixed"


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq", [pytest.param(100, marks=pytest.mark.slow),
                                 pytest.param(400, marks=pytest.mark.heavy)])
def test_the_pto_isa_engine_agrees(monkeypatch, causal, seq):
    # the vendor's simulator runs the two parts on two threads, meeting at the flags: the
    # S / P / P @ V hand-offs of the .pto are what make it right there; at 400, four key
    # blocks, so the cube's and the vector core's run-ahead (pto/passes/run_ahead.py) and
    # the copy of alpha it keeps for the vector core's next iteration are exercised
    from tests.engines.tools import needs_tools, TOOLS
    if TOOLS is None:
        pytest.skip(needs_tools.kwargs["reason"])
    q, k, v = fa.inputs(np.random.default_rng(7), 1, 2, seq, 64)
    native = fa.flash_attention(q, k, v, np.empty_like(q), causal)
    monkeypatch.setenv("PYPTO_ENGINE", "pto-isa")
    simulated = fa.flash_attention(q, k, v, np.full_like(q, np.nan), causal)
    np.testing.assert_allclose(simulated.astype(np.float32), native.astype(np.float32),
                               rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(simulated.astype(np.float32), fa.reference(q, k, v, causal),
                               **fa.TOLERANCE)


@pytest.mark.heavy
@pytest.mark.parametrize("block_n", [64, 32])
def test_the_run_ahead_keeps_the_values_at_other_key_blocks(monkeypatch, block_n):
    """Narrower key blocks: more iterations, and other UB layouts, where the vector core's
    next softmax reuses the bytes alpha had (the copy it keeps is taken as alpha is written,
    not at the top of the next iteration, which read the reused bytes)."""
    from tests.engines.tools import needs_tools, TOOLS
    if TOOLS is None:
        pytest.skip(needs_tools.kwargs["reason"])
    q, k, v = fa.inputs(np.random.default_rng(3), 1, 1, 200, 64)
    grid, args, meta = fa.launch_args(q, k, v, np.empty_like(q), True)
    meta["BLOCK_N"] = block_n
    native = np.empty_like(q)
    fa.flash_attention_kernel[grid](*args[:3], native.reshape(args[3].shape), *args[4:], **meta)
    monkeypatch.setenv("PYPTO_ENGINE", "pto-isa")
    simulated = np.full_like(q, np.nan)
    fa.flash_attention_kernel[grid](*args[:3], simulated.reshape(args[3].shape), *args[4:],
                                    **meta)
    np.testing.assert_allclose(simulated.astype(np.float32), fa.reference(q, k, v, True),
                               **fa.TOLERANCE)
    np.testing.assert_allclose(native.astype(np.float32), fa.reference(q, k, v, True),
                               **fa.TOLERANCE)


def test_both_cores_run_key_blocks_ahead_and_both_aivs_share_the_rows():
    """The schedule the speed comes from (pto/passes/run_ahead.py, split_rows.py): in each
    part a prologue and the loop run a later block's first half under `scf.if` (the cube's
    S two blocks ahead, through a FIFO of two workspace slots, before it waits for P; the
    vector core's softmax two blocks ahead before it waits for P @ V), and the vector function
    has no sub-block branch: each AIV takes half the rows."""
    q, k, v = fa.inputs(np.random.default_rng(0), 1, 1, 1024, 64)
    grid, args, meta = fa.launch_args(q, k, v, np.empty_like(q), False)
    text = fa.flash_attention_kernel.compile(*args, **meta).asm["pto"]
    cube, vector = text.split("kernel_kind<vector>")
    for part, ahead in ((cube, HAND_OFF_FIFO), (vector, VECTOR_DEPTH)):
        assert part.count("scf.if %ahead") == ahead + 1        # the prologue's and the loop's
        loop = part[part.index("scf.for"):]
        assert loop.index("scf.if %ahead") < loop.index("pto.sync.wait #pto.pipe<PIPE_MTE2>")
    assert "pto.get_subblock_idx" in vector and "%pypto_sb.p" not in vector
    bm, bn = meta["BLOCK_M"], meta["BLOCK_N"]
    assert f"rows={bm // 2}, cols={bn}" in vector and f"rows={bm}, cols={bn}" not in vector


def _flags(text: str, op: str) -> list[int]:
    """The cross-core flag numbers of ``op`` ("set" / "wait") in program text order."""
    import re
    return [int(n) for n in re.findall(rf"pto\.sync\.{op} #pto\.pipe<PIPE_\w+>, (\d+)", text)]


def test_a_hand_off_waits_for_its_slot_only_before_the_next_store():
    """The producer of each in-loop hand-off waits for the consumer's acknowledgement just
    before it stores into the slot again, not right after its signal (a cross-core round
    trip per hand-off on the critical path before: the cube computed the next S only once
    the vector core had loaded P @ V). The consumer primes one acknowledgement before the
    loop and the producer takes the last one back after it."""
    q, k, v = fa.inputs(np.random.default_rng(0), 1, 1, 128, 64)
    out = np.empty_like(q)
    grid, args, meta = fa.launch_args(q, k, v, out, False)
    text = fa.flash_attention_kernel.compile(*args, **meta).asm["pto"]
    cube = text[:text.index("_vector(")]
    vector = text[text.index("_vector("):]
    if "%pypto_sb.p" in vector:                          # sub-block 0 (1 runs the flags only)
        vector = vector[:vector.index("\n    } else {")]
    loop = cube[cube.index("scf.for"):]
    # in the loop, each acknowledgement the cube waits for (on its store pipe, FIX) comes
    # right before its next store to GM, ahead of that hand-off's signal
    acks = loop.split("pto.sync.wait #pto.pipe<PIPE_FIX>")[1:]
    before_a_store = [a for a in acks if "pto.tstore" in a.split("pto.sync.set", 1)[0]]
    assert len(before_a_store) == 2                       # S and P @ V
    # every flag one part sets, the other waits for (how often each runs: the engines'
    # tests, which deadlock or time out on an unbalanced flag)
    for producer, consumer in ((cube, vector), (vector, cube)):
        assert set(_flags(producer, "set")) == set(_flags(consumer, "wait"))


def _ub_end(text: str) -> int:
    """The highest byte the vector function's UB tiles reach."""
    import re
    vector = text[text.index("_vector("):]
    ends = [int(addr) + int(rows) * int(cols) * {"f32": 4, "f16": 2, "i32": 4}.get(dtype, 4)
            for addr, dtype, rows, cols in re.findall(
                r"alloc_tile addr = %c(\d+)_i64\b[^\n]*?loc=vec, dtype=(\w+), rows=(\d+), "
                r"cols=(\d+)", vector)]
    return max(ends)


@pytest.mark.parametrize("block_m, block_n, causal", [(128, 128, False), (128, 128, True),
                                                      (64, 256, True), (128, 256, True)])
def test_blocks_whose_whole_rows_overflow_the_ub_fit_as_the_halves_each_aiv_holds(
        block_m, block_n, causal):
    """128 x 128 and 64 x 256 blocks need about 300 KiB of UB as whole rows (BufferOverflow
    before); the vector part is split between the two AIVs, so the UB is planned for the
    half each one holds (memory_plan's half-row plan) and fits the 192 KiB. Causal 128 x 256
    fits since its mask is a float16 compare and a TSELS (passes/masks.py; 10 KiB over
    before). Results on the host, which runs the whole rows at twice the offsets, and a
    plan within the UB."""
    q, k, v = fa.inputs(np.random.default_rng(block_n), 1, 2, 300, 128)
    grid, args, meta = fa.launch_args(q, k, v, np.empty_like(q), causal)
    meta.update(BLOCK_M=block_m, BLOCK_N=block_n)
    grid = (grid[0], -(-300 // block_m))
    out = np.full_like(q, np.nan)
    fa.flash_attention_kernel[grid](*args[:3], out.reshape(args[3].shape), *args[4:], **meta)
    np.testing.assert_allclose(out.astype(np.float32), fa.reference(q, k, v, causal),
                               **fa.TOLERANCE)
    text = fa.flash_attention_kernel.compile(*args, **meta).asm["pto"]
    vector = text[text.index("_vector("):]
    assert f"rows={block_m // 2}, cols={block_n}" in vector
    assert f"rows={block_m}, cols={block_n}" not in vector
    assert _ub_end(text) <= 192 * 1024


@pytest.mark.heavy
@pytest.mark.parametrize("block_m, seq, causal", [(64, 300, True), (96, 300, True),
                                                  (128, 600, False), (128, 600, True)])
def test_the_pto_isa_engine_agrees_at_half_row_blocks_and_l0_pieces(monkeypatch, block_m, seq,
                                                                    causal):
    """Head 128, 256-key blocks, planned for the half rows each AIV holds; at 128 rows the
    cube computes S in two 128-column pieces, each stored on its own, and P V in two K
    pieces (pto/passes/cube_chunks.py); the last key block reaches past the head. Causal
    128-row blocks fit since the mask is a float16 compare and a TSELS (passes/masks.py):
    the vendor's simulator reads the float16 compare's mask bits for a float32 select. At
    96 rows each AIV's 48 rows reduce as a 32-row group reduction and a 16-row remainder
    (pto/passes/group_reduce.py)."""
    from tests.engines.tools import needs_tools, TOOLS
    if TOOLS is None:
        pytest.skip(needs_tools.kwargs["reason"])
    q, k, v = fa.inputs(np.random.default_rng(block_m), 1, 1, seq, 128)
    grid, args, meta = fa.launch_args(q, k, v, np.empty_like(q), causal)
    meta.update(BLOCK_M=block_m, BLOCK_N=256)
    grid = (grid[0], -(-seq // block_m))
    if block_m == 128:
        cube = fa.flash_attention_kernel.compile(*args, **meta).asm["pto"].split("_vector(")[0]
        assert cube.count("pto.textract") >= 4 and "rows=128, cols=256, v_row=128, " \
            "v_col=256, blayout=col_major, slayout=row_major, fractal=1024" not in cube
    monkeypatch.setenv("PYPTO_ENGINE", "pto-isa")
    out = np.full_like(q, np.nan)
    fa.flash_attention_kernel[grid](*args[:3], out.reshape(args[3].shape), *args[4:], **meta)
    np.testing.assert_allclose(out.astype(np.float32), fa.reference(q, k, v, causal),
                               **fa.TOLERANCE)


def test_the_causal_mask_is_a_branch_that_runs_ahead_with_the_softmax():
    """Only the diagonal key blocks are masked (an `scf.if` around the where), and the vector
    core's run-ahead takes the branch along with the next block's softmax (run_ahead left a
    part with a branch in it as it was: no `scf.if %ahead` in the vector function)."""
    q, k, v = fa.inputs(np.random.default_rng(0), 1, 1, 1024, 64)
    grid, args, meta = fa.launch_args(q, k, v, np.empty_like(q), True)
    text = fa.flash_attention_kernel.compile(*args, **meta).asm["pto"]
    vector = text[text.index("_vector("):]
    assert vector.count("scf.if %ahead") == VECTOR_DEPTH + 1
    # the key-tail row's where and the diagonal's, in the prologue's softmaxes and the loop's
    assert vector.count("pto.tsel") == 2 * (VECTOR_DEPTH + 1)


def test_the_p_v_tile_keeps_its_own_ub_bytes():
    """P V comes back after the vector core's own hand-off (P), and the run-ahead puts the
    next blocks' softmax before it, so its tile has bytes of its own for the whole loop
    (compiler/passes/in_place.received_after_sending): before, it shared S's and P's,
    and its load waited for the softmax's cast and P's store, the next S's load for O's
    update (8k: 304 -> 278 us)."""
    import re
    q, k, v = fa.inputs(np.random.default_rng(0), 1, 1, 1024, 128)
    grid, args, meta = fa.launch_args(q, k, v, np.empty_like(q), False)
    meta.update(BLOCK_M=128, BLOCK_N=256)
    text = fa.flash_attention_kernel.compile(*args, **meta).asm["pto"]
    vector = text[text.index("_vector("):]
    loop = vector[vector.index("scf.for"):]
    loads = re.findall(r"pto\.tload ins\(%\w+ : [^)]*\) outs\(%(\w+)\.", loop)
    s_tile, pv_tile = loads[0], loads[-1]

    def span(name):
        addr, rows, cols = re.search(rf"%{name} = pto\.alloc_tile addr = %c(\d+)_i64 : "
                                     r"!pto\.tile_buf<loc=vec, dtype=f32, rows=(\d+), "
                                     r"cols=(\d+)", vector).groups()
        return int(addr), int(addr) + int(rows) * int(cols) * 4
    (s0, s1), (p0, p1) = span(s_tile), span(pv_tile)
    assert s_tile != pv_tile and (p1 <= s0 or s1 <= p0)


def test_a_plan_the_run_ahead_refuses_is_made_again_without_its_rules():
    """At 128 x 128 blocks of head 128 the run-ahead UB rules (passes/in_place.py)
    lay the vector loop out so that its next softmax would depend on O's update: run_ahead
    refuses (RunAheadRefused) and the pipeline plans again without them, so both parts still
    run ahead (before: the vector part did not, and 2k took 77.6 us instead of 43.8)."""
    q, k, v = fa.inputs(np.random.default_rng(0), 1, 1, 2048, 128)
    grid, args, meta = fa.launch_args(q, k, v, np.empty_like(q), False)
    meta.update(BLOCK_M=128, BLOCK_N=128)
    text = fa.flash_attention_kernel.compile(*args, **meta).asm["pto"]
    cube, vector = text.split("kernel_kind<vector>")
    assert cube.count("scf.if %ahead") == HAND_OFF_FIFO + 1
    assert vector.count("scf.if %ahead") == VECTOR_DEPTH + 1


@pytest.mark.heavy
@pytest.mark.parametrize("causal", [False, True])
def test_num_stages_2_compiles_at_every_block_size(causal):
    """Issue 32: ``num_stages=2`` on the key loop compiles at the block sizes that fit
    (BLOCK_M = 32 failed inside PyPTO once: a pong tile declared twice; causal 96 x 256
    overflowed), and the assembler takes the .pto when PTO_ORACLE is set; one size runs
    against the reference. (All of 32/64/96/128 x 64/128/256 compile: a slower sweep.)"""
    q, k, v = fa.inputs(np.random.default_rng(3), 1, 1, 300, 128)
    grid, args, meta = fa.launch_args(q, k, v, np.empty_like(q), causal)
    for block_m in (32, 96, 128):
        for block_n in (64, 256):
            meta.update(BLOCK_M=block_m, BLOCK_N=block_n, STAGES=2)
            fa.flash_attention_kernel.compile(*args, **meta)
    meta.update(BLOCK_M=64, BLOCK_N=128)
    out = np.full_like(q, np.nan)
    fa.flash_attention_kernel[(grid[0], -(-300 // 64))](*args[:3], out.reshape(args[3].shape),
                                                        *args[4:], **meta)
    np.testing.assert_allclose(out.astype(np.float32), fa.reference(q, k, v, causal),
                               **fa.TOLERANCE)


def test_the_launcher_picks_the_height_whose_blocks_end_first():
    """Block heights by the longest-first end time of the blocks on 24 clusters (modelled
    times: tutorial 12's table). Non-causal 2k: 22 blocks of 96 rows beat 16 of 128 on 24
    clusters; causal 2k: 32 blocks of 64 rows, whose lengths differ 1 : 8, balance better than
    16 of 128; from 8k 128 rows win, causal too (they overflowed the UB before the float16
    mask)."""
    assert fa.block_m_for(2048) == 96 and fa.block_m_for(8192) == 128
    assert fa.block_m_for(2048, causal=True) == 64
    assert fa.block_m_for(8192, causal=True) == fa.block_m_for(32768, causal=True) == 128
    assert fa.block_m_for(40) == 32            # shorter than every height: whole 16-row groups
