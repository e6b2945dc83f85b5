"""Python AST → Tile IR.

The kernel's source is parsed with ``ast`` and walked; it is never executed. Names bound to
Python objects (constexprs, modules, dtypes, tuples) stay Python objects and fold at compile
time; runtime values are IR ``Value``s. Calls to kernel-language stubs are dispatched through
``semantics.BUILTINS``; calls to other ``@pypto.jit`` functions are inlined.
"""
from __future__ import annotations

import ast
import builtins as _py_builtins
import inspect
import textwrap
import types

import numpy as np
from contextlib import contextmanager

from ..language import dtypes as dt
from ..language.core import constexpr
from . import semantics, semantics_sync
from .elementwise import PY_BINOPS, PY_CMPOPS, PY_UNARYOPS
from ..errors import CompilationError, SourceLoc
from .ir import Block, Function, Op, ScalarType, TensorType, Value


def _function_source(fn):
    """(lines, first line number, parsed module) of ``fn``'s definition. The lines come from
    the line table of its code objects: ``inspect.getsourcelines`` tokenizes the file to find
    the end, whose first use in a process costs ~4 ms of a first call's 10 ms budget. Where
    that cannot be trusted (a trailing statement the compiler dropped, a source that does not
    parse) it is the fallback."""
    code = getattr(fn, "__code__", None)
    if code is not None and hasattr(code, "co_lines"):
        import linecache
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
        self.closure = inspect.getclosurevars(fn).nonlocals if fn.__closure__ else {}

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


class BoundMethod:
    """``tile.to`` and friends: a method looked up on an IR value, called later."""

    def __init__(self, name: str, receiver: Value):
        self.name = name
        self.receiver = receiver


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


BUILTINS = {**semantics.BUILTINS, **semantics_sync.BUILTINS}


def _assigned_names(stmts) -> list[str]:
    """Names a block of statements (re)binds, in first-assignment order (the buffer named by
    ``async_load(src, buf)`` is rebound too)."""
    seen: dict[str, None] = {}
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                seen.setdefault(node.id, None)
            buffer = _async_load_buffer(node)
            if isinstance(buffer, ast.Name):
                seen.setdefault(buffer.id, None)
    return list(seen)


def _async_load_buffer(node):
    """The buffer argument's node if ``node`` is a call spelled ``*.async_load(...)``."""
    if not isinstance(node, ast.Call):
        return None
    fn = node.func
    called = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
    if called != "async_load":
        return None
    if len(node.args) > 1:
        return node.args[1]
    return next((k.value for k in node.keywords if k.arg == "buffer"), None)


# Python syntax a kernel cannot use: its name for the user, and what to write instead.
SYNTAX_NAMES = {"ListComp": "a list comprehension", "SetComp": "a set comprehension",
                "DictComp": "a dict comprehension", "GeneratorExp": "a generator expression",
                "Try": "try/except", "TryStar": "try/except*", "Raise": "raise",
                "Break": "break", "Continue": "continue", "With": "a with block",
                "Lambda": "lambda", "Yield": "yield", "YieldFrom": "yield from",
                "Await": "await", "Global": "global", "Nonlocal": "nonlocal",
                "Delete": "del", "Import": "import", "ImportFrom": "import",
                "FunctionDef": "a nested def", "ClassDef": "a class definition",
                "List": "a list", "Dict": "a dict", "Set": "a set", "Match": "match",
                "JoinedStr": "an f-string", "Starred": "*unpacking", "Assert": "assert"}
_LISTS = ("kernels have no lists: write a tuple (a, b, c), or unroll with "
          "`for i in pl.static_range(n):`")
