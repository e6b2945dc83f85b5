"""MTE2 / MTE3 / FIX: TLOAD and TSTORE between global memory and tiles.

Both clamp the rows and columns they touch to the tensor's extent, so no offset a kernel
computes can read or write outside a tensor; a load pads the rest of the tile. An atomic store
adds with atomicrmw (float and integer) or a compare-and-swap loop (half types, whose
arithmetic happens in float32)."""
from __future__ import annotations

from llvmlite import ir

from ....language import dtypes as dt
from ..lowering_utils import (I64, clamp, const, convert, counted_loop,
                              from_compute, i64, storage_type, to_compute)


def _window(cg, tensor, offsets):
    """The GM window a tile covers, seen as rows and columns: base pointer, the window's
    first row and column, the extents they index, and ``index(row, col)``, the element
    offset of a (row, column) inside those extents. 1-D tensors are one row; a layout
    tensor's logical window maps onto its physical array as ``pypto.layout.load_window``
    defines."""
    ptr, dims, strides = cg.get(tensor)
    offs = [cg.get(o) for o in offsets]
    b = cg.b
    if tensor.layout == "NZ":
        return _nz_window(b, ptr, offs, dims, strides)
    if tensor.layout == "NC1HWC0":
        return _nc1hwc0_window(cg, tensor, ptr, offs, dims, strides)
    if tensor.rank == 1:
        offs, dims, strides = [i64(0), offs[0]], [i64(1), dims[0]], [i64(0), strides[0]]
    if tensor.rank > 2:
        ptr, offs, dims, strides = _plane(cg, tensor, ptr, offs, dims, strides)
    s0, s1 = strides

    def index(row, col):
        return b.add(b.mul(row, s0), b.mul(col, s1))
    return ptr, tuple(offs), tuple(dims), index


def _plane(cg, tensor, ptr, offs, dims, strides):
    """A rank-3/4 tensor's window is one (rows, cols) plane (passes/unbatch.py): the leading
    offsets select it; a plane outside the tensor has no rows inside."""
    b = cg.b
    lead = len(dims) - 2
    ok, base = ir.Constant(ir.IntType(1), 1), i64(0)
    for o, d, st in zip(offs[:lead], dims[:lead], strides[:lead]):
        ok = b.and_(ok, b.and_(b.icmp_signed(">=", o, i64(0)), b.icmp_signed("<", o, d)))
        base = b.add(base, b.mul(o, st))
    gm = cg.elem_ptr(ptr, tensor.dtype, b.select(ok, base, i64(0)))
    rows = b.select(ok, dims[lead], i64(0))
    return gm, offs[lead:], [rows, dims[lead + 1]], strides[lead:]


def _nz_window(b, ptr, offs, dims, strides):
    """NZ (K1, M1, 16, C0): logical (row, col) lies in fractal (col // C0, row // 16). The
    window starts at the fractal holding its offsets, as the chip's partition (offset / 16,
    offset / C0, printer.layout_partition) does: an offset inside a fractal (an error, which
    the interpreter reports) reads what the chip would."""
    k1, m1, m0, c0 = dims
    offs = [b.mul(b.sdiv(offs[0], m0), m0), b.mul(b.sdiv(offs[1], c0), c0)]

    def index(row, col):
        parts = (b.sdiv(col, c0), b.sdiv(row, m0), b.srem(row, m0), b.srem(col, c0))
        total = i64(0)
        for part, stride in zip(parts, strides):
            total = b.add(total, b.mul(part, stride))
        return total
    return ptr, tuple(offs), (b.mul(m1, m0), b.mul(k1, c0)), index


def _nc1hwc0_window(cg, tensor, ptr, offs, dims, strides):
    """NC1HWC0 as (N, C1, 1, H*W, C0): the window's rows are the pixels h * W + w + i of
    image n's channel group c // C0 (floor division), its columns the channels from
    c % C0; an image or group outside the tensor leaves no row inside."""
    b = cg.b
    n, c, h, w = offs
    nn, c1s, _, hw, c0 = dims
    neg = b.icmp_signed("<", c, i64(0))
    group = b.sdiv(b.sub(c, b.select(neg, b.sub(c0, i64(1)), i64(0))), c0)
    first_channel = b.sub(c, b.mul(group, c0))
    ok = b.and_(b.and_(b.icmp_signed(">=", n, i64(0)), b.icmp_signed("<", n, nn)),
                b.and_(b.icmp_signed(">=", group, i64(0)), b.icmp_signed("<", group, c1s)))
    base = b.select(ok, b.add(b.mul(n, strides[0]), b.mul(group, strides[1])), i64(0))
    gm = cg.elem_ptr(ptr, tensor.dtype, base)
    pixel = b.add(b.mul(h, i64(tensor.logical[3])), w)
    sp, sc = strides[3], strides[4]

    def index(row, col):
        return b.add(b.mul(row, sp), b.mul(col, sc))
    return gm, (pixel, first_channel), (b.select(ok, hw, i64(0)), c0), index


