"""Debug mode for graphs: run them in the reference interpreter and stop at breakpoints.

::

    import pypto.debug
    pypto.debug.enable()                 # module.run now interprets, one block per tile

    @pypto.tile_op
    def debug_tile(x):
        pypto.debug.breakpoint()         # every tile stops here
        return x * 2

    pypto.debug.run(graph, inputs)       # compiles nothing: interprets the graph once
    pypto.debug.snapshots[0].tiles       # {"x": array(...)} as seen by tile 0

``breakpoint()`` is a kernel-language builtin: in compiled kernels it is removed before the
first pass (no instruction, no cost); in the interpreter (``debug.run``, ``module.run`` while
debug mode is on, or any kernel under ``PYPTO_INTERPRET=1`` while it is on) it calls the hook
with a ``Snapshot``: the tile's index, the block, the breakpoint's file:line and the live local
tiles as numpy arrays. The default hook prints one line and, when stdin is a terminal, opens
pdb with the tiles in ``tiles``; otherwise it continues, so scripts and tests never wait.
"""
from __future__ import annotations

import sys
import threading
from dataclasses import dataclass

import numpy as np

from ..backends.interpreter import handlers as interpreter_handlers
from ..graph.graph import TensorGraph
from ..graph.module import DEBUG, Module, _check_options
from ..language.core import breakpoint  # noqa: A004 - the kernel builtin, as the seed spells it
from ..target import get_target

__all__ = ["enable", "disable", "is_enabled", "breakpoint", "run", "snapshots", "Snapshot",
           "set_hook", "default_hook", "clear"]

# how many breakpoint hits the default hook prints per debug session before going quiet
PRINT_LIMIT = 16


@dataclass
class Snapshot:
    """One breakpoint hit. ``tile``: the tile's index per output axis (None when the kernel
    was not launched one block per tile); ``block``: the program ids; ``tiles``: name → a copy
    of the tile."""
    tile: tuple | None
    block: tuple
    kernel: str | None
    location: str
    tiles: dict

    def summary(self) -> str:
        where = f"tile {self.tile}" if self.tile is not None else f"block {self.block}"
        parts = [f"{n}: {_describe(a)}" for n, a in self.tiles.items()]
        return (f"[pypto.debug] breakpoint at {self.location}, {where}"
                f"{' of ' + self.kernel if self.kernel else ''}: {'; '.join(parts) or 'no tiles'}")


snapshots: list[Snapshot] = []
_lock = threading.Lock()
_state = {"hook": None, "launch": None, "printed": 0}


def enable(hook=None) -> None:
    """Debug mode on: ``Module.run`` interprets, breakpoints call ``hook`` (default:
    ``default_hook``) with a ``Snapshot``."""
    _state["printed"] = 0
    if hook is not None:
        set_hook(hook)
    interpreter_handlers.BREAKPOINT_HOOK = _on_breakpoint
    if interpret not in DEBUG:
        DEBUG.append(interpret)             # Module.run interprets while it is there


def disable() -> None:
    """Debug mode off: graphs run compiled again and breakpoints do nothing."""
    interpreter_handlers.BREAKPOINT_HOOK = None
    if interpret in DEBUG:
        DEBUG.remove(interpret)


def is_enabled() -> bool:
    return interpreter_handlers.BREAKPOINT_HOOK is not None


def set_hook(hook) -> None:
    """``hook(snapshot)`` is called at every breakpoint (None restores ``default_hook``)."""
    if hook is not None and not callable(hook):
        raise TypeError(f"pypto.debug.set_hook(hook=...) must be callable, got {hook!r}")
    _state["hook"] = hook


def clear() -> None:
    """Forget the recorded snapshots."""
    with _lock:
        snapshots.clear()


def run(graph, inputs, ctx=None, target="ascend910b", options=None):
    """Run ``graph`` (a ``TensorGraph`` or a compiled ``Module``) once on ``inputs`` in the
    reference interpreter with breakpoints active; returns what ``Module.run`` returns.
    Snapshots of this run replace earlier ones."""
    if isinstance(graph, Module):
        module = graph
    elif isinstance(graph, TensorGraph):
        if not graph.nodes:
            raise ValueError(f"pypto.debug.run: graph {graph.name!r} has no tile_map nodes")
        module = Module(graph, get_target(target), _check_options(options))
    else:
        raise TypeError(f"pypto.debug.run(graph=...) takes a pypto.TensorGraph or a Module, "
                        f"got {type(graph).__name__}")
    was_enabled = is_enabled()
    clear()
    enable()
    try:
        return module.run(ctx, inputs)
    finally:
        if not was_enabled:
            disable()


def interpret(kernel, args) -> None:
    """Launch one graph kernel in the reference interpreter (used by ``Module.run``)."""
    jitfn = kernel.jit
    rank = len(kernel.group.tiling.tile) if kernel.form == "tile" else None
    _state["launch"] = (kernel.name, rank)
    try:
        jitfn._interpret(kernel.grid, jitfn._bind(args, {}))
    finally:
        _state["launch"] = None


def default_hook(snapshot: Snapshot) -> None:
    """Print one line (the first ``PRINT_LIMIT`` hits); open pdb if stdin is a terminal."""
    if _state["printed"] < PRINT_LIMIT:
        print(snapshot.summary())
    elif _state["printed"] == PRINT_LIMIT:
        print("[pypto.debug] further breakpoints are recorded in pypto.debug.snapshots, "
              "not printed")
    _state["printed"] += 1
    if _interactive():
        tiles = snapshot.tiles  # noqa: F841 - what the pdb session is for
        print("[pypto.debug] pdb: the tiles are in `tiles` (name -> numpy array); "
              "'c' goes on to the next breakpoint")
        import pdb  # lazy: only interactive sessions open it
        pdb.Pdb().set_trace(sys._getframe())


def _on_breakpoint(pid, names, arrays, loc) -> None:
    launch = _state["launch"]
    tile = pid[:launch[1]] if launch is not None and launch[1] else None
    where = f"{loc.filename}:{loc.line}" if loc is not None else "?"
    snap = Snapshot(tile, pid, launch[0] if launch else None, where, dict(zip(names, arrays)))
    with _lock:
        snapshots.append(snap)
    (_state["hook"] or default_hook)(snap)


def _interactive() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (ValueError, OSError):
        return False


def _describe(a: np.ndarray) -> str:
    text = f"{a.dtype}{list(a.shape)}"
    if a.size and (a.dtype.kind in "fiub" or str(a.dtype) == "bfloat16"):
        f = a.astype(np.float64)
        text += f" min {np.nanmin(f):.4g} max {np.nanmax(f):.4g}"
    return text
