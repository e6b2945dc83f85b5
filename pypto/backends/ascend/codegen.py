"""PTO program → LLVM IR: the block function, control flow, and the per-instruction rules
of ``lowering/`` (one rule per PTO instruction, grouped by hardware unit); fusion groups are
``fusion.py``'s, the launch ABI around the block function ``entry.py``'s.

Each simulated AI Core owns a scratch area holding its UB, L1, L0A, L0B and L0C buffers; a tile
is a pointer at its planned offset in its buffer, laid out densely row-major (the layout inside
the simulated buffers is ours to choose; the ``.pto`` keeps the official one).
"""
from __future__ import annotations

from llvmlite import ir

from ... import envs
from ...errors import InternalError
from ...compiler.pto import For, If, Program, Tile, While
from ...language import dtypes as dt
from ...compiler.pto.isa import CROSS_CORE_OPS, FLAG_OPS
from . import entry, forwarding, fusion
from .control import stop_requested
from .entry import has_pointer_entry, scratch_layout, uses_cross_core
from .lowering import RULES
from .lowering_utils import I64, PTR, counted_loop, finish_loop_ids, i64, storage_type, to_compute

# the host's tload pads a tile itself, so the chip's tfillpad after it is nothing here
HOST_NOPS = FLAG_OPS + ("barrier", "tfillpad")


def _host_nothing(node, nops) -> bool:
    """Is ``node`` nothing on the host: a nop, a prefill (the host's load pads), the chip's
    own form of an instruction the host runs whole (``_chip_only``: a two-stage row
    reduction, lower.py), or a branch of only those (a fill under its window check,
    passes/fillpad.py)? Dropped, it cannot split a fusion group it sits in."""
    if isinstance(node, If):
        return not node.results and all(_host_nothing(n, nops)
                                         for n in node.then_body + node.else_body)
    attrs = getattr(node, "attrs", {})
    return getattr(node, "op", None) in nops or attrs.get("_prefill") or attrs.get("_chip_only")
POLL_TRIPS = 1024           # trips of a long loop between polls of the stop bits
QUIET_TRIPS = 1 << 16       # a for loop with at most this many trips, known when compiled,
                            # ends soon enough unpolled


