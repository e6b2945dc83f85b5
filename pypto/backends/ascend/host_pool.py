"""The native worker pool that runs a launch's blocks on host threads.

Threads are started once (pthread_create from compiled code) and handed work through a shared
state block: the launching thread publishes a job and bumps a generation counter; workers spin
briefly on it (waking a sleeping thread costs ~45 us on this kind of VM) and then sleep on a
futex. Every participant calls the kernel's launch entry with its own scratch area (its AI
Core's buffers) and its participant number; the entry runs that participant's share of the
grid and then helps with the others' (see ``entry.launch_function``). The whole launch
happens inside one ctypes call, so the GIL is released throughout and a launch costs a few
microseconds instead of a Python thread-pool round trip.

The pool is written in LLVM IR and compiled with the same llvmlite driver as kernels.
"""
from __future__ import annotations

import ctypes
import os
import platform
import signal
import threading
import time

import numpy as np

import llvmlite.binding as llvm

from .control import (CONTROL_SLOTS, CONTROL_SYMBOL, EXIT_BIT, IN_FLIGHT, MAIN_THREAD,
                      PREVIOUS, SIGINT_BIT, STOP)
from .entry import POOL_LAUNCH_SYMBOL
from .lowering.crosscore import SYS_FUTEX
from .llvm_driver import LoadedObject, compile_to_object, host_identity, keep_all_loaded

# State block layout: int64 slots, hot fields on separate cache lines.
GEN, FUTEX, FN, ARGS, GRID, COUNTER, SCRATCH, PARTICIPANTS, DONE, JOINED, SHUTDOWN, SPIN, \
    WORKER_CPUS = (0, 8, 16, 17, 18, 19, 20, 21, 24, 25, 32, 33, 34)
# JOINED = the job's generation (31 bits) << 33 | closed << 32 | helpers that joined
CLOSED = 1 << 32        # the launch no longer takes helpers
TAG_SHIFT, TAG_MASK = 33, (1 << 31) - 1
STATE_SLOTS = 40
MAX_THREADS = 256


