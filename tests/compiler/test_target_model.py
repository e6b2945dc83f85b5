"""The Ascend target model: pipe flags, double buffering, the cube/vector split, cross-core
sync (barrier, signal/wait), explicit async loads, and buffer capacities. Results are checked
against numpy; the .pto text is checked for what the chip needs."""
import re

import numpy as np
import pytest

import pypto
from pypto.compiler.ir import HAND_OFF_FIFO
from pypto.target import UB_USABLE
import pypto.language as pl
from pypto.errors import CompilationError, NotOnChip

from ..kernels import mm_bias_sigmoid, row_softmax, vadd


def softmax_ref(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


# -- pipe flags ---------------------------------------------------------------------------------


def test_vector_loop_gets_the_canonical_flags():
    x = np.arange(4096, dtype=np.float32)
    out = np.empty_like(x)
    vadd[(2,)](x, x, out, 4096, BLOCK=256)
    np.testing.assert_array_equal(out, 2 * x)
    pto = vadd.compile(x, x, out, 4096, BLOCK=256).asm["pto"]
    # load → add, add → store, and the back edges: the next load waits for the add to have
    # read its tile, the next add waits for the store to have read its result
    for src, dst in (("MTE2", "V"), ("V", "MTE3"), ("V", "MTE2"), ("MTE3", "V")):
        sets = pto.count(f"pto.set_flag[<PIPE_{src}>, <PIPE_{dst}>")
        waits = pto.count(f"pto.wait_flag[<PIPE_{src}>, <PIPE_{dst}>")
        assert sets >= 1 and sets == waits, (src, dst, sets, waits)
    events = {int(e) for e in re.findall(r"EVENT_ID(\d+)", pto)}
    assert events <= set(range(8))


def test_flags_balance_in_every_block_of_the_text():
    """Every set has its wait in the same region, so any trip count keeps them balanced."""
    x = np.ones(1000, np.float32)
    pto = vadd.compile(x, x, x.copy(), 1000, BLOCK=128).asm["pto"]
    body = pto[pto.index("scf.for"):pto.index("}", pto.index("scf.for"))]
    for src, dst in (("MTE2", "V"), ("V", "MTE3")):
        assert body.count(f"set_flag[<PIPE_{src}>, <PIPE_{dst}>") == \
            body.count(f"wait_flag[<PIPE_{src}>, <PIPE_{dst}>")


# -- double buffering ---------------------------------------------------------------------------


@pytest.mark.parametrize("rows", [1, 8, 16, 24, 100])
@pytest.mark.parametrize("grid", [1, 3])
def test_double_buffered_softmax_matches(rows, grid):
    x = np.random.default_rng(rows).standard_normal((rows, 64)).astype(np.float32)
    out = np.zeros_like(x)
    row_softmax[(grid,)](x, out, rows, N=64, BM=8, STAGES=2)
    np.testing.assert_allclose(out, softmax_ref(x), rtol=1e-5, atol=1e-6)


def test_double_buffered_loop_has_two_buffers_and_prefetches():
    x = np.zeros((64, 64), np.float32)
    single = row_softmax.compile(x, x, 64, N=64, BM=8, STAGES=1).asm["pto"]
    double = row_softmax.compile(x, x, 64, N=64, BM=8, STAGES=2).asm["pto"]
    assert "_pong" not in single and "_pong" in double
    loop = double[double.index("scf.for"):]
    first_load = loop.index("pto.tload")
    first_compute = loop.index("pto.trowmax")
    assert first_load < first_compute and "_pong" in loop[first_load:first_compute]
    assert double.count("pto.tload") == 3      # the prologue and one prefetch per buffer
    assert "pto.wait_flag[<PIPE_V>, <PIPE_MTE2>" in loop   # a buffer is refilled once free


@pypto.jit
def mm_pipelined(a, b, c, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr,
                 STAGES: pl.constexpr):
    pm = pl.program_id(0)
    pn = pl.program_id(1)
    acc = pl.zeros((BM, BN), pl.float32)
    for k in pl.range(0, K, BK, num_stages=STAGES):
        acc = pl.matmul(pl.load(a, [pm * BM, k], [BM, BK]), pl.load(b, [k, pn * BN], [BK, BN]),
                        acc=acc)
    pl.store(c, [pm * BM, pn * BN], acc)


@pytest.mark.parametrize("K", [16, 32, 96, 200])
def test_double_buffered_matmul_matches(K):
    rng = np.random.default_rng(K)
    a = rng.standard_normal((64, K)).astype(np.float16)
    b = rng.standard_normal((K, 64)).astype(np.float16)
    c = np.zeros((64, 64), np.float32)
    mm_pipelined[(2, 2)](a, b, c, K, BM=32, BN=32, BK=32, STAGES=2)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3,
                               atol=1e-3)
    pto = mm_pipelined.compile(a, b, c, K, BM=32, BN=32, BK=32, STAGES=2).asm["pto"]
    assert pto.count("loc=mat") >= 4 and "_pong" in pto


