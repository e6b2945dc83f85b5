"""PTO program → LLVM IR: the module skeleton, control flow, and the per-instruction rules
of ``lowering/`` (one rule per PTO instruction, grouped by hardware unit).

Each simulated AI Core owns a scratch area holding its UB, L1, L0A, L0B and L0C buffers; a tile
is a pointer at its planned offset in its buffer, laid out densely row-major (the layout inside
the simulated buffers is ours to choose; the ``.pto`` keeps the official one).

Entry point: ``void <name>_launch(i64* args, i64* grid, i8* scratch, i64* counter, i64 me,
i64 parts)``: participant ``me`` of ``parts`` runs its contiguous share of the grid and then
helps with the others', claiming blocks from per-share cursors in ``counter``, so any number
of host threads can share one launch.
"""
from __future__ import annotations

from llvmlite import ir

from ... import envs

from ...errors import CompilationError, InternalError
from ...compiler.pto import For, If, Program, TensorArg, Tile, While, walk_insts
from ...language import dtypes as dt
from ...compiler.pto.isa import CROSS_CORE_OPS, FLAG_OPS
from . import forwarding
from .lowering import RULES
from .lowering.crosscore import SYNC_SLOTS
from .lowering_utils import (I64, PTR, clamp, const, convert, counted_loop, finish_loop_ids,
                             from_compute, i64, storage_type, to_compute)
from ...target import Target

