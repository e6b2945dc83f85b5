"""A kernel's source text: where it is (file, first line, indent), its parsed ``def``, the names
it can read (globals, closure), and a node's place for error messages. Kernels are compiled
from their text, never executed.
"""
from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
import types
from collections.abc import Mapping

from ..errors import SourceLoc


def _function_source(fn):
    """(lines, first line number, parsed module) of ``fn``'s definition. The lines come from
    the line table of its code objects: ``inspect.getsourcelines`` tokenizes the file to find
    the end, whose first use in a process costs ~4 ms of a first call's 10 ms budget. Where
    that cannot be trusted (a trailing statement the compiler dropped, a source that does not
    parse) it is the fallback."""
    code = getattr(fn, "__code__", None)
    if code is not None and hasattr(code, "co_lines"):
        every = linecache.getlines(code.co_filename, fn.__globals__)
        last = _last_line(code)
        if every and last and last <= len(every):
            lines = every[code.co_firstlineno - 1:last]
            try:
                tree = ast.parse(textwrap.dedent("".join(lines)))
            except SyntaxError:
                tree = None
            if tree is not None and tree.body and \
                    getattr(tree.body[0], "name", None) == fn.__name__:
                return lines, code.co_firstlineno, tree
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        raise TypeError(f"@pypto.jit cannot read the source of {fn.__qualname__}: kernels "
                        "are compiled from their source text, so define them in a file "
                        "(not with exec or in an interactive prompt)") from None
    return lines, first, ast.parse(textwrap.dedent("".join(lines)))


def _last_line(code) -> int:
    """The last source line any instruction of ``code`` (or of code nested in it) covers
    (Python 3.10 has no end lines: there the last line an instruction starts on; a statement
    that goes on past it fails to parse and the caller falls back to ``inspect``)."""
    if hasattr(code, "co_positions"):
        last = max((end for _, end, _, _ in code.co_positions() if end is not None),
                   default=0)
    else:
        last = max((line for _, _, line in code.co_lines() if line is not None), default=0)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            last = max(last, _last_line(const))
    return last


class Cells(Mapping):
    """A function's closure as a read-only mapping of its cells' current values (an empty
    cell is absent): a kernel reads its closure when it compiles, as it reads its globals,
    and a compiled kernel can recheck them (``runtime/dependencies.Read``)."""

    def __init__(self, fn):
        self.owner = fn.__qualname__
        self._cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))

    def __getitem__(self, name):
        try:
            return self._cells[name].cell_contents
        except ValueError:              # an empty cell: not bound yet
            raise KeyError(name) from None

    def __iter__(self):
        return (name for name in self._cells if name in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class KernelSource:
    """A kernel's parsed source, kept with the file and line offset for error messages."""

    def __init__(self, fn):
        self.fn = fn
        self.filename = inspect.getsourcefile(fn) or "<unknown>"
        lines, self.first_line, tree = _function_source(fn)
        self.text = textwrap.dedent("".join(lines))
        self.indent = len(lines[0]) - len(lines[0].lstrip())
        self.lines = self.text.splitlines()
        self.node = tree.body[0]
        if not isinstance(self.node, ast.FunctionDef):
            raise TypeError(f"@pypto.jit needs a plain function, got {type(self.node).__name__}")
        self.globals = fn.__globals__
        self.closure = Cells(fn)

    def loc(self, node) -> SourceLoc:
        line = getattr(node, "lineno", 1)
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        end_col = getattr(node, "end_col_offset", None)
        if getattr(node, "end_lineno", line) != line:
            end_col = len(text)
        return SourceLoc(self.filename, line + self.first_line - 1,
                         getattr(node, "col_offset", 0) + self.indent,
                         None if end_col is None else end_col + self.indent,
                         " " * self.indent + text, self.node.name)


def is_jit_function(obj) -> bool:
    """Is ``obj`` a ``@pypto.jit`` function? Its class (the runtime's ``JITFunction``) sets
    ``__pypto_jit__``; the compiler, below the runtime, only needs its ``source`` and
    ``signature`` to inline a call to it."""
    return getattr(type(obj), "__pypto_jit__", False) is True
