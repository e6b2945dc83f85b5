"""CANN's ops on traced tensors: argument checks, shapes and dtypes, one node each.

Signatures follow CANN PyPTO 0.2.0's API pages (docs/api/operation): reductions take
``dim``/``keepdim``, ``matmul(a, b, out_dtype, a_trans=, b_trans=)``, ``view(t, shape,
offsets, valid_shape=)``, ``assemble(t, offsets, out)``. What each node computes is in
``ops.py``; how it runs is in ``lowering.py``.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from ..language import dtypes as pl_dtypes
from . import ops, tracer
from .annotations import TensorSpec
from .dtypes import DataType, to_pypto
from .options import SCOPE
from .scalars import symbolic_scalar
from .symbolic import LoopIndex, SymTensor, pinned
from .unavailable import CATALOGUE, NotAvailableError

BOOL = pl_dtypes.bool_


def _is_tensor(x) -> bool:
    return isinstance(x, SymTensor)


def _scalar(x, what: str):
    if isinstance(x, bool) or not isinstance(x, numbers.Number):
        raise TypeError(f"pypto.{what}: operands are tensors or numbers, got {x!r}")
    return float(x) if isinstance(x, float) else int(x)


def _broadcast(op, shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(f"pypto.{op}: shapes {', '.join(map(str, shapes))} do not broadcast")


def elementwise(op, *operands, dtype=None, **attrs) -> SymTensor:
    """A node of ``ops.EW[op]`` over tensors and numbers (numbers fold into the source)."""
    tensors = [x for x in operands if _is_tensor(x)]
    if not tensors:
        raise TypeError(f"pypto.{op}: at least one operand must be a tensor")
    args = tuple(x if _is_tensor(x) else _scalar(x, op) for x in operands)
    shape = _broadcast(op, [t._shape for t in tensors])
    floats = [t.ptype for t in tensors if t.ptype != BOOL] or [tensors[0].ptype]
    if len({t for t in floats}) > 1 and op not in ("where",):
        raise TypeError(f"pypto.{op}: operands have dtypes {', '.join(map(str, floats))}; "
                        "CANN requires one dtype: pypto.cast an operand first")
    result = dtype or (BOOL if op in ops.COMPARISONS else floats[-1])
    return SymTensor(op, args, shape, result, **attrs)


def binary(op, a, b, alpha=None):
    """``add``/``sub`` take CANN's ``alpha``: ``a + alpha * b``."""
    if alpha is not None:
        b = elementwise("mul", b, alpha) if isinstance(b, SymTensor) else b * alpha
    return elementwise(op, a, b)


def unary(op, x):
    return elementwise(op, x)


def _axis(dim, rank, op) -> int:
    if not isinstance(dim, int) or not -rank <= dim < max(rank, 1):
        raise ValueError(f"pypto.{op}(dim={dim!r}): a tensor of rank {rank} has dims "
                         f"{-rank}..{rank - 1}")
    return dim % max(rank, 1)


def reduce(op, x, dim=-1, keepdim=False):
    """``sum``/``amax``/``amin``/``mean``/``prod``/``argmax`` along one ``dim``."""
    if isinstance(dim, (list, tuple)):
        dims = sorted((_axis(d, x.dim, op) for d in dim), reverse=True)
        for d in dims:
            x = reduce(op, x, d, keepdim)
        return x
    axis = _axis(dim, x.dim, op)
    shape = list(x._shape)
    shape[axis] = 1
    if not keepdim:
        del shape[axis]
    dtype = pl_dtypes.int32 if op in ("argmax", "argmin") else x.ptype
    return SymTensor(op, (x,), shape, dtype, axis=axis, keepdim=bool(keepdim))


def cast(x, dtype, mode=None, satmode=None):
    """``pypto.cast(x, dtype, mode=CastMode.*, satmode=SaturationMode.OFF)``."""
    from .names import CastMode, SaturationMode  # lazy: names imports this module (a cycle)
    rounding = CastMode.rounding(mode)
    if satmode not in (None, SaturationMode.OFF):
        raise NotAvailableError(f"pypto.cast(satmode={satmode!r})", "only SaturationMode.OFF")
    return elementwise("cast", x, dtype=to_pypto(dtype), rounding=rounding)


