"""User mistakes in kernels: each gives an error that says what is wrong and where.

Every case checks the message text and the reported source line, computed from the kernel's
``fn.__code__.co_firstlineno`` (the line of its ``@pypto.jit`` decorator) plus an offset, so
moving a kernel in this file does not break its test.
"""
import inspect
import os
import pickle
import traceback

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.target import get_target

x16 = np.zeros(16, np.float32)
m16 = np.zeros((16, 16), np.float32)
GLOBAL_ARRAY = np.arange(4.0)
GLOBAL_LIST = [1, 2, 3]
PYPTO_DIR = os.path.dirname(os.path.abspath(pypto.__file__))


def plain_python_helper(t):
    return t * 2


# -- kernels, one mistake each (the comment gives the offset of the offending line) ---------------

@pypto.jit
def uses_with(x, out):
    t = pl.load(x, offsets=(0,), shape=(16,))
    with open("/dev/null"):                               # +3
        pl.store(out, offsets=(0,), value=t)


@pypto.jit
def uses_try(x, out):
    try:                                                  # +2
        t = pl.load(x, offsets=(0,), shape=(16,))
    finally:
        pass


@pypto.jit
def uses_lambda(x, out):
    t = pl.load(x, offsets=(0,), shape=(16,))
    double = lambda v: v * 2  # noqa: E731                   +3
    pl.store(out, offsets=(0,), value=double(t))


@pypto.jit
def defines_class(x, out):
    class Helper:                                         # +2
        pass


@pypto.jit
def global_statement(x, out):
    global GLOBAL_LIST                                    # +2
    t = pl.load(x, offsets=(0,), shape=(16,))


@pypto.jit
def uses_break(x, out, n):
    for i in range(n):
        break                                             # +3


@pypto.jit
def shape_mismatch(x, out):
    a = pl.load(x, offsets=(0,), shape=(16,))
    b = pl.load(x, offsets=(0,), shape=(8,))
    pl.store(out, offsets=(0,), value=a + b)              # +4


@pypto.jit
def bitwise_on_floats(x, out):
    a = pl.load(x, offsets=(0,), shape=(16,))
    pl.store(out, offsets=(0,), value=a & a)              # +3


@pypto.jit
def shift_on_floats(x, out):
    a = pl.load(x, offsets=(0,), shape=(16,))
    pl.store(out, offsets=(0,), value=a << 2)             # +3


@pypto.jit
def too_big_for_ub(x, out):
    big = pl.load(x, offsets=(0, 0), shape=(256, 256))    # +2
    pl.store(out, offsets=(0, 0), value=big * 2.0)


@pypto.jit
def shape_from_runtime_int(x, out, n):
    t = pl.load(x, offsets=(0,), shape=(n,))              # +2
    pl.store(out, offsets=(0,), value=t)


@pypto.jit
def reads_global_array(x, out):
    t = pl.load(x, offsets=(0,), shape=(4,))
    pl.store(out, offsets=(0,), value=t + GLOBAL_ARRAY)   # +3


@pypto.jit
def reads_global_list(x, out):
    t = pl.load(x, offsets=(0,), shape=(4,))
    pl.store(out, offsets=(0,), value=t * GLOBAL_LIST[0])  # +3


@pypto.jit
def one_branch_name(x, out, n):
    t = pl.load(x, offsets=(0,), shape=(16,))
    if n > 0:
        y = t * 2
    pl.store(out, offsets=(0,), value=y)                  # +5


@pypto.jit
def branch_shapes_differ(x, out, n):
    t = pl.load(x, offsets=(0,), shape=(16,))
    if n > 0:
        t = pl.load(x, offsets=(0,), shape=(8,))          # +4
    pl.store(out, offsets=(0,), value=t)


@pypto.jit
def carried_changes_type(x, out, n):
    acc = 0.0
    for i in range(n):
        acc = pl.load(x, offsets=(0,), shape=(16,))       # +4
    pl.store(out, offsets=(0,), value=acc)


