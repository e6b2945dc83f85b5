"""The NPU cycle model: how long a PTO program would take on the target's AI Cores.

Users without an NPU still need to know which pipe bounds their kernel, how busy the cores are
and what double buffering or more cores would buy. This module answers from the real PTO
program (the ``.pto`` the compiler emits) and the real launch arguments, with the numbers of
``targets.CostModel`` (shared/reference/ascend910b.md, "Cycle model parameters").

Three levels:

* ``instruction_cycles(inst, target)``: one tile instruction's cost from its opcode, tile
  shapes, dtypes and locations (cube fractals, vector bytes per cycle and issue overhead,
  transfer bandwidth per path, the saturating GM→UB form).
* ``simulate_block(body, env)``: one block's program on one core. Control flow is executed for
  real: scalar instructions are evaluated with the launch's arguments and block ids, so trip
  counts and branches are the real ones (tile data never flows into scalars, so this is exact).
  Every tile instruction goes to its pipe and starts at max(the pipe's free time, the issue
  point, what its flags wait for).
* ``model_launch(program, grid, args)``: the grid's blocks scheduled in order onto the cores,
  global-memory bandwidth shared between the active ones, cross-core flags and barriers
  honoured; ``model_kernel(jit_fn, grid, *args)`` compiles a kernel and models it.

The pipe model (the choices this module makes where the reference is silent):

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
  the last one arrives. In a mixed kernel the flags belong to the block's cluster (its cube
  and vector parts); otherwise they are launch-wide counters (``pl.signal``/``pl.wait``).
* Only tile instructions are recorded; scalar work shows in ``pipe_busy["S"]``.

The launch: blocks in launch order (pid0 fastest) take the core that frees first. A vector
kernel runs on the AIVs, a cube kernel on the AICs, a mixed kernel's block on one cluster (its
cube part on the AIC, its vector part on an AIV, both counted against HBM). A block's share of
HBM bandwidth is fixed when it starts: the cores still busy then plus those starting with it.
Blocks that meet (``syncall``) or signal each other all start at once (the grid must fit).
"""
from __future__ import annotations

import heapq
import inspect
from collections import defaultdict, deque
from dataclasses import dataclass, field

import numpy as np

from ...compiler.elementwise import BINARY, UNARY
from ...compiler.pto.isa import PIPES, is_scalar, is_sync, pipe_of
from ...compiler.pto import For, If, Inst, Scalar, TensorArg, Tile, While
from ...language import dtypes as dt
from ...target import GiB, Target, get_target

GM_PIPES = ("MTE2", "MTE3", "FIX")      # the pipes that move data to or from global memory
PIPE_KIND = {"M": "compute", "V": "compute", "S": "compute", "MTE1": "memory",
             "MTE2": "memory", "MTE3": "memory", "FIX": "memory"}

# -- instruction families (rules as data) -------------------------------------------------------

_TRANSCENDENTAL = ("texp", "tlog", "tsqrt", "trsqrt", "trecip", "tdiv", "tdivs", "tfmod",
                   "tfmods")
VECTOR_FAMILY = {
    **{op.pto: "unary" for op in UNARY.values() if op.pto},
    **{op.pto_scalar: "unary" for op in BINARY.values() if op.pto_scalar},
    **{op.pto: "binary" for op in BINARY.values() if op.pto},
    "tsel": "binary", "taddc": "binary", "tsubc": "binary",
    **{f"t{d}expand{op}": "binary" for d in ("row", "col")
       for op in ("add", "sub", "mul", "div", "max", "min")},
    **{op: "transcendental" for op in _TRANSCENDENTAL},
    **{f"t{d}{r}": "reduce" for d in ("row", "col")
       for r in ("sum", "max", "min", "prod", "any", "all")},
}
# vector instructions that move or convert data rather than compute (no flops)
DATA_MOVES = {"texpands", "tfillpad", "trowexpand", "tcolexpand", "tcvt", "textract", "tconcat",
              "ttrans", "tmov", "tsel", "tgather"}


def vector_family(op: str) -> str:
    """Anything not listed (copies, expands, conversions) streams like a unary op."""
    return VECTOR_FAMILY.get(op, "unary")


# -- per-instruction cost -----------------------------------------------------------------------

def _valid(tile: Tile) -> tuple[int, int]:
    rows = tile.rows if tile.v_row is None else tile.v_row
    cols = tile.cols if tile.v_col is None else tile.v_col
    return rows, cols


