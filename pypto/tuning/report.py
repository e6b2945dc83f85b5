"""What a sweep found: every config with its time or the reason it was skipped, the winner."""
from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from .. import envs


class AutotuneError(RuntimeError):
    """No config of a sweep could run; the message lists each one and why."""


@dataclass
class Trial:
    """One config of a sweep: ``time_ms`` by the objective, or ``skipped`` (the reason)."""
    config: str
    time_ms: float | None = None
    skipped: str | None = None


def reason_of(error) -> str:
    """One line that says why a config was skipped: an overflow by its fields (which buffer,
    how many bytes asked and held; the tiles alive and the advice that follow in its message
    are for a user fixing one kernel, not for a table of configs), anything else by its
    message's first line."""
    summary = getattr(error, "summary", None)
    if isinstance(summary, str):
        return f"{type(error).__name__}: {summary}"
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


def progress(items: list, desc: str, show=None):
    """``items``, wrapped in a tqdm bar on stderr when ``show`` (None: ``PYPTO_PROGRESS``, and
    unset, whether stderr is a terminal, so logs and pipes get no bar); one item gets none.
    Every sweep goes through it, so each has the same bar and the same switch."""
    if show is None:
        setting = envs.PYPTO_PROGRESS.get().strip()
        show = setting != "0" if setting else sys.stderr.isatty()
    if not show or len(items) < 2:
        return items
    from tqdm import tqdm  # lazy: the progress bar only on a terminal
    return tqdm(items, desc=desc, unit="config", leave=False, file=sys.stderr)


def sweep(points: list, label, timed, headline: str, fields: dict, show=None,
          pruned=()) -> "TuningReport":
    """Every point of a sweep timed by ``timed(point, spent)`` (it adds the seconds it spends
    compiling to ``spent["compile"]``, see ``compiling``), a point that raises skipped with
    its reason, under one progress bar: the loop that the jit autotuner, tile_size="auto" and
    the graph's launch forms share. ``headline`` opens the error if none runs."""
    t0 = time.perf_counter()
    spent, trials = {"compile": 0.0}, []
    for point in progress(points, f"autotune {fields['kernel']}", show):
        try:
            trials.append(Trial(label(point), timed(point, spent)))
        except Exception as e:  # noqa: BLE001 - a point that cannot run is skipped
            trials.append(Trial(label(point), skipped=reason_of(e)))
    winner = winner_of(trials, headline)
    return TuningReport(trials=trials, winner=winner, seconds=time.perf_counter() - t0,
                        compile_seconds=spent["compile"], pruned=list(pruned), **fields)


@contextmanager
def compiling(spent: dict):
    """Time a compile into ``spent["compile"]``, a failing one too: the report's compile
    seconds are what the configs' compiles cost, so that the rest is the tuner's overhead."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        spent["compile"] += time.perf_counter() - t0


def winner_of(trials: list, headline: str) -> int:
    """The index of the fastest trial that ran; if none ran, ``AutotuneError`` with
    ``headline`` and every config's reason."""
    ran = [i for i, t in enumerate(trials) if t.skipped is None]
    if not ran:
        raise AutotuneError(f"{headline}:\n" +
                            "\n".join(f"  {t.config}: {t.skipped}" for t in trials))
    return min(ran, key=lambda i: trials[i].time_ms)


@dataclass
class TuningReport:
    """``kernel.report``: ``trials`` in sweep order, ``winner`` (its index), the objective and
    target, ``key`` (what the sweep was keyed on), ``seconds`` the sweep took, ``cached``
    (read from memory or disk instead of tuned), ``pruned`` configs dropped before timing."""
    kernel: str
    key: str
    objective: str
    target: str
    trials: list = field(default_factory=list)
    winner: int | None = None
    seconds: float = 0.0
    compile_seconds: float = 0.0
    cached: bool = False
    pruned: list = field(default_factory=list)

    @property
    def best(self) -> Trial:
        return self.trials[self.winner]

    @property
    def unit(self) -> str:
        return "modelled NPU time" if self.objective == "npu" else "measured host time"

    def __str__(self) -> str:
        ran = [t for t in self.trials if t.skipped is None]
        origin = "cached" if self.cached else (
            f"tuned in {self.seconds:.2f} s, {self.compile_seconds:.2f} s of it compiling")
        lines = [f"autotune {self.kernel} [{self.key}] for {self.target}, objective "
                 f"{self.objective} ({self.unit}): {len(self.trials)} configs, {len(ran)} ran, "
                 f"{len(self.trials) - len(ran)} skipped; {origin}"]
        width = max([len(t.config) for t in self.trials] + [6])
        lines.append(f"  {'config':<{width}}  {'time':>12}")
        for i, t in enumerate(self.trials):
            shown = f"{t.time_ms * 1e3:10.2f} us" if t.skipped is None else "   skipped"
            mark = "  <- best" if i == self.winner else ""
            lines.append(f"  {t.config:<{width}}  {shown}{mark}")
        for t in self.trials:
            if t.skipped is not None:
                lines.append(f"  skipped {t.config}: {t.skipped}")
        for text in self.pruned:
            lines.append(f"  pruned before timing: {text}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"trials": [t.__dict__ for t in self.trials], "winner": self.winner,
                "seconds": self.seconds, "compile_seconds": self.compile_seconds,
                "pruned": self.pruned}

    @classmethod
    def from_json(cls, data: dict, **fields) -> "TuningReport":
        trials = [Trial(**t) for t in data["trials"]]
        return cls(trials=trials, winner=data["winner"], seconds=data["seconds"],
                   compile_seconds=data.get("compile_seconds", 0.0),
                   pruned=data.get("pruned", []), **fields)

    def plot(self, path: str) -> str:
        """A bar chart of the configs' times to ``path`` (needs matplotlib)."""
        try:
            import matplotlib  # lazy: an optional dependency, for plots only
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as e:
            raise ImportError("TuningReport.plot needs matplotlib (pip install matplotlib)") \
                from e
        ran = [(t.config, t.time_ms * 1e3) for t in self.trials if t.skipped is None]
        fig, ax = plt.subplots(figsize=(7, 0.35 * len(ran) + 1.2))
        ax.barh([c for c, _ in ran], [v for _, v in ran],
                color=["tab:green" if t is self.best else "tab:blue"
                       for t in self.trials if t.skipped is None])
        ax.set_xlabel(f"{self.unit} (us)")
        ax.set_title(f"autotune {self.kernel} [{self.key}]")
        ax.invert_yaxis()
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
        return path
