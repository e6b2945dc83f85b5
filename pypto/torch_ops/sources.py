"""What a registered op runs, behind one interface (``OpSource``).

Each source says the op's parameters (``params``: name, schema type, default), its outputs'
names, their shapes and dtypes for given inputs (``outputs``: called with real tensors and
with torch's fake tensors, whose sizes may be symbolic) and how to compute them into tensors
the caller allocated (``run``), on the inputs' own memory.

- ``TileOpSource``: a ``@pypto.tile_op`` over whole tensors. Per input shape and dtype it
  builds the graph ``tile_map(op, inputs, tile_size)`` and compiles it (cached); the output
  shape and which input axis each output axis follows come from that tiling (PyPTO's shape
  inference), so fake outputs keep symbolic sizes. Inputs of rank > 2 are viewed as 2-D
  (leading dims flattened into rows), as tiles have rank <= 2.
- ``ModuleSource``: a compiled graph ``Module`` (fixed shapes).
- ``LaunchRuleSource``: a ``@pypto.jit`` kernel with a launch rule: which parameters are
  outputs and how each is allocated, the grid, and the parameters computed from the inputs.
"""
from __future__ import annotations

import functools
import inspect
import math
from dataclasses import dataclass

from ..compiler.ir import TileType
from ..errors import CompilationError
from ..graph import Module, TensorGraph, TileOp, compile as compile_graph, tile_map
from ..graph.trace import trace
from ..runtime.jit import JITFunction
from ..runtime.specialize import is_constexpr
from ..language import dtypes as dt
from ..layout import as_array
from ..runtime.args import to_torch
from .devices import device_of, launch_on_device, run_module_on_device

EMPTY = inspect.Parameter.empty
TILE_ELEMENTS = 4096       # a default tile's size: what one vector-unit pass handles well


@dataclass(frozen=True)
class Param:
    """One parameter of the op's schema: ``kind`` is "Tensor", "int", "float" or "bool"."""
    name: str
    kind: str
    default: object = EMPTY


class OpSource:
    """The interface ``register`` uses."""
    name: str
    params: list
    output_names: list

    def outputs(self, args: dict) -> list:
        """[(shape, torch dtype)] per output for the op's arguments by name."""
        raise NotImplementedError

    def run(self, args: dict, outs: list) -> None:
        """Compute the outputs into ``outs`` (torch tensors of ``outputs(args)``)."""
        raise NotImplementedError


def hint(n) -> int:
    """A concrete size for ``n``: itself if an int, else the value a symbolic size (torch's
    SymInt under dynamic shapes) was traced with. PyPTO's kernels are compiled for concrete
    shapes; the symbolic output dims are rebuilt from the input dims they follow."""
    if isinstance(n, int):
        return n
    value = getattr(getattr(n, "node", None), "hint", None)
    return int(value) if value is not None else int(n)


def call_with(fn, values: dict):
    """``fn`` called with the entries of ``values`` its signature names (all of them if it
    takes ``**kwargs``), so launch rules can be written ``lambda x: ...``."""
    names = _wanted(fn)
    if names is None:
        return fn(**values)
    return fn(**{n: values[n] for n in names if n in values})