class Codegen:
    """State shared by the lowering rules: the builder, value map and buffer pointers."""

    def __init__(self, program: Program):
        self.p = program
        self.sync_timeout = int(envs.PYPTO_SYNC_TIMEOUT.number(minimum=1))
        self.mod = ir.Module(name=program.name)
        self.space_base, _ = scratch_layout(program.target)
        self.vals: dict[int, object] = {}
        self.forwarding = forwarding.Plan()                 # loads later groups read in GM
        self.forward_windows: dict[int, tuple] = {}         # id(tload) -> its GM window

    # -- module ------------------------------------------------------------------------------
    def build(self) -> str:
        block = self._block_function()
        start = entry.start_function(self, entry.launch_function(self, block))
        entry.python_entry(self, start, by_pointer=False)
        if has_pointer_entry(self.p):
            entry.python_entry(self, start, by_pointer=True)
        if not uses_cross_core(self.p):
            entry.python_entry(self, entry.range_function(self, block), by_pointer=False,
                               blocks=True)
        return finish_loop_ids(str(self.mod))

    def _block_function(self):
        fnty = ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR] + [I64] * 6)
        fn = ir.Function(self.mod, fnty, name=f"{self.p.name}_block")
        fn.linkage = "internal"
        fn.args[0].add_attribute("noalias")
        self.scratch, args, self.sync = fn.args[0], fn.args[1], fn.args[2]
        self.pids, self.nums = fn.args[3:6], fn.args[6:9]
        self.allocas = ir.IRBuilder(fn.append_basic_block("entry"))
        self.b = ir.IRBuilder(fn.append_basic_block("start"))
        entry.unpack_args(self, args)
        # a cluster: the cube part, then the vector part, on each AIV that runs it in turn
        # (both, each its half of the rows: compiler/pto/passes/split_rows.py)
        for kind, body in self.p.parts:
            for sb in range(self.p.vector_cores if kind == "vector" else 1):
                self.subblock = i64(sb)
                self.body(body)
        self.b.ret_void()
        self.allocas.branch(fn.basic_blocks[1])
        return fn

    # -- helpers for rules -------------------------------------------------------------------
    def get(self, x):
        return self.vals[id(x)]

    def truth(self, v):
        return self.b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))

    def entry_alloca(self, ty, count: int = 1):
        """Stack slots in the entry block, where SROA promotes them to registers."""
        return self.allocas.alloca(ty, size=count if count > 1 else None)

    def tile_ptr(self, t: Tile):
        """A tile's bytes in the core's scratch; a row at a run-time row (``Tile.row_of``)
        is that row of its tile, whose rows are dense here (no 32-byte pitch)."""
        at = i64(self.space_base[t.loc] + t.addr)
        if t.row_of is not None:
            whole, row = t.row_of
            pitch = i64(whole.cols * whole.dtype.itemsize)
            at = self.b.add(at, self.b.mul(self.get(row), pitch))
        return self.b.gep(self.scratch, [at], source_etype=ir.IntType(8))

    def elem_ptr(self, base, d: dt.dtype, index):
        return self.b.gep(base, [index], source_etype=storage_type(d))

    def load_elem(self, base, d, index):
        return self.b.load(self.elem_ptr(base, d, index), typ=storage_type(d))

    def store_elem(self, value, base, d, index):
        self.b.store(value, self.elem_ptr(base, d, index))

    def elementwise(self, out: Tile, inputs, fn):
        """out[i] = fn(*inputs[i]) over the whole tile; inputs are tiles (loaded and widened
        to their compute type) or ready LLVM scalar values."""
        b = self.b
        optr = self.tile_ptr(out)
        ptrs = [(self.tile_ptr(x), x.dtype) if isinstance(x, Tile) else None for x in inputs]
        with counted_loop(b, i64(0), i64(out.numel), name="e") as i:
            args = [to_compute(b, self.load_elem(p[0], p[1], i), p[1]) if p else x
                    for p, x in zip(ptrs, inputs)]
            self.store_elem(fn(*args), optr, out.dtype, i)

    # -- control flow -------------------------------------------------------------------------
    def body(self, insts):
        # flags and pipe barriers order the chip's pipes; the host runs one stream in order
        # (and a mixed kernel's cube part before its vector part, so their flags are met too)
        nops = HOST_NOPS + (CROSS_CORE_OPS if self.p.kind == "mixed" else ())
        insts = [i for i in insts if not _host_nothing(i, nops)]
        planned = forwarding.plan(insts, self.p.target)
        self.forwarding.reads.update(planned.reads)
        self.forwarding.loads |= planned.loads
        skipped = planned.reshapes
        i = 0
        while i < len(insts):
            inst = insts[i]
            if id(inst) in skipped:      # a forwarded tile's reshape: read from GM instead
                i += 1
                continue
            group = getattr(inst, "attrs", {}).get("_fuse")
            if group is not None:
                j = i
                while j < len(insts) and getattr(insts[j], "attrs", {}).get("_fuse") == group:
                    j += 1
                fusion.fused(self, insts[i:j])
                i = j
                continue
            i += 1
            if isinstance(inst, For):
                self._for(inst)
            elif isinstance(inst, If):
                self._if(inst)
            elif isinstance(inst, While):
                self._while(inst)
            else:
                rule = RULES.get(inst.op)
                if rule is None:
                    raise InternalError(f"no LLVM lowering for PTO instruction {inst.op}")
                rule(self, inst)

    def _phis(self, names_and_types, incoming, pred):
        phis = []
        for scalar, init in zip(names_and_types, incoming):
            phi = self.b.phi(storage_type(scalar.dtype), name=scalar.name)
            phi.add_incoming(self.get(init), pred)
            self.vals[id(scalar)] = phi
            phis.append(phi)
        return phis

    def _for(self, f: For):
        b = self.b
        lb, ub, step = self.get(f.lb), self.get(f.ub), self.get(f.step)
        polled = not _few_trips(lb, ub, step)
        ub = b.select(b.icmp_signed(">", step, i64(0)), ub, lb)   # a non-positive step: no trip
        pre = b.block
        header = b.append_basic_block("for.head")
        body = b.append_basic_block("for.body")
        done = b.append_basic_block("for.done")
        b.branch(header)
        b.position_at_end(header)
        iv = b.phi(I64, name=f.iv.name)
        iv.add_incoming(lb, pre)
        phis = self._phis(f.iter_args, f.inits, pre)
        for res, phi in zip(f.results, phis):
            self.vals[id(res)] = phi
        trips = b.phi(I64, name="for.trips") if polled else None
        if polled:
            trips.add_incoming(i64(0), pre)
        b.cbranch(b.icmp_signed("<", iv, ub), body, done)
        b.position_at_end(body)
        self.vals[id(f.iv)] = iv
        self.body(f.body)
        next_iv, yields = b.add(iv, step), [self.get(y) for y in f.yields]
        latches = self._poll(trips, header, done) if polled else [b.block]
        for block in latches:
            iv.add_incoming(next_iv, block)
            for phi, y in zip(phis, yields):
                phi.add_incoming(y, block)
        if not polled:
            b.branch(header)
        b.position_at_end(done)

    def _if(self, node: If):
        b = self.b
        then_bb = b.append_basic_block("if.then")
        else_bb = b.append_basic_block("if.else")
        merge = b.append_basic_block("if.end")
        b.cbranch(self.truth(self.get(node.cond)), then_bb, else_bb)
        ends = []
        for bb, body, yields in ((then_bb, node.then_body, node.then_yields),
                                 (else_bb, node.else_body, node.else_yields)):
            b.position_at_end(bb)
            self.body(body)
            ends.append((b.block, [self.get(y) for y in yields]))
            b.branch(merge)
        b.position_at_end(merge)
        for i, res in enumerate(node.results):
            phi = b.phi(storage_type(res.dtype), name=res.name)
            for block, values in ends:
                phi.add_incoming(values[i], block)
            self.vals[id(res)] = phi

    def _poll(self, trips, header, done) -> list:
        """The latch of a loop that may run long: every POLL_TRIPS trips it leaves for
        ``done`` when the launch is asked to stop (Ctrl-C, exit; control.py). Not every trip:
        an atomic load in the loop kept LLVM from keeping a tile in registers (3x slower on a
        small loop). Returns the blocks that branch back to ``header``."""
        b = self.b
        after = b.block
        count = b.add(trips, i64(1))
        poll = b.append_basic_block("loop.poll")
        due = b.icmp_unsigned("==", b.and_(count, i64(POLL_TRIPS - 1)), i64(0))
        b.cbranch(due, poll, header)
        b.position_at_end(poll)
        b.cbranch(stop_requested(b, self.sync), done, header)
        for block in (after, poll):
            trips.add_incoming(count, block)
        return [after, poll]

    def _while(self, node: While):
        b = self.b
        pre = b.block
        header = b.append_basic_block("while.cond")
        body = b.append_basic_block("while.body")
        done = b.append_basic_block("while.done")
        b.branch(header)
        b.position_at_end(header)
        trips = b.phi(I64, name="while.trips")
        trips.add_incoming(i64(0), pre)
        phis = self._phis(node.before_args, node.inits, pre)
        self.body(node.before_body)
        forwarded = [self.get(v) for v in node.forwarded]
        b.cbranch(self.truth(self.get(node.cond)), body, done)
        b.position_at_end(body)
        for arg, value in zip(node.after_args, forwarded):
            self.vals[id(arg)] = value
        self.body(node.after_body)
        yields = [self.get(y) for y in node.yields]
        for block in self._poll(trips, header, done):
            for phi, y in zip(phis, yields):
                phi.add_incoming(y, block)
        b.position_at_end(done)
        for res, value in zip(node.results, forwarded):
            self.vals[id(res)] = value


def _few_trips(lb, ub, step) -> bool:
    """Is a for loop's trip count a compile-time constant of at most QUIET_TRIPS?"""
    if not all(isinstance(v, ir.Constant) for v in (lb, ub, step)):
        return False
    lo, hi, st = (int(v.constant) for v in (lb, ub, step))
    return st <= 0 or (hi - lo + st - 1) // st <= QUIET_TRIPS


def generate_llvm_ir(program: Program) -> str:
    return Codegen(program).build()
