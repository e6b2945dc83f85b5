"""Memory planning: a byte offset for every tile in its buffer, reusing space between tiles
whose lifetimes do not overlap, within the target's capacities and 32-byte alignment.

Loop-carried tiles (init, iteration argument, yielded value, loop result) must share one buffer.
Where sharing would clobber a value still needed (the init is used after the loop, the yielded
value is computed while the old one is still read, one value is yielded twice) a ``tile.mov``
copy is inserted instead, so in-place updates are always safe.
"""
from __future__ import annotations

from typing import NamedTuple

from ...language import dtypes as dt
from ...errors import BufferOverflow, CompilationError, overflow_summary
from ..ir import LEFT, RIGHT, VEC, Block, Module, Op, Value, walk
from ..pto import view2d
from ..pto.program import rows_end_to_end
from ..pto.lower import scratch_type
from .cube_box import cube_boxes
from .half_rows import Sizing, hand_off_rows
from .in_place import received_after_sending, share_dying_operands
from .memory_space import loop_classes
from .unbatch import PLANE_OF

# Ops that read each input element only to write the same output element, so their result
# may overwrite an input in place.
ELEMENTWISE = {"tile.binary", "tile.unary", "tile.cast", "tile.where", "tile.mov", "tile.full",
               "tile.load", "tile.arange"}
LOOPS = ("scf.for", "scf.while")
# ... and so do these for their first operand (the other is a broadcast row or column)
EXPANDS = ("tile.col_expand", "tile.row_expand")
# ops whose result is their first operand with one element or row replaced: one buffer
IN_PLACE = ("tile.setval", "tile.load_row")


class _Context(NamedTuple):
    """What every plan of one kernel shares: the buffer classes, op positions, the target, tile
    sizes, and whether the run-ahead rules apply (``in_place.py``; off when the pipeline
    builds again because run_ahead refused the plan: ``RunAheadRefused``)."""
    classes: object
    pos: dict
    target: object
    sizing: Sizing
    run_ahead: bool


def _copy(v: Value, loc) -> Op:
    op = Op("tile.mov", [v], [v.type], loc=loc)
    op.result.hint = v.hint
    return op


def _positions(block: Block, pos: dict, counter: list) -> None:
    for op in block.ops:
        pos[id(op)] = counter[0]
        counter[0] += 1
        for b in op.blocks:
            _positions(b, pos, counter)
        if op.blocks:
            pos[("end", id(op))] = counter[0]
            counter[0] += 1


def _make_loops_in_place_safe(block: Block) -> None:
    """Insert copies where a carried chain (loop or if) cannot share one buffer."""
    claimed: set[int] = set()
    for op in list(block.ops):
        for b in op.blocks:
            _make_loops_in_place_safe(b)
        if op.name in LOOPS:
            _share_loop(block, op, claimed)
        elif op.name == "scf.if":
            _share_branches(block, op, claimed)


def _share_loop(block: Block, op: Op, claimed: set) -> None:
    inits = op.operands[3:] if op.name == "scf.for" else op.operands
    first = 3 if op.name == "scf.for" else 0
    body = op.blocks[0] if op.name == "scf.for" else op.blocks[1]
    args = body.args[1:] if op.name == "scf.for" else body.args
    at = block.ops.index(op)
    for i, init in enumerate(inits):
        if not init.is_tile:
            continue
        read_elsewhere = init in _reads(block.ops[at + 1:]) or \
            init in _reads([o for b in op.blocks for o in b.ops])
        if read_elsewhere or init.id in claimed:
            mov = _copy(init, op.loc)
            block.ops.insert(block.ops.index(op), mov)
            op.operands[first + i] = mov.result
            init = mov.result
        claimed.add(init.id)
    _share_yields(body, args, claimed)


def _share_yields(body: Block, args, claimed: set) -> None:
    """Each yielded tile must be computed in the block, once, and (for loops) after the last
    read of the iteration argument it replaces; otherwise it is copied first."""
    for i, y in enumerate(body.ops[-1].operands):
        if y.is_tile:
            _share_yield(body, i, args[i] if args is not None else None, claimed)


