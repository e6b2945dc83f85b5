"""One block's timeline: a PTO program part executed on one core's pipes.

Control flow is executed for real: scalar instructions are evaluated with the launch's
arguments and block ids, so trip counts and branches are the real ones (tile data never flows
into scalars, so this is exact). Every tile instruction goes to its pipe and starts at max(the
pipe's free time, the issue point, what its flags wait for). The pipe model (the choices made
here where the reference is silent):

* The scalar unit (pipe S) issues instructions in program order. A scalar instruction takes
  ``scalar_cycles`` on S; dispatching a tile instruction takes ``dispatch_cycles`` on S and the
  instruction cannot start before that issue point. S does not otherwise block other pipes:
  queues are unbounded, so the scalar unit runs ahead of busy pipes.
* ``set_flag(P→Q, e)`` pushes the time P reaches it (P's free time after its earlier work, and
  not before the issue point) on a FIFO per (P, Q, e); ``wait_flag(P→Q, e)`` pops it and Q's
  next instruction starts no earlier (flags count, as in ``compiler/pto/passes/hazards.py``).
  ``barrier{ALL}`` joins every pipe, S included; ``barrier{P}`` is program order already.
* ``sync.set{pipe}`` signals a cross-core flag when its pipe reaches it; ``sync.wait{pipe}``
  holds that pipe until enough signals have arrived; ``syncall`` releases every block when
  the last one arrives (the launch answers these, ``launch.py``).
* Only tile instructions are recorded; scalar work shows in ``pipe_busy["S"]``.
"""
from __future__ import annotations

import itertools
from collections import defaultdict, deque
from dataclasses import dataclass, field

import numpy as np

from ....compiler.pto.isa import PIPES, is_scalar, is_sync, pipe_of
from ....compiler.pto import For, If, Inst, Scalar, TensorArg, While
from ....language import dtypes as dt
from ....target import Target
from ...interpreter.numerics import apply_binary, convert
from .costs import gm_bursts, instruction_cycles, valid_shape
from .memory import GlobalMemory

_DATA_WINDOWS = itertools.count()      # ids of windows placed by tile data (never alike)
GM_PIPES = ("MTE2", "MTE3", "FIX")      # the pipes that move data to or from global memory
PIPE_KIND = {"M": "compute", "V": "compute", "S": "compute", "MTE1": "memory",
             "MTE2": "memory", "MTE3": "memory", "FIX": "memory"}

# -- records ------------------------------------------------------------------------------------

@dataclass(slots=True)
class InstRecord:
    """One executed tile instruction: ``part`` is "cube" or "vector" (the core it ran on)."""
    name: str
    pipe: str
    start: float
    end: float
    flops: int
    bytes: int
    kind: str
    part: str = "vector"
    subblock: int = 0             # which of a cluster's AIVs ran it (a vector part)


@dataclass(slots=True)
class HandOff:
    """One cross-core flag operation of a block, kept apart from the instructions so the
    profile can draw the cube<->vector hand-offs: ``op`` "set" spans from its pipe reaching
    it to the flag's arrival at the other core; "wait" from its pipe reaching it to the
    flag it waited for being there (zero when it already was)."""
    flag: object
    op: str
    pipe: str
    start: float
    end: float
    part: str = "vector"
    subblock: int = 0


@dataclass
class BlockTrace:
    """One block of the launch on ``core`` (a cluster index for mixed kernels)."""
    pid: tuple
    core: int
    start: float
    end: float
    records: list = field(default_factory=list)
    pipe_busy: dict = field(default_factory=dict)
    handoffs: list = field(default_factory=list)     # HandOff: cross-core flags set and met
    # (HBM bytes, bytes moved) of a block modelled alone (launch.model_block): a graph run's
    # tasks together cannot beat them over the chip's bandwidths (tasks.schedule)
    traffic: tuple = (0, 0)

    @property
    def cycles(self) -> float:
        return self.end - self.start


