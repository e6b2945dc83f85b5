"""The profiler's Chrome trace (ui.perfetto.dev, chrome://tracing): a profile's launches laid
end to end on the modelled cores, in the layout the graph's task trace uses too
(``backends/ascend/chrome_trace.py``: one process per core, one thread per pipe, microseconds of
modelled NPU time).
"""
from __future__ import annotations

from ...backends.ascend.chrome_trace import core_process, pipe_tid


def aivs_per_cluster(target) -> int:
    """A cluster's AIVs: the target's vector cores per cube core (2 on A2/A3)."""
    return target.vector_cores // target.cube_cores


def pid_text(pid, grid=None) -> str:
    """A block id as the launch's grid spells it: "3" in a 1-D grid, "1,2" in a 2-D one."""
    if isinstance(pid, (tuple, list)):
        if grid is not None:
            pid = tuple(pid)[:max(1, len(grid))]
        return ",".join(str(p) for p in pid)
    return str(pid)


def launch_chrome_trace(kernels, ms_per_cycle) -> dict:
    """The trace of a profile's ``KernelProfile``s (``ProfileReport.chrome_trace``): one
    complete ("X") event per modelled instruction, named by ``thread_name`` metadata per pipe;
    launches laid end to end in the order they were made. ``ms_per_cycle(model, target)``
    converts the model's cycles."""
    events, processes, tracks = [], {}, set()
    offset_us = 0.0
    for index, k in enumerate(kernels):
        if k.model is None:
            continue
        us = ms_per_cycle(k.model, k.target) * 1e3
        aivs = aivs_per_cluster(k.model.target)
        for block in k.model.blocks:
            block_text = pid_text(block.pid, k.grid)
            for r in block.records:
                pid, label = core_process(block.core, k.kind, r.part, r.subblock, aivs)
                processes.setdefault(pid, label)
                tracks.add((pid, r.pipe))
                events.append({
                    "name": r.name, "cat": r.kind, "ph": "X", "pid": pid,
                    "tid": pipe_tid(r.pipe), "ts": offset_us + r.start * us,
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
    for pid, pipe in sorted(tracks, key=lambda t: (t[0], pipe_tid(t[1]))):
        meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": pipe_tid(pipe),
                     "args": {"name": pipe}})
        meta.append({"name": "thread_sort_index", "ph": "M", "pid": pid,
                     "tid": pipe_tid(pipe), "args": {"sort_index": pipe_tid(pipe)}})
    return {"traceEvents": meta + events, "displayTimeUnit": "ns",
            "otherData": {"source": "PyPTO cycle model (modelled NPU time, not measured)",
                          "targets": sorted({k.target for k in kernels if k.target})}}
