"""``pypto.ascend_c_kernel``: an Ascend C kernel (C++ against pto-isa) declared for PyPTO; a
call's checks and rules, its run on arrays and launch on the simulator, and its NPU record
(``pypto.call_ascend_c``, the graph's, also adds it to a graph: ``graph/ascend_c_node.py``).

The declaration says what the C++ cannot: which GM pointers are inputs (``inputs=``, pto-isa's
``__in__``/``__out__`` marks, or the output rule's parameter names), the outputs' shapes and
dtypes (``outputs=``: a rule of the inputs' ``TensorSpec``s returning ``OutputSpec``s, one per
output pointer in the kernel's order), the grid (``grid=``: an int, a tuple or a rule; the
kernel sees the linear block index ``get_block_idx()`` and ``get_block_num()``) and the
scalars (``scalars=``: values or rules, overridable per call). Everything else — names,
order, dtypes of typed pointers — is read from the ``__global__`` function (``signature``;
the options are checked by ``declaration``).
A call is checked against that before anything runs; the library is built on first use
(``library``) and its NPU build is recorded beside it (``npu``).
"""
from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass

import numpy as np

from ..runtime import hooks
from ..target import get_target
from ..backends.ptoisa.engine import NotOnSimulator
from ..language import dtypes as dt
from ..layout import argument_array
from ..runtime.device import Tensor
from . import declaration, library, npu, signature as sig_mod

NO_MODEL = "an Ascend C kernel: no PTO program for the cycle model"
# pypto.call_ascend_c, put here by graph/ascend_c_node.py when the graph API loads (no graph
# tensor exists before): ``op(*inputs)`` calls it then, so a call on graph tensors adds a node.
# The graph sits above this package, so it hands its call down rather than being imported.
GRAPH_CALL: list = []
# what each C++ integer type holds (the entry casts the 64-bit slot: out of range would wrap)
_INT_RANGES = {"int8_t": (-2 ** 7, 2 ** 7 - 1), "uint8_t": (0, 2 ** 8 - 1),
               "int16_t": (-2 ** 15, 2 ** 15 - 1), "uint16_t": (0, 2 ** 16 - 1),
               "int32_t": (-2 ** 31, 2 ** 31 - 1), "int": (-2 ** 31, 2 ** 31 - 1),
               "uint32_t": (0, 2 ** 32 - 1), "unsigned": (0, 2 ** 32 - 1),
               "unsigned int": (0, 2 ** 32 - 1), "uint64_t": (0, 2 ** 64 - 1),
               "size_t": (0, 2 ** 64 - 1), "bool": (0, 1)}


class OutputRuleError(ValueError):
    """An output, grid or scalar rule that fails or returns something unusable."""


@dataclass(frozen=True, init=False)
class OutputSpec:
    """The shape and dtype of one output, as an output rule returns them."""
    shape: tuple
    dtype: object

    def __init__(self, shape, dtype):
        if isinstance(shape, int) and not isinstance(shape, bool):
            shape = (shape,)
        if not isinstance(shape, (tuple, list)) or not shape or not all(
                isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n > 0
                for n in shape):
            raise ValueError(f"OutputSpec(shape=...) must be a non-empty tuple of positive "
                             f"ints, got {shape!r}")
        try:
            dtype = dt.from_any(dtype)
        except TypeError as e:
            raise TypeError(f"OutputSpec(dtype=...): {e}") from None
        object.__setattr__(self, "shape", tuple(int(n) for n in shape))
        object.__setattr__(self, "dtype", dtype)


@dataclass(frozen=True)
class TensorSpec:
    """What a rule sees of a tensor: its kernel parameter's name, shape and dtype."""
    name: str
    shape: tuple
    dtype: object

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class Binding:
    """A call's outputs, scalars and grid, from the rules."""
    outputs: tuple        # TensorSpec per output parameter
    scalars: dict
    grid: tuple