def _share_yield(body: Block, i: int, arg, claimed: set) -> None:
    yield_op = body.ops[-1]
    y = yield_op.operands[i]
    if not _can_share(body, arg, y, claimed):
        mov = _copy(y, yield_op.loc)
        body.ops.insert(len(body.ops) - 1, mov)
        yield_op.operands[i] = mov.result
        y = mov.result
    claimed.add(y.id)


def _share_branches(block: Block, op: Op, claimed: set) -> None:
    """The yields of an ``scf.if``. A branch that yields a tile from before the ``if``
    unchanged (flash attention's ``if last block: s = s + mask``) lets the result take that
    tile's buffer when nothing reads the tile after the ``if``: the other branch computes its
    yield in place over it, as a loop body does its iteration argument, and neither copies
    (the pass-through branch copied the whole tile, and the result took a buffer of its own:
    a causal 128 x 128 block no longer fitted the UB)."""
    later = _reads(block.ops[block.ops.index(op) + 1:])
    for i, result in enumerate(op.results):
        if not result.is_tile:
            continue
        ys = [b.ops[-1].operands[i] for b in op.blocks]
        through = [y for y, b in zip(ys, op.blocks) if y.owner is not None and
                   not any(y.owner is o for o in walk(b))]
        x = through[0] if through else None
        if x is None or any(t is not x for t in through) or x.id in claimed or x in later:
            for b in op.blocks:
                _share_yield(b, i, None, claimed)
            continue
        claimed.add(x.id)
        for y, b in zip(ys, op.blocks):
            if y is not x:
                _share_yield(b, i, x, claimed)


def _can_share(body: Block, arg, y: Value, claimed: set) -> bool:
    if y.id in claimed or y.owner is None or y.owner not in body.ops:
        return False
    if arg is None:
        return True
    owner = y.owner
    if owner.name == "tile.matmul":   # the accumulator is updated in place
        if len(owner.operands) != 3 or owner.operands[2] is not arg:
            return False
    elif owner.name in IN_PLACE:       # one element or row replaced in place
        if owner.operands[0] is not arg:
            return False
    elif owner.name in LOOPS or owner.name == "scf.if":
        inits = owner.operands[3:] if owner.name == "scf.for" else owner.operands
        if arg not in inits:
            return False
    elif arg in owner.operands and owner.name not in ELEMENTWISE and not (
            owner.name in EXPANDS and owner.operands[0] is arg):
        return False
    at = body.ops.index(owner)
    return arg not in _reads(body.ops[at + 1:-1])


def plan_memory(module: Module) -> Module:
    """Plan with the host's fusion groups in mind (their inputs live to the group's end);
    when that does not fit the chip's buffers, the groups are dropped (the host then runs the
    instructions one by one) and the plan, or its overflow error, is the chip's own."""
    fn, target = module.kernel, module.target
    _make_loops_in_place_safe(fn.body)
    _tie_accumulators(fn.body)
    classes = loop_classes(fn.body)
    for op in walk(fn.body):     # a matmul's result overwrites its accumulator
        if op.name == "tile.matmul" and len(op.operands) == 3:
            classes.union(op.operands[2], op.result)
        if op.name == "tile.sort32":     # TSORT32 writes its pairs over the padding
            classes.union(op.operands[2], op.result)
        if op.name == "tile.mrglists" and len(op.operands) == 2:   # over its -inf pairs
            classes.union(op.operands[1], op.result)
        if op.name in IN_PLACE or op.name == "tile.bitcast" or _byte_view(op):
            classes.union(op.operands[0], op.result)      # a view: its source's bytes
    # cube tiles are whole fractal boxes: their padded bytes are planned, and lowering
    # allocates them so (Tile.alloc)
    boxes = module.facts["cube_boxes"] = cube_boxes(fn.body, classes,
                                                   module.facts.get("bias_rows", ()))
    rows = module.facts["rows_split"] = hand_off_rows(module)
    pos: dict = {}
    _positions(fn.body, pos, [0])
    ctx = _Context(classes, pos, target, Sizing(boxes, rows),
                   module.facts.get("run_ahead_plan", True))
    double_buffered = any(op.name == "scf.for" and op.attrs.get("num_stages") == 2
                          for op in walk(fn.body))
    levels = RESERVE_LEVELS if double_buffered else RESERVE_LEVELS[-1:]
    for level in levels:
        try:
            usage, layout = _fitting(fn.body, ctx, level)
            break
        except CompilationError:
            if level == levels[-1]:
                raise
    module.facts["buffer_bytes"] = usage
    module.facts["tile_layout"] = layout     # pypto.memory.analyze explains the plan with it
    module.facts["planned"] = True
    return module


