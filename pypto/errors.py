"""Errors a user can act on, and the one they should report to us.

``CompilationError`` points at the user's source: file, line, column, the line itself with a
caret range under the offending expression, and the chain of inlined jit calls that led there.
``InternalError`` means the compiler broke an invariant; it dumps the IR to a file so the bug
report carries what we need.
"""
from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass


@dataclass(frozen=True)
class SourceLoc:
    """Where an op came from, in the user's file (1-based line, 0-based column)."""
    filename: str
    line: int
    col: int = 0
    end_col: int | None = None
    source_line: str = ""
    function: str = ""

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}:{self.col + 1}"


class CheckedWindowWarning(UserWarning):
    """A matmul operand's window the compiler cannot prove inside its tensor: it is checked
    at run time, and then travels GM -> UB -> GM -> L1 through the vector core (only the UB
    takes the slow, element-by-element path)."""


class CompilationError(Exception):
    """The kernel cannot be compiled because of something in the user's code."""

    def __init__(self, message: str, loc: SourceLoc | None = None, call_chain=()):
        self.message = message
        self.loc = loc
        self.call_chain = tuple(call_chain)
        super().__init__(self._render())

    def __reduce__(self):
        return (type(self), (self.message, self.loc, self.call_chain))

    def _render(self) -> str:
        if self.loc is None:
            return self.message
        first, *rest = self.message.split("\n")
        lines = [f"{self.loc}: in {self.loc.function or 'kernel'}: {first}"]
        if self.loc.source_line:
            text = self.loc.source_line.rstrip("\n")
            stripped = text.lstrip()
            indent = len(text) - len(stripped)
            end = self.loc.end_col if self.loc.end_col and self.loc.end_col > self.loc.col \
                else self.loc.col + 1
            lines.append("    " + stripped)
            lines.append("    " + " " * max(0, self.loc.col - indent) + "^" * (end - self.loc.col))
        lines.extend(rest)
        for caller in self.call_chain:
            lines.append(f"  called from {caller}")
        return "\n".join(lines)


class NotOnChip(CompilationError):
    """The kernel uses something A2/A3 has no instruction for (docs/pto.md lists them). The
    message names the construct and what to write instead."""


def compiler_frames_wanted() -> bool:
    """Should a CompilationError keep the compiler's own frames (PYPTO_DEBUG=1)? Otherwise the
    places that raise one to the user drop them, so the traceback ends in the user's code."""
    from . import envs
    return envs.PYPTO_DEBUG.get() not in ("", "0")


PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep      # pypto/


def user_stacklevel() -> int:
    """The ``warnings.warn`` stacklevel of the first caller outside PyPTO (its modules and
    the launch code it generates), so a warning points at the user's line, however deep in
    the compiler (or the cache) it was raised."""
    frame, level = sys._getframe(2), 2      # 1: warnings.warn's caller, us excluded
    while frame is not None and frame.f_code.co_filename.startswith((PACKAGE, "<pypto")):
        frame, level = frame.f_back, level + 1
    return level


class InternalError(Exception):
    """A compiler invariant was broken; the IR at that point is written to a file."""

    def __init__(self, message: str, ir_text: str | None = None):
        self.dump_path = None
        if ir_text is not None:
            fd, path = tempfile.mkstemp(prefix="pypto-internal-", suffix=".txt")
            with os.fdopen(fd, "w") as f:
                f.write(ir_text)
            self.dump_path = path
            message = f"{message}\n(the IR was written to {path}; please attach it to a bug report)"
        super().__init__(f"PyPTO internal error: {message}")


# PTO buffer space -> how an overflow message names it
SPACE_NAMES = {"vec": "UB (vec)", "mat": "L1 (mat)", "left": "L0A (left)",
               "right": "L0B (right)", "acc": "L0C (acc)"}


class BufferOverflow(CompilationError):
    """A buffer overflow: ``space``, the bytes ``asked`` for, the ``capacity`` and the
    ``target``'s name, kept as fields so that the jit can propose constexpr values that fit and
    the autotuner can say in one line why a config was skipped (``summary``) without parsing
    the message."""

    def __init__(self, message, loc=None, call_chain=(), space=None, asked=0, capacity=0,
                 target=""):
        super().__init__(message, loc, call_chain)
        self.space, self.asked, self.capacity, self.target = space, asked, capacity, target

    @property
    def summary(self) -> str:
        """The overflow in one sentence: the message's first, from the fields."""
        return overflow_summary(self.space, self.target, self.asked, self.capacity)

    def __reduce__(self):
        return (type(self), (self.message, self.loc, self.call_chain, self.space, self.asked,
                             self.capacity, self.target))


def overflow_summary(space, target: str, asked: int, capacity: int) -> str:
    return (f"{SPACE_NAMES.get(space, space)} overflow on {target}: the kernel needs {asked} "
            f"bytes at once but the buffer holds {capacity}")
