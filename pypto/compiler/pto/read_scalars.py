"""The reader's ``arith`` statements and the printer's scalar macros read back.

Handlers of the reader's statement table (``reader._STATEMENTS``), each a function of the
parser ``p`` (``reader.Parser``: ``value``, ``define``, ``dtype``, ``match``, ``error``)
and of the statement's results, operands and scope. A macro (``spelling``: a non-finite
constant, a bool as a float, a float ``%`` or ``//``, ``a + b`` as ``a - (-b)``, a block
index over a multi-dimensional grid, Python's integer ``%``) is recognised by writing it again
from the names it ends in and comparing, so reader and printer cannot drift apart.
"""
from __future__ import annotations

import re

from ...language import dtypes as dt
from .program import Inst
from .spelling import (BINARY, CMP_PREDICATES, CMP_UNSIGNED, COMPARE, FLOAT_MACROS, FLOAT_NAMES,
                       INT_NAMES, SELECT, UNARY, UNSIGNED_FORMS, block_query_lines,
                       bool_to_float_lines, constant_value, nonfinite_constant)
from .spelling import SSA_NAME as _N


def _read_unsigned(values) -> None:
    """An unsigned form (``maxui``, ``cmpi ult``) read its i8 operands as unsigned: they were
    (arith is signless; PyPTO's one unsigned integer is uint8)."""
    for v in values:
        if v.dtype == dt.int8:
            v.dtype = dt.uint8


def macro_end(p, result: str, line: str, scope, out: list) -> None:
    """The last line of a block-index macro (block_query_lines)."""
    lines = scope.derived.pop(result) + [line]
    select = re.fullmatch(rf"{re.escape(result)} = arith\.select ({_N}), .* : (\w+)", line)
    if select and bool_to_float_lines(result, select.group(1), select.group(2)) == lines:
        res = p.define(result, p.dtype(select.group(2)), scope)
        out.append(Inst("arith.cast", [p.value(select.group(1), scope)], [res],
                        {"dtype": res.dtype}))
        return
    found = nonfinite_constant(result, lines)
    if found is not None:
        res = p.define(result, p.dtype(found[1]), scope)
        out.append(Inst("arith.constant", [], [res], {"value": found[0]}))
        return
    add = re.fullmatch(rf"{re.escape(result)}\.n = arith\.negf ({_N}) : (\w+)", lines[0])
    sub = re.fullmatch(rf"{re.escape(result)} = arith\.subf ({_N}), "
                       rf"{re.escape(result)}\.n : (\w+)", lines[-1])
    if len(lines) == 2 and add and sub:          # printer: a + b as a - (-b)
        ins = [p.value(sub.group(1), scope), p.value(add.group(1), scope)]
        out.append(Inst("arith.add", ins, [p.define(result, p.dtype(add.group(2)),
                                                    scope)]))
        return
    macro = float_macro(p, result, lines, scope)
    if macro is not None:
        out.append(macro)
        return
    for op in ("pto.program_id", "pto.num_programs"):
        for axis in range(3):
            if block_query_lines(result, op, axis, True) == lines:
                res = p.define(result, dt.int64, scope)
                out.append(Inst(op, [], [res], {"axis": axis}))
                return
    raise p.error(f"the lines deriving {result} are not a block index or count "
                  f"as the printer writes them")


def float_macro(p, result: str, lines: list[str], scope) -> Inst | None:
    """``FLOAT_MACROS``: a float ``%`` or ``//`` written as several lines."""
    first = re.fullmatch(rf"{re.escape(result)}(?:\.md)?\.m = arith\.remf ({_N}), ({_N}) "
                         r": (\w+)", lines[0])
    if first is None:
        return None
    a, b, ty = first.groups()
    for name, macro in FLOAT_MACROS.items():
        if macro(result, a, b, ty) == lines:
            ins = [p.value(a, scope), p.value(b, scope)]
            return Inst(f"arith.{name}", ins, [p.define(result, p.dtype(ty), scope)])
    return None


def s_block_query(p, op, results, rest, scope, out):
    if rest.strip():
        raise p.error(f"{op} takes no operands or attributes")
    name = "pto.program_id" if op == "pto.get_block_idx" else "pto.num_programs"
    res = p.define(p.one(results), dt.int64, scope)
    out.append(Inst(name, [], [res], {"axis": 0}))


def s_subblock(p, op, results, rest, scope, out):
    """Which of the cluster's two AIVs runs this (a vector part both run, split_rows.py)."""
    if rest.strip():
        raise p.error(f"{op} takes no operands or attributes")
    out.append(Inst(op, [], [p.define(p.one(results), dt.int64, scope)]))


