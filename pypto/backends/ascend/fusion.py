"""Fused elementwise groups (passes/fuse_elementwise.py) as one loop nest each: members'
element rules on values held in registers, loads and a closing store or row reduction in the
same loops, global memory read and written in place where the windows allow.

Beside ``forwarding.py`` (which loads later groups read straight from global memory). Free
functions of the ``Codegen`` whose builder they emit into, as the rules of ``lowering/``.
"""
from __future__ import annotations

from ...compiler.pto import Tile
from .lowering import RULES
from .lowering.memory import direct_window, independent
from .lowering.vector import ELEMENT_RULES, HEAVY, reduce_row
from .lowering_utils import const, convert, counted_loop, from_compute, i64, to_compute

ROW_REDUCTIONS = ("trowsum", "trowmax", "trowmin", "trowprod")   # may close a fusion group


def _split_group(insts):
    """(closing instruction or None, the members before it): a fusion group may end with a
    row reduction (accumulated in registers) or a store (written to GM)."""
    if insts[-1].op in ROW_REDUCTIONS + ("tstore",):
        return insts[-1], insts[:-1]
    return None, insts


def _order_sensitive(closing) -> bool:
    """Does the result of a group closed by ``closing`` depend on the order its columns are
    combined in (a floating-point row sum or product)?"""
    return closing is not None and closing.op in ("trowsum", "trowprod") and \
        closing.ins[0].dtype.is_floating


def _element_rule(op: str):
    """A member's element rule; a row or column expand's is its binary op's (the (1, N) row
    is read at row 0 and the (M, 1) column at column 0, as every one-row or one-column source
    of a group)."""
    return ELEMENT_RULES.get(op) or \
        ELEMENT_RULES["t" + op.removeprefix("tcolexpand").removeprefix("trowexpand")]


def fused(cg, insts):
    """A fusion group (passes/fuse_elementwise.py) as one loop nest over the output shape:
    each instruction's element rule runs on values held in registers, sources are read with
    broadcasting indices, internal results are never stored. Loads, a closing store and
    reads of forwarded tiles (``forwarding.py``) go straight to global memory when every
    window's rows lie inside its tensor and the full-width windows have the same number of
    valid columns: those columns run on global memory, the rest (a tile wider than the
    rows it holds) on the loads' padding values. Otherwise see ``_ragged``."""
    b = cg.b
    closing, members = _split_group(insts)
    width = members[0].outs[0].cols
    windows, virtual, checks, guards = {}, set(), [], {}
    for inst in insts:
        if inst.op in ("tload", "tstore"):
            tile = inst.outs[0] if inst.op == "tload" else inst.ins[0]
            tensor, *offsets = inst.ins if inst.op == "tload" else inst.outs
            gm, rows_inside, valid, index = direct_window(cg, tensor, offsets, tile)
            windows[id(inst)] = (gm, tensor, index, inst.attrs.get("pad", 0))
            checks.append((rows_inside, valid, tile.cols))
            if inst.op == "tload" and tile.cols == width:
                guards[id(tile)] = (valid, inst.attrs.get("pad", 0))
            if inst.op == "tload" and id(inst) in cg.forwarding.loads:
                cg.forward_windows[id(inst)] = (gm, tensor, offsets, index, rows_inside,
                                                valid, tile.cols)
                virtual.add(id(tile))
    gm_reads = _forwarded_reads(cg, insts)
    # what the group reads from global memory: (tensor, offsets, tile shape)
    read_windows = [(inst.ins[0], inst.ins[1:], (inst.outs[0].rows, inst.outs[0].cols))
                    for inst in insts if inst.op == "tload"]
    for x, load, (_, tensor, offsets, _, rows_inside, valid, cols) in gm_reads.values():
        checks.append((rows_inside, valid, cols))
        read_windows.append((tensor, offsets, (x.rows, x.cols)))
        if x.cols == width:
            guards[id(x)] = (valid, load.attrs.get("pad", 0))
    if not checks:
        _fused_loop(cg, insts, windows)
        return
    direct = []
    valid_cols = next((v for _, v, cols in checks if cols == width), None)
    for rows_inside, valid, cols in checks:
        direct.append(rows_inside)
        direct.append(b.icmp_signed("==", valid, valid_cols if cols == width else i64(cols)))
    if valid_cols is None or not _order_sensitive(closing):
        guards = None
    if guards is not None:
        # a float sum or product runs its columns in fixed lanes over one range from column
        # 0 (vector.reduce_row), so that no path or fusion changes its bits: both paths
        # run one loop over every column, reading a loaded tile's padding columns as its
        # pad value behind the same guard
        valid_cols = None
    elif valid_cols is not None:
        direct.append(b.icmp_signed(">", valid_cols, i64(0)))
    if closing is not None and closing.op == "tstore":
        store_tensor, *store_offsets = closing.outs
        shape = (closing.ins[0].rows, closing.ins[0].cols)
        for tensor, offsets, tile_shape in read_windows:
            direct.append(independent(cg, store_tensor, store_offsets, tensor, offsets,
                                      same_shape=tile_shape == shape))
    ok = direct[0]
    for cond in direct[1:]:
        ok = b.and_(ok, cond)
    with b.if_else(ok) as (then, otherwise):
        with then:
            _fused_loop(cg, insts, windows, gm_reads=gm_reads, virtual=virtual,
                        valid_cols=valid_cols, guards=guards)
        with otherwise:
            for x, load, _ in gm_reads.values():     # materialise what the group reads
                RULES["tload"](cg, load, x)
            _ragged(cg, insts, guards)


