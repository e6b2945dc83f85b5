"""``@pypto.frontend.jit``: CANN kernels called on torch CPU tensors or numpy arrays.

A call binds the arguments (annotated tensors first, then constants folded into the trace, as
CANN does), traces the body once per shape signature (``tracer``), and runs the trace
(``evaluate``), writing into the caller's tensors in place. Both run modes run on the host:
``RunMode.NPU`` says once that there is no NPU here and it runs the host simulation instead;
``RunMode.SIM`` also writes CANN's swim lane and report (``sim_output``), on the first call
of each shape signature: later calls model the same programs, and stay as fast as NPU mode.
"""
from __future__ import annotations

import functools
import inspect
import warnings

import numpy as np

from .. import layout
from ..language import dtypes as pl_dtypes
from ..runtime.device import Tensor
from . import options as opts
from . import sim_output
from .annotations import DYNAMIC, TensorSpec
from .coalesce import coalesce
from .evaluate import Evaluator
from .tracer import run as trace_kernel

_GROUPS = ("codegen_options", "host_options", "pass_options", "runtime_options",
           "verify_options", "debug_options")
_SAID_NO_NPU: list = []
# callables (kernel, trace, arguments before the call, arguments after) run after every call:
# the examples runner checks each call against the reference (reference.py) through it
CALL_HOOKS: list = []


class NoNPUWarning(UserWarning):
    """RunMode.NPU was asked for; this machine runs the kernel on the host instead."""


def _is_tensor_param(param) -> bool:
    ann = param.annotation
    return isinstance(ann, TensorSpec) or ann is Tensor


def _is_array(value) -> bool:
    """A numpy array or a torch tensor (not a torch dtype or device, which are constants)."""
    return isinstance(value, np.ndarray) or (type(value).__module__.startswith("torch")
                                              and hasattr(value, "data_ptr"))


def as_array(value, param: str) -> np.ndarray:
    """A numpy view sharing memory with ``value`` (``layout.as_array``: torch CPU tensor,
    bfloat16 too, numpy array, pypto.Tensor)."""
    try:
        array = layout.as_array(value)
    except TypeError as e:          # a torch tensor off the CPU
        raise TypeError(f"argument {param!r}: {e}") from None
    if array is None:
        raise TypeError(f"argument {param!r}: a tensor parameter takes a torch CPU tensor or a "
                        f"numpy array, got {type(value).__name__}")
    return array


class JitKernel:
    """What ``@pypto.frontend.jit`` returns: call it like the function it decorates."""

    def __init__(self, fn, groups: dict):
        self.fn = fn
        self.__name__ = fn.__name__
        functools.update_wrapper(self, fn)
        where = f"@pypto.frontend.jit on {fn.__name__}"
        self.options = {g: opts.check_group(g, groups.get(g), where) for g in _GROUPS}
        self.run_mode = opts.run_mode_of(self.options["runtime_options"])
        self.signature = inspect.signature(fn)
        self.tensor_params = [p for p in self.signature.parameters.values()
                              if _is_tensor_param(p)]
        self._traces: dict = {}
        self._simulated: set = set()     # trace keys whose SIM artefacts are written

    def __call__(self, *args, **kwargs):
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arrays, specs, constants = [], [], {}
        for name, value in bound.arguments.items():
            param = self.signature.parameters[name]
            if param in self.tensor_params:
                array = as_array(value, name)
                dtype = pl_dtypes.from_any(array.dtype)
                ann = param.annotation
                if isinstance(ann, TensorSpec):
                    ann.check(name, array.shape, dtype)
                arrays.append(array)
                specs.append((name, tuple(array.shape), dtype))
            elif _is_array(value):
                raise TypeError(f"{self.__name__}: parameter {name!r} is not annotated "
                                "pypto.Tensor but gets a tensor; annotate it (CANN: "
                                "x: pypto.Tensor([shape], pypto.DT_FP32), or pypto.Tensor())")
            else:
                constants[name] = value
        key = (tuple(specs), tuple((k, repr(v)) for k, v in constants.items()))
        trace = self._traces.get(key)
        if trace is None:
            trace = trace_kernel(self.fn, specs, constants)
            trace.unmerged, trace.writes = trace.writes, coalesce(trace.writes)
            self._traces[key] = trace
        self._say_host()
        before = [a.copy() for a in arrays] if CALL_HOOKS else None
        if self.run_mode == opts.RunMode.SIM and key not in self._simulated:
            with sim_output.recorded(self.__name__):
                Evaluator(trace, arrays).run()
            self._simulated.add(key)        # later calls would model the same programs
        else:
            Evaluator(trace, arrays).run()
        for hook in CALL_HOOKS:
            hook(self, trace, before, arrays)

    def _say_host(self):
        if self.run_mode == opts.RunMode.NPU and not _SAID_NO_NPU:
            _SAID_NO_NPU.append(True)
            warnings.warn("pypto.RunMode.NPU: there is no NPU here; PyPTO runs the kernel on "
                          "the host simulation instead (results are real; pypto.Profiler "
                          "gives the modelled NPU time)", NoNPUWarning, stacklevel=3)


def jit(fn=None, *, codegen_options=None, host_options=None, pass_options=None,
        runtime_options=None, verify_options=None, debug_options=None, **unknown):
    """``@pypto.frontend.jit`` and ``@pypto.frontend.jit(runtime_options=..., ...)``."""
    for key in unknown:
        warnings.warn(f"@pypto.frontend.jit({key}=...): not one of CANN's option groups "
                      f"({', '.join(_GROUPS)}); ignored", opts.UnknownOptionWarning,
                      stacklevel=2)
    groups = {"codegen_options": codegen_options, "host_options": host_options,
              "pass_options": pass_options, "runtime_options": runtime_options,
              "verify_options": verify_options, "debug_options": debug_options}
    if fn is not None:
        return JitKernel(fn, groups)
    return lambda f: JitKernel(f, groups)


def function(fn=None, **_):
    """``@pypto.frontend.function``: a helper inlined into the kernel (here: called as Python
    while the kernel is traced, which is what inlining means for a trace)."""
    if fn is None:
        return lambda f: f
    return fn


def dynamic(name: str = ""):
    """``pypto.frontend.dynamic(name)``: a dynamic extent for annotations."""
    return DYNAMIC
