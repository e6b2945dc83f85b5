"""The trace of one CANN kernel call: its buffers, its writes, the tile shapes in force.

``trace(fn, specs, constants)`` runs the kernel body once with a ``SymTensor`` per tensor
argument (a ``read`` of the argument's buffer). While it runs, the kernel-language stubs that
share a name with a CANN op (``pypto.exp``, ``pypto.sum``, ``pypto.matmul``, ...) dispatch to
the CANN op (``pypto.language.core.FRONTEND_HOOK``); outside a trace they behave as before.
"""
from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, field

from ..language import core as pl_core
from .options import SCOPE
from .symbolic import Buffer, SymTensor


@dataclass
class Write:
    """``buffer[index chain] = value`` at this point of the kernel (``line``: where, in the
    user's source, for errors found when the value is computed). ``version``: the buffer's
    version once written, the one later reads pin (a merged run of writes, ``coalesce``, gets
    its last write's)."""
    buffer: Buffer
    chain: tuple
    value: object
    line: str
    version: int


def user_line() -> str:
    """``file:line`` of the innermost caller outside pypto.frontend (the kernel's line)."""
    frame = sys._getframe(1)
    here = os.path.dirname(os.path.abspath(__file__))
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) \
            == here:
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame else "<unknown>"


@dataclass
class Trace:
    buffers: list = field(default_factory=list)
    writes: list = field(default_factory=list)
    settings: dict = field(default_factory=dict)
    unmerged: list = field(default_factory=list)    # the writes as traced, before ``coalesce``

    def tile_shapes(self, kind: str):
        return self.settings.get(kind, SCOPE.get(kind))


_CURRENT: list = []


def current() -> Trace:
    if not _CURRENT:
        raise RuntimeError("this CANN PyPTO call is only meaningful inside a "
                           "@pypto.frontend.jit kernel")
    return _CURRENT[-1]


def active() -> bool:
    return bool(_CURRENT)


def new_buffer(name, shape, dtype, arg_index=None) -> SymTensor:
    """A buffer of the current trace and the tensor reading all of it."""
    buf = Buffer(name, shape, dtype, arg_index)
    current().buffers.append(buf)
    return SymTensor("read", (), shape, dtype, buffer=buf, chain=(), version=None)


@contextlib.contextmanager
def tracing(trace: Trace):
    from . import build  # lazy: build imports this module (a cycle)
    _CURRENT.append(trace)
    previous = pl_core.FRONTEND_HOOK
    pl_core.FRONTEND_HOOK = build.language_call
    try:
        yield trace
    finally:
        pl_core.FRONTEND_HOOK = previous
        _CURRENT.pop()


def run(fn, arg_specs: list, constants: dict) -> Trace:
    """Trace ``fn``: ``arg_specs`` = [(param, shape, pypto dtype)] of its tensor arguments."""
    trace = Trace()
    with tracing(trace):
        tensors = {p: new_buffer(p, shape, dtype, k)
                   for k, (p, shape, dtype) in enumerate(arg_specs)}
        result = fn(**tensors, **constants)
    if result is not None:
        raise TypeError(f"{fn.__name__}: a @pypto.frontend.jit kernel returns nothing; write "
                        "results into an output argument (out[:] = expr), as CANN requires")
    return trace