def _forwarded_reads(cg, insts) -> dict:
    """id(tile) -> (tile, its load, the load's window) for the tiles ``insts`` read from
    global memory (``forwarding.py``)."""
    reads = {}
    for inst in insts:
        for key, forward in cg.forwarding.reads.get(id(inst), {}).items():
            x = next(x for x in inst.ins if id(x) == key)
            reads[key] = (x, forward.load, cg.forward_windows[id(forward.load)])
    return reads


def _ragged(cg, insts, guards=None):
    """A group at a ragged edge: its loads run with their masking and padding into their
    tiles, the computation still as one loop over the tiles, and a closing store (whose
    source is then kept in its tile) with its masking. ``guards``: as for the direct path
    (``_fused_loop``), so that both associate a row sum alike."""
    for inst in insts:
        if inst.op == "tload":
            RULES["tload"](cg, inst)
    rest = [inst for inst in insts if inst.op != "tload"]
    store = rest.pop() if rest and rest[-1].op == "tstore" else None
    if len(rest) > 1 or (rest and rest[0].op not in ROW_REDUCTIONS) or guards:
        _fused_loop(cg, rest, {}, keep={id(store.ins[0])} if store else set(),
                    guards=guards)
    elif rest:
        RULES[rest[0].op](cg, rest[0])
    if store is not None:
        RULES["tstore"](cg, store)


