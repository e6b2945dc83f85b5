"""Instructions A2/A3 runs only on other element types or shapes, printed on views of a
tile's bytes: fills of bytes and bfloat16 (an i16 view), bitwise ops on int32 and masks (i16
views), UB slices and concatenations (a ``tmuls`` by 1 between a piece and a strided view of
the whole), conversions between rows allocated unalike (row by row), transposing moves into
L0 (the square fractal's other layout) and reshapes (a view of the same bytes).

Each is a function of the printer ``pr`` (``printer._Printer``: ``emit``, ``const``,
``fresh``, ``operand``, ``ref``), which holds the names and lines of the function printed.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ...errors import NotOnChip
from ...language import dtypes as dt
from .program import Inst, Tile, element_type, mask_row_bytes, rows_end_to_end
from .spelling import inner_text, scalar_type


def fill(pr, tile: Tile, value, depth) -> None:
    """``texpands``: every element of ``tile`` becomes ``value``. A2/A3 fills i16, i32,
    f16 and f32 tiles only, so a tile of bytes (a mask: eight elements a byte) or of
    bfloat16 is filled through an i16 view of its bytes, with the value's bits. An L1
    tile is filled whole, its fractal padding too (cube_box.py: the K padding is zero)."""
    padded = tile.alloc is not None
    if padded:
        rows, cols = tile.alloc
        tile = dataclasses.replace(tile, rows=rows, cols=cols, v_row=rows, v_col=cols,
                                   alloc=None)
    if tile.dtype in FILLABLE:
        v = float(value) if tile.dtype.is_floating else int(value)
        c, ty = pr.const(v, tile.dtype.mlir), tile.dtype.mlir
        name, dst_type = pr.operand(tile, "texpands")
        if padded:                      # the whole allocation, seen as %<tile>.w<n>
            name = f"%{tile.name}.{pr.fresh('w')[1:]}"
            pr.emit(f"{name} = pto.alloc_tile addr = {pr.const(tile.addr, 'i64')} : "
                    f"{dst_type}", depth)
        pr.emit(f"pto.texpands ins({c} : {ty}) outs({name} : {dst_type})", depth)
        return
    bits = fill_bits(tile.dtype, value)
    if bits is None:
        raise NotOnChip(f"a {tile.dtype} tile: A2/A3's vector unit has no {tile.dtype} "
                        f"arithmetic; convert the values to a 32-bit type first")
    fill_halves(pr, tile, pr.const(bits, "i16"), depth)


def fill_scalar(pr, i: Inst, depth) -> None:
    """``texpands`` of a run-time scalar into a tile A2/A3 does not fill (bfloat16; PTOAS
    0.27 rejects it): the scalar's bits (``%<scalar>.b<n>``) into the tile's i16 view."""
    (value,), tile = i.ins, i.outs[0]
    if value.dtype.itemsize != 2:
        raise NotOnChip(f"a {tile.dtype} tile filled with a run-time {value.dtype}: A2/A3 "
                        f"fills 16- and 32-bit tiles only", i.attrs.get("_loc"))
    bits = f"{pr.ref(value)}.{pr.fresh('b')[1:]}"
    pr.emit(f"{bits} = arith.bitcast {pr.ref(value)} : {scalar_type(value.dtype)} to i16",
            depth)
    fill_halves(pr, tile, bits, depth)


def fill_halves(pr, tile: Tile, bits: str, depth) -> None:
    """``tile`` seen as i16 (``%<tile>.h<n>``, ``halves``) filled with the i16 ``bits``."""
    view = halves(tile)
    name = f"%{tile.name}.{pr.fresh('h')[1:]}"
    pr.emit(f"{name} = pto.alloc_tile addr = {pr.const(tile.addr, 'i64')} : "
            f"{view.type_text()}", depth)
    pr.emit(f"pto.texpands ins({bits} : i16) outs({name} : {view.type_text()})", depth)


def transposed(pr, i: Inst, depth) -> tuple[str, str]:
    """A transposing move L1 → L0A/L0B (``matmul(a_trans=True)``): an L1 tile in the NZ
    layout holds, byte for byte, its transpose in the ZN layout when the fractal is
    square (16 x 16 elements of 16 bits), so the move reads that view."""
    src = i.ins[0]
    if src.dtype.itemsize != 2:
        raise NotOnChip(
            f"a transposed {src.dtype} matmul operand: A2/A3's L1 fractal of "
            f"{src.dtype} is not square, so no view of it is its transpose. Store the "
            f"operand transposed, or use float16/bfloat16 operands", i.attrs.get("_loc"))
    view = dataclasses.replace(src, rows=src.cols, cols=src.rows, v_row=src.v_col,
                               v_col=src.v_row, alloc=src.alloc and src.alloc[::-1])
    text = view.type_text().replace("blayout=col_major, slayout=row_major",
                                    "blayout=row_major, slayout=col_major")
    name = f"%{src.name}.{pr.fresh('t')[1:]}"
    pr.emit(f"{name} = pto.alloc_tile addr = {pr.const(src.addr, 'i64')} : {text}",
            depth)
    return name, text


def cvt_rows(pr, i: Inst, attrs: dict, depth) -> None:
    """A conversion between tiles whose rows are allocated differently (a row of 16 int8
    takes 32 bytes, of 16 float16 too, but one is 32 elements and the other 16): A2/A3's
    TCVT wants both allocated alike, so it converts row by row, each row seen as a
    one-row tile allocated as wide as the wider of the two (only its valid part is read
    or written)."""
    src, dst = i.ins[0], i.outs[0]
    width = max(row_alloc(src), row_alloc(dst))
    n = pr.fresh("k")[2:]
    inner = inner_text("tcvt", dict(attrs))
    rows, cols = (1, src.rows) if src.is_column else (src.rows, src.cols)
    for r in range(rows):
        names = []
        for t in (src, dst):
            view = dataclasses.replace(t, rows=1, cols=width, v_row=1, v_col=cols,
                                       addr=t.addr + r * row_bytes(t))
            name = f"%{t.name}.k{n}_{r}"
            pr.emit(f"{name} = pto.alloc_tile addr = {pr.const(view.addr, 'i64')} : "
                    f"{view.type_text()}", depth)
            names.append((name, view.type_text()))
        (a, at), (b, bt) = names
        if "tmp" in i.attrs:
            tmp, tmp_type = pr.operand(i.attrs["tmp"], "tcvt")
            a, at = f"{a}, {tmp}", f"{at}, {tmp_type}"
        pr.emit(f"pto.tcvt ins({a}{inner} : {at}) outs({b} : {bt})", depth)


def in_halves(pr, i: Inst, depth) -> None:
    """A2/A3's bitwise instructions take 8- and 16-bit tiles (``tnot`` 16-bit only), and a
    bitwise op does not care how its bits are grouped: a mask's ``tnot`` and an int32
    ``tand``/``tor``/``txor``/``tnot`` run on i16 views of the tiles' bytes (the bits
    past the valid ones are don't-cares)."""
    tiles = i.ins + i.outs + ([i.attrs["tmp"]] if "tmp" in i.attrs else [])
    views = {}
    for t in tiles:
        if t.name not in views:
            views[t.name] = f"%{t.name}.{pr.fresh('h')[1:]}"
            pr.emit(f"{views[t.name]} = pto.alloc_tile addr = "
                    f"{pr.const(t.addr, 'i64')} : {halves(t).type_text()}", depth)
    ins = i.ins + ([i.attrs["tmp"]] if "tmp" in i.attrs else [])
    pr.emit(f"pto.{i.op} ins({', '.join(views[t.name] for t in ins)} : "
            f"{', '.join(halves(t).type_text() for t in ins)}) outs("
            f"{views[i.outs[0].name]} : {halves(i.outs[0]).type_text()})", depth)


