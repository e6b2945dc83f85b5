"""The pto-isa engine: a compiled kernel's ``.pto`` run by the vendor's own tile library.

``.pto`` → ``ptoas --pto-level=level3`` → pto-isa C++ + the generated host entry
(``entry.py``) → a shared library built with the CPU simulator's flags against pto-isa's
headers (``-D__CPU_SIM``; the headers and PyPTO's prelude precompiled once per toolchain) →
``pypto_run`` over the grid's blocks on host threads, writing into the caller's arrays.

Libraries are cached on disk like native kernels (``cache/__init__.py``: content-addressed,
atomic, a file lock against duplicate builds) under a key of the native kernel's key (which
holds what made its ``.pto``), the toolchain's identity and the bytes of the prelude and
``entry.py``.
"""
from __future__ import annotations

import concurrent.futures
import ctypes
import functools
import hashlib
import math
import os
import re
import struct
import subprocess
import tempfile
import threading

from ... import envs
from ... import cache as cache_mod
from ...errors import InternalError
from ..ascend import ptoas
from ..ascend.control import stop_error
from ..ascend.host_pool import stop_control
from ...compiler.pto.program import TensorArg
from ...compiler.pto.reader import parse_program
from ...target import get_target
from . import entry, toolchain

PRELUDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.hpp")
LIBRARY = "kernel_ptoisa.so"
BUILD_TIMEOUT_SECONDS = 600
ERROR_BYTES = 1024
STATUS_BLOCK_FAILED = 4
_pch_lock = threading.Lock()


class SimulatorError(RuntimeError):
    """A block failed on pto-isa's CPU simulator (an assertion, an exception, a deadlock)."""


class NotOnSimulator(ValueError):
    """A kernel that pto-isa's CPU simulator cannot run as the chip would (docs/engines.md)."""


def check_simulable(kernel) -> None:
    """What pto-isa's CPU simulator lacks, refused before anything is built. 16/32-bit
    integer column reductions: no such form in the simulator. bfloat16: with C++20 (and clang 19's C++23, which has no ``std::bfloat16_t``) pto-isa's
    CPU simulator defines ``bfloat16_t`` as ``_Float16`` (include/pto/common/type.hpp), so a
    bfloat16 kernel would compute in float16 on bfloat16 bits."""
    pto = kernel.asm["pto"]
    if re.search(r"pto\.tcol(max|min|sum|prod) ins\([^)]*dtype=i(16|32)\b", pto):
        raise NotOnSimulator(
            f"{kernel.metadata['name']}: an int16/int32 column reduction cannot run on the "
            "pto-isa engine: its CPU simulator's TCOLMAX/TCOLMIN/TCOLSUM take no 16- or "
            "32-bit integers (pto-isa include/pto/cpu/TColMax.hpp, TColSum.hpp; the chip's "
            "do, npu/a2a3/TColReduceOps.hpp). Run it on the native engine (engine='native')")
    for line in re.findall(r"pto\.trowsum ins\(.*", pto):
        rows = re.findall(r"rows=(\d+)", line)
        if rows and rows[0] != rows[-1]:
            raise NotOnSimulator(
                f"{kernel.metadata['name']}: a row sum of {rows[0]} rows into a column tile of "
                f"{rows[-1]} cannot run on the pto-isa engine: its CPU simulator's TROWSUM "
                "wants both tiles to have the same rows (pto-isa include/pto/cpu/TRowSum.hpp; "
                "the chip's has no such rule). Run it on the native engine")
    for line in re.findall(r"pto\.tsel ins\(.*", pto):
        widths = {int(w) for d, w in re.findall(r"dtype=(\w+), rows=\d+, cols=\d+, v_row=\S+, "
                                                 r"v_col=(\d+)", line) if d != "ui8"}
        if any(w % 8 for w in widths):
            raise NotOnSimulator(
                f"{kernel.metadata['name']}: a select over {min(widths)} columns cannot run on "
                "the pto-isa engine: its CPU simulator's TSEL reads a row's mask bits right "
                "only when the valid columns are a multiple of 8 (pto-isa "
                "include/pto/cpu/TSel.hpp moves to the next mask row after whole bytes; its "
                "TCMPS writes rows of whole tile width). Run it on the native engine")
    if re.search(r"\bbf16\b", pto):
        raise NotOnSimulator(
            f"{kernel.metadata['name']}: bfloat16 tensors or tiles cannot run on the pto-isa "
            "engine: its CPU simulator's bfloat16_t is float16 (pto-isa "
            "include/pto/common/type.hpp without C++23 <stdfloat>). Run it on the native "
            "engine (engine='native')")


