"""``pypto.load_pto(path_or_text)``: a hand-written PTO program as a launchable kernel.

The seed's "Ascend PT" level: an engineer takes the ``.pto`` of a hot kernel (any compiled
kernel's ``asm["pto"]``), tunes its instructions by hand, and runs that. The text is read by
PyPTO's reader (the dialect its printer writes), checked by the hazard checker (flags the
edit broke are reported with the racing instructions), compiled by the native backend and
cached under its content hash, and launched like a jit kernel: ``kernel[grid](*args)``, with
the parameters of its ``func.func`` in order (tensors as arrays of exactly the declared
shape and dtype, scalars as numbers; the grid default is one block per core). It runs on the
pto-isa engine too (``engine="pto-isa"`` or ``PYPTO_ENGINE``), and the profiler models it.
"""
from __future__ import annotations

import json
import os
import re
import time

import numpy as np

from .. import cache as cache_mod
from .. import envs
from ..backends.ascend import ptoas
from ..backends.ascend.codegen import generate_llvm_ir
from ..backends.ascend.llvm_driver import compile_to_object, host_identity
from ..backends.ascend.compile import program_metadata
from ..backends.ptoisa.entry import parts_run_together
from ..compiler.pto import Inst, TensorArg, walk_insts
from ..compiler.pto.passes.hazards import check_program
from ..compiler.pto.printer import print_program
from ..compiler.pto.reader import PtoParseError
from ..compiler.pto.reader_ptoas import needs_level2, read
from ..errors import CompilationError, InternalError, SourceLoc
from ..language import dtypes as dt
from ..layout import argument_array
from ..target import get_target
from . import hooks
from . import pool as runtime
from .device import current_target
from .kernel import __version__, check_engine, compiler_hash, load_kernel

REQUIRED = ("kernel.o", "metadata.json")


def load_pto(source, target=None, engine=None) -> "PtoKernel":
    """The kernel of ``source``: a path to a ``.pto`` file or the text itself."""
    if isinstance(source, os.PathLike) or (isinstance(source, str) and "\n" not in source
                                           and source.endswith(".pto")):
        path = os.fspath(source)
        with open(path, encoding="utf-8") as f:
            return PtoKernel(f.read(), path, target, engine)
    if not isinstance(source, str):
        raise TypeError(f"load_pto(source=...) takes a .pto path or its text, got "
                        f"{type(source).__name__}")
    return PtoKernel(source, "<pto text>", target, engine)


