"""Cross-core synchronisation: ``syncall`` and the ``sync.set``/``sync.wait`` flags.

The blocks of a launch that uses them run as host threads all at once (see
``Codegen._cooperative_launch``) and meet in a small shared area, the launch's counter array:

    [0] unused   [1] barrier arrivals   [2] barrier generation   [3] deadlock
    [4 + f] cross-core flag f (0-15), then the launch's share cursors (entry.CURSORS)

Waiters sleep on a futex of the slot they watch (more blocks than host cores is the normal
case, so spinning would starve the blocks being waited for). A waiter that sees no progress for
``PYPTO_SYNC_TIMEOUT`` seconds marks the launch dead; every waiter then returns, the blocks end early, and the launch reports the deadlock to Python
instead of hanging the process.
"""
from __future__ import annotations

import platform

from llvmlite import ir

from ....compiler.pto.isa import CROSS_CORE_FLAGS
from ..control import stop_requested
from ..lowering_utils import I64, PTR, i64

ARRIVED, GENERATION, DEAD, FLAGS = 1, 2, 3, 4
SYS_FUTEX = {"x86_64": 202, "AMD64": 202, "aarch64": 98, "arm64": 98}.get(platform.machine())
FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE = 128, 129
SYNC_SLOTS = FLAGS + CROSS_CORE_FLAGS
I32 = ir.IntType(32)


def _slot(b, sync, k):
    return b.gep(sync, [i64(k)], source_etype=I64)


def _declare(mod, name, ret, args):
    fn = mod.globals.get(name)
    return fn if fn is not None else ir.Function(mod, ir.FunctionType(ret, args), name=name)


def _futex(cg, slot, op: int, value):
    """futex(slot, op, value, 50 ms) on the low 32 bits of an i64 slot (little-endian hosts);
    without a futex (other platforms) a yield instead."""
    b = cg.b
    if SYS_FUTEX is None:
        b.call(_declare(cg.mod, "sched_yield", I32, []), [])
        return
    syscall = cg.mod.globals.get("syscall") or ir.Function(
        cg.mod, ir.FunctionType(I64, [I64], var_arg=True), name="syscall")
    timeout = cg.entry_alloca(I64, 2)
    b.store(i64(0), timeout)
    b.store(i64(50_000_000), b.gep(timeout, [i64(1)], source_etype=I64))
    b.call(syscall, [i64(SYS_FUTEX), slot, ir.Constant(I32, op), value, timeout])


def _wake_all(cg, slot):
    _futex(cg, slot, FUTEX_WAKE_PRIVATE, ir.Constant(I32, 2**31 - 1))


def _wait_until(cg, ready, watch, name: str):
    """Until ``ready(builder)`` holds: sleep on ``watch`` (woken when it changes; a 50 ms
    timeout bounds a lost wake-up), and give up when the launch is dead or makes no progress
    for the timeout, leaving the block early."""
    b, sync = cg.b, cg.sync
    fn = b.function
    now = _declare(cg.mod, "time", I64, [PTR])
    deadline = b.add(b.call(now, [ir.Constant(PTR, None)]), i64(cg.sync_timeout))
    head = fn.append_basic_block(f"{name}.check")
    sleep = fn.append_basic_block(f"{name}.sleep")
    timed_out = fn.append_basic_block(f"{name}.timeout")
    dead = fn.append_basic_block(f"{name}.dead")
    done = fn.append_basic_block(f"{name}.done")
    b.branch(head)
    b.position_at_end(head)
    seen = b.trunc(b.load_atomic(watch, "acquire", 8, typ=I64), I32)   # before the check
    b.cbranch(ready(b), done, sleep)
    b.position_at_end(sleep)
    gone = b.load_atomic(_slot(b, sync, DEAD), "acquire", 8, typ=I64)
    alive = fn.append_basic_block(f"{name}.alive")
    b.cbranch(b.icmp_signed("!=", gone, i64(0)), dead, alive)
    b.position_at_end(alive)
    _futex(cg, watch, FUTEX_WAIT_PRIVATE, seen)
    late = b.icmp_signed(">", b.call(now, [ir.Constant(PTR, None)]), deadline)
    b.cbranch(b.or_(late, stop_requested(b, sync)), timed_out, head)   # or asked to stop
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
            _wake_all(cg, _slot(b, sync, GENERATION))
        with others:
            generation = _slot(b, sync, GENERATION)
            _wait_until(cg, lambda bb: bb.icmp_signed(
                "!=", bb.load_atomic(generation, "acquire", 8, typ=I64), gen), generation,
                "syncall")


def _sync_set(cg, inst):
    slot = _slot(cg.b, cg.sync, FLAGS + inst.attrs["flag"])
    cg.b.atomic_rmw("add", slot, i64(inst.attrs.get("count", 1)), "acq_rel")
    _wake_all(cg, slot)


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

    _wait_until(cg, take, slot, "sync_wait")


RULES = {"syncall": _syncall, "sync.set": _sync_set, "sync.wait": _sync_wait}
