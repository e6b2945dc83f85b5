"""LLVM IR building blocks shared by the instruction lowerings: element types, conversions with
the NPU's rounding, counted loops, and integer division that cannot trap.
"""
from __future__ import annotations

import re
from contextlib import contextmanager

from llvmlite import ir

from ...language import dtypes as dt
from ...target import WRAPPING_CONVERSIONS

I1, I8, I16, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
BF16 = I16  # raw bits
PTR = ir.PointerType()

STORAGE = {dt.bool_: I8, dt.int8: I8, dt.uint8: I8, dt.int16: I16, dt.uint16: I16,
           dt.int32: I32, dt.uint32: I32, dt.float8_e4m3fn: I8, dt.float8_e5m2: I8,
           dt.int64: I64, dt.float16: F16, dt.float32: F32, dt.float64: F64}


def storage_type(d: dt.dtype):
    """LLVM type of one element in memory; bfloat16 is kept as its 16 raw bits."""
    return BF16 if d == dt.bfloat16 else STORAGE[d]


def compute_dtype(d: dt.dtype) -> dt.dtype:
    """Half-width floats are computed in float32 and rounded after each op, as on the NPU."""
    return dt.float32 if d in (dt.float16, dt.bfloat16) else d


def const(d: dt.dtype, value):
    """A constant of ``d`` in its compute type (bfloat16/float16 constants are float32).
    Out-of-range values saturate and NaN becomes 0 for integers, as conversions do."""
    d = compute_dtype(d)
    ty = storage_type(d)
    if d.is_floating:
        return ir.Constant(ty, float(value))
    if d == dt.bool_:
        return ir.Constant(ty, int(bool(value)))
    value = float(value) if isinstance(value, float) else value
    if isinstance(value, float):
        if value != value:
            value = 0
        else:
            lo, hi = (-(1 << (d.bits - 1)), (1 << (d.bits - 1)) - 1) if d.is_signed else \
                (0, (1 << d.bits) - 1)
            value = int(max(lo, min(hi, value))) if abs(value) != float("inf") else \
                (hi if value > 0 else lo)
    return ir.Constant(ty, int(value))


def convert(b: ir.IRBuilder, v, src: dt.dtype, dst: dt.dtype):
    """numpy's conversion: floats round to nearest even, float→int truncates (saturating, so
    out-of-range values are defined; into int32 and then its low bits for the chip's
    ``WRAPPING_CONVERSIONS``), ints wrap or extend."""
    if src == dst or src.storage_only or dst.storage_only:
        return v       # float8 moves as bytes only: its tiles are uint8 (legalize_storage)
    if src == dt.bfloat16:
        return convert(b, _bf16_to_f32(b, v), dt.float32, dst)
    if dst == dt.bfloat16:
        return _f32_to_bf16(b, convert(b, v, src, dt.float32))
    if src == dt.float64 and dst == dt.float16:
        # no libcall for double → half is available to loaded code: go through float32
        return convert(b, convert(b, v, src, dt.float32), dt.float32, dst)
    st, dt_ = storage_type(src), storage_type(dst)
    if src.is_floating and dst.is_floating:
        return b.fpext(v, dt_) if dst.bits > src.bits else b.fptrunc(v, dt_)
    if src.is_floating:
        if dst == dt.bool_:
            return b.zext(b.fcmp_unordered("!=", v, ir.Constant(st, 0.0)), dt_)
        if (src.name, dst.name) in WRAPPING_CONVERSIONS:     # the chip's TCVT: low bits
            return b.trunc(convert(b, v, src, dt.int32), dt_)
        name = "llvm.fptosi.sat" if dst.is_signed else "llvm.fptoui.sat"
        fn = b.module.declare_intrinsic(name, [dt_, st], fnty=ir.FunctionType(dt_, [st]))
        return b.call(fn, [v])
    if dst.is_floating:
        if src == dt.bool_ or not src.is_signed:
            return b.uitofp(v, dt_)
        return b.sitofp(v, dt_)
    if dst == dt.bool_:
        return b.zext(b.icmp_unsigned("!=", v, ir.Constant(st, 0)), dt_)
    if dst.bits > src.bits:
        return b.sext(v, dt_) if src.is_signed else b.zext(v, dt_)
    if dst.bits < src.bits:
        return b.trunc(v, dt_)
    return v


