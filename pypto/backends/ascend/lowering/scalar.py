"""The scalar unit: index arithmetic, comparisons and conversions on single values."""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from ....language import dtypes as dt
from ..lowering_utils import (convert, safe_floordiv, safe_mod, safe_shift, storage_type)
from ....compiler.pto.program import row_pitch
from .vector import BINARY_RULES, CMP_PREDICATES


def _define(cg, inst, value):
    cg.vals[id(inst.outs[0])] = value


def constant(cg, inst):
    d = inst.outs[0].dtype
    v = inst.attrs["value"]
    if d == dt.bfloat16:      # kept as raw bits: round the value the way the dtype does
        value = int(np.array(v, np.float32).astype(d.to_numpy()).view(np.uint16))
    else:               # past the dtype's range: its infinity (llvmlite cannot pack it)
        value = d.rounded(v) if d.is_floating else int(v)
    _define(cg, inst, ir.Constant(storage_type(d), value))


def cast(cg, inst):
    src = inst.ins[0]
    _define(cg, inst, convert(cg.b, cg.get(src), src.dtype, inst.outs[0].dtype))


def compare(cg, inst):
    a, c = inst.ins
    bit = CMP_PREDICATES[inst.attrs["pred"]](cg.b, cg.get(a), cg.get(c), a.dtype)
    _define(cg, inst, cg.b.zext(bit, storage_type(dt.bool_)))


def select(cg, inst):
    c, x, y = (cg.get(v) for v in inst.ins)
    _define(cg, inst, cg.b.select(cg.truth(c), x, y))


def _binop(name):
    def rule(cg, inst):
        x, y = (cg.get(v) for v in inst.ins)
        d = inst.outs[0].dtype
        b = cg.b
        if name == "floordiv":
            value = safe_floordiv(b, x, y)
        elif name == "mod":
            value = safe_mod(b, x, y)
        elif name in ("shl", "shr"):
            value = safe_shift(b, x, y, name == "shl", signed=d.is_signed)
        else:
            value = BINARY_RULES[name](b, x, y, d)
        _define(cg, inst, value)
    return rule


def _axis_value(kind):
    def rule(cg, inst):
        values = cg.pids if kind == "pid" else cg.nums
        _define(cg, inst, values[inst.attrs["axis"]])
    return rule


def subblock(cg, inst):
    """Which AIV of the cluster runs the vector part (the codegen runs it once per AIV)."""
    _define(cg, inst, cg.subblock)


def tensor_dim(cg, inst):
    _, dims, _ = cg.get(inst.ins[0])
    _define(cg, inst, dims[inst.attrs["axis"]])


def _dense_index(cg, tile, offset):
    """TGETVAL/TSETVAL's offset is in the chip's layout (rows padded to 32 bytes:
    program.row_pitch); our tiles are dense row-major."""
    pitch = row_pitch(tile)
    if tile.rows == 1 or pitch == tile.cols:
        return offset
    b = cg.b
    row = b.sdiv(offset, ir.Constant(offset.type, pitch))
    col = b.srem(offset, ir.Constant(offset.type, pitch))
    return b.add(b.mul(row, ir.Constant(offset.type, tile.cols)), col)


def tgetval(cg, inst):
    tile, at = inst.ins
    _define(cg, inst, cg.load_elem(cg.tile_ptr(tile), tile.dtype,
                                   _dense_index(cg, tile, cg.get(at))))


def tsetval(cg, inst):
    at, value = inst.ins
    tile = inst.outs[0]
    cg.store_elem(cg.get(value), cg.tile_ptr(tile), tile.dtype,
                  _dense_index(cg, tile, cg.get(at)))


RULES = {
    "tgetval": tgetval, "tsetval": tsetval,
    "arith.constant": constant, "arith.cast": cast, "arith.cmp": compare,
    "arith.select": select, "pto.program_id": _axis_value("pid"),
    "pto.num_programs": _axis_value("num"), "tensor.dim": tensor_dim,
    "pto.get_subblock_idx": subblock,
    **{f"arith.{n}": _binop(n) for n in ("add", "sub", "mul", "div", "floordiv", "mod", "min",
                                          "max", "and", "or", "xor", "shl", "shr")},
}
