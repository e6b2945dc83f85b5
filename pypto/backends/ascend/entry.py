"""The launch ABI of a compiled kernel: the host functions around its block function.

What the runtime and the generated code agree on lives here: each core's scratch layout, the
argument slots, the shared counter array and the entry points. ``void <name>_launch(i64* args,
i64* grid, i8* scratch, i64* counter, i64 me, i64 parts)``: participant ``me`` of ``parts`` runs
its contiguous share of the grid and then helps with the others', claiming blocks from
per-share cursors in ``counter``, so any number of host threads can share one launch;
``<name>_py``, ``<name>_ptr`` and ``<name>_range`` (``python_entry``) are what Python calls.
Each builder is a free function of the ``Codegen`` whose module it adds to.
"""
from __future__ import annotations

from llvmlite import ir

from ...errors import CompilationError
from ...compiler.pto import Program, TensorArg, walk_insts
from ...compiler.ir import HAND_OFF_FIFO
from ...compiler.pto.isa import CROSS_CORE_OPS
from .control import (EXIT_BIT, EXITING, IN_FLIGHT, STOP, STOP_MASK, control_slot,
                      obeyed_bits, stop_requested, stop_status)
from .lowering.crosscore import SYNC_SLOTS
from .lowering_utils import I64, PTR, clamp, counted_loop, i64, storage_type
from ...target import Target

SPACE_ORDER = ("vec", "mat", "left", "right", "acc", "bias")
# workspace room per core, in L0C-sized slots: two hand-offs, each a FIFO of HAND_OFF_FIFO
WORKSPACE_ACCS = 2 * HAND_OFF_FIFO
POOL_LAUNCH_SYMBOL = "pypto_pool_launch"     # provided by host_pool, registered with LLVM
CURSOR_STRIDE = 8           # i64 slots between share cursors: one cache line each
MAX_CLAIM = 8               # blocks claimed at once, at most (see launch_function)
CLAIM_POLL = 16             # claims between polls of the stop bits (control.py)
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
        # twice the UB: the host's interleaved copy of a kernel whose vector part is split
        # between the AIVs runs the whole rows, at the doubled offsets (Program.vec_scale)
        at += target.buffers[space] * (2 if space == "vec" else 1)
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


def uses_cross_core(program: Program) -> bool:
    """Do blocks of a launch wait for each other (so must all run at once)?"""
    return program.kind != "mixed" and any(getattr(n, "op", None) in CROSS_CORE_OPS
               for _, body in program.parts for n in walk_insts(body))


def python_entry(cg, start, by_pointer: bool, blocks: bool = False):
    """``<name>_py(pool_state, g0, g1, g2, helpers, own_scratch, params...)``:
    the launch as one native call. Tensors come as the addresses of numpy array objects,
    whose data pointer, dims and strides are read straight from the object (numpy's
    PyArrayObject layout); ints as i64, floats as double.

    ``by_pointer``: ``<name>_ptr``, the same call with each tensor as its data pointer
    alone, for kernels whose tensors' dims and strides are all compile-time constants
    (``has_pointer_entry``): torch tensors reach it through ``data_ptr()`` without a
    numpy view (runtime/launcher.py).

    ``blocks``: ``<name>_range(scratch, g0, g1, g2, lo, hi, stop_mask, params...)``, blocks
    ``lo`` to ``hi - 1`` on the calling thread (``range_function``), stopping on the stop
    bits ``stop_mask`` (those of the thread that started the graph's run: control.py).
    """
    passed = runtime_params(cg.p)
    params = [I64 if isinstance(p, TensorArg) or not p.dtype.is_floating else
              ir.DoubleType() for p in passed]
    head = [PTR, I64, I64, I64, I64, I64, I64] if blocks else [PTR, I64, I64, I64, I64, PTR]
    fnty = ir.FunctionType(ir.IntType(32), head + params)
    suffix = "range" if blocks else "ptr" if by_pointer else "py"
    fn = ir.Function(cg.mod, fnty, name=f"{cg.p.name}_{suffix}")
    state, g0, g1, g2, helpers, own = fn.args[:6]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    if not blocks:
        # counted in flight before anything is read: at exit, once EXIT_BIT is set and no
        # launch is in flight, no launch reads an argument or the pool again (control.py)
        in_flight = control_slot(b, IN_FLIGHT)
        b.atomic_rmw("add", in_flight, i64(1), "seq_cst")
        bits = b.load_atomic(control_slot(b, STOP), "seq_cst", 8, typ=I64)
        with b.if_then(b.icmp_unsigned("!=", b.and_(bits, i64(EXIT_BIT)), i64(0)),
                       likely=False):
            b.atomic_rmw("sub", in_flight, i64(1), "seq_cst")
            b.ret(ir.Constant(ir.IntType(32), EXITING))
    nslots = max(1, sum(args_slots(p) for p in cg.p.params))
    args = b.alloca(I64, size=nslots)
    slot = 0
    for p, value in zip(passed, fn.args[len(head):]):
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
    extra = [fn.args[6]] if blocks else []          # the range's stop mask
    status = b.call(start, [state, g0, g1, g2, helpers, own, args] + extra)
    if not blocks:
        b.atomic_rmw("sub", in_flight, i64(1), "release")
    b.ret(status)


