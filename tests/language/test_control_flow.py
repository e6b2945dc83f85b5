"""Control flow in kernels: loops with carried tiles and scalars, runtime and compile-time
``if``, ``while``, inlined jit helpers, ``pl.static_range`` and the compile-time builtins.

Every kernel runs twice, compiled and in the reference interpreter (``PYPTO_INTERPRET=1``),
and both results are compared with a numpy computation of what the Python code means.
"""
import os
import threading

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.errors import NotOnChip

# -- helpers --------------------------------------------------------------------------------------


def run_both(kernel, grid, *args, **kwargs):
    """Run ``kernel[grid]`` compiled and interpreted on separate copies of every array argument;
    returns (compiled arrays, interpreted arrays) in argument order."""
    results = []
    for interpret in (False, True):
        copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        saved = os.environ.get("PYPTO_INTERPRET")
        os.environ["PYPTO_INTERPRET"] = "1" if interpret else "0"
        try:
            kernel[grid](*copies, **kwargs)
        finally:
            if saved is None:
                del os.environ["PYPTO_INTERPRET"]
            else:
                os.environ["PYPTO_INTERPRET"] = saved
        results.append([c for c in copies if isinstance(c, np.ndarray)])
    return results


def check(kernel, grid, args, expected, kwargs=None, exact=True):
    """Both ways of running agree with ``expected`` (one array per array argument, None to
    skip one)."""
    compiled, interpreted = run_both(kernel, grid, *args, **(kwargs or {}))
    for got_c, got_i, want in zip(compiled, interpreted, expected):
        if want is None:
            continue
        want = np.asarray(want).astype(got_c.dtype)
        if exact:
            np.testing.assert_array_equal(got_c, want, err_msg="compiled")
            np.testing.assert_array_equal(got_i, want, err_msg="interpreted")
        else:
            np.testing.assert_allclose(got_c, want, rtol=1e-5, atol=1e-6, err_msg="compiled")
            np.testing.assert_allclose(got_i, want, rtol=1e-5, atol=1e-6, err_msg="interpreted")
    return compiled, interpreted


# -- loops with carried values --------------------------------------------------------------------

@pypto.jit
def carried_tile_and_scalars(x, out, stats, n, BLOCK: pl.constexpr):
    """acc: tile sum of the blocks; count: an int scalar; total: a float scalar."""
    acc = pl.zeros((BLOCK,), dtype=pl.float32)
    count = 0
    total = 0.0
    for i in range(0, n, BLOCK):
        acc = acc + pl.load(x, offsets=(i,), shape=(BLOCK,))
        count += 1
        total = total + i * 0.5
    pl.store(out, offsets=(0,), value=acc)
    pl.store(stats, offsets=(0,), value=pl.full((1,), count, dtype=pl.float32))
    pl.store(stats, offsets=(1,), value=pl.full((1,), total, dtype=pl.float32))


