"""Dtypes A2/A3 keeps in memory but does not compute in, rewritten as bits in types it has.

* uint16 / uint32: PTOAS's verifiers accept ui16/ui32 tiles, but pto-isa's A2/A3 instructions
  static_assert on int16/int32/half/float (npu/a2a3/TAdd.hpp, TMul.hpp, TCmp.hpp ...), so an
  unsigned tile lives as its signed twin's bits. Wrapping arithmetic (add, sub, mul, neg,
  bitwise, shl, eq/ne, where) is the same on the bits; an ordered compare, max and min run on
  ``x ^ MIN`` (the order-preserving map to signed); uint16 division and right shifts run on
  the zero-extended int32; conversions go through int32 (zero-extended) or, for uint32 → float,
  the two 16-bit halves (rounded once).
* float8_e4m3fn / float8_e5m2: A2/A3 has no float8 loads, instructions or conversions (PTOAS
  accepts f8 tiles on A5 only), so a float8 tensor is bytes (ui8 in the ``.pto``), a float8 tile
  is a uint8 tile, and a conversion is integer bit manipulation: e5m2 is the top byte of a
  float16 (decode: ``b << 8``); e4m3fn's byte shifted by 7 is a float16 2**-8 of its value
  (decode: ``(b & 0x7f) << 7`` seen as float16, times 256, the sign and NaN selected); encoding
  rounds float32 bits to nearest even in int32 (subnormals through a scaled ``rint``) and
  saturates as ml_dtypes does (e4m3fn overflows to NaN, e5m2 to inf). Anything else on a
  float8 tile is refused, naming the target.
* int4 (pypto/layout.py, INT4): an int4 tile is an int8 tile of the values; a packed tensor is
  loaded and stored as its bytes, each byte becoming (or made from) an int16 pair of
  sign-extended nibbles, which is the two int8 values seen as one int16. Storage only, as
  float8.

``tile.bitcast`` marks where bits change type; two in a row fold, so in straight-line code none
survives to the PTO program (a loop-carried unsigned tile keeps one: a ``treshape`` view).
"""
from __future__ import annotations

import numpy as np

from ...layout import INT4, packed_shape
from ...language import dtypes as dt
from ...errors import NotOnChip
from ..ir import Module, Op, ScalarType, TensorType, TileType, Value
from .dce import dead_code_elimination
from .legalize import Emitter, rewrite_block

_I8, _U8, _I16, _I32, _F16, _F32 = (dt.int8, dt.uint8, dt.int16, dt.int32, dt.float16,
                                    dt.float32)
_U16, _U32, _E4M3, _E5M2, _I4 = dt.uint16, dt.uint32, dt.float8_e4m3fn, dt.float8_e5m2, dt.int4
TWIN = {_U16: _I16, _U32: _I32, _E4M3: _U8, _E5M2: _U8,      # the type whose bits it lives in
        _I4: _I8}                                          # int4: the value, sign-extended

# ops that move or arrange elements without looking at them: the same on the bits
_LAYOUT = {"tile.reshape", "tile.transpose", "tile.slice", "tile.concat", "tile.broadcast",
           "tile.mov"}
_SAME_ON_BITS = {"add", "sub", "mul", "and", "or", "xor", "shl", "eq", "ne"}
_ORDERED = {"lt", "le", "gt", "ge", "max", "min"}
_VIA_INT32 = {"div", "floordiv", "mod", "fmod", "shr"}       # on zero-extended uint16


# float8 formats: mantissa bits, exponent bias, the code an overflow saturates to, NaN's code
_FP8 = {_E4M3: (3, 7, 0x7F, 0x7F), _E5M2: (2, 15, 0x7C, 0x7E)}


def _is_bits(v) -> bool:
    return isinstance(v, Value) and v.is_tile and v.type.dtype in TWIN


def _bitcast(e: Emitter, x: Value, dtype, shape=None) -> Value:
    """The same bytes as ``dtype``; ``shape`` (the last axis scaled by the widths' ratio) for
    a bitcast between widths."""
    return e.emit("tile.bitcast", [x], TileType(dtype, shape or x.type.shape), {"dtype": dtype})


