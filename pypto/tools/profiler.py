"""The profiler: every kernel launch while it is active, with two clocks kept apart.

* **host time** (``host_time_ms``): the measured wall time of the launch on this machine, where
  host threads simulate the AI Cores. It says how long *the simulation* took, not the chip.
* **NPU time** (``npu_time_ms``, ``cycles``): what the cycle model
  (``backends/ascend/cycle_model.py``) predicts for the launch on the kernel's target, from the
  kernel's PTO program, the grid and the arguments' shapes and scalar values.

::

    with pypto.Profiler() as prof:
        kernel[grid](x, y, out, n)
    print(prof.summary())
    prof.core_utilization, prof.kernels, prof.tiles
    prof.export_chrome_trace("trace.json")      # Perfetto / chrome://tracing

    p = pypto.profile.Profiler(); p.start(); ...; p.stop(); report = p.report()

    pypto.enable_profiling(); ...; report = pypto.get_profiling_report()
    for op in report.operations: op.name, op.compute_time, op.memory_time

Recording is cheap and the model is lazy: a launch keeps the compiled kernel, the normalised
grid and the runtime arguments' shapes, dtypes and scalar values (never the arrays), and the
model runs when the profile is first read (identical launches are modelled once). The hook in
the generated per-specialisation call (``binder.make_caller``) tests one module-level list,
``ACTIVE``, and does nothing else when no profiler is running. Interpreted launches
(``PYPTO_INTERPRET=1``) are recorded too: after the timed interpretation the kernel is compiled
(not run) so the model has a PTO program to read.
"""
from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Profiler", "ProfileReport", "KernelProfile", "TileProfile", "OperationProfile",
           "enable_profiling", "disable_profiling", "get_profiling_report"]

# The running profilers. The generated launch code reads this list on every launch (one
# truthiness test), so it is mutated in place and never rebound.
ACTIVE: list = []
_lock = threading.Lock()

PIPE_ORDER = ("MTE2", "MTE1", "M", "V", "MTE3", "FIX", "S")
KINDS = ("compute", "memory", "sync")


# -- what a launch leaves behind ------------------------------------------------------------------

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
        self.mode = mode                # "compiled", "pto-isa" or "interpreted"
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
    with _lock:
        cache = kernel.__dict__.setdefault("_pypto_models", {})
        model = cache.get(key)
    if model is not None:
        return model
    from ..backends.ascend.model.launch import model_launch
    from ..target import get_target
    program = pto_program(kernel)
    target = get_target(kernel.metadata["target"])
    model = model_launch(program, grid, args, target)   # TensorSpecs: shape, dtype, strides
    with _lock:
        cache[key] = model
    return model


def pto_program(kernel):
    """The kernel's PTO ``Program``, read back from its ``.pto`` text once and kept."""
    program = kernel.__dict__.get("_pypto_program")
    if program is None:
        from ..target import get_target
        from ..compiler.pto.reader import parse_program
        program = parse_program(kernel.asm["pto"], get_target(kernel.metadata["target"]))
        kernel._pypto_program = program
    return program


def _add(launch: Launch) -> None:
    for prof in list(ACTIVE):
        prof._records.append(launch)


def record_compiled(kernel, grid, values, t0, mode="compiled"):
    """Called by the generated launch code after a launch made while ``ACTIVE`` is non-empty:
    ``values`` are the runtime arguments in ``kernel.runtime_params`` order, ``t0`` the
    ``perf_counter()`` taken just before the native call."""
    host_ms = (time.perf_counter() - t0) * 1e3
    args = {name: _arg_spec(v) for (name, _, _), v in zip(kernel.runtime_params, values)}
    _add(Launch(kernel.metadata["name"], grid, host_ms, kernel, args, mode))


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
    _add(Launch(jitfn.__name__, tuple(grid), host_ms, kernel, args, "interpreted", error))


# -- what a report shows ------------------------------------------------------------------------

@dataclass
class KernelProfile:
    """One launch. ``host_time_ms`` is measured on this machine (host threads simulating the
    cores); ``npu_time_ms``/``cycles`` are modelled for ``target``. ``core_utilization`` is
    busy core-cycles over cores × makespan; ``bound_pipe`` the pipe with the most busy
    cycles. Model fields are None when the launch has no model (see ``error``)."""
    name: str
    grid: tuple
    host_time_ms: float
    npu_time_ms: float | None
    cycles: float | None
    core_utilization: float | None
    target: str | None
    cores: int | None
    blocks: int
    bound_pipe: str | None
    pipe_busy: dict
    mode: str
    kind: str | None = None      # "vector", "cube" or "mixed" (the compiled kernel's kind)
    error: str | None = None
    model: object = field(default=None, repr=False)


