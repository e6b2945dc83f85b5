"""The second vector core of a cluster: what it runs of a mixed kernel's vector part.

A2/A3 starts a mixed kernel's vector function on both AIV cores of every cluster (sub-blocks
0 and 1, ``pto.get_subblock_idx``), and FFTS mode 2 ties the three cores together: a flag the
cube sets reaches both AIVs, and the cube's wait ends when both AIVs have set theirs
(pto-isa ``npu/a2a3/TPush.hpp``, ``SyncAll.hpp``). A part that works row by row runs on
both, half the rows each (``passes/split_rows.py``, ``Program.vector_cores`` 2); any other
gives all the vector work to sub-block 0, and sub-block 1 runs the part's *skeleton*: its loops and branches, the scalars they
need, and its cross-core flags and barriers, so that it keeps step with the cube and with
sub-block 0 while moving no data. The printer writes the vector function as ``if subblock == 0
{ the part } else { its skeleton }``; the engines and the cycle model run the part on one
vector core then (docs/engines.md, "Mixed kernels on the chip").
"""
from __future__ import annotations

from dataclasses import replace

from ...errors import NotOnChip
from .isa import CROSS_CORE_OPS, is_scalar
from .program import For, If, Inst, Scalar, nested_bodies, walk_insts

SUBBLOCK = "pypto_sb"        # the printed sub-block index (``%pypto_sb``)


def skeleton(body: list) -> list:
    """The control flow, scalars and cross-core flags of ``body``, nothing else."""
    return _keep(body, set())


def _keep(body: list, needed: set) -> list:
    """``body``'s skeleton, built backwards; ``needed`` (scalar names the kept nodes read)
    grows with what the kept nodes read."""
    out = []
    for node in reversed(body):
        kept = _node(node, needed)
        if kept is not None:
            out.append(kept)
    return out[::-1]


def _node(node, needed: set):
    if isinstance(node, Inst):
        return _inst(node, needed)
    results = node.results
    if not _has_cross_core(node) and not any(r.name in needed for r in results):
        return None
    if isinstance(node, For):
        _read(needed, node.lb, node.ub, node.step, *node.inits, *node.yields)
        return replace(node, body=_keep(node.body, needed))
    if isinstance(node, If):
        _read(needed, node.cond, *node.then_yields, *node.else_yields)
        return replace(node, then_body=_keep(node.then_body, needed),
                       else_body=_keep(node.else_body, needed))
    _read(needed, *node.inits, *node.yields, node.cond, *node.forwarded)
    return replace(node, after_body=_keep(node.after_body, needed),
                   before_body=_keep(node.before_body, needed))


def _inst(inst: Inst, needed: set):
    if inst.op in CROSS_CORE_OPS:
        return inst
    defined = [] if inst.op == "tstore" else inst.outs     # a store's outs are its window
    wanted = [o for o in defined if isinstance(o, Scalar) and o.name in needed]
    if is_scalar(inst):
        if not wanted:
            return None
        _read(needed, *inst.ins)
        return inst
    if wanted:
        raise NotOnChip(
            f"a mixed kernel whose vector part's control flow depends on tile data "
            f"(%{wanted[0].name}, read by {inst.op}): the cluster's second vector core, "
            f"which keeps step with the cube without the data, cannot follow it. Compute "
            f"the loop bounds and conditions from scalars, or split the kernel in two",
            inst.attrs.get("_loc"))
    return None


def _read(needed: set, *values) -> None:
    needed.update(v.name for v in values if isinstance(v, Scalar))


def _has_cross_core(node) -> bool:
    return any(isinstance(i, Inst) and i.op in CROSS_CORE_OPS
               for b in nested_bodies(node) for i in walk_insts(b))
