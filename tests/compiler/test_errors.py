"""User mistakes give errors that name the source line or the argument."""
import numpy as np
import pytest

import pypto
from pypto.target import UB_USABLE
import pypto.language as pl


@pypto.jit
def uses_try(x, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    try:
        a = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    except Exception:
        pass


@pypto.jit
def add_kernel(x, y, out, n, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    a = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    b = pl.load(y, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(pid * BLOCK,), value=a + b)


@pypto.jit
def too_big(x, out):
    a = pl.load(x, offsets=(0, 0), shape=(256, 256))
    pl.store(out, offsets=(0, 0), value=a + a)


@pypto.jit
def undefined_name(x, out):
    a = pl.load(x, offsets=(0,), shape=(16,))
    pl.store(out, offsets=(0,), value=a + not_defined_anywhere)


@pypto.jit
def wrong_rank(x, out):
    a = pl.load(x, offsets=(0, 0), shape=(16, 16))
    pl.store(out, offsets=(0, 0), value=a)


@pypto.jit
def changes_type_in_loop(x, out, n):
    acc = pl.zeros((16,), dtype=pl.float32)
    for i in range(0, n, 16):
        acc = pl.load(x, offsets=(i,), shape=(32,))
    pl.store(out, offsets=(0,), value=acc)


@pypto.jit
def helper(t):
    return t + oops_helper


@pypto.jit
def calls_helper(x, out):
    a = pl.load(x, offsets=(0,), shape=(16,))
    pl.store(out, offsets=(0,), value=helper(a))


@pypto.jit
def cube_then_vector(a, b, c):
    ta = pl.load(a, offsets=(0, 0), shape=(16, 16))
    tb = pl.load(b, offsets=(0, 0), shape=(16, 16))
    acc = pl.matmul(ta, tb)
    pl.store(c, offsets=(0, 0), value=acc * 2.0)


x16 = np.zeros(16, np.float32)


def test_unsupported_construct_points_at_line_with_caret():
    with pytest.raises(pypto.CompilationError) as e:
        uses_try[(1,)](x16, x16, BLOCK=16)
    text = str(e.value)
    assert "try/except is not supported" in text
    assert "test_errors.py:" in text
    assert "try:" in text and "^^^" in text
    assert e.value.loc.line == uses_try.fn.__code__.co_firstlineno + 3


def test_wrong_number_of_arguments():
    with pytest.raises(TypeError, match=r"add_kernel\(\).* missing .*'n'"):
        add_kernel[(1,)](x16, x16, x16, BLOCK=16)
    with pytest.raises(TypeError, match=r"add_kernel\(\) takes 5 argument\(s\) \(x, y, out, n, "
                       r"BLOCK\) but 6 positional"):
        add_kernel[(1,)](x16, x16, x16, 16, 16, 16)


def test_string_given_for_tensor_names_the_argument():
    with pytest.raises(TypeError, match="argument 'y' must be a tensor"):
        add_kernel[(1,)](x16, "hello", x16, 16, BLOCK=16)


def test_unsupported_dtype_names_the_argument():
    with pytest.raises(TypeError, match="argument 'out'.*complex64"):
        add_kernel[(1,)](x16, x16, np.zeros(16, np.complex64), 16, BLOCK=16)


def test_bad_grid():
    with pytest.raises(ValueError, match="grid"):
        add_kernel[(-1,)](x16, x16, x16, 16, BLOCK=16)
    with pytest.raises(ValueError, match="grid"):
        add_kernel[(1, 1, 1, 1)](x16, x16, x16, 16, BLOCK=16)


def test_buffer_overflow_names_buffer_sizes_and_tiles():
    big = np.zeros((256, 256), np.float32)
    with pytest.raises(pypto.CompilationError) as e:
        too_big[(1,)](big, big)
    text = str(e.value)
    assert "UB (vec) overflow" in text and str(UB_USABLE) in text and "262144" in text
    assert "smaller" in text and "test_errors.py" in text


def test_undefined_name():
    with pytest.raises(pypto.CompilationError, match="name 'not_defined_anywhere' is not defined"):
        undefined_name[(1,)](x16, x16)


def test_tile_rank_must_match_tensor_rank():
    with pytest.raises(pypto.CompilationError, match="rank"):
        wrong_rank[(1,)](x16, x16)


def test_loop_carried_value_must_keep_its_type():
    with pytest.raises(pypto.CompilationError, match="'acc' changes type inside the loop"):
        changes_type_in_loop[(1,)](np.zeros(64, np.float32), x16, 64)


def test_error_in_inlined_function_shows_call_chain():
    with pytest.raises(pypto.CompilationError) as e:
        calls_helper[(1,)](x16, x16)
    text = str(e.value)
    assert "oops_helper" in text and "called from" in text


def test_cube_result_into_vector_code_goes_through_global_memory():
    m = np.random.default_rng(1).standard_normal((16, 16)).astype(np.float16)
    out = np.zeros((16, 16), np.float32)
    cube_then_vector[(1,)](m, m, out)
    ref = 2 * (m.astype(np.float32) @ m.astype(np.float32))
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3)


@pypto.jit
def vector_then_cube(a, c):
    ta = pl.load(a, offsets=(0, 0), shape=(16, 16))
    pl.store(c, offsets=(0, 0), value=pl.matmul(ta * 2.0, ta))


@pypto.jit
def vector_operand_to_cube(a, c):
    doubled = pl.load(a, offsets=(0, 0), shape=(16, 16)) * 2.0
    pl.store(c, offsets=(0, 0), value=pl.matmul(doubled, pl.load(a, offsets=(0, 0),
                                                                 shape=(16, 16))))


def test_vector_result_as_matmul_operand_goes_through_global_memory():
    # rejected ("must come straight from pl.load") before the vector → cube hand-off existed
    m = np.random.default_rng(2).standard_normal((16, 16)).astype(np.float16)
    out = np.zeros((16, 16), np.float32)
    vector_operand_to_cube[(1,)](m, out)
    ref = (2 * m).astype(np.float32) @ m.astype(np.float32)
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3)


def test_one_tile_loaded_for_both_units_is_a_clear_error():
    m = np.zeros((16, 16), np.float16)
    with pytest.raises(pypto.CompilationError, match="Load the tile once for each unit"):
        vector_then_cube[(1,)](m, np.zeros((16, 16), np.float32))


def test_read_only_output_is_rejected_before_launch():
    out = np.zeros(16, np.float32)
    out.setflags(write=False)
    with pytest.raises(ValueError, match="argument 'out' is stored to but is a read-only"):
        add_kernel[(1,)](x16, x16, out, 16, BLOCK=16)


def test_language_stub_outside_kernel():
    with pytest.raises(RuntimeError, match="inside a @pypto.jit kernel"):
        pl.load(x16, offsets=(0,), shape=(16,))
