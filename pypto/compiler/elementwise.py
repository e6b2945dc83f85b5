"""Elementwise operators as data.

One row per op ties together its spelling in kernels, the PTO instruction that implements it
natively (tile–tile and tile–scalar forms; ``None`` where PTO has none and the legalisation
pass decomposes it), the operand kinds it accepts and its result kind. The frontend, the
legalisation pass, the PTO lowering and the LLVM lowering all read these tables, so adding an
elementwise op is a row here, a lowering rule in the backend and a reference in the
interpreter.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

@dataclass(frozen=True)
class UnaryOp:
    name: str
    pto: str | None           # native PTO instruction, or None: decomposed by legalisation
    kinds: str                # operand kinds accepted: subset of "fib"
    promote_to_float: bool = False   # int operands are converted to float32 first


@dataclass(frozen=True)
class BinaryOp:
    name: str
    pto: str | None
    pto_scalar: str | None
    kinds: str
    result: str = "same"      # "same" or "bool"
    promote_to_float: bool = False


UNARY = {op.name: op for op in (
    UnaryOp("neg", "tneg", "fi"),
    UnaryOp("abs", "tabs", "fi"),
    UnaryOp("not", "tnot", "ib"),
    UnaryOp("relu", "trelu", "fi"),
    UnaryOp("exp", "texp", "f", True),
    UnaryOp("log", "tlog", "f", True),
    UnaryOp("sqrt", "tsqrt", "f", True),
    UnaryOp("rsqrt", "trsqrt", "f", True),
    UnaryOp("reciprocal", "trecip", "f", True),
    UnaryOp("floor", None, "f", True),
    UnaryOp("ceil", None, "f", True),
    UnaryOp("exp2", None, "f", True),
    UnaryOp("log2", None, "f", True),
    UnaryOp("sigmoid", None, "f", True),
    UnaryOp("tanh", None, "f", True),
    UnaryOp("gelu", None, "f", True),
    UnaryOp("erf", None, "f", True),
    UnaryOp("sin", None, "f", True),
    UnaryOp("cos", None, "f", True),
)}

BINARY = {op.name: op for op in (
    BinaryOp("add", "tadd", "tadds", "fi"),
    BinaryOp("sub", "tsub", "tsubs", "fi"),
    BinaryOp("mul", "tmul", "tmuls", "fi"),
    BinaryOp("div", "tdiv", "tdivs", "f", promote_to_float=True),
    BinaryOp("max", "tmax", "tmaxs", "fi"),
    BinaryOp("min", "tmin", "tmins", "fi"),
    BinaryOp("floordiv", None, None, "fi"),
    BinaryOp("mod", None, None, "fi"),
    BinaryOp("fmod", "tfmod", "tfmods", "fi"),      # C fmod: sign of the dividend
    BinaryOp("pow", None, None, "f", promote_to_float=True),
    BinaryOp("and", "tand", "tands", "ib"),
    BinaryOp("or", "tor", "tors", "ib"),
    BinaryOp("xor", "txor", "txors", "ib"),
    BinaryOp("shl", "tshl", "tshls", "i"),
    BinaryOp("shr", "tshr", "tshrs", "i"),
    BinaryOp("lt", "tcmp", "tcmps", "fib", "bool"),
    BinaryOp("le", "tcmp", "tcmps", "fib", "bool"),
    BinaryOp("gt", "tcmp", "tcmps", "fib", "bool"),
    BinaryOp("ge", "tcmp", "tcmps", "fib", "bool"),
    BinaryOp("eq", "tcmp", "tcmps", "fib", "bool"),
    BinaryOp("ne", "tcmp", "tcmps", "fib", "bool"),
)}

COMMUTATIVE = {"add", "mul", "max", "min", "and", "or", "xor", "eq", "ne"}
# a ⊕ b == b ⊕' a, for putting the tile first when the scalar is on the left
SWAPPED = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le"}

# Python operator → op name, for tiles and scalars alike.
PY_BINOPS = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
    ast.Mod: "mod", ast.Pow: "pow", ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor",
    ast.LShift: "shl", ast.RShift: "shr", ast.MatMult: "matmul",
}
PY_CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq",
             ast.NotEq: "ne"}
PY_UNARYOPS = {ast.USub: "neg", ast.Invert: "not", ast.Not: "not"}
