"""The sanitizer: a launch that checks what the kernel's blocks read and write.

``PYPTO_SANITIZE=1`` (every launch), ``with pypto.sanitize():`` (the launches inside it) or
``@pypto.jit(sanitize=True)`` runs the kernel in the reference interpreter with every
``pl.load`` and ``pl.store`` watched, and reports, per launch:

- **out of range**: a load or store whose window starts outside the tensor (before it, or
  past its end: loads read only the padding value, stores write nothing: defined, but rarely
  what was meant), with the kernel, the block, the source line, the window and the tensor's
  extent. The ragged tail (a window that starts inside and runs past the end, the last
  block's when the data is not a multiple of the block) is the documented idiom and is not
  reported (``ragged_tail``); a ``padding=None`` load that crosses the edge raises;
- **unwritten outputs**: elements of a tensor the kernel stores to that no block wrote (a
  grid too small, a forgotten ``[grid]``);
- **races**: an element written by two blocks without ``atomic=``;
- **unfilled buffers**: a ``pl.alloc_buffer`` read before any ``pl.async_load`` filled it.
  The compiler refuses the read no fill can reach; one only a runtime branch (``if n > 0:``,
  a loop that may run no iteration) fills compiles, and when the branch is not taken the read
  gets whatever that UB space last held (zeros in the interpreter): only a run can tell.

Reports are warnings (``SanitizerWarning``) and are kept in
``pypto.sanitizer.reports``; ``PYPTO_SANITIZE=raise`` makes a launch with findings raise
``SanitizerError`` instead. Off (the default), nothing here runs: the launch key includes the
variable, so the warm path stays as it is. On, a launch costs about 8 µs of Python per tile op
per block on top of the ops' numpy work: 20–1000× a native launch, the most for small tiles of
cheap ops (docs/language.md §6 has the measurements; tutorial 08 prints its own).
"""
from __future__ import annotations

import contextlib
import os
import threading
import warnings
from dataclasses import dataclass

import numpy as np

from ... import envs
from ...errors import user_stacklevel
from ...layout import c0_for
from .numerics import window

REPORT_LIMIT = 5            # findings of one kind at one source line, per launch, in detail
reports: list = []          # every Finding of this process, in order


class SanitizerWarning(UserWarning):
    """What the sanitizer found in a launch."""


class SanitizerError(RuntimeError):
    """``PYPTO_SANITIZE=raise``: a launch had findings."""


@dataclass
class Finding:
    kind: str            # "out of range", "unwritten", "race", "unfilled buffer"
    kernel: str
    message: str


mode = envs.sanitize_mode


_lock = threading.Lock()


@contextlib.contextmanager
def sanitize(raise_errors: bool = False):
    """The launches inside run sanitized (process-wide while the block runs: it sets
    ``PYPTO_SANITIZE``, which the launch key includes)."""
    with _lock:
        before = os.environ.get(envs.PYPTO_SANITIZE.name)
        os.environ[envs.PYPTO_SANITIZE.name] = "raise" if raise_errors else "1"
    try:
        yield
    finally:
        with _lock:
            if before is None:
                os.environ.pop(envs.PYPTO_SANITIZE.name, None)
            else:
                os.environ[envs.PYPTO_SANITIZE.name] = before


