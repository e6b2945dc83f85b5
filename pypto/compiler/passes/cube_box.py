"""Cube tiles allocated in whole fractal boxes, their matrices kept as the valid region.

A tile in L1, L0A, L0B or L0C is laid out in fractal boxes (``program.fractal_box``: 16 rows
x 32 bytes in L1 and L0A, 32 bytes x 16 columns in L0B, 16 x 16 in L0C), and the chip's tile
type must be whole boxes: PTOAS's verifier refuses an ``alloc_tile`` that is not
("boxed tile cols to be a multiple of innerCols"), and so do pto-isa's templates
(common/pto_tile.hpp, ``Cols % InnerCols``). A matrix of another shape (an int8 tile of 16
columns, a float32 tile of 8 rows) is allocated rounded up, its own shape the valid region.

The rounding cannot be each tile's own: pto-isa's TMOV L1 -> L0A/L0B wants source and
destination of one shape (npu/a2a3/TMov.hpp) and TMATMUL wants M, K and N to agree between
L0A, L0B and L0C (cpu/TMatmul.hpp ``CheckMadValid``). So every axis of a cube tile is a node,
the axes these instructions equate (and the tiles that share a buffer: a loop's carried
accumulator) are one group, and a group is rounded up to the least common multiple of its
members' boxes. An int8 (M, K) @ (K, N) of 16 x 32 @ 32 x 16 becomes L1/L0A 16 x 32, L1/L0B
32 x 32 and L0C 16 x 32 (L1's box is 32 int8 columns wide, and L0B must match it); a tile
whose whole group already fits keeps its shape.

What the padding holds: an L1 tile is filled (zeros) before its load, so the K padding a
TMOV carries into L0A/L0B is zero; TMATMUL multiplies the valid M x K x N only (pto-isa's
``mad`` is given the valid shapes), and a store writes the valid region only.
"""
from __future__ import annotations

import math

from ..ir import Block, Value, walk
from ..pto.program import BOXED, fractal_box, view2d
from .memory_space import Classes

def _is_cube(v: Value) -> bool:
    return v.is_tile and v.type.space in BOXED


def cube_boxes(body: Block, classes, rows=()) -> dict[int, tuple[int, int]]:
    """Value id → the (rows, cols) it is allocated, for every cube tile value of ``body``;
    ``classes`` (find) groups the values that share one buffer; ``rows``: ids of L1 rows
    bound for the bias table, which are plain rows, not boxed."""
    values: dict[int, Value] = {}
    axes: dict[int, tuple] = {}                 # value id → its two axes, the groups' nodes
    groups = Classes(key=lambda axis: axis)

    def union(a: Value, i: int, b: Value, j: int) -> None:
        groups.union(axes[a.id][i], axes[b.id][j])

    def note(v: Value) -> None:
        if _is_cube(v) and v.id not in values and v.id not in rows:
            values[v.id] = v
            axes[v.id] = ((v.id, 0), (v.id, 1))

    for op in walk(body):
        for v in op.operands + op.results:
            note(v)
        for blk in op.blocks:
            for a in blk.args:
                note(a)
        if op.name == "tile.mov" and _is_cube(op.result):
            flip = 1 if op.attrs.get("transpose") else 0   # the L1 tile's ZN view (printer)
            for axis in (0, 1):
                union(op.operands[0], axis ^ flip, op.result, axis)
        elif op.name == "tile.matmul":
            a, b, c = op.operands[0], op.operands[1], op.result
            union(a, 0, c, 0)                      # M
            union(a, 1, b, 0)                      # K
            union(b, 1, c, 1)                      # N
            if len(op.operands) == 3:              # the accumulator, updated in place
                union(op.operands[2], 0, c, 0)
                union(op.operands[2], 1, c, 1)
    for v in list(values.values()):
        root = classes.find(v)
        note(root)
        if root is not v and _is_cube(root):
            union(root, 0, v, 0)
            union(root, 1, v, 1)

    extent: dict[tuple, int] = {}
    step: dict[tuple, int] = {}
    for v in values.values():
        shape = view2d(v.type.shape)
        box = fractal_box(v.type.space, v.type.dtype)
        for axis in (0, 1):
            g = groups.find(axes[v.id][axis])
            extent[g] = max(extent.get(g, 0), shape[axis])
            step[g] = math.lcm(step.get(g, 1), box[axis])
    return {v.id: tuple(-(-extent[g] // step[g]) * step[g]
                        for g in map(groups.find, axes[v.id])) for v in values.values()}