@dataclass
class TileProfile:
    """One block of one launch, all times modelled NPU time in ms: ``time_ms`` is the block's
    span on its core; ``compute_time``/``memory_time``/``sync_time`` are the summed durations of
    its compute / memory / sync instructions (pipes overlap, so they may add up to more than
    ``time_ms``). ``flops`` and ``bytes`` are the model's counts for the block."""
    name: str
    kernel: str
    launch: int
    pid: object
    core: int
    start_ms: float
    time_ms: float
    flops: float
    bytes: float
    compute_time: float
    memory_time: float
    sync_time: float


@dataclass
class OperationProfile:
    """One PTO instruction (``tload``, ``tadd``, ``tmatmul``...) over every recorded launch:
    modelled NPU time in ms spent in it as compute, memory transfer or synchronisation, summed
    over its executions on every block."""
    name: str
    pipe: str
    count: int = 0
    compute_time: float = 0.0
    memory_time: float = 0.0
    sync_time: float = 0.0
    flops: float = 0.0
    bytes: float = 0.0

    @property
    def total_time(self) -> float:
        return self.compute_time + self.memory_time + self.sync_time


def _ms_per_cycle(model, target_name) -> float:
    if getattr(model, "cycles", 0) and getattr(model, "time_ms", None) is not None:
        return model.time_ms / model.cycles
    from ..target import get_target
    return 1.0 / (get_target(target_name).clock_ghz * 1e6)


def _busy_core_cycles(model) -> float:
    """Core-cycles the launch's blocks kept their cores busy (first to last instruction)."""
    return sum(b.end - b.start for b in model.blocks)


def _bound_pipe(pipe_busy: dict):
    busy = {p: c for p, c in (pipe_busy or {}).items() if c}
    return max(busy, key=busy.get) if busy else None


def _pid_text(pid, grid=None) -> str:
    """A block id as the launch's grid spells it: "3" in a 1-D grid, "1,2" in a 2-D one."""
    if isinstance(pid, (tuple, list)):
        if grid is not None:
            pid = tuple(pid)[:max(1, len(grid))]
        return ",".join(str(p) for p in pid)
    return str(pid)


