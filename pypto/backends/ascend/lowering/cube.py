"""The cube unit: TMATMUL and TMATMUL.ACC over L0A/L0B into L0C.

The fractal layouts of L0A/L0B are a packing step in disguise; in our simulated buffers the
operands are dense row-major. The product is computed the way a host BLAS does it (BLIS's
loop order): a register-blocked micro-kernel keeps an MR x NR block of C in vector registers
across the whole K loop, updating it with FMAs of a broadcast A element and NR/LANES B
vectors, and sweeps every row block of A over one NR-wide column panel of B (K x NR, 4-8 KiB
at K = 64) while the panel stays in the host's L1 cache.

The register block follows the host's vector registers (``register_block``). MR x NR = 6 x 16
float32 is sized for AVX2's 16 ymm registers: 12 accumulators, 2 B vectors and one broadcast.
The 4 x 32 block before it spilled accumulators inside the K loop and ran at half the speed;
4 x 24, or K unrolled by two, measured the same as 6 x 16 on Zen 1, whose K loop runs at about
94 % of the FMA peak (the copies around the cube take most of the rest). AVX-512's 32 zmm
registers of 16 floats hold a 12 x 32 block; the AVX2 block on an AVX-512 host (Zen 5) used
half of each register and ran 1024^3 fp32 at 0.31x numpy, the 12 x 32 block at 0.9-1.5x.

B is read where it is when it is already in the accumulator type (the AVX-512 block), or
packed once per TMATMUL into NR-wide panels converted to the accumulator type in the
host-only pack area (half-precision B always; every B for the AVX2 block, as measured on
Zen 1). Rows past the last full MR block run the same kernel with fewer rows, columns past the
last panel one vector at a time, and what remains (fewer than LANES columns) a plain loop.
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from ....language import dtypes as dt
from ..lowering_utils import F32, I32, const, convert, counted_loop, i64, storage_type

PACK_ALIGN = 64


@dataclass(frozen=True)
class RegisterBlock:
    """The micro-kernel's shape: ``mr`` rows of C by ``vectors`` host vectors of ``lanes``
    float32 each, all held in registers across the K loop."""
    lanes: int
    mr: int
    vectors: int
    pack_b: bool        # pack a B already in the accumulator type too (see the docstring)

    @property
    def nr(self) -> int:
        return self.lanes * self.vectors


AVX2_BLOCK = RegisterBlock(lanes=8, mr=6, vectors=2, pack_b=True)
AVX512_BLOCK = RegisterBlock(lanes=16, mr=12, vectors=2, pack_b=False)


def register_block() -> RegisterBlock:
    """The block for this host: AVX-512 hosts get 16-lane vectors and 12 rows (24 accumulators,
    2 B vectors and broadcasts in the other 6 of 32 zmm registers; 14 rows measured no faster
    at 2048^3 on Zen 5, 286 against 298 GFLOP/s), the rest the AVX2 block (which LLVM splits into narrower
    registers where AVX2 is missing).
    The host's features are in the kernel cache key, so a cached object matches its block."""
    from ..llvm_driver import host_has
    return AVX512_BLOCK if host_has("avx512f") else AVX2_BLOCK


def _vector(b, ptr, d: dt.dtype, index, acc_dtype, lanes: int, align=1):
    """``lanes`` consecutive elements of ``ptr`` from ``index``, widened to the accumulator
    type."""
    elem = storage_type(d)
    vec = b.load(b.gep(ptr, [index], source_etype=elem), typ=ir.VectorType(elem, lanes),
                 align=align)
    acc = storage_type(acc_dtype)
    if d == acc_dtype:
        return vec
    if d == dt.bfloat16:
        wide = b.shl(b.zext(vec, ir.VectorType(I32, lanes)),
                     ir.Constant(ir.VectorType(I32, lanes), [16] * lanes))
        return b.bitcast(wide, ir.VectorType(F32, lanes))
    if d.is_floating:
        return b.fpext(vec, ir.VectorType(acc, lanes))
    return b.sext(vec, ir.VectorType(acc, lanes))


