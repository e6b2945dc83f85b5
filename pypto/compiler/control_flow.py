"""How ``if``, ``while`` and ``for`` compile: a branch on a constant or a ``static_range`` runs
at compile time; on a runtime value it becomes an ``scf`` op whose results are the names the
block (re)binds, with their types unified and pending async_loads checked at its end.
"""
from __future__ import annotations

import ast

from ..errors import CompilationError
from ..language import dtypes as dt
from .ir import Block, ScalarType, Value
from .semantics.arithmetic import binary, compare
from .semantics.scalar import FLOAT, INDEX, const, scalar_cast, to_bool, to_index, to_loop_value


def _assigned_names(stmts) -> list[str]:
    """Names a block of statements (re)binds, in first-assignment order (the buffer named by
    ``async_load(src, buf)`` is rebound too)."""
    seen: dict[str, None] = {}
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                seen.setdefault(node.id, None)
            buffer = async_load_buffer(node)
            if isinstance(buffer, ast.Name):
                seen.setdefault(buffer.id, None)
    return list(seen)


def async_load_buffer(node):
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


class OneBranch:
    """Marks a name bound in only one branch of a runtime ``if``: an error if read later."""

    def __init__(self, name):
        self.name = name


_MISSING = object()


def _same_constant(a, b) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 - arrays and other odd objects are never "the same"
        return False


class ControlFlow:
    """The control-flow statements of ``CodeGenerator`` (ast_to_ir.py), which it mixes in: they
    use its ``visit``, ``run``, ``env``, ``b`` (the builder) and ``source``."""

    def _nested(self, env: dict):
        """A generator for a nested block: the same source and builder, names of its own."""
        return type(self)(self.source, self.b, env)

    def visit_If(self, node):
        cond = self.visit(node.test)
        if not isinstance(cond, Value):
            self.run(node.body if cond else node.orelse)
            return
        cond = to_bool(self.b, cond)
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
                vals = [to_loop_value(self.b, n, env[n]) for n in merged]
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
                self.env[n] = OneBranch(n)

    def _run_branch(self, block: Block, body) -> dict:
        env = dict(self.env)
        gen = self._nested(env)
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
            target = FLOAT if (t.type.dtype.is_floating or e.type.dtype.is_floating) \
                else INDEX
            with self.b.at(then_block):
                yields[0][i] = scalar_cast(self.b, t, target)
            with self.b.at(else_block):
                yields[1][i] = scalar_cast(self.b, e, target)
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
        inits = [to_loop_value(self.b, n, self.env[n]) for n in carried]
        for _ in range(2):       # a second pass only if a carried int became a float
            before = Block([Value(v.type, n) for n, v in zip(carried, inits)])
            after = Block([Value(v.type, n) for n, v in zip(carried, inits)])
            before_env = dict(self.env)
            before_env.update(zip(carried, before.args))
            with self.b.at(before):
                test = self._nested(before_env).visit(node.test)
                if not isinstance(test, Value):
                    raise self.b.error("the 'while' condition does not depend on the values "
                                       "the loop changes, so it is a constant; use an if, or "
                                       "a for")
                self.b.emit("scf.condition", [to_bool(self.b, test)] + before.args)
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
                and not isinstance(self.env[n], OneBranch)]

    def _loop_body(self, stmts, block, env, carried, inits):
        """Compile a loop body into ``block``; returns the yielded values, or None after
        widening ``inits`` in place when a carried int becomes a float (Python semantics:
        the loop is then compiled again with a float)."""
        inner = self._nested(env)
        with self.b.at(block):
            inner.run(stmts)
            if inner.returned is not None:
                raise self.b.error("'return' inside a loop is not supported")
            values = [to_loop_value(self.b, n, env[n]) for n in carried]
        widened = False
        for i, (init, v) in enumerate(zip(inits, values)):
            if init.is_scalar and v.is_scalar and v.type.dtype.is_floating and \
                    not init.type.dtype.is_floating:
                inits[i] = scalar_cast(self.b, init, FLOAT)
                widened = True
        if widened:
            return None
        with self.b.at(block):
            return self._loop_yields(carried, inits, values)

    def _loop_yields(self, carried, inits, values) -> list:
        yields = []
        for n, init, v in zip(carried, inits, values):
            if v.type != init.type and v.is_scalar and init.is_scalar:
                v = scalar_cast(self.b, v, init.type.dtype)
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
        lb, ub, st = (to_index(self.b, v, what) for v, what in
                      ((start, "range start"), (stop, "range stop"), (step, "range step")))
        carried = [n for n in self._carried(node.body) if n != name]
        inits = [to_loop_value(self.b, n, self.env[n]) for n in carried]
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
        span = binary(b, "sub", ub, lb)
        trips = binary(b, "floordiv", binary(
            b, "add", span, binary(b, "sub", step, 1)), step)
        last = binary(b, "add", lb, binary(
            b, "mul", binary(b, "sub", trips, 1), step))
        ran = compare(b, "gt", trips, 0)
        if isinstance(before, Value) and before.is_scalar and before.type.dtype == dt.int64:
            previous = before
        elif isinstance(before, int) and not isinstance(before, bool):
            previous = const(b, before, dt.int64)
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
