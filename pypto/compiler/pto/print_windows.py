"""Global memory as the printer writes it: a tensor parameter's view, the window a load or
store moves (a ``partition_view`` clipped to the tensor; one plane of a rank-3/4 tensor; the
5-D window of an NZ or NC1HWC0 tensor) and the tile seen with the window's valid region, and
``tload`` / ``tfillpad`` / ``tstore`` over them.

Each is a function of the printer ``pr`` (``printer._Printer``: ``emit``, ``const``,
``index``, ``fresh``, and ``extents``, the index operand of each tensor axis's extent in the
function printed).
"""
from __future__ import annotations

import math

from ...errors import NotOnChip
from ...language import dtypes as dt
from .isa import PAD_NULL, pad_kind
from .program import Inst, TensorArg, Tile
from .spelling import attrs_text, gm_type

# what A2/A3's TSTORE adds atomically (pto-isa common/arch/memory/tstore_common.hpp)
ATOMIC_ADD_TYPES = (dt.float16, dt.float32, dt.bfloat16, dt.int8, dt.int16, dt.int32)


def tensor_view(pr, a: TensorArg) -> None:
    """A 1-D tensor is viewed as 1 x n with row stride 0 (the reader's mark for it). The GM
    workspace of a cube/vector split is one allocation for the launch, a slot per block:
    viewed as (blocks, rows, cols), every window of it is in this block's plane
    (``workspace_block``)."""
    if a.workspace:
        workspace_view(pr, a)
        return

    def entry(value, arg):
        return pr.const(value, "index") if value is not None else pr.index(
            f"%{arg}", f"%{arg}.ix", 2)
    dims = [entry(d, f"{a.name}_d{i}") for i, d in enumerate(a.dims)]
    strides = [entry(s, f"{a.name}_s{i}") for i, s in enumerate(a.strides)]
    if a.rank == 1:
        dims, strides = [pr.const(1, "index")] + dims, [pr.const(0, "index")] + strides
    attr = ""
    if a.layout == "NZ":        # pto-isa's NZ GlobalTensor: (1, K1, M1, 16, C0)
        dims = [pr.const(1, "index")] + dims
        strides = [pr.const(math.prod(a.dims), "index")] + strides
        attr = " {layout = #pto.layout<nz>}"
    elif a.layout == "NC1HWC0":  # an ND view; the explicit attribute marks the layout
        attr = " {layout = #pto.layout<nd>}"
    elif a.name in pr.nd_operands:
        attr = " {layout = #pto.layout<nd>}"
    for axis, d in enumerate(dims[-a.rank:]):
        pr.extents[(a.name, axis)] = d
    pr.emit(f"%{a.name}_tv = pto.make_tensor_view %{a.name}, shape = ["
            f"{', '.join(dims)}], strides = [{', '.join(strides)}]{attr} : "
            f"!pto.tensor_view<{'x'.join('?' * len(dims))}x{gm_type(a.dtype)}>", 2)


def workspace_view(pr, a: TensorArg) -> None:
    """``%<ws>_tv``: (get_block_num, rows, cols) over the workspace; ``%<ws>.bkx`` (this
    block's index) selects the plane its windows lie in. On the chip every block receives
    the same workspace pointer (docs/engines.md, "Mixed kernels on the chip")."""
    rows, cols = a.dims
    idx = lambda v: pr.const(v, "index")        # noqa: E731
    for tag, query in (("nb", "get_block_num"), ("bk", "get_block_idx")):
        pr.emit(f"%{a.name}.{tag} = pto.{query}", 2)
        pr.emit(f"%{a.name}.{tag}x = arith.index_cast %{a.name}.{tag} : i64 to index", 2)
    pr.extents[(a.name, "blocks")] = f"%{a.name}.nbx"
    pr.extents[(a.name, 0)], pr.extents[(a.name, 1)] = idx(rows), idx(cols)
    attr = " {layout = #pto.layout<nd>}" if a.name in pr.nd_operands else ""
    pr.emit(f"%{a.name}_tv = pto.make_tensor_view %{a.name}, shape = [%{a.name}.nbx, "
            f"{idx(rows)}, {idx(cols)}], strides = [{idx(rows * cols)}, {idx(cols)}, "
            f"{idx(1)}]{attr} : !pto.tensor_view<?x?x?x{gm_type(a.dtype)}>", 2)