def _valid_range(b, off, extent, size):
    """Tile positions [lo, hi) whose global index off+pos lies inside [0, extent)."""
    lo = clamp(b, b.sub(i64(0), off), i64(0), i64(size))
    hi = clamp(b, b.sub(extent, off), i64(0), i64(size))
    return lo, b.select(b.icmp_signed("<", hi, lo), lo, hi)


def _transfer(cg, tensor, offsets, tile, to_tile, pad=0, atomic=None, relu=False):
    b = cg.b
    gm, (o0, o1), (d0, d1), index = _window(cg, tensor, offsets)
    tptr = cg.tile_ptr(tile)
    r_lo, r_hi = _valid_range(b, o0, d0, tile.rows)
    c_lo, c_hi = _valid_range(b, o1, d1, tile.cols)
    pads = to_tile and pad is not None      # None: the tile holds its padding already
    padv = from_compute(b, const(tile.dtype, pad), tile.dtype) if pads else None
    vector_rows = _vector_rows(cg, tensor, tile, atomic) and not relu

    def fill(row_base, start, stop):
        with counted_loop(b, start, stop, name="pad") as c:
            cg.store_elem(padv, tptr, tile.dtype, b.add(row_base, c))

    with counted_loop(b, i64(0), i64(tile.rows), name="r") as r:
        row_base = b.mul(r, i64(tile.cols))
        inside = b.and_(b.icmp_signed(">=", r, r_lo), b.icmp_signed("<", r, r_hi))
        with b.if_else(inside) as (then, otherwise):
            with then:
                if pads:
                    fill(row_base, i64(0), c_lo)
                grow = b.add(o0, r)
                if vector_rows:
                    _copy_row(cg, tile.dtype, (gm, index(grow, b.add(o1, c_lo))),
                              (tptr, b.add(row_base, c_lo)), b.sub(c_hi, c_lo), to_tile)
                else:
                    with counted_loop(b, c_lo, c_hi, name="c") as c:
                        _move_elem(cg, tensor.dtype, (gm, index(grow, b.add(o1, c))),
                                   tile.dtype, (tptr, b.add(row_base, c)), to_tile, atomic,
                                   relu)
                if pads:
                    fill(row_base, c_hi, i64(tile.cols))
            with otherwise:
                if pads:
                    fill(row_base, i64(0), i64(tile.cols))


def _move_elem(cg, gd, g, td, t, to_tile, atomic, relu=False):
    """One element between GM (``g`` = (base, index), type ``gd``) and the tile (``t``, ``td``),
    converted between the two types; ``relu``: a store's ReLU before the conversion (the FIX
    pipe's, from L0C)."""
    b = cg.b
    if to_tile:
        v = cg.load_elem(g[0], gd, g[1])
        cg.store_elem(convert(b, v, gd, td), t[0], td, t[1])
        return
    v = cg.load_elem(t[0], td, t[1])
    if relu:
        zero = ir.Constant(v.type, 0)
        below = (b.fcmp_ordered("<", v, zero) if td.is_floating else
                 b.icmp_signed("<", v, zero))
        v = b.select(below, zero, v)
    v = convert(b, v, td, gd)
    if atomic:
        _atomic_add(b, cg.elem_ptr(g[0], gd, g[1]), v, gd)
    else:
        cg.store_elem(v, g[0], gd, g[1])


VECTOR_BYTES = 64           # one AVX-512 register; LLVM splits it on narrower hosts


def _vector_rows(cg, tensor, tile, atomic) -> bool:
    """Rows move as vectors when they are contiguous in GM (a tensor ``_window`` does not remap,
    whose last stride is the constant 1) and need no conversion (a plain store, of a type of at least one byte). Written as vectors, not left to LLVM: a row of
    constant length is unrolled before the loop vectoriser sees it, and the SLP vectoriser
    cannot prove GM apart from the on-chip buffers, so such rows moved one element at a time
    (a third of a batched matmul's time on AVX-512)."""
    last_stride = cg.get(tensor)[2][-1]
    return (tensor.layout not in ("NZ", "NC1HWC0") and isinstance(last_stride, ir.Constant)
            and last_stride.constant == 1 and tensor.dtype == tile.dtype and not atomic
            and tile.dtype.bits >= 8)