class Watch:
    """One launch's record: who wrote each element of each stored tensor, and findings."""

    def __init__(self, kernel: str, tensors: dict, grid: tuple):
        self.kernel = kernel
        self.names = {id(a): n for n, a in tensors.items()}
        self.grid = grid
        self.writers: dict = {}          # tensor name -> int64 array of block numbers, -1 none
        self.findings: list = []
        self.counts: dict = {}           # (kind, where) -> [findings, the op and line]
        self._lock = threading.Lock()

    def _block(self, pid) -> int:
        g0, g1, _ = self.grid
        return int(pid[0]) + g0 * (int(pid[1]) + g1 * int(pid[2]))

    def _note(self, kind, where, message, at=None):
        """Keep ``message`` unless ``REPORT_LIMIT`` findings of ``kind`` at ``where`` were kept
        already; those past it are counted, and the count names ``at`` (the op and its source
        line), since the kept ones may be far above it."""
        key = (kind, where)
        count = self.counts.setdefault(key, [0, at])
        count[0] += 1
        if count[0] <= REPORT_LIMIT:
            self.findings.append(Finding(kind, self.kernel, message))

    def access(self, what: str, op, pid, tensor, offsets, shape, atomic=None,
               layout=None) -> None:
        """A ``pl.load`` (``what="load"``) or ``pl.store`` of ``shape`` at ``offsets``;
        ``layout``: the ``TensorType`` of a layout tensor, whose load is checked against its
        logical extent (``layout_outside``)."""
        name = self.names.get(id(tensor), "a tensor")
        offsets = [int(o) for o in offsets]
        if layout is not None:
            outside = layout_outside(layout, offsets, shape)
            extent = f"{layout.layout} {layout.shape}"
        else:
            outside = any(o < 0 or o + s > n for o, s, n in zip(offsets, shape, tensor.shape))
            outside = outside and not ragged_tail(offsets, tensor.shape)
            extent = tuple(tensor.shape)
        with self._lock:
            if outside:
                window = ", ".join(f"{o}:{o + s}" for o, s in zip(offsets, shape))
                effect = "the padding value is read there" if what == "load" else \
                    "those elements are not written"
                self._note("out of range", (what, op.loc), (
                    f"{self.kernel}: block {tuple(int(p) for p in pid)} at {op.loc}: "
                    f"pl.{what} of {name}[{window}] reaches outside {name}'s extent "
                    f"{extent}; {effect}"), f"pl.{what} at {op.loc}")
            if what == "store":
                self._record_write(name, op, pid, tensor, offsets, shape, atomic)

    def unfilled_read(self, op, pid, name: str, alloc_loc) -> None:
        """Block ``pid``'s ``op`` reads the ``pl.alloc_buffer`` made at ``alloc_loc``, which no
        ``pl.async_load`` filled in this block."""
        line = f" at line {alloc_loc.line}" if alloc_loc is not None else ""
        with self._lock:
            self._note("unfilled buffer", ("read", op.loc), (
                f"{self.kernel}: block {tuple(int(p) for p in pid)} at {op.loc}: "
                f"{name or 'a buffer'} (pl.alloc_buffer{line}) is read before any "
                "pl.async_load filled it (the branch or loop that fills it did not run); it "
                "holds whatever that UB space last held on the chip, zeros here"),
                f"read at {op.loc}")

    def _record_write(self, name, op, pid, tensor, offsets, shape, atomic) -> None:
        writers = self.writers.get(name)
        if writers is None:
            writers = self.writers[name] = np.full(tensor.shape, -1, np.int64)
        w = window(tensor.shape, offsets, shape)
        if w is None:
            return
        region = writers[w[1]]
        me = self._block(pid)
        if not atomic and region.max() >= 0:   # a fresh region (the usual case) cannot clash
            clash = (region >= 0) & (region != me)
            if clash.any():
                index = tuple(int(i) + s.start for i, s in zip(np.argwhere(clash)[0], w[1]))
                other = int(region[clash][0])
                self._note("race", ("store", op.loc, name), (
                    f"{self.kernel}: blocks {other} and {me} both write {name}{list(index)} "
                    f"(block {me} at {op.loc}, without atomic=); which value remains depends "
                    f"on the order the cores run in ({int(clash.sum())} elements in this "
                    "store)"), f"pl.store at {op.loc}")
        region[...] = me if not atomic else np.where(region >= 0, region, me)

    def finish(self, stored: list) -> list:
        """Unwritten elements of every tensor the kernel stores to; all findings."""
        for name in stored:
            writers = self.writers.get(name)
            if writers is None:
                self._note("unwritten", name, f"{self.kernel}: no block wrote {name} at all")
                continue
            missing = writers < 0
            if missing.any():
                first = [int(i) for i in np.argwhere(missing)[0]]
                self._note("unwritten", name, (
                    f"{self.kernel}: {int(missing.sum()):,} of {missing.size:,} elements of "
                    f"{name} were written by no block (the first: {name}{first}); the grid "
                    f"{tuple(g for g in self.grid if g > 1) or (1,)} may be too small for "
                    "the data, or the launch lacks [grid]"))
        for (kind, _), (n, at) in self.counts.items():
            if n > REPORT_LIMIT:
                self.findings.append(Finding(kind, self.kernel,
                                             f"{self.kernel}: {n - REPORT_LIMIT} more {kind} "
                                             f"finding(s) like the above, of the {at}"))
        return self.findings


def ragged_tail(offsets, extent) -> bool:
    """Whether a window that leaves the tensor is the documented ragged tail (docs/language.md,
    ``pl.load``/``pl.store``; tutorial 01): it starts inside the tensor on every axis and only
    its far end runs past the extent, as the last block's window does when the data is not a
    multiple of the block. A padded load reads the padding there and a store drops those
    elements, by definition, so the sanitizer says nothing. A window that starts before the
    tensor or past its end (a grid too large, a wrong offset) is reported, and a load with
    ``padding=None`` that crosses the edge is an ``IndexError`` before it gets here."""
    return all(0 <= o < n for o, n in zip(offsets, extent))


def report(findings: list) -> None:
    """Warn (or raise, under ``PYPTO_SANITIZE=raise``) with a launch's findings."""
    if not findings:
        return
    reports.extend(findings)
    text = "\n".join(f"[pypto sanitize: {f.kind}] {f.message}" for f in findings)
    if mode() == "raise":
        raise SanitizerError(text)
    warnings.warn(text, SanitizerWarning, stacklevel=user_stacklevel())


def layout_outside(ty, offsets, shape) -> bool:
    """Does a load from a layout tensor (pypto.layout.load_window) reach outside its logical
    extent? NZ: the (rows, cols) window past (M, K); NC1HWC0: an image or pixel outside the
    tensor, or a channel past C or past the channel group of the window's first channel."""
    rows, cols = shape
    if ty.layout == "NZ":
        (r, k), (m, kk) = offsets, ty.shape
        return r < 0 or k < 0 or r + rows > m or k + cols > kk
    n, c, h, w = offsets
    nn, channels, hh, ww = ty.shape
    c0 = c0_for(ty.dtype)
    q = h * ww + w
    group_end = (c // c0 + 1) * c0
    return not 0 <= n < nn or c < 0 or c + cols > min(channels, group_end) or q < 0 or \
        q + rows > hh * ww
