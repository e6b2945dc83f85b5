"""Shape ops and tile creation: reshape (with -1), trans / x.T, expand_dims / x[:, None] /
x[None, :], broadcast_to, static slicing and indexing, concat along each axis, and zeros,
ones, full (number or runtime scalar), arange, zeros_like, ones_like, full_like.

These ops move or create values without arithmetic, so compiled, interpreted and numpy
results must agree bit for bit, for every element dtype tried (1-, 2- and 4-byte ones,
bfloat16 and bool).

What the NPU target refuses (NotOnChip, docs/pto.md): int64 tiles other than loads, stores and
moves; UB slices and concatenation pieces that start off a 32-byte boundary of their row (8
float32 / 16 bfloat16 columns); any slice or concatenation of 8-bit or bool tiles; and a
reshape to or from a tile whose rows are not whole 32 bytes (the elements would move). The
compiled tests slice at aligned columns (or load the piece instead); the unaligned, 8-bit and
int64 cases run in the interpreter and have refusal tests of their own.
"""
import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.errors import CompilationError, NotOnChip

from .utils import assert_exact, interpret_mode, is_float, npd, pld, promote, rand, run_both

M, N = 4, 16
DTYPES = ["float32", "bfloat16", "int8", "int64", "bool"]
# what the NPU slices and concatenates: 16- and 32-bit tiles
SLICEABLE = ["float32", "bfloat16", "int16", "int32"]


def aligned_column(name):
    """The first column after 0 at a 32-byte boundary of a row."""
    return 32 // npd(name).itemsize


# -- kernels -----------------------------------------------------------------------------------