_IR = r"""
declare i32 @pthread_create(ptr, ptr, ptr, ptr)
declare i64 @syscall(i64, ...)
declare i32 @sched_yield()

define private ptr @slot(ptr %state, i64 %i) alwaysinline {
  %p = getelementptr i64, ptr %state, i64 %i
  ret ptr %p
}

define private void @pause() alwaysinline {
  PAUSE
  ret void
}

; a spin step: pause, and every 16th step let another thread on this core run (a waiting
; thread sharing a core with the one it waits for would otherwise burn its whole time slice)
define private void @relax(i64 %step) {
entry:
  call void @pause()
  %low = and i64 %step, 15
  %yield = icmp eq i64 %low, 15
  br i1 %yield, label %give, label %done
give:
  %r = call i32 @sched_yield()
  br label %done
done:
  ret void
}

define private void @futex_wait(ptr %state, i32 %seen) {
  %w = call ptr @slot(ptr %state, i64 FUTEX_SLOT)
  FUTEX_WAIT
  ret void
}

define private void @futex_wake(ptr %state) {
  %w = call ptr @slot(ptr %state, i64 FUTEX_SLOT)
  FUTEX_WAKE
  ret void
}

; run the published job as participant %me (of PARTICIPANTS + 1) with the given scratch area
define private void @run_job(ptr %state, ptr %scratch, i64 %me) {
  %fnp = call ptr @slot(ptr %state, i64 FN_SLOT)
  %fn = load atomic ptr, ptr %fnp acquire, align 8
  %ap = call ptr @slot(ptr %state, i64 ARGS_SLOT)
  %args = load ptr, ptr %ap
  %gp = call ptr @slot(ptr %state, i64 GRID_SLOT)
  %grid = load ptr, ptr %gp
  %cp = call ptr @slot(ptr %state, i64 COUNTER_SLOT)
  %counter = load ptr, ptr %cp
  %pp = call ptr @slot(ptr %state, i64 PARTICIPANTS_SLOT)
  %helpers = load atomic i64, ptr %pp acquire, align 8
  %parts = add i64 %helpers, 1
  call void %fn(ptr %args, ptr %grid, ptr %scratch, ptr %counter, i64 %me, i64 %parts)
  ret void
}

define private ptr @worker(ptr %arg) {
entry:
  %state = load ptr, ptr %arg
  %idp = getelementptr i64, ptr %arg, i64 1
  %me = load i64, ptr %idp
  %genp = call ptr @slot(ptr %state, i64 GEN_SLOT)
  %spinp = call ptr @slot(ptr %state, i64 SPIN_SLOT)
  br label %wait
wait:
  ; jobs are numbered from 1: a worker that starts late still runs the first one
  %seen = phi i64 [0, %entry], [%gen, %work], [%gen, %join], [%gen, %run], [%seen, %spin],
                 [%seen, %sleep]
  %spins = phi i64 [0, %entry], [0, %work], [0, %join], [0, %run], [%spins1, %spin],
                   [%spins, %sleep]
  %downp = call ptr @slot(ptr %state, i64 SHUTDOWN_SLOT)
  %down = load atomic i64, ptr %downp acquire, align 8
  %stop = icmp ne i64 %down, 0
  br i1 %stop, label %exit, label %check
check:
  %gen = load atomic i64, ptr %genp acquire, align 8
  %new = icmp ne i64 %gen, %seen
  br i1 %new, label %work, label %idle
idle:
  %limit = load i64, ptr %spinp
  %tired = icmp sgt i64 %spins, %limit
  br i1 %tired, label %sleep, label %spin
spin:
  call void @relax(i64 %spins)
  %spins1 = add i64 %spins, 1
  br label %wait
sleep:
  %seen32 = trunc i64 %seen to i32
  call void @futex_wait(ptr %state, i32 %seen32)
  br label %wait
work:
  %pp = call ptr @slot(ptr %state, i64 PARTICIPANTS_SLOT)
  %n = load atomic i64, ptr %pp acquire, align 8
  %wanted = icmp sle i64 %me, %n
  br i1 %wanted, label %join, label %wait
join:
  ; a launch that has run out of blocks closes itself to helpers and waits only for those
  ; that joined before: a worker descheduled by the host never holds a launch up. A worker
  ; joins only the job it saw published (JOINED carries the generation), so one that comes
  ; late never joins the next job while its fields are being written
  %jp = call ptr @slot(ptr %state, i64 JOINED_SLOT)
  %was = load atomic i64, ptr %jp acquire, align 8
  %tag = lshr i64 %was, TAG_SHIFT
  %want = and i64 %gen, TAG_MASK
  %same = icmp eq i64 %tag, %want
  %shut = and i64 %was, CLOSED_BIT
  %open = icmp eq i64 %shut, 0
  %joinable = and i1 %same, %open
  br i1 %joinable, label %enter, label %wait
enter:
  %one_more = add i64 %was, 1
  %swap = cmpxchg ptr %jp, i64 %was, i64 %one_more acq_rel acquire
  %entered = extractvalue { i64, i1 } %swap, 1
  br i1 %entered, label %run, label %join
run:
  %sp = call ptr @slot(ptr %state, i64 SCRATCH_SLOT)
  %table = load ptr, ptr %sp
  %mine = getelementptr ptr, ptr %table, i64 %me
  %scratch = load ptr, ptr %mine
  call void @run_job(ptr %state, ptr %scratch, i64 %me)
  %dp = call ptr @slot(ptr %state, i64 DONE_SLOT)
  %old = atomicrmw add ptr %dp, i64 1 release
  br label %wait
exit:
  ret ptr null
}

; start workers 1..%n; %args holds (state, index) pairs, one per worker
define i32 @pool_start(ptr %state, ptr %handles, ptr %args, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [1, %entry], [%i1, %body]
  %more = icmp sle i64 %i, %n
  br i1 %more, label %body, label %done
body:
  %h = getelementptr i64, ptr %handles, i64 %i
  %a = getelementptr [2 x i64], ptr %args, i64 %i
  %rc = call i32 @pthread_create(ptr %h, ptr null, ptr @worker, ptr %a)
  %i1 = add i64 %i, 1
  br label %loop
done:
  ret i32 0
}

; publish a job for %helpers workers, run it here too (in %own scratch), wait for them
define void @pool_launch(ptr %state, ptr %fn, ptr %args, ptr %grid, ptr %counter, i64 %helpers,
                         ptr %own) {
entry:
  %direct = icmp eq i64 %helpers, 0
  br i1 %direct, label %alone, label %publish
alone:
  call void %fn(ptr %args, ptr %grid, ptr %own, ptr %counter, i64 0, i64 1)
  ret void
publish:
  %ap = call ptr @slot(ptr %state, i64 ARGS_SLOT)
  store ptr %args, ptr %ap
  %gp = call ptr @slot(ptr %state, i64 GRID_SLOT)
  store ptr %grid, ptr %gp
  %cp = call ptr @slot(ptr %state, i64 COUNTER_SLOT)
  store ptr %counter, ptr %cp
  %dp = call ptr @slot(ptr %state, i64 DONE_SLOT)
  store atomic i64 0, ptr %dp release, align 8
  %pp = call ptr @slot(ptr %state, i64 PARTICIPANTS_SLOT)
  store atomic i64 %helpers, ptr %pp release, align 8
  %fnp = call ptr @slot(ptr %state, i64 FN_SLOT)
  store atomic ptr %fn, ptr %fnp release, align 8
  ; the job is complete: open it to helpers under its generation, then announce it (only
  ; launches write the generation, one at a time under the pool's lock)
  %genp = call ptr @slot(ptr %state, i64 GEN_SLOT)
  %current = load i64, ptr %genp, align 8
  %next = add i64 %current, 1
  %next_tag = and i64 %next, TAG_MASK
  %opened = shl i64 %next_tag, TAG_SHIFT
  %jp = call ptr @slot(ptr %state, i64 JOINED_SLOT)
  store atomic i64 %opened, ptr %jp release, align 8
  store atomic i64 %next, ptr %genp release, align 8
  %w = call ptr @slot(ptr %state, i64 FUTEX_SLOT)
  %g32 = trunc i64 %next to i32
  store atomic i32 %g32, ptr %w release, align 4
  call void @futex_wake(ptr %state)
  call void @pool_keep_off_workers(ptr %state)
  %parts = add i64 %helpers, 1
  call void %fn(ptr %args, ptr %grid, ptr %own, ptr %counter, i64 0, i64 %parts)
  %closing = atomicrmw or ptr %jp, i64 CLOSED_BIT acq_rel
  %joined = and i64 %closing, 4294967295
  br label %wait
wait:
  %k = phi i64 [0, %publish], [%k1, %spin]
  %d = load atomic i64, ptr %dp acquire, align 8
  %all = icmp sge i64 %d, %joined
  br i1 %all, label %out, label %spin
spin:
  call void @relax(i64 %k)
  %k1 = add i64 %k, 1
  br label %wait
out:
  ret void
}

KEEP_OFF_WORKERS

CONTROL_IR

declare i32 @pthread_join(i64, ptr)

; wait for workers 1..%n to leave (after pool_stop)
define void @pool_join(ptr %handles, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [1, %entry], [%i1, %body]
  %more = icmp sle i64 %i, %n
  br i1 %more, label %body, label %done
body:
  %hp = getelementptr i64, ptr %handles, i64 %i
  %h = load i64, ptr %hp
  %rc = call i32 @pthread_join(i64 %h, ptr null)
  %i1 = add i64 %i, 1
  br label %loop
done:
  ret void
}

define void @pool_stop(ptr %state) {
  %downp = call ptr @slot(ptr %state, i64 SHUTDOWN_SLOT)
  store atomic i64 1, ptr %downp release, align 8
  %w = call ptr @slot(ptr %state, i64 FUTEX_SLOT)
  %old = atomicrmw add ptr %w, i32 1 acq_rel
  call void @futex_wake(ptr %state)
  ret void
}
"""