def moves(pr, i: Inst, depth) -> None:
    """A UB slice or concatenation. A2/A3's TEXTRACT and TINSERT take L1 tiles only and
    its TMOV wants equal shapes, so each piece is copied by ``tmuls`` by 1 (exact on the
    bits: both sides are seen as integers of the element's width) between the piece and
    a view of the other tile's bytes at the piece's offset (a tile with the other's row
    stride, valid over the piece). A piece must start on a 32-byte boundary of its row."""
    dst = i.outs[0]
    if i.op == "textract":
        r0, c0 = i.attrs["starts"]
        pieces = [(i.ins[0], (r0, c0), dst, "x")]
    else:
        axis, at, pieces = i.attrs["axis"], 0, []
        for src in i.ins:
            pieces.append((dst, (at, 0) if axis == 0 else (0, at), src, "c"))
            at += src.rows if axis == 0 else src.cols
    bits = {2: dt.int16, 4: dt.int32}.get(dst.dtype.itemsize)
    what = "a slice" if i.op == "textract" else "a concatenation"
    if bits is None or dst.dtype == dt.bool_:
        raise NotOnChip(f"{what} of a {dst.dtype} tile: A2/A3 copies UB tiles of 16- and "
                        f"32-bit elements only. Slice or concatenate before converting "
                        f"to {dst.dtype}", i.attrs.get("_loc"))
    one = pr.const(1, bits.mlir)
    n = pr.fresh("v")[2:]
    for k, (whole, (r0, c0), piece, tag) in enumerate(pieces):
        if (c0 * whole.dtype.itemsize) % 32:
            raise NotOnChip(
                f"{what} at column {c0} of a {whole.dtype} tile: A2/A3 moves UB tiles in "
                f"32-byte steps, so a piece must start at a multiple of "
                f"{32 // whole.dtype.itemsize} columns. Load the piece from global memory "
                f"with pl.load instead", i.attrs.get("_loc"))
        addr = whole.addr + r0 * row_bytes(whole) + c0 * whole.dtype.itemsize
        view = (f"%{whole.name}.{tag}{n}_{k}",
                dataclasses.replace(strided_view(whole, piece), dtype=bits, addr=addr))
        own = (f"%{piece.name}.{tag}{n}_{k}p", dataclasses.replace(piece, dtype=bits))
        for name, t in (view, own):
            pr.emit(f"{name} = pto.alloc_tile addr = {pr.const(t.addr, 'i64')} : "
                    f"{t.type_text()}", depth)
        (a, at_), (b, bt) = (view, own) if tag == "x" else (own, view)
        pr.emit(f"pto.tmuls ins({a}, {one} : {at_.type_text()}, {bits.mlir}) "
                f"outs({b} : {bt.type_text()})", depth)


