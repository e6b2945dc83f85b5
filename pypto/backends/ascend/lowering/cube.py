"""The cube unit: TMATMUL and TMATMUL.ACC over L0A/L0B into L0C.

The fractal layouts of L0A/L0B are a packing step in disguise; in our simulated buffers the
operands are dense row-major, so B's rows are already contiguous panels. The product is
computed by a register-blocked micro-kernel: MR rows × NR columns of C stay in vector
registers across the whole K loop (NR/LANES vectors per row, updated with FMAs from a
broadcast A element and a B row vector). Edges that do not fill a block use a plain loop.
"""
from __future__ import annotations

from llvmlite import ir

from ....language import dtypes as dt
from ..lowering_utils import F32, I32, const, convert, counted_loop, i64, storage_type

MR, LANES, NR_VECTORS = 4, 16, 2
NR = LANES * NR_VECTORS


def _vector_row(b, cg, ptr, d: dt.dtype, index, acc_dtype):
    """LANES consecutive elements of ``ptr`` from ``index``, widened to the accumulator type."""
    elem = storage_type(d)
    vec = b.load(b.gep(ptr, [index], source_etype=elem), typ=ir.VectorType(elem, LANES), align=1)
    acc = storage_type(acc_dtype)
    if d == acc_dtype:
        return vec
    if d == dt.bfloat16:
        wide = b.shl(b.zext(vec, ir.VectorType(I32, LANES)),
                     ir.Constant(ir.VectorType(I32, LANES), [16] * LANES))
        return b.bitcast(wide, ir.VectorType(F32, LANES))
    if d.is_floating:
        return b.fpext(vec, ir.VectorType(acc, LANES))
    return b.sext(vec, ir.VectorType(acc, LANES))


def _splat(b, value, lanes=LANES):
    vec = ir.VectorType(value.type, lanes)
    undef = ir.Constant(vec, ir.Undefined)
    one = b.insert_element(undef, value, i64(0))
    return b.shuffle_vector(one, undef, ir.Constant(ir.VectorType(I32, lanes), [0] * lanes))


def _blocked(cg, c, a, bt, accumulate, m_blocks, n_blocks):
    """C[:m_blocks*MR, :n_blocks*NR] (+)= A @ B with an MR x NR register block."""
    b = cg.b
    k, n = a.cols, bt.cols
    cd = c.dtype
    acc_ty = ir.VectorType(storage_type(cd), LANES)
    fma = None
    if cd.is_floating:
        name = f"llvm.fma.v{LANES}f{cd.bits}"
        fma = b.module.globals.get(name) or ir.Function(
            b.module, ir.FunctionType(acc_ty, [acc_ty, acc_ty, acc_ty]), name=name)
    cp, ap, bp = cg.tile_ptr(c), cg.tile_ptr(a), cg.tile_ptr(bt)
    slots = [cg.entry_alloca(acc_ty) for _ in range(MR * NR_VECTORS)]
    with counted_loop(b, i64(0), i64(m_blocks * MR), i64(MR), name="mb") as m0:
        with counted_loop(b, i64(0), i64(n_blocks * NR), i64(NR), name="nb") as n0:
            for i in range(MR):
                for j in range(NR_VECTORS):
                    index = b.add(b.mul(b.add(m0, i64(i)), i64(n)), b.add(n0, i64(j * LANES)))
                    init = _vector_row(b, cg, cp, cd, index, cd) if accumulate else \
                        ir.Constant(acc_ty, [const(cd, 0).constant] * LANES)
                    b.store(init, slots[i * NR_VECTORS + j])
            with counted_loop(b, i64(0), i64(k), name="k") as kk:
                rows = [_vector_row(b, cg, bp, bt.dtype, b.add(b.mul(kk, i64(n)),
                                                              b.add(n0, i64(j * LANES))), cd)
                        for j in range(NR_VECTORS)]
                for i in range(MR):
                    a_el = cg.load_elem(ap, a.dtype, b.add(b.mul(b.add(m0, i64(i)), i64(k)), kk))
                    av = _splat(b, convert(b, a_el, a.dtype, cd))
                    for j in range(NR_VECTORS):
                        slot = slots[i * NR_VECTORS + j]
                        old = b.load(slot)
                        new = b.call(fma, [av, rows[j], old]) if fma else \
                            b.add(old, b.mul(av, rows[j]))
                        b.store(new, slot)
            for i in range(MR):
                for j in range(NR_VECTORS):
                    index = b.add(b.mul(b.add(m0, i64(i)), i64(n)), b.add(n0, i64(j * LANES)))
                    ptr = b.gep(cp, [index], source_etype=storage_type(cd))
                    b.store(b.load(slots[i * NR_VECTORS + j]), ptr, align=1)