def partition(pr, t: TensorArg, offsets, tile: Tile, depth) -> tuple[str, str, list]:
    """The window of ``tile``'s shape at ``offsets``, clipped to the tensor: its sizes are
    ``min(max(extent - offset, 0), tile size)`` per axis (what a load reads and a store
    writes; the rest of the tile is padding). A rank-3/4 tensor's leading axes select
    one plane (``plane``; one outside the tensor leaves the tile no valid row:
    passes/unbatch.py). Returns (name, type, the tile's valid rows and columns)."""
    name = pr.fresh("pv")
    offs = list(offsets)
    if t.rank == 1:
        offs = [0] + offs
    offs = [pr.index(o, f"{name}.o{axis}", depth) for axis, o in enumerate(offs)]
    if t.workspace:                     # this block's plane (workspace_view)
        offs = [f"%{t.name}.bkx"] + offs
    lead = len(offs) - 2
    sizes, view_offs = [], list(offs)
    for axis in range(lead):
        sizes.append(pr.const(1, "index"))
        extent = pr.extents[(t.name, "blocks" if t.workspace else axis)]
        view_offs[axis] = plane(pr, name, axis, extent, offs[axis], depth)
    for axis in range(lead, len(offs)):
        o, full = offs[axis], (tile.rows, tile.cols)[axis - lead]
        if t.rank == 1 and axis == 0:
            sizes.append(pr.const(1, "index"))
            continue
        extent = pr.extents[(t.name, axis - (len(offs) - t.rank))]
        sizes.append(clip(pr, name, extent, o, full, depth, axis))
    valid = sizes[-2:]
    for axis in range(lead):            # rows of the planes inside the tensor: 0 or all
        pr.emit(f"{name}.r{axis} = arith.muli {name}.v{axis}, {valid[0]} : index",
                depth)
        valid = [f"{name}.r{axis}", valid[1]]
    sizes[lead] = valid[0]      # pto-isa: the window's shape is the tile's valid region
    offs = view_offs
    qs = "?x" * len(offs)
    # the plane axes' 1s are static in the type: A2/A3's ND2NZ TLOAD (GM into an L1 cube
    # tile) takes only GlobalTensors whose three leading axes are static 1s (pto-isa
    # common/arch/memory/tload_common.hpp, "GlobalTensor only support 2 dim when ND2NZ")
    ty = f"!pto.partition_tensor_view<{'1x' * lead}{'?x' * (len(offs) - lead)}" \
         f"{gm_type(t.dtype)}>"
    pr.emit(f"{name} = pto.partition_view %{t.name}_tv, offsets = [{', '.join(offs)}], "
            f"sizes = [{', '.join(sizes)}] : !pto.tensor_view<{qs}{gm_type(t.dtype)}> -> "
            f"{ty}", depth)
    return name, ty, valid


def plane(pr, name: str, axis: int | str, extent: str, offset: str, depth) -> str:
    """A leading axis of a plane window: ``name.v<axis>`` is 1 when the plane lies inside
    the tensor (``clip``s of one element: before its end, and past -1), else 0; the view's
    offset is clamped into the tensor (``name.c<axis>``; PTOAS rejects views of size 0 or
    past the end), the reader reads it as the offset it clamps."""
    zero, one = pr.const(0, "index"), pr.const(1, "index")
    before_end = clip(pr, f"{name}.u", extent, offset, 1, depth, axis)
    past_start = clip(pr, f"{name}.w", offset, pr.const(-1, "index"), 1, depth, axis)
    for line in [f"v{axis} = arith.muli {before_end}, {past_start}",
                 f"l{axis} = arith.subi {extent}, {one}",
                 f"n{axis} = arith.minsi {offset}, {name}.l{axis}",
                 f"c{axis} = arith.maxsi {name}.n{axis}, {zero}"]:
        pr.emit(f"{name}.{line} : index", depth)
    return f"{name}.c{axis}"