def _bits(e: Emitter, x: Value) -> Value:
    """``x`` as its twin's bits (any other operand as it is)."""
    return _bitcast(e, x, TWIN[x.type.dtype]) if _is_bits(x) else x


def _twin_value(value, dtype):
    """A constant of ``dtype`` as the number its twin's bits spell (uint16 65535 → -1, float8
    e4m3fn 1.0 → 56)."""
    if dtype == _I4:
        return (int(value) + 8) % 16 - 8
    if not dtype.storage_only:
        value = int(value) & ((1 << dtype.bits) - 1)
    return np.array(value, dtype.to_numpy()).view(TWIN[dtype].to_numpy()).item()


def _scalar_bits(e: Emitter, y: Value, dtype) -> Value:
    """A scalar operand of an unsigned tile op (``dtype``'s twin), as the twin's bits."""
    if y.owner is not None and y.owner.name == "arith.constant":
        return e.const(_twin_value(y.owner.attrs["value"], dtype), TWIN[dtype])
    twin = TWIN[dtype]
    return e.emit("arith.cast", [y], ScalarType(twin), {"dtype": twin})


def _refuse(op: Op, dtype, target) -> NotOnChip:
    name = getattr(target, "name", "the target")
    what = op.attrs.get("op", op.name.split(".")[-1])
    return NotOnChip(f"{what} on a {dtype} tile: {name} (A2/A3) keeps {dtype} in memory only "
                     f"and has no {dtype} arithmetic. Convert it first, e.g. "
                     f"x.to(pl.float16), compute, and convert the result back",
                     op.loc)


def _zext(e: Emitter, s: Value) -> Value:
    """uint16 bits (an int16 tile) as the int32 of the same value."""
    return e.binary("and", e.cast(s, _I32), 0xFFFF)


def _bias(e: Emitter, s: Value) -> Value:
    """Unsigned order as signed order: flip the top bit."""
    return e.binary("xor", s, -(1 << (s.type.dtype.bits - 1)))


def _binary(op: Op, target):
    a, b = op.operands
    dtype = a.type.dtype
    name = op.attrs["op"]
    if dtype.storage_only:
        raise _refuse(op, dtype, target)
    e = Emitter(op.loc)
    x = _bits(e, a)
    y = _bits(e, b) if b.is_tile else _scalar_bits(e, b, dtype)
    out_bool = op.result.type.dtype == dt.bool_
    if name in _SAME_ON_BITS:
        r = e.emit("tile.binary", [x, y], op.result.type if out_bool else x.type, dict(op.attrs))
    elif name in _ORDERED:
        if not y.is_tile:
            y = e.emit("tile.full", [y], x.type)
        r = e.emit("tile.binary", [_bias(e, x), _bias(e, y)],
                   op.result.type if out_bool else x.type, dict(op.attrs))
        r = r if out_bool else _bias(e, r)
    elif name in _VIA_INT32 and dtype == _U16:
        wide_y = _zext(e, y) if y.is_tile else e.emit(
            "arith.and", [e.emit("arith.cast", [y], ScalarType(_I32), {"dtype": _I32}),
                          e.const(0xFFFF, _I32)], ScalarType(_I32))
        r = e.cast(e.emit("tile.binary", [_zext(e, x), wide_y], TileType(_I32, x.type.shape),
                          dict(op.attrs)), _I16)
    elif name == "shr" and _const_amount(b) is not None:   # uint32: arithmetic shift, masked
        k = min(_const_amount(b), 32)
        if k == 0:
            return e.ops, a
        r = e.binary("and", e.binary("shr", x, k - 1 if k == 32 else k),
                     0 if k == 32 else (1 << (32 - k)) - 1)
    else:
        raise NotOnChip(f"{name} of uint32 tiles: {getattr(target, 'name', 'A2/A3')} (A2/A3) "
                        f"divides floats only, and float32 cannot hold every uint32; "
                        f"{'shift by a constant amount, or ' if name == 'shr' else ''}"
                        f"convert to a type it computes in (float32, int32)", op.loc)
    return e.ops, (r if out_bool else _bitcast(e, r, dtype))


def _const_amount(v: Value):
    op = v.owner
    if op is not None and op.name in ("arith.constant", "tile.full") and not op.operands:
        value = op.attrs.get("value")
        return value if isinstance(value, int) and value >= 0 else None
    return None


