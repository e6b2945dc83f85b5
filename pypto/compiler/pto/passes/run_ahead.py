"""Each core runs one iteration ahead in a loop whose data goes back and forth between the
cube and the vector cores (flash attention: S = Q K^T to the vector core, P back, P V out).

As written, a part's iteration j is A(j), the work up to its first wait for data from the
other core after its own hand-off, then B(j), the work that needs that data. The cube's A is
S_j = Q K_j^T, its B is P_j V_j; the vector core's A is the softmax of S_j into P_j, its B
adds P_j V_j into O. Each core idles while the other works on its hand-off, and the loop's
critical path holds every hand-off. Running A(j+1) before B(j) -- S_{j+1} before P_j V_j on
the cube, the softmax of S_{j+1} before O += P_j V_j on the vector core -- overlaps the two
cores across iterations, as pto-isa's hand-written flash attention does:

    if lb < ub: A(lb)
    for j = lb to ub step s:
        keep what B(j) reads of A(j)              (alpha: A(j+1) overwrites it)
        if j + s < ub: A(j + s)
        B(j)

Each part runs two iterations ahead, A(lb) and A(lb + s) first and A(j + 2s) in the loop.
The cube's hand-offs go through FIFOs of as many workspace slots (HAND_OFF_FIFO), so S(j+2)
waits only for the vector core to have taken S(j). The vector core's softmax of S(j+2)
comes before it adds P(j) V(j) into O: the loop that runs through both cores (P(j) to the
cube, P(j) V(j) back, O, the softmax of the next S) then spans three key blocks, not two
(flash attention at 8k: 315 -> 304 us); what B(j) reads of A(j) (alpha) is kept in a ring of
copies that many iterations long (``_saved_copies``). A's work may hold branches
(flash attention's causal mask on the diagonal blocks), cloned with the iteration's scalars.

B is the wait, the other core's data and everything that reads what B writes (this iteration
or the last); work that only feeds B (the load of V, its move to L0B) waits with it; A is the
rest, address computations copied. The reorder keeps every value: what one side reads of its
own previous iteration the other does not overwrite, A reads nothing of B's, and what B reads
of A(j) is copied as A(j) writes it and again before A(j+1) (UB tiles only, TMOVs). A's waits must be answered by the other
core before it waits for anything B sends, or the cores would wait for each other. A loop
that breaks a rule is left as it is, as is one of at most one iteration known at compile
time. The flags between a core's pipes come from the sync pass, after this one; the host runs
the program as written (``split.interleaved_copy``, taken before the split).
"""
from __future__ import annotations

import dataclasses
import itertools
import threading

from ....language import dtypes as dt
from ....errors import BufferOverflow
from ..isa import accesses, is_scalar, place_above, tile_extent
from ...ir import HAND_OFF_FIFO
from ..program import (For, If, Inst, Program, RunAheadRefused, Scalar, TensorArg, Tile,
                       constant_values, nested_bodies, walk_insts)
from .clone import Cloner, rewrite_loops

_local = threading.local()


def _next() -> str:
    return f"ahead{next(_local.names)}"


def run_ahead(program: Program) -> Program:
    if program.kind != "mixed":
        return program
    _local.names = itertools.count()
    consts = constant_values(program)
    for kind, part in program.parts:
        other = program.vector_body if kind == "cube" else program.body

        def rewrite(loop: For, other=other, kind=kind) -> list | None:
            if _at_most_one(loop, consts):
                return None
            split = _split(loop, program, other)
            depth = CUBE_DEPTH if kind == "cube" else VECTOR_DEPTH
            out = None if split is None else _skew(loop, *split, program, depth)
            refused = out is None or (len(out) == 1 and out[0] is loop)
            if refused and kind == "vector" and program.run_ahead_plan and \
                    _split_point(loop.body) is not None:
                raise RunAheadRefused("the vector part's loop does not run ahead")
            return out

        rewrite_loops(part, rewrite)
    return program


# How many iterations ahead each part's A runs: the cube's, the hand-offs' FIFO depth, so
# A(j+2) stores S into the slot the vector core emptied when it took S(j); the vector
# core's, as far (three ahead: 330 us at 8k, the UB copies and waits cost more).
CUBE_DEPTH = HAND_OFF_FIFO
VECTOR_DEPTH = 2


def _at_most_one(loop: For, consts: dict) -> bool:
    lb, ub, step = (consts.get(x.name) for x in (loop.lb, loop.ub, loop.step))
    return None not in (lb, ub, step) and 0 < step and ub - lb <= step


