"""Every benchmark family in one run: one table, and a PNG plot per family.

    python benchmarks/run_all.py [--reps N] [--quick] [--plots DIR]

First the machine's limits are measured (machine.py: STREAM copy / add / triad bandwidth, the
fp32 FMA peak, sgemm 2048^3), then each family runs in turn (vector add, softmax, layer norm,
matmul, thread scaling, launch overhead, start-up), one library at a time, every library on
PyPTO's thread count. The table has one line per measurement: PyPTO's time, numpy's and
torch's, PyPTO's rate, the ratio its goal is stated in, the share of the machine's limit, the
goal and whether it is met. Goals are printed, never asserted.

Modelled-only scripts are not families here (nothing of theirs is timed on this host):
board.py (pto-isa's board kernels, the cycle model against the board's measured times),
tuning_table.py and autotune.py run on their own.

Plots (benchmarks/plots/<family>.png by default) need matplotlib, an optional extra; without
it the run says so and writes none.
"""
from __future__ import annotations

import importlib
import os
import re
import time

import machine
from _harness import (
    default_threads,
    import_torch,
    parse_args,
    print_environment,
    print_load_during_run,
    print_rows,
    settle,
    use_threads,
)

FAMILIES = ["vector_add", "softmax", "layer_norm", "matmul", "scaling", "launch", "startup"]
HERE = os.path.dirname(os.path.abspath(__file__))


def _extra_args(p):
    p.add_argument("--plots", default=os.path.join(HERE, "plots"), metavar="DIR",
                   help="directory for the PNG plots (default benchmarks/plots)")


def collect(args, limits) -> list[dict]:
    rows = list(limits["rows"])
    for name in FAMILIES:
        t0 = time.perf_counter()
        family_rows = importlib.import_module(name).run(args, limits)
        for r in family_rows:
            r["family"] = r.get("family") or name
        rows += family_rows
        print(f"  {name}: {len(family_rows)} rows in {time.perf_counter() - t0:.1f} s",
              flush=True)
        settle()
    return rows


# ---------------------------------------------------------------------------------------------
# Plots

LIBS = (("PyPTO", "pypto_s"), ("numpy", "numpy_s"), ("torch", "torch_s"))


def _goal_seconds(goal: str):
    m = re.match(r"<= ([\d.]+) (us|ms|s)$", goal or "")
    if not m:
        return None
    return float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[m.group(2)]


def _panel(ax, kind, rows) -> None:
    """One panel of a family's plot: rates (one unit), times, or scaling speedups."""
    xs = range(len(rows))
    width = 0.26
    if kind == "speedup":
        series = [("PyPTO", [r["ratio"] for r in rows])]
        for lib in ("numpy", "torch"):
            series.append((lib, [r.get("ref_ratios", {}).get(lib) for r in rows]))
        ax.axhline(1.8, color="red", linestyle="--", linewidth=1, label="goal 1.8x")
        ax.set_ylabel("speedup, 1 -> 2 threads")
    elif kind == "time":
        series = [(lib, [r[key] * 1e6 if r.get(key) else None for r in rows])
                  for lib, key in LIBS]
        for x, r in zip(xs, rows):
            g = _goal_seconds(r.get("goal"))
            if g is not None:
                ax.hlines(g * 1e6, x - 1.5 * width, x + 1.5 * width, colors="red",
                          linestyles="--", linewidth=1, label="goal" if x == 0 else None)
        ax.set_yscale("log")
        ax.set_ylabel("time (us, log scale)")
    else:
        series = [(lib, [r["work"] / r[key] / 1e9 if r.get(key) else None for r in rows])
                  for lib, key in LIBS]
        for x, r in zip(xs, rows):      # the machine's limit for this row, as a dash
            if r.get("limit_pct") and r.get("pypto_s"):
                limit = r["work"] / r["pypto_s"] / 1e9 / (r["limit_pct"] / 100)
                ax.hlines(limit, x - 1.5 * width, x + 1.5 * width, colors="black",
                          linestyles="--", linewidth=1,
                          label="machine limit" if x == 0 else None)
        ax.set_ylabel(kind)
    for lib, values in series:          # the same place and colour for a library everywhere
        if all(v is None for v in values):
            continue
        i = [name for name, _ in LIBS].index(lib)
        ax.bar([x + (i - 1) * width for x in xs], [v or 0 for v in values], width, label=lib,
               color=f"C{i}")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([f"{r['kernel']}\n{r['size']}" for r in rows], fontsize=8)
    ax.legend(fontsize=8)


def _plot_family(plt, family, rows, path) -> None:
    seen, unique = set(), []
    for r in rows:                      # one bar group per (kernel, size)
        if (r["kernel"], r["size"]) not in seen:
            seen.add((r["kernel"], r["size"]))
            unique.append(r)
    panels = {}
    for r in unique:
        kind = "speedup" if family == "scaling" else (r.get("unit") or "time")
        panels.setdefault(kind, []).append(r)
    widths = [len(p) for p in panels.values()]
    fig, axes = plt.subplots(1, len(panels), figsize=(max(6.0, 1.6 * sum(widths) + 2), 4.5),
                             gridspec_kw={"width_ratios": widths}, squeeze=False)
    for ax, (kind, panel_rows) in zip(axes[0], panels.items()):
        _panel(ax, kind, panel_rows)
    fig.suptitle(family.replace("_", " "))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_plots(rows, directory) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("\nmatplotlib is not installed: no plots written (pip install matplotlib)")
        return
    os.makedirs(directory, exist_ok=True)
    written = []
    for family in dict.fromkeys(r["family"] for r in rows):
        path = os.path.join(directory, f"{family}.png")
        _plot_family(plt, family, [r for r in rows if r["family"] == family], path)
        written.append(f"{family}.png")
    print(f"\nplots written to {directory}: {', '.join(written)}")


def main(argv=None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv, extra=_extra_args)
    torch = import_torch()
    use_threads(default_threads(), torch)
    print_environment(torch)
    print("measuring the machine's limits, then the families:", flush=True)
    t0 = time.perf_counter()
    limits = machine.measure(args)
    print(f"  machine: {time.perf_counter() - t0:.1f} s", flush=True)
    settle()
    rows = collect(args, limits)
    machine.print_limits(limits)
    print_rows(rows, f"all benchmarks, median of {args.reps} after a warm-up (machine rows: "
                     f"best of {args.reps}); ratio: PyPTO's speed against the goal's baseline "
                     "(rows without a goal: the faster of numpy and torch for vector add and "
                     "STREAM, torch for softmax and layer norm, numpy for matmul); scaling: "
                     "speedup 1 -> 2 threads")
    write_plots(rows, args.plots)
    print_load_during_run()


if __name__ == "__main__":
    main()