class AscendCKernel:
    """What ``pypto.ascend_c_kernel`` returns. ``inputs``/``outputs``: the tensor parameters
    by role, in call order; ``signature``: the parsed ``__global__`` function; ``npu_build``:
    the bisheng build. Call it like ``call_ascend_c``: ``op(a, b, n=...)``."""

    def __init__(self, source, name, outputs, *, inputs=None, dtypes=None, ranks=None, grid=1,
                 scalars=None, target="ascend910b", filename=None):
        self.source, self.filename = declaration.read_source(source, name, filename)
        if not isinstance(name, str) or not name.isidentifier():
            raise TypeError(f"pypto.ascend_c_kernel(name=...) must be the C++ name of the "
                            f"__global__ function, got {name!r}")
        self.name = name
        self.signature = sig_mod.parse(self.source, name)
        self.target = get_target(target)
        self._rule = outputs
        self._grid = grid
        self.inputs, self.outputs = declaration.roles(self.signature, inputs, outputs)
        self.dtypes = declaration.declared_dtypes(self.signature, dtypes, self.inputs)
        self.ranks = declaration.declared_ranks(self.signature, ranks)
        self._scalars = declaration.declared_scalars(self.signature, scalars)
        self._kernel = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"<pypto.ascend_c_kernel {self.name}: inputs {self.inputs}, outputs "
                f"{self.outputs}, scalars {[p.name for p in self.signature.scalars]}>")

    def __call__(self, *inputs, **scalars):
        if GRAPH_CALL:
            return GRAPH_CALL[0](self, list(inputs), **scalars)
        return self.run(list(inputs), scalars)

    # -- checking a call ---------------------------------------------------------------------
    def check_inputs(self, shapes_dtypes: list, where: str) -> list[TensorSpec]:
        """``TensorSpec``s of the inputs ((shape, dtype) each), or a ``TypeError``/
        ``ValueError`` naming the argument."""
        if len(shapes_dtypes) != len(self.inputs):
            raise TypeError(f"{where}: {self.name} takes {len(self.inputs)} input(s) "
                            f"({', '.join(self.inputs)}), got {len(shapes_dtypes)}")
        specs = []
        for k, (pname, (shape, dtype)) in enumerate(zip(self.inputs, shapes_dtypes)):
            want = self.dtypes[pname]
            if dtype != want:
                raise TypeError(f"{where}: input {pname!r} (inputs[{k}]) must be {want} (the "
                                f"kernel's `{self.signature.param(pname).text}`), got {dtype}")
            rank = self.ranks.get(pname)
            if rank is not None and len(shape) != rank:
                raise ValueError(f"{where}: input {pname!r} (inputs[{k}]) must have rank "
                                 f"{rank}, got shape {tuple(shape)}")
            specs.append(TensorSpec(pname, tuple(int(n) for n in shape), dtype))
        return specs

    def bind(self, specs: list[TensorSpec], given_scalars: dict, where: str) -> Binding:
        """The outputs, scalars and grid of a call on inputs ``specs``."""
        return Binding(tuple(self._output_specs(specs)), self._scalar_values(specs, given_scalars,
                                                                             where),
                       self._grid_of(specs))

    def _output_specs(self, specs) -> list[TensorSpec]:
        rule = self._rule
        result = _apply(rule, specs, f"{self.name}'s output rule (outputs=)") if callable(rule) \
            else rule
        result = list(result) if isinstance(result, (list, tuple)) else [result]
        if len(result) != len(self.outputs) or not all(isinstance(r, OutputSpec) for r in result):
            got = ", ".join(type(r).__name__ for r in result)
            raise OutputRuleError(f"ascend_c_kernel {self.name}: the output rule (outputs=) must "
                                  f"give {len(self.outputs)} pypto.OutputSpec (one per output "
                                  f"parameter {', '.join(self.outputs)}), got [{got}]")
        out = []
        for pname, r in zip(self.outputs, result):
            declared = self.signature.param(pname).dtype
            if declared is not None and r.dtype != declared:
                raise OutputRuleError(f"ascend_c_kernel {self.name}: the output rule gives "
                                      f"{pname!r} dtype {r.dtype}, but the kernel declares "
                                      f"`{self.signature.param(pname).text}` ({declared})")
            rank = self.ranks.get(pname)
            if rank is not None and len(r.shape) != rank:
                raise OutputRuleError(f"ascend_c_kernel {self.name}: the output rule gives "
                                      f"{pname!r} shape {r.shape}, but ranks= says rank {rank}")
            out.append(TensorSpec(pname, r.shape, r.dtype))
        return out

    def _scalar_values(self, specs, given: dict, where: str) -> dict:
        params = {p.name: p for p in self.signature.scalars}
        unknown = sorted(set(given) - set(params))
        if unknown:
            raise TypeError(f"{where}: {self.name} has no scalar parameter(s) "
                            f"{', '.join(unknown)}; its scalars are {list(params) or 'none'}")
        values = {}
        for pname, p in params.items():
            if pname in given:
                value = given[pname]
            elif pname in self._scalars:
                value = self._scalars[pname]
                if callable(value):
                    value = _apply(value, specs, f"{self.name}'s rule for scalar {pname!r}")
            else:
                raise TypeError(f"{where}: scalar parameter {pname!r} (`{p.text}`) of "
                                f"{self.name} has no value: pass {pname}=... or declare "
                                f"scalars={{{pname!r}: lambda *inputs: ...}}")
            values[pname] = _scalar(value, p, where)
        return values

    def _grid_of(self, specs) -> tuple:
        grid = self._grid
        if callable(grid):
            grid = _apply(grid, specs, f"{self.name}'s grid rule (grid=)")
        if isinstance(grid, (int, np.integer)) and not isinstance(grid, bool):
            grid = (int(grid),)
        if not isinstance(grid, (tuple, list)) or not 1 <= len(grid) <= 3 or not all(
                isinstance(g, (int, np.integer)) and not isinstance(g, bool) and g > 0
                for g in grid):
            raise OutputRuleError(f"ascend_c_kernel {self.name}: the grid (grid=) must be a "
                                  f"positive int or a tuple of 1-3 positive ints, got {grid!r}")
        return tuple(int(g) for g in grid)

    # -- running -------------------------------------------------------------------------------
    def build(self):
        """The kernel built for pto-isa's CPU simulator (from the disk cache, or compiled now;
        once per process)."""
        with self._lock:
            if self._kernel is None:
                self._kernel = library.load(self.source, self.name, self.filename,
                                            self.signature, self.target.vector_cores)
            return self._kernel

    def run(self, inputs: list, scalars: dict):
        """Run now on arrays (numpy, torch CPU, pypto.Tensor): the output(s) come back as the
        inputs' kind (``pypto.call_ascend_c`` on arrays)."""
        where = f"pypto.call_ascend_c({self.name})"
        arrays = []
        for k, x in enumerate(inputs):
            a = argument_array(x, f"{where}: inputs[{k}]")
            if a is None:
                raise TypeError(f"{where}: inputs[{k}] must be an array (numpy, a torch CPU "
                                f"tensor or a pypto.Tensor), got {type(x).__name__}")
            arrays.append(a)
        specs = self.check_inputs([(a.shape, _dtype(a, where, k)) for k, a in enumerate(arrays)],
                                  where)
        binding = self.bind(specs, scalars, where)
        outs = [np.zeros(s.shape, s.dtype.to_numpy()) for s in binding.outputs]
        self.launch(arrays, outs, binding)
        results = [_like(inputs, o) for o in outs]
        return results[0] if len(results) == 1 else tuple(results)

    def launch(self, inputs: list, outputs: list, binding: Binding) -> None:
        """Run on numpy ``inputs`` (in ``self.inputs`` order), writing ``outputs``."""
        if any(s.dtype == dt.bfloat16 for s in binding.outputs) or any(
                self.dtypes[n] == dt.bfloat16 for n in self.inputs):
            raise NotOnSimulator(f"{self.name}: bfloat16 tensors cannot run on pto-isa's CPU "
                                 "simulator, whose bfloat16_t is float16 (pto-isa "
                                 "include/pto/common/type.hpp)")
        kernel = self.build()
        args = {n: np.ascontiguousarray(a) for n, a in zip(self.inputs, inputs)}
        staged = [o if o.flags.c_contiguous and o.flags.writeable else np.empty_like(o, order="C")
                  for o in outputs]
        args.update(zip(self.outputs, staged))
        args.update(binding.scalars)
        t0 = time.perf_counter()
        kernel.launch(binding.grid, args)
        if hooks.ACTIVE:
            hooks.record(hooks.Launch(self.name, binding.grid, (time.perf_counter() - t0) * 1e3,
                                      None, {}, "ascend-c", NO_MODEL))
        for o, s in zip(outputs, staged):
            if o is not s:
                o[...] = s

    # -- the NPU target ------------------------------------------------------------------------
    @property
    def npu_build(self) -> npu.NpuBuild:
        """How bisheng would build this kernel for the target (recorded, not run here)."""
        try:
            headers = library.toolchain.find_headers()
        except library.toolchain.ToolMissing:
            headers = None
        source = self.filename if os.path.isfile(self.filename) else f"{self.name}.cpp"
        return npu.build(self.signature, self.target, headers, source)

    def npu_launch(self, *inputs, **scalars) -> npu.NpuLaunch:
        """The NPU launch of a call on ``inputs`` (arrays, graph tensors or TensorSpecs)."""
        where = f"{self.name}.npu_launch"
        specs = self.check_inputs([_shape_dtype(x, f"inputs[{k}]", where)
                                   for k, x in enumerate(inputs)], where)
        binding = self.bind(specs, scalars, where)
        roles = {**{n: "input" for n in self.inputs}, **{n: "output" for n in self.outputs}}
        every = {s.name: s for s in list(specs) + list(binding.outputs)}
        return npu.launch(self.signature, math.prod(binding.grid), roles, every, binding.scalars)