class PtoKernel:
    """A loaded ``.pto`` program: ``kernel[grid](*args)``, ``kernel(*args)``, ``program``,
    ``params`` ([(name, "tensor" | "int" | "float", rank)]), ``compiled`` (the
    ``CompiledKernel``, ``asm["pto"]`` the text as read back)."""

    def __init__(self, text: str, path: str, target=None, engine=None):
        self.engine = engine and check_engine(engine, "load_pto")
        try:
            program = read(text, get_target(target) if target else None, current_target)
        except PtoParseError as e:
            raise CompilationError(e.message, SourceLoc(path, e.line or 0, 0,
                                                        source_line=e.text)) from None
        self.cpp = _assemble(text, path)
        check_program(program)
        self.program, self.path, self.text, self.__name__ = program, path, text, program.name
        self.params = [(p.name, "tensor", p.rank) if isinstance(p, TensorArg) else
                       (p.name, "float" if p.dtype.is_floating else "int", 0)
                       for p in program.params if not (isinstance(p, TensorArg) and
                                                       p.workspace)]
        self.compiled = self._compile(print_program(program, ptoas.dialect()), text)

    def _compile(self, pto: str, text: str):
        opt = envs.PTO_OPT_LEVEL.get().upper()
        # the text itself too: its C++ (the pto-isa engine's) is PTOAS's reading of it
        key = cache_mod.digest(("load_pto", pto, text, self.program.target.name, opt,
                                __version__, compiler_hash(), host_identity(),
                                ptoas.identity()))
        files = cache_mod.fetch_or_build(key, REQUIRED, lambda: self._build(pto, opt))
        return load_kernel(files, self.params, key)

    def _build(self, pto: str, opt: str) -> dict:
        program = self.program
        try:
            llir = generate_llvm_ir(program)
        except InternalError as e:
            unknown = re.search(r"no LLVM lowering for PTO instruction (\S+)", str(e))
            if unknown is None:
                raise
            raise _at_line(f"no PTO instruction '{unknown.group(1)}' (on A2/A3, as PyPTO "
                           "knows them: docs/pto.md)", self.text, f"pto.{unknown.group(1)} ",
                           self.path) from None
        obj, optimized = compile_to_object(llir, opt)
        written = sorted({i.outs[0].name for _, body in program.parts
                          for i in walk_insts(body) if isinstance(i, Inst) and i.op == "tstore"
                          and isinstance(i.outs[0], TensorArg)})
        metadata = program_metadata(program, written, opt)
        files = {} if self.cpp is None else {"cpp.txt": self.cpp.encode()}
        return {**files, "kernel.o": obj, "metadata.json": json.dumps(metadata).encode(),
                "pto.txt": pto.encode(), "llir.txt": llir.encode(),
                "llir_opt.txt": optimized.encode()}

    # -- launching ----------------------------------------------------------------------------
    def __getitem__(self, grid):
        return lambda *args, **kwargs: self._launch(grid, args, kwargs)

    def __call__(self, *args, **kwargs):
        return self._launch(None, args, kwargs)

    def _launch(self, grid, args, kwargs) -> None:
        values = self._bind(args, kwargs)
        grid = self._grid(grid)
        engine = self.engine or check_engine(envs.PYPTO_ENGINE.get() or "native",
                                              "PYPTO_ENGINE")
        t0 = time.perf_counter()
        if engine == "pto-isa":
            from ..backends.ptoisa.engine import load  # lazy: pto-isa's engine loads on first use
            simulated = getattr(self, "_simulated", None) or load(self.compiled,
                                                                  self.compiled.cache_key)
            self._simulated = simulated
            simulated.launch(grid, dict(zip((n for n, _, _ in self.params), values)))
            mode = "pto-isa"
        else:
            if parts_run_together(self.text):
                raise ValueError(
                    f"{self.__name__}: its cube and vector parts hand tiles both ways or inside "
                    "a loop, so they must run at once, as the chip's cores do; the native "
                    "engine runs a loaded .pto's parts one after the other (a @pypto.jit "
                    "kernel's own launch interleaves them). Launch it with engine='pto-isa'")
            passed = [id(v) if isinstance(v, np.ndarray) else v for v in values]
            status = runtime.run(self.compiled.entry, grid, tuple(passed))
            if status:
                raise ValueError(f"{self.__name__}: the launch failed with status {status} "
                                 "(2: more blocks than cores for a kernel that syncs blocks; "
                                 "3: its blocks deadlocked)")
            mode = "compiled"
        if hooks.ACTIVE:
            hooks.record_compiled(self.compiled, grid, values, t0, mode)

    def _bind(self, args, kwargs) -> list:
        names = [n for n, _, _ in self.params]
        if len(args) > len(names) or set(kwargs) - set(names):
            raise TypeError(f"{self.__name__}() takes {len(names)} argument(s) "
                            f"({', '.join(names)}), got {len(args)} positional and "
                            f"{sorted(kwargs)} by name")
        given = dict(zip(names, args), **kwargs)
        missing = [n for n in names if n not in given]
        if missing:
            raise TypeError(f"{self.__name__}() is missing {missing}")
        tensors = {p.name: p for p in self.program.params if isinstance(p, TensorArg)}
        return [self._tensor(n, given[n], tensors[n]) if kind == "tensor" else
                (float(given[n]) if kind == "float" else int(given[n]))
                for n, kind, _ in self.params]

    def _tensor(self, name, value, param: TensorArg) -> np.ndarray:
        """The array for ``param``, refused unless it is what the program's constants assume:
        the code reads exactly the declared extents and strides."""
        arr = argument_array(value, f"{self.__name__}(): argument '{name}'")
        if arr is None:
            raise TypeError(f"{self.__name__}(): argument '{name}' must be an array")
        if dt.from_any(arr.dtype) != param.dtype and not (
                param.dtype == dt.uint8 and arr.dtype == np.bool_):
            raise TypeError(f"{self.__name__}(): argument '{name}' is {arr.dtype}, the program "
                            f"declares {param.dtype}")
        dims = tuple(param.dims)
        strides = tuple(s * arr.itemsize if s is not None else None for s in param.strides)
        if arr.ndim != len(dims) or any(d is not None and d != n
                                        for d, n in zip(dims, arr.shape)) or any(
                s is not None and s != t and n != 1       # a stride over one element: unused
                for s, t, n in zip(strides, arr.strides, arr.shape)):
            raise ValueError(f"{self.__name__}(): argument '{name}' has shape {arr.shape} and "
                             f"strides {arr.strides}; the program is written for shape "
                             f"{dims} and element strides {tuple(param.strides)}")
        if name in self.compiled.metadata["written_tensors"] and not arr.flags.writeable:
            raise ValueError(f"{self.__name__}(): argument '{name}' is stored to but is "
                             "read-only")
        return arr

    def _grid(self, grid) -> tuple:
        if grid is None:
            return (self.compiled.metadata["cores"],)
        grid = (grid,) if isinstance(grid, int) else tuple(grid)
        if not 1 <= len(grid) <= 3 or not all(isinstance(g, int) and g >= 0 for g in grid):
            raise ValueError(f"{self.__name__}: grid must be 1 to 3 ints >= 0, got {grid!r}")
        return grid

    def __repr__(self) -> str:
        return f"<pypto.load_pto {self.__name__} from {self.path}: {self.params}>"


def _at_line(message: str, text: str, needle: str, path: str) -> CompilationError:
    """``message`` at the first line of ``text`` holding ``needle``."""
    lines = text.splitlines()
    line = next((i for i, t in enumerate(lines, 1) if needle in t), 0)
    return CompilationError(message, SourceLoc(path, line, 0,
                                               source_line=lines[line - 1] if line else ""))


def _assemble(text: str, path: str):
    """The assembler's C++ for ``text`` when PTOAS is installed (else None); its rejection is
    the user's error, at the line it names."""
    try:
        return ptoas.lower(text, level3=not needs_level2(text))
    except InternalError as e:
        found = re.search(r"\.pto\"?:(\d+):(\d+)\)?: error: (.*)", str(e))
        if found is None:
            raise CompilationError(f"PTOAS rejects it: {str(e).splitlines()[0]}",
                                   SourceLoc(path, 0, 0)) from None
        line, col = int(found.group(1)), int(found.group(2))
        lines = text.splitlines()
        raise CompilationError(f"PTOAS rejects it: {found.group(3)}",
                               SourceLoc(path, line, col - 1, source_line=lines[line - 1]
                                         if 0 < line <= len(lines) else "")) from None
