"""The kernel language: stubs the frontend recognises, never executed.

Each primitive is a Python function marked with ``@builtin``. Inside ``@pypto.jit`` the
frontend looks the marked object up in its semantics table (``pypto.compiler.semantics``) and
emits Tile IR; outside a kernel, calling one raises a clear error. Keeping the stubs apart from
their semantics is what lets the reference interpreter, the compiler and the docs agree on one
list of ops. The meaning of every op is written down in docs/tile_ir.md.
"""
from __future__ import annotations

import functools


class constexpr:
    """Annotation for compile-time constant parameters (``BLOCK: pl.constexpr``), or a wrapper
    for a global constant a kernel reads (``SCALE = pl.constexpr(0.5)``)."""

    def __init__(self, value=None):
        self.value = value

    def __repr__(self) -> str:
        return f"constexpr({self.value!r})"


# Set by pypto.frontend while it traces a CANN PyPTO kernel: the primitives that share a name
# with a CANN op (pypto.exp, pypto.sum, ...) are then that op (pypto/frontend/tracer.py).
FRONTEND_HOOK = None


def builtin(fn):
    """Mark ``fn`` as a kernel-language primitive named after itself."""

    @functools.wraps(fn)
    def outside_kernel(*args, **kwargs):
        if FRONTEND_HOOK is not None:
            return FRONTEND_HOOK(fn.__name__, args, kwargs)
        raise RuntimeError(
            f"pypto.language.{fn.__name__}() can only be used inside a @pypto.jit kernel")

    outside_kernel.__pypto_builtin__ = fn.__name__
    return outside_kernel


