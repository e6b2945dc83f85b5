"""The Execution Graph: the compiled graph's tile tasks and the data dependencies between them.

The seed's fourth level. A **task** is one block of one launch step (``Module.steps``): for a
kernel launched one block per tile (form ``"tile"``) that is one (fused node, tile) pair; a
grid-stride kernel's block computes a contiguous run of tiles, and the task holds them all. An
**edge** ``p -> c`` says task ``c`` reads an element task ``p`` writes, computed from the
tilings alone: the windows ``c``'s tiles load from each input (an axis that follows an output
axis is read at the tile's offset with the tile's extent, a whole axis entirely, a broadcast
axis at 0) are intersected with the output tiles of the producing kernel, so a row softmax
after a matmul waits only for the matmul tiles of its rows, and a reduction over a whole axis
waits for every producer tile along it.

Steps whose blocks are not tile computations are **opaque**: a kernel node (``kernel_node``)
or an Ascend C call reads its inputs as it likes, so each of its tasks depends on every task
writing its inputs, and everything reading its output depends on all its tasks. A kernel whose
blocks meet or signal each other (``pypto.barrier``) is one task spanning all its blocks
(``width``), since they must run together; so is an Ascend C call (one task, one launch).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from ..backends.ascend.entry import uses_cross_core
from ..runtime.hooks import pto_program
from .ascend_c_node import AscendCStep


@dataclass(eq=False)
class Task:
    """Block ``block`` of step ``step`` (``None``: the whole launch). ``tiles``: the output tile
    coordinates it computes, or None for an opaque task (its whole output). ``unit``: the cores
    it runs on ("vector", "cube" or "mixed": one AIC with one AIV); ``width``: how many such
    cores at once (all the blocks of a launch whose blocks sync)."""
    index: int
    step: object
    block: int | None
    tiles: tuple | None
    unit: str
    width: int = 1
    deps: list = field(default_factory=list)       # indices of the tasks it waits for

    def __repr__(self) -> str:
        return f"<task {self.index} {self.label} on {self.unit}, waits for {self.deps}>"

    @property
    def node_name(self) -> str:
        return self.step.name

    @property
    def label(self) -> str:
        if self.tiles is None:
            where = "all" if self.block is None else f"block {self.block}"
        elif not self.tiles:              # a grid-stride block past the last run of tiles
            where = f"block {self.block}, no tiles"
        elif len(self.tiles) == 1:
            where = "tile " + ",".join(map(str, self.tiles[0]))
        else:
            where = (f"tiles {','.join(map(str, self.tiles[0]))}.."
                     f"{','.join(map(str, self.tiles[-1]))}")
        return f"{self.node_name}[{where}]"


class ExecutionGraph:
    """Tasks in launch-step order (a topological order: each step reads only earlier steps),
    with ``deps`` per task; ``consumers[i]``: the tasks waiting for task ``i``."""

    def __init__(self, tasks: list, name: str):
        self.tasks = tasks
        self.name = name
        self.consumers = [[] for _ in tasks]
        for t in tasks:
            for d in t.deps:
                self.consumers[d].append(t.index)

    @property
    def edges(self) -> list:
        return [(d, t.index) for t in self.tasks for d in t.deps]

    def tasks_of(self, step) -> list:
        return [t for t in self.tasks if t.step is step]

    def text(self, limit: int = 12) -> str:
        """Per step its tasks and what they wait for (the first ``limit`` tasks of each)."""
        lines = [f'execution graph "{self.name}": {len(self.tasks)} task(s), '
                 f"{len(self.edges)} edge(s)"]
        steps = list(dict.fromkeys(t.step for t in self.tasks))
        for step in steps:
            own = self.tasks_of(step)
            width = f", {own[0].width} cores at once" if own[0].width > 1 else ""
            lines.append(f"  {step.name}: {len(own)} task(s) on {own[0].unit} cores{width}")
            for t in own[:limit]:
                deps = [self.tasks[d].label for d in t.deps]
                shown = ", ".join(deps[:4]) + (f", ... ({len(deps)} in all)"
                                               if len(deps) > 4 else "")
                lines.append(f"    {t.label} <- {shown or 'graph inputs'}")
            if len(own) > limit:
                lines.append(f"    ... {len(own) - limit} more")
        return "\n".join(lines) + "\n"

    __str__ = text

    def to_dot(self) -> str:
        """Graphviz text (``dot -Tsvg``): one cluster per step, one node per task, one edge per
        dependency; cube tasks are boxes, vector tasks ellipses."""
        lines = [f'digraph "{_quote(self.name)}" {{', "  rankdir=LR;",
                 '  node [fontsize=10];']
        steps = list(dict.fromkeys(t.step for t in self.tasks))
        for k, step in enumerate(steps):
            lines.append(f'  subgraph "cluster_{k}" {{')
            lines.append(f'    label="{_quote(step.name)}";')
            for t in self.tasks_of(step):
                shape = "box" if t.unit != "vector" else "ellipse"
                lines.append(f'    t{t.index} [label="{_quote(t.label)}", shape={shape}];')
            lines.append("  }")
        lines += [f"  t{a} -> t{b};" for a, b in self.edges]
        lines.append("}")
        return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


# -- building ------------------------------------------------------------------------------------

def build(module) -> ExecutionGraph:
    """The Execution Graph of a compiled module's launch steps."""
    tasks: list = []
    writers: dict = {}          # id(graph tensor) -> (step, {tile coords: task} or None, tasks)
    for step in module.steps:
        own = _step_tasks(step, module.target, len(tasks))
        for t in own:
            t.deps = sorted(_deps(step, t, writers))
        tasks += own
        tiles = None
        if own and own[0].tiles is not None:
            tiles = {c: t for t in own for c in t.tiles}
        for out in step.outputs:
            writers[id(out)] = (step, tiles, own)
    return ExecutionGraph(tasks, module.graph.name)


