"""Running Tile IR in the reference interpreter: one grid block after another, with numpy.

Runtime values are numpy scalars (scalars), numpy arrays of the tile's dtype (tiles, never
mutated once made) and the caller's own arrays (tensors, written in place). Blocks that meet at
barriers or flags run as threads, all at once, like the chip's cores.
"""
from __future__ import annotations

import itertools
import threading

import numpy as np

from ...errors import InternalError
from ...compiler.ir import CROSS_BLOCK_OPS, Block, Function, Op, TensorType, Value, walk
from ...language import dtypes as dt
from .handlers import HANDLERS, TERMINATORS
from .numerics import dtype_of, to_type

# -- execution -------------------------------------------------------------------------------------

class DeadlockError(RuntimeError):
    """Blocks of a launch wait for each other forever (a barrier some block never reaches, a
    flag nobody signals)."""


class _Cooperation:
    """Cross-block synchronisation of one launch whose blocks run as threads."""

    TIMEOUT = 10.0

    def __init__(self, blocks: int):
        self._barrier = threading.Barrier(max(blocks, 1))    # Python 3.13 refuses 0 parties
        self._flags = [0] * 16
        self._cond = threading.Condition()
        self._aborted = False

    def barrier(self) -> None:
        try:
            self._barrier.wait(self.TIMEOUT)
        except threading.BrokenBarrierError:
            raise DeadlockError("pl.barrier(): not every block of the launch reached it") \
                from None

    def signal(self, flag: int, count: int) -> None:
        with self._cond:
            self._flags[flag] += count
            self._cond.notify_all()

    def wait(self, flag: int, count: int) -> None:
        with self._cond:
            ready = self._cond.wait_for(lambda: self._aborted or self._flags[flag] >= count,
                                        self.TIMEOUT)
            if not ready or self._aborted:
                raise DeadlockError(f"pl.wait({flag}, {count}): the flag was not signalled "
                                    f"{count} time(s)")
            self._flags[flag] -= count

    def abort(self) -> None:
        with self._cond:
            self._aborted = True
            self._cond.notify_all()
        self._barrier.abort()


class _Run:
    """One grid block in execution: the value of every SSA value seen so far, and its ids."""

    coop: _Cooperation | None = None
    watch = None            # a sanitizer.Watch: told of every load and store

    def __init__(self, pid: tuple, grid: tuple):
        self.pid = tuple(np.int64(p) for p in pid)
        self.grid = tuple(np.int64(g) for g in grid)
        self.env: dict[Value, object] = {}
        self.unfilled: dict[int, tuple] = {}    # sanitized: id -> (array, its tile.alloc)

    def read(self, v: Value):
        try:
            return self.env[v]
        except KeyError:
            raise InternalError(f"{v} is used before it is defined") from None

    def bind(self, v: Value, value, where: str) -> None:
        self.env[v] = to_type(value, v.type, where)

    def block(self, block: Block, args) -> list:
        """Run ``block`` with its arguments bound; returns its terminator's operand values."""
        if len(args) != len(block.args):
            raise InternalError(f"a block of {len(block.args)} arguments got {len(args)}")
        for v, a in zip(block.args, args):
            self.bind(v, a, "block argument")
        for op in block.ops:
            if op.name in TERMINATORS:
                return [self.read(v) for v in op.operands]
            self.execute(op)
        return []

    def execute(self, op: Op) -> None:
        handler = HANDLERS.get(op.name)
        if handler is None:
            raise InternalError(f"the interpreter has no rule for op '{op.name}'")
        ins = [self.read(v) for v in op.operands]
        if self.unfilled and op.name.startswith("tile."):
            self._check_filled(op, ins)
        outs = handler(self, op, ins)
        if not isinstance(outs, list):
            outs = [outs]
        if len(outs) != len(op.results):
            raise InternalError(f"{op.name} produced {len(outs)} values for "
                                f"{len(op.results)} results")
        for r, value in zip(op.results, outs):
            self.bind(r, value, op.name)

    def _check_filled(self, op: Op, ins: list) -> None:
        """Tell the sanitizer of each operand that is a pl.alloc_buffer no load filled (passing
        it on through scf results is not a read; a tile op is)."""
        for v, value in zip(op.operands, ins):
            entry = self.unfilled.get(id(value))
            if entry is not None and entry[0] is value:
                self.watch.unfilled_read(op, self.pid, v.hint or entry[1].results[0].hint,
                                         entry[1].loc)


def _argument(param: Value, args: dict):
    """The caller's value for ``param``: its array as is (stores write into it) or a number
    converted to the scalar's dtype."""
    if param.hint not in args:
        raise ValueError(f"no argument given for parameter '{param.hint}'")
    value = args[param.hint]
    if isinstance(param.type, TensorType):
        if not isinstance(value, np.ndarray):
            raise TypeError(f"parameter '{param.hint}' is a tensor; got {type(value).__name__}")
        rank = param.type.rank if param.type.layout == "ND" else value.ndim  # physical
        held = (dt.uint8, dt.int8) if param.type.layout == "INT4" else (param.type.dtype,)
        if value.ndim != rank or dtype_of(value) not in held:     # int4: its packed bytes
            raise TypeError(f"parameter '{param.hint}' is a {param.type}; got a {value.ndim}-D "
                            f"{value.dtype} array")
        return value
    return to_type(value, param.type, f"parameter '{param.hint}'")


def run_function(fn: Function, args: dict, grid: tuple[int, int, int], watch=None) -> None:
    """Run every block of the grid in order (pid0 fastest). args maps each param's `hint` (its
    name) to a numpy array (tensors; written in place by stores) or a Python int/float
    (scalars). ``watch``: a ``sanitizer.Watch`` told of every load and store."""
    grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
    values = [_argument(p, args) for p in fn.params]
    pids = [(p0, p1, p2) for p2, p1, p0 in itertools.product(*(range(g) for g in reversed(grid)))]

    def run_block(pid, coop=None):
        run = _Run(pid, grid)
        run.coop = coop
        run.watch = watch
        for p, v in zip(fn.params, values):
            run.env[p] = v
        with np.errstate(all="ignore"):
            run.block(fn.body, [])

    if not any(op.name in CROSS_BLOCK_OPS for op in walk(fn.body)):
        for pid in pids:
            run_block(pid)
        return
    _run_together(pids, run_block)


def _run_together(pids, run_block) -> None:
    """Blocks that meet at barriers or flags run as threads, all at once, like the chip's
    cores; the first failure is raised once every thread has stopped."""
    coop = _Cooperation(len(pids))
    errors: list[BaseException] = []

    def target(pid):
        try:
            run_block(pid, coop)
        except BaseException as e:  # noqa: BLE001 - re-raised on the calling thread
            errors.append(e)
            coop.abort()

    threads = [threading.Thread(target=target, args=(pid,)) for pid in pids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        real = [e for e in errors if not isinstance(e, DeadlockError)]
        raise (real or errors)[0]