@dataclass
class BlockEnv:
    """What one block sees: its ids, the grid, the launch's arguments (tensor name → array
    or anything with ``.shape``, scalar name → number), when it starts and how many cores
    share global memory with it."""
    target: Target
    pid: tuple = (0, 0, 0)
    grid: tuple = (1, 1, 1)
    args: dict = field(default_factory=dict)
    params: list = field(default_factory=list)    # the program's TensorArg | Scalar
    start: float = 0.0
    active_cores: int = 1
    core: int = 0
    part: str = "vector"
    memory: GlobalMemory | None = None     # the launch's L2 (None: every GM byte at HBM rate)
    subblock: int = 0                      # which of the cluster's AIVs (a vector part)


# -- scalar evaluation --------------------------------------------------------------------------

_INT_FAST = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "min": min, "max": max,
    "floordiv": lambda a, b: a // b if b else 0, "mod": lambda a, b: a % b if b else 0,
}
_CMP_FAST = {"lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
             "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b}


def _wrap(value: int, d: dt.dtype) -> int:
    bits = d.bits
    if -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        return value
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def _is_int(d: dt.dtype) -> bool:
    return d.is_int and d.is_signed and d != dt.bool_


def eval_scalar(inst, get) -> object:
    """The value of a scalar instruction, by the interpreter's rules (``pypto.backends.
    interpreter.numerics`` defines them); Python ints for signed integers on the common index
    arithmetic."""
    op, out = inst.op, inst.outs[0].dtype
    if op == "arith.constant":
        return convert(inst.attrs["value"], out)
    ins = [get(x) for x in inst.ins]
    name = op[len("arith."):]
    if op == "arith.cmp":
        pred = inst.attrs["pred"]
        if all(type(x) is int for x in ins):
            return _CMP_FAST[pred](*ins)
        return bool(apply_binary(pred, ins[0], ins[1], dt.bool_))
    if op == "arith.select":
        return ins[1] if bool(ins[0]) else ins[2]
    if op == "arith.cast":
        return convert(ins[0], out, inst.attrs.get("rounding"))
    if _is_int(out) and name in _INT_FAST and all(type(x) is int for x in ins):
        return _wrap(_INT_FAST[name](*ins), out)
    return convert(apply_binary(name, ins[0], ins[1], out), out)


# -- the part of a transfer inside its tensor ---------------------------------------------------

def _inside(extent: int, dim: int, offset: int) -> int:
    """How much of ``extent`` elements from ``offset`` lies inside ``0 .. dim``."""
    return max(0, min(extent, dim - offset, extent + offset))


def _contiguous_strides(dims: tuple) -> tuple:
    strides, step = [], 1
    for d in reversed(dims):
        strides.insert(0, step)
        step *= d
    return tuple(strides)


def _layout_valid(tensor, dims: tuple, offs: list, rows: int, cols: int) -> tuple:
    """The valid (rows, cols) of a load from a layout tensor (pypto.layout.load_window)."""
    if tensor.layout == "NZ":
        k1, m1, m0, c0 = dims
        return _inside(rows, m1 * m0, offs[0]), _inside(cols, k1 * c0, offs[1])
    nn, c1s, _, hw, c0 = dims
    n, c, h, w = offs
    group = c // c0
    if not (0 <= n < nn and 0 <= group < c1s):
        return 0, 0
    return _inside(rows, hw, h * tensor.logical[3] + w), _inside(cols, c0, c - group * c0)


def _as_python(value, d: dt.dtype):
    """Signed integers as Python ints (fast index arithmetic), others as numpy values."""
    if _is_int(d):
        return int(value)
    return value


# -- one part of one block on one core ----------------------------------------------------------

class PartTimeline:
    """Simulates one program part (the whole program, or the cube or vector half of a mixed
    kernel) for one block. ``run`` is a generator: it yields ("syncall" | "set" | "wait", ...)
    requests for the launch to answer and receives the time it may go on."""

    def __init__(self, body: list, env: BlockEnv):
        self.body, self.env = body, env
        self.target = env.target
        self.costs = env.target.costs
        self.free = dict.fromkeys(PIPES, float(env.start))
        self.flags: dict = defaultdict(deque)
        self.vals: dict = {}
        self.from_data: set = set()        # scalars computed from tile data (TGETVAL)
        self.records: list = []
        self.handoffs: list = []
        self.busy = dict.fromkeys(PIPES, 0.0)
        self.gm_spans = {p: [] for p in GM_PIPES}     # (start, end) of each GM transfer
        self.shapes = self._bind(env)
        self._static: dict = {}

    def _bind(self, env: BlockEnv) -> dict:
        shapes, self.strides = {}, {}
        for p in env.params:
            if isinstance(p, TensorArg):
                value = env.args.get(p.name)
                value = getattr(value, "_data", value)    # a LayoutTensor's physical array
                dims = tuple(value.shape) if value is not None else p.dims
                shapes[p.name] = tuple(int(d) for d in dims)
                steps = getattr(value, "strides", None)       # bytes (numpy's, a TensorSpec's)
                if steps is not None and getattr(value, "dtype", None) is not None:
                    size = np.dtype(value.dtype).itemsize
                    self.strides[p.name] = tuple(int(st) // size for st in steps)
            elif p.name in env.args:
                self.vals[p.name] = _as_python(convert(env.args[p.name], p.dtype), p.dtype)
        return shapes

    @property
    def end(self) -> float:
        return max(self.free.values())

    def get(self, x):
        if isinstance(x, Scalar):
            try:
                return self.vals[x.name]
            except KeyError:
                raise ValueError(f"the cycle model has no value for %{x.name} (a runtime "
                                 f"argument missing from args?)") from None
        return x

    def set(self, s: Scalar, value) -> None:
        self.vals[s.name] = _as_python(value, s.dtype)

    # -- pipes ----------------------------------------------------------------------------------

    def _issue(self, cycles: float) -> float:
        """Scalar-unit time: the in-order issue point."""
        start = self.free["S"]
        self.free["S"] = start + cycles
        self.busy["S"] += cycles
        return start

    def _tile(self, inst: Inst) -> None:
        pipe = pipe_of(inst)
        issue = self._issue(self.costs.dispatch_cycles)
        start = max(self.free[pipe], issue + self.costs.dispatch_cycles)
        streams = getattr(self.env.memory, "streams", None)
        cycles, flops, nbytes = self._cost(inst, streams or 1)
        if inst.op in ("tload", "tstore"):
            if streams is None:
                cycles += self._shared_with(pipe, start, start + cycles)
            self.gm_spans[pipe].append((start, start + cycles))
        end = start + cycles
        self.free[pipe] = end
        self.busy[pipe] += cycles
        self.records.append(InstRecord(inst.op, pipe, start, end, flops, nbytes,
                                       PIPE_KIND[pipe], self.env.part, self.env.subblock))

    def _shared_with(self, pipe: str, start: float, end: float) -> float:
        """The cycles this core's other GM transfers run within [start, end): its share of
        the memory bandwidth goes to both while they overlap, so this one takes that much
        longer (without the launch's measured average, ``memory.py``). A store of a few
        hundred cycles in flight once halved the whole of a 16 KiB load beside it."""
        shared = 0.0
        for other in GM_PIPES:
            if other == pipe:
                continue
            for s, e in reversed(self.gm_spans[other]):
                if e <= start:
                    break
                shared += max(0.0, min(e, end) - max(s, start))
        return shared

    def _cost(self, inst: Inst, sharing: float = 1):
        if inst.op in ("tload", "tstore"):
            nbytes, bursts, window = self._moved(inst)
            active = self.env.active_cores * sharing
            gm = None
            if self.env.memory is not None:
                l2, hbm = self.env.memory.access(window, nbytes, inst.op == "tstore")
                gm = self.env.memory.cycles(l2, hbm, active)
            return instruction_cycles(inst, self.target, nbytes=nbytes, bursts=bursts,
                                      active_cores=active, gm_cycles=gm)
        key = id(inst)
        cost = self._static.get(key)
        if cost is None:
            cost = self._static[key] = instruction_cycles(
                inst, self.target, active_cores=self.env.active_cores)
        return cost

    def _moved(self, inst: Inst) -> tuple:
        """(bytes, bursts, window) a load or store really moves: its tile clamped to the
        tensor at the instruction's offsets (ragged edges move less, a prefetch past the end
        nothing), the runs of global memory that takes (``gm_bursts``), and the window's key
        for the L2 (``memory.py``): tensor, offsets and valid shape, or for a GM workspace
        the block's whole buffer (what one core of the cluster stored there the other reads
        back, whatever the shapes of the two transfers)."""
        if inst.op == "tload":
            tensor, offsets, tile = inst.ins[0], inst.ins[1:], inst.outs[0]
        else:
            tile, tensor, offsets = inst.ins[0], inst.outs[0], inst.outs[1:]
        rows, cols = valid_shape(tile)
        name = getattr(tensor, "name", None)
        dims = self.shapes.get(name, ())
        layout = getattr(tensor, "layout", "ND")
        offs = [int(self.get(o)) for o in offsets]
        if layout != "ND":
            rows, cols = _layout_valid(tensor, dims, offs, rows, cols)
        elif len(dims) != len(offs):
            offs = []
        elif len(offs) == 1:
            rows, cols = min(rows, 1), _inside(cols, dims[0], offs[0])
        elif offs:      # rows and columns; a rank-3/4 tensor's leading offsets pick a plane
            inside = all(0 <= o < d for o, d in zip(offs[:-2], dims[:-2]))     # (unbatch)
            rows = _inside(rows, dims[-2], offs[-2]) if inside else 0
            cols = _inside(cols, dims[-1], offs[-1])
        size = tile.dtype.itemsize
        if getattr(tensor, "workspace", False):
            window = (name, self.env.pid)      # the cluster's hand-off buffer: one entry
        else:
            owner = None
            if any(getattr(o, "name", None) in self.from_data for o in offsets):
                owner = ("data", next(_DATA_WINDOWS))      # an address the model cannot know
            window = (name, owner, tuple(offs), rows, cols)
        if not dims:
            return rows * cols * size, None, window
        strides = self.strides.get(name) or getattr(tensor, "strides", ())
        if None in strides or len(strides) != len(dims):
            strides = _contiguous_strides(dims)
        return (rows * cols * size, gm_bursts(tensor, dims, strides, (rows, cols), size),
                window)

    def _reach(self, pipe: str) -> float:
        """When ``pipe`` gets to an instruction issued now: after its earlier work."""
        return max(self.free[pipe], self.free["S"])

    # -- execution ------------------------------------------------------------------------------

    def _scalar(self, inst: Inst):
        """Block ids and tensor extents come from the launch; arithmetic from its operands."""
        axis = inst.attrs.get("axis")
        if inst.op == "pto.program_id":
            return self.env.pid[axis]
        if inst.op == "pto.num_programs":
            return self.env.grid[axis]
        if inst.op == "pto.get_subblock_idx":
            return self.env.subblock
        if inst.op == "tensor.dim":
            tensor = inst.ins[0]
            return self.shapes.get(tensor.name, tensor.dims)[axis]
        return eval_scalar(inst, self.get)

    def run(self, body=None):
        for node in self.body if body is None else body:
            if isinstance(node, Inst):
                if is_scalar(node):
                    self._issue(self.costs.scalar_cycles)
                    self.set(node.outs[0], self._scalar(node))
                    if any(getattr(x, "name", None) in self.from_data for x in node.ins):
                        self.from_data.add(node.outs[0].name)
                elif is_sync(node):
                    yield from self._sync(node)
                else:
                    self._tile(node)
                    if node.op == "tgetval":
                        # tile data is not modelled: an index read from a tile is taken as
                        # 0, inside the tensor, so each gathered or scattered element is
                        # charged its full one-element transfer (the most it can cost);
                        # the windows it places are each a window of their own for the L2
                        # (a miss: the data may pick any row)
                        self.set(node.outs[0], 0)
                        self.from_data.add(node.outs[0].name)
            elif isinstance(node, For):
                yield from self._for(node)
            elif isinstance(node, If):
                yield from self._if(node)
            elif isinstance(node, While):
                yield from self._while(node)

    def _for(self, loop: For):
        lb, ub, step = (int(self.get(x)) for x in (loop.lb, loop.ub, loop.step))
        values = [self.get(x) for x in loop.inits]
        for iv in range(lb, ub, step) if step > 0 else ():
            self._issue(self.costs.loop_iteration_cycles)
            self.set(loop.iv, iv)
            for arg, v in zip(loop.iter_args, values):
                self.set(arg, v)
            yield from self.run(loop.body)
            values = [self.get(y) for y in loop.yields]
        for res, v in zip(loop.results, values):
            self.set(res, v)

    def _if(self, node: If):
        self._issue(self.costs.scalar_cycles)
        taken = bool(self.get(node.cond))
        yield from self.run(node.then_body if taken else node.else_body)
        yields = node.then_yields if taken else node.else_yields
        for res, y in zip(node.results, [self.get(y) for y in yields]):
            self.set(res, y)

    def _while(self, node: While):
        values = [self.get(x) for x in node.inits]
        while True:
            for arg, v in zip(node.before_args, values):
                self.set(arg, v)
            yield from self.run(node.before_body)
            self._issue(self.costs.scalar_cycles)
            forwarded = [self.get(x) for x in node.forwarded]
            if not bool(self.get(node.cond)):
                break
            for arg, v in zip(node.after_args, forwarded):
                self.set(arg, v)
            yield from self.run(node.after_body)
            values = [self.get(y) for y in node.yields]
        for res, v in zip(node.results, forwarded):
            self.set(res, v)

    def _sync(self, inst: Inst):
        op, attrs = inst.op, inst.attrs
        if op == "set_flag":
            self.flags[(attrs["src"], attrs["dst"], attrs["event"])].append(
                self._reach(attrs["src"]))
        elif op == "wait_flag":
            queue = self.flags[(attrs["src"], attrs["dst"], attrs["event"])]
            if not queue:
                raise ValueError(f"wait_flag {attrs} with no earlier set_flag: the chip would "
                                 "hang (run the hazard checker on this program)")
            dst = attrs["dst"]
            self.free[dst] = max(self.free[dst], queue.popleft())
        elif op == "barrier":
            if attrs.get("pipe") == "ALL":
                self._join(self.end)
        elif op == "syncall":
            self._join((yield ("syncall", self.end)))
        elif op == "sync.set":       # the flag reaches the other core after the hand-off
            pipe = attrs["pipe"]
            reached = self._reach(pipe)
            arrives = reached + self.costs.cross_core_sync_cycles
            self._hand_off(attrs["flag"], "set", pipe, reached, arrives)
            yield ("set", attrs["flag"], attrs.get("count", 1), arrives)
        elif op == "sync.wait":
            pipe = attrs["pipe"]
            reached = self._reach(pipe)
            ready = yield ("wait", attrs["flag"], attrs.get("count", 1), reached)
            self._hand_off(attrs["flag"], "wait", pipe, reached, max(reached, ready))
            self.free[pipe] = max(self.free[pipe], ready)

    def _hand_off(self, flag, op: str, pipe: str, start: float, end: float) -> None:
        self.handoffs.append(HandOff(flag, op, pipe, start, end, self.env.part,
                                     self.env.subblock))

    def _join(self, t: float) -> None:
        for p in self.free:
            self.free[p] = max(self.free[p], t)

    def trace(self) -> BlockTrace:
        return BlockTrace(tuple(self.env.pid), self.env.core, self.env.start, self.end,
                          self.records, dict(self.busy), self.handoffs)
