"""The PTO passes in the order they run, as a table like the Tile IR's (``compiler/passes``).

Each pass is ``Program -> Program``; the verifier (``pto/verifier.py``) runs after lowering and
after each pass, ``PYPTO_DUMP_IR=1`` prints the program's text after each, and the hazard
checker (``hazards``) runs from the sync pass on. ``place_tiles`` is no pipeline pass: it
places the tiles of ``.pto`` text read without addresses (``reader_ptoas``).
"""
from __future__ import annotations

import functools
import sys

from .... import envs
from ..printer import print_program
from ..program import Program
from ..verifier import verify_program
from .acc_init import init_accumulators
from .cube_chunks import chunk_matmuls
from .double_buffer import double_buffer
from .empty_windows import fold_empty_windows
from .fillpad import pad_loads
from .group_reduce import group_reduce_rows
from .hazards import check_program
from .run_ahead import run_ahead
from .split import interleaved_copy, split_cube_vector
from .split_rows import split_rows
from .sync import insert_sync

PTO_PASSES = (
    ("fold-empty-windows", fold_empty_windows),     # windows outside the tensor: no move
    ("split", split_cube_vector),                   # cube and vector parts
    ("cube-chunks", chunk_matmuls),                 # matmuls in L0-sized pieces
    ("split-rows", split_rows),                     # the vector part on both AIVs
    ("group-reduce", group_reduce_rows),            # row reductions in fast row chunks
    ("run-ahead", run_ahead),                       # the cube's next S before this P V
    ("double-buffer", double_buffer),               # num_stages=2 loads one iteration ahead
    ("fold-empty-prefetches", fold_empty_windows),  # a prologue's window past a 0 extent
    ("acc-init", init_accumulators),                # accumulators zeroed by the cube
    ("fillpad", pad_loads),                         # a load's padding
    ("sync", insert_sync),                          # flags between pipes
)

# A kernel that places its own flags (``auto_sync=False``): no sync pass, no reordering or
# sharing of its work (its flags name its order), and the fills that fillpad puts before UB loads are ordered
# by a barrier, since no flag will be.
SELF_SYNCED_PASSES = tuple((name, functools.partial(pad_loads, auto_sync=False)
                            if name == "fillpad" else fn)
                           for name, fn in PTO_PASSES
                           if name not in ("sync", "split-rows", "group-reduce", "run-ahead",
                                           "cube-chunks"))

# The host's interleaved copy of a program whose parts hand data both ways or inside loops
# (``split.interleaved_copy``) is taken just before the split and gets these passes after the
# program has had all of its own; it meets every flag in program order, so it is neither split
# nor synced.
HOST_COPY_BEFORE = "split"
HOST_PASSES = ("double-buffer", "acc-init", "fillpad")

# Before the sync pass a program has only the flags the frontend placed (cross-core hand-offs,
# a kernel's own), so the hazard checker holds from that pass on. A self-synced kernel is
# checked by the compile driver, after a PYPTO_OVERRIDE_DIR program has replaced it.
HAZARD_FREE_FROM = "sync"


def run_pto_passes(program: Program, passes=PTO_PASSES,
                   interleave: bool = True) -> tuple[Program, Program | None]:
    """``program`` (just lowered) through ``passes``: (the program, the host's interleaved
    copy or None). ``interleave=False``: no copy (a PYPTO_OVERRIDE_DIR program replaces it)."""
    dump = envs.PYPTO_DUMP_IR.get() not in ("", "0")
    _after("lowering", program, dump)
    host, hazard_free = None, False
    for name, fn in passes:
        if name == HOST_COPY_BEFORE and interleave:
            host = interleaved_copy(program)
        program = fn(program)
        hazard_free = hazard_free or name == HAZARD_FREE_FROM
        _after(name, program, dump, hazard_free)
    if host is not None:
        for name, fn in passes:
            if name in HOST_PASSES:
                host = fn(host)
                _after(f"{name} (host copy)", host, dump)
    return program, host


def _after(stage: str, program: Program, dump: bool, hazard_free: bool = False) -> None:
    verify_program(program, stage)
    if hazard_free:
        check_program(program)
    if dump:
        print(f"// ----- after {stage} -----\n{print_program(program)}", end="",
              file=sys.stderr)
