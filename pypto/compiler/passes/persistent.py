"""The persistent launch form of a grid kernel: one block per core, each running the grid's
programs ``core, core + cores, ...`` back to back.

A grid with more programs than cores pays the chip's block dispatch once per program
(``CostModel.block_dispatch_cycles``, 2000 cycles fitted to boards); the persistent form pays
it once per core and runs the programs as iterations of a loop. It is the program a launch of
a grid larger than the cores stands for on the chip (``runtime/jit.py``: a profile records
it, the cycle model reads it; the host runs the grid form) when the kernel allows it: no
cross-block synchronisation (a barrier needs every program running at once), the compiler
placing the flags, and not a cube + vector kernel (whose hand-offs would move into the loop).

The rewrite: the grid's extents become three scalar parameters (``GRID_PARAMS``), the body
is wrapped in ``for v in range(program_id(0), g0 * g1 * g2, num_programs(0))`` and every
``program_id(k)`` / ``num_programs(k)`` reads the program's id in the grid (``v`` decoded,
axis 0 fastest, as the launch numbers blocks) / the grid's extent ``g_k``. The loop is
double-buffered when that fits the buffers (``backends/ascend/compile.py``): the next
program's loads run while this one computes and stores, which the cycle model shows paying on
streaming kernels (vector add fp32 64 M: 564 -> 475 us; row softmax 8192 x 4096: 300 -> 222).
"""
from __future__ import annotations

from ...language import dtypes as dt
from ..ir import CROSS_BLOCK_OPS, GRID_PARAMS, Block, Module, Op, ScalarType, Value, walk

INDEX = ScalarType(dt.int64)


def allows_persistent(fn) -> bool:
    """Can this frontend function run persistent? Not when its programs meet or signal each
    other (they must all run at once)."""
    return not any(op.name in CROSS_BLOCK_OPS for op in walk(fn.body))


def persistent_grid(module: Module) -> Module:
    """The pipeline's first pass: the rewrite above when ``module.facts["persistent"]`` (the
    loop's ``num_stages``: 2 prefetches the next program's loads while this one computes)."""
    stages = module.facts.get("persistent")
    if stages:
        make_persistent(module.kernel, stages)
    return module


def make_persistent(fn, stages: int = 1) -> None:
    """``fn`` rewritten in place: the grid's extents appended to its parameters, its body the
    programs' loop (``stages``: its num_stages)."""
    extents = [Value(INDEX, name) for name in GRID_PARAMS]
    fn.params.extend(extents)
    head: list = []

    def emit(ops, name, operands, attrs=None) -> Value:
        op = Op(name, operands, [INDEX], attrs)
        ops.append(op)
        return op.result

    core = emit(head, "pto.program_id", [], {"axis": 0})
    cores = emit(head, "pto.num_programs", [], {"axis": 0})
    plane = emit(head, "arith.mul", [extents[0], extents[1]])
    total = emit(head, "arith.mul", [plane, extents[2]])
    program = Value(INDEX, "program")
    ids: list = []
    # past the last program (the double-buffered loop's prefetch of the round after its
    # last) pid0 runs past the grid, so that window lies past the data and is clamped away
    # instead of wrapping round to a program's real data
    past = emit(ids, "arith.mul", [emit(ids, "arith.floordiv", [program, total]), extents[0]])
    pid0 = emit(ids, "arith.add", [emit(ids, "arith.mod", [program, extents[0]]), past])
    row = emit(ids, "arith.floordiv", [program, extents[0]])
    pid1 = emit(ids, "arith.mod", [row, extents[1]])
    pid2 = emit(ids, "arith.floordiv", [program, plane])
    body = Block([program], ids + fn.body.ops)
    reads = {"pto.program_id": (pid0, pid1, pid2), "pto.num_programs": extents}
    new = {op.result: reads[op.name][op.attrs.get("axis", 0)] for op in walk(body)
           if op.name in reads}
    for op in walk(body):
        op.operands = [new.get(v, v) for v in op.operands]
    body.ops.append(Op("scf.yield", []))
    loop = Op("scf.for", [core, total, cores], [], {"num_stages": 2} if stages == 2 else None,
              [body])
    fn.body.ops = head + [loop]
