"""Memory-space inference: which on-chip buffer each tile lives in.

Vector work happens in UB (``vec``). The cube reads its A operand from L0A (``left``) and B from
L0B (``right``), both staged through L1 (``mat``), and accumulates in L0C (``acc``). So a tile
loaded for a matmul goes GM → mat, then a ``tile.mov`` brings it to left/right. An accumulator
result leaves L0C only through a store to GM (the FIX pipe converts its dtype on the way), which
is why ``store(cast(acc))`` is folded into a converting store here.

On 910B a cube result reaches vector code only through global memory: an accumulator that
vector ops read is stored to a GM workspace and loaded back into UB, the two halves ordered by
a cross-core flag (``_spill``); ``split.py`` later gives each half to its kind of core.
"""
from __future__ import annotations

from ...language import dtypes as dt
from ...errors import CompilationError
from .cube_epilogue import fold_bias, fold_store
from .dce import dead_code_elimination
from ..ir import (ACC, BIAS, HAND_OFF_FIFO, LEFT, MAT, RIGHT, VEC, Block, Module, Op,
                  ScalarType, TensorType, TileType, Value, blocks, users, walk)

CUBE_USERS = ("tile.matmul", "tile.store", "scf.for", "scf.yield", "scf.while", "scf.condition")
SPLIT_FLAG_BASE = 15       # cross-core flags 15, 14, ... carry the workspace hand-offs
EPILOGUE = "_epilogue"     # on a workspace load into UB (passes/chunk_epilogue.py)


class Classes:
    """Union-find: over tile values that must share a buffer (loop-carried chains), keyed by
    their id; ``key`` for other items (cube_box: a value's axes)."""

    def __init__(self, key=lambda v: v.id):
        self.key = key
        self.parent: dict = {}

    def find(self, v):
        p = self.parent.get(self.key(v), v)
        if p is v:
            return v
        root = self.find(p)
        self.parent[self.key(v)] = root
        return root

    def union(self, a, b) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra is not rb:
            self.parent[self.key(rb)] = ra


def carried_chains(op: Op) -> list[list[Value]]:
    """The values a structured op ties together, one list per carried slot: they must share a
    buffer (loop init, iteration arguments, yielded values, results; both branches' yields)."""
    if op.name == "scf.for":
        body = op.blocks[0]
        return [list(vs) for vs in zip(op.operands[3:], body.args[1:], body.ops[-1].operands,
                                       op.results)]
    if op.name == "scf.while":
        before, after = op.blocks
        return [list(vs) for vs in zip(op.operands, before.args, before.ops[-1].operands[1:],
                                       after.args, after.ops[-1].operands, op.results)]
    if op.name == "scf.if":
        then, other = op.blocks
        return [list(vs) for vs in zip(then.ops[-1].operands, other.ops[-1].operands,
                                       op.results)]
    return []


def loop_classes(block: Block) -> Classes:
    classes = Classes()
    for op in walk(block):
        for chain in carried_chains(op):
            if chain[0].is_tile or chain[-1].is_tile:
                for v in chain[1:]:
                    classes.union(chain[0], v)
    return classes


def _mixing_error(op: Op, what: str) -> CompilationError:
    return CompilationError(
        f"{what}: on Ascend 910B the cube and the vector unit share no buffer, and a tile "
        "moves between them only through global memory, which PyPTO does for a matmul result "
        "that vector code reads and for a matmul operand that vector code computes. Load the "
        "tile once for each unit, or store it to a tensor and process it in a second kernel.",
        op.loc)


def _l1_slice(v: Value) -> bool:
    """Is ``v`` a slice of a tile (a matmul operand taken from a wider L1 tile: pto-isa's
    GEMM loads several K steps per TLOAD and TEXTRACTs each into L0A/L0B)?"""
    if v.owner is None or v.owner.name != "tile.slice" or len(v.type.shape) != 2:
        return False
    whole = v.owner.operands[0].owner
    return whole is not None and whole.name == "tile.load"


