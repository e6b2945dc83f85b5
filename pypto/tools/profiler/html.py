"""The profile as one self-contained HTML page (``Profiler.export_html``): swim lanes per core
and pipe, the hand-offs between a cluster's cores, the blocks and their dispatch gaps, a
roofline per kernel under the target's roofs with the board's measured kernels marked, the
on-chip memory per buffer and, for graph modules, the Execution Graph's tasks on the cores with
the critical path and the bubbles.

The page is the data (JSON, built here) and a renderer (``page/profile.js`` and
``page/profile.css``, inlined): no network access, nothing to install, opens from ``file://``.
Every figure on it is modelled NPU time except the host times, which are measured.
"""
from __future__ import annotations

import json
from pathlib import Path

from ...backends.ascend.chrome_trace import PIPE_ORDER, cluster_order, core_process
from ...backends.ascend.model import calibration
from ...backends.ascend.model.silicon import BOARD_TARGET, board_points
from ...target import get_target
from ..memory import analyze
from .trace import aivs_per_cluster, pid_text

PAGE = Path(__file__).with_name("page")
MAX_BARS = 40_000          # bars per lane kept one by one; beyond, neighbours are merged
MAX_HANDOFFS = 20_000      # hand-off arrows drawn
ROW_ORDER = ("blocks",) + PIPE_ORDER + ("flags",)
CUBE_FLOPS_PER_CYCLE = 2 * 16 * 16 * 16     # one 16x16x16 fp16 fractal per cube cycle


def export_html(report, path, graphs=(), title: str = "PyPTO profile") -> str:
    """Write ``report`` (a ``ProfileReport``) and the modelled ``graphs`` (``Module``s or
    ``DagModel``s) as one HTML page at ``path``; returns the path."""
    data = page_data(report, graphs, title)
    text = render(data)
    Path(path).write_text(text, encoding="utf-8")
    return str(path)


def render(data: dict) -> str:
    """The page: the template with the styles, the script and the data inlined. ``</`` in the
    data is escaped so that no kernel name can end the script element."""
    blob = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return ((PAGE / "template.html").read_text(encoding="utf-8")
            .replace("/*STYLE*/", (PAGE / "profile.css").read_text(encoding="utf-8"))
            .replace("/*SCRIPT*/", (PAGE / "profile.js").read_text(encoding="utf-8"))
            .replace("/*DATA*/", blob)
            .replace("<!--TITLE-->", _escape(data["title"])))


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def page_data(report, graphs=(), title: str = "PyPTO profile") -> dict:
    """Everything the page shows, as plain JSON data (times in microseconds)."""
    agreement = calibration.agreement()
    names = _Names()
    lanes = _Lanes(names)
    offset = 0.0                    # launches end to end, in the order they were made
    for k in report.kernels:
        if k.model is not None:
            lanes.add_launch(k, offset, 1e3 * k.npu_time_ms / k.cycles if k.cycles else 0.0)
            offset += 1e3 * k.npu_time_ms
    kernels = [_kernel_row(ks) for ks in report.groups.values()]
    return {
        "title": title,
        "calibration": {"text": str(agreement), "median_error": agreement.possible_median},
        "targets": {t: _roofs(t) for t in {k["target"] for k in kernels if k["target"]}
                    | {BOARD_TARGET}},
        "kernels": kernels,
        "names": names.items,
        "lanes": lanes.rows(),
        "handoffs": lanes.handoffs[:MAX_HANDOFFS],
        "board": [{"kernel": b.kernel, "size": b.size, "time_us": b.time_us, "flops": b.flops,
                   "bytes": b.bytes, "target": BOARD_TARGET} for b in board_points()],
        "graphs": [_graph(g, i) for i, g in enumerate(graphs)],
    }


class _Names:
    """Instruction and task names, each stored once (bars refer to them by index)."""

    def __init__(self):
        self.items, self._index = [], {}

    def __call__(self, name: str) -> int:
        if name not in self._index:
            self._index[name] = len(self.items)
            self.items.append(name)
        return self._index[name]


def _roofs(target_name: str) -> dict:
    """The target's roofs: the cube's fp16 peak, the vector unit's fp32 peak (one element per
    lane of a repeat a cycle), HBM and L2 bandwidth."""
    t = get_target(target_name)
    hz = t.clock_ghz * 1e9
    lanes = t.costs.repeat_bytes / 4 / t.costs.vector["unary"].repeat_cycles
    return {"name": t.name, "cube_flops": t.cube_cores * hz * CUBE_FLOPS_PER_CYCLE,
            "vector_flops": t.vector_cores * hz * lanes, "hbm_bytes": t.hbm_gbps * 1e9,
            "l2_bytes": t.l2_gbps * 1e9}


