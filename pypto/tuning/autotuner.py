"""``@pypto.autotune``: sweep a kernel's configs once per tuning key, launch with the best.

Stacked on ``@pypto.jit`` as in Triton::

    @pypto.autotune(configs=[pypto.Config({"BLOCK": 1024}), pypto.Config({"BLOCK": 4096})],
                    key=["n"])
    @pypto.jit
    def kernel(x, out, n, BLOCK: pl.constexpr): ...

    kernel[lambda META: (pl.cdiv(n, META["BLOCK"]),)](x, out, n)

The first call with a new key (the key arguments' values, every tensor's dtype, the target
and the objective) times every config -- by the cycle model (``objective="npu"``, the
default: the configs are for the NPU, and the host's caches and vector width would pick
others) or by measuring host launches (``"host"``) -- skipping, with the reason, those that
do not compile or launch, then launches with the winner, ``kernel.best_config``. Later calls
with the key launch at once; the result is kept on disk too (``results``), so a new process
does not tune again (``cache_results=False`` keeps it in memory only).
"""
from __future__ import annotations

import inspect
import sys

from .. import envs
from ..runtime.jit import JITFunction
from ..runtime.kernel import __version__
from ..target import get_target
from ..runtime.launcher import ENV_KEY, ENVIRON
from ..runtime.device import _current_target
from ..layout import as_array
from . import results
from .config import Config
from .objectives import host_time_ms, npu_time_ms
from .report import AutotuneError, TuningReport, compiling, sweep

OBJECTIVES = ("npu", "host")
TARGET_KEY = ENV_KEY(envs.PTO_TARGET.name)
_SCALARS = (int, float, bool, str, type(None))
PRUNE_KEYS = ("early_config_prune", "perf_model", "top_k")