class ProfileReport:
    """The launches a profiler recorded, modelled. Read ``kernels``, ``tiles``,
    ``operations``, ``core_utilization``; print ``summary()``; write
    ``export_chrome_trace(path)``."""

    def __init__(self, launches: list):
        self.launches = list(launches)
        self._kernels = None
        self._tiles = None
        self._operations = None

    # -- per launch --
    @property
    def kernels(self) -> list[KernelProfile]:
        if self._kernels is None:
            out = []
            for launch in self.launches:
                model = launch.model
                blocks = math.prod(launch.grid)
                if model is None:
                    out.append(KernelProfile(launch.name, launch.grid, launch.host_time_ms, None,
                                             None, None, launch.target, None, blocks, None, {},
                                             launch.mode, launch.kind, launch.error))
                    continue
                pipe_busy = dict(model.pipe_busy)
                out.append(KernelProfile(
                    launch.name, launch.grid, launch.host_time_ms, model.time_ms, model.cycles,
                    model.core_utilization, launch.target, model.cores, blocks,
                    _bound_pipe(pipe_busy), pipe_busy, launch.mode, launch.kind, None, model))
            self._kernels = out
        return self._kernels

    @property
    def core_utilization(self) -> float:
        """Busy core-cycles over cores × makespan, summed over the modelled launches (0.0 when
        there are none)."""
        busy = total = 0.0
        for k in self.kernels:
            if k.model is not None:
                busy += _busy_core_cycles(k.model)
                total += k.model.cores * k.model.cycles
        return busy / total if total else 0.0

    @property
    def host_time_ms(self) -> float:
        """Measured host wall time of every recorded launch, summed."""
        return sum(k.host_time_ms for k in self.kernels)

    @property
    def npu_time_ms(self) -> float:
        """Modelled NPU time of every modelled launch, summed (launches run one after another)."""
        return sum(k.npu_time_ms for k in self.kernels if k.npu_time_ms is not None)

    # -- per block --
    @property
    def tiles(self) -> list[TileProfile]:
        if self._tiles is None:
            out = []
            for index, k in enumerate(self.kernels):
                if k.model is None:
                    continue
                ms = _ms_per_cycle(k.model, k.target)
                for block in k.model.blocks:
                    kinds = dict.fromkeys(KINDS, 0.0)
                    flops = nbytes = 0.0
                    for r in block.records:
                        kinds[r.kind] = kinds.get(r.kind, 0.0) + (r.end - r.start)
                        flops += r.flops or 0
                        nbytes += r.bytes or 0
                    out.append(TileProfile(
                        f"{k.name}[{_pid_text(block.pid, k.grid)}]", k.name, index, block.pid,
                        block.core, block.start * ms, (block.end - block.start) * ms, flops,
                        nbytes, kinds["compute"] * ms, kinds["memory"] * ms,
                        kinds["sync"] * ms))
            self._tiles = out
        return self._tiles

    # -- per instruction --
    @property
    def operations(self) -> list[OperationProfile]:
        """One entry per PTO instruction name, most modelled time first."""
        if self._operations is None:
            ops: dict[str, OperationProfile] = {}
            for k in self.kernels:
                if k.model is None:
                    continue
                ms = _ms_per_cycle(k.model, k.target)
                for block in k.model.blocks:
                    for r in block.records:
                        op = ops.get(r.name)
                        if op is None:
                            op = ops[r.name] = OperationProfile(r.name, r.pipe)
                        op.count += 1
                        t = (r.end - r.start) * ms
                        if r.kind == "compute":
                            op.compute_time += t
                        elif r.kind == "memory":
                            op.memory_time += t
                        else:
                            op.sync_time += t
                        op.flops += r.flops or 0
                        op.bytes += r.bytes or 0
            self._operations = sorted(ops.values(), key=lambda o: -o.total_time)
        return self._operations

    # -- text --
    def summary(self) -> str:
        kernels = self.kernels
        if not kernels:
            return ("PyPTO profile: no kernel launches recorded (launch kernels inside "
                    "`with pypto.Profiler():` or after pypto.enable_profiling())")
        targets = sorted({k.target for k in kernels if k.target})
        lines = [f"PyPTO profile: {len(kernels)} launch(es)",
                 "  host us = measured wall time of one launch on this machine (host threads "
                 "simulate the cores), mean over its calls",
                 f"  NPU us  = modelled time on {', '.join(targets) or 'the target'} "
                 "(cycle model of the PTO program), not a measurement", ""]
        groups: dict = {}
        for k in kernels:
            groups.setdefault((k.name, k.grid, k.mode), []).append(k)
        header = (f"{'kernel':<24} {'grid':>12} {'calls':>5} {'host us':>10} {'NPU us':>10} "
                  f"{'cycles':>10} {'cores':>5} {'util':>6}  bound by")
        lines += [header, "-" * len(header)]
        for (name, grid, mode), ks in groups.items():
            host = 1e3 * sum(k.host_time_ms for k in ks) / len(ks)
            shown = name + (" (interp)" if mode == "interpreted" else "")
            modelled = [k for k in ks if k.model is not None]
            if not modelled:
                why = ks[0].error or "no model"
                lines.append(f"{shown:<24.24} {str(grid):>12} {len(ks):>5} {host:>10.2f} "
                             f"{'-':>10} {'-':>10} {'-':>5} {'-':>6}  ({why[:60]})")
                continue
            npu = 1e3 * sum(k.npu_time_ms for k in modelled) / len(modelled)
            cyc = sum(k.cycles for k in modelled) / len(modelled)
            busy = sum(_busy_core_cycles(k.model) for k in modelled)
            total = sum(k.model.cores * k.model.cycles for k in modelled)
            util = busy / total if total else 0.0
            pipes: dict = {}
            for k in modelled:
                for p, c in k.pipe_busy.items():
                    pipes[p] = pipes.get(p, 0) + c
            bound = _bound_pipe(pipes)
            bound_text = "-"
            if bound is not None:
                share = pipes[bound] / busy if busy else 0.0
                bound_text = f"{bound} ({share:.0%} of busy block cycles)"
            lines.append(f"{shown:<24.24} {str(grid):>12} {len(ks):>5} {host:>10.2f} "
                         f"{npu:>10.3f} {cyc:>10.0f} {modelled[0].cores:>5} {util:>6.1%}  "
                         f"{bound_text}")
        lines += ["", f"host time total {self.host_time_ms:.4f} ms (measured); NPU time total "
                  f"{self.npu_time_ms:.6f} ms (modelled); core utilization "
                  f"{self.core_utilization:.1%}"]
        ops = self.operations[:8]
        if ops:
            lines += ["", f"{'instruction':<16} {'pipe':>5} {'count':>8} {'compute us':>11} "
                      f"{'memory us':>10} {'sync us':>9}  (modelled, summed over blocks)"]
            for o in ops:
                lines.append(f"{o.name:<16} {o.pipe:>5} {o.count:>8} {1e3 * o.compute_time:>11.3f} "
                             f"{1e3 * o.memory_time:>10.3f} {1e3 * o.sync_time:>9.3f}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    # -- trace --
    def chrome_trace(self) -> dict:
        """The Chrome trace event dict ``export_chrome_trace`` writes: one process per core
        (``pid`` = the index of a vector core, ``CUBE_PID_BASE`` + the index of a cube core; a
        mixed kernel's cluster n shows as AIC core n and AIV core n), one thread per pipe (``tid`` = 1 + the pipe's index
        in MTE2, MTE1, M, V, MTE3, FIX, S, named by ``thread_name`` metadata), one complete
        ("X") event per modelled instruction with ``ts``/``dur`` in microseconds of modelled
        NPU time. Launches are laid end to end in the order they were made."""
        events, processes, tracks = [], {}, set()
        offset_us = 0.0
        for index, k in enumerate(self.kernels):
            if k.model is None:
                continue
            us = _ms_per_cycle(k.model, k.target) * 1e3
            for block in k.model.blocks:
                block_text = _pid_text(block.pid, k.grid)
                for r in block.records:
                    pid, label = _process(block.core, k.kind, getattr(r, "part", None))
                    processes.setdefault(pid, label)
                    tracks.add((pid, r.pipe))
                    events.append({
                        "name": r.name, "cat": r.kind, "ph": "X", "pid": pid,
                        "tid": _tid(r.pipe), "ts": offset_us + r.start * us,
                        "dur": max(0.0, (r.end - r.start) * us),
                        "args": {"kernel": k.name, "launch": index, "block": block_text,
                                 "pipe": r.pipe, "cycles": r.end - r.start,
                                 "flops": r.flops, "bytes": r.bytes}})
            offset_us += k.model.cycles * us
        meta = []
        for pid, label in sorted(processes.items()):
            meta.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                         "args": {"name": label}})
            meta.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
                         "args": {"sort_index": pid}})
        for pid, pipe in sorted(tracks, key=lambda t: (t[0], _tid(t[1]))):
            meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": _tid(pipe),
                         "args": {"name": pipe}})
            meta.append({"name": "thread_sort_index", "ph": "M", "pid": pid,
                         "tid": _tid(pipe), "args": {"sort_index": _tid(pipe)}})
        return {"traceEvents": meta + events, "displayTimeUnit": "ns",
                "otherData": {"source": "PyPTO cycle model (modelled NPU time, not measured)",
                              "targets": sorted({k.target for k in self.kernels
                                                 if k.target})}}

    def export_chrome_trace(self, path) -> str:
        """Write ``chrome_trace()`` as JSON to ``path`` (open it in ui.perfetto.dev or
        chrome://tracing); returns the path."""
        with open(path, "w") as f:
            json.dump(self.chrome_trace(), f)
        return str(path)


