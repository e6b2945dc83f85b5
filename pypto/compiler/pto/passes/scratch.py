"""Scratch tiles: the temporary UB tile that some A2/A3 vector instructions need.

PTOAS's ``trowsum``/``trowmax``/``trowmin``/``trowprod``, ``tsel``, ``txor`` and ``ttrans``
take a ``tmp`` operand as big as their source, which the instruction overwrites. Only the
instruction itself touches it, on the V pipe, so every such instruction may share one region:
it is placed above everything the memory planner and double buffering placed, once per tile
type (the types alias the same bytes). The tile rides in ``inst.attrs["tmp"]``, so the host
code, which needs no scratch, never sees it; ``isa.accesses`` counts it as read and written.
"""
from __future__ import annotations

from ...errors import CompilationError
from ..isa import TMP_OPS, tile_extent
from ..program import Inst, Program, Tile, walk_insts


def add_scratch_tiles(program: Program) -> Program:
    target = program.target
    needing = [i for _, body in program.parts for i in walk_insts(body)
               if isinstance(i, Inst) and i.op in TMP_OPS and "tmp" not in i.attrs]
    if not needing:
        return program
    used = max([tile_extent(t, target)[2] for t in program.tiles if t.loc == "vec"] + [0])
    base = -(-used // target.alignment) * target.alignment
    by_type: dict[tuple, Tile] = {}
    for inst in needing:
        like = inst.outs[0] if inst.op == "tsel" else inst.ins[0]
        key = (like.dtype, like.rows, like.cols)
        tmp = by_type.get(key)
        if tmp is None:
            tmp = Tile(f"tmp{len(by_type)}", "vec", like.dtype, like.rows, like.cols, base,
                       like.rows, like.cols)
            by_type[key] = tmp
            program.tiles.append(tmp)
        inst.attrs["tmp"] = tmp
    end = max(tile_extent(t, target)[2] for t in by_type.values())
    if end > target.buffers["vec"]:
        biggest = max(by_type.values(), key=lambda t: tile_extent(t, target)[2])
        raise CompilationError(
            f"the kernel's tiles fill the UB to {used} bytes, and a {biggest.rows}x"
            f"{biggest.cols} {biggest.dtype} reduction, select or transpose needs a scratch "
            f"tile as big as its source on {target.name} (up to {end} bytes of "
            f"{target.buffers['vec']}). Use smaller tiles.")
    program.buffer_bytes["vec"] = max(program.buffer_bytes.get("vec", 0), end)
    return program
