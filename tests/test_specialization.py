"""Specialisation: which argument properties select a new kernel binary, and the knobs that
change that (``do_not_specialize``, ``dynamic``), the recompile log, and the correctness of
kernels whose tensor extents are only known at run time.

The key of a call holds, per argument: constexpr values; for tensors the dtype, the shape (with
``None`` for dynamic dims), C-contiguity, 32-byte alignment and rank; for ints whether they
equal 1 (then folded to the constant 1) and whether they are divisible by 16; floats never
specialise. Compiles are counted through ``pypto.cache_stats["compiles"]`` with a cache
directory of the test's own (``fresh_cache``), and every kernel is defined inside its test so
that no in-memory table is shared with another test.
"""
import numpy as np
import pytest

import pypto
import pypto.language as pl
from tests.quick import quick_cases


def aligned(shape, dtype, fill=0):
    """A C-contiguous array at a 64-byte aligned address (alignment is part of the key)."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape)) * dtype.itemsize
    buf = np.empty(n + 64, np.uint8)
    start = -buf.ctypes.data % 64
    out = buf[start:start + n].view(dtype).reshape(shape)
    out[...] = fill
    return out


class Compiles:
    """Counts compiles from the moment it is created."""

    def __init__(self):
        self.start = pypto.cache_stats["compiles"]

    @property
    def count(self) -> int:
        return pypto.cache_stats["compiles"] - self.start


# -- ints: == 1 folded, divisibility by 16, do_not_specialize -------------------------------------

def test_int_specialisation_classes(fresh_cache):
    @pypto.jit
    def scale(x, out, n, BLOCK: pl.constexpr):
        t = pl.load(x, offsets=(0,), shape=(BLOCK,))
        pl.store(out, offsets=(0,), value=t * n)

    x = aligned(16, np.float32, 1.5)
    out = aligned(16, np.float32)
    c = Compiles()
    for n, compiles in [(3, 1), (5, 1), (7, 1),       # neither 1 nor a multiple of 16
                        (16, 2), (32, 2), (-48, 2), (0, 2),   # multiples of 16 (0 too)
                        (1, 3),                        # == 1: folded
                        (17, 3), (3, 3)]:
        scale[(1,)](x, out, n, BLOCK=16)
        np.testing.assert_array_equal(out, np.full(16, 1.5 * n, np.float32))
        assert c.count == compiles, f"n={n}"


def test_int_equal_to_one_is_folded_to_a_constant(fresh_cache):
    @pypto.jit
    def scale(x, out, n, BLOCK: pl.constexpr):
        t = pl.load(x, offsets=(0,), shape=(BLOCK,))
        pl.store(out, offsets=(0,), value=t * n)

    x, out = aligned(16, np.float32, 2.0), aligned(16, np.float32)
    folded = scale.compile(x, out, 1, BLOCK=16)
    general = scale.compile(x, out, 3, BLOCK=16)
    assert [p[0] for p in folded.runtime_params] == ["x", "out"]
    assert [p[0] for p in general.runtime_params] == ["x", "out", "n"]
    assert "%n" not in folded.asm["tile_ir"] and "%n" in general.asm["tile_ir"]
    scale[(1,)](x, out, 1, BLOCK=16)
    np.testing.assert_array_equal(out, x)


@pytest.mark.heavy
def test_folded_one_as_loop_bound_and_step(fresh_cache):
    """A 1 folded into a loop's bounds or step must keep the loop's meaning."""
    @pypto.jit
    def count(out, start, stop, step):
        acc = pl.zeros((1,), dtype=pl.int32)
        for i in range(start, stop, step):
            acc = acc + i
        pl.store(out, offsets=(0,), value=acc)

    for args in [(1, 10, 1), (0, 1, 1), (1, 1, 1), (1, 10, 3), (2, 9, 1), (0, 10, 2)]:
        out = aligned(1, np.int32)
        count[(1,)](out, *args)
        assert out[0] == sum(range(*args)), args


def test_do_not_specialize(fresh_cache):
    @pypto.jit(do_not_specialize=["n"])
    def scale(x, out, n, BLOCK: pl.constexpr):
        t = pl.load(x, offsets=(0,), shape=(BLOCK,))
        pl.store(out, offsets=(0,), value=t * n)

    x, out = aligned(16, np.float32, 1.5), aligned(16, np.float32)
    c = Compiles()
    for n in (3, 1, 16, 17, 0, -32):
        scale[(1,)](x, out, n, BLOCK=16)
        np.testing.assert_array_equal(out, np.full(16, 1.5 * n, np.float32))
    assert c.count == 1
    # the one binary keeps n as a runtime parameter, 1 included
    assert [p[0] for p in scale.compile(x, out, 1, BLOCK=16).runtime_params] == ["x", "out", "n"]


def test_floats_never_specialise(fresh_cache):
    @pypto.jit
    def axpy(x, out, alpha, BLOCK: pl.constexpr):
        t = pl.load(x, offsets=(0,), shape=(BLOCK,))
        pl.store(out, offsets=(0,), value=t * alpha)

    x, out = aligned(16, np.float32, 2.0), aligned(16, np.float32)
    c = Compiles()
    for alpha in (1.0, 0.0, 16.0, -2.5):
        axpy[(1,)](x, out, alpha, BLOCK=16)
        np.testing.assert_array_equal(out, np.full(16, 2.0 * alpha, np.float32))
    assert c.count == 1


def test_constexpr_values_each_compile(fresh_cache):
    @pypto.jit
    def fill(out, BLOCK: pl.constexpr, VALUE: pl.constexpr):
        pl.store(out, offsets=(0,), value=pl.full((BLOCK,), VALUE, dtype=pl.float32))

    out = aligned(32, np.float32)
    c = Compiles()
    fill[(1,)](out, BLOCK=16, VALUE=1.0)
    fill[(1,)](out, BLOCK=16, VALUE=1.0)
    fill[(1,)](out, BLOCK=16, VALUE=2.0)
    fill[(1,)](out, BLOCK=32, VALUE=2.0)
    assert c.count == 3
    np.testing.assert_array_equal(out, np.full(32, 2.0, np.float32))


def test_unknown_names_in_jit_options_are_rejected():
    def kernel(x, n):
        pass

    with pytest.raises(ValueError, match=r"do_not_specialize names unknown parameters: \['m'\]"):
        pypto.jit(kernel, do_not_specialize=["m"])
    with pytest.raises(ValueError, match="dynamic names an unknown parameter: 'y'"):
        pypto.jit(kernel, dynamic=["y"])


# -- tensors: shape, dynamic dims, layout ---------------------------------------------------------

@pytest.mark.heavy
def test_static_shapes_compile_per_size_and_dynamic_shapes_once(fresh_cache):
    def body(x, out, BLOCK: pl.constexpr):
        n = x.shape[0]
        for i in range(pl.program_id(0) * BLOCK, n, pl.num_programs(0) * BLOCK):
            t = pl.load(x, offsets=(i,), shape=(BLOCK,))
            pl.store(out, offsets=(i,), value=t * 2.0 + 1.0)

    static = pypto.jit(body)
    dynamic = pypto.jit(body, dynamic=["x", "out"])
    sizes = [1, 100, 1000, 4097, 100_000]
    for kernel, expected_compiles in ((static, len(sizes)), (dynamic, 1)):
        c = Compiles()
        for n in sizes:
            x = aligned(n, np.float32)
            x[...] = np.arange(n) % 97
            out = aligned(n, np.float32, -1)
            kernel[(4,)](x, out, BLOCK=256)
            np.testing.assert_array_equal(out, x * 2 + 1)
        assert c.count == expected_compiles, kernel


def test_dynamic_dims_dict_form(fresh_cache):
    """{"x": (0,)}: rows are dynamic, the column count still selects a binary."""
    @pypto.jit(dynamic={"x": (0,), "out": (0,)})
    def row_sums(x, out, TR: pl.constexpr, TC: pl.constexpr):
        rows = x.shape[0]
        for r in range(pl.program_id(0) * TR, rows, pl.num_programs(0) * TR):
            t = pl.load(x, offsets=(r, 0), shape=(TR, TC))
            pl.store(out, offsets=(r, 0), value=pl.sum(t, axis=1, keepdims=True))

    c = Compiles()
    for rows, cols in [(5, 16), (37, 16), (1000, 16), (37, 12), (3, 12)]:
        x = aligned((rows, cols), np.float32)
        x[...] = np.arange(rows * cols).reshape(rows, cols) % 13
        out = aligned((rows, 1), np.float32, -1)
        row_sums[(3,)](x, out, TR=8, TC=16)
        np.testing.assert_array_equal(out, x.sum(axis=1, keepdims=True))
    assert c.count == 2        # one per column count


@pytest.mark.parametrize("n", quick_cases([0, 1, 7, 255, 256, 257, 1000, 3001], 257))
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_dynamic_kernel_masks_the_tail(n, dtype, fresh_cache):
    """Elements past the end are neither read (padding) nor written (canaries survive)."""
    @pypto.jit(dynamic=["x", "y", "out"])
    def add(x, y, out, BLOCK: pl.constexpr):
        n = x.shape[0]
        pid = pl.program_id(0)
        for i in range(pid * BLOCK, n, pl.num_programs(0) * BLOCK):
            a = pl.load(x, offsets=(i,), shape=(BLOCK,), padding=100)
            b = pl.load(y, offsets=(i,), shape=(BLOCK,))
            pl.store(out, offsets=(i,), value=a + b)
        total = pl.zeros((BLOCK,), dtype=pl.float32)
        for i in range(0, n, BLOCK):          # padded elements add 3 each to the total
            total = total + pl.load(x, offsets=(i,), shape=(BLOCK,), padding=3)
        pl.store(out, offsets=(n,), value=pl.sum(total, axis=0, keepdims=True))

    rng = np.random.default_rng(n)
    x = aligned(n, dtype)
    x[...] = rng.integers(-50, 50, n)
    y = aligned(n, dtype)
    y[...] = rng.integers(-50, 50, n)
    buf = aligned(n + 1 + 40, dtype, -7)
    out = buf[:n + 1]
    add[(3,)](x, y, out, BLOCK=256)
    np.testing.assert_array_equal(buf[:n], (x + y).astype(dtype))
    pad = -n % 256
    assert buf[n] == np.asarray(x.astype(np.float64).sum() + 3 * pad).astype(dtype)
    np.testing.assert_array_equal(buf[n + 1:], np.full(40, -7, dtype))


@pytest.mark.heavy
def test_dynamic_2d_kernel_with_both_dims_dynamic(fresh_cache):
    @pypto.jit(dynamic=["x", "out"])
    def transpose_add(x, out, T: pl.constexpr):
        rows, cols = x.shape
        for r in range(0, rows, T):
            for c in range(0, cols, T):
                t = pl.load(x, offsets=(r, c), shape=(T, T))
                pl.store(out, offsets=(c, r), value=t.T + 1.0)

    c = Compiles()
    for shape in [(1, 1), (5, 40), (33, 17), (64, 64)]:
        x = aligned(shape, np.float32)
        x[...] = np.arange(np.prod(shape)).reshape(shape)
        out = aligned(shape[::-1], np.float32, -1)
        transpose_add[(1,)](x, out, T=16)
        np.testing.assert_array_equal(out, x.T + 1)
    assert c.count == 1


def test_layout_selects_binaries_but_alignment_does_not(fresh_cache):
    """Contiguity is part of the key; 32-byte alignment is not (the generated code never
    relies on it, and keying on it recompiled kernels whenever numpy's allocator moved)."""
    @pypto.jit(dynamic=["x", "out"])
    def copy(x, out, BLOCK: pl.constexpr):
        n = x.shape[0]
        for i in range(0, n, BLOCK):
            pl.store(out, offsets=(i,), value=pl.load(x, offsets=(i,), shape=(BLOCK,)))

    base = aligned(200, np.float32)
    base[...] = np.arange(200)
    c = Compiles()
    for x, compiles in [(base[:100], 1), (base[:150], 1),     # aligned, contiguous
                        (base[1:101], 1),                       # 4 bytes off alignment
                        (base[::2], 2),                         # strided
                        (base[2:102:2], 2)]:                    # strided and misaligned
        out = aligned(x.shape, np.float32, -1)
        copy[(1,)](x, out, BLOCK=64)
        np.testing.assert_array_equal(out, x)
        assert c.count == compiles


# -- the recompile log ----------------------------------------------------------------------------

def test_recompile_log_names_the_argument(fresh_cache, monkeypatch, capfd):
    monkeypatch.setenv("PYPTO_LOG", "recompile")

    @pypto.jit
    def scale(x, out, n, alpha, BLOCK: pl.constexpr):
        t = pl.load(x, offsets=(0,), shape=(BLOCK,))
        pl.store(out, offsets=(0,), value=t * n * alpha)

    x, out = aligned(16, np.float32, 1.0), aligned(16, np.float32)
    scale[(1,)](x, out, 3, 0.5, BLOCK=16)
    assert "[pypto recompile]" not in capfd.readouterr().err      # the first compile is silent
    scale[(1,)](x, out, 5, 2.5, BLOCK=16)                        # same key: no message
    assert capfd.readouterr().err == ""
    scale[(1,)](x, out, 32, 0.5, BLOCK=16)
    err = capfd.readouterr().err
    assert "[pypto recompile] scale: new specialisation because of n" in err
    scale[(1,)](x, out, 3, 0.5, BLOCK=32)
    assert "because of n, BLOCK" in capfd.readouterr().err
    x64 = aligned(32, np.float16, 1.0)
    scale[(1,)](x64, out, 3, 0.5, BLOCK=32)
    err = capfd.readouterr().err
    assert "because of x\n" in err or err.rstrip().endswith("because of x")


def test_recompile_log_is_off_by_default(fresh_cache, monkeypatch, capfd):
    monkeypatch.delenv("PYPTO_LOG", raising=False)

    @pypto.jit
    def scale(x, out, n, BLOCK: pl.constexpr):
        t = pl.load(x, offsets=(0,), shape=(BLOCK,))
        pl.store(out, offsets=(0,), value=t * n)

    x, out = aligned(16, np.float32, 1.0), aligned(16, np.float32)
    scale[(1,)](x, out, 3, BLOCK=16)
    scale[(1,)](x, out, 16, BLOCK=16)
    assert "recompile" not in capfd.readouterr().err


def test_recompile_log_names_a_dynamic_tensor_only_when_its_static_dims_change(
        fresh_cache, monkeypatch, capfd):
    monkeypatch.setenv("PYPTO_LOG", "recompile")

    @pypto.jit(dynamic={"x": (0,)})
    def first_column(x, out, TR: pl.constexpr):
        pl.store(out, offsets=(0, 0), value=pl.load(x, offsets=(0, 0), shape=(TR, 1)))

    out = aligned((8, 1), np.float32)
    c = Compiles()
    first_column[(1,)](aligned((10, 4), np.float32, 1), out, TR=8)
    first_column[(1,)](aligned((30, 4), np.float32, 2), out, TR=8)      # dim 0 is dynamic
    assert c.count == 1 and capfd.readouterr().err == ""
    first_column[(1,)](aligned((30, 5), np.float32, 3), out, TR=8)
    assert "new specialisation because of x" in capfd.readouterr().err
    assert c.count == 2
    np.testing.assert_array_equal(out, np.full((8, 1), 3, np.float32))


@pytest.mark.heavy
def test_interpreter_follows_the_same_specialisation(monkeypatch):
    """PYPTO_INTERPRET=1 binds the same constants (n == 1 folded) and gives the same results."""
    @pypto.jit(dynamic=["x", "out"])
    def fused(x, out, n, BLOCK: pl.constexpr):
        size = x.shape[0]
        for i in range(0, size, BLOCK):
            t = pl.load(x, offsets=(i,), shape=(BLOCK,))
            pl.store(out, offsets=(i,), value=t * n + (n == 1))

    for n in (1, 2, 16):
        x = aligned(70, np.float32)
        x[...] = np.arange(70)
        compiled = aligned(70, np.float32)
        fused[(1,)](x, compiled, n, BLOCK=32)
        monkeypatch.setenv("PYPTO_INTERPRET", "1")
        interpreted = aligned(70, np.float32)
        fused[(1,)](x, interpreted, n, BLOCK=32)
        monkeypatch.delenv("PYPTO_INTERPRET")
        np.testing.assert_array_equal(compiled, x * n + (n == 1))
        np.testing.assert_array_equal(interpreted, compiled)


def test_int_argument_out_of_int64_range_names_the_argument(fresh_cache):
    @pypto.jit
    def scale(x, out, n, BLOCK: pl.constexpr):
        t = pl.load(x, offsets=(0,), shape=(BLOCK,))
        pl.store(out, offsets=(0,), value=t * n)

    x, out = aligned(16, np.float32, 1.0), aligned(16, np.float32)
    scale[(1,)](x, out, 2 ** 63 - 1, BLOCK=16)          # the largest int64 is fine
    np.testing.assert_array_equal(out, np.full(16, 2.0 ** 63, np.float32))
    with pytest.raises((TypeError, ValueError, OverflowError), match="argument 'n'"):
        scale[(1,)](x, out, 2 ** 63, BLOCK=16)
