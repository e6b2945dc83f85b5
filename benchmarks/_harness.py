"""Shared helpers for the benchmark scripts: command line, timing and table printing.

Timing rule: one warm-up call (it compiles or fetches the kernel and faults the pages in), then
``reps`` timed calls; the median is reported, so one preempted rep on a busy machine does not
move the result. The memory-bound families (vector add, softmax, layer norm) take turns
between libraries in three rounds (``side_by_side``), because this host's memory bandwidth
drifts during a run.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time


def parse_args(description: str, argv=None, extra=None) -> argparse.Namespace:
    """--reps and --quick; ``extra(parser)`` may add a script's own options."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--reps", type=int, default=5,
                   help="timed repetitions per measurement, after one warm-up call (default 5)")
    p.add_argument("--quick", action="store_true",
                   help="small sizes only (used by the smoke test)")
    if extra is not None:
        extra(p)
    args = p.parse_args(argv)
    if args.reps < 1:
        p.error("--reps must be >= 1")
    if args.quick:                  # a smoke run: its figures mean nothing, save the pauses
        global _settle_seconds
        _settle_seconds = 0.02
    return args


def row_blocks(n_cols: int, block_m: int, max_tile_elements: int,
               target_elements: int = 4096) -> tuple[int, int]:
    """(rows, columns) of a row kernel's tile: whole rows, as many of them (at least one, at
    most ``block_m``) as make about ``target_elements``. Up to ``max_tile_elements`` columns
    fit the UB. The target keeps a block's working set (its tile, the intermediates the host
    stores, the output) in one host core's 48 KiB L1. Swept on a 2-core Zen host, 2 threads,
    median of 50 (5 rounds of 10): softmax 4096 x 1024 with 1/2/4/8 rows 0.83 / 0.68 / 0.78 /
    0.84 ms (torch 1.02 ms), 4096 x 4096 with 1/2 rows 4.0 / 4.6 ms (torch 4.2 ms); layer norm
    4096 x 4096 with 1/2 rows 3.4-4.0 / 6.4 ms (torch 18-20 ms; two rows overflow the UB with
    every fusion group, so one group runs unfused), 4096 x 1024 with 1-8 rows 0.46-0.69 ms,
    within the run-to-run noise. The tile is exactly as wide as the rows: a wider one computes
    its padding columns too (1001 x 781: layer norm 136 -> 79 us, softmax 194 -> 133 us with
    781 instead of 1024 columns)."""
    block_n = max(1, n_cols)
    if block_n > max_tile_elements:
        raise ValueError(f"rows of {n_cols} elements do not fit one tile in the UB")
    return max(1, min(block_m, target_elements // block_n)), block_n


def median_time(fn, reps: int, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` in seconds over ``reps`` calls, after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def side_by_side(fns: dict, reps: int, rounds: int = 3) -> dict:
    """name -> median time of ``fns[name]()`` (None where the function is None), measured in
    ``rounds`` rounds that take the libraries in turn: in each, a warm-up call and ``reps``
    timed calls per library, with a pause after each. A shared host's speed drifts during a
    run (its memory bandwidth moved 2x within a minute here); taking turns lets that drift
    affect every library alike instead of whichever ran in a slow phase. (With fewer calls
    per turn, each turn would mostly time the first calls after another library evicted the
    caches.)"""
    per_round = reps
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            if fn is None:
                continue
            fn()
            for _ in range(per_round):
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
            settle()
    return {name: statistics.median(ts) if ts else None for name, ts in times.items()}


_settle_seconds = 0.2


def settle(seconds: float | None = None) -> None:
    """Pause between two libraries' runs so the previous thread pool's spinning workers
    (OpenMP, OpenBLAS) go idle before the next one starts: one thread pool at a time.
    (Measured: right after a numpy BLAS call, PyPTO's 1024^3 matmul runs at ~100 GFLOP/s
    instead of ~190 for the next 50-100 ms, while OpenBLAS's workers spin.) 0.2 s by default,
    0.02 s under --quick."""
    time.sleep(_settle_seconds if seconds is None else seconds)


def fmt_time(seconds) -> str:
    if seconds is None:
        return "-"
    if seconds < 1e-6:
        return f"{seconds * 1e9:.0f} ns"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def fmt_size(n: int) -> str:
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return str(n)


def fmt_num(x, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def format_table(headers, rows) -> str:
    """A plain-text table: first column left-aligned, the others right-aligned."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(r, widths))).rstrip()

    out = [line(cells[0]), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells[1:]]
    return "\n".join(out)


def print_table(headers, rows) -> None:
    print(format_table(headers, rows), flush=True)


def import_torch():
    """torch, or None when it is not installed (it is an optional extra)."""
    try:
        import torch
    except Exception:  # noqa: BLE001 - a broken torch install is as good as none here
        return None
    return torch


class TorchBaseline:
    """Where the torch baselines run: on an Ascend NPU when ``torch_npu`` is importable and
    reports a device (then the torch column is the real chip's time, the comparison the
    kernels are ultimately for), else on the host CPU, on the arrays PyPTO uses. The families
    (vector add, softmax, layer norm, matmul, launch) use it; machine.py and scaling.py keep
    torch on the host, as they measure the host. No NPU is attached where these benchmarks
    were written, so the NPU path is exercised only by a unit test with a stand-in torch
    (tests/test_tutorials_and_benchmarks.py)."""

    def __init__(self, torch):
        self.torch = torch
        self.npu = False
        if torch is not None:
            try:
                import torch_npu  # noqa: F401 - registers torch.npu
                self.npu = bool(torch.npu.is_available())
            except Exception:  # noqa: BLE001 - no torch_npu, or no device: the CPU
                self.npu = False
        self.where = "Ascend NPU (torch_npu)" if self.npu else "host CPU"

    def tensor(self, array):
        """A torch tensor of ``array`` on the baseline's device (on the CPU: the same memory)."""
        t = self.torch.from_numpy(array)
        return t.to("npu") if self.npu else t

    def empty(self, shape, dtype):
        return self.torch.empty(shape, dtype=dtype, device="npu" if self.npu else "cpu")

    def timed(self, fn):
        """``fn`` made to return only when the device has finished (NPU calls are queued)."""
        if not self.npu or fn is None:
            return fn

        def call():
            fn()
            self.torch.npu.synchronize()
        return call


class OtherLoad:
    """Cores kept busy by OTHER processes since ``start()``: the machine's busy time (from
    /proc/stat) minus this process's own CPU time, over the wall time. None where /proc/stat
    does not exist."""

    def start(self) -> "OtherLoad":
        self._t0, self._busy0, self._own0 = time.monotonic(), self._machine_busy(), _own_cpu()
        return self

    def cores(self):
        if self._busy0 is None:
            return None
        busy = self._machine_busy()
        wall = time.monotonic() - self._t0
        if busy is None or wall <= 0:
            return None
        return max(0.0, ((busy - self._busy0) - (_own_cpu() - self._own0)) / wall)

    @staticmethod
    def _machine_busy():
        """Seconds of CPU time all cores spent not idle since boot."""
        try:
            with open("/proc/stat") as f:
                v = [int(x) for x in f.readline().split()[1:9]]
            return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system


def busy_cores(seconds: float = 0.5):
    """How many cores other processes kept busy while this one slept for ``seconds``."""
    load = OtherLoad().start()
    time.sleep(seconds)
    return load.cores()


_run_load = None


def _load_note(busy) -> str:
    return " -- the machine is shared, expect noisy numbers" if busy >= 0.25 else ""


def print_environment(torch=None) -> None:
    """Say what the numbers were measured with, and whether the machine was quiet."""
    import numpy as np

    from pypto.runtime import pool as runtime

    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, "
          f"host cores available: {len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()}")
    print(f"PyPTO: {runtime.num_threads()} host threads simulate the AI Cores "
          f"(PYPTO_NUM_THREADS={os.environ.get('PYPTO_NUM_THREADS', '') or 'unset'})")
    if torch is None:
        print("torch: not installed, its column is skipped")
    else:
        print(f"torch {torch.__version__}: {torch.get_num_threads()} threads "
              f"(torch.get_num_threads()); torch baselines on the {TorchBaseline(torch).where}")
    global _run_load
    busy = busy_cores()
    if busy is not None:
        print(f"other processes kept {busy:.1f} cores busy just before the run{_load_note(busy)}")
    _run_load = OtherLoad().start()


def print_load_during_run() -> None:
    """After the tables: how busy other processes kept the cores while we measured."""
    busy = None if _run_load is None else _run_load.cores()
    if busy is not None:
        print(f"other processes kept {busy:.1f} cores busy during the measurements"
              f"{_load_note(busy)}")


# ---------------------------------------------------------------------------------------------
# Rows: what every family's run(args) returns, so run_all.py can print them as one table.
#
# ratio: PyPTO's speed relative to the baseline its goal names (baseline time / PyPTO time, so
# > 1 means PyPTO is faster), or for the scaling rows the 1 -> 2 thread speedup; None for
# absolute goals (a time limit). limit_pct: PyPTO's rate as a % of the machine's limit
# measured in the same run (machine.py): STREAM bandwidth for memory-bound kernels, the fp32
# FMA peak for matmul.

ROW_KEYS = ("kernel", "size", "pypto_s", "numpy_s", "torch_s", "ratio", "limit_pct", "goal",
            "met")


def make_row(kernel, size, pypto_s, numpy_s=None, torch_s=None, *, ratio=None, limit_pct=None,
             goal="", met=None, work=None, unit=None, family="", note="", **extra):
    """One result row. ``work`` (bytes or flops of one call) and ``unit`` ("GB/s" or
    "GFLOP/s") give the rates; ``note`` is printed as a footnote under the table; ``extra``
    keys are kept for the plots."""
    row = {"kernel": kernel, "size": size, "pypto_s": pypto_s, "numpy_s": numpy_s,
           "torch_s": torch_s, "ratio": ratio, "limit_pct": limit_pct, "goal": goal,
           "met": met, "work": work, "unit": unit, "family": family, "note": note,
           "rate": rate_text(work, pypto_s, unit) if work else None}
    row.update(extra)
    return row


def speedup(base_s, pypto_s):
    """base time / PyPTO time: > 1 when PyPTO is faster. None when either is missing."""
    if base_s is None or pypto_s is None or pypto_s <= 0:
        return None
    return base_s / pypto_s


def at_least(ratio, target):
    return None if ratio is None else ratio >= target


def fmt_met(met) -> str:
    return "" if met is None else ("yes" if met else "NO")


TABLE_HEADERS = ["kernel", "size", "PyPTO", "numpy", "torch", "PyPTO rate", "ratio",
                 "% limit", "goal", "met"]


def print_rows(rows, title: str = "") -> None:
    """The goal table: one line per row, then the rows' notes as numbered footnotes."""
    if title:
        print(f"\n{title}")
    cells, notes = [], []
    for r in rows:
        kernel = r["kernel"]
        if r.get("note"):
            notes.append(r["note"])
            kernel += f" [{len(notes)}]"
        cells.append([kernel, r["size"], fmt_time(r["pypto_s"]), fmt_time(r["numpy_s"]),
                      fmt_time(r["torch_s"]), r.get("rate") or "-",
                      "-" if r["ratio"] is None else f"{r['ratio']:.2f}x",
                      "-" if r["limit_pct"] is None else f"{r['limit_pct']:.0f}%",
                      r["goal"] or "-", fmt_met(r["met"])])
    print_table(TABLE_HEADERS, cells)
    for i, note in enumerate(notes, 1):
        print(f"  [{i}] {note}")
    print("ratio: PyPTO's speed relative to the baseline the goal names (its time / PyPTO's; "
          "> 1: PyPTO faster); % limit: PyPTO's rate as a share of the machine's limit "
          "measured in this run (machine.py)", flush=True)


def rate_text(work, seconds, unit: str) -> str:
    """'12.3 GB/s' for work in bytes (unit GB/s) or flops (unit GFLOP/s)."""
    if seconds is None or seconds <= 0:
        return "-"
    return f"{work / seconds / 1e9:.1f} {unit}"


def pct_of(work, seconds, limit_per_s):
    """PyPTO's rate (work / seconds) as a percentage of a limit given in work per second."""
    if not limit_per_s or seconds is None or seconds <= 0:
        return None
    return 100.0 * work / seconds / limit_per_s


# ---------------------------------------------------------------------------------------------
# Thread counts: every library gets the thread count PyPTO uses.

def default_threads() -> int:
    from pypto.runtime import pool as runtime
    return runtime.num_threads()


def use_threads(n: int, torch=None) -> None:
    """PyPTO, torch and numpy's BLAS all on ``n`` threads (numpy's elementwise ufuncs are
    single-threaded whatever this says)."""
    import pypto
    pypto.set_num_threads(n)
    if torch is not None:
        torch.set_num_threads(n)
    blas_set_threads(n)


def _openblas_libs():
    """ctypes handles of the OpenBLAS libraries loaded in this process (numpy's included)."""
    import ctypes
    paths = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rsplit(None, 1)[-1]
                if "openblas" in path.lower() and (path.endswith(".so") or ".so." in path) \
                        and path not in paths:
                    paths.append(path)
    except OSError:
        return []
    libs = []
    for p in paths:
        try:
            libs.append(ctypes.CDLL(p))
        except OSError:
            pass
    return libs


def _openblas_fn(lib, name):
    for prefix in ("", "scipy_"):
        for suffix in ("", "64_", "_64"):
            fn = getattr(lib, f"{prefix}{name}{suffix}", None)
            if fn is not None:
                return fn
    return None


def _numpy_blas_loaded() -> None:
    import numpy as np
    a = np.ones((8, 8), np.float32)
    a @ a                                   # make sure numpy's BLAS is loaded


def blas_set_threads(n: int) -> bool:
    """numpy's BLAS on ``n`` threads: threadpoolctl when installed, else OpenBLAS's own
    openblas_set_num_threads through ctypes. False when neither worked."""
    _numpy_blas_loaded()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        pass
    else:
        threadpool_limits(limits=n, user_api="blas")
        return True
    import ctypes
    done = False
    for lib in _openblas_libs():
        fn = _openblas_fn(lib, "openblas_set_num_threads")
        if fn is not None:
            fn.argtypes = [ctypes.c_int]
            fn.restype = None
            fn(n)
            done = True
    return done


def blas_info() -> str:
    """Which BLAS numpy uses, its kernel (core type) and threads, as one line."""
    _numpy_blas_loaded()
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        pass
    else:
        infos = [i for i in threadpool_info() if i.get("user_api") == "blas"]
        if infos:
            i = infos[0]
            return (f"{i.get('internal_api')} {i.get('version')}, kernel {i.get('architecture')}"
                    f", {i.get('num_threads')} threads (threadpoolctl; "
                    f"{i.get('filepath', '').rsplit('/', 1)[-1]})")
    import ctypes
    for lib in _openblas_libs():
        core, config, threads = (_openblas_fn(lib, n) for n in (
            "openblas_get_corename", "openblas_get_config", "openblas_get_num_threads"))
        if core is None:
            continue
        core.restype = config.restype = ctypes.c_char_p
        version = ""
        if config is not None:
            words = config().decode().split()
            version = " " + words[1] if len(words) > 1 else ""
        parts = [f"OpenBLAS{version}, kernel {core().decode()}"]
        if threads is not None:
            threads.restype = ctypes.c_int
            parts.append(f"{threads()} threads")
        return ", ".join(parts) + " (openblas_get_corename; threadpoolctl is not installed)"
    return "unknown (not OpenBLAS, and threadpoolctl is not installed)"


OPENBLAS_TUNING_VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def run_without_openblas_tuning(script: str, argv, threads: int):
    """The JSON that ``python -c script argv...`` prints last, run in a subprocess whose
    environment lacks OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (OpenBLAS reads them when it
    loads, so they cannot be undone in this process; without them it picks its own kernel and
    blocking for this CPU), with OpenBLAS on ``threads`` threads. The script finds the
    benchmarks directory in sys.argv[1] (for ``import _harness``), then ``argv``. None on
    failure."""
    import json
    import subprocess
    env = {k: v for k, v in os.environ.items() if k not in OPENBLAS_TUNING_VARIABLES}
    env["OPENBLAS_NUM_THREADS"] = str(threads)
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        proc = subprocess.run([sys.executable, "-c", script, here, *map(str, argv)], env=env,
                              capture_output=True, text=True, timeout=900)
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except Exception:  # noqa: BLE001 - a missing baseline is reported, not fatal
        return None


def openblas_tuning_set() -> str:
    """'OPENBLAS_CORETYPE=..., ...' for the tuning variables set in this environment, or ''."""
    return ", ".join(f"{k}={os.environ[k]}" for k in OPENBLAS_TUNING_VARIABLES
                     if os.environ.get(k))


def per_call_time(fn, calls: int, reps: int) -> float:
    """Median over ``reps`` batches of the mean time of one ``fn()`` in a batch of ``calls``
    (for calls too short to time one by one), after one warm-up batch."""
    for _ in range(calls):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls)
    return statistics.median(times)


def main_table(description: str, run, headers, title, argv=None) -> None:
    """The standalone entry of a script that prints a plain table (no machine limits, no
    goals): parse the command line, print the environment, the line ``title(args)`` and the
    table of ``run(args)`` under ``headers``."""
    args = parse_args(description, argv)
    print_environment(import_torch())
    print(title(args))
    print_table(headers, run(args))


def main_for(description: str, run, title, patterns=(), flops=False, argv=None,
             prepare=None) -> None:
    """The standalone entry every family script shares: parse the command line, set one thread
    count for everyone, measure the machine limits the family is compared with, run, print.
    ``title(args)`` heads the table; ``prepare()`` runs after the thread counts are set."""
    import machine
    args = parse_args(description, argv)
    torch = import_torch()
    use_threads(default_threads(), torch)
    print_environment(torch)
    if prepare is not None:
        prepare()
    limits = machine.measure(args, patterns=patterns, flops=flops)
    machine.print_limits(limits)
    rows = run(args, limits)
    print_rows(rows, title(args))
    print_load_during_run()


def tutorial(file_name: str):
    """A tutorial's module (``tutorials/<file_name>``), for a benchmark that times the
    tutorial's own kernel rather than a copy of it."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tutorials",
                        file_name)
    spec = importlib.util.spec_from_file_location(file_name.removesuffix(".py"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