def _fused_loop(cg, insts, windows, keep=frozenset(), gm_reads=None, virtual=frozenset(),
                valid_cols=None, guards=None, guarded_only=False):
    """``keep``: internal results to store anyway; ``gm_reads``: tiles read from their
    load's window (``_forwarded_reads``); ``virtual``: loaded tiles not to store;
    ``valid_cols``: columns from there on are padding (loads give their pad value, the
    closing store skips them); ``guards``: id(loaded tile) -> (valid columns, pad): the
    tile is read as its pad value from its valid columns on, behind a branch in the one
    column loop (a masked load once vectorised), when some tile has padding columns: the
    loop for tiles without any is the plain one (the guards cost ~5 % there)."""
    b = cg.b
    closing, members = _split_group(insts)
    out = members[0].outs[0] if members else closing.ins[0]
    if guards and not guarded_only:
        whole = [b.icmp_signed("==", valid, i64(out.cols)) for valid, _ in guards.values()]
        every = whole[0]
        for cond in whole[1:]:
            every = b.and_(every, cond)
        with b.if_else(every) as (no_padding, padding):
            with no_padding:
                _fused_loop(cg, insts, windows, keep, gm_reads, virtual, valid_cols)
            with padding:
                _fused_loop(cg, insts, windows, keep, gm_reads, virtual, valid_cols,
                            guards, guarded_only=True)
        return
    rules = [([], None) if inst.op == "tload" else _element_rule(inst.op)(cg, inst)
             for inst in members]
    tiles = {id(t): t for inst in insts for t in inst.ins + inst.outs if isinstance(t, Tile)}
    # every tile's address, computed here so that it dominates both column loops below
    ptrs = {key: cg.tile_ptr(t) for key, t in tiles.items()}

    def ptr(t):
        return ptrs[id(t)]

    def pad_value(d, pad):
        return from_compute(b, const(d, pad), d)

    def read(x, row, c, padded=False):
        if gm_reads and id(x) in gm_reads:
            _, load, (gm, tensor, _, index, *_) = gm_reads[id(x)]
            if padded and x.cols == out.cols:
                return pad_value(x.dtype, load.attrs.get("pad", 0))
            return convert(b, cg.load_elem(gm, tensor.dtype, index(row, c)),
                           tensor.dtype, x.dtype)
        return cg.load_elem(ptr(x), x.dtype, b.add(b.mul(row, i64(x.cols)), c))

    def guarded(key, c, load):
        """``load()``, or the pad value past the tile's valid columns (``guards``)."""
        if not guards or key not in guards:
            return load()
        valid, pad = guards[key]
        with b.if_else(b.icmp_signed("<", c, valid)) as (inside, outside):
            with inside:
                loaded, inside_end = load(), b.block
            with outside:
                padding, outside_end = pad_value(tiles[key].dtype, pad), b.block
        merged = b.phi(loaded.type)
        merged.add_incoming(loaded, inside_end)
        merged.add_incoming(padding, outside_end)
        return merged

    def value_of(x, regs, row_values, r, c, padded=False):
        raw = regs.get(id(x), row_values.get(id(x)))
        if raw is None:
            raw = guarded(id(x), c, lambda: read(x, r if x.rows > 1 else i64(0), c, padded))
        return raw

    with counted_loop(b, i64(0), i64(out.rows), name="fr") as r:
        # per-row operands are read once per row, outside the column loop, so the column
        # loop has no loads that a store might clobber and LLVM vectorises it
        row_values = {}
        for inputs, _ in rules:
            for x in inputs:
                if isinstance(x, Tile) and x.cols == 1 and id(x) not in row_values:
                    row_values[id(x)] = read(x, r if x.rows > 1 else i64(0), i64(0))
        def column(c, padded):
            """Column ``c``'s members; the closing row reduction's element, if any."""
            regs = {}
            for inst, (inputs, body) in zip(members, rules):
                dst = inst.outs[0]
                if inst.op == "tload" and padded:
                    value = pad_value(dst.dtype, windows[id(inst)][3])
                elif inst.op == "tload":
                    gm, tensor, index, _ = windows[id(inst)]
                    value = guarded(id(dst), c, lambda: convert(
                        b, cg.load_elem(gm, tensor.dtype, index(r, c)), tensor.dtype,
                        dst.dtype))
                else:
                    value = body(*(to_compute(b, value_of(x, regs, row_values, r, c,
                                                          padded), x.dtype)
                                   if isinstance(x, Tile) else x for x in inputs))
                regs[id(dst)] = value
                if (not inst.attrs.get("_internal") or id(dst) in keep) and \
                        id(dst) not in virtual:
                    cg.store_elem(value, ptr(dst), dst.dtype,
                                  b.add(b.mul(r, i64(dst.cols)), c))
            if closing is not None:
                src = closing.ins[0]
                raw = value_of(src, regs, row_values, r, c, padded)
                if closing.op != "tstore":
                    return raw
                if not padded:
                    gm, tensor, index, _ = windows[id(closing)]
                    cg.store_elem(convert(b, raw, src.dtype, tensor.dtype), gm,
                                  tensor.dtype, index(r, c))

        split = valid_cols if valid_cols is not None else i64(out.cols)
        # the padding columns (from valid_cols on) need no global memory at all
        ranges = [(i64(0), split, lambda c: column(c, padded=False))]
        if valid_cols is not None:
            ranges.append((valid_cols, i64(out.cols), lambda c: column(c, padded=True)))
        if closing is not None and closing.op in ROW_REDUCTIONS:
            # the row reduction's own loops (vector.reduce_row), as when it runs alone
            reduce_row(cg, closing.op[len("trow"):], closing.ins[0], closing.outs[0],
                       ranges, r, heavy=any(inst.op in HEAVY for inst in members))
        else:
            for lo, hi, element in ranges:
                with counted_loop(b, lo, hi, name="fc") as c:
                    element(c)