# -- which work runs ahead --------------------------------------------------------------------

def _is_flag(n) -> bool:
    return isinstance(n, Inst) and n.op in ("sync.set", "sync.wait")


def _is_scalar(n) -> bool:
    return isinstance(n, Inst) and is_scalar(n)


def _hands_off(n) -> bool:
    return isinstance(n, Inst) and n.op == "tstore" and isinstance(n.outs[0], TensorArg) \
        and n.outs[0].workspace


def _takes_over(n) -> bool:
    """A load of the other core's data (what the flags say is there)."""
    return isinstance(n, Inst) and n.op == "tload" and isinstance(n.ins[0], TensorArg) \
        and n.ins[0].workspace


def _split_point(body: list) -> int | None:
    """The first wait for the other core's data (a consumer waits on MTE2) after a hand-off
    of this core's: where this core starts to depend on what it handed over."""
    stored = False
    for k, n in enumerate(body):
        stored = stored or _hands_off(n)
        if stored and _is_flag(n) and n.op == "sync.wait" and n.attrs.get("pipe") == "MTE2":
            return k
    return None


class _Body:
    """The loop body's top-level nodes with the buffer ranges each reads and writes; for each
    read the writers that reach it (the latest before it, else, around the loop's back edge,
    the latest of the previous iteration), and for each node the nodes reading what it
    writes. Worked out once: the partition asks for them again and again."""

    def __init__(self, body: list, target):
        self.nodes = body
        self.target = target
        touched = [_accesses(n, target) for n in body]
        self.writes = [[a for kind, a in t if kind == "w"] for t in touched]
        # per node [(a range it reads, [(writer index, from the previous iteration)])]
        self.reach = [[(a, self._reaching(i, a)) for kind, a in t if kind == "r"]
                      for i, t in enumerate(touched)]
        self.readers = [set() for _ in body]
        for i, reads in enumerate(self.reach):
            for _, writers in reads:
                for w, _ in writers:
                    self.readers[w].add(i)

    def _reaching(self, i: int, r: tuple) -> list[tuple[int, bool]]:
        n, out = len(self.nodes), []
        for step in range(1, n + 1):
            j = (i - step) % n
            hits = [w for w in self.writes[j] if _overlap(w, r)]
            if hits:
                out.append((j, j >= i))
                if isinstance(self.nodes[j], Inst) and any(
                        w[0] == r[0] and w[1] <= r[1] and r[2] <= w[2] for w in hits):
                    break
        return out

    def writers(self, i: int) -> set[int]:
        """The nodes whose writes node ``i`` reads."""
        return {w for _, writers in self.reach[i] for w, _ in writers}


def _split(loop: For, program: Program, other: list):
    """(A, B, the tiles B reads from A(j) that A(j+1) overwrites) of the loop's body, A's
    address computations included, or None when the loop has no run-ahead or it would change
    what the program computes. ``other``: the other core's part."""
    body = loop.body
    k = _split_point(body)
    if k is None or loop.iter_args or any(
            isinstance(n, Inst) and not is_scalar(n) and n.op != "tstore" and
            any(isinstance(o, Scalar) for o in n.outs) for n in walk_insts(body)):
        return None
    info = _Body(body, program.target)
    later = {i for i in range(k, len(body)) if _is_flag(body[i]) or _takes_over(body[i])}
    roots = {i for i in range(k) if _is_flag(body[i]) or _hands_off(body[i])}
    b = _depends_on(info, {k} | later)
    if b & roots:
        return None
    sunk = _sinkable(info, roots, b)
    behind = b | sunk
    ahead = [i for i, n in enumerate(body) if i not in behind and not _is_scalar(n)]
    if not all(_runs_ahead(body[i]) for i in ahead):
        return None
    saves = _saves(info, set(ahead), behind)
    if saves is None or not _keeps_after(loop, program, info, set(ahead), behind):
        return None
    a_nodes = [body[i] for i in ahead]
    a_nodes = _with_scalars(body, a_nodes)
    rest = [n for i, n in enumerate(body) if i in behind or _is_scalar(n)]
    if not _answered(loop, a_nodes, rest, other):
        return None
    return a_nodes, rest, saves


def _runs_ahead(node) -> bool:
    """Can A hold ``node``: an instruction, or a branch with no results and no flags (cloned
    with the iteration's scalars)?"""
    if isinstance(node, If):
        return not node.results and not any(_is_flag(n) for n in walk_insts([node]))
    return isinstance(node, Inst)