UNSUPPORTED_HINTS = {
    "ListComp": _LISTS, "SetComp": _LISTS, "DictComp": _LISTS, "GeneratorExp": _LISTS,
    "List": _LISTS, "Set": _LISTS, "Dict": "use separate names or a tuple",
    "Try": "a kernel cannot raise or catch: out-of-range loads pad and stores clip by "
           "definition; choose values with pl.where, or test scalars with if",
    "TryStar": "a kernel cannot raise or catch",
    "Raise": "check compile-time facts with pl.static_assert(cond, msg)",
    "Assert": "check compile-time facts with pl.static_assert(cond, msg)",
    "Break": "a PyPTO for loop runs its whole range: use `while cond:` with the exit "
             "condition as a variable, or put the body under `if`",
    "Continue": "put the rest of the body under `if not cond:`",
    "With": "no context managers run inside a kernel",
    "Lambda": "define a @pypto.jit helper at module level: kernels inline the jit "
              "functions they call",
    "FunctionDef": "define it at module level with @pypto.jit: kernels inline the jit "
                   "functions they call",
    "Yield": "kernels return at most one value (or a tuple) with return",
    "Global": "kernels read module constants but cannot assign them; pass values as "
              "arguments", "Nonlocal": "pass values as arguments",
    "Import": "import at module level; kernels may use the modules it imports",
    "ImportFrom": "import at module level; kernels may use the modules it imports",
    "JoinedStr": "use pl.static_print(...) to print compile-time values",
    "Match": "use if/elif on constexprs or scalars",
}