def _to_bias_table(block: Block, init: Op) -> Value:
    """The bias row that starts an accumulator (``cube_epilogue.fold_bias``) moved from L1
    into the bias table, widened from fp16 on the way where it was loaded as fp16 (TMOV
    does both); returns the moved row, which ``init`` now reads."""
    row = init.operands[0]
    src = row.owner.operands[0] if row.owner.name == "tile.cast" else row
    mov = Op("tile.mov", [src], [TileType(row.type.dtype, row.type.shape)], loc=init.loc)
    mov.result.hint = row.hint
    block.ops.insert(block.ops.index(init), mov)
    init.operands[0] = mov.result
    return mov.result


def _insert_moves(block: Block) -> None:
    """Put a tile.mov L1→L0A/L0B in front of each matmul operand; an operand sliced from an
    L1 tile is extracted from it straight into L0A/L0B instead (one TEXTRACT, no L1 copy)."""
    new_ops = []
    for op in block.ops:
        for b in op.blocks:
            _insert_moves(b)
        if op.name == "tile.matmul":
            for i, space, flag in ((0, LEFT, "a_trans"), (1, RIGHT, "b_trans")):
                src = op.operands[i]
                transpose = op.attrs.pop(flag, False)
                shape = src.type.shape[::-1] if transpose else src.type.shape
                attrs = {"transpose": True} if transpose else {}
                if _l1_slice(src):
                    name, src = "tile.slice", src.owner.operands[0]
                    attrs["starts"] = op.operands[i].owner.attrs["starts"]
                else:
                    name = "tile.mov"
                mov = Op(name, [src], [TileType(src.type.dtype, shape, space)],
                         attrs or None, loc=op.loc)
                mov.result.hint = src.hint
                new_ops.append(mov)
                op.operands[i] = mov.result
        new_ops.append(op)
    block.ops[:] = new_ops


def _spill(body: Block, is_acc, slots: "_Slots") -> None:
    """Route every accumulator that vector ops read through a GM workspace: store (FIX pipe,
    cube core), signal, wait, load into UB (vector core). The vector readers get the load. A
    result computed inside a loop or branch is handed over there, each time it is computed;
    the host then runs the kernel's two parts interleaved (``split.py``)."""
    use_map = users(body)

    def vector_readers(v: Value) -> list[Op]:
        return [u for u in use_map.get(v, ()) if u.name not in CUBE_USERS]

    loops = _loops_of(body)
    for block, top in _blocks(body):
        for op in list(block.ops):
            for r in op.results:
                readers = vector_readers(r) if is_acc(r) else []
                if not readers:
                    continue
                exchange, loaded, credit = _exchange(r, slots, op.loc, top is not None,
                                                     loop=_top_loop(loops, block, top))
                at = block.ops.index(op) + 1
                block.ops[at:at] = exchange
                _around(body, top, credit)
                for u in readers:
                    u.operands = [loaded if v is r else v for v in u.operands]


class _Slots:
    """Workspace slots and cross-core flags (15, 14, ...), numbered across the kernel."""

    def __init__(self):
        self.slots = 0
        self.flags = 0

    def slot(self) -> int:
        self.slots += 1
        return self.slots - 1

    def flag(self, loc) -> int:
        self.flags += 1
        if self.flags > SPLIT_FLAG_BASE + 1:
            raise CompilationError(
                f"this kernel needs more than {SPLIT_FLAG_BASE + 1} cross-core flags for its "
                "cube/vector hand-offs: split it into two kernels", loc)
        return SPLIT_FLAG_BASE + 1 - self.flags


def _blocks(body: Block):
    """(block, the top-level op it is in, None for ``body``) for ``body`` and every block
    nested in it, outer ones first."""
    yield body, None
    for top in list(body.ops):
        for inner in top.blocks:
            for block in blocks(inner):
                yield block, top


def _loops_of(body: Block) -> dict:
    """{id(block): the scf.for whose body it is}."""
    return {id(op.blocks[0]): op for op in walk(body) if op.name == "scf.for"}


def _top_loop(loops: dict, block: Block, top: Op | None) -> Op | None:
    """The top-level scf.for whose body ``block`` is, or None."""
    loop = loops.get(id(block))
    return loop if loop is not None and loop is top else None


