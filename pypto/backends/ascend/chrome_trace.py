"""The Chrome trace layout of modelled NPU time (ui.perfetto.dev, chrome://tracing), and the
trace of a graph's modelled MPMD schedule (``DagModel.chrome_trace``).

One process per core (``pid`` = AIV core n, or ``CUBE_PID_BASE`` + AIC core n), one thread per
pipe (``tid`` = 1 + the pipe's index in ``PIPE_ORDER``), times in microseconds. The profiler's
trace of launches (``tools/profiler/trace.py``) uses the same layout, so the two read alike; it
lives here, beside the model, because the model is what the tools read and not the other way.
"""
from __future__ import annotations

PIPE_ORDER = ("MTE2", "MTE1", "M", "V", "MTE3", "FIX", "S")
CUBE_PID_BASE = 1000      # trace pid of cube core n (AIC): base + n; vector core n (AIV): n
TASK_TID = 100            # the task lane of a core, above its pipes


def core_process(core: int, kind: str | None, part: str | None, subblock: int = 0,
                 aivs: int = 1) -> tuple[int, str]:
    """(trace pid, process name) of the core a record ran on: ``part`` is the program part
    ("cube" or "vector"). A mixed kernel's ``core`` is its cluster: AIC n and, as the chip
    numbers them, AIVs n * ``aivs`` + the sub-block (``aivs``: the target's AIVs per cluster;
    1 where ``core`` is already the AIV's own index)."""
    if part is None:
        part = "cube" if kind == "cube" else "vector"
    if part == "cube":
        return CUBE_PID_BASE + core, f"AIC core {core}"
    if kind == "mixed":
        core = core * aivs + subblock
    return core, f"AIV core {core}"


def cluster_order(pid: int, aivs: int) -> tuple:
    """Where a core's rows go in a timeline: cluster by cluster, its AIC before its AIVs."""
    if pid >= CUBE_PID_BASE:
        return pid - CUBE_PID_BASE, 0, pid
    return pid // aivs, 1, pid


def pipe_tid(pipe: str) -> int:
    return 1 + (PIPE_ORDER.index(pipe) if pipe in PIPE_ORDER else len(PIPE_ORDER))


def task_chrome_trace(model) -> dict:
    """The Chrome trace of a ``DagModel``: per core (pids as for launches), one
    "tasks" thread with an event per task (named by its task label, category = its node, so
    the viewer colours nodes apart) and one thread per pipe with the task's instructions."""
    us = 1 / (model.target.clock_ghz * 1e3)
    events, processes, tracks = [], {}, set()
    for p in model.placed:
        for kind, core in p.cores:
            pid, label = core_process(core, kind, kind)
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
            pid, _ = core_process(core, kind, kind)
            tracks.add((pid, pipe_tid(r.pipe), r.pipe))
            events.append({"name": r.name, "cat": r.kind, "ph": "X", "pid": pid,
                           "tid": pipe_tid(r.pipe), "ts": (r.start + offset) * us,
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