def _bf16_to_f32(b, v):
    return b.bitcast(b.shl(b.zext(v, I32), ir.Constant(I32, 16)), F32)


def _f32_to_bf16(b, v):
    """Round to nearest even on the bit pattern (what ml_dtypes and the NPU's TCVT do); NaNs
    stay quiet NaNs."""
    bits = b.bitcast(v, I32)
    lsb = b.and_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 1))
    rounded = b.lshr(b.add(bits, b.add(lsb, ir.Constant(I32, 0x7FFF))), ir.Constant(I32, 16))
    nan = b.or_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 0x40))
    is_nan = b.fcmp_unordered("uno", v, v)
    return b.trunc(b.select(is_nan, nan, rounded), I16)


def to_compute(b, v, d: dt.dtype):
    return convert(b, v, d, compute_dtype(d))


def from_compute(b, v, d: dt.dtype):
    return convert(b, v, compute_dtype(d), d)


LOOP_SELF = "pypto.loop.self."     # a loop ID's self-reference, made one by ``finish_loop_ids``


def loop_id(module: ir.Module, *options):
    """Loop metadata (``llvm.loop``) with the given options: a name ("llvm.loop.unroll.disable")
    or a (name, i32 value) pair.
    llvmlite cannot write a self-referential node: the ID's first operand is a placeholder
    string that ``finish_loop_ids`` turns into the reference in the module's text."""
    count = getattr(module, "_pypto_loop_ids", 0)
    module._pypto_loop_ids = count + 1
    nodes = [module.add_metadata([ir.MetaDataString(module, o)] if isinstance(o, str) else
                                 [ir.MetaDataString(module, o[0]), ir.Constant(I32, o[1])])
             for o in options]
    return module.add_metadata([ir.MetaDataString(module, f"{LOOP_SELF}{count}")] + nodes)


def finish_loop_ids(text: str) -> str:
    """``loop_id``'s placeholders as the distinct self-references LLVM expects."""
    if LOOP_SELF not in text:
        return text
    return re.sub(r'^(!\d+) = !\{ *!"' + re.escape(LOOP_SELF) + r'\d+"', r"\1 = distinct !{\1",
                  text, flags=re.M)


@contextmanager
def counted_loop(b: ir.IRBuilder, start, stop, step=None, name="i", metadata=None):
    """``for i in range(start, stop, step)`` with a positive step; yields ``i``. ``metadata``:
    the loop's ``llvm.loop`` node (``loop_id``)."""
    step = step if step is not None else ir.Constant(I64, 1)
    pre = b.block
    header = b.append_basic_block(f"{name}.head")
    body = b.append_basic_block(f"{name}.body")
    done = b.append_basic_block(f"{name}.done")
    b.branch(header)
    b.position_at_end(header)
    i = b.phi(I64, name=name)
    i.add_incoming(start, pre)
    b.cbranch(b.icmp_signed("<", i, stop), body, done)
    b.position_at_end(body)
    yield i
    i.add_incoming(b.add(i, step, flags=["nsw"]), b.block)
    latch = b.branch(header)
    if metadata is not None:
        latch.set_metadata("llvm.loop", metadata)
    b.position_at_end(done)


def i64(value: int):
    return ir.Constant(I64, value)


def clamp(b, v, lo, hi):
    v = b.select(b.icmp_signed("<", v, lo), lo, v)
    return b.select(b.icmp_signed(">", v, hi), hi, v)


def _fmod_and_fix(b, x, y):
    """C's fmod(x, y) and whether it is non-zero with a sign unlike y's: the case where
    Python's ``%`` adds y and its ``//`` subtracts 1."""
    zero = ir.Constant(x.type, 0.0)
    r = b.frem(x, y)
    fix = b.and_(b.fcmp_ordered("!=", r, zero),
                 b.icmp_unsigned("!=", b.fcmp_ordered("<", r, zero),
                                 b.fcmp_ordered("<", y, zero)))
    return r, fix


