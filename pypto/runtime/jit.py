"""``@pypto.jit``: bind a call's arguments, find or build the specialised kernel, launch it.

Lookup order: the in-memory table (keyed by the specialisation, no disk I/O), then the disk
cache (keyed by the full content hash of ARCHITECTURE.md's contract), then the compiler, under
a file lock so concurrent processes compile a key once.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import json
import math
import sys
import threading
import time
import warnings

import numpy as np

from .. import cache as cache_mod
from .. import envs
from ..backends.ascend.llvm_driver import OPT_LEVELS, host_identity
from ..backends.ascend.ptoas import identity as assembler_identity
from ..compiler.ast_to_ir import build_function
from ..compiler.source import KernelSource
from ..compiler.ir import CROSS_BLOCK_OPS, GRID_PARAMS, walk
from ..errors import BufferOverflow, CompilationError, compiler_frames_wanted, user_stacklevel
from ..language import dtypes as dt
from ..target import get_target
from . import hooks
from .device import current_target
from .kernel import (REQUIRED_FILES, CompiledKernel, __version__, check_engine, compiler_hash,
                     load_kernel, pto_override)
from .launcher import (
    MAX_BLOCKS,
    NoFastPath,
    grid_too_large,
    make_caller,
    make_launcher,
    note_torch,
    read_only,
    requires_grad_refused,
    torch_tensor_type)
from .dependencies import Dependencies, changed
from .specialize import (dynamic_dims, is_constexpr, normalise_arg, physical, spec_key,
                         specialise)

_compile_lock = threading.Lock()
# "auto": a grid of more programs than cores runs in the persistent form; "grid": never
LAUNCH_FORMS = ("auto", "grid")


class LaunchWarning(UserWarning):
    """A launch that ran, but probably not as the author meant (pypto.LaunchWarning)."""


class JITFunction:
    __pypto_jit__ = True    # the compiler inlines calls to it (compiler/source.py, is_jit_function)

    def __init__(self, fn, target=None, do_not_specialize=(), opt_level=None, dynamic=(),
                 auto_sync=True, engine=None, sanitize=False, launch_form="auto"):
        self.fn = fn
        if launch_form not in LAUNCH_FORMS:
            raise ValueError(f"@pypto.jit({fn.__name__}, launch_form={launch_form!r}): one of "
                             f"{', '.join(map(repr, LAUNCH_FORMS))}")
        self.launch_form = launch_form
        self.sanitize = bool(sanitize)
        self.auto_sync = bool(auto_sync)
        self.engine = engine and check_engine(engine, f"@pypto.jit({fn.__name__})")
        functools.update_wrapper(self, fn)
        self.signature = inspect.signature(fn)
        self.arg_names = list(self.signature.parameters)
        self.constexprs = {n for n, p in self.signature.parameters.items()
                           if is_constexpr(p.annotation)}
        self.do_not_specialize = set(do_not_specialize)
        unknown = self.do_not_specialize - set(self.arg_names)
        if unknown:
            raise ValueError(f"do_not_specialize names unknown parameters: {sorted(unknown)}")
        self.dynamic = dynamic_dims(dynamic, self.arg_names)
        for option, names in (("do_not_specialize", self.do_not_specialize),
                              ("dynamic", self.dynamic)):
            if self.constexprs & set(names):
                raise ValueError(f"@pypto.jit({fn.__name__}, {option}=...) names pl.constexpr "
                                 f"parameters {sorted(self.constexprs & set(names))}: a "
                                 f"constexpr is always compiled in; name int or tensor "
                                 f"parameters")
        self.target_name = target
        if opt_level is not None and str(opt_level).upper() not in OPT_LEVELS:
            raise ValueError(f"@pypto.jit({fn.__name__}, opt_level={opt_level!r}): one of "
                             f"{', '.join(OPT_LEVELS)} (the host code's optimisation level)")
        self.opt_level = opt_level
        self._source = None
        self._kernels: dict = {}
        self._fast: dict = {}          # launcher key -> per-specialisation caller
        self._last_spec = None
        self._launch, self._key, self._launcher_scope = make_launcher(self, self._slow_run)

    @property
    def source(self) -> KernelSource:
        if self._source is None:
            self._source = KernelSource(self.fn)
        return self._source

    def source_hash(self, seen=None, parent=None) -> str:
        """Hash of this kernel's source, of the constants it reads from its closure and
        globals, module attributes among them (``cfg.FACTOR``: the compiled code folds them,
        so a new value must not reuse a cached binary: tile ops made by a factory differ only
        there), and of every jit function and plain Python helper it calls, transitively
        (``dependencies.py``)."""
        return self._dependencies(seen, parent)[0]

    def _dependencies(self, seen=None, parent=None):
        """(source hash, the ``Read``s of module globals it folds); a jit callee's reads
        join its ``parent``'s (a ``Dependencies``)."""
        seen = seen if seen is not None else set()
        seen.add(id(self))
        h = hashlib.sha256(self.source.text.encode())
        h.update(str(self.source.first_line).encode())
        deps = Dependencies(h, seen)
        if parent is not None:
            deps.reads = parent.reads
        deps.kernel(self.source)
        return h.hexdigest(), deps.reads

    # -- calling ---------------------------------------------------------------------------
    def __getitem__(self, grid):
        launch = self._launch

        def launch_on_grid(*args, **kwargs):
            try:
                return launch(*args, _pypto_grid=grid, **kwargs)
            except TypeError as e:
                raise self._call_error(e, args, kwargs) from None

        return launch_on_grid

    def __call__(self, *args, **kwargs):
        try:
            return self._launch(*args, _pypto_grid=None, **kwargs)
        except TypeError as e:
            error = self._call_error(e, args, kwargs)
            if args and isinstance(args[0], tuple) and all(type(g) is int for g in args[0]):
                error = TypeError(f"{error}; the first argument looks like a grid: launch on "
                                  f"it as {self.__name__}[grid](...)")
            raise error from None

    def _call_error(self, error: TypeError, args, kwargs) -> TypeError:
        """The launcher's own TypeErrors in the kernel's terms: Python's message for too many
        positional arguments counts the hidden grid keyword, and an unhashable constexpr fails
        the warm key's lookup. Other errors pass unchanged."""
        text = str(error)
        if text.startswith("unhashable type"):
            given = dict(zip(self.arg_names, args), **kwargs)
            for name in self.constexprs:
                try:
                    hash(given.get(name))
                except TypeError:
                    return TypeError(f"{self.__name__}(): constexpr argument '{name}' = "
                                     f"{given[name]!r:.60} is not hashable, and constexpr "
                                     "values key the compiled kernels; pass a tuple, a number "
                                     "or a string")
        if "keyword-only argument" not in text or not text.startswith(
                f"{self._launch.__name__}() takes"):
            return error
        names = ", ".join(self.arg_names)
        return TypeError(f"{self.__name__}() takes {len(self.arg_names)} argument(s) "
                         f"({names}) but {len(args)} positional argument(s) were given")

    def compile(self, *args, grid=None, **kwargs) -> CompiledKernel:
        """Build (or fetch) the kernel for these arguments without running it."""
        bound = self._bind(args, kwargs)
        return self._get_kernel(bound)[0]

    def _bind(self, args, kwargs) -> dict:
        try:
            ba = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self.__name__}(): {e}") from None
        ba.apply_defaults()
        bound = dict(ba.arguments)
        for name, value in bound.items():
            if name in self.constexprs:
                if isinstance(value, np.generic) and not isinstance(value, np.void):
                    bound[name] = value.item()       # np.int64(16) is the constexpr 16
                elif type(value).__module__.startswith(("numpy", "torch")) and not isinstance(
                        value, np.ndarray) and not np.isscalar(value):
                    bound[name] = dt.from_any(value)
                continue
            bound[name] = normalise_arg(self.__name__, name, value)
        return bound

    def _slow_run(self, grid, args, kwargs):
        """Bind, specialise, compile or fetch, register for the fast path, launch."""
        try:
            bound = self._bind(args, kwargs)
            sanitized = self.sanitize or bool(envs.sanitize_mode())
            if sanitized or envs.PYPTO_INTERPRET.get() not in ("", "0"):
                return self._interpret(grid, bound, sanitized)
            kernel, target = self._get_kernel(bound)
        except CompilationError as e:
            if not compiler_frames_wanted():
                raise e.with_traceback(None) from None   # the user's frames, not ours
            raise
        given = self.signature.bind(*args, **kwargs).arguments      # as the caller gave them
        torch_args = self._torch_arguments(given, kernel)
        if self._engine() == "pto-isa":
            caller = self._simulator_caller(kernel, target)
        else:
            caller = self._caller(kernel, target, bool(torch_args))
        key = self._key(*args, **kwargs)
        if torch_args is not None and not any(isinstance(part, NoFastPath) for part in key):
            self._fast[key] = caller
        if torch_args is None:               # the numpy call on views of torch tensors
            self._refuse_grad_writes(kernel, given)
        torch_args = torch_args or {}
        caller(grid, *(torch_args.get(n, bound[n]) for n in self.arg_names))

    def _refuse_grad_writes(self, kernel, given):
        """What the torch caller checks, for calls that mix torch and other tensors."""
        import torch  # lazy: only calls that pass torch tensors load it
        for name in kernel.metadata["written_tensors"]:
            value = given.get(name)
            if isinstance(value, torch.Tensor) and value.requires_grad and \
                    torch.is_grad_enabled():
                raise requires_grad_refused(self.__name__, name, value)

    def _torch_arguments(self, given, kernel):
        """{name: torch tensor} when every tensor argument is a ``torch.Tensor`` or an
        ``nn.Parameter`` (the torch fast path), {} when none is, None for a mix (or other
        subclasses): the slow path."""
        tensor_names = [n for n, kind, _ in kernel.runtime_params if kind == "tensor"]
        torch_types = torch_tensor_type()
        if len(torch_types) == 1 or not tensor_names:
            return {}               # torch not imported (or blocked): no torch tensors here
        kinds = {type(given.get(n)) in torch_types for n in tensor_names}
        if kinds == {False}:
            return None if any(type(v).__module__.startswith("torch")
                               for v in given.values()) else {}
        note_torch(self._launcher_scope)
        return {n: given[n] for n in tensor_names} if kinds == {True} else None

    def _caller(self, kernel, target, torch_tensors=False):
        attr = "torch_caller" if torch_tensors else "caller"
        caller = getattr(kernel, attr, None)
        if caller is None:
            normalise = lambda grid, meta: self._grid(grid, meta, kernel.metadata, target)
            record = None
            if self.launch_form == "auto" and kernel.metadata.get("persistent_ok"):
                record = self._persistent_record(kernel)
            caller = make_caller(self, kernel, kernel.runtime_params, normalise, torch_tensors,
                                 lambda grid, values: self._slow_run(grid, values, {}), record)
            setattr(kernel, attr, caller)
        return caller

    def launch_plan(self, bound: dict, grid):
        """(compiled kernel, grid, {extra int argument: value}) of launching ``grid`` on
        ``bound`` as the chip runs it from the native engine: the persistent form, over one
        block per core, when a profile records it so (``_persistent_record``). What the cycle
        model's callers model."""
        kernel, target = self._get_kernel(bound)
        grid = self._grid(grid, bound, kernel.metadata, target)
        blocks, extents = _persistent_grid(grid, kernel.metadata["cores"])
        if self.launch_form == "auto" and kernel.metadata.get("persistent_ok") and \
                math.prod(extents) > blocks[0] and self._engine() == "native":
            form = self._get_kernel(bound, persistent=True)[0]
            return form, blocks, dict(zip(GRID_PARAMS, extents))
        return kernel, grid, {}

    def _persistent_record(self, kernel):
        """How a profiled launch of ``kernel`` is recorded: a grid of more programs than its
        cores as the launch the chip runs, the persistent form (compiled on first use) over
        one block per core with the grid's extents as arguments, which the cycle model reads.
        The host runs the grid form either way: the same results, and its fastest code (its
        threads claim blocks without a dispatch cost; the programs' loop cost it 15-30 %)."""
        cores = kernel.metadata["cores"]
        state = {}

        def record(grid, raw_values, t0, arguments):
            blocks, extents = _persistent_grid(grid, cores)
            if math.prod(extents) <= cores:
                return hooks.record_compiled(kernel, grid, raw_values, t0)
            if "form" not in state:
                start = time.perf_counter()
                state["form"] = self._get_kernel(self._bind((), arguments), persistent=True)[0]
                t0 += time.perf_counter() - start       # the compile is not the launch's time
            hooks.record_compiled(state["form"], blocks, list(raw_values) + list(extents), t0)
        return record

    def _engine(self) -> str:
        """This kernel's engine: its own ``engine=``, else ``PYPTO_ENGINE``."""
        return self.engine or check_engine(envs.PYPTO_ENGINE.get() or "native", "PYPTO_ENGINE")

    def _simulator_caller(self, kernel, target):
        """The call through pto-isa's CPU simulator (``backends/ptoisa``), built on first use."""
        caller = getattr(kernel, "simulator_caller", None)
        if caller is not None:
            return caller
        simulated = getattr(kernel, "simulated", None)
        if simulated is None:             # (a batch build may have made it already)
            from ..backends.ptoisa.engine import load  # lazy: pto-isa's engine loads on first use
            simulated = kernel.simulated = load(kernel, kernel.cache_key)
        written = kernel.metadata["written_tensors"]

        def caller(grid, *values):
            if kernel.reads and self._globals_changed(kernel):   # a folded global rebound
                return self._slow_run(grid, values, {})
            bound = {n: normalise_arg(self.__name__, n, v) if n not in self.constexprs else v
                     for n, v in zip(self.arg_names, values)}
            grid = self._grid(grid, bound, kernel.metadata, target)
            for name in written:
                if not physical(bound[name]).flags.writeable:
                    raise read_only(self.__name__, name)
            args = {n: physical(bound[n]) for n, _, _ in kernel.runtime_params}
            t0 = time.perf_counter()
            simulated.launch(grid, args)
            if hooks.ACTIVE:
                hooks.record_compiled(kernel, grid, list(args.values()), t0, "pto-isa")

        kernel.simulator_caller = caller
        return caller

    def _interpret(self, grid, bound, sanitized=False):
        """Debug mode: the kernel's Tile IR runs in the reference interpreter (watched by the
        sanitizer when ``sanitized``)."""
        from ..backends.interpreter.run import run_function  # lazy: loads on first interpreted launch
        target = self.target()
        spec = spec_key(self, bound)
        spec_args, _, runtime_params = specialise(self, spec, bound)
        fn = build_function(self.source, spec_args, self.source.node.name)
        uses_cube = any(op.name == "tile.matmul" for op in walk(fn.body))
        grid = self._grid(grid, bound, {"uses_cube": uses_cube}, target)
        cores = target.cores_for(uses_cube)
        if any(op.name in CROSS_BLOCK_OPS for op in walk(fn.body)) and \
                math.prod(grid) > cores:     # as the compiled launch refuses it
            raise ValueError(f"{self.__name__}: grid {tuple(grid)!r} has more blocks than the "
                             f"{cores} cores of {target.name}; a kernel that uses "
                             "pl.barrier/pl.wait needs every block running at once")
        args = {name: physical(bound[name]) for name, _, _ in runtime_params}
        grid3 = tuple(grid) + (1,) * (3 - len(grid))
        watch = None
        if sanitized:
            from ..backends.interpreter import sanitizer  # lazy: as the interpreter
            tensors = {n: v for n, v in args.items() if isinstance(v, np.ndarray)}
            watch = sanitizer.Watch(self.__name__, tensors, grid3)
        t0 = time.perf_counter()
        run_function(fn, args, grid3, watch)
        if watch is not None:
            stored = sorted({op.operands[0].hint for op in walk(fn.body)
                             if op.name == "tile.store"})
            sanitizer.report(watch.finish(stored))
        if hooks.ACTIVE:
            hooks.record_interpreted(self, bound, grid, (time.perf_counter() - t0) * 1e3)


    def _call_grid(self, grid, bound):
        """A callable grid's value; its signature is read only when the call fails (it runs on
        every launch), to say how a grid callable is written if that is what went wrong."""
        try:
            return grid(dict(bound))
        except TypeError:
            try:
                inspect.signature(grid).bind(None)
            except TypeError:
                raise TypeError(f"{self.__name__}[grid]: a callable grid takes one argument, "
                                f"the launch's arguments by name, as in Triton: "
                                f"lambda meta: (pl.cdiv(meta['n'], meta['BLOCK']),)") from None
            except ValueError:          # no signature to read (a builtin)
                pass
            raise

    def _grid(self, grid, bound, metadata, target) -> tuple:
        if grid is None:
            cores = target.cores_for(metadata["uses_cube"])
            if metadata.get("reads_program_id") and not metadata.get("reads_num_programs"):
                self._warn_gridless(cores, target)
            return (cores,)
        if callable(grid):
            grid = self._call_grid(grid, bound)
        if isinstance(grid, (int, np.integer)):
            grid = (grid,)
        if not isinstance(grid, (tuple, list)) or not 1 <= len(grid) <= 3 or not all(
                isinstance(g, (int, np.integer)) and not isinstance(g, bool) for g in grid):
            raise ValueError(f"{self.__name__}: grid must be a tuple of 1 to 3 ints, got {grid!r}")
        if any(g < 0 for g in grid):
            raise ValueError(f"{self.__name__}: grid dimensions must be >= 0, got {tuple(grid)}")
        if math.prod(grid) > MAX_BLOCKS:
            raise grid_too_large(self.__name__, grid)
        return tuple(int(g) for g in grid)

    def _warn_gridless(self, cores, target):
        """Once per kernel: a launch without [grid] ran one program per core, but the kernel
        indexes its work by pl.program_id without asking pl.num_programs, so it most likely
        covers only part of its data."""
        if getattr(self, "_gridless_warned", False):
            return
        self._gridless_warned = True
        name = self.__name__
        warnings.warn(
            f"{name} was launched without a grid, so it ran one program per core: {cores} "
            f"programs (pl.program_id(0) = 0..{cores - 1}) on {target.name}. It reads "
            "pl.program_id but never pl.num_programs, so it probably expects one program per "
            f"block of its data: launch it as {name}[(pl.cdiv(n, BLOCK),)](...), or loop "
            "over blocks with a stride of pl.num_programs(0)", LaunchWarning,
            stacklevel=user_stacklevel())

    # -- specialisation and caching ---------------------------------------------------------
    def target(self):
        """The target this kernel compiles for: its own (``@jit(target=...)``), else the
        current one (``pypto.set_target`` / ``PTO_TARGET``)."""
        return get_target(self.target_name) if self.target_name else current_target()

    def _get_kernel(self, bound: dict, persistent: bool = False):
        """(the compiled kernel for ``bound``, the target); ``persistent``: its persistent
        launch form (``compiler/passes/persistent.py``)."""
        target = self.target()
        opt = (self.opt_level or envs.PTO_OPT_LEVEL.get()).upper()
        spec = spec_key(self, bound)
        override = pto_override(self.__name__)
        mem_key = (spec, target.name, opt, envs.code_changing_environment(),
                   override and override[2], persistent)
        kernel = self._kernels.get(mem_key)
        if kernel is not None and kernel.reads and self._globals_changed(kernel):
            kernel = None
        if kernel is not None:
            cache_mod.STATS["memory_hits"] += 1
            return kernel, target
        with _compile_lock:
            kernel = self._kernels.get(mem_key)
            if kernel is None:
                self._log_recompile(spec)
                kernel = self._load_or_compile(spec, bound, target, opt, override, persistent)
                self._kernels[mem_key] = kernel
        return kernel, target

    def _globals_changed(self, kernel) -> bool:
        """Has a module global the compile of ``kernel`` folded been rebound since (a launch
        found one of its ``reads`` not the object it was)? If so the kernel is dropped, to be
        compiled again with the new value under its new key. Either way the warm callers,
        which hold the objects they compare, are rebuilt."""
        if all(r.current() is r.value for r in kernel.reads):
            return False
        self._fast.clear()
        kernel.__dict__.pop("caller", None)
        kernel.__dict__.pop("torch_caller", None)
        stale = changed(kernel.reads)
        if not stale:                    # rebound to equal values: remember the new objects
            kernel.reads = [r._replace(value=r.current()) for r in kernel.reads]
            return False
        for key in [k for k, v in self._kernels.items() if v is kernel]:
            del self._kernels[key]
        if envs.log_enabled("recompile"):
            print(f"[pypto recompile] {self.__name__}: "
                  f"{', '.join(r.described() for r in stale)} changed since it was compiled",
                  file=sys.stderr)
        return True

    def _log_recompile(self, spec):
        if self._last_spec is not None and envs.log_enabled("recompile"):
            args = [n for n, a, b in zip(self.arg_names, self._last_spec, spec) if a != b]
            if args:          # (else a global changed: _globals_changed said which)
                print(f"[pypto recompile] {self.__name__}: new specialisation because of "
                      f"{', '.join(args)}", file=sys.stderr)
        self._last_spec = spec

    def _load_or_compile(self, spec, bound, target, opt, override=None,
                         persistent=False) -> CompiledKernel:
        spec_args, tensor_specs, runtime_params = specialise(self, spec, bound)
        if persistent:              # the grid's extents, after the kernel's own arguments
            runtime_params = runtime_params + [(n, "int", 0) for n in GRID_PARAMS]
        source_hash, reads = self._dependencies()
        key = cache_mod.digest((spec, source_hash, self.source.filename, target.name, opt,
                                __version__, compiler_hash(), host_identity(),
                                envs.code_changing_environment(), override and override[2],
                                self.auto_sync, assembler_identity(), persistent))
        files = cache_mod.fetch_or_build(
            key, REQUIRED_FILES,
            lambda: self._compile(spec_args, tensor_specs, target, opt, override, persistent))
        kernel = load_kernel(files, runtime_params, key)
        kernel.reads = reads
        return kernel

    def _compile(self, spec_args, tensor_specs, target, opt, override=None,
                 persistent=False) -> dict:
        cache_mod.STATS["compiles"] += 1
        from ..backends.ascend.compile import compile_kernel  # lazy: the compiler loads on first compile
        try:
            asm, metadata = compile_kernel(self.source, spec_args, tensor_specs, target, opt,
                                           override and override[:2], auto_sync=self.auto_sync,
                                           persistent=persistent)
        except BufferOverflow as e:
            from ..compiler.pipeline import with_fitting_sizes  # lazy: as compile_kernel
            raise with_fitting_sizes(e, self.source, spec_args, target, tensor_specs) from None
        if envs.log_enabled("compile"):
            print(f"[pypto compile] {self.__name__} in {metadata['compile_seconds']} s",
                  file=sys.stderr)
        files = {f"{k}.txt": v.encode() for k, v in asm.items() if isinstance(v, str)}
        files["kernel.o"] = asm["obj"]
        files["metadata.json"] = json.dumps(metadata, sort_keys=True).encode()
        return files