def ascend_c_kernel(source, name, outputs, **options) -> AscendCKernel:
    """Declare an Ascend C kernel: ``source`` (C++ text, or a path to a .cpp file) defines
    ``__global__ AICORE void <name>(...)``; ``outputs`` is a rule (or fixed ``OutputSpec``s).
    Options: ``inputs``, ``dtypes``, ``ranks``, ``grid``, ``scalars``, ``target``, ``filename``
    (docs/ascend_c.md)."""
    return AscendCKernel(source, name, outputs, **options)


def _dtype(array, where, k):
    try:
        return dt.from_any(array.dtype)
    except TypeError as e:
        raise TypeError(f"{where}: inputs[{k}]: {e}") from None


def _like(inputs, array):
    """The output as the inputs' kind: torch if any input is torch, pypto.Tensor if any is."""
    if any(type(x).__module__.startswith("torch") for x in inputs):
        import torch  # lazy: torch loads only when a caller passes torch tensors
        return torch.from_numpy(array)
    if any(isinstance(x, Tensor) for x in inputs):
        return Tensor.from_numpy(array)
    return array


def _shape_dtype(x, name, where):
    if isinstance(x, TensorSpec) or hasattr(x, "graph"):
        return (x.shape, x.dtype)
    a = argument_array(x, f"{where}: {name}")
    if a is None:
        raise TypeError(f"{where}: {name} must be an array, a graph tensor or a TensorSpec, "
                        f"got {type(x).__name__}")
    return (a.shape, _dtype(a, where, name))


def _apply(rule, specs, what):
    try:
        return rule(*specs)
    except Exception as e:  # noqa: BLE001 - the user's rule: say which one failed
        raise OutputRuleError(f"{what} failed on inputs "
                              f"{', '.join(f'{s.name}={s.dtype}{list(s.shape)}' for s in specs)}: "
                              f"{type(e).__name__}: {e}") from e


def _scalar(value, p, where):
    if isinstance(value, (bool, np.bool_)) and p.cxx != "bool":
        raise TypeError(f"{where}: scalar {p.name!r} (`{p.text}`) takes a number, got {value!r}")
    if p.kind == "int":
        if not isinstance(value, (int, np.integer)):
            raise TypeError(f"{where}: scalar {p.name!r} (`{p.text}`) takes an int, got "
                            f"{value!r}")
        low, high = _INT_RANGES.get(p.cxx, (-2 ** 63, 2 ** 63 - 1))
        if not low <= int(value) <= high:
            raise ValueError(f"{where}: scalar {p.name!r} (`{p.text}`) holds {low}..{high}, "
                             f"got {int(value)}")
        return int(value)
    if not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{where}: scalar {p.name!r} (`{p.text}`) takes a float, got {value!r}")
    return float(value)


