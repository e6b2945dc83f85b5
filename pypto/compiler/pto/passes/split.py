"""The cube/vector split: a kernel that feeds a matmul result into vector work becomes two
programs, one per kind of core, as on the real 910B.

Memory-space inference has already routed each such result through global memory (a store
from L0C to a GM workspace, a cross-core flag, a load into UB). Here every instruction goes to
the part whose core owns its buffers: L1/L0A/L0B/L0C work to the cube (AIC) part, UB work to the
vector (AIV) part; scalar work and control flow are copied into both, so each part is a
complete program. On the host a block runs the cube part, then the vector part, when the cube
only hands data to the vector part at the top level; a kernel whose hand-offs go both ways or
happen inside a loop (flash attention: S to the vector core, P back to the cube, every
iteration) runs as one interleaved program on the host instead (``interleaved_copy``): the
unsplit instructions in program order, which meets every flag in the order it is set.
"""
from __future__ import annotations

from dataclasses import replace

from ....errors import CompilationError
from ..isa import is_scalar
from ..program import (For, If, Inst, Program, TensorArg, Tile, While, nested_bodies,
                  walk_insts)

CUBE_LOCS = ("mat", "left", "right", "acc")


def side(inst: Inst) -> str:
    """"cube", "vector" or "both" (scalar work)."""
    if is_scalar(inst):
        return "both"
    if inst.op in ("sync.set", "sync.wait"):
        return inst.attrs.get("_side", "cube" if inst.op == "sync.set" else "vector")
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
    """User tensors (not the workspace, which the flags order) that ``op`` instructions
    name in ``field``."""
    return {x.name for n in walk_insts(body) if isinstance(n, Inst) and n.op == op
            for x in getattr(n, field) if isinstance(x, TensorArg) and not x.workspace}


def _needs_interleaving(program: Program) -> bool:
    """A hand-off to the cube, or one inside a loop or branch: running the cube part to its
    end before the vector part would wait forever (or overwrite a workspace slot the vector
    part has not read yet)."""
    top = {id(n) for n in program.body}
    return any(isinstance(n, Inst) and n.op == "sync.set" and n.attrs.get("_side") and
               (n.attrs["_side"] == "vector" or id(n) not in top)
               for n in walk_insts(program.body))


def _clone(body: list) -> list:
    """A copy of ``body`` whose instructions and loops later passes may change alone; tiles,
    scalars and tensors are shared."""
    out = []
    for n in body:
        if isinstance(n, Inst):
            out.append(replace(n, ins=list(n.ins), outs=list(n.outs), attrs=dict(n.attrs)))
        elif isinstance(n, For):
            out.append(replace(n, body=_clone(n.body)))
        elif isinstance(n, If):
            out.append(replace(n, then_body=_clone(n.then_body),
                               else_body=_clone(n.else_body)))
        else:
            out.append(replace(n, before_body=_clone(n.before_body),
                               after_body=_clone(n.after_body)))
    return out


def interleaved_copy(program: Program) -> Program | None:
    """The program the host runs for a kernel whose parts exchange data both ways or inside
    loops (see the module docstring), taken before the split; None for every other kernel.
    It is a "mixed" program with an empty vector part, so the host treats its cross-core
    flags as the no-ops they are in program order."""
    if program.kind != "cube" or not _needs_interleaving(program):
        return None
    # its own tile list and buffer sizes: the passes it gets after the program's (double
    # buffering adds pong tiles, counted from 0 again) must not add to the program's
    return replace(program, kind="mixed", body=_clone(program.body), vector_body=[],
                   tiles=list(program.tiles), buffer_bytes=dict(program.buffer_bytes))


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

