"""A launch over the target's cores: every block's timeline, cross-core flags and barriers
answered, the grid list-scheduled on the cores.

Blocks in launch order (pid0 fastest) take the core that frees first. A vector kernel runs on
the AIVs, a cube kernel on the AICs, a mixed kernel's block on one cluster (its cube part on the
AIC, its vector part on one AIV or both, ``Program.vector_cores``, all counted against HBM).
A block's share of HBM bandwidth is
fixed when it starts: the cores still busy then plus those starting with it. Blocks that meet
(``syncall``) or signal each other all start at once (the grid must fit). In a mixed kernel the
cross-core flags belong to the block's cluster, with FFTS mode 2's fan-out and join between
the cube and its AIVs; otherwise they are launch-wide counters (``pl.signal``/``pl.wait``).
"""
from __future__ import annotations

import heapq
from collections import defaultdict, deque
from dataclasses import dataclass

from ....compiler.pto.isa import PIPES
from ....compiler.pto import Inst, TensorArg, walk_insts
from ....compiler.pto.reader import parse_program
from ....target import Target, get_target
from .block import GM_PIPES, BlockEnv, BlockTrace, PartTimeline
from .costs import as_target, dispatch_cycles
from .memory import REPLAY_HIT_RATE, GlobalMemory

# -- cross-core flags and barriers --------------------------------------------------------------

class _Agent:
    """One part's timeline as the hub drives it: its generator, the scope its cross-core
    flags belong to (the block's cluster, or 0: the whole launch) and, in a cluster, its
    ``role`` ("cube", or the AIV's sub-block) and how many AIVs run the vector part."""

    def __init__(self, part: PartTimeline, scope, role=None, aivs: int = 1):
        self.part, self.scope, self.role, self.aivs = part, scope, role, aivs
        self.gen = part.run()

    def flag_keys(self, flag, setting: bool) -> list:
        """Where a flag goes or comes from. FFTS mode 2 ties a cluster's three cores: a flag
        the cube sets reaches every AIV, and the cube's wait ends when every AIV has set it
        (pto-isa ``npu/a2a3/TPush.hpp``); elsewhere a flag is one launch-wide counter."""
        if self.role is None:
            return [(self.scope, flag)]
        if self.role == "cube":
            way = "down" if setting else "up"
            return [(self.scope, flag, way, sb) for sb in range(self.aivs)]
        return [(self.scope, flag, "up" if setting else "down", self.role)]


class _Flags:
    """Cross-core flag counters: signals are (time, count) tokens; a wait takes the oldest
    ``count`` of them and may go on when the last one it took had arrived."""

    def __init__(self):
        self.tokens: dict = defaultdict(deque)

    def post(self, key, t: float, count: int) -> None:
        self.tokens[key].append([t, count])

    def take(self, keys: list, count: int) -> float | None:
        """Take ``count`` tokens from each of ``keys`` (none unless all have them): when the
        last one taken had arrived."""
        if any(sum(c for _, c in self.tokens[key]) < count for key in keys):
            return None
        ready = 0.0
        for key in keys:
            queue, need = self.tokens[key], count
            while need:
                tok = queue[0]
                used = min(need, tok[1])
                tok[1] -= used
                need -= used
                ready = max(ready, tok[0])
                if tok[1] == 0:
                    queue.popleft()
        return ready


class _Hub:
    """Runs the agents' simulations together, always advancing the one furthest behind in
    time, and answers their cross-core requests. ``standalone``: one part alone, where a wait
    nobody can signal goes on at once and a syncall meets only itself."""

    def __init__(self, agents: list, standalone: bool = False):
        self.agents, self.standalone = agents, standalone
        self.flags = _Flags()
        self.heap = [(a.part.env.start, i, None) for i, a in enumerate(agents)]
        heapq.heapify(self.heap)
        self.waiting: list = []          # (agent index, flag keys, count, time)
        self.arrived: list = []          # (agent index, time) at a syncall
        # a syncall (FFTS mode 0) meets every core whose part has one: a block that finishes
        # without reaching it holds the others forever, as on the chip
        self.meeting = sum(any(isinstance(n, Inst) and n.op == "syncall"
                               for n in _insts(a.part.body)) for a in agents)

    def run(self) -> None:
        while self.heap:
            _, i, reply = heapq.heappop(self.heap)
            try:
                request = self.agents[i].gen.send(reply)
            except StopIteration:
                pass
            else:
                self._request(i, *request)
            self._wake_waiters()
            self._open_barrier()
        if self.waiting or self.arrived:
            stuck = "sync.wait" if self.waiting else "syncall"
            raise ValueError(f"the modelled launch deadlocks: a {stuck} is never satisfied "
                             "(a flag nobody signals, or a barrier some block never reaches)")

    def _resume(self, i: int, t: float, reply=None) -> None:
        heapq.heappush(self.heap, (t, i, reply))

    def _request(self, i: int, kind: str, *rest) -> None:
        agent = self.agents[i]
        if kind == "set":
            flag, count, t = rest
            for key in agent.flag_keys(flag, setting=True):
                self.flags.post(key, t, count)
            self._resume(i, t)
        elif kind == "wait":
            flag, count, t = rest
            self.waiting.append((i, agent.flag_keys(flag, setting=False), count, t))
        else:
            self.arrived.append((i, rest[0]))

    def _wake_waiters(self) -> None:
        still = []
        for i, keys, count, t in self.waiting:
            ready = self.flags.take(keys, count)
            if ready is None and self.standalone:
                ready = t
            if ready is None:
                still.append((i, keys, count, t))
            else:
                self._resume(i, max(t, ready), max(t, ready))
        self.waiting = still

    def _open_barrier(self) -> None:
        if self.arrived and (len(self.arrived) == self.meeting or self.standalone):
            release = max(t for _, t in self.arrived)
            for i, _ in self.arrived:
                self._resume(i, release, release)
            self.arrived = []


