"""The cube/vector split: a kernel that feeds a matmul result into vector work becomes two
programs, one per kind of core, as on the real 910B.

Memory-space inference has already routed each such result through global memory (a store
from L0C to a GM workspace, a cross-core flag, a load into UB). Here every instruction goes to
the part whose core owns its buffers: L1/L0A/L0B/L0C work to the cube (AIC) part, UB work to the
vector (AIV) part; scalar work and control flow are copied into both, so each part is a
complete program. The cube part runs first on the host (it only ever hands data to the vector
part, which waits for the flag), which is why the workspace exchange is limited to the top
level of the kernel.
"""
from __future__ import annotations

from dataclasses import replace

from ...errors import CompilationError
from ..isa import is_scalar
from ..program import (For, If, Inst, Program, TensorArg, Tile, While, nested_bodies,
                  walk_insts)

CUBE_LOCS = ("mat", "left", "right", "acc")


def side(inst: Inst) -> str:
    """"cube", "vector" or "both" (scalar work)."""
    if is_scalar(inst):
        return "both"
    if inst.op == "sync.set":
        return "cube"
    if inst.op == "sync.wait":
        return "vector"
    tiles = [x for x in inst.ins + inst.outs if isinstance(x, Tile)]
    return "cube" if any(t.loc in CUBE_LOCS for t in tiles) else "vector"


def _only_scalars(node) -> bool:
    """A loop or branch with no results and no tile work is dead in this part."""
    return not getattr(node, "results", None) and all(
        isinstance(n, Inst) and is_scalar(n) for b in nested_bodies(node)
        for n in walk_insts(b))


def _project(body: list, part: str) -> list:
    """The instructions of ``body`` that ``part`` runs; loops and branches keep their scalars
    and results, and disappear when nothing else of theirs is left."""
    out = []
    for n in body:
        if isinstance(n, (For, If, While)):
            n = _project_node(n, part)
            if not _only_scalars(n):
                out.append(n)
        elif side(n) in ("both", part):
            out.append(n)
    return out


def _project_node(n, part: str):
    if isinstance(n, For):
        return replace(n, body=_project(n.body, part))
    if isinstance(n, If):
        return replace(n, then_body=_project(n.then_body, part),
                       else_body=_project(n.else_body, part))
    return replace(n, before_body=_project(n.before_body, part),
                   after_body=_project(n.after_body, part))


def _tensors(body: list, op: str, field: str) -> set[str]:
    return {x.name for n in walk_insts(body) if isinstance(n, Inst) and n.op == op
            for x in getattr(n, field) if isinstance(x, TensorArg)}


def split_cube_vector(program: Program) -> Program:
    if program.kind != "cube":
        return program
    vector = _project(program.body, "vector")
    if not any(isinstance(n, Inst) and side(n) == "vector" for n in walk_insts(vector)):
        return program
    cube = _project(program.body, "cube")
    clash = _tensors(vector, "tstore", "outs") & _tensors(cube, "tload", "ins")
    if clash:
        raise CompilationError(
            f"the vector part of this kernel stores to '{sorted(clash)[0]}', which its cube part "
            "loads: the cube part would need to wait for the vector cores, and only "
            "cube → vector exchanges are supported")
    program.kind, program.body, program.vector_body = "mixed", cube, vector
    return program