# Workers are pinned, one per CPU (HostPool._pin_workers). Left alone, Linux sometimes put the
# launching thread on a worker's CPU (a futex wake-up places the woken thread near the waker)
# and kept both there for hundreds of milliseconds: a 2-thread launch then ran at 1-thread speed
# (softmax 1024x1024: 260 instead of 140 us, in about half of the rounds of a benchmark). So a
# launch first checks the CPU it runs on (sched_getcpu: no system call) and, when a worker is
# pinned there, moves itself off: its affinity without the workers' CPUs, then its own mask
# again (the thread stays where it was moved).
_KEEP_OFF_WORKERS = r"""
declare i32 @sched_getcpu()
declare i32 @sched_getaffinity(i32, i64, ptr)
declare i32 @sched_setaffinity(i32, i64, ptr)

define void @pool_keep_off_workers(ptr %state) {
entry:
  %mine = alloca [16 x i64], align 8
  %elsewhere = alloca [16 x i64], align 8
  %mp = call ptr @slot(ptr %state, i64 WORKER_CPUS_SLOT)
  %workers = load i64, ptr %mp
  %cpu32 = call i32 @sched_getcpu()
  %cpu = zext i32 %cpu32 to i64
  %low = icmp ult i64 %cpu, 64
  %bit = shl i64 1, %cpu
  %at = and i64 %workers, %bit
  %shared = icmp ne i64 %at, 0
  %move = and i1 %low, %shared
  br i1 %move, label %moving, label %done
moving:
  %got = call i32 @sched_getaffinity(i32 0, i64 128, ptr %mine)
  %ok = icmp eq i32 %got, 0
  br i1 %ok, label %known, label %done
known:
  call void @llvm.memcpy.p0.p0.i64(ptr %elsewhere, ptr %mine, i64 128, i1 false)
  %w0 = load i64, ptr %mine
  %others = xor i64 %workers, -1
  %w0new = and i64 %w0, %others
  store i64 %w0new, ptr %elsewhere
  %r1 = call i32 @sched_setaffinity(i32 0, i64 128, ptr %elsewhere)
  %r2 = call i32 @sched_setaffinity(i32 0, i64 128, ptr %mine)
  br label %done
done:
  ret void
}

declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
"""

