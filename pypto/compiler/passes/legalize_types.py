"""Element types the A2/A3 vector unit computes in: everything else is computed in a wider type.

The table is PTOAS's A2/A3 verifiers (lib/PTO/IR/PTO.cpp at a56b18c3, "expects A2/A3 <op>
element type to be ..."): the vector unit adds, multiplies and compares 16- and 32-bit
numbers; it has no bfloat16 or 8-bit arithmetic, divides only floats, and its bitwise ops
take 8- and 16-bit tiles only (32-bit ones run on 16-bit views of their bytes, in the printer). So, per op, as rules:

* a tile–scalar op whose tile–tile form takes the type becomes tile–tile (the scalar filled
  into a tile): int32 ``x & 3``;
* otherwise the op is computed in the narrowest wider type the instruction takes
  (bfloat16 → float32, int8/uint8 → int16 or int32, int32 division → float32) and the result
  converted back (rounded once, as ``legalize`` does for its decompositions);
* a mask is bits on the chip (TCMP's packed ui8), so a mask converted to numbers is
  ``where(mask, 1, 0)``, a number converted to a mask is ``x != 0``, and a bool tensor (one
  byte per element) is loaded and stored as int8 bytes.

Integer division is exact (``legalize.int_trunc_divmod``: float32 quotients corrected in
integers, never TFMOD, which A2/A3 has for float32 only).
"""
from __future__ import annotations

import numpy as np

from ...language import dtypes as dt
from ..elementwise import BINARY, UNARY
from ..ir import Module, Op, ScalarType, TileType, Value
from .legalize import Emitter, int_trunc_divmod, rewrite_block

_I16, _I32, _F16, _F32, _I8 = dt.int16, dt.int32, dt.float16, dt.float32, dt.int8
_ARITH = (_I16, _I32, _F16, _F32)
_SHORT = (_I8, dt.uint8, _I16)

# PTO instruction → element types its A2/A3 form computes in (absent: no restriction known)
VECTOR_TYPES = {
    # tmaxs/tmins: PTOAS lowers only a float scalar (PTOViewToMemref.cpp), so ints go tile-tile
    "tmaxs": (_F16, _F32), "tmins": (_F16, _F32),
    **{op: _ARITH for op in ("tadd", "tsub", "tmul", "tmax", "tmin", "tadds", "tsubs",
                              "tmuls", "tdivs", "tneg",
                              "tsel", "trowsum", "trowmax", "trowmin", "trowprod", "tcolsum",
                              "tcolmax", "tcolmin", "tcolprod", "tcmps", "texpands",
                              "trowexpand", "tcolexpand")},
    "tdiv": (_F16, _F32), "tfmod": (_F32,), "tfmods": (_F32,),   # pto-isa npu/a2a3/TFmod.hpp
    "tcmp": (_I32, _F16, _F32), "trelu": (_I32, _F16, _F32),
    "tabs": (_F16, _F32), "tands": _SHORT, "tors": _SHORT, "txors": _SHORT,
    "tshls": (_I16, _I32), "tshrs": (_I16, _I32), "tshl": (_I16, _I32), "tshr": (_I16, _I32),
    # 8/16-bit (tnot: 16-bit) on the chip; 32-bit ones run on i16 views (printer.in_halves)
    **{op: _SHORT + (_I32,) for op in ("tand", "tor", "txor")},
    "tnot": (_I16, _I32),
    **{op: (_F16, _F32) for op in ("texp", "tlog", "tsqrt", "trsqrt", "trecip")},
}
_BITWISE = {"and", "or", "xor", "not", "shl", "shr"}


def _wider(dtype, allowed):
    """The type to compute ``dtype`` in: itself, or the first allowed type that holds it."""
    if dtype in allowed:
        return dtype
    if dtype.is_floating:
        order = (_F32,)
    elif dtype.itemsize == 1:
        order = (_I16, _I32, _F16, _F32)
    else:
        order = (_I32, _F32)
    return next((d for d in order if d in allowed), None)