@pypto.jit
def carried_changes_dtype(x, out, n):
    acc = pl.zeros((16,), dtype=pl.float32)
    while n > 0:
        n = n - 1
        acc = pl.cast(acc, pl.float16)                    # +5 (the last line of the body)
    pl.store(out, offsets=(0,), value=acc)


@pypto.jit
def carried_changes_dtype_early(x, out, n):
    acc = pl.zeros((16,), dtype=pl.float32)
    while n > 0:
        acc = pl.cast(acc, pl.float16)                    # +4
        n = n - 1
    pl.store(out, offsets=(0,), value=acc)


@pypto.jit
def unknown_dtype_attribute(x, out):
    t = pl.zeros((16,), dtype=pl.float128)                # +2
    pl.store(out, offsets=(0,), value=t)


@pypto.jit
def unknown_dtype_name(x, out):
    t = pl.load(x, offsets=(0,), shape=(16,))
    pl.store(out, offsets=(0,), value=pl.cast(t, "float17"))   # +3


@pypto.jit
def matmul_inner_dims(a, b, c):
    ta = pl.load(a, offsets=(0, 0), shape=(16, 32))
    tb = pl.load(b, offsets=(0, 0), shape=(16, 16))
    pl.store(c, offsets=(0, 0), value=ta @ tb)            # +4


@pypto.jit
def matmul_dtype_pair(a, b, c):
    ta = pl.load(a, offsets=(0, 0), shape=(16, 16))
    tb = pl.load(b, offsets=(0, 0), shape=(16, 16))
    pl.store(c, offsets=(0, 0), value=pl.matmul(ta, tb))  # +4


@pypto.jit
def reduction_axis(x, out):
    t = pl.load(x, offsets=(0, 0), shape=(16, 16))
    pl.store(out, offsets=(0, 0), value=pl.sum(t, axis=2, keepdims=True))   # +3


@pypto.jit
def reshape_count(x, out):
    t = pl.load(x, offsets=(0,), shape=(16,))
    r = pl.reshape(t, (5, 3))                             # +3


@pypto.jit
def slice_step(x, out):
    t = pl.load(x, offsets=(0,), shape=(16,))
    pl.store(out, offsets=(0,), value=t[::2])             # +3


@pypto.jit
def not_on_tile(x, out):
    t = pl.load(x, offsets=(0,), shape=(16,))
    pl.store(out, offsets=(0,), value=not t)              # +3


@pypto.jit
def and_on_tiles(x, out):
    t = pl.load(x, offsets=(0,), shape=(16,))
    m = (t > 0) and (t < 1)                               # +3


@pypto.jit
def return_in_loop(x, out, n):
    for i in range(n):
        return                                            # +3


@pypto.jit
def calls_python_function(x, out):
    t = pl.load(x, offsets=(0,), shape=(16,))
    pl.store(out, offsets=(0,), value=plain_python_helper(t))   # +3


@pypto.jit
def while_true(x, out):
    t = pl.load(x, offsets=(0,), shape=(16,))
    while True:                                           # +3
        pass


@pypto.jit
def while_true_changing_a_tile(x, out):
    t = pl.load(x, offsets=(0,), shape=(16,))
    while True:                                           # +3
        t = t + 1


@pypto.jit
def failing_static_assert(x, out, BLOCK: pl.constexpr):
    pl.static_assert(BLOCK & (BLOCK - 1) == 0, "BLOCK must be a power of two")   # +2


@pypto.jit
def chained_comparison(x, out, n):
    if 0 < n < 10:                                        # +2
        pass


@pypto.jit
def returns_a_value(x, out):
    return pl.load(x, offsets=(0,), shape=(16,))          # +2


@pypto.jit
def rank_five_tile(x, out):
    t = pl.zeros((1, 1, 2, 4, 8))                             # +2