def step_unit(step) -> str:
    """The cores a step's blocks run on."""
    if isinstance(step, AscendCStep):
        return "vector"
    kind = step.compiled.metadata.get("kind") if step.compiled is not None else None
    if kind in ("vector", "cube", "mixed"):
        return kind
    return "cube" if step.group.uses_cube else "vector"


def _step_tasks(step, target, first: int) -> list:
    unit = step_unit(step)
    if isinstance(step, AscendCStep):
        return [Task(first, step, None, None, unit)]
    blocks = math.prod(step.grid)
    if step.form == "uniform" or _syncs(step):
        return [Task(first, step, None, None, unit, width=blocks)]
    if step.form == "kernel" and getattr(step.group.last, "tile", None) is None:
        return [Task(first + b, step, b, None, unit) for b in range(blocks)]
    return [Task(first + b, step, b, tuple(block_tiles(step, b)), unit) for b in range(blocks)]


def _syncs(step) -> bool:
    return step.compiled is not None and uses_cross_core(pto_program(step.compiled))


def block_tiles(step, block: int) -> list:
    """The output tile coordinates block ``block`` of a tile_map kernel computes (as the
    generated source in ``codegen.kernel_source`` walks them)."""
    tiling = step.group.tiling
    if step.form == "kernel":               # a kernel node writing one tile per block
        g0 = step.grid[0]
        return [(block % g0,) if len(step.grid) == 1 else (block % g0, block // g0)]
    grid = tiling.grid
    if step.form == "tile":                 # pid0 fastest, as the launch numbers blocks
        return [_unravel(block, step.grid[:len(grid)], first_fastest=True)]
    total = tiling.num_tiles
    per = -(-total // step.grid[0])
    linear = range(block * per, min(block * per + per, total))
    return [_unravel(t, grid, first_fastest=False) for t in linear]


def _unravel(n: int, grid, first_fastest: bool) -> tuple:
    """Linear number ``n`` as coordinates of ``grid``, axis 0 fastest or slowest."""
    coords = []
    for extent in (grid if first_fastest else reversed(grid)):
        n, c = divmod(n, extent)
        coords.append(c)
    return tuple(coords if first_fastest else reversed(coords))


def _deps(step, task, writers) -> set:
    deps: set = set()
    for tensor, windows in _reads(step, task):
        found = writers.get(id(tensor))
        if found is None:                   # a graph input
            continue
        producer, tiles, own = found
        if tiles is None or windows is None:
            deps.update(t.index for t in own)
            continue
        ptile = producer.group.tiling.tile
        for window in windows:
            ranges = [range(lo // e, (hi - 1) // e + 1) for (lo, hi), e in zip(window, ptile)]
            for coords in itertools.product(*ranges):
                deps.add(tiles[coords].index)
    return deps


def _reads(step, task):
    """(graph tensor, windows or None) per tensor the task reads from global memory: each
    window per axis ``(lo, hi)``; None for an opaque task (it may read anything)."""
    if isinstance(step, AscendCStep) or task.tiles is None or step.form == "kernel":
        return [(t, None) for t in step.params]
    inside = {id(n.output) for n in step.group.nodes}
    reads = []
    for node in step.group.nodes:
        tiling = node.tiling
        for k, tensor in enumerate(node.inputs):
            if id(tensor) in inside:
                continue
            windows = [_window(tensor.shape, tiling.maps[k], tiling.tile, tiling.out_shape, c)
                       for c in task.tiles]
            reads.append((tensor, windows))
    return reads


def _window(shape, axes_map, tile, out_shape, coords) -> tuple:
    """The window of an input of shape ``shape`` the output tile at ``coords`` loads."""
    window = []
    for n, m in zip(shape, axes_map):
        if m is None:
            window.append((0, n))
        else:
            lo = coords[m] * tile[m]
            window.append((lo, min(lo + tile[m], n)))
    return tuple(window)
