"""Memory analysis of a compiled kernel: on-chip buffers at their peak, global memory of a
launch, and how much of the allocated on-chip space holds data.

::

    report = pypto.memory.analyze(kernel, x, y, out, n, grid=(48,), BLOCK=1024)  # no compile
    report.plan.peak_tiles["UB"]  # the tiles alive at the UB's peak (type, bytes, lines)
    report.fits                 # False: a BudgetReport, report.proposal the constexprs that fit
    report = pypto.memory.analyze(graph)     # a TensorGraph: every kernel pypto.compile makes
    report.peak_memory          # 12544 (bytes per core), also report.peak_memory["UB"]
    report.global_memory        # bytes of global memory the launch touches at once
    report.efficiency           # percent of allocated on-chip bytes that hold tile data
    print(report)

Every figure is static, read from what the compiler decided (``compiled.metadata
["buffer_bytes"]``, the PTO program's tiles) and the arguments' sizes: nothing is run. For a
jit kernel nothing is compiled either: the report comes from the compiler's passes up to the
PTO program, and a kernel that overflows gets a ``BudgetReport`` (``report.fits`` False,
``report.proposal`` the constexprs that fit) rather than an error; ``budget`` is the faster
check of the Tile IR plan alone.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ..compiler.ast_to_ir import build_function
from ..backends.ascend.compile import program_metadata
from ..compiler.pipeline import build_program, plan_layout, with_fitting_sizes
from ..compiler.pto import TensorArg
from ..errors import BufferOverflow
from ..graph import Module, TensorGraph, compile as compile_graph
from ..layout import as_array
from ..runtime.device import current_target
from ..runtime.hooks import pto_program
from ..runtime.jit import JITFunction
from ..runtime.kernel import CompiledKernel
from ..runtime.specialize import spec_key, specialise
from ..target import get_target

__all__ = ["analyze", "budget", "BudgetReport", "MemoryReport", "GraphMemoryReport",
           "PeakMemory", "BUFFER_NAMES"]

# PTO location -> the buffer's name on the AI Core
BUFFER_NAMES = {"vec": "UB", "mat": "L1", "left": "L0A", "right": "L0B", "acc": "L0C",
                "bias": "BT"}


class PeakMemory(int):
    """On-chip bytes at peak, per core: the int is the total over every buffer (so
    ``peak_memory / 1e6`` is MB, as in the seed), and it reads like a dict of buffer name
    (UB, L1, L0A, L0B, L0C, BT) → bytes."""

    def __new__(cls, per_buffer: dict):
        self = super().__new__(cls, sum(per_buffer.values()))
        self._buffers = dict(per_buffer)
        return self

    def __getitem__(self, buffer):
        return self._buffers[buffer]

    def __iter__(self):
        return iter(self._buffers)

    def __len__(self):
        return len(self._buffers)

    def __contains__(self, buffer):
        return buffer in self._buffers

    def keys(self):
        return self._buffers.keys()

    def values(self):
        return self._buffers.values()

    def items(self):
        return self._buffers.items()

    def get(self, buffer, default=None):
        return self._buffers.get(buffer, default)

    def as_dict(self) -> dict:
        return dict(self._buffers)

    def __repr__(self) -> str:
        parts = ", ".join(f"{k}={v}" for k, v in self._buffers.items())
        return f"PeakMemory({int(self)} bytes: {parts})"


Mapping.register(PeakMemory)


class MemoryReport:
    """What ``analyze`` found.

    * ``peak_memory``: on-chip bytes of one core at peak, per buffer (``PeakMemory``: an int,
      the total, that indexes like a dict). It is the memory planner's high-water mark of each
      buffer (plus double buffering's ping/pong space), the space the kernel needs reserved.
    * ``capacity``: each buffer's size on the target; ``utilization``: peak / capacity.
    * ``global_memory``: bytes of global memory (HBM) the launch uses at once: the tensor
      arguments' ``nbytes`` (an array passed twice counts once) plus the GM workspace of a
      cube/vector kernel (one slot per core running a block). ``global_breakdown`` names
      each part.
    * ``efficiency``: in percent, useful bytes over allocated bytes on chip, where *allocated*
      is the sum of the buffers' high-water marks (``peak_memory``) and *useful* is, per
      buffer, the number of bytes covered by at least one tile's elements (the union over the
      program's tiles of ``[addr, addr + rows * cols * itemsize)``). What is lost is alignment
      and cube fractal padding between tiles and holes the planner left; tiles sharing space
      at different times are not waste. 100.0 when nothing is allocated. Ragged edges (a
      tile's valid region smaller than its shape) are not counted as waste: the tile's shape
      is what the kernel asked for. ``useful_bytes`` gives the per-buffer numerator.
    """

    fits, error, proposal = True, None, None     # as a BudgetReport's: it fits
    plan = None         # analyze(jit_fn, ...): the BudgetReport of the Tile IR plan

    def __init__(self, name, target, peak, capacity, useful, global_breakdown, grid, cores):
        self.kernel = name
        self.target = target
        self.peak_memory = PeakMemory(peak)
        self.capacity = dict(capacity)
        self.utilization = {b: (peak[b] / capacity[b] if capacity[b] else 0.0) for b in peak}
        self.useful_bytes = dict(useful)
        self.global_breakdown = dict(global_breakdown)
        self.global_memory = sum(global_breakdown.values())
        self.grid = grid
        self.cores = cores
        allocated = int(self.peak_memory)
        self.efficiency = 100.0 * sum(useful.values()) / allocated if allocated else 100.0

    def summary(self) -> str:
        grid = f", grid {self.grid}" if self.grid is not None else ""
        lines = [f"memory of {self.kernel} on {self.target}{grid} (static analysis)",
                 f"{'buffer':<6} {'peak bytes':>11} {'capacity':>10} {'used':>7} "
                 f"{'useful bytes':>13}"]
        for b, peak in self.peak_memory.items():
            lines.append(f"{b:<6} {peak:>11} {self.capacity[b]:>10} "
                         f"{self.utilization[b]:>7.1%} {self.useful_bytes.get(b, 0):>13}")
        lines.append(f"on-chip peak per core: {int(self.peak_memory)} bytes "
                     f"({int(self.peak_memory) / 1024:.1f} KiB); efficiency "
                     f"{self.efficiency:.1f}% (useful / allocated on-chip bytes)")
        parts = ", ".join(f"{k} {v}" for k, v in self.global_breakdown.items())
        lines.append(f"global memory of the launch: {self.global_memory} bytes "
                     f"({self.global_memory / 2**20:.3f} MiB): {parts or 'none'}")
        if self.plan is not None:
            lines.append(str(self.plan))
        return "\n".join(lines)

    __str__ = summary

    def __repr__(self) -> str:
        return (f"<MemoryReport {self.kernel}: peak {int(self.peak_memory)} B on chip, "
                f"{self.global_memory} B global, efficiency {self.efficiency:.1f}%>")


def analyze(kernel_or_compiled, *args, grid=None, **kwargs):
    """Memory report of a kernel: ``analyze(jit_fn, *args, grid=..., **kwargs)`` explains the
    specialisation those arguments select *before* it is compiled: its Tile IR plan
    (``budget``'s: the tiles, their sizes, those alive at each buffer's peak, as
    ``report.plan``), then the PTO program built without code generation (double buffering
    included); an overflow returns that plan's ``BudgetReport`` (``fits`` False, the tiles
    alive when the buffer ran out, ``proposal``) instead of raising;
    ``analyze(compiled)`` reads a ``CompiledKernel`` (arguments optional: without them the
    tensors' sizes come from the program's static shapes). ``grid`` (default: as a launch
    would choose) decides how many GM workspace slots a cube/vector kernel uses."""
    if isinstance(kernel_or_compiled, (TensorGraph, Module)):
        if args or kwargs or grid is not None:
            raise TypeError("pypto.memory.analyze(graph) takes no other arguments: the "
                            "placeholders give the shapes and each kernel has its own grid")
        return _analyze_graph(kernel_or_compiled)
    bound = None
    if isinstance(kernel_or_compiled, JITFunction):
        return _analyze_source(kernel_or_compiled, args, kwargs, grid)
    if isinstance(kernel_or_compiled, CompiledKernel):
        compiled = kernel_or_compiled
        target = get_target(compiled.metadata["target"])
        if args or kwargs:
            names = [name for name, _, _ in compiled.runtime_params]
            bound = dict(zip(names, args))
            bound.update(kwargs)
        if grid is not None:
            grid = (int(grid),) if isinstance(grid, (int, np.integer)) else tuple(grid)
    else:
        raise TypeError("pypto.memory.analyze takes a @pypto.jit kernel (with its arguments), "
                        "a CompiledKernel, a pypto.TensorGraph or a compiled graph Module, not "
                        f"{type(kernel_or_compiled).__name__}")

    return _report(pto_program(compiled), compiled.metadata, target, bound, grid)


def _analyze_source(jitfn, args, kwargs, grid):
    """``analyze(jit_fn, ...)``: the plan first (``budget``'s); when it fits, the PTO program
    built without generating code (nothing compiled for real, nothing cached) gives the
    report, the plan kept as ``report.plan``; when it does not, the plan's report itself."""
    kernel = _Specialised(jitfn, args, kwargs)
    plan = kernel.plan()
    if not plan.fits:
        return plan
    def make():
        return build_function(jitfn.source, kernel.spec_args, jitfn.source.node.name)
    _, program, _ = build_program(make(), kernel.tensor_specs, kernel.target, jitfn.auto_sync,
                                  fresh=make)
    metadata = program_metadata(program, [], "")
    grid = jitfn._grid(grid, kernel.bound, metadata, kernel.target)
    report = _report(program, metadata, kernel.target, kernel.bound, grid)
    report.plan = plan
    return report


def _report(program, metadata: dict, target, bound, grid) -> MemoryReport:
    """The memory report of a PTO program (its tiles and buffer high-water marks) launched
    on ``grid`` with the ``bound`` arguments (None: the program's static shapes)."""
    buffer_bytes = metadata["buffer_bytes"]
    peak, capacity, useful = {}, {}, {}
    for loc, name in BUFFER_NAMES.items():
        if loc not in target.buffers:
            continue
        peak[name] = int(buffer_bytes.get(loc, 0))
        capacity[name] = int(target.buffers[loc])
        useful[name] = _union_bytes([(t.addr, t.addr + t.rows * t.cols * t.dtype.itemsize)
                                     for t in program.tiles if t.loc == loc])
    cores = metadata.get("cores") or target.cores_for(metadata["uses_cube"])
    running = min(math.prod(grid), cores) if grid is not None else cores
    return MemoryReport(metadata["name"], target.name, peak, capacity, useful,
                        _global_bytes(program, bound, running), grid, cores)


def _union_bytes(intervals) -> int:
    total, end = 0, None
    for lo, hi in sorted(intervals):
        if end is None or lo >= end:
            total += hi - lo
            end = hi
        elif hi > end:
            total += hi - end
            end = hi
    return total


def _global_bytes(program, bound, running_blocks) -> dict:
    out, seen = {}, set()
    for p in program.params:
        if not isinstance(p, TensorArg):
            continue
        if p.workspace:
            if all(isinstance(d, int) for d in p.dims):
                out["workspace"] = out.get("workspace", 0) + \
                    math.prod(p.dims) * p.dtype.itemsize * running_blocks
            continue
        value = bound.get(p.name) if bound is not None else None
        value = as_array(value) if value is not None else None
        if value is not None:
            key = (value.__array_interface__["data"][0], value.nbytes)
            out[p.name] = 0 if key in seen else int(value.nbytes)
            seen.add(key)
        elif all(isinstance(d, int) for d in p.dims):
            out[p.name] = math.prod(p.dims) * p.dtype.itemsize
    return out


class GraphMemoryReport:
    """``analyze(graph)``: the memory of every kernel a graph compiles to (``kernels``, one
    ``MemoryReport`` each, with the grid ``Module.run`` launches). The kernels run one after
    another, so ``peak_memory`` is that of the kernel with the largest on-chip total (with its
    ``capacity`` and ``utilization``); ``efficiency`` is useful over allocated on-chip bytes
    summed over the kernels; ``global_memory`` is the bytes of every graph tensor that exists
    in global memory during a run (placeholders, intermediates, outputs; fused intermediates
    never reach it), named in ``global_breakdown``."""

    def __init__(self, module, reports):
        self.graph = module.graph.name
        self.target = module.target.name
        self.kernels = reports
        peak = max(reports, key=lambda r: int(r.peak_memory))
        self.peak_kernel = peak.kernel
        self.peak_memory = peak.peak_memory
        self.capacity = peak.capacity
        self.utilization = peak.utilization
        allocated = sum(int(r.peak_memory) for r in reports)
        useful = sum(sum(r.useful_bytes.values()) for r in reports)
        self.efficiency = 100.0 * useful / allocated if allocated else 100.0
        tensors = list(module.placeholders) + [t for s in module.steps for t in s.outputs]
        self.global_breakdown = {t.name: math.prod(t.shape) * t.dtype.itemsize for t in tensors}
        workspace = sum(r.global_breakdown.get("workspace", 0) for r in reports)
        if workspace:
            self.global_breakdown["workspace"] = workspace
        self.global_memory = sum(self.global_breakdown.values())

    def summary(self) -> str:
        lines = [f"memory of graph {self.graph} on {self.target}: {len(self.kernels)} "
                 f"kernel(s), run one after another (static analysis)"]
        for r in self.kernels:
            lines.append(f"  {r.kernel}: grid {r.grid}, on-chip peak {int(r.peak_memory)} "
                         f"bytes per core ({', '.join(f'{b} {v}' for b, v in r.peak_memory.items() if v)}), "
                         f"efficiency {r.efficiency:.1f}%")
        lines.append(f"on-chip peak per core: {int(self.peak_memory)} bytes "
                     f"({self.peak_kernel}); efficiency {self.efficiency:.1f}% (useful / "
                     "allocated on-chip bytes, all kernels)")
        parts = ", ".join(f"{k} {v}" for k, v in self.global_breakdown.items())
        lines.append(f"global memory of a run: {self.global_memory} bytes "
                     f"({self.global_memory / 2**20:.3f} MiB): {parts}")
        return "\n".join(lines)

    __str__ = summary

    def __repr__(self) -> str:
        return (f"<GraphMemoryReport {self.graph}: peak {int(self.peak_memory)} B on chip, "
                f"{self.global_memory} B global, efficiency {self.efficiency:.1f}%>")


def _analyze_graph(graph_or_module) -> GraphMemoryReport:
    """Compile the graph for the current target (or read a compiled Module) and analyse
    each kernel with its launch grid; nothing runs."""
    module = graph_or_module if isinstance(graph_or_module, Module) else \
        compile_graph(graph_or_module, target=current_target().name)
    reports = [analyze(k.compiled, grid=k.grid) for k in module.kernels]
    if not reports:
        raise ValueError(f"pypto.memory.analyze: graph {module.graph.name!r} has no generated "
                         "kernels, only Ascend C calls, whose on-chip memory is the C++'s own "
                         "(TASSIGN addresses) and not planned by PyPTO")
    return GraphMemoryReport(module, reports)


class BudgetReport:
    """The on-chip plan of a kernel before code generation (``budget``; ``analyze`` when it
    does not fit): ``fits``; ``buffers`` {buffer name: (bytes planned, capacity)};
    ``tiles`` {buffer name: the tiles placed there (``PlacedTile``: type, bytes, offset,
    lifetime, source lines)}; ``peak_tiles`` {buffer name: the tiles alive when its high-water
    mark was reached, or, for the buffer that overflowed, when it ran out}; ``error`` (the
    overflow) and ``proposal`` (its constexpr values that fit, the others as given)."""

    def __init__(self, kernel: str, target: str, buffers: dict, tiles: dict, error=None):
        self.kernel, self.target, self.buffers, self.error = kernel, target, buffers, error
        self.tiles = tiles
        self.peak_tiles = {name: _alive_at_peak(t) for name, t in tiles.items() if t}
        if error is not None:
            self.peak_tiles = {BUFFER_NAMES.get(error.space, error.space):
                               list(getattr(error, "alive", []))}

    @property
    def fits(self) -> bool:
        return self.error is None

    @property
    def proposal(self):
        return getattr(self.error, "proposal", None)

    def __str__(self) -> str:
        head = f"{self.kernel} on {self.target}: on-chip plan before code generation"
        if self.error is not None:
            return f"{head}: does not fit\n{self.error.message}"
        lines = [head + " (with double buffering's second buffers where they fit; where they "
                        "do not, double buffering may add them above)"]
        for name, (used, capacity) in self.buffers.items():
            if used:
                lines.append(f"  {name:<4} {used:>8,} of {capacity:>8,} bytes "
                             f"({used / capacity:.0%}), {capacity - used:,} free; at its peak:")
                lines += [f"         {t.type} ({t.bytes:,} bytes) from {t.source}"
                          for t in self.peak_tiles[name]]
        return "\n".join(lines)


def _alive_at_peak(tiles: list) -> list:
    """The tiles whose lifetime overlaps that of the one placed highest in the buffer."""
    top = max(tiles, key=lambda t: t.offset + t.bytes)
    return sorted((t for t in tiles if t.alive_with(top)), key=lambda t: -t.bytes)


class _Specialised:
    """A jit kernel bound to arguments: its constexprs, tensor specs and target, as a launch
    would specialise it."""

    def __init__(self, jitfn, args, kwargs):
        self.jitfn = jitfn
        self.bound = jitfn._bind(args, kwargs)
        self.spec_args, self.tensor_specs, _ = specialise(jitfn, spec_key(jitfn, self.bound),
                                                          self.bound)
        self.target = jitfn.target()

    def plan(self) -> BudgetReport:
        """The frontend and Tile IR passes only; an overflow is reported, not raised."""
        source, target = self.jitfn.source, self.target
        try:
            used, layout = plan_layout(source, self.spec_args, target)
            error = None
        except BufferOverflow as e:
            used, layout = {}, {}
            error = with_fitting_sizes(e, source, self.spec_args, target)
        spaces = [s for s in target.buffers if s in BUFFER_NAMES]
        return BudgetReport(self.jitfn.__name__, target.name,
                            {BUFFER_NAMES[s]: (used.get(s, 0), target.buffers[s])
                             for s in spaces},
                            {BUFFER_NAMES[s]: list(layout.get(s, [])) for s in spaces}, error)


def budget(kernel, *args, **kwargs) -> BudgetReport:
    """The on-chip budget of ``kernel`` for these arguments *before* it is compiled for real:
    the frontend and Tile IR passes only (no PTO, no LLVM: fast), so a tile size can be
    checked while it is chosen. An overflow is reported, not raised: ``report.error`` names
    the tiles alive at its peak and ``report.proposal`` the constexpr values that would fit.
    ``analyze`` gives the same plan and, when it fits, the PTO program's figures."""
    return _Specialised(kernel, args, kwargs).plan()