def _persistent_grid(grid: tuple, cores: int) -> tuple[tuple, tuple]:
    """(the blocks a persistent launch of ``grid`` runs: one per core, fewer for a smaller
    grid; the grid's three extents, its int arguments)."""
    extents = tuple(grid) + (1,) * (3 - len(grid))
    return (min(math.prod(extents), cores),), extents


def jit(fn=None, *, target=None, do_not_specialize=(), opt_level=None, dynamic=(),
        auto_sync=True, engine=None, sanitize=False, launch_form="auto"):
    """Compile ``fn`` as a PyPTO kernel: ``kernel[grid](*args)`` launches it.

    ``do_not_specialize`` lists int parameters whose value must not split the cache (== 1,
    divisible by 16); ``dynamic`` lists tensor parameters (or ``{name: dims}``) whose extents
    are read at run time, so one binary serves every size of those dimensions.
    ``auto_sync=False`` is the advanced mode: the compiler inserts no pipe flags, the kernel
    orders its pipes itself with ``pl.set_flag``/``pl.wait_flag``/``pl.pipe_barrier``, and the
    hazard checker rejects it with the racing instructions named if it missed one.
    ``engine="pto-isa"`` runs the kernel's ``.pto`` on pto-isa's CPU simulator instead of
    PyPTO's own host code (default: ``PYPTO_ENGINE``, else "native"; docs/engines.md).
    ``sanitize=True`` runs every launch of this kernel sanitized
    (``pypto/backends/interpreter/sanitizer.py``). ``launch_form``: "auto" runs a grid of
    more programs than the target has cores in the persistent form (one block per core looping
    over the programs, compiled on first use; not for kernels that use pl.barrier/pl.wait or
    mix cube and vector) on the native engine; "grid" always launches one block per program."""
    def wrap(f):
        if not inspect.isfunction(f) or f.__name__ == "<lambda>":
            what = "a lambda" if inspect.isfunction(f) else f"{type(f).__name__} {f!r}"
            raise TypeError(f"@pypto.jit compiles a function written with def (its source is "
                            f"the kernel), got {what}")
        return JITFunction(f, target=target, do_not_specialize=do_not_specialize,
                           opt_level=opt_level, dynamic=dynamic, auto_sync=auto_sync,
                           engine=engine, sanitize=sanitize, launch_form=launch_form)
    return wrap(fn) if fn is not None else wrap
