"""Tile IR → PTO: the placed, planned Tile IR becomes a ``Program`` of PTO instructions.

One instruction per Tile IR op (``TILE_TO_PTO`` for the ops that map one to one; a handler
method for the rest); tiles sharing a buffer and type share one ``Tile``.
"""
from __future__ import annotations

import math

from ...language import dtypes as dt
from ..elementwise import BINARY, UNARY
from ...errors import InternalError, NotOnChip
from ..ir import VEC, Block, Module, TileType, Value
from .isa import (ROW_REDUCE_REPEATS, TMP_OPS, row_reduce_scratch_cols,
                  staged_row_reduce)
from .program import (ROW_LAYOUT, WORKSPACE, For, If, Inst, Program, RowSplitRefused, Scalar,
                      TensorArg, Tile, While, row_pitch, row_tile, view2d, walk_insts)

MAX_REPEATS = 255          # TMRGSORT's repeat field (pto-isa npu/a2a3/TMrgSort.hpp)

# -- Tile IR → PTO -----------------------------------------------------------------------------

class _Lowering:
    def __init__(self, module: Module, tensor_specs: dict):
        self.module = module
        self.values: dict[int, object] = {}
        self.tiles_by_buffer: dict[tuple, Tile] = {}
        self.tiles: list[Tile] = []
        self.workspaces: list[TensorArg] = []
        self.vec_viewed = False           # a UB tile viewed at an offset (``view``)
        self.counter = 0
        self.taken = {p.hint for p in module.kernel.params}   # a tensor may be called s1

    def fresh(self, base: str) -> str:
        while True:
            self.counter += 1
            name = f"{base}{self.counter}"
            if name not in self.taken:
                return name

    def scalar(self, v: Value) -> Scalar:
        s = Scalar(self.fresh(v.hint or "s") if v.hint else self.fresh("s"), v.type.dtype)
        self.values[v.id] = s
        return s

    def tile(self, v: Value) -> Tile:
        """The tile buffer of ``v``; values sharing a buffer and type share one Tile."""
        t = v.type
        rows, cols = view2d(t.shape)
        alloc = self.module.facts.get("cube_boxes", {}).get(v.id)   # whole fractal boxes
        alloc = None if alloc == (rows, cols) else alloc
        layout = ROW_LAYOUT if v.id in self.module.facts.get("bias_rows", ()) else None
        key = (t.space, v.addr, t.dtype, rows, cols, alloc, layout)
        tile = self.tiles_by_buffer.get(key)
        if tile is None:
            tile = Tile(self.fresh(t.space), t.space, t.dtype, rows, cols, v.addr, rows, cols,
                        alloc=alloc, layout=layout)
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
        if name.startswith("arith.") or name in ("pto.program_id", "pto.num_programs",
                                                   "tensor.dim"):
            out.append(Inst(name, [self.get(v) for v in op.operands],
                            [self.scalar(op.result)], dict(op.attrs)))
            return
        self._one_to_one(op, out)

    def _one_to_one(self, op, out):
        ins = [self.get(v) for v in op.operands]
        rule = TILE_TO_PTO.get(op.name)
        if rule is None:
            raise InternalError(f"no PTO lowering for {op.name}", str(self.module))
        opcode, attrs = rule(op)
        attrs.update(_host_hints(op))
        scratch = attrs.pop("_scratch", None)
        if scratch is not None:
            attrs["tmp"] = self.tile(scratch)
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
        self._cross_core(op, out, "sync.set")

    def _pto_sync_wait(self, op, out):
        self._cross_core(op, out, "sync.wait")

    def _cross_core(self, op, out, opcode: str) -> None:
        """A cube↔vector hand-off (``split``) is FFTS mode 2 within a cluster, ordered by its
        own pipes (``_hand_off``). A kernel's pl.signal / pl.wait has no A2/A3 form: FFTS
        flags reach every core of one kind (pl.barrier) or a cluster's other half, never one
        chosen block, and they carry no count; PTO has no cache invalidation to poll a GM
        counter safely."""
        if op.attrs.get("split"):
            out.append(Inst(opcode, [], [], {**_hand_off(opcode, op.attrs),
                                             **_count_attrs(op)}))
            return
        name = "pl.signal" if opcode == "sync.set" else "pl.wait"
        raise NotOnChip(
            f"{name}: A2/A3 has no flag from one block to another (its cross-core flags, "
            f"FFTS, reach every core of a kind or the other half of a cluster, and carry no "
            f"count). Use pl.barrier() to order phases across all blocks, or split the work "
            f"into two launches", op.loc)

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
        attrs = {k: op.attrs[k] for k in ("atomic", "relu") if op.attrs.get(k)}
        out.append(Inst("tstore", [src], tensor_and_offsets, {**attrs, **_host_hints(op)}))

    def _tile_mov(self, op, out):
        src, dst = self.get(op.operands[0]), self.tile(op.result)
        if dst is not src:
            out.append(Inst("tmov", [src], [dst], {**dict(op.attrs), **_host_hints(op)}))

    def _tile_getval(self, op, out):
        tile = self.get(op.operands[0])
        at = self._element_offset(tile, self.get(op.operands[1]), out)
        out.append(Inst("tgetval", [tile, at], [self.scalar(op.result)], _host_hints(op)))

    def _tile_setval(self, op, out):
        """One element replaced in place (memory planning gives source and result one
        buffer; a copy first if it did not)."""
        src, at, value = (self.get(v) for v in op.operands)
        dst = self.tile(op.result)
        if dst is not src:
            out.append(Inst("tmov", [src], [dst], _host_hints(op)))
        at = self._element_offset(dst, at, out)
        out.append(Inst("tsetval", [at, value], [dst], _host_hints(op)))

    def _tile_load_row(self, op, out):
        """Row r of the tile (in place, as ``tile.setval``) loaded from the window at (row,
        col): one TLOAD into that row (``row_tile``). The tile holds the padding already
        (legalize_indexed.gather_rows), so the load writes the window only (``pad`` None),
        on the chip and on the host."""
        src, r, tensor, row, col = (self.get(v) for v in op.operands)
        dst = self.tile(op.result)
        if dst is not src:
            out.append(Inst("tmov", [src], [dst], _host_hints(op)))
        out.append(Inst("tload", [tensor, row, col], [row_tile(dst, r)],
                        {"pad": None, "_inside": True, **_host_hints(op)}))

    def _tile_store_row(self, op, out):
        """Row r of the value stored to the window at (row, col): one TSTORE."""
        tensor, row, col, value, r = (self.get(v) for v in op.operands)
        attrs = {"atomic": op.attrs["atomic"]} if op.attrs.get("atomic") else {}
        out.append(Inst("tstore", [row_tile(value, r)], [tensor, row, col],
                        {**attrs, **_host_hints(op)}))

    def _element_offset(self, tile: Tile, e, out: list):
        """Row-major element ``e`` as TGETVAL/TSETVAL count it: in the chip's layout, whose
        rows are padded to 32 bytes (program.row_pitch)."""
        pitch = row_pitch(tile)
        if tile.rows == 1 or pitch == tile.cols:
            return e
        def const(v):
            c = Scalar(self.fresh("c"), e.dtype)
            out.append(Inst("arith.constant", [], [c], {"value": v}))
            return c
        def arith(name, a, b):
            r = Scalar(self.fresh("e"), e.dtype)
            out.append(Inst(f"arith.{name}", [a, b], [r]))
            return r
        cols = const(tile.cols)
        row = arith("floordiv", e, cols)
        return arith("add", arith("mul", row, const(pitch)), arith("mod", e, cols))

    def view(self, tile: Tile, offset: int, rows: int, cols: int) -> Tile:
        """Another tile over ``tile``'s bytes from element ``offset`` on (row-major, rows
        dense): a row, a run of a row, or rows seen as one."""
        v = Value(TileType(tile.dtype, (rows, cols), tile.loc))
        v.addr = tile.addr + offset * tile.dtype.itemsize
        self.vec_viewed = self.vec_viewed or tile.loc == VEC
        return self.tile(v)

    def _tile_reduce(self, op, out):
        """A reduction; a row one marked ``_stages`` (passes/row_reduce.py) is, for the chip,
        pto-isa's fast two-stage form over views of the source and of its scratch
        (``isa.staged_row_reduce``), and for our simulator (``_host_only``) the one
        instruction, which it reduces in registers, fused with what computes the row."""
        self._one_to_one(op, out)
        width = op.attrs.get("_stages")
        if not width:
            return
        plain = out.pop()
        src, dst, tmp = plain.ins[0], plain.outs[0], plain.attrs["tmp"]
        at = staged_row_reduce(plain.op, src.dtype, src.rows, src.cols, width)
        chip = {k: v for k, v in plain.attrs.items() if k not in ("tmp", "_fuse")}
        chip["_chip_only"] = True
        view = self.view(src, 0, at["parts"], width)
        partials = self.view(tmp, at["partials"], at["parts"], 1)
        rows = self.view(tmp, at["partials"], src.rows, at["k"])
        tmp1 = self.view(tmp, 0, at["parts"], at["tmp1"]) if at["tmp1"] else view
        out += [Inst("treshape", [src], [view], dict(chip)),
                Inst(plain.op, [view], [partials], {**chip, "tmp": tmp1}),
                Inst("treshape", [partials], [rows], dict(chip)),
                Inst(plain.op, [rows], [dst], {**chip, "tmp": rows})]
        plain.attrs["_host_only"] = True
        out.append(plain)

    def _tile_sort32(self, op, out):
        """TSORT32 over the pairs tile (its third operand: planning gives it the result's
        buffer, a copy first if not); a row whose width is not a multiple of 32 takes the
        4-operand form, whose scratch row the chip pads."""
        key, idx, init = (self.get(v) for v in op.operands)
        dst = self.tile(op.result)
        hints = _host_hints(op)
        if dst is not init:
            out.append(Inst("tmov", [init], [dst], hints))
        attrs = dict(hints)
        if "_scratch" in op.attrs:
            attrs["tmp"] = self.tile(op.attrs["_scratch"])
        out.append(Inst("tsort32", [key, idx], [dst], attrs))

    def _tile_mrgsort(self, op, out):
        """Four runs of (value, index) pairs merged at once (``blockLen``), over rows seen as
        one list (TMRGSORT wants one-row tiles), whose groups never straddle a row, at most
        255 groups per instruction."""
        src, dst = self.get(op.operands[0]), self.tile(op.result)
        hints = _host_hints(op)
        rows, width = src.rows, src.cols
        run = op.attrs["run"]
        per_row = width // (2 * run) // 4
        chunk = max(1, MAX_REPEATS // per_row)
        for r0 in range(0, rows, chunk):
            n = min(chunk, rows - r0)
            out.append(Inst("tmrgsort", [self.view(src, r0 * width, 1, n * width)],
                            [self.view(dst, r0 * width, 1, n * width)],
                            {"block_len": 2 * run, **hints}))

    def _tile_mrglists(self, op, out):
        """List-form merges, per row: each group of runs (``take`` pairs of each, ``stride``
        pairs apart) merged whole into its slot of the result: the last merge of a full sort
        (one group), or a level of a top-k's tree (legalize_sort32.top_levels), whose result
        starts as the -inf pairs of a second operand (planning gives it that buffer, a copy
        first if not)."""
        src = self.get(op.operands[0])
        dst = self.tile(op.result)
        hints = _host_hints(op)
        if len(op.operands) == 2 and dst is not self.get(op.operands[1]):
            out.append(Inst("tmov", [self.get(op.operands[1])], [dst], hints))
        groups, stride, take = op.attrs["groups"], op.attrs["stride"], op.attrs["take"]
        slot = max(groups) * take
        tmp = self.tile(op.attrs["_scratch"])
        for r in range(src.rows):
            first = 0
            for g, size in enumerate(groups):
                lists = [self.view(src, r * src.cols + 2 * (first + j) * stride, 1, 2 * take)
                         for j in range(size)]
                whole = 2 * size * take
                scratch = tmp if whole == tmp.cols else self.view(tmp, 0, 1, whole)
                out.append(Inst("tmrgsort", lists,
                                [self.view(dst, r * dst.cols + 2 * g * slot, 1, whole)],
                                {"tmp": scratch, **hints}))
                first += size

    def _tile_matmul(self, op, out):
        ins = [self.get(v) for v in op.operands]
        dst = self.tile(op.result)
        if len(ins) == 3:
            if ins[2] is not dst:
                raise InternalError("matmul accumulator not planned in place", str(self.module))
            out.append(Inst("tmatmul.acc", [dst, ins[0], ins[1]], [dst]))
        else:
            out.append(Inst("tmatmul", ins, [dst]))


def scratch_type(op) -> TileType | None:
    """The type of the scratch tile ``op``'s A2/A3 instruction overwrites, or None: memory
    planning places it (live at ``op`` only) and this module hands it to the instruction.
    The sizes are PTOAS 0.60's verifier rules (lib/PTO/IR/PTO.cpp), which the chip's
    implementation headers need too."""
    special = _SCRATCH.get(op.name)
    if special is not None:
        return special(op)
    rule = TILE_TO_PTO.get(op.name)
    if rule is None or op.name == "tile.load":
        return None
    opcode, _ = rule(op)
    if opcode == "tsel":                   # a 4-byte compare mask of at least 16 bytes
        return TileType(dt.int32, (1, 8))
    if opcode == "tsels":     # a row of the data's type (ptoas 0.60's A2/A3 rule), as printed:
        rows, cols = view2d(op.result.type.shape)       # an (M, 1) column as its (1, M) row
        return TileType(op.result.type.dtype, (1, cols if cols > 1 else rows))
    if opcode == "tci":                    # TCI's A2/A3 vector path: 768 B (b32), 1792 B (b16)
        return TileType(dt.float32, (1, 448 if op.result.type.dtype.bits == 16 else 192))
    if opcode == "tcvt":
        return _narrowing_cvt_scratch(op)
    if opcode in ROW_REDUCE_REPEATS:
        return _row_reduce_scratch(op, opcode)
    return op.operands[0].type if opcode in TMP_OPS else None


def _row_reduce_scratch(op, opcode: str) -> TileType:
    """The scratch of a float row reduction on A2/A3 (``isa.ROW_REDUCE_REPEATS``): its rows,
    some of each row's repeats; integer reductions keep the whole source (pto-isa's safe
    default); a two-stage one (``_stages``) one row holding both stages' (isa.py)."""
    src = op.operands[0].type
    if not src.dtype.is_floating or len(src.shape) != 2:
        return src
    rows, cols = src.shape
    width = op.attrs.get("_stages")
    if width:
        return TileType(src.dtype, (1, staged_row_reduce(opcode, src.dtype, rows, cols,
                                                          width)["size"]))
    kept = row_reduce_scratch_cols(opcode, src.dtype, cols)
    return TileType(src.dtype, (rows, kept)) if kept < cols else src


def _sort32_scratch(op) -> TileType | None:
    """The unaligned TSORT32's scratch: PTOAS wants it to hold the whole source."""
    shape = op.operands[0].type.shape
    rows, n = math.prod(shape[:-1]), shape[-1]
    return None if n % 32 == 0 else TileType(dt.float32, (rows, -(-n // 32) * 32))


def _mrglists_scratch(op) -> TileType:
    """The largest group's merge (``_tile_mrglists``)."""
    ways = max(op.attrs["groups"])
    return TileType(op.result.type.dtype, (1, 2 * ways * op.attrs["take"]))


_SCRATCH = {"tile.sort32": _sort32_scratch, "tile.mrglists": _mrglists_scratch}


def _narrowing_cvt_scratch(op) -> TileType | None:
    """A2/A3's non-saturating narrowing TCVT (f32 → 16-bit, f16 → 16/8-bit integers) stages
    through a scratch; its size is PTOAS's formula (``TCvtOp::verify``) for the widest way the
    printer may view the tiles: whole, or one row at a time, or an (M, 1) tile as its row."""
    src, dst = op.operands[0].type, op.result.type
    narrowing = (src.dtype == dt.float32 and dst.dtype.bits == 16) or (
        src.dtype == dt.float16 and dst.dtype.bits in (8, 16))
    if dst.dtype.is_floating or not narrowing or op.attrs.get("saturate"):
        return None
    rows, cols = math.prod(src.shape[:-1]), src.shape[-1]
    views = [(rows, cols), (1, cols), (1, rows * cols)]
    need = max(cvt_scratch_bytes(src.dtype, dst.dtype, r, c, _alloc(c, src.dtype, dst.dtype))
               for r, c in views)
    return TileType(dt.int8, (1, max(32, -(-need // 32) * 32)))


def _alloc(cols: int, *dtypes) -> int:
    """Elements a UB row of ``cols`` is allocated as, the widest of ``dtypes``' 32-byte
    alignments (the printer's ``_row_alloc``, for either tile of a conversion)."""
    return max(-(-cols * d.itemsize // 32) * 32 // d.itemsize for d in dtypes)


def cvt_scratch_bytes(src, dst, rows: int, cols: int, src_cols: int) -> int:
    """PTOAS 0.60's least scratch for a narrowing TCVT of a ``rows`` x ``cols`` valid region
    whose source rows are ``src_cols`` elements apart."""
    if src == dt.float32:
        head = 4 * 64 * min(cols // 64, 255)
        tail = 0 if cols % 64 == 0 else 32 * ((min(rows, 255) - 1) * (src_cols // 8) +
                                              -(-(cols % 64) // 8))
        return max(head, tail)
    width = min(cols, 64)
    to_16 = 32 * -(-width // 8)
    return max(to_16, 128 + 32 * -(-width // 16)) if dst.bits == 8 else to_16


def _hand_off(opcode: str, attrs: dict) -> dict:
    """The pipe and the core (``_side``) of one flag of a workspace hand-off: the producer
    (the cube, or the vector core ``to_cube``) signals after its store (FIX / MTE3); the
    consumer waits before its load (MTE2). An ``ack`` flag goes back: the consumer signals
    once its load (MTE2) is done, the producer waits for it before its next store."""
    producer, consumer = ("vector", "cube") if attrs.get("to_cube") else ("cube", "vector")
    store_pipe = "MTE3" if attrs.get("to_cube") else "FIX"
    setter = consumer if attrs.get("ack") else producer
    if opcode == "sync.set":
        return {"pipe": "MTE2" if attrs.get("ack") else store_pipe, "_side": setter}
    waiter = producer if setter == consumer else consumer
    return {"pipe": store_pipe if attrs.get("ack") else "MTE2", "_side": waiter}


def _count_attrs(op) -> dict:
    attrs = {"flag": op.attrs["flag"]}
    if op.attrs.get("count", 1) != 1:
        attrs["count"] = op.attrs["count"]
    return attrs


def _load_attrs(op) -> dict:
    """A TLOAD's padding (``_inside``: the window is whole unless a check at run time says
    otherwise, pto/passes/fillpad.py) and the offset memory planning reserved for its second
    buffer in a double-buffered loop (``_pong_addr``, pto/passes/double_buffer.py)."""
    attrs = {"pad": 0, "_inside": True} if op.attrs["padding"] is None else \
        {"pad": op.attrs["padding"]}
    pong = op.attrs.get("_pong")
    if pong is not None and pong.addr is not None:
        attrs["_pong_addr"] = pong.addr
    return attrs


def _host_hints(op) -> dict:
    """Attributes starting with "_" (fusion groups; ``_loc``, the user's line, for errors
    about the instruction) guide our simulator only; .pto omits them."""
    hints = {k: v for k, v in op.attrs.items() if k.startswith("_")}
    if op.loc is not None:
        hints["_loc"] = op.loc
    return hints


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
    attrs = {"rmode": op.attrs["rounding"]} if op.attrs.get("rounding") else {}
    if op.attrs.get("saturate"):
        attrs["sat"] = True              # TCVT's SaturationMode::ON (legalize_types)
    return "tcvt", attrs


# Tile IR op → (PTO opcode, attributes), for ops that map one to one onto an instruction.
TILE_TO_PTO = {
    "tile.load": lambda op: ("tload", _load_attrs(op)),
    "tile.full": lambda op: ("texpands", {} if op.operands else {"value": op.attrs["value"]}),
    "tile.arange": lambda op: ("tci", {"start": op.attrs["start"]}),
    "tile.unary": _unary_rule,
    "tile.binary": _binary_rule,
    "tile.where": lambda op: ("tsel" if op.operands[2].is_tile else "tsels", {}),
    "tile.cast": _cast_rule,
    "tile.broadcast": _broadcast_rule,
    "tile.col_expand": lambda op: (f"tcolexpand{op.attrs['op']}", {}),
    "tile.row_expand": lambda op: (f"trowexpand{op.attrs['op']}", {}),
    "tile.reduce": _reduce_rule,
    "tile.reshape": lambda op: ("treshape", {}),
    "tile.bitcast": lambda op: ("treshape", {}),     # a view of the bytes as another dtype
    "tile.transpose": lambda op: ("ttrans", {}),
    "tile.slice": lambda op: ("textract", {"starts": view2d(op.attrs["starts"])
                                           if len(op.attrs["starts"]) == 2
                                           else (0,) + tuple(op.attrs["starts"]),
                                           **({"transpose": True}
                                              if op.attrs.get("transpose") else {})}),
    "tile.gather_mask": lambda op: ("tgather", {"pattern": op.attrs["pattern"]}),
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
            arg = TensorArg(p.hint, p.type.dtype, tuple(dims), tuple(strides),
                            layout=p.type.layout, logical=p.type.shape)
            lw.values[p.id] = arg
            params.append(arg)
        else:
            s = Scalar(p.hint, p.type.dtype)
            lw.values[p.id] = s
            params.append(s)
    body = lw.block(fn.body)
    kind = "cube" if module.facts.get("uses_cube") else "vector"
    program = Program(fn.name, kind, params + lw.workspaces, lw.tiles, body, module.target,
                      dict(module.facts.get("buffer_bytes", {})))
    program.run_ahead_plan = module.facts.get("run_ahead_plan", True)
    if module.facts.get("rows_split"):
        if lw.vec_viewed:
            raise RowSplitRefused("a UB tile is viewed at an offset")
        _whole_rows(program)
    return program


def _whole_rows(program: Program) -> None:
    """A plan made for the half rows one AIV holds (half_rows.hand_off_rows) as the whole rows
    of the program before the split: every UB tile's offset (and a double-buffered load's
    reserved one) doubled, within twice the UB (``vec_scale``), which split_rows.py halves
    again. (A view's offset inside its tile would not double with it: refused above.)"""
    seen = set()
    tiles = list(program.tiles)
    for n in walk_insts(program.body):
        if isinstance(n, Inst):
            tiles += [t for t in n.ins + n.outs + [n.attrs.get("tmp")] if isinstance(t, Tile)]
            if n.op == "tload" and n.outs[0].loc == VEC and "_pong_addr" in n.attrs:
                n.attrs["_pong_addr"] *= 2
    for t in tiles:
        if t.loc == VEC and id(t) not in seen:
            seen.add(id(t))
            t.addr *= 2
    if VEC in program.buffer_bytes:
        program.buffer_bytes[VEC] *= 2
    program.vec_scale = 2