def _depends_on(info: _Body, start: set) -> set:
    """``start`` and every node reading what one of them writes (this iteration or, around
    the back edge, the previous one)."""
    out = set(start)
    changed = True
    while changed:
        changed = False
        for i in range(len(info.nodes)):
            if i not in out and not _is_scalar(info.nodes[i]) and info.writers(i) & out:
                out.add(i)
                changed = True
    return out


def _sinkable(info: _Body, roots: set, behind: set) -> set:
    """Nodes that only feed B (a load of P V's V, its move to L0B): they wait with B, so A
    leaves their buffers alone (the largest such set)."""
    body = info.nodes
    cand = {i for i in range(len(body)) if i not in behind and i not in roots and
            not _is_flag(body[i]) and not _is_scalar(body[i])}
    changed = True
    while changed:
        changed = False
        for i in sorted(cand):
            feeds_a = any(r not in behind and r not in cand for r in info.readers[i])
            reads_a = any(w not in behind and w not in cand for w in info.writers(i))
            if feeds_a or reads_a or not info.readers[i]:
                cand.discard(i)
                changed = True
    return cand


def _saves(info: _Body, ahead: set, behind: set) -> list | None:
    """[(node, input index, A's last writer of it)] of B's reads of what A(j) wrote, which
    A(j+1) would overwrite before B(j) reads it (vector tiles only: a copy in the UB is a
    TMOV). None when the reorder cannot keep a value."""
    out = []
    writes_a = [w for i in ahead for w in info.writes[i]]
    writes_b = [w for i in behind for w in info.writes[i]]
    for i in range(len(info.nodes)):
        if _is_scalar(info.nodes[i]):
            continue
        mine, theirs = (ahead, writes_b) if i in ahead else (behind, writes_a)
        for r, writers in info.reach[i]:
            if all(w in mine for w, _ in writers):
                # a value of its own side's previous iteration: the other side runs between
                if (not writers or any(back for _, back in writers)) and \
                        any(_overlap(r, w) for w in theirs):
                    return None
                continue
            if i in ahead:
                return None                  # A reads B's: _depends_on put it in B
            if any(back for _, back in writers):
                return None
            node = info.nodes[i]
            if not isinstance(node, Inst):
                return None
            inputs = [x for x, x_range in ((x, _range(x, info)) for x in node.ins)
                      if x_range is not None and _overlap(x_range, r)]
            if not inputs or any(x.loc != "vec" for x in inputs):
                return None
            last = info.nodes[max(w for w, _ in writers)]
            out += [(node, node.ins.index(x), last) for x in inputs]
    return out


def _range(x, info: _Body):
    return tile_extent(x, info.target) if isinstance(x, Tile) else None


def _keeps_after(loop: For, program: Program, info: _Body, ahead: set, behind: set) -> bool:
    """After the loop, B(last) ran after A(last), as before, except where both write the same
    bytes and A's write came last in the body: nothing may read those after the loop."""
    both = [w for i in ahead for w in info.writes[i]
            if any(_overlap(w, v) for j in behind if j < i for v in info.writes[j])]
    if not both:
        return True
    inside = {id(n) for n in walk_insts(loop.body)}
    return not any(isinstance(n, Inst) and id(n) not in inside and any(
        kind == "r" and _overlap(a, w) for kind, a in accesses(n, program.target) for w in both)
        for _, part in program.parts for n in walk_insts(part))


def _with_scalars(body: list, nodes: list) -> list:
    """``nodes`` with the loop body's scalar instructions they use, in body order."""
    defs = {id(o): n for n in body if _is_scalar(n) for o in n.outs}
    chosen = {id(n) for n in nodes}
    todo = list(nodes)
    while todo:
        n = todo.pop()
        for x in _uses(n):
            d = defs.get(id(x))
            if d is not None and id(d) not in chosen:
                chosen.add(id(d))
                todo.append(d)
    return [n for n in body if id(n) in chosen]


def _uses(n) -> list:
    """What a node reads: an instruction's inputs (a store's window: its outs too), a
    branch's condition and what its instructions read."""
    if isinstance(n, If):
        return [n.cond] + [x for i in walk_insts([n]) if isinstance(i, Inst) for x in _uses(i)]
    return n.ins + ([] if is_scalar(n) else n.outs)


def _overlap(a: tuple, b: tuple) -> bool:
    return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