def cdiv(a, b):
    """Ceiling division; usable both inside kernels and on the host (grid computations)."""
    return -(-a // b)


cdiv.__pypto_builtin__ = "cdiv"


# -- blocks, memory, creation -------------------------------------------------------------------
@builtin
def program_id(axis=0):
    """Index of this block along grid axis 0, 1 or 2."""


@builtin
def num_programs(axis=0):
    """Number of blocks along grid axis 0, 1 or 2."""


@builtin
def load(tensor, offsets, shape, padding=0):
    """Read a tile of ``shape`` at ``offsets``; elements outside the tensor are ``padding``.
    ``padding=None`` promises the window lies inside the tensor: no padding is made (on the
    chip, no fill before the load), and the interpreter raises if the promise is broken."""


@builtin
def store(tensor, offsets, value, atomic=None):
    """Write a tile at ``offsets`` (only the elements inside the tensor); ``atomic="add"``
    accumulates into global memory safely across blocks."""


@builtin
def zeros(shape, dtype=None):
    """A tile of zeros (float32 unless ``dtype`` is given)."""


@builtin
def ones(shape, dtype=None):
    """A tile of ones."""


@builtin
def full(shape, value, dtype=None):
    """A tile filled with ``value`` (a number or a runtime scalar)."""


@builtin
def zeros_like(x, dtype=None):
    """Zeros with the shape (and dtype) of tile ``x``."""


@builtin
def ones_like(x, dtype=None):
    """Ones with the shape (and dtype) of tile ``x``."""


@builtin
def full_like(x, value, dtype=None):
    """``value`` with the shape (and dtype) of tile ``x``."""


@builtin
def arange(start, end=None):
    """An int32 tile ``start, start+1, ..., end-1`` (compile-time bounds)."""


# -- indexed memory access ------------------------------------------------------------------------
@builtin
def gather(tensor, indices, axis=0, offsets=None, padding=0, shape=None):
    """``out[i, j] = tensor[offsets[0] + indices[i, j], offsets[1] + j]`` for ``axis=0`` (and
    the other way round for ``axis=1``): torch.gather over the window at ``offsets`` (zeros by
    default). ``indices`` is an integer tile of the tensor's rank; the result has its shape and
    the tensor's dtype. An element whose coordinates fall outside the tensor is ``padding``.

    Whole rows (torch.index_select): a rank-1 ``indices`` of R row numbers into a rank-2
    tensor gives the (R, C) tile ``out[i, :] = tensor[offsets[0] + indices[i],
    offsets[1]:offsets[1] + C]``, C the tensor's row length or ``shape=(R, C)``; each row is
    one transfer on the NPU (an embedding lookup)."""


@builtin
def scatter(tensor, indices, value, axis=0, offsets=None, reduce=None):
    """``tensor[offsets[0] + indices[i, j], offsets[1] + j] = value[i, j]`` for ``axis=0``:
    torch.scatter into the window at ``offsets``. ``reduce="add"`` adds instead (duplicate
    indices accumulate); without it the last element in row-major order wins. Elements whose
    coordinates fall outside the tensor are dropped.

    Whole rows: a rank-1 ``indices`` of R row numbers into a rank-2 tensor writes row i of the
    (R, C) ``value`` to row ``offsets[0] + indices[i]`` from column ``offsets[1]`` on (one
    transfer a row on the NPU; a later duplicate wins, or adds with ``reduce="add"``)."""


# -- elementwise -------------------------------------------------------------------------------
@builtin
def cast(x, dtype, rounding=None):
    """Convert to ``dtype``; ``rounding`` is "rint", "floor", "ceil" or "trunc" (default:
    round to nearest even between floats, truncate from float to int)."""


@builtin
def where(cond, x, y):
    """``cond ? x : y`` elementwise, with broadcasting."""


@builtin
def minimum(a, b):
    """Elementwise minimum (NaN propagates)."""


@builtin
def maximum(a, b):
    """Elementwise maximum (NaN propagates)."""


@builtin
def clamp(x, lo, hi):
    """``minimum(maximum(x, lo), hi)``."""


def _unary(name, doc):
    def stub(x):
        pass
    stub.__name__ = stub.__qualname__ = name
    stub.__doc__ = doc
    return builtin(stub)


abs = _unary("abs", "Absolute value.")
exp = _unary("exp", "e**x.")
exp2 = _unary("exp2", "2**x.")
log = _unary("log", "Natural logarithm.")
log2 = _unary("log2", "Base-2 logarithm.")
sqrt = _unary("sqrt", "Square root.")
rsqrt = _unary("rsqrt", "1 / sqrt(x).")
reciprocal = _unary("reciprocal", "1 / x.")
sin = _unary("sin", "Sine.")
cos = _unary("cos", "Cosine.")
tanh = _unary("tanh", "Hyperbolic tangent.")
sigmoid = _unary("sigmoid", "1 / (1 + exp(-x)).")
relu = _unary("relu", "max(x, 0).")
gelu = _unary("gelu", "GELU, tanh approximation.")
erf = _unary("erf", "Error function.")
floor = _unary("floor", "Round toward -inf (result stays float).")
ceil = _unary("ceil", "Round toward +inf (result stays float).")


# -- reductions --------------------------------------------------------------------------------
def _reduction(name, doc):
    def stub(x, axis=None, keepdims=False):
        pass
    stub.__name__ = stub.__qualname__ = name
    stub.__doc__ = doc
    return builtin(stub)


sum = _reduction("sum", "Sum over ``axis`` (all axes if None).")
max = _reduction("max", "Maximum over ``axis``.")
min = _reduction("min", "Minimum over ``axis``.")
prod = _reduction("prod", "Product over ``axis``.")
argmax = _reduction("argmax", "Index of the first maximum along ``axis`` (int32).")
argmin = _reduction("argmin", "Index of the first minimum along ``axis`` (int32).")
mean = _reduction("mean", "Mean over ``axis`` (float).")


@builtin
def cumsum(x, axis=-1, reverse=False):
    """Inclusive prefix sum along the last axis; ``reverse=True`` sums from the end (each
    element plus everything after it, ``jax.lax.cumsum(..., reverse=True)``)."""


# -- sorting -----------------------------------------------------------------------------------
@builtin
def sort(x, descending=False):
    """``x`` sorted along its last axis (stable: equal values keep their order)."""


@builtin
def argsort(x, descending=False):
    """The int32 positions that sort ``x`` along its last axis (stable)."""


@builtin
def topk(x, k, largest=True):
    """``(values, indices)``: the ``k`` largest (or smallest) elements along the last axis,
    in descending (ascending) order, ties in index order; indices are int32."""


# -- shapes -------------------------------------------------------------------------------------
@builtin
def reshape(x, shape):
    """Same elements, new static shape (row-major order)."""


@builtin
def trans(x):
    """Transpose of a 2-D tile (also ``x.T``)."""


@builtin
def expand_dims(x, axis):
    """Insert an axis of size 1 (also ``x[:, None]``)."""


@builtin
def broadcast_to(x, shape):
    """numpy broadcasting to ``shape``."""


@builtin
def concat(tiles, axis=0):
    """Concatenate tiles along ``axis``."""


# -- cube ---------------------------------------------------------------------------------------
@builtin
def matmul(a, b, acc=None, out_dtype=None, a_trans=False, b_trans=False):
    """``op(a) @ op(b) (+ acc)`` on the cube: (f16, f16), (bf16, bf16), (f32, f32) accumulate
    in float32, (i8, i8) in int32. Also ``a @ b``."""


# -- compile time -------------------------------------------------------------------------------
@builtin
def static_range(start, stop=None, step=1):
    """A loop unrolled at compile time (bounds must be constants)."""


@builtin
def range(start, stop=None, step=1, num_stages=None):
    """A runtime loop, like ``range``; ``num_stages`` asks for software pipelining."""


@builtin
def static_assert(cond, msg=""):
    """Fail compilation with ``msg`` unless the compile-time ``cond`` holds."""


@builtin
def static_print(*args):
    """Print compile-time values while the kernel compiles."""


# -- asynchrony and synchronisation ---------------------------------------------------------------
@builtin
def alloc_buffer(shape, dtype=None):
    """An on-chip buffer (a tile in UB) to be filled by ``async_load``; float32 by default."""


@builtin
def local_buffer(shape, dtype=None):
    """Alias of ``alloc_buffer`` (the seed's spelling)."""


@builtin
def async_load(src, buffer, offsets=None, padding=0):
    """Start loading ``src`` (a tensor with ``offsets``, or a tensor slice such as
    ``x[i * 512:(i + 1) * 512]``) into ``buffer``. The buffer may not be read before
    ``synchronize()``; the compiler checks this."""


@builtin
def synchronize():
    """Wait for every ``async_load`` issued so far."""


@builtin
def barrier():
    """Every block of the launch arrives here before any goes on (the launch must fit on the
    target's cores at once)."""


@builtin
def signal(flag, count=1):
    """Add ``count`` to the launch's cross-core flag ``flag`` (0-15)."""


@builtin
def wait(flag, count=1):
    """Wait until cross-core flag ``flag`` holds at least ``count``, then take ``count`` off."""


@builtin
def breakpoint():
    """Debug mode (``pypto.debug``): the reference interpreter stops here in every block and
    hands the live local tiles to the debug hook. Compiled kernels drop it (no instruction)."""


@builtin
def set_flag(src_pipe, dst_pipe, event_id):
    """Advanced mode (``@pypto.jit(auto_sync=False)``): signal from ``src_pipe`` (e.g. "MTE2")
    to ``dst_pipe`` (e.g. "V") on event ``event_id`` (0-7)."""


@builtin
def wait_flag(src_pipe, dst_pipe, event_id):
    """Advanced mode: ``dst_pipe`` waits for the matching ``set_flag``."""


@builtin
def pipe_barrier(pipe="ALL"):
    """Advanced mode: later work of ``pipe`` (every pipe for "ALL") waits for earlier work."""