@pypto.jit
def loop_over_list(x, out):
    for v in [1, 2, 3]:                                   # +2
        pass


@pypto.jit
def arithmetic_on_tensor(x, out):
    y = x * 2                                             # +2


@pypto.jit
def tile_conditional_expression(x, out, n):
    t = pl.load(x, offsets=(0,), shape=(16,))
    u = t if n > 0 else t * 2                             # +3


@pypto.jit
def undefined_name(x, out):
    t = pl.load(x, offsets=(0,), shape=(16,))
    pl.store(out, offsets=(0,), value=t + undefined_thing)   # noqa: F821   +3


@pypto.jit
def fstring(x, out):
    pl.static_print(f"value {1}")                         # +2


@pypto.jit
def store_a_scalar(x, out, n):
    pl.store(out, offsets=(0,), value=n)                  # +2


@pypto.jit
def helper_with_two_params(a, b):
    return a + b


@pypto.jit
def calls_helper_with_wrong_arity(x, out):
    t = pl.load(x, offsets=(0,), shape=(16,))
    pl.store(out, offsets=(0,), value=helper_with_two_params(t))   # +3


@pypto.jit
def uses_list_comprehension(x, out):
    tiles = [pl.load(x, offsets=(i,), shape=(4,)) for i in range(4)]   # +2


@pypto.jit
def uses_continue(x, out, n):
    for i in range(n):
        continue                                          # +3


@pypto.jit
def uses_raise(x, out):
    raise ValueError("no")                                # +2


@pypto.jit
def indexes_a_tensor(x, out):
    first = x[0]                                          # +2


@pypto.jit
def stores_a_tensor_window(x, out):
    pl.store(out, offsets=(0,), value=x[0:16])            # +2


