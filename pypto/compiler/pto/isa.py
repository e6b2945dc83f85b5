"""Which hardware pipe runs each PTO instruction, and what each instruction reads and writes.

An AI Core issues instructions in program order into per-pipe queues (MTE2, MTE1, M, V, MTE3,
FIX, S); pipes run concurrently and only ``set_flag``/``wait_flag`` pairs or barriers order
them (shared/reference/ascend910b.md). Both the synchronisation pass and the hazard checker
ask this module the same two questions, so they cannot disagree about the machine.

Sync instructions in a ``Program`` (``Inst.op`` and its attributes):

* ``set_flag`` / ``wait_flag`` ``{"src": pipe, "dst": pipe, "event": 0..7}``
* ``barrier`` ``{"pipe": pipe or "ALL"}``: later instructions of ``pipe`` (every pipe for ALL)
  wait until the earlier ones of that pipe (every pipe) are done
* ``syncall``: every block of the launch reaches it before any goes on
* ``sync.set`` / ``sync.wait`` ``{"pipe": pipe, "flag": 0..15}`` (wait may add ``"count"``):
  cross-core flags, one block (or the cube half of a cluster) notifying others
"""
from __future__ import annotations

import math

import numpy as np

from ...language import dtypes as dt
from .program import TensorArg, Tile

PIPES = ("MTE2", "MTE1", "M", "V", "MTE3", "FIX", "S")
EVENT_IDS = 8
CROSS_CORE_FLAGS = 16
FLAG_OPS = ("set_flag", "wait_flag")
CROSS_CORE_OPS = ("syncall", "sync.set", "sync.wait")
SYNC_OPS = FLAG_OPS + ("barrier",) + CROSS_CORE_OPS
# the ops of the broadcast-and-combine instructions trowexpand<op> / tcolexpand<op>
EXPAND_OPS = ("add", "sub", "mul", "div", "max", "min")
# instructions whose A2/A3 form takes a scratch tile (``attrs["tmp"]``, passes/scratch.py)
TMP_OPS = ("trowsum", "trowmax", "trowmin", "trowprod", "trowargmax", "trowargmin",
           "tcolargmax", "tcolargmin", "tsel", "tsels", "txor", "txors", "trem", "trems",
           "tprelu", "ttrans")

