"""Vector instructions that combine a tile with a broadcast row or column, or three tiles:
``trowexpand<op>`` / ``tcolexpand<op>`` (op: add, sub, mul, div, max, min) and ``taddc`` /
``tsubc``. PyPTO's own kernels never emit them (the compiler writes ``trowexpand`` then the
elementwise op); hand-written ``.pto`` does (PTOAS's samples: softmax, attention updates).

The meaning is pto-isa's (``include/pto/cpu/TRowExpandOp.hpp``, ``TColExpandOp.hpp``,
``ElementTileOp.h``): over the destination's rows r and columns c, each source is read at
(r mod its rows, c mod its columns), so the (M, 1) column of a row expand and the (1, N) row
of a column expand repeat, while a source of the destination's shape is read element by
element; ``taddc`` is (a + b) + c and ``tsubc`` (a - b) + c, in that order.
"""
from __future__ import annotations

from ....compiler.pto.isa import EXPAND_OPS
from ..lowering_utils import compute_dtype, counted_loop, from_compute, i64, to_compute
from .vector import BINARY_RULES


def _wrap(b, i, n: int, full: int):
    """``i mod n`` for an index below ``full``."""
    if n == full:
        return i
    return i64(0) if n == 1 else b.urem(i, i64(n))


def _broadcast_rule(combine):
    """A rule computing ``out[r, c] = combine(b, [x0[r, c], x1[r, c], ...])`` in the compute
    type, each source read at (r mod its rows, c mod its columns)."""
    def rule(cg, inst):
        out, b = inst.outs[0], cg.b
        cd = compute_dtype(out.dtype)
        ptrs = [cg.tile_ptr(src) for src in inst.ins]
        optr = cg.tile_ptr(out)
        with counted_loop(b, i64(0), i64(out.rows), name="r") as r:
            with counted_loop(b, i64(0), i64(out.cols), name="c") as c:
                xs = []
                for p, s in zip(ptrs, inst.ins):
                    at = b.add(b.mul(_wrap(b, r, s.rows, out.rows), i64(s.cols)),
                               _wrap(b, c, s.cols, out.cols))
                    xs.append(to_compute(b, cg.load_elem(p, s.dtype, at), s.dtype))
                value = from_compute(b, combine(b, xs, cd), out.dtype)
                cg.store_elem(value, optr, out.dtype, b.add(b.mul(r, i64(out.cols)), c))
    return rule


def _binary(name):
    return lambda b, xs, d: BINARY_RULES[name](b, xs[0], xs[1], d)


def _carry(first):
    add = BINARY_RULES["add"]
    return lambda b, xs, d: add(b, BINARY_RULES[first](b, xs[0], xs[1], d), xs[2], d)


RULES = {
    **{f"t{axis}expand{op}": _broadcast_rule(_binary(op)) for axis in ("row", "col")
       for op in EXPAND_OPS},
    "taddc": _broadcast_rule(_carry("add")), "tsubc": _broadcast_rule(_carry("sub")),
}
