"""Hazard checker: replay a PTO ``Program`` the way an AI Core runs it and report every pair of
conflicting accesses that its flags and barriers leave unordered, and every misuse of the flags.

Why a checker: pipes run concurrently (shared/reference/ascend910b.md, "Pipes and
synchronization"), so a missing ``wait_flag`` is a silent race on the chip while our host
simulation, which runs the instructions one by one, computes the right answer anyway. This
module is the contract the sync-insertion pass must satisfy; ``pto/isa.py`` answers which pipe
runs an instruction and what it touches, so the two cannot disagree about the machine.

The model (vector clocks, one per pipe, over globally numbered ticks):

* A tile instruction on pipe X ticks X; scalar instructions touch no buffer and are skipped.
  An earlier access A (pipe X, tick a) happens before a later one on pipe Y iff Y's clock knows
  X's tick a. Same-pipe accesses are always ordered. On straight-line code a clock entry is
  "X up to tick k"; it is kept as a set of tick intervals so that the merges below lose nothing
  (see ``merge``).
* ``set_flag(P→Q, e)`` snapshots P's clock into a FIFO per (P, Q, e); ``wait_flag(P→Q, e)``
  pops the oldest snapshot and joins it into Q's clock. Flags COUNT: two sets before a wait
  queue two snapshots that two waits consume in order. A second set while one is pending is
  still reported ("double-set"), because a one-bit flag on the chip would merge the two sets
  and the second wait would then hang; the replay goes on with the counting semantics so one
  mistake does not hide the next.
* ``barrier{pipe: P}`` orders P after P, which program order already does (no-op);
  ``barrier{pipe: ALL}``, ``syncall``, ``sync.set`` and ``sync.wait`` join every pipe's clock
  into every other's.
* ``scf.for``: the body is replayed LOOP_REPLAYS (3) times, accesses tagged with the
  iteration, so loop-carried hazards show; the result is merged with the path where the loop
  runs zero times unless the trip count is a known constant >= 1. Flag queue levels after 0
  (when possible), 1 and 3 iterations must agree ("unbalanced-loop" otherwise).
  ``scf.while`` replays ``before`` once, then (``after``; ``before``) three times, likewise.
* ``scf.if``: both branches replay from copies of the state and merge: accesses are united,
  flag queues must have the same levels ("unbalanced-if"), clocks take the elementwise MIN
  (the weaker knowledge; with interval sets, the intersection). Ticks are numbered globally
  (the then branch's ticks of a pipe come before the else branch's), and before the MIN a
  branch's knowledge is extended with the ticks that do not exist on that branch's path (the
  other branch's), which it knows vacuously. Without this, a load synchronised inside
  ``then`` would look unordered after the merge only because ``else`` never issued it. A
  tick issued before the If stays known only if both branches know it; one issued inside a
  branch is known iff that branch knows it, which a single number per pipe cannot say.

Mixed programs: each part (cube, vector) runs on its own core and is checked on its own;
ordering between parts through the GM workspace is the cross-core flags' job and is not
checked here.
"""
from __future__ import annotations

from dataclasses import dataclass

from ....errors import CompilationError
from ..isa import (
    EVENT_IDS,
    FLAG_OPS,
    PIPES,
    accesses,
    conflicts,
    is_scalar,
    is_sync,
    pipe_of,
    tile_extent,
)
from ..program import For, If, Inst, Program, Scalar, TensorArg, Tile, While
from ..spelling import sync_text

LOOP_REPLAYS = 3
_INDEX = {p: i for i, p in enumerate(PIPES)}
_KIND = {("w", "r"): "RAW", ("r", "w"): "WAR", ("w", "w"): "WAW"}


# -- findings ----------------------------------------------------------------------------------

def short_text(node) -> str:
    """One-line pto text of an instruction or a region head, operands by name only, so a report
    can be matched against the printed ``.pto`` without its long tile types."""
    if isinstance(node, For):
        return f"scf.for %{node.iv.name}"
    if isinstance(node, If):
        return f"scf.if {_ref(node.cond)}"
    if isinstance(node, While):
        return "scf.while"
    if is_sync(node):
        return sync_text(node)
    ins, outs = list(node.ins), list(node.outs)
    if node.op == "tload":
        ins = ins[:1]                  # the tensor, not its offsets
    elif node.op == "tstore":
        outs = outs[:1]
    text = f"pto.{node.op}"
    if ins:
        text += f" ins({', '.join(_ref(x) for x in ins)})"
    if outs:
        text += f" outs({', '.join(_ref(x) for x in outs)})"
    return text


