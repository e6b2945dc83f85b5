"""The vector unit: elementwise instructions, comparisons and selects, conversions, row and
column broadcasts and reductions, and layout moves inside UB. Every rule is a counted loop over
dense row-major tiles with static trip counts, so LLVM vectorises it."""
from __future__ import annotations

from llvmlite import ir

from ....compiler.elementwise import BINARY, UNARY
from ....language import dtypes as dt
from ....target import WRAPPING_CONVERSIONS
from ..lowering_utils import (I64, call_intrinsic, compute_dtype, const, convert,
                              fast_exp_f32, loop_id,
                              counted_loop, from_compute, i64, safe_shift, safe_truncdiv,
                              safe_truncrem, storage_type, to_compute)


# -- per-element rules on compute-type values ------------------------------------------------------

def _float_or_int(fop, iop):
    def rule(b, x, y, d):
        return getattr(b, fop)(x, y) if d.is_floating else getattr(b, iop)(x, y)
    return rule


def _minmax(pred):
    """numpy's maximum/minimum: a NaN on either side wins; on a tie (-0.0 vs +0.0) the second
    operand is returned."""
    def rule(b, x, y, d):
        if d.is_floating:
            pick = b.select(b.fcmp_ordered(pred, x, y), x, y)
            return b.select(b.fcmp_unordered("uno", x, x), x,
                            b.select(b.fcmp_unordered("uno", y, y), y, pick))
        cmp = b.icmp_signed(pred, x, y) if d.is_signed else b.icmp_unsigned(pred, x, y)
        return b.select(cmp, x, y)
    return rule


def _reduce_minmax(name):
    """Max/min as reductions combine: llvm.maximum/minimum propagate NaN and, unlike a chain
    of selects, vectorise as reductions (a tie between -0.0 and +0.0 may go either way)."""
    def rule(b, x, y, d):
        if not d.is_floating:
            return BINARY_RULES[name](b, x, y, d)
        intrinsic = "llvm.maximum" if name == "max" else "llvm.minimum"
        fn = b.module.declare_intrinsic(intrinsic, [x.type],
                                        fnty=ir.FunctionType(x.type, [x.type, x.type]))
        return b.call(fn, [x, y])
    return rule


def _division(float_op, signed_rule, unsigned_op):
    """C division or remainder that never traps: by zero it gives 0 (for ints)."""
    def rule(b, x, y, d):
        if d.is_floating:
            return getattr(b, float_op)(x, y)
        if d.is_signed:
            return signed_rule(b, x, y)
        zero = ir.Constant(x.type, 0)
        is_zero = b.icmp_unsigned("==", y, zero)
        safe = b.select(is_zero, ir.Constant(x.type, 1), y)
        return b.select(is_zero, zero, getattr(b, unsigned_op)(x, safe))
    return rule


_div = _division("fdiv", safe_truncdiv, "udiv")
_fmod = _division("frem", safe_truncrem, "urem")


BINARY_RULES = {
    "add": _float_or_int("fadd", "add"), "sub": _float_or_int("fsub", "sub"),
    "mul": _float_or_int("fmul", "mul"), "div": _div, "fmod": _fmod,
    "max": _minmax(">"), "min": _minmax("<"),
    "and": lambda b, x, y, d: b.and_(x, y), "or": lambda b, x, y, d: b.or_(x, y),
    "xor": lambda b, x, y, d: b.xor(x, y),
    "shl": lambda b, x, y, d: safe_shift(b, x, y, True, d.is_signed),
    "shr": lambda b, x, y, d: safe_shift(b, x, y, False, d.is_signed),
}


REDUCE_MINMAX = {"max": _reduce_minmax("max"), "min": _reduce_minmax("min")}


def _cmp(fpred, ipred):
    def rule(b, x, y, d):
        if d.is_floating:
            if fpred == "!=":
                return b.fcmp_unordered("!=", x, y)
            return b.fcmp_ordered(fpred, x, y)
        return b.icmp_signed(ipred, x, y) if d.is_signed else b.icmp_unsigned(ipred, x, y)
    return rule


