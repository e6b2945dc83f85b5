"""Dead code elimination: drop side-effect-free ops whose results nobody reads."""
from __future__ import annotations

from ..ir import GM_WRITES, SYNC_OPS, Block, Module, users

SIDE_EFFECTS = {*GM_WRITES, "scf.for", "scf.if", "scf.while",
                "scf.yield", "scf.condition",
                *SYNC_OPS}


def _sweep(block: Block, used) -> bool:
    changed = False
    kept = []
    for op in block.ops:
        for b in op.blocks:
            changed |= _sweep(b, used)
        if op.name not in SIDE_EFFECTS and not any(used.get(r) for r in op.results):
            changed = True
            continue
        kept.append(op)
    block.ops[:] = kept
    return changed


def dead_code_elimination(module: Module) -> Module:
    while _sweep(module.kernel.body, users(module.kernel.body)):
        pass
    return module
