"""``module.tile_graph_ir``: the tile graph as readable text.

Inputs, then each node with its tiling (tile grid, each input's tile and where it is read),
dependencies and the kernel that computes it, then each kernel with its launch, generated
source and Tile IR after the passes. Meant for reading, not parsing.
"""
from __future__ import annotations

from .ascend_c_node import AscendCNode
from .execution import step_unit
from .kernel_node import KernelNode


def tile_graph_text(module) -> str:
    graph = module.graph
    lines = [f'tile graph "{graph.name}": {len(module.nodes)} node(s), '
             f"{len(module.kernels)} kernel(s){_calls(module)} for {module.target.name}",
             "inputs"]
    for t in module.placeholders:
        lines.append(f"  %{t.name}: {t.dtype}{list(t.shape)} layout {t.layout}")
    kernel_of = {id(n): k for k in module.kernels for n in k.group.nodes}
    lines.append("nodes")
    for node in module.nodes:
        lines += _ascend_c_node(node) if isinstance(node, AscendCNode) else \
            _node(node, kernel_of[id(node)])
    lines.append("outputs")
    lines += [f"  %{t.name}: {t.dtype}{list(t.shape)}" for t in module.outputs]
    for step in module.steps:
        lines += _ascend_c_step(step) if getattr(step, "node", None) is not None else \
            _kernel(step, module)
    return "\n".join(lines) + "\n"


def _node(node, kernel) -> list[str]:
    if isinstance(node, KernelNode):
        out = node.output
        inputs = ", ".join(f"%{x.name}" for x in node.inputs)
        return [f"  %{node.name}: {out.dtype}{list(out.shape)} layout {out.layout} = "
                f"{node.role}([{inputs}])",
                f"    {'cube' if node.uses_cube else 'vector'}; kernel: {kernel.name}"]
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
    tiles = "its" if k.form == "kernel" else k.group.tiling.num_tiles
    meta = k.compiled.metadata
    lines = ["", f"kernel {k.name}: node(s) {', '.join(n.name for n in k.group.nodes)}; "
             f"form {k.form!r}, grid {k.grid} for {tiles} tile(s); "
             f"{meta.get('kind', '?')} kernel",
             "  generated source:"]
    lines += ["    " + line for line in k.source.rstrip().splitlines()]
    lines.append("  Tile IR (after the passes):")
    lines += ["    " + line for line in k.compiled.asm["tile_ir"].rstrip().splitlines()]
    return lines


def _ascend_c_node(node) -> list[str]:
    b = node.binding
    outs = ", ".join(f"%{t.name}: {t.dtype}{list(t.shape)}" for t in node.outputs)
    inputs = ", ".join(f"%{x.name}" for x in node.inputs)
    scalars = "".join(f", {k}={v!r}" for k, v in b.scalars.items())
    deps = [x.name for x in node.inputs if not x.is_placeholder]
    return [f"  {outs} = call_ascend_c({node.op.name}, [{inputs}]{scalars})",
            f"    Ascend C kernel {node.op.name} ({node.op.filename}:{node.op.signature.line}); "
            f"grid {b.grid}",
            f"    depends on: {', '.join('%' + d for d in deps) or 'inputs only'}"]


def _ascend_c_step(step) -> list[str]:
    op, node = step.node.op, step.node
    launch = op.npu_launch(*node.inputs, **node.binding.scalars)
    return ["", f"ascend C call {step.name}: kernel {op.name}, grid {step.grid}; on this host "
            "pto-isa's CPU simulator, on the NPU:",
            f"  launch: {launch.call}",
            f"  build:  {op.npu_build.command_line}"]


def _calls(module) -> str:
    n = len(module.ascend_c_steps)
    return f", {n} Ascend C call(s)" if n else ""


def tensor_graph_text(module) -> str:
    """The Tensor Graph: what the user declared, before tiling, fusion or launches."""
    graph = module.graph
    lines = [f'tensor graph "{graph.name}": {len(module.placeholders)} input(s), '
             f"{len(module.nodes)} node(s)"]
    lines += [f"  %{t.name}: {t.dtype}{list(t.shape)} = placeholder()"
              for t in module.placeholders]
    for node in module.nodes:
        outs = ", ".join(f"%{t.name}: {t.dtype}{list(t.shape)}" for t in node.outputs)
        inputs = ", ".join(f"%{x.name}" for x in node.inputs)
        if isinstance(node, AscendCNode):
            what = f"call_ascend_c({node.op.name}"
        elif isinstance(node, KernelNode):
            what = f"{node.role}("
        else:
            what = f"{node.op.__name__}("
        lines.append(f"  {outs} = {what}{inputs})" if what.endswith("(") else
                     f"  {outs} = {what}, [{inputs}])")
    lines.append("  returns " + ", ".join(f"%{t.name}" for t in module.outputs))
    return "\n".join(lines) + "\n"


def block_graph_text(module) -> str:
    """The Block Graph: the launch steps (fused groups), each with its form, grid, cores and
    the steps it waits for."""
    lines = [f'block graph "{module.graph.name}": {len(module.steps)} launch step(s)']
    writer = {id(t): s for s in module.steps for t in s.outputs}
    for step in module.steps:
        nodes = ", ".join(n.name for n in step.group.nodes) if hasattr(step, "group") \
            else step.node.name
        form = getattr(step, "form", "ascend C call")
        after = list(dict.fromkeys(writer[id(t)].name for t in step.params if id(t) in writer))
        lines.append(f"  {step.name}: node(s) {nodes}; form {form!r}, grid {tuple(step.grid)} "
                     f"on {step_unit(step)} cores; after {', '.join(after) or 'inputs'}")
    return "\n".join(lines) + "\n"