def _unary(op: Op, target):
    x = op.operands[0]
    dtype = x.type.dtype
    if dtype.storage_only:
        raise _refuse(op, dtype, target)
    name = op.attrs["op"]
    if name in ("abs", "relu"):
        return [], x
    e = Emitter(op.loc)
    if name not in ("neg", "not"):
        raise NotOnChip(f"{name} of a {dtype} tile has no meaning: convert it to a float "
                        f"first", op.loc)
    return e.ops, _bitcast(e, e.unary(name, _bits(e, x)), dtype)


def _where(op: Op, target):
    cond, x, y = op.operands
    dtype = op.result.type.dtype
    if dtype.storage_only:
        raise _refuse(op, dtype, target)
    e = Emitter(op.loc)
    r = e.emit("tile.where", [cond, _bits(e, x), _bits(e, y)],
               TileType(TWIN[dtype], op.result.type.shape))
    return e.ops, _bitcast(e, r, dtype)


def _full(op: Op, target):
    dtype = op.result.type.dtype
    e = Emitter(op.loc)
    twin = TileType(TWIN[dtype], op.result.type.shape)
    if not op.operands:
        r = e.full(_twin_value(op.attrs["value"], dtype), twin)
    elif dtype.storage_only:
        raise _refuse(op, dtype, target)
    else:
        r = e.emit("tile.full", [_scalar_bits(e, op.operands[0], dtype)], twin)
    return e.ops, _bitcast(e, r, dtype)


def _layout(op: Op, target):
    """Moving elements around: the same on the bits."""
    e = Emitter(op.loc)
    operands = [_bits(e, v) if _is_bits(v) else v for v in op.operands]
    ttype = op.result.type
    twin = TileType(TWIN[ttype.dtype], ttype.shape, ttype.space)
    r = e.emit(op.name, operands, twin, dict(op.attrs))
    return e.ops, _bitcast(e, r, ttype.dtype)


def _load(op: Op, target):
    if op.operands[0].type.layout == INT4:
        return _load_int4(op)
    e = Emitter(op.loc)
    ttype = op.result.type
    attrs = dict(op.attrs)
    if attrs.get("padding") is not None:
        attrs["padding"] = _twin_value(attrs["padding"], ttype.dtype)
    raw = e.emit("tile.load", list(op.operands), TileType(TWIN[ttype.dtype], ttype.shape,
                                                          ttype.space), attrs)
    return e.ops, _bitcast(e, raw, ttype.dtype)


def _provably_even(v: Value) -> bool:
    """Is the scalar ``v`` even by construction (a constant, or a product with one)?"""
    op = v.owner
    if op is None:
        return False
    if op.name == "arith.constant":
        return isinstance(op.attrs.get("value"), int) and op.attrs["value"] % 2 == 0
    if op.name == "arith.mul":
        return any(_provably_even(x) for x in op.operands)
    if op.name in ("arith.add", "arith.sub"):
        return all(_provably_even(x) for x in op.operands)
    return False


def _byte_offset(e: Emitter, op: Op, column: Value) -> Value:
    """A packed int4 window starts on a byte: its column offset must be visibly even."""
    if not _provably_even(column):
        raise NotOnChip("a packed int4 window must start on a whole byte: its column offset "
                        "must be even by construction (a constant, or a multiple of an even "
                        "block size such as pl.program_id(1) * BLOCK)", op.loc)
    return e.emit("arith.shr", [column, e.const(1, column.type.dtype)],
                  ScalarType(column.type.dtype))


def _without_padding_nibble(e: Emitter, v: Value, tensor: Value, column: Value) -> Value:
    """An odd row's last byte has a padding high nibble: read as 0, written as 0."""
    n = tensor.type.shape[-1]
    if n % 2 == 0:
        return v
    shape = v.type.shape
    cols = e.emit("tile.arange", [], TileType(_I32, (shape[-1],)),
                  {"start": 0, "end": shape[-1]})
    if len(shape) == 2:
        cols = e.emit("tile.reshape", [cols], TileType(_I32, (1, shape[-1])),
                      {"shape": (1, shape[-1])})
        cols = e.emit("tile.broadcast", [cols], TileType(_I32, shape))
    at = e.emit("arith.cast", [column], ScalarType(_I32), {"dtype": _I32})
    pad = e.binary("eq", e.binary("add", cols, at), n)
    return e.where(pad, e.full(0, v.type), v)


