"""PTO programs: the placed Tile IR as PTO virtual instructions over explicit tile buffers.

A ``Program`` is what the backend lowers (one instruction → one LLVM snippet) and what prints as
``.pto`` text in the PTO-ISA MLIR dialect (shared/reference/pto-text.md). Tiles carry their
location, dtype, shape, valid region, layout and buffer offset; loop-carried tiles are simply the
same buffer, so only scalars flow through ``scf.for`` iter_args.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..language import dtypes as dt
from .elementwise import BINARY
from .errors import InternalError
from .ir import ACC, LEFT, MAT, RIGHT, VEC, Block, Module, Value

# Standard tile configurations on 910B: loc → (blayout, slayout, fractal)
LAYOUTS = {
    VEC: ("row_major", "none_box", 512),
    MAT: ("col_major", "row_major", 512),
    LEFT: ("row_major", "row_major", 512),
    RIGHT: ("row_major", "col_major", 512),
    ACC: ("col_major", "row_major", 1024),
}

# Which hardware pipe executes each instruction (shared/reference/ascend910b.md).
PIPES = {"tload": "MTE2", "tstore": "MTE3", "tmov": "MTE1", "tmatmul": "M",
         "tmatmul.acc": "M", "texpands": "V", "tcvt": "V"}


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
        blayout, slayout, fractal = LAYOUTS[self.loc]
        vr = "?" if self.v_row is None else self.v_row
        vc = "?" if self.v_col is None else self.v_col
        return (f"!pto.tile_buf<loc={self.loc}, dtype={self.dtype.mlir}, rows={self.rows}, "
                f"cols={self.cols}, v_row={vr}, v_col={vc}, blayout={blayout}, "
                f"slayout={slayout}, fractal={fractal}, pad={self.pad}>")


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


@dataclass
class Program:
    name: str
    kind: str                    # "vector" or "cube"
    params: list                 # TensorArg | Scalar, in call order
    tiles: list
    body: list
    target: object
    buffer_bytes: dict


# -- Tile IR → PTO -----------------------------------------------------------------------------

class _Lowering:
    def __init__(self, module: Module, tensor_specs: dict):
        self.module = module
        self.specs = tensor_specs
        self.values: dict[int, object] = {}
        self.tiles_by_buffer: dict[tuple, Tile] = {}
        self.tiles: list[Tile] = []
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
        rows, cols = (1,) + t.shape if len(t.shape) == 1 else t.shape
        key = (t.space, v.addr, t.dtype, rows, cols)
        tile = self.tiles_by_buffer.get(key)
        if tile is None:
            tile = Tile(self.fresh(t.space), t.space, t.dtype, rows, cols, v.addr, rows, cols)
            self.tiles_by_buffer[key] = tile
            self.tiles.append(tile)
        self.values[v.id] = tile
        return tile

    def get(self, v: Value):
        return self.values[v.id]

    def block(self, block: Block) -> list:
        out = []
        for op in block.ops:
            self.op(op, out)
        return out

    def op(self, op, out: list) -> None:
        name = op.name
        ins = [self.get(v) for v in op.operands] if name != "scf.for" else None
        if name == "scf.for":
            lb, ub, step, *inits = [self.get(v) for v in op.operands]
            body = op.blocks[0]
            iv = self.scalar(body.args[0])
            iter_args, results, scalar_inits = [], [], []
            for init, arg, res in zip(inits, body.args[1:], op.results):
                if arg.is_tile:
                    self.values[arg.id] = init
                    self.values[res.id] = init
                else:
                    scalar_inits.append(init)
                    iter_args.append(self.scalar(arg))
                    results.append(self.scalar(res))
            loop = For(iv, lb, ub, step, scalar_inits, iter_args, results, [])
            loop.body = self.block(body)
            loop.yields = [self.get(v) for v, a in zip(body.ops[-1].operands, body.args[1:])
                           if not a.is_tile]
            out.append(loop)
            return
        if name == "scf.yield":
            return
        if name.startswith("arith.") or name in ("pto.program_id", "pto.num_programs",
                                                   "tensor.dim"):
            out.append(Inst(name, ins, [self.scalar(op.result)], dict(op.attrs)))
            return
        if name == "tile.load":
            dst = self.tile(op.result)
            out.append(Inst("tload", ins, [dst], {"pad": op.attrs["padding"]}))
        elif name == "tile.store":
            *tensor_and_offsets, src = ins
            out.append(Inst("tstore", [src], tensor_and_offsets))
        elif name == "tile.full":
            out.append(Inst("texpands", [], [self.tile(op.result)], {"value": op.attrs["value"]}))
        elif name == "tile.binary":
            binop = BINARY[op.attrs["op"]]
            scalar_rhs = not op.operands[1].is_tile
            out.append(Inst(binop.pto_scalar if scalar_rhs else binop.pto, ins,
                            [self.tile(op.result)]))
        elif name == "tile.cast":
            out.append(Inst("tcvt", ins, [self.tile(op.result)], {"rmode": "rint"}))
        elif name == "tile.mov":
            dst = self.tile(op.result)
            if dst is not ins[0]:
                out.append(Inst("tmov", ins, [dst]))
        elif name == "tile.matmul":
            dst = self.tile(op.result)
            if len(ins) == 3:
                if ins[2] is not dst:
                    raise InternalError("matmul accumulator not planned in place", str(self.module))
                out.append(Inst("tmatmul.acc", [dst, ins[0], ins[1]], [dst]))
            else:
                out.append(Inst("tmatmul", ins, [dst]))
        else:
            raise InternalError(f"no PTO lowering for {name}", str(self.module))


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
    return Program(fn.name, kind, params, lw.tiles, body, module.target,
                   dict(module.facts.get("buffer_bytes", {})))
