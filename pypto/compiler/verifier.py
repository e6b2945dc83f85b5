"""Invariants of Tile IR, checked after the frontend and after every pass.

A failure here is a compiler bug, not a user error, so it raises ``InternalError`` with the IR.
"""
from __future__ import annotations

from .errors import InternalError
from .ir import Block, Module, TileType

KNOWN_OPS = {
    "arith.constant", "arith.cast", "arith.cmp", "arith.add", "arith.sub", "arith.mul",
    "arith.div", "arith.floordiv", "arith.mod", "arith.min", "arith.max",
    "pto.program_id", "pto.num_programs", "tensor.dim",
    "tile.load", "tile.store", "tile.full", "tile.binary", "tile.cast", "tile.matmul",
    "tile.mov", "scf.for", "scf.yield",
}


def verify(module: Module, stage: str = "") -> Module:
    fn = module.kernel
    problems: list[str] = []
    defined = set(v.id for v in fn.params)
    placed = module.facts.get("placed", False)
    planned = module.facts.get("planned", False)

    def check_block(block: Block, scope: set, in_loop_types=None):
        scope = set(scope) | {a.id for a in block.args}
        for i, op in enumerate(block.ops):
            where = f"{op.name} at {op.loc}" if op.loc else op.name
            if op.name not in KNOWN_OPS:
                problems.append(f"unknown op {where}")
            for v in op.operands:
                if v.id not in scope:
                    problems.append(f"{where} uses a value that is not defined before it: {v}")
            if op.name == "scf.for":
                body = op.blocks[0]
                inits = op.operands[3:]
                if len(body.args) != 1 + len(inits) or len(op.results) != len(inits):
                    problems.append(f"{where}: iter_args, inits and results do not match")
                if not body.ops or body.ops[-1].name != "scf.yield":
                    problems.append(f"{where}: body does not end in scf.yield")
                else:
                    ytypes = [v.type for v in body.ops[-1].operands]
                    if ytypes != [a.type for a in body.args[1:]] or ytypes != [
                            r.type for r in op.results]:
                        problems.append(f"{where}: yield types {ytypes} differ from iter_args")
                check_block(body, scope)
            elif op.name == "scf.yield" and i != len(block.ops) - 1:
                problems.append(f"{where}: scf.yield must end its block")
            for r in op.results:
                if isinstance(r.type, TileType):
                    if placed and r.type.space is None:
                        problems.append(f"{where}: tile result has no memory space")
                    if planned and r.addr is None:
                        problems.append(f"{where}: tile result has no buffer offset")
                scope.add(r.id)
        return scope

    check_block(fn.body, defined)
    if problems:
        raise InternalError(f"IR verification failed{' after ' + stage if stage else ''}:\n  "
                            + "\n  ".join(problems[:20]), str(module))
    return module