def start_function(cg, launch):
    """``i32 start(pool_state, g0, g1, g2, helpers, own_scratch, args)``, shared by the
    entries once they have filled ``args``: checks the grid and runs the launch on the
    host pool (or on one thread per block, for kernels whose blocks sync)."""
    fnty = ir.FunctionType(ir.IntType(32), [PTR, I64, I64, I64, I64, PTR, PTR])
    fn = ir.Function(cg.mod, fnty, name=f"{cg.p.name}_start")
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
    empty = b.or_(b.or_(b.icmp_signed("==", g0, i64(0)), b.icmp_signed("==", g1, i64(0))),
                  b.icmp_signed("==", g2, i64(0)))
    with b.if_then(empty):                  # an empty grid launches nothing, of any kind
        b.ret(ir.Constant(ir.IntType(32), 0))
    total, overflow = _checked_product(cg, b, (g0, g1, g2))
    with b.if_then(overflow):               # more blocks than an i64 can number
        b.ret(ir.Constant(ir.IntType(32), 4))
    mask = obeyed_bits(b)
    if uses_cross_core(cg.p):
        cores = cg.p.target.cores_for(cg.p.kind != "vector")
        with b.if_then(b.icmp_signed(">", total, i64(cores))):
            b.ret(ir.Constant(ir.IntType(32), 2))
        counter = counter_array(b, total)
        b.store(mask, b.gep(counter, [i64(STOP_MASK)], source_etype=I64))
        _cooperative_launch(cg, b, launch, args, grid, counter, own, total, mask)
        return fn
    spare = b.sub(total, i64(1))
    helpers = b.select(b.icmp_signed("<", spare, helpers), spare, helpers)
    counter = counter_array(b, b.add(helpers, i64(1)))
    b.store(mask, b.gep(counter, [i64(STOP_MASK)], source_etype=I64))
    ty = ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR, PTR, PTR, I64, PTR])
    pool_launch = ir.Function(cg.mod, ty, name=POOL_LAUNCH_SYMBOL)
    b.call(pool_launch, [state, launch, args, grid, counter, helpers, own])
    b.ret(stop_status(b, mask, ir.Constant(ir.IntType(32), 0)))
    return fn


def _checked_product(cg, b, dims):
    """The product of non-negative ``dims`` and whether it overflowed an i64."""
    pair_ty = ir.LiteralStructType([I64, ir.IntType(1)])
    mul = cg.mod.declare_intrinsic("llvm.smul.with.overflow", [I64],
                                   fnty=ir.FunctionType(pair_ty, [I64, I64]))
    total, overflow = dims[0], ir.Constant(ir.IntType(1), 0)
    for d in dims[1:]:
        pair = b.call(mul, [total, d])
        total, overflow = b.extract_value(pair, 0), b.or_(overflow, b.extract_value(pair, 1))
    return total, overflow


def launch_function(cg, block_fn):
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
    fn = ir.Function(cg.mod, fnty, name=f"{cg.p.name}_launch")
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
        before = b.block
        b.branch(claim)
        b.position_at_end(claim)
        # asked to stop (Ctrl-C, exit: control.py)? then claim no more blocks. Polled every
        # CLAIM_POLL claims: a poll per claim cost 6 % on 16384 one-tile blocks
        claims = b.phi(I64, name="claims")
        claims.add_incoming(i64(0), before)
        poll, go_on = fn.append_basic_block("poll"), fn.append_basic_block("go_on")
        b.cbranch(b.icmp_unsigned("==", b.and_(claims, i64(CLAIM_POLL - 1)), i64(0)),
                  poll, go_on)
        b.position_at_end(poll)
        b.cbranch(stop_requested(b, counter), next_share, go_on)
        b.position_at_end(go_on)
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
        claims.add_incoming(b.add(claims, i64(1)), b.block)
        b.branch(claim)
        b.position_at_end(next_share)
    b.ret_void()
    return fn


