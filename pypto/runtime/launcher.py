"""The warm launch path, generated per kernel with ``exec`` (as Triton's launcher is).

``make_launcher`` writes a Python function with the kernel's own signature that computes the
specialisation key with inline expressions, finds the compiled kernel in a dict and calls its
native entry with the tensors' object addresses: no ``inspect`` binding, no per-argument
helper calls, no numpy allocation. torch CPU tensors have a fast path of their own: keyed by
``(dtype, shape, stride(), is_cpu)`` and passed as ``data_ptr()`` to the kernel's ``_ptr``
entry (no numpy view) when every tensor's layout is a compile-time constant. Anything unusual
(a new specialisation, a mix of torch and numpy tensors, a tensor subclass, a callable grid)
falls back to the slow path in ``jit.py``, which compiles, registers the kernel under the same
key, and launches.
"""
from __future__ import annotations

import ctypes
import math
import os
import sys
import time

import numpy as np

from .. import envs
from . import hooks
from . import pool as runtime
from ..backends.ascend.control import stop_error
from ..cache import STATS as cache_stats
from .device import Tensor, _current_target
from ..layout import LayoutTensor, as_array


_RESERVED = {"_nd", "_T", "_L", "_TT", "_other", "_target", "_env", "_table", "_slow", "_stats", "_entry",
             "_normalise", "_run", "_explain", "_ctypes_error", "_read_only"}
ENTRY_LEADING_ARGS = 6

# The environment as the launcher reads it on every call. os.environ.get costs ~0.6 us for an
# unset variable (it encodes the key and raises KeyError inside); on POSIX its underlying bytes
# dict answers the same question in ~35 ns and is kept in step with os.environ.
if os.name == "posix" and isinstance(getattr(os.environ, "_data", None), dict):
    ENVIRON, ENV_KEY = os.environ._data, os.fsencode
else:  # pragma: no cover - other platforms
    ENVIRON, ENV_KEY = os.environ, str    # pool state, g0, g1, g2, helpers, own scratch


_MISSING = object()


class NoFastPath:
    """Key part for arguments the fast path does not handle: never equal to a stored key."""

    def __eq__(self, other):
        return False

    def __hash__(self):
        return 0


def other_key(v):
    """Key of a non-ndarray argument: ints by == 1 and % 16 (bools count as ints), floats by
    kind; anything else (torch tensors, DLPack objects) takes the slow path."""
    if isinstance(v, (bool, np.bool_, np.integer)):
        v = int(v)
        return (v == 1, v % 16 == 0)
    if isinstance(v, (float, np.floating)):
        return "f"
    return NoFastPath()


def _param_key(name: str, jitfn) -> str:
    if name in jitfn.constexprs:     # by type too: 16.0 == 16 and True == 1 hash alike
        return f"(type({name}), {name})"
    dynamic = jitfn.dynamic.get(name)
    if dynamic:
        shape = f"tuple(None if i in {sorted(dynamic)!r} else s for i, s in enumerate({name}.shape))"
        tensor = f"({name}.dtype, {shape}, {name}.flags.c_contiguous)"
    else:
        tensor = f"({name}.dtype, {name}.shape, {name}.strides)"
    if name in jitfn.do_not_specialize:
        scalar = "0"
    else:
        scalar = f"({name} == 1, {name} % 16 == 0)"
    device = tensor.replace(f"{name}.", f"{name}._data.")
    if dynamic:
        torch_layout = f"({name}.dtype, {shape}, {name}.is_contiguous(), {name}.is_cpu)"
    else:
        torch_layout = f"({name}.dtype, {name}.shape, {name}.stride(), {name}.is_cpu)"
    layout = (f"({name}.layout, {name}.shape, {name}._data.dtype, {name}._data.shape, "
              f"{name}._data.strides)")
    return (f"({tensor} if type({name}) is _nd else {scalar} if type({name}) is int "
            f"else {device} if type({name}) is _T else {torch_layout} if type({name}) in _TT "
            f"else {layout} if type({name}) is _L else _other({name}))")


