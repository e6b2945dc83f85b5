"""Windows at negative offsets (issue 30, item 1): the chip cannot move a window that starts
before its tensor, so such a load or store is checked at run time and, when it does, moved
element by element (passes/legalize_windows.py). The host, the interpreter and pto-isa's
simulator agree, and the bytes around the tensors stay as they were."""
import warnings

import numpy as np
import pytest

import pypto
import pypto.language as pl
from tests.engines.tools import needs_tools


@pypto.jit
def halo(x, out, S, B: pl.constexpr):
    """The usual shifted load: block p reads x[p*B - S ...], padding before the start."""
    p = pl.program_id(0)
    pl.store(out, offsets=(p * B,), value=pl.load(x, offsets=(p * B - S,), shape=(B,),
                                                  padding=-1.0))


@pypto.jit
def shifted_store(x, out, S, B: pl.constexpr):
    p = pl.program_id(0)
    pl.store(out, offsets=(p * B - S,), value=pl.load(x, offsets=(p * B,), shape=(B,)) + 1.0)


@pypto.jit
def window_2d(x, out, R, C, BR: pl.constexpr, BC: pl.constexpr):
    """Windows partly before and partly after the tensor, in both axes."""
    i, j = pl.program_id(0), pl.program_id(1)
    t = pl.load(x, offsets=(i * BR - R, j * BC - C), shape=(BR, BC), padding=0.5)
    pl.store(out, offsets=(i * BR - R, j * BC - C), value=t * 2.0)


def _reference(n, B, S):
    x = np.arange(n, dtype=np.float32)
    load = np.concatenate([np.full(S, -1.0, np.float32), x[:n - S]])
    store = np.full(n, 7.0, np.float32)
    store[:n - S] = (x + 1)[S:]
    return x, load, store


def _guarded(shape, fill, dtype=np.float32):
    """An array inside a larger one: the bytes around it must not change."""
    big = np.full((shape[0] + 2, shape[1] + 16) if len(shape) == 2 else shape[0] + 32, fill,
                  dtype)
    inner = big[1:-1, 8:-8] if len(shape) == 2 else big[16:-16]
    return big, inner


def _run(engine):
    kw = {} if engine == "native" else {"engine": engine}
    n, B, S = 64, 16, 5
    x, want_load, want_store = _reference(n, B, S)
    big, out = _guarded((n,), 9.0)
    pypto.jit(halo.fn, **kw)[(n // B,)](x, out, S, B=B)
    np.testing.assert_array_equal(out, want_load)
    assert (big[:16] == 9).all() and (big[-16:] == 9).all()
    big, out = _guarded((n,), 7.0)
    pypto.jit(shifted_store.fn, **kw)[(n // B,)](x, out, S, B=B)
    np.testing.assert_array_equal(out, want_store)
    assert (big[:16] == 7).all() and (big[-16:] == 7).all()
    X = np.arange(30 * 29, dtype=np.float32).reshape(30, 29)
    big, O = _guarded((30, 29), 3.0)
    pypto.jit(window_2d.fn, **kw)[(5, 5)](X, O, 3, 5, BR=8, BC=8)
    # blocks cover rows -3 .. 36 and columns -5 .. 34: every element is stored twice, once
    # read from the tensor (times 2); the elements outside are never written
    np.testing.assert_array_equal(O, X * 2)
    border = big.copy()
    border[1:-1, 8:-8] = 3.0
    assert (border == 3.0).all()


def test_negative_windows_on_the_host():
    _run("native")


@needs_tools
@pytest.mark.heavy
def test_negative_windows_on_pto_isas_simulator():
    _run("pto-isa")


@pypto.jit
def strided_rows(x, out, n, B: pl.constexpr):
    """Offsets from a block id, a loop counter that starts at it and steps by the grid, and
    constants: never negative."""
    for r in range(pl.program_id(0) * B, n, pl.num_programs(0) * B):
        pl.store(out, offsets=(r, 0), value=pl.load(x, offsets=(r, 0), shape=(B, 16)))


def test_only_windows_that_may_start_before_the_tensor_are_checked():
    """A plain kernel's .pto keeps one window per load and store (no run-time check); the
    halo's load and the shifted store get one (an scf.if around each)."""
    x = np.zeros((64, 16), np.float32)
    plain = strided_rows.compile(x, x.copy(), 64, B=8).asm["pto"]
    assert "scf.if" not in plain and plain.count("pto.tload") == 1
    v = np.zeros(64, np.float32)
    assert _window_checks(halo.compile(v, v.copy(), 5, B=16).asm["pto"]) == 1
    assert _window_checks(shifted_store.compile(v, v.copy(), 5, B=16).asm["pto"]) == 1


def _window_checks(pto: str) -> int:
    """The scf.if blocks that move a window (a tload or tstore inside): not the checks that
    only decide whether a load's padding is written (passes/fillpad.py)."""
    count, open_ifs = 0, []        # (indent, moves a window) of the enclosing scf.if blocks
    for line in pto.splitlines():
        indent = len(line) - len(line.lstrip())
        while open_ifs and indent <= open_ifs[-1][0] and not line.lstrip().startswith("}"):
            count += open_ifs.pop()[1]
        if "scf.if" in line:
            open_ifs.append([indent, False])
        elif open_ifs and ("pto.tload" in line or "pto.tstore" in line):
            open_ifs[-1][1] = True
    return count + sum(moves for _, moves in open_ifs)


@pypto.jit
def shifted_matmul(a, b, c, start, CLAMP: pl.constexpr):
    """A matmul operand at a run-time row offset: checked unless clamped at 0."""
    row = max(start, 0) if CLAMP else start
    ta = pl.load(a, offsets=(row, 0), shape=(16, 32))
    pl.store(c, offsets=(0, 0), value=pl.matmul(ta, pl.load(b, offsets=(0, 0), shape=(32, 16))))


def test_a_checked_matmul_operand_says_so_and_a_clamped_one_does_not(fresh_cache):
    """A checked cube operand travels GM -> UB -> GM -> L1 through the vector core (tutorial
    12 paid it for every K and V tile): the compiler names the line and what to do."""
    a, b = np.ones((64, 32), np.float16), np.ones((32, 16), np.float16)
    c = np.zeros((16, 16), np.float32)
    with pytest.warns(pypto.CheckedWindowWarning, match=r"test_negative_windows\.py:\d+.*max"):
        shifted_matmul.compile(a, b, c, 8, CLAMP=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", pypto.CheckedWindowWarning)
        shifted_matmul.compile(a, b, c, 8, CLAMP=True)
        shifted_matmul[(1,)](a, b, c, 8, CLAMP=True)
    np.testing.assert_allclose(c, np.full((16, 16), 32.0))
