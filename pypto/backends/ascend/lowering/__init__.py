"""Lowering rules from PTO instructions to LLVM IR, one module per hardware unit. Each module
exports ``RULES``: PTO opcode → ``rule(codegen, inst)``."""
from . import broadcast, crosscore, cube, memory, scalar, sort, vector

RULES = {**scalar.RULES, **memory.RULES, **vector.RULES, **broadcast.RULES, **cube.RULES,
         **crosscore.RULES, **sort.RULES}
