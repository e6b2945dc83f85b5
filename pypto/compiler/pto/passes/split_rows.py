"""The vector part of a mixed kernel on both vector cores of the cluster, half the rows each.

A2/A3 starts a mixed kernel's vector function on both AIVs of a cluster (``subblocks.py``).
PyPTO's vector part works on the rows of the tiles the cube hands over (flash attention: S,
P, O, the row max and sum of BLOCK_M query rows) and treats every row alike, so the two AIVs
can share it as pto-isa's hand-written kernels do: each takes half the rows, sub-block b rows
b * R/2 ... b * R/2 + R/2 - 1, and reads and writes only those rows of every window. The cube
part is unchanged: FFTS mode 2 gives each AIV the cube's flags, and the cube's wait ends when
both AIVs have set theirs, so the halves meet in the workspace as the whole did.

A tile of R rows (R: the rows of the hand-off tiles) is a row tile and becomes R/2 rows at
the same address; every window of one is moved down by the sub-block's first row. Row
positions computed from an iota (``pl.arange(0, R)[:, None]``, a causal mask's rows) start at
the sub-block's first row. A part whose work mixes rows (column reductions, transposes,
element access, reshapes of row tiles) keeps sub-block 0 doing it all.
"""
from __future__ import annotations

import dataclasses
import itertools
import threading

from ....language import dtypes as dt
from ..isa import is_scalar
from ..program import (Inst, Program, RowSplitRefused, Scalar, TensorArg, Tile, nested_bodies,
                       walk_insts)
from .clone import unfuse

_local = threading.local()

# instructions that combine or move values across rows, or address elements (and every column
# instruction, TCOLSUM/TCOLMAX/..., but the row broadcasts TCOLEXPAND*)
_MIXES_ROWS = ("ttrans", "tgetval", "tsetval", "tgather", "tscatter", "tsort", "tmrgsort",
               "textract", "tconcat", "tci")


def _mixes_rows(op: str) -> bool:
    return op.startswith(_MIXES_ROWS) or (op.startswith("tcol") and
                                          not op.startswith("tcolexpand"))


def _fresh() -> str:
    return f"rows{next(_local.names)}"


def split_rows(program: Program) -> Program:
    """The split, or ``program`` as it was; a program planned for half rows is split or
    refused (``RowSplitRefused``)."""
    scale = program.vec_scale
    out = _split(program)
    if scale == 2 and out.vector_cores != 2:
        raise RowSplitRefused(f"the vector part of {program.name} keeps its rows whole")
    return out


