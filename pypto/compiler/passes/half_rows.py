"""The UB planned for the rows one AIV holds, when a mixed kernel's vector part will be shared
by both AIVs of its cluster, half the rows each (pto/passes/split_rows.py): the plan then
has twice the room the whole rows would leave (flash attention's 128 x 128 and 64 x 256
blocks fit only so)."""
from __future__ import annotations

from ..ir import VEC, Module, Value, walk
from ..pto import view2d
from ..pto.isa import footprint


def tile_bytes(ttype, target, alloc=None) -> int:
    """Bytes a tile occupies in its buffer (``isa.footprint``); ``alloc``: a cube tile's
    allocated (rows, cols) (``cube_box``), else its shape."""
    rows, cols = alloc or view2d(ttype.shape)
    return footprint(ttype.space, ttype.dtype, rows, cols, target)


def hand_off_rows(module: Module) -> int | None:
    """R, when the kernel's vector part will run on both AIVs of its cluster, half of R rows
    each (pto/passes/split_rows.py): the rows of every UB tile handed to or from the cube
    through the GM workspace, when they agree and are a multiple of 32. Its UB tiles of R rows
    are then planned at R/2 rows, the bytes one AIV holds; the lowering places the whole rows
    at twice these offsets (``Program.vec_scale``) until the split halves them. The split
    decides for itself; when it refuses, the kernel is built again without this
    (``program.RowSplitRefused``)."""
    if module.facts.get("self_synced") or not module.facts.get("split_rows_plan", True):
        return None
    rows = set()
    for op in walk(module.kernel.body):
        if op.name in ("tile.load", "tile.store") and op.operands[0].owner is not None and \
                op.operands[0].owner.name == "tensor.workspace":
            tile = op.result if op.name == "tile.load" else op.operands[-1]
            if tile.type.space == VEC:
                rows.add(view2d(tile.type.shape)[0])
    return rows.pop() if len(rows) == 1 and next(iter(rows)) % 32 == 0 else None


class Sizing:
    """The bytes a buffer class takes: a cube tile's whole fractal boxes (``cube_box``); with
    ``rows`` (``hand_off_rows``), a UB tile of that many rows at half of them, and the class as
    large as its largest member."""

    def __init__(self, boxes: dict, rows: int | None):
        self.boxes, self.rows = boxes, rows

    def alloc(self, v: Value):
        box = self.boxes.get(v.id)
        if box is None and self.rows and v.type.space == VEC:
            rows, cols = view2d(v.type.shape)
            if rows == self.rows:
                return rows // 2, cols
        return box

    def bytes(self, member, target) -> int:
        root, vals = member[2], member[3]
        size = tile_bytes(root.type, target, self.alloc(root))
        if self.rows:
            size = max([size] + [tile_bytes(v.type, target, self.alloc(v))
                                 for v in vals.values()])
        return size
