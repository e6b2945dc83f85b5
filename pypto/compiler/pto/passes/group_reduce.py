"""Row reductions as row chunks of the shapes A2/A3 reduces fastest.

pto-isa's A2/A3 TROWMAX/TROWSUM/TROWMIN fold an fp32 tile with group reductions (vcgmax /
vcgadd, TryOptimizeFP32Reduce) only when it is one of ``isa.GROUP_REDUCE_SHAPES``, 8192
elements (64 x 128, 32 x 256, ...); any other shape folds each row's repeats one instruction
and barrier at a time. A row reduction keeps each row to itself, so a taller tile of one of
those widths is reduced as its chunks of rows, one instruction each, on views of the source,
of the result column and of the scratch: flash attention's 64 x 256 halves of S (128 x 256
blocks, each AIV holding 64 rows) take two 32 x 256 TROWMAX, modelled 288 cycles each,
instead of one of 1056; a height that is no multiple of the shape's rows keeps the rows
left over as one more, ordinary, instruction (48 x 256, 96-row blocks: 32 + 16 rows).

Runs after split-rows, on the rows each AIV holds. The host keeps the one instruction
(``_host_only``), fused with what computes the rows; the chunks are the chip's
(``_chip_only``), as for the two-stage form of wide rows (lower._tile_reduce).
"""
from __future__ import annotations

import dataclasses
import itertools

from ....language import dtypes as dt
from ..isa import GROUP_REDUCE_SHAPES
from ..program import Inst, Program, Tile, nested_bodies, row_pitch

ROW_REDUCTIONS = ("trowmax", "trowsum", "trowmin")


def group_reduce_rows(program: Program) -> Program:
    names = itertools.count()
    for _, body in program.parts:
        _rewrite(body, program, names)
    return program


def _rewrite(body: list, program: Program, names) -> None:
    at = 0
    while at < len(body):
        n = body[at]
        for nested in nested_bodies(n):
            _rewrite(nested, program, names)
        chunks = _chunks(n, names) if isinstance(n, Inst) else []
        if chunks:
            n.attrs["_host_only"] = True
            body[at:at] = chunks
            scratch = list({id(c.attrs["tmp"]): c.attrs["tmp"] for c in chunks}.values())
            program.tiles += [t for c in chunks for t in (c.ins[0], c.outs[0])] + scratch
        at += 1 + len(chunks)


def _whole(t: Tile) -> bool:
    return isinstance(t, Tile) and t.loc == "vec" and t.alloc is None and t.row_of is None \
        and (t.v_row, t.v_col) == (t.rows, t.cols)


def _chunks(n: Inst, names) -> list:
    """The chunk instructions for ``n``, or [] when it is no such reduction."""
    if n.op not in ROW_REDUCTIONS or "_chip_only" in n.attrs or "_host_only" in n.attrs:
        return []
    src, dst, tmp = n.ins[0], n.outs[0], n.attrs.get("tmp")
    if not (_whole(src) and _whole(dst) and _whole(tmp) and src.dtype == dt.float32
            and dst.is_column and tmp.rows == src.rows):
        return []
    rows = 8192 // src.cols if 8192 % src.cols == 0 else 0
    if (rows, src.cols) not in GROUP_REDUCE_SHAPES or src.rows <= rows:
        return []
    src_row = row_pitch(src) * src.dtype.itemsize
    chip = {k: v for k, v in n.attrs.items() if k not in ("tmp", "_fuse")}
    chip["_chip_only"] = True
    # whole chunks, then the rows left over (48 = 32 + 16) the ordinary way; one after
    # another, so they share the scratch (a view per height)
    heights = [min(rows, src.rows - r) for r in range(0, src.rows, rows)]
    scratch = {h: _view(tmp, h, tmp.addr, names) for h in dict.fromkeys(heights)}
    return [Inst(n.op, [_view(src, h, src.addr + i * rows * src_row, names)],
                 [_view(dst, h, dst.addr + i * rows * dst.dtype.itemsize, names)],
                 {**chip, "tmp": scratch[h]})
            for i, h in enumerate(heights)]


def _view(t: Tile, rows: int, addr: int, names) -> Tile:
    return dataclasses.replace(t, name=f"{t.name}_g{next(names)}", rows=rows, v_row=rows,
                               addr=addr)
