"""MPMD in the NPU model: a DAG of block tasks scheduled on the target's AIV and AIC cores.

``launch.model_launch`` places one SPMD launch's blocks; this module places the tasks of a
whole graph (``graph/execution.py``) at once: a task may start when every task it depends on
has ended, on a free core of its kind (vector tasks on the AIVs, cube tasks on the AICs, a mixed
task on one of each), so one node's cube tasks overlap another node's vector tasks. The rules:

* The graph is one launch: the cores start at ``launch_us`` (``CostModel``), and every task
  pays ``task_dispatch_us`` on its core before it starts (the scheduler hands it over; the
  blocks of launches run in order pay ``block_dispatch_cycles`` instead).
* Ready tasks are placed in the order they become ready (ties: graph order), each on the
  allowed core that frees first (``allowed``: the pipelined strategy gives each node its own
  cores). A task's HBM share is fixed when it starts: the cores busy then, itself included.
* A task's time is its block modelled alone from that start (``launch.model_block``);
  ``simulate`` returns None for work the model cannot see (an Ascend C call: zero time).
* The run takes at least its tasks' traffic over the chip's bandwidths (``_traffic_floor``):
  the shares fixed at each start are estimates, and the total must not beat the HBM.

``bubbles()`` reads the schedule back: per core its busy and idle time, the critical path (the
chain of tasks, each started by the previous one's end, that ends last), the longest waits
(a task's start minus the moment its inputs were complete) and the bubbles proper: stretches
where a core sat idle while a task it could run was ready.
"""
from __future__ import annotations

import heapq
import json
from dataclasses import dataclass, field

from ..chrome_trace import task_chrome_trace
from .costs import dispatch_cycles
from .memory import traffic_floor
from ....target import Target

KINDS = ("vector", "cube")


@dataclass
class TaskSpec:
    """One task to place: ``unit`` "vector", "cube" or "mixed"; ``width`` cores of that kind
    at once; ``simulate(core, start, active)`` → a ``BlockTrace`` (or None: no modelled time);
    ``allowed``: {kind: core indices} it may use (None: all); ``delay``: cycles after its
    inputs are complete before it is ready (a launch of its own, under data_parallel)."""
    index: int
    label: str
    node: str
    unit: str
    deps: list
    simulate: object
    width: int = 1
    allowed: dict | None = None
    delay: float = 0.0          # cycles between its inputs' completion and its readiness


@dataclass
class Placed:
    """A placed task: its cores as (kind, index), when its inputs were complete (``ready``),
    when its dispatch began (``dispatched``), its start and end, in cycles."""
    spec: TaskSpec
    cores: list
    ready: float
    dispatched: float
    start: float
    end: float
    trace: object = None


@dataclass
class DagModel:
    """A modelled graph run: ``cycles`` from time 0 (the launch) to the last task's end."""
    target: Target
    strategy: str
    cycles: float
    placed: list
    launches: int = 1
    note: str = ""
    cores: dict = field(default_factory=dict)        # kind -> cores available
    bandwidth_bound: bool = False   # the chip's bandwidth, not the schedule, set ``cycles``

    @property
    def time_us(self) -> float:
        return self.cycles / (self.target.clock_ghz * 1e3)

    def bubbles(self) -> "BubbleReport":
        return bubble_report(self)

    def chrome_trace(self) -> dict:
        return task_chrome_trace(self)

    def export_chrome_trace(self, path) -> str:
        """Write the schedule as a Chrome trace (ui.perfetto.dev): tasks by node and core."""
        with open(path, "w") as f:
            json.dump(self.chrome_trace(), f)
        return str(path)


def cores_of(target: Target) -> dict:
    return {"vector": target.vector_cores, "cube": target.cube_cores}


def _needs(spec: TaskSpec) -> list:
    """(kind, how many) cores a task takes."""
    if spec.unit == "mixed":
        return [("cube", spec.width), ("vector", spec.width)]
    return [(spec.unit, spec.width)]


