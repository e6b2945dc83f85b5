"""Start-up costs, each measured in fresh Python processes: importing PyPTO, compiling a first
kernel, and a first call whose kernel is already in the disk cache.

    python benchmarks/startup.py [--reps N] [--quick]

Rows (each the median over --reps subprocess runs; times taken inside the child, so the
interpreter's own start-up is left out and reported beside):
  import pypto       `import pypto` in a fresh process. Goal: <= 200 ms. Beside it: `import
                     numpy` (which pypto imports) and `import torch`.
  cold compile       vector add (benchmarks/vector_add.py's kernel, 64 K fp32), the first call
                     after import with an empty PYPTO_CACHE_DIR (a new temporary directory per
                     run): parse, compile, write the cache entry, load, launch. Goal: <= 150 ms.
  first call cached  the same first call in a fresh process whose PYPTO_CACHE_DIR already
                     holds the kernel: read the entry, load the object, launch. Goal: <= 10 ms.
The children import the same pypto as this process (its directory is put first on
PYTHONPATH), and report pypto.cache_stats, which is checked: a cold run must compile once, a
cached run must not compile at all.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from _harness import (
    fmt_time,
    import_torch,
    make_row,
    parse_args,
    print_environment,
    print_load_during_run,
    print_rows,
)

import pypto

IMPORT_CHILD = """\
import json, time
t0 = time.perf_counter()
import {module}
print(json.dumps({{"import": time.perf_counter() - t0}}))
"""

VADD_CHILD = '''\
import json, time
t0 = time.perf_counter()
import numpy as np
import pypto
import pypto.language as pl
t_import = time.perf_counter() - t0


@pypto.jit
def add_kernel(x, y, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    a = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    b = pl.load(y, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(pid * BLOCK,), value=a + b)


x = np.ones(1 << 16, np.float32)
y = np.ones(1 << 16, np.float32)
out = np.zeros(1 << 16, np.float32)
t0 = time.perf_counter()
add_kernel[(8,)](x, y, out, BLOCK=8192)
t_first = time.perf_counter() - t0
t0 = time.perf_counter()
add_kernel[(8,)](x, y, out, BLOCK=8192)
t_second = time.perf_counter() - t0
assert (out == 2).all()
meta = add_kernel.compile(x, y, out, BLOCK=8192).metadata
print(json.dumps({"import": t_import, "first": t_first, "second": t_second,
                  "compile_seconds": meta.get("compile_seconds"),
                  "stats": dict(pypto.cache_stats)}))
'''


def _child_env(cache_dir=None) -> dict:
    """This environment, with this process's pypto first on the path (and a cache dir)."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(pypto.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(
        os.pathsep) if p and p != root])
    if cache_dir is not None:
        env["PYPTO_CACHE_DIR"] = cache_dir
    env.pop("PYPTO_DISABLE_CACHE", None)
    env.pop("PYPTO_INTERPRET", None)
    return env


def run_child(argv, env) -> tuple[dict, float]:
    """(the child's last stdout line as JSON, the process's wall time)."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True,
                          timeout=300)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"child {argv} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), wall


def median_of(runs, key):
    return statistics.median(r[key] for r in runs)


def run(args, limits=None) -> list[dict]:
    reps = args.reps
    has_torch = import_torch() is not None
    rows = []
    with tempfile.TemporaryDirectory(prefix="pypto-startup-") as tmp:
        env = _child_env(os.path.join(tmp, "unused-cache"))

        # Interpreter start-up alone, then the imports.
        walls_pass = [run_child(["-c", "print('{}')"], env)[1] for _ in range(reps)]
        imports = {}
        walls_import = []
        for module in ["pypto", "numpy"] + (["torch"] if has_torch else []):
            runs = []
            for _ in range(reps):
                out, wall = run_child(["-c", IMPORT_CHILD.format(module=module)], env)
                runs.append(out["import"])
                if module == "pypto":
                    walls_import.append(wall)
            imports[module] = statistics.median(runs)
        rows.append(make_row(
            "import pypto", "fresh process", imports["pypto"], imports["numpy"],
            imports.get("torch"), goal="<= 200 ms", met=imports["pypto"] <= 0.2,
            family="startup",
            note=f"import pypto: numpy / torch columns are `import numpy` and `import torch` "
                 f"in a fresh process; whole process `python -c 'import pypto'` "
                 f"{fmt_time(statistics.median(walls_import))}, of which the interpreter "
                 f"(`python -c pass`) {fmt_time(statistics.median(walls_pass))}"))

        script = os.path.join(tmp, "startup_vector_add.py")
        with open(script, "w") as f:
            f.write(VADD_CHILD)

        # Cold: a new empty cache directory for every run.
        cold = []
        for i in range(reps):
            out, _ = run_child([script], _child_env(os.path.join(tmp, f"cold-{i}")))
            if out["stats"].get("compiles") != 1:
                raise RuntimeError(f"a cold run did not compile exactly once: {out['stats']}")
            cold.append(out)
        t_cold = median_of(cold, "first")
        rows.append(make_row(
            "cold compile, vector add", "after import", t_cold, goal="<= 150 ms",
            met=t_cold <= 0.15, family="startup",
            note=f"cold compile: first call with an empty PYPTO_CACHE_DIR; the compiler's own "
                 f"compile_seconds {fmt_time(median_of(cold, 'compile_seconds'))}, the second "
                 f"call {fmt_time(median_of(cold, 'second'))}"))

        # Cached: one run fills a cache directory, the measured runs find the kernel there.
        warm_dir = os.path.join(tmp, "warm")
        run_child([script], _child_env(warm_dir))
        cached = []
        for _ in range(reps):
            out, _ = run_child([script], _child_env(warm_dir))
            stats = out["stats"]
            if stats.get("compiles") or stats.get("disk_hits") != 1:
                raise RuntimeError(f"a cached run did not take the kernel from the disk "
                                   f"cache: {stats}")
            cached.append(out)
        t_cached = median_of(cached, "first")
        rows.append(make_row(
            "first call, cached", "fresh process", t_cached, goal="<= 10 ms",
            met=t_cached <= 0.01, family="startup",
            note=f"first call, cached: the kernel read from the disk cache (cache_stats: "
                 f"disk_hits=1, compiles=0 in every run), after an import of "
                 f"{fmt_time(median_of(cached, 'import'))}; the second call "
                 f"{fmt_time(median_of(cached, 'second'))}"))
    return rows


def main(argv=None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv)
    torch = import_torch()
    print_environment(torch)
    rows = run(args)
    print_rows(rows, f"start-up, fresh processes, median of {args.reps} runs")
    print_load_during_run()


if __name__ == "__main__":
    main()
