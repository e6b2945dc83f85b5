"""The name a placeholder gets when the user gives none: the variable it is assigned to.

The seed writes ``input_a = graph.placeholder(shape=..., dtype=...)`` and later runs the
module with ``{"input_a": ...}``, so the name must come from the assignment statement at the
call site. We find the exact call being executed in the caller's frame (its bytecode position,
``co_positions``; on Python 3.10, which has no column table, the statement at ``f_lineno`` and
the rank of the executing call among the statement's call instructions, matched to its calls
in evaluation order), parse the caller's source (``linecache``, so files, notebooks and
``linecache``-registered code all work) and read the assignment's target. Anything we cannot
read that way (no source, ``f(graph.placeholder(...))``, an attribute target) gives None and
the caller falls back to ``input0``, ``input1``...
"""
from __future__ import annotations

import ast
import dis
import linecache

_TREES: dict[str, tuple] = {}      # filename -> (source lines, parsed module)


def assigned_name(frame) -> str | None:
    """The plain variable name the call executing in ``frame`` is assigned to, or None."""
    try:
        tree = _tree(frame.f_code.co_filename, frame.f_globals)
        position = _call_position(frame, tree)
    except Exception:  # noqa: BLE001 - any failure means "unknown": the caller falls back
        return None
    if position is None or tree is None:
        return None
    for node in ast.walk(tree):
        name = _target_of(node, position)
        if name is not None:
            return name
    return None


def _call_position(frame, tree):
    """(line, end line, column, end column) of the instruction the frame is executing."""
    if not hasattr(frame.f_code, "co_positions"):
        return _position_from_lines(frame, tree)
    positions = list(frame.f_code.co_positions())
    index = frame.f_lasti // 2
    if not 0 <= index < len(positions):
        return None
    position = positions[index]
    return None if None in position else position


def _position_from_lines(frame, tree):
    """Python 3.10: the executing call found by its rank among the call instructions of its
    statement (bytecode calls its callee's sub-calls and its arguments' calls first: the
    statement's ``ast.Call`` nodes in post-order)."""
    if tree is None:
        return None
    statement = _statement_at(tree, frame.f_lineno)
    if statement is None:
        return None
    lines = range(statement.lineno, statement.end_lineno + 1)
    line, rank, count = None, None, 0
    for ins in dis.get_instructions(frame.f_code):
        line = ins.starts_line if ins.starts_line is not None else line
        if line in lines and ins.opname.startswith("CALL"):
            if ins.offset == frame.f_lasti:
                rank = count
            count += 1
    calls = [n for n in _post_order(statement) if isinstance(n, ast.Call)]
    if rank is None or len(calls) != count:
        return None
    call = calls[rank]
    return call.lineno, call.end_lineno, call.col_offset, call.end_col_offset


def _statement_at(tree, line: int):
    """The innermost simple statement spanning ``line``."""
    found = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.Expr)) and \
                node.lineno <= line <= node.end_lineno:
            if found is None or node.end_lineno - node.lineno < found.end_lineno - found.lineno:
                found = node
    return found


def _post_order(node):
    """``node``'s subtree in evaluation order of calls: children (in field order) first."""
    for child in ast.iter_child_nodes(node):
        yield from _post_order(child)
    yield node


def _tree(filename: str, module_globals):
    lines = linecache.getlines(filename, module_globals)
    if not lines:
        return None
    cached = _TREES.get(filename)
    if cached is not None and cached[0] == lines:
        return cached[1]
    tree = ast.parse("".join(lines))
    _TREES[filename] = (list(lines), tree)
    return tree


def _at(node, position) -> bool:
    return isinstance(node, ast.Call) and (node.lineno, node.end_lineno, node.col_offset,
                                           node.end_col_offset) == position


def _target_of(node, position) -> str | None:
    """The name ``node`` (an assignment) binds to the call at ``position``, if it does."""
    if isinstance(node, ast.Assign):
        targets, value = node.targets, node.value
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        targets, value = [node.target], node.value
    else:
        return None
    target = targets[0]
    if _at(value, position):
        return target.id if isinstance(target, ast.Name) else None
    if isinstance(value, ast.Tuple) and isinstance(target, ast.Tuple) and \
            len(value.elts) == len(target.elts):
        for v, t in zip(value.elts, target.elts):
            if _at(v, position):
                return t.id if isinstance(t, ast.Name) else None
    return None


def unique_name(base: str, taken) -> str:
    """``base``, or ``base_1``, ``base_2``, ... : the first not in ``taken``."""
    name, i = base, 1
    while name in taken:
        name = f"{base}_{i}"
        i += 1
    return name
