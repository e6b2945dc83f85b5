"""Tracing a tile op: its body compiled by the jit frontend on tiles of given shapes.

``tile_map`` needs to know what a tile op does before it can tile it (the result's shape and
dtype, which input axes reach which result axes, which axes are reduced). The frontend
already turns the body into Tile IR for any tile shapes, so a trace is that IR, built with the
frontend's own ``CodeGenerator`` with the parameters bound to tile values instead of loads.
Nothing runs; errors are the frontend's ``CompilationError`` at the user's line.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import CompilationError
from ..compiler.ast_to_ir import CodeGenerator, tensor_param
from ..compiler.builder import Builder
from ..compiler.ir import Block, Function, TileType, Value
from ..compiler.semantics.memory import store
from ..compiler.semantics.shapes import MAX_TILE_RANK
from ..compiler.semantics.tile import reshape
from ..language import dtypes as dt
from ..layout import as_array


@dataclass
class Trace:
    """A tile op's body as Tile IR: one tile parameter per input, and the returned tile."""
    params: list
    body: Block
    result: Value
    builder: Builder


def trace(op, types: list, context: str) -> Trace:
    """Compile ``op``'s body with its tile parameters of ``types``. ``context`` says why (it is
    appended to a compilation error, which otherwise points at the tile op's line)."""
    source = op.source
    builder = Builder(source)
    builder.block = Block()
    builder.inlining = (op,)
    params = [Value(t, name) for name, t in zip(op.tile_params, types)]
    bound = op.signature.bind(*params)
    bound.apply_defaults()
    gen = CodeGenerator(source, builder, dict(bound.arguments))
    try:
        gen.run(source.node.body)
    except CompilationError as e:
        raise CompilationError(f"{e.message}\n({context})", e.loc, e.call_chain) from None
    result = gen.returned
    if not (isinstance(result, Value) and result.is_tile):
        kind = "nothing" if result in (None, ()) else \
            f"{len(result)} values" if isinstance(result, tuple) else type(result).__name__ \
            if not isinstance(result, Value) else f"a {result.type}"
        raise CompilationError(f"tile op {op.__name__} must return one tile, it returns {kind}"
                               f"\n({context})", source.loc(source.node))
    return Trace(params, builder.block, result, builder)


def evaluate(op, arrays):
    """``op(*arrays)`` on whole arrays, one tile each, in the reference interpreter."""
    from ..backends.interpreter.run import run_function  # lazy: loads on first evaluation
    values = []
    for i, a in enumerate(arrays):
        arr = as_array(a)
        if arr is None:
            arr = np.asarray(a)
        if not 1 <= arr.ndim <= MAX_TILE_RANK:
            raise ValueError(f"{op.__name__}(): argument {i} has rank {arr.ndim}; tiles have "
                             f"rank 1 to {MAX_TILE_RANK}")
        values.append(arr)
    if len(values) != len(op.tile_params):
        raise TypeError(f"{op.__name__}() takes {len(op.tile_params)} arrays "
                        f"({', '.join(op.tile_params)}), got {len(values)}")
    types = [TileType(dt.from_any(v.dtype), tuple(v.shape)) for v in values]
    t = trace(op, types, f"evaluating {op.__name__} on whole arrays")
    result = t.result
    scalar = result.type.shape == ()
    b = t.builder
    if scalar:
        result = reshape(b, result, (1,))
    out = tensor_param("__pypto_out", result.type.dtype, len(result.type.shape))
    store(b, out, [0] * len(result.type.shape), result)
    target = np.empty(result.type.shape, result.type.dtype.to_numpy())
    args = {p.hint: v for p, v in zip(t.params, values)}
    args["__pypto_out"] = target
    run_function(Function(op.__name__, t.params + [out], t.body), args, (1, 1, 1))
    return target[0] if scalar else target
