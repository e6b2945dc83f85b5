"""The PTO level: the program form the chip runs (``program``), built from Tile IR
(``lower``), its instruction table (``isa``: pipes, reads and writes), the passes over it in
their order (``passes/``: cube/vector split, double buffering, synchronisation, the hazard
checker; ``verifier`` after each) and its text, the PTO-ISA MLIR dialect that PTOAS reads:
``spelling`` (the vocabulary both directions share), ``dialect`` (what each PTOAS version
spells differently), ``printer`` with ``print_windows`` and ``print_views``, ``reader`` with
``read_scalars`` and ``read_tiles``, and ``reader_ptoas`` for text PyPTO did not print."""
from .program import (LAYOUTS, WORKSPACE, For, If, Inst, Program, Scalar, TensorArg, Tile,
                      While, nested_bodies, view2d, walk_insts)

__all__ = ["LAYOUTS", "WORKSPACE", "For", "If", "Inst", "Program", "Scalar", "TensorArg",
           "Tile", "While", "nested_bodies", "view2d", "walk_insts"]