CMP_PREDICATES = {"lt": _cmp("<", "<"), "le": _cmp("<=", "<="), "gt": _cmp(">", ">"),
                  "ge": _cmp(">=", ">="), "eq": _cmp("==", "=="), "ne": _cmp("!=", "!=")}


def _zero(x):
    return ir.Constant(x.type, 0.0 if isinstance(x.type, ir.FloatType) else 0)


def _relu(b, x, d):
    """max(x, 0) as numpy computes it: NaN stays NaN, -0.0 becomes +0.0, unsigned is kept."""
    if d.is_floating:
        return b.select(b.fcmp_unordered(">", x, _zero(x)), x, _zero(x))
    if not d.is_signed:
        return x
    return b.select(b.icmp_signed("<", x, _zero(x)), _zero(x), x)


UNARY_RULES = {
    "neg": lambda b, x, d: b.fneg(x) if d.is_floating else b.sub(_zero(x), x),
    "abs": lambda b, x, d: call_intrinsic(b, "llvm.fabs", x) if d.is_floating else
    (b.select(b.icmp_signed("<", x, _zero(x)), b.sub(_zero(x), x), x) if d.is_signed else x),
    "not": lambda b, x, d: b.xor(x, ir.Constant(x.type, 1 if d == dt.bool_ else -1)),
    "relu": lambda b, x, d: _relu(b, x, d),
    "exp": lambda b, x, d: fast_exp_f32(b, x) if x.type == ir.FloatType() else
    call_intrinsic(b, "llvm.exp", x),
    "log": lambda b, x, d: call_intrinsic(b, "llvm.log", x),
    "sqrt": lambda b, x, d: call_intrinsic(b, "llvm.sqrt", x),
    "rsqrt": lambda b, x, d: b.fdiv(ir.Constant(x.type, 1.0), call_intrinsic(b, "llvm.sqrt", x)),
    "reciprocal": lambda b, x, d: b.fdiv(ir.Constant(x.type, 1.0), x),
}

ROUNDING_INTRINSICS = {"floor": "llvm.floor", "ceil": "llvm.ceil", "trunc": "llvm.trunc",
                       "rint": "llvm.rint", "round": "llvm.round"}    # round: half away

PTO_UNARY = {spec.pto: name for name, spec in UNARY.items() if spec.pto}
PTO_BINARY = {spec.pto: name for name, spec in BINARY.items() if spec.pto and spec.pto != "tcmp"}
PTO_BINARY_SCALAR = {spec.pto_scalar: name for name, spec in BINARY.items()
                     if spec.pto_scalar and spec.pto_scalar != "tcmps"}


# -- elementwise instructions -----------------------------------------------------------------
# Each element rule returns (inputs, body): inputs are tiles or ready LLVM scalars; body maps
# the inputs' compute-type values to the stored value of one output element. The same rule
# serves a standalone instruction and a fused group (fusion.fused).

def _binary_elem(name, scalar_rhs):
    def elem(cg, inst):
        a, c = inst.ins
        out = inst.outs[0]
        op = inst.attrs.get("cmp", name)
        cd = compute_dtype(a.dtype)
        if op in CMP_PREDICATES:
            fn = CMP_PREDICATES[op]

            def body(x, y):
                return cg.b.zext(fn(cg.b, x, y, cd), storage_type(dt.bool_))
        else:
            fn = BINARY_RULES[op]

            def body(x, y):
                return from_compute(cg.b, fn(cg.b, x, y, cd), out.dtype)
        rhs = to_compute(cg.b, cg.get(c), c.dtype) if scalar_rhs else c
        return [a, rhs], body
    return elem


def _unary_elem(name):
    def elem(cg, inst):
        src, out = inst.ins[0], inst.outs[0]
        fn = UNARY_RULES[name]
        cd = compute_dtype(src.dtype)
        return [src], lambda x: from_compute(cg.b, fn(cg.b, x, cd), out.dtype)
    return elem


def tsel_elem(cg, inst):
    """TSEL, and TSELS whose third operand is a scalar: the mask's bit picks the tile's
    element, else the other tile's or the scalar."""
    mask, a, c = inst.ins
    out = inst.outs[0]
    b = cg.b

    def pick(m, x, y):
        return from_compute(
            b, b.select(b.icmp_unsigned("!=", m, ir.Constant(m.type, 0)), x, y), out.dtype)
    if inst.op == "tsels":
        y = to_compute(b, cg.get(c), c.dtype)
        return [mask, a], lambda m, x: pick(m, x, y)
    return [mask, a, c], pick


