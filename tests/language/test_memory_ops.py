"""Memory and cube ops: ``store(atomic="add")`` accumulating from many blocks into the same
elements, and the matmul variants (``a @ b``, ``a_trans``, ``b_trans``, ``acc``,
``out_dtype``, int8 → int32).

Atomic adds. Blocks run concurrently on the simulated AI Cores, so the order of the adds is
arbitrary. Each add computes in the tensor's compute dtype and rounds to the tensor dtype
(float16/bfloat16 round after every add). Two kinds of data:
- values whose every partial sum is exactly representable (small integers, multiples of 1/4):
  the result is exact in any order, so a lost or doubled update shows as a wrong value;
- random values, compared with the float64 sum within the bound of K rounded adds,
  sum_k ulp/2(partial_k) <= eps/2 * K * S (S = sum of |terms|), and with the interpreter
  (blocks in order) within twice that.

Matmul error bound (as tests/test_matmul.py): products of float16/bfloat16 operands are exact
in float32 and the sum of K terms is accumulated in float32, so
|c - a @ b| <= (K + 1) * 2**-23 * (|a| @ |b|); a float16 output adds 2**-11 * |c| plus half
the smallest subnormal. int8 x int8 → int32 is exact.

What the NPU target refuses (NotOnChip, docs/pto.md): a transposed float32 or int8 operand
(their L1 fractal is not square, so no view of the same bytes is the transpose; the transposed
variants run on float16 and bfloat16) and an accumulator started from a nonzero fill.
"""
import ml_dtypes
import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.errors import CompilationError, NotOnChip
from tests.quick import quick_cases

from .utils import assert_exact, interpret_mode, npd, run_both

# -- atomic add --------------------------------------------------------------------------------

TM, TN = 8, 32        # tile shape of the atomic kernels
BLOCKS = 48


@pypto.jit
def atomic_add_kernel(x, out, TM: pl.constexpr, TN: pl.constexpr):
    """Block p adds x[p] at (0, 0) and again at (2, 5): the second window overlaps the first
    and reaches past the tensor's edge, where nothing may be written."""
    pid = pl.program_id(0)
    t = pl.load(x, offsets=(pid * TM, 0), shape=(TM, TN))
    pl.store(out, offsets=(0, 0), value=t, atomic="add")
    pl.store(out, offsets=(2, 5), value=t, atomic="add")


def atomic_reference(out0, x, shape):
    """float64 result and S = sum of |terms| per element."""
    tiles = x.astype(np.float64).reshape(BLOCKS, TM, TN)
    total = out0.astype(np.float64).copy()
    absum = np.abs(total).copy()
    r, c = shape
    total += tiles[:, :r, :c].sum(0)
    absum += np.abs(tiles[:, :r, :c]).sum(0)
    total[2:, 5:] += tiles[:, :r - 2, :c - 5].sum(0)
    absum[2:, 5:] += np.abs(tiles[:, :r - 2, :c - 5]).sum(0)
    return total, absum


def run_atomic(name, x, out0):
    got, interp = run_both(atomic_add_kernel, (BLOCKS,), {"x": x, "out": out0}, TM=TM, TN=TN)
    return got["out"], interp["out"]


ATOMIC_DTYPES = ["float32", "int32", "float16", "bfloat16"]    # int64: refused on the chip