@functools.lru_cache(maxsize=1)
def _prelude_digest() -> str:
    with open(PRELUDE, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _flags(tools: toolchain.Toolchain) -> list[str]:
    return [tools.cxx, *toolchain.CPU_SIM_FLAGS, f"-{_opt_level()}", "-fPIC", "-fvisibility=hidden",
            "-D__assert_fail=pypto_assert_fail", "-isystem", tools.headers,
            # The PCH's key holds the prelude's and the headers' contents, not their mtimes: a
            # fresh checkout, a reinstall or a stash touches them without changing them.
            "-fpch-validate-input-files-content"]


class BuildFailed(InternalError):
    """The C++ compiler rejected a translation unit; ``stderr`` is its whole output (code
    PyPTO generated is an internal error; a user's Ascend C source maps it to their lines)."""

    def __init__(self, message: str, stderr: str = ""):
        super().__init__(message)
        self.stderr = stderr


def _run(cmd: list[str], what: str) -> None:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_SECONDS)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise InternalError(f"pto-isa engine: {what} could not run: {e}") from None
    if done.returncode != 0:
        errors = [ln for ln in done.stderr.splitlines() if "error" in ln]
        raise BuildFailed(f"pto-isa engine: {what} failed: "
                          f"{(errors or [done.stderr.strip()[-800:]])[0]}", done.stderr)


@functools.lru_cache(maxsize=1)
def _private_pch_dir() -> str:
    return tempfile.mkdtemp(prefix="pypto-ptoisa-pch-")       # 0700, unpredictable name


def pch_path(tools: toolchain.Toolchain) -> str:
    """Where the prelude's PCH for this toolchain lives: in the disk cache, or in a private
    directory of this process when the cache is unusable or untrusted."""
    # the prelude's path too: clang's PCH names the header it was built from and refuses to
    # load once that file is gone (another checkout's, deleted since)
    key = cache_mod.digest(("ptoisa-pch", tools.identity(), PRELUDE, _prelude_digest(),
                            _flags(tools)))
    base = os.path.join(cache_mod.default_dir(), "ptoisa-pch")
    try:
        cache_mod.secure_makedirs(cache_mod.default_dir())
        cache_mod.secure_makedirs(base)
    except OSError as e:            # unusable or untrusted: a private directory per process
        if isinstance(e, cache_mod.UntrustedCache):
            cache_mod.warn_untrusted(e)
        base = _private_pch_dir()
    return os.path.join(base, f"{key}.pch")


def precompiled_header(tools: toolchain.Toolchain) -> str:
    """Path of the prelude's PCH for this toolchain, built once (per cache, else per process).
    clang loads a PCH as it would code, so one another user owns or others can write is
    refused like a cache entry and built again in its place."""
    path = pch_path(tools)
    with _pch_lock:
        if _trusted_pch(path):
            return path
        from filelock import FileLock
        lock = FileLock(path + ".lock")
        try:
            lock.acquire()
        except OSError as e:        # a read-only cache: built in this process's own directory
            cache_mod.warn_unwritable(cache_mod.default_dir(), e)
            path = os.path.join(_private_pch_dir(), os.path.basename(path))
            if _trusted_pch(path):
                return path
            lock = FileLock(path + ".lock")
            lock.acquire()
        try:
            if not _trusted_pch(path):
                tmp = f"{path}.{os.getpid()}.tmp"
                _run(_flags(tools) + ["-x", "c++-header", PRELUDE, "-o", tmp],
                     "building the precompiled pto-isa headers")
                os.chmod(tmp, 0o600)           # whatever the umask: only ours to write
                os.replace(tmp, path)          # atomic: a reader never sees half a PCH
        finally:
            lock.release()
    return path


def _trusted_pch(path: str) -> bool:
    """Is there a PCH at ``path`` that only the user can have written (the cache's rule,
    ``cache.check_trusted``)? One that is not is refused with a warning saying why."""
    try:
        cache_mod.check_trusted(path)
    except cache_mod.UntrustedCache as e:
        cache_mod.warn_untrusted(e)
        return False
    except OSError:                            # not built yet
        return False
    return True


def build(cpp: str, tools: toolchain.Toolchain) -> bytes:
    """The shared library of one translation unit."""
    pch = precompiled_header(tools)
    with tempfile.TemporaryDirectory(prefix="pypto-ptoisa-") as tmp:
        src, out = os.path.join(tmp, "kernel.cpp"), os.path.join(tmp, LIBRARY)
        with open(src, "w") as f:
            f.write(cpp)
        _run(_flags(tools) + ["-include-pch", pch, "-shared", src, "-o", out],
             "compiling the kernel against pto-isa's CPU simulator")
        with open(out, "rb") as f:
            return f.read()


