"""A GEMM's epilogue on the cube's own pipes, so the accumulator never visits the vector core.

On A2/A3 an accumulator leaves L0C only through the FIX pipe's store to GM, which converts its
dtype and can apply a ReLU on the way (pto-isa ``TSTORE<..., ReluPreMode::NormalRelu>``); and
the cube adds a bias row as it multiplies (``TMATMUL_BIAS``, the row in the bias table, moved
there from L1 by ``TMOV``, which also widens fp16 to fp32). Done on the vector core instead,
the same epilogue costs a GM round trip of the whole fp32 tile (``memory_space._spill``) and
at 128 x 256 does not fit the UB. Two rewrites, both exact in the Tile IR:

* ``acc + bias_row`` (a ``tile.col_expand`` add of a (1, N) row loaded from GM) → the
  accumulator *starts* at the broadcast row: the zero init of its K loop (or the first matmul)
  takes the row, and ``pto/passes/acc_init.py`` makes the first matmul a ``tmatmul.bias``;
* ``store(relu(cast(acc)))``, in either order, each optional → ``store(acc)`` with the
  store's ``relu`` attribute and the FIX pipe's conversion.

Anything else (GELU, SiLU, a bias the bias table cannot hold) stays vector work.
"""
from __future__ import annotations

from ...language import dtypes as dt
from ..ir import GM_WRITES, Block, Op, Value, blocks, replace_uses, users, walk

BIAS_BURST = 64                  # TMovToBt: a row's bytes come in 64-byte bursts
# the (op, attrs) that are a ReLU when the other operand is the constant 0
RELU_FORMS = (("tile.unary", "relu"), ("tile.binary", "max"))
HOISTABLE = ("tile.load", "tile.cast")        # besides scalar arithmetic


def fold_bias(body: Block, is_acc, table_bytes: int) -> bool:
    """``acc + row`` → the accumulator starts at the row (see the module docstring);
    ``is_acc(v)``: is ``v`` an accumulator (``memory_space._accumulators``); ``table_bytes``:
    the bias table's size (A2/A3: 1 KiB, ``target.buffers["bias"]``). Did any fold?"""
    folded = False
    for block in blocks(body):
        for add in list(block.ops):
            if add.name == "tile.col_expand" and add.attrs.get("op") == "add" and \
                    is_acc(add.operands[0]):
                folded = _fold_one(body, block, add, table_bytes) or folded
    return folded


def _fold_one(body: Block, block: Block, add: Op, table_bytes: int) -> bool:
    use_map = users(body)
    acc, row = add.operands
    if len(use_map.get(acc, ())) != 1:
        return False
    start = _start(acc, use_map)
    if start is None or start[0] not in block.ops or \
            not _fits_bias_table(row, acc, table_bytes):
        return False
    owner, index = start
    moved = _slice_after(block, row, owner)
    if moved is None:
        return False
    for op in moved:
        block.ops.remove(op)
    init = Op("tile.broadcast", [row], [acc.type], loc=add.loc)
    init.result.hint = acc.hint
    at = block.ops.index(owner)
    block.ops[at:at] = moved + [init]
    if index is None:
        owner.operands.append(init.result)
    else:
        owner.operands[index] = init.result
    block.ops.remove(add)
    replace_uses(body, add.result, acc)
    return True


def _slice_after(block: Block, row: Value, start: Op) -> list[Op] | None:
    """The ops after ``start`` in ``block`` that ``row`` is computed by, in order, when they
    can run before ``start`` instead: pure ops that read nothing ``start`` or a later op makes,
    and a load of a tensor that nothing from ``start`` to here stores to. None otherwise."""
    after = block.ops[block.ops.index(start):]
    position = {id(op): i for i, op in enumerate(after)}
    wanted, todo = set(), [row]
    while todo:
        v = todo.pop()
        op = v.owner
        if op is None or id(op) not in position or id(op) in wanted:
            continue
        if op is start or op.blocks or op.name not in HOISTABLE and \
                not op.name.startswith("arith."):
            return None
        wanted.add(id(op))
        todo.extend(op.operands)
    moved = [op for op in after if id(op) in wanted]
    loads = {op.operands[0] for op in moved if op.name == "tile.load"}
    end = max((position[id(op)] for op in moved), default=0)
    for op in after[:end + 1]:
        for inner in [op, *(i for b in op.blocks for i in walk(b))]:
            if inner.name in GM_WRITES and inner.operands[0] in loads:
                return None
    return moved


def _fits_bias_table(row: Value, acc: Value, table_bytes: int) -> bool:
    """Is ``row`` a load (or an fp16 load widened by a cast, which the move into the bias
    table does) of the accumulator's width and dtype that the bias table holds?"""
    shape, n = row.type.shape, acc.type.shape[-1]
    if tuple(shape) not in ((1, n), (n,)) or row.type.dtype != acc.type.dtype:
        return False
    load = row.owner
    if load is not None and load.name == "tile.cast" and load.operands[0].type.dtype == \
            dt.float16 and row.type.dtype == dt.float32:
        load = load.operands[0].owner
    if load is None or load.name != "tile.load":
        return False
    src_bytes = n * load.result.type.dtype.itemsize
    return n * row.type.dtype.itemsize <= table_bytes and src_bytes % BIAS_BURST == 0


def _start(acc: Value, use_map: dict):
    """(op, operand index) where the accumulator's first value enters: a K loop's init that
    is a zero fill read by nothing else, or the operand slot a plain first matmul lacks."""
    op = acc.owner
    if op.name == "tile.matmul":
        return (op, None) if len(op.operands) == 2 else None
    if op.name != "scf.for":
        return None
    index = 3 + op.results.index(acc)
    init = op.operands[index]
    if init.owner is None or init.owner.name != "tile.full" or init.owner.operands or \
            init.owner.attrs.get("value") != 0 or len(use_map.get(init, ())) != 1:
        return None
    return op, index


def fold_store(body: Block, in_acc) -> None:
    """``store(relu(cast(acc)))`` (each optional, either order) → ``store(acc)``, with
    ``relu`` on the store when there was one; ``in_acc(v)``: is ``v`` in L0C."""
    for op in walk(body):
        if op.name != "tile.store":
            continue
        v, seen = op.operands[-1], set()
        while v.owner is not None and not in_acc(v):
            step = _epilogue_step(v.owner, seen)
            if step is None:
                break
            seen.add(step)
            v = v.owner.operands[0]
        if in_acc(v) and seen:
            op.operands[-1] = v
            if "relu" in seen:
                op.attrs["relu"] = True


def _epilogue_step(op: Op, seen: set) -> str | None:
    """"cast" or "relu" when ``op`` is one the FIX pipe does (once each), else None."""
    if op.name == "tile.cast" and "cast" not in seen:
        return "cast"
    if (op.name, op.attrs.get("op")) in RELU_FORMS and "relu" not in seen and \
            (op.name == "tile.unary" or _is_zero(op.operands[1])):
        return "relu"
    return None


def _is_zero(v: Value) -> bool:
    op = v.owner
    return op is not None and op.name == "arith.constant" and op.attrs.get("value") == 0