class CodeGenerator(ast.NodeVisitor):
    def __init__(self, source: KernelSource, builder: Builder, env: dict):
        self.source = source
        self.b = builder
        self.env = env
        self.returned = None

    # -- plumbing ---------------------------------------------------------------------------
    def visit(self, node):
        saved = self.b.loc
        if hasattr(node, "lineno"):
            self.b.loc = self.source.loc(node)
        try:
            return super().visit(node)
        except CompilationError:
            raise
        except (TypeError, ValueError, IndexError) as e:  # the user's mistake, from semantics
            raise self.b.error(str(e)) from None
        finally:
            if not isinstance(node, ast.stmt):
                self.b.loc = saved

    def generic_visit(self, node):
        what = type(node).__name__
        hint = UNSUPPORTED_HINTS.get(what, "")
        raise self.b.error(f"{SYNTAX_NAMES.get(what, repr(what))} is not supported inside a "
                           f"PyPTO kernel{'; ' + hint if hint else ''}")

    def run(self, body):
        for stmt in body:
            if self.returned is not None:
                return          # Python semantics: nothing after a return runs
            self.visit(stmt)

    # -- statements --------------------------------------------------------------------------
    def visit_Expr(self, node):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        self.visit(node.value)

    def visit_Pass(self, node):
        pass

    def visit_Assign(self, node):
        value = self.visit(node.value)
        for target in node.targets:
            self._bind(target, value)

    def visit_AnnAssign(self, node):
        if node.value is None:
            raise self.b.error("an annotation without a value is not supported")
        self._bind(node.target, self.visit(node.value))

    def visit_AugAssign(self, node):
        if not isinstance(node.target, ast.Name):
            raise self.b.error("augmented assignment needs a plain name on the left")
        current = self._lookup(node.target.id)
        value = self._binop(node.op, current, self.visit(node.value))
        self.env[node.target.id] = value

    def _bind(self, target, value):
        if isinstance(target, ast.Name):
            self.env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, (tuple, list)) or len(value) != len(target.elts):
                raise self.b.error(f"cannot unpack {self._describe(value)} into "
                                   f"{len(target.elts)} names")
            for t, v in zip(target.elts, value):
                self._bind(t, v)
        else:
            raise self.b.error("only names and tuples of names can be assigned to in a kernel")

    def visit_Return(self, node):
        self.returned = self.visit(node.value) if node.value is not None else ()

    def visit_If(self, node):
        cond = self.visit(node.test)
        if not isinstance(cond, Value):
            self.run(node.body if cond else node.orelse)
            return
        cond = semantics.to_bool(self.b, cond)
        names = [n for n in _assigned_names(node.body + node.orelse)]
        then_block, else_block = Block(), Block()
        pending = dict(self.b.pending)
        then_env = self._run_branch(then_block, node.body)
        self._check_pending(set(pending), "branch")
        after_then, self.b.pending = self.b.pending, dict(pending)
        else_env = self._run_branch(else_block, node.orelse)
        self._check_pending(set(pending), "branch")
        self.b.pending.update(after_then)     # pending if pending after either branch
        merged = []
        for n in names:
            t, e = then_env.get(n, _MISSING), else_env.get(n, _MISSING)
            if t is _MISSING or e is _MISSING:
                continue       # assigned in one branch only and not before: local to it
            if not isinstance(t, Value) and not isinstance(e, Value) and _same_constant(t, e):
                self.env[n] = t
                continue
            merged.append(n)
        yields = []
        for block, env in ((then_block, then_env), (else_block, else_env)):
            with self.b.at(block):
                vals = [semantics.to_loop_value(self.b, n, env[n]) for n in merged]
                yields.append(vals)
        for i, n in enumerate(merged):
            if yields[0][i].type != yields[1][i].type:
                self._unify_branch_types(n, i, then_block, else_block, yields)
        for block, vals in zip((then_block, else_block), yields):
            with self.b.at(block):
                self.b.emit("scf.yield", vals)
        op = self.b.emit("scf.if", [cond], [v.type for v in yields[0]],
                         blocks=[then_block, else_block])
        for n, r in zip(merged, op.results):
            r.hint = n
            self.env[n] = r
        for n in names:       # names bound in one branch only are not visible after the if
            if n not in merged and n not in self.env:
                self.env[n] = _OneBranch(n)

    def _run_branch(self, block: Block, body) -> dict:
        env = dict(self.env)
        gen = CodeGenerator(self.source, self.b, env)
        with self.b.at(block):
            gen.run(body)
        if gen.returned is not None:
            raise self.b.error("'return' inside an 'if' on a runtime condition is not "
                               "supported; assign to a variable and return after the if")
        return env

    def _unify_branch_types(self, name, i, then_block, else_block, yields):
        """Scalars of different kinds merge as float/int64; tiles must agree exactly."""
        t, e = yields[0][i], yields[1][i]
        if t.is_scalar and e.is_scalar:
            target = semantics.FLOAT if (t.type.dtype.is_floating or e.type.dtype.is_floating) \
                else semantics.INDEX
            with self.b.at(then_block):
                yields[0][i] = semantics.scalar_cast(self.b, t, target)
            with self.b.at(else_block):
                yields[1][i] = semantics.scalar_cast(self.b, e, target)
            return
        raise self.b.error(f"'{name}' is {t.type} in the 'if' branch but {e.type} in the "
                           "'else' branch; both branches must give it the same type")

    def visit_While(self, node):
        if node.orelse:
            raise self.b.error("'while ... else' is not supported")
        first = self.visit(node.test)
        if not isinstance(first, Value) and not first:
            return                     # never entered: Python skips the body
        carried = self._carried(node.body)
        if not carried and not isinstance(first, Value):
            raise self.b.error("this 'while' loop would never end: its condition is a "
                               "compile-time constant and the loop changes no variable")
        inits = [semantics.to_loop_value(self.b, n, self.env[n]) for n in carried]
        for _ in range(2):       # a second pass only if a carried int became a float
            before = Block([Value(v.type, n) for n, v in zip(carried, inits)])
            after = Block([Value(v.type, n) for n, v in zip(carried, inits)])
            before_env = dict(self.env)
            before_env.update(zip(carried, before.args))
            with self.b.at(before):
                test = CodeGenerator(self.source, self.b, before_env).visit(node.test)
                if not isinstance(test, Value):
                    raise self.b.error("the 'while' condition does not depend on the values "
                                       "the loop changes, so it is a constant; use an if, or "
                                       "a for")
                self.b.emit("scf.condition", [semantics.to_bool(self.b, test)] + before.args)
            body_env = dict(self.env)
            body_env.update(zip(carried, after.args))
            yields = self._loop_body(node.body, after, body_env, carried, inits)
            if yields is not None:
                break
        with self.b.at(after):
            self.b.emit("scf.yield", yields)
        op = self.b.emit("scf.while", inits, [v.type for v in inits], blocks=[before, after])
        for n, r in zip(carried, op.results):
            r.hint = n
            self.env[n] = r

    def _carried(self, body) -> list:
        return [n for n in _assigned_names(body) if n in self.env
                and not isinstance(self.env[n], _OneBranch)]

    def _loop_body(self, stmts, block, env, carried, inits):
        """Compile a loop body into ``block``; returns the yielded values, or None after
        widening ``inits`` in place when a carried int becomes a float (Python semantics:
        the loop is then compiled again with a float)."""
        inner = CodeGenerator(self.source, self.b, env)
        with self.b.at(block):
            inner.run(stmts)
            if inner.returned is not None:
                raise self.b.error("'return' inside a loop is not supported")
            values = [semantics.to_loop_value(self.b, n, env[n]) for n in carried]
        widened = False
        for i, (init, v) in enumerate(zip(inits, values)):
            if init.is_scalar and v.is_scalar and v.type.dtype.is_floating and \
                    not init.type.dtype.is_floating:
                inits[i] = semantics.scalar_cast(self.b, init, semantics.FLOAT)
                widened = True
        if widened:
            return None
        with self.b.at(block):
            return self._loop_yields(carried, inits, values)

    def _loop_yields(self, carried, inits, values) -> list:
        yields = []
        for n, init, v in zip(carried, inits, values):
            if v.type != init.type and v.is_scalar and init.is_scalar:
                v = semantics.scalar_cast(self.b, v, init.type.dtype)
            if v.type != init.type:
                where = v.owner.loc if v.owner is not None and v.owner.loc else self.b.loc
                raise CompilationError(
                    f"'{n}' changes type inside the loop: {init.type} before, {v.type} "
                    f"after one iteration; loop-carried values must keep their type",
                    where, self.b.call_chain)
            yields.append(v)
        return yields

    def visit_For(self, node):
        if node.orelse:
            raise self.b.error("'for ... else' is not supported")
        call = node.iter
        kind = self._range_kind(call)
        if kind is None:
            raise self.b.error("a kernel loop must iterate over range(...), pl.range(...) or "
                               "pl.static_range(...)")
        args = [self.visit(a) for a in call.args]
        kwargs = {k.arg: self.visit(k.value) for k in call.keywords}
        if kind == "static":
            self._static_for(node, args, kwargs)
            return
        stages = kwargs.pop("num_stages", None)
        if stages not in (None, 1, 2):
            raise self.b.error(f"num_stages must be 1 or 2 (double buffering), got {stages!r}")
        if kwargs or not 1 <= len(args) <= 3:
            raise self.b.error("range() takes 1 to 3 positional arguments")
        start, stop, step = ([0] + args + [1])[:3] if len(args) == 1 else (args + [1])[:3]
        if isinstance(step, int) and step <= 0:
            raise self.b.error("range() step must be positive in a kernel loop")
        if not isinstance(node.target, ast.Name):
            raise self.b.error("the loop variable must be a single name")
        name = node.target.id
        lb, ub, st = (semantics.to_index(self.b, v, what) for v, what in
                      ((start, "range start"), (stop, "range stop"), (step, "range step")))
        carried = [n for n in self._carried(node.body) if n != name]
        inits = [semantics.to_loop_value(self.b, n, self.env[n]) for n in carried]
        for _ in range(2):       # a second pass only if a carried int became a float
            iv = Value(ScalarType(dt.int64), name)
            body = Block([iv] + [Value(v.type, n) for n, v in zip(carried, inits)])
            env = dict(self.env)
            env[name] = iv
            env.update(zip(carried, body.args[1:]))
            pending_before = self._carry_pending(inits, body.args[1:])
            yields = self._loop_body(node.body, body, env, carried, inits)
            if yields is not None:
                break
        self._check_pending(pending_before, "loop iteration")
        with self.b.at(body):
            self.b.emit("scf.yield", yields)
        attrs = {"num_stages": stages} if stages == 2 else None
        op = self.b.emit("scf.for", [lb, ub, st] + inits, [v.type for v in inits], attrs,
                         blocks=[body])
        for n, r in zip(carried, op.results):
            r.hint = n
            self.env[n] = r
        self.env[name] = self._last_index(lb, ub, st, self.env.get(name))

    def _carry_pending(self, inits, args) -> set:
        """A pending buffer carried into a loop is pending inside it too; returns the pending
        set the body starts with."""
        for init, arg in zip(inits, args):
            if init.id in self.b.pending:
                self.b.pending[arg.id] = self.b.pending[init.id]
            if init.id in self.b.unfilled:
                self.b.unfilled[arg.id] = self.b.unfilled[init.id]
        return set(self.b.pending)

    def _check_pending(self, before: set, where: str) -> None:
        """An async_load started in a loop body or branch must be waited for inside it."""
        started = [n for k, n in self.b.pending.items() if k not in before]
        if started:
            raise self.b.error(f"async_load into '{started[0]}' is not waited for before the "
                               f"{where} ends; add pl.synchronize() after it")

    def _last_index(self, lb, ub, step, before):
        """Python leaves the loop variable at its last value (unchanged if no iteration ran)."""
        b = self.b
        span = semantics.binary(b, "sub", ub, lb)
        trips = semantics.binary(b, "floordiv", semantics.binary(
            b, "add", span, semantics.binary(b, "sub", step, 1)), step)
        last = semantics.binary(b, "add", lb, semantics.binary(
            b, "mul", semantics.binary(b, "sub", trips, 1), step))
        ran = semantics.compare(b, "gt", trips, 0)
        if isinstance(before, Value) and before.is_scalar and before.type.dtype == dt.int64:
            previous = before
        elif isinstance(before, int) and not isinstance(before, bool):
            previous = semantics.const(b, before, dt.int64)
        else:        # Python would leave it unbound after an empty loop
            previous = lb
        return b.emit("arith.select", [ran, last, previous], [ScalarType(dt.int64)]).result

    def _static_for(self, node, args, kwargs):
        """``pl.static_range``: the body is compiled once per value, with the index constant."""
        if kwargs or not 1 <= len(args) <= 3 or not all(
                isinstance(a, int) and not isinstance(a, bool) for a in args):
            raise self.b.error("static_range() takes 1 to 3 compile-time integers")
        if not isinstance(node.target, ast.Name):
            raise self.b.error("the loop variable must be a single name")
        values = range(*args)
        if len(values) > 4096:
            raise self.b.error(f"static_range() would unroll {len(values)} iterations; use "
                               "range() for long loops")
        for i in values:
            self.env[node.target.id] = i
            self.run(node.body)

    def _range_kind(self, call):
        if not isinstance(call, ast.Call):
            return None
        try:
            fn = self.visit(call.func)
        except CompilationError:
            return None
        if fn is range or getattr(fn, "__pypto_builtin__", None) == "range":
            return "dynamic"
        if getattr(fn, "__pypto_builtin__", None) == "static_range":
            return "static"
        return None

    def visit_Assert(self, node):
        cond = self.visit(node.test)
        if isinstance(cond, Value):
            raise self.b.error("assert needs a compile-time condition")
        if not cond:
            msg = self.visit(node.msg) if node.msg is not None else "assertion failed"
            raise self.b.error(str(msg))

    # -- expressions -------------------------------------------------------------------------
    def visit_Constant(self, node):
        return node.value

    def visit_Tuple(self, node):
        return tuple(self.visit(e) for e in node.elts)

    visit_List = visit_Tuple

    def visit_Name(self, node):
        return self._lookup(node.id)

    def _lookup(self, name):
        if name in self.env:
            value = self.env[name]
            if isinstance(value, _OneBranch):
                raise self.b.error(f"'{name}' is assigned in only one branch of an 'if' on a "
                                   "runtime condition; assign it before the if or in both "
                                   "branches")
            return value
        for scope, what in ((self.source.closure, "closure variable"),
                            (self.source.globals, "global")):
            if name in scope:
                return _check_global(self.b, name, scope[name], what)
        if hasattr(_py_builtins, name):
            return getattr(_py_builtins, name)
        raise self.b.error(f"name '{name}' is not defined")

    def visit_Attribute(self, node):
        base = self.visit(node.value)
        if isinstance(base, Value):
            return semantics.value_attribute(self.b, base, node.attr)
        try:
            return getattr(base, node.attr)
        except AttributeError:
            raise self.b.error(f"{self._describe(base)} has no attribute '{node.attr}'") from None

    def visit_Subscript(self, node):
        base = self.visit(node.value)
        index = self.visit(node.slice)
        if isinstance(base, Value) and base.is_tensor:
            return _call_checked(self.b, semantics_sync.slice_tensor, "tensor slice",
                                 [base, index], {})
        if isinstance(base, Value):
            return semantics.getitem(self.b, base, index)
        if isinstance(index, Value):
            raise self.b.error("indexing a compile-time sequence needs a compile-time index")
        return base[index]

    def visit_Slice(self, node):
        parts = [None if p is None else self.visit(p) for p in (node.lower, node.upper, node.step)]
        return slice(*parts)

    def visit_UnaryOp(self, node):
        operand = self.visit(node.operand)
        if isinstance(operand, Value):
            if isinstance(node.op, ast.UAdd):
                return operand
            if isinstance(node.op, ast.Not) and operand.is_tile:
                raise self.b.error("'not' on a tile is ambiguous; use ~mask for an "
                                   "elementwise not")
            return semantics.unary(self.b, PY_UNARYOPS[type(node.op)], operand)
        return {ast.USub: lambda x: -x, ast.UAdd: lambda x: +x, ast.Not: lambda x: not x,
                ast.Invert: lambda x: ~x}[type(node.op)](operand)

    def visit_BinOp(self, node):
        return self._binop(node.op, self.visit(node.left), self.visit(node.right))

    def _binop(self, op, lhs, rhs):
        if not isinstance(lhs, Value) and not isinstance(rhs, Value):
            return _fold(op, lhs, rhs, self.b)
        name = PY_BINOPS.get(type(op))
        if name is None:
            raise self.b.error(f"operator '{type(op).__name__}' is not supported on runtime "
                               "values")
        return semantics.binary(self.b, name, lhs, rhs)

    def visit_Compare(self, node):
        if len(node.ops) != 1:
            raise self.b.error("chained comparisons are not supported; combine two "
                               "comparisons with & (tiles) or 'and' (scalars)")
        lhs, rhs = self.visit(node.left), self.visit(node.comparators[0])
        op = node.ops[0]
        if isinstance(lhs, Value) or isinstance(rhs, Value):
            if type(op) not in PY_CMPOPS:
                raise self.b.error(f"comparison '{type(op).__name__}' is not supported on "
                                   "runtime values")
            return semantics.compare(self.b, PY_CMPOPS[type(op)], lhs, rhs)
        return _fold(op, lhs, rhs, self.b)

    def visit_BoolOp(self, node):
        values = [self.visit(v) for v in node.values]
        if not any(isinstance(v, Value) for v in values):
            result = values[0]
            for v in values[1:]:
                result = (result and v) if isinstance(node.op, ast.And) else (result or v)
            return result
        if any(isinstance(v, Value) and not v.is_scalar for v in values):
            raise self.b.error("'and'/'or' work on scalars; combine tiles with & and |")
        result = semantics.to_bool(self.b, values[0])
        name = "and" if isinstance(node.op, ast.And) else "or"
        for v in values[1:]:
            result = semantics.binary(self.b, name, result, semantics.to_bool(self.b, v))
        return result

    def visit_IfExp(self, node):
        cond = self.visit(node.test)
        if not isinstance(cond, Value):
            return self.visit(node.body if cond else node.orelse)
        cond = semantics.to_bool(self.b, cond)
        t, e = self.visit(node.body), self.visit(node.orelse)
        if isinstance(t, Value) and t.is_tile or isinstance(e, Value) and e.is_tile:
            raise self.b.error("a conditional expression on a runtime scalar cannot choose "
                               "between tiles; use an if statement or pl.where")
        t, e = semantics._scalar_operand(self.b, t), semantics._scalar_operand(self.b, e)
        dtype = semantics.FLOAT if t.type.dtype.is_floating or e.type.dtype.is_floating else \
            (dt.bool_ if t.type.dtype == e.type.dtype == dt.bool_ else semantics.INDEX)
        t, e = semantics.scalar_cast(self.b, t, dtype), semantics.scalar_cast(self.b, e, dtype)
        return self.b.emit("arith.select", [cond, t, e], [ScalarType(dtype)]).result

    def visit_JoinedStr(self, node):
        raise self.b.error("f-strings are not supported inside kernels")

    def visit_Call(self, node):
        fn = self.visit(node.func)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                args.extend(self.visit(a.value))
            else:
                args.append(self.visit(a))
        kwargs = {k.arg: self.visit(k.value) for k in node.keywords}
        if isinstance(fn, BoundMethod):
            return semantics.call_method(self.b, fn, args, kwargs)
        name = getattr(fn, "__pypto_builtin__", None)
        if name == "async_load":
            return self._async_load(node, args, kwargs)
        if name == "synchronize":
            self.b.pending.clear()
            return None
        if name == "breakpoint" or fn is _py_builtins.breakpoint:
            return self._breakpoint(args, kwargs)
        if name is not None:
            handler = BUILTINS.get(name)
            if handler is None:
                raise self.b.error(f"pl.{name} is not implemented yet")
            return _call_checked(self.b, handler, name, args, kwargs)
        from ..runtime.jit import JITFunction
        if isinstance(fn, JITFunction):
            return self._inline(fn, args, kwargs, node)
        if fn in semantics.PY_BUILTINS:
            return _call_checked(self.b, semantics.PY_BUILTINS[fn], fn.__name__, args, kwargs)
        if isinstance(fn, type) and issubclass(fn, constexpr):
            return args[0] if args else None
        if any(isinstance(a, Value) for a in list(args) + list(kwargs.values())):
            raise self.b.error(f"cannot call {self._describe(fn)} on runtime values inside a "
                               "kernel; only pypto.language functions and @pypto.jit functions")
        try:
            return fn(*args, **kwargs)  # compile-time evaluation on constants (e.g. math.log2)
        except Exception as e:  # noqa: BLE001 - shown to the user at their line
            raise self.b.error(f"calling {self._describe(fn)} at compile time failed: {e}")

    def _async_load(self, node, args, kwargs):
        """``async_load(src, buf)`` compiles as ``buf = <load of src>``, pending until
        ``synchronize()``."""
        target = _async_load_buffer(node)
        if not isinstance(target, ast.Name):
            raise self.b.error("async_load(): the buffer must be a variable name (the name "
                               "pl.alloc_buffer's result is bound to)")
        tile = _call_checked(self.b, semantics_sync.async_load, "async_load", args, kwargs)
        self.env[target.id] = tile
        self.b.pending[tile.id] = target.id
        return None

    def _breakpoint(self, args, kwargs):
        """The tiles bound to names here (loaded ones, not pending or unfilled buffers)."""
        if args or kwargs:
            raise self.b.error("breakpoint() takes no arguments")
        live = {n: v for n, v in self.env.items() if isinstance(v, Value) and v.is_tile
                and v.id not in self.b.pending and v.id not in self.b.unfilled}
        semantics_sync.breakpoint(self.b, live)

    def _inline(self, callee, args, kwargs, node):
        """Compile ``callee``'s body in place with its parameters bound to the call's values."""
        source = callee.source
        if callee in self.b.inlining:
            raise self.b.error(f"{callee.__name__} calls itself (directly or through other jit "
                               "functions); jit calls are inlined, so recursion is not "
                               "supported")
        try:
            bound = callee.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise self.b.error(f"call to {callee.__name__}: {e}") from None
        bound.apply_defaults()
        env = dict(bound.arguments)
        saved_source = self.b.source
        self.b.call_chain.insert(0, str(self.b.loc))
        self.b.source = source
        gen = CodeGenerator(source, self.b, env)
        self.b.inlining += (callee,)
        try:
            gen.run(source.node.body)
        finally:
            self.b.source = saved_source
            self.b.call_chain.pop(0)
            self.b.inlining = self.b.inlining[:-1]
        return gen.returned

    @staticmethod
    def _describe(x) -> str:
        if isinstance(x, Value):
            return f"a {x.type}"
        return f"{type(x).__name__} {x!r}" if not callable(x) else getattr(x, "__name__", repr(x))