def range_function(cg, block_fn):
    """``i32 range(pool_state, g0, g1, g2, lo, hi, args, stop_mask)``: blocks ``lo`` to ``hi - 1``
    (linear, pid0 fastest, as ``launch_function`` numbers them) of a launch over the
    grid, on the calling thread with its own scratch (``pool_state`` is that scratch
    here): the Execution Graph's runtime runs one task per call. Only for kernels whose
    blocks never wait for each other."""
    fnty = ir.FunctionType(ir.IntType(32), [PTR, I64, I64, I64, I64, I64, PTR, I64])
    fn = ir.Function(cg.mod, fnty, name=f"{cg.p.name}_range_start")
    fn.linkage = "internal"
    scratch, g0, g1, g2, lo, hi, args, mask = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    counter = counter_array(b, i64(1))
    b.store(mask, b.gep(counter, [i64(STOP_MASK)], source_etype=I64))
    n = (g0, g1, g2)
    with counted_loop(b, lo, hi, name="blk") as blk:
        with b.if_then(stop_requested(b, counter), likely=False):   # between blocks too
            b.ret(stop_status(b, mask, ir.Constant(ir.IntType(32), 0)))
        pid0 = b.urem(blk, g0)
        rest = b.udiv(blk, g0)
        pid1, pid2 = b.urem(rest, g1), b.udiv(rest, g1)
        b.call(block_fn, [scratch, args, counter, pid0, pid1, pid2] + list(n))
    b.ret(stop_status(b, mask, ir.Constant(ir.IntType(32), 0)))
    return fn


def unpack_args(cg, args):
    """The block function's side of the argument slots ``python_entry`` fills: each tensor's
    (pointer, dims, strides) and each scalar's value into ``cg.vals``; the workspace is this
    block's slot of the core's scratch."""
    b, slot = cg.b, 0

    def load_slot(k):
        return b.load(b.gep(args, [i64(k)], source_etype=I64), typ=I64)

    workspace = cg.space_base["workspace"]
    for p in cg.p.params:
        if isinstance(p, TensorArg) and p.workspace:
            cg.vals[id(p)] = (b.gep(cg.scratch, [i64(workspace)],
                                    source_etype=ir.IntType(8)),
                              [i64(d) for d in p.dims], [i64(s) for s in p.strides])
            workspace += -(-p.dims[0] * p.dims[1] * p.dtype.itemsize // 64) * 64
            if workspace > cg.space_base["workspace"] + WORKSPACE_ACCS * \
                    cg.p.target.buffers["acc"]:
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
            cg.vals[id(p)] = (ptr, dims, strides)
        else:
            raw = load_slot(slot)
            if p.dtype.is_floating:
                raw = b.fptrunc(b.bitcast(raw, ir.DoubleType()), storage_type(p.dtype))
            cg.vals[id(p)] = raw
        slot += args_slots(p)


def counter_array(b, parts):
    """The launch's shared slots, zeroed: the cross-core sync slots, then one share cursor
    per participant on its own cache line."""
    size = b.add(i64(CURSORS), b.mul(parts, i64(CURSOR_STRIDE)))
    counter = b.alloca(I64, size=size)
    with counted_loop(b, i64(0), size, name="zero") as k:
        b.store(i64(0), b.gep(counter, [k], source_etype=I64))
    return counter


def _cooperative_launch(cg, b, launch, args, grid, counter, own, total, mask):
    """Blocks that meet at barriers or flags must all run at once, as the chip's cores
    would: one host thread per block (at most one per core of the target), each with
    its own core buffers. Status 2: the grid does not fit; 3: the blocks deadlocked."""
    mod = cg.mod
    malloc = ir.Function(mod, ir.FunctionType(PTR, [I64]), name="malloc")
    free = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR]), name="free")
    create = ir.Function(mod, ir.FunctionType(ir.IntType(32), [PTR, PTR, PTR, PTR]),
                         name="pthread_create")
    join = ir.Function(mod, ir.FunctionType(ir.IntType(32), [I64, PTR]), name="pthread_join")
    _, scratch_bytes = scratch_layout(cg.p.target)
    jobs = b.call(malloc, [b.mul(total, i64(8 * JOB_FIELDS))])
    thread = _thread_trampoline(cg, launch)
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
    b.ret(stop_status(b, mask, b.select(b.icmp_signed("!=", dead, i64(0)),
                                        ir.Constant(ir.IntType(32), 3),
                                        ir.Constant(ir.IntType(32), 0))))


def _thread_trampoline(cg, launch):
    """``void *thread(i64 job[JOB_FIELDS])``: block ``job[4]`` of a cooperative launch of
    ``job[5]`` blocks; ``job[6]`` receives the thread's handle."""
    fn = ir.Function(cg.mod, ir.FunctionType(PTR, [PTR]), name=f"{cg.p.name}_thread")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    field = [b.load(b.gep(fn.args[0], [i64(k)], source_etype=I64), typ=I64)
             for k in range(6)]
    b.call(launch, [b.inttoptr(f, PTR) for f in field[:4]] + field[4:])
    b.ret(ir.Constant(PTR, None))
    return fn