def _fitting(body: Block, ctx: _Context, reserve: int):
    """The plan (``_assign``), first with the host's fusion groups, then with one of them
    dropped, then with none (the host then runs those instructions one by one: the chip's
    plan comes first). ``reserve``: what double-buffered loops keep to themselves
    (``_reserve``)."""
    try:
        return _assign(body, ctx, reserve)
    except CompilationError:
        groups = _fusion_groups(body)
        if not groups:
            raise
    planned = _plan_without_one_group(body, groups, ctx, reserve)
    if planned is None:
        for ops in groups.values():
            _drop_hints(ops)
        planned = _assign(body, ctx, reserve)
    return planned


def _fusion_groups(block: Block) -> dict:
    """Fusion group number -> its ops, the groups of fewest ops first (the least to lose)."""
    groups: dict = {}
    for op in walk(block):
        if "_fuse" in op.attrs:
            groups.setdefault(op.attrs["_fuse"], []).append(op)
    return dict(sorted(groups.items(), key=lambda kv: len(kv[1])))


def _plan_without_one_group(body: Block, groups: dict, ctx: _Context, reserve: int):
    """The plan with one fusion group run instruction by instruction (the first, in the
    order of ``groups``, whose removal makes the plan fit), or None."""
    for ops in groups.values():
        saved = [(op, op.attrs.get("_fuse"), op.attrs.get("_internal")) for op in ops]
        _drop_hints(ops)
        try:
            return _assign(body, ctx, reserve)
        except CompilationError:
            for op, fuse, internal in saved:
                op.attrs["_fuse"] = fuse
                if internal is not None:
                    op.attrs["_internal"] = internal
    return None


def _drop_hints(ops) -> None:
    for op in ops:
        op.attrs.pop("_fuse", None)
        op.attrs.pop("_internal", None)


def _assign(body: Block, ctx: _Context, reserve: int) -> dict:
    """``_plan`` with the cube's operand buffers alternated (``_alternate``), or without when
    that does not fit. ``reserve``: what double-buffered loops keep to themselves
    (``_reserve``)."""
    try:
        return _plan(body, ctx, True, reserve)
    except CompilationError:
        return _plan(body, ctx, False, reserve)


def _alternate(intervals: dict) -> None:
    """L0A/L0B values in program order, each kept live until the next one of its buffer has
    been used: consecutive matmul operands then sit in two buffers in turn, so the extract
    or move (MTE1) of the next overlaps the matmul (M) of this one, as pto-isa's GEMM
    double-buffers L0A/L0B, instead of waiting for it to finish."""
    for space in (LEFT, RIGHT):
        members = sorted((iv for iv in intervals.values() if iv[2].type.space == space),
                         key=lambda iv: iv[0])
        for this, following in zip(members, members[1:]):
            this[1] = max(this[1], following[1])


# What a double-buffered loop keeps to itself, tried in this order until the plan fits:
# its loads' two buffers and the tiles it stores; its loads' two buffers; nothing (a load then
# gets its second buffer above the plan if room is left, pto/passes/double_buffer.py).
RESERVE_LEVELS = (2, 1, 0)