def where(condition, input, other):  # noqa: A002 - CANN's names
    return elementwise("where", condition, input, other)


def clip(x, min=None, max=None):  # noqa: A002
    lo = -math.inf if min is None else min
    hi = math.inf if max is None else max
    return elementwise("clip", x, lo, hi)


def round(x, decimals=0):  # noqa: A001 - CANN's name
    """``pypto.round(x, decimals=)``: half to even at ``decimals`` places, as torch.round."""
    if not decimals:
        return elementwise("round", x)
    scale = 10.0 ** decimals
    return elementwise("round", x * scale) / scale


def pow(x, exponent):  # noqa: A001
    return elementwise("pow", x, exponent)


# -- shape ops -------------------------------------------------------------------------------
def reshape(x, shape, *more, valid_shape=None, inplace=False):
    if more or isinstance(shape, int):
        shape = [shape, *more]
    shape = list(shape)
    if shape.count(-1) == 1:
        known = math.prod(e for e in shape if e != -1)
        shape[shape.index(-1)] = x.numel() // max(known, 1)
    if math.prod(shape) != x.numel():
        raise ValueError(f"pypto.reshape: {x.shape} has {x.numel()} elements, {shape} has "
                         f"{math.prod(shape)}")
    return SymTensor("reshape", (x,), shape, x.ptype)


def unsqueeze(x, dim):
    shape = list(x._shape)
    shape.insert(dim % (len(shape) + 1), 1)
    return reshape(x, shape)


def transpose(x, dim0=-2, dim1=-1):
    a, b = _axis(dim0, x.dim, "transpose"), _axis(dim1, x.dim, "transpose")
    shape = list(x._shape)
    shape[a], shape[b] = shape[b], shape[a]
    return SymTensor("transpose", (x,), shape, x.ptype, axes=(a, b))


def concat(tensors, dim=0):
    tensors = list(tensors)
    axis = _axis(dim, tensors[0].dim, "concat")
    shape = list(tensors[0]._shape)
    shape[axis] = sum(t._shape[axis] for t in tensors)
    return SymTensor("concat", tuple(tensors), shape, tensors[0].ptype, axis=axis)


def expand_clone(x, shape, *more, valid_shape=None):
    shape = list(shape) if not more and not isinstance(shape, int) else [shape, *more]
    return SymTensor("expand", (x,), _broadcast("expand_clone", [x._shape, tuple(shape)]),
                     x.ptype)


def _window(x, shape, offsets, valid_shape=None):
    """``x`` cut to ``shape`` (or ``valid_shape``) at ``offsets``: a view node."""
    shape = list(valid_shape or shape)
    if len(shape) != x.dim or len(offsets) != x.dim:
        raise ValueError(f"pypto.view: a rank-{x.dim} tensor takes {x.dim} extents and "
                         f"offsets, got shape {list(shape)} offsets {list(offsets)}")
    index = tuple(slice(int(o), int(o) + int(s)) for o, s in zip(offsets, shape))
    return getitem(x, index)


def view(x, shape=None, offsets=None, *, valid_shape=None, dtype=None):
    """CANN's ``pypto.view``: a window (shape + offsets), or a reshape (shape only)."""
    if dtype is not None:
        raise NotAvailableError("pypto.view(dtype=...) (a bit-cast view)")
    if offsets is None:
        return reshape(x, shape)
    return _window(x, shape, offsets, valid_shape)


def getitem(x, index):
    """``x[index]`` with ints and step-1 slices: a view of a buffer, or a window node."""
    index = index if isinstance(index, tuple) else (index,)
    for item in index:
        if isinstance(item, slice) and item.step not in (None, 1):
            raise NotAvailableError("a strided slice of a tensor", f"step {item.step}")
        if not isinstance(item, (slice, int, type(Ellipsis))):
            raise NotAvailableError(f"indexing a tensor with {type(item).__name__}")
    shape = np.empty(x._shape, dtype=np.bool_)[index].shape
    if x.op == "read":
        return SymTensor("read", (), shape, x.ptype, buffer=x.attrs["buffer"],
                         chain=x.attrs["chain"] + (index,), version=None)
    return SymTensor("slice", (x,), shape, x.ptype, index=index)


