"""``@pypto.tile_op``: a function of tiles written in the kernel language.

A tile op is a ``JITFunction`` that is never launched on its own: the frontend inlines jit
functions called from kernels, so the kernel ``pypto.compile`` generates for a tile_map node
simply calls the tile op on the tiles it loaded, and the existing frontend compiles its body
(errors point at the tile op's own file and line). Being a ``JITFunction`` also means a tile
op can be called from a hand-written ``@pypto.jit`` kernel.

Called from Python on arrays, a tile op runs once on whole arrays (one tile each) in the
reference interpreter and returns the result: a quick way to check what it computes.
"""
from __future__ import annotations

import inspect

from ..runtime.jit import JITFunction
from .trace import evaluate


class TileOp(JITFunction):
    """The object ``@pypto.tile_op`` returns."""

    def __init__(self, fn):
        for p in inspect.signature(fn).parameters.values():
            if p.kind != p.POSITIONAL_OR_KEYWORD and not (
                    p.kind == p.KEYWORD_ONLY and p.default is not p.empty):
                raise TypeError(f"@pypto.tile_op {fn.__name__}: parameters must be plain "
                                f"names (one per input tile, constants with defaults), got {p}")
        super().__init__(fn)

    @property
    def tile_params(self) -> list[str]:
        """Parameters without a default: one per tile_map input."""
        return [n for n, p in self.signature.parameters.items() if p.default is p.empty]

    def __getitem__(self, grid):
        raise TypeError(f"{self.__name__} is a @pypto.tile_op, not a kernel: use it with "
                        "pypto.tile_map(...) or call it from a @pypto.jit kernel")

    def __call__(self, *arrays):
        """Evaluate on whole numpy arrays (or pypto.Tensors) with the reference interpreter."""
        return evaluate(self, arrays)

    def __repr__(self) -> str:
        return f"<pypto.tile_op {self.__name__}>"


def tile_op(fn=None):
    """Mark ``fn`` as a tile op: its parameters are tiles, its body the kernel language."""
    if fn is None:
        return TileOp
    if isinstance(fn, TileOp):
        return fn
    if isinstance(fn, JITFunction):
        fn = fn.fn
    if not inspect.isfunction(fn):
        raise TypeError(f"@pypto.tile_op decorates a function, got {type(fn).__name__}")
    return TileOp(fn)