_STAY = r"""
define void @pool_keep_off_workers(ptr %state) {
  ret void
}
"""


# The control block (control.py) and who writes it: the chained SIGINT handler and the exit.
_CONTROL = f"""
@{CONTROL_SYMBOL} = global [{CONTROL_SLOTS} x i64] zeroinitializer, align 64

define void @pool_on_sigint(i32 %sig) {{
entry:
  %stop = getelementptr [{CONTROL_SLOTS} x i64], ptr @{CONTROL_SYMBOL}, i64 0, i64 {STOP}
  %was = atomicrmw or ptr %stop, i64 {SIGINT_BIT} seq_cst
  %pp = getelementptr [{CONTROL_SLOTS} x i64], ptr @{CONTROL_SYMBOL}, i64 0, i64 {PREVIOUS}
  %prev = load atomic i64, ptr %pp acquire, align 8
  %real = icmp ugt i64 %prev, 1
  br i1 %real, label %chain, label %done
chain:
  %f = inttoptr i64 %prev to ptr
  call void %f(i32 %sig)
  br label %done
done:
  ret void
}}

; set EXIT_BIT; returns the launches in flight
define i64 @pool_begin_exit() {{
  %stop = getelementptr [{CONTROL_SLOTS} x i64], ptr @{CONTROL_SYMBOL}, i64 0, i64 {STOP}
  %was = atomicrmw or ptr %stop, i64 {EXIT_BIT} seq_cst
  %fp = getelementptr [{CONTROL_SLOTS} x i64], ptr @{CONTROL_SYMBOL}, i64 0, i64 {IN_FLIGHT}
  %n = load atomic i64, ptr %fp seq_cst, align 8
  ret i64 %n
}}
"""


def _pool_ir() -> str:
    machine = platform.machine()
    pause = "call void @llvm.x86.sse2.pause()" if machine in ("x86_64", "AMD64") else \
        "call void asm sideeffect \"yield\", \"\"()"
    if SYS_FUTEX is not None:
        # FUTEX_WAIT_PRIVATE = 128, FUTEX_WAKE_PRIVATE = 129; a 100 ms timeout bounds any lost
        # wake-up (workers then re-check the generation, and go back to sleep if idle)
        wait = ("%ts = alloca [2 x i64]\n  store [2 x i64] [i64 0, i64 100000000], ptr %ts\n"
                f"  %r = call i64 (i64, ...) @syscall(i64 {SYS_FUTEX}, ptr %w, i64 128, "
                "i32 %seen, ptr %ts, ptr null, i64 0)")
        wake = (f"%r = call i64 (i64, ...) @syscall(i64 {SYS_FUTEX}, ptr %w, i64 129, "
                "i32 2147483647, ptr null, ptr null, i64 0)")
    else:
        wait = "%r = call i32 @sched_yield()"
        wake = "%r = call i32 @sched_yield()"
    keep_off = _KEEP_OFF_WORKERS if platform.system() == "Linux" else _STAY
    text = _IR.replace("KEEP_OFF_WORKERS", keep_off).replace("CONTROL_IR", _CONTROL) \
        .replace("PAUSE", pause) \
        .replace("FUTEX_WAIT", wait).replace("FUTEX_WAKE", wake)
    for name, value in (("GEN", GEN), ("FUTEX", FUTEX), ("FN", FN), ("ARGS", ARGS),
                        ("GRID", GRID), ("COUNTER", COUNTER), ("SCRATCH", SCRATCH),
                        ("PARTICIPANTS", PARTICIPANTS), ("DONE", DONE),
                        ("SHUTDOWN", SHUTDOWN), ("SPIN", SPIN), ("WORKER_CPUS", WORKER_CPUS),
                        ("JOINED", JOINED)):
        text = text.replace(f"{name}_SLOT", str(value))
    text = text.replace("CLOSED_BIT", str(CLOSED)).replace("TAG_SHIFT", str(TAG_SHIFT)) \
        .replace("TAG_MASK", str(TAG_MASK))
    if "llvm.x86.sse2.pause" in text:
        text = "declare void @llvm.x86.sse2.pause()\n" + text
    return text