class Autotuner:
    """What ``@pypto.autotune`` returns: ``kernel[grid](...)``, ``kernel(...)``,
    ``best_config`` and ``report`` (of the last call's key)."""

    def __init__(self, fn, configs, key, objective="npu", prune_configs_by=None,
                 reset_to_zero=None, restore_value=None, warmup=25, rep=100,
                 cache_results=True, progress=None):
        if not isinstance(fn, JITFunction):
            raise TypeError("@pypto.autotune goes above @pypto.jit: it tunes a jit kernel, got "
                            f"{type(fn).__name__}")
        self.fn = fn
        self.__name__ = fn.__name__
        params = list(fn.signature.parameters)
        self.configs = _check_configs(configs, fn.__name__)
        self.meta_names = {k for c in self.configs for k in c.kwargs}
        self.takes_num_stages = "num_stages" in params
        _check_names(self.meta_names, params, fn.__name__, "a config names")
        _check_constexprs(self.configs, fn)
        if not self.takes_num_stages and any(c.num_stages != 1 for c in self.configs):
            raise ValueError(f"@pypto.autotune({fn.__name__}): a config sets num_stages, but "
                             f"the kernel has no num_stages parameter; declare num_stages: "
                             "pl.constexpr and pass it to pl.range(..., num_stages=num_stages) "
                             "where a loop should be double-buffered")
        if isinstance(key, str) or not isinstance(key, (list, tuple)):
            raise TypeError(f"@pypto.autotune(key=...) must be a list of argument names, got "
                            f"{key!r}")
        self.key = list(key)
        _check_names(set(self.key), params, fn.__name__, "key= names")
        if objective not in OBJECTIVES:
            raise ValueError(f"@pypto.autotune(objective={objective!r}): one of "
                             f"{', '.join(map(repr, OBJECTIVES))}")
        self.objective = objective
        self.reset_to_zero = list(reset_to_zero or [])
        self.restore_value = list(restore_value or [])
        _check_names(set(self.reset_to_zero), params, fn.__name__, "reset_to_zero= names")
        _check_names(set(self.restore_value), params, fn.__name__, "restore_value= names")
        self.prune = dict(prune_configs_by or {})
        unknown = set(self.prune) - set(PRUNE_KEYS)
        if unknown:
            raise ValueError(f"@pypto.autotune(prune_configs_by=...): unknown keys "
                             f"{sorted(unknown)}; accepted: {', '.join(PRUNE_KEYS)}")
        self.warmup, self.rep = warmup, rep
        self.cache_results = cache_results
        self.progress = progress
        self.best_config = None
        self.report = None
        self._memo: dict = {}
        self._tuned = frozenset(self.meta_names | ({"num_stages"} if self.takes_num_stages
                                                   else set()))
        self._untuned = [n for n in params if n not in self._tuned]

    # -- calling -----------------------------------------------------------------------------
    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, **kwargs)

    def __call__(self, *args, **kwargs):
        return self.run(*args, grid=None, **kwargs)

    def __getattr__(self, name):          # compile, source, signature, ... of the kernel
        if name == "fn":
            raise AttributeError(name)
        return getattr(self.fn, name)

    def run(self, *args, grid, **kwargs):
        named = self._named(args, kwargs)
        tuning_key = self._tuning_key(named)
        found = self._memo.get(tuning_key)
        if found is None:
            config, report = self._lookup_or_tune(tuning_key, grid, named)
            found = self._memo[tuning_key] = (config, report,
                                              config.all_kwargs(self.takes_num_stages))
            if not report.cached and self.sweep_launches:   # they ran on these tensors
                for n in self.reset_to_zero:
                    as_array(named[n])[...] = 0
        self.best_config, self.report, meta = found
        if self.best_config.pre_hook is not None:
            self.best_config.pre_hook({**named, **meta})
        launch = self.fn if grid is None else self.fn[grid]
        return launch(**named, **meta)

    def _named(self, args, kwargs) -> dict:
        """The call's arguments by name, defaults filled in: positional ones by the
        kernel's parameter order (no ``inspect`` binding: this runs on every call)."""
        names = self.fn.arg_names
        if len(args) > len(names):
            raise TypeError(f"{self.__name__}() takes {len(names)} arguments, got {len(args)}")
        named = dict(zip(names, args))
        for name, value in kwargs.items():
            if name in named or name not in self.fn.signature.parameters:
                raise TypeError(f"{self.__name__}(): unexpected or repeated argument {name!r}")
            named[name] = value
        if not self._tuned.isdisjoint(named):
            conflicts = sorted(self._tuned & set(named))
            raise ValueError(f"{self.__name__}(): {', '.join(conflicts)} are chosen by "
                             "@pypto.autotune; do not pass them (or drop them from the configs)")
        if len(named) != len(self._untuned):
            for name in self._untuned:
                if name not in named:
                    default = self.fn.signature.parameters[name].default
                    if default is inspect.Parameter.empty:
                        raise TypeError(f"{self.__name__}(): missing argument {name!r}")
                    named[name] = default
        return named

    def _tuning_key(self, named) -> tuple:
        target = self.fn.target_name or ENVIRON.get(TARGET_KEY) or \
            _current_target.get("name") or envs.PTO_TARGET.default   # current_target()'s order
        keyed = tuple((n, _key_value(named[n])) for n in self.key)
        dtypes = tuple(v.dtype for v in named.values() if type(v) not in _SCALARS and
                       _is_tensor(v))
        return keyed, dtypes, target, self.objective

    # -- tuning -----------------------------------------------------------------------------
    @property
    def sweep_launches(self) -> bool:
        """Does the sweep run the kernel on the caller's tensors? Only under "host": "npu"
        models each config and runs nothing, so there are no writes for ``reset_to_zero`` and
        ``restore_value`` to undo (zeroing would destroy what the caller put there) and no
        launch for a config's ``pre_hook`` to precede."""
        return self.objective == "host"

    def _lookup_or_tune(self, tuning_key, grid, named):
        keyed, dtypes, target, objective = tuning_key
        target = get_target(target).name
        label = ", ".join([f"{n}={v}" for n, v in keyed] + [str(d) for d in dtypes])
        fields = dict(kernel=self.__name__, key=label, objective=objective, target=target)
        digest = results.entry_digest((self.fn.source_hash(), [repr(c) for c in self.configs],
                                       label, target, objective, __version__))
        use_disk = self.cache_results and results.disk_enabled()

        def sweep():
            config, report = self._tune(grid, named, fields)
            return {"config": self.configs.index(config), "report": report.to_json(),
                    "kernel": self.__name__}

        data, cached = results.remembered(
            digest, sweep, use_disk, lambda d: 0 <= d.get("config", -1) < len(self.configs))
        report = TuningReport.from_json(data["report"], cached=cached, **fields)
        self._log(report)
        return self.configs[data["config"]], report

    def _tune(self, grid, named, fields):
        configs, pruned = self._pruned(named)
        saved = {n: as_array(named[n]).copy() for n in self.restore_value
                 if self.sweep_launches}

        def timed(config, spent):
            values = {**named, **config.all_kwargs(self.takes_num_stages)}
            try:
                if config.pre_hook is not None and self.sweep_launches:
                    config.pre_hook(values)
                return self._time(grid, values, spent)
            finally:
                for n, copy in saved.items():
                    as_array(named[n])[...] = copy

        report = sweep(configs, str, timed, f"@pypto.autotune({self.__name__}): no config can "
                       f"run for {fields['key']} on {fields['target']}", fields, self.progress,
                       pruned)
        return configs[report.winner], report

    def _time(self, grid, values, spent) -> float:
        """The config's time by the objective; compiling it first, timed apart (``spent``),
        so the report can say what tuning cost beyond the compiles."""
        with compiling(spent):
            self.fn.compile(**values)
        if self.objective == "npu":
            return npu_time_ms(self.fn, grid, values)
        return host_time_ms(self.fn, grid, values, self.reset_to_zero, self.warmup, self.rep)

    def _pruned(self, named):
        """Triton's ``prune_configs_by``: ``early_config_prune(configs, named_args)`` drops
        configs; ``perf_model(**named_args, **config.kwargs)`` ranks them and ``top_k`` (a
        count, or a fraction when a float <= 1) keeps the best."""
        configs = list(self.configs)
        early = self.prune.get("early_config_prune")
        if early is not None:
            configs = list(early(configs, dict(named)))
        model, top_k = self.prune.get("perf_model"), self.prune.get("top_k")
        if model is not None and top_k is not None:
            if isinstance(top_k, float) and top_k <= 1.0:
                top_k = max(1, int(len(configs) * top_k))
            configs = sorted(configs, key=lambda c: model(**named, **c.kwargs))[:top_k]
        if not configs:
            raise AutotuneError(f"@pypto.autotune({self.__name__}): prune_configs_by left no "
                                "config")
        return configs, [str(c) for c in self.configs if c not in configs]

    @staticmethod
    def _log(report):
        if envs.log_enabled("autotune"):
            print(f"[pypto autotune] {report}", file=sys.stderr)

    def __repr__(self) -> str:
        return f"<pypto.autotune of {self.__name__}: {len(self.configs)} configs, key {self.key}>"