def s_constant(p, op, results, rest, scope, out):
    value, _, ty = rest.strip().rpartition(" : ")
    res = p.define(p.one(results), p.dtype(ty), scope)
    out.append(Inst("arith.constant", [], [res], {"value": constant_value(value, ty)}))


def s_cast(p, op, results, rest, scope, out):
    m = p.match(UNARY, rest, op)
    src = p.value(m.group(1), scope)
    dtype = p.dtype(m.group(3))
    if op in ("arith.extui", "arith.uitofp") and src.dtype == dt.int8:
        src.dtype = dt.uint8        # read as unsigned: it was (arith is signless)
    if op == "arith.fptoui" and dtype == dt.int8:
        dtype = dt.uint8
    res = p.define(p.one(results), dtype, scope)
    out.append(Inst("arith.cast", [src], [res], {"dtype": res.dtype}))


def s_select(p, op, results, rest, scope, out):
    m = p.match(SELECT, rest, op)
    ins = [p.value(n, scope) for n in m.groups()[:3]]
    res = p.define(p.one(results), p.dtype(m.group(4)), scope)
    out.append(Inst("arith.select", ins, [res]))


def s_cmp(p, op, results, rest, scope, out):
    m = p.match(COMPARE, rest, op)
    if m.group(1) not in CMP_PREDICATES:
        raise p.error(f"unknown comparison predicate {m.group(1)}")
    ins = [p.value(n, scope) for n in m.groups()[1:3]]
    if m.group(1) in CMP_UNSIGNED.values() and m.group(1) not in ("eq", "ne"):
        _read_unsigned(ins)
    res = p.define(p.one(results), dt.bool_, scope)
    out.append(Inst("arith.cmp", ins, [res], {"pred": CMP_PREDICATES[m.group(1)]}))


def s_binary(p, op, results, rest, scope, out):
    a, b, ty = p.match(BINARY, rest, op).groups()
    dtype, result = p.dtype(ty), p.one(results)
    if op == "arith.addi" and scope.consts.get(b) == (0, "i64") and (
            a in scope.consts or a in scope.extents):
        out.append(tensor_dim(p, a, result, scope))
        return
    mnemonic = op[len("arith."):]
    if dtype.is_floating:
        name = FLOAT_NAMES.get(mnemonic, mnemonic.removesuffix("f"))
    else:
        name = INT_NAMES.get(mnemonic, mnemonic.removesuffix("i"))
    mod = python_mod(p, result, a, b, ty) if op == "arith.floordivsi" else None
    if mod is not None:
        name, result = "mod", mod
    ins = [p.value(a, scope), p.value(b, scope)]
    if mnemonic in UNSIGNED_FORMS:
        _read_unsigned(ins)
        dtype = ins[0].dtype
    out.append(Inst(f"arith.{name}", ins, [p.define(result, dtype, scope)]))


def python_mod(p, q: str, a: str, b: str, ty: str) -> str | None:
    """Is ``q = a floordiv b`` the first of the printer's three lines for ``a % b``
    (through its temporaries %qN and %mN+1)? If so, consume the other two and return the
    name of the remainder."""
    n = re.fullmatch(r"%q(\d+)", q)
    if n is None or p.i + 1 >= len(p.lines):
        return None
    m = f"%m{int(n.group(1)) + 1}"
    mul, sub = p.lines[p.i][1], p.lines[p.i + 1][1]
    tail = re.fullmatch(rf"({_N}) = arith\.subi {re.escape(a)}, {m} : {ty}", sub)
    if mul != f"{m} = arith.muli {q}, {b} : {ty}" or tail is None:
        return None
    p.next()
    p.next()
    return tail.group(1)


def tensor_dim(p, extent: str, result: str, scope) -> Inst:
    """``arith.addi <extent>, %c0_i64``: a dynamic extent names its tensor; a specialised
    one is the same number whichever tensor it came from."""
    if extent in scope.extents:
        tensor, axis = scope.extents[extent]
    else:
        value = scope.consts[extent][0]
        found = [(p, i) for p in scope.tensor_views.values()
                 for i, d in enumerate(p.dims) if d == value]
        if not found:
            raise p.error(f"no tensor has an extent of {value}")
        tensor, axis = found[0]
    return Inst("tensor.dim", [tensor], [p.define(result, dt.int64, scope)],
                {"axis": axis})