class HostPool:
    """``threads`` simulated AI Cores: the calling thread plus ``threads - 1`` workers."""

    def __init__(self, threads: int, scratch_bytes: int, spin: int = 20000):
        if not 1 <= threads <= MAX_THREADS:
            raise ValueError(f"the host pool takes 1 to {MAX_THREADS} threads, got {threads}")
        self.threads = threads
        self.lock = threading.Lock()
        self._object = _pool_code()
        self.state = np.zeros(STATE_SLOTS, dtype=np.int64)
        self.state[SPIN] = spin
        self._scratch = [np.zeros(scratch_bytes + 64, dtype=np.uint8) for _ in range(threads)]
        self._table = np.array([_aligned(s) for s in self._scratch], dtype=np.int64)
        self.state[SCRATCH] = self._table.ctypes.data
        self._handles = np.zeros(threads + 1, dtype=np.int64)
        self._thread_args = np.zeros((threads + 1, 2), dtype=np.int64)
        self._thread_args[:, 0] = self.state.ctypes.data
        self._thread_args[:, 1] = np.arange(threads + 1)
        start = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_void_p, ctypes.c_int64)(self._object.address("pool_start"))
        start(self.state.ctypes.data, self._handles.ctypes.data, self._thread_args.ctypes.data,
              threads - 1)
        self._stop = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(self._object.address("pool_stop"))
        self._join = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(
            self._object.address("pool_join"))
        self.state_addr = self.state.ctypes.data
        self.helpers = threads - 1
        self.state[WORKER_CPUS] = self._pin_workers()

    def _pin_workers(self) -> int:
        """Pin worker k to the k-th CPU this process may use (leaving the first to the
        launching threads) when there are enough CPUs; returns the pinned CPUs as a bit mask
        (those below 64), which launches keep off (see _KEEP_OFF_WORKERS)."""
        if platform.system() != "Linux" or not hasattr(os, "sched_getaffinity"):
            return 0
        cpus = sorted(os.sched_getaffinity(0))
        if self.threads < 2 or self.threads > len(cpus):
            return 0
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            setaffinity = libc.pthread_setaffinity_np
        except (OSError, AttributeError):
            return 0
        setaffinity.argtypes = [ctypes.c_ulong, ctypes.c_size_t, ctypes.c_void_p]
        mask = 0
        for k in range(1, self.threads):
            cpu = cpus[k]
            cpu_set = np.zeros(16, dtype=np.uint64)
            cpu_set[cpu // 64] = np.uint64(1) << np.uint64(cpu % 64)
            if setaffinity(int(self._handles[k]), cpu_set.nbytes, cpu_set.ctypes.data) == 0 \
                    and cpu < 64:
                mask |= 1 << cpu
        return mask if mask < 1 << 63 else 0

    def stop(self) -> None:
        """Stop and join the workers; waits for a launch in progress to finish first. Later
        launches through this pool run on their calling thread alone."""
        with self.lock:
            if self.helpers:
                self.helpers = 0
                self._stop(self.state.ctypes.data)
                self._join(self._handles.ctypes.data, self.threads - 1)


def _cached_object(text: str) -> bytes:
    """The pool's object code from the kernel cache (a fresh process must not pay ~20 ms to
    compile it before its first launch)."""
    from ... import cache
    key = cache.digest(("host-pool", text, host_identity()))
    files = cache.fetch_or_build(key, ("pool.o",), lambda: {"pool.o": compile_to_object(
        text, "O3")[0]}, record=False, root=os.path.join(cache.default_dir(), "host"))
    return files["pool.o"]


_code: dict = {}
_code_lock = threading.Lock()


def _pool_code() -> LoadedObject:
    """The pool's code, compiled and loaded once per process and never freed: kernels link to
    its launch routine by address when they load, and pools share it (it keeps no state)."""
    with _code_lock:
        code = _code.get("object")
        if code is None:
            code = LoadedObject(_cached_object(_pool_ir()))
            llvm.add_symbol(POOL_LAUNCH_SYMBOL, code.address("pool_launch"))
            address = code.global_address(CONTROL_SYMBOL)
            llvm.add_symbol(CONTROL_SYMBOL, address)
            # never freed, even at exit: a SIGINT or a late launch may still run it
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(code))
            _code["control"] = np.ctypeslib.as_array(
                (ctypes.c_int64 * CONTROL_SLOTS).from_address(address))
            _code["control"][MAIN_THREAD] = threading.main_thread().ident
            _code["object"] = code
        return code