# -- kernels and their lanes ---------------------------------------------------------------------

def _kernel_row(ks: list) -> dict:
    """One row of the summary (``ProfileReport.groups``): the launches' mean times, and the
    model's figures of the first modelled one."""
    k = ks[0]
    modelled = [x for x in ks if x.model is not None]
    row = {"name": k.name, "grid": list(k.grid), "mode": k.mode, "target": k.target,
           "calls": len(ks), "error": k.error,
           "host_us": 1e3 * sum(x.host_time_ms for x in ks) / len(ks),
           "npu_us": (1e3 * sum(x.npu_time_ms for x in modelled) / len(modelled)
                      if modelled else None),
           "arg_bytes": sum(getattr(v, "nbytes", 0) for v in k.launch.args.values())}
    if modelled:
        m = modelled[0].model
        bound = modelled[0].bound_pipe
        row.update(cores=m.cores, cores_used=len({b.core for b in m.blocks}) or 1,
                   util=m.core_utilization, bound=bound,
                   bound_share=m.busy_share(bound) if bound else None,
                   flops=sum(r.flops or 0 for b in m.blocks for r in b.records),
                   memory=_memory(modelled[0].launch))
    return row


def _memory(launch) -> dict:
    """``pypto.memory.analyze``'s peaks per buffer, or why there are none."""
    try:
        mem = analyze(launch.kernel, grid=launch.grid)
    except Exception as e:  # noqa: BLE001 - the page shows the rest and says why
        return {"error": f"{type(e).__name__}: {e}"}
    return {"buffers": {b: [int(peak), int(mem.capacity[b])]
                        for b, peak in mem.peak_memory.items() if peak}}


class _Lanes:
    """Rows of bars keyed by (core, row): a core's blocks (and the dispatch gaps between
    them), one row per pipe, its cross-core flags; arrows from a flag's set to its wait."""

    def __init__(self, names: _Names):
        self.names = names
        self.bars: dict = {}               # (core pid, row) -> list of (t, d, name, info)
        self.labels: dict = {}             # core pid -> its name ("AIC core 0")
        self.handoffs: list = []           # [from lane key, t, to lane key, t]
        self.aivs = 2                      # AIVs per cluster (the targets' vector / cube cores)

    def core(self, k, block, part, subblock: int) -> int:
        """The pid of the core that ran ``part`` of ``block`` (``chrome_trace.core_process``,
        the Chrome trace's numbering), its name kept."""
        pid, label = core_process(block.core, k.kind, part, subblock, self.aivs)
        self.labels[pid] = label
        return pid

    def key(self, pid: int, row: str) -> str:
        return f"{self.labels[pid]}|{row}"

    def add(self, core: int, row: str, t: float, d: float, name: str, info: str) -> None:
        self.bars.setdefault((core, row), []).append(
            (t, max(0.0, d), self.names(name), self.names(info)))

    def add_launch(self, k, offset: float, us: float) -> None:
        m = k.model
        self.aivs = aivs_per_cluster(m.target)
        last_end: dict = {}
        for block in sorted(m.blocks, key=lambda b: b.start):
            info = f"{k.name}[{pid_text(block.pid, k.grid)}]"
            cores = {self.core(k, block, r.part, r.subblock)
                     for r in block.records} or {self.core(k, block, None, 0)}
            for r in block.records:
                core = self.core(k, block, r.part, r.subblock)
                self.add(core, r.pipe, offset + r.start * us, (r.end - r.start) * us,
                         r.name, info)
            for core in cores:
                gap_from = last_end.get(core, 0.0)
                if block.start > gap_from:
                    self.add(core, "blocks", offset + gap_from * us,
                             (block.start - gap_from) * us,
                             "launch" if core not in last_end else "dispatch", info)
                self.add(core, "blocks", offset + block.start * us,
                         (block.end - block.start) * us, info, k.name)
                last_end[core] = block.end
            self._handoffs(k, block, offset, us, info)

    def _handoffs(self, k, block, offset: float, us: float, info: str) -> None:
        """A flag's k-th set by one part meets the k-th wait on that flag by each agent of
        the other part (FFTS mode 2 fans a cube's flag out to its AIVs and joins theirs)."""
        sets: dict = {}
        waits: dict = {}
        for h in block.handoffs:
            core = self.core(k, block, h.part, h.subblock)
            self.add(core, "flags", offset + h.start * us, (h.end - h.start) * us,
                     f"{h.op} flag {h.flag}", info)
            side = sets if h.op == "set" else waits
            side.setdefault((str(h.flag), h.part), {}).setdefault(core, []).append(h)
        if k.kind != "mixed":
            return
        for (flag, part), by_core in sets.items():
            other = "vector" if part == "cube" else "cube"
            for src, hs in by_core.items():
                for dst, ws in waits.get((flag, other), {}).items():
                    for h, w in zip(hs, ws):
                        self.handoffs.append([self.key(src, "flags"), offset + h.end * us,
                                              self.key(dst, "flags"), offset + w.end * us])

    def rows(self) -> list:
        """The lanes in display order: cluster by cluster (its AIC, then its AIVs),
        so a hand-off runs between neighbouring rows; within a core its blocks, its pipes in
        pipe order, its flags."""
        out = []
        for pid, row in sorted(self.bars, key=lambda key: (cluster_order(key[0], self.aivs),
                                                           ROW_ORDER.index(key[1]))):
            bars = sorted(self.bars[pid, row])
            lane = {"core": self.labels[pid], "row": row, "key": self.key(pid, row)}
            lane.update(_columns(bars, self.names))
            out.append(lane)
        return out


