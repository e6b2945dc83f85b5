"""``module.tile_graph_ir``: the tile graph as readable text.

Inputs, then each node with its tiling (tile grid, each input's tile and where it is read),
dependencies and the kernel that computes it, then each kernel with its launch, generated
source and Tile IR after the passes. Meant for reading, not parsing.
"""
from __future__ import annotations


def tile_graph_text(module) -> str:
    graph = module.graph
    lines = [f'tile graph "{graph.name}": {len(module.nodes)} node(s), '
             f"{len(module.kernels)} kernel(s) for {module.target.name}", "inputs"]
    for t in module.placeholders:
        lines.append(f"  %{t.name}: {t.dtype}{list(t.shape)} layout {t.layout}")
    kernel_of = {id(n): k for k in module.kernels for n in k.group.nodes}
    lines.append("nodes")
    for node in module.nodes:
        lines += _node(node, kernel_of[id(node)])
    lines.append("outputs")
    lines += [f"  %{t.name}: {t.dtype}{list(t.shape)}" for t in module.outputs]
    for k in module.kernels:
        lines += _kernel(k, module)
    return "\n".join(lines) + "\n"


def _node(node, kernel) -> list[str]:
    t = node.tiling
    inputs = ", ".join(f"%{x.name}" for x in node.inputs)
    grid = " x ".join(map(str, t.grid))
    lines = [f"  %{node.name}: {t.out_dtype}{list(t.out_shape)} = tile_map({node.op.__name__}, "
             f"[{inputs}], tile_size={node.tile_size!r}, "
             f"parallel_strategy={node.strategy!r})",
             f"    tiles: {grid} = {t.num_tiles} tile(s) of {t.tile}"
             f"{' (ragged last tile)' if any(n % e for n, e in zip(t.out_shape, t.tile)) else ''}"]
    for k, x in enumerate(node.inputs):
        axes = ", ".join(("broadcast" if n == 1 else "whole") if m is None else
                         f"follows output axis {m}" for n, m in zip(x.shape, t.maps[k]))
        lines.append(f"    %{x.name}: {t.describe_input(k)}   [{axes}]")
    deps = [x.name for x in node.inputs if not x.is_placeholder]
    units = "cube" if t.uses_cube else "vector"
    lines.append(f"    depends on: {', '.join('%' + d for d in deps) or 'inputs only'}; "
                 f"{units}{'; cross-block sync' if t.cross_block else ''}")
    fused = len(kernel.group.nodes) > 1
    lines.append(f"    kernel: {kernel.name}{' (fused)' if fused else ''}")
    return lines


def _kernel(k, module) -> list[str]:
    tiles = k.group.tiling.num_tiles
    meta = k.compiled.metadata
    lines = ["", f"kernel {k.name}: node(s) {', '.join(n.name for n in k.group.nodes)}; "
             f"form {k.form!r}, grid {k.grid} for {tiles} tile(s); "
             f"{meta.get('kind', '?')} kernel",
             "  generated source:"]
    lines += ["    " + line for line in k.source.rstrip().splitlines()]
    lines.append("  Tile IR (after the passes):")
    lines += ["    " + line for line in k.compiled.asm["tile_ir"].rstrip().splitlines()]
    return lines
