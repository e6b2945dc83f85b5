"""The reader's tile, window and flag statements: the printer's forms of them read back.

Handlers of the reader's statement table (``reader._STATEMENTS``), each a function of the
parser ``p`` (``reader.Parser``: ``value``, ``define``, ``operands``, ``attrs``, ``match``,
``error``) and of the statement's results, operands and scope: a window (``partition_view``)
and the load, fill or store through it (``print_windows``), the instructions printed on views
of a tile's bytes (``print_views``) folded back into one, sorts and gathers, flags; and the
mask widths the ui8 text does not carry.
"""
from __future__ import annotations

import dataclasses
import math
import re

import numpy as np

from ...language import dtypes as dt
from .isa import PAD_NULL, PAD_ZERO, TMP_OPS
from .program import BOXED, ROW_LAYOUT, If, Inst, TensorArg, Tile
from .spelling import (BARRIER, CROSS_CORE, EXECUTED, FLAG, PARTITION, literal, pad_value,
                       split_list, sync_lines)
from .spelling import SSA_NAME as _N


def s_partition(p, op, results, rest, scope, out):
    m = p.match(PARTITION, rest, "pto.partition_view")
    if len(results) != 1 or m.group(1) not in scope.tensor_views:
        raise p.error("pto.partition_view of an unknown tensor view")
    tensor = scope.tensor_views[m.group(1)]
    offsets = split_list(m.group(2))
    if tensor.layout != "ND":
        offsets = layout_offsets(p, tensor, results[0], offsets, scope)
    elif tensor.workspace:           # this block's plane of the workspace (workspace_view)
        offsets = offsets[-2:]
    elif tensor.rank == 1:           # printed with a leading 0 offset, as a 1 x n view
        offsets = offsets[1:]
    elif tensor.rank > 2:            # a plane's clamped offsets (print_windows.plane)
        offsets = [f"{results[0]}.o{axis}" if o == f"{results[0]}.c{axis}" else o
                   for axis, o in enumerate(offsets)]
    offsets = [p.value(o, scope) for o in offsets]
    scope.derived.pop(results[0], None)      # the clipped sizes: derived again
    scope.partitions[results[0]] = (tensor, offsets)