def _binary(op: Op):
    spec = BINARY[op.attrs["op"]]
    a, b = op.operands
    dtype = a.type.dtype
    if dtype == dt.bool_ and spec.result == "bool" and spec.name not in _BITWISE:
        return _mask_compare(op)
    if dtype == dt.bool_ or spec.pto is None:
        return None                         # masks: tand/tor/txor take bytes; legalize decomposed
    if spec.name in ("div", "fmod") and dtype.is_int:
        e = Emitter(op.loc)                 # A2/A3 divides floats only (TDIV, TFMOD)
        q, r = int_trunc_divmod(e, a, b)
        return e.ops, (q if spec.name == "div" else r)
    if spec.name in ("shl", "shr") and not op.attrs.get("_amount_in_range") and \
            not _in_range(b, dtype.bits):
        return _guarded_shift(op)
    scalar = not b.is_tile
    native = VECTOR_TYPES.get(spec.pto_scalar if scalar else spec.pto)
    if native is None or dtype in native:
        return None
    e = Emitter(op.loc)
    if scalar and dtype in VECTOR_TYPES.get(spec.pto, ()):
        tile = e.emit("tile.full", [b], TileType(dtype, a.type.shape))
        return e.ops, e.emit("tile.binary", [a, tile], op.result.type, dict(op.attrs))
    work = _wider(dtype, native if not scalar else
                  tuple(set(native) | set(VECTOR_TYPES.get(spec.pto, ()))))
    if work is None or (spec.name in _BITWISE and work.is_floating):
        return None
    x = e.cast(a, work)
    y = e.cast(b, work) if b.is_tile else e.emit("arith.cast", [b], ScalarType(work),
                                                 {"dtype": work})
    if scalar and work not in native:
        y = e.emit("tile.full", [y], TileType(work, a.type.shape))
    result_type = op.result.type if spec.result == "bool" else TileType(work, a.type.shape)
    r = e.emit("tile.binary", [x, y], result_type, dict(op.attrs))
    return e.ops, (r if spec.result == "bool" else e.cast(r, dtype))


def _mask_compare(op: Op):
    """Masks compared (``a < b`` on bools): A2/A3's TCMP takes i32/f16/f32 (PTOAS: 'expects
    A2/A3 tcmp input element type to be i32/f16/f32'), so both sides become 0.0/1.0 float16."""
    a, b = op.operands
    e = Emitter(op.loc)
    x = e.cast(a, _F16)
    y = e.cast(b, _F16) if b.is_tile else e.emit("arith.cast", [b], ScalarType(_F16),
                                                 {"dtype": _F16})
    return e.ops, e.emit("tile.binary", [x, y], op.result.type, dict(op.attrs))


def _in_range(amount: Value, bits: int) -> bool:
    """Whether a shift amount is a compile-time constant in [0, bits)."""
    op = amount.owner
    known = op is not None and op.name in ("arith.constant", "tile.full") and not op.operands
    return known and isinstance(op.attrs.get("value"), int) and 0 <= op.attrs["value"] < bits


def _guarded_shift(op: Op):
    """PyPTO's shifts are defined for every amount (docs/tile_ir.md: n >= bits gives 0, or the
    sign fill for a signed ``>>``; n < 0 counts as 0). The chip's are not: TSHL/TSHR are C++
    shifts on the scalar unit and TSHLS/TSHRS the vector unit's vshl/vshr (pto-isa
    npu/a2a3/TShr.hpp, TBitwiseSOp.hpp), and neither says what an amount outside [0, bits)
    does (the simulator's x86 masks it to 5 bits). So the instruction gets m = clamp(n, 0,
    bits - 1), and where a shift by ``bits`` must give 0, a second shift by
    min(max(n, 0), bits) - m (1 exactly when n >= bits) finishes it. Scalar amounts are clamped
    on the scalar unit, tile amounts elementwise."""
    e = Emitter(op.loc)
    x, n = op.operands
    bits = x.type.dtype.bits
    low = _either(e, "max", n, 0) if n.type.dtype.is_signed else n
    first = _either(e, "min", low, bits - 1)
    attrs = dict(op.attrs, _amount_in_range=True)
    r = e.emit("tile.binary", [x, first], op.result.type, attrs)
    if op.attrs["op"] == "shr" and x.type.dtype.is_signed:
        return e.ops, r                              # the sign fill is already complete
    rest = _either(e, "sub", _either(e, "min", low, bits), first)
    return e.ops, e.emit("tile.binary", [r, rest], op.result.type, attrs)


