"""The SFU's sort instructions on the host: TSORT32 (VBS32), TMRGSORT (VMS4) and the
deinterleave that follows them, TGATHER's P0101 / P1010 mask patterns.

A (value, index) pair is two 32-bit words: the float32 value and the index's bits (only
float32 pairs are lowered: PyPTO sorts float16 in float32, legalize_sort32). The rules follow
pto-isa's CPU simulator (include/pto/cpu/TSort32.hpp, TMrgSort.hpp, TGather.hpp), the
reference the pto-isa engine runs: a 32-block is sorted descending, equal values by index
then position; a merge takes, at each step, the first list whose head is larger than the
heads before it (``>``: equal heads leave from the earlier list). Values are compared as
floats and copied as bits, so a pair comes out as it went in.
"""
from __future__ import annotations

from llvmlite import ir

from ....language import dtypes as dt
from ..lowering_utils import I64, counted_loop, i64

I1, I32, F32 = ir.IntType(1), ir.IntType(32), ir.FloatType()
BLOCK = 32


def _word(cg, base, index):
    return cg.load_elem(base, dt.int32, index)


def _value(b, word):
    return b.bitcast(word, F32)


def tsort32(cg, inst):
    """Each 32-block's pairs written at their rank: the number of pairs that sort before
    them (larger value; equal value and smaller index; equal both and earlier position).
    Whole blocks compare each pair with the block as 32-lane vectors (a popcount of the
    mask is the rank); a last partial block counts one pair at a time."""
    src, idx = inst.ins
    dst = inst.outs[0]
    b = cg.b
    ptrs = cg.tile_ptr(src), cg.tile_ptr(idx), cg.tile_ptr(dst)
    cols = src.cols
    whole = cols // BLOCK * BLOCK
    with counted_loop(b, i64(0), i64(src.rows), name="sr") as r:
        row, out_row = b.mul(r, i64(cols)), b.mul(r, i64(dst.cols))
        if whole:
            with counted_loop(b, i64(0), i64(whole), step=i64(BLOCK), name="sb") as first:
                _sort_block(cg, ptrs, row, out_row, first)
        if whole < cols:
            with counted_loop(b, i64(whole), i64(cols), name="sj") as j:
                _place(cg, ptrs, row, out_row, i64(whole), j,
                       lambda kj, pj: _rank(cg, ptrs, row, i64(whole), j, kj, pj, cols))


def _place(cg, ptrs, row, out_row, first, j, rank_of):
    """Pair ``j`` of the block at ``first`` written at its rank in that block."""
    b = cg.b
    sp, ip, dp = ptrs
    at = b.add(row, j)
    kj, pj = _value(b, _word(cg, sp, at)), _word(cg, ip, at)
    slot = b.mul(b.add(first, rank_of(kj, pj)), i64(2))
    cg.store_elem(b.bitcast(kj, I32), dp, dt.int32, b.add(out_row, slot))
    cg.store_elem(pj, dp, dt.int32, b.add(out_row, b.add(slot, i64(1))))


def _sort_block(cg, ptrs, row, out_row, first):
    b = cg.b
    sp, ip, _ = ptrs
    vk, vi = ir.VectorType(F32, BLOCK), ir.VectorType(I32, BLOCK)
    at = b.add(row, first)
    keys = b.load(cg.elem_ptr(sp, dt.float32, at), typ=vk, align=4)
    pays = b.load(cg.elem_ptr(ip, dt.int32, at), typ=vi, align=4)
    lanes = ir.Constant(vi, list(range(BLOCK)))
    popcount = b.module.globals.get("llvm.ctpop.i32") or ir.Function(
        b.module, ir.FunctionType(I32, [I32]), name="llvm.ctpop.i32")

    def rank_of(kj, pj, q):
        def splat(v, ty):
            return b.shuffle_vector(b.insert_element(ir.Constant(ty, ir.Undefined), v, i64(0)),
                                    ir.Constant(ty, ir.Undefined), ir.Constant(vi, [0] * BLOCK))
        k, p = splat(kj, vk), splat(pj, vi)
        same_pay = b.icmp_unsigned("==", pays, p)
        earlier = b.icmp_signed("<", lanes, splat(b.trunc(q, I32), vi))
        tie = b.or_(b.icmp_unsigned("<", pays, p), b.and_(same_pay, earlier))
        before = b.or_(b.fcmp_ordered(">", keys, k), b.and_(b.fcmp_ordered("==", keys, k), tie))
        bits = b.bitcast(before, I32)
        return b.zext(b.call(popcount, [bits]), I64)

    with counted_loop(b, i64(0), i64(BLOCK), name="sq") as q:
        _place(cg, ptrs, row, out_row, first, b.add(first, q),
               lambda kj, pj: rank_of(kj, pj, q))


def _rank(cg, ptrs, row, first, j, kj, pj, cols):
    b = cg.b
    sp, ip, _ = ptrs
    acc = cg.entry_alloca(I64)
    b.store(i64(0), acc)
    with counted_loop(b, i64(0), i64(BLOCK), name="sq") as q:
        i = b.add(first, q)
        inside = b.icmp_signed("<", i, i64(cols))
        at = b.add(row, b.select(inside, i, first))
        ki, pi = _value(b, _word(cg, sp, at)), _word(cg, ip, at)
        same = b.fcmp_ordered("==", ki, kj)
        before = b.or_(b.fcmp_ordered(">", ki, kj), b.and_(same, b.or_(
            b.icmp_unsigned("<", pi, pj),
            b.and_(b.icmp_unsigned("==", pi, pj), b.icmp_signed("<", i, j)))))
        before = b.and_(before, inside)
        b.store(b.add(b.load(acc), b.zext(before, I64)), acc)
    return b.load(acc)


