"""The cube unit: TMATMUL and TMATMUL.ACC over L0A/L0B into L0C."""
from __future__ import annotations

from ..lowering_utils import const, convert, counted_loop, i64


def _matmul(cg, c, a, bt, accumulate: bool):
    b = cg.b
    m, k, n = a.rows, a.cols, bt.cols
    cd = c.dtype
    cp, ap, bp = cg.tile_ptr(c), cg.tile_ptr(a), cg.tile_ptr(bt)
    if not accumulate:
        zero = const(cd, 0)
        with counted_loop(b, i64(0), i64(m * n), name="z") as i:
            cg.store_elem(zero, cp, cd, i)
    with counted_loop(b, i64(0), i64(m), name="m") as mi:
        with counted_loop(b, i64(0), i64(k), name="k") as ki:
            av = convert(b, cg.load_elem(ap, a.dtype, b.add(b.mul(mi, i64(k)), ki)), a.dtype, cd)
            with counted_loop(b, i64(0), i64(n), name="n") as ni:
                bv = convert(b, cg.load_elem(bp, bt.dtype, b.add(b.mul(ki, i64(n)), ni)),
                             bt.dtype, cd)
                ci = b.add(b.mul(mi, i64(n)), ni)
                old = cg.load_elem(cp, cd, ci)
                if cd.is_floating:
                    new = b.fadd(old, b.fmul(av, bv, flags=["contract"]), flags=["contract"])
                else:
                    new = b.add(old, b.mul(av, bv))
                cg.store_elem(new, cp, cd, ci)


def tmatmul(cg, inst):
    a, bt = inst.ins
    _matmul(cg, inst.outs[0], a, bt, accumulate=False)


def tmatmul_acc(cg, inst):
    _, a, bt = inst.ins
    _matmul(cg, inst.outs[0], a, bt, accumulate=True)


RULES = {"tmatmul": tmatmul, "tmatmul.acc": tmatmul_acc}
