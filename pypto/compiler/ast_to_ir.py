"""Python AST → Tile IR.

The kernel's source is parsed with ``ast`` and walked; it is never executed. Names bound to
Python objects (constexprs, modules, dtypes, tuples) stay Python objects and fold at compile
time; runtime values are IR ``Value``s. Calls to kernel-language stubs are dispatched through
``semantics.BUILTINS``; calls to other ``@pypto.jit`` functions are inlined. Control flow is
``control_flow.py``'s.
"""
from __future__ import annotations

import ast
import builtins as _py_builtins
import inspect
import types

import numpy as np

from ..errors import CompilationError
from ..language import dtypes as dt
from ..language.core import constexpr
from .builder import Builder
from .control_flow import ControlFlow, OneBranch, async_load_buffer
from .elementwise import PY_BINOPS, PY_CMPOPS, PY_UNARYOPS
from .ir import Block, Function, ScalarType, TensorType, Value
from .semantics import BUILTINS, PY_BUILTINS, BoundMethod, call_method, sync, value_attribute
from .semantics.arithmetic import binary, compare, unary
from .semantics.memory import TRITON_KEYWORDS
from .semantics.scalar import FLOAT, INDEX, scalar_cast, scalar_operand, to_bool
from .semantics.tile import getitem
from .source import KernelSource, is_jit_function


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
                "JoinedStr": "an f-string", "Starred": "*unpacking", "Assert": "assert",
                "NamedExpr": "an assignment expression (:=)"}
_LISTS = ("kernels have no lists: write a tuple (a, b, c), or unroll with "
          "`for i in pl.static_range(n):`")
UNSUPPORTED_HINTS = {
    "ListComp": _LISTS, "SetComp": _LISTS, "DictComp": _LISTS, "GeneratorExp": _LISTS,
    "List": _LISTS, "Set": _LISTS, "Dict": "use separate names or a tuple",
    "Try": "a kernel cannot raise or catch: out-of-range loads pad and stores clip by "
           "definition; choose values with pl.where, or test scalars with if",
    "TryStar": "a kernel cannot raise or catch",
    "Raise": "check compile-time facts with pl.static_assert(cond, msg)",
    "NamedExpr": "assign on a line of its own first (m = n), then use the name",
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


class CodeGenerator(ControlFlow, ast.NodeVisitor):
    """Compiles statements and expressions into the builder's current block; ``env`` maps the
    names in scope to IR values or compile-time Python objects."""

    def __init__(self, source: KernelSource, builder: Builder, env: dict):
        self.source = source
        self.b = builder
        self.env = env
        self.returned = None
        self.return_node = None         # where the kernel returns (its line, for the error)

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
        self.return_node = node

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
            if isinstance(value, OneBranch):
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
            return value_attribute(self.b, base, node.attr)
        try:
            return getattr(base, node.attr)
        except AttributeError:
            hint = ("; kernels have no lists (a [...] display is a tuple): build a new "
                    "tuple, ts = ts + (t,)") if isinstance(base, tuple) else ""
            raise self.b.error(f"{self._describe(base)} has no attribute "
                               f"'{node.attr}'{hint}") from None

    def visit_Subscript(self, node):
        base = self.visit(node.value)
        index = self.visit(node.slice)
        if isinstance(base, Value) and base.is_tensor:
            return _call_checked(self.b, sync.slice_tensor, "tensor slice",
                                 [base, index], {})
        if isinstance(base, Value):
            return getitem(self.b, base, index)
        if isinstance(index, Value):
            raise self.b.error("indexing a compile-time sequence needs a compile-time index")
        try:
            return base[index]
        except IndexError:
            what = f"a tuple of {len(base)}" if isinstance(base, tuple) else \
                f"{type(base).__name__} of length {len(base)}"
            raise self.b.error(f"index {index!r} is out of range for {what} (x.shape has one "
                               f"entry per axis)") from None

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
            return unary(self.b, PY_UNARYOPS[type(node.op)], operand)
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
        return binary(self.b, name, lhs, rhs)

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
            return compare(self.b, PY_CMPOPS[type(op)], lhs, rhs)
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
        result = to_bool(self.b, values[0])
        name = "and" if isinstance(node.op, ast.And) else "or"
        for v in values[1:]:
            result = binary(self.b, name, result, to_bool(self.b, v))
        return result

    def visit_IfExp(self, node):
        cond = self.visit(node.test)
        if not isinstance(cond, Value):
            return self.visit(node.body if cond else node.orelse)
        cond = to_bool(self.b, cond)
        t, e = self.visit(node.body), self.visit(node.orelse)
        if isinstance(t, Value) and t.is_tile or isinstance(e, Value) and e.is_tile:
            raise self.b.error("a conditional expression on a runtime scalar cannot choose "
                               "between tiles; use an if statement or pl.where")
        t, e = scalar_operand(self.b, t), scalar_operand(self.b, e)
        dtype = FLOAT if t.type.dtype.is_floating or e.type.dtype.is_floating else \
            (dt.bool_ if t.type.dtype == e.type.dtype == dt.bool_ else INDEX)
        t, e = scalar_cast(self.b, t, dtype), scalar_cast(self.b, e, dtype)
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
            return call_method(self.b, fn, args, kwargs)
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
        if is_jit_function(fn):
            return self._inline(fn, args, kwargs, node)
        if fn in PY_BUILTINS:
            return _call_checked(self.b, PY_BUILTINS[fn], fn.__name__, args, kwargs)
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
        target = async_load_buffer(node)
        if not isinstance(target, ast.Name):
            raise self.b.error("async_load(): the buffer must be a variable name (the name "
                               "pl.alloc_buffer's result is bound to)")
        tile = _call_checked(self.b, sync.async_load, "async_load", args, kwargs)
        self.env[target.id] = tile
        self.b.pending[tile.id] = target.id
        return None

    def _breakpoint(self, args, kwargs):
        """The tiles bound to names here (loaded ones, not pending or unfilled buffers)."""
        if args or kwargs:
            raise self.b.error("breakpoint() takes no arguments")
        live = {n: v for n, v in self.env.items() if isinstance(v, Value) and v.is_tile
                and v.id not in self.b.pending and v.id not in self.b.unfilled}
        sync.breakpoint(self.b, live)

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


_ALLOWED_GLOBAL_TYPES = (int, float, bool, str, type(None), dt.dtype, type, tuple,
                         types.ModuleType, types.FunctionType, types.BuiltinFunctionType)


def _check_global(b, name, value, what):
    """Kernels may read constants, modules, dtypes and functions from their globals; anything
    mutable (arrays, lists, dicts, objects) would silently freeze at its compile-time value."""
    if isinstance(value, constexpr):
        return value.value
    if is_jit_function(value) or isinstance(value, _ALLOWED_GLOBAL_TYPES) or \
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
    triton = TRITON_KEYWORDS.get(name, {})
    for keyword in kwargs:
        if keyword in triton:                  # Triton's mask=/other=: say what to write
            raise b.error(triton[keyword])
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
                               source.loc(gen.return_node or source.node))
    return Function(name, params, body)


def tensor_param(name: str, dtype: dt.dtype, rank: int, layout: str = "ND",
                 shape: tuple = (), dims: tuple = ()) -> Value:
    return Value(TensorType(dtype, rank, layout, tuple(shape), tuple(dims)), name)


def scalar_param(name: str, dtype: dt.dtype) -> Value:
    return Value(ScalarType(dtype), name)