def _splat(b, value, lanes):
    vec = ir.VectorType(value.type, lanes)
    undef = ir.Constant(vec, ir.Undefined)
    one = b.insert_element(undef, value, i64(0))
    return b.shuffle_vector(one, undef, ir.Constant(ir.VectorType(I32, lanes), [0] * lanes))


@dataclass(frozen=True)
class _Panels:
    """Where the micro-kernel reads B: ``panels`` column panels of ``vectors`` * ``lanes``
    columns starting at column ``col0`` of C; element (kk, j-th vector) of panel p is at
    ``ptr`` + offset + p * panel_stride + kk * row_stride + j * lanes (in elements of
    ``dtype``)."""
    ptr: object
    dtype: dt.dtype
    col0: int
    panels: int
    vectors: int
    lanes: int
    panel_stride: int
    row_stride: int
    offset: int = 0
    align: int = 1

    @property
    def width(self) -> int:
        return self.vectors * self.lanes

    def index(self, b, p, kk, j):
        return b.add(b.add(b.mul(p, i64(self.panel_stride)), b.mul(kk, i64(self.row_stride))),
                     i64(self.offset + j * self.lanes))


def _packed_b(cg, bt, acc_dtype, blk: RegisterBlock, panels: int, at: int) -> _Panels:
    """B's first ``panels`` * NR columns copied into contiguous K x NR panels in the pack area
    at byte ``at``, converted to the accumulator type (exact for every operand type)."""
    from ....compiler.pto import Tile
    k, n, b, nr, lanes = bt.rows, bt.cols, cg.b, blk.nr, blk.lanes
    pack = Tile("pack_b", "pack", acc_dtype, panels * k, nr, at)
    room = cg.space_base["workspace"] - cg.space_base["pack"]
    assert at + pack.numel * acc_dtype.bits // 8 <= room, "the pack area is too small"
    assert (cg.space_base["pack"] + at) % PACK_ALIGN == 0, "panel rows are read as aligned"
    src, dst = cg.tile_ptr(bt), cg.tile_ptr(pack)
    acc = storage_type(acc_dtype)
    align = min(PACK_ALIGN, lanes * acc_dtype.bits // 8)
    with counted_loop(b, i64(0), i64(panels), name="pp") as p:
        with counted_loop(b, i64(0), i64(k), name="pk") as kk:
            for j in range(blk.vectors):
                row = _vector(b, src, bt.dtype, b.add(b.add(b.mul(kk, i64(n)), b.mul(p, i64(nr))),
                                                      i64(j * lanes)), acc_dtype, lanes)
                to = b.add(b.mul(b.add(b.mul(p, i64(k)), kk), i64(nr)), i64(j * lanes))
                b.store(row, b.gep(dst, [to], source_etype=acc), align=align)
    return _Panels(dst, acc_dtype, 0, panels, blk.vectors, lanes, k * nr, nr, align=align)


def _madd(b, cd: dt.dtype, acc_ty):
    """``madd(x, y, acc)`` = acc + x * y on vectors: one fused multiply-add for floats."""
    if not cd.is_floating:
        return lambda x, y, acc: b.add(acc, b.mul(x, y))
    name = f"llvm.fma.v{acc_ty.count}f{cd.bits}"
    fma = b.module.globals.get(name) or ir.Function(
        b.module, ir.FunctionType(acc_ty, [acc_ty, acc_ty, acc_ty]), name=name)
    return lambda x, y, acc: b.call(fma, [x, y, acc])


def _blocked(cg, c, a, panels: _Panels, rows, mr: int, accumulate: bool):
    """C[rows, panels' columns] (+)= A @ B with an mr x panels.width register block; ``rows``
    = (first, end), a multiple of ``mr`` apart. The block lives in stack slots that LLVM
    promotes to registers for the whole K loop."""
    b = cg.b
    k, n = a.cols, c.cols
    cd, nv, lanes = c.dtype, panels.vectors, panels.lanes
    elem = storage_type(cd)
    acc_ty = ir.VectorType(elem, lanes)
    madd = _madd(b, cd, acc_ty)
    cp, ap = cg.tile_ptr(c), cg.tile_ptr(a)
    slots = [[cg.entry_alloca(acc_ty) for _ in range(nv)] for _ in range(mr)]
    zero = ir.Constant(acc_ty, [const(cd, 0).constant] * lanes)

    def c_ptr(m0, p, i, j):
        col = b.add(b.mul(p, i64(panels.width)), i64(panels.col0 + j * lanes))
        return b.gep(cp, [b.add(b.mul(b.add(m0, i64(i)), i64(n)), col)], source_etype=elem)

    def k_step(m0, p, kk):
        bvs = [_vector(b, panels.ptr, panels.dtype, panels.index(b, p, kk, j), cd, lanes,
                       panels.align) for j in range(nv)]
        for i in range(mr):
            a_el = cg.load_elem(ap, a.dtype, b.add(b.mul(b.add(m0, i64(i)), i64(k)), kk))
            av = _splat(b, convert(b, a_el, a.dtype, cd), lanes)
            for j in range(nv):
                b.store(madd(av, bvs[j], b.load(slots[i][j])), slots[i][j])

    with counted_loop(b, i64(0), i64(panels.panels), name="np") as p:
        with counted_loop(b, i64(rows[0]), i64(rows[1]), i64(mr), name="mb") as m0:
            for i in range(mr):
                for j in range(nv):
                    start = b.load(c_ptr(m0, p, i, j), typ=acc_ty, align=1) if accumulate \
                        else zero
                    b.store(start, slots[i][j])
            with counted_loop(b, i64(0), i64(k), name="k") as kk:
                k_step(m0, p, kk)
            for i in range(mr):
                for j in range(nv):
                    b.store(b.load(slots[i][j]), c_ptr(m0, p, i, j), align=1)


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


def _widened_a(cg, a):
    """A half-precision A converted to float32 once, at the start of the pack area, so the
    micro-kernel broadcasts plain float32 elements (the widening is exact); other types are
    read as they are."""
    if a.dtype not in (dt.float16, dt.bfloat16):
        return a
    from ....compiler.pto import Tile
    wide = Tile("pack_a", "pack", dt.float32, a.rows, a.cols, 0)
    cg.elementwise(wide, [a], lambda x: x)
    return wide


def _column_panels(cg, a, bt, acc_dtype, blk: RegisterBlock) -> list:
    """The B panels the micro-kernel covers: the full NR-wide ones (read from L0B in place
    where the block allows it, else packed and converted), then whole vectors of the rest read
    in place. In place saves a copy of B per TMATMUL: 2048^3 fp32 on a 2-core Zen 5 measured
    56-61 ms in place against 68 ms packed."""
    n, nr, lanes = bt.cols, blk.nr, blk.lanes
    segments = []
    if n // nr and bt.dtype == acc_dtype and not blk.pack_b:
        segments.append(_Panels(cg.tile_ptr(bt), bt.dtype, 0, n // nr, blk.vectors, lanes, nr, n))
    elif n // nr:
        at = 0 if a.loc != "pack" else -(-a.numel * 4 // PACK_ALIGN) * PACK_ALIGN
        segments.append(_packed_b(cg, bt, acc_dtype, blk, n // nr, at))
    col0 = n // nr * nr
    if (n - col0) // lanes:
        segments.append(_Panels(cg.tile_ptr(bt), bt.dtype, col0, 1, (n - col0) // lanes, lanes,
                                0, n, offset=col0))
    return segments


def _matmul(cg, c, a, bt, accumulate: bool):
    a = _widened_a(cg, a)
    blk = register_block()
    m, n = a.rows, bt.cols
    m_full = m // blk.mr * blk.mr
    covered = 0
    for panels in _column_panels(cg, a, bt, c.dtype, blk):
        if m_full:
            _blocked(cg, c, a, panels, (0, m_full), blk.mr, accumulate)
        if m > m_full:
            _blocked(cg, c, a, panels, (m_full, m), m - m_full, accumulate)
        covered = panels.col0 + panels.panels * panels.width
    _plain(cg, c, a, bt, accumulate, (0, m), (covered, n))


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