def _split(program: Program) -> Program:
    if program.kind != "mixed" or program.vector_cores != 1:
        return program
    _local.names = itertools.count()
    body = program.vector_body
    insts = [n for n in walk_insts(body) if isinstance(n, Inst)]
    rows = _hand_off_rows(insts)
    if rows is None:
        return program
    half = rows // 2
    iotas = _iotas(insts, rows)
    if iotas is None or not _row_local(insts, rows, iotas):
        return program
    tiles = _halved(insts, rows, half, iotas, program.vec_scale)
    if tiles is None:
        return program
    sb, h, first = (Scalar(n, dt.int64) for n in ("rows_sb", "rows_half", "rows_first"))
    head = [Inst("pto.get_subblock_idx", [], [sb]),
            Inst("arith.constant", [], [h], {"value": half}),
            Inst("arith.mul", [sb, h], [first])]
    _rewrite(body, tiles, first, iotas, rows)
    program.vector_body = head + body
    program.tiles = [t for t in program.tiles if id(t) not in tiles] + list(tiles.values())
    program.vector_cores = 2
    if program.vec_scale == 2:         # the offsets of the half-row plan (Program.vec_scale)
        for n in insts:
            if "_pong_addr" in n.attrs and n.outs[0].loc == "vec":
                n.attrs["_pong_addr"] //= 2
        program.buffer_bytes = {**program.buffer_bytes,
                                "vec": program.buffer_bytes.get("vec", 0) // 2}
        program.vec_scale = 1
    return program


def _tiles_of(inst: Inst) -> list:
    out = [x for x in inst.ins + inst.outs if isinstance(x, Tile)]
    tmp = inst.attrs.get("tmp")
    return out + ([tmp] if isinstance(tmp, Tile) else [])


def _hand_off_rows(insts: list) -> int | None:
    """R, the rows of every tile the part takes from or gives to the cube, when they agree
    and R is a multiple of 32 (halves of whole 16-row groups)."""
    rows = {(n.outs[0] if n.op == "tload" else n.ins[0]).alloc_shape[0] for n in insts
            if (n.op == "tload" and isinstance(n.ins[0], TensorArg) and n.ins[0].workspace) or
            (n.op == "tstore" and isinstance(n.outs[0], TensorArg) and n.outs[0].workspace)}
    if len(rows) != 1:
        return None
    r = rows.pop()
    return r if r % 32 == 0 else None


def _is_row_tile(t: Tile, rows: int) -> bool:
    return t.loc == "vec" and t.alloc_shape[0] == rows and t.row_of is None


def _iotas(insts: list, rows: int) -> dict | None:
    """{id(iota tile): the TCI writing it} for the (1, R) iotas a reshape makes row positions
    of (an (R, 1) row tile); None when a row tile is reshaped otherwise."""
    writers = {}
    for n in insts:
        for t in n.outs:
            if isinstance(t, Tile):
                writers.setdefault(id(t), []).append(n)
    out = {}
    for n in insts:
        if n.op != "treshape":
            continue
        src, dst = n.ins[0], n.outs[0]
        if not (_is_row_tile(src, rows) or _is_row_tile(dst, rows)):
            continue
        made = writers.get(id(src), [])
        if _is_row_tile(dst, rows) and dst.cols == 1 and src.rows == 1 and \
                src.cols == rows and [w.op for w in made] == ["tci"]:
            out[id(src)] = made[0]
            continue
        return None
    return out


def _row_local(insts: list, rows: int, iotas: dict) -> bool:
    """Does every instruction on row tiles keep each row to itself?"""
    for n in insts:
        tiles = _tiles_of(n)
        if n.op == "tci" and all(id(t) in iotas for t in n.outs if isinstance(t, Tile)):
            continue
        if any(_is_row_tile(t, rows) for t in tiles) and _mixes_rows(n.op):
            return False
        if any(t.row_of is not None and t.row_of[0].alloc_shape[0] == rows for t in tiles):
            return False
    return True


def _halved(insts: list, rows: int, half: int, iotas: dict, scale: int) -> dict | None:
    """{id(tile): its half} for every row tile (and iota) of the part, and with ``scale`` 2
    (``Program.vec_scale``) every other UB tile at half its offset too; None when a row tile
    has a valid region of other rows than all, or a whole row of a tile is addressed."""
    out = {}
    for n in insts:
        for t in _tiles_of(n):
            if id(t) in out:
                continue
            at = t.addr // scale
            if id(t) in iotas:
                out[id(t)] = dataclasses.replace(t, name=f"{t.name}_h", cols=half, addr=at,
                                                 v_col=half if t.v_col == rows else t.v_col)
            elif _is_row_tile(t, rows):
                if t.v_row not in (None, rows) or t.alloc is not None:
                    return None
                out[id(t)] = dataclasses.replace(t, name=f"{t.name}_h", rows=half, addr=at,
                                                 v_row=None if t.v_row is None else half)
            elif scale != 1 and t.loc == "vec":
                if t.row_of is not None:
                    return None
                out[id(t)] = dataclasses.replace(t, addr=at)
    return out


def _rewrite(body: list, tiles: dict, first: Scalar, iotas: dict, rows: int) -> None:
    """Row tiles renamed to their halves, row windows moved down by ``first`` (in place)."""
    at = 0
    while at < len(body):
        n = body[at]
        for nested in nested_bodies(n):
            _rewrite(nested, tiles, first, iotas, rows)
        if isinstance(n, Inst) and not is_scalar(n):
            before, after = _rewrite_inst(n, tiles, first, iotas, rows)
            if after:
                unfuse(body, {n.attrs.get("_fuse")} - {None})
            start = _group_start(body, at)     # a host fusion group runs as one loop
            body[at + 1:at + 1] = after
            body[start:start] = before
            at += len(before) + len(after)
        at += 1


def _group_start(body: list, at: int) -> int:
    """Where the host fusion group (``_fuse``) holding ``body[at]`` starts: the offsets
    computed for it go in front of the group, which must stay contiguous."""
    group = body[at].attrs.get("_fuse")
    while group is not None and at > 0 and isinstance(body[at - 1], Inst) and \
            body[at - 1].attrs.get("_fuse") == group:
        at -= 1
    return at


def _rewrite_inst(n: Inst, tiles: dict, first: Scalar, iotas: dict,
                  rows: int) -> tuple[list, list]:
    """``n`` on the halves; (instructions it now needs before it, after it)."""
    before, after = [], []
    if n.op == "tci" and id(n.outs[0]) in iotas:      # positions from the sub-block's row
        iota = tiles[id(n.outs[0])]
        start = Scalar(_fresh(), iota.dtype)
        after = [Inst("arith.cast", [first], [start], {"dtype": iota.dtype}),
                 Inst("tadds", [iota, start], [iota])]
    elif n.op in ("tload", "tstore"):
        window = n.ins if n.op == "tload" else n.outs
        tile = n.outs[0] if n.op == "tload" else n.ins[0]
        if _is_row_tile(tile, rows):
            row = Scalar(_fresh(), dt.int64)
            before = [Inst("arith.add", [window[1], first], [row])]
            window[1] = row
    n.ins = [tiles.get(id(x), x) if isinstance(x, Tile) else x for x in n.ins]
    n.outs = [tiles.get(id(x), x) if isinstance(x, Tile) else x for x in n.outs]
    if isinstance(n.attrs.get("tmp"), Tile):
        n.attrs["tmp"] = tiles.get(id(n.attrs["tmp"]), n.attrs["tmp"])
    return before, after