CUBE_PID_BASE = 1000      # trace pid of cube core n (AIC): base + n; vector core n (AIV): n


def _process(core: int, kind: str | None, part: str | None) -> tuple[int, str]:
    """(trace pid, process name) of the core a record ran on: ``part`` is the program part
    ("cube" or "vector"); a mixed kernel's cluster ``core`` has one of each."""
    if part is None:
        part = "cube" if kind == "cube" else "vector"
    if part == "cube":
        return CUBE_PID_BASE + core, f"AIC core {core}"
    return core, f"AIV core {core}"


def _tid(pipe: str) -> int:
    return 1 + (PIPE_ORDER.index(pipe) if pipe in PIPE_ORDER else len(PIPE_ORDER))


# -- the profiler ---------------------------------------------------------------------------------

class Profiler:
    """Records every kernel launch between ``start()`` and ``stop()`` (or inside ``with``).
    Its attributes read the current report: ``kernels``, ``tiles``, ``operations``,
    ``core_utilization``, ``summary()``, ``export_chrome_trace(path)``."""

    def __init__(self):
        self._records: list = []
        self._report = None

    # -- lifetime --
    def start(self) -> "Profiler":
        with _lock:
            if not any(p is self for p in ACTIVE):
                ACTIVE.append(self)
        return self

    def stop(self) -> "Profiler":
        with _lock:
            for i, p in enumerate(ACTIVE):
                if p is self:
                    del ACTIVE[i]
                    break
        return self

    @property
    def active(self) -> bool:
        return any(p is self for p in ACTIVE)

    def __enter__(self) -> "Profiler":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def clear(self) -> None:
        self._records.clear()
        self._report = None

    # -- reading --
    def report(self) -> ProfileReport:
        """The recorded launches so far, modelled (kept until a new launch is recorded)."""
        if self._report is None or len(self._report.launches) != len(self._records):
            self._report = ProfileReport(self._records)
        return self._report

    @property
    def kernels(self) -> list[KernelProfile]:
        return self.report().kernels

    @property
    def tiles(self) -> list[TileProfile]:
        return self.report().tiles

    @property
    def operations(self) -> list[OperationProfile]:
        return self.report().operations

    @property
    def core_utilization(self) -> float:
        return self.report().core_utilization

    def summary(self) -> str:
        return self.report().summary()

    def export_chrome_trace(self, path) -> str:
        return self.report().export_chrome_trace(path)

    def __repr__(self) -> str:
        state = "active" if self.active else "stopped"
        return f"<pypto.Profiler {state}, {len(self._records)} launch(es)>"