def _plain(cg, c, a, bt, accumulate, rows, cols):
    """C[rows, cols] (+)= A @ B over the given static ranges, vectorised along n by LLVM."""
    b = cg.b
    k, n = a.cols, bt.cols
    cd = c.dtype
    cp, ap, bp = cg.tile_ptr(c), cg.tile_ptr(a), cg.tile_ptr(bt)
    (r0, r1), (c0, c1) = rows, cols
    if r0 >= r1 or c0 >= c1:
        return
    if not accumulate:
        zero = const(cd, 0)
        with counted_loop(b, i64(r0), i64(r1), name="zm") as mi:
            with counted_loop(b, i64(c0), i64(c1), name="zn") as ni:
                cg.store_elem(zero, cp, cd, b.add(b.mul(mi, i64(n)), ni))
    with counted_loop(b, i64(r0), i64(r1), name="m") as mi:
        with counted_loop(b, i64(0), i64(k), name="k") as ki:
            av = convert(b, cg.load_elem(ap, a.dtype, b.add(b.mul(mi, i64(k)), ki)), a.dtype, cd)
            with counted_loop(b, i64(c0), i64(c1), name="n") as ni:
                bv = convert(b, cg.load_elem(bp, bt.dtype, b.add(b.mul(ki, i64(n)), ni)),
                             bt.dtype, cd)
                ci = b.add(b.mul(mi, i64(n)), ni)
                old = cg.load_elem(cp, cd, ci)
                if cd.is_floating:
                    new = b.fadd(old, b.fmul(av, bv, flags=["contract"]), flags=["contract"])
                else:
                    new = b.add(old, b.mul(av, bv))
                cg.store_elem(new, cp, cd, ci)


def _widened(cg, a, bt):
    """Half-precision operands converted to float32 once, into the host packing area, so the
    micro-kernel's inner loop does plain float32 FMAs (the widening is exact)."""
    if a.dtype not in (dt.float16, dt.bfloat16):
        return a, bt
    from ....compiler.pto import Tile
    pa = Tile("pack_a", "pack", dt.float32, a.rows, a.cols, 0)
    pb = Tile("pack_b", "pack", dt.float32, bt.rows, bt.cols,
              -(-a.rows * a.cols * 4 // 64) * 64)
    for src, dst in ((a, pa), (bt, pb)):
        cg.elementwise(dst, [src], lambda x: x)
    return pa, pb


def _matmul(cg, c, a, bt, accumulate: bool):
    a, bt = _widened(cg, a, bt)
    m, n = a.rows, bt.cols
    m_blocks, n_blocks = m // MR, n // NR
    if m_blocks and n_blocks:
        _blocked(cg, c, a, bt, accumulate, m_blocks, n_blocks)
    _plain(cg, c, a, bt, accumulate, (0, m_blocks * MR), (n_blocks * NR, n))   # right edge
    _plain(cg, c, a, bt, accumulate, (m_blocks * MR, m), (0, n))              # bottom edge


def tmatmul(cg, inst):
    a, bt = inst.ins
    _matmul(cg, inst.outs[0], a, bt, accumulate=False)


def tmatmul_acc(cg, inst):
    _, a, bt = inst.ins
    _matmul(cg, inst.outs[0], a, bt, accumulate=True)


def tmatmul_bias(cg, inst):
    """``c = a @ b + bias``, the (1, N) bias row (the bias table) added to every row: the
    accumulator starts as the bias, then accumulates the product."""
    a, bt, bias = inst.ins
    c, b = inst.outs[0], cg.b
    cp, bp = cg.tile_ptr(c), cg.tile_ptr(bias)
    with counted_loop(b, i64(0), i64(c.rows), name="bm") as mi:
        with counted_loop(b, i64(0), i64(c.cols), name="bn") as ni:
            v = convert(b, cg.load_elem(bp, bias.dtype, ni), bias.dtype, c.dtype)
            cg.store_elem(v, cp, c.dtype, b.add(b.mul(mi, i64(c.cols)), ni))
    _matmul(cg, c, a, bt, accumulate=True)


RULES = {"tmatmul": tmatmul, "tmatmul.acc": tmatmul_acc, "tmatmul.bias": tmatmul_bias}
