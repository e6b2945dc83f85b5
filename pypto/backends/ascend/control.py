"""The process-wide control block that launches poll: Ctrl-C and interpreter exit.

One block of i64 slots, defined in the host pool's code (``host_pool.py``, loaded once and
never freed) and linked into every kernel under ``CONTROL_SYMBOL``:

    [STOP]         stop bits: SIGINT_BIT (set by the chained SIGINT handler, cleared when the
                   main thread starts a launch), EXIT_BIT (set at exit, never cleared)
    [MAIN_THREAD]  the main thread's pthread id: only its launches stop on SIGINT_BIT
    [IN_FLIGHT]    launches inside a ``_py``/``_ptr`` entry (own cache line)
    [PREVIOUS]     the SIGINT handler ours chains to (Python's)

A launch stores the stop bits it obeys in its counter array's slot ``STOP_MASK`` (SIGINT_BIT
| EXIT_BIT on the main thread, EXIT_BIT elsewhere); blocks poll ``STOP & mask`` between claims
of blocks, in every ``while`` loop's header and in cross-core waits, and leave early when it
is set: the entry then returns status 5 (interrupted: KeyboardInterrupt) or 6 (exiting).
The poll is one load of a line that is only written by a signal or at exit.
"""
from __future__ import annotations

import threading
import time

from llvmlite import ir

from .lowering_utils import I64, PTR, i64

CONTROL_SYMBOL = "pypto_control"
STOP, MAIN_THREAD, IN_FLIGHT, PREVIOUS = 0, 1, 8, 16
CONTROL_SLOTS = 24
SIGINT_BIT, EXIT_BIT = 1, 2
STOP_MASK = 0                   # counter-array slot (unused by cross-core sync)
INTERRUPTED, EXITING = 5, 6     # entry statuses


def control_block(mod: ir.Module):
    """The control block as an external global of ``mod``."""
    g = mod.globals.get(CONTROL_SYMBOL)
    if g is None:
        g = ir.GlobalVariable(mod, ir.ArrayType(I64, CONTROL_SLOTS), CONTROL_SYMBOL)
        g.align = 64
    return g


def control_slot(b: ir.IRBuilder, k: int):
    return b.gep(control_block(b.module), [i64(0), i64(k)])


def stop_requested(b: ir.IRBuilder, counter):
    """i1: has this launch been asked to stop? (A call to a small inlined function: one
    relaxed load while nothing is asked.)"""
    mod = b.module
    fn = mod.globals.get("pypto_stop_requested")
    if fn is None:
        fn = ir.Function(mod, ir.FunctionType(ir.IntType(1), [PTR]),
                         name="pypto_stop_requested")
        fn.linkage = "internal"
        fn.attributes.add("alwaysinline")
        fb = ir.IRBuilder(fn.append_basic_block("entry"))
        bits = fb.load_atomic(control_slot(fb, STOP), "monotonic", 8, typ=I64)
        asked, quiet = fn.append_basic_block("asked"), fn.append_basic_block("quiet")
        fb.cbranch(fb.icmp_unsigned("!=", bits, i64(0)), asked, quiet)
        fb.position_at_end(quiet)
        fb.ret(ir.Constant(ir.IntType(1), 0))
        fb.position_at_end(asked)
        mask = fb.load(fb.gep(fn.args[0], [i64(STOP_MASK)], source_etype=I64), typ=I64)
        fb.ret(fb.icmp_unsigned("!=", fb.and_(bits, mask), i64(0)))
    return b.call(fn, [counter])


def obeyed_bits(b: ir.IRBuilder):
    """The stop bits a launch started on this thread obeys; on the main thread a stale
    SIGINT_BIT (a Ctrl-C Python has already seen) is cleared first."""
    mod = b.module
    self_fn = mod.globals.get("pthread_self") or ir.Function(
        mod, ir.FunctionType(I64, []), name="pthread_self")
    main = b.load(control_slot(b, MAIN_THREAD), typ=I64)
    is_main = b.icmp_unsigned("==", b.call(self_fn, []), main)
    with b.if_then(is_main):
        stop = control_slot(b, STOP)
        with b.if_then(b.icmp_unsigned("!=", b.and_(b.load_atomic(stop, "monotonic", 8, typ=I64),
                                                    i64(SIGINT_BIT)), i64(0))):
            b.atomic_rmw("and", stop, i64(~SIGINT_BIT), "monotonic")
    return b.select(is_main, i64(SIGINT_BIT | EXIT_BIT), i64(EXIT_BIT))


def stop_status(b: ir.IRBuilder, mask, status):
    """``status``, unless the launch was asked to stop: INTERRUPTED or EXITING."""
    bits = b.and_(b.load_atomic(control_slot(b, STOP), "monotonic", 8, typ=I64), mask)
    i32 = ir.IntType(32)
    stopped = b.select(b.icmp_unsigned("!=", b.and_(bits, i64(EXIT_BIT)), i64(0)),
                       ir.Constant(i32, EXITING), ir.Constant(i32, INTERRUPTED))
    return b.select(b.icmp_unsigned("!=", bits, i64(0)), stopped, status)


def exiting(kernel_name: str) -> RuntimeError:
    """A launch refused (or stopped early) because the interpreter is exiting. A thread other
    than the main one waits here for the process to end, as Python parks daemon threads at
    exit; the main thread (an exit handler's launch) gets the error."""
    if threading.current_thread() is not threading.main_thread():
        while True:
            time.sleep(3600)
    return RuntimeError(f"{kernel_name}: not launched, the interpreter is exiting (a launch "
                        "from an exit handler that runs after PyPTO's)")


def stop_error(status: int, kernel_name: str) -> BaseException | None:
    """The exception a launch's INTERRUPTED or EXITING status stands for, else None."""
    if status == INTERRUPTED:
        return KeyboardInterrupt()
    if status == EXITING:
        return exiting(kernel_name)
    return None