@pypto.jit
def reshape_kernel(x, o_a, o_b, o_c, o_d, o_e, M: pl.constexpr, N: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(M, N))
    a = t.reshape((8, M * N // 8))
    b = pl.reshape(t, (-1, 32))
    c = t.reshape(M * N)
    d = t.reshape((M * N,)).reshape((N, -1))
    e = t.reshape(2, M * N // 2)
    pl.static_assert(a.shape == (8, M * N // 8) and b.shape == (M * N // 32, 32), "shapes")
    pl.static_assert(c.shape == (M * N,) and d.shape == (N, M), "shapes")
    pl.store(o_a, offsets=(0, 0), value=a)
    pl.store(o_b, offsets=(0, 0), value=b)
    pl.store(o_c, offsets=(0,), value=c)
    pl.store(o_d, offsets=(0, 0), value=d)
    pl.store(o_e, offsets=(0, 0), value=e)


@pypto.jit
def transpose_kernel(x, x1, o_t, o_T, o_col, o_row, o_e0, o_e1, M: pl.constexpr,
                     N: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(M, N))
    v = pl.load(x1, offsets=(0,), shape=(N,))
    col = v[:, None]
    row = v[None, :]
    e0 = pl.expand_dims(v, 0)
    e1 = pl.expand_dims(v, -1)
    pl.static_assert(col.shape == (N, 1) and row.shape == (1, N), "x[:, None] / x[None, :]")
    pl.static_assert(e0.shape == (1, N) and e1.shape == (N, 1), "expand_dims")
    pl.store(o_t, offsets=(0, 0), value=pl.trans(t))
    pl.store(o_T, offsets=(0, 0), value=t.T.T.T)
    pl.store(o_col, offsets=(0, 0), value=col)
    pl.store(o_row, offsets=(0, 0), value=row)
    pl.store(o_e0, offsets=(0, 0), value=e0)
    pl.store(o_e1, offsets=(0, 0), value=e1)


@pypto.jit
def broadcast_kernel(x, x1, o_row, o_col, o_vec, o_num, o_same, M: pl.constexpr,
                     N: pl.constexpr, C: pl.constexpr = 2, SLICE: pl.constexpr = True):
    """Broadcasts a row and column C of t: slices of t, or (SLICE false) loaded."""
    t = pl.load(x, offsets=(0, 0), shape=(M, N))
    v = pl.load(x1, offsets=(0,), shape=(N,))
    if SLICE:
        row = t[0:1, :]
        col = t[:, C:C + 1]
    else:
        row = pl.load(x, offsets=(0, 0), shape=(1, N))
        col = pl.load(x, offsets=(0, C), shape=(M, 1))
    pl.store(o_row, offsets=(0, 0), value=pl.broadcast_to(row, (M, N)))
    pl.store(o_col, offsets=(0, 0), value=col.broadcast_to((M, N)))
    pl.store(o_vec, offsets=(0, 0), value=pl.broadcast_to(v, (M, N)))
    pl.store(o_num, offsets=(0, 0), value=pl.broadcast_to(3, (M, N)))
    pl.store(o_same, offsets=(0, 0), value=pl.broadcast_to(t, (M, N)))


@pypto.jit
def slice_kernel(x, o_rows, o_col, o_row, o_win, o_last, o_tail, M: pl.constexpr,
                 N: pl.constexpr, C: pl.constexpr):
    """Slices whose columns start at 0 or C (the tail as a negative index)."""
    t = pl.load(x, offsets=(0, 0), shape=(M, N))
    rows = t[0:2, :]
    col = t[:, C]
    row = t[2]
    win = t[1:3, C:C + 8]
    last = t[-1]
    tail = t[:, C - N:]
    pl.static_assert(rows.shape == (2, N) and col.shape == (M,) and row.shape == (N,), "shapes")
    pl.static_assert(win.shape == (2, 8) and last.shape == (N,) and tail.shape == (M, N - C),
                     "")
    pl.store(o_rows, offsets=(0, 0), value=rows)
    pl.store(o_col, offsets=(0,), value=col)
    pl.store(o_row, offsets=(0,), value=row)
    pl.store(o_win, offsets=(0, 0), value=win)
    pl.store(o_last, offsets=(0,), value=last)
    pl.store(o_tail, offsets=(0, 0), value=tail)


@pypto.jit
def concat_kernel(x, y, x1, z, o_0, o_1, o_neg, o_1d, o_mixed, M: pl.constexpr,
                  N: pl.constexpr, RD: pl.constexpr, P: pl.constexpr = 3):
    """Concatenations along each axis; the 1-D one has a piece of P elements in the middle
    (so its last piece starts at column N + P)."""
    a = pl.load(x, offsets=(0, 0), shape=(M, N))
    b = pl.load(y, offsets=(0, 0), shape=(M, N))
    v = pl.load(x1, offsets=(0,), shape=(N,))
    c = pl.load(z, offsets=(0, 0), shape=(M, N))          # int8: a second dtype
    mixed = pl.concat((a, c), axis=1)
    pl.static_assert(mixed.dtype == RD, "concat promotes like arithmetic")
    pl.store(o_0, offsets=(0, 0), value=pl.concat((a, b), axis=0))
    pl.store(o_1, offsets=(0, 0), value=pl.concat((a, b, a), axis=1))
    pl.store(o_neg, offsets=(0, 0), value=pl.concat([b, a[0:1, :]], axis=-2))
    pl.store(o_1d, offsets=(0,), value=pl.concat((v, v[0:P], v)))
    pl.store(o_mixed, offsets=(0, 0), value=mixed)


@pypto.jit
def create_kernel(s, o_z, o_o, o_f, o_fs, o_ar, o_ar2, M: pl.constexpr, N: pl.constexpr,
                  D: pl.constexpr, V: pl.constexpr):
    z = pl.zeros((M, N))
    o = pl.ones((M, N), dtype=D)
    f = pl.full((M, N), V, dtype=D)
    fs = pl.full((M, N), s, dtype=D)
    ar = pl.arange(N)
    ar2 = pl.arange(3, 3 + N)
    pl.static_assert(z.dtype == pl.float32 and o.dtype == D and f.dtype == D, "dtypes")
    pl.static_assert(ar.dtype == pl.int32 and ar2.shape == (N,), "arange")
    pl.store(o_z, offsets=(0, 0), value=z)
    pl.store(o_o, offsets=(0, 0), value=o)
    pl.store(o_f, offsets=(0, 0), value=f)
    pl.store(o_fs, offsets=(0, 0), value=fs)
    pl.store(o_ar, offsets=(0,), value=ar)
    pl.store(o_ar2, offsets=(0,), value=ar2)


@pypto.jit
def like_kernel(x, s, o_z, o_o, o_o8, o_f, o_fs, M: pl.constexpr, N: pl.constexpr,
                V: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(M, N))
    z = pl.zeros_like(t)
    o = pl.ones_like(t)
    o8 = pl.ones_like(t, dtype=pl.int8)
    f = pl.full_like(t, V)
    fs = pl.full_like(t, s)
    pl.static_assert(z.dtype == t.dtype and o.dtype == t.dtype and f.dtype == t.dtype, "like")
    pl.static_assert(o8.dtype == pl.int8 and fs.shape == (M, N), "like")
    pl.store(o_z, offsets=(0, 0), value=z)
    pl.store(o_o, offsets=(0, 0), value=o)
    pl.store(o_o8, offsets=(0, 0), value=o8)
    pl.store(o_f, offsets=(0, 0), value=f)
    pl.store(o_fs, offsets=(0, 0), value=fs)


# -- helpers -----------------------------------------------------------------------------------

def data(name, shape=(M, N), seed=0):
    rng = np.random.default_rng(seed)
    if name == "bool":
        return rand(rng, shape, name)
    return rand(rng, shape, name, lo=-100, hi=100)


def zeros(shape, name):
    return np.zeros(shape, npd(name))


def check_all(got, interp, want):
    for key, w in want.items():
        assert_exact(got[key], interp[key], f"{key}: compiled vs interpreter")
        assert_exact(got[key], w, f"{key}: vs numpy")


# -- tests -------------------------------------------------------------------------------------

def _reshape_case(name, m, n):
    x = data(name, (m, n))
    flat = x.reshape(-1)
    outs = {"o_a": zeros((8, m * n // 8), name), "o_b": zeros((m * n // 32, 32), name),
            "o_c": zeros(m * n, name), "o_d": zeros((n, m), name),
            "o_e": zeros((2, m * n // 2), name)}
    wants = {"o_a": flat.reshape(8, -1), "o_b": flat.reshape(-1, 32), "o_c": flat,
             "o_d": flat.reshape(n, m), "o_e": flat.reshape(2, -1)}
    return {"x": x, **outs}, wants


@pytest.mark.parametrize("name", ["bfloat16", "int8", "int32"])
def test_reshape(name):
    """Every shape's rows whole 32 bytes (what A2/A3 reshapes in place): 32 / itemsize by
    64 / itemsize."""
    m, n = 32 // npd(name).itemsize, 64 // npd(name).itemsize
    args, wants = _reshape_case(name, m, n)
    got, interp = run_both(reshape_kernel, (1,), args, M=m, N=n)
    check_all(got, interp, wants)


def test_a_reshape_that_would_move_elements_is_refused():
    """(4, 16) int32 into (16, 4): rows of 16 bytes, padded to 32 on the chip, so the bytes
    are not the new shape's (and PTOAS rejects it): refused at the line; the interpreter
    reshapes."""
    args, wants = _reshape_case("int32", M, N)
    with pytest.raises(NotOnChip, match=r"reshape of a \(1, 64\) int32 tile into \(16, 4\).*"
                                        r"a row of 4 int32 is padded") as got:
        reshape_kernel[(1,)](**args, M=M, N=N)
    assert got.value.loc.function == "reshape_kernel"
    with interpret_mode():
        reshape_kernel[(1,)](**args, M=M, N=N)
    check_all(args, args, wants)


@pytest.mark.parametrize("name", ["float32", "bfloat16", "int8", "int32", "bool"])
def test_transpose_and_expand_dims(name):
    x, x1 = data(name), data(name, (N,), seed=1)
    outs = {"o_t": zeros((N, M), name), "o_T": zeros((N, M), name),
            "o_col": zeros((N, 1), name), "o_row": zeros((1, N), name),
            "o_e0": zeros((1, N), name), "o_e1": zeros((N, 1), name)}
    got, interp = run_both(transpose_kernel, (1,), {"x": x, "x1": x1, **outs}, M=M, N=N)
    check_all(got, interp, {"o_t": x.T, "o_T": x.T, "o_col": x1[:, None],
                            "o_row": x1[None, :], "o_e0": x1[None, :], "o_e1": x1[:, None]})


@pytest.mark.parametrize("name", ["float32", "bfloat16", "int8", "bool"])
def test_broadcast_to(name):
    """The broadcast row and column are slices of a tile at an aligned column (8-bit and bool
    tiles, which A2/A3 cannot slice, load them at column 2 instead)."""
    x, x1 = data(name), data(name, (N,), seed=2)
    outs = {k: zeros((M, N), name) for k in ("o_row", "o_col", "o_vec", "o_same")}
    outs["o_num"] = np.zeros((M, N), np.int32)           # a Python int becomes int32
    sliceable = name in SLICEABLE
    c = aligned_column(name) % N if sliceable else 2
    got, interp = run_both(broadcast_kernel, (1,), {"x": x, "x1": x1, **outs}, M=M, N=N,
                           C=c, SLICE=sliceable)
    check_all(got, interp, {"o_row": np.broadcast_to(x[0:1], (M, N)),
                            "o_col": np.broadcast_to(x[:, c:c + 1], (M, N)),
                            "o_vec": np.broadcast_to(x1, (M, N)),
                            "o_num": np.full((M, N), 3, np.int32), "o_same": x})


def run_slices(name, n, c, interpret_only=False):
    x = data(name, (M, n))
    outs = {"o_rows": zeros((2, n), name), "o_col": zeros(M, name), "o_row": zeros(n, name),
            "o_win": zeros((2, 8), name), "o_last": zeros(n, name),
            "o_tail": zeros((M, n - c), name)}
    want = {"o_rows": x[0:2, :], "o_col": x[:, c], "o_row": x[2], "o_win": x[1:3, c:c + 8],
            "o_last": x[-1], "o_tail": x[:, c - n:]}
    if interpret_only:
        with interpret_mode():
            slice_kernel[(1,)](x=x, **outs, M=M, N=n, C=c)
        for key, w in want.items():
            assert_exact(outs[key], w, f"{key}: interpreter vs numpy")
        return
    got, interp = run_both(slice_kernel, (1,), {"x": x, **outs}, M=M, N=n, C=c)
    check_all(got, interp, want)


@pytest.mark.parametrize("name", SLICEABLE)
def test_static_slicing(name):
    """Slices at column 0 and at the first 32-byte boundary after it (8 float32 / 16
    bfloat16 columns; 16-bit tiles are 32 wide so that the window fits after it)."""
    c = aligned_column(name)
    run_slices(name, max(N, 2 * c), c)


@pytest.mark.parametrize("name", DTYPES)
def test_static_slicing_unaligned_in_the_interpreter(name):
    """Slices starting at column 3, of every dtype (the NPU refuses them: see below)."""
    run_slices(name, N, 3, interpret_only=True)


@pytest.mark.parametrize("name,c,match", [
    ("float32", 3, "a slice at column 3 of a float32 tile"),
    ("float32", 4, "a slice at column 4 of a float32 tile"),
    ("bfloat16", 8, "a slice at column 8 of a bfloat16 tile"),     # 16 bytes: off by half
    ("int8", 8, "a slice of a int8 tile"),
    ("bool", 8, "a slice of a bool tile"),
    ("int64", 8, "int64 tile")])
def test_unaligned_or_8bit_slice_is_refused(name, c, match):
    """A2/A3 moves UB tiles in 32-byte steps and copies 16- and 32-bit elements only: a slice
    off a 32-byte boundary, or of an 8-bit, bool or int64 tile, is refused at its line."""
    with pytest.raises(NotOnChip, match=match) as got:
        run_slices(name, N, c)
    assert "A2/A3" in str(got.value) and got.value.loc.function == "slice_kernel"


def run_concat(name, p, interpret_only=False):
    x, y, x1 = data(name), data(name, seed=3), data(name, (N,), seed=4)
    z = data("int8", seed=5)
    rd = promote(name, "int8")
    outs = {"o_0": zeros((2 * M, N), name), "o_1": zeros((M, 3 * N), name),
            "o_neg": zeros((M + 1, N), name), "o_1d": zeros(2 * N + p, name),
            "o_mixed": zeros((M, 2 * N), rd)}
    want = {
        "o_0": np.concatenate((x, y), 0), "o_1": np.concatenate((x, y, x), 1),
        "o_neg": np.concatenate((y, x[0:1]), 0), "o_1d": np.concatenate((x1, x1[:p], x1)),
        "o_mixed": np.concatenate((x.astype(npd(rd)), z.astype(npd(rd))), 1)}
    arrays = {"x": x, "y": y, "x1": x1, "z": z, **outs}
    if interpret_only:
        with interpret_mode():
            concat_kernel[(1,)](**arrays, M=M, N=N, RD=pld(rd), P=p)
        for key, w in want.items():
            assert_exact(arrays[key], w, f"{key}: interpreter vs numpy")
        return
    got, interp = run_both(concat_kernel, (1,), arrays, M=M, N=N, RD=pld(rd), P=p)
    check_all(got, interp, want)


@pytest.mark.parametrize("name", ["float32", "bfloat16", "int16"])
def test_concat(name):
    """Pieces at 32-byte boundaries: the 1-D concatenation's middle piece is 32 bytes long."""
    run_concat(name, aligned_column(name))


@pytest.mark.parametrize("name", ["float32", "int64", "bool"])
def test_concat_unaligned_in_the_interpreter(name):
    """A 3-element middle piece (the last piece starts at column 19), and 8-bit and int64
    tiles: refused by the NPU target, defined by the interpreter."""
    run_concat(name, 3, interpret_only=True)


@pytest.mark.parametrize("name,p,match", [
    ("float32", 3, "a concatenation at column 19 of a float32 tile"),
    ("bfloat16", 8, "a concatenation at column 24 of a bfloat16 tile"),
    ("bool", 16, "a concatenation of a (bool|int8) tile"),
    ("int64", 8, "int64 tile")])
def test_unaligned_or_8bit_concat_is_refused(name, p, match):
    """The same for concatenations: a piece off a 32-byte boundary (N + p columns), or any
    piece of an 8-bit, bool or int64 tile, is refused at the concatenation's line."""
    with pytest.raises(NotOnChip, match=match) as got:
        run_concat(name, p)
    assert "A2/A3" in str(got.value) and got.value.loc.function == "concat_kernel"


CREATE = [("float32", 2.5, -1.75), ("bfloat16", 2.5, 3.25), ("float16", -0.1, 1e5),
          ("int8", 7, 300), ("uint8", 200, -1), ("int32", -2 ** 31, 2 ** 40 + 5),
          ("bool", 2, 0)]


@pytest.mark.parametrize("name,value,s", CREATE, ids=[c[0] for c in CREATE])
def test_creation(name, value, s):
    """zeros (float32 by default), ones, full with a number and with a runtime scalar (whose
    value is converted to the dtype: ints wrap, floats round, float16 overflows to inf),
    arange."""
    outs = {"o_z": np.zeros((M, N), np.float32), "o_o": zeros((M, N), name),
            "o_f": zeros((M, N), name), "o_fs": zeros((M, N), name),
            "o_ar": np.zeros(N, np.int32), "o_ar2": np.zeros(N, np.int32)}
    got, interp = run_both(create_kernel, (1,), outs, s=s, M=M, N=N, D=pld(name), V=value)
    d = npd(name)
    scalar = np.float32(s) if isinstance(s, float) else np.int64(s)
    with np.errstate(over="ignore"):
        fs = np.full((M, N), scalar).astype(d) if name != "bool" else np.full((M, N), s != 0)
        f = np.full((M, N), np.float32(value) if is_float(name) else value)
        f = f.astype(d) if name != "bool" else f != 0
    check_all(got, interp, {"o_z": np.zeros((M, N), np.float32), "o_o": np.ones((M, N), d),
                            "o_f": f, "o_fs": fs, "o_ar": np.arange(N, dtype=np.int32),
                            "o_ar2": np.arange(3, 3 + N, dtype=np.int32)})


def test_int64_fill_is_refused():
    """A2/A3 has no 64-bit vector arithmetic, fills included: pl.full(..., dtype=pl.int64) is
    refused at its line (the message suggests a 32-bit dtype); the interpreter fills it."""
    outs = {"o_z": np.zeros((M, N), np.float32), "o_o": zeros((M, N), "int64"),
            "o_f": zeros((M, N), "int64"), "o_fs": zeros((M, N), "int64"),
            "o_ar": np.zeros(N, np.int32), "o_ar2": np.zeros(N, np.int32)}
    with pytest.raises(NotOnChip, match="int64 tile.*32-bit") as got:
        create_kernel[(1,)](**outs, s=-5, M=M, N=N, D=pl.int64, V=2 ** 40)
    assert got.value.loc.function == "create_kernel"
    with interpret_mode():
        create_kernel[(1,)](**outs, s=-5, M=M, N=N, D=pl.int64, V=2 ** 40)
    assert outs["o_f"].ravel().tolist() == [2 ** 40] * (M * N)
    assert outs["o_fs"].ravel().tolist() == [-5] * (M * N)


@pytest.mark.parametrize("name", ["float32", "bfloat16", "int16", "bool"])
def test_like(name):
    x = data(name)
    value, s = (True, 5) if name == "bool" else ((3, -2.5) if name == "int16" else (1.5, -2.5))
    outs = {"o_z": zeros((M, N), name), "o_o": zeros((M, N), name),
            "o_o8": np.zeros((M, N), np.int8), "o_f": zeros((M, N), name),
            "o_fs": zeros((M, N), name)}
    got, interp = run_both(like_kernel, (1,), {"x": x, **outs}, s=s, M=M, N=N, V=value)
    d = npd(name)
    check_all(got, interp, {"o_z": np.zeros((M, N), d), "o_o": np.ones((M, N), d),
                            "o_o8": np.ones((M, N), np.int8),
                            "o_f": np.full((M, N), value).astype(d),
                            "o_fs": np.full((M, N), np.float32(s)).astype(d)})


# -- errors ------------------------------------------------------------------------------------

@pypto.jit
def bad_shape_kernel(x, out, WHAT: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(4, 16))
    if WHAT == "reshape":
        r = t.reshape((5, 13))
    elif WHAT == "reshape2":
        r = t.reshape((-1, -1))
    elif WHAT == "step":
        r = t[0:4:2, :]
    elif WHAT == "concat":
        r = pl.concat((t, t[0:2, 0:8]), axis=0)
    elif WHAT == "broadcast":
        r = pl.broadcast_to(t, (4, 32))
    elif WHAT == "index":
        r = t[4]
    elif WHAT == "rank5":
        r = t.reshape((1, 1, 2, 2, 16))
    pl.store(out, offsets=(0, 0), value=r)


@pytest.mark.parametrize("what,match", [
    ("reshape", "cannot reshape"), ("reshape2", "at most one -1"), ("step", "step 1"),
    ("concat", "differ outside axis"), ("broadcast", "cannot be broadcast"),
    ("index", "out of range"),
    ("rank5", "tiles of rank 5 are not supported")])
def test_bad_shapes_rejected(what, match):
    x = np.zeros((4, 16), np.float32)
    with pytest.raises(CompilationError, match=match):
        bad_shape_kernel[(1,)](x, x.copy(), WHAT=what)