def _scalar_shift(op: Op):
    """A scalar shift by a runtime amount, defined for every amount as a tile shift is
    (_guarded_shift): arith's shifts, and the C++ PTOAS makes of them, are not."""
    x, n = op.operands
    dtype = op.result.type.dtype
    if op.attrs.get("_amount_in_range") or _in_range(n, dtype.bits) or not dtype.is_int:
        return None
    e = Emitter(op.loc)
    if dtype.is_signed:
        n = _scalar(e, "max", n, 0)
    bits = e.const(dtype.bits, n.type.dtype)
    big = e.emit("arith.cmp", [n, bits], ScalarType(dt.bool_), {"pred": "ge"})
    amount = e.emit("arith.select", [big, e.const(dtype.bits - 1, n.type.dtype), n],
                    ScalarType(n.type.dtype))
    r = e.emit(op.name, [x, amount], op.result.type, dict(op.attrs, _amount_in_range=True))
    if op.name == "arith.shr" and dtype.is_signed:
        return e.ops, r                               # an arithmetic shift by bits - 1: the fill
    return e.ops, e.emit("arith.select", [big, e.const(0, dtype), r], op.result.type)


def _either(e, name: str, x: Value, y) -> Value:
    """``x name y`` elementwise for a tile, on the scalar unit for a scalar."""
    return e.binary(name, x, y) if x.is_tile else _scalar(e, name, x, y)


def _scalar(e, name: str, x: Value, y) -> Value:
    if not isinstance(y, Value):
        y = e.const(y, x.type.dtype)
    return e.emit(f"arith.{name}", [x, y], ScalarType(x.type.dtype))


def _unary(op: Op):
    spec = UNARY[op.attrs["op"]]
    x = op.operands[0]
    dtype = x.type.dtype
    native = VECTOR_TYPES.get(spec.pto)
    if spec.pto is None or native is None or dtype in native:
        return None
    e = Emitter(op.loc)
    if spec.name == "abs" and dtype.is_int:        # tabs takes floats: |x| = max(x, -x)
        if not dtype.is_signed:
            return e.ops, x
        return e.ops, e.binary("max", x, e.unary("neg", x))
    if spec.name == "not":
        if dtype == dt.bool_:
            return None                     # a mask is negated through i16 views (printer)
        return e.ops, e.emit("tile.binary", [x, e.const(-1, dtype)], x.type,
                             {"op": "xor"})
    work = _wider(dtype, native)
    if work is None:
        return None
    return e.ops, e.cast(e.unary(spec.name, e.cast(x, work)), dtype)


def _where(op: Op):
    cond, x, y = op.operands
    dtype = op.result.type.dtype
    if dtype in VECTOR_TYPES["tsel"]:
        return None
    work = _wider(dtype, VECTOR_TYPES["tsel"])
    e = Emitter(op.loc)
    xs = [e.cast(v, work) for v in (x, y)]
    r = e.emit("tile.where", [cond, *xs], TileType(work, op.result.type.shape))
    return e.ops, e.cast(r, dtype)


# (source, destination) pairs A2/A3's TCVT converts (pto-isa npu/a2a3/TCvt.hpp: any other pair
# compiles and does nothing on the NPU)
_U8, _BF16 = dt.uint8, dt.bfloat16
CONVERTS = {(_F16, _F32), (_BF16, _F32), (_F32, _F16), (_F32, _BF16), (_F32, _I32),
            (_F32, _I16), (_I32, _F32), (_F16, _I32), (_F16, _I16), (_F16, _I8), (_F16, _U8),
            (_I8, _F16), (_U8, _F16), (_I16, _F16), (_I16, _F32), (_I32, _F16), (_I32, _I16),
            (_BF16, _I32)}


def _wrap(e, x, bits: int, signed: bool):
    """The low ``bits`` of int32 ``x``, as numpy's narrowing conversion keeps them (int32
    arithmetic: x - (x >> bits << bits), then the sign of bit ``bits - 1``)."""
    low = e.binary("sub", x, e.binary("shl", e.binary("shr", x, bits), bits))
    if signed:
        top = 1 << (bits - 1)
        low = e.binary("sub", e.binary("xor", low, top), top)
    return low


