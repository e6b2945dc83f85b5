"""A compiled kernel and what names it in the caches: its object code loaded and its entries
typed (``CompiledKernel``), rebuilt from the cached files (``load_kernel``), and the parts of
every cache key that say which compiler built it (``__version__``, ``compiler_hash``).
``@pypto.jit`` (``jit.py``) and ``pypto.load_pto`` (``pto_kernel.py``) both make them.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os

from .. import envs
from ..backends.ascend.llvm_driver import LoadedObject
from ..errors import PACKAGE
from . import pool as runtime

__version__ = "0.1.0"
REQUIRED_FILES = ("kernel.o", "metadata.json")


@functools.lru_cache(maxsize=1)
def compiler_hash() -> str:
    """Hash of PyPTO's own sources (the whole package): any change to the compiler invalidates
    cached kernels."""
    root = PACKAGE.rstrip(os.sep)
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in sorted(os.walk(root)):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                h.update(os.path.relpath(path, root).encode())
                with open(path, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


ENGINES = ("native", "pto-isa")


def check_engine(engine, where: str) -> str:
    """``engine`` if it is one of ``ENGINES``, else a ValueError that says ``where``."""
    if engine not in ENGINES:
        raise ValueError(f"{where}: engine must be one of {', '.join(map(repr, ENGINES))}, "
                         f"got {engine!r}")
    return engine


def pto_override(name: str):
    """(path, text, sha256) of ``$PYPTO_OVERRIDE_DIR/<name>.pto`` if that file exists, else
    None. The hash joins both cache keys, so an edited file is compiled again; it is read
    when a kernel is looked up (first call of a specialisation, ``compile``), not on warm
    launches."""
    directory = envs.PYPTO_OVERRIDE_DIR.get()
    if not directory:
        return None
    if not os.path.isdir(directory):
        raise ValueError(f"PYPTO_OVERRIDE_DIR={directory!r} is not a directory: point it at "
                         f"the folder that holds the hand-edited <kernel name>.pto files, or "
                         f"unset it")
    path = os.path.join(directory, f"{name}.pto")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    return path, data.decode("utf-8"), hashlib.sha256(data).hexdigest()


class CompiledKernel:
    """A kernel built for one specialisation: every stage's text in ``asm``, object code in
    ``asm["obj"]``, and what it was built for in ``metadata``. ``reads``: the module
    globals its compile folded (``dependencies.Read``), rechecked by its warm callers."""

    reads = ()

    def __init__(self, asm: dict, metadata: dict, runtime_params: list):
        self.asm = asm
        self.metadata = metadata
        self.runtime_params = runtime_params       # [(name, kind, rank)]
        runtime.pool()             # kernels link against the pool's launch routine
        runtime.interruptible()
        self._object = LoadedObject(asm["obj"])
        ctypes_params = [ctypes.c_double if kind == "float" else ctypes.c_int64
                         for _, kind, _ in runtime_params]
        signature = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64,
                                     ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                     ctypes.c_void_p, *ctypes_params)
        self.entry = signature(self._object.address(f"{metadata['name']}_py"))
        self.pointer_entry = signature(self._object.address(f"{metadata['name']}_ptr")) \
            if metadata.get("pointer_entry") else None
        # blocks lo..hi-1 on the calling thread (codegen._range_function): the Execution
        # Graph's runtime (graph/mpmd_run.py); absent for kernels whose blocks sync
        try:
            address = self._object.address(f"{metadata['name']}_range")
        except KeyError:
            self.range_entry = None
        else:
            self.range_entry = ctypes.CFUNCTYPE(
                ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, *ctypes_params)(address)


def load_kernel(files: dict, runtime_params, key: str) -> CompiledKernel:
    """The kernel of a cache entry's ``files`` (``REQUIRED_FILES`` and the stages' texts),
    loaded; ``key`` is the entry's."""
    metadata = json.loads(files["metadata.json"])
    asm = {name[:-4]: data.decode() for name, data in files.items() if name.endswith(".txt")}
    asm["obj"] = files["kernel.o"]
    kernel = CompiledKernel(asm, metadata, runtime_params)
    kernel.cache_key = key            # the pto-isa engine's key extends it
    return kernel
