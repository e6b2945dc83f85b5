"""What a kernel's compile folds besides its arguments: the names its source reads from its
closure and globals, followed through modules (``cfg.FACTOR``), into the jit functions it
inlines and the plain Python helpers it calls at compile time (``rows(B)``), transitively.

``Dependencies`` hashes all of it into the kernel's source hash (the disk key: an edited
helper or a changed module constant compiles again in a new process) and keeps the reads made
through live module globals (``Read``: where from, the value seen), which a compiled kernel
rechecks at launch (``changed``): a global rebound in this process recompiles the kernel.
"""
from __future__ import annotations

import ast
import functools
import importlib.metadata
import os
import sys
import sysconfig
import types
from typing import NamedTuple

from ..compiler.source import Cells, is_jit_function
from ..errors import PACKAGE
from .specialize import is_folded_constant

_MISSING = object()
# Functions of the standard library and of installed packages change with their versions, not
# under the user's edits; PyPTO's own are in compiler_hash. Neither is hashed.
_NOT_USER = tuple({os.path.abspath(p) + os.sep for k, p in sysconfig.get_paths().items()
                   if k in ("stdlib", "platstdlib", "purelib", "platlib")}) + (PACKAGE,)


class Read(NamedTuple):
    """A value the compile folded, read from a module's globals: ``scope[path[0]]``, then
    attributes ``path[1:]`` of modules."""
    scope: dict
    path: tuple
    value: object

    def current(self):
        return resolve((self.scope,), self.path)[1]

    def name(self) -> str:
        if isinstance(self.scope, Cells):
            return f"{'.'.join(self.path)} (closure of {self.scope.owner})"
        module = self.scope.get("__name__", "?")
        return f"{module}.{'.'.join(self.path)}"

    def described(self) -> str:
        kind = "closure variable" if isinstance(self.scope, Cells) else "global"
        return f"{kind} {self.name()}"


def resolve(scopes, path):
    """(scope, value) of ``path`` looked up in the first of ``scopes`` that has its head, then
    through module attributes; value is ``_MISSING`` where it cannot be followed."""
    for scope in scopes:
        if path[0] in scope:
            value = scope[path[0]]
            for attr in path[1:]:
                if not isinstance(value, types.ModuleType):
                    return scope, _MISSING
                value = getattr(value, attr, _MISSING)
            return scope, value
    return None, _MISSING


def _dotted(node):
    """("a", "b", "c") for the expression ``a.b.c``, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return (node.id, *reversed(parts))


def is_user_function(value) -> bool:
    """A plain Python function of the user's code (not PyPTO's, the standard library's or an
    installed package's): the compile runs it, so its code joins the key."""
    if not isinstance(value, types.FunctionType) or hasattr(value, "__pypto_builtin__"):
        return False
    filename = os.path.abspath(value.__code__.co_filename)
    return not filename.startswith(_NOT_USER)


def installed_version(value) -> str | None:
    """``dist==version`` of the installed distribution a callable comes from (a helper of an
    installed package that the compile calls: another version may compute something else),
    or None (PyPTO's, the standard library's, anything else)."""
    if not callable(value) or isinstance(value, type) or hasattr(value, "__pypto_builtin__"):
        return None
    top = (getattr(value, "__module__", None) or "").partition(".")[0]
    if top in ("", "pypto") or top in sys.stdlib_module_names:
        return None
    # a distribution named as its module (numpy's) is found by name, cheaply; the map of
    # every installed distribution's modules (~0.1 s to build) only for the others (and
    # Python 3.10's map knows only distributions that declare their modules)
    dists = [top] if _version(top) != "?" else _distributions().get(top)
    if not dists:
        return None
    return ",".join(f"{d}=={_version(d)}" for d in sorted(set(dists)))


@functools.lru_cache(maxsize=1)
def _distributions() -> dict:
    return importlib.metadata.packages_distributions()


@functools.lru_cache(maxsize=None)
def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _watched(scope, path):
    """``scope`` when the read at ``path`` is rechecked at launch: a name of the user's
    module globals, or an attribute of the user's own modules (not of ``pl``, ``math`` or
    ``numpy``, whose constants do not change), else None."""
    if scope is None:
        return None
    value = scope.get(path[0], _MISSING)
    for attr in path[1:]:
        if not _user_module(value):
            return None
        value = getattr(value, attr, _MISSING)
    return scope


