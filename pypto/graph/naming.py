"""The name a placeholder gets when the user gives none: the variable it is assigned to.

The seed writes ``input_a = graph.placeholder(shape=..., dtype=...)`` and later runs the
module with ``{"input_a": ...}``, so the name must come from the assignment statement at the
call site. We find the exact call being executed in the caller's frame (its bytecode position,
``co_positions``), parse the caller's source (``linecache``, so files, notebooks and
``linecache``-registered code all work) and read the assignment's target. Anything we cannot
read that way (no source, ``f(graph.placeholder(...))``, an attribute target) gives None and
the caller falls back to ``input0``, ``input1``...
"""
from __future__ import annotations

import ast
import linecache

_TREES: dict[str, tuple] = {}      # filename -> (source lines, parsed module)


def assigned_name(frame) -> str | None:
    """The plain variable name the call executing in ``frame`` is assigned to, or None."""
    try:
        position = _call_position(frame)
        tree = _tree(frame.f_code.co_filename, frame.f_globals)
    except Exception:  # noqa: BLE001 - any failure means "unknown": the caller falls back
        return None
    if position is None or tree is None:
        return None
    for node in ast.walk(tree):
        name = _target_of(node, position)
        if name is not None:
            return name
    return None


def _call_position(frame):
    """(line, end line, column, end column) of the instruction the frame is executing."""
    positions = list(frame.f_code.co_positions())
    index = frame.f_lasti // 2
    if not 0 <= index < len(positions):
        return None
    position = positions[index]
    return None if None in position else position


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