def _load_int4(op: Op):
    """Bytes (R, C/2) → int16 pairs (low nibble in the low byte, high nibble in the high one,
    each sign-extended), seen as the (R, C) int8 values they are."""
    tensor, *offsets = op.operands
    shape = op.result.type.shape
    if op.attrs.get("padding", 0) not in (0, None):
        raise NotOnChip("a load from a packed int4 tensor pads with 0 (or padding=None); "
                        "select another padding value after the load", op.loc)
    e = Emitter(op.loc)
    half = _byte_offset(e, op, offsets[-1])
    packed = shape[:-1] + (shape[-1] // 2,)
    raw = e.emit("tile.load", [tensor, *offsets[:-1], half],
                 TileType(_I8, packed, op.result.type.space), dict(op.attrs, _packed=True))
    w = e.cast(raw, _I16)
    low = e.binary("shr", e.binary("shl", w, 12), 12)
    pairs = e.binary("or", e.binary("and", low, 0xFF), e.binary("shl", e.binary("shr", w, 4), 8))
    values = _without_padding_nibble(e, _bitcast(e, pairs, _I8, shape), tensor, offsets[-1])
    return e.ops, _bitcast(e, values, _I4)


def _store_int4(op: Op):
    """The inverse of ``_load_int4``: (R, C) int8 values seen as int16 pairs, each pair's
    nibbles packed into one byte."""
    tensor, *offsets, value = op.operands
    e = Emitter(op.loc)
    half = _byte_offset(e, op, offsets[-1])
    if value.type.dtype != _I4:
        value = e.cast(value, _I4)
    values = _without_padding_nibble(e, _bits(e, value), tensor, offsets[-1])
    shape = values.type.shape
    pairs = _bitcast(e, values, _I16, shape[:-1] + (shape[-1] // 2,))
    packed = e.binary("or", e.binary("and", pairs, 0xF),
                      e.binary("and", e.binary("shr", pairs, 4), 0xF0))
    e.ops.append(Op("tile.store", [tensor, *offsets[:-1], half, e.cast(packed, _I8)], [],
                    dict(op.attrs, _packed=True), loc=op.loc))
    return e.ops, None


def _store(op: Op, target):
    *tensor_and_offsets, value = op.operands
    if tensor_and_offsets[0].type.layout == INT4:
        return _store_int4(op)
    e = Emitter(op.loc)
    e.ops.append(Op("tile.store", tensor_and_offsets + [_bits(e, value)], [], dict(op.attrs),
                    loc=op.loc))
    return e.ops, None


def _reduce(op: Op, target):
    x = op.operands[0]
    dtype, out = x.type.dtype, op.result.type.dtype
    if dtype.storage_only:
        raise _refuse(op, dtype, target)
    name = op.attrs["op"]
    e = Emitter(op.loc)
    if out != dtype or name not in ("sum", "prod", "max", "min"):
        if name in ("argmax", "argmin") or out != dtype:   # in a type that holds the values
            wide = _I32 if dtype == _U16 else dt.float32
            if dtype == _U32 and name in ("sum", "prod"):
                wide = _I32                                # wraps as uint32 does
            return e.ops, e.emit("tile.reduce", [e.cast(x, wide)], op.result.type,
                                 dict(op.attrs))
        raise NotOnChip(f"{name} of a {dtype} tile is not supported on A2/A3", op.loc)
    s = _bits(e, x)
    rtype = TileType(TWIN[dtype], op.result.type.shape)
    if name in ("max", "min"):
        r = _bias(e, e.emit("tile.reduce", [_bias(e, s)], rtype, dict(op.attrs)))
    else:
        r = e.emit("tile.reduce", [s], rtype, dict(op.attrs))
    return e.ops, _bitcast(e, r, dtype)


def _cast(op: Op, target):
    x = op.operands[0]
    src, dst = x.type.dtype, op.result.type.dtype
    rounding = op.attrs.get("rounding")
    e = Emitter(op.loc)
    if src == dst:
        return e.ops, x
    if src in _FP8:
        return e.ops, e.cast(_decode_fp8(e, _bits(e, x), src), dst, rounding)
    if src == _I4:
        return e.ops, e.cast(_bits(e, x), dst, rounding)
    if dst == _I4:
        return e.ops, _bitcast(e, _to_int4_bits(e, x, rounding), dst)
    if dst in _FP8:
        return e.ops, _bitcast(e, _encode_fp8(e, _to_f32(e, x, rounding), dst), dst)
    if src == _U16:
        s = _bits(e, x)
        if dst in (_I16, dt.bool_):
            return e.ops, (s if dst == _I16 else e.binary("ne", s, 0))
        wide = _zext(e, s)
        return e.ops, (_bitcast(e, wide, _U32) if dst == _U32 else e.cast(wide, dst, rounding))
    if src == _U32:
        return _from_u32(e, _bits(e, x), dst, rounding)
    if dst == _U16:
        return e.ops, _bitcast(e, _to_u16_bits(e, x, rounding), dst)
    return e.ops, _bitcast(e, _to_u32_bits(e, x, rounding), dst)


def _from_u32(e: Emitter, s: Value, dst, rounding):
    if dst in (_I32, dt.bool_):
        return e.ops, (s if dst == _I32 else e.binary("ne", s, 0))
    if dst.is_int:                       # narrower: the low bits, as numpy keeps them
        low = e.cast(s, _I16 if dst.bits == 16 else dst)
        return e.ops, (_bitcast(e, low, dst) if dst == _U16 else low)
    hi = e.cast(e.binary("and", e.binary("shr", s, 16), 0xFFFF), _F32)
    lo = e.cast(e.binary("and", s, 0xFFFF), _F32)
    f = e.binary("add", e.binary("mul", hi, 65536.0), lo)    # one rounding, in the add
    return e.ops, e.cast(f, dst, rounding)


def _to_f32(e: Emitter, x: Value, rounding) -> Value:
    """``x`` as float32 (exact from the half types and float8), rounded to an integer if
    ``rounding`` says so. Never a float32 → float32 TCVT without a rounding mode: pto-isa
    rounds that to an integer."""
    f = x if x.type.dtype == _F32 else e.cast(x, _F32)
    return e.cast(f, _F32, rounding) if rounding else f


def _to_u16_bits(e: Emitter, x: Value, rounding) -> Value:
    """numpy's conversion to uint16: ints wrap; floats (PyPTO) saturate to [0, 65535]."""
    src = x.type.dtype
    if src == _I16:
        return x
    wide = e.cast(x, _I32, rounding) if src != _U32 else _bits(e, x)
    if src.is_floating:
        wide = e.binary("min", e.binary("max", wide, 0), 0xFFFF)
    return e.cast(wide, _I16)


def _to_u32_bits(e: Emitter, x: Value, rounding) -> Value:
    """Ints keep their bits (sign-extended first); floats saturate to [0, 2**32 - 1], the
    top half of the range through ``f - 2**31`` (exact there) and the sign bit."""
    src = x.type.dtype
    if not src.is_floating:
        return e.cast(x, _I32)
    f = _to_f32(e, x, rounding)
    f = e.where(e.binary("gt", f, 0.0), f, 0.0)                 # NaN and negatives: 0
    big = e.binary("ge", f, 2.0 ** 31)
    low = e.cast(e.where(big, e.binary("sub", f, 2.0 ** 31), f), _I32, "trunc")
    r = e.where(big, e.binary("xor", low, -(1 << 31)), low)
    return e.where(e.binary("ge", f, 2.0 ** 32), e.full(-1, r.type), r)


def _to_int4_bits(e: Emitter, x: Value, rounding) -> Value:
    """Ints wrap to 4 bits (as numpy narrows); floats truncate and saturate to [-8, 7]."""
    src = x.type.dtype
    v = e.cast(x, _I32, rounding) if src != _U32 else _bits(e, x)
    if src.is_floating:
        v = e.binary("min", e.binary("max", v, -8), 7)
    else:
        v = e.binary("shr", e.binary("shl", v, 28), 28)
    return e.cast(v, _I8)


def _decode_fp8(e: Emitter, b: Value, fmt) -> Value:
    """float8 bytes (a uint8 tile) → the float16 of the same value (exact: float16 holds every
    float8 value)."""
    w = e.cast(b, _I16)
    if fmt == _E5M2:
        return _bitcast(e, e.binary("shl", w, 8), _F16)
    mag = e.binary("and", w, 0x7F)
    h = e.binary("mul", _bitcast(e, e.binary("shl", mag, 7), _F16), 256.0)
    h = e.where(e.binary("ne", e.binary("and", w, 0x80), 0), e.unary("neg", h), h)
    return e.where(e.binary("eq", mag, 0x7F), e.full(float("nan"), h.type), h)


def _encode_fp8(e: Emitter, f: Value, fmt) -> Value:
    """float32 → float8 bytes (a uint8 tile), rounded to nearest even once, as ml_dtypes."""
    mant, bias, top, nan = _FP8[fmt]
    shift = 23 - mant
    bits = _bitcast(e, f, _I32)
    a = e.binary("and", bits, 0x7FFFFFFF)
    sign = e.binary("and", e.binary("shr", bits, 24), 0x80)
    is_nan = e.binary("gt", a, 0x7F800000)
    a = e.binary("min", a, 0x7F800000)
    t = e.binary("sub", a, (127 - bias) << 23)                  # rebiased exponent
    odd = e.binary("and", e.binary("shr", t, shift), 1)
    normal = e.binary("shr", e.binary("add", e.binary("add", t, (1 << (shift - 1)) - 1), odd),
                      shift)
    scaled = e.binary("mul", _bitcast(e, a, _F32), float(2 ** (mant + bias - 1)))
    subnormal = e.cast(scaled, _I32, "rint")                    # m * 2**(1 - bias - mant)
    r = e.where(e.binary("lt", a, (128 - bias) << 23), subnormal, normal)
    r = e.where(is_nan, e.full(nan, r.type), e.binary("min", r, top))
    return e.cast(e.binary("or", r, sign), _U8)


def _fold_bitcast(op: Op, target):
    x, want = op.operands[0], op.result.type
    if x.type.dtype == want.dtype:
        return [], x
    inner = x.owner
    if inner is not None and inner.name == "tile.bitcast":
        src = inner.operands[0]
        if src.type.dtype == want.dtype:
            return [], src
        e = Emitter(op.loc)
        return e.ops, _bitcast(e, src, want.dtype, want.shape)
    return None


RULES = {"tile.binary": _binary, "tile.unary": _unary, "tile.where": _where,
         "tile.full": _full, "tile.load": _load, "tile.store": _store, "tile.reduce": _reduce,
         "tile.cast": _cast, **{name: _layout for name in _LAYOUT}}


def _rule(op: Op, target):
    if op.name == "tile.bitcast":
        return _fold_bitcast(op, target)
    if op.name in ("tile.load", "tile.store") and not op.attrs.get("_packed") and \
            op.operands[0].type.dtype == _I4:
        if op.operands[0].type.layout != INT4:
            raise NotOnChip("an int4 tensor is packed bytes (ml_dtypes.int4 arrays keep one "
                            "value per byte): pass pypto.int4_tensor("
                            "pypto.packed_int4.pack(x), x.shape)", op.loc)
        return RULES[op.name](op, target)
    involved = [v.type.dtype for v in (*op.operands, *op.results) if _is_bits(v)]
    if not involved:
        return None
    if op.name not in RULES:          # matmul, cumsum, sort, arange ... of these dtypes
        if involved[0].storage_only:
            raise _refuse(op, involved[0], target)
        raise NotOnChip(f"{op.name} of a {involved[0]} tile is not supported on A2/A3: "
                        f"convert it to int32 or float32 first", op.loc)
    return RULES[op.name](op, target)


def legalize_storage(module: Module) -> Module:
    body = module.kernel.body
    target = module.target
    while rewrite_block(body, body, lambda op: _rule(op, target)):
        pass
    for p in module.kernel.params:      # the loads and stores now move the packed bytes
        if p.is_tensor and p.type.layout == INT4:
            shape = packed_shape(p.type.shape)
            p.type = TensorType(_I8, len(shape), "ND", shape)
    return dead_code_elimination(module)      # the bitcasts that folded away