def simulate_block(program_part_body: list, env: BlockEnv) -> BlockTrace:
    """One block's part on one core, alone: cross-core waits go on at once (use
    ``model_launch`` for the flags between parts and blocks)."""
    part = PartTimeline(program_part_body, env)
    _Hub([_Agent(part, 0)], standalone=True).run()
    return part.trace()


# -- the launch ---------------------------------------------------------------------------------

@dataclass
class LaunchModel:
    """The modelled launch: ``cycles`` is the makespan on the target's clock, ``cores`` the
    cores available to this kind of kernel (clusters for mixed ones), ``core_utilization``
    busy core-cycles over cores x makespan, ``pipe_busy`` cycles per pipe over all blocks."""
    name: str
    target: Target
    kind: str
    grid: tuple
    cycles: float
    time_ms: float
    cores: int
    core_utilization: float
    blocks: list
    pipe_busy: dict
    memory: GlobalMemory | None = None     # the launch's L2 after it: hits, misses, traffic
    simulated: float | None = None         # the cores' makespan, before the bandwidth floor

    @property
    def bandwidth_bound(self) -> bool:
        """Whether the chip's HBM (or L2) bandwidth, not any core, sets the launch's time
        (``memory.GlobalMemory.floor_cycles``)."""
        return self.simulated is not None and self.cycles > self.simulated

    def bound_pipe(self) -> str:
        return max(self.pipe_busy, key=self.pipe_busy.get)

    def busy_share(self, pipe: str) -> float:
        """A pipe's busy cycles over the busy cores' share of the kernel's time (cores used
        x the makespan, launch included), as the board's pipe ratios are measured: per core
        over the kernel's duration. The cores are those that ran the pipe: a mixed kernel's
        V counts both AIVs of a cluster when its vector part runs on both."""
        units = {(b.core, r.part, r.subblock) for b in self.blocks for r in b.records
                 if r.pipe == pipe}
        cores = len(units) or len({b.core for b in self.blocks}) or 1
        return self.pipe_busy.get(pipe, 0.0) / (cores * self.cycles or 1.0)

    def summary(self) -> str:
        """A readable table: the launch, then each pipe's busy share of the core time."""
        t = self.target
        head = (f"{self.name} on {t.name} ({self.kind} kernel, grid {self.grid}): "
                f"{self.cycles:,.0f} cycles = {self.time_ms * 1e3:,.2f} us at {t.clock_ghz} "
                "GHz (modelled NPU time)")
        cores = (f"  blocks {len(self.blocks)} on {self.cores} cores, core utilization "
                 f"{self.core_utilization:.1%}")
        lines = [head, cores, f"  {'pipe':<6}{'busy cycles':>16}{'of core time':>14}"]
        core_time = sum(b.end - b.start for b in self.blocks) or 1.0
        for pipe in PIPES:
            busy = self.pipe_busy.get(pipe, 0.0)
            if busy:
                lines.append(f"  {pipe:<6}{busy:>16,.0f}{busy / core_time:>14.1%}")
        lines.append(f"  bound by {self.bound_pipe()}" + (
            f"; stretched from {self.simulated:,.0f} cycles to the HBM's bandwidth over "
            "its bytes" if self.bandwidth_bound else ""))
        return "\n".join(lines)


def _grid3(grid) -> tuple:
    grid = (grid,) if isinstance(grid, int) else tuple(int(g) for g in grid)
    if not 1 <= len(grid) <= 3 or any(g < 0 for g in grid):
        raise ValueError(f"grid must be 1 to 3 non-negative ints, got {grid!r}")
    return grid + (1,) * (3 - len(grid))


