"""Elementwise operators as data: one row per op ties together its Python operator, its PTO
instruction names (tile–tile and tile–scalar forms) and its numpy meaning.

The frontend, the PTO lowering, the LLVM lowering and the reference semantics all read this
table, so adding an elementwise op is one row here plus one LLVM lowering rule.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class BinaryOp:
    name: str
    pto: str            # tile–tile instruction
    pto_scalar: str     # tile–scalar instruction ("" where PTO has none)
    numpy: object
    floats_only: bool = False


BINARY = {op.name: op for op in (
    BinaryOp("add", "tadd", "tadds", np.add),
    BinaryOp("sub", "tsub", "tsubs", np.subtract),
    BinaryOp("mul", "tmul", "tmuls", np.multiply),
    BinaryOp("div", "tdiv", "tdivs", np.divide, floats_only=True),
    BinaryOp("max", "tmax", "tmaxs", np.maximum),
    BinaryOp("min", "tmin", "tmins", np.minimum),
)}

# Python operator → binary op name, for tiles and scalars alike.
PY_BINOPS = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div",
    ast.FloorDiv: "floordiv", ast.Mod: "mod",
}

# Scalar-only operators (integer index arithmetic on the scalar unit).
SCALAR_BINOPS = ("add", "sub", "mul", "div", "floordiv", "mod", "min", "max")

PY_CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq",
             ast.NotEq: "ne"}
