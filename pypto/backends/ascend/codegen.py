"""PTO program → LLVM IR, one lowering rule per PTO instruction.

Each simulated AI Core owns a scratch area holding its UB, L1, L0A, L0B and L0C buffers; a tile
is a pointer at its planned offset in its buffer, laid out densely row-major (the layout inside
the simulated buffers is ours to choose; the ``.pto`` keeps the official one). Every
instruction becomes counted loops over those buffers with static trip counts, which LLVM
vectorises. Global-memory accesses are clamped to the tensor's extent, whatever the offsets.

Entry point: ``void <name>_launch(i64* args, i64* grid, i8* scratch, i64* counter)``: it takes
block numbers from ``counter`` atomically until the grid is exhausted, so any number of host
threads can share one launch.
"""
from __future__ import annotations

from llvmlite import ir

from ...compiler.errors import InternalError
from ...compiler.pto import For, Inst, Program, Scalar, TensorArg, Tile
from ...language import dtypes as dt
from .lowering_utils import (I1, I64, PTR, clamp, compute_dtype, const, convert, counted_loop,
                             from_compute, i64, safe_floordiv, safe_mod, storage_type,
                             to_compute)
from .targets import Target

SPACE_ORDER = ("vec", "mat", "left", "right", "acc", "bias")


def scratch_layout(target: Target) -> tuple[dict, int]:
    """Byte offset of each buffer inside one core's scratch area, and the total size."""
    offsets, at = {}, 0
    for space in SPACE_ORDER:
        offsets[space] = at
        at += target.buffers[space]
    return offsets, at


def args_slots(param) -> int:
    """How many i64 slots a parameter takes in the argument buffer."""
    return 1 + 2 * param.rank if isinstance(param, TensorArg) else 1


# Elementwise lowering rules: PTO op → f(builder, x, y, dtype) on compute-type values.
def _float_or_int(fop, iop):
    def rule(b, x, y, d):
        return getattr(b, fop)(x, y) if d.is_floating else getattr(b, iop)(x, y)
    return rule


def _minmax(pred):
    def rule(b, x, y, d):
        if d.is_floating:   # numpy propagates NaN from either side
            pick = b.fcmp_unordered(pred, x, y)
            return b.select(b.fcmp_unordered("uno", x, x), x, b.select(pick, x, y))
        cmp = b.icmp_signed(pred, x, y) if d.is_signed else b.icmp_unsigned(pred, x, y)
        return b.select(cmp, x, y)
    return rule


BINARY_RULES = {
    "add": _float_or_int("fadd", "add"), "sub": _float_or_int("fsub", "sub"),
    "mul": _float_or_int("fmul", "mul"), "div": lambda b, x, y, d: b.fdiv(x, y),
    "max": _minmax(">"), "min": _minmax("<"),
}
PTO_BINARY = {"tadd": "add", "tsub": "sub", "tmul": "mul", "tdiv": "div", "tmax": "max",
              "tmin": "min"}