def _reserve(loop: Op, touch, pos: dict, level: int) -> None:
    """Keep buffers to the whole of a double-buffered loop. The loads it prefetches
    (``_prefetched``), beside a second buffer of the same size (``_pong``, its offset for
    pto/passes/double_buffer.py): the prefetch of iteration i+1 lands in one while the body
    reads the other. At ``level`` 2, the tiles it stores too: MTE3 reads a stored tile while
    the vector unit goes on, and a temporary of the next iteration in its bytes would make
    the vector unit wait for the store to finish (per-row int8 quantisation waited twice an
    iteration)."""
    span = (pos[id(loop)], pos[("end", id(loop))])
    kept = []
    for load in _prefetched(loop):
        pong = load.attrs["_pong"] = Value(load.result.type, "pong")
        kept += [load.result, pong]
    if level >= 2:
        kept += [o.operands[-1] for o in loop.blocks[0].ops
                 if o.name == "tile.store" and o.operands[-1].is_tile]
    for v in kept:
        for at in span:
            touch(v, at)


def _prefetched(loop: Op) -> list:
    """The loads of ``loop``'s body that double buffering moves an iteration ahead: those
    whose offsets the loop index and values from before the loop compute, of a tensor the
    loop does not store and that is no GM workspace (pto/passes/double_buffer._prefetchable
    decides the same on the PTO program)."""
    body = loop.blocks[0]
    stored = {o.operands[0].id for o in walk(body) if o.name == "tile.store"}
    local = {r.id: o for o in body.ops for r in o.results}
    nested = {r.id for o in walk(body) for r in o.results} - set(local)

    def known(v: Value) -> bool:
        if v is body.args[0] or (v.id not in local and v.id not in nested and
                                 v not in body.args):
            return True
        o = local.get(v.id)
        return o is not None and not o.blocks and not any(r.is_tile for r in o.results) and \
            o.name != "tile.getval" and all(known(x) for x in o.operands)

    return [o for o in body.ops if o.name == "tile.load" and o.operands[0].id not in stored
            and not (o.operands[0].owner is not None and
                     o.operands[0].owner.name == "tensor.workspace")
            and all(known(x) for x in o.operands[1:])]


def _plan(body: Block, ctx: _Context, alternate: bool, reserve: int) -> dict:
    """Lifetimes of every buffer class, then first-fit offsets per buffer; bytes used each, and
    the placed tiles (``PlacedTile``) per buffer. ``reserve``: what double-buffered loops keep
    to themselves (``_reserve``)."""
    classes, pos, target, sizing = ctx.classes, ctx.pos, ctx.target, ctx.sizing
    group_end = _fusion_group_ends(body, pos)
    intervals: dict[int, list] = {}   # class root id -> [start, end, root, members]
    memo: dict = {}

    def touch(v: Value, at: int):
        root = classes.find(v)
        iv = intervals.setdefault(root.id, [at, at, root, {}])
        iv[0], iv[1] = min(iv[0], at), max(iv[1], at)
        iv[3][v.id] = v

    def visit(block: Block, loops: list):
        for op in block.ops:
            here = pos[id(op)]
            group = op.attrs.get("_fuse")
            for v in op.operands:
                if v.is_tile:
                    # a fused group reads what it gets from outside until its last op; a value
                    # defined outside a loop and read inside stays live to the loop end
                    end = here
                    if group is not None and (v.owner is None or
                                              v.owner.attrs.get("_fuse") != group):
                        end = group_end[group]
                    for loop in loops:
                        if not _defined_in(v, loop, memo):
                            end = max(end, pos[("end", id(loop))])
                    touch(v, end)
            like = scratch_type(op)
            if like is not None:
                # A2/A3's instruction overwrites a scratch tile: a value of its own, live at
                # this op only (lower.py hands it to the instruction)
                scratch = Value(like.with_space("vec"), "tmp")
                op.attrs["_scratch"] = scratch
                touch(scratch, here)
            for r in op.results:
                if r.is_tile:
                    touch(r, here)
                    if loops and ctx.run_ahead and received_after_sending(block, op):
                        # the other core's data, after this core's own hand-off: run-ahead
                        # (pto/passes/run_ahead.py) moves the next iteration's work before
                        # it, so it keeps its bytes for the whole loop body
                        touch(r, pos[id(loops[-1])])
                        touch(r, pos[("end", id(loops[-1]))])
                    if group is not None and op.name == "tile.load":
                        # at a ragged edge the group reads its loads from their tiles
                        touch(r, group_end[group])
            for blk in op.blocks:
                for a in blk.args:
                    if a.is_tile:
                        touch(a, here)
                        touch(a, pos[("end", id(op))])
                visit(blk, loops + [op] if op.name in LOOPS else loops)
            if op.name == "scf.for" and op.attrs.get("num_stages") == 2:
                if reserve:
                    _reserve(op, touch, pos, reserve)
                else:
                    for load in op.blocks[0].ops:
                        load.attrs.pop("_pong", None)

    visit(body, [])
    share_dying_operands(body, intervals, classes, pos, group_end, ctx.run_ahead)
    if alternate:
        _alternate(intervals)
    usage, layout = {}, {}
    for space in target.buffers:
        members = [iv for iv in intervals.values() if iv[2].type.space == space]
        layout[space] = []
        usage[space] = _first_fit(members, space, target, layout[space], sizing)
    return usage, layout