class _TorchNotImported:
    """Stands for torch's tensor types in a launcher made before torch was imported (no
    object has this type); ``note_torch`` puts the real ones in once a torch tensor is seen."""


def torch_tensor_type() -> tuple:
    """The exact types the torch fast path takes: ``torch.Tensor`` and ``nn.Parameter``
    (a model's weights)."""
    torch = sys.modules.get("torch")
    if getattr(torch, "Tensor", None) is None:
        return (_TorchNotImported,)
    return (torch.Tensor, torch.nn.Parameter)


def note_torch(scope: dict) -> None:
    """A torch tensor reached the slow path: let this launcher's fast path recognise them."""
    scope["_TT"] = torch_tensor_type()


def make_launcher(jitfn, slow_path):
    """Returns (launch(*args, _pypto_grid=grid, **kwargs), key(*args, **kwargs), the
    launcher's globals)."""
    params = jitfn.signature.parameters
    for p in params.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise TypeError(f"@pypto.jit kernels take plain named parameters; "
                            f"{jitfn.__name__} has {str(p)!r} ({p.kind.description}): "
                            f"{'remove the /' if p.kind is p.POSITIONAL_ONLY else 'name each'}"
                            f" parameter")
    names = list(params)
    reserved = [n for n in names if n.startswith("_pypto_") or n in _RESERVED]
    if reserved:
        raise TypeError(f"@pypto.jit: parameter names {reserved} are reserved by PyPTO's "
                        "launcher; rename them")
    defaults = {f"_d_{n}": p.default for n, p in params.items() if p.default is not p.empty}
    keyword_only = [n for n, p in params.items() if p.kind is p.KEYWORD_ONLY]
    positional = [n for n in names if n not in keyword_only]
    signature = ", ".join(f"{n}=_d_{n}" if f"_d_{n}" in defaults else n for n in positional)
    if keyword_only:
        signature += (", " if positional else "") + "*, " + ", ".join(
            f"{n}=_d_{n}" if f"_d_{n}" in defaults else n for n in keyword_only)
    env_key = ", ".join(f"_env.get({ENV_KEY(v.name)!r})" for v in envs.registry().values()
                        if v.in_launch_key) + ", _target.get('name')"
    # per parameter, then the environment (a kernel may have no parameters)
    key = ", ".join([_param_key(n, jitfn) for n in names] + [env_key])
    call_args = ", ".join(names)
    grid_param = ("" if not names else ", ") + ("" if keyword_only else "*, ") + "_pypto_grid"
    slow_args = "".join(f"{n}, " for n in positional)
    slow_kwargs = ", ".join(f"{n!r}: {n}" for n in keyword_only)
    kernel = jitfn.__name__ if jitfn.__name__.isidentifier() else "kernel"
    source = f"""
def key({signature}):
    return ({key})

def {kernel}({signature}{grid_param}):
    _pypto_k = _table.get(({key}))
    if _pypto_k is None:
        return _slow(_pypto_grid, ({slow_args}), {{{slow_kwargs}}})
    _stats["memory_hits"] += 1
    return _pypto_k(_pypto_grid, {call_args})
"""
    scope = {"_nd": np.ndarray, "_T": Tensor, "_L": LayoutTensor, "_TT": torch_tensor_type(), "_other": other_key, "_target": _current_target, "_env": ENVIRON, "_table": jitfn._fast,
             "_slow": slow_path, "_stats": cache_stats, **defaults}
    exec(compile(source, f"<pypto launcher for {jitfn.__name__}>", "exec"), scope)
    return scope[kernel], scope["key"], scope


def read_only(kernel_name: str, arg: str) -> ValueError:
    return ValueError(f"{kernel_name}(): argument '{arg}' is stored to but is a read-only array")


def requires_grad_refused(kernel_name: str, arg: str, tensor) -> RuntimeError:
    """torch refuses in-place writes to a leaf that requires grad; a kernel's write into a
    non-leaf would be invisible to autograd (wrong gradients), so both are refused."""
    what = "a leaf Variable that requires grad" if tensor.is_leaf else \
        "a tensor that requires grad (autograd cannot see a kernel's writes)"
    return RuntimeError(f"{kernel_name}(): argument '{arg}' is stored to but is {what}; "
                        "write into a tensor that does not require grad, run the launch under "
                        "torch.no_grad(), or register the kernel with "
                        "pypto.register_op(..., backward=...) to make it differentiable")