class _OneBranch:
    """Marks a name bound in only one branch of a runtime ``if``: an error if read later."""

    def __init__(self, name):
        self.name = name


_MISSING = object()


def _same_constant(a, b) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 - arrays and other odd objects are never "the same"
        return False


_ALLOWED_GLOBAL_TYPES = (int, float, bool, str, type(None), dt.dtype, type, tuple,
                         types.ModuleType, types.FunctionType, types.BuiltinFunctionType)


def _check_global(b, name, value, what):
    """Kernels may read constants, modules, dtypes and functions from their globals; anything
    mutable (arrays, lists, dicts, objects) would silently freeze at its compile-time value."""
    if isinstance(value, constexpr):
        return value.value
    from ..runtime.jit import JITFunction
    if isinstance(value, JITFunction) or isinstance(value, _ALLOWED_GLOBAL_TYPES) or \
            hasattr(value, "__pypto_builtin__") or isinstance(value, (np.integer, np.floating)):
        if isinstance(value, tuple) and not all(
                isinstance(v, (int, float, bool, str, dt.dtype)) for v in value):
            raise b.error(f"{what} '{name}' is a tuple of non-constants; kernels can only read "
                          "constants, modules and functions from globals")
        return value
    raise b.error(f"{what} '{name}' is a {type(value).__name__}; kernels can only read "
                  "constants (int, float, pl.constexpr(...)), dtypes, modules and functions "
                  "from globals. Pass it as an argument instead")