def _byte_view(op: Op) -> bool:
    """A reshape A2/A3 does in place (TRESHAPE): a UB tile's elements end to end in both
    shapes (one row, a column, or rows of whole 32 bytes), so the result is its source's
    bytes and needs no copy (passes/row_reduce.py's views of a wide row)."""
    if op.name != "tile.reshape" or not op.operands[0].is_tile:
        return False
    src, dst = op.operands[0].type, op.result.type
    return src.space == dst.space == VEC and src.dtype == dst.dtype != dt.bool_ and \
        all(rows_end_to_end(*view2d(t.shape), t.dtype.bits) for t in (src, dst))


def _fusion_group_ends(block: Block, pos: dict) -> dict:
    """Fusion group → position of its last op (the host runs a group as one loop)."""
    last: dict = {}
    for op in walk(block):
        group = op.attrs.get("_fuse")
        if group is not None:
            last[group] = max(last.get(group, 0), pos[id(op)])
    return last


def _tie_accumulators(block: Block) -> None:
    """A matmul accumulates in place; reading the old accumulator afterwards needs a copy."""
    for op in walk(block):
        if op.name == "tile.matmul" and len(op.operands) == 3:
            acc = op.operands[2]
            parent_ops = _block_of(block, op)
            if acc in _reads(parent_ops[parent_ops.index(op) + 1:]):
                raise CompilationError(
                    "the accumulator passed to matmul(acc=...) is updated in place and cannot "
                    "be read after the matmul; use the value matmul returns", op.loc)


def _reads(ops) -> list:
    """Every operand read by ``ops`` or by ops nested in them."""
    return [v for o in ops for v in o.operands] + \
        [v for o in ops for b in o.blocks for i in walk(b) for v in i.operands]


def _block_of(block: Block, target_op: Op) -> list:
    if target_op in block.ops:
        return block.ops
    for op in block.ops:
        for b in op.blocks:
            found = _block_of(b, target_op)
            if found is not None:
                return found
    return None


def _defined_in(v: Value, loop: Op, memo: dict) -> bool:
    """Is ``v`` defined inside ``loop`` (as a block argument or a nested op's result)?"""
    inside = memo.get(id(loop))
    if inside is None:
        inside = {a.id for b in loop.blocks for a in b.args}
        for b in loop.blocks:
            for op in walk(b):
                inside.update(r.id for r in op.results)
                inside.update(a.id for blk in op.blocks for a in blk.args)
        memo[id(loop)] = inside
    return v.id in inside


class PlacedTile(NamedTuple):
    """One buffer class as placed: its tile type, bytes, offset, first and last position in
    program order, and the source lines that make it."""
    type: str
    bytes: int
    offset: int
    start: int
    end: int
    lines: tuple

    @property
    def source(self) -> str:
        """Where the tile comes from, for messages (a scratch tile of one instruction, or a
        value a loop carries in, has no line of its own)."""
        return ", ".join(self.lines) or "no line of its own (a loop's or an instruction's)"

    def alive_with(self, other) -> bool:
        return not (self.end < other.start or other.end < self.start)


