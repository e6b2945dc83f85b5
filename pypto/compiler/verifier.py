"""Invariants of Tile IR, checked after the frontend and after every pass.

A failure here is a compiler bug, not a user error, so it raises ``InternalError`` with the IR.
"""
from __future__ import annotations

from ..errors import InternalError
from .ir import SYNC_OPS, Block, Module, TileType

KNOWN_OPS = {
    "arith.constant", "arith.cast", "arith.cmp", "arith.select",
    *(f"arith.{n}" for n in ("add", "sub", "mul", "div", "floordiv", "mod", "min", "max",
                             "and", "or", "xor", "shl", "shr")),
    "pto.program_id", "pto.num_programs", "tensor.dim",
    "tile.load", "tile.store", "tile.full", "tile.arange", "tile.unary", "tile.binary",
    "tile.where", "tile.cast", "tile.bitcast", "tile.broadcast", "tile.reduce", "tile.cumsum",
    "tile.reshape", "tile.transpose", "tile.slice", "tile.concat", "tile.matmul", "tile.mov",
    "tile.gather", "tile.scatter", "tile.getval", "tile.setval", "tile.sort",
    "tile.load_row", "tile.store_row",     # legalize_indexed: whole rows
    "tile.col_expand", "tile.row_expand",  # expand: a row or column broadcast into an op
    "tile.sort32", "tile.mrgsort", "tile.mrglists", "tile.gather_mask",    # legalize_sort32: the chip's sort
    "scf.for", "scf.if", "scf.while", "scf.yield", "scf.condition",
    *SYNC_OPS, "tensor.workspace", "tile.alloc",
    "debug.breakpoint",     # acts in the interpreter only: no result, so DCE removes it
}
TERMINATORS = ("scf.yield", "scf.condition")


def _check_terminator(block, name, arg_types, result_types, where, problems):
    if not block.ops or block.ops[-1].name != name:
        problems.append(f"{where}: block does not end in {name}")
        return
    types = [v.type for v in block.ops[-1].operands]
    if types != arg_types or (result_types is not None and types != result_types):
        problems.append(f"{where}: {name} types {types} differ from {arg_types}")


def verify(module: Module, stage: str = "") -> Module:
    fn = module.kernel
    problems: list[str] = []
    defined = set(v.id for v in fn.params)
    placed = module.facts.get("placed", False)
    planned = module.facts.get("planned", False)
    unbatched = module.facts.get("unbatched", False)

    def check_block(block: Block, scope: set):
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
                _check_terminator(body, "scf.yield", [a.type for a in body.args[1:]],
                                  [r.type for r in op.results], where, problems)
            elif op.name == "scf.if":
                for blk in op.blocks:
                    _check_terminator(blk, "scf.yield", [r.type for r in op.results], None,
                                      where, problems)
            elif op.name == "scf.while":
                before, after = op.blocks
                types = [v.type for v in op.operands]
                if [a.type for a in before.args] != types or [a.type for a in after.args] != \
                        types or [r.type for r in op.results] != types:
                    problems.append(f"{where}: while arguments and results do not match")
                if not before.ops or before.ops[-1].name != "scf.condition":
                    problems.append(f"{where}: the before region must end in scf.condition")
                _check_terminator(after, "scf.yield", types, None, where, problems)
            elif op.name in TERMINATORS and i != len(block.ops) - 1:
                problems.append(f"{where}: {op.name} must end its block")
            for blk in op.blocks:
                check_block(blk, scope)
            for r in op.results:
                if isinstance(r.type, TileType):
                    if unbatched and len(r.type.shape) > 2:
                        problems.append(f"{where}: a rank-{len(r.type.shape)} tile after "
                                        "unbatching")
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
