"""Python source for the ``@pypto.jit`` kernel of one group of tile_map nodes.

The graph layer is a front end that writes ordinary kernels: for each output tile the kernel
loads every input's tile (``pl.load`` pads past the tensor's end), calls the tile op(s) —
which the frontend inlines like any jit function called from a kernel — and stores the result
(``pl.store`` drops what lies outside). The source is registered with ``linecache`` under a
name of its own, so the frontend reads it like a file, errors inside it show its lines, and
errors in a tile op still point at the user's file and line. Tile extents are literals; tensor
extents are read from the tensors (``out.shape``), so one generated kernel serves every size
with the same tiles (the jit specialises it per shape as usual).
"""
from __future__ import annotations

import hashlib
import keyword
import linecache
import re
from collections import OrderedDict

from .. import language as pl_module
from ..runtime.jit import JITFunction

_LOCAL = re.compile(r"^(p|x|r|o|n)\d+(_\d+)?$|^(t|i|j|k|c|out|pl|range|min)$")
_GENERATED: OrderedDict = OrderedDict()      # (source, tile op ids, target) -> JITFunction
_MAX_GENERATED = 256


def kernel_name(graph_name: str, group) -> str:
    raw = f"{graph_name}_{'_'.join(n.name for n in group.nodes)}"
    name = re.sub(r"\W", "_", raw)[:60]
    name = name if name[0].isalpha() else f"g_{name}"
    return f"{name}_kernel" if name in op_names(group) else name


def op_names(group) -> dict:
    """Global name in the generated module -> tile op object."""
    names: dict = {}
    for n in group.nodes:
        if any(op is n.op for op in names.values()):
            continue
        name = n.op.__name__
        if not name.isidentifier() or keyword.iskeyword(name) or _LOCAL.match(name) \
                or name in names:
            name = f"op{len(names)}"
        names[name] = n.op
    return names


def kernel_source(group, name: str, form: str, unroll: bool) -> tuple[str, dict]:
    """(source, globals) of the kernel computing ``group`` in launch ``form``."""
    tiling = group.tiling
    rank = len(tiling.out_shape)
    params = [f"p{k}" for k in range(len(group.external_inputs()))]
    ops = op_names(group)
    lines = [f"def {name}({', '.join(params + ['out'])}):",
             f'    """tile_map node(s) {", ".join(n.name for n in group.nodes)}: '
             f'{tiling.num_tiles} tile(s) of {tiling.tile}, launch form {form!r}."""']
    if form == "tile":
        for d, e in enumerate(tiling.tile):
            lines.append(f"    o{d} = pl.program_id({d}) * {e}")
        pad = "    "
    else:
        for d, e in enumerate(tiling.tile):
            lines.append(f"    n{d} = pl.cdiv(out.shape[{d}], {e})")
        total = " * ".join(f"n{d}" for d in range(rank))
        if form == "uniform":
            lines += [f"    for k in range(0, pl.cdiv({total}, pl.num_programs(0))):",
                      "        t = k * pl.num_programs(0) + pl.program_id(0)"]
        else:
            loop, stages = ("pl.range", ", 1, num_stages=2") if unroll else ("range", "")
            lines += [f"    c = pl.cdiv({total}, pl.num_programs(0))",
                      f"    for t in {loop}(pl.program_id(0) * c, "
                      f"min(pl.program_id(0) * c + c, {total}){stages}):"]
        pad = "        "
        lines += [f"{pad}{line}" for line in _tile_offsets(tiling.tile)]
    lines += [pad + line for line in _body(group, ops)]
    return "\n".join(lines) + "\n", {"pl": pl_module, **ops}


def _tile_offsets(tile) -> list[str]:
    """Tile ``t`` (row-major over the tile grid n0 x n1 ...) as its offsets o0, o1, ...
    The divisors are written ``max(n, 1)`` (the same where there are tiles at all) so the
    compiler proves the offsets non-negative and a matmul operand's window needs no run-time
    check (``legalize_windows``: a checked cube load goes through the vector core)."""
    lines = []
    for d, e in enumerate(tile):
        inner = " * ".join(f"n{i}" for i in range(d + 1, len(tile)))
        index = f"t // max({inner}, 1)" if inner else "t"
        if d > 0:
            index = f"({index}) % max(n{d}, 1)"
        lines.append(f"o{d} = ({index}) * {e}")
    return lines


def _body(group, ops) -> list[str]:
    """Loads, tile op calls and the store, for one output tile at offsets o0(, o1)."""
    param = {id(t): f"p{k}" for k, t in enumerate(group.external_inputs())}
    op_name = {id(op): name for name, op in ops.items()}
    value: dict = {}          # id(graph tensor) -> variable holding its tile
    loaded: dict = {}         # (param, tiling of it) -> variable
    out = []
    for n_index, node in enumerate(group.nodes):
        args = []
        for k, t in enumerate(node.inputs):
            if id(t) in value:
                args.append(value[id(t)])
                continue
            key = (param[id(t)], node.tiling.maps[k], node.tiling.in_tiles[k])
            if key not in loaded:
                var = f"x{len(loaded)}"
                offsets = ", ".join("0" if m is None else f"o{m}" for m in node.tiling.maps[k])
                shape = ", ".join(map(str, node.tiling.in_tiles[k]))
                comma = "," if len(node.tiling.maps[k]) == 1 else ""
                out.append(f"{var} = pl.load({key[0]}, offsets=({offsets}{comma}), "
                           f"shape=({shape}{comma}))")
                loaded[key] = var
            args.append(loaded[key])
        result = f"r{n_index}"
        out.append(f"{result} = {op_name[id(node.op)]}({', '.join(args)})")
        value[id(node.output)] = result
    tiling = group.tiling
    offsets = ", ".join(f"o{d}" for d in range(len(tiling.tile)))
    comma = "," if len(tiling.tile) == 1 else ""
    stored = f"r{len(group.nodes) - 1}"
    if tiling.broadcast_result:
        stored = f"pl.broadcast_to({stored}, {tiling.tile})"
    out.append(f"pl.store(out, offsets=({offsets}{comma}), value={stored})")
    return out


def define(source: str, scope: dict, name: str, label: str):
    """The function ``name`` that ``source`` defines, its lines registered with ``linecache``
    under ``<label name digest>`` (the jit frontend reads them like a file's)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    filename = f"<{label} {name} {digest}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = dict(scope)
    exec(compile(source, filename, "exec"), namespace)    # defines the function only
    return namespace[name]


def make_kernel(source: str, scope: dict, name: str, target: str) -> JITFunction:
    """A ``JITFunction`` for generated ``source`` (reused for the same source and tile ops)."""
    key = (source, tuple(id(v) for v in scope.values()), target)
    jitfn = _GENERATED.get(key)
    if jitfn is not None:
        _GENERATED.move_to_end(key)
        return jitfn
    jitfn = JITFunction(define(source, scope, name, "pypto graph kernel"), target=target)
    _GENERATED[key] = jitfn
    if len(_GENERATED) > _MAX_GENERATED:
        _GENERATED.popitem(last=False)
    return jitfn