def _python_float_mod(b, x, y):
    """``x % y`` with the divisor's sign (numpy's rule): fmod, then one correction."""
    r, fix = _fmod_and_fix(b, x, y)
    return b.select(fix, b.fadd(r, y), r)


def safe_floordiv(b, x, y):
    """Python floor division; x // 0 is 0 and INT_MIN // -1 wraps, so the host never traps.
    Floats follow numpy's npy_floor_divide: (x - fmod(x, y)) / y, minus 1 where the
    remainder's sign is unlike y's, rounded; x // 0.0 is inf or nan. (Subtracting Python's
    modulo instead gave nan for -5 // inf, whose modulo is inf; numpy and Python give -1.)"""
    if isinstance(x.type, (ir.FloatType, ir.DoubleType, ir.HalfType)):
        r, fix = _fmod_and_fix(b, x, y)
        q = b.fdiv(b.fsub(x, r), y)
        q = b.select(fix, b.fsub(q, ir.Constant(x.type, 1.0)), q)
        exact = b.fcmp_ordered("!=", y, ir.Constant(x.type, 0.0))
        return b.select(exact, call_intrinsic(b, "llvm.round", q), b.fdiv(x, y))
    zero, one, minus1 = (ir.Constant(x.type, c) for c in (0, 1, -1))
    bad = b.or_(b.icmp_signed("==", y, zero), b.icmp_signed("==", y, minus1))
    ys = b.select(bad, one, y)
    q = b.sdiv(x, ys)
    r = b.srem(x, ys)
    fix = b.and_(b.icmp_signed("!=", r, zero),
                 b.icmp_signed("!=", b.icmp_signed("<", r, zero), b.icmp_signed("<", ys, zero)))
    q = b.sub(q, b.zext(fix, x.type))
    q = b.select(b.icmp_signed("==", y, minus1), b.sub(zero, x), q)
    return b.select(b.icmp_signed("==", y, zero), zero, q)


def safe_mod(b, x, y):
    """Python modulo (the result takes the divisor's sign); x % 0 is 0 (floats: nan)."""
    if isinstance(x.type, (ir.FloatType, ir.DoubleType, ir.HalfType)):
        return _python_float_mod(b, x, y)
    zero, one, minus1 = (ir.Constant(x.type, c) for c in (0, 1, -1))
    bad = b.or_(b.icmp_signed("==", y, zero), b.icmp_signed("==", y, minus1))
    ys = b.select(bad, one, y)
    r = b.srem(x, ys)
    fix = b.and_(b.icmp_signed("!=", r, zero),
                 b.icmp_signed("!=", b.icmp_signed("<", r, zero), b.icmp_signed("<", ys, zero)))
    return b.select(fix, b.add(r, ys), r)


def safe_truncdiv(b, x, y):
    """C division that never traps: x / 0 is 0 and INT_MIN / -1 wraps."""
    zero, one, minus1 = (ir.Constant(x.type, c) for c in (0, 1, -1))
    bad = b.or_(b.icmp_signed("==", y, zero), b.icmp_signed("==", y, minus1))
    q = b.sdiv(x, b.select(bad, one, y))
    q = b.select(b.icmp_signed("==", y, minus1), b.sub(zero, x), q)
    return b.select(b.icmp_signed("==", y, zero), zero, q)


def safe_truncrem(b, x, y):
    """C remainder (sign of the dividend) that never traps: x % 0 is 0."""
    zero, one, minus1 = (ir.Constant(x.type, c) for c in (0, 1, -1))
    bad = b.or_(b.icmp_signed("==", y, zero), b.icmp_signed("==", y, minus1))
    return b.select(bad, zero, b.srem(x, b.select(bad, one, y)))