def stop_control() -> tuple[int, int]:
    """(address of the control block, the stop bits a launch from this thread obeys): what
    code that is not a PyPTO kernel (the pto-isa engine's) polls to stop like one."""
    _pool_code()
    control = _code["control"]
    main = threading.get_ident() == int(control[MAIN_THREAD])
    return control.ctypes.data, (SIGINT_BIT | EXIT_BIT) if main else EXIT_BIT


def start_interruptible() -> int:
    """The stop bits a run of kernel ranges started on this thread obeys (``stop_control``);
    on the main thread a stale SIGINT_BIT (a Ctrl-C Python has already seen) is cleared
    first, as a launch clears it (control.obeyed_bits)."""
    _, mask = stop_control()
    if mask & SIGINT_BIT:
        control = _code["control"]
        control[STOP] = int(control[STOP]) & ~SIGINT_BIT
    return mask


def note_main_thread() -> None:
    """This thread is the main thread now (a forked child's): its launches stop on Ctrl-C."""
    control = _code.get("control")
    if control is not None:
        control[MAIN_THREAD] = threading.get_ident()


class _Sigaction(ctypes.Structure):
    """glibc's struct sigaction on Linux (x86_64 and aarch64)."""
    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_uint64 * 16),
                ("flags", ctypes.c_int), ("restorer", ctypes.c_void_p)]


_SA_SIGINFO = 4


def chain_sigint() -> None:
    """Let Ctrl-C stop a launch: while Python's own handler is the C-level SIGINT handler and
    the Python-level one is ``signal.default_int_handler``, put ours in front of it (it sets
    SIGINT_BIT, then calls Python's). Launches poll the bit (control.py); Python still sees
    the signal and raises KeyboardInterrupt. A handler installed later with ``signal.signal``
    replaces ours: launches then run to their end, as before."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"):
        return
    try:
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return
        libc = ctypes.CDLL(None, use_errno=True)
        sigaction = libc.sigaction
    except (OSError, AttributeError, ValueError):
        return
    sigaction.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    ours = _pool_code().address("pool_on_sigint")
    old = _Sigaction()
    if sigaction(signal.SIGINT, None, ctypes.byref(old)) != 0:
        return
    current = old.handler or 0
    if current == ours or current <= 1 or old.flags & _SA_SIGINFO:
        return
    _code["control"][PREVIOUS] = current
    new = _Sigaction()
    ctypes.pointer(new)[0] = old
    new.handler = ours
    sigaction(signal.SIGINT, ctypes.byref(new), None)


def begin_exit(wait_seconds: float = 10.0) -> None:
    """At exit: every launch in flight stops early (EXIT_BIT) and later ones are refused;
    wait (at most ``wait_seconds``) until no launch is inside a kernel's entry, and keep
    every loaded kernel's code, so that nothing native runs on memory the interpreter frees
    as it finalises."""
    code = _code.get("object")
    if code is None:
        return
    in_flight = ctypes.CFUNCTYPE(ctypes.c_int64)(code.address("pool_begin_exit"))()
    deadline = time.monotonic() + wait_seconds
    while in_flight > 0 and time.monotonic() < deadline:
        time.sleep(0.001)
        in_flight = int(_code["control"][IN_FLIGHT])
    keep_all_loaded()


def _aligned(buf: np.ndarray) -> int:
    addr = buf.ctypes.data
    return addr + (-addr % 64)
