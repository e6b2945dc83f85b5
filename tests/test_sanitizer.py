"""PYPTO_SANITIZE / pypto.sanitize() / @pypto.jit(sanitize=True): out-of-range windows,
unwritten outputs and races between blocks are reported with kernel, block, line and extent."""
import warnings

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.backends.interpreter import sanitizer

N = 1 << 14
LINE = {}


@pypto.jit
def add(x, y, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    a = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))      # +3
    b = pl.load(y, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(pid * BLOCK,), value=a + b)          # +5


@pypto.jit
def every_block_writes_the_start(x, out, BLOCK: pl.constexpr):
    t = pl.load(x, offsets=(pl.program_id(0) * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(0,), value=t)                        # +3


@pypto.jit
def every_block_adds_into_the_start(x, out, BLOCK: pl.constexpr):
    t = pl.load(x, offsets=(pl.program_id(0) * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(0,), value=t, atomic="add")


@pypto.jit(sanitize=True)
def always_sanitized(x, out, BLOCK: pl.constexpr):
    pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(BLOCK,)))


def _line(kernel, offset):
    return kernel.fn.__code__.co_firstlineno + offset


def _arrays(n=N):
    return np.ones(n, np.float32), np.ones(n, np.float32), np.zeros(n, np.float32)


def _findings(call):
    sanitizer.reports.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pypto.sanitize():
            call()
    return [w for w in caught if issubclass(w.category, pypto.SanitizerWarning)]


def test_forgotten_grid_reports_the_unwritten_outputs():
    x, y, out = _arrays()
    [w] = _findings(lambda: add(x, y, out, BLOCK=64))
    text = str(w.message)
    assert (f"add: {N - 48 * 64:,} of {N:,} elements of out were written by no block (the "
            "first: out[3072]); the grid (48,) may be too small for the data, or the launch "
            "lacks [grid]") in text
    assert w.filename == __file__
    np.testing.assert_array_equal(out[:3072], 2)        # the run itself still happened