def _ref(x) -> str:
    return f"%{x.name}" if isinstance(x, (Tile, TensorArg, Scalar)) else str(x)


def _where_text(where: tuple) -> str:
    if not where:
        return ""
    return " [" + ", ".join(f"iteration {i} of {label}" for label, i in where) + "]"


@dataclass(eq=False)
class Hazard:
    """Two conflicting accesses on different pipes that no flag or barrier orders.
    ``first`` was issued before ``second``; ``kind`` is RAW, WAR or WAW seen from ``second``;
    ``first_where``/``second_where`` are ((loop, iteration), ...) from the outermost loop."""
    kind: str
    first: Inst
    first_pipe: str
    second: Inst
    second_pipe: str
    buffer: str
    first_where: tuple = ()
    second_where: tuple = ()
    part: str = ""

    def __str__(self) -> str:
        part = f"[{self.part} part] " if self.part else ""
        return (f"{part}{self.kind} hazard on {self.buffer}: "
                f"`{short_text(self.first)}` on {self.first_pipe}{_where_text(self.first_where)}"
                f" is not ordered before "
                f"`{short_text(self.second)}` on {self.second_pipe}"
                f"{_where_text(self.second_where)}")


_MISUSE_TEXT = {
    "wait-without-set": "wait_flag with no matching earlier set_flag (deadlock on the chip)",
    "unwaited-set": "set_flag never waited for before the program ends",
    "double-set": "set_flag while the same flag is still set (no wait in between)",
    "bad-event": f"event id out of range 0..{EVENT_IDS - 1}",
    "bad-pipe": "unknown pipe",
    "unbalanced-if": "unbalanced flags across scf.if",
    "unbalanced-loop": "unbalanced flags across loop iterations",
}


@dataclass(eq=False)
class SyncMisuse:
    """A flag or barrier used in a way the chip cannot run (or would run by luck)."""
    kind: str
    inst: object
    detail: str = ""
    where: tuple = ()
    part: str = ""

    def __str__(self) -> str:
        part = f"[{self.part} part] " if self.part else ""
        detail = f" ({self.detail})" if self.detail else ""
        return (f"{part}{_MISUSE_TEXT[self.kind]}: `{short_text(self.inst)}`"
                f"{_where_text(self.where)}{detail}")


class HazardError(CompilationError):
    """The PTO program races or deadlocks; ``findings`` holds every Hazard and SyncMisuse."""

    def __init__(self, findings, program_name: str = ""):
        self.findings = list(findings)
        self.program_name = program_name
        head = (f"PTO program {program_name!r} is not correctly synchronised: "
                f"{len(self.findings)} problem(s)")
        super().__init__("\n".join([head] + [f"  {f}" for f in self.findings]))

    def __reduce__(self):
        return (type(self), (self.findings, self.program_name))


# -- replay state ------------------------------------------------------------------------------

@dataclass(eq=False, frozen=True)
class _Access:
    inst: Inst
    pipe: str
    tick: int
    kind: str            # "r" | "w"
    extent: tuple        # (buffer, first byte, end byte)
    where: tuple


@dataclass(eq=False, frozen=True)
class _Pending:
    """One set_flag not yet waited for: the source pipe's clock when it was set."""
    clock: tuple
    inst: Inst
    where: tuple


class _State:
    """What one path of execution knows: per-pipe clocks, pending flags, past accesses."""

    def __init__(self, clock, queues, history):
        self.clock = clock              # clock[y][x]: the ticks of pipe x known to pipe y
        self.queues = queues            # (src, dst, event) -> [_Pending], oldest first
        self.history = history          # buffer -> [_Access]

    @classmethod
    def initial(cls) -> _State:
        return cls([[()] * len(PIPES) for _ in PIPES], {}, {})

    def fork(self) -> _State:
        return _State([row[:] for row in self.clock],
                      {k: list(v) for k, v in self.queues.items()},
                      {k: list(v) for k, v in self.history.items()})

    def levels(self) -> dict:
        return {k: len(v) for k, v in self.queues.items() if v}