REPEAT_BYTES = 256
# A2/A3's float row reductions (pto-isa include/pto/npu/a2a3/TRowReduceOps.hpp, TRowSum.hpp):
# how much of each row their scratch holds. TROWMAX/TROWMIN fold every repeat of a row into
# the scratch's first one; TROWSUM first adds the row's repeats in pairs into it (FillTmp:
# half the row's repeats), then halves that in place. The fast paths of fp32 64x128 ...
# 8x1024 write 1024 elements, within those sizes. The scratch's rows step by its own
# columns (TileDataTmp::Cols), and under one repeat a row the instruction returns without
# reducing (its tmpRptStride check), so a row of it is never less than one repeat.
ROW_REDUCE_REPEATS = {"trowmax": lambda repeats: 1, "trowmin": lambda repeats: 1,
                      "trowsum": lambda repeats: max(1, repeats // 2)}
# fp32 tiles pto-isa's A2/A3 row reductions fold with group reductions (TRowReduceOps.hpp,
# TryOptimizeFP32Reduce): 8192 elements, shape and valid shape static and whole, the result a
# column (DN) tile
GROUP_REDUCE_SHAPES = ((64, 128), (32, 256), (16, 512), (8, 1024))


def row_reduce_scratch_cols(opcode: str, dtype, cols: int) -> int:
    """The columns of a float row reduction's scratch (its rows are the source's); ``cols``
    itself when the scratch is the whole source."""
    per_repeat = REPEAT_BYTES // dtype.itemsize
    kept = ROW_REDUCE_REPEATS[opcode](-(-cols // per_repeat)) * per_repeat
    return min(kept, cols)


def staged_row_reduce(opcode: str, dtype, rows: int, cols: int, width: int) -> dict:
    """A row reduction of (rows, cols) in two stages (compiler/passes/row_reduce.py): the
    bytes seen as (parts, width) rows reduced to a column of partials, seen as (rows, k)
    and reduced again. Its scratch holds the first stage's (parts x ``tmp1``; none for rows
    of one repeat, which pto-isa reduces without one: the view is its own) and then, from
    element ``partials``, the partials (whole 32 bytes); ``size`` in all. The second stage's
    rows are one repeat at most, their own scratch."""
    parts, k = rows * cols // width, cols // width
    per_block = 32 // dtype.itemsize
    one_repeat = width * dtype.itemsize <= REPEAT_BYTES
    tmp1 = 0 if one_repeat else row_reduce_scratch_cols(opcode, dtype, width)
    partials = parts * tmp1
    return {"parts": parts, "k": k, "tmp1": tmp1, "partials": partials,
            "size": partials + -(-parts // per_block) * per_block}


# opcode → pipe, where the opcode alone decides it
_FIXED = {"tload": "MTE2", "tmatmul": "M", "tmatmul.acc": "M", "tmatmul.bias": "M", "tci": "S", "treshape": "S",
          "tgetval": "S", "tsetval": "S"}   # the scalar unit reads/writes one UB element


# tile pad field: 0 null, 1 zero, 2 max, 3 min (the hardware's padding values)
PAD_NULL, PAD_ZERO, PAD_MAX, PAD_MIN = 0, 1, 2, 3


def pad_kind(value, dtype) -> int | None:
    """The tile pad field that produces ``value`` past a window's edge, or None when the
    hardware has no such padding (then the tile is filled with ``texpands`` first)."""
    if value == 0:
        return PAD_ZERO
    if dtype.is_floating:
        if value == math.inf:
            return PAD_MAX
        if value == -math.inf:
            return PAD_MIN
        return None
    if dtype == dt.bool_:
        return None
    info = np.iinfo(dtype.to_numpy())
    if value == info.max:
        return PAD_MAX
    if value == info.min:
        return PAD_MIN
    return None


def is_sync(inst) -> bool:
    return inst.op in SYNC_OPS


def is_scalar(inst) -> bool:
    """Scalar arithmetic and block queries run on S and touch no buffer."""
    return inst.op.startswith("arith.") or inst.op in ("pto.program_id", "pto.num_programs",
                                                        "pto.get_subblock_idx", "tensor.dim")


def pipe_of(inst) -> str:
    """The pipe that executes ``inst`` (a tile instruction)."""
    op = inst.op
    if op == "treshape" and inst.ins[0].addr != inst.outs[0].addr:
        return "V"          # a view, then a TMOV into the result's own buffer (printer)
    if op in _FIXED:
        return _FIXED[op]
    src = inst.ins[0] if inst.ins and isinstance(inst.ins[0], Tile) else None
    if op == "tstore":
        return "FIX" if src.loc == "acc" else "MTE3"
    if op in ("tmov", "textract") and src is not None:
        if src.loc == "mat":
            return "MTE1"
        if src.loc == "acc":
            return "FIX"
    if op == "texpands" and inst.outs[0].loc == "mat":
        return "MTE2"       # an L1 fill is a DMA on A2/A3 (pto-isa's TEXPANDS_MAT)
    return "V"


def footprint(loc: str, dtype, rows: int, cols: int, target) -> int:
    """Bytes a tile occupies in its buffer. Cube-side tiles are whole fractals; a UB tile's
    rows (its columns, for a one-column tile, which is column-major) are 32-byte aligned, as
    the chip lays them out."""
    item, align = dtype.itemsize, target.alignment
    if loc in ("mat", "left", "right"):
        frac_cols = target.fractal_bytes // item
        rows = -(-rows // target.fractal_rows) * target.fractal_rows
        cols = -(-cols // frac_cols) * frac_cols
        return rows * cols * item
    if loc == "acc":
        return -(-rows // 16) * 16 * (-(-cols // 16) * 16) * item
    if cols == 1 and rows > 1:
        return -(-(rows * item) // align) * align
    return rows * (-(-(cols * item) // align) * align)


def tile_extent(tile: Tile, target) -> tuple[str, int, int]:
    """(buffer, first byte, end byte); a row at a run-time row (``Tile.row_of``) may be any
    of its tile's."""
    if tile.row_of is not None:
        tile = tile.row_of[0]
    nbytes = footprint(tile.loc, tile.dtype, *tile.alloc_shape, target)
    return tile.loc, tile.addr, tile.addr + nbytes


def _resource(x, target):
    if isinstance(x, Tile):
        return tile_extent(x, target)
    if isinstance(x, TensorArg):       # global memory: any two accesses may overlap
        return ("gm:" + x.name, 0, 1)
    return None


def accesses(inst, target) -> list[tuple[str, tuple]]:
    """[("r" | "w", (buffer, start, end))] for every tile or tensor the instruction touches
    (none for a TRESHAPE in place: it names bytes, it does not move them)."""
    if inst.op == "treshape" and inst.ins[0].addr == inst.outs[0].addr:
        return []
    if inst.op == "tstore":
        reads, writes = inst.ins, inst.outs[:1]
    elif inst.op == "tfillpad":      # its tensor and offsets only say which window was loaded
        reads, writes = inst.outs, inst.outs
    else:
        reads, writes = inst.ins, inst.outs
    out = []
    tmp = inst.attrs.get("tmp")
    if tmp is not None:
        writes = list(writes) + [tmp]
    for kind, xs in (("r", reads), ("w", writes)):
        for x in xs:
            res = _resource(x, target)
            if res is not None:
                out.append((kind, res))
    return out


def conflicts(a: tuple, b: tuple) -> bool:
    """Do two (kind, extent) accesses form a hazard (same bytes, at least one write)?"""
    (ka, (buf_a, s_a, e_a)), (kb, (buf_b, s_b, e_b)) = a, b
    return (ka == "w" or kb == "w") and buf_a == buf_b and s_a < e_b and s_b < e_a


def place_above(program, tile: Tile, overflow) -> Tile:
    """``tile`` placed above everything its buffer holds so far (a pass adding a buffer after
    memory planning), and added to the program; ``overflow(end)`` makes the error when the
    buffer is too small."""
    target = program.target
    used = max([tile_extent(t, target)[2] for t in program.tiles if t.loc == tile.loc] + [0])
    tile.addr = -(-used // target.alignment) * target.alignment
    end = tile_extent(tile, target)[2]
    if end > target.buffers[tile.loc] * (program.vec_scale if tile.loc == "vec" else 1):
        raise overflow(end)
    program.tiles.append(tile)
    program.buffer_bytes[tile.loc] = max(program.buffer_bytes.get(tile.loc, 0), end)
    return tile