@pypto.jit
def tile_size_from_tensor_shape(x, out):
    t = pl.load(x, offsets=(0,), shape=(x.shape[0] // 2,))   # +2


# (kernel, call arguments, message regex, line offset)
CASES = [
    (uses_with, (x16, x16), r"a with block is not supported inside a PyPTO kernel; no context "
     r"managers", 3),
    (uses_try, (x16, x16), r"try/except is not supported inside a PyPTO kernel; a kernel cannot "
     r"raise or catch: out-of-range loads pad and stores clip.*pl\.where", 2),
    (uses_lambda, (x16, x16), r"lambda is not supported inside a PyPTO kernel; define a "
     r"@pypto\.jit helper at module level", 3),
    (defines_class, (x16, x16), r"a class definition is not supported inside a PyPTO kernel", 2),
    (global_statement, (x16, x16), r"global is not supported inside a PyPTO kernel; kernels read "
     r"module constants but cannot assign them", 2),
    (uses_break, (x16, x16, 4), r"break is not supported inside a PyPTO kernel; a PyPTO for loop "
     r"runs its whole range: use `while cond:`", 3),
    (uses_list_comprehension, (x16, x16), r"a list comprehension is not supported inside a PyPTO "
     r"kernel; kernels have no lists: write a tuple \(a, b, c\), or unroll with `for i in "
     r"pl\.static_range\(n\):`", 2),
    (uses_continue, (x16, x16, 4), r"continue is not supported.*under `if not cond:`", 3),
    (uses_raise, (x16, x16), r"raise is not supported.*pl\.static_assert\(cond, msg\)", 2),
    (indexes_a_tensor, (x16, x16), r"a kernel does not index tensors element by element: read a "
     r"tile with pl\.load\(x, offsets=\(i,\), shape=\(n,\)\)", 2),
    (stores_a_tensor_window, (x16, x16), r"a tensor window x\[a:b\] \(only pl\.async_load takes "
     r"one; read a tile with pl\.load", 2),
    (tile_size_from_tensor_shape, (x16, x16), r"shape must be known at compile time, but it "
     r"contains a runtime value; a tensor's extents \(x\.shape\[\.\.\.\]\) are runtime values "
     r"inside a kernel.*pass it as a pl\.constexpr parameter \(BLOCK: pl\.constexpr", 2),
    (shape_mismatch, (x16, x16), r"tile shapes \(16,\) and \(8,\) cannot be broadcast together",
     4),
    (bitwise_on_floats, (x16, x16),
     r"'and' is not supported on float32 tiles; it needs integer or bool operands", 3),
    (shift_on_floats, (x16, x16),
     r"'shl' is not supported on float32 tiles; it needs integer operands", 3),
    (shape_from_runtime_int, (x16, x16, 16),
     r"shape must be known at compile time.*annotate the parameter it comes from as "
     r"pl\.constexpr", 2),
    (reads_global_array, (x16, x16),
     r"global 'GLOBAL_ARRAY' is a ndarray; kernels can only read constants.*Pass it as an "
     r"argument instead", 3),
    (reads_global_list, (x16, x16), r"global 'GLOBAL_LIST' is a list; kernels can only read", 3),
    (one_branch_name, (x16, x16, 3),      # (not 1: an int equal to 1 is folded to a constant)
     r"'y' is assigned in only one branch of an 'if' on a runtime condition", 5),
    (branch_shapes_differ, (x16, x16, 3),
     r"'t' is tile<8xf32.*> in the 'if' branch but tile<16xf32.*> in the 'else' branch", 4),
    (carried_changes_type, (x16, x16, 3),
     r"'acc' changes type inside the loop: f32 before, tile<16xf32> after one iteration", 4),
    (carried_changes_dtype, (x16, x16, 3),
     r"'acc' changes type inside the loop: tile<16xf32> before, tile<16xf16> after", 5),
    (unknown_dtype_attribute, (x16, x16), r"has no attribute 'float128'", 2),
    (unknown_dtype_name, (x16, x16), r"unknown dtype name 'float17'", 3),
    (matmul_inner_dims, (np.zeros((16, 32), np.float16), np.zeros((16, 16), np.float16),
                         m16), r"matmul\(\): inner dimensions differ: \(16, 32\) @ \(16, 16\)",
     4),
    (matmul_dtype_pair, (np.zeros((16, 16), np.float16), m16, m16),
     r"matmul\(\): operand dtypes \(float16, float32\) are not a legal cube pair: "
     r"\(float16, float16\), \(bfloat16, bfloat16\), \(float32, float32\) or \(int8, int8\)", 4),
    (reduction_axis, (m16, m16), r"axis 2 out of range for a tile of shape \(16, 16\)", 3),
    (reshape_count, (x16, x16),
     r"reshape\(\): cannot reshape a tile of shape \(16,\) \(16 elements\) into \(5, 3\)", 3),
    (slice_step, (x16, x16), r"tile slices must have step 1", 3),
    (not_on_tile, (x16, x16), r"'not' on a tile is ambiguous; use ~mask", 3),
    (and_on_tiles, (x16, x16), r"'and'/'or' work on scalars; combine tiles with & and \|", 3),
    (return_in_loop, (x16, x16, 3), r"'return' inside a loop is not supported", 3),
    (calls_python_function, (x16, x16),
     r"cannot call plain_python_helper on runtime values inside a kernel; only "
     r"pypto.language functions and @pypto.jit functions", 3),
    (while_true, (x16, x16), r"this 'while' loop would never end: its condition is a "
     r"compile-time constant and the loop changes no variable", 3),
    (while_true_changing_a_tile, (x16, x16), r"the 'while' condition does not depend on the "
     r"values the loop changes, so it is a constant", 3),
    (failing_static_assert, (x16, x16), r"static_assert failed: BLOCK must be a power of two",
     2, {"BLOCK": 24}),
    (chained_comparison, (x16, x16, 3), r"chained comparisons are not supported", 2),
    (returns_a_value, (x16, x16), r"a launched kernel cannot return a value; store it to a "
     r"tensor", 2),
    (rank_five_tile, (x16, x16), r"tiles of rank 5 are not supported \(rank 0 to 4\); got "
     r"shape \(1, 1, 2, 4, 8\)", 2),
    (loop_over_list, (x16, x16), r"a kernel loop must iterate over range\(\.\.\.\), "
     r"pl\.range\(\.\.\.\) or pl\.static_range\(\.\.\.\)", 2),
    (arithmetic_on_tensor, (x16, x16), r"arithmetic on a whole tensor is not supported; "
     r"pl\.load a tile of it first", 2),
    (tile_conditional_expression, (x16, x16, 3),
     r"a conditional expression on a runtime scalar cannot choose between tiles", 3),
    (undefined_name, (x16, x16), r"name 'undefined_thing' is not defined", 3),
    (fstring, (x16, x16), r"f-strings are not supported inside kernels", 2),
    (store_a_scalar, (x16, x16, 3), r"store\(\): value must be a tile, got a i64", 2),
    (calls_helper_with_wrong_arity, (x16, x16),
     r"call to helper_with_two_params: missing a required argument: 'b'", 3),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0].__name__ for c in CASES])
