"""The bad-input matrix: distinct mistakes a kernel author makes, each a clear error that names
the argument or line and the fix, or a documented, defined behaviour -- never a crash or a
hang. (Many have deeper tests elsewhere; this table is the one place that lists them.)"""
import warnings

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.errors import CompilationError

x16 = np.zeros(16, np.float32)
m16 = np.zeros((16, 16), np.float32)


@pypto.jit
def copy(x, out, BLOCK: pl.constexpr):
    pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(BLOCK,)))


@pypto.jit
def scaled(x, out, n, alpha: float):
    pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(16,)) * alpha)


@pypto.jit
def with_barrier(x, out):
    pl.barrier()
    pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(16,)))


@pypto.jit
def waits(x, out):
    pl.wait(0, 1)


@pypto.jit
def matmul16(a, b, c):
    ta = pl.load(a, offsets=(0, 0), shape=(16, 16))
    tb = pl.load(b, offsets=(0, 0), shape=(16, 16))
    pl.store(c, offsets=(0, 0), value=pl.matmul(ta, tb))


@pypto.jit(auto_sync=False)
def unsynchronised(x, out):
    pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(16,)) * 2.0)


@pypto.jit(auto_sync=False)
def unmatched_flag(x, out):
    pl.set_flag("MTE2", "V", 0)


@pypto.jit
def flag_in_auto_mode(x, out):
    pl.set_flag("MTE2", "V", 0)


@pypto.jit
def reads_unfilled_buffer(x, out):
    buf = pl.alloc_buffer((16,))
    pl.store(out, offsets=(0,), value=buf)


@pypto.jit
def huge_tile(x, out):
    pl.store(out, offsets=(0, 0), value=pl.load(x, offsets=(0, 0), shape=(512, 512)))


@pypto.jit
def rank5(x, out):
    t = pl.zeros((1, 1, 2, 2, 2))


@pypto.jit
def broadcast_mismatch(x, out):
    a = pl.load(x, offsets=(0,), shape=(16,))
    pl.store(out, offsets=(0,), value=a + pl.load(x, offsets=(0,), shape=(8,)))


@pypto.jit
def list_comprehension(x, out):
    t = [i for i in range(2)]


@pypto.jit
def tile_condition(x, out):
    t = pl.load(x, offsets=(0,), shape=(16,))
    if t > 0:
        pass


@pypto.jit
def indexes_tensor(x, out):
    v = x[0]


@pypto.jit
def uses_break(x, out, n):
    for i in range(n):
        break


@pypto.jit
def calls_numpy(x, out):
    t = pl.load(x, offsets=(0,), shape=(16,))
    pl.store(out, offsets=(0,), value=np.exp(t))


@pypto.jit
def undefined(x, out):
    pl.store(out, offsets=(0,), value=nothing_here)  # noqa: F821


@pypto.jit
def bad_axis(x, out):
    pl.store(out, offsets=(0, 0), value=pl.sum(pl.load(x, offsets=(0, 0), shape=(16, 16)),
                                                 axis=3))


@pypto.jit
def int_division_float(x, out):
    t = pl.load(x, offsets=(0,), shape=(16,))
    pl.store(out, offsets=(0,), value=t >> 1)


@pypto.jit
def store_scalar(x, out, n):
    pl.store(out, offsets=(0,), value=n)


@pypto.jit
def bad_offsets(x, out):
    pl.store(out, offsets=(0, 0), value=pl.load(x, offsets=(0,), shape=(16,)))


@pypto.jit
def reshape_count(x, out):
    t = pl.reshape(pl.load(x, offsets=(0,), shape=(16,)), (3, 5))


@pypto.jit
def cast_unknown(x, out):
    t = pl.cast(pl.load(x, offsets=(0,), shape=(16,)), "float17")


@pypto.jit
def runtime_shape(x, out, n):
    t = pl.load(x, offsets=(0,), shape=(n,))


@pypto.jit
def shape_from_tensor(x, out):
    t = pl.load(x, offsets=(0,), shape=(x.shape[0],))