@functools.lru_cache(maxsize=None)
def _wanted(fn):
    """The parameter names of ``fn`` (None: it takes any keyword). Cached: a launch rule is
    called on every call of its op, and ``inspect.signature`` costs ~10 us."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values()):
        return None
    return tuple(sig.parameters)


# -- tile ops --------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Built:
    """A tile op compiled for one input signature: the module, its output's (flattened)
    shape and dtype, and per output axis the (input, axis) it follows, or None."""
    module: object
    out_shape: tuple
    out_dtype: object
    sources: tuple


class TileOpSource(OpSource):
    def __init__(self, op, tile_size=None, target="ascend910b"):
        self.op = op
        self.name = op.__name__
        self.params = [Param(n, "Tensor") for n in op.tile_params]
        self.output_names = ["out"]
        self.tile_size = tile_size
        self.target = target
        self._built: dict = {}

    def outputs(self, args):
        tensors = [args[p.name] for p in self.params]
        lead = _leading_dims(tensors, self.name)
        flat = [_flat_shape(t.shape, lead) for t in tensors]
        built = self.build(tuple(tuple(hint(n) for n in s) for s in flat),
                           tuple(t.dtype for t in tensors))
        shape = [n if src is None else flat[src[0]][src[1]]
                 for n, src in zip(built.out_shape, built.sources)]
        if lead is not None and built.sources and built.sources[0] is not None and \
                len(tensors[built.sources[0][0]].shape) > 2 and built.sources[0][1] == 0:
            shape = list(lead) + shape[1:]          # rows were the flattened leading dims
        return [(tuple(shape), to_torch(built.out_dtype))]

    def run(self, args, outs):
        tensors = [args[p.name] for p in self.params]
        lead = _leading_dims(tensors, self.name)
        device = device_of(dict(zip((p.name for p in self.params), tensors)), self.name)
        if device != "cpu":
            flat = [t if len(t.shape) <= 2 else t.reshape(_flat_shape(t.shape, lead))
                    for t in tensors]
            built = self.build(tuple(tuple(t.shape) for t in flat),
                               tuple(t.dtype for t in flat))
            run_module_on_device(built.module, dict(zip((p.name for p in self.params), flat)),
                                 [outs[0].reshape(built.out_shape)], device)
            return
        arrays = [_flat_array(as_array(t), lead) for t in tensors]
        built = self.build(tuple(a.shape for a in arrays), tuple(t.dtype for t in tensors))
        out = as_array(outs[0]).reshape(built.out_shape)    # a view: outs are contiguous
        built.module.run({p.name: a for p, a in zip(self.params, arrays)}, out=out)

    def build(self, shapes: tuple, dtypes: tuple) -> _Built:
        """The compiled graph for inputs of ``shapes`` and ``dtypes`` (torch's, as the op's
        arguments carry them: looked up on every call, converted only on a miss)."""
        key = (shapes, dtypes)
        built = self._built.get(key)
        if built is None:
            built = self._built[key] = self._compile(shapes,
                                                     tuple(dt.from_any(d) for d in dtypes))
        return built

    def _compile(self, shapes, dtypes) -> _Built:
        whole = trace(self.op, [TileType(d, s) for d, s in zip(dtypes, shapes)],
                      f"while finding the output shape of op {self.name!r} for inputs "
                      f"{list(shapes)}")
        out_shape = whole.result.type.shape
        errors = []
        for tile in _tile_candidates(self.tile_size, out_shape):
            graph = TensorGraph(self.name)
            inputs = [graph.placeholder(s, d, name=p.name)
                      for p, s, d in zip(self.params, shapes, dtypes)]
            try:
                out = tile_map(self.op, inputs, tile)
                module = compile_graph(graph, target=self.target)
            except (CompilationError, ValueError) as e:
                errors.append(f"tile_size={tile}: {str(e).splitlines()[0]}")
                if self.tile_size is not None:
                    raise
                continue
            maps = out.producer.tiling.maps
            sources = tuple(next(((k, i) for k, mk in enumerate(maps)
                                  for i, m in enumerate(mk) if m == d), None)
                            for d in range(len(out.shape)))
            return _Built(module, out.shape, out.dtype, sources)
        raise ValueError(f"register_op({self.name!r}): no tile size compiles for inputs "
                         f"{list(shapes)}; tried " + "; ".join(errors) +
                         ". Pass register_op(..., tile_size=...)")


def _tile_candidates(tile_size, out_shape) -> list:
    """Tile sizes to try in turn: the user's, else whole rows of about TILE_ELEMENTS elements,
    whole columns, then square tiles (for ops that keep no axis whole)."""
    if tile_size is not None:
        return [tile_size]
    if len(out_shape) == 1:
        return [min(out_shape[0], TILE_ELEMENTS), out_shape[0]]
    m, n = out_shape
    return [(max(1, min(m, TILE_ELEMENTS // n)), n), (m, max(1, min(n, TILE_ELEMENTS // m))),
            (min(m, 128), min(n, 128)), (min(m, 64), min(n, 64)), (min(m, 16), min(n, 16))]


def _leading_dims(tensors, name):
    """The leading dims that rank > 2 inputs share (flattened into rows), or None."""
    high = [t for t in tensors if len(t.shape) > 2]
    if not high:
        return None
    lead = tuple(high[0].shape[:-1])
    for t in high[1:]:
        if tuple(t.shape[:-1]) != lead:
            raise ValueError(f"{name}: inputs of rank > 2 are viewed as 2-D (leading dims "
                             f"flattened), so they must share their leading dims; got "
                             f"{[tuple(t.shape) for t in high]}")
    if any(len(t.shape) == 0 for t in tensors):
        raise ValueError(f"{name}: 0-d tensors are not tiles; reshape them to (1,)")
    return lead


def _flat_shape(shape, lead) -> tuple:
    if len(shape) <= 2:
        return tuple(shape)
    return (math.prod(lead), shape[-1])


def _flat_array(arr, lead):
    if arr.ndim == 0:
        raise ValueError("0-d tensors are not tiles; reshape them to (1,)")
    return arr if arr.ndim <= 2 else arr.reshape(_flat_shape(arr.shape, lead))


# -- compiled graph modules ----------------------------------------------------------------------

class ModuleSource(OpSource):
    def __init__(self, module):
        self.module = module
        self.name = module.graph.name
        self.params = [Param(n, "Tensor") for n in module.input_names]
        self.output_names = module.output_names

    def outputs(self, args):
        return [(t.shape, to_torch(t.dtype)) for t in self.module.outputs]

    def run(self, args, outs):
        device = device_of(args, self.name)
        if device != "cpu":
            run_module_on_device(self.module, args, outs, device)
            return
        self.module.run({p.name: as_array(args[p.name]) for p in self.params},
                        out=[as_array(o) for o in outs])


# -- jit kernels with a launch rule -------------------------------------------------------------

class LaunchRuleSource(OpSource):
    """``register_op(name, kernel, outputs={...}, grid=..., args={...})``."""

    def __init__(self, kernel: JITFunction, outputs, grid=None, args=None):
        self.kernel = kernel
        self.name = kernel.__name__
        params = kernel.signature.parameters
        if not isinstance(outputs, dict) or not outputs:
            raise TypeError(f"register_op({self.name!r}): a @pypto.jit kernel needs a launch "
                            "rule: outputs={'out': 'x'} names each output parameter and how "
                            "it is allocated (like an input, or a callable of the inputs "
                            "returning (shape, dtype))")
        self.derived = dict(args or {})
        for what, names in (("outputs", outputs), ("args", self.derived)):
            unknown = [n for n in names if n not in params]
            if unknown:
                raise ValueError(f"register_op({self.name!r}, {what}=...): {unknown} are not "
                                 f"parameters of {self.name}{kernel.signature}")
        self.output_specs = dict(outputs)
        self.output_names = list(outputs)
        self.grid = grid
        self.params = [_kernel_param(self.name, p) for n, p in params.items()
                       if n not in outputs and n not in self.derived]
        for n, spec in self.output_specs.items():
            if isinstance(spec, str) and spec not in [p.name for p in self.params]:
                raise ValueError(f"register_op({self.name!r}, outputs={{{n!r}: {spec!r}}}): "
                                 f"{spec!r} is not an input of the op")

    def outputs(self, args):
        result = []
        for name, spec in self.output_specs.items():
            if isinstance(spec, str):
                like = args[spec]
                result.append((tuple(like.shape), like.dtype))
                continue
            shape, dtype = call_with(spec, args)
            result.append((tuple(shape), to_torch(dtype)))
        return result

    def run(self, args, outs):
        values = dict(args)
        for name, rule in self.derived.items():
            values[name] = call_with(rule, args) if callable(rule) else rule
        values.update(zip(self.output_names, outs))
        grid = self.grid
        if callable(grid):
            grid = call_with(grid, {**args, **values})
        device = device_of(values, self.name)
        if device != "cpu":
            launch_on_device(self.kernel, grid, values, device)
            return
        launch = self.kernel if grid is None else self.kernel[grid]
        launch(**values)


def _kernel_param(kernel_name: str, p) -> Param:
    """A kernel parameter the op takes: annotated ``int``/``float``/``bool`` (or a constexpr
    with such a default) is a scalar, anything else a tensor."""
    annotation = p.annotation
    kinds = {int: "int", float: "float", bool: "bool", "int": "int", "float": "float",
             "bool": "bool"}
    if annotation in kinds:
        return Param(p.name, kinds[annotation], p.default)
    if is_constexpr(annotation):
        if type(p.default) in kinds:
            return Param(p.name, kinds[type(p.default)], p.default)
        raise TypeError(f"register_op({kernel_name!r}): constexpr parameter {p.name!r} has no "
                        "int, float or bool default, so its type in the op's schema is "
                        f"unknown; give it one, or compute it: args={{{p.name!r}: ...}}")
    if p.default is not EMPTY:
        raise TypeError(f"register_op({kernel_name!r}): parameter {p.name!r} has a default "
                        f"but no int/float/bool annotation; annotate it ({p.name}: int = ...) "
                        "or compute it in args=")
    return Param(p.name, "Tensor")


def make_source(fn, outputs=None, grid=None, args=None, tile_size=None, target="ascend910b"):
    """The ``OpSource`` for what ``register_op`` was given."""
    if isinstance(fn, TileOp):
        _no_rule(fn, outputs, grid, args, "a @pypto.tile_op (its output comes from tracing it)")
        return TileOpSource(fn, tile_size, target)
    if isinstance(fn, Module):
        _no_rule(fn, outputs, grid, args, "a compiled graph (it has its own outputs and grids)")
        if tile_size is not None:
            raise TypeError("register_op(tile_size=...) applies to tile ops; a compiled graph "
                            "has its tiling already")
        return ModuleSource(fn)
    if isinstance(fn, JITFunction):
        if tile_size is not None:
            raise TypeError("register_op(tile_size=...) applies to tile ops; a kernel's "
                            "tiling is its own (pass constexprs through args=)")
        return LaunchRuleSource(fn, outputs, grid, args)
    raise TypeError(f"register_op(fn=...) takes a @pypto.tile_op, a compiled graph "
                    f"(pypto.compile(...)) or a @pypto.jit kernel, got {type(fn).__name__}")


def _no_rule(fn, outputs, grid, args, what):
    given = [k for k, v in (("outputs", outputs), ("grid", grid), ("args", args))
             if v is not None]
    if given:
        raise TypeError(f"register_op({getattr(fn, '__name__', fn)!r}): {', '.join(given)} "
                        f"are launch rules for @pypto.jit kernels; {what}")