def setitem(dest, index, value):
    """``dest[index] = value``, as CANN defines it: ``value`` assembled at the index's start
    offsets with its own shape (ints are one-wide axes), not broadcast over the slice; a
    number fills the slice."""
    if not _is_tensor(value):
        write(getitem(dest, index), value)
        return
    starts = _starts(dest, index)
    shape = list(value._shape)
    if len(shape) < dest.dim:                  # CANN: reshape b to the written rank
        shape = [1] * (dest.dim - len(shape)) + shape
    if len(shape) != dest.dim:
        raise ValueError(f"dest[index] = value: a rank-{value.dim} value written into a "
                         f"rank-{dest.dim} tensor")
    window = tuple(slice(s, s + e) for s, e in zip(starts, shape))
    for axis, (s, e) in enumerate(zip(starts, shape)):
        if s + e > dest._shape[axis]:
            raise ValueError(f"dest[index] = value: the value's extent {e} at offset {s} on "
                             f"axis {axis} passes the tensor's end ({dest._shape[axis]})")
    write(getitem(dest, window), reshape(value, shape) if list(value._shape) != shape
          else value)


def _starts(dest, index):
    """The start offset per axis of ``dest`` that ``index`` selects (ints and slices)."""
    index = index if isinstance(index, tuple) else (index,)
    if any(item is Ellipsis for item in index):
        k = index.index(Ellipsis)
        index = index[:k] + (slice(None),) * (dest.dim - len(index) + 1) + index[k + 1:]
    index = index + (slice(None),) * (dest.dim - len(index))
    starts = []
    for axis, item in enumerate(index):
        extent = dest._shape[axis]
        if isinstance(item, slice):
            if item.step not in (None, 1):
                raise NotAvailableError("a strided slice of a tensor", f"step {item.step}")
            starts.append(item.indices(extent)[0])
        else:
            starts.append(int(item) % extent)
    return starts


def write(place: SymTensor, value):
    """Store ``value`` (a tensor or a number) into the buffer window ``place`` reads."""
    if place.op != "read":
        raise TypeError("only a kernel argument, a pypto.tensor or a view of one can be "
                        "written; the left-hand side here is a computed value")
    if not _is_tensor(value):
        value = full(place.shape, _scalar(value, "assign"), place.dtype)
    _broadcast("assign", [value._shape, place._shape])
    if value.ptype != place.ptype:
        value = elementwise("cast", value, dtype=place.ptype)
    buf, value = place.attrs["buffer"], pinned(value)
    buf.version += 1
    tracer.current().writes.append(tracer.Write(buf, place.attrs["chain"], value,
                                                tracer.user_line(), buf.version))


def move(dest, value):
    """CANN's ``out.move(value)``: ``out[:] = value``."""
    write(dest, value)


def assemble(x, offsets, out):
    """CANN's ``pypto.assemble(x, offsets, out)``: ``x`` written into ``out`` at ``offsets``."""
    write(_window(out, x.shape, offsets), x)


# -- indexing (torch's gather / scatter) ---------------------------------------------------
def gather(input, dim, index):  # noqa: A002 - CANN's names
    if index.ptype.kind not in "iu":
        raise TypeError(f"pypto.gather: the index must be an integer tensor, got {index.ptype}")
    return SymTensor("gather", (input, index), index._shape, input.ptype,
                     axis=_axis(dim, input.dim, "gather"))


def scatter(input, dim, index, src, *, reduce=None):  # noqa: A002
    if reduce not in (None, "add"):
        raise NotAvailableError(f"pypto.scatter(reduce={reduce!r})", "only None and 'add'")
    value = src if _is_tensor(src) else _scalar(src, "scatter")
    return SymTensor("scatter", (input, index, value), input._shape, input.ptype,
                     axis=_axis(dim, input.dim, "scatter"), reduce=reduce)


# -- sorting (CANN's topk / argsort; r0.2.0's code, not its docs page, for the defaults) -----
def topk(input, k, dim=None, largest=True):  # noqa: A002
    """``(values, indices)`` of the ``k`` largest (smallest) along ``dim``; int32 indices."""
    axis = _axis(-1 if dim is None else dim, input.dim, "topk")
    if not isinstance(k, int) or not 1 <= k <= input._shape[axis]:
        raise ValueError(f"pypto.topk(k={k!r}): k must be an int in 1..{input._shape[axis]} "
                         f"(the extent of dim {axis})")
    shape = list(input._shape)
    shape[axis] = k
    attrs = dict(axis=axis, k=k, largest=bool(largest))
    return (SymTensor("topk", (input,), shape, input.ptype, part=0, **attrs),
            SymTensor("topk", (input,), shape, pl_dtypes.int32, part=1, **attrs))