def _levels_text(levels: dict) -> str:
    if not levels:
        return "no flag set"
    return ", ".join(f"{s}->{d} event {e} x{n}" for (s, d, e), n in sorted(levels.items(),
                                                                          key=str))


# -- the replay --------------------------------------------------------------------------------

class _Replay:
    """Replays one part of a program; ``counter[x]`` is the last tick issued to pipe x on any
    path, so ticks are unique and the branches of a region occupy consecutive ranges."""

    def __init__(self, target, part: str, body: list):
        self.target = target
        self.part = part
        self.counter = [0] * len(PIPES)
        self.where: list = []
        self.findings: list = []
        self.seen: set = set()
        self.constants = _constants(body)

    def run(self, body: list) -> list:
        state = self.block(body, _State.initial())
        for queue in state.queues.values():
            for pending in queue:
                self.misuse("unwaited-set", pending.inst, where=pending.where)
        return self.findings

    # reporting
    def misuse(self, kind, node, detail="", where=None) -> None:
        key = (kind, id(node))
        if key not in self.seen:
            self.seen.add(key)
            where = tuple(self.where) if where is None else where
            self.findings.append(SyncMisuse(kind, node, detail, where, self.part))

    def hazard(self, old: _Access, new: _Access) -> None:
        kind = _KIND[old.kind, new.kind]
        buffer = self.buffer_name(old, new)
        key = (id(old.inst), id(new.inst), kind, buffer)
        if key not in self.seen:
            self.seen.add(key)
            self.findings.append(Hazard(kind, old.inst, old.pipe, new.inst, new.pipe, buffer,
                                        old.where, new.where, self.part))

    def buffer_name(self, a: _Access, b: _Access) -> str:
        buf, start, end = a.extent
        if buf.startswith("gm:"):
            return f"%{buf[3:]} (GM)"
        names = []
        for acc in (a, b):
            name = self.tile_name(acc)
            if name not in names:
                names.append(name)
        lo, hi = max(start, b.extent[1]), min(end, b.extent[2])
        return f"{' / '.join(names)} ({buf} bytes [{lo}, {hi}))"

    def tile_name(self, acc: _Access) -> str:
        for x in list(acc.inst.ins) + list(acc.inst.outs):
            if isinstance(x, Tile) and tile_extent(x, self.target) == acc.extent:
                return f"%{x.name}"
        return acc.extent[0]

    # statements
    def block(self, body: list, state: _State) -> _State:
        for node in body:
            state = self.step(node, state)
        return state

    def step(self, node, state: _State) -> _State:
        if isinstance(node, For):
            return self.for_loop(node, state)
        if isinstance(node, While):
            return self.while_loop(node, state)
        if isinstance(node, If):
            return self.branch(node, state)
        if is_sync(node):
            self.sync(node, state)
        elif not is_scalar(node):
            self.execute(node, state)
        return state

    def execute(self, inst: Inst, state: _State) -> None:
        """Tick the instruction's pipe and check each access against every earlier one."""
        pipe = pipe_of(inst)
        x = _INDEX[pipe]
        self.counter[x] += 1
        tick = self.counter[x]
        known = state.clock[x]
        known[x] = ((0, tick),)        # every tick of x so far (other paths' ones vacuously)
        where = tuple(self.where)
        for kind, extent in accesses(inst, self.target):
            new = _Access(inst, pipe, tick, kind, extent, where)
            past = state.history.setdefault(extent[0], [])
            for old in past:
                if (old.pipe != pipe and not _knows(known[_INDEX[old.pipe]], old.tick)
                        and conflicts((old.kind, old.extent), (kind, extent))):
                    self.hazard(old, new)
            past.append(new)

    # synchronisation
    def sync(self, inst: Inst, state: _State) -> None:
        if inst.op in FLAG_OPS:
            self.flag(inst, state)
        elif inst.op == "barrier" and inst.attrs.get("pipe") != "ALL":
            if inst.attrs.get("pipe") not in _INDEX:
                self.misuse("bad-pipe", inst, str(inst.attrs.get("pipe")))
        else:                           # barrier ALL, syncall, sync.set, sync.wait
            _barrier_all(state)

    def flag(self, inst: Inst, state: _State) -> None:
        src, dst, event = (inst.attrs.get(k) for k in ("src", "dst", "event"))
        if src not in _INDEX or dst not in _INDEX:
            self.misuse("bad-pipe", inst, f"{src} -> {dst}")
            return
        if not (isinstance(event, int) and 0 <= event < EVENT_IDS):
            self.misuse("bad-event", inst, f"event {event!r}")
        queue = state.queues.setdefault((src, dst, event), [])
        if inst.op == "set_flag":
            if queue:
                self.misuse("double-set", inst)
            queue.append(_Pending(tuple(state.clock[_INDEX[src]]), inst, tuple(self.where)))
            return
        if not queue:
            self.misuse("wait-without-set", inst)
            return
        row = state.clock[_INDEX[dst]]
        for i, ticks in enumerate(queue.pop(0).clock):
            row[i] = _union(row[i], ticks)

    # control flow
    def branch(self, node: If, state: _State) -> _State:
        runs = [lambda s: self.block(node.then_body, s),
                lambda s: self.block(node.else_body, s)]
        paths, t0 = self.alternatives(state, runs)
        levels = [s.levels() for s, _, _ in paths]
        if levels[0] != levels[1]:
            self.misuse("unbalanced-if", node, f"then leaves {_levels_text(levels[0])}; "
                                               f"else leaves {_levels_text(levels[1])}")
        return self.merge(paths, t0)

    def for_loop(self, node: For, state: _State) -> _State:
        trips = self.trip_count(node)
        if trips == 0:
            return state
        n = LOOP_REPLAYS if trips is None else min(trips, LOOP_REPLAYS)
        label = f"scf.for %{node.iv.name}"

        def run(s: _State) -> _State:
            levels = [s.levels()]
            for i in range(n):
                s = self.iteration(node.body, s, label, i)
                levels.append(s.levels())
            self.check_balance(node, levels, trips is None)
            return s

        if trips is not None:
            return run(state)
        paths, t0 = self.alternatives(state, [lambda s: s, run])
        return self.merge(paths, t0)

    def while_loop(self, node: While, state: _State) -> _State:
        label = "scf.while"
        state = self.iteration(node.before_body, state, label, 0)

        def run(s: _State) -> _State:
            levels = [s.levels()]
            for i in range(LOOP_REPLAYS):
                s = self.iteration(node.after_body, s, label, i)
                s = self.iteration(node.before_body, s, label, i + 1)
                levels.append(s.levels())
            self.check_balance(node, levels, True)
            return s

        paths, t0 = self.alternatives(state, [lambda s: s, run])
        return self.merge(paths, t0)

    def iteration(self, body: list, state: _State, label: str, i: int) -> _State:
        self.where.append((label, i))
        try:
            return self.block(body, state)
        finally:
            self.where.pop()

    def check_balance(self, node, levels: list, zero_possible: bool) -> None:
        """Any trip count must leave the same flags pending: compare 0 (when the loop may be
        skipped), 1 and the last replayed iteration count."""
        counts = ([0] if zero_possible else []) + [1, len(levels) - 1]
        seen = {c: levels[c] for c in counts}
        if len({tuple(sorted(v.items(), key=str)) for v in seen.values()}) > 1:
            detail = "; ".join(f"after {c} iteration(s): {_levels_text(v)}"
                               for c, v in seen.items())
            self.misuse("unbalanced-loop", node, detail)

    def trip_count(self, node: For):
        """The trip count when bounds and step are constants, else None."""
        lb, ub, step = (self.constant(v) for v in (node.lb, node.ub, node.step))
        if None in (lb, ub, step) or step <= 0:
            return None
        return max(0, -(-(ub - lb) // step))

    def constant(self, v):
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        return self.constants.get(getattr(v, "name", None))

    # merging paths
    def alternatives(self, state: _State, runs: list):
        """Replay each alternative from its own copy of ``state``; returns
        ([(state, first tick before, last tick after) per path], ticks at the fork)."""
        t0 = self.counter[:]
        paths = []
        for run in runs:
            lo = self.counter[:]
            paths.append((run(state.fork()), lo, self.counter[:]))
        return paths, t0

    def merge(self, paths: list, t0: list) -> _State:
        """Clocks: the intersection (MIN) of what each path knows, after adding to each path's
        knowledge the ticks it never issued (the other paths' ranges). Accesses: union. Queues:
        per entry likewise; when the levels differ (already reported) each flag keeps its
        longest queue, so that the waits after the region do not add a deadlock report."""
        end = self.counter[:]

        def absent(x, lo, hi):
            """Ticks of pipe x issued by the other paths of this region."""
            return tuple(iv for iv in ((t0[x], lo[x]), (hi[x], end[x])) if iv[0] < iv[1])

        def merged(vectors):
            out = []
            for x in range(len(PIPES)):
                known = None
                for v, (_, lo, hi) in zip(vectors, paths):
                    mine = _union(v[x], absent(x, lo, hi))
                    known = mine if known is None else _intersect(known, mine)
                out.append(known)
            return out

        clock = [merged([s.clock[y] for s, _, _ in paths]) for y in range(len(PIPES))]
        return _State(clock, self.merge_queues(paths, merged), _union_history(paths))

    @staticmethod
    def merge_queues(paths, merged) -> dict:
        states = [s for s, _, _ in paths]
        if len({tuple(sorted(s.levels().items(), key=str)) for s in states}) > 1:
            keys = {k for s in states for k in s.queues}
            return {k: list(max((s.queues.get(k, []) for s in states), key=len)) for k in keys}
        out = {}
        for key in states[0].queues:
            entries = list(zip(*(s.queues.get(key, []) for s in states)))
            out[key] = [_Pending(tuple(merged([e.clock for e in group])), group[0].inst,
                                 group[0].where) for group in entries]
        return out


def _union_history(paths) -> dict:
    """Every access of every path may have happened; keep each once, in replay order."""
    out: dict = {}
    for state, _, _ in paths:
        for buf, accs in state.history.items():
            mine = out.setdefault(buf, [])
            ids = {id(a) for a in mine}
            mine.extend(a for a in accs if id(a) not in ids)
    return out


def _barrier_all(state: _State) -> None:
    joined = [_union_all(col) for col in zip(*state.clock)]
    for row in state.clock:
        row[:] = joined


# -- tick sets: sorted disjoint ((after, upto), ...) meaning ticks after+1 .. upto --------------

def _knows(ticks: tuple, t: int) -> bool:
    return any(a < t <= b for a, b in ticks)


def _union(x: tuple, y: tuple) -> tuple:
    if not y or x == y:
        return x
    if not x:
        return y
    out = []
    for a, b in sorted(x + y):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return tuple(out)


def _union_all(sets) -> tuple:
    out = ()
    for ticks in sets:
        out = _union(out, ticks)
    return out


def _intersect(x: tuple, y: tuple) -> tuple:
    out, i, j = [], 0, 0
    while i < len(x) and j < len(y):
        a, b = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        if a < b:
            out.append((a, b))
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def _constants(body: list) -> dict:
    """Scalar name → value of every ``arith.constant`` (for static trip counts)."""
    out = {}
    for node in body:
        if isinstance(node, For):
            out.update(_constants(node.body))
        elif isinstance(node, If):
            out.update(_constants(node.then_body))
            out.update(_constants(node.else_body))
        elif isinstance(node, While):
            out.update(_constants(node.before_body))
            out.update(_constants(node.after_body))
        elif node.op == "arith.constant" and isinstance(node.attrs.get("value"), int):
            out[node.outs[0].name] = node.attrs["value"]
    return out


# -- entry points ------------------------------------------------------------------------------

def find_hazards(program: Program) -> list:
    """Every Hazard (unordered conflicting accesses) and SyncMisuse (flag misuse) of
    ``program``, in replay order; each part of a mixed program is checked on its own."""
    findings = []
    mixed = len(program.parts) > 1
    for kind, body in program.parts:
        replay = _Replay(program.target, kind if mixed else "", body or [])
        findings += replay.run(body or [])
    return findings


def check_program(program: Program) -> None:
    """Raise HazardError listing every finding when the program is not correctly synced."""
    findings = find_hazards(program)
    if findings:
        raise HazardError(findings, program.name)
