"""``Module.run`` under MPMD on the host: the Execution Graph's tasks handed to host threads as
their inputs complete, several nodes in flight, no join between nodes.

Each thread is a simulated core with its own scratch (``runtime.own_scratch``). A task of a
tile kernel is a call of the kernel's ``<name>_range`` entry (``codegen._range_function``) for
its block (consecutive ready blocks of one step are taken together, up to a share of what the
step has left, to keep the per-call cost small); the call releases the GIL, so the threads run
blocks in parallel. An opaque task (an Ascend C call, a kernel whose blocks sync) runs as its
ordinary launch. The threads are Python threads around native calls, not the host pool's
native workers: the pool runs one SPMD launch at a time, and the dependency bookkeeping here
is a few microseconds per task.

The run is bitwise the in-order run's: every block computes exactly what it computes in an
SPMD launch, from the same inputs, since a task starts only after every task writing what it
reads has ended (``execution.py``). ``run`` returns False without running anything when an
array does not match the layout the kernels were compiled for (the in-order path then
specialises as usual).
"""
from __future__ import annotations

import heapq
import queue
import threading

from ..backends.ascend.control import stop_error
from ..backends.ascend.host_pool import start_interruptible
from ..runtime import pool as runtime
from ..layout import as_array
from .ascend_c_node import AscendCStep

_PAD = (1, 1, 1)