def test_too_small_grid_and_offsets_past_the_end():
    x, y, out = _arrays()
    [w] = _findings(lambda: add[(N // 64 - 1,)](x, y, out, BLOCK=64))
    assert "out were written by no block (the first: out[16320]); the grid (255,)" in \
        str(w.message)
    [w] = _findings(lambda: add[(N // 64 + 1,)](x, y, out, BLOCK=64))
    text = str(w.message)
    assert (f"add: block (256, 0, 0) at {__file__}:{_line(add, 3)}:9: pl.load of "
            f"x[16384:16448] reaches outside x's extent (16384,); the padding value is read "
            "there") in text
    assert (f"at {__file__}:{_line(add, 5)}:5: pl.store of out[16384:16448] reaches outside "
            "out's extent (16384,); those elements are not written") in text


def test_the_count_of_findings_past_the_limit_names_its_source_line():
    x, y, out = _arrays()
    [w] = _findings(lambda: add[(N // 64 + 8,)](x, y, out, BLOCK=64))
    text = str(w.message)
    for offset, what in ((3, "load"), (4, "load"), (5, "store")):
        assert (f"add: 3 more out of range finding(s) like the above, of the pl.{what} at "
                f"{__file__}:{_line(add, offset)}:") in text


def test_two_blocks_writing_one_element_is_a_race_unless_atomic():
    x, _, out = _arrays()
    [w] = _findings(lambda: every_block_writes_the_start[(3,)](x, out[:64], BLOCK=64))
    text = str(w.message)
    assert (f"every_block_writes_the_start: blocks 0 and 1 both write out[0] (block 1 at "
            f"{__file__}:{_line(every_block_writes_the_start, 3)}:5, without atomic=)") in text
    assert text.count("[pypto sanitize: race]") == 2
    acc = np.zeros(64, np.float32)
    assert not _findings(lambda: every_block_adds_into_the_start[(3,)](x, acc, BLOCK=64))
    np.testing.assert_array_equal(acc, 3)


def test_a_clean_launch_reports_nothing_and_raise_mode_raises(monkeypatch):
    x, y, out = _arrays()
    assert not _findings(lambda: add[(N // 64,)](x, y, out, BLOCK=64))
    monkeypatch.setenv("PYPTO_SANITIZE", "raise")
    with pytest.raises(pypto.SanitizerError, match="were written by no block"):
        add(x, y, out, BLOCK=64)


def test_off_by_default_and_per_kernel_option():
    x, y, out = _arrays()
    with warnings.catch_warnings():
        warnings.simplefilter("error", pypto.SanitizerWarning)
        add[(N // 128,)](x, y, out, BLOCK=64)           # half written: nothing said when off
    with pytest.warns(pypto.SanitizerWarning, match="always_sanitized: 16,320 of 16,384"):
        always_sanitized[(1,)](x, out, BLOCK=64)


def test_the_warm_path_follows_the_switch(monkeypatch):
    """The launch key includes PYPTO_SANITIZE: a warm kernel is sanitized once it is on."""
    x, y, out = _arrays()
    add[(N // 128,)](x, y, out, BLOCK=64)
    add[(N // 128,)](x, y, out, BLOCK=64)               # warm
    monkeypatch.setenv("PYPTO_SANITIZE", "1")
    with pytest.warns(pypto.SanitizerWarning, match="written by no block"):
        add[(N // 128,)](x, y, out, BLOCK=64)


@pypto.jit
def every_block_scatters_to_row_zero(x, idx, ADD: pl.constexpr):
    i = pl.load(idx, offsets=(0, 0), shape=(1, 4))
    v = pl.full((1, 4), 1.0)
    if ADD:
        pl.scatter(x, i, v, reduce="add")
    else:
        pl.scatter(x, i, v)


def test_scatters_of_two_blocks_to_one_element_race_unless_reduce_add():
    """pl.scatter's elements are writes like pl.store's (out-of-range indices are defined:
    dropped, not reported; a scatter writes part of its tensor by nature, so its tensor is
    not checked for unwritten elements)."""
    x, idx = np.zeros((3, 4), np.float32), np.array([[0, 0, 7, -1]], np.int32)
    [w] = _findings(lambda: every_block_scatters_to_row_zero[(2,)](x, idx, ADD=False))
    assert "race" in str(w.message)
    assert not _findings(lambda: every_block_scatters_to_row_zero[(2,)](x, idx, ADD=True))


@pypto.jit
def fills_only_if_asked(x, out, n):
    buf = pl.alloc_buffer((16,))                                # +2
    if n > 0:
        pl.async_load(x, buf, offsets=(0,))
        pl.synchronize()
    pl.store(out, offsets=(0,), value=buf)                      # +6


@pypto.jit
def fills_in_a_loop(x, out, n):
    buf = pl.alloc_buffer((16,))                                # +2
    for i in range(n):
        pl.async_load(x, buf, offsets=(0,))
        pl.synchronize()
    pl.store(out, offsets=(0,), value=buf * 2.0)                # +6


def test_reading_a_buffer_its_runtime_branch_did_not_fill_is_reported():
    """The compiler refuses a read no fill can reach; one a runtime if (or a loop that ran
    no iteration) skipped the fill of is seen at run time, in the block that read it."""
    x, out = np.ones(16, np.float32), np.zeros(16, np.float32)
    [w] = _findings(lambda: fills_only_if_asked[(1,)](x, out, 0))
    assert (f"[pypto sanitize: unfilled buffer] fills_only_if_asked: block (0, 0, 0) at "
            f"{__file__}:{_line(fills_only_if_asked, 6)}:5: buf (pl.alloc_buffer at line "
            f"{_line(fills_only_if_asked, 2)}) is read before any pl.async_load filled it"
            ) in str(w.message)
    np.testing.assert_array_equal(out, 0)       # the interpreter's stand-in: zeros
    [w] = _findings(lambda: fills_in_a_loop[(1,)](x, out, 0))
    text = str(w.message)
    assert f"block (0, 0, 0) at {__file__}:{_line(fills_in_a_loop, 6)}:" in text
    assert f"buf (pl.alloc_buffer at line {_line(fills_in_a_loop, 2)})" in text
    assert not _findings(lambda: fills_only_if_asked[(1,)](x, out, 1))
    assert not _findings(lambda: fills_in_a_loop[(1,)](x, out, 3))


@pypto.jit
def add_rows(x, out, BM: pl.constexpr, BN: pl.constexpr):
    t = pl.load(x, offsets=(pl.program_id(0) * BM, 0), shape=(BM, BN), padding=0.0)
    pl.store(out, offsets=(pl.program_id(0) * BM, 0), value=t + 1.0)


@pypto.jit
def shifted(x, out, BLOCK: pl.constexpr, SHIFT: pl.constexpr):
    t = pl.load(x, offsets=(pl.program_id(0) * BLOCK - SHIFT,), shape=(BLOCK,))
    pl.store(out, offsets=(pl.program_id(0) * BLOCK,), value=t)


@pypto.jit
def unpadded(x, out, BLOCK: pl.constexpr):
    t = pl.load(x, offsets=(pl.program_id(0) * BLOCK,), shape=(BLOCK,), padding=None)
    pl.store(out, offsets=(pl.program_id(0) * BLOCK,), value=t)


def test_the_ragged_tail_idiom_is_quiet():
    """The documented idiom (docs/language.md, tutorial 01): a grid of cdiv(n, BLOCK) blocks,
    the last one's padded load and store running past the end. Nothing to report (issue 34:
    every such launch was reported as out of range)."""
    n = 1000
    x, y, out = _arrays(n)
    assert not _findings(lambda: add[(pl.cdiv(n, 64),)](x, y, out, BLOCK=64))
    np.testing.assert_array_equal(out, 2)
    x2 = np.ones((100, 48), np.float32)
    out2 = np.zeros_like(x2)
    assert not _findings(lambda: add_rows[(pl.cdiv(100, 16),)](x2, out2, BM=16, BN=64))
    np.testing.assert_array_equal(out2, 2)
    x, _, out = _arrays(40)                                  # one block larger than the data
    assert not _findings(lambda: add[(1,)](x, x, out, BLOCK=64))


def test_real_out_of_range_access_is_still_reported():
    """What is not the idiom stays loud: windows wholly past the end (load and store), a
    window that starts before the tensor, and a padding=None load crossing the edge."""
    n = 1000
    x, y, out = _arrays(n)
    [w] = _findings(lambda: add[(pl.cdiv(n, 64) + 1,)](x, y, out, BLOCK=64))
    text = str(w.message)
    assert "pl.load of x[1024:1088] reaches outside x's extent (1000,)" in text
    assert "pl.store of out[1024:1088] reaches outside out's extent (1000,)" in text
    [w] = _findings(lambda: shifted[(n // 100,)](x, out, BLOCK=100, SHIFT=3))
    assert "pl.load of x[-3:97] reaches outside x's extent (1000,)" in str(w.message)
    with pytest.raises(IndexError, match="padding=None"):
        _findings(lambda: unpadded[(pl.cdiv(n, 64),)](x, out, BLOCK=64))
