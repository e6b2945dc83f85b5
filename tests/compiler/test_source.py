"""Reading a kernel's source (compiler/source.py, _function_source): from the code objects'
line table, with inspect as the fallback when a trailing statement left no instruction behind."""
import numpy as np

import pypto
import pypto.language as pl
from pypto.compiler.source import KernelSource


@pypto.jit
def ends_in_a_bare_string(x, out, FLAG: pl.constexpr):
    t = pl.load(x, offsets=(0,), shape=(16,))
    if FLAG:
        pl.store(out, offsets=(0,), value=t + 1.0)
    else:
        "the compiler keeps no instruction of this line"


@pypto.jit
def with_trailing_comments(x, out):
    t = pl.load(x, offsets=(0,), shape=(16,))
    pl.store(out, offsets=(0,), value=t * 2.0)
    # a comment after the last statement


def test_a_dropped_last_statement_falls_back_to_the_whole_definition():
    source = KernelSource(ends_in_a_bare_string.fn)
    assert source.lines[-1].strip().startswith('"the compiler keeps')
    x, out = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    ends_in_a_bare_string[(1,)](x, out, FLAG=True)
    np.testing.assert_array_equal(out, x + 1)


def test_the_line_table_gives_the_definition_and_its_first_line():
    source = KernelSource(with_trailing_comments.fn)
    assert source.lines[0] == "@pypto.jit"
    assert source.lines[-1].strip().startswith("pl.store")
    assert source.first_line == with_trailing_comments.fn.__code__.co_firstlineno
    x, out = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    with_trailing_comments[(1,)](x, out)
    np.testing.assert_array_equal(out, x * 2)
