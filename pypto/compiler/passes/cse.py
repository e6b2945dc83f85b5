"""Common subexpression elimination for the scalar unit: one ``arith.constant 1024`` and one
``pid * 1024`` however often the kernel writes them. Tile ops are left alone (each tile is a
buffer with a lifetime; merging them is the memory planner's business)."""
from __future__ import annotations

from ..ir import Block, Module, replace_uses

PURE_SCALAR_PREFIXES = ("arith.",)
PURE_SCALAR_OPS = {"pto.program_id", "pto.num_programs", "tensor.dim"}


def _key(op):
    attrs = tuple(sorted((k, repr(v)) for k, v in op.attrs.items()))
    return (op.name, tuple(v.id for v in op.operands), attrs,
            tuple(str(r.type) for r in op.results))


def pure_scalar(op) -> bool:
    return op.name.startswith(PURE_SCALAR_PREFIXES) or op.name in PURE_SCALAR_OPS


def _cse(block: Block, available: dict, root: Block) -> None:
    """``available`` maps keys to values defined in this block or an enclosing one."""
    scope = dict(available)
    kept = []
    for op in block.ops:
        if pure_scalar(op) and not op.blocks:
            key = _key(op)
            if key in scope:
                replace_uses(root, op.result, scope[key])
                continue
            scope[key] = op.result
        for b in op.blocks:
            _cse(b, scope, root)
        kept.append(op)
    block.ops[:] = kept


def common_subexpression_elimination(module: Module) -> Module:
    _cse(module.kernel.body, {}, module.kernel.body)
    return module
