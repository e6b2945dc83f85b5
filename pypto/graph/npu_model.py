"""A compiled graph's modelled NPU time under each ``parallel_strategy`` (``module.model``).

The tasks are the Execution Graph's (``execution.py``); each one's time is its block in the
cycle model (``model/launch.model_block``) and ``backends/ascend/model/tasks.schedule`` places
them. The strategies differ only in the constraints they add to the same DAG:

* ``"mpmd"``: every task goes to any free core of its kind as soon as its inputs are complete;
  the graph is one launch.
* ``"data_parallel"``: one node at a time over all cores (what ``Module.run`` did before the
  Execution Graph): each step's tasks wait for every task of the step before, plus one launch
  cost per step; the same as modelling each kernel's SPMD launch after the other.
* ``"pipelined"``: each step gets cores of its own (the cores of a kind split between the
  steps using it in proportion to their work, at least one each), and tiles stream from one
  step's cores to the next's as their dependencies allow.
* ``"auto"``: the scheduler's choice: whichever of the three models fastest.

Arguments are stand-ins with the graph tensors' shapes, dtypes and C-contiguous strides (the
model reads nothing else); a kernel node's views of them are what its launch passes.
"""
from __future__ import annotations

import math
from dataclasses import replace

from ..backends.ascend.model.block import BlockTrace
from ..backends.ascend.model.costs import dispatch_cycles
from ..backends.ascend.model.launch import model_block, model_launch
from ..backends.ascend.model.tasks import TaskSpec, cores_of, schedule
from ..runtime.hooks import pto_program
from ..runtime.args import standin
from .ascend_c_node import AscendCStep

STRATEGIES = ("auto", "mpmd", "data_parallel", "pipelined")


def check_strategy(strategy, where: str) -> str:
    if strategy not in STRATEGIES:
        raise ValueError(f"{where}: parallel_strategy must be one of "
                         f"{', '.join(map(repr, STRATEGIES))}, got {strategy!r}")
    return strategy


def model(module, strategy: str = "auto"):
    """The ``DagModel`` of one run of ``module`` under ``strategy`` (``auto``: the fastest of
    the others, its ``strategy`` reading e.g. ``"auto -> mpmd"``)."""
    check_strategy(strategy, "Module.model")
    cache = module.__dict__.setdefault("_models", {})
    if strategy in cache:
        return cache[strategy]
    if strategy == "auto":
        best = min((model(module, s) for s in STRATEGIES[1:]), key=lambda m: m.cycles)
        result = _relabel(best, f"auto -> {best.strategy}")
    else:
        sims = module.__dict__.setdefault("_task_sims", _Simulations(module))
        specs = _specs(module, sims, strategy)
        result = schedule(specs, module.target, strategy)
        result.launches = len(module.steps) if strategy == "data_parallel" else 1
    cache[strategy] = result
    return result


def _relabel(m, strategy: str):
    return replace(m, strategy=strategy)


