"""What ``pypto.compile`` builds from a graph: which nodes share a kernel, and each kernel's
launch form.

**Fusion** (``options["tile_fusion"]``, on by default): a node whose output only one other node
reads, tile by tile in the same windows (same output shape and tile, the consumer following
every axis of it), is computed in the consumer's kernel: the intermediate tile is passed on in
on-chip memory instead of being stored to global memory and loaded again. Nodes using the
cube or cross-block synchronisation are not fused (a matmul result may not feed vector code
inside the tile loop on 910B, and a barrier's meaning depends on its launch).

An Ascend C call (``ascend_c_node``) is a group of its own and is never fused, either way: its
kernel reads and writes global memory.

**Launch forms**: ``"tile"`` launches one block per tile (the grid is the tile grid);
``"stride"`` launches ``min(tiles, cores)`` blocks, block ``b`` looping over its contiguous
share of tiles ``[b*c, (b+1)*c)`` with ``c = cdiv(tiles, blocks)`` (the ``"grid_stride"``
strategy: a persistent kernel); ``"uniform"`` gives every block the same number of rounds,
block ``b`` taking tiles ``b, b + G, ...`` (tiles past the end load padding and store nothing),
which a tile op with ``pypto.barrier()`` needs so that every block reaches every barrier.
"""
from __future__ import annotations

from dataclasses import dataclass

# "auto" launches one block per tile up to this many tiles per core, and the grid-stride form
# beyond it. Measured (fp32 add, 64 to 8192 tiles, docs/language.md "Graph API"): up to a few
# tiles per core the two forms take the same host time and the same modelled NPU time (the
# loop only adds scalar work); with more tiles the grid-stride form is 2-9% faster on the host
# and up to 18% faster in the cycle model (8192 tiles of 512: 47.7 vs 58.5 us), which charges
# every block's start.
AUTO_TILES_PER_CORE = 4


@dataclass(eq=False)
class Group:
    """Nodes computed by one kernel, in order; the last one's output is stored."""
    nodes: list

    @property
    def last(self):
        return self.nodes[-1]

    @property
    def tiling(self):
        return self.last.tiling

    @property
    def output(self):
        return self.last.output

    @property
    def uses_cube(self) -> bool:
        return any(n.tiling.uses_cube for n in self.nodes)

    @property
    def cross_block(self) -> bool:
        return any(n.tiling.cross_block for n in self.nodes)

    def external_inputs(self) -> list:
        """Graph tensors the group reads from global memory, in first-use order."""
        inside = {id(n.output) for n in self.nodes}
        seen, out = set(), []
        for n in self.nodes:
            for t in n.inputs:
                if id(t) not in inside and id(t) not in seen:
                    seen.add(id(t))
                    out.append(t)
        return out


def plan_groups(nodes, fuse: bool) -> list[Group]:
    """The kernels of ``nodes`` (the graph's when it was compiled, in creation order) in launch
    order: each group runs after the groups it reads. Fusion asks who reads a tensor among
    these nodes only, not among nodes added to the graph later."""
    groups: list[Group] = []
    by_output: dict[int, Group] = {}
    readers: dict[int, list] = {}        # id(tensor) -> the nodes that read it
    for node in nodes:
        for key in {id(t) for t in node.inputs}:
            readers.setdefault(key, []).append(node)
    for node in nodes:
        target = None
        fusible = getattr(node, "fusible", True)    # kernel nodes, Ascend C calls: steps of their own
        if fuse and fusible:
            for t in node.inputs:
                g = by_output.get(id(t))
                if g is not None and _fusible(g.last, node, readers):
                    target = g
                    break
        if target is None:
            target = Group([])
            groups.append(target)
        else:
            del by_output[id(target.output)]
        target.nodes.append(node)
        if fusible:
            by_output[id(node.output)] = target
    return sorted(groups, key=lambda g: nodes.index(g.last))


def _fusible(producer, consumer, readers) -> bool:
    p, c = producer.tiling, consumer.tiling
    if readers.get(id(producer.output)) != [consumer]:
        return False
    if p.out_shape != c.out_shape or p.tile != c.tile or p.broadcast_result:
        return False
    if p.uses_cube or c.uses_cube or p.cross_block or c.cross_block:
        return False
    if producer.strategy != consumer.strategy:
        return False
    identity = tuple(range(len(c.out_shape)))
    return all(c.maps[k] == identity for k, t in enumerate(consumer.inputs)
               if t is producer.output)


def candidate_forms(group: Group, cores: int, debug: bool = False) -> list:
    """The (form, grid) pairs the tuner ranks for a group: both of ``"auto"``'s forms, or the
    one form the group can or was told to take (a fixed strategy, cross-block sync, debug)."""
    if group.last.strategy != "auto" or group.cross_block or debug:
        return [choose_form(group, cores, debug)]
    tiles = group.tiling.num_tiles
    return [("tile", group.tiling.grid), ("stride", (min(tiles, cores),))]


def choose_form(group: Group, cores: int, debug: bool = False) -> tuple:
    """(form, grid) for a group launched on ``cores`` cores, as its last node's
    ``parallel_strategy`` asks; ``"auto"`` by the tile-count rule above (used only when
    ``pypto.compile(options={"autotune": False})``: otherwise the tuner ranks
    ``candidate_forms``)."""
    strategy = group.last.strategy
    tiling = group.tiling
    tiles = tiling.num_tiles
    if group.cross_block:
        if strategy == "data_parallel" and tiles > cores:
            raise ValueError(
                f"tile_map(parallel_strategy='data_parallel'): node {group.last.name!r} uses "
                f"pypto.barrier/signal/wait, so its blocks must all run at once, but it has "
                f"{tiles} tiles and the target has {cores} cores; use parallel_strategy="
                "'auto' (each block then loops over several tiles)")
        return "uniform", (min(tiles, cores),)
    if debug or strategy == "data_parallel" or (
            strategy == "auto" and tiles <= AUTO_TILES_PER_CORE * cores):
        return "tile", tiling.grid
    return "stride", (min(tiles, cores),)
