"""Synchronisation: ``set_flag``/``wait_flag`` pairs so every cross-pipe hazard is ordered.

Pipes run concurrently (see ``pto/isa.py``), so a TLOAD (MTE2) and the TADD (V) that reads its
tile must be ordered by a flag, and so must the TADD and a later TLOAD that overwrites the tile
it still reads. The pass works on the structured program, one block at a time:

* Forward edges. Items of a block (instructions, or whole loops and branches summarised by
  the accesses inside them) are visited in order. For each later item that conflicts with an
  earlier one on another pipe, a flag is set right after the earlier item and waited right
  before the later one, unless what the waiting pipe already knows orders them (vector clocks:
  a wait teaches the waiting pipe everything the setting pipe knew). A flag into a branch
  is waited in each branch, before its first conflicting item (``wait_in_branches``);
  otherwise flags never cross a block boundary, so any trip count and either path stay
  balanced.
* Back edges. In a loop body, an item that conflicts with an earlier-or-same item of the next
  iteration gets a flag: set once before the loop (the first iteration waits for nothing),
  waited before the reader, set after the writer, and waited once after the loop (so the flag
  is drained). A pipe pair shares a flag between edges where one covers the other.
* ``while`` loops, rare in tile code, get a ``barrier`` of every pipe at the end of each region.

Event ids (0–7 per pipe pair) are then given to pairs whose live ranges do not overlap in
program order; a pair that finds none free becomes ``barrier ALL`` (correct, slower).
"""
from __future__ import annotations

from collections import defaultdict

from ..isa import EVENT_IDS, PIPES, accesses, conflicts, is_scalar, is_sync, pipe_of
from ..program import For, If, Inst, Program, While


class _Pairs:
    """Every flag pair created, so event ids can be assigned once the program is final."""

    def __init__(self):
        self.pairs: list[tuple[str, str, list[Inst]]] = []

    def new(self, src: str, dst: str, ops=("set_flag", "wait_flag")) -> list[Inst]:
        insts = [Inst(op, [], [], {"src": src, "dst": dst, "event": None}) for op in ops]
        self.pairs.append((src, dst, insts))
        return insts


def insert_sync(program: Program) -> Program:
    """Adds flags to every part of ``program`` in place and returns it."""
    pairs = _Pairs()
    sync = _Sync(program.target, pairs)
    program.body = sync.block(program.body)
    if program.vector_body is not None:
        program.vector_body = sync.block(program.vector_body)
    _assign_events(program, pairs)
    return program