def _convert(e, x, dst, rounding=None):
    """``x`` converted to ``dst`` with conversions A2/A3 has, exactly as one conversion would
    round, saturate (float → int) or wrap (int → narrower int)."""
    src = x.type.dtype
    if src == dst:
        return e.cast(x, dst, rounding) if rounding else x
    if (src, dst) in CONVERTS:
        return e.cast(x, dst, rounding)
    if src.is_floating and dst.is_floating:            # f16 <-> bf16: exact into f32
        wide = e.cast(x, _F32)
        return e.cast(e.cast(wide, _F32, rounding) if rounding else wide, dst)
    if src.is_floating:                                  # → an int: round once, in int32
        wide = _convert(e, x, _I32, rounding)            # (saturated at int32's range)
        if dst.itemsize >= 4:
            return _convert(e, wide, dst)
        info = np.iinfo(dst.to_numpy())
        if dst.itemsize == 1:
            # int32 -> float16 keeps every 8-bit value and sends the rest beyond them (to
            # inf past 65504); float16 -> 8 bits with TCVT's saturation on clamps them
            return e.cast(e.cast(wide, _F16), dst, saturate=True)
        return _convert(e, e.binary("min", e.binary("max", wide, int(info.min)),
                                    int(info.max)), dst)
    via = _F16 if src.itemsize == 1 else _F32           # small ints are exact in f16 / f32
    if dst.is_floating or src.itemsize < dst.itemsize:
        return _convert(e, _convert(e, x, via), dst)
    wide = x if src == _I32 else _convert(e, _convert(e, x, via), _I32)
    if dst.itemsize < 4:
        wide = _wrap(e, wide, 8 * dst.itemsize, dst.is_signed)
        return e.cast(wide, dst) if dst == _I16 else _convert(e, e.cast(wide, _F16), dst)
    return wide


def _cast(op: Op):
    x = op.operands[0]
    src, dst = x.type.dtype, op.result.type.dtype
    rounding = op.attrs.get("rounding")
    e = Emitter(op.loc)
    if src == dst and not rounding:
        return e.ops, x        # no TCVT: pto-isa's same-type TCVT rounds to an integer
    if src == dt.bool_ and dst != dt.bool_:
        work = _wider(dst, VECTOR_TYPES["tsel"])
        ones, zeros = (e.full(v, TileType(work, x.type.shape)) for v in (1, 0))
        r = e.emit("tile.where", [x, ones, zeros], TileType(work, x.type.shape))
        return e.ops, (r if work == dst else _convert(e, r, dst))
    if dst == dt.bool_ and src != dt.bool_:
        if rounding and src.is_floating:               # round first: 0.3 rounds to False
            x = e.cast(x, src, rounding)
        return e.ops, e.binary("ne", x, 0)
    if src == dst or (src, dst) in CONVERTS or 8 in (src.itemsize, dst.itemsize):
        return None                      # native, or 64-bit (refused by the printer)
    return e.ops, _convert(e, x, dst, rounding)


def _broadcast(op: Op):
    """A mask broadcast along its rows is done on numbers: a mask row is bits, so TROWEXPAND
    of its bytes would repeat a byte, not a bit (and an (M, 1) mask's bits are its (1, M)
    row: Tile.is_column_mask). So ``where(mask, 1, 0)`` in int16, expanded, then ``!= 0``.
    Repeating whole rows (TCOLEXPAND, which takes 8-bit tiles) copies a mask row's bytes as
    they are."""
    x = op.operands[0]
    if x.type.dtype != dt.bool_ or x.type.shape[-1] == op.result.type.shape[-1]:
        return None
    e = Emitter(op.loc)
    spread = e.emit("tile.broadcast", [e.cast(x, _I16)], TileType(_I16, op.result.type.shape),
                    dict(op.attrs))               # the cast: where(mask, 1, 0) (_cast)
    return e.ops, e.binary("ne", spread, 0)