def test_no_prefetch_of_a_tensor_the_loop_stores():
    @pypto.jit
    def inplace(x, n, BLOCK: pl.constexpr):
        for i in pl.range(0, n, BLOCK, num_stages=2):
            pl.store(x, [i], pl.load(x, [i], [BLOCK]) * 2)

    x = np.arange(100, dtype=np.float32)
    expect = x * 2
    inplace[(1,)](x, 100, BLOCK=16)
    np.testing.assert_array_equal(x, expect)
    assert "_pong" not in inplace.compile(x, 100, BLOCK=16).asm["pto"]


def test_num_stages_must_be_one_or_two():
    @pypto.jit
    def bad(x, n):
        for i in pl.range(0, n, 16, num_stages=3):
            pl.store(x, [i], pl.load(x, [i], [16]))

    with pytest.raises(CompilationError, match="num_stages must be 1 or 2"):
        bad[(1,)](np.zeros(16, np.float32), 16)


# -- cube / vector split ------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(64, 96, 200), (33, 47, 70), (32, 32, 32)])
def test_matmul_bias_sigmoid_splits_into_cube_and_vector_parts(shape):
    M, N, K = shape
    rng = np.random.default_rng(M)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    bias = rng.standard_normal((1, N)).astype(np.float32)
    c = np.zeros((M, N), np.float32)
    grid = (-(-M // 32), -(-N // 32))
    mm_bias_sigmoid[grid](a, b, bias, c, K, BM=32, BN=32, BK=32)
    ref = 1 / (1 + np.exp(-(a.astype(np.float32) @ b.astype(np.float32) + bias)))
    np.testing.assert_allclose(c, ref, rtol=1e-3, atol=1e-3)
    kernel = mm_bias_sigmoid.compile(a, b, bias, c, K, BM=32, BN=32, BK=32)
    pto = kernel.asm["pto"]
    assert kernel.metadata["kind"] == "mixed"
    cube = pto[pto.index("@mm_bias_sigmoid_cube"):pto.index("@mm_bias_sigmoid_vector")]
    vector = pto[pto.index("@mm_bias_sigmoid_vector"):]
    assert "kernel_kind<cube>" in cube and "kernel_kind<vector>" in vector
    assert "pto.tmatmul" in cube and "loc=vec" not in cube
    # the cube adds the bias row as it multiplies (passes/cube_epilogue.py)
    assert "pto.tmatmul.bias" in cube and "pto.tcolexpandadd" not in vector
    assert "loc=acc" not in vector and "tmatmul" not in vector
    assert "pto.sync.set #pto.pipe<PIPE_FIX>, 15" in cube    # FFTS mode 2: cube -> vector
    assert "pto.sync.wait #pto.pipe<PIPE_MTE2>, 15" in vector
    assert "pto.set_ffts %pypto_ffts" in cube and "pto.set_ffts %pypto_ffts" in vector
    assert "pypto_workspace0" in cube and "pypto_workspace0" in vector


@pypto.jit
def exp_of_partial_products(a, c, K):
    acc = pl.zeros((16, 16), pl.float32)
    total = pl.zeros((16, 16), pl.float32)
    for k in range(0, K, 16):
        acc = pl.matmul(pl.load(a, [0, k], [16, 16]), pl.load(a, [0, k], [16, 16]), acc=acc)
        total = total + pl.exp(acc * 0.01)
    pl.store(c, [0, 0], total)


def _partial_products_reference(a):
    a32 = a.astype(np.float32)
    partial = np.cumsum([a32[:, k:k + 16] @ a32[:, k:k + 16] for k in range(0, 64, 16)], axis=0)
    return np.exp(partial * 0.01).sum(axis=0)


def test_matmul_result_read_by_vector_code_inside_its_loop():
    # rejected ("inside a loop or branch") before in-loop hand-offs: every iteration's partial
    # product now goes to the vector core through the workspace, and the host interleaves
    a = np.random.default_rng(3).standard_normal((16, 64)).astype(np.float16)
    c = np.zeros((16, 16), np.float32)
    exp_of_partial_products[(1,)](a, c, 64)
    np.testing.assert_allclose(c, _partial_products_reference(a), rtol=1e-4)
    kernel = exp_of_partial_products.compile(a, c, 64)
    assert kernel.metadata["kind"] == "mixed"
    pto = kernel.asm["pto"]
    cube, vector = pto[:pto.index("kernel_kind<vector>")], pto[pto.index("kernel_kind<vector>"):]
    # inside the loop: the cube signals after storing acc, the vector core acknowledges its
    # load, and the cube waits for that before it stores into the slot again; the slots are a
    # FIFO of HAND_OFF_FIFO (iteration i in slot i % 2), so the vector core primes that many
    # acknowledgements before the loop, which the cube takes back after it
    fifo = HAND_OFF_FIFO
    assert cube.count("pto.sync.set #pto.pipe<PIPE_FIX>") == 1
    assert cube.count("pto.sync.wait #pto.pipe<PIPE_FIX>") == 1 + fifo
    loop = cube[cube.index("scf.for"):]
    assert loop.index("pto.sync.wait #pto.pipe<PIPE_FIX>") < loop.index("pto.tstore")
    # the vector part on sub-block 0, its skeleton on sub-block 1: each primes and
    # acknowledges
    part, skeleton = vector.split("} else {")
    assert part.count("pto.sync.set #pto.pipe<PIPE_MTE2>") == 1 + fifo
    assert skeleton.count("pto.sync.set #pto.pipe<PIPE_MTE2>") == 1 + fifo


@pytest.mark.slow
def test_an_in_loop_hand_off_runs_on_pto_isa(monkeypatch):
    # the two parts on two threads: without the acknowledgement the cube would overwrite the
    # slot before the vector core read it
    from tests.engines.tools import TOOLS, needs_tools
    if TOOLS is None:
        pytest.skip(needs_tools.kwargs["reason"])
    monkeypatch.setenv("PYPTO_ENGINE", "pto-isa")
    a = np.random.default_rng(3).standard_normal((16, 64)).astype(np.float16)
    c = np.zeros((16, 16), np.float32)
    exp_of_partial_products[(1,)](a, c, 64)
    np.testing.assert_allclose(c, _partial_products_reference(a), rtol=1e-4)


# -- cross-core sync ----------------------------------------------------------------------------

@pypto.jit
def two_phase_sum(x, partial, out, BLOCK: pl.constexpr, BLOCKS: pl.constexpr):
    pid = pl.program_id(0)
    pl.store(partial, [pid], pl.reshape(pl.sum(pl.load(x, [pid * BLOCK], [BLOCK])), (1,)))
    pl.barrier()
    total = pl.sum(pl.load(partial, [0], [BLOCKS]))
    pl.store(out, [pid], pl.reshape(total, (1,)))      # every block sees every partial sum


@pytest.mark.parametrize("interpret", [False, True])
def test_barrier_two_phase_reduction_over_8_blocks(interpret, monkeypatch):
    if interpret:
        monkeypatch.setenv("PYPTO_INTERPRET", "1")
    x = np.random.default_rng(0).random(8 * 256).astype(np.float32)
    partial = np.zeros(8, np.float32)
    out = np.zeros(8, np.float32)
    for _ in range(3):
        out[:] = 0
        two_phase_sum[(8,)](x, partial, out, BLOCK=256, BLOCKS=8)
        np.testing.assert_allclose(out, np.full(8, x.sum()), rtol=1e-5)
    pto = two_phase_sum.compile(x, partial, out, BLOCK=256, BLOCKS=8).asm["pto"]
    # pto-isa's SYNCALL on the vector cores: drain, FFTS mode 0 on flag 14, wait for all
    assert "pto.barrier #pto.pipe<PIPE_ALL>\n    pto.sync.set #pto.pipe<PIPE_MTE3>, 14 " \
        "{ffts_mode = 0 : i32}\n    pto.sync.wait #pto.pipe<PIPE_MTE3>, 14" in pto


def test_barrier_grid_larger_than_the_cores_is_a_clear_error():
    x = np.zeros(64 * 16, np.float32)
    with pytest.raises(ValueError, match="more blocks than the 48 cores"):
        two_phase_sum[(64,)](x, np.zeros(64, np.float32), np.zeros(64, np.float32),
                             BLOCK=16, BLOCKS=64)


def test_signal_and_wait_between_blocks_are_refused_for_the_npu():
    """A2/A3's FFTS flags reach all cores of a kind or a cluster's other half, never one
    chosen block, and carry no count: pl.signal / pl.wait have no form (docs/pto.md)."""
    @pypto.jit
    def broadcast(x, out, BLOCK: pl.constexpr):
        pid = pl.program_id(0)
        if pid == 0:
            pl.store(x, [0], pl.load(x, [0], [BLOCK]) + 1.0)
            pl.signal(2, count=3)
        else:
            pl.wait(2)
            pl.store(out, [pid * BLOCK], pl.load(x, [0], [BLOCK]) * 10.0)

    with pytest.raises(NotOnChip, match="pl.signal: A2/A3 has no flag from one block to "
                                        "another.*Use pl.barrier"):
        broadcast[(4,)](np.zeros(16, np.float32), np.zeros(64, np.float32), BLOCK=16)


def test_a_barrier_some_block_skips_is_reported_not_hung(monkeypatch):
    monkeypatch.setenv("PYPTO_SYNC_TIMEOUT", "1")

    @pypto.jit
    def stuck(x):
        pl.store(x, [0], pl.load(x, [0], [16]))
        if pl.program_id(0) == 0:
            pl.barrier()

    with pytest.raises(RuntimeError, match="deadlocked"):
        stuck[(2,)](np.zeros(16, np.float32))


def test_cross_core_arguments_are_checked():
    @pypto.jit
    def bad(x):
        pl.signal(16)

    with pytest.raises(CompilationError, match=r"signal\(\) flag must be .* 0\.\.15"):
        bad[(1,)](np.zeros(16, np.float32))


# -- explicit asynchrony ------------------------------------------------------------------------

@pypto.jit
def explicit_double_buffer(x, out, n_tiles, TILE: pl.constexpr):
    ping = pl.alloc_buffer((TILE,), pl.float32)
    pong = pl.local_buffer((TILE,), dtype=pl.float32)
    pl.async_load(x[0:TILE], ping)
    pl.synchronize()
    for i in range(0, n_tiles, 2):
        pl.async_load(x, pong, offsets=[(i + 1) * TILE])
        pl.store(out, [i * TILE], ping * 2.0)
        pl.synchronize()
        pl.async_load(x[(i + 2) * TILE:(i + 3) * TILE], ping)
        pl.store(out, [(i + 1) * TILE], pong * 2.0)
        pl.synchronize()


def test_explicit_async_loads_with_two_buffers():
    x = np.arange(8 * 64, dtype=np.float32)
    out = np.zeros_like(x)
    explicit_double_buffer[(1,)](x, out, 8, TILE=64)
    np.testing.assert_array_equal(out, 2 * x)


def test_reading_a_buffer_before_synchronize_is_a_compile_error():
    @pypto.jit
    def early(x, out):
        buf = pl.alloc_buffer((16,), pl.float32)
        pl.async_load(x, buf)
        pl.store(out, [0], buf + 1.0)

    with pytest.raises(CompilationError) as e:
        early[(1,)](np.zeros(16, np.float32), np.zeros(16, np.float32))
    assert "'buf' is read before pl.synchronize()" in str(e.value)
    assert "buf + 1.0" in str(e.value)           # the offending source line


def test_async_load_left_pending_at_the_end_of_an_iteration_is_an_error():
    @pypto.jit
    def leaky(x, out, n):
        buf = pl.alloc_buffer((16,), pl.float32)
        for i in range(n):
            pl.async_load(x, buf, offsets=[i * 16])
        pl.synchronize()
        pl.store(out, [0], buf)

    with pytest.raises(CompilationError, match="not waited for before the loop iteration"):
        leaky[(1,)](np.zeros(64, np.float32), np.zeros(16, np.float32), 4)


def test_async_load_slice_shape_must_match_the_buffer():
    @pypto.jit
    def mismatch(x):
        buf = pl.alloc_buffer((16,), pl.float32)
        pl.async_load(x[0:8], buf)

    with pytest.raises(CompilationError, match="slice has shape"):
        mismatch[(1,)](np.zeros(64, np.float32))


# -- capacities ---------------------------------------------------------------------------------

@pypto.jit
def big_tile(x, out, ROWS: pl.constexpr):
    t = pl.load(x, [0, 0], [ROWS, 1024])
    pl.store(out, [0, 0], pl.exp(t) + t)


def test_ub_overflow_names_the_buffer_sizes_and_tiles():
    x = np.zeros((64, 1024), np.float32)
    with pytest.raises(CompilationError) as e:
        big_tile[(1,)](x, x.copy(), ROWS=64)
    msg = str(e.value)
    assert "UB (vec) overflow on ascend910b1" in msg and str(UB_USABLE) in msg
    assert "tile<64x1024xf32" in msg and "smaller" in msg
    big_tile[(1,)](x, x.copy(), ROWS=8)       # the same kernel fits with a smaller tile


@pytest.mark.parametrize("shape, buffer", [((256, 256, 64), "L0A (left)"),
                                           ((64, 256, 256), "L0B (right)"),
                                           ((256, 16, 256), "L0C (acc)")])
def test_cube_buffer_limits(shape, buffer):
    M, K, N = shape

    @pypto.jit
    def mm(a, b, c, M: pl.constexpr, K: pl.constexpr, N: pl.constexpr):
        pl.store(c, [0, 0], pl.matmul(pl.load(a, [0, 0], [M, K]), pl.load(b, [0, 0], [K, N])))

    with pytest.raises(CompilationError, match=re.escape(buffer) + " overflow"):
        mm[(1,)](np.zeros((M, K), np.float32), np.zeros((K, N), np.float32),
                 np.zeros((M, N), np.float32), M=M, K=K, N=N)


def test_barrier_grid_larger_than_the_cores_is_refused_by_the_interpreter_too(monkeypatch):
    monkeypatch.setenv("PYPTO_INTERPRET", "1")
    x = np.zeros(64 * 16, np.float32)
    with pytest.raises(ValueError, match="more blocks than the 48 cores"):
        two_phase_sum[(64,)](x, np.zeros(64, np.float32), np.zeros(64, np.float32),
                             BLOCK=16, BLOCKS=64)


def test_pto_text_does_not_depend_on_what_was_compiled_before(monkeypatch):
    x = np.zeros((64, 64), np.float32)
    first = row_softmax.compile(x, x, 64, N=64, BM=8, STAGES=2).asm["pto"]
    a = np.zeros((64, 64), np.float16)
    mm_pipelined.compile(a, a, np.zeros((64, 64), np.float32), 64, BM=32, BN=32, BK=32,
                         STAGES=2)
    row_softmax._kernels.clear()
    monkeypatch.setenv("PYPTO_DISABLE_CACHE", "1")
    assert row_softmax.compile(x, x, 64, N=64, BM=8, STAGES=2).asm["pto"] == first


# -- advanced mode --------------------------------------------------------------------------------

@pypto.jit(auto_sync=False)
def manual_add(x, y, out, FLAGS: pl.constexpr):
    a = pl.load(x, [0], [64])
    b = pl.load(y, [0], [64])
    if FLAGS:
        pl.set_flag("MTE2", "V", 0)
        pl.wait_flag("MTE2", "V", 0)
    c = a + b
    pl.set_flag("V", "MTE3", 1)
    pl.wait_flag("V", "MTE3", 1)
    pl.store(out, [0], c)


def test_advanced_mode_with_the_right_flags_runs():
    x = np.arange(64, dtype=np.float32)
    out = np.zeros_like(x)
    manual_add[(1,)](x, x, out, FLAGS=True)
    np.testing.assert_array_equal(out, 2 * x)
    pto = manual_add.compile(x, x, out, FLAGS=True).asm["pto"]
    assert pto.count("pto.set_flag") == 2        # the user's, and no more


def test_advanced_mode_race_is_reported_with_both_instructions():
    from pypto.compiler.pto.passes.hazards import HazardError
    x = np.zeros(64, np.float32)
    with pytest.raises(HazardError) as e:
        manual_add[(1,)](x, x, x.copy(), FLAGS=False)
    msg = str(e.value)
    assert "RAW" in msg and "pto.tload" in msg and "pto.tadd" in msg and "MTE2" in msg


def test_advanced_mode_flag_arguments_are_checked():
    @pypto.jit(auto_sync=False)
    def bad(x):
        pl.set_flag("MTE2", "VEC", 0)

    with pytest.raises(CompilationError, match="target pipe must be one of"):
        bad[(1,)](np.zeros(16, np.float32))


def test_ub_rows_are_32_byte_aligned_in_the_plan():
    """A row-major UB tile's rows start on 32-byte boundaries on the chip: (8, 100) float16
    rows of 200 bytes take 224 each."""
    @pypto.jit
    def copy(x, out):
        pl.store(out, [0, 0], pl.load(x, [0, 0], [8, 100]))

    x = np.random.default_rng(0).standard_normal((8, 100)).astype(np.float16)
    out = np.zeros_like(x)
    copy[(1,)](x, out)
    np.testing.assert_array_equal(out, x)
    assert copy.compile(x, out).metadata["buffer_bytes"]["vec"] == 8 * 224


def test_ub_tile_types_print_allocated_and_valid_sizes():
    @pypto.jit
    def row_max(x, out):
        t = pl.load(x, [0, 0], [8, 100])
        pl.store(out, [0, 0], t + pl.max(t, axis=1, keepdims=True))

    x = np.zeros((8, 100), np.float16)
    pto = row_max.compile(x, x.copy()).asm["pto"]
    assert "rows=8, cols=112, v_row=8, v_col=100, blayout=row_major" in pto
    assert "rows=16, cols=1, v_row=8, v_col=1, blayout=col_major" in pto


def test_alloc_buffer_costs_no_instruction():
    x = np.arange(8 * 64, dtype=np.float32)
    pto = explicit_double_buffer.compile(x, x.copy(), 8, TILE=64).asm["pto"]
    assert "pto.texpands" not in pto        # the buffers are UB space, not a zero fill


@pytest.mark.parametrize("interpret", [False, True])
def test_reading_an_unfilled_buffer_is_a_compile_error(interpret, monkeypatch):
    if interpret:
        monkeypatch.setenv("PYPTO_INTERPRET", "1")

    @pypto.jit
    def unfilled(x, out, n):
        buf = pl.alloc_buffer((16,), pl.float32)
        for i in range(n):
            pl.store(out, [i * 16], buf + 1.0)
            pl.async_load(x, buf, offsets=[i * 16])
            pl.synchronize()

    with pytest.raises(CompilationError, match="alloc_buffer at line .* is read before any "
                                               "async_load fills it"):
        unfilled[(1,)](np.zeros(64, np.float32), np.zeros(64, np.float32), 4)


@pypto.jit
def exp_of_partial_products_stages2(a, c, K):
    """``exp_of_partial_products`` with its K loop double-buffered."""
    acc = pl.zeros((16, 16), pl.float32)
    total = pl.zeros((16, 16), pl.float32)
    for k in pl.range(0, K, 16, num_stages=2):
        acc = pl.matmul(pl.load(a, [0, k], [16, 16]), pl.load(a, [0, k], [16, 16]), acc=acc)
        total = total + pl.exp(acc * 0.01)
    pl.store(c, [0, 0], total)


def test_a_double_buffered_in_loop_hand_off_declares_each_tile_once():
    """The host's interleaved copy is double-buffered after the program and numbered its
    pong tiles from 0 again into the program's own tile list: the .pto declared
    ``%mat.._pong0`` twice, which PTOAS refused ("redefinition of SSA value"), so flash
    attention with num_stages=2 compiled at no tile size."""
    import re
    a = np.random.default_rng(4).standard_normal((16, 64)).astype(np.float16)
    c = np.zeros((16, 16), np.float32)
    exp_of_partial_products_stages2[(1,)](a, c, 64)
    np.testing.assert_allclose(c, _partial_products_reference(a), rtol=1e-4)
    pto = exp_of_partial_products_stages2.compile(a, c, 64).asm["pto"]
    assert "_pong" in pto
    for function in pto.split("func.func")[1:]:
        names = re.findall(r"^\s*(%[\w]+) = pto\.alloc_tile", function, re.M)
        assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    # the vector part's only load reads the workspace, which the cube writes: never
    # prefetched (the flag it waits for says when the slot holds the next tile)
    assert "_pong" not in pto[pto.index("kernel_kind<vector>"):]


def test_a_double_buffered_hand_off_runs_on_pto_isa(monkeypatch):
    """Prefetched, the workspace load read the slot before the cube stored the next partial
    product: max error 0.5 (of 4.3) on pto-isa's simulator, and flash attention with
    num_stages=2 wrote zeros."""
    from tests.engines.tools import TOOLS, needs_tools
    if TOOLS is None:
        pytest.skip(needs_tools.kwargs["reason"])
    monkeypatch.setenv("PYPTO_PTOISA_OPT", "O0")
    kernel = pypto.jit(exp_of_partial_products_stages2.fn, engine="pto-isa")
    a = np.random.default_rng(4).standard_normal((16, 64)).astype(np.float16)
    c = np.zeros((16, 16), np.float32)
    kernel[(1,)](a, c, 64)
    np.testing.assert_allclose(c, _partial_products_reference(a), rtol=1e-4)
