"""What a profile shows: per launch, per block and per PTO instruction, with two clocks apart.

* **host time** (``host_time_ms``): the measured wall time of the launch on this machine, where
  host threads simulate the AI Cores. It says how long *the simulation* took, not the chip.
* **NPU time** (``npu_time_ms``, ``cycles``): what the cycle model
  (``backends/ascend/model/``) predicts for the launch on the kernel's target, from the
  kernel's PTO program, the grid and the arguments' shapes and scalar values.

The launches come from ``runtime/hooks.py``; a report reads their models when first asked.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from ...backends.ascend.model import calibration
from ...backends.ascend.model.costs import dispatch_cycles
from ...target import get_target
from .trace import launch_chrome_trace, pid_text

KINDS = ("compute", "memory", "sync")


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
    launch: object = field(default=None, repr=False)    # the recorded launch (its arguments)


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
    return 1.0 / (get_target(target_name).clock_ghz * 1e6)


def _busy_core_cycles(model) -> float:
    """Core-cycles the launch's blocks kept their cores busy (first to last instruction)."""
    return sum(b.end - b.start for b in model.blocks)


def _bound_pipe(pipe_busy: dict):
    busy = {p: c for p, c in (pipe_busy or {}).items() if c}
    return max(busy, key=busy.get) if busy else None


DISPATCH_NOTE = 0.25       # say so when launch and dispatch take this share of the cores' time


def dispatch_share(model) -> float:
    """The share of the used cores' time (cores used x makespan) spent launching the kernel
    and dispatching its blocks, as the model charges them (``costs.dispatch_cycles``)."""
    launch, per_block = dispatch_cycles(model.target)
    cores = len({b.core for b in model.blocks}) or 1
    return (launch * cores + per_block * len(model.blocks)) / (cores * model.cycles or 1.0)


def _shown(name: str, mode: str) -> str:
    """A kernel's name in the summary, marked when it ran interpreted or persistent."""
    return name + {"interpreted": " (interp)", "persistent": " (persist)"}.get(mode, "")


def _dispatch_notes(groups: dict) -> list:
    """A line for each kernel whose launch and block dispatch bound it."""
    out = []
    for (name, grid, mode), ks in groups.items():
        k = next((k for k in ks if k.model is not None), None)
        share = dispatch_share(k.model) if k is not None else 0.0
        if share < DISPATCH_NOTE:
            continue
        blocks, cores = len(k.model.blocks), len({b.core for b in k.model.blocks})
        advice = ("a kernel that neither meets other blocks nor mixes cube and vector work "
                  "runs such a grid persistent with launch_form='auto', the default" if
                  blocks > cores else "give each launch more work (larger tiles, or fuse it "
                  "with its neighbours)")
        out.append(f"  {_shown(name, mode)} {grid}: launch and block dispatch take "
                   f"{share:.0%} of its cores' time ({blocks} blocks on {cores} cores): "
                   f"dispatch bounds it; {advice}")
    return [""] + out if out else []


class ProfileReport:
    """The launches a profiler recorded, modelled. Read ``kernels``, ``tiles``,
    ``operations``, ``core_utilization``; print ``summary()``; write
    ``export_chrome_trace(path)`` or ``export_html(path)``."""

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
                                             launch.mode, launch.kind, launch.error,
                                             launch=launch))
                    continue
                pipe_busy = dict(model.pipe_busy)
                out.append(KernelProfile(
                    launch.name, launch.grid, launch.host_time_ms, model.time_ms, model.cycles,
                    model.core_utilization, launch.target, model.cores, blocks,
                    _bound_pipe(pipe_busy), pipe_busy, launch.mode, launch.kind, None, model,
                    launch))
            self._kernels = out
        return self._kernels

    @property
    def groups(self) -> dict:
        """(name, grid, mode) → the ``KernelProfile``s of those launches, in launch order: the
        summary's rows (and the HTML page's)."""
        out: dict = {}
        for k in self.kernels:
            out.setdefault((k.name, k.grid, k.mode), []).append(k)
        return out

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
                        f"{k.name}[{pid_text(block.pid, k.grid)}]", k.name, index, block.pid,
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
                 "(cycle model of the PTO program), not a measurement",
                 f"  calibration: {calibration.agreement()}", ""]
        groups = self.groups
        header = (f"{'kernel':<24} {'grid':>12} {'calls':>5} {'host us':>10} {'NPU us':>10} "
                  f"{'cycles':>10} {'cores':>5} {'util':>6}  bound by")
        lines += [header, "-" * len(header)]
        for (name, grid, mode), ks in groups.items():
            host = 1e3 * sum(k.host_time_ms for k in ks) / len(ks)
            shown = _shown(name, mode)
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
            if any(getattr(k.model, "bandwidth_bound", False) for k in modelled):
                bound_text = "the chip's HBM bandwidth (its bytes over it)"
            lines.append(f"{shown:<24.24} {str(grid):>12} {len(ks):>5} {host:>10.2f} "
                         f"{npu:>10.3f} {cyc:>10.0f} {modelled[0].cores:>5} {util:>6.1%}  "
                         f"{bound_text}")
        lines += _dispatch_notes(groups)
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
        mixed kernel's cluster n shows as AIC core n and, as the chip numbers them, AIV core 2n (and
        2n + 1 when both sub-blocks run)), one thread per pipe
        (``tid`` = 1 + the pipe's index in MTE2, MTE1, M, V, MTE3, FIX, S, named by
        ``thread_name`` metadata), one complete ("X") event per modelled instruction with
        ``ts``/``dur`` in microseconds of modelled NPU time. Launches are laid end to end in
        the order they were made."""
        return launch_chrome_trace(self.kernels, _ms_per_cycle)

    def export_chrome_trace(self, path) -> str:
        """Write ``chrome_trace()`` as JSON to ``path`` (open it in ui.perfetto.dev or
        chrome://tracing); returns the path."""
        with open(path, "w") as f:
            json.dump(self.chrome_trace(), f)
        return str(path)

    def export_html(self, path, graphs=(), title: str = "PyPTO profile") -> str:
        """Write the report (and the modelled schedules of ``graphs``: graph ``Module``s) as
        one self-contained HTML page (``html.py``); returns the path."""
        from .html import export_html  # lazy: tools.memory and the page load only here
        return export_html(self, path, graphs, title)
