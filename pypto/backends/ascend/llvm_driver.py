"""llvmlite: LLVM IR text → verified, optimised object code for the host CPU → callable.

One TargetMachine per process for emitting objects; loading uses one long-lived MCJIT engine
per object (an engine owns its TargetMachine, and reusing a TargetMachine after its engine is
freed crashed the process on this host), kept alive with the kernel.
"""
from __future__ import annotations

import ctypes
import threading
import weakref

import llvmlite
import llvmlite.binding as llvm

_lock = threading.Lock()
_state: dict = {}

OPT_LEVELS = {"O0": 0, "O1": 1, "O2": 2, "O3": 3}


def _init():
    if not _state:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _state["cpu"] = llvm.get_host_cpu_name()
        _state["features"] = llvm.get_host_cpu_features().flatten()
        _state["target"] = llvm.Target.from_default_triple()
    return _state


def host_identity() -> tuple:
    """What the generated code depends on besides our own sources (part of the cache key)."""
    s = _init()
    return (llvmlite.__version__, llvm.llvm_version_info, llvm.get_process_triple(), s["cpu"],
            s["features"])


def host_has(feature: str) -> bool:
    """Does the host CPU have ``feature`` (LLVM's name, e.g. "avx512f")? Lowerings that pick
    an instruction only some hosts have ask this; the features are in the cache key."""
    s = _init()
    if "feature_set" not in s:
        s["feature_set"] = frozenset(s["features"].split(","))
    return f"+{feature}" in s["feature_set"]


def _target_machine(opt: int):
    """The large code model: MCJIT places an object's sections, and resolves the symbols it
    calls, wherever the process has room, and a 32-bit PC-relative reference across more
    than 2 GiB aborts the process in RuntimeDyld (tests/backends/ascend/test_object_code)."""
    s = _init()
    return s["target"].create_target_machine(cpu=s["cpu"], features=s["features"], opt=opt,
                                             reloc="static", codemodel="large")


def compile_to_object(llvm_ir: str, opt_level: str = "O3") -> tuple[bytes, str]:
    """Returns the object code and the optimised IR text."""
    opt = OPT_LEVELS.get(opt_level.upper())
    if opt is None:
        raise ValueError(f"PTO_OPT_LEVEL must be one of O0, O1, O2, O3, got {opt_level!r}")
    with _lock:
        tm = _state.get(("tm", opt)) or _target_machine(opt)
        _state[("tm", opt)] = tm
        mod = llvm.parse_assembly(llvm_ir)
        mod.triple = tm.triple
        mod.data_layout = str(tm.target_data)
        mod.verify()
        if opt > 0:
            pto = llvm.create_pipeline_tuning_options(speed_level=opt)
            pto.loop_vectorization = True
            pto.slp_vectorization = True
            pto.loop_unrolling = True
            pb = llvm.create_pass_builder(tm, pto)
            pb.getModulePassManager().run(mod, pb)
        return tm.emit_object(mod), str(mod)


class LoadedObject:
    """An object file linked into this process; ``address(name)`` gives a function pointer."""

    def __init__(self, obj: bytes):
        with _lock:
            _init()
            self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""),
                                                      _target_machine(0))
            self._engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
            self._engine.finalize_object()
            _loaded.add(self)

    def global_address(self, name: str) -> int:
        """The address of the global variable ``name``."""
        addr = self._engine.get_global_value_address(name)
        if not addr:
            raise KeyError(f"global {name} not found in the object")
        return addr

    def address(self, name: str) -> int:
        addr = self._engine.get_function_address(name)
        if not addr:
            raise KeyError(f"symbol {name} not found in the kernel object")
        return addr


_loaded: "weakref.WeakSet[LoadedObject]" = weakref.WeakSet()


def keep_all_loaded() -> None:
    """Never free the code loaded so far (called at exit: a thread that entered a kernel's
    code just before the interpreter began to exit must not find it unmapped)."""
    for obj in list(_loaded):
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))