class _Sync:
    def __init__(self, target, pairs: _Pairs):
        self.target = target
        self.pairs = pairs
        self.memo: dict[int, list] = {}

    def summary(self, node) -> list[tuple[str, tuple]]:
        """[(pipe, access)] of a node and everything nested in it."""
        got = self.memo.get(id(node))
        if got is not None:
            return got
        if isinstance(node, For):
            got = [x for n in node.body for x in self.summary(n)]
        elif isinstance(node, If):
            got = [x for n in node.then_body + node.else_body for x in self.summary(n)]
        elif isinstance(node, While):
            got = [x for n in node.before_body + node.after_body for x in self.summary(n)]
        elif is_scalar(node) or is_sync(node):
            got = []
        else:
            pipe = pipe_of(node)
            got = [(pipe, a) for a in accesses(node, self.target)]
        self.memo[id(node)] = got
        return got

    # -- one block ----------------------------------------------------------------------------
    def block(self, items: list) -> list:
        items = [self.nested(x) for x in items]
        before, after = self.forward_edges(items)
        return _splice(items, before, after)

    def nested(self, node):
        """Synchronise inside a loop or branch; returns the node with its pre/post flags
        attached as (node, pre, post) when it is a loop with back edges."""
        if isinstance(node, If):
            node.then_body = self.block(node.then_body)
            node.else_body = self.block(node.else_body)
        elif isinstance(node, While):
            node.before_body = self.block(node.before_body) + self.full_barrier(node)
            node.after_body = self.block(node.after_body) + self.full_barrier(node)
        elif isinstance(node, For):
            body = [self.nested(x) for x in node.body]
            fwd_before, fwd_after = self.forward_edges(body)
            pre, post = self.back_edges(body, fwd_before, fwd_after)
            node.body = _splice(body, fwd_before, fwd_after)
            if pre:
                return _Wrapped(node, pre, post)
        return node

    def full_barrier(self, node) -> list:
        pipes = {p for p, _ in self.summary(node)}
        return [Inst("barrier", [], [], {"pipe": "ALL"})] if len(pipes) > 1 else []

    def items_summary(self, item):
        return self.summary(item.node if isinstance(item, _Wrapped) else item)

    def forward_edges(self, items: list):
        before, after = defaultdict(list), defaultdict(list)
        know = {p: {} for p in PIPES}          # pipe → {pipe: last item index known done}
        snaps: list[dict] = []
        seen: dict[str, list] = defaultdict(list)   # buffer → [(item, pipe, access)]
        for j, item in enumerate(items):
            if _orders_everything(item):
                know = {p: {q: j for q in PIPES} for p in PIPES}
                snaps.append({p: dict(k) for p, k in know.items()})
                continue
            summ = self.items_summary(item)
            need: dict[tuple[str, str], int] = {}
            for q, b in summ:
                for i, p, a in seen[b[1][0]]:
                    if p != q and conflicts(a, b) and need.get((p, q), -1) < i:
                        need[(p, q)] = i
            for (p, q), i in sorted(need.items(), key=lambda kv: -kv[1]):
                if know[q].get(p, -1) >= i:
                    continue
                insts = self.pairs.new(p, q)
                if isinstance(items[i], If):
                    # set in each branch after its last item that conflicts: work of p after
                    # it in the branch need not finish first (the cube's P V matmul waits for
                    # the store of the S piece whose bytes it takes, not for every piece)
                    mine = [b for r, b in summ if r == q]
                    insts[:1] = self.set_in_branches(items[i], p, q, mine)
                    learned = snaps[i - 1][p] if i else {}
                else:
                    after[i].append(insts[0])
                    learned = snaps[i][p]
                if isinstance(item, If):
                    # the set after item i orders every earlier item of pipe p too
                    theirs = [a for x in items[:i + 1] for r, a in self.items_summary(x)
                              if r == p]
                    insts[-1:] = self.wait_in_branches(item, p, q, theirs)
                else:
                    before[j].append(insts[-1])
                _join(know[q], learned)
            for p in {p for p, _ in summ}:
                know[p][p] = j
            snaps.append({p: dict(k) for p, k in know.items()})
            for p, a in summ:
                seen[a[1][0]].append((j, p, a))
        return before, after

    def wait_in_branches(self, node: If, p: str, q: str, theirs: list) -> list[Inst]:
        """The wait for a flag (``p`` to ``q``) that orders ``theirs`` (pipe ``p``'s
        accesses up to the flag's set) before a branch, placed in each branch right before
        its first item whose ``q`` accesses conflict (at the
        branch's end when none does), not before the whole branch: work of ``q`` ahead of
        that item need not wait (the second half of a double-buffered loop computes while
        the first half's store drains). Every path runs one wait, so the flag stays
        balanced. Returns the waits placed."""
        waits = []
        for body in (node.then_body, node.else_body):
            k = next((k for k, x in enumerate(body) if any(
                r == q and conflicts(a, b) for r, b in self.summary(x) for a in theirs)),
                len(body))
            if k < len(body) and isinstance(body[k], If):
                waits += self.wait_in_branches(body[k], p, q, theirs)
                continue
            wait = Inst("wait_flag", [], [], {"src": p, "dst": q, "event": None})
            body.insert(k, wait)
            waits.append(wait)
        return waits

    def set_in_branches(self, node: If, p: str, q: str, theirs: list) -> list[Inst]:
        """The set of a flag (``p`` to ``q``) that orders a branch's ``p`` accesses
        conflicting with ``theirs`` (``q``'s, after the branch) before them, placed in each
        branch right after its last item with such an access (at the branch's start when
        none has), not after the whole branch. Every path runs one set. Returns the sets."""
        sets = []
        for body in (node.then_body, node.else_body):
            k = max((k for k, x in enumerate(body) if any(
                r == p and conflicts(a, b) for r, a in self.summary(x) for b in theirs)),
                default=-1)
            if k >= 0 and isinstance(body[k], If):
                sets += self.set_in_branches(body[k], p, q, theirs)
                continue
            flag = Inst("set_flag", [], [], {"src": p, "dst": q, "event": None})
            body.insert(k + 1, flag)
            sets.append(flag)
        return sets

    def back_edges(self, body: list, before, after):
        """Flags from the end of one iteration to the start of the next; returns the flags to
        put before and after the loop. Each pipe pair gets one flag per edge no other edge of
        the pair covers (``_uncovered``), so a double-buffered loop's ping and pong each wait
        for their own buffer, not for the later of the two."""
        edges: dict[tuple[str, str], set] = defaultdict(set)
        summ = [self.items_summary(x) for x in body]
        fences = [k for k, x in enumerate(body) if _orders_everything(x)]
        for j in range(len(body)):
            for i in range(j, len(body)):
                if i == j and isinstance(body[i], (For, While, _Wrapped)):
                    continue      # a nested loop orders its own iterations and drains its flags
                if any(f > i or f < j for f in fences):
                    continue      # a full barrier lies between them across the back edge
                for q, b in summ[j]:
                    for p, a in summ[i]:
                        if p != q and conflicts(a, b):
                            edges[(p, q)].add((i, j))
        pre, post = [], []
        for (p, q), pairs in sorted(edges.items()):
            for i, j in _uncovered(pairs):
                pre_set, flag_wait, flag_set, drain = self.pairs.new(
                    p, q, ("set_flag", "wait_flag", "set_flag", "wait_flag"))
                pre.append(pre_set)
                before[j].insert(0, flag_wait)
                after[i].append(flag_set)
                post.append(drain)
        return pre, post


