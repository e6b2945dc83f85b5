"""Load forwarding: later fused groups read a loaded window straight from global memory.

On the chip a ``TLOAD`` copies a window of global memory into the UB and later instructions
read the copy. On the host both are ordinary memory, so when the window is still unchanged
where a later fused group reads the tile, the group can read global memory directly and the
copy need not be made at all. A layer norm then reads ``x`` where it is (in the host's caches)
instead of writing an 8-row copy of it first, and a weight row loaded by every block is read in
place instead of being copied twice (load, then reshape) per block.

This module decides *which* tiles may be forwarded, statically, for one instruction list (a
kernel body, a loop body, a branch): a tile loaded by a fused group, then possibly reshaped
without changing its 2-D view, whose value is read only by instructions of later fused groups,
with no write to global memory, no cross-core synchronisation and no control flow between the
load and the last read (only the last reading group's own closing store, which the backend
checks at run time like any fused store). Whether the window lies inside its tensor is known
only at run time; the backend checks it where the groups run and falls back to materialising
the tile (see ``Codegen.fused``).

It changes how the simulator executes the program, never the PTO program itself.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...compiler.pto.isa import CROSS_CORE_OPS, accesses, conflicts, tile_extent
from ...compiler.pto import For, If, Inst, Tile, While, walk_insts


@dataclass
class Forward:
    """A load whose value later groups read from global memory: under its own tile's name or
    the names of tiles reshaped from it (a PTO tile names a buffer, so a name can hold other
    values at other times: reads are recorded per instruction)."""
    load: Inst
    reshapes: list = field(default_factory=list)     # TRESHAPEs the backend skips
    readers: list = field(default_factory=list)      # (instruction, tile) reads from GM


@dataclass
class Plan:
    reads: dict = field(default_factory=dict)        # id(inst) -> {id(tile): Forward}
    loads: set = field(default_factory=set)          # id(tload) whose tile is not written
    reshapes: set = field(default_factory=set)       # id(treshape) not executed


def plan(insts: list, target) -> Plan:
    """Which loads of ``insts`` are forwarded, and which reads they serve."""
    out = Plan()
    touches = None                  # per instruction, computed once for every load's scan
    for i, inst in enumerate(insts):
        if isinstance(inst, Inst) and inst.op == "tload" and "_fuse" in inst.attrs \
                and not inst.attrs.get("_internal"):
            touches = touches or [_touches(node, target) for node in insts]
            forward = _follow(insts, i, touches, target)
            if forward is None:
                continue
            out.loads.add(id(inst))
            out.reshapes.update(id(r) for r in forward.reshapes)
            for reader, tile in forward.readers:
                out.reads.setdefault(id(reader), {})[id(tile)] = forward
    return out


def _follow(insts, i, touches, target) -> Forward | None:
    """Track the value loaded at ``insts[i]`` to its last read; None if any read cannot be
    served from global memory. ``touches[j]``: ``insts[j]``'s (reads, writes, writes GM)."""
    load = insts[i]
    forward = Forward(load)
    live = {id(load.outs[0]): tile_extent(load.outs[0], target)}   # names holding the value
    own_group = load.attrs["_fuse"]
    gm_written = False
    for inst, (reads, writes, writes_gm) in zip(insts[i + 1:], touches[i + 1:]):
        if _is_view_reshape(inst, live):        # (one in place touches no bytes: isa.accesses)
            if gm_written:
                return None
            forward.reshapes.append(inst)
            live[id(inst.outs[0])] = tile_extent(inst.outs[0], target)
            continue
        if any(_overlaps(r, live.values()) for r in reads):
            if gm_written or isinstance(inst, (For, If, While)):
                return None
            read = [x for x in inst.ins if isinstance(x, Tile) and
                    _overlaps(tile_extent(x, target), live.values())]
            if "_fuse" not in inst.attrs or any(id(x) not in live for x in read):
                return None           # not a fused read, or the bytes under another name
            if inst.attrs["_fuse"] != own_group:
                forward.readers.extend((inst, x) for x in read)
        gm_written = gm_written or writes_gm
        live = {k: e for k, e in live.items() if not any(_overlaps(w, [e]) for w in writes)}
        if not live:
            break
    return forward if forward.readers else None


def _touches(node, target):
    """(read extents, write extents, may write GM) of an instruction, or of everything a loop
    or branch contains (control flow counts as a possible GM write)."""
    reads, writes = [], []
    writes_gm = isinstance(node, (For, If, While))
    for inst in walk_insts([node]):
        if isinstance(inst, Inst):
            writes_gm = writes_gm or inst.op == "tstore" or inst.op in CROSS_CORE_OPS
            for kind, extent in accesses(inst, target):
                (reads if kind == "r" else writes).append(extent)
    return reads, writes, writes_gm


def _overlaps(extent, extents) -> bool:
    return any(conflicts(("w", extent), ("r", other)) for other in extents)


def _is_view_reshape(inst, live: dict) -> bool:
    """A standalone TRESHAPE of a name holding the value that keeps its 2-D view: element
    (r, c) of the result is element (r, c) of the window."""
    if not isinstance(inst, Inst) or inst.op != "treshape" or "_fuse" in inst.attrs:
        return False
    src, dst = inst.ins[0], inst.outs[0]
    return isinstance(src, Tile) and id(src) in live and (src.rows, src.cols) == \
        (dst.rows, dst.cols) and src.dtype == dst.dtype     # a bitcast is not a view here
