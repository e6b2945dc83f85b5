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

from .errors import CompilationError
from .pipes import is_scalar
from .pto import (For, If, Inst, Program, TensorArg, Tile, While, nested_bodies,
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
    out = []
    for n in body:
        if isinstance(n, For):
            out.append(For(n.iv, n.lb, n.ub, n.step, n.inits, n.iter_args, n.results,
                           _project(n.body, part), n.yields, n.stages))
        elif isinstance(n, If):
            out.append(If(n.cond, _project(n.then_body, part), _project(n.else_body, part),
                          n.results, n.then_yields, n.else_yields))
        elif isinstance(n, While):
            out.append(While(n.inits, n.before_args, _project(n.before_body, part), n.cond,
                             n.forwarded, n.after_args, _project(n.after_body, part), n.yields,
                             n.results))
        elif side(n) in ("both", part):
            out.append(n)
        if nested_bodies(out[-1] if out else None) and _only_scalars(out[-1]):
            out.pop()
    return out


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