def test_mistake_reports_message_and_line(case):
    kernel, args, pattern, offset = case[:4]
    kwargs = case[4] if len(case) > 4 else {}
    with pytest.raises(pypto.CompilationError, match=pattern) as e:
        kernel[(1,)](*args, **kwargs)
    err = e.value
    expected_line = kernel.fn.__code__.co_firstlineno + offset
    assert err.loc is not None
    assert err.loc.line == expected_line, str(err)
    assert err.loc.filename == __file__
    text = str(err)
    assert text.startswith(f"{__file__}:{expected_line}:"), text
    source_line = inspect.getsource(kernel.fn).splitlines()[offset].strip()
    assert source_line in text              # the offending line itself, with a caret below
    assert "^" in text.split(source_line, 1)[1].split("\n")[1]


def test_all_cases_are_distinct():
    assert len(CASES) >= 20
    assert len({c[0].__name__ for c in CASES}) == len(CASES)


def test_carried_type_change_points_at_the_assignment():
    with pytest.raises(pypto.CompilationError, match="'acc' changes type inside the loop") as e:
        carried_changes_dtype_early[(1,)](x16, x16, 3)
    assert e.value.loc.line == carried_changes_dtype_early.fn.__code__.co_firstlineno + 4


def test_caret_underlines_the_offending_expression():
    with pytest.raises(pypto.CompilationError) as e:
        reads_global_array[(1,)](x16, x16)
    lines = str(e.value).split("\n")
    code, caret = lines[1], lines[2]
    start = caret.index("^")
    assert code[start:start + caret.count("^")] == "GLOBAL_ARRAY"
    assert e.value.loc.col == inspect.getsource(reads_global_array.fn).splitlines()[3].index(
        "GLOBAL_ARRAY")


def test_too_big_for_ub_names_buffer_and_sizes():
    big = np.zeros((256, 256), np.float32)
    with pytest.raises(pypto.CompilationError) as e:
        too_big_for_ub[(1,)](big, big)
    text = str(e.value)
    assert "UB (vec) overflow on ascend910b1" in text
    ub = get_target("ascend910b1").buffers["vec"]    # 184 KiB: pto-isa keeps the top 8 KiB
    assert f"the kernel needs 262144 bytes at once but the buffer holds {ub}" in text
    assert "tile<256x256xf32, vec> (262144 bytes) from " \
           f"{__file__}:{too_big_for_ub.fn.__code__.co_firstlineno + 2}" in text
    assert "Use smaller tiles" in text
    assert e.value.loc.filename == __file__