def tcvt_elem(cg, inst):
    """A requested ``rmode`` rounds to an integral value first (PyPTO's ``cast(rounding=)``,
    the interpreter's rule, between floats too); without one, conversions follow numpy (round
    to nearest even between floats, truncation to ints)."""
    src, out = inst.ins[0], inst.outs[0]
    mode = inst.attrs.get("rmode")
    b = cg.b
    if mode is not None and src.dtype.is_floating and mode not in ROUNDING_INTRINSICS:
        raise ValueError(f"tcvt: no rounding mode {mode!r} (PyPTO has "
                         f"{', '.join(sorted(ROUNDING_INTRINSICS))})")

    def body(x):
        if mode is not None and src.dtype.is_floating:
            x = call_intrinsic(b, ROUNDING_INTRINSICS[mode], x)
        if (src.dtype.name, out.dtype.name) in WRAPPING_CONVERSIONS and \
                not inst.attrs.get("sat"):       # by the tile's dtype,
            wide = convert(b, x, compute_dtype(src.dtype), dt.int32)   # not the computed one
            return b.trunc(wide, storage_type(out.dtype))
        return convert(b, x, compute_dtype(src.dtype), out.dtype)
    return [src], body


def texpands_elem(cg, inst):
    out = inst.outs[0]
    b = cg.b
    if inst.ins:
        s = inst.ins[0]
        v = convert(b, cg.get(s), s.dtype, out.dtype)
    else:
        v = from_compute(b, const(out.dtype, inst.attrs["value"]), out.dtype)
    return [], lambda: v


def copy_elem(cg, inst):
    """TMOV within UB and the row/column expands: fused loops read the source with
    broadcasting indices, so all three are a copy of the element."""
    src, out = inst.ins[0], inst.outs[0]
    return [src], lambda x: from_compute(cg.b, x, out.dtype)


ELEMENT_RULES = {
    **{pto: _binary_elem(name, False) for pto, name in PTO_BINARY.items()},
    **{pto: _binary_elem(name, True) for pto, name in PTO_BINARY_SCALAR.items()},
    "tcmp": _binary_elem(None, False), "tcmps": _binary_elem(None, True),
    **{pto: _unary_elem(name) for pto, name in PTO_UNARY.items()},
    "tsel": tsel_elem, "tsels": tsel_elem, "tcvt": tcvt_elem, "texpands": texpands_elem,
    "tmov": copy_elem, "treshape": copy_elem, "trowexpand": copy_elem, "tcolexpand": copy_elem,
}


def _standalone(elem):
    def rule(cg, inst):
        inputs, body = elem(cg, inst)
        cg.elementwise(inst.outs[0], inputs, body)
    return rule


def copy(cg, inst):
    """TMOV and TRESHAPE: our tiles are dense row-major, so both are a straight copy (a
    transposing TMOV, used for matmul(a_trans=True), swaps rows and columns)."""
    if inst.attrs.get("transpose"):
        return ttrans(cg, inst)
    if inst.ins[0].dtype != inst.outs[0].dtype and inst.outs[0].loc == "bias":
        return _standalone(tcvt_elem)(cg, inst)      # L1 -> bias table widens fp16 to fp32
    if inst.ins[0].dtype != inst.outs[0].dtype:
        return     # a bitcast: the planner put dst on src's bytes, which are the result
    _standalone(copy_elem)(cg, inst)


def tci(cg, inst):
    out = inst.outs[0]
    b = cg.b
    optr = cg.tile_ptr(out)
    start = inst.attrs["start"]
    with counted_loop(b, i64(0), i64(out.numel), name="ci") as i:
        v = b.trunc(b.add(i, i64(start)), storage_type(out.dtype))
        cg.store_elem(v, optr, out.dtype, i)


