"""Matmuls in L0-sized chunks, so the cube's pipes overlap within one matmul and across two.

A matmul whose operands or accumulator fill their L0 buffer runs as one TMOV per operand,
one TMATMUL and one TSTORE: nothing can move into L0A/L0B while it multiplies, and nothing
can multiply into L0C while its result drains. Flash attention's 128 x 256 scores fill all
of L0C, so the cube ran S's matmul, S's store, P V's matmul and P V's store one after the
other (6.3k cycles a key block at 8k, where the FIX pipe alone needs 4.3k). pto-isa's
kernel computes S in 128-column pieces in two accumulators (``assign_running_acc_tile``)
and splits K to its L0 tiles (``matmul_macro_pto``); this pass does both:

* **K chunks**: when an operand is larger than half its L0 buffer, the K axis is cut until
  each piece fits in half. Each piece is a TEXTRACT from the L1 tile the operand was moved
  from and one TMATMUL(.ACC) of the chain, so the extract of the next piece (MTE1) overlaps
  the multiply of this one (M).
* **N chunks**: a fresh product larger than half of L0C that goes only to whole workspace
  slots (a cube -> vector hand-off, whose slots are always whole) is computed and stored in
  column pieces of at most half of L0C: the FIX pipe stores the first while M computes the
  second, and the next matmul waits only for the piece whose bytes it takes.

The pieces are tiles inside the bytes the whole tiles were planned (an accumulator's column
pieces are contiguous in L0C's column-major fractals; L0A/L0B pieces partition their tile),
so memory planning is unchanged; the sync pass orders the pieces by their bytes.
"""
from __future__ import annotations

import dataclasses
import itertools

from ....language import dtypes as dt
from ...ir import ACC, LEFT, MAT, RIGHT
from ..isa import accesses, conflicts, tile_extent
from ..program import Inst, Program, Scalar, TensorArg, Tile, nested_bodies, walk_insts

MATMULS = ("tmatmul", "tmatmul.acc")
MOVES = ("tmov", "textract")


def chunk_matmuls(program: Program) -> Program:
    names = itertools.count()
    for kind, body in program.parts:
        if kind != "vector":
            _rewrite(body, program, names)
    return program


def _rewrite(body: list, program: Program, names) -> None:
    for node in body:
        for nested in nested_bodies(node):
            _rewrite(nested, program, names)
    for k in [k for k, n in enumerate(body) if isinstance(n, Inst) and n.op in MATMULS][::-1]:
        _chunk(body, k, program, names)