@pypto.jit
def softmax_rows(x, out, BM: pl.constexpr, BN: pl.constexpr):
    early = pl.load(x, offsets=(0, 0), shape=(8, 16)) * 2.0      # dead before the big ones
    pl.store(out, offsets=(0, 0), value=early)
    t = pl.load(x, offsets=(0, 0), shape=(BM, BN))
    e = pl.exp(t - pl.max(t, axis=1, keepdims=True))
    pl.store(out, offsets=(0, 0), value=e / pl.sum(e, axis=1, keepdims=True))


def test_overflow_lists_the_tiles_alive_at_the_peak_and_what_would_fit():
    x = np.zeros((64, 512), np.float32)
    with pytest.raises(pypto.CompilationError) as e:
        softmax_rows[(1,)](x, x.copy(), BM=64, BN=512)
    text = str(e.value)
    alive = [line for line in text.splitlines() if line.startswith("  tile<")]
    assert "tiles alive at that point" in text and len(alive) >= 2
    assert not any(line.startswith("  tile<8x16xf32") for line in alive)   # not alive then
    total = sum(int(line.split("(")[1].split(" bytes")[0]) for line in alive)
    assert f"({total} bytes, plus alignment)" in text
    import re
    advice = re.search(r"each of these fits ascend910b1's buffers: BM=(\d+) \(instead of 64\); "
                       r"BN=(\d+) \(instead of 512\)$", text)
    assert advice, text
    bm, bn = int(advice.group(1)), int(advice.group(2))
    softmax_rows[(1,)](x, x.copy(), BM=bm, BN=512)        # the advice holds, and is the largest
    softmax_rows[(1,)](x, x.copy(), BM=64, BN=bn)
    with pytest.raises(pypto.CompilationError, match="overflow"):
        softmax_rows[(1,)](x, x.copy(), BM=2 * bm, BN=512)


@pypto.jit
def small_then_big(x, out):
    small = pl.load(x, offsets=(0, 0), shape=(16, 16))
    big = pl.load(x, offsets=(0, 0), shape=(256, 256))    # +3
    pl.store(out, offsets=(0, 0), value=big * 2.0 + small[0:1, 0:1])


def test_ub_overflow_points_at_the_big_tile():
    big = np.zeros((256, 256), np.float32)
    with pytest.raises(pypto.CompilationError, match="UB \\(vec\\) overflow") as e:
        small_then_big[(1,)](big, big)
    assert e.value.loc.line == small_then_big.fn.__code__.co_firstlineno + 3


# -- argument binding (reported at the caller's line) ---------------------------------------------

@pypto.jit
def add_kernel(x, y, out, BLOCK: pl.constexpr):
    a = pl.load(x, offsets=(0,), shape=(BLOCK,))
    b = pl.load(y, offsets=(0,), shape=(BLOCK,))
    pl.store(out, offsets=(0,), value=a + b)


def _raised_at_call(excinfo):
    """The exception surfaced at the calling line of the test, with no chained error."""
    frames = traceback.extract_tb(excinfo.value.__traceback__)
    assert frames[0].filename == __file__
    assert "add_kernel[(1,)](" in frames[0].line
    assert excinfo.value.__cause__ is None
    assert excinfo.value.__context__ is None or excinfo.value.__suppress_context__


def test_wrong_number_of_arguments():
    # the launcher has the kernel's own signature, so Python itself words these errors
    with pytest.raises(TypeError, match=r"add_kernel\(\) missing 1 required positional "
                       r"argument: 'out'") as e:
        add_kernel[(1,)](x16, x16, BLOCK=16)
    _raised_at_call(e)
    # ... except one that counted the launcher's hidden grid keyword
    with pytest.raises(TypeError, match=r"add_kernel\(\) takes 4 argument\(s\) \(x, y, out, "
                       r"BLOCK\) but 5 positional argument\(s\) were given$") as e:
        add_kernel[(1,)](x16, x16, x16, 16, 16)
    _raised_at_call(e)
    with pytest.raises(TypeError, match=r"add_kernel\(\) takes 4 argument\(s\)"):
        add_kernel(x16, x16, x16, 16, 16)
    with pytest.raises(TypeError, match=r"add_kernel\(\) got an unexpected keyword argument "
                       r"'BLOCKS'"):
        add_kernel[(1,)](x16, x16, x16, BLOCK=16, BLOCKS=16)