MAX_BLOCKS = (1 << 63) - 1


def grid_too_large(kernel_name: str, grid) -> ValueError:
    """A grid whose block count does not fit in int64 (a launch numbers its blocks so)."""
    return ValueError(f"{kernel_name}: grid {tuple(grid)!r} has {math.prod(grid)} blocks, more "
                      f"than a launch can number (at most 2**63 - 1 = {MAX_BLOCKS})")


def _grad_mode(torch_tensors: bool):
    if not torch_tensors:
        return None
    import torch  # lazy: only callers of torch tensors load it
    return torch.is_grad_enabled


def _reads_check(reads, names) -> str:
    """The caller's first statement when the kernel folded module globals: one identity
    test per read (``_pypto_w<i>``: the globals dict, ``_pypto_v<i>``: the object seen); any
    other object goes to ``_pypto_moved`` (the slow path, which recompiles if the value
    changed)."""
    if not reads:
        return ""
    tests = []
    for i, read in enumerate(reads):
        expr = f"_pypto_w{i}.get({read.path[0]!r}, _pypto_miss)"
        for attr in read.path[1:]:
            expr = f"getattr({expr}, {attr!r}, _pypto_miss)"
        tests.append(f"{expr} is not _pypto_v{i}")
    return (f"    if {' or '.join(tests)}:\n"
            f"        return _pypto_moved(_pypto_grid, "
            f"({', '.join(names)}{',' if names else ''}))\n")