def _pids(grid: tuple) -> list:
    """Block ids in launch order, pid0 fastest (as the runtime's block counter)."""
    g0, g1, g2 = grid
    return [(p0, p1, p2) for p2 in range(g2) for p1 in range(g1) for p0 in range(g0)]


def _cooperative(program) -> bool:
    """Blocks that meet (syncall) or signal each other must all run at once."""
    if program.kind == "mixed":
        ops = {n.op for _, body in program.parts for n in _insts(body)}
        return "syncall" in ops
    return any(n.op in ("syncall", "sync.set", "sync.wait") for n in _insts(program.body))


def _insts(body):
    return (n for n in walk_insts(body) if isinstance(n, Inst))


def _block_parts(program, env_for) -> list:
    """The agents of one block: one per program part (a mixed kernel's vector part once per
    AIV that runs it, ``Program.vector_cores``), flags scoped to the block's cluster in a
    mixed kernel and to the whole launch otherwise."""
    if program.kind != "mixed":
        return [_Agent(PartTimeline(program.body, env_for(program.kind, 0)), 0)]
    aivs = program.vector_cores
    cube = env_for("cube", 0)
    agents = [_Agent(PartTimeline(program.body, cube), cube.pid, "cube", aivs)]
    for sb in range(aivs):
        agents.append(_Agent(PartTimeline(program.vector_body, env_for("vector", sb)),
                             cube.pid, sb, aivs))
    return agents


def _cores_per_block(program) -> int:
    """The cores one block occupies (they share the HBM with other blocks' cores)."""
    return 1 + program.vector_cores if program.kind == "mixed" else 1


def _check_args(program, args: dict) -> None:
    missing = [p.name for p in program.params
               if not (isinstance(p, TensorArg) and p.workspace) and p.name not in args]
    if missing:
        raise ValueError(f"model_launch({program.name}): no value for {', '.join(missing)}")


def model_launch(program, grid, args: dict, target=None) -> LaunchModel:
    """Model one launch of ``program`` over ``grid`` (up to 3 ints; None: one block per
    core) with the runtime ``args`` (parameter name → numpy array / anything with
    ``.shape``, or number); ``target`` defaults to the program's."""
    target = as_target(target or program.target)
    _check_args(program, args)
    model = _model_launch(program, grid, args, target, GlobalMemory(target))
    first = model.memory
    hits = first.hit_rate()
    # the dirty bytes evicted, spread over the launch (memory.py)
    writeback = first.written_back / first.moved if first.written_back else None
    if hits > REPLAY_HIT_RATE:         # mostly reuse: the HBM is shared by the missing cores
        memory = GlobalMemory(target, 1.0 - hits, _streams(program, model), writeback)
        model = _model_launch(program, grid, args, target, memory)
    elif writeback:
        model = _model_launch(program, grid, args, target, GlobalMemory(target,
                                                                         writeback=writeback))
    return _at_least_the_bandwidth(model, target)


def _at_least_the_bandwidth(model: LaunchModel, target: Target) -> LaunchModel:
    """Stretch the launch to the time its bytes take on the chip's HBM and L2 after the
    launch cost (``memory.GlobalMemory.floor_cycles``): the cores' shares are estimated block
    by block and may together exceed them."""
    floor = sum(dispatch_cycles(target)) + model.memory.floor_cycles()
    model.simulated = model.cycles
    if floor > model.cycles:
        model.core_utilization *= model.cycles / floor
        model.cycles, model.time_ms = floor, floor / (target.clock_ghz * 1e6)
    return model


def _streams(program, model: LaunchModel) -> float:
    """The GM transfers a core had in flight on average: the GM pipes' busy cycles over
    the cores' time (``memory.py``)."""
    gm = sum(b.pipe_busy.get(p, 0.0) for b in model.blocks for p in GM_PIPES)
    time = sum(b.end - b.start for b in model.blocks) * _cores_per_block(program)
    return gm / time if time else 1.0