def _expand(rows_from_src: bool):
    def rule(cg, inst):
        src, out = inst.ins[0], inst.outs[0]
        b = cg.b
        sp, op_ = cg.tile_ptr(src), cg.tile_ptr(out)
        with counted_loop(b, i64(0), i64(out.rows), name="r") as r:
            with counted_loop(b, i64(0), i64(out.cols), name="c") as c:
                s_index = r if rows_from_src else c
                v = cg.load_elem(sp, src.dtype, s_index)
                cg.store_elem(convert(b, v, src.dtype, out.dtype), op_, out.dtype,
                              b.add(b.mul(r, i64(out.cols)), c))
    return rule


def ttrans(cg, inst):
    src, out = inst.ins[0], inst.outs[0]
    b = cg.b
    sp, op_ = cg.tile_ptr(src), cg.tile_ptr(out)
    with counted_loop(b, i64(0), i64(src.rows), name="r") as r:
        with counted_loop(b, i64(0), i64(src.cols), name="c") as c:
            v = cg.load_elem(sp, src.dtype, b.add(b.mul(r, i64(src.cols)), c))
            cg.store_elem(v, op_, out.dtype, b.add(b.mul(c, i64(out.cols)), r))


def textract(cg, inst):
    """The window at ``starts`` of the source; ``transpose`` (a matmul operand extracted
    into L0B for ``b_trans``): the window's transpose."""
    src, out = inst.ins[0], inst.outs[0]
    r0, c0 = inst.attrs["starts"]
    flip = inst.attrs.get("transpose", False)
    b = cg.b
    sp, op_ = cg.tile_ptr(src), cg.tile_ptr(out)
    with counted_loop(b, i64(0), i64(out.rows), name="r") as r:
        with counted_loop(b, i64(0), i64(out.cols), name="c") as c:
            sr, sc = (c, r) if flip else (r, c)
            si = b.add(b.mul(b.add(sr, i64(r0)), i64(src.cols)), b.add(sc, i64(c0)))
            cg.store_elem(cg.load_elem(sp, src.dtype, si), op_, out.dtype,
                          b.add(b.mul(r, i64(out.cols)), c))


def tconcat(cg, inst):
    out = inst.outs[0]
    axis = inst.attrs["axis"]
    b = cg.b
    op_ = cg.tile_ptr(out)
    at = 0
    for src in inst.ins:
        sp = cg.tile_ptr(src)
        r0, c0 = (at, 0) if axis == 0 else (0, at)
        with counted_loop(b, i64(0), i64(src.rows), name="r") as r:
            with counted_loop(b, i64(0), i64(src.cols), name="c") as c:
                di = b.add(b.mul(b.add(r, i64(r0)), i64(out.cols)), b.add(c, i64(c0)))
                cg.store_elem(cg.load_elem(sp, src.dtype, b.add(b.mul(r, i64(src.cols)), c)),
                              op_, out.dtype, di)
        at += src.rows if axis == 0 else src.cols


# -- reductions ------------------------------------------------------------------------------------

def _identity(op: str, d: dt.dtype):
    if op == "sum":
        return const(d, 0)
    if op == "prod":
        return const(d, 1)
    if d.is_floating:
        return ir.Constant(storage_type(compute_dtype(d)), float("-inf" if op == "max" else "inf"))
    bits = d.bits
    if d.is_signed:
        return ir.Constant(storage_type(d), -(1 << (bits - 1)) if op == "max"
                           else (1 << (bits - 1)) - 1)
    return ir.Constant(storage_type(d), 0 if op == "max" else (1 << bits) - 1)


LANES = 32
"""Partial accumulators of a floating-point row sum or product: column ``c`` goes to lane
``c % LANES`` (each lane in column order), and the lanes are combined in a fixed tree (lane
``j`` with ``j + half``, halving). The order is spelled out in the IR without fast-math flags,
so the bits do not depend on the vector width or interleave LLVM picks for the host, nor on
what else shares the loop (a fusion group or the instruction alone)."""


def ordered(op: str, d: dt.dtype) -> bool:
    """Does a reduction's result depend on the order it combines elements in (a float sum or
    product)? Those run in ``LANES`` fixed lanes (``reduce_row``)."""
    return op in ("sum", "prod") and compute_dtype(d).is_floating