def test_string_for_a_tensor_argument():
    with pytest.raises(TypeError, match=r"add_kernel\(\): argument 'y' must be a tensor \(numpy "
                       r"array, DLPack or __array_interface__ object\), an int, a float or a "
                       r"bool; got str 'hello'") as e:
        add_kernel[(1,)](x16, "hello", x16, BLOCK=16)
    _raised_at_call(e)


def test_unsupported_numpy_dtype_for_a_tensor():
    with pytest.raises(TypeError, match=r"argument 'out'.*complex64"):
        add_kernel[(1,)](x16, x16, np.zeros(16, np.complex64), BLOCK=16)


# -- errors inside inlined helpers ----------------------------------------------------------------

@pypto.jit
def inner_helper(t):
    u = t * 2
    return u + t[::2]                                     # +3


@pypto.jit
def middle_helper(t):
    return inner_helper(t) + 1                            # +2


@pypto.jit
def calls_nested_helpers(x, out):
    t = pl.load(x, offsets=(0,), shape=(16,))
    pl.store(out, offsets=(0,), value=middle_helper(t))   # +3


def test_error_in_inlined_helper_shows_call_chain():
    with pytest.raises(pypto.CompilationError, match="tile slices must have step 1") as e:
        calls_nested_helpers[(1,)](x16, x16)
    err = e.value
    assert err.loc.line == inner_helper.fn.__code__.co_firstlineno + 3
    assert err.loc.function == "inner_helper"
    middle_line = middle_helper.fn.__code__.co_firstlineno + 2
    outer_line = calls_nested_helpers.fn.__code__.co_firstlineno + 3
    assert [c.rsplit(":", 1)[0] for c in err.call_chain] == [
        f"{__file__}:{middle_line}", f"{__file__}:{outer_line}"]
    text = str(err)
    assert f"in inner_helper: tile slices must have step 1" in text
    assert text.index(f"called from {__file__}:{middle_line}:") < \
        text.index(f"called from {__file__}:{outer_line}:")


def test_compilation_error_pickles_with_the_same_text():
    with pytest.raises(pypto.CompilationError) as e:
        calls_nested_helpers[(1,)](x16, x16)
    clone = pickle.loads(pickle.dumps(e.value))
    assert type(clone) is pypto.CompilationError
    assert str(clone) == str(e.value)
    assert clone.loc == e.value.loc and clone.call_chain == e.value.call_chain
    with pytest.raises(pypto.CompilationError) as e:
        too_big_for_ub[(1,)](np.zeros((256, 256), np.float32), np.zeros((256, 256), np.float32))
    assert str(pickle.loads(pickle.dumps(e.value))) == str(e.value)


def _compiler_frames(exc):
    return [f.filename for f in traceback.extract_tb(exc.__traceback__)
            if f.filename.startswith(os.path.join(PYPTO_DIR, "compiler")) or
            f.filename.startswith(os.path.join(PYPTO_DIR, "backends"))]


def test_traceback_hides_compiler_frames_unless_debugging(monkeypatch):
    monkeypatch.delenv("PYPTO_DEBUG", raising=False)
    with pytest.raises(pypto.CompilationError) as e:
        calls_nested_helpers[(1,)](x16, x16)
    assert _compiler_frames(e.value) == []
    frames = traceback.extract_tb(e.value.__traceback__)
    assert frames[0].filename == __file__
    assert all(f.filename == __file__ or f.filename.startswith((PYPTO_DIR, "<pypto "))
               for f in frames)      # "<pypto launcher ...>": PyPTO's generated launch path
    assert e.value.__cause__ is None and e.value.__suppress_context__

    monkeypatch.setenv("PYPTO_DEBUG", "1")
    with pytest.raises(pypto.CompilationError) as e:
        calls_nested_helpers[(1,)](x16, np.zeros(16, np.float16))   # a new specialisation
    compiler = _compiler_frames(e.value)
    assert any(f.endswith("ast_to_ir.py") for f in compiler)