def schedule(specs: list, target: Target, strategy: str = "mpmd") -> DagModel:
    """Place ``specs`` (in a topological order, ``deps`` as indices) on ``target``'s cores.
    Under ``data_parallel`` the tasks are the blocks of SPMD launches run one after another,
    each paying the block dispatch (``CostModel.block_dispatch_cycles``); otherwise a graph
    scheduler hands them out, each paying the task pickup (``task_dispatch_us``)."""
    launch, dispatch = dispatch_cycles(target, "block" if strategy == "data_parallel"
                                       else "task")
    counts = cores_of(target)
    free = {k: [launch] * n for k, n in counts.items()}
    consumers = [[] for _ in specs]
    waiting = [len(s.deps) for s in specs]
    ready_at = [launch] * len(specs)
    for s in specs:
        for d in s.deps:
            consumers[d].append(s.index)
    heap = [(launch, s.index) for s in specs if not s.deps]
    heapq.heapify(heap)
    placed: list = [None] * len(specs)
    intervals: list = []                    # (start, end) of every placed task, for HBM
    while heap:
        ready, i = heapq.heappop(heap)
        spec = specs[i]
        chosen = []
        for kind, n in _needs(spec):
            pool = spec.allowed.get(kind) if spec.allowed else None
            pool = range(counts[kind]) if pool is None else pool
            if n > len(pool):
                raise ValueError(f"task {spec.label} needs {n} {kind} cores at once, the "
                                 f"schedule gives it {len(pool)}")
            chosen += [(kind, c) for c in sorted(pool, key=lambda c: free[kind][c])[:n]]
        dispatched = max([ready] + [free[k][c] for k, c in chosen])
        start = dispatched + dispatch
        active = 1 + sum(1 for a, b in intervals if a <= start < b)
        trace = spec.simulate(chosen[0][1], start, active)
        end = trace.end if trace is not None else start
        for k, c in chosen:
            free[k][c] = end
        intervals.append((start, end))
        placed[i] = Placed(spec, chosen, ready, dispatched, start, end, trace)
        for c in consumers[i]:
            waiting[c] -= 1
            ready_at[c] = max(ready_at[c], end)
            if waiting[c] == 0:
                ready_at[c] += specs[c].delay
                heapq.heappush(heap, (ready_at[c], c))
    if any(p is None for p in placed):
        raise ValueError("the task graph has a cycle or a dependency on a later task")
    cycles = max((p.end for p in placed), default=0.0)
    floor = launch + _traffic_floor(placed, target)
    return DagModel(target, strategy, max(cycles, floor), placed, cores=counts,
                    bandwidth_bound=floor > cycles)


def _traffic_floor(placed: list, target: Target) -> float:
    """The least cycles the run's traffic takes on the whole chip (``memory.traffic_floor``):
    the tasks' HBM shares are fixed when each starts and can sum past the HBM, as a launch's
    blocks' can (``launch.model_launch`` holds a launch to its floor the same way). Each task
    is modelled with a cold L2 of its own, so a tensor one task writes and the next reads
    counts both times, as it does in the tasks' own times."""
    traces = [p.trace for p in placed if p.trace is not None]
    return traffic_floor(target, sum(t.traffic[0] for t in traces),
                         sum(t.traffic[1] for t in traces))


# -- the bubble report ---------------------------------------------------------------------------

@dataclass
class BubbleReport:
    """``cores``: per (kind, index) used, (busy, idle) cycles over the run; ``critical_path``:
    the placed tasks of the chain that ends last; ``longest_waits``: the placed tasks that
    waited longest for a core once their inputs were complete (dispatch excluded), with the
    wait; ``idle_with_work``: (core, start, end, placed task) of every stretch a core was
    idle while that task, which it could have run, was ready."""
    model: DagModel
    cores: dict
    critical_path: list
    longest_waits: list
    idle_with_work: list = field(default_factory=list)

    def text(self, top: int = 5) -> str:
        m = self.model
        us = 1 / (m.target.clock_ghz * 1e3)
        lines = [f"bubble report ({m.strategy}, {m.target.name}): {m.time_us:,.2f} us modelled, "
                 f"{len(m.placed)} task(s), {m.launches} launch(es)"]
        for kind in KINDS:
            used = {c: v for (k, c), v in self.cores.items() if k == kind}
            if not used:
                continue
            busy = sum(b for b, _ in used.values())
            idle = sum(i for _, i in used.values()) + (m.cores[kind] - len(used)) * m.cycles
            lines.append(f"  {kind} cores: {len(used)} of {m.cores[kind]} used; busy "
                         f"{busy * us:,.1f} core-us, idle {idle * us:,.1f} core-us "
                         f"({idle / max(busy + idle, 1e-9):.0%} idle)")
            worst = sorted(used.items(), key=lambda kv: -kv[1][1])[:3]
            lines.append("    most idle: " + ", ".join(
                f"{kind[:3]} {c}: {i * us:,.2f} us" for c, (_, i) in worst))
        path = self.critical_path
        work = sum(p.end - p.start for p in path)
        lines.append(f"  critical path: {len(path)} task(s), {work * us:,.2f} us of work and "
                     f"{(m.cycles - work) * us:,.2f} us of launch, dispatch and waits")
        shown = path if len(path) <= 2 * top else path[:top] + [None] + path[-top:]
        lines.append("    " + " -> ".join("..." if p is None else p.spec.label for p in shown))
        waits = [(p, w) for p, w in self.longest_waits[:top] if w > 0]
        idle = self.idle_with_work
        lines.append(f"  bubbles (a core idle while a task it could run was ready): "
                     f"{len(idle)}, {sum(b - a for _, a, b, _ in idle) * us:,.2f} core-us")
        lines.append("  longest waits for a core (inputs complete -> dispatch begins):"
                     + ("" if waits else " none, every task found a free core"))
        for p, wait in waits:
            lines.append(f"    {p.spec.label}: {wait * us:,.2f} us")
        return "\n".join(lines) + "\n"

    __str__ = text