def _combine(b, op, acc, x, d):
    """One step of a reduction. Float sums and products carry no fast-math flag: their
    association is the IR's own (``reduce_row``'s lanes, ``_col``'s one chain per column)."""
    if op == "sum":
        return b.fadd(acc, x) if d.is_floating else b.add(acc, x)
    if op == "prod":
        return b.fmul(acc, x) if d.is_floating else b.mul(acc, x)
    return REDUCE_MINMAX[op](b, acc, x, d)


def _reduce_rule(direction, op):
    def rule(cg, inst):
        src, out = inst.ins[0], inst.outs[0]
        if op in ("argmax", "argmin"):
            return _row_arg(cg, src, out, op)
        (_row if direction == "row" else _col)(cg, src, out, op)
    return rule


HEAVY = {pto for pto, name in {**PTO_UNARY, **PTO_BINARY, **PTO_BINARY_SCALAR}.items()
         if name in ("exp", "log", "sqrt", "rsqrt", "reciprocal", "div", "fmod")}
"""Instructions whose vectorised body takes many registers (a polynomial, a division)."""


def reduce_row(cg, op, src, out, ranges, r, heavy=False):
    """One row of a row reduction (``op``: sum, max, min or prod) of ``src`` into row ``r`` of
    ``out``: ``ranges`` are (first column, end, element(c) -> the source's value at column c,
    as stored), run in turn. Shared by the standalone instruction (``_row``) and a fusion group
    it closes (fusion ``_fused_loop``), so both combine a row alike.

    Max and min (exact in any order) and integer sums keep one accumulator that LLVM may split
    as it likes. A float sum or product (``ordered``) runs in ``LANES`` lanes: full blocks of
    LANES columns in an inner loop that LLVM vectorises across lanes (they are independent),
    then the last ``cols % LANES`` columns into the first lanes, then the fixed tree; that
    needs one range over every column from 0 (groups closed by one keep one loop). ``heavy``:
    the elements come from a ``HEAVY`` instruction; the inner loop then runs two vectors at a
    time instead of being unrolled over the block (which spilled: softmax 256x1024 took 15 %
    longer)."""
    b = cg.b
    cd = compute_dtype(src.dtype)
    ty = storage_type(cd)
    if not ordered(op, src.dtype):
        acc = cg.entry_alloca(ty)
        b.store(_identity(op, src.dtype), acc)
        for lo, hi, element in ranges:
            with counted_loop(b, lo, hi, name="rc") as c:
                b.store(_combine(b, op, b.load(acc), to_compute(b, element(c), src.dtype), cd),
                        acc)
        total = b.load(acc)
    else:
        (lo, hi, element), = ranges
        assert isinstance(lo, ir.Constant) and lo.constant == 0 and isinstance(hi, ir.Constant)
        cols = hi.constant
        vec = ir.VectorType(ty, LANES)
        identity = ir.Constant(vec, [_identity(op, src.dtype).constant] * LANES)
        # the lanes as one vector (promoted to registers: only ever accessed whole); each
        # block of LANES columns is computed into ``block`` by an inner loop that LLVM
        # vectorises, then combined into the lanes
        whole, block = cg.entry_alloca(vec), cg.entry_alloca(vec)
        elements = b.bitcast(block, ty.as_pointer())
        b.store(identity, whole)
        block_loop = loop_id(b.module, "llvm.loop.unroll.disable",
                             ("llvm.loop.interleave.count", 2)) if heavy else None

        def one_block(first, count):
            if count < LANES:
                # the last columns: the other lanes take the identity, which changes no bits
                # (a lane starts at +0.0, so is never -0.0, and x * 1.0 is x)
                b.store(identity, block)
            with counted_loop(b, i64(0), i64(count), name="rl", metadata=block_loop) as j:
                b.store(to_compute(b, element(b.add(first, j)), src.dtype),
                        b.gep(elements, [j], source_etype=ty))
            b.store(_combine(b, op, b.load(whole, typ=vec), b.load(block, typ=vec), cd), whole)

        full = cols // LANES * LANES
        if full:
            with counted_loop(b, i64(0), i64(full), step=i64(LANES), name="rb") as c0:
                one_block(c0, LANES)
        if cols > full:
            one_block(i64(full), cols - full)
        v, width = b.load(whole, typ=vec), LANES
        while width > 1:
            half = width // 2
            lo_half = b.shuffle_vector(v, v, ir.Constant(ir.VectorType(ir.IntType(32), half),
                                                         list(range(half))))
            hi_half = b.shuffle_vector(v, v, ir.Constant(ir.VectorType(ir.IntType(32), half),
                                                         list(range(half, width))))
            v, width = _combine(b, op, lo_half, hi_half, cd), half
        total = b.extract_element(v, ir.Constant(ir.IntType(32), 0))
    cg.store_elem(convert(b, total, cd, out.dtype), cg.tile_ptr(out), out.dtype, r)