def _around(body: Block, top: Op | None, credit) -> None:
    """The hand-off's priming flags before the top-level op it is in, the draining waits
    after (``_exchange``)."""
    if credit is not None:
        prime, drain = credit
        at = body.ops.index(top)
        body.ops[at:at + 1] = [*prime, top, *drain]


def _exchange(src: Value, slots: _Slots, loc, in_loop: bool,
              to_cube: bool = False, loop: Op | None = None) -> tuple[list[Op], Value]:
    """Store ``src`` to a workspace slot, signal, wait, load it back: from the cube to the
    vector core (an accumulator), or with ``to_cube`` from the vector core to the cube (a
    matmul operand computed by vector ops; the load lands in L1). Returns the ops and the
    loaded value.

    Inside a loop (or branch) the next iteration stores to the same slot, so the consumer
    signals back once it has loaded (an "ack" flag) and the producer waits for that just
    before its next store into the slot: nothing else stops it from overwriting a slot the
    other core has not read, and meanwhile the producer goes on (the cube computes the next
    S while the vector core still loads this one; before, it waited right after its
    signal, a cross-core round trip per hand-off on the critical path). The first store
    finds a credit the consumer set before the loop (``credit``: that set and the producer's
    wait after the loop that takes the last ack back, so every flag is balanced at the end,
    as pto-isa's kernels prime and drain theirs). A hand-off in the body of a top-level loop
    (``loop``) goes through a FIFO of ``HAND_OFF_FIFO`` slots, iteration i in slot i % depth,
    with that many credits: the producer waits for the consumer to take iteration i - depth,
    not i - 1 (in a nested loop a slot's turn would restart with each outer iteration, so
    one slot there). Returns (ops, loaded value, credit or None)."""
    shape = src.type.shape
    slot = slots.slot()
    flag = {"flag": slots.flag(loc), "split": True}
    if to_cube:
        flag["to_cube"] = True
    depth = HAND_OFF_FIFO if loop is not None and len(shape) == 2 else 1
    ws = Op("tensor.workspace", [], [TensorType(src.type.dtype, 2)],
            {"slot": slot, "shape": (shape[0] * depth, *shape[1:])}, loc=loc)
    zero = Op("arith.constant", [], [ScalarType(dt.int64)], {"value": 0}, loc=loc)
    offsets = [zero.result, zero.result]
    places = []
    if depth > 1:
        places = _fifo_row(loop, depth, shape[0], loc)
        offsets = [places[-1].result, zero.result]
    store = Op("tile.store", [ws.result, *offsets, src], loc=loc)
    signal = Op("pto.sync_set", attrs=flag, loc=loc)
    wait = Op("pto.sync_wait", attrs=dict(flag), loc=loc)
    load = Op("tile.load", [ws.result, *offsets], [TileType(src.type.dtype, shape)],
              {"shape": tuple(shape), "padding": None}, loc=loc)   # the slot is whole
    load.result.hint = src.hint
    if not to_cube:
        load.attrs[EPILOGUE] = True
    if not in_loop:
        return [ws, zero, store, signal, wait, load], load.result, None
    ack = {**flag, "flag": slots.flag(loc), "ack": True}

    def ack_op(name):
        return Op(name, attrs=dict(ack), loc=loc)
    ops = [ws, zero, *places, ack_op("pto.sync_wait"), store, signal, wait, load,
           ack_op("pto.sync_set")]
    return ops, load.result, ([ack_op("pto.sync_set") for _ in range(depth)],
                              [ack_op("pto.sync_wait") for _ in range(depth)])


def _fifo_row(loop: Op, depth: int, rows: int, loc) -> list[Op]:
    """The first row of this iteration's slot: ((iv - lb) // step) % depth * rows."""
    iv, lb, step = loop.blocks[0].args[0], loop.operands[0], loop.operands[2]
    i64 = ScalarType(dt.int64)
    k = Op("arith.constant", [], [i64], {"value": depth}, loc=loc)
    r = Op("arith.constant", [], [i64], {"value": rows}, loc=loc)
    d = Op("arith.sub", [iv, lb], [i64], loc=loc)
    q = Op("arith.floordiv", [d.result, step], [i64], loc=loc)
    m = Op("arith.mod", [q.result, k.result], [i64], loc=loc)
    row = Op("arith.mul", [m.result, r.result], [i64], loc=loc)
    return [k, r, d, q, m, row]