@pytest.mark.parametrize("n", [0, 1, 16, 100, 257])
def test_loop_carried_tile_and_scalars(n):
    block = 16
    x = np.arange(n, dtype=np.float32) * 0.25 - 3
    padded = np.zeros(max(1, -(-n // block)) * block, np.float32)
    padded[:n] = x
    starts = list(range(0, n, block))
    expected_acc = padded.reshape(-1, block)[:len(starts)].sum(axis=0) if starts else \
        np.zeros(block, np.float32)
    stats = [len(starts), sum(i * 0.5 for i in starts)]
    check(carried_tile_and_scalars, (1,),
          [x if n else np.zeros(1, np.float32), np.full(block, 9, np.float32),
           np.zeros(2, np.float32), n],
          [None, expected_acc, stats], kwargs={"BLOCK": block}, exact=False)


def test_loop_with_zero_iterations_keeps_initial_values():
    """n = 0: the loop body never runs; the carried tile and scalars keep their inits."""
    x = np.ones(16, np.float32)
    compiled, interpreted = check(carried_tile_and_scalars, (1,),
                                  [x, np.full(16, 9, np.float32), np.full(2, 9, np.float32), 0],
                                  [None, np.zeros(16), [0, 0]], kwargs={"BLOCK": 16})
    assert compiled[1].sum() == 0 and interpreted[1].sum() == 0


@pypto.jit
def int_scalar_updated_with_floats(out, n):
    acc = 0                     # an int before the loop ...
    for i in range(n):
        acc = acc + 0.5         # ... a float after one iteration
    k = 0
    total = 0
    while k < n:
        total = total + 0.25
        k += 1
    pl.store(out, offsets=(0,), value=pl.full((1,), acc, dtype=pl.float32))
    pl.store(out, offsets=(1,), value=pl.full((1,), total, dtype=pl.float32))


def test_int_scalar_updated_with_floats_in_loops():
    check(int_scalar_updated_with_floats, (1,), [np.zeros(2, np.float32), 5], [[2.5, 1.25]])


@pypto.jit
def loop_variable_after_loop(out, n):
    i = 100
    for i in range(n):
        pass
    pl.store(out, offsets=(0,), value=pl.full((1,), i, dtype=pl.int32))


def test_loop_variable_keeps_its_last_value():
    check(loop_variable_after_loop, (1,), [np.zeros(1, np.int32), 5], [[4]])


@pypto.jit
def nested_loops(x, out, rows, cols, TR: pl.constexpr, TC: pl.constexpr):
    """out[j] = sum of every (TR, TC) block of x (over both loops); also counts blocks."""
    acc = pl.zeros((TR, TC), dtype=pl.float32)
    blocks = 0
    for r in range(0, rows, TR):
        row_acc = pl.zeros((TR, TC), dtype=pl.float32)
        for c in pl.range(0, cols, TC, num_stages=2):
            row_acc = row_acc + pl.load(x, offsets=(r, c), shape=(TR, TC))
            blocks = blocks + 1
        acc = acc + row_acc * 2.0
    pl.store(out, offsets=(0, 0), value=acc + blocks)


@pytest.mark.parametrize("shape", [(8, 8), (20, 33), (1, 70)])
def test_nested_loops(shape):
    tr, tc = 4, 8
    rows, cols = shape
    x = np.arange(rows * cols, dtype=np.float32).reshape(shape) % 7
    nr, nc = -(-rows // tr), -(-cols // tc)
    padded = np.zeros((nr * tr, nc * tc), np.float32)
    padded[:rows, :cols] = x
    expected = padded.reshape(nr, tr, nc, tc).sum(axis=(0, 2)) * 2 + nr * nc
    check(nested_loops, (1,), [x, np.zeros((tr, tc), np.float32), rows, cols],
          [None, expected], kwargs={"TR": tr, "TC": tc})


@pypto.jit
def stepped_loop(out, start, stop, step):
    count = pl.zeros((1,), dtype=pl.int32)
    last = -1
    for i in range(start, stop, step):
        count = count + 1
        last = i
    pl.store(out, offsets=(0,), value=count)
    pl.store(out, offsets=(1,), value=pl.full((1,), last, dtype=pl.int32))


@pytest.mark.parametrize("start,stop,step,trips,last", [
    (0, 10, 1, 10, 9), (3, 10, 4, 2, 7), (10, 0, 1, 0, -1), (5, 5, 2, 0, -1),
    (0, 10, 0, 0, -1),          # zero step: no iteration (and no hang)
    (10, 0, -1, 0, -1),         # negative step: no iteration, unlike Python's range
    (0, 10, -3, 0, -1),
])
def test_runtime_step(start, stop, step, trips, last):
    """A non-positive runtime step runs no iteration (docs/tile_ir.md, scf.for). The kernel
    runs in a thread so that a hang fails the test instead of blocking the run."""
    box = {}

    def target():
        try:
            box["result"] = run_both(stepped_loop, (1,), np.full(2, 77, np.int32), start,
                                     stop, step)
        except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
            box["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout=60)
    assert not t.is_alive(), f"range({start}, {stop}, {step}) did not terminate"
    if "error" in box:
        raise box["error"]
    compiled, interpreted = box["result"]
    np.testing.assert_array_equal(compiled[0], [trips, last])
    np.testing.assert_array_equal(interpreted[0], [trips, last])


def test_constant_non_positive_step_is_a_compile_error():
    @pypto.jit
    def bad_step(out):
        acc = pl.zeros((1,), dtype=pl.int32)
        for i in range(10, 0, -1):
            acc = acc + 1
        pl.store(out, offsets=(0,), value=acc)

    with pytest.raises(pypto.CompilationError, match="step must be positive"):
        bad_step[(1,)](np.zeros(1, np.int32))


# -- runtime if -----------------------------------------------------------------------------------

@pypto.jit
def if_merges_tile_and_scalar(x, out, sout, flag, BLOCK: pl.constexpr):
    t = pl.load(x, offsets=(0,), shape=(BLOCK,))
    scale = 1.0
    if flag > 0:
        t = t * 2.0 + 1.0
        scale = 3.0
        only_here = t + 1.0     # bound in one branch only: not visible after the if  # noqa
    else:
        t = pl.maximum(t, 0.0)
    pl.store(out, offsets=(0,), value=t * scale)
    pl.store(sout, offsets=(0,), value=pl.full((1,), scale, dtype=pl.float32))


@pytest.mark.parametrize("flag", [-2, 0, 1, 7])
def test_runtime_if_merges_tile_and_scalar(flag):
    x = np.linspace(-4, 4, 16, dtype=np.float32)
    if flag > 0:
        t, scale = x * 2 + 1, 3.0
    else:
        t, scale = np.maximum(x, 0), 1.0
    check(if_merges_tile_and_scalar, (1,),
          [x, np.zeros(16, np.float32), np.zeros(1, np.float32), flag],
          [None, t * scale, [scale]], kwargs={"BLOCK": 16})


@pypto.jit
def elif_chain(x, out, sout, mode):
    t = pl.load(x, offsets=(0,), shape=(8,))
    if mode == 0:
        r = t
        s = 1                   # int in this branch, float in others: merged as float
    elif mode == 1:
        r = t * 2.0
        s = 2.5
    elif mode < 5:
        r = t + 100.0
        s = -3
    else:
        r = -t
        s = 7.25
    pl.store(out, offsets=(0,), value=r)
    pl.store(sout, offsets=(0,), value=pl.full((1,), s, dtype=pl.float32))


@pytest.mark.parametrize("mode", [-1, 0, 1, 2, 4, 5, 9])
def test_elif_chain(mode):
    x = np.arange(8, dtype=np.float32) - 3
    if mode == 0:
        r, s = x, 1
    elif mode == 1:
        r, s = x * 2, 2.5
    elif mode < 5:
        r, s = x + 100, -3
    else:
        r, s = -x, 7.25
    check(elif_chain, (1,), [x, np.zeros(8, np.float32), np.zeros(1, np.float32), mode],
          [None, r, [s]])


@pypto.jit
def if_on_program_id(x, out, BLOCK: pl.constexpr):
    """Blocks take different branches: even blocks negate, odd blocks square."""
    pid = pl.program_id(0)
    t = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    if pid % 2 == 0 and pid < 6:
        t = -t
    else:
        t = t * t
    pl.store(out, offsets=(pid * BLOCK,), value=t)


def test_if_differs_per_block():
    x = np.arange(64, dtype=np.float32)
    blocks = x.reshape(8, 8)
    expected = np.where((np.arange(8)[:, None] % 2 == 0) & (np.arange(8)[:, None] < 6),
                        -blocks, blocks * blocks).ravel()
    check(if_on_program_id, (8,), [x, np.zeros(64, np.float32)], [None, expected],
          kwargs={"BLOCK": 8})


@pypto.jit
def if_inside_loop(x, out, n, BLOCK: pl.constexpr):
    """Blocks whose first element is positive are accumulated, the others subtracted."""
    acc = pl.zeros((BLOCK,), dtype=pl.float32)
    pos = 0
    for i in range(0, n, BLOCK):
        t = pl.load(x, offsets=(i,), shape=(BLOCK,))
        if i % (2 * BLOCK) == 0:
            acc = acc + t
            pos += 1
        else:
            acc = acc - t
    pl.store(out, offsets=(0,), value=acc + pos * 1000)


def test_if_inside_loop():
    x = np.random.default_rng(3).standard_normal(64).astype(np.float32)
    acc = np.zeros(8, np.float32)
    pos = 0
    for k, b in enumerate(x.reshape(8, 8)):
        if k % 2 == 0:
            acc, pos = acc + b, pos + 1
        else:
            acc = acc - b
    check(if_inside_loop, (1,), [x, np.zeros(8, np.float32), 64], [None, acc + pos * 1000],
          kwargs={"BLOCK": 8}, exact=False)


@pypto.jit
def if_on_tile_value(x, out):
    t = pl.load(x, offsets=(0,), shape=(8,))
    if pl.sum(t) > 0:
        t = t + 1
    pl.store(out, offsets=(0,), value=t)


def test_if_on_a_tile_is_rejected_at_its_line():
    """Branching on data held in a tile (even a 0-d one) is not supported: a clear error."""
    with pytest.raises(pypto.CompilationError, match=r"must be a scalar, got a tile.*pl\.where\(cond, a, b\)") as e:
        if_on_tile_value[(1,)](np.ones(8, np.float32), np.zeros(8, np.float32))
    assert e.value.loc.line == if_on_tile_value.fn.__code__.co_firstlineno + 3


@pypto.jit
def conditional_expression(out, a, b):
    v = a if a > b else b * 2
    pl.store(out, offsets=(0,), value=pl.full((1,), v, dtype=pl.int32))


@pytest.mark.parametrize("a,b", [(5, 3), (3, 5), (-1, -1)])
def test_conditional_expression_on_scalars(a, b):
    check(conditional_expression, (1,), [np.zeros(1, np.int32), a, b],
          [[a if a > b else b * 2]])


# -- while ----------------------------------------------------------------------------------------

@pypto.jit
def halve_until(x, out, iters, limit):
    """Halve a tile while the runtime counter is below ``limit`` and count bits of ``limit``."""
    t = pl.load(x, offsets=(0,), shape=(16,))
    i = 0
    while i < limit:
        t = t * 0.5
        i += 1
    bits = 0
    v = limit
    while v > 0:
        v = v // 2
        bits += 1
    pl.store(out, offsets=(0,), value=t)
    # (pl.where of two int scalars would be an int64 tile, which the NPU refuses)
    pl.store(iters, offsets=(0,), value=pl.full((2,), i, dtype=pl.int32) +
             pl.where(pl.arange(2) == 1, pl.full((2,), bits - i, dtype=pl.int32), 0))


@pytest.mark.parametrize("limit", [0, 2, 3, 10, -4])
def test_while_trip_count_from_runtime_argument(limit):
    x = np.arange(16, dtype=np.float32) * 1024
    trips = max(limit, 0)
    bits = int(limit).bit_length() if limit > 0 else 0
    check(halve_until, (1,), [x, np.zeros(16, np.float32), np.zeros(2, np.int32), limit],
          [None, x * 0.5 ** trips, [trips, bits]])


def test_int64_tile_from_loop_scalars_is_refused():
    """Loop-carried int scalars are int64, so ``pl.where`` of two of them is an int64 tile,
    which A2/A3 has no arithmetic for: a compile error at its line (the interpreter runs it)."""
    @pypto.jit
    def where_of_scalars(out, limit):
        i = 0
        while i < limit:
            i += 1
        pl.store(out, offsets=(0,), value=pl.where(pl.arange(2) == 1, i, 0).to(pl.int32))

    with pytest.raises(NotOnChip, match="int64 tile") as got:
        where_of_scalars[(1,)](np.zeros(2, np.int32), 3)
    assert got.value.loc is not None and got.value.loc.line > 0
    out = np.zeros(2, np.int32)
    saved = os.environ.get("PYPTO_INTERPRET")
    os.environ["PYPTO_INTERPRET"] = "1"
    try:
        where_of_scalars[(1,)](out, 3)
    finally:
        if saved is None:
            del os.environ["PYPTO_INTERPRET"]
        else:
            os.environ["PYPTO_INTERPRET"] = saved
    assert out.tolist() == [0, 3]


def test_while_with_an_argument_specialised_to_one():
    """limit == 1 is folded to a constant, so 'i < limit' is constant on entry (0 < 1); the
    loop must still run (it used to be rejected as a constant-true while)."""
    x = np.arange(16, dtype=np.float32) * 1024
    check(halve_until, (1,), [x, np.zeros(16, np.float32), np.zeros(2, np.int32), 1],
          [None, x * 0.5, [1, 1]])


# A while's results used in another block: inside a later if, for or while, or after a later
# while. PTOAS before 0.58 refused each of these (docs/pto.md, "Versions"); with PYPTO_PTOAS
# forced to 0.27 these tests, and their corpus entry, check that it no longer does.

@pypto.jit
def while_result_in_if(x, out, limit):
    t = pl.load(x, offsets=(0,), shape=(16,))
    i = 0
    while i < limit:
        i += 1
    if limit > 1:
        t = t + i
    pl.store(out, offsets=(0,), value=t)


@pypto.jit
def while_result_in_for(x, out, limit):
    t = pl.load(x, offsets=(0,), shape=(16,))
    i = 0
    while i < limit:
        i += 1
    for _ in range(3):
        t = t + i
    pl.store(out, offsets=(0,), value=t)


@pypto.jit
def whiles_in_a_for(x, out, limit):
    """The second while's condition and the sum after it read the first's result."""
    t = pl.load(x, offsets=(0,), shape=(16,))
    for _ in range(2):
        i = 0
        while i < limit:
            i += 1
        j = 0
        while j < i:
            j += 2
        t = t + (i + j)
    pl.store(out, offsets=(0,), value=t)


@pypto.jit
def float_and_bool_while_results(x, out, limit):
    t = pl.load(x, offsets=(0,), shape=(16,))
    i = 0
    s = 1.0
    odd = False
    while i < limit:
        s = s * 1.5
        odd = not odd
        i += 1
    j = 0
    while j < i:
        j += 1
    t = t + s * j
    if odd:
        t = t + 1.0
    pl.store(out, offsets=(0,), value=t)


def _after_whiles(limit):
    i = max(limit, 0)
    j = i + i % 2
    return {
        while_result_in_if: i if limit > 1 else 0,
        while_result_in_for: 3 * i,
        whiles_in_a_for: 2 * (i + j),
        float_and_bool_while_results: 1.5 ** i * i + i % 2,
    }


@pytest.mark.parametrize("limit", [0, 1, 3])
@pytest.mark.parametrize("kernel", list(_after_whiles(0)), ids=lambda k: k.fn.__name__)
def test_while_results_used_in_later_blocks(kernel, limit):
    x = np.arange(16, dtype=np.float32)
    check(kernel, (1,), [x, np.zeros(16, np.float32), limit],
          [None, x + _after_whiles(limit)[kernel]], exact=False)


def test_while_counting_to_a_constant():
    @pypto.jit
    def count_to_three(out):
        i = 0
        while i < 3:
            i += 1
        pl.store(out, offsets=(0,), value=pl.full((1,), i, dtype=pl.int32))

    check(count_to_three, (1,), [np.zeros(1, np.int32)], [[3]])


def test_while_on_constant_false_compiles_to_nothing():
    @pypto.jit
    def never(x, out):
        t = pl.load(x, offsets=(0,), shape=(4,))
        while False:
            t = t + 1
        pl.store(out, offsets=(0,), value=t)

    x = np.arange(4, dtype=np.float32)
    check(never, (1,), [x, np.zeros(4, np.float32)], [None, x])


# -- inlined jit helpers --------------------------------------------------------------------------

@pypto.jit
def min_max(a, b):
    return pl.minimum(a, b), pl.maximum(a, b)


@pypto.jit
def affine(t, scale, shift=0.0):
    return t * scale + shift


@pypto.jit
def uses_helpers(x, y, z, lo_out, hi_out, aff_out, BLOCK: pl.constexpr):
    a = pl.load(x, offsets=(0,), shape=(BLOCK,))
    b = pl.load(y, offsets=(0,), shape=(BLOCK,))
    c = pl.load(z, offsets=(0,), shape=(BLOCK,))
    lo, hi = min_max(a, b)            # a tuple of tiles
    lo3, _ = min_max(lo, c)           # the same helper a second time
    _, hi3 = min_max(hi, c)
    pl.store(lo_out, offsets=(0,), value=lo3)
    pl.store(hi_out, offsets=(0,), value=hi3)
    pl.store(aff_out, offsets=(0,), value=affine(affine(a, 2.0), 0.5, shift=3.0))


def test_helpers_returning_tuples_and_called_twice():
    rng = np.random.default_rng(0)
    x, y, z = (rng.standard_normal(32).astype(np.float32) for _ in range(3))
    lo = np.minimum(np.minimum(x, y), z)
    hi = np.maximum(np.maximum(x, y), z)
    zeros = [np.zeros(32, np.float32) for _ in range(3)]
    check(uses_helpers, (1,), [x, y, z, *zeros], [None, None, None, lo, hi, x * 2 * 0.5 + 3],
          kwargs={"BLOCK": 32})


@pypto.jit
def helper_with_loop(t, n):
    acc = t
    for _ in range(n):
        acc = acc * 2.0
    return acc


@pypto.jit
def calls_helper_with_loop(x, out, n):
    t = pl.load(x, offsets=(0,), shape=(8,))
    pl.store(out, offsets=(0,), value=helper_with_loop(helper_with_loop(t, n), 2))


@pytest.mark.parametrize("n", [0, 3])
def test_helper_with_loop_called_twice(n):
    x = np.arange(8, dtype=np.float32)
    check(calls_helper_with_loop, (1,), [x, np.zeros(8, np.float32), n],
          [None, x * 2.0 ** (n + 2)])


# -- compile-time control flow --------------------------------------------------------------------

@pypto.jit
def unrolled(x, out, N: pl.constexpr):
    acc = pl.zeros((16,), dtype=pl.float32)
    for i in pl.static_range(N):
        acc = acc + pl.load(x, offsets=(i * 16,), shape=(16,)) * (i + 1)
    pl.store(out, offsets=(0,), value=acc)


@pypto.jit
def rolled(x, out, N: pl.constexpr):
    acc = pl.zeros((16,), dtype=pl.float32)
    for i in pl.range(N):
        acc = acc + pl.load(x, offsets=(i * 16,), shape=(16,)) * (i + 1)
    pl.store(out, offsets=(0,), value=acc)


def test_static_range_is_unrolled():
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(16, np.float32)
    expected = sum(x[i * 16:(i + 1) * 16] * (i + 1) for i in range(4))
    check(unrolled, (1,), [x, out], [None, expected], kwargs={"N": 4})
    check(rolled, (1,), [x, out], [None, expected], kwargs={"N": 4})
    unrolled_ir = unrolled.compile(x, out, N=4).asm["tile_ir"]
    rolled_ir = rolled.compile(x, out, N=4).asm["tile_ir"]
    assert "scf.for" not in unrolled_ir
    assert unrolled_ir.count("tile.load") == 4
    assert "scf.for" in rolled_ir


@pypto.jit
def static_range_step(out, START: pl.constexpr, STOP: pl.constexpr, STEP: pl.constexpr):
    acc = pl.zeros((1,), dtype=pl.int32)
    for i in pl.static_range(START, STOP, STEP):
        acc = acc * 10 + i
    pl.store(out, offsets=(0,), value=acc)


@pytest.mark.parametrize("args", [(1, 5, 1), (9, 0, -3), (0, 0, 1), (2, 9, 3)])
def test_static_range_bounds_and_negative_step(args):
    acc = 0
    for i in range(*args):
        acc = acc * 10 + i
    check(static_range_step, (1,), [np.zeros(1, np.int32)], [[acc]],
          kwargs=dict(zip(("START", "STOP", "STEP"), args)))


@pypto.jit
def constexpr_branch(x, out, MODE: pl.constexpr):
    t = pl.load(x, offsets=(0,), shape=(16,))
    if MODE == "double":
        r = t * 2
    elif MODE == "square":
        r = t * t
    else:
        # never compiled unless taken: an undefined name, a 3-D load and a `with` block
        r = t + name_that_does_not_exist  # noqa: F821
        u = pl.load(x, offsets=(0, 0, 0), shape=(2, 2, 2))
        with open("/nonexistent") as f:
            r = f
    pl.store(out, offsets=(0,), value=r)


def test_constexpr_if_compiles_only_the_taken_branch():
    x = np.arange(16, dtype=np.float32)
    check(constexpr_branch, (1,), [x, np.zeros(16, np.float32)], [None, x * 2],
          kwargs={"MODE": "double"})
    check(constexpr_branch, (1,), [x, np.zeros(16, np.float32)], [None, x * x],
          kwargs={"MODE": "square"})
    with pytest.raises(pypto.CompilationError, match="name_that_does_not_exist"):
        constexpr_branch[(1,)](x, np.zeros(16, np.float32), MODE="other")


@pypto.jit
def static_asserts(x, out, BLOCK: pl.constexpr):
    pl.static_assert(BLOCK % 16 == 0, "BLOCK must be a multiple of 16")
    pl.static_assert(BLOCK <= 1024)
    t = pl.load(x, offsets=(0,), shape=(BLOCK,))
    pl.store(out, offsets=(0,), value=t + 1)


def test_static_assert_passing_and_failing():
    x = np.arange(64, dtype=np.float32)
    check(static_asserts, (1,), [x, np.zeros(64, np.float32)], [None, x + 1],
          kwargs={"BLOCK": 64})
    with pytest.raises(pypto.CompilationError,
                       match="static_assert failed: BLOCK must be a multiple of 16") as e:
        static_asserts[(1,)](x, np.zeros(64, np.float32), BLOCK=24)
    assert e.value.loc.line == static_asserts.fn.__code__.co_firstlineno + 2
    with pytest.raises(pypto.CompilationError, match=r"static_assert failed$|static_assert "
                       r"failed\n") as e:
        static_asserts[(1,)](x, np.zeros(64, np.float32), BLOCK=2048)
    assert e.value.loc.line == static_asserts.fn.__code__.co_firstlineno + 3


@pypto.jit
def prints_at_compile_time(x, out, n, BLOCK: pl.constexpr):
    pl.static_print("BLOCK =", BLOCK, "half =", BLOCK // 2, "n:", n)
    t = pl.load(x, offsets=(0,), shape=(BLOCK,))
    pl.store(out, offsets=(0,), value=t)


def test_static_print(capsys, fresh_cache):
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    prints_at_compile_time[(1,)](x, out, 5, BLOCK=8)
    printed = capsys.readouterr().out
    assert "BLOCK = 8 half = 4 n: <runtime" in printed
    assert printed.count("BLOCK =") == 1
    prints_at_compile_time[(1,)](x, out, 6, BLOCK=8)     # same specialisation: no compile
    assert "BLOCK =" not in capsys.readouterr().out
    np.testing.assert_array_equal(out, x)
    saved = os.environ.get("PYPTO_INTERPRET")
    os.environ["PYPTO_INTERPRET"] = "1"
    try:
        prints_at_compile_time[(1,)](x, out, 5, BLOCK=16)
    finally:
        if saved is None:
            del os.environ["PYPTO_INTERPRET"]
        else:
            os.environ["PYPTO_INTERPRET"] = saved
    assert "BLOCK = 16 half = 8" in capsys.readouterr().out


# -- the Tile IR text shows what control flow contains --------------------------------------------

@pypto.jit
def loop_inside_if(x, out, flag, n):
    t = pl.load(x, offsets=(0,), shape=(8,))
    if flag > 0:
        for _ in range(n):
            t = t * 3.0
    pl.store(out, offsets=(0,), value=t)


def test_loop_inside_if():
    x = np.arange(8, dtype=np.float32)
    check(loop_inside_if, (1,), [x, np.zeros(8, np.float32), 2, 2], [None, x * 9])
    check(loop_inside_if, (1,), [x, np.zeros(8, np.float32), 1, 2], [None, x * 9])
    check(loop_inside_if, (1,), [x, np.zeros(8, np.float32), 0, 2], [None, x])


def test_tile_ir_text_shows_ops_inside_if_and_while():
    x = np.arange(8, dtype=np.float32)
    text = loop_inside_if.compile(x, np.zeros(8, np.float32), 2, 2).asm["tile_ir"]
    assert "scf.if" in text                 # flag is not 1: a runtime branch
    assert "scf.for" in text and "tile.binary" in text
    text = halve_until.compile(np.zeros(16, np.float32), np.zeros(16, np.float32),
                               np.zeros(2, np.int32), 3).asm["tile_ir"]
    assert "scf.condition" in text and "{op = mul}" in text