class HostChoice:
    """``parallel_strategy="auto"`` on the host: which is faster, the native pool's in-order
    SPMD launches or these tasks, depends on the tiles (Python hands out every task: tasks of
    a few microseconds lose, large ones win; docs/graph_mpmd.md). So the module's first
    ``2 * TRIALS`` auto runs alternate the two, timed, and the smaller median is kept. Either
    way the results are bitwise the same."""
    TRIALS = 3

    def __init__(self):
        self.times = {"data_parallel": [], "mpmd": []}
        self.choice = None

    def next(self) -> str:
        if self.choice is not None:
            return self.choice
        return min(self.times, key=lambda s: len(self.times[s]))

    def record(self, strategy: str, seconds: float) -> None:
        if self.choice is not None:
            return
        self.times[strategy].append(seconds)
        if all(len(v) >= self.TRIALS for v in self.times.values()):
            self.choice = min(self.times, key=lambda s: sorted(self.times[s])[self.TRIALS // 2])


class _Run:
    def __init__(self, module, calls: dict, threads: int):
        self.eg = module.execution_graph
        self.calls = calls                  # step -> (entry args after the range) | None
        self.threads = threads
        self.cond = threading.Condition()
        self.waiting = [len(t.deps) for t in self.eg.tasks]
        self.left = {}                      # step -> tasks not yet started
        for t in self.eg.tasks:
            self.left[t.step] = self.left.get(t.step, 0) + 1
        # ready tasks, later steps first: a consumer tile runs as soon as it can, so tiles
        # stream through the graph while the producer's other tiles wait (ties: block order)
        steps = {s: k for k, s in enumerate(dict.fromkeys(t.step for t in self.eg.tasks))}
        self.key = [(-steps[t.step], t.index) for t in self.eg.tasks]
        self.ready = [self.key[t.index] for t in self.eg.tasks if not t.deps]
        heapq.heapify(self.ready)
        self.done = 0
        self.error = None
        # every task obeys the stop bits of the thread that started the run: Ctrl-C stops the
        # helpers' tasks too when the main thread runs the graph (control.py)
        self.stop_mask = start_interruptible()
        self.log: list = []                 # ("start" | "end", task index), in order

    def _take(self) -> list:
        """Under the lock: the next ready task and the consecutive blocks of its step after
        it that are ready too (at most a thread's share of the step's remaining tasks)."""
        _, first = heapq.heappop(self.ready)
        batch = [first]
        task = self.eg.tasks[first]
        cap = max(1, self.left[task.step] // (2 * self.threads))
        while len(batch) < cap and self.ready and self.ready[0][1] == batch[-1] + 1 and \
                self.eg.tasks[self.ready[0][1]].step is task.step and task.tiles is not None:
            batch.append(heapq.heappop(self.ready)[1])
        self.left[task.step] -= len(batch)
        return batch

    def worker(self) -> None:
        tasks = self.eg.tasks
        while True:
            with self.cond:
                while not self.ready and self.done < len(tasks) and self.error is None:
                    self.cond.wait()
                if self.error is not None or self.done == len(tasks):
                    return
                batch = self._take()
                self.log += [("start", i) for i in batch]
            try:
                self._execute([tasks[i] for i in batch])
            except BaseException as e:  # noqa: BLE001 - handed to the calling thread
                with self.cond:
                    self.error = e
                    self.cond.notify_all()
                return
            with self.cond:
                self.log += [("end", i) for i in batch]
                self.done += len(batch)
                for i in batch:
                    for c in self.eg.consumers[i]:
                        self.waiting[c] -= 1
                        if self.waiting[c] == 0:
                            heapq.heappush(self.ready, self.key[c])
                self.cond.notify_all()

    def _execute(self, batch: list) -> None:
        step = batch[0].step
        call = self.calls[step]
        if call[0] == "launch":
            call[1]()
            return
        _, entry, grid, params = call
        lo, hi = batch[0].block, batch[-1].block + 1
        status = entry(runtime.own_scratch(), grid[0], grid[1], grid[2], lo, hi,
                       self.stop_mask, *params)
        stopped = stop_error(status, step.name)
        if stopped is not None:
            raise stopped
        if status:
            raise RuntimeError(f"{step.name}: blocks {lo}..{hi - 1} returned status {status}")


def run(module, step_args: dict, threads: int) -> list | None:
    """Run every step of ``module`` on ``step_args`` ({step: (inputs, outputs)} of arrays or
    pypto.Tensors) as tasks on ``threads`` threads; the order tasks started and ended in, or
    None (nothing run) if a kernel's arrays do not match its compiled layout."""
    calls = {}
    keep = []                               # the arrays whose addresses the calls hold
    for step in module.steps:
        ins, outs = step_args[step]
        call = _call(step, ins, outs, keep)
        if call is None:
            return None
        calls[step] = call
    r = _Run(module, calls, threads)
    joined = _helpers(threads - 1)
    for q in joined:
        q.put(r)
    r.worker()
    for q in joined:
        q.join()
    if r.error is not None:
        raise r.error
    return r.log


_queues: list = []                    # one per helper thread: the runs it should join
_start_lock = threading.Lock()


def _helpers(n: int) -> list:
    """``n`` persistent helper threads (started once, so each keeps its scratch: a fresh
    thread would allocate and fault in a core's buffers on every run)."""
    with _start_lock:
        while len(_queues) < n:
            q = queue.Queue()
            threading.Thread(target=_serve, args=(q,), daemon=True,
                             name=f"pypto-mpmd-{len(_queues)}").start()
            _queues.append(q)
    return _queues[:n]


def _serve(q) -> None:
    while True:
        r = q.get()
        try:
            r.worker()
        finally:
            q.task_done()


def _call(step, ins, outs, keep):
    if isinstance(step, AscendCStep):
        return ("launch", lambda: step.run(ins, outs))
    args = step.arguments(ins, outs)
    entry = step.compiled.range_entry
    if entry is None:                       # blocks that sync: the ordinary launch
        return ("launch", lambda: step.jit[step.grid](*args))
    specs = step.__dict__.get("_standins")
    if specs is None:
        specs = step._standins = step.standins()
    params = []
    for (_, kind, _), value, spec in zip(step.compiled.runtime_params, args, specs):
        if kind == "tensor":
            arr = as_array(value)
            if arr is None or arr.shape != spec.shape or arr.dtype != spec.dtype or \
                    arr.strides != spec.strides:
                return None
            keep.append(arr)
            params.append(id(arr))
        else:
            params.append(value)
    grid = tuple(step.grid) + _PAD[len(step.grid):]
    return ("blocks", entry, grid, params)