def test_traceback_hides_compiler_frames_in_interpreter_mode(monkeypatch):
    monkeypatch.delenv("PYPTO_DEBUG", raising=False)
    monkeypatch.setenv("PYPTO_INTERPRET", "1")
    with pytest.raises(pypto.CompilationError, match="tile slices must have step 1") as e:
        calls_nested_helpers[(1,)](x16, x16)
    assert _compiler_frames(e.value) == []


def test_language_stub_outside_a_kernel():
    with pytest.raises(RuntimeError, match=r"pypto\.language\.load\(\) can only be used inside "
                       r"a @pypto\.jit kernel"):
        pl.load(x16, offsets=(0,), shape=(16,))
    with pytest.raises(RuntimeError, match=r"pypto\.language\.exp\(\) can only be used inside"):
        pl.exp(1.0)
    with pytest.raises(RuntimeError, match=r"pypto\.language\.static_range\(\) can only"):
        pl.static_range(4)
    assert pl.cdiv(10, 4) == 3          # the one primitive that also works on the host


# -- mistakes that escape as internal errors ------------------------------------------------------

@pypto.jit
def too_many_indices(x, out):
    t = pl.load(x, offsets=(0,), shape=(16,))
    pl.store(out, offsets=(0,), value=t[0, 0])            # +3


@pypto.jit
def index_out_of_range(x, out):
    t = pl.load(x, offsets=(0,), shape=(16,))
    pl.store(out, offsets=(0,), value=pl.expand_dims(t[16], 0))   # +3


@pytest.mark.parametrize("kernel,pattern", [
    (too_many_indices, r"too many indices for a tile of shape \(16,\)"),
    (index_out_of_range, r"index 16 out of range for a tile axis of size 16"),
], ids=["too_many_indices", "index_out_of_range"])
def test_bad_tile_index_is_a_compilation_error(kernel, pattern):
    with pytest.raises(pypto.CompilationError, match=pattern) as e:
        kernel[(1,)](x16, x16)
    assert e.value.loc.line == kernel.fn.__code__.co_firstlineno + 3


@pypto.jit
def recurses_forever(t):
    return recurses_forever(t)                            # +2


@pypto.jit
def calls_recursive_helper(x, out):
    t = pl.load(x, offsets=(0,), shape=(16,))
    pl.store(out, offsets=(0,), value=recurses_forever(t))


def test_unbounded_recursion_is_a_compilation_error():
    with pytest.raises(pypto.CompilationError, match="recurs") as e:
        calls_recursive_helper[(1,)](x16, x16)
    assert e.value.loc.line == recurses_forever.fn.__code__.co_firstlineno + 2


@pypto.jit
def branch_on_tile(x, out):
    t = pl.load(x, offsets=(0,), shape=(16,))
    if pl.sum(t) > 0:                                     # +3
        t = t + 1
    pl.store(out, offsets=(0,), value=t)


def test_branch_on_a_tile_is_reported_at_its_line():
    with pytest.raises(pypto.CompilationError, match="a condition .* must be a scalar, got a "
                       r"tile<i1>.*compute both and select: pl\.where\(cond, a, b\)") as e:
        branch_on_tile[(1,)](x16, x16)
    assert e.value.loc.line == branch_on_tile.fn.__code__.co_firstlineno + 3


def test_rank_zero_tile_type_is_printed_without_a_stray_x():
    with pytest.raises(pypto.CompilationError) as e:
        branch_on_tile[(1,)](x16, x16)
    assert "tile<i1>" in str(e.value) and "tile<xi1>" not in str(e.value)