def _operands_to_cube(body: Block, slots: _Slots) -> None:
    """A matmul operand computed by vector ops (flash attention's P) goes to the cube through
    the GM workspace: the vector core stores it, signals, and the cube loads it into L1."""
    loops = _loops_of(body)
    for block, top in _blocks(body):
        for op in list(block.ops):
            if op.name != "tile.matmul":
                continue
            for i, src in enumerate(op.operands[:2]):
                if src.owner is not None and src.owner.name == "tile.load" or _l1_slice(src):
                    continue
                exchange, loaded, credit = _exchange(src, slots, op.loc, top is not None,
                                                     to_cube=True,
                                                     loop=_top_loop(loops, block, top))
                at = block.ops.index(op)
                block.ops[at:at] = exchange
                _around(body, top, credit)
                op.operands[i] = loaded


def _accumulators(body: Block) -> tuple[Classes, set]:
    """The values sharing a buffer (``loop_classes``) and the ids of the classes that are
    accumulators: a matmul's result and accumulator, with every loop and branch value tied
    to them."""
    classes = loop_classes(body)
    roots = set()
    for op in walk(body):
        if op.name == "tile.matmul":
            roots.add(classes.find(op.result).id)
            if len(op.operands) == 3:
                roots.add(classes.find(op.operands[2]).id)
    return classes, roots


def infer_memory_space(module: Module) -> Module:
    body = module.kernel.body
    slots = _Slots()
    _operands_to_cube(body, slots)
    classes, acc_roots = _accumulators(body)
    if fold_bias(body, lambda v: classes.find(v).id in acc_roots,
                 module.target.buffers.get(BIAS, 0)):
        classes, acc_roots = _accumulators(body)      # the folded accumulators' new starts
    mat_values = set()
    bias_values = set()
    for op in walk(body):
        if op.name == "tile.matmul":
            for src in op.operands[:2]:
                mat_values.add(src.id)
                if _l1_slice(src):        # a slice of an L1 tile, extracted into L0A/L0B
                    mat_values.add(src.owner.operands[0].id)

    for block in blocks(body):
        for op in list(block.ops):
            if op.name == "tile.broadcast" and classes.find(op.result).id in acc_roots:
                bias = _to_bias_table(block, op)
                bias_values.add(bias.id)
                mat_values.add(bias.owner.operands[0].id)
                module.facts.setdefault("bias_rows", set()).add(bias.owner.operands[0].id)

    def space(v: Value) -> str:
        if v.id in mat_values:
            return MAT
        if v.id in bias_values:
            return BIAS
        return ACC if classes.find(v).id in acc_roots else VEC

    fold_store(body, lambda v: v.is_tile and space(v) == ACC)
    dead_code_elimination(module)
    if acc_roots:
        _spill(body, lambda v: v.is_tile and space(v) == ACC, slots)
    use_map = users(body)
    for op in walk(body):
        for r in op.results:
            if not r.is_tile:
                continue
            s = space(r)
            for u in use_map.get(r, ()):
                if s == MAT and u.name != "tile.matmul" and not (
                        u.name == "tile.slice" and u.result.id in mat_values) and not (
                        u.name == "tile.mov" and u.result.id in bias_values):
                    raise _mixing_error(u, "a tile loaded for a matmul is also used by vector "
                                           "code")
                if s == ACC and u.name not in CUBE_USERS:
                    raise _mixing_error(u, "a matmul accumulator is used by vector code")
            if s == ACC and op.name not in ("tile.matmul", "tile.full", "tile.broadcast",
                                            "scf.for", "scf.if", "scf.while"):
                raise _mixing_error(op, "a vector result is used as a matmul accumulator")
    for op in walk(body):
        for v in op.results + [a for blk in op.blocks for a in blk.args]:
            if v.is_tile:
                v.type = v.type.with_space(space(v))
    _insert_moves(body)
    dead_code_elimination(module)      # the L1 slices extracted straight into L0A/L0B
    module.facts["placed"] = True
    module.facts["uses_cube"] = bool(acc_roots)
    return module