def tmrgsort(cg, inst):
    """Four runs of ``block_len`` words at once, in every whole group of four along the row;
    or two to four lists into the destination's pairs (its scratch is the chip's staging
    area, not a result: the simulator does not write it)."""
    dst = inst.outs[0]
    dp = cg.tile_ptr(dst)
    if "block_len" in inst.attrs:
        src = inst.ins[0]
        run = inst.attrs["block_len"] // 2
        sp = cg.tile_ptr(src)
        group = 4 * run
        b = cg.b
        with counted_loop(b, i64(0), i64(dst.cols // (2 * group)), name="mg") as g:
            at = b.mul(g, i64(2 * group))
            lists = [(sp, b.add(at, i64(k * 2 * run)), run) for k in range(4)]
            _merge(cg, lists, dp, at, group)
        return
    lists = [(cg.tile_ptr(s), i64(0), s.cols // 2) for s in inst.ins]
    _merge(cg, lists, dp, i64(0), min(dst.cols // 2, sum(n for _, _, n in lists)))


CURSOR_BITS = 16            # a list's cursor in the packed merge state (lists < 65536 pairs)


def _merge(cg, lists, dp, out_at, count):
    """``count`` pairs from two to four ``lists`` ((base, first word as an LLVM value, pairs))
    into ``dp`` from word ``out_at`` (an LLVM value). The heads meet in a tournament, (0, 1) and (2, 3) then the winners, an
    earlier list winning ties as the chip's does; the cursors are 16-bit fields of one
    integer, so each step is one chain of scalar work (four cursors kept apart were vectorised
    by LLVM into mask shuffles that cost four times as much)."""
    b = cg.b
    assert all(size < 1 << CURSOR_BITS for _, _, size in lists), "a merge list is too long"
    state = cg.entry_alloca(I64)
    b.store(i64(0), state)
    with counted_loop(b, i64(0), i64(count), name="mo") as o:
        cursors = b.load(state)
        heads = [_head(cg, cursors, n, lst) for n, lst in enumerate(lists)]
        heads += [None] * (4 - len(heads))
        key, pay, pick, _ = _better(b, _better(b, heads[0], heads[1]),
                                    _better(b, heads[2], heads[3]))
        out = b.add(out_at, b.mul(o, i64(2)))
        cg.store_elem(key, dp, dt.int32, out)
        cg.store_elem(pay, dp, dt.int32, b.add(out, i64(1)))
        b.store(b.add(cursors, b.shl(i64(1), b.mul(pick, i64(CURSOR_BITS)))), state)


def _head(cg, cursors, n, lst):
    """(key word, payload word, list number, available) of list ``n``'s next pair."""
    b = cg.b
    base, first, size = lst
    at = b.and_(b.lshr(cursors, i64(n * CURSOR_BITS)), i64((1 << CURSOR_BITS) - 1))
    avail = b.icmp_signed("<", at, i64(size))
    word = b.add(first, b.mul(b.select(avail, at, i64(0)), i64(2)))
    return (_word(cg, base, word), _word(cg, base, b.add(word, i64(1))), i64(n), avail)


def _better(b, x, y):
    """The head that leaves first: ``y`` only if it is there and larger (or ``x`` is not)."""
    if x is None or y is None:
        return x if y is None else y
    take = b.and_(y[3], b.or_(b.not_(x[3]), b.fcmp_ordered(">", _value(b, y[0]),
                                                          _value(b, x[0]))))
    return tuple(b.select(take, yv, xv) for xv, yv in zip(x[:3], y[:3])) + (b.or_(x[3], y[3]),)


PATTERN_PHASE = {"P0101": (2, 0), "P1010": (2, 1), "P0001": (4, 0), "P0010": (4, 1),
                 "P0100": (4, 2), "P1000": (4, 3), "P1111": (1, 0)}


def tgather(cg, inst):
    """Every ``step``-th element from ``phase`` of each row, packed densely (the bits as
    they are: the destination may be an integer view of float pairs)."""
    src, dst = inst.ins[0], inst.outs[0]
    step, phase = PATTERN_PHASE[inst.attrs["pattern"]]
    b = cg.b
    sp, dp = cg.tile_ptr(src), cg.tile_ptr(dst)
    per_row = src.cols // step
    word = dt.int32 if src.dtype.itemsize == 4 else dt.int16
    with counted_loop(b, i64(0), i64(src.rows), name="gr") as r:
        with counted_loop(b, i64(0), i64(per_row), name="gc") as c:
            s = b.add(b.mul(r, i64(src.cols)), b.add(b.mul(c, i64(step)), i64(phase)))
            d = b.add(b.mul(r, i64(per_row)), c)
            cg.store_elem(cg.load_elem(sp, word, s), dp, word, d)


RULES = {"tsort32": tsort32, "tmrgsort": tmrgsort, "tgather": tgather}