class _Codegen:
    def __init__(self, program: Program):
        self.p = program
        self.target = program.target
        self.mod = ir.Module(name=program.name)
        self.space_base, _ = scratch_layout(self.target)
        self.vals: dict[int, object] = {}

    # -- module ------------------------------------------------------------------------------
    def build(self) -> str:
        block_fn = self._block_function()
        self._launch_function(block_fn)
        return str(self.mod)

    def _block_function(self):
        fnty = ir.FunctionType(ir.VoidType(), [PTR, PTR] + [I64] * 6)
        fn = ir.Function(self.mod, fnty, name=f"{self.p.name}_block")
        fn.linkage = "internal"
        fn.args[0].add_attribute("noalias")
        self.scratch, args = fn.args[0], fn.args[1]
        self.pids, self.nums = fn.args[2:5], fn.args[5:8]
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        self._unpack(args)
        self._body(self.p.body)
        self.b.ret_void()
        return fn

    def _unpack(self, args):
        b, slot = self.b, 0

        def load_slot(k):
            return b.load(b.gep(args, [i64(k)], source_etype=I64), typ=I64)

        for p in self.p.params:
            if isinstance(p, TensorArg):
                ptr = b.inttoptr(load_slot(slot), PTR)
                dims = [i64(d) if d is not None else load_slot(slot + 1 + i)
                        for i, d in enumerate(p.dims)]
                strides = [i64(s) if s is not None else load_slot(slot + 1 + p.rank + i)
                           for i, s in enumerate(p.strides)]
                self.vals[id(p)] = (ptr, dims, strides)
            else:
                raw = load_slot(slot)
                if p.dtype.is_floating:
                    raw = b.fptrunc(b.bitcast(raw, ir.DoubleType()), storage_type(p.dtype))
                self.vals[id(p)] = raw
            slot += args_slots(p)

    def _launch_function(self, block_fn):
        fnty = ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR, PTR])
        fn = ir.Function(self.mod, fnty, name=f"{self.p.name}_launch")
        args, grid, scratch, counter = fn.args
        scratch.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        n = [b.load(b.gep(grid, [i64(k)], source_etype=I64), typ=I64) for k in range(3)]
        total = b.mul(b.mul(n[0], n[1]), n[2])
        loop = fn.append_basic_block("next_block")
        run = fn.append_basic_block("run")
        done = fn.append_basic_block("done")
        b.branch(loop)
        b.position_at_end(loop)
        blk = b.atomic_rmw("add", counter, i64(1), "monotonic")
        b.cbranch(b.icmp_signed("<", blk, total), run, done)
        b.position_at_end(run)
        pid0 = b.urem(blk, n[0])
        rest = b.udiv(blk, n[0])
        pid1, pid2 = b.urem(rest, n[1]), b.udiv(rest, n[1])
        b.call(block_fn, [scratch, args, pid0, pid1, pid2] + n)
        b.branch(loop)
        b.position_at_end(done)
        b.ret_void()

    # -- instructions ------------------------------------------------------------------------
    def _body(self, insts):
        for inst in insts:
            if isinstance(inst, For):
                self._for(inst)
            else:
                handler = getattr(self, "_op_" + inst.op.replace(".", "_"), None)
                if handler is None:
                    if inst.op in PTO_BINARY:
                        handler = self._binary
                    elif inst.op[:-1] in PTO_BINARY and inst.op.endswith("s"):
                        handler = self._binary_scalar
                    else:
                        raise InternalError(f"no LLVM lowering for PTO instruction {inst.op}")
                handler(inst)

    def get(self, x):
        return self.vals[id(x)]

    def tile_ptr(self, t: Tile):
        return self.b.gep(self.scratch, [i64(self.space_base[t.loc] + t.addr)],
                          source_etype=ir.IntType(8))

    def elem_ptr(self, base, d: dt.dtype, index):
        return self.b.gep(base, [index], source_etype=storage_type(d))

    def load_elem(self, base, d, index):
        return self.b.load(self.elem_ptr(base, d, index), typ=storage_type(d))

    def store_elem(self, value, base, d, index):
        self.b.store(value, self.elem_ptr(base, d, index))

    def _for(self, f: For):
        b = self.b
        lb, ub, step = self.get(f.lb), self.get(f.ub), self.get(f.step)
        ub = b.select(b.icmp_signed(">", step, i64(0)), ub, lb)   # a non-positive step: no trip
        pre = b.block
        header = b.append_basic_block("for.head")
        body = b.append_basic_block("for.body")
        done = b.append_basic_block("for.done")
        b.branch(header)
        b.position_at_end(header)
        iv = b.phi(I64, name=f.iv.name)
        iv.add_incoming(lb, pre)
        phis = []
        for arg, init in zip(f.iter_args, f.inits):
            phi = b.phi(storage_type(arg.dtype), name=arg.name)
            phi.add_incoming(self.get(init), pre)
            self.vals[id(arg)] = phi
            phis.append(phi)
        for res, phi in zip(f.results, phis):
            self.vals[id(res)] = phi
        b.cbranch(b.icmp_signed("<", iv, ub), body, done)
        b.position_at_end(body)
        self.vals[id(f.iv)] = iv
        self._body(f.body)
        latch = b.block
        iv.add_incoming(b.add(iv, step), latch)
        for phi, y in zip(phis, f.yields):
            phi.add_incoming(self.get(y), latch)
        b.branch(header)
        b.position_at_end(done)

    # scalar unit
    def _define(self, inst: Inst, value):
        self.vals[id(inst.outs[0])] = value

    def _op_arith_constant(self, inst):
        d = inst.outs[0].dtype
        ty = storage_type(d)
        v = inst.attrs["value"]
        self._define(inst, ir.Constant(ty, float(v) if d.is_floating else int(v)))

    def _op_arith_cast(self, inst):
        src = inst.ins[0]
        self._define(inst, convert(self.b, self.get(src), src.dtype, inst.outs[0].dtype))

    def _op_arith_cmp(self, inst):
        a, c = inst.ins
        x, y = self.get(a), self.get(c)
        op = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}[
            inst.attrs["pred"]]
        bit = self.b.fcmp_ordered(op, x, y) if a.dtype.is_floating else \
            self.b.icmp_signed(op, x, y)
        self._define(inst, self.b.zext(bit, storage_type(dt.bool_)))

    def _scalar_binop(self, inst, name):
        x, y = (self.get(v) for v in inst.ins)
        d = inst.outs[0].dtype
        if name == "floordiv":
            value = safe_floordiv(self.b, x, y)
        elif name == "mod":
            value = safe_mod(self.b, x, y)
        else:
            value = BINARY_RULES[name](self.b, x, y, d)
        self._define(inst, value)

    def _op_arith_add(self, inst): self._scalar_binop(inst, "add")
    def _op_arith_sub(self, inst): self._scalar_binop(inst, "sub")
    def _op_arith_mul(self, inst): self._scalar_binop(inst, "mul")
    def _op_arith_div(self, inst): self._scalar_binop(inst, "div")
    def _op_arith_floordiv(self, inst): self._scalar_binop(inst, "floordiv")
    def _op_arith_mod(self, inst): self._scalar_binop(inst, "mod")
    def _op_arith_min(self, inst): self._scalar_binop(inst, "min")
    def _op_arith_max(self, inst): self._scalar_binop(inst, "max")

    def _op_pto_program_id(self, inst):
        self._define(inst, self.pids[inst.attrs["axis"]])

    def _op_pto_num_programs(self, inst):
        self._define(inst, self.nums[inst.attrs["axis"]])

    def _op_tensor_dim(self, inst):
        _, dims, _ = self.get(inst.ins[0])
        self._define(inst, dims[inst.attrs["axis"]])

    # memory (MTE2 / MTE3 / FIX)
    def _window(self, tensor: TensorArg, offsets, tile: Tile):
        """Row-major view of the GM window a tile covers: base pointer, per-axis offset, extent
        and stride, with 1-D tensors seen as one row."""
        ptr, dims, strides = self.get(tensor)
        offs = [self.get(o) for o in offsets]
        if tensor.rank == 1:
            return ptr, (i64(0), offs[0]), (i64(1), dims[0]), (i64(0), strides[0])
        return ptr, tuple(offs), tuple(dims), tuple(strides)

    def _valid_range(self, off, extent, size):
        """Tile positions [lo, hi) whose global index off+pos lies inside [0, extent)."""
        b = self.b
        lo = clamp(b, b.sub(i64(0), off), i64(0), i64(size))
        hi = clamp(b, b.sub(extent, off), i64(0), i64(size))
        return lo, b.select(b.icmp_signed("<", hi, lo), lo, hi)

    def _op_tload(self, inst):
        tensor, *offsets = inst.ins
        tile = inst.outs[0]
        self._transfer(tensor, offsets, tile, to_tile=True, pad=inst.attrs["pad"])

    def _op_tstore(self, inst):
        tile = inst.ins[0]
        tensor, *offsets = inst.outs
        self._transfer(tensor, offsets, tile, to_tile=False)

    def _transfer(self, tensor, offsets, tile, to_tile, pad=0):
        b = self.b
        gm, (o0, o1), (d0, d1), (s0, s1) = self._window(tensor, offsets, tile)
        tptr = self.tile_ptr(tile)
        r_lo, r_hi = self._valid_range(o0, d0, tile.rows)
        c_lo, c_hi = self._valid_range(o1, d1, tile.cols)
        padv = from_compute(b, const(tile.dtype, pad), tile.dtype) if to_tile else None

        def fill(row_base, start, stop):
            with counted_loop(b, start, stop, name="pad") as c:
                self.store_elem(padv, tptr, tile.dtype, b.add(row_base, c))

        with counted_loop(b, i64(0), i64(tile.rows), name="r") as r:
            row_base = b.mul(r, i64(tile.cols))
            inside = b.and_(b.icmp_signed(">=", r, r_lo), b.icmp_signed("<", r, r_hi))
            with b.if_else(inside) as (then, otherwise):
                with then:
                    if to_tile:
                        fill(row_base, i64(0), c_lo)
                    gm_row = b.mul(b.add(o0, r), s0)
                    with counted_loop(b, c_lo, c_hi, name="c") as c:
                        g = b.add(gm_row, b.mul(b.add(o1, c), s1))
                        t = b.add(row_base, c)
                        if to_tile:
                            v = self.load_elem(gm, tensor.dtype, g)
                            self.store_elem(convert(b, v, tensor.dtype, tile.dtype), tptr,
                                            tile.dtype, t)
                        else:
                            v = self.load_elem(tptr, tile.dtype, t)
                            self.store_elem(convert(b, v, tile.dtype, tensor.dtype), gm,
                                            tensor.dtype, g)
                    if to_tile:
                        fill(row_base, c_hi, i64(tile.cols))
                with otherwise:
                    if to_tile:
                        fill(row_base, i64(0), i64(tile.cols))

    # vector unit
    def _elementwise(self, out: Tile, inputs, fn):
        """out[i] = fn(*inputs[i]) over the whole tile; inputs are tiles or scalar values."""
        b = self.b
        optr = self.tile_ptr(out)
        ptrs = [(self.tile_ptr(x), x.dtype) if isinstance(x, Tile) else None for x in inputs]
        with counted_loop(b, i64(0), i64(out.numel), name="e") as i:
            args = [to_compute(b, self.load_elem(p[0], p[1], i), p[1]) if p else x
                    for p, x in zip(ptrs, inputs)]
            self.store_elem(fn(*args), optr, out.dtype, i)

    def _binary(self, inst):
        a, c = inst.ins
        out = inst.outs[0]
        rule = BINARY_RULES[PTO_BINARY[inst.op]]
        cd = compute_dtype(out.dtype)
        self._elementwise(out, [a, c],
                          lambda x, y: from_compute(self.b, rule(self.b, x, y, cd), out.dtype))

    def _binary_scalar(self, inst):
        a, s = inst.ins
        out = inst.outs[0]
        rule = BINARY_RULES[PTO_BINARY[inst.op[:-1]]]
        cd = compute_dtype(out.dtype)
        scalar = to_compute(self.b, self.get(s), s.dtype)
        self._elementwise(out, [a, scalar],
                          lambda x, y: from_compute(self.b, rule(self.b, x, y, cd), out.dtype))

    def _op_texpands(self, inst):
        out = inst.outs[0]
        v = from_compute(self.b, const(out.dtype, inst.attrs["value"]), out.dtype)
        self._elementwise(out, [], lambda: v)

    def _op_tcvt(self, inst):
        src, out = inst.ins[0], inst.outs[0]
        self._elementwise(out, [src], lambda x: convert(
            self.b, x, compute_dtype(src.dtype), out.dtype))

    def _op_tmov(self, inst):
        src, out = inst.ins[0], inst.outs[0]
        self._elementwise(out, [src], lambda x: from_compute(self.b, x, out.dtype))

    # cube unit
    def _matmul(self, c: Tile, a: Tile, bt: Tile, accumulate: bool):
        b = self.b
        m, k, n = a.rows, a.cols, bt.cols
        cd = c.dtype
        cp, ap, bp = self.tile_ptr(c), self.tile_ptr(a), self.tile_ptr(bt)
        if not accumulate:
            zero = const(cd, 0)
            with counted_loop(b, i64(0), i64(m * n), name="z") as i:
                self.store_elem(zero, cp, cd, i)
        fp = cd.is_floating
        with counted_loop(b, i64(0), i64(m), name="m") as mi:
            with counted_loop(b, i64(0), i64(k), name="k") as ki:
                av = convert(b, self.load_elem(ap, a.dtype, b.add(b.mul(mi, i64(k)), ki)),
                             a.dtype, cd)
                with counted_loop(b, i64(0), i64(n), name="n") as ni:
                    bv = convert(b, self.load_elem(bp, bt.dtype, b.add(b.mul(ki, i64(n)), ni)),
                                 bt.dtype, cd)
                    ci = b.add(b.mul(mi, i64(n)), ni)
                    old = self.load_elem(cp, cd, ci)
                    if fp:
                        new = b.fadd(old, b.fmul(av, bv, flags=["contract"]), flags=["contract"])
                    else:
                        new = b.add(old, b.mul(av, bv))
                    self.store_elem(new, cp, cd, ci)

    def _op_tmatmul(self, inst):
        a, bt = inst.ins
        self._matmul(inst.outs[0], a, bt, accumulate=False)

    def _op_tmatmul_acc(self, inst):
        _, a, bt = inst.ins
        self._matmul(inst.outs[0], a, bt, accumulate=True)


def generate_llvm_ir(program: Program) -> str:
    return _Codegen(program).build()