def bubble_report(model: DagModel, top: int = 10) -> BubbleReport:
    cores: dict = {}
    for p in model.placed:
        for core in p.cores:
            busy, _ = cores.get(core, (0.0, 0.0))
            cores[core] = (busy + p.end - p.start, 0.0)
    cores = {c: (b, model.cycles - b) for c, (b, _) in cores.items()}
    waits = sorted(((p, p.dispatched - p.ready) for p in model.placed), key=lambda x: -x[1])
    return BubbleReport(model, cores, critical_path(model), waits[:top],
                        idle_with_ready_work(model))


def idle_with_ready_work(model: DagModel) -> list:
    """(core, start, end, task): for each task that waited once its inputs were complete, the
    longest stretch of that wait during which a core it could use sat idle (one per kind of
    core it needs, so a task counts once however many cores were idle). A task that waited
    with none of its cores idle was held by the other kind (a mixed task) or not at all."""
    launch = dispatch_cycles(model.target, "block" if model.strategy.endswith("data_parallel")
                             else "task")[0]
    spans: dict = {}
    for p in model.placed:
        for core in p.cores:
            spans.setdefault(core, []).append((p.dispatched, p.end))
    for runs in spans.values():
        runs.sort()
    out = []
    for p in model.placed:
        a, b = max(p.ready, launch), p.dispatched
        if b <= a:
            continue
        for kind, _ in _needs(p.spec):
            pool = p.spec.allowed.get(kind) if p.spec.allowed else None
            pool = range(model.cores.get(kind, 0)) if pool is None else pool
            best = max((_longest_idle(spans.get((kind, c), []), a, b) + ((kind, c),)
                        for c in pool), key=lambda x: x[1] - x[0], default=None)
            if best is not None and best[1] > best[0]:
                out.append((best[2], best[0], best[1], p))
    return sorted(out, key=lambda x: x[1] - x[2])


def _longest_idle(runs: list, a: float, b: float) -> tuple:
    """The longest stretch of [a, b] that no (start, end) of ``runs`` (sorted) covers."""
    best, t = (a, a), a
    for start, end in runs:
        if start >= b:
            break
        if start > t and min(start, b) - t > best[1] - best[0]:
            best = (t, min(start, b))
        t = max(t, end)
    if b - t > best[1] - best[0]:
        best = (t, b)
    return best


def critical_path(model: DagModel) -> list:
    """From the task that ends last, back through whatever held each task's start: the
    dependency that ended last, or the task before it on its core, whichever ended later."""
    if not model.placed:
        return []
    by_core: dict = {}
    for p in sorted(model.placed, key=lambda p: p.start):
        by_core.setdefault(p.cores[0], []).append(p)
    previous = {}
    for run in by_core.values():
        for a, b in zip(run, run[1:]):
            previous[id(b)] = a
    path = [max(model.placed, key=lambda p: p.end)]
    while True:
        p = path[-1]
        held = [model.placed[d] for d in p.spec.deps]
        if id(p) in previous:
            held.append(previous[id(p)])
        if not held:
            break
        path.append(max(held, key=lambda q: q.end))
    return path[::-1]