def _reduce(op: Op):
    x = op.operands[0]
    dtype = x.type.dtype
    shape = x.type.shape
    if len(shape) == 2 and shape[1] == 1 and shape[0] > 1 and op.attrs.get("axis") == 0:
        # down an (M, 1) column: A2/A3's column reductions take row-major tiles, and the
        # column's M elements are one row of the (1, M) view of the same bytes
        e = Emitter(op.loc)
        row = e.emit("tile.reshape", [x], TileType(dtype, (1, shape[0])),
                     {"shape": (1, shape[0])})
        return e.ops, e.emit("tile.reduce", [row], op.result.type, dict(op.attrs, axis=1))
    if op.attrs["op"] in ("sum", "prod") and dtype == _F16 and not op.attrs.get("_exact"):
        # A2/A3 sums float16 rows and columns with float16 vadds, rounding every partial sum
        # (pto-isa npu/a2a3/TColSum.hpp, BinarySum); PyPTO accumulates in float32, as the
        # native engine and the interpreter do, and rounds once
        e = Emitter(op.loc)
        r = e.emit("tile.reduce", [e.cast(x, _F32)], TileType(_F32, op.result.type.shape),
                   dict(op.attrs, _exact=True))
        return e.ops, e.cast(r, op.result.type.dtype)
    if op.attrs["op"] in ("argmax", "argmin") and dtype not in _ARITH:
        # A2/A3's TROWARGMAX/TCOLARGMAX take 16/32-bit numbers: the index is the same in any
        # type that holds the values exactly (a mask: 1 and 0)
        e = Emitter(op.loc)
        work = _I16 if dtype == dt.bool_ else _wider(dtype, _ARITH)
        return e.ops, e.emit("tile.reduce", [e.cast(x, work)], op.result.type, dict(op.attrs))
    if op.attrs["op"] not in ("sum", "max", "min", "prod") or dtype in _ARITH:
        return None
    out = op.result.type.dtype              # a sum of int8 is int32: reduce in that
    work = out if out in _ARITH and out.itemsize >= dtype.itemsize else _wider(dtype, _ARITH)
    if work is None:
        return None
    e = Emitter(op.loc)
    r = e.emit("tile.reduce", [e.cast(x, work)], TileType(work, op.result.type.shape),
               dict(op.attrs))
    return e.ops, (r if work == out else e.cast(r, out))


def _full(op: Op):
    """A byte tile filled with a runtime scalar: A2/A3 fills 16- and 32-bit tiles."""
    ttype = op.result.type
    if not op.operands or ttype.dtype.itemsize != 1:
        return None
    e = Emitter(op.loc)
    v = e.emit("arith.cast", [op.operands[0]], ScalarType(_I16), {"dtype": _I16})
    wide = e.emit("tile.full", [v], TileType(_I16, ttype.shape))
    return e.ops, (e.binary("ne", wide, 0) if ttype.dtype == dt.bool_ else
                   e.cast(wide, ttype.dtype))


def _load(op: Op):
    """A bool tensor is bytes in memory, a mask is bits: load the bytes and compare."""
    if op.result.type.dtype != dt.bool_:
        return None
    e = Emitter(op.loc)
    padding = op.attrs.get("padding", 0)        # None: the window is promised inside
    raw = e.emit("tile.load", list(op.operands), TileType(_I8, op.result.type.shape),
                 dict(op.attrs, padding=None if padding is None else int(bool(padding))))
    return e.ops, e.binary("ne", raw, 0)


def _store(op: Op):
    *tensor_and_offsets, value = op.operands
    if value.type.dtype != dt.bool_:
        return None
    e = Emitter(op.loc)
    e.ops.append(Op("tile.store", tensor_and_offsets + [e.cast(value, _I8)], [],
                    dict(op.attrs), loc=op.loc))
    return e.ops, None


RULES = {"arith.shl": _scalar_shift, "arith.shr": _scalar_shift,
         "tile.binary": _binary, "tile.unary": _unary, "tile.where": _where,
         "tile.cast": _cast, "tile.reduce": _reduce, "tile.full": _full, "tile.load": _load,
         "tile.store": _store, "tile.broadcast": _broadcast}


def legalize_types(module: Module) -> Module:
    body = module.kernel.body
    while rewrite_block(body, body, lambda op: RULES[op.name](op) if op.name in RULES
                        else None):    # a widened op's casts may need rules of their own
        pass
    return module