def safe_shift(b, x, n, left: bool, signed: bool):
    """Shifts defined for every amount: >= bits gives 0 (or the sign fill); a negative amount
    (signed types) counts as 0."""
    bits = x.type.width
    zero = ir.Constant(x.type, 0)
    if signed:
        n = b.select(b.icmp_signed("<", n, zero), zero, n)
    big = b.icmp_unsigned(">=", n, ir.Constant(x.type, bits))
    amount = b.select(big, ir.Constant(x.type, bits - 1), n)
    if left:
        return b.select(big, zero, b.shl(x, amount))
    return b.ashr(x, amount) if signed else b.select(big, zero, b.lshr(x, amount))


def call_intrinsic(b, name, value):
    fn = b.module.declare_intrinsic(name, [value.type])
    return b.call(fn, [value])


# exp(r) on [-ln2/2, ln2/2]: a degree-6 polynomial fitted for least maximum relative error
# (1.9e-9 on the interval, like Taylor's to r^7 with one coefficient less)
_EXP_POLY = (1.000000000554188, 1.0000000363230872, 0.4999999207946393, 0.16666420170217322,
             0.041668225648963365, 0.008374815779739843, 0.0013836841544819694)


def fast_exp_f32(b, x):
    """e**x for float32 in straight-line arithmetic, so loops over tiles vectorise (a libm call
    per element does not): x = n·ln2 + r, e**r by polynomial, then 2**n. Overflow gives inf;
    NaN stays NaN. Where the host has AVX-512, 2**n is applied with ``llvm.ldexp`` (one
    VSCALEFPS, which also rounds results below the normal range to subnormals and handles the
    overflow); elsewhere by building exponent bits, flushing results below the normal range
    to 0."""
    from .llvm_driver import host_has
    f32 = ir.FloatType()
    c = lambda v: ir.Constant(f32, v)
    scaled = host_has("avx512f")
    # past these, the result is 0 or inf whatever the polynomial says: ldexp rounds it there
    lo, hi = (-104.0, 89.0) if scaled else (-87.33654, 88.72283)
    xc = b.select(b.fcmp_ordered("<", x, c(lo)), c(lo), x)
    xc = b.select(b.fcmp_ordered(">", xc, c(hi)), c(hi), xc)
    n = call_intrinsic(b, "llvm.rint", b.fmul(xc, c(1.4426950408889634)))
    fmuladd = b.module.globals.get("llvm.fmuladd.f32") or ir.Function(
        b.module, ir.FunctionType(f32, [f32] * 3), name="llvm.fmuladd.f32")
    # r = x - n·ln2 with ln2 in two parts (Cody-Waite), each step one FMA where available
    r = b.call(fmuladd, [n, c(-0.693145751953125), xc])
    r = b.call(fmuladd, [n, c(-1.428606765330187e-06), r])
    p = c(_EXP_POLY[-1])
    for coef in reversed(_EXP_POLY[:-1]):
        p = b.call(fmuladd, [p, r, c(coef)])     # one FMA where the host has them
    ni = b.fptosi(n, I32)     # poison for a NaN x, whose result is x (the select below)
    if scaled:
        ldexp = b.module.globals.get("llvm.ldexp.f32.i32") or ir.Function(
            b.module, ir.FunctionType(f32, [f32, I32]), name="llvm.ldexp.f32.i32")
        y = b.call(ldexp, [p, ni])
    else:
        # 2**n split in two factors so n = 128 (x near the top of the range) stays finite
        half = b.ashr(ni, ir.Constant(I32, 1))
        s1 = b.bitcast(b.shl(b.add(half, ir.Constant(I32, 127)), ir.Constant(I32, 23)), f32)
        s2 = b.bitcast(b.shl(b.add(b.sub(ni, half), ir.Constant(I32, 127)),
                             ir.Constant(I32, 23)), f32)
        y = b.fmul(b.fmul(p, s1), s2)
        y = b.select(b.fcmp_ordered("<", x, c(lo)), c(0.0), y)
        y = b.select(b.fcmp_ordered(">", x, c(hi)), c(float("inf")), y)
    return b.select(b.fcmp_unordered("uno", x, x), x, y)