SPACE_ORDER = ("vec", "mat", "left", "right", "acc", "bias")
ROW_REDUCTIONS = ("trowsum", "trowmax", "trowmin", "trowprod")   # may close a fusion group
# the host's tload pads a tile itself, so the chip's tfillpad after it is nothing here
HOST_NOPS = FLAG_OPS + ("barrier", "tfillpad")
WORKSPACE_ACCS = 2          # workspace room per core, in L0C-sized slots
POOL_LAUNCH_SYMBOL = "pypto_pool_launch"     # provided by host_pool, registered with LLVM
CURSOR_STRIDE = 8           # i64 slots between share cursors: one cache line each
MAX_CLAIM = 8               # blocks claimed at once, at most (see _launch_function)
CURSORS = -(-SYNC_SLOTS // CURSOR_STRIDE) * CURSOR_STRIDE + CURSOR_STRIDE   # first cursor slot
JOB_FIELDS = 7              # a cooperative thread's job: args, grid, scratch, counter, me,
                            # parts, pthread handle


def scratch_layout(target: Target) -> tuple[dict, int]:
    """Byte offset of each buffer inside one core's scratch area, and the total size. After the
    chip's buffers comes "pack": host-only room where the cube lowering widens a half-precision
    L0A operand to float32 and packs L0B into column panels of the accumulator type once per
    TMATMUL (lowering/cube.py; not a PTO buffer, nothing in .pto uses it). Twice L0A and L0B
    together is enough for both: int8 B widened to int32 takes four times L0B, but int8 A
    stays where it is."""
    offsets, at = {}, 0
    for space in SPACE_ORDER:
        offsets[space] = at
        at += target.buffers[space]
    offsets["pack"] = at
    at += 2 * (target.buffers["left"] + target.buffers["right"])
    offsets["workspace"] = at       # this block's slot of the GM workspace (cube → vector)
    at += WORKSPACE_ACCS * target.buffers["acc"]
    return offsets, at


def args_slots(param) -> int:
    """How many i64 slots a parameter takes in the argument buffer (the workspace none: it
    lives in the core's scratch)."""
    if isinstance(param, TensorArg):
        return 0 if param.workspace else 1 + 2 * param.rank
    return 1


def runtime_params(program: Program) -> list:
    """The parameters the caller passes (everything but the workspace)."""
    return [p for p in program.params if not (isinstance(p, TensorArg) and p.workspace)]


def has_pointer_entry(program: Program) -> bool:
    """Are every passed tensor's dims and strides compile-time constants? Then the kernel has
    a ``_ptr`` entry taking data pointers alone."""
    return all(None not in p.dims and None not in p.strides
               for p in runtime_params(program) if isinstance(p, TensorArg))


def _split_group(insts):
    """(closing instruction or None, the members before it): a fusion group may end with a
    row reduction (accumulated in registers) or a store (written to GM)."""
    if insts[-1].op in ROW_REDUCTIONS + ("tstore",):
        return insts[-1], insts[:-1]
    return None, insts


def _order_sensitive(closing) -> bool:
    """Does the result of a group closed by ``closing`` depend on the order its columns are
    combined in (a floating-point row sum or product)?"""
    return closing is not None and closing.op in ("trowsum", "trowprod") and \
        closing.ins[0].dtype.is_floating


class Codegen:
    """State shared by the lowering rules: the builder, value map and buffer pointers."""

    def __init__(self, program: Program):
        self.p = program
        self.sync_timeout = int(envs.PYPTO_SYNC_TIMEOUT.get())
        self.mod = ir.Module(name=program.name)
        self.space_base, _ = scratch_layout(program.target)
        self.vals: dict[int, object] = {}
        self.forwarding = forwarding.Plan()                 # loads later groups read in GM
        self.forward_windows: dict[int, tuple] = {}         # id(tload) -> its GM window

    # -- module ------------------------------------------------------------------------------
    def build(self) -> str:
        block = self._block_function()
        start = self._start_function(self._launch_function(block))
        self._python_entry(start, by_pointer=False)
        if has_pointer_entry(self.p):
            self._python_entry(start, by_pointer=True)
        if not uses_cross_core(self.p):
            self._python_entry(self._range_function(block), by_pointer=False, blocks=True)
        return finish_loop_ids(str(self.mod))

    def _range_function(self, block_fn):
        """``i32 range(pool_state, g0, g1, g2, lo, hi, args)``: blocks ``lo`` to ``hi - 1``
        (linear, pid0 fastest, as ``_launch_function`` numbers them) of a launch over the
        grid, on the calling thread with its own scratch (``pool_state`` is that scratch
        here): the Execution Graph's runtime runs one task per call. Only for kernels whose
        blocks never wait for each other."""
        fnty = ir.FunctionType(ir.IntType(32), [PTR, I64, I64, I64, I64, I64, PTR])
        fn = ir.Function(self.mod, fnty, name=f"{self.p.name}_range_start")
        fn.linkage = "internal"
        scratch, g0, g1, g2, lo, hi, args = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        counter = self._counter_array(b, i64(1))
        n = (g0, g1, g2)
        with counted_loop(b, lo, hi, name="blk") as blk:
            pid0 = b.urem(blk, g0)
            rest = b.udiv(blk, g0)
            pid1, pid2 = b.urem(rest, g1), b.udiv(rest, g1)
            b.call(block_fn, [scratch, args, counter, pid0, pid1, pid2] + list(n))
        b.ret(ir.Constant(ir.IntType(32), 0))
        return fn

    def _block_function(self):
        fnty = ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR] + [I64] * 6)
        fn = ir.Function(self.mod, fnty, name=f"{self.p.name}_block")
        fn.linkage = "internal"
        fn.args[0].add_attribute("noalias")
        self.scratch, args, self.sync = fn.args[0], fn.args[1], fn.args[2]
        self.pids, self.nums = fn.args[3:6], fn.args[6:9]
        entry = fn.append_basic_block("entry")
        self.allocas = ir.IRBuilder(entry)
        self.b = ir.IRBuilder(fn.append_basic_block("start"))
        self._unpack(args)
        for _, body in self.p.parts:    # a cluster: the cube part, then the vector part
            self.body(body)
        self.b.ret_void()
        self.allocas.branch(fn.basic_blocks[1])
        return fn

    def _unpack(self, args):
        b, slot = self.b, 0

        def load_slot(k):
            return b.load(b.gep(args, [i64(k)], source_etype=I64), typ=I64)

        workspace = self.space_base["workspace"]
        for p in self.p.params:
            if isinstance(p, TensorArg) and p.workspace:
                self.vals[id(p)] = (b.gep(self.scratch, [i64(workspace)],
                                          source_etype=ir.IntType(8)),
                                    [i64(d) for d in p.dims], [i64(s) for s in p.strides])
                workspace += -(-p.dims[0] * p.dims[1] * p.dtype.itemsize // 64) * 64
                if workspace > self.space_base["workspace"] + WORKSPACE_ACCS * \
                        self.p.target.buffers["acc"]:
                    raise CompilationError(
                        f"this kernel hands more than {WORKSPACE_ACCS} L0C-sized matmul results "
                        "to vector code; split it into several kernels")
                continue
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
        """Participant ``me`` of ``parts`` first runs its own contiguous share of the grid, then
        helps with the others' (claiming from the front of each share's cursor). Contiguous
        shares keep each thread on the same part of the tensors launch after launch, so data a
        previous kernel left in a core's caches is found there again; claiming from atomic
        cursors keeps the load balanced when a thread starts late or is descheduled.

        Blocks are claimed a few at a time (guided: a 2·parts-th of what is left of the share,
        at most MAX_CLAIM). An atomic read-modify-write waits for every earlier store to leave
        the core, so a claim per block made each block wait for the previous one's stores to
        reach memory: 5.7 % of a single-threaded softmax's samples were on the ``lock xadd``."""
        fnty = ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR, PTR, I64, I64])
        fn = ir.Function(self.mod, fnty, name=f"{self.p.name}_launch")
        args, grid, scratch, counter, me, parts = fn.args
        scratch.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        n = [b.load(b.gep(grid, [i64(k)], source_etype=I64), typ=I64) for k in range(3)]
        total = b.mul(b.mul(n[0], n[1]), n[2])
        share = b.udiv(b.add(total, b.sub(parts, i64(1))), parts)
        with counted_loop(b, i64(0), parts, name="share") as k:
            owner = b.urem(b.add(me, k), parts)
            lo = b.mul(owner, share)
            hi = b.add(lo, share)
            hi = b.select(b.icmp_signed("<", hi, total), hi, total)
            cursor = b.gep(counter, [b.add(i64(CURSORS), b.mul(owner, i64(CURSOR_STRIDE)))],
                           source_etype=I64)
            claim = fn.append_basic_block("claim")
            run = fn.append_basic_block("run")
            next_share = fn.append_basic_block("next_share")
            b.branch(claim)
            b.position_at_end(claim)
            left = b.sub(b.sub(hi, lo), b.load_atomic(cursor, "monotonic", 8, typ=I64))
            chunk = clamp(b, b.sdiv(left, b.mul(parts, i64(2))), i64(1), i64(MAX_CLAIM))
            first = b.add(lo, b.atomic_rmw("add", cursor, chunk, "monotonic"))
            b.cbranch(b.icmp_signed("<", first, hi), run, next_share)
            b.position_at_end(run)
            end = b.add(first, chunk)
            with counted_loop(b, first, b.select(b.icmp_signed("<", end, hi), end, hi),
                              name="blk") as blk:
                pid0 = b.urem(blk, n[0])
                rest = b.udiv(blk, n[0])
                pid1, pid2 = b.urem(rest, n[1]), b.udiv(rest, n[1])
                b.call(block_fn, [scratch, args, counter, pid0, pid1, pid2] + n)
            b.branch(claim)
            b.position_at_end(next_share)
        b.ret_void()
        return fn

    def _python_entry(self, start, by_pointer: bool, blocks: bool = False):
        """``<name>_py(pool_state, g0, g1, g2, helpers, own_scratch, params...)``:
        the launch as one native call. Tensors come as the addresses of numpy array objects,
        whose data pointer, dims and strides are read straight from the object (numpy's
        PyArrayObject layout); ints as i64, floats as double.

        ``by_pointer``: ``<name>_ptr``, the same call with each tensor as its data pointer
        alone, for kernels whose tensors' dims and strides are all compile-time constants
        (``has_pointer_entry``): torch tensors reach it through ``data_ptr()`` without a
        numpy view (runtime/launcher.py).

        ``blocks``: ``<name>_range(scratch, g0, g1, g2, lo, hi, params...)``, blocks ``lo`` to
        ``hi - 1`` on the calling thread (``_range_function``).
        """
        passed = runtime_params(self.p)
        params = [I64 if isinstance(p, TensorArg) or not p.dtype.is_floating else
                  ir.DoubleType() for p in passed]
        sixth = I64 if blocks else PTR       # _range: (scratch, g0, g1, g2, lo, hi, params...)
        fnty = ir.FunctionType(ir.IntType(32), [PTR, I64, I64, I64, I64, sixth] + params)
        suffix = "range" if blocks else "ptr" if by_pointer else "py"
        fn = ir.Function(self.mod, fnty, name=f"{self.p.name}_{suffix}")
        state, g0, g1, g2, helpers, own = fn.args[:6]
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        nslots = max(1, sum(args_slots(p) for p in self.p.params))
        args = b.alloca(I64, size=nslots)
        slot = 0
        for p, value in zip(passed, fn.args[6:]):
            if isinstance(p, TensorArg) and by_pointer:   # dims and strides: constants
                b.store(value, b.gep(args, [i64(slot)], source_etype=I64))
            elif isinstance(p, TensorArg):
                obj = b.inttoptr(value, PTR)
                field = lambda off: b.load(b.gep(obj, [i64(off)], source_etype=ir.IntType(8)),
                                           typ=I64)
                data, dims, strides = field(16), field(32), field(40)
                b.store(data, b.gep(args, [i64(slot)], source_etype=I64))
                for i in range(p.rank):
                    dim = b.load(b.gep(b.inttoptr(dims, PTR), [i64(i)], source_etype=I64), typ=I64)
                    st = b.load(b.gep(b.inttoptr(strides, PTR), [i64(i)], source_etype=I64),
                                typ=I64)
                    b.store(dim, b.gep(args, [i64(slot + 1 + i)], source_etype=I64))
                    b.store(b.sdiv(st, i64(p.dtype.itemsize)),
                            b.gep(args, [i64(slot + 1 + p.rank + i)], source_etype=I64))
            else:
                raw = b.bitcast(value, I64) if p.dtype.is_floating else value
                b.store(raw, b.gep(args, [i64(slot)], source_etype=I64))
            slot += args_slots(p)
        b.ret(b.call(start, [state, g0, g1, g2, helpers, own, args]))

    def _start_function(self, launch):
        """``i32 start(pool_state, g0, g1, g2, helpers, own_scratch, args)``, shared by the
        entries once they have filled ``args``: checks the grid and runs the launch on the
        host pool (or on one thread per block, for kernels whose blocks sync)."""
        fnty = ir.FunctionType(ir.IntType(32), [PTR, I64, I64, I64, I64, PTR, PTR])
        fn = ir.Function(self.mod, fnty, name=f"{self.p.name}_start")
        fn.linkage = "internal"
        state, g0, g1, g2, helpers, own, args = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        grid = b.alloca(I64, size=3)
        for k, g in enumerate((g0, g1, g2)):
            b.store(g, b.gep(grid, [i64(k)], source_etype=I64))
        negative = b.or_(b.or_(b.icmp_signed("<", g0, i64(0)), b.icmp_signed("<", g1, i64(0))),
                         b.icmp_signed("<", g2, i64(0)))
        with b.if_then(negative):
            b.ret(ir.Constant(ir.IntType(32), 1))
        total = b.mul(b.mul(g0, g1), g2)
        if uses_cross_core(self.p):
            cores = self.p.target.cores_for(self.p.kind != "vector")
            with b.if_then(b.icmp_signed(">", total, i64(cores))):
                b.ret(ir.Constant(ir.IntType(32), 2))
            counter = self._counter_array(b, total)
            self._cooperative_launch(b, launch, args, grid, counter, own, total)
            return fn
        with b.if_then(b.icmp_signed(">", total, i64(0))):
            spare = b.sub(total, i64(1))
            helpers = b.select(b.icmp_signed("<", spare, helpers), spare, helpers)
            counter = self._counter_array(b, b.add(helpers, i64(1)))
            ty = ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR, PTR, PTR, I64, PTR])
            pool_launch = ir.Function(self.mod, ty, name=POOL_LAUNCH_SYMBOL)
            b.call(pool_launch, [state, launch, args, grid, counter, helpers, own])
        b.ret(ir.Constant(ir.IntType(32), 0))
        return fn

    @staticmethod
    def _counter_array(b, parts):
        """The launch's shared slots, zeroed: the cross-core sync slots, then one share cursor
        per participant on its own cache line."""
        size = b.add(i64(CURSORS), b.mul(parts, i64(CURSOR_STRIDE)))
        counter = b.alloca(I64, size=size)
        with counted_loop(b, i64(0), size, name="zero") as k:
            b.store(i64(0), b.gep(counter, [k], source_etype=I64))
        return counter

    def _cooperative_launch(self, b, launch, args, grid, counter, own, total):
        """Blocks that meet at barriers or flags must all run at once, as the chip's cores
        would: one host thread per block (at most one per core of the target), each with
        its own core buffers. Status 2: the grid does not fit; 3: the blocks deadlocked."""
        mod = self.mod
        malloc = ir.Function(mod, ir.FunctionType(PTR, [I64]), name="malloc")
        free = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR]), name="free")
        create = ir.Function(mod, ir.FunctionType(ir.IntType(32), [PTR, PTR, PTR, PTR]),
                             name="pthread_create")
        join = ir.Function(mod, ir.FunctionType(ir.IntType(32), [I64, PTR]), name="pthread_join")
        _, scratch_bytes = scratch_layout(self.p.target)
        jobs = b.call(malloc, [b.mul(total, i64(8 * JOB_FIELDS))])
        thread = self._thread_trampoline(launch)
        with counted_loop(b, i64(1), total, name="spawn") as i:
            job = b.gep(jobs, [b.mul(i, i64(JOB_FIELDS))], source_etype=I64)
            fields = (args, grid, b.call(malloc, [i64(scratch_bytes)]), counter)
            for k, value in enumerate(fields):
                b.store(b.ptrtoint(value, I64), b.gep(job, [i64(k)], source_etype=I64))
            b.store(i, b.gep(job, [i64(4)], source_etype=I64))
            b.store(total, b.gep(job, [i64(5)], source_etype=I64))
            b.call(create, [b.gep(job, [i64(6)], source_etype=I64), ir.Constant(PTR, None),
                            thread, job])
        b.call(launch, [args, grid, own, counter, i64(0), total])
        with counted_loop(b, i64(1), total, name="join") as i:
            job = b.gep(jobs, [b.mul(i, i64(JOB_FIELDS))], source_etype=I64)
            handle = b.load(b.gep(job, [i64(6)], source_etype=I64), typ=I64)
            b.call(join, [handle, ir.Constant(PTR, None)])
            b.call(free, [b.inttoptr(b.load(b.gep(job, [i64(2)], source_etype=I64), typ=I64),
                                     PTR)])
        b.call(free, [jobs])
        dead = b.load(b.gep(counter, [i64(3)], source_etype=I64), typ=I64)
        b.ret(b.select(b.icmp_signed("!=", dead, i64(0)), ir.Constant(ir.IntType(32), 3),
                       ir.Constant(ir.IntType(32), 0)))

    def _thread_trampoline(self, launch):
        """``void *thread(i64 job[JOB_FIELDS])``: block ``job[4]`` of a cooperative launch of
        ``job[5]`` blocks; ``job[6]`` receives the thread's handle."""
        fn = ir.Function(self.mod, ir.FunctionType(PTR, [PTR]), name=f"{self.p.name}_thread")
        fn.linkage = "internal"
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        field = [b.load(b.gep(fn.args[0], [i64(k)], source_etype=I64), typ=I64)
                 for k in range(6)]
        b.call(launch, [b.inttoptr(f, PTR) for f in field[:4]] + field[4:])
        b.ret(ir.Constant(PTR, None))
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
        return self.b.gep(self.scratch, [i64(self.space_base[t.loc] + t.addr)],
                          source_etype=ir.IntType(8))

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

    def fused(self, insts):
        """A fusion group (passes/fuse_elementwise.py) as one loop nest over the output shape:
        each instruction's element rule runs on values held in registers, sources are read with
        broadcasting indices, internal results are never stored. Loads, a closing store and
        reads of forwarded tiles (``forwarding.py``) go straight to global memory when every
        window's rows lie inside its tensor and the full-width windows have the same number of
        valid columns: those columns run on global memory, the rest (a tile wider than the
        rows it holds) on the loads' padding values. Otherwise see ``_ragged``."""
        from .lowering.memory import direct_window, independent
        b = self.b
        closing, members = _split_group(insts)
        width = members[0].outs[0].cols
        windows, virtual, checks, guards = {}, set(), [], {}
        for inst in insts:
            if inst.op in ("tload", "tstore"):
                tile = inst.outs[0] if inst.op == "tload" else inst.ins[0]
                tensor, *offsets = inst.ins if inst.op == "tload" else inst.outs
                gm, rows_inside, valid, index = direct_window(self, tensor, offsets, tile)
                windows[id(inst)] = (gm, tensor, index, inst.attrs.get("pad", 0))
                checks.append((rows_inside, valid, tile.cols))
                if inst.op == "tload" and tile.cols == width:
                    guards[id(tile)] = (valid, inst.attrs.get("pad", 0))
                if inst.op == "tload" and id(inst) in self.forwarding.loads:
                    self.forward_windows[id(inst)] = (gm, tensor, offsets, index, rows_inside,
                                                      valid, tile.cols)
                    virtual.add(id(tile))
        gm_reads = self._forwarded_reads(insts)
        # what the group reads from global memory: (tensor, offsets, tile shape)
        read_windows = [(inst.ins[0], inst.ins[1:], (inst.outs[0].rows, inst.outs[0].cols))
                        for inst in insts if inst.op == "tload"]
        for x, load, (_, tensor, offsets, _, rows_inside, valid, cols) in gm_reads.values():
            checks.append((rows_inside, valid, cols))
            read_windows.append((tensor, offsets, (x.rows, x.cols)))
            if x.cols == width:
                guards[id(x)] = (valid, load.attrs.get("pad", 0))
        if not checks:
            self._fused_loop(insts, windows)
            return
        direct = []
        valid_cols = next((v for _, v, cols in checks if cols == width), None)
        for rows_inside, valid, cols in checks:
            direct.append(rows_inside)
            direct.append(b.icmp_signed("==", valid, valid_cols if cols == width else i64(cols)))
        if valid_cols is None or not _order_sensitive(closing):
            guards = None
        if guards is not None:
            # a float sum or product runs its columns in fixed lanes over one range from column
            # 0 (vector.reduce_row), so that no path or fusion changes its bits: both paths
            # run one loop over every column, reading a loaded tile's padding columns as its
            # pad value behind the same guard
            valid_cols = None
        elif valid_cols is not None:
            direct.append(b.icmp_signed(">", valid_cols, i64(0)))
        if closing is not None and closing.op == "tstore":
            store_tensor, *store_offsets = closing.outs
            shape = (closing.ins[0].rows, closing.ins[0].cols)
            for tensor, offsets, tile_shape in read_windows:
                direct.append(independent(self, store_tensor, store_offsets, tensor, offsets,
                                          same_shape=tile_shape == shape))
        ok = direct[0]
        for cond in direct[1:]:
            ok = b.and_(ok, cond)
        with b.if_else(ok) as (then, otherwise):
            with then:
                self._fused_loop(insts, windows, gm_reads=gm_reads, virtual=virtual,
                                 valid_cols=valid_cols, guards=guards)
            with otherwise:
                for x, load, _ in gm_reads.values():     # materialise what the group reads
                    RULES["tload"](self, load, x)
                self._ragged(insts, guards)

    def _forwarded_reads(self, insts) -> dict:
        """id(tile) -> (tile, its load, the load's window) for the tiles ``insts`` read from
        global memory (``forwarding.py``)."""
        reads = {}
        for inst in insts:
            for key, forward in self.forwarding.reads.get(id(inst), {}).items():
                x = next(x for x in inst.ins if id(x) == key)
                reads[key] = (x, forward.load, self.forward_windows[id(forward.load)])
        return reads

    def _ragged(self, insts, guards=None):
        """A group at a ragged edge: its loads run with their masking and padding into their
        tiles, the computation still as one loop over the tiles, and a closing store (whose
        source is then kept in its tile) with its masking. ``guards``: as for the direct path
        (``_fused_loop``), so that both associate a row sum alike."""
        for inst in insts:
            if inst.op == "tload":
                RULES["tload"](self, inst)
        rest = [inst for inst in insts if inst.op != "tload"]
        store = rest.pop() if rest and rest[-1].op == "tstore" else None
        if len(rest) > 1 or (rest and rest[0].op not in ROW_REDUCTIONS) or guards:
            self._fused_loop(rest, {}, keep={id(store.ins[0])} if store else set(),
                             guards=guards)
        elif rest:
            RULES[rest[0].op](self, rest[0])
        if store is not None:
            RULES["tstore"](self, store)

    def _fused_loop(self, insts, windows, keep=frozenset(), gm_reads=None, virtual=frozenset(),
                    valid_cols=None, guards=None, guarded_only=False):
        """``keep``: internal results to store anyway; ``gm_reads``: tiles read from their
        load's window (``_forwarded_reads``); ``virtual``: loaded tiles not to store;
        ``valid_cols``: columns from there on are padding (loads give their pad value, the
        closing store skips them); ``guards``: id(loaded tile) -> (valid columns, pad): the
        tile is read as its pad value from its valid columns on, behind a branch in the one
        column loop (a masked load once vectorised), when some tile has padding columns: the
        loop for tiles without any is the plain one (the guards cost ~5 % there)."""
        from .lowering.vector import ELEMENT_RULES, HEAVY, reduce_row
        b = self.b
        closing, members = _split_group(insts)
        out = members[0].outs[0] if members else closing.ins[0]
        if guards and not guarded_only:
            whole = [b.icmp_signed("==", valid, i64(out.cols)) for valid, _ in guards.values()]
            every = whole[0]
            for cond in whole[1:]:
                every = b.and_(every, cond)
            with b.if_else(every) as (no_padding, padding):
                with no_padding:
                    self._fused_loop(insts, windows, keep, gm_reads, virtual, valid_cols)
                with padding:
                    self._fused_loop(insts, windows, keep, gm_reads, virtual, valid_cols,
                                     guards, guarded_only=True)
            return
        rules = [([], None) if inst.op == "tload" else ELEMENT_RULES[inst.op](self, inst)
                 for inst in members]
        tiles = {id(t): t for inst in insts for t in inst.ins + inst.outs if isinstance(t, Tile)}
        # every tile's address, computed here so that it dominates both column loops below
        ptrs = {key: self.tile_ptr(t) for key, t in tiles.items()}

        def ptr(t):
            return ptrs[id(t)]

        def pad_value(d, pad):
            return from_compute(b, const(d, pad), d)

        def read(x, row, c, padded=False):
            if gm_reads and id(x) in gm_reads:
                _, load, (gm, tensor, _, index, *_) = gm_reads[id(x)]
                if padded and x.cols == out.cols:
                    return pad_value(x.dtype, load.attrs.get("pad", 0))
                return convert(b, self.load_elem(gm, tensor.dtype, index(row, c)),
                               tensor.dtype, x.dtype)
            return self.load_elem(ptr(x), x.dtype, b.add(b.mul(row, i64(x.cols)), c))

        def guarded(key, c, load):
            """``load()``, or the pad value past the tile's valid columns (``guards``)."""
            if not guards or key not in guards:
                return load()
            valid, pad = guards[key]
            with b.if_else(b.icmp_signed("<", c, valid)) as (inside, outside):
                with inside:
                    loaded, inside_end = load(), b.block
                with outside:
                    padding, outside_end = pad_value(tiles[key].dtype, pad), b.block
            merged = b.phi(loaded.type)
            merged.add_incoming(loaded, inside_end)
            merged.add_incoming(padding, outside_end)
            return merged

        def value_of(x, regs, row_values, r, c, padded=False):
            raw = regs.get(id(x), row_values.get(id(x)))
            if raw is None:
                raw = guarded(id(x), c, lambda: read(x, r if x.rows > 1 else i64(0), c, padded))
            return raw

        with counted_loop(b, i64(0), i64(out.rows), name="fr") as r:
            # per-row operands are read once per row, outside the column loop, so the column
            # loop has no loads that a store might clobber and LLVM vectorises it
            row_values = {}
            for inputs, _ in rules:
                for x in inputs:
                    if isinstance(x, Tile) and x.cols == 1 and id(x) not in row_values:
                        row_values[id(x)] = read(x, r if x.rows > 1 else i64(0), i64(0))
            def column(c, padded):
                """Column ``c``'s members; the closing row reduction's element, if any."""
                regs = {}
                for inst, (inputs, body) in zip(members, rules):
                    dst = inst.outs[0]
                    if inst.op == "tload" and padded:
                        value = pad_value(dst.dtype, windows[id(inst)][3])
                    elif inst.op == "tload":
                        gm, tensor, index, _ = windows[id(inst)]
                        value = guarded(id(dst), c, lambda: convert(
                            b, self.load_elem(gm, tensor.dtype, index(r, c)), tensor.dtype,
                            dst.dtype))
                    else:
                        value = body(*(to_compute(b, value_of(x, regs, row_values, r, c,
                                                              padded), x.dtype)
                                       if isinstance(x, Tile) else x for x in inputs))
                    regs[id(dst)] = value
                    if (not inst.attrs.get("_internal") or id(dst) in keep) and \
                            id(dst) not in virtual:
                        self.store_elem(value, ptr(dst), dst.dtype,
                                        b.add(b.mul(r, i64(dst.cols)), c))
                if closing is not None:
                    src = closing.ins[0]
                    raw = value_of(src, regs, row_values, r, c, padded)
                    if closing.op != "tstore":
                        return raw
                    if not padded:
                        gm, tensor, index, _ = windows[id(closing)]
                        self.store_elem(convert(b, raw, src.dtype, tensor.dtype), gm,
                                        tensor.dtype, index(r, c))

            split = valid_cols if valid_cols is not None else i64(out.cols)
            # the padding columns (from valid_cols on) need no global memory at all
            ranges = [(i64(0), split, lambda c: column(c, padded=False))]
            if valid_cols is not None:
                ranges.append((valid_cols, i64(out.cols), lambda c: column(c, padded=True)))
            if closing is not None and closing.op in ROW_REDUCTIONS:
                # the row reduction's own loops (vector.reduce_row), as when it runs alone
                reduce_row(self, closing.op[len("trow"):], closing.ins[0], closing.outs[0],
                           ranges, r, heavy=any(inst.op in HEAVY for inst in members))
            else:
                for lo, hi, element in ranges:
                    with counted_loop(b, lo, hi, name="fc") as c:
                        element(c)

    # -- control flow -------------------------------------------------------------------------
    def body(self, insts):
        # flags and pipe barriers order the chip's pipes; the host runs one stream in order
        # (and a mixed kernel's cube part before its vector part, so their flags are met too)
        nops = HOST_NOPS + (CROSS_CORE_OPS if self.p.kind == "mixed" else ())
        insts = [i for i in insts if getattr(i, "op", None) not in nops
                 and not getattr(i, "attrs", {}).get("_prefill")]
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
                self.fused(insts[i:j])
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
        b.cbranch(b.icmp_signed("<", iv, ub), body, done)
        b.position_at_end(body)
        self.vals[id(f.iv)] = iv
        self.body(f.body)
        iv.add_incoming(b.add(iv, step), b.block)
        for phi, y in zip(phis, f.yields):
            phi.add_incoming(self.get(y), b.block)
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

    def _while(self, node: While):
        b = self.b
        pre = b.block
        header = b.append_basic_block("while.cond")
        body = b.append_basic_block("while.body")
        done = b.append_basic_block("while.done")
        b.branch(header)
        b.position_at_end(header)
        phis = self._phis(node.before_args, node.inits, pre)
        self.body(node.before_body)
        forwarded = [self.get(v) for v in node.forwarded]
        b.cbranch(self.truth(self.get(node.cond)), body, done)
        b.position_at_end(body)
        for arg, value in zip(node.after_args, forwarded):
            self.vals[id(arg)] = value
        self.body(node.after_body)
        for phi, y in zip(phis, node.yields):
            phi.add_incoming(self.get(y), b.block)
        b.branch(header)
        b.position_at_end(done)
        for res, value in zip(node.results, forwarded):
            self.vals[id(res)] = value


def uses_cross_core(program: Program) -> bool:
    """Do blocks of a launch wait for each other (so must all run at once)?"""
    return program.kind != "mixed" and any(getattr(n, "op", None) in CROSS_CORE_OPS
               for _, body in program.parts for n in walk_insts(body))


def generate_llvm_ir(program: Program) -> str:
    return Codegen(program).build()
