"""PyPTO: tile kernels for Ascend-style NPUs, written in Python.

``@pypto.jit`` kernels are parsed from their source, compiled through Tile IR and PTO to host
machine code, and run over a grid of simulated AI Cores.
"""
from . import language
from .target import get_target
from .cache import STATS as cache_stats
from .errors import CompilationError, InternalError
from . import testing
from .runtime.device import Context, Tensor, empty, get_backend, set_target, zeros as device_zeros
from .runtime.jit import JITFunction, LaunchWarning, jit
from .runtime.kernel import CompiledKernel, __version__
from .runtime.pool import set_num_threads
from .language import *  # noqa: F401,F403 - the language is also reachable as pypto.X
from .language import __all__ as _language_all
from . import layout
from .tools import profiler as profile
from .layout import int4_tensor
from .tools.profiler import Profiler, disable_profiling, enable_profiling, get_profiling_report

# Public modules by their first names: ``import pypto.debug``, ``from pypto.profile import
# Profiler`` and ``python -m pypto.cli`` keep working although the modules live in their rooms.
_PUBLIC_MODULES = {"profile": "tools.profiler", "memory": "tools.memory", "debug": "tools.debug",
                   "cli": "tools.cli", "sanitizer": "backends.interpreter.sanitizer",
                   "packed_int4": "layout",                       # one tensor-format module
                   "compiler.errors": "errors"}   # docs named NotOnChip's module so


class _PublicModuleFinder:
    """Finds ``pypto.<public name>`` as the module of its room (the same object, imported
    on first use)."""

    def find_spec(self, name, path=None, target=None):
        import importlib.util
        short = name.removeprefix(__name__ + ".")
        if short == name or short not in _PUBLIC_MODULES:
            return None
        return importlib.util.spec_from_loader(name, self)

    def _real(self, name):
        return f"{__name__}.{_PUBLIC_MODULES[name.removeprefix(__name__ + '.')]}"

    def create_module(self, spec):
        import importlib
        return importlib.import_module(self._real(spec.name))

    def exec_module(self, module):
        pass

    def get_code(self, name):          # python -m pypto.cli
        import importlib.util
        real = self._real(name)
        return importlib.util.find_spec(real).loader.get_code(real)

    def is_package(self, name):
        return False


import sys as _sys
_sys.meta_path.insert(0, _PublicModuleFinder())

# The graph API and debug mode are imported on first use (they cost ~17 ms of import time
# that kernel-only programs need not pay).
_GRAPH_NAMES = ("GraphTensor", "Module", "TensorGraph", "call_ascend_c", "compile", "conv2d",
                "get_default_graph", "placeholder", "tile_map", "tile_op")


_SANITIZER = ".backends.interpreter.sanitizer"
_LAZY = {"Config": ".tuning", "autotune": ".tuning", "sanitize": _SANITIZER,
         "load_pto": ".runtime.pto_kernel", "ascend_c_kernel": ".ascend_c",
         "OutputSpec": ".ascend_c", "AscendCCompileError": ".ascend_c",
         "SanitizerWarning": _SANITIZER, "SanitizerError": _SANITIZER,
         "AssemblerVersionWarning": ".backends.ascend.ptoas", "CheckedWindowWarning": ".errors",
         "UnsupportedAssembler": ".compiler.pto.dialect"}


def __getattr__(name):
    import importlib
    if name in ("graph", "ascend_c", "frontend") or name in _PUBLIC_MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _LAZY:                 # loaded on first use, as the graph API is
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    if name in ("register_op", "registered_ops", "torch_ops"):   # torch loads on first use
        module = importlib.import_module(".torch_ops", __name__)
        return module if name == "torch_ops" else getattr(module, name)
    if name in _GRAPH_NAMES:
        value = getattr(importlib.import_module(".graph", __name__), name)
        globals()[name] = value
        return value
    if not name.startswith("_"):      # CANN PyPTO's names (pypto.DT_FP32, pypto.loop, ...)
        from .frontend import names
        try:
            return names.lookup(name)
        except AttributeError:
            pass
    raise AttributeError(f"module 'pypto' has no attribute {name!r}")


__all__ = ["jit", "JITFunction", "CompiledKernel", "LaunchWarning", "CompilationError", "InternalError",
           "language", "get_target", "cache_stats", "__version__", "Context", "Tensor",
           "empty", "get_backend", "set_target", "set_num_threads", "testing", "profile",
           "memory", "layout",
           "Profiler", "enable_profiling", "disable_profiling", "get_profiling_report",
           "graph", "debug", "Config", "autotune", "sanitize", "load_pto", "ascend_c_kernel", "OutputSpec",
           "AscendCCompileError", "SanitizerWarning",
           "SanitizerError", "AssemblerVersionWarning", "CheckedWindowWarning", "UnsupportedAssembler",
           "register_op", "registered_ops", *_GRAPH_NAMES] + list(_language_all)