def _model_launch(program, grid, args: dict, target: Target, memory: GlobalMemory):
    cores = target.cores_for(program.kind != "vector")
    grid = _grid3((cores,) if grid is None else grid)     # as a launch without a grid
    pids = _pids(grid)
    block_cores = _cores_per_block(program)

    def env_factory(pid, core, start, active):
        return lambda part, sb: BlockEnv(target, pid, grid, args, program.params, start,
                                         active * block_cores, core, part, memory, sb)

    if _cooperative(program):
        if len(pids) > cores:
            raise ValueError(f"{program.name}: grid {grid} has more blocks than the {cores} "
                             f"cores of {target.name}; blocks that meet or signal each other "
                             "must all run at once")
        at = sum(dispatch_cycles(target))       # the blocks are dispatched together
        per_block = [_block_parts(program, env_factory(pid, i, at, len(pids)))
                     for i, pid in enumerate(pids)]
        _Hub([a for agents in per_block for a in agents]).run()
        traces = [_merge(agents) for agents in per_block]
    else:
        traces = _schedule(program, pids, cores, env_factory, target)
    model = _launch_model(program, target, grid, cores, traces)
    model.memory = memory
    return model


def model_block(program, grid, args: dict, target, pid: tuple, core: int, start: float,
                active: int, memory: GlobalMemory | None = None) -> BlockTrace:
    """Block ``pid`` of a launch of ``program`` over ``grid`` alone on ``core`` from cycle
    ``start``, sharing the L2 and HBM with ``active`` cores: the unit the task scheduler
    (``tasks.py``) places; ``memory`` is the run's L2 (None: a cold one of its own). Blocks
    that signal each other need ``model_launch``."""
    target = as_target(target)
    grid = _grid3(grid)
    block_cores = _cores_per_block(program)
    own = memory is None
    memory = GlobalMemory(target) if own else memory
    agents = _block_parts(program, lambda part, sb: BlockEnv(
        target, pid, grid, args, program.params, start, active * block_cores, core, part,
        memory, sb))
    _Hub(agents).run()
    trace = _merge(agents)
    if own:                     # a shared L2's traffic is the caller's to count
        trace.traffic = memory.traffic()
    return trace


def _schedule(program, pids: list, cores: int, env_factory, target: Target) -> list:
    """List scheduling: each block in order takes the core that frees first, after the
    launch cost and its own dispatch (``dispatch_cycles``: a grid larger than the cores runs
    in waves, each block paying its dispatch). The cores sharing HBM with a block are those
    still busy when it starts plus the blocks starting with it (the next ones in order, up to
    the free cores), an estimate held for its run."""
    launch, dispatch = dispatch_cycles(target)
    free = [(launch, c) for c in range(cores)]
    heapq.heapify(free)
    traces = []
    for i, pid in enumerate(pids):
        start, core = heapq.heappop(free)
        start += dispatch
        busy = sum(1 for t, _ in free if t > start)
        active = busy + min(len(pids) - i, cores - busy)
        agents = _block_parts(program, env_factory(pid, core, start, active))
        _Hub(agents).run()
        trace = _merge(agents)
        traces.append(trace)
        heapq.heappush(free, (trace.end, core))
    return traces


def _merge(agents: list) -> BlockTrace:
    """One block's trace from its parts (two for a mixed kernel's cluster)."""
    first = agents[0].part.trace()
    for agent in agents[1:]:
        other = agent.part.trace()
        first.end = max(first.end, other.end)
        first.records += other.records
        first.handoffs += other.handoffs
        for pipe, busy in other.pipe_busy.items():
            first.pipe_busy[pipe] = first.pipe_busy.get(pipe, 0.0) + busy
    if len(agents) > 1:
        first.records.sort(key=lambda r: r.start)
    return first


def _launch_model(program, target: Target, grid: tuple, cores: int,
                  traces: list) -> LaunchModel:
    makespan = max((t.end for t in traces), default=0.0)
    busy = sum(t.end - t.start for t in traces)
    pipe_busy = dict.fromkeys(PIPES, 0.0)
    for t in traces:
        for pipe, cycles in t.pipe_busy.items():
            pipe_busy[pipe] += cycles
    utilization = busy / (cores * makespan) if makespan else 0.0
    return LaunchModel(program.name, target, program.kind, grid, makespan,
                       makespan / (target.clock_ghz * 1e6), cores, utilization, traces,
                       pipe_busy)


def model_kernel(jit_fn, grid, *args, **kwargs) -> LaunchModel:
    """Compile ``jit_fn`` for these arguments, read back its ``.pto`` and model the launch
    with the same arguments (a callable grid gets the bound arguments, as a launch does), in
    the launch form a launch would run (``JITFunction.launch_plan``: persistent for a grid
    larger than the cores, unless the kernel says ``launch_form="grid"``)."""
    bound = jit_fn._bind(args, kwargs)
    kernel, grid, extents = jit_fn.launch_plan(bound, grid)
    program = parse_program(kernel.asm["pto"], get_target(kernel.metadata["target"]))
    values = {**bound, **extents}
    runtime = {p.name: values[p.name] for p in program.params
               if not (isinstance(p, TensorArg) and p.workspace)}
    return model_launch(program, grid, runtime, program.target)
