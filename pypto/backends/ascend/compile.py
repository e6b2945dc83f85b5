"""The Ascend backend's stages after the compiler: PTO text → PTOAS → LLVM IR → object code.

The compiler stops at a PTO program (``compiler.pipeline.build_program``); this module prints
it, has PTOAS check and lower it, generates the host's LLVM IR and compiles it, and returns
every stage's artifact so the cache can keep them and ``compiled.asm`` can show them.
"""
from __future__ import annotations

import time

from ... import envs
from ...compiler.ast_to_ir import build_function
from ...compiler.ir import Module, walk
from ...compiler.passes.persistent import allows_persistent
from ...compiler.pipeline import build_program
from ...compiler.pto.isa import CROSS_CORE_OPS
from ...compiler.pto.passes.hazards import check_program
from ...compiler.pto.program import For, Inst, walk_insts
from ...compiler.pto.printer import print_program
from ...compiler.pto.reader import PtoParseError, parse_program, signature
from ...compiler.source import KernelSource
from ...errors import BufferOverflow, CompilationError, InternalError, SourceLoc
from . import ptoas
from .codegen import generate_llvm_ir
from .entry import has_pointer_entry, scratch_layout
from .llvm_driver import compile_to_object


def _hands_off_in_loops(program) -> bool:
    """Does a cube <-> vector hand-off sit in a loop of the program? In the persistent form
    it would be in a loop nested in the programs' loop, where a hand-off has one workspace
    slot, not a FIFO (memory_space._exchange): flash attention was modelled 1.5x slower at
    8k. A hand-off at the top (a GEMM's vector epilogue) gets the FIFO there, and the cube
    runs the next program's K loop while the vector core finishes this one's epilogue."""
    return any(isinstance(n, For) and any(isinstance(i, Inst) and i.op in CROSS_CORE_OPS
                                          for i in walk_insts(n.body))
               for _, body in program.parts for n in walk_insts(body))


def compile_kernel(source: KernelSource, spec_args: dict, tensor_specs: dict, target,
                   opt_level: str, pto_override: tuple[str, str] | None = None,
                   auto_sync: bool = True, persistent: bool = False) -> tuple[dict, dict]:
    """Returns (asm, metadata). ``asm`` holds text stages and the object code under "obj".
    ``pto_override`` = (path, text): a hand-edited .pto compiled in place of the generated
    program (PYPTO_OVERRIDE_DIR). ``persistent``: the persistent launch form
    (``compiler/passes/persistent.py``), which takes the grid as three more int arguments."""
    t0 = time.perf_counter()

    def make():
        return build_function(source, spec_args, source.node.name)
    fn = make()
    frontend_ir = str(Module(fn, target))
    movable = allows_persistent(fn) and auto_sync and pto_override is None

    def build(fn, stages):
        return build_program(fn, tensor_specs, target, auto_sync,
                             interleave=pto_override is None, persistent=stages, fresh=make)

    stages = 2 if persistent else 0
    try:
        module, program, host = build(fn, stages)
    except BufferOverflow:
        if stages != 2:
            raise
        # the programs' loop double-buffered does not fit: single buffers, on a new function
        # (the passes rewrote the first in place)
        stages = 1
        module, program, host = build(make(), stages)
    fn = module.kernel          # the function built (another when hoisting was undone)
    if pto_override is not None:
        program = override_program(program, *pto_override)
    if pto_override is not None or not auto_sync:
        check_program(program)      # the PTO passes checked the flags they placed
    dialect = ptoas.dialect()
    pto_text = print_program(program, dialect)
    if envs.PYPTO_VERIFY_PTO.get() not in ("", "0"):
        _verify_round_trip(pto_text, dialect)
    cpp = ptoas.lower(pto_text)
    llir = generate_llvm_ir(host or program)
    obj, optimized = compile_to_object(llir, opt_level)
    written = sorted({p.hint for p in fn.params if p.is_tensor and
                      _is_stored(module, p)})
    frontend_ops = {op.name for op in walk(fn.body)}
    metadata = {
        **program_metadata(program, written, opt_level),
        # for the grid-less launch lint (jit.py): indexed by block, unaware of the grid size
        "reads_program_id": "pto.program_id" in frontend_ops,
        "reads_num_programs": "pto.num_programs" in frontend_ops,
        # may a grid larger than the cores run in the persistent form (jit.py)?
        "persistent_ok": movable and not _hands_off_in_loops(program),
        "persistent": stages,       # the programs' loop's num_stages (0: the grid form)
        "compile_seconds": round(time.perf_counter() - t0, 4),
    }
    asm = {"source_ir": frontend_ir, "tile_ir": str(module), "pto": pto_text, "llir": llir,
           "llir_opt": optimized, "obj": obj}
    if cpp is not None:
        asm["cpp"] = cpp
    return asm, metadata


def program_metadata(program, written: list, opt_level: str) -> dict:
    """What a launch needs to know of a compiled PTO program (``compiled.metadata``); jit
    kernels and ``load_pto`` programs alike."""
    target = program.target
    return {
        "name": program.name,
        "target": target.name,
        "kind": program.kind,
        "uses_cube": program.kind != "vector",
        "cores": target.cores_for(program.kind != "vector"),
        "buffer_bytes": program.buffer_bytes,
        "scratch_bytes": scratch_layout(target)[1],
        "entry": f"{program.name}_launch",
        "pointer_entry": has_pointer_entry(program),
        "written_tensors": written,
        "opt_level": opt_level,
    }


def override_program(compiled, path: str, text: str):
    """PYPTO_OVERRIDE_DIR: the hand-edited ``text`` of ``path`` parsed in place of
    ``compiled``. The launch ABI comes from the kernel's signature, so the file must keep the
    name and parameters of this specialisation; anything else is the user's to change."""
    try:
        program = parse_program(text, compiled.target)
    except PtoParseError as e:
        raise CompilationError(e.message, SourceLoc(path, e.line or 0, 0, source_line=e.text,
                                                    function=compiled.name)) from None
    expected = [signature(p) for p in compiled.params]
    found = [signature(p) for p in program.params]
    if program.name != compiled.name or found != expected:
        raise CompilationError(
            f"{path} does not match this specialisation of {compiled.name}: it declares "
            f"{program.name}{found}, the kernel was compiled as {compiled.name}{expected}")
    return program


def _verify_round_trip(text: str, dialect) -> None:
    """PYPTO_VERIFY_PTO: the printed text must read back into a program that prints the same."""
    again = print_program(parse_program(text), dialect)
    if again != text:
        raise InternalError("the printed .pto does not read back identically", text)


def _is_stored(module, param) -> bool:
    """Does the kernel store to the tensor parameter ``param`` (``written_tensors``)?"""
    return any(op.name == "tile.store" and op.operands[0] is param
               for op in walk(module.kernel.body))
