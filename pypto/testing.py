"""Benchmarking helpers for users' own kernels, after ``triton.testing``.

``do_bench`` times a callable the same way PyPTO's own benchmarks do (warm-up, then the median
of repetitions); ``perf_report`` turns a function of (x, provider) into a printed table and an
optional plot (matplotlib, when installed).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np


def do_bench(fn, warmup: float = 25, rep: float = 100, quantiles=None, return_mode="median",
             reps: int | None = None):
    """Time ``fn()`` in milliseconds. ``warmup`` and ``rep`` are time budgets in ms (as in
    Triton); at least 1 warm-up call and 5 timed calls are made. ``reps=N`` instead makes
    exactly one warm-up call and N timed calls (what the tutorials and benchmarks print).
    Returns the median (or ``return_mode`` in min/max/mean/median), or the requested
    ``quantiles`` as a list."""
    fn()
    if reps is not None:
        if reps < 1:
            raise ValueError(f"reps must be >= 1, got {reps}")
        count = reps
    else:
        start = time.perf_counter()
        fn()
        estimate = max(time.perf_counter() - start, 1e-7) * 1e3
        for _ in range(max(0, int(warmup / estimate) - 1)):
            fn()
        count = max(5, int(rep / estimate))
    times = []
    for _ in range(count):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    times = np.array(times)
    if quantiles is not None:
        return [float(q) for q in np.quantile(times, quantiles)]
    if return_mode not in ("min", "max", "mean", "median"):
        raise ValueError(f"return_mode must be min, max, mean or median, got {return_mode!r}")
    return float(getattr(np, return_mode)(times))


@dataclass
class Benchmark:
    x_names: list
    x_vals: list
    line_arg: str
    line_vals: list
    line_names: list
    plot_name: str
    args: dict = field(default_factory=dict)
    ylabel: str = "ms"
    xlabel: str = ""
    x_log: bool = False
    y_log: bool = False


class Mark:
    def __init__(self, fn, benchmarks):
        self.fn = fn
        self.benchmarks = benchmarks if isinstance(benchmarks, list) else [benchmarks]

    def run(self, print_data: bool = True, save_path: str | None = None, show_plots=False):
        """Evaluate every (x, line) point; print a table; save a PNG per benchmark.
        (``show_plots`` is accepted for Triton compatibility; plots are only saved.)"""
        tables = []
        for bench in self.benchmarks:
            rows = []
            for x in bench.x_vals:
                xs = x if isinstance(x, (tuple, list)) else [x] * len(bench.x_names)
                kwargs = dict(zip(bench.x_names, xs), **bench.args)
                values = [self.fn(**kwargs, **{bench.line_arg: line}) for line in bench.line_vals]
                rows.append((xs[0], values))
            tables.append((bench, rows))
            if print_data:
                _print_table(bench, rows)
            if save_path is not None:
                _plot(bench, rows, save_path)
        return tables


def perf_report(benchmarks):
    """Decorator: ``@perf_report(Benchmark(...))`` then ``fn.run(print_data=True)``."""
    return lambda fn: Mark(fn, benchmarks)


def _print_table(bench, rows):
    headers = [bench.x_names[0]] + list(bench.line_names)
    cells = [[str(x)] + [f"{v:.4g}" if isinstance(v, float) else str(v) for v in values]
             for x, values in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    print(f"{bench.plot_name} ({bench.ylabel}):")
    print("  ".join(h.rjust(w) for h, w in zip(headers, widths)))
    for r in cells:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)))


def _plot(bench, rows, save_path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib is not installed: no plot written)")
        return
    import os
    fig, ax = plt.subplots()
    xs = [x for x, _ in rows]
    for i, name in enumerate(bench.line_names):
        ax.plot(xs, [values[i] for _, values in rows], marker="o", label=name)
    ax.set_xlabel(bench.xlabel or bench.x_names[0])
    ax.set_ylabel(bench.ylabel)
    if bench.x_log:
        ax.set_xscale("log")
    if bench.y_log:
        ax.set_yscale("log")
    ax.legend()
    ax.set_title(bench.plot_name)
    os.makedirs(save_path, exist_ok=True)
    fig.savefig(os.path.join(save_path, f"{bench.plot_name}.png"), dpi=100)
    plt.close(fig)
