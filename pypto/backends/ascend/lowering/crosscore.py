"""Cross-core synchronisation: ``syncall`` and the ``sync.set``/``sync.wait`` flags.

The blocks of a launch that uses them run as host threads all at once (see
``Codegen._cooperative_launch``) and meet in a small shared area, the launch's counter array:

    [0] next block   [1] barrier arrivals   [2] barrier generation   [3] deadlock
    [4 + f] cross-core flag f (0-15)

A waiter that sees no progress for ``PYPTO_SYNC_TIMEOUT`` seconds marks the launch dead; every
waiter then returns, the blocks end early, and the launch reports the deadlock to Python
instead of hanging the process.
"""
from __future__ import annotations

from llvmlite import ir

from ....compiler.pipes import CROSS_CORE_FLAGS
from ..lowering_utils import I64, PTR, i64

ARRIVED, GENERATION, DEAD, FLAGS = 1, 2, 3, 4
SYNC_SLOTS = FLAGS + CROSS_CORE_FLAGS
I32 = ir.IntType(32)


def _slot(b, sync, k):
    return b.gep(sync, [i64(k)], source_etype=I64)


def _declare(mod, name, ret, args):
    fn = mod.globals.get(name)
    return fn if fn is not None else ir.Function(mod, ir.FunctionType(ret, args), name=name)


def _wait_until(cg, ready, name: str):
    """Spin (yielding the host core) until ``ready(builder)`` holds or the launch is dead;
    then, if dead, leave the block early."""
    b, sync = cg.b, cg.sync
    fn = b.function
    sched_yield = _declare(cg.mod, "sched_yield", I32, [])
    now = _declare(cg.mod, "time", I64, [PTR])
    deadline = b.add(b.call(now, [ir.Constant(PTR, None)]), i64(cg.sync_timeout))
    head = fn.append_basic_block(f"{name}.spin")
    check_time = fn.append_basic_block(f"{name}.clock")
    timed_out = fn.append_basic_block(f"{name}.timeout")
    dead = fn.append_basic_block(f"{name}.dead")
    done = fn.append_basic_block(f"{name}.done")
    pre = b.block
    b.branch(head)
    b.position_at_end(head)
    spins = b.phi(I64)
    spins.add_incoming(i64(0), pre)
    is_ready = ready(b)
    not_ready = fn.append_basic_block(f"{name}.wait")
    b.cbranch(is_ready, done, not_ready)
    b.position_at_end(not_ready)
    gone = b.load_atomic(_slot(b, sync, DEAD), "acquire", 8, typ=I64)
    alive = fn.append_basic_block(f"{name}.alive")
    b.cbranch(b.icmp_signed("!=", gone, i64(0)), dead, alive)
    b.position_at_end(alive)
    b.call(sched_yield, [])
    nxt = b.add(spins, i64(1))
    b.cbranch(b.icmp_signed("==", b.and_(nxt, i64(1023)), i64(0)), check_time, head)
    spins.add_incoming(nxt, alive)
    b.position_at_end(check_time)
    b.cbranch(b.icmp_signed(">", b.call(now, [ir.Constant(PTR, None)]), deadline),
              timed_out, head)
    spins.add_incoming(nxt, check_time)
    b.position_at_end(timed_out)
    b.atomic_rmw("xchg", _slot(b, sync, DEAD), i64(1), "release")
    b.branch(dead)
    b.position_at_end(dead)
    b.ret_void()
    b.position_at_end(done)


def _syncall(cg, inst):
    b, sync = cg.b, cg.sync
    total = b.mul(b.mul(cg.nums[0], cg.nums[1]), cg.nums[2])
    gen = b.load_atomic(_slot(b, sync, GENERATION), "acquire", 8, typ=I64)
    arrived = b.atomic_rmw("add", _slot(b, sync, ARRIVED), i64(1), "acq_rel")
    with b.if_else(b.icmp_signed("==", arrived, b.sub(total, i64(1)))) as (last, others):
        with last:        # the last to arrive opens the barrier for the next round too
            b.atomic_rmw("xchg", _slot(b, sync, ARRIVED), i64(0), "release")
            b.atomic_rmw("add", _slot(b, sync, GENERATION), i64(1), "acq_rel")
        with others:
            _wait_until(cg, lambda bb: bb.icmp_signed(
                "!=", bb.load_atomic(_slot(bb, sync, GENERATION), "acquire", 8, typ=I64), gen), "syncall")


def _sync_set(cg, inst):
    cg.b.atomic_rmw("add", _slot(cg.b, cg.sync, FLAGS + inst.attrs["flag"]),
                    i64(inst.attrs.get("count", 1)), "acq_rel")


def _sync_wait(cg, inst):
    count = i64(inst.attrs.get("count", 1))
    slot = _slot(cg.b, cg.sync, FLAGS + inst.attrs["flag"])

    def take(b):
        """Take ``count`` off the flag if it holds that much (compare-and-swap)."""
        seen = b.load_atomic(slot, "acquire", 8, typ=I64)
        enough = b.icmp_signed(">=", seen, count)
        new = b.select(enough, b.sub(seen, count), seen)     # not enough: swap in the same
        swapped = b.cmpxchg(slot, seen, new, "acq_rel", "monotonic")
        return b.and_(enough, b.extract_value(swapped, 1))

    _wait_until(cg, take, "sync_wait")


RULES = {"syncall": _syncall, "sync.set": _sync_set, "sync.wait": _sync_wait}