class Library:
    """A built shared library, loaded once (``ctypes`` needs a file: a private temporary one,
    unlinked as soon as it is mapped)."""

    def __init__(self, data: bytes):
        fd, path = tempfile.mkstemp(prefix="pypto-ptoisa-", suffix=".so")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            self.cdll = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
        finally:
            os.unlink(path)

    def entry(self, name: str):
        fn = getattr(self.cdll, name)
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                       ctypes.c_int64, ctypes.c_double, ctypes.c_char_p, ctypes.c_int64,
                       ctypes.c_void_p, ctypes.c_int64]
        return fn


MAX_BLOCKS = 2 ** 32 - 1        # pto-isa's block index is a uint32_t


class PtoIsaKernel:
    """One kernel built for pto-isa's CPU simulator, callable like the native one."""

    def __init__(self, library: Library, entry_name: str, plan: list, syncall: bool,
                 cores: int, name: str):
        self.library = library                  # keeps the mapping alive
        self._run = library.entry(entry_name)
        self.plan, self.syncall, self.cores, self.name = plan, syncall, cores, name

    def slots(self, grid: tuple, args: dict) -> ctypes.Array:
        values = []
        for s in self.plan:
            if s.kind == "ptr":
                values.append(args[s.name].__array_interface__["data"][0])
            elif s.kind == "dim":
                values.append(args[s.name].shape[s.index])
            elif s.kind == "stride":
                a = args[s.name]
                values.append(a.strides[s.index] // a.itemsize)
            elif s.kind == "grid":
                values.append(grid[s.index] if s.index < len(grid) else 1)
            elif s.kind == "float":
                values.append(struct.unpack("<q", struct.pack("<d", float(args[s.name])))[0])
            else:
                values.append(int(args[s.name]))
        return (ctypes.c_int64 * max(len(values), 1))(*values)

    def tensors(self, args: dict) -> tuple[ctypes.Array, list[str]]:
        """[first byte, end) of each tensor argument, the only global memory a TLOAD/TSTORE
        may touch (``prelude.hpp``, ``check_window``), and their names."""
        bounds, names = [], []
        for s in self.plan:
            if s.kind == "ptr":
                bounds += _byte_bounds(args[s.name])
                names.append(s.name)
        return (ctypes.c_int64 * max(len(bounds), 1))(*bounds), names

    def launch(self, grid: tuple, args: dict) -> None:
        blocks = math.prod(grid)
        if blocks > MAX_BLOCKS:
            raise ValueError(f"{self.name}: grid {tuple(grid)!r} has {blocks} blocks; pto-isa's "
                             f"CPU simulator numbers blocks with 32 bits (get_block_idx), at "
                             f"most {MAX_BLOCKS}: split the launch, or run it on the native "
                             "engine")
        if self.syncall and blocks > self.cores:
            raise ValueError(f"{self.name}: grid {grid!r} has more blocks than the {self.cores} "
                             "cores; a kernel that uses pl.barrier/pl.wait needs every block "
                             "running at once, so its grid must fit on the cores")
        threads = blocks if self.syncall else min(blocks, _host_threads())
        error = ctypes.create_string_buffer(ERROR_BYTES)
        bounds, names = self.tensors(args)
        control, stop_mask = stop_control()
        status = self._run(self.slots(grid, args), bounds, len(names), blocks, threads,
                           envs.PYPTO_SYNC_TIMEOUT.number(minimum=1), error, ERROR_BYTES,
                           control, stop_mask)
        stopped = stop_error(status, self.name)
        if stopped is not None:
            raise stopped
        if status == STATUS_BLOCK_FAILED:
            text = re.sub(r"tensor #(\d+)", lambda m: f"tensor {names[int(m.group(1))]!r}",
                          error.value.decode(errors="replace"))
            raise SimulatorError(f"{self.name}: {text}")


def _byte_bounds(a) -> list[int]:
    """[first byte, end) of an array's elements, whatever its strides."""
    start = a.__array_interface__["data"][0]
    if a.size == 0:
        return [start, start]
    low = sum((n - 1) * s for n, s in zip(a.shape, a.strides) if s < 0)
    high = sum((n - 1) * s for n, s in zip(a.shape, a.strides) if s > 0)
    return [start + low, start + high + a.itemsize]


def _host_threads() -> int:
    configured = envs.PYPTO_NUM_THREADS.get()
    return max(1, int(configured)) if configured.isdigit() else (os.cpu_count() or 1)


def load(kernel, native_key: str) -> PtoIsaKernel:
    """The pto-isa build of a compiled (native) kernel, from the cache or built now."""
    return load_batch([kernel], [native_key])[0]


def load_batch(kernels: list, native_keys: list[str], jobs: int = 1) -> list[PtoIsaKernel]:
    """Several kernels built into ``jobs`` libraries, built side by side: pto-isa's headers
    are parsed once per library (the differential tests build hundreds of kernels this way)."""
    tools = toolchain.find()
    for kernel in kernels:
        check_simulable(kernel)
    jobs = max(1, min(jobs, len(kernels)))
    chunks = [list(range(len(kernels)))[j::jobs] for j in range(jobs)]
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:    # each waits on a clang
        libraries = list(pool.map(lambda c: _library([kernels[n] for n in c],
                                                     [native_keys[n] for n in c], tools),
                                  chunks))
    out = [None] * len(kernels)
    for chunk, built in zip(chunks, libraries):
        for n, kernel in zip(chunk, built):
            out[n] = kernel
    return out


@functools.lru_cache(maxsize=1)
def _entry_digest() -> str:
    """entry.py writes the host entry: a library built by another version of it may take
    other arguments."""
    with open(entry.__file__, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _library(kernels: list, native_keys: list[str], tools) -> list[PtoIsaKernel]:
    key = cache_mod.digest(("ptoisa", tuple(native_keys), tools.identity(), _prelude_digest(),
                            _entry_digest(), _opt_level()))
    files = cache_mod.fetch_or_build(key, (LIBRARY, "kernel.cpp"),
                                     lambda: _compile(kernels, tools), record=False)
    library = Library(files[LIBRARY])
    cpp = files["kernel.cpp"].decode()
    out = []
    for n, kernel in enumerate(kernels):
        _, plan = _signature(kernel, _namespace_text(cpp, n))
        target = get_target(kernel.metadata["target"])
        out.append(PtoIsaKernel(library, f"pypto_run_{n}", plan,
                                "ffts_mode = 0" in kernel.asm["pto"],
                                target.cores_for(kernel.metadata["uses_cube"]),
                                kernel.metadata["name"]))
    return out


def _opt_level() -> str:
    level = envs.PYPTO_PTOISA_OPT.get().upper()
    if level not in ("O0", "O1", "O2", "O3"):
        raise ValueError(f"PYPTO_PTOISA_OPT must be O0, O1, O2 or O3, got {level!r}")
    return level


def _namespace_text(cpp: str, n: int) -> str:
    start = cpp.index(f"namespace pypto_kernel_{n} {{")
    return cpp[start:cpp.index(f"}}  // namespace pypto_kernel_{n}", start)]


def _signature(kernel, cpp: str) -> tuple[list, list]:
    """The kernel's functions (ptoas's C++ types) and the argument slots Python fills."""
    funcs = entry.functions(kernel.asm["pto"], cpp)
    scalars = {n: kind for n, kind, _ in kernel.runtime_params if kind != "tensor"}
    return funcs, entry.slot_plan(funcs, scalars)


def assemble(kernel, tools: toolchain.Toolchain) -> str:
    """The kernel's pto-isa C++ (``asm["cpp"]``), lowered by ``ptoas`` now if the compile did
    not (no assembler configured then)."""
    if "cpp" not in kernel.asm:
        kernel.asm["cpp"] = ptoas.lower(kernel.asm["pto"], tools.ptoas)
    return kernel.asm["cpp"]


def _workspace_slots(kernel, target) -> dict:
    """Each GM workspace parameter's bytes per block, as the ``.pto`` views it (a slot per
    block: ``print_windows.workspace_view``)."""
    program = parse_program(kernel.asm["pto"], target)
    return {p.name: p.dims[0] * p.dims[1] * p.dtype.itemsize for p in program.params
            if isinstance(p, TensorArg) and p.workspace}


def _compile(kernels: list, tools) -> dict:
    sources = []
    for n, kernel in enumerate(kernels):
        cpp = assemble(kernel, tools)
        funcs, plan = _signature(kernel, cpp)
        target = get_target(kernel.metadata["target"])
        sources.append(entry.source(cpp, funcs, plan, _workspace_slots(kernel, target),
                                    f"pypto_kernel_{n}", f"pypto_run_{n}",
                                    entry.parts_run_together(kernel.asm["pto"])))
    source = "\n".join(sources)             # one translation unit: the headers parsed once
    return {LIBRARY: build(source, tools), "kernel.cpp": source.encode()}