def _call_checked(b: Builder, handler, name, args, kwargs):
    try:
        inspect.signature(handler).bind(b, *args, **kwargs)
    except TypeError as e:
        raise b.error(f"{name}(): {e}") from None
    return handler(b, *args, **kwargs)


_FOLD = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a ** b, ast.LShift: lambda a, b: a << b, ast.RShift: lambda a, b: a >> b,
    ast.BitAnd: lambda a, b: a & b, ast.BitOr: lambda a, b: a | b, ast.BitXor: lambda a, b: a ^ b,
    ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
    ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}


def _fold(op, a, b, builder):
    try:
        return _FOLD[type(op)](a, b)
    except Exception as e:  # noqa: BLE001
        raise builder.error(f"compile-time evaluation failed: {e}") from None


def build_function(source: KernelSource, spec_args: dict, name: str) -> Function:
    """Tile IR for ``source`` specialised on ``spec_args``: parameter name → Value or constant."""
    builder = Builder(source)
    body = Block()
    params = [v for v in spec_args.values() if isinstance(v, Value)]
    builder.block = body
    gen = CodeGenerator(source, builder, dict(spec_args))
    gen.run(source.node.body)
    if gen.returned not in (None, ()):
        builder.loc = None
        raise CompilationError("a launched kernel cannot return a value; store it to a tensor",
                               source.loc(source.node))
    return Function(name, params, body)


def tensor_param(name: str, dtype: dt.dtype, rank: int, layout: str = "ND",
                 shape: tuple = ()) -> Value:
    return Value(TensorType(dtype, rank, layout, tuple(shape)), name)


def scalar_param(name: str, dtype: dt.dtype) -> Value:
    return Value(ScalarType(dtype), name)
