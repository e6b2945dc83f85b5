"""Where Tile IR ops are appended while a kernel is compiled, with the source location of the
node being compiled (every op and error carries it) and the async_load bookkeeping that makes
reading an unfilled or pending buffer a compile error.
"""
from __future__ import annotations

from contextlib import contextmanager

from ..errors import CompilationError, SourceLoc
from .ir import Block, Op
from .source import KernelSource


class Builder:
    """Where ops are appended, plus the source location of the node being compiled."""

    def __init__(self, source: KernelSource):
        self.block: Block | None = None
        self.loc: SourceLoc | None = None
        self.source = source
        self.call_chain: list[str] = []
        self.inlining: tuple = ()          # jit functions being inlined, innermost last
        self.pending: dict[int, str] = {}  # async_load results not yet synchronized: id → name
        self.unfilled: dict[int, object] = {}   # alloc_buffer tiles no load filled: id → loc

    def emit(self, name, operands=(), result_types=(), attrs=None, blocks=()) -> Op:
        if (self.pending or self.unfilled) and name.startswith("tile."):
            for v in operands:
                if v.id in self.pending:
                    raise self.error(f"'{self.pending[v.id]}' is read before pl.synchronize() "
                                     "waits for the async_load that fills it")
                if v.id in self.unfilled:
                    raise self.error(f"the buffer from pl.alloc_buffer at line "
                                     f"{self.unfilled[v.id].line} is read before any "
                                     "async_load fills it")
        op = Op(name, operands, result_types, attrs, blocks, self.loc)
        self.block.ops.append(op)
        return op

    def error(self, message: str) -> CompilationError:
        return CompilationError(message, self.loc, self.call_chain)

    @contextmanager
    def at(self, block: Block):
        saved, self.block = self.block, block
        try:
            yield
        finally:
            self.block = saved
