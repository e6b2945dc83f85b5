"""The PTO level: the program form the chip runs (``program``), built from Tile IR
(``lower``), its instruction table (``isa``: pipes, reads and writes), the passes over it
(``passes/``: cube/vector split, double buffering, synchronisation, the hazard checker) and its
text, the PTO-ISA MLIR dialect that PTOAS reads (``printer``, ``reader``)."""
from .program import (LAYOUTS, WORKSPACE, For, If, Inst, Program, Scalar, TensorArg, Tile,
                      While, nested_bodies, view2d, walk_insts)

__all__ = ["LAYOUTS", "WORKSPACE", "For", "If", "Inst", "Program", "Scalar", "TensorArg",
           "Tile", "While", "nested_bodies", "view2d", "walk_insts"]