def autotune(configs, key, objective="npu", prune_configs_by=None, reset_to_zero=None,
             restore_value=None, warmup=25, rep=100, cache_results=True, progress=None):
    """Decorate a ``@pypto.jit`` kernel so that each new ``key`` sweeps ``configs``
    (``pypto.Config``) and every launch uses the best; Triton's arguments, plus ``objective``
    ("npu": the cycle model's time on the kernel's target, the default; "host": measured
    host time, ``warmup``/``rep`` ms as in ``do_bench``) and ``progress`` (a progress bar:
    default when stderr is a terminal)."""
    def decorator(fn):
        return Autotuner(fn, configs, key, objective, prune_configs_by, reset_to_zero,
                         restore_value, warmup, rep, cache_results, progress)
    return decorator


def _check_configs(configs, name) -> list:
    if not isinstance(configs, (list, tuple)) or not configs:
        raise TypeError(f"@pypto.autotune({name}): configs must be a non-empty list of "
                        "pypto.Config")
    for i, c in enumerate(configs):
        if not isinstance(c, Config):
            raise TypeError(f"@pypto.autotune({name}): configs[{i}] is a {type(c).__name__}, "
                            "not a pypto.Config")
    return list(configs)


def _check_names(names, params, kernel, what):
    unknown = sorted(set(names) - set(params))
    if unknown:
        raise ValueError(f"@pypto.autotune({kernel}): {what} {unknown}, which are not "
                         f"parameters of {kernel} ({', '.join(params)})")


def _check_constexprs(configs, fn):
    """A config's values are compile-time choices: one naming a runtime parameter would be
    accepted here and fail only at the first call, after the user has moved on."""
    for config in configs:
        runtime = sorted(set(config.kwargs) - fn.constexprs)
        if runtime:
            declared = ", ".join(sorted(fn.constexprs)) or "none"
            raise ValueError(f"@pypto.autotune({fn.__name__}): {config!r} sets {runtime}, "
                             f"which are not pl.constexpr parameters of {fn.__name__} (its "
                             f"constexpr parameters: {declared}); a config chooses "
                             "compile-time values only")


def _is_tensor(v) -> bool:
    return hasattr(v, "shape") and hasattr(v, "dtype") and len(v.shape) > 0


def _key_value(v):
    """A key argument's part of the tuning key: a tensor by shape, a value as itself."""
    if type(v) not in _SCALARS and _is_tensor(v):
        return tuple(int(n) for n in v.shape)
    return v
