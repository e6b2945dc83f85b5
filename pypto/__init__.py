"""PyPTO: tile kernels for Ascend-style NPUs, written in Python.

``@pypto.jit`` kernels are parsed from their source, compiled through Tile IR and PTO to host
machine code, and run over a grid of simulated AI Cores.
"""
from . import language
from .backends.ascend.targets import get_target
from .compiler.cache import STATS as cache_stats
from .compiler.errors import CompilationError, InternalError
from . import testing
from .device import Context, Tensor, empty, get_backend, set_target, zeros as device_zeros
from .jit import CompiledKernel, JITFunction, LaunchWarning, __version__, jit
from .runtime import set_num_threads
from .language import *  # noqa: F401,F403 - the language is also reachable as pypto.X
from .language import __all__ as _language_all
from . import layout, memory, packed_int4, profile
from .packed_int4 import int4_tensor
from .profile import Profiler, disable_profiling, enable_profiling, get_profiling_report

# The graph API and debug mode are imported on first use (they cost ~17 ms of import time
# that kernel-only programs need not pay).
_GRAPH_NAMES = ("GraphTensor", "Module", "TensorGraph", "call_ascend_c", "compile", "conv2d",
                "get_default_graph", "placeholder", "tile_map", "tile_op")


_LAZY = {"Config": ".tuning", "autotune": ".tuning", "sanitize": ".sanitizer",
         "load_pto": ".pto_kernel", "ascend_c_kernel": ".ascend_c", "OutputSpec": ".ascend_c",
         "AscendCCompileError": ".ascend_c",
         "SanitizerWarning": ".sanitizer", "SanitizerError": ".sanitizer",
         "AssemblerVersionWarning": ".backends.ascend.ptoas",
         "UnsupportedAssembler": ".compiler.pto.dialect"}


def __getattr__(name):
    import importlib
    if name in ("graph", "debug", "ascend_c", "frontend"):
        return importlib.import_module(f".{name}", __name__)
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
           "SanitizerError", "AssemblerVersionWarning", "UnsupportedAssembler",
           "register_op", "registered_ops", *_GRAPH_NAMES] + list(_language_all)