def reshape(pr, i: Inst, src: tuple, dst: tuple, depth) -> None:
    """``treshape``: a view of the source's bytes (``src``/``dst``: operand names and
    types), copied when the destination lies elsewhere; between element types a bitcast,
    which prints nothing (dst's alloc_tile already views src's bytes: plan_memory)."""
    if element_type(i.ins[0].dtype) != element_type(i.outs[0].dtype):
        return
    # (a mask and its ui8 bytes are the same element type: the reader may see a mask's
    # reshape into a tile no compare writes as bool -> uint8, and it must print alike)
    check_reshape(i)
    (src, sty), (dst, dty) = src, dst
    view = f"{dst}.{pr.fresh('rs')[1:]}"
    pr.emit(f"{view} = pto.treshape {src} : {sty} -> {dty}", depth)
    if i.ins[0].addr != i.outs[0].addr:
        pr.emit(f"pto.tmov ins({view} : {dty}) outs({dst} : {dty})", depth)


def on_halves(op: str, dtype) -> bool:
    """Does this bitwise op run on i16 views (``in_halves``)? A2/A3 takes 8/16-bit
    tiles (``tnot``: 16-bit only): int32 ops, and a mask's ``tnot``."""
    if op not in ("tand", "tor", "txor", "tnot"):
        return False
    return dtype.bits == 32 if dtype != dt.bool_ else op == "tnot"