def argsort(input, dim=None, descending=False):  # noqa: A002
    return SymTensor("argsort", (input,), list(input._shape), pl_dtypes.int32,
                     axis=_axis(-1 if dim is None else dim, input.dim, "argsort"),
                     descending=bool(descending))


# -- creation --------------------------------------------------------------------------------
def full(size, fill_value, dtype=None, *, valid_shape=None):
    dtype = to_pypto(dtype) if dtype is not None else (
        pl_dtypes.float32 if isinstance(fill_value, float) else pl_dtypes.int32)
    return SymTensor("full", (), list(size), dtype, value=_scalar(fill_value, "full"))


def zeros(*size, dtype=None, **_):
    size = size[0] if len(size) == 1 and isinstance(size[0], (list, tuple)) else size
    return full(size, 0.0, dtype or DataType.DT_FP32)


def ones(*size, dtype=None, **_):
    size = size[0] if len(size) == 1 and isinstance(size[0], (list, tuple)) else size
    return full(size, 1.0, dtype or DataType.DT_FP32)


def arange(start, end=None, step=1, *, dtype=None):
    if end is None:
        start, end = 0, start
    n = max(0, math.ceil((end - start) / step))
    if dtype is None:
        floaty = any(isinstance(v, float) for v in (start, end, step))
        dtype = pl_dtypes.float32 if floaty else pl_dtypes.int32
    return SymTensor("arange", (), (n,), to_pypto(dtype), start=start, step=step)


def tensor(shape=None, dtype=DataType.DT_FP32, name="", *_, **__):
    """``pypto.tensor(shape, dtype, name)``: an uninitialised buffer of the kernel; outside a
    kernel (or without a shape, as an annotation) a ``TensorSpec``."""
    if shape is None or not tracer.active():
        return TensorSpec(shape, dtype if shape is not None else None, name)
    return tracer.new_buffer(name or "tensor", tuple(shape), to_pypto(dtype))


def _scalar_or_reduce(op, builtin):
    """``pypto.max``/``pypto.min``: a reduction on a tensor, Python's on scalars."""
    def fn(x, *rest, **kwargs):
        if isinstance(x, SymTensor):
            return reduce(op, x, *rest, **kwargs)
        return builtin(x, *rest)
    return fn


# -- matmul and composites -------------------------------------------------------------------
def matmul(a, b, out_dtype=None, *, a_trans=False, b_trans=False, c_matrix_nz=False,
           extend_params=None):
    if a.dim < 2 or b.dim < 2:
        raise ValueError(f"pypto.matmul: operands have rank >= 2, got {a.shape} and {b.shape}")
    m, k = (a._shape[-1], a._shape[-2]) if a_trans else a._shape[-2:]
    k2, n = (b._shape[-1], b._shape[-2]) if b_trans else b._shape[-2:]
    if k != k2:
        raise ValueError(f"pypto.matmul: K differs: {a.shape}{' (a_trans)' if a_trans else ''}"
                         f" and {b.shape}{' (b_trans)' if b_trans else ''}")
    batch = _broadcast("matmul", [a._shape[:-2], b._shape[:-2]])
    dtype = to_pypto(out_dtype) if out_dtype is not None else a.ptype
    return SymTensor("matmul", (a, b), (*batch, m, n), dtype, a_trans=bool(a_trans),
                     b_trans=bool(b_trans))


def softmax(x, dim=-1):
    e = unary("exp", x - reduce("amax", x, dim, True))
    return e / reduce("sum", e, dim, True)


def rms_norm(x, gamma=None, epsilon=1e-6, dim=-1):
    y = x * unary("rsqrt", reduce("mean", x * x, dim, True) + epsilon)
    return y if gamma is None else y * gamma