BACK_EDGE_FLAGS = 2     # flags per pipe pair around a loop; more edges share the last one


def _uncovered(pairs: set) -> list:
    """The (set after item i, wait before item j) edges that need a flag of their own. A
    flag set after i and waited before j orders every edge (i2, j2) with i2 <= i and
    j2 >= j (each pipe runs its items in order), so only the edges no other edge covers
    remain; past ``BACK_EDGE_FLAGS`` of them the rest share one flag (set after the latest,
    waited before the earliest), which keeps the event ids of large bodies in hand."""
    keep = sorted((i, j) for i, j in pairs
                  if not any((i2, j2) != (i, j) and i2 >= i and j2 <= j for i2, j2 in pairs))
    if len(keep) > BACK_EDGE_FLAGS:
        rest = keep[BACK_EDGE_FLAGS - 1:]
        keep = keep[:BACK_EDGE_FLAGS - 1] + [(max(i for i, _ in rest), min(j for _, j in rest))]
    return keep


class _Wrapped:
    """A loop with the flags that must surround it (pre-set back-edge flags, drains)."""

    def __init__(self, node, pre, post):
        self.node, self.pre, self.post = node, pre, post


def _orders_everything(item) -> bool:
    """A barrier of every pipe (cross-core sync is preceded by one)."""
    return isinstance(item, Inst) and item.op == "barrier" and item.attrs.get("pipe") == "ALL"


def _splice(items, before, after) -> list:
    out = []
    for k, item in enumerate(items):
        out += before.get(k, [])
        if isinstance(item, _Wrapped):
            out += item.pre + [item.node] + item.post
        else:
            out.append(item)
        out += after.get(k, [])
    return out


def _join(into: dict, other: dict) -> None:
    for p, i in other.items():
        if into.get(p, -1) < i:
            into[p] = i


# -- event ids ------------------------------------------------------------------------------

def _positions(body: list, pos: dict, counter: list) -> None:
    for node in body:
        pos[id(node)] = counter[0]
        counter[0] += 1
        if isinstance(node, For):
            _positions(node.body, pos, counter)
        elif isinstance(node, If):
            _positions(node.then_body, pos, counter)
            _positions(node.else_body, pos, counter)
        elif isinstance(node, While):
            _positions(node.before_body, pos, counter)
            _positions(node.after_body, pos, counter)


def _assign_events(program: Program, pairs: _Pairs) -> None:
    pos: dict[int, int] = {}
    counter = [0]
    for _, body in program.parts:
        _positions(body, pos, counter)
    busy: dict[tuple[str, str], list[int]] = defaultdict(lambda: [-1] * EVENT_IDS)
    spans = sorted(((min(pos[id(x)] for x in insts), max(pos[id(x)] for x in insts), src, dst,
                     insts) for src, dst, insts in pairs.pairs), key=lambda s: s[0])
    for start, end, src, dst, insts in spans:
        ends = busy[(src, dst)]
        free = next((e for e in range(EVENT_IDS) if ends[e] < start), None)
        if free is None:
            for x in insts:           # out of event ids: a full barrier orders it instead
                x.op, x.attrs = "barrier", {"pipe": "ALL"}
            continue
        ends[free] = end
        for x in insts:
            x.attrs["event"] = free
