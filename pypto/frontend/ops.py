"""The CANN ops the frontend runs, as data: what each one computes in the kernel language.

Each row says how a node lowers: ``EW`` rows are elementwise (a ``pl`` expression over the
operands' tiles, ``{0}``, ``{1}`` ... standing for them), ``REDUCE`` rows reduce one axis (the
``pl`` reduction, applied along the axis kept in a 2-D view), and the other kinds have a
lowering of their own in ``lowering.py``. The functions building nodes (shape and dtype
rules, argument checks, CANN's signatures) are in ``build.py``.
"""
from __future__ import annotations

# op -> pl expression of its operands (elementwise, one output element per input element)
EW = {
    "add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})", "div": "({0} / {1})",
    "neg": "(-{0})", "abs": "pl.abs({0})", "exp": "pl.exp({0})", "log": "pl.log({0})",
    "sqrt": "pl.sqrt({0})", "rsqrt": "pl.rsqrt({0})", "reciprocal": "pl.reciprocal({0})",
    "exp2": "pl.exp2({0})", "log2": "pl.log2({0})", "ceil": "pl.ceil({0})",
    "floor": "pl.floor({0})", "round": "pl.cast(pl.cast({0}, pl.int32, 'rint'), {dtype})",
    "trunc": "pl.cast(pl.cast({0}, pl.int32, 'trunc'), {dtype})",
    "pow": "pl.exp(pl.log({0}) * {1})", "maximum": "pl.maximum({0}, {1})",
    "minimum": "pl.minimum({0}, {1})", "clip": "pl.minimum(pl.maximum({0}, {1}), {2})",
    "relu": "pl.relu({0})", "sigmoid": "pl.sigmoid({0})", "tanh": "pl.tanh({0})",
    "eq": "({0} == {1})", "ne": "({0} != {1})", "lt": "({0} < {1})", "le": "({0} <= {1})",
    "gt": "({0} > {1})", "ge": "({0} >= {1})", "where": "pl.where({0}, {1}, {2})",
    "logical_and": "pl.where({0}, {1}, False)", "logical_not": "({0} == False)",
    "cast": "pl.cast({0}, {dtype}{rounding})", "ceil_div": "(({0} + {1} - 1) // {1})",
}

# op -> the pl reduction computing it (argmax/argmin: an int32 index)
REDUCE = {"sum": "pl.sum", "amax": "pl.max", "amin": "pl.min", "mean": "pl.mean",
          "prod": "pl.prod", "argmax": "pl.argmax", "argmin": "pl.argmin"}

# ops computed by lowering.py rules of their own, and what each needs
OTHER = {
    "read": "a view of a kernel argument or of a pypto.tensor: no computation",
    "reshape": "a new shape of the same row-major elements (view, reshape, unsqueeze)",
    "slice": "a window of a computed value",
    "transpose": "two axes swapped: pl.trans on a 2-D view when the last axis is one of them",
    "concat": "operands written side by side",
    "expand": "a broadcast copy (expand_clone)",
    "matmul": "the cube: pl.matmul on 2-D operands, batch axes looped",
    "full": "a constant tensor", "arange": "a range tensor",
    "topk": "pl.topk on rows of the whole sorted axis (values and indices: two nodes, one sort)",
    "argsort": "pl.argsort on rows of the whole sorted axis",
    "gather": "torch.gather: a pl.gather kernel (indexing.py)",
    "scatter": "torch.scatter of a tensor or a number: a pl.scatter kernel (indexing.py)",
}

COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_not"}