def _accesses(node, target) -> list:
    if isinstance(node, Inst):
        return accesses(node, target)
    return [x for b in nested_bodies(node) for n in walk_insts(b) if isinstance(n, Inst)
            for x in accesses(n, target)]


def _flags(body: list, op: str) -> set:
    return {n.attrs["flag"] for n in walk_insts(body) if _is_flag(n) and n.op == op}


def _answered(loop: For, ahead: list, rest: list, other: list) -> bool:
    """Does the other core answer A's waits before it waits for anything B sends? Then
    A(j+1) never waits for B(j), which may wait for the other core."""
    copies = list(_same_loops(other, loop))
    waited, sent = _flags(ahead, "sync.wait"), _flags(rest, "sync.set")

    def answers_first(copy: For) -> bool:
        order = [n for n in walk_insts(copy.body) if _is_flag(n)]
        last_answer = max((k for k, n in enumerate(order) if n.op == "sync.set" and
                           n.attrs["flag"] in waited), default=-1)
        first_need = min((k for k, n in enumerate(order) if n.op == "sync.wait" and
                          n.attrs["flag"] in sent), default=len(order))
        return last_answer < first_need

    return bool(copies) and all(answers_first(c) for c in copies)


def _same_loops(body: list, loop: For):
    """The other part's copies of ``loop`` (the split keeps its index)."""
    for n in body:
        if isinstance(n, For) and n.iv is loop.iv:
            yield n
        for nested in nested_bodies(n):
            yield from _same_loops(nested, loop)


# -- the rewrite ------------------------------------------------------------------------------

def _scalar(op: str, ins: list, dtype, **attrs) -> tuple[Inst, Scalar]:
    out = Scalar(_next(), dtype)
    return Inst(op, ins, [out], attrs), out


def _saved_copies(saves: list, ahead: list, program: Program,
                  depth: int) -> tuple[list, list] | None:
    """(the shift of the copies, A with TMOVs after the writers) that keep what B(j) reads of
    A(j) past the rest of A(j), the ``depth`` A's that run before B(j) and B(j-1), which may
    reuse its bytes: A(j) copies it to a first buffer as soon as it is written, and each
    shift (at the top of an iteration, and between the prologue's A's) moves every copy one
    buffer along, so B(j) reads the last of ``depth`` + 1. None when the UB has no room for
    them (the loop is then left as is)."""
    tiles, after = {}, {}
    for node, at, writer in saves:
        x = node.ins[at]
        if id(x) in tiles:
            continue
        try:
            tiles[id(x)] = (x, *(place_above(program, dataclasses.replace(
                x, name=f"{x.name}_{_next()}", addr=0), lambda end: BufferOverflow("no room"))
                for _ in range(depth + 1)))
        except BufferOverflow:
            return None
        after.setdefault(id(writer), []).append(Inst("tmov", [x], [tiles[id(x)][1]], {}))
    for node, at, _ in saves:
        node.ins[at] = tiles[id(node.ins[at])][-1]
    shift = [Inst("tmov", [ring[k - 1]], [ring[k]], {}) for _, *ring in tiles.values()
             for k in range(len(ring) - 1, 0, -1)]
    return shift, [m for n in ahead for m in [n] + after.get(id(n), [])]


def _skew(loop: For, ahead: list, rest: list, saves: list, program: Program,
          depth: int) -> list:
    copies = _saved_copies(saves, ahead, program, depth)
    if copies is None:
        return [loop]
    shift, ahead = copies
    prologue, at = [], loop.lb
    for d in range(depth):
        if d:
            add, at = _scalar("arith.add", [at, loop.step], dt.int64)
            prologue += [add] + Cloner(_next, {}, {}).nodes(shift)
        first = Cloner(_next, {id(loop.iv): at}, {}).nodes(ahead)
        cmp0, any_trip = _scalar("arith.cmp", [at, loop.ub], dt.bool_, pred="lt")
        prologue += [cmp0, If(any_trip, first, [], [], [], [])]
    body, iv_next = [], loop.iv
    for _ in range(depth):
        add, iv_next = _scalar("arith.add", [iv_next, loop.step], dt.int64)
        body.append(add)
    cmp, more = _scalar("arith.cmp", [iv_next, loop.ub], dt.bool_, pred="lt")
    again = Cloner(_next, {id(loop.iv): iv_next}, {}).nodes(ahead)
    loop.body = shift + body + [cmp, If(more, again, [], [], [], [])] + rest
    return prologue + [loop]