# The orders tiles are placed in: by start (then the longest-lived first), and the largest
# first (which fragments less: short-lived small tiles no longer split the space the big
# ones need). The plan that fits in less is kept (the first on a tie); one that fits in
# neither is reported where the first overflowed.
_ORDERS = (lambda iv, size: (iv[0], -iv[1]), lambda iv, size: (-size, iv[0], -iv[1]))


def _first_fit(members: list, space: str, target, placed_tiles: list, sizing) -> int:
    capacity = target.buffers[space]
    sizes = {id(m): sizing.bytes(m, target) for m in members}
    placed, high, over = _place(members, sizes, _ORDERS[0], capacity, target)
    other = _place(members, sizes, _ORDERS[1], capacity, target)
    if other[2] is None and (over is not None or other[1] < high):
        placed, high, over = other
    for offset, size, start, end, root, vals in placed:
        for v in vals.values():
            v.addr = offset
        placed_tiles.append(PlacedTile(_describe(root), size, offset, start, end,
                                       _lines(vals)))
    if over is not None:                  # the first order's report: where it overflowed
        asked, alive, vals = over
        _overflow(space, asked, capacity, alive, target, vals)
    return high


def _place(members: list, sizes: dict, order, capacity: int, target) -> tuple:
    """First-fit offsets for ``members`` taken in ``order``: (placements, bytes used, None),
    or, as soon as a tile goes past ``capacity``, (the placements so far, bytes used, (bytes,
    tiles alive, values) there)."""
    placed: list[tuple] = []    # (offset, size, start, end, root, vals)
    high = 0
    for member in sorted(members, key=lambda m: order(m, sizes[id(m)])):
        start, end, root, vals = member
        size = sizes[id(member)]
        offset = 0
        for o, s, st, en, _, _ in sorted(placed, key=lambda p: p[:2]):
            overlaps_in_time = not (end < st or en < start)
            if overlaps_in_time and offset < o + s and o < offset + size:
                offset = -(-(o + s) // target.alignment) * target.alignment
        placed.append((offset, size, start, end, root, vals))
        high = max(high, offset + size)
        if high > capacity:
            alive = [p for p in placed if not (end < p[2] or p[3] < start)]
            return placed, high, (high, alive, vals)
    return placed, high, None


def _describe(root: Value) -> str:
    plane = root.owner.attrs.get(PLANE_OF) if root.owner is not None else None
    return f"{root.type}{f' ({plane})' if plane else ''}"


def _lines(vals: dict) -> tuple:
    """The source locations of the ops that make a buffer class's values."""
    return tuple(sorted({str(v.owner.loc) for v in vals.values()
                         if v.owner is not None and v.owner.loc is not None}))


def _overflow(space, asked, capacity, alive, target, culprit):
    """The tiles alive when the buffer ran out (each one's size and source lines) and their
    sum; the jit adds which constexpr values would fit (``jit._overflow_advice``)."""
    tiles = [PlacedTile(_describe(root), size, offset, start, end, _lines(vals))
             for offset, size, start, end, root, vals in alive]
    lines = [f"  {t.type} ({t.bytes} bytes) from {t.source}"
             for t in sorted(tiles, key=lambda t: -t.bytes)]
    first_loc = next((v.owner.loc for v in culprit.values()          # the tile that did not fit
                      if v.owner is not None and v.owner.loc is not None), None)
    total = sum(p[1] for p in alive)
    error = BufferOverflow(
        f"{overflow_summary(space, target.name, asked, capacity)}. "
        f"{'The tile' if len(alive) == 1 else f'The {len(alive)} tiles'} alive at that point "
        f"({total} bytes{', plus alignment' if len(alive) > 1 else ''}):\n" + "\n".join(lines) +
        "\nUse smaller tiles (a smaller BLOCK / BM / BN / BK constexpr).", first_loc,
        space=space, asked=asked, capacity=capacity, target=target.name)
    error.alive = tiles
    raise error