def layout_offsets(p, tensor: TensorArg, view: str, offsets: list, scope) -> list:
    """A layout tensor's logical offsets, read back from the lines print_windows.layout_partition
    derives the physical ones with (NZ: the fractal divisions; NC1HWC0: the channel
    group's division and the pixel's h * W + w, which also gives W)."""
    lines = {ln.strip().split(" = ", 1)[0]: ln.strip().split(" = ", 1)[1]
             for ln in scope.derived.get(view, [])}

    def operand(tag, op, index=0):
        text = lines.get(f"{view}.{tag}", "")
        m = re.fullmatch(rf"{op} ({_N}), ({_N}) : index", text)
        if m is None:
            raise p.error(f"{view}: the {tensor.layout} window's line {view}.{tag} is "
                          "not as the printer writes it")
        return m.group(1 + index)
    if tensor.layout == "NZ":
        return [operand("f2", "arith.divsi"), operand("f1", "arith.divsi")]
    width = p.static(operand("hw", "arith.muli", 1), scope)
    n, c1s, _, hw, c0 = tensor.dims
    tensor.logical = (n, c1s * c0, hw // width, width)
    return [operand("nn", "arith.minsi"), operand("g", "arith.floordivsi"),
            operand("hw", "arith.muli"), operand("px", "arith.addi", 1)]


def partition(p, views: list, tiles: list, scope) -> tuple:
    """The tensor and offsets of the one partition view of a tload/tstore."""
    if len(views) != 1 or views[0] not in scope.partitions or len(tiles) != 1:
        raise p.error("tload/tstore move one tile from or to one pto.partition_view")
    tile = p.value(tiles[0], scope)
    if not isinstance(tile, Tile):
        raise p.error(f"{tiles[0]} is not a tile")
    return scope.partitions[views[0]]


def s_sync(p, op, results, rest, scope, out):
    name = op[len("pto."):]
    if name in ("set_flag", "wait_flag"):
        src, dst, event = p.match(FLAG, rest, op).groups()
        attrs = {"src": src, "dst": dst, "event": int(event)}
    elif name == "barrier":
        attrs = {"pipe": p.match(BARRIER, rest, op).group(1)}
    else:
        pipe, flag, mode = p.match(CROSS_CORE, rest, op).groups()
        attrs = {"pipe": pipe, "flag": int(flag)}
        if mode is not None:
            attrs["mode"] = int(mode)
        syncall, part = Inst("syncall", [], []), p.kind
        if name == "sync.wait" and out and isinstance(out[-1], Inst) and \
                out[-1].op == "sync.set" and \
                sync_lines(syncall, part) == [
                    sync_lines(out[-1], part)[0],
                    sync_lines(Inst(name, [], [], attrs), part)[0]]:
            out[-1] = syncall       # FFTS mode 0 set + wait: every block meets
            return
    out.append(Inst(name, [], [], attrs))


def _fills(nodes):
    """The constant fills (``texpands`` without operands) among ``nodes``, looking inside an
    ``scf.if`` with no else branch (a load's fill under its window check)."""
    for n in nodes:
        if isinstance(n, If) and not n.else_body:
            yield from _fills(n.then_body)
        elif isinstance(n, Inst) and n.op == "texpands" and not n.ins:
            yield n


def s_tile(p, op, results, rest, scope, out):
    """``pto.<op> ins(...) outs(...) {attrs}``: any tile instruction, known or not."""
    ins, outs, inner, attrs = p.operands(rest, op)
    name = op[len("pto."):]
    attrs = {**inner, **p.attrs(attrs)}
    if name == "tfillpad":          # the window a load read, again (print_windows.fill_pad)
        window = re.fullmatch(r"%[^.]+\.(pv\d+)", ins[0]) if ins else None
        if window is None or f"%{window.group(1)}" not in scope.partitions:
            raise p.error("tfillpad pads the window of a pto.partition_view")
        tensor, offsets = scope.partitions[f"%{window.group(1)}"]
        tile = p.value(outs[0], scope)
        pad = pad_value(scope.pads.get(ins[0], PAD_ZERO), tile.dtype)
        out.append(Inst("tfillpad", [tensor, *offsets], [tile], {"pad": pad}))
        return
    if name == "texpands" and outs and re.search(r"\.h\d+$", outs[0]) and ins and \
            ins[0] in scope.consts:
        tile = p.value(outs[0], scope)     # bytes or bfloat16 through an i16 view
        half = scope.consts[ins[0]][0] & 0xFFFF
        byte = half & 0xFF
        if tile.dtype == dt.bfloat16:
            value = float(np.array(half, np.uint16).view(tile.dtype.to_numpy()))
        elif tile.dtype == dt.bool_:
            value = half != 0
        else:
            value = byte - 256 if tile.dtype.is_signed and byte >= 128 else byte
        out.append(Inst("texpands", [], [tile], {"value": value}))
        return
    if name == "tload":
        tensor, offsets = partition(p, ins, outs, scope)
        tile = p.moved_tile(outs[0], scope)
        kind = scope.pads.get(outs[0], PAD_ZERO)
        fill = next((i for i in _fills(reversed(out)) if i.outs == [tile]), None)
        if kind == PAD_NULL and fill is not None:
            # filled first (lower._tile_load), perhaps under the window's check (fillpad)
            attrs["pad"] = fill.attrs["value"]
        elif kind == PAD_NULL:
            # a row of a tile filled before (lower._tile_load_row), or a whole window whose
            # fill was dropped at compile time (passes/fillpad.py)
            attrs["pad"] = None
        else:
            attrs["pad"] = pad_value(kind, tile.dtype)
        out.append(Inst("tload", [tensor, *offsets], [tile], attrs))
        return
    if name == "tstore":
        tensor, offsets = partition(p, outs, ins, scope)
        out.append(Inst("tstore", [p.moved_tile(ins[0], scope)], [tensor, *offsets], attrs))
        return
    if name in ("tcvt", "tci") and len(ins) == 2:      # the scratch (lower.scratch_type)
        attrs["tmp"] = p.value(ins.pop(), scope)
    if name in ("texpands", "tci") and len(ins) == 1 and ins[0] in scope.consts:
        value = scope.consts[ins[0]][0]
        # a fresh NaN per use, as the compiler makes them: NaN != NaN, so the printer
        # hoists one %cnan_<type> line per use, and the reprint must too
        attrs["value" if name == "texpands" else "start"] = float("nan") if isinstance(
            value, float) and math.isnan(value) else value
        ins = []
    if name == "tmuls" and len(outs) == 1 and ins and (
            piece(p, ins[0], outs[0], scope, out)):
        return
    if name in ("tmov", "textract") and ins and re.search(r"\.t\d+$", ins[0]):
        attrs["transpose"] = True        # through a transposed view (print_views.transposed)
    if name == "textract" and len(ins) == 3:       # from L1: offsets as operands
        starts = tuple(scope.consts[n][0] for n in ins[1:])
        # the transposed view's offsets are the source's, swapped (printer: textract)
        attrs["starts"] = starts[::-1] if attrs.get("transpose") else starts
        ins = ins[:1]
    row = re.search(r"\.k(\d+)_(\d+)$", ins[0]) if name == "tcvt" and ins else None
    if row is not None:              # a conversion row by row (print_views.cvt_rows)
        if row.group(2) == "0":
            out.append(Inst("tcvt", [p.value(ins[0], scope)],
                            [p.value(outs[0], scope)], attrs))
            if _printer_default(out[-1]):
                del attrs["rmode"]
        return
    if name in ("tmrgsort", "tgather"):
        sort_inst(p, name, ins, outs, inner, scope, out)
        return
    if name == "trowexpand" and outs and outs[0].endswith(".row"):
        name = "tcolexpand"          # (1, 1) → (M, 1) on the row view (printer.inst)
    if name == "tsort32" and len(ins) == 3:      # the unaligned form's scratch row
        attrs["tmp"] = p.value(ins.pop(), scope)
    if name.startswith("trowexpand") and len(ins) == 3:
        ins.pop()       # the vbrcb scratch: PyPTO's form uses the UB's reserved top (expand.py)
    if name in TMP_OPS:
        if not ins:
            raise p.error(f"{op} takes a scratch tile as its last input")
        # TSELS: ins(%mask, %src, %tmp, %scalar)
        attrs["tmp"] = p.value(ins.pop(2 if name == "tsels" and len(ins) == 4 else -1), scope)
    inst = Inst(name, [p.value(n, scope) for n in ins],
                [p.value(n, scope) for n in outs], attrs)
    if name == "tcvt" and _printer_default(inst):
        del attrs["rmode"]
    out.append(inst)


def sort_inst(p, name, ins, outs, inner, scope, out) -> None:
    """printer.sort_inst's forms: TMRGSORT with a blockLen constant or with lists, a
    scratch and the counts vector; TGATHER with a mask pattern."""
    if name == "tgather":
        if "pattern" not in inner or len(ins) != 1:
            raise p.error("pto.tgather: only the mask-pattern form is read")
        out.append(Inst("tgather", [p.value(ins[0], scope)],
                        [p.value(outs[0], scope)], {"pattern": inner["pattern"]}))
        return
    attrs = {}
    if len(ins) == 2 and ins[1] in scope.consts and len(outs) == 1:
        attrs["block_len"] = scope.consts[ins[1]][0]
        ins = ins[:1]
    elif len(ins) >= 3 and len(outs) == 2 and outs[1] == EXECUTED:
        attrs["tmp"] = p.value(ins.pop(), scope)
        outs = outs[:1]
    else:
        raise p.error("pto.tmrgsort: expected ins(%src, %blockLen) outs(%dst) or "
                      "ins(%lists..., %tmp) outs(%dst, %executed)")
    out.append(Inst("tmrgsort", [p.value(n, scope) for n in ins],
                    [p.value(outs[0], scope)], attrs))


def s_getval(p, op, results, rest, scope, out):
    """``%r = pto.tgetval ins(%tile, %r.ix : ...) outs : T``: the scalar has the tile's
    dtype (the text's type is signless)."""
    ins, _, _, _ = p.operands(rest, op)
    if len(ins) != 2:
        raise p.error("pto.tgetval reads one tile at one offset")
    tile = p.value(ins[0], scope)
    res = p.define(p.one(results), tile.dtype, scope)
    out.append(Inst("tgetval", [tile, p.value(ins[1], scope)], [res]))


def piece(p, src: str, dst: str, scope, out: list) -> bool:
    """A ``tmuls`` by 1 from or to a view at an offset (print_views.moves): one piece of a UB
    slice (``%<src>.x<n>_0``) or concatenation (``%<dst>.c<n>_<k>``)."""
    for name, tag in ((src, "x"), (dst, "c")):
        m = re.fullmatch(rf"(%[^.]+)\.{tag}(\d+)_(\d+)", name)   # the other's view
        if m is None or name not in scope.alias_addr:
            continue
        whole = p.value(m.group(1), scope)
        offset = scope.alias_addr[name] - whole.addr
        row = -(-whole.cols * whole.dtype.itemsize // 32) * 32
        at = (offset // row, offset % row // whole.dtype.itemsize)
        if tag == "x":
            out.append(Inst("textract", [whole], [p.value(dst, scope)],
                            {"starts": at}))
            return True
        piece = p.value(src, scope)
        key = (m.group(1), m.group(2))
        if int(m.group(3)) == 0:
            out.append(Inst("tconcat", [piece], [whole], {"axis": 0, "_piece": key}))
        elif out and out[-1].op == "tconcat" and out[-1].attrs.get("_piece") == key:
            out[-1].ins.append(piece)
            out[-1].attrs["axis"] = 0 if at[1] == 0 else 1
        else:
            raise p.error(f"{name} continues no concatenation")
        return True
    return False


_MASK_OPS = ("tand", "tor", "txor", "tmov", "tnot", "tcolexpand")


def restore_masks(insts: list) -> bool:
    """A mask is printed as ui8 bytes holding a bit per element (Program.element_type): the
    tiles that comparisons write, what mask-to-mask instructions make of them, and the masks
    selects read (a constant one, written by a fill), are bool tiles again, as wide as the
    compared or selected tile. False when two of them disagree about a mask's width."""
    changed, rounds = True, 0
    while changed:
        changed, rounds = False, rounds + 1
        if rounds > len(insts) + 1:       # two writers disagree about a mask's width
            return False
        for i in insts:
            src = i.ins[0] if i.ins and isinstance(i.ins[0], Tile) else None
            if src is None or not i.outs or not isinstance(i.outs[0], Tile):
                continue
            if i.op in ("tsel", "tsels"):      # the mask read: as wide as the data selected
                src, dst = i.ins[1], i.ins[0]
            elif i.op in ("tcmp", "tcmps") or (i.op in _MASK_OPS and src.dtype == dt.bool_):
                dst = i.outs[0]
            else:
                continue
            if src.is_column or src.is_column_mask:     # (M, 1): Tile.is_column_mask
                shape = (src.rows, 1, src.v_row, 1)
            else:                   # its own rows; the columns it compares
                shape = (dst.rows, src.cols, dst.v_row, src.v_col)
            if (dst.dtype, dst.rows, dst.cols, dst.v_row, dst.v_col) != (dt.bool_, *shape):
                dst.dtype, (dst.rows, dst.cols, dst.v_row, dst.v_col) = dt.bool_, shape
                changed = True
    for i in insts:
        if i.op == "texpands" and not i.ins and i.outs[0].dtype == dt.bool_:
            i.attrs["value"] = bool(i.attrs["value"])
    return True


def _printer_default(inst: Inst) -> bool:
    """Is the ``rmode`` of this ``tcvt`` the one the printer writes when there is none? It
    writes one only for float → int, where truncation is what an explicit ``trunc`` does too."""
    if not inst.ins or not inst.outs or "rmode" not in inst.attrs:
        return False
    src, dst = inst.ins[0].dtype, inst.outs[0].dtype
    return src.is_floating and not dst.is_floating and inst.attrs["rmode"] == "trunc"


def tile_type(p, name: str, addr: int, text: str) -> Tile:
    """A ``Tile`` from ``!pto.tile_buf<...>``; the layout fields must be those the printer
    derives from the location and shape, since a Tile has no others."""
    fields = {f.name for f in dataclasses.fields(Tile)} - {"name", "addr", "layout"}
    kwargs, layout = {}, {}
    for item in split_list(text[len("!pto.tile_buf<"):-1]):
        key, _, value = (s.strip() for s in item.partition("="))
        if key in fields:
            kwargs[key] = (p.dtype(value) if key == "dtype" else
                           None if value == "?" else literal(value))
        elif key in ("blayout", "slayout"):
            layout[key] = value
    if kwargs.get("loc") == "mat" and (layout.get("blayout"), layout.get("slayout")) == \
            ROW_LAYOUT[:2]:
        kwargs["layout"] = ROW_LAYOUT         # an L1 row bound for the bias table
    allocated = kwargs.get("rows"), kwargs.get("cols")
    for size, valid in (("rows", "v_row"), ("cols", "v_col")):
        if kwargs.get(valid) is not None:     # a UB row is allocated in whole 32 bytes
            kwargs[size] = kwargs[valid]
    if kwargs.get("loc") in BOXED and allocated != (kwargs.get("rows"), kwargs.get("cols")):
        kwargs["alloc"] = allocated           # whole fractal boxes (passes/cube_box.py)
    try:
        tile = Tile(name=name, addr=addr, **kwargs)
        printed = tile.type_text()
        if printed != text and tile.dtype == dt.uint8:     # a mask: bits, not bytes
            mask = dataclasses.replace(tile, dtype=dt.bool_, cols=tile.cols * 8,
                                       v_col=None if tile.v_col is None else tile.v_col * 8)
            if mask.type_text() == text:
                tile, printed = mask, text
    except (TypeError, KeyError) as e:
        raise p.error(f"incomplete or unknown tile type ({e})") from None
    if printed != text:
        raise p.error(f"tile type not representable; the printer would write {printed}")
    return tile