def tile_bytes(tile: Tile) -> int:
    rows, cols = _valid(tile)
    return rows * cols * tile.dtype.itemsize


def bytes_per_cycle(gibps: float, target: Target) -> float:
    return gibps * GiB / (target.clock_ghz * 1e9)


def transfer_path(inst) -> tuple[str, str, Tile]:
    """(source, destination, on-chip tile) of a transfer; "gm" is global memory."""
    if inst.op == "tload":
        return "gm", inst.outs[0].loc, inst.outs[0]
    src = inst.ins[0]
    if inst.op == "tstore":
        return src.loc, "gm", src
    return src.loc, inst.outs[0].loc, src


def is_transfer(inst, pipe: str) -> bool:
    if inst.op in ("tload", "tstore") or pipe in ("MTE1", "FIX"):
        return True
    return inst.op == "tmov" and isinstance(inst.ins[0], Tile) and inst.ins[0].loc == "vec" \
        and inst.outs[0].loc == "vec"


def burst_bytes(bursts: tuple, target: Target) -> int:
    """Path bytes of a GM transfer made of ``bursts = (count, length in bytes)``: whole DMA
    blocks per burst plus the burst's start-up (``CostModel.burst_*``)."""
    costs = target.costs
    count, length = bursts
    blocks = -(-length // costs.burst_block_bytes)
    return count * (blocks * costs.burst_block_bytes + costs.burst_overhead_bytes)


def transfer_cycles(src: str, dst: str, nbytes: int, target: Target,
                    active_cores: int = 1, bursts: tuple | None = None) -> float:
    """Cycles to move ``nbytes`` on one path. Paths touching global memory get at most their
    share of the chip's HBM bandwidth (``hbm_gbps`` over the active cores). ``bursts``
    (count, length) is the GM side's shape (``gm_bursts``); without it the bytes count as
    one contiguous run with no burst cost (the per-instruction figures of the reference)."""
    costs = target.costs
    if bursts is not None and bursts[0]:
        nbytes = burst_bytes(bursts, target)
    path = (src, dst)
    if path in costs.saturating:
        peak, half = costs.saturating[path]
        cycles = (half + nbytes) / bytes_per_cycle(peak, target)     # B / bw(B)
    elif path in costs.transfer_gibps:
        cycles = nbytes / bytes_per_cycle(costs.transfer_gibps[path], target)
    else:
        raise ValueError(f"the cycle model has no bandwidth for {src} -> {dst} on "
                         f"{target.name}")
    if "gm" in path:
        share = target.hbm_gbps * 1e9 / max(1, active_cores) / (target.clock_ghz * 1e9)
        cycles = max(cycles, nbytes / share)
    return cycles


def matmul_cycles(left: Tile, right: Tile, target: Target) -> tuple[float, int]:
    """(cycles, flops): fractals of M x K x N padded to the cube's fractal shape."""
    costs = target.costs
    m, k = _valid(left)
    n = _valid(right)[1]
    frac_k = target.fractal_bytes // left.dtype.itemsize
    rows = target.fractal_rows
    fractals = -(-m // rows) * -(-k // frac_k) * -(-n // rows)
    per = costs.cube_fractal_cycles.get(left.dtype.name)
    if per is None:
        raise ValueError(f"the cube has no {left.dtype.name} matmul")
    return costs.cube_head_cycles + fractals * per, 2 * m * k * n


def sort_cycles(inst, target: Target) -> tuple[float, int, int]:
    """(cycles, flops, bytes) of TSORT32, TMRGSORT and TGATHER's mask form, per pto-isa's
    cost model lines (targets.CostModel.sort32 / mrgsort / mask_gather). A multi-list
    TMRGSORT also copies its staging tile into the destination (a UB move)."""
    costs = target.costs
    src, dst = inst.ins[0], inst.outs[0]
    if inst.op == "tsort32":
        rows, cols = _valid(src)
        head, per = costs.sort32
        return head + per * rows * -(-cols // 32), rows * cols, tile_bytes(dst)
    if inst.op == "tgather":
        head, per = costs.mask_gather
        nbytes = tile_bytes(src)
        return head + per * -(-nbytes // costs.repeat_bytes), 0, nbytes
    head, per = costs.mrgsort
    pairs = sum(_valid(t)[0] * _valid(t)[1] for t in inst.ins) // 2
    cycles = head + per * pairs / 128
    if "tmp" in inst.attrs:
        move = costs.vector["unary"]
        cycles += move.issue_cycles + tile_bytes(dst) / move.bytes_per_cycle
    return cycles, pairs, tile_bytes(dst)


SORT_OPS = ("tsort32", "tmrgsort", "tgather")


def vector_cycles(inst, target: Target) -> tuple[float, int, int]:
    """(cycles, flops, bytes): the largest tile streams through the vector unit; an issue
    covers at most ``max_repeats`` repeats, each further issue pays the overhead again."""
    if inst.op in SORT_OPS:
        return sort_cycles(inst, target)
    costs = target.costs
    spec = costs.vector[vector_family(inst.op)]
    tiles = [t for t in (*inst.ins, *inst.outs) if isinstance(t, Tile)]
    nbytes = max(tile_bytes(t) for t in tiles)
    elements = max(_valid(t)[0] * _valid(t)[1] for t in tiles)
    repeats = -(-nbytes // costs.repeat_bytes)
    issues = max(1, -(-repeats // costs.max_repeats))
    cycles = (issues * spec.issue_cycles + nbytes / spec.bytes_per_cycle
              + elements * spec.cycles_per_element)
    flops = 0 if inst.op in DATA_MOVES else elements
    return cycles, flops, nbytes


def instruction_cycles(inst, target, *, nbytes: int | None = None,
                       active_cores: int = 1, bursts: tuple | None = None
                       ) -> tuple[float, int, int]:
    """(cycles, flops, bytes) of one instruction on ``target``. ``nbytes`` overrides a
    transfer's size (the part of the tile inside the tensor), ``bursts`` gives its shape in
    global memory; ``active_cores`` share HBM."""
    target = _target(target)
    costs = target.costs
    if is_sync(inst):
        return costs.sync_cycles, 0, 0
    if is_scalar(inst):
        return costs.scalar_cycles, 0, 0
    pipe = pipe_of(inst)
    if is_transfer(inst, pipe):
        src, dst, tile = transfer_path(inst)
        moved = tile_bytes(tile) if nbytes is None else nbytes
        return transfer_cycles(src, dst, moved, target, active_cores, bursts), 0, moved
    if inst.op in ("tmatmul", "tmatmul.acc", "tmatmul.bias"):
        left, right = inst.ins[-2], inst.ins[-1]
        cycles, flops = matmul_cycles(left, right, target)
        return cycles, flops, tile_bytes(left) + tile_bytes(right)
    if pipe == "M":               # texpands on the accumulator: the cube fills L0C
        acc = inst.outs[0]
        fractals = -(-tile_bytes(acc) // costs.acc_fractal_bytes)
        return costs.cube_head_cycles + fractals, 0, tile_bytes(acc)
    if pipe == "S":               # tci writes element by element; treshape is metadata
        out = inst.outs[0]
        count = out.rows * out.cols if inst.op == "tci" else 1
        return count * costs.scalar_cycles, 0, tile_bytes(out) if inst.op == "tci" else 0
    return vector_cycles(inst, target)


def _target(target) -> Target:
    return get_target(target) if isinstance(target, str) else target


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


@dataclass
class BlockTrace:
    """One block of the launch on ``core`` (a cluster index for mixed kernels)."""
    pid: tuple
    core: int
    start: float
    end: float
    records: list = field(default_factory=list)
    pipe_busy: dict = field(default_factory=dict)

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
    """The value of a scalar instruction, by the interpreter's rules (``pypto.backends.interpreter``
    defines them); Python ints for signed integers on the common index arithmetic."""
    from ..interpreter.numerics import apply_binary, convert
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


def gm_bursts(tensor, dims: tuple, strides: tuple, window: tuple, itemsize: int) -> tuple:
    """(count, bytes) of the contiguous runs of global memory a transfer of the valid
    ``window`` (rows, cols) touches. ND: one run per row of the window, merged into one when
    the rows are whole and back to back; a column stride other than 1 makes every element a
    run. NZ: one run per column of fractals (16 rows x 32 bytes each, consecutive down the
    rows), one in all when the window spans every row. NC1HWC0: one run of pixels x 32 bytes
    when the window takes the whole channel group, else one per pixel."""
    rows, cols = window
    if not rows or not cols:
        return (0, 0)
    layout = getattr(tensor, "layout", "ND")
    if layout == "NZ":
        k1, m1, m0, c0 = dims
        if rows >= m1 * m0:
            return (1, rows * cols * itemsize)
        return (-(-cols // c0), rows * c0 * itemsize)
    if layout == "NC1HWC0":
        c0 = dims[-1]
        return (1, rows * cols * itemsize) if cols == c0 else (rows, cols * itemsize)
    if len(dims) == 1:
        return (1, cols * itemsize) if strides[0] == 1 else (cols, itemsize)
    s0, s1 = strides[-2], strides[-1]
    if s1 != 1:
        return (rows * cols, itemsize)
    if rows == 1 or (cols == dims[-1] and s0 == cols):
        return (1, rows * cols * itemsize)
    return (rows, cols * itemsize)


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

class _Part:
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
        self.records: list = []
        self.busy = dict.fromkeys(PIPES, 0.0)
        self.shapes = self._bind(env)
        self._static: dict = {}

    def _bind(self, env: BlockEnv) -> dict:
        from ..interpreter.numerics import convert
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
        # a load and a store of one core in flight together split the core's share of HBM
        sharing = 2 if inst.op in ("tload", "tstore") and any(
            self.free[p] > start for p in GM_PIPES if p != pipe) else 1
        cycles, flops, nbytes = self._cost(inst, sharing)
        end = start + cycles
        self.free[pipe] = end
        self.busy[pipe] += cycles
        self.records.append(InstRecord(inst.op, pipe, start, end, flops, nbytes,
                                       PIPE_KIND[pipe], self.env.part))

    def _cost(self, inst: Inst, sharing: int = 1):
        if inst.op in ("tload", "tstore"):
            nbytes, bursts = self._moved(inst)
            return instruction_cycles(inst, self.target, nbytes=nbytes, bursts=bursts,
                                      active_cores=self.env.active_cores * sharing)
        key = id(inst)
        cost = self._static.get(key)
        if cost is None:
            cost = self._static[key] = instruction_cycles(
                inst, self.target, active_cores=self.env.active_cores)
        return cost

    def _moved(self, inst: Inst) -> tuple:
        """(bytes, bursts) a load or store really moves: its tile clamped to the tensor at
        the instruction's offsets (ragged edges move less, a prefetch past the end nothing),
        and the runs of global memory that takes (``gm_bursts``)."""
        if inst.op == "tload":
            tensor, offsets, tile = inst.ins[0], inst.ins[1:], inst.outs[0]
        else:
            tile, tensor, offsets = inst.ins[0], inst.outs[0], inst.outs[1:]
        rows, cols = _valid(tile)
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
        if not dims:
            return rows * cols * size, None
        strides = self.strides.get(name) or getattr(tensor, "strides", ())
        if None in strides or len(strides) != len(dims):
            strides = _contiguous_strides(dims)
        return rows * cols * size, gm_bursts(tensor, dims, strides, (rows, cols), size)

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
                elif is_sync(node):
                    yield from self._sync(node)
                else:
                    self._tile(node)
                    if node.op == "tgetval":
                        # tile data is not modelled: an index read from a tile is taken as
                        # 0, inside the tensor, so each gathered or scattered element is
                        # charged its full one-element transfer (the most it can cost)
                        self.set(node.outs[0], 0)
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
        elif op == "sync.set":
            pipe = attrs["pipe"]
            yield ("set", attrs["flag"], attrs.get("count", 1), self._reach(pipe))
        elif op == "sync.wait":
            pipe = attrs["pipe"]
            ready = yield ("wait", attrs["flag"], attrs.get("count", 1), self._reach(pipe))
            self.free[pipe] = max(self.free[pipe], ready)

    def _join(self, t: float) -> None:
        for p in self.free:
            self.free[p] = max(self.free[p], t)

    def trace(self) -> BlockTrace:
        return BlockTrace(tuple(self.env.pid), self.env.core, self.env.start, self.end,
                          self.records, dict(self.busy))


# -- cross-core flags and barriers --------------------------------------------------------------

class _Agent:
    def __init__(self, part: _Part, scope):
        self.part, self.scope = part, scope
        self.gen = part.run()


class _Flags:
    """Cross-core flag counters: signals are (time, count) tokens; a wait takes the oldest
    ``count`` of them and may go on when the last one it took had arrived."""

    def __init__(self):
        self.tokens: dict = defaultdict(deque)

    def post(self, key, t: float, count: int) -> None:
        self.tokens[key].append([t, count])

    def take(self, key, count: int) -> float | None:
        queue = self.tokens[key]
        if sum(c for _, c in queue) < count:
            return None
        ready = 0.0
        while count:
            tok = queue[0]
            used = min(count, tok[1])
            tok[1] -= used
            count -= used
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
        self.waiting: list = []          # (agent index, flag key, count, time)
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
        scope = self.agents[i].scope
        if kind == "set":
            flag, count, t = rest
            self.flags.post((scope, flag), t, count)
            self._resume(i, t)
        elif kind == "wait":
            flag, count, t = rest
            self.waiting.append((i, (scope, flag), count, t))
        else:
            self.arrived.append((i, rest[0]))

    def _wake_waiters(self) -> None:
        still = []
        for i, key, count, t in self.waiting:
            ready = self.flags.take(key, count)
            if ready is None and self.standalone:
                ready = t
            if ready is None:
                still.append((i, key, count, t))
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
    part = _Part(program_part_body, env)
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

    def bound_pipe(self) -> str:
        return max(self.pipe_busy, key=self.pipe_busy.get)

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
        lines.append(f"  bound by {self.bound_pipe()}")
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
    from ...compiler.pto import walk_insts
    return (n for n in walk_insts(body) if isinstance(n, Inst))


def _block_parts(program, env_for) -> list:
    """The agents of one block: one per program part, flags scoped to the block's cluster
    in a mixed kernel and to the whole launch otherwise."""
    agents = []
    for part_name, body in program.parts:
        env = env_for(part_name)
        scope = env.pid if program.kind == "mixed" else 0
        agents.append(_Agent(_Part(body, env), scope))
    return agents


def _check_args(program, args: dict) -> None:
    missing = [p.name for p in program.params
               if not (isinstance(p, TensorArg) and p.workspace) and p.name not in args]
    if missing:
        raise ValueError(f"model_launch({program.name}): no value for {', '.join(missing)}")


def model_launch(program, grid, args: dict, target=None) -> LaunchModel:
    """Model one launch of ``program`` over ``grid`` (up to 3 ints; None: one block per
    core) with the runtime ``args`` (parameter name → numpy array / anything with
    ``.shape``, or number); ``target`` defaults to the program's."""
    target = _target(target or program.target)
    _check_args(program, args)
    cores = target.cores_for(program.kind != "vector")
    grid = _grid3((cores,) if grid is None else grid)     # as a launch without a grid
    pids = _pids(grid)
    parts = len(program.parts)

    def env_factory(pid, core, start, active):
        return lambda part: BlockEnv(target, pid, grid, args, program.params, start,
                                     active * parts, core, part)

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
    return _launch_model(program, target, grid, cores, traces)


def dispatch_cycles(target: Target) -> tuple[float, float]:
    """(launch, per-task dispatch) in cycles of the target's clock (``CostModel``)."""
    c = target.costs
    return c.launch_us * target.clock_ghz * 1e3, c.task_dispatch_us * target.clock_ghz * 1e3


def model_block(program, grid, args: dict, target, pid: tuple, core: int, start: float,
                active: int) -> BlockTrace:
    """Block ``pid`` of a launch of ``program`` over ``grid`` alone on ``core`` from cycle
    ``start``, sharing HBM with ``active`` cores: the unit the task scheduler
    (``task_model``) places. Blocks that signal each other need ``model_launch``."""
    target = _target(target)
    grid = _grid3(grid)
    parts = len(program.parts)
    agents = _block_parts(program, lambda part: BlockEnv(
        target, pid, grid, args, program.params, start, active * parts, core, part))
    _Hub(agents).run()
    return _merge(agents)


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
    with the same arguments (a callable grid gets the bound arguments, as a launch does)."""
    from ...compiler.pto.reader import parse_program
    kernel = jit_fn.compile(*args, **kwargs)
    program = parse_program(kernel.asm["pto"], get_target(kernel.metadata["target"]))
    bound = inspect.signature(jit_fn.fn).bind(*args, **kwargs)
    bound.apply_defaults()
    values = dict(bound.arguments)
    if callable(grid):
        grid = grid(dict(values))
    runtime = {p.name: values[p.name] for p in program.params
               if not (isinstance(p, TensorArg) and p.workspace)}
    return model_launch(program, grid, runtime, program.target)