def _copy_row(cg, d, g, t, count, to_tile):
    """``count`` contiguous elements between GM (``g`` = (base, first index)) and the tile
    (``t``): whole vectors of VECTOR_BYTES, then the rest one by one."""
    b = cg.b
    lanes = max(1, VECTOR_BYTES * 8 // d.bits)
    vec = ir.VectorType(storage_type(d), lanes)
    src, dst = (g, t) if to_tile else (t, g)
    whole = b.mul(b.sdiv(count, i64(lanes)), i64(lanes))
    with counted_loop(b, i64(0), whole, step=i64(lanes), name="cv") as c:
        v = b.load(cg.elem_ptr(src[0], d, b.add(src[1], c)), typ=vec, align=1)
        b.store(v, cg.elem_ptr(dst[0], d, b.add(dst[1], c)), align=1)
    with counted_loop(b, whole, count, name="cs") as c:
        cg.store_elem(cg.load_elem(src[0], d, b.add(src[1], c)), dst[0], d, b.add(dst[1], c))


def _span(cg, tensor):
    """[lo, hi) byte addresses a tensor can touch, for any sign of its strides."""
    b = cg.b
    ptr, dims, strides = cg.get(tensor)
    lo = hi = i64(0)
    for d, st in zip(dims, strides):
        reach = b.mul(b.sub(d, i64(1)), st)
        neg = b.icmp_signed("<", reach, i64(0))
        lo = b.add(lo, b.select(neg, reach, i64(0)))
        hi = b.add(hi, b.select(neg, i64(0), reach))
    base = b.ptrtoint(ptr, I64)
    size = i64(tensor.dtype.itemsize)
    return b.add(base, b.mul(lo, size)), b.add(base, b.mul(b.add(hi, i64(1)), size))


def independent(cg, store, store_offsets, load, load_offsets, same_shape=True):
    """May a fused loop store ``store`` element by element while reading ``load``? Yes when
    their memory does not overlap, or when both are the same view at the same offsets and the
    tiles have one shape (an in-place update reads each element before writing it; a tile
    read with broadcasting would read some elements again after they were written)."""
    b = cg.b
    (slo, shi), (llo, lhi) = _span(cg, store), _span(cg, load)
    apart = b.or_(b.icmp_unsigned("<=", shi, llo), b.icmp_unsigned("<=", lhi, slo))
    if store.rank != load.rank or store.dtype.itemsize != load.dtype.itemsize or \
            not same_shape:
        return apart
    sp, _, ss = cg.get(store)
    lp, _, ls = cg.get(load)
    same = b.icmp_unsigned("==", b.ptrtoint(sp, I64), b.ptrtoint(lp, I64))
    for a, c in list(zip(ss, ls)) + [(cg.get(x), cg.get(y))
                                     for x, y in zip(store_offsets, load_offsets)]:
        same = b.and_(same, b.icmp_signed("==", a, c))
    return b.or_(apart, same)


def direct_window(cg, tensor, offsets, tile):
    """For fused loops: (gm, rows_inside, valid_cols, index). ``rows_inside``: the tile's rows
    lie inside the tensor and its first column is not before the tensor's; ``valid_cols``: how
    many of its columns lie inside (the rest are padding, as at the end of a row of a tile
    wider than the tensor); ``index(r, c)``: the element offset of tile position (r, c) in
    global memory."""
    b = cg.b
    gm, (o0, o1), (d0, d1), gm_index = _window(cg, tensor, offsets)
    rows_inside = b.and_(b.and_(b.icmp_signed(">=", o0, i64(0)), b.icmp_signed(">=", o1, i64(0))),
                         b.icmp_signed("<=", b.add(o0, i64(tile.rows)), d0))
    valid_cols = clamp(b, b.sub(d1, o1), i64(0), i64(tile.cols))

    def index(r, c):
        return gm_index(b.add(o0, r), b.add(o1, c))
    return gm, rows_inside, valid_cols, index


def _atomic_add(b, ptr, value, d: dt.dtype):
    if d in (dt.float32, dt.float64):
        b.atomic_rmw("fadd", ptr, value, "monotonic")
        return
    if d.is_int:
        b.atomic_rmw("add", ptr, value, "monotonic")
        return
    # half types: compare-and-swap on the 16 raw bits, adding in float32
    raw_ty = ir.IntType(16)
    old = b.load_atomic(ptr, "monotonic", 2, typ=raw_ty) if hasattr(b, "load_atomic") else \
        b.load(ptr, typ=raw_ty)
    pre = b.block
    loop = b.append_basic_block("cas")
    done = b.append_basic_block("cas.done")
    b.branch(loop)
    b.position_at_end(loop)
    cur = b.phi(raw_ty)
    cur.add_incoming(old, pre)
    as_value = b.bitcast(cur, storage_type(d)) if d == dt.float16 else cur
    total = b.fadd(to_compute(b, as_value, d), to_compute(b, value, d))
    new = from_compute(b, total, d)
    new_raw = b.bitcast(new, raw_ty) if d == dt.float16 else new
    pair = b.cmpxchg(ptr, cur, new_raw, "monotonic", "monotonic")
    seen, ok = b.extract_value(pair, 0), b.extract_value(pair, 1)
    cur.add_incoming(seen, b.block)
    b.cbranch(ok, done, loop)
    b.position_at_end(done)


def tload(cg, inst, tile=None):
    """``tile``: load the instruction's window into another tile of the same 2-D shape (a
    forwarded load materialised under a reshaped name, see ``forwarding.py``)."""
    tensor, *offsets = inst.ins
    _transfer(cg, tensor, offsets, tile or inst.outs[0], to_tile=True, pad=inst.attrs["pad"])


def tstore(cg, inst):
    tensor, *offsets = inst.outs
    _transfer(cg, tensor, offsets, inst.ins[0], to_tile=False, atomic=inst.attrs.get("atomic"),
              relu=bool(inst.attrs.get("relu")))


RULES = {"tload": tload, "tstore": tstore}
