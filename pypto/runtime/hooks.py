"""Launch hooks: what every kernel launch records while a profiler is running.

The launch paths (``launcher.make_caller``, the pto-isa and interpreted paths of ``jit.py``,
``pto_kernel.py``, Ascend C kernels) sit below the profiler (``tools/profiler``), so the list
they test and the records they leave live here, as Triton keeps its launch hooks in its
runtime. The generated per-specialisation call tests one module-level list, ``ACTIVE``, and does
nothing else when no profiler is running.

Recording is cheap and the model is lazy: a launch keeps the compiled kernel, the normalised
grid and the runtime arguments' shapes, dtypes and scalar values (never the arrays), and the
cycle model runs when the profile is first read (identical launches are modelled once).
Interpreted launches (``PYPTO_INTERPRET=1``) are recorded too: after the timed interpretation
the kernel is compiled (not run) so the model has a PTO program to read.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

import numpy as np

from ..target import get_target

# The running profilers. The generated launch code reads this list on every launch (one
# truthiness test), so it is mutated in place and never rebound.
ACTIVE: list = []
LOCK = threading.Lock()         # guards ACTIVE and the kernels' model caches


@dataclass(frozen=True)
class TensorSpec:
    """A tensor argument as the model needs it: shape, dtype and strides (in bytes), no data;
    ``model_launch`` takes it in place of the launch's array (the strides shape its bursts)."""
    shape: tuple
    dtype: np.dtype
    strides: tuple

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def _arg_spec(value):
    data = getattr(value, "_data", None)       # pypto.Tensor
    if isinstance(data, np.ndarray):
        value = data
    if isinstance(value, np.ndarray):
        return TensorSpec(tuple(value.shape), value.dtype, tuple(value.strides))
    return value                               # int / float: kept as the value


class Launch:
    """One recorded launch. ``model`` is computed on first use and shared between identical
    launches of the same compiled kernel."""

    __slots__ = ("name", "grid", "host_time_ms", "kernel", "args", "mode", "error", "_model")

    def __init__(self, name, grid, host_time_ms, kernel, args, mode, error=None):
        self.name = name
        self.grid = grid
        self.host_time_ms = host_time_ms
        self.kernel = kernel            # CompiledKernel, or None if it could not be compiled
        self.args = args                # runtime parameter name -> TensorSpec | int | float
        self.mode = mode                # "compiled", "persistent" (the grid's persistent
                                        # form), "pto-isa", "interpreted" or "ascend-c"
        self.error = error              # why there is no model (no compile, model failed)
        self._model = None

    @property
    def target(self) -> str | None:
        return self.kernel.metadata["target"] if self.kernel is not None else None

    @property
    def kind(self) -> str | None:
        return self.kernel.metadata.get("kind") if self.kernel is not None else None

    @property
    def model(self):
        """The cycle model's ``LaunchModel`` of this launch (None if the kernel has none)."""
        if self._model is None and self.kernel is not None and self.error is None:
            try:
                self._model = _model_of(self.kernel, self.grid, self.args)
            except Exception as e:  # noqa: BLE001 - one unmodelled launch keeps the report
                self.error = f"cycle model: {type(e).__name__}: {e}"
        return self._model


def _model_of(kernel, grid, args):
    key = (grid, tuple(sorted((n, v if isinstance(v, TensorSpec) else (type(v), v))
                              for n, v in args.items())))
    with LOCK:
        cache = kernel.__dict__.setdefault("_pypto_models", {})
        model = cache.get(key)
    if model is not None:
        return model
    from ..backends.ascend.model.launch import model_launch  # lazy: loads when a profile is read
    program = pto_program(kernel)
    target = get_target(kernel.metadata["target"])
    model = model_launch(program, grid, args, target)   # TensorSpecs: shape, dtype, strides
    with LOCK:
        cache[key] = model
    return model


def pto_program(kernel):
    """The kernel's PTO ``Program``, read back from its ``.pto`` text once and kept."""
    program = kernel.__dict__.get("_pypto_program")
    if program is None:
        from ..compiler.pto.reader import parse_program  # lazy: loads when a model is wanted
        program = parse_program(kernel.asm["pto"], get_target(kernel.metadata["target"]))
        kernel._pypto_program = program
    return program


def record(launch: Launch) -> None:
    """Hand ``launch`` to every running profiler."""
    for prof in list(ACTIVE):
        prof._records.append(launch)


def record_graph(module) -> None:
    """A graph module run while profilers are active: each keeps it once, and its page shows
    the module's modelled schedule (``Module.model()``) beside the launches."""
    for prof in list(ACTIVE):
        if not any(m is module for m in prof._graphs):
            prof._graphs.append(module)


def record_compiled(kernel, grid, values, t0, mode="compiled"):
    """Called by the generated launch code after a launch made while ``ACTIVE`` is non-empty:
    ``values`` are the runtime arguments in ``kernel.runtime_params`` order, ``t0`` the
    ``perf_counter()`` taken just before the native call."""
    host_ms = (time.perf_counter() - t0) * 1e3
    args = {name: _arg_spec(v) for (name, _, _), v in zip(kernel.runtime_params, values)}
    if kernel.metadata.get("persistent"):      # a grid run as one block per core, looping
        mode = "persistent"
    record(Launch(kernel.metadata["name"], grid, host_ms, kernel, args, mode))


def record_interpreted(jitfn, bound, grid, host_ms):
    """An interpreted launch (PYPTO_INTERPRET=1): compile the same specialisation (not run it)
    so the model has a program; a kernel that does not compile is recorded without a model."""
    kernel, error = None, None
    try:
        kernel = jitfn._get_kernel(bound)[0]
    except Exception as e:  # noqa: BLE001 - the launch itself succeeded; say why no model
        error = f"{type(e).__name__}: {e}"
    if kernel is not None:
        args = {name: _arg_spec(bound[name]) for name, _, _ in kernel.runtime_params}
    else:
        args = {}
    record(Launch(jitfn.__name__, tuple(grid), host_ms, kernel, args, "interpreted", error))