class _Simulations:
    """Per step: its PTO program, grid and stand-in arguments; block traces memoised by
    (step, block, HBM sharers) at start 0 and shifted to where the scheduler puts them."""

    def __init__(self, module):
        self.module = module
        self.graph = module.execution_graph
        self.memo: dict = {}
        self.launch: dict = {}

    def args(self, step) -> dict:
        if step not in self.launch:
            ins = [standin(t.shape, t.dtype) for t in step.params]
            outs = [standin(t.shape, t.dtype) for t in step.outputs]
            values = step.arguments(ins, outs)
            names = [n for n, _, _ in step.compiled.runtime_params]
            self.launch[step] = dict(zip(names, values))
        return self.launch[step]

    def simulate(self, task):
        step = task.step
        if isinstance(step, AscendCStep):
            return None                     # pto-isa C++: not a PTO program the model reads
        if task.width > 1:                  # blocks that sync: the whole launch at once
            return lambda core, start, active: self._whole(step, core, start)
        return lambda core, start, active: self._block(step, task.block, core, start, active)

    def _block(self, step, block, core, start, active):
        key = (id(step), block, active)
        trace = self.memo.get(key)
        if trace is None:
            g = tuple(step.grid) + (1,) * (3 - len(step.grid))
            pid = (block % g[0], (block // g[0]) % g[1], block // (g[0] * g[1]))
            trace = model_block(pto_program(step.compiled), g, self.args(step),
                                self.module.target, pid, 0, 0.0, active)
            self.memo[key] = trace
        return _shifted(trace, core, start)

    def _whole(self, step, core, start):
        key = (id(step), None, None)
        if key not in self.memo:
            lm = model_launch(pto_program(step.compiled), step.grid, self.args(step),
                              self.module.target)
            span = lm.cycles - sum(dispatch_cycles(self.module.target))
            self.memo[key] = BlockTrace((0, 0, 0), 0, 0.0, span, [], lm.pipe_busy,
                                        traffic=lm.memory.traffic())
        return _shifted(self.memo[key], core, start)


def _shifted(trace, core: int, start: float) -> BlockTrace:
    """The memoised trace moved to ``start`` on ``core`` (records are shifted when read, by
    ``records_of``)."""
    t = BlockTrace(trace.pid, core, trace.start + start, trace.end + start, trace.records,
                   trace.pipe_busy, traffic=trace.traffic)
    t.offset = start
    return t


def records_of(trace):
    """A placed trace's instruction records at their scheduled times."""
    offset = getattr(trace, "offset", 0.0)
    return [replace(r, start=r.start + offset, end=r.end + offset) for r in trace.records]


def _specs(module, sims, strategy: str) -> list:
    eg = sims.graph
    specs = [TaskSpec(t.index, t.label, t.step.name, t.unit, list(t.deps), sims.simulate(t),
                      t.width) for t in eg.tasks]
    if strategy == "data_parallel":
        _join_steps(module, eg, specs)
    elif strategy == "pipelined":
        _split_cores(module, eg, specs, sims)
    return specs


def _join_steps(module, eg, specs) -> None:
    """Each step waits for the whole previous one, and pays its own launch."""
    launch, _ = dispatch_cycles(module.target)
    previous = []
    for step in module.steps:
        own = eg.tasks_of(step)
        for t in own:
            specs[t.index].deps = sorted(set(specs[t.index].deps) | {p.index for p in previous})
            specs[t.index].delay = launch if previous else 0.0
        previous = own


def _split_cores(module, eg, specs, sims) -> None:
    """Disjoint core sets per step, sized by each step's work (its first task modelled alone
    times its task count)."""
    counts = cores_of(module.target)
    work: dict = {}
    for step in module.steps:
        own = eg.tasks_of(step)
        sim = sims.simulate(own[0])
        one = sim(0, 0.0, 1) if sim is not None else None
        work[step] = max(1.0, (one.end - one.start) if one is not None else 1.0) * len(own)
    for kind in ("vector", "cube"):
        users = [s for s in module.steps
                 if eg.tasks_of(s)[0].unit in (kind, "mixed")]
        for step, cores in zip(users, _shares([work[s] for s in users], counts[kind])):
            for t in eg.tasks_of(step):
                allowed = specs[t.index].allowed or {}
                allowed[kind] = cores
                specs[t.index].allowed = allowed
                if t.width > len(cores):            # a syncing launch needs all its cores
                    allowed[kind] = range(counts[kind])


def _shares(work: list, cores: int) -> list:
    """Core index ranges proportional to ``work``, at least one core each (cores shared
    round-robin when there are more steps than cores)."""
    if not work:
        return []
    if len(work) >= cores:
        return [range(k % cores, k % cores + 1) for k in range(len(work))]
    total = sum(work)
    sizes = [max(1, math.floor(cores * w / total)) for w in work]
    while sum(sizes) > cores:
        sizes[sizes.index(max(sizes))] -= 1
    k = 0
    while sum(sizes) < cores:                   # hand out the rest, largest work first
        sizes[sorted(range(len(work)), key=lambda i: -work[i])[k % len(work)]] += 1
        k += 1
    out, at = [], 0
    for n in sizes:
        out.append(range(at, at + n))
        at += n
    return out