def make_caller(jitfn, kernel, runtime_params, normalise_grid, torch_tensors=False,
                moved=None, record=None):
    """The per-specialisation call: checks written tensors, launches with object addresses.
    ``normalise_grid(grid, meta)`` turns a callable, int or None grid into a tuple.
    ``torch_tensors``: the call for torch CPU tensors (every tensor argument a
    ``torch.Tensor``): data pointers to the ``_ptr`` entry where the kernel has one, else
    numpy views made per call; a written tensor that requires grad is refused as torch
    refuses in-place writes to it. ``moved(grid, values)`` takes the launch when a module
    global the kernel folded (``kernel.reads``) is no longer the object it was.
    ``record(grid, raw_values, t0, arguments)`` records a profiled launch in place of
    ``hooks.record_compiled`` (the persistent form a grid larger than the cores stands for)."""
    names = list(jitfn.signature.parameters)
    meta = "{" + ", ".join(f"{n!r}: {n}" for n in names) + "}"
    entry, views = kernel.entry, ""
    if not torch_tensors:
        values = ", ".join(f"id({n} if type({n}) is _nd else {n}._data)" if kind == "tensor"
                           else n for n, kind, _ in runtime_params)
        raw = ", ".join(n for n, _, _ in runtime_params)
        checks = "".join(
            f"    if not ({n} if type({n}) is not _L else {n}._data).flags.writeable:\n"
            f"        raise _read_only({jitfn.__name__!r}, {n!r})\n"
            for n in kernel.metadata["written_tensors"])
    else:
        if kernel.pointer_entry is not None:
            entry, tensor_value = kernel.pointer_entry, "{}.data_ptr()"
        else:         # numpy views, named so that they live until the call returns
            tensor_value = "id(_view_{})"
            views = "".join(f"    _view_{n} = _as_array({n})\n"
                            for n, kind, _ in runtime_params if kind == "tensor")
        values = ", ".join(tensor_value.format(n) if kind == "tensor" else n
                           for n, kind, _ in runtime_params)
        raw = ", ".join(f"_as_array({n})" if kind == "tensor" else n
                        for n, kind, _ in runtime_params)
        checks = "".join(
            f"    if {n}.requires_grad and _grad_enabled():\n"
            f"        raise _requires_grad({jitfn.__name__!r}, {n!r}, {n})\n"
            for n in kernel.metadata["written_tensors"])
    reads = list(kernel.reads) if moved is not None else []
    source = f"""
def call(_pypto_grid, {", ".join(names)}):
{_reads_check(reads, names)}{checks}    if type(_pypto_grid) is not tuple or not 0 < len(_pypto_grid) <= 3 or \\
            type(_pypto_grid[0]) is not int or \\
            len(_pypto_grid) > 1 and type(_pypto_grid[1]) is not int or \\
            len(_pypto_grid) > 2 and type(_pypto_grid[2]) is not int:
        _pypto_grid = _normalise(_pypto_grid, {meta})
{views}    if _prof:
        return _profiled(_pypto_grid, ({values}{"," if runtime_params else ""}), ({raw}{"," if runtime_params else ""}), {meta})
    try:
        _pypto_status = _run(_entry, _pypto_grid, ({values}{"," if runtime_params else ""}))
    except _ctypes_error as _pypto_error:
        raise _explain(_pypto_error, _pypto_grid) from None
    if _pypto_status:
        raise _status_error(_pypto_status, _pypto_grid)
"""
    runtime_names = [n for n, _, _ in runtime_params]

    def explain(error, grid):
        """ctypes rejected an argument: say which one, in the user's terms."""
        position = str(error).split(":")[0].replace("argument", "").strip()
        index = int(position) - 1 - ENTRY_LEADING_ARGS if position.isdigit() else -1
        if 0 <= index < len(runtime_names):
            return ValueError(f"{jitfn.__name__}(): argument '{runtime_names[index]}' cannot be "
                              f"passed to the kernel: {str(error).split(':', 1)[-1].strip()}")
        return ValueError(f"{jitfn.__name__}: grid must be a tuple of 1 to 3 ints, got {grid!r}")

    def status_error(status, grid):
        name = jitfn.__name__
        if status == 2:
            cores = kernel.metadata.get("cores")
            return ValueError(
                f"{name}: grid {grid!r} has more blocks than the {cores} cores of "
                f"{kernel.metadata['target']}; a kernel that uses pl.barrier/pl.wait needs every "
                "block running at once, so its grid must fit on the cores")
        if status == 3:
            return RuntimeError(
                f"{name}: the blocks deadlocked: a pl.barrier() that not every block reaches, "
                "or a pl.wait() whose flag is never signalled enough (no progress for "
                "PYPTO_SYNC_TIMEOUT seconds)")
        if status == 4:
            return grid_too_large(name, grid)
        stopped = stop_error(status, name)
        if stopped is not None:
            return stopped
        return ValueError(f"{name}: grid dimensions must be >= 0, got {grid!r}")

    def profiled(grid, values, raw_values, arguments):
        """The launch while a profiler is active (``hooks.ACTIVE`` non-empty): timed, then
        recorded with the arguments' shapes and scalar values."""
        t0 = time.perf_counter()
        try:
            status = runtime.run(entry, grid, values)
        except ctypes.ArgumentError as error:
            raise explain(error, grid) from None
        if status:
            raise status_error(status, grid)
        if record is None:
            hooks.record_compiled(kernel, grid, raw_values, t0)
        else:
            record(grid, raw_values, t0, arguments)

    scope = {"_entry": entry, "_status_error": status_error, "_read_only": read_only,
             "_requires_grad": requires_grad_refused, "_as_array": as_array,
             "_grad_enabled": _grad_mode(torch_tensors),
             "_prof": hooks.ACTIVE, "_profiled": profiled, "_normalise": normalise_grid, "_run": runtime.run,
             "_explain": explain,
             "_nd": np.ndarray, "_L": LayoutTensor,
             "_ctypes_error": ctypes.ArgumentError,
             "_pypto_moved": moved, "_pypto_miss": _MISSING}
    for i, read in enumerate(reads):
        scope[f"_pypto_w{i}"], scope[f"_pypto_v{i}"] = read.scope, read.value
    exec(compile(source, f"<pypto call for {jitfn.__name__}>", "exec"), scope)
    return scope["call"]