def clip(pr, name: str, extent: str, offset: str, full: int, depth, axis="") -> str:
    """``min(max(extent - offset, 0), full)`` as index lines named ``name.e/m/v<axis>``."""
    pr.emit(f"{name}.e{axis} = arith.subi {extent}, {offset} : index", depth)
    pr.emit(f"{name}.m{axis} = arith.maxsi {name}.e{axis}, {pr.const(0, 'index')} : "
            "index", depth)
    pr.emit(f"{name}.v{axis} = arith.minsi {name}.m{axis}, {pr.const(full, 'index')} : "
            "index", depth)
    return f"{name}.v{axis}"


def layout_partition(pr, t: TensorArg, offsets, tile: Tile, depth) -> tuple:
    """The window of a load from a layout tensor (pypto.layout.load_window): the 5-D
    partition of its physical view and the tile's valid (rows, cols). NZ: whole
    fractals, clipped in fractals. NC1HWC0: one image's channel group, the pixels from
    h * W + w (clipped to H * W) and the channels from c % C0 (clipped to C0); an image
    or group past the tensor's end gives no rows."""
    name = pr.fresh("pv")
    offs = [pr.index(o, f"{name}.o{axis}", depth) for axis, o in enumerate(offsets)]
    idx = lambda v: pr.const(v, "index")        # noqa: E731
    if t.layout == "NZ":
        k1, m1, m0, c0 = t.dims
        pr.emit(f"{name}.f1 = arith.divsi {offs[1]}, {idx(c0)} : index", depth)
        pr.emit(f"{name}.f2 = arith.divsi {offs[0]}, {idx(m0)} : index", depth)
        cols = clip(pr, f"{name}.k", idx(k1), f"{name}.f1", tile.cols // c0, depth)
        rows = clip(pr, f"{name}.m", idx(m1), f"{name}.f2", tile.rows // m0, depth)
        p_offs = [idx(0), f"{name}.f1", f"{name}.f2", idx(0), idx(0)]
        sizes = [idx(1), cols, rows, idx(m0), idx(c0)]
        # the fractal's axes static in the type: A2/A3's NZ TLOAD wants them so (pto-isa
        # tload_common.hpp CheckNzFormat: "the last 2 dim must be static")
        static = f"1x?x?x{m0}x{c0}x"
        pr.emit(f"{name}.r = arith.muli {rows}, {idx(m0)} : index", depth)
        pr.emit(f"{name}.c = arith.muli {cols}, {idx(c0)} : index", depth)
        valid = [f"{name}.r", f"{name}.c"]
    else:
        nn, c1s, _, hw, c0 = t.dims
        pr.emit(f"{name}.g = arith.floordivsi {offs[1]}, {idx(c0)} : index", depth)
        pr.emit(f"{name}.gc = arith.muli {name}.g, {idx(c0)} : index", depth)
        pr.emit(f"{name}.ch = arith.subi {offs[1]}, {name}.gc : index", depth)
        pr.emit(f"{name}.hw = arith.muli {offs[2]}, {idx(t.logical[3])} : index", depth)
        pr.emit(f"{name}.px = arith.addi {name}.hw, {offs[3]} : index", depth)
        # the image and the channel group are planes (``plane``: offsets clamped into
        # the tensor, 0 rows when outside), so the view's three leading sizes are static
        # 1s: A2/A3's ND2NZ TLOAD (into an L1 cube tile) takes nothing else (pto-isa
        # tload_common.hpp, "GlobalTensor only support 2 dim when ND2NZ")
        n_off = plane(pr, name, "n", idx(nn), offs[0], depth)
        g_off = plane(pr, name, "g", idx(c1s), f"{name}.g", depth)
        pixels = clip(pr, f"{name}.p", idx(hw), f"{name}.px", tile.rows, depth)
        chans = clip(pr, f"{name}.c0", idx(c0), f"{name}.ch", tile.cols, depth)
        p_offs = [n_off, g_off, idx(0), f"{name}.px", f"{name}.ch"]
        pr.emit(f"{name}.r0 = arith.muli {name}.vn, {name}.vg : index", depth)
        pr.emit(f"{name}.r = arith.muli {name}.r0, {pixels} : index", depth)
        sizes = [idx(1), idx(1), idx(1), f"{name}.r", chans]
        valid = [f"{name}.r", chans]
        static = "1x1x1x?x?x"
    gm = gm_type(t.dtype)
    ty = f"!pto.partition_tensor_view<{static}{gm}>"
    pr.emit(f"{name} = pto.partition_view %{t.name}_tv, offsets = [{', '.join(p_offs)}], "
            f"sizes = [{', '.join(sizes)}] : !pto.tensor_view<?x?x?x?x?x{gm}> -> {ty}",
            depth)
    return name, ty, valid


def window(pr, t: TensorArg, offsets, tile: Tile, depth) -> tuple:
    """What a load (or its tfillpad) reads: (partition, its type, the valid sizes)."""
    if t.layout != "ND":
        return layout_partition(pr, t, offsets, tile, depth)
    return partition(pr, t, offsets, tile, depth)


def window_tile(pr, tile: Tile, view: str, sizes: list, depth, pad: int = 0) -> str:
    """The clipped tile of a window: ``tile``'s bytes with the window's valid sizes."""
    name = f"%{tile.name}.{view[1:]}"
    pr.emit(f"{name} = pto.alloc_tile addr = {pr.address(tile, depth)} "
            f"valid_row = {sizes[0]} valid_col = {sizes[1]} : "
            f"{tile.type_text(dynamic=True, pad=pad)}", depth)
    return name


def load(pr, i: Inst, depth) -> None:
    """GM → tile: the clipped window read into the tile seen with the window's valid
    region and, for UB tiles, the pad field of the load's value (the ``tfillpad`` after
    it fills the rest; a value the hardware lacks was filled in before: lower.py)."""
    tensor, *offs = i.ins
    tile = i.outs[0]
    kind = (pad_kind(i.attrs["pad"], tile.dtype) if tile.loc == "vec" else None) or PAD_NULL
    if tensor.layout == "NZ" and tile.loc != "mat":
        raise NotOnChip("a load from an NZ tensor into a vector (UB) tile: A2/A3's TLOAD "
                        "copies NZ fractals only into NZ tiles, and the vector unit "
                        "computes on row-major ones; use the tile as a pl.matmul operand "
                        "(it is then loaded into L1), or pass the tensor in ND",
                        i.attrs.get("_loc"))
    pv, ty, sizes = window(pr, tensor, offs, tile, depth)
    clipped = window_tile(pr, tile, pv, sizes, depth, pad=kind)
    pr.emit(f"pto.tload ins({pv} : {ty}) outs({clipped} : "
            f"{tile.type_text(dynamic=True, pad=kind)})", depth)


def fill_pad(pr, i: Inst, depth) -> None:
    """``tfillpad``: the tile past the window its load read (clipped again from the same
    offsets, so a double-buffered loop pads each iteration's own window), filled with
    the pad value: the whole tile seen with that pad field."""
    tensor, *offs = i.ins
    tile = i.outs[0]
    kind = pad_kind(i.attrs["pad"], tile.dtype)
    pv, _, sizes = window(pr, tensor, offs, tile, depth)
    clipped = window_tile(pr, tile, pv, sizes, depth, pad=kind)
    full = f"{clipped}f"
    pr.emit(f"{full} = pto.alloc_tile addr = {pr.address(tile, depth)} : "
            f"{tile.type_text(pad=kind)}", depth)
    pr.emit(f"pto.tfillpad ins({clipped} : {tile.type_text(dynamic=True, pad=kind)}) "
            f"outs({full} : {tile.type_text(pad=kind)})", depth)


def store(pr, i: Inst, depth) -> None:
    tensor, *offs = i.outs
    tile = i.ins[0]
    pv, ty, sizes = partition(pr, tensor, offs, tile, depth)
    clipped = window_tile(pr, tile, pv, sizes, depth)
    attrs = {k: v for k, v in i.attrs.items() if k in ("atomic", "relu")}
    if attrs.get("atomic") and tile.dtype not in ATOMIC_ADD_TYPES:
        raise NotOnChip(f"an atomic add of {tile.dtype}: A2/A3's atomic store adds "
                        f"{', '.join(map(str, ATOMIC_ADD_TYPES))} only (pto-isa "
                        f"SetAtomicAdd). Accumulate in int32 or float32, or store without "
                        f"atomic", i.attrs.get("_loc"))
    pr.emit(f"pto.tstore ins({clipped} : {tile.type_text(dynamic=True)}) "
            f"outs({pv} : {ty}){attrs_text(attrs)}", depth)
