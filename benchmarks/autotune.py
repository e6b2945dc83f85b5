"""What autotuning costs: a 12-config @pypto.autotune sweep of a row softmax (objective "npu"),
first run and cached -- issue 15's Report figure.

    python benchmarks/autotune.py [--reps N] [--quick]

The kernel and configs are tutorial 11's (rows per tile BM in 1..32, num_stages 1 or 2) on
fp32 4096 x 1024 (--quick: 512 x 256). Rows:
  first run          the first call in a fresh process with an empty PYPTO_CACHE_DIR: the
                     sweep (compile and model every config), then the launch with the winner.
  configs' compiles  the part of it spent compiling the configs, failing compiles included
                     (report.compile_seconds, each compile timed on its own).
  tuning overhead    first run - compiles: what tuning adds beyond compiling. Goal: <= 2 s.
  cached call        the same key again in the same process (in memory). Goal: <= 50 ms.
  new autotuner      a new @pypto.autotune of the kernel in the same process: the sweep read
                     from disk (<cache>/autotune), the kernels from memory. Goal: <= 50 ms.
  new process        the first call of a fresh process whose cache holds the sweep and the
                     winner's kernel (timed inside the child, import excluded). Goal: <= 50 ms.
Each first run is a child process of its own cache directory (median of min(--reps, 3)); the
cached rows are medians of --reps calls. Every launch's result is checked against numpy.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from _harness import fmt_time, parse_args, tutorial

import pypto

OVERHEAD_GOAL_S = 2.0
CACHED_GOAL_S = 0.050
CHILD_FLAG = "--child"          # argv of a child: --child M N REPS same-process|new-process

_TUTORIAL = tutorial("11_autotune.py")     # the sweep tutorial 11 runs, timed here
CONFIGS, softmax = _TUTORIAL.CONFIGS, _TUTORIAL.softmax


def tuned():
    """A new autotuner over the kernel: its in-memory table starts empty."""
    return pypto.autotune(CONFIGS, key=["M", "BN"], progress=False)(softmax)


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run_child(m: int, n: int, reps: int, same_process: bool) -> dict:
    """In a child process: the first call's figures, and with ``same_process`` the cached
    calls of the same and of new autotuners (results checked against numpy)."""
    x = np.random.default_rng(0).standard_normal((m, n), dtype=np.float32)
    out = np.empty_like(x)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    kernel = tuned()
    first = timed(lambda: kernel(x, out, m, BN=n))
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-7)
    report = kernel.report
    result = {"first": first, "cached_report": report.cached,
              "compile": report.compile_seconds, "configs": len(report.trials),
              "skipped": sum(t.skipped is not None for t in report.trials),
              "best": str(kernel.best_config)}
    if same_process:
        result["memory"] = [timed(lambda: kernel(x, out, m, BN=n)) for _ in range(reps)]
        result["disk"] = [timed(lambda: tuned()(x, out, m, BN=n)) for _ in range(reps)]
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-7)
    return result


def _env(cache_dir: str) -> dict:
    """This environment, with this process's pypto first on the path and ``cache_dir``."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(pypto.__file__)))
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYPTO_DISABLE_CACHE", "PYPTO_INTERPRET", "PYPTO_LOG")}
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(
        os.pathsep) if p and p != root])
    env["PYPTO_CACHE_DIR"] = cache_dir
    return env


def child(shape, reps: int, mode: str, cache_dir: str) -> dict:
    """One child process's figures (its last stdout line)."""
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), CHILD_FLAG,
                           *map(str, shape), str(reps), mode],
                          env=_env(cache_dir), capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark child failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(shape, reps: int) -> dict:
    """Fresh first runs (each in its own cache), then the cached calls: in the last fresh
    child (memory, disk) and in new processes over its cache."""
    firsts = []
    with tempfile.TemporaryDirectory(prefix="pypto-bench-autotune-") as tmp:
        for i in range(max(1, min(reps, 3))):
            cache = os.path.join(tmp, f"cache{i}")
            firsts.append(child(shape, reps, "same-process", cache))
        later = [child(shape, 1, "new-process", cache) for _ in range(reps)]
    assert not any(f["cached_report"] for f in firsts), "a fresh cache served a sweep"
    assert all(r["cached_report"] for r in later), "a new process tuned again"
    med = statistics.median
    last = firsts[-1]
    return {"first": med(f["first"] for f in firsts),
            "compile": med(f["compile"] for f in firsts),
            "overhead": med(f["first"] - f["compile"] for f in firsts),
            "memory": med(last["memory"]), "disk": med(last["disk"]),
            "process": med(r["first"] for r in later), "runs": len(firsts),
            "configs": last["configs"], "skipped": last["skipped"], "best": last["best"]}


def print_table(shape, f: dict, reps: int) -> None:
    def goal(value, limit):
        return f"<= {fmt_time(limit)}", "yes" if value <= limit else "no"

    rows = [("first run", f["first"], ("", "")),
            ("configs' compiles", f["compile"], ("", "")),
            ("tuning overhead", f["overhead"], goal(f["overhead"], OVERHEAD_GOAL_S)),
            ("cached call", f["memory"], goal(f["memory"], CACHED_GOAL_S)),
            ("new autotuner", f["disk"], goal(f["disk"], CACHED_GOAL_S)),
            ("new process", f["process"], goal(f["process"], CACHED_GOAL_S))]
    print(f"@pypto.autotune, softmax {shape[0]}x{shape[1]} fp32, {f['configs']} configs "
          f"({f['skipped']} skipped), objective npu; best {f['best']}")
    print(f"(first-run rows: median of {f['runs']} fresh processes; cached rows: median of "
          f"{reps} calls)")
    print(f"{'measurement':<20}{'time':>10}  {'goal':>10}  met")
    for name, value, (limit, met) in rows:
        print(f"{name:<20}{fmt_time(value):>10}  {limit:>10}  {met}")


def main(argv=None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv)
    shape = (512, 256) if args.quick else (4096, 1024)
    print_table(shape, measure(shape, args.reps), args.reps)


if __name__ == "__main__":
    if sys.argv[1:2] == [CHILD_FLAG]:
        m, n, reps, mode = sys.argv[2:6]
        print(json.dumps(run_child(int(m), int(n), int(reps), mode == "same-process")))
    else:
        main()