def _user_module(module) -> bool:
    filename = getattr(module, "__file__", None)
    return bool(filename) and not os.path.abspath(filename).startswith(_NOT_USER)


def _code_names(code) -> set:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def _hash_code(h, code) -> None:
    """A code object by what it does (not by where it sits in its file)."""
    h.update(code.co_code)
    h.update(repr((code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
                   code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount,
                   code.co_flags)).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _hash_code(h, const)
        else:
            h.update(f"{type(const).__name__}:{_const_repr(const)};".encode())


def _const_repr(const) -> str:
    """A code constant's repr, the same in every process (a frozenset's order follows the
    strings' hashes, which differ between processes)."""
    if isinstance(const, frozenset):
        return "frozenset(" + ",".join(sorted(_const_repr(c) for c in const)) + ")"
    if isinstance(const, tuple):
        return "(" + ",".join(_const_repr(c) for c in const) + ")"
    return repr(const)


class Dependencies:
    """Walks one kernel's reads into ``h`` (a sha256) and ``reads`` (see the module doc)."""

    def __init__(self, h, seen: set):
        self.h = h
        self.seen = seen
        self.reads: list = []

    def kernel(self, source) -> None:
        """A jit function's source: every name and dotted name it reads."""
        scopes = (source.closure, source.globals)
        args = source.node.args
        local = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} | {
            n.id for n in ast.walk(source.node)
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        paths = {}
        for node in ast.walk(source.node):
            if isinstance(node, (ast.Name, ast.Attribute)):
                path = _dotted(node)
                if path is not None and path[0] not in local:
                    paths[path] = None
        for path in paths:
            scope, value = resolve(scopes, path)
            if value is not _MISSING:
                self.value(path, value, _watched(scope, path))

    def value(self, path, value, scope) -> None:
        """One value read at ``path`` from ``scope`` (module globals, or a function's closure
        cells: ``source.Cells``), rechecked at launch; None: not rechecked."""
        label = ".".join(path)
        if is_jit_function(value):
            if id(value) not in self.seen:
                self.seen.add(id(value))
                self.h.update(value.source_hash(self.seen, self).encode())
        elif is_folded_constant(value):
            self.h.update(f"{label}={type(value).__name__}:{value!r}".encode())
        elif is_user_function(value):
            self.h.update(f"{label}=function".encode())
            self.helper(value)
        elif (version := installed_version(value)) is not None:
            self.h.update(f"{label}=function of {version}".encode())
        else:
            return
        if scope is not None and not any(r.scope is scope and r.path == path
                                         for r in self.reads):
            self.reads.append(Read(scope, path, value))

    def helper(self, fn) -> None:
        """A plain function the compile calls: its code, defaults, closure and the globals
        its code names (modules' attributes among them), transitively."""
        if id(fn) in self.seen:
            return
        self.seen.add(id(fn))
        h = self.h
        h.update(f"def {fn.__module__}.{fn.__qualname__}".encode())
        _hash_code(h, fn.__code__)
        for default in (fn.__defaults__ or ()) + tuple((fn.__kwdefaults__ or {}).values()):
            h.update((repr(default) if is_folded_constant(default)
                      else type(default).__name__).encode())
        cells = Cells(fn)
        for name in cells:
            self.value((name,), cells[name], cells)
        names = sorted(_code_names(fn.__code__))
        for name in names:
            value = fn.__globals__.get(name, _MISSING)
            if isinstance(value, types.ModuleType):
                if not _user_module(value):       # (pl, math, numpy: fixed by versions)
                    continue
                for attr in names:
                    found = getattr(value, attr, _MISSING)
                    if found is not _MISSING and not isinstance(found, types.ModuleType):
                        self.value((name, attr), found,
                                   _watched(fn.__globals__, (name, attr)))
            elif value is not _MISSING:
                self.value((name,), value, fn.__globals__)


def changed(reads) -> list:
    """The reads whose value is not the one the kernel was compiled with (a value rebound to
    an equal one of the same type counts as unchanged)."""
    out = []
    for read in reads:
        now = read.current()
        if now is read.value:
            continue
        try:
            same = type(now) is type(read.value) and bool(now == read.value)
        except Exception:  # noqa: BLE001 - any comparison failure is a change
            same = False
        if not same:
            out.append(read)
    return out