def layer_norm(x, weight=None, bias=None, dim=-1, epsilon=1e-5, eps=None):
    epsilon = eps if eps is not None else epsilon
    centred = x - reduce("mean", x, dim, True)
    y = centred * unary("rsqrt", reduce("mean", centred * centred, dim, True) + epsilon)
    y = y if weight is None else y * weight
    return y if bias is None else y + bias


# -- control ---------------------------------------------------------------------------------
def loop(start, stop=None, step=1, *, name=None, idx_name=None, submit_before_loop=False,
         **_):
    """``for i in pypto.loop(...)``: unrolled when traced, ``i`` a ``LoopIndex``."""
    if stop is None:
        start, stop = 0, start
    values = range(int(start), int(stop), int(step))
    first, last = (values[0], values[-1]) if values else (None, None)
    return (LoopIndex(v, first, last) for v in values)


def is_loop_begin(index):
    return isinstance(index, LoopIndex) and int(index) == index.first


def is_loop_end(index):
    return isinstance(index, LoopIndex) and int(index) == index.last


def _settings() -> dict:
    """The kernel's settings while tracing, else the global scope's (set before a call)."""
    return tracer.current().settings if tracer.active() else SCOPE.stack[0]


def _setting(key):
    return tracer.current().tile_shapes(key) if tracer.active() else SCOPE.get(key)


def set_vec_tile_shapes(*shape):
    _settings()["vec_tile_shapes"] = tuple(int(e) for e in shape)


def get_vec_tile_shapes():
    return list(_setting("vec_tile_shapes") or [])


def set_cube_tile_shapes(m, k, n, enable_split_k=False, *_):
    _settings()["cube_tile_shapes"] = (list(m), list(k), list(n))


def set_matrix_size(size, *_):
    """CANN's matmul size hint: recorded, no effect (the trace knows every extent)."""
    _settings()["matrix_size"] = list(size)


def get_cube_tile_shapes():
    return list(_setting("cube_tile_shapes") or [])


def _named(op):
    return lambda *args: elementwise(op, *args)


FUNCTIONS = {
    **{op: _named(op) for op in ops.EW if op not in ("cast", "where", "clip", "pow")},
    **{op: (lambda op: lambda x, dim=-1, keepdim=False: reduce(op, x, dim, keepdim))(op)
       for op in ops.REDUCE},
    "cast": cast, "where": where, "clip": clip, "pow": pow, "round": round,
    "greater": _named("gt"),
    "reshape": reshape, "unsqueeze": unsqueeze, "transpose": transpose, "concat": concat,
    "expand_clone": expand_clone, "view": view, "assemble": assemble, "full": full,
    "zeros": zeros, "ones": ones, "arange": arange, "tensor": tensor, "matmul": matmul,
    "softmax": softmax, "rms_norm": rms_norm, "layer_norm": layer_norm, "loop": loop,
    "is_loop_begin": is_loop_begin, "is_loop_end": is_loop_end,
    "set_vec_tile_shapes": set_vec_tile_shapes, "get_vec_tile_shapes": get_vec_tile_shapes,
    "set_cube_tile_shapes": set_cube_tile_shapes, "get_cube_tile_shapes": get_cube_tile_shapes,
    "set_matrix_size": set_matrix_size, "gather": gather, "scatter": scatter,
    "topk": topk, "argsort": argsort,
}
FUNCTIONS.update(add=lambda a, b, alpha=None: binary("add", a, b, alpha),
                 sub=lambda a, b, alpha=None: binary("sub", a, b, alpha),
                 max=_scalar_or_reduce("amax", max), min=_scalar_or_reduce("amin", min),
                 symbolic_scalar=symbolic_scalar)

# pypto.Tensor methods (x.exp(), x.sum(dim), out.move(e), ...)
METHODS = {**{k: v for k, v in FUNCTIONS.items()
              if k not in ("full", "zeros", "ones", "arange", "tensor", "loop", "concat")},
           "move": move, "view": view}

def language_call(name, args, kwargs):
    """A ``pl`` primitive called while a CANN kernel is traced: the CANN op of that name."""
    fn = FUNCTIONS.get(name)
    if fn is None:
        raise NotAvailableError(f"pypto.{name} in a CANN PyPTO kernel",
                                CATALOGUE.get(name, "it is a PyPTO tile-kernel primitive"))
    return fn(*args, **kwargs)
