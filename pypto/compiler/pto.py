"""PTO programs: the placed Tile IR as PTO virtual instructions over explicit tile buffers.

A ``Program`` is what the backend lowers (one instruction → one LLVM snippet) and what prints as
``.pto`` text in the PTO-ISA MLIR dialect (shared/reference/pto-text.md). Tiles carry their
location, dtype, shape, valid region, layout and buffer offset; loop-carried tiles are simply the
same buffer, so only scalars flow through ``scf.for`` iter_args.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..language import dtypes as dt
from .elementwise import BINARY, UNARY
from .errors import CompilationError, InternalError
from .ir import ACC, LEFT, MAT, RIGHT, VEC, Block, Module, Value

# Standard tile configurations on 910B: loc → (blayout, slayout, fractal)
LAYOUTS = {
    VEC: ("row_major", "none_box", 512),
    MAT: ("col_major", "row_major", 512),
    LEFT: ("row_major", "row_major", 512),
    RIGHT: ("row_major", "col_major", 512),
    ACC: ("col_major", "row_major", 1024),
}



@dataclass
class Tile:
    name: str
    loc: str
    dtype: dt.dtype
    rows: int
    cols: int
    addr: int
    v_row: int | None = None     # valid region; None prints as "?" (dynamic)
    v_col: int | None = None
    pad: int = 0

    @property
    def numel(self) -> int:
        return self.rows * self.cols

    def type_text(self) -> str:
        """The chip's tile type: a UB tile's rows (a one-column tile's column) are allocated
        in whole 32 bytes, so ``rows``/``cols`` may exceed the valid ``v_row``/``v_col``."""
        blayout, slayout, fractal = LAYOUTS[self.loc]
        rows, cols = self.rows, self.cols
        if self.loc == VEC and self.cols == 1 and self.rows > 1:
            blayout = "col_major"     # per-row scalars (reduction results, row operands)
            rows = _whole_32_bytes(rows, self.dtype)
        elif self.loc == VEC:
            cols = _whole_32_bytes(cols, self.dtype)
        vr = "?" if self.v_row is None else self.v_row
        vc = "?" if self.v_col is None else self.v_col
        return (f"!pto.tile_buf<loc={self.loc}, dtype={self.dtype.mlir}, rows={rows}, "
                f"cols={cols}, v_row={vr}, v_col={vc}, blayout={blayout}, "
                f"slayout={slayout}, fractal={fractal}, pad={self.pad}>")


def _whole_32_bytes(n: int, dtype) -> int:
    per = max(1, 32 // dtype.itemsize)
    return -(-n // per) * per


@dataclass
class Scalar:
    name: str
    dtype: dt.dtype


@dataclass
class TensorArg:
    """A kernel tensor parameter; ``dims``/``strides`` entries are ints where specialised."""
    name: str
    dtype: dt.dtype
    dims: tuple
    strides: tuple
    workspace: bool = False      # the hidden GM workspace of a cube/vector split (WORKSPACE)

    @property
    def rank(self) -> int:
        return len(self.dims)


@dataclass
class Inst:
    op: str                      # tload, tadd, tadds, arith.add, ...
    ins: list
    outs: list
    attrs: dict = field(default_factory=dict)


@dataclass
class For:
    iv: Scalar
    lb: Scalar
    ub: Scalar
    step: Scalar
    inits: list
    iter_args: list
    results: list
    body: list
    yields: list = field(default_factory=list)
    stages: int = 1              # 2: double-buffered (see passes/double_buffer.py)


@dataclass
class If:
    cond: Scalar
    then_body: list
    else_body: list
    results: list            # scalar results (tiles are merged through their shared buffer)
    then_yields: list
    else_yields: list


@dataclass
class While:
    inits: list
    before_args: list
    before_body: list
    cond: Scalar
    forwarded: list          # values passed on by the condition (the loop's results)
    after_args: list
    after_body: list
    yields: list
    results: list


@dataclass
class Program:
    """``kind`` is "vector", "cube" or "mixed"; a mixed kernel has two parts (the cube part in
    ``body``, the vector part in ``vector_body``) that run on the two kinds of core of a
    cluster and exchange tiles through the GM workspace."""
    name: str
    kind: str
    params: list                 # TensorArg | Scalar, in call order
    tiles: list
    body: list
    target: object
    buffer_bytes: dict
    vector_body: list | None = None

    @property
    def parts(self) -> list[tuple[str, list]]:
        if self.kind == "mixed":
            return [("cube", self.body), ("vector", self.vector_body)]
        return [(self.kind, self.body)]


def nested_bodies(node) -> list[list]:
    """The instruction lists directly inside a loop or branch (none for an instruction)."""
    if isinstance(node, For):
        return [node.body]
    if isinstance(node, If):
        return [node.then_body, node.else_body]
    if isinstance(node, While):
        return [node.before_body, node.after_body]
    return []


def walk_insts(body: list):
    """Every node of ``body``, loops and branches before what they contain, in order."""
    for node in body:
        yield node
        for nested in nested_bodies(node):
            yield from walk_insts(nested)


WORKSPACE = "pypto_workspace"     # parameter name of the GM workspace in .pto


# -- Tile IR → PTO -----------------------------------------------------------------------------

class _Lowering:
    def __init__(self, module: Module, tensor_specs: dict):
        self.module = module
        self.values: dict[int, object] = {}
        self.tiles_by_buffer: dict[tuple, Tile] = {}
        self.tiles: list[Tile] = []
        self.workspaces: list[TensorArg] = []
        self.counter = 0

    def fresh(self, base: str) -> str:
        self.counter += 1
        return f"{base}{self.counter}"

    def scalar(self, v: Value) -> Scalar:
        s = Scalar(self.fresh(v.hint or "s") if v.hint else self.fresh("s"), v.type.dtype)
        self.values[v.id] = s
        return s

    def tile(self, v: Value) -> Tile:
        """The tile buffer of ``v``; values sharing a buffer and type share one Tile."""
        t = v.type
        rows, cols = view2d(t.shape)
        key = (t.space, v.addr, t.dtype, rows, cols)
        tile = self.tiles_by_buffer.get(key)
        if tile is None:
            tile = Tile(self.fresh(t.space), t.space, t.dtype, rows, cols, v.addr, rows, cols)
            self.tiles_by_buffer[key] = tile
            self.tiles.append(tile)
        self.values[v.id] = tile
        return tile

    def get(self, v: Value):
        if v.id not in self.values and v.is_tile:
            return self.tile(v)
        return self.values[v.id]

    def scalars(self, values) -> list:
        return [self.scalar(v) for v in values if not v.is_tile]

    def block(self, block: Block) -> list:
        out = []
        for op in block.ops:
            self.op(op, out)
        return out

    def _terminator_scalars(self, block: Block) -> list:
        return [self.get(v) for v in block.ops[-1].operands if not v.is_tile]

    def op(self, op, out: list) -> None:
        name = op.name
        if name in ("scf.yield", "scf.condition"):
            return
        handler = getattr(self, "_" + name.replace(".", "_"), None)
        if handler is not None:
            handler(op, out)
            return
        ins = [self.get(v) for v in op.operands]
        if name.startswith("arith.") or name in ("pto.program_id", "pto.num_programs",
                                                   "tensor.dim"):
            out.append(Inst(name, ins, [self.scalar(op.result)], dict(op.attrs)))
            return
        rule = TILE_TO_PTO.get(name)
        if rule is None:
            raise InternalError(f"no PTO lowering for {name}", str(self.module))
        opcode, attrs = rule(op)
        attrs.update(_host_hints(op))
        out.append(Inst(opcode, ins, [self.tile(op.result)], attrs))

    def _scf_for(self, op, out):
        lb, ub, step, *inits = [self.get(v) for v in op.operands]
        body = op.blocks[0]
        iv = self.scalar(body.args[0])
        scalar_inits = [i for i, a in zip(inits, body.args[1:]) if not a.is_tile]
        loop = For(iv, lb, ub, step, scalar_inits, self.scalars(body.args[1:]),
                   self.scalars(op.results), [])
        loop.body = self.block(body)
        loop.yields = self._terminator_scalars(body)
        loop.stages = op.attrs.get("num_stages", 1)
        out.append(loop)

    def _scf_if(self, op, out):
        cond = self.get(op.operands[0])
        then_body = self.block(op.blocks[0])
        else_body = self.block(op.blocks[1])
        out.append(If(cond, then_body, else_body, self.scalars(op.results),
                      self._terminator_scalars(op.blocks[0]),
                      self._terminator_scalars(op.blocks[1])))

    def _scf_while(self, op, out):
        before, after = op.blocks
        inits = [self.get(v) for v in op.operands if not v.is_tile]
        before_args = self.scalars(before.args)
        before_body = self.block(before)
        cond, *forwarded = [self.get(v) for v in before.ops[-1].operands
                            if not v.is_tile or v is before.ops[-1].operands[0]]
        after_args = self.scalars(after.args)
        after_body = self.block(after)
        out.append(While(inits, before_args, before_body, cond, forwarded, after_args,
                         after_body, self._terminator_scalars(after), self.scalars(op.results)))

    def _pto_syncall(self, op, out):
        # the chip drains every pipe before the cores meet
        out += [Inst("barrier", [], [], {"pipe": "ALL"}), Inst("syncall", [], [])]

    def _pto_sync_set(self, op, out):
        self._cross_core(op, out, "sync.set", split_pipe="FIX", pipe="MTE3")

    def _pto_sync_wait(self, op, out):
        self._cross_core(op, out, "sync.wait", split_pipe="MTE2", pipe="S")

    def _cross_core(self, op, out, opcode: str, split_pipe: str, pipe: str) -> None:
        """A cube→vector hand-off (``split``) is ordered by its own pipes; a kernel's
        pl.signal / pl.wait drains every pipe first (set) or holds them all after (wait)."""
        if op.attrs.get("split"):
            out.append(Inst(opcode, [], [], {"pipe": split_pipe, **_count_attrs(op)}))
            return
        if self.module.facts.get("uses_cube"):
            raise CompilationError("pl.signal/pl.wait in a kernel that uses matmul are not "
                                   "supported yet (the cube and vector parts would each need "
                                   "their own flags)", op.loc)
        flag = Inst(opcode, [], [], {"pipe": pipe, **_count_attrs(op)})
        drain = Inst("barrier", [], [], {"pipe": "ALL"})
        out += [drain, flag] if opcode == "sync.set" else [flag, drain]

    def _tensor_workspace(self, op, out):
        """This block's slot of the GM workspace (see passes/memory_space.py)."""
        rows, cols = view2d(op.attrs["shape"])
        arg = TensorArg(f"{WORKSPACE}{op.attrs['slot']}", op.result.type.dtype, (rows, cols),
                        (cols, 1), workspace=True)
        self.values[op.result.id] = arg
        self.workspaces.append(arg)

    def _tile_alloc(self, op, out):
        self.tile(op.result)          # UB space, no instruction

    def _pto_set_flag(self, op, out):
        out.append(Inst("set_flag", [], [], dict(op.attrs)))

    def _pto_wait_flag(self, op, out):
        out.append(Inst("wait_flag", [], [], dict(op.attrs)))

    def _pto_pipe_barrier(self, op, out):
        out.append(Inst("barrier", [], [], dict(op.attrs)))

    def _tile_store(self, op, out):
        *tensor_and_offsets, src = [self.get(v) for v in op.operands]
        attrs = {"atomic": op.attrs["atomic"]} if op.attrs.get("atomic") else {}
        out.append(Inst("tstore", [src], tensor_and_offsets, {**attrs, **_host_hints(op)}))

    def _tile_mov(self, op, out):
        src, dst = self.get(op.operands[0]), self.tile(op.result)
        if dst is not src:
            out.append(Inst("tmov", [src], [dst], {**dict(op.attrs), **_host_hints(op)}))

    def _tile_matmul(self, op, out):
        ins = [self.get(v) for v in op.operands]
        dst = self.tile(op.result)
        if len(ins) == 3:
            if ins[2] is not dst:
                raise InternalError("matmul accumulator not planned in place", str(self.module))
            out.append(Inst("tmatmul.acc", [dst, ins[0], ins[1]], [dst]))
        else:
            out.append(Inst("tmatmul", ins, [dst]))


def _count_attrs(op) -> dict:
    attrs = {"flag": op.attrs["flag"]}
    if op.attrs.get("count", 1) != 1:
        attrs["count"] = op.attrs["count"]
    return attrs


def _host_hints(op) -> dict:
    """Attributes starting with "_" (fusion groups) guide our simulator only; .pto omits them."""
    return {k: v for k, v in op.attrs.items() if k.startswith("_")}


def view2d(shape) -> tuple[int, int]:
    """PTO tiles are 2-D: a scalar tile is 1x1 and a vector is one row."""
    if not shape:
        return 1, 1
    return (1, shape[0]) if len(shape) == 1 else tuple(shape)


def _unary_rule(op):
    return UNARY[op.attrs["op"]].pto, {}


def _binary_rule(op):
    spec = BINARY[op.attrs["op"]]
    scalar_rhs = not op.operands[1].is_tile
    attrs = {"cmp": op.attrs["op"]} if spec.result == "bool" else {}
    return (spec.pto_scalar if scalar_rhs else spec.pto), attrs


def _reduce_rule(op):
    rank = len(op.operands[0].type.shape)
    direction = "row" if rank == 1 or op.attrs["axis"] == 1 else "col"
    return f"t{direction}{op.attrs['op']}", {}


def _broadcast_rule(op):
    src = view2d(op.operands[0].type.shape)
    dst = view2d(op.result.type.shape)
    return ("trowexpand" if src[0] == dst[0] else "tcolexpand"), {}


def _cast_rule(op):
    return "tcvt", ({"rmode": op.attrs["rounding"]} if op.attrs.get("rounding") else {})


# Tile IR op → (PTO opcode, attributes), for ops that map one to one onto an instruction.
TILE_TO_PTO = {
    "tile.load": lambda op: ("tload", {"pad": op.attrs["padding"]}),
    "tile.full": lambda op: ("texpands", {} if op.operands else {"value": op.attrs["value"]}),
    "tile.arange": lambda op: ("tci", {"start": op.attrs["start"]}),
    "tile.unary": _unary_rule,
    "tile.binary": _binary_rule,
    "tile.where": lambda op: ("tsel", {}),
    "tile.cast": _cast_rule,
    "tile.broadcast": _broadcast_rule,
    "tile.reduce": _reduce_rule,
    "tile.reshape": lambda op: ("treshape", {}),
    "tile.transpose": lambda op: ("ttrans", {}),
    "tile.slice": lambda op: ("textract", {"starts": view2d(op.attrs["starts"])
                                           if len(op.attrs["starts"]) == 2
                                           else (0,) + tuple(op.attrs["starts"])}),
    "tile.concat": lambda op: ("tconcat", {"axis": 1 if len(op.result.type.shape) < 2
                                           else op.attrs["axis"]}),
}


def lower_to_pto(module: Module, tensor_specs: dict) -> Program:
    """``tensor_specs``: param name → (dims, strides) with ints where specialised, else None."""
    lw = _Lowering(module, tensor_specs)
    fn = module.kernel
    params = []
    for p in fn.params:
        if p.is_tensor:
            dims, strides = tensor_specs[p.hint]
            arg = TensorArg(p.hint, p.type.dtype, tuple(dims), tuple(strides))
            lw.values[p.id] = arg
            params.append(arg)
        else:
            s = Scalar(p.hint, p.type.dtype)
            lw.values[p.id] = s
            params.append(s)
    body = lw.block(fn.body)
    kind = "cube" if module.facts.get("uses_cube") else "vector"
    return Program(fn.name, kind, params + lw.workspaces, lw.tiles, body, module.target,
                   dict(module.facts.get("buffer_bytes", {})))