# -- the seed's module-level API --------------------------------------------------------------

_global: Profiler | None = None


def enable_profiling() -> Profiler:
    """Start recording every launch into the module-level profiler (a fresh one unless it is
    already enabled); read it with ``get_profiling_report()``."""
    global _global
    if _global is None or not _global.active:
        _global = Profiler()
    return _global.start()


def disable_profiling() -> None:
    """Stop recording; ``get_profiling_report()`` still returns what was recorded."""
    if _global is not None:
        _global.stop()


def get_profiling_report() -> ProfileReport:
    """The report of the launches since ``enable_profiling()`` (empty if it was never
    called): ``summary()``, ``operations`` (``name``, ``compute_time``, ``memory_time`` in ms
    of modelled NPU time), ``kernels``, ``tiles``, ``core_utilization``."""
    return _global.report() if _global is not None else ProfileReport([])


# -- a graph's modelled MPMD run (graph/npu_model.py) ---------------------------------------------

TASK_TID = 100            # the task lane of a core, above its pipes


def task_chrome_trace(model) -> dict:
    """The Chrome trace of a ``task_model.DagModel``: per core (pids as for launches), one
    "tasks" thread with an event per task (named by its task label, category = its node, so
    the viewer colours nodes apart) and one thread per pipe with the task's instructions."""
    us = 1 / (model.target.clock_ghz * 1e3)
    events, processes, tracks = [], {}, set()
    for p in model.placed:
        for kind, core in p.cores:
            pid, label = _process(core, kind, kind)
            processes.setdefault(pid, label)
            tracks.add((pid, TASK_TID, "tasks"))
            events.append({"name": p.spec.label, "cat": p.spec.node, "ph": "X", "pid": pid,
                           "tid": TASK_TID, "ts": p.start * us,
                           "dur": max(0.0, (p.end - p.start) * us),
                           "args": {"node": p.spec.node, "ready_us": p.ready * us,
                                    "waited_us": (p.dispatched - p.ready) * us,
                                    "dispatch_us": (p.start - p.dispatched) * us}})
        if p.trace is None:
            continue
        offset = getattr(p.trace, "offset", 0.0)
        for r in p.trace.records:
            kind = r.part if p.spec.unit == "mixed" else p.spec.unit
            core = next((c for k, c in p.cores if k == kind), p.cores[0][1])
            pid, _ = _process(core, kind, kind)
            tracks.add((pid, _tid(r.pipe), r.pipe))
            events.append({"name": r.name, "cat": r.kind, "ph": "X", "pid": pid,
                           "tid": _tid(r.pipe), "ts": (r.start + offset) * us,
                           "dur": max(0.0, (r.end - r.start) * us),
                           "args": {"task": p.spec.label, "pipe": r.pipe}})
    meta = []
    for pid, label in sorted(processes.items()):
        meta.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                     "args": {"name": label}})
    for pid, tid, name in sorted(tracks):
        meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                     "args": {"name": name}})
    return {"traceEvents": meta + events, "displayTimeUnit": "ns",
            "otherData": {"source": f"PyPTO cycle model, {model.strategy} schedule of a graph "
                          "(modelled NPU time, not measured)", "targets": [model.target.name]}}