@pytest.mark.parametrize("shape", [(TM, TN), (TM - 1, TN - 3)], ids=["whole", "partial"])
@pytest.mark.parametrize("name", quick_cases(ATOMIC_DTYPES, "float32", "bfloat16"))
def test_atomic_add_exact_values(name, shape):
    """Every partial sum is representable: the result is exact whatever the order."""
    rng = np.random.default_rng(1)
    if name in ("int32", "int64"):
        x = rng.integers(-2 ** 31, 2 ** 31, size=(BLOCKS * TM, TN)).astype(npd(name))
        out0 = rng.integers(-1000, 1000, size=shape).astype(npd(name))
    else:
        # |partial sums| < 2 * 48 + 8 = 104: multiples of 1/4 are exact in float16 there
        # (11 significant bits), whole numbers in bfloat16 (8 bits)
        step = 1.0 if name == "bfloat16" else 0.25
        x = (rng.integers(-1, 2, size=(BLOCKS * TM, TN)) if name == "bfloat16" else
             rng.integers(-4, 5, size=(BLOCKS * TM, TN))) * step
        x = x.astype(np.float32).astype(npd(name))
        out0 = rng.integers(-8, 8, size=shape).astype(np.float32).astype(npd(name))
    got, interp = run_atomic(name, x, out0)
    if name in ("int32", "int64"):
        # exact sums in Python ints, wrapped to the dtype
        tiles = x.astype(object).reshape(BLOCKS, TM, TN)
        r, c = shape
        ref = out0.astype(object)
        ref = ref + tiles[:, :r, :c].sum(0)
        ref[2:, 5:] = ref[2:, 5:] + tiles[:, :r - 2, :c - 5].sum(0)
        bits = npd(name).itemsize * 8
        wrap = np.vectorize(lambda v: (v + 2 ** (bits - 1)) % 2 ** bits - 2 ** (bits - 1),
                            otypes=[object])
        want = wrap(ref).astype(npd(name))
    else:
        total, _ = atomic_reference(out0, x, shape)
        want = total.astype(np.float32).astype(npd(name))
        assert np.array_equal(want.astype(np.float64), total), "test data not exact"
    assert_exact(got, want, f"atomic add {name}: compiled")
    assert_exact(interp, want, f"atomic add {name}: interpreter")


def test_an_int64_atomic_add_is_refused_on_the_chip_and_interpreted():
    """A2/A3's atomic store adds 8/16/32-bit integers and floats only (pto-isa
    SetAtomicAdd; PTOAS rejects the 8-byte element): refused at the store's line; the
    interpreter adds exactly, wrapping as int64 does."""
    rng = np.random.default_rng(1)
    x = rng.integers(-2 ** 62, 2 ** 62, size=(BLOCKS * TM, TN), dtype=np.int64)
    out0 = rng.integers(-1000, 1000, size=(TM, TN), dtype=np.int64)
    out = out0.copy()
    with pytest.raises(NotOnChip, match="atomic add of int64.*int32") as got:
        atomic_add_kernel[(BLOCKS,)](x, out, TM=TM, TN=TN)
    assert got.value.loc.function == "atomic_add_kernel"
    with interpret_mode():
        atomic_add_kernel[(BLOCKS,)](x, out, TM=TM, TN=TN)
    tiles = x.astype(object).reshape(BLOCKS, TM, TN)
    ref = out0.astype(object) + tiles.sum(0)
    ref[2:, 5:] += tiles[:, :TM - 2, :TN - 5].sum(0)
    wrap = np.vectorize(lambda v: (v + 2 ** 63) % 2 ** 64 - 2 ** 63, otypes=[object])
    assert_exact(out, wrap(ref).astype(np.int64), "int64 atomic add: interpreter")


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16"])
def test_atomic_add_random_values(name):
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, size=(BLOCKS * TM, TN)).astype(np.float32).astype(npd(name))
    out0 = rng.uniform(-1, 1, size=(TM, TN)).astype(np.float32).astype(npd(name))
    got, interp = run_atomic(name, x, out0)
    total, absum = atomic_reference(out0, x, (TM, TN))
    eps = 2.0 ** -23 if name == "float32" else float(ml_dtypes.finfo(npd(name)).eps)
    adds = 2 * BLOCKS
    tol = eps / 2 * adds * absum
    g, i = got.astype(np.float64), interp.astype(np.float64)
    assert np.all(np.abs(g - total) <= tol), np.max(np.abs(g - total) - tol)
    assert np.all(np.abs(i - total) <= tol), np.max(np.abs(i - total) - tol)
    assert np.all(np.abs(g - i) <= 2 * tol)
    # the bound is loose; in practice the error is a small fraction of it
    assert np.mean(np.abs(g - total)) <= np.mean(tol) / 4


def test_atomic_add_unsupported_dtype_rejected():
    x = np.zeros((BLOCKS * TM, TN), np.int8)
    with pytest.raises(CompilationError, match="atomic"):
        atomic_add_kernel[(1,)](x, np.zeros((TM, TN), np.int8), TM=TM, TN=TN)


