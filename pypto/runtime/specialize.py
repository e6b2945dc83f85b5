"""Specialisation: what of a call's arguments a compiled kernel is built for.

A call's bound arguments become a key (``spec_key``: constexpr values, tensor dtypes, shapes
and contiguity, ints equal to 1 or divisible by 16) that splits the kernel cache, and, for a
new key, the frontend's bindings (``specialise``: constants, IR parameters, the tensor strides
the backend may treat as constants). Arguments are normalised first (``normalise_arg``), so
every path (launch, compile, interpreter) sees the same numbers and arrays.
"""
from __future__ import annotations

import numpy as np

from ..compiler.ast_to_ir import scalar_param, tensor_param
from ..language import dtypes as dt
from ..language.core import constexpr
from ..layout import LayoutTensor, argument_array


def is_constexpr(annotation) -> bool:
    """Whether a parameter's annotation is ``pl.constexpr`` (the object, or its spelling)."""
    if annotation is constexpr or isinstance(annotation, constexpr):
        return True
    return isinstance(annotation, str) and annotation.split(".")[-1] == "constexpr"


def is_folded_constant(value) -> bool:
    """A global or closure value the frontend folds into the code as a constant."""
    if isinstance(value, constexpr):
        return is_folded_constant(value.value)
    if isinstance(value, tuple):
        return all(is_folded_constant(v) for v in value)
    return value is None or isinstance(value, (int, float, str, dt.dtype, np.integer,
                                               np.floating))


def spec_key(jitfn, bound: dict) -> tuple:
    """The specialisation of a call's bound arguments: what splits the kernel cache (per
    argument: a constexpr's value, a tensor's dtype, shape with its dynamic dims left out,
    and contiguity, a layout tensor's layout and shape, an int's == 1 and % 16)."""
    key = []
    for name in jitfn.arg_names:
        v = bound[name]
        if name in jitfn.constexprs:
            key.append(("c", _hashable(v)))
        elif isinstance(v, LayoutTensor):
            if name in jitfn.dynamic:
                raise ValueError(f"{jitfn.__name__}(): argument '{name}' is a "
                                 f"{v.layout} layout tensor, whose shape is always "
                                 "specialised; remove it from dynamic=")
            key.append(("l", dtype_of(v.data).name, v.layout, v.shape))
        elif isinstance(v, np.ndarray):
            dynamic = jitfn.dynamic.get(name, ())
            shape = tuple(None if i in dynamic else s for i, s in enumerate(v.shape))
            key.append(("t", dtype_of(v).name, shape, v.flags.c_contiguous))
        elif isinstance(v, float):
            key.append(("f",))
        elif name in jitfn.do_not_specialize:
            key.append(("i",))
        else:
            key.append(("i", v == 1, v % 16 == 0))
    return tuple(key)


def specialise(jitfn, spec, bound):
    """Frontend bindings: constants for constexprs and ints equal to 1, IR values for the
    rest; plus the tensor dims/strides the backend may treat as constants."""
    spec_args, tensor_specs, runtime_params = {}, {}, []
    for name, s in zip(jitfn.arg_names, spec):
        v = bound[name]
        if s[0] == "c":
            spec_args[name] = v
        elif s[0] == "l":
            arr = v._data                 # the physical array as the kernel receives it
            dtype = dt.int4 if v.layout == "INT4" else dtype_of(arr)
            spec_args[name] = tensor_param(name, dtype, len(v.shape), v.layout, v.shape)
            tensor_specs[name] = (arr.shape, layout_strides(v.layout, arr.shape))
            runtime_params.append((name, "tensor", arr.ndim))
        elif s[0] == "t":
            dtype = dtype_of(v)
            spec_args[name] = tensor_param(name, dtype, v.ndim, dims=s[2])
            tensor_specs[name] = (s[2], static_strides(s[2], s[3]))
            runtime_params.append((name, "tensor", v.ndim))
        elif s[0] == "f":
            spec_args[name] = scalar_param(name, dt.float32)
            runtime_params.append((name, "float", 0))
        elif len(s) > 1 and s[1]:
            spec_args[name] = 1
        else:
            spec_args[name] = scalar_param(name, dt.int64)
            runtime_params.append((name, "int", 0))
    return spec_args, tensor_specs, runtime_params


def static_strides(shape: tuple, contiguous: bool) -> tuple:
    """Element strides known at compile time: those of a C-contiguous tensor that do not depend
    on a dynamic dimension. The rest are read from the arguments."""
    if not contiguous:
        return (None,) * len(shape)
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step = None if step is None or extent is None else step * extent
    return tuple(reversed(strides))


def layout_strides(layout: str, shape: tuple) -> tuple:
    """A layout tensor's element strides as the compiled code knows them: all constants
    (the array is C-contiguous), except an NZ tensor's outermost one, which is read at run
    time so that PTOAS does not infer (wrongly) the layout of its view (docs/pto.md)."""
    strides = static_strides(shape, True)
    return (None,) + strides[1:] if layout == "NZ" else strides


def dynamic_dims(dynamic, arg_names) -> dict:
    """``dynamic=["x"]`` (every dimension of x) or ``{"x": (0,)}`` → {name: set of dims}."""
    if isinstance(dynamic, (list, tuple, set)):
        dynamic = {name: None for name in dynamic}
    out = {}
    for name, dims in dict(dynamic).items():
        if name not in arg_names:
            raise ValueError(f"dynamic names an unknown parameter: {name!r}")
        out[name] = set(range(8)) if dims is None else {dims} if isinstance(dims, int) \
            else set(dims)
    return out


def physical(value):
    """What a launch passes for an argument: a layout tensor's physical array."""
    return value._data if isinstance(value, LayoutTensor) else value


def _hashable(v):
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    try:
        hash(v)
    except TypeError:
        raise TypeError(f"constexpr value {v!r} is not hashable") from None
    return (type(v).__name__, v)


def dtype_of(arr: np.ndarray) -> dt.dtype:
    return dt.from_any(arr.dtype)


def normalise_arg(fn_name: str, name: str, value):
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, np.integer)):
        if not -(1 << 63) <= int(value) < (1 << 63):
            raise ValueError(f"{fn_name}(): argument '{name}' = {int(value)} does not fit in "
                             "int64, the scalar unit's integer type")
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, LayoutTensor):
        return value
    arr = argument_array(value, f"{fn_name}(): argument '{name}'")
    if arr is None:
        raise TypeError(f"{fn_name}(): argument '{name}' must be a tensor (numpy array, "
                        f"DLPack or __array_interface__ object), an int, a float or a bool; "
                        f"got {type(value).__name__} {value!r:.60}")
    try:
        dtype_of(arr)
    except TypeError as e:
        raise TypeError(f"{fn_name}(): argument '{name}': {e}") from None
    if arr.ndim == 0:
        raise TypeError(f"{fn_name}(): argument '{name}' is a 0-d array; pass a Python "
                        "number for scalars")
    if any(s % arr.itemsize for s in arr.strides):
        raise ValueError(f"{fn_name}(): argument '{name}' has strides {arr.strides} that are "
                         "not multiples of its element size")
    return arr