def _chunk(body: list, k: int, program: Program, names) -> None:
    """Replace the matmul at ``body[k]`` (with its operand moves and the stores of its
    result) by its pieces, when it has any."""
    mm = body[k]
    left, right, acc = mm.ins[-2], mm.ins[-1], mm.outs[0]
    target = program.target
    moves = [_operand_move(body, k, x, target) for x in (left, right)]
    boxed = any(t.alloc not in (None, (t.rows, t.cols)) for t in (left, right, acc))
    if None in moves or boxed or any(_read_later(body[k + 1:], x) for x in (left, right)):
        return
    stores = _whole_slot_stores(body, k, acc) if mm.op == "tmatmul" else None
    n_pieces = _n_pieces(acc, target.buffers[ACC] // 2) if stores else 1
    k_pieces = _k_pieces(left, right, n_pieces, target)
    if n_pieces * k_pieces == 1:
        return
    m, kk, n = left.rows, left.cols // k_pieces, acc.cols // n_pieces
    lefts = [_piece(left, m, kk, j, names) for j in range(k_pieces)] if k_pieces > 1 else [left]
    rights = [[_piece(right, kk, n, c * k_pieces + j, names) for j in range(k_pieces)]
              for c in range(n_pieces)]
    accs = [_piece(acc, m, n, c, names) for c in range(n_pieces)] if n_pieces > 1 else [acc]
    program.tiles += [t for t in lefts + sum(rights, []) + accs if t not in (left, right, acc)]
    seq = []
    for c in range(n_pieces):
        for j in range(k_pieces):
            if c == 0 and k_pieces > 1:
                seq.append(_extract(moves[0], lefts[j], (0, j * kk)))
            seq.append(_extract(moves[1], rights[c][j], (j * kk, c * n)))
            first = j == 0 and mm.op == "tmatmul"
            ins = [lefts[j], rights[c][j]] if first else [accs[c], lefts[j], rights[c][j]]
            seq.append(Inst("tmatmul" if first else "tmatmul.acc", ins, [accs[c]],
                            dict(mm.attrs)))
    for s in stores if n_pieces > 1 else ():
        body[body.index(s):body.index(s) + 1] = _stores(s, accs, n, names)
    at = body.index(mm)
    body[at:at + 1] = seq
    for mv in moves if k_pieces > 1 else moves[1:]:
        body.remove(mv)


def _operand_move(body: list, k: int, operand: Tile, target) -> Inst | None:
    """The TMOV/TEXTRACT from L1 that fills ``operand`` for ``body[k]``, when it is in the same
    list, nothing between writes its source, and nothing else reads the operand."""
    for j in range(k - 1, -1, -1):
        n = body[j]
        if not isinstance(n, Inst):
            if _touches(n, operand):
                return None
            continue
        if any(x is operand for x in n.outs):
            if n.op not in MOVES or n.ins[0].loc != MAT or n.attrs.get("_host_only"):
                return None
            between = body[j + 1:k]
            src = n.ins[0]
            if any(_writes(x, src, target) for x in between) or any(_touches(x, operand)
                                                             for x in between):
                return None
            return n
        if any(x is operand for x in n.ins):
            return None
    return None


def _read_later(rest: list, operand: Tile) -> bool:
    """Is ``operand`` read in ``rest`` before a move fills it again (its pieces replace it,
    so nothing else may read the whole)?"""
    for n in rest:
        if not isinstance(n, Inst):
            if _touches(n, operand):
                return True
        elif any(x is operand for x in n.ins):
            return True
        elif any(x is operand for x in n.outs):
            return False
    return False


def _touches(node, tile: Tile) -> bool:
    if isinstance(node, Inst):
        return any(x is tile for x in node.ins + node.outs)
    return any(_touches(n, tile) for b in nested_bodies(node) for n in b)


def _writes(node, tile: Tile, target) -> bool:
    """Does ``node`` write bytes of ``tile``'s buffer (a load into it, or into a view)?"""
    mine = ("r", tile_extent(tile, target))
    return any(conflicts(a, mine) for n in walk_insts([node]) if isinstance(n, Inst)
               for a in accesses(n, target))


def _whole_slot_stores(body: list, k: int, acc: Tile) -> list | None:
    """The stores of the product ``body[k]`` into workspace slots (always whole), when they
    are all it is used for."""
    stores = []
    for n in body[k + 1:]:
        if not _touches(n, acc):
            continue
        if not (isinstance(n, Inst) and n.op == "tstore" and n.ins[0] is acc and
                isinstance(n.outs[0], TensorArg) and n.outs[0].workspace and
                not (n.attrs.get("atomic") or n.attrs.get("relu"))):
            return None
        stores.append(n)
    static = acc.v_row == acc.rows and acc.v_col == acc.cols
    return stores if stores and static else None


def _n_pieces(acc: Tile, room: int) -> int:
    """The fewest power-of-two column pieces (whole 16-column boxes) within ``room`` bytes."""
    pieces = 1
    while _bytes(acc) // pieces > room and acc.cols % (pieces * 2 * 16) == 0:
        pieces *= 2
    return pieces


def _k_pieces(left: Tile, right: Tile, n_pieces: int, target) -> int:
    """The fewest power-of-two pieces of K (whole 16-element boxes) that bring each piece of
    an operand within half its L0 buffer."""
    pieces = 1
    while (_bytes(left) // pieces > target.buffers[LEFT] // 2 or
           _bytes(right) // (pieces * n_pieces) > target.buffers[RIGHT] // 2) \
            and left.cols % (pieces * 2 * 16) == 0:
        pieces *= 2
    return pieces


def _bytes(tile: Tile) -> int:
    return tile.numel * tile.dtype.itemsize


def _piece(tile: Tile, rows: int, cols: int, index: int, names) -> Tile:
    """Piece ``index`` of ``tile``'s bytes, a tile of its own."""
    nbytes = rows * cols * tile.dtype.itemsize
    return dataclasses.replace(tile, name=f"{tile.name}_c{next(names)}", rows=rows, cols=cols,
                               v_row=rows, v_col=cols, addr=tile.addr + index * nbytes,
                               alloc=None)


def _extract(move: Inst, piece: Tile, at: tuple) -> Inst:
    """A TEXTRACT of the operand's window at ``at`` (operand coordinates) from the L1 tile
    ``move`` reads, transposed as the move is (its ``starts`` are in the L1 tile's
    coordinates, as ``memory_space._insert_moves`` writes them)."""
    r0, c0 = move.attrs.get("starts", (0, 0))
    transpose = move.attrs.get("transpose", False)
    dr, dc = at[::-1] if transpose else at
    attrs = {k: v for k, v in move.attrs.items() if k == "transpose" or k.startswith("_")}
    attrs["starts"] = (r0 + dr, c0 + dc)
    return Inst("textract", [move.ins[0]], [piece], attrs)


def _stores(store: Inst, accs: list, cols: int, names) -> list:
    """The store of each column piece, ``cols`` further along the slot's row each."""
    tensor, row, col = store.outs
    out = []
    for c, piece in enumerate(accs):
        at = col
        if c:
            step, at = (Scalar(f"cc{next(names)}", dt.int64) for _ in range(2))
            out += [Inst("arith.constant", [], [step], {"value": c * cols}),
                    Inst("arith.add", [col, step], [at])]
        out.append(Inst("tstore", [piece], [tensor, row, at], dict(store.attrs)))
    return out