def _row(cg, src, out, op):
    b = cg.b
    sp = cg.tile_ptr(src)
    with counted_loop(b, i64(0), i64(src.rows), name="r") as r:
        row = b.mul(r, i64(src.cols))
        reduce_row(cg, op, src, out,
                   [(i64(0), i64(src.cols), lambda c: cg.load_elem(sp, src.dtype, b.add(row, c)))],
                   r)


def _col(cg, src, out, op):
    b = cg.b
    cd = compute_dtype(src.dtype)
    sp, op_ = cg.tile_ptr(src), cg.tile_ptr(out)
    accs = cg.entry_alloca(storage_type(cd), src.cols)
    with counted_loop(b, i64(0), i64(src.cols), name="c") as c:
        b.store(_identity(op, src.dtype), b.gep(accs, [c], source_etype=storage_type(cd)))
    with counted_loop(b, i64(0), i64(src.rows), name="r") as r:
        with counted_loop(b, i64(0), i64(src.cols), name="c") as c:
            slot = b.gep(accs, [c], source_etype=storage_type(cd))
            x = to_compute(b, cg.load_elem(sp, src.dtype, b.add(b.mul(r, i64(src.cols)), c)),
                           src.dtype)
            b.store(_combine(b, op, b.load(slot), x, cd), slot)
    with counted_loop(b, i64(0), i64(src.cols), name="c") as c:
        v = b.load(b.gep(accs, [c], source_etype=storage_type(cd)))
        cg.store_elem(convert(b, v, cd, out.dtype), op_, out.dtype, c)


def _row_arg(cg, src, out, op):
    """First index of the row's extreme; a NaN wins over any number (numpy's rule)."""
    b = cg.b
    cd = compute_dtype(src.dtype)
    sp, op_ = cg.tile_ptr(src), cg.tile_ptr(out)
    best, best_i = cg.entry_alloca(storage_type(cd)), cg.entry_alloca(I64)
    pred = ">" if op == "argmax" else "<"
    with counted_loop(b, i64(0), i64(src.rows), name="r") as r:
        row = b.mul(r, i64(src.cols))
        b.store(to_compute(b, cg.load_elem(sp, src.dtype, row), src.dtype), best)
        b.store(i64(0), best_i)
        with counted_loop(b, i64(1), i64(src.cols), name="c") as c:
            x = to_compute(b, cg.load_elem(sp, src.dtype, b.add(row, c)), src.dtype)
            cur = b.load(best)
            if cd.is_floating:
                better = b.or_(b.fcmp_ordered(pred, x, cur),
                               b.and_(b.fcmp_unordered("uno", x, x),
                                      b.fcmp_ordered("ord", cur, cur)))
            else:
                better = b.icmp_signed(pred, x, cur) if cd.is_signed else \
                    b.icmp_unsigned(pred, x, cur)
            b.store(b.select(better, x, cur), best)
            b.store(b.select(better, c, b.load(best_i)), best_i)
        cg.store_elem(b.trunc(b.load(best_i), storage_type(out.dtype)), op_, out.dtype, r)


RULES = {
    **{op: _standalone(elem) for op, elem in ELEMENT_RULES.items()},
    "tmov": copy, "treshape": copy, "tci": tci,
    "trowexpand": _expand(True), "tcolexpand": _expand(False),
    "ttrans": ttrans, "textract": textract, "tconcat": tconcat,
    **{f"t{d}{op}": _reduce_rule(d, op) for d in ("row", "col")
       for op in ("sum", "max", "min", "prod", "argmax", "argmin")},
}