def _strided(step):
    return np.lib.stride_tricks.as_strided(np.zeros(64, np.float32), (16,), (step,))


def _torch():
    return pytest.importorskip("torch", reason="torch is not installed")


# (category, mistake, call, exception type or None (defined behaviour), message fragment)
MATRIX = [
    # -- launch and argument kinds ---------------------------------------------------------
    ("launch", "a list for a tensor", lambda: copy[(1,)]([1.0] * 16, x16, BLOCK=16),
     TypeError, "argument 'x' must be a tensor"),
    ("launch", "a string for a tensor", lambda: copy[(1,)]("x", x16, BLOCK=16),
     TypeError, "argument 'x' must be a tensor"),
    ("launch", "None for a tensor", lambda: copy[(1,)](None, x16, BLOCK=16),
     TypeError, "got NoneType None"),
    ("launch", "a string for an int", lambda: scaled[(1,)](x16, x16, "3", 1.0),
     TypeError, "argument 'n' must be a tensor"),
    ("launch", "an int past int64", lambda: scaled[(1,)](x16, x16, 1 << 70, 1.0),
     ValueError, "does not fit in int64"),
    ("launch", "one argument too many", lambda: copy[(1,)](x16, x16, 16, 16),
     TypeError, "copy() takes 3 argument(s) (x, out, BLOCK) but 4"),
    ("launch", "a missing argument", lambda: copy[(1,)](x16, BLOCK=16),
     TypeError, "missing 1 required positional argument: 'out'"),
    ("launch", "an unknown keyword", lambda: copy[(1,)](x16, x16, BLOCKS=16),
     TypeError, "unexpected keyword argument 'BLOCKS'"),
    ("launch", "a read-only output", lambda: copy[(1,)](
        x16, np.broadcast_to(np.float32(0), (16,)), BLOCK=16),
     ValueError, "argument 'out' is stored to but is a read-only array"),
    ("launch", "strides that are not whole elements", lambda: copy[(1,)](
        np.lib.stride_tricks.as_strided(np.zeros(40, np.float32), (16,), (6,)), x16,
        BLOCK=16), ValueError, "not multiples of its element size"),
    ("launch", "a non-contiguous view", lambda: copy[(1,)](_strided(8), x16, BLOCK=16),
     None, "defined: strides are read at run time"),
    ("launch", "input and output the same array", lambda: copy[(1,)](x16, x16, BLOCK=16),
     None, "defined: loads happen before the store"),
    # -- dtypes -------------------------------------------------------------------------------
    ("dtype", "complex input", lambda: copy[(1,)](np.zeros(16, np.complex64), x16, BLOCK=16),
     TypeError, "numpy dtype complex64 is not supported"),
    ("dtype", "object array", lambda: copy[(1,)](np.zeros(16, object), x16, BLOCK=16),
     TypeError, "numpy dtype object is not supported"),
    ("dtype", "float64 tiles", lambda: copy[(1,)](np.zeros(16), x16, BLOCK=16),
     CompilationError, "no 64-bit arithmetic and cannot convert out of 64 bits"),
    ("dtype", "an int64 matmul", lambda: matmul16[(1,)](
        m16.astype(np.int64), m16.astype(np.int64), m16),
     CompilationError, "not a legal cube pair"),
    ("dtype", "a shift of a float tile", lambda: int_division_float[(1,)](x16, x16),
     CompilationError, "it needs integer operands"),
    ("dtype", "an unknown dtype name", lambda: cast_unknown[(1,)](x16, x16),
     CompilationError, "float17"),
    # -- shapes ---------------------------------------------------------------------------------
    ("shape", "a rank-2 tensor loaded as rank 1", lambda: copy[(1,)](m16, x16, BLOCK=16),
     CompilationError, "has rank 1 but the tensor has rank 2"),
    ("shape", "shapes that do not broadcast", lambda: broadcast_mismatch[(1,)](x16, x16),
     CompilationError, "cannot be broadcast together"),
    ("shape", "a reduction axis out of range", lambda: bad_axis[(1,)](m16, m16),
     CompilationError, "axis 3 out of range for a tile of shape (16, 16)"),
    ("shape", "a reshape that changes the count", lambda: reshape_count[(1,)](x16, x16),
     CompilationError, "(16 elements) into (3, 5)"),
    ("shape", "offsets of the wrong rank", lambda: bad_offsets[(1,)](x16, x16),
     CompilationError, "2 offsets given for a rank-1 tensor"),
    ("shape", "a rank-5 tile", lambda: rank5[(1,)](x16, x16), CompilationError,
     "tiles of rank 5 are not supported"),
    ("shape", "a tile size from a runtime int", lambda: runtime_shape[(1,)](x16, x16, 16),
     CompilationError, "annotate the parameter it comes from as pl.constexpr"),
    ("shape", "a tile size from x.shape", lambda: shape_from_tensor[(1,)](x16, x16),
     CompilationError, "pass it as a pl.constexpr parameter"),
    # -- grids ----------------------------------------------------------------------------------
    ("grid", "a float in the grid", lambda: copy[(1.5,)](x16, x16, BLOCK=16),
     ValueError, "grid must be a tuple of 1 to 3 ints"),
    ("grid", "a negative grid", lambda: copy[(-1,)](x16, x16, BLOCK=16),
     ValueError, "grid dimensions must be >= 0"),
    ("grid", "four grid dimensions", lambda: copy[(1, 1, 1, 1)](x16, x16, BLOCK=16),
     ValueError, "grid must be a tuple of 1 to 3 ints"),
    ("grid", "a string grid", lambda: copy["a"](x16, x16, BLOCK=16),
     ValueError, "grid must be a tuple of 1 to 3 ints"),
    ("grid", "a grid callable returning junk", lambda: copy[lambda meta: "x"](
        x16, x16, BLOCK=16), ValueError, "grid must be a tuple of 1 to 3 ints"),
    ("grid", "an empty grid", lambda: copy[(0,)](x16, x16, BLOCK=16),
     None, "defined: no block runs"),
    ("grid", "more barrier blocks than cores", lambda: with_barrier[(49,)](x16, x16),
     ValueError, "has more blocks than the 48 cores"),
    ("grid", "no grid for a block-indexed kernel", lambda: copy(x16, x16, BLOCK=16),
     None, "defined: one program per core (a LaunchWarning if it reads pl.program_id only)"),
    # -- constexprs -----------------------------------------------------------------------------
    ("constexpr", "a list constexpr", lambda: copy[(1,)](x16, x16, BLOCK=[16]),
     TypeError, "constexpr argument 'BLOCK' = [16] is not hashable"),
    ("constexpr", "a zero tile size", lambda: copy[(1,)](x16, x16, BLOCK=0),
     CompilationError, "positive compile-time integers"),
    ("constexpr", "a negative tile size", lambda: copy[(1,)](x16, x16, BLOCK=-4),
     CompilationError, "positive compile-time integers"),
    ("constexpr", "a float tile size", lambda: copy[(1,)](x16, x16, BLOCK=16.0),
     CompilationError, "got (16.0,)"),
    ("constexpr", "a missing constexpr", lambda: copy[(1,)](x16, x16),
     TypeError, "missing 1 required positional argument: 'BLOCK'"),
    # -- on-chip memory ---------------------------------------------------------------------------
    ("memory", "a tile larger than the UB", lambda: huge_tile[(1,)](
        np.zeros((512, 512), np.float32), np.zeros((512, 512), np.float32)),
     CompilationError, "UB (vec) overflow on ascend910b1"),
    ("memory", "reading an alloc_buffer before it is filled",
     lambda: reads_unfilled_buffer[(1,)](x16, x16), CompilationError,
     "is read before any async_load fills it"),
    ("memory", "a load past the tensor's end", lambda: copy[(1,)](
        np.zeros(8, np.float32), x16, BLOCK=16), None,
     "defined: padding is read (PYPTO_SANITIZE reports it)"),
    # -- syntax -----------------------------------------------------------------------------------
    ("syntax", "a list comprehension", lambda: list_comprehension[(1,)](x16, x16),
     CompilationError, "kernels have no lists"),
    ("syntax", "if on a tile", lambda: tile_condition[(1,)](x16, x16),
     CompilationError, "pl.where(cond, a, b)"),
    ("syntax", "indexing a tensor", lambda: indexes_tensor[(1,)](x16, x16),
     CompilationError, "read a tile with pl.load"),
    ("syntax", "break", lambda: uses_break[(1,)](x16, x16, 3),
     CompilationError, "use `while cond:`"),
    ("syntax", "a numpy call on a tile", lambda: calls_numpy[(1,)](x16, x16),
     CompilationError, "only pypto.language functions and @pypto.jit functions"),
    ("syntax", "an undefined name", lambda: undefined[(1,)](x16, x16),
     CompilationError, "nothing_here"),
    ("syntax", "storing a scalar", lambda: store_scalar[(1,)](x16, x16, 3),
     CompilationError, "store a scalar as a one-element tile: pl.full((1,), value)"),
    # -- synchronisation misuse -------------------------------------------------------------------
    ("sync", "advanced mode without flags", lambda: unsynchronised[(1,)](x16, x16),
     Exception, "is not correctly synchronised"),
    ("sync", "a set_flag nobody waits for", lambda: unmatched_flag[(1,)](x16, x16),
     Exception, "is not correctly synchronised"),
    ("sync", "pl.wait between blocks", lambda: waits[(1,)](x16, x16),
     CompilationError, "A2/A3 has no flag from one block to another"),
    ("sync", "set_flag under automatic sync", lambda: flag_in_auto_mode[(1,)](x16, x16),
     Exception, "is not correctly synchronised"),
    # -- torch / numpy argument kinds ----------------------------------------------------------------
    ("torch", "a meta tensor", lambda: copy[(1,)](
        _torch().empty(16, device="meta"), x16, BLOCK=16),
     TypeError, "argument 'x': it is a torch tensor on device 'meta'"),
    ("torch", "writing into a leaf that requires grad", lambda: copy[(1,)](
        x16, _torch().zeros(16, requires_grad=True), BLOCK=16),
     RuntimeError, "leaf Variable that requires grad"),
    ("torch", "a float64 torch tensor", lambda: copy[(1,)](
        _torch().zeros(16, dtype=_torch().float64), x16, BLOCK=16),
     CompilationError, "no 64-bit arithmetic"),
    ("torch", "a complex torch tensor", lambda: copy[(1,)](
        _torch().zeros(16, dtype=_torch().complex64), x16, BLOCK=16),
     TypeError, "argument 'x': numpy dtype complex64 is not supported"),
    ("torch", "a torch view with a storage offset", lambda: copy[(1,)](
        _torch().arange(32, dtype=_torch().float32)[16:], x16, BLOCK=16),
     None, "defined: data_ptr includes the offset"),
    ("torch", "numpy and torch mixed", lambda: copy[(1,)](
        _torch().zeros(16), x16, BLOCK=16), None, "defined: the numpy path on views"),
]


def test_the_matrix_has_at_least_50_distinct_mistakes():
    assert len({m for _, m, *_ in MATRIX}) == len(MATRIX) >= 50
    assert {c for c, *_ in MATRIX} == {"launch", "dtype", "shape", "grid", "constexpr",
                                       "memory", "syntax", "sync", "torch"}


@pytest.mark.parametrize("category,mistake,call,error,fragment", MATRIX,
                         ids=[f"{c}: {m}" for c, m, *_ in MATRIX])
def test_each_mistake_is_an_error_that_says_why_or_defined(category, mistake, call, error,
                                                           fragment):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pypto.LaunchWarning)
        if error is None:
            call()
            return
        with pytest.raises(error) as e:
            call()
    assert fragment in str(e.value), f"{mistake}: {e.value}"