def halves(tile: Tile) -> Tile:
    """An i16 view of a tile's bytes (``fill``, ``in_halves``). A column
    tile's M elements are contiguous: the view is of its (1, M) row."""
    if tile.is_column or tile.is_column_mask:
        tile = dataclasses.replace(tile, rows=1, cols=tile.rows, v_row=1, v_col=tile.v_row)
    if tile.dtype == dt.bool_:
        nbytes, valid = mask_row_bytes(tile.cols), -(-(tile.v_col or tile.cols) // 8)
    else:
        item = tile.dtype.itemsize
        nbytes, valid = row_bytes(tile), (tile.v_col or tile.cols) * item
    return dataclasses.replace(tile, dtype=dt.int16, cols=nbytes // 2, v_col=-(-valid // 2))


# the element types A2/A3's TEXPANDS fills; others are filled through an i16 view
FILLABLE = (dt.int16, dt.int32, dt.float16, dt.float32)


def fill_bits(dtype, value) -> int | None:
    """The signed i16 whose bits fill a tile of ``dtype`` (bytes or bfloat16) with ``value``."""
    if dtype == dt.bool_:
        half = 0xFFFF if value else 0
    elif dtype.itemsize == 1:
        half = (int(value) & 0xFF) * 0x101
    elif dtype == dt.bfloat16:
        half = int(np.array(value, dtype=dtype.to_numpy()).view(np.uint16))
    else:
        return None
    return half - 0x10000 if half & 0x8000 else half


def row_bytes(tile: Tile) -> int:
    return -(-tile.cols * tile.dtype.itemsize // 32) * 32


def row_alloc(tile: Tile) -> int:
    """Elements a UB tile's row is allocated (a (M, 1) tile: its one column, seen as a row)."""
    cols = tile.rows if tile.is_column else tile.cols
    return -(-cols * tile.dtype.itemsize // 32) * 32 // tile.dtype.itemsize


def strided_view(whole: Tile, piece: Tile) -> Tile:
    """A tile over ``whole``'s rows (its row stride) holding ``piece``'s valid region."""
    cols = row_bytes(whole) // whole.dtype.itemsize
    return dataclasses.replace(whole, rows=piece.rows, cols=cols, v_row=piece.rows,
                               v_col=piece.cols)


def check_reshape(i: Inst) -> None:
    """A2/A3's TRESHAPE views the same bytes as another shape, so it reshapes only tiles
    whose elements lie end to end: one row, a column, or rows of whole 32 bytes. A padded
    row would move the elements (and PTOAS rejects the differing byte sizes)."""
    src, dst = i.ins[0], i.outs[0]
    if (src.rows, src.cols) == (dst.rows, dst.cols) or (_end_to_end(src) and _end_to_end(dst)):
        return
    padded = next(t for t in (src, dst) if not _end_to_end(t))
    raise NotOnChip(
        f"a reshape of a ({src.rows}, {src.cols}) {src.dtype} tile into ({dst.rows}, "
        f"{dst.cols}): A2/A3 reshapes a tile's bytes in place, and a row of {padded.cols} "
        f"{padded.dtype} is padded to whole 32 bytes on the chip, so the elements would have "
        f"to move. Reshape between shapes whose rows are whole 32 bytes, or load the data in "
        f"the shape you need", i.attrs.get("_loc"))


def _end_to_end(tile: Tile) -> bool:
    """Do a UB tile's elements lie at consecutive addresses (no padding between rows)?"""
    if tile.is_column_mask or tile.loc != "vec":
        return True
    bits = 1 if tile.dtype == dt.bool_ else 8 * tile.dtype.itemsize
    return rows_end_to_end(tile.rows, tile.cols, bits)