# -- matmul ------------------------------------------------------------------------------------

MM, MK, MN = 16, 32, 48


@pypto.jit
def matmul_kernel(a, b, out, M: pl.constexpr, K: pl.constexpr, N: pl.constexpr,
                  VARIANT: pl.constexpr, OUT: pl.constexpr):
    """a is (M, K) or, transposed, (K, M); b is (K, N) or (N, K)."""
    if VARIANT == "a_trans" or VARIANT == "both":
        ta = pl.load(a, offsets=(0, 0), shape=(K, M))
    else:
        ta = pl.load(a, offsets=(0, 0), shape=(M, K))
    if VARIANT == "b_trans" or VARIANT == "both":
        tb = pl.load(b, offsets=(0, 0), shape=(N, K))
    else:
        tb = pl.load(b, offsets=(0, 0), shape=(K, N))
    if VARIANT == "at":
        r = ta @ tb
    elif VARIANT == "a_trans":
        r = pl.matmul(ta, tb, a_trans=True)
    elif VARIANT == "b_trans":
        r = pl.matmul(ta, tb, b_trans=True)
    elif VARIANT == "both":
        r = pl.matmul(ta, tb, a_trans=True, b_trans=True)
    elif VARIANT == "acc":           # K in two halves, accumulated on the cube
        acc = pl.zeros((M, N), dtype=OUT)
        for k in pl.static_range(2):
            pa = pl.load(a, offsets=(0, k * (K // 2)), shape=(M, K // 2))
            pb = pl.load(b, offsets=(k * (K // 2), 0), shape=(K // 2, N))
            acc = pl.matmul(pa, pb, acc=acc)
        r = acc
    elif VARIANT == "out_dtype":
        r = pl.matmul(ta, tb, out_dtype=OUT)
    pl.static_assert(r.dtype == OUT, "matmul result dtype")
    pl.store(out, offsets=(0, 0), value=r)


ACC = {"float16": "float32", "bfloat16": "float32", "float32": "float32", "int8": "int32"}
MATMUL_CASES = [("at", d) for d in ACC] + \
    [(v, d) for v in ("a_trans", "b_trans", "both") for d in ("float16", "bfloat16")] + \
    [("acc", "float32"), ("acc", "int8"), ("acc", "bfloat16"),
     ("out_dtype", "float16"), ("out_dtype", "bfloat16")]


def matmul_inputs(rng, name):
    if name == "int8":
        a = rng.integers(-128, 128, size=(MM, MK)).astype(np.int8)
        b = rng.integers(-128, 128, size=(MK, MN)).astype(np.int8)
        return a, b
    a = rng.standard_normal((MM, MK)).astype(np.float32).astype(npd(name))
    b = rng.standard_normal((MK, MN)).astype(np.float32).astype(npd(name))
    return a, b


@pytest.mark.parametrize("variant,name", quick_cases(
    MATMUL_CASES, ("at", "float16"), ("both", "bfloat16"), ("acc", "int8"),
    ("out_dtype", "float16"), unpack=True), ids=[f"{v}-{d}" for v, d in MATMUL_CASES])
def test_matmul(variant, name):
    rng = np.random.default_rng(len(variant) * 10 + len(name))
    a, b = matmul_inputs(rng, name)
    out_name = ("float16" if name == "float16" else "bfloat16") if variant == "out_dtype" \
        else ACC[name]
    a_arg = a.T.copy() if variant in ("a_trans", "both") else a
    b_arg = b.T.copy() if variant in ("b_trans", "both") else b
    out = np.zeros((MM, MN), npd(out_name))
    got, interp = run_both(matmul_kernel, (1,), {"a": a_arg, "b": b_arg, "out": out},
                           M=MM, K=MK, N=MN, VARIANT=variant, OUT=getattr(pl, out_name))
    g, i = got["out"], interp["out"]
    if name == "int8":
        want = a.astype(np.int64) @ b.astype(np.int64)
        assert_exact(g, want.astype(np.int32), f"{variant} int8: compiled")
        assert_exact(i, want.astype(np.int32), f"{variant} int8: interpreter")
        return
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = a64 @ b64
    bound = (MK + 1) * 2.0 ** -23 * (np.abs(a64) @ np.abs(b64))
    if out_name != "float32":
        info = ml_dtypes.finfo(npd(out_name))
        bound = bound + float(info.eps) * np.abs(want) + float(info.smallest_subnormal)
    for res, what in ((g, "compiled"), (i, "interpreter")):
        err = np.abs(res.astype(np.float64) - want)
        assert np.all(err <= bound), f"{variant} {name} {what}: max excess " \
                                     f"{np.max(err - bound)}"
    assert np.all(np.abs(g.astype(np.float64) - i.astype(np.float64)) <= 2 * bound)


def test_matmul_illegal_operands_rejected():
    a = np.zeros((MM, MK), np.int16)
    b = np.zeros((MK, MN), np.int16)
    with pytest.raises(CompilationError, match="legal cube pair"):
        matmul_kernel[(1,)](a, b, np.zeros((MM, MN), np.int32), M=MM, K=MK, N=MN,
                            VARIANT="at", OUT=pl.int32)


# -- what the NPU target refuses ---------------------------------------------------------------

TRANS_REFUSED = [(v, d) for v in ("a_trans", "b_trans", "both") for d in ("int8", "float32")]


@pytest.mark.parametrize("variant,name", TRANS_REFUSED, ids=[f"{v}-{d}" for v, d in TRANS_REFUSED])
def test_transposed_int8_and_float32_operands_are_refused(variant, name):
    """A2/A3's L1 fractal of int8 and float32 is not square, so a transposed operand of those
    dtypes is refused at the matmul's line; the interpreter still computes it."""
    rng = np.random.default_rng(len(variant) * 10 + len(name))
    a, b = matmul_inputs(rng, name)
    a_arg = a.T.copy() if variant in ("a_trans", "both") else a
    b_arg = b.T.copy() if variant in ("b_trans", "both") else b
    out_name = ACC[name]
    out = np.zeros((MM, MN), npd(out_name))
    kwargs = dict(M=MM, K=MK, N=MN, VARIANT=variant, OUT=getattr(pl, out_name))
    with pytest.raises(NotOnChip, match=f"a transposed {name} matmul operand") as got:
        matmul_kernel[(1,)](a_arg, b_arg, out, **kwargs)
    assert "A2/A3" in str(got.value) and "pl.matmul" in got.value.loc.source_line
    with interpret_mode():
        matmul_kernel[(1,)](a_arg, b_arg, out, **kwargs)
    if name == "int8":
        want = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)
        assert_exact(out, want, f"{variant} int8: interpreter")
    else:
        np.testing.assert_allclose(out, a.astype(np.float64) @ b.astype(np.float64),
                                   rtol=1e-4, atol=1e-4)


@pypto.jit
def acc_from_fill_kernel(a, b, out, M: pl.constexpr, K: pl.constexpr, N: pl.constexpr,
                         FILL: pl.constexpr):
    acc = pl.full((M, N), FILL, dtype=pl.float32)
    ta = pl.load(a, offsets=(0, 0), shape=(M, K))
    tb = pl.load(b, offsets=(0, 0), shape=(K, N))
    acc = pl.matmul(ta, tb, acc=acc)
    pl.store(out, offsets=(0, 0), value=acc)


def test_accumulator_from_a_nonzero_fill_is_refused():
    """Only the cube writes L0C on A2/A3, so an accumulator can start from zeros only
    (docs/pto.md lists it with the NotOnChip refusals); a zero fill compiles."""
    a, b = matmul_inputs(np.random.default_rng(9), "float16")
    out = np.zeros((MM, MN), np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    got, interp = run_both(acc_from_fill_kernel, (1,), {"a": a, "b": b, "out": out},
                           M=MM, K=MK, N=MN, FILL=0.0)
    np.testing.assert_allclose(got["out"], want, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(interp["out"], want, rtol=1e-5, atol=1e-4)
    with pytest.raises(NotOnChip, match="accumulator") as e:
        acc_from_fill_kernel[(1,)](a, b, out, M=MM, K=MK, N=MN, FILL=1.0)
    assert "A2/A3" in str(e.value) and e.value.loc is not None