def _columns(bars: list, names: _Names) -> dict:
    """A lane's bars as columns (t, d, n: name, i: info); a lane of more than ``MAX_BARS``
    bars has its neighbours merged into at most that many, each counting its instructions
    (c) and their busy time (w), so a huge profile stays a few MB and draws at once."""
    if len(bars) > MAX_BARS:
        bars = _merge(bars, names)
    cols = {"t": [_r(b[0]) for b in bars], "d": [_r(b[1]) for b in bars],
            "n": [b[2] for b in bars], "i": [b[3] for b in bars]}
    if bars and len(bars[0]) > 4:
        cols["c"] = [b[4] for b in bars]
        cols["w"] = [_r(b[5]) for b in bars]
    return cols


def _merge(bars: list, names: _Names) -> list:
    start, end = bars[0][0], max(b[0] + b[1] for b in bars)
    width = (end - start) / MAX_BARS
    out, group = [], None
    for t, d, n, i in bars:
        if group is not None and t < group[0] + width:
            group[1] = max(group[1], t + d - group[0])
            group[4] += 1
            group[5] += d
            if group[2] != n:
                group[2] = names("(several instructions)")
            continue
        if group is not None:
            out.append(tuple(group))
        group = [t, d, n, i, 1, d]
    out.append(tuple(group))
    return out


def _r(v: float) -> float:
    return round(v, 5)


# -- graph modules -------------------------------------------------------------------------------

def _graph(graph, index: int) -> dict:
    """A graph module's modelled schedule (``Module.model()``, or a ``DagModel`` given)."""
    model = graph.model() if hasattr(graph, "model") else graph
    us = 1 / (model.target.clock_ghz * 1e3)
    bubbles = model.bubbles()
    critical = {id(p) for p in bubbles.critical_path}
    nodes: dict = {}
    tasks = []
    labels: dict = {}

    def core(kind, index) -> str:
        pid, label = core_process(index, kind, kind)
        labels[pid] = label
        return label

    for p in model.placed:
        node = nodes.setdefault(p.spec.node, len(nodes))
        for kind, index in p.cores:
            tasks.append({"core": core(kind, index),
                          "t": _r(p.start * us), "d": _r((p.end - p.start) * us),
                          "label": p.spec.label, "node": node,
                          "critical": id(p) in critical,
                          "ready": _r(p.ready * us), "dispatched": _r(p.dispatched * us)})
    name = getattr(getattr(graph, "graph", None), "name", None) or f"graph {index}"
    return {"name": name, "strategy": model.strategy, "time_us": model.time_us,
            "target": model.target.name, "nodes": list(nodes), "tasks": tasks,
            "critical": [p.spec.label for p in bubbles.critical_path],
            "bubbles": [{"core": core(*c), "t": _r(a * us), "d": _r((b - a) * us),
                         "task": p.spec.label} for c, a, b, p in bubbles.idle_with_work],
            "cores": [labels[pid] for pid in sorted(labels, key=lambda pid: cluster_order(
                pid, aivs_per_cluster(model.target)))],
            "report": bubbles.text()}
