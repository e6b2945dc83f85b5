"""Thread scaling: large kernels on 1 and on 2 host threads (pypto.set_num_threads).

    python benchmarks/scaling.py [--reps N] [--quick]

Kernels (the families' own, at large sizes): vector add fp32 16 M elements, softmax fp32
4096 x 1024, matmul fp32 1024^3. The ratio column is PyPTO's speedup from 1 to 2 threads
(time on 1 / time on 2). Goal: >= 1.8x (not shown with --quick, whose sizes are small). For
reference the same speedup of torch (all three) and of numpy (matmul: OpenBLAS threads) is in
the footnotes; the PyPTO / numpy / torch columns are the 2-thread times. A memory-bound kernel
scales only as far as one core falls short of the machine's bandwidth: compare torch's speedup
and the % limit column (of STREAM add / copy, or of the FMA peak, measured on the default
thread count).
"""
from __future__ import annotations

import numpy as np
from _harness import (
    at_least,
    blas_set_threads,
    default_threads,
    fmt_time,
    import_torch,
    main_for,
    make_row,
    median_time,
    pct_of,
    settle,
    use_threads,
)

GOAL = 1.8
ROUNDS = 3


def cases(quick: bool, torch):
    """(kernel, size, work, unit, limit key, {lib: fn}) for each kernel."""
    from matmul import pypto_matmul
    from softmax import pypto_softmax
    from vector_add import pypto_add
    rng = np.random.default_rng(0)
    out = []

    n = (1 << 20) if quick else (1 << 24)
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    z = np.empty_like(x)
    fns = {"PyPTO": lambda: pypto_add(x, y, z), "numpy": None}
    if torch is not None:
        tx, ty, tz = (torch.from_numpy(a) for a in (x, y, z))
        fns["torch"] = lambda: torch.add(tx, ty, out=tz)
    out.append(("vector add fp32", f"{n >> 20} M", 3 * n * 4, "GB/s", "add", fns))

    shape = (512, 1024) if quick else (4096, 1024)
    s = rng.standard_normal(shape, dtype=np.float32)
    so = np.empty_like(s)
    fns = {"PyPTO": lambda: pypto_softmax(s, so), "numpy": None}
    if torch is not None:
        ts, tso = torch.from_numpy(s), torch.empty(shape, dtype=torch.float32)
        fns["torch"] = lambda: torch.softmax(ts, dim=1, out=tso)
    out.append(("softmax fp32", f"{shape[0]}x{shape[1]}", 2 * s.size * 4, "GB/s", "copy",
                fns))

    m = 256 if quick else 1024
    a = rng.standard_normal((m, m), dtype=np.float32)
    b = rng.standard_normal((m, m), dtype=np.float32)
    c = np.empty((m, m), np.float32)
    fns = {"PyPTO": lambda: pypto_matmul(a, b, c), "numpy": lambda: np.matmul(a, b, out=c)}
    if torch is not None:
        ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c)
        fns["torch"] = lambda: torch.matmul(ta, tb, out=tc)
    out.append(("matmul fp32", f"{m}^3", 2.0 * m ** 3, "GFLOP/s", "flops", fns))
    return out


def run(args, limits=None) -> list[dict]:
    from machine import bandwidth, flops
    torch = import_torch()
    threads = default_threads()
    data = cases(args.quick, torch)
    # times[lib][threads] = [seconds per case]: one library and one thread count at a time,
    # in ROUNDS rounds that take them in turn (the host's speed drifts during a run; see
    # _harness.side_by_side), the median over the rounds' medians
    rounds = {lib: {t: [] for t in (1, 2)} for lib in ("PyPTO", "numpy", "torch")}
    try:
        for _ in range(ROUNDS):
            for lib, per_threads in rounds.items():
                for t in (1, 2):
                    use_threads(t, torch)
                    per_threads[t].append([median_time(fns[lib], args.reps)
                                           if fns.get(lib) else None for *_, fns in data])
                    settle()
    finally:
        use_threads(threads, torch)
    times = {lib: {t: [None if runs[0][i] is None else float(np.median([r[i] for r in runs]))
                       for i in range(len(data))] for t, runs in per_threads.items()}
             for lib, per_threads in rounds.items()}

    rows = []
    for i, (kernel, size, work, unit, limit_key, fns) in enumerate(data):
        t1, t2 = times["PyPTO"][1][i], times["PyPTO"][2][i]
        ratio = t1 / t2
        refs, ref_ratios = [], {}
        for lib in ("torch", "numpy"):
            r1, r2 = times[lib][1][i], times[lib][2][i]
            if r1 is not None:
                ref_ratios[lib] = r1 / r2
                refs.append(f"{lib} {fmt_time(r1)} -> {fmt_time(r2)} ({r1 / r2:.2f}x)")
        limit = flops(limits) if limit_key == "flops" else bandwidth(limits, limit_key)
        rows.append(make_row(
            f"scaling {kernel}", size, t2, times["numpy"][2][i], times["torch"][2][i],
            ratio=ratio, limit_pct=pct_of(work, t2, limit),
            goal="" if args.quick else f">= {GOAL}x 1->2 threads",
            met=None if args.quick else at_least(ratio, GOAL), work=work, unit=unit,
            family="scaling", ref_ratios=ref_ratios,
            note=f"scaling {kernel}: PyPTO {fmt_time(t1)} on 1 thread -> {fmt_time(t2)} on 2"
                 + ("; " + ", ".join(refs) if refs else "")))
    return rows


def _blas_threads():
    if not blas_set_threads(default_threads()):
        print("numpy's BLAS threads cannot be set here (no threadpoolctl, not OpenBLAS)")


def main(argv=None) -> None:
    main_for(__doc__.splitlines()[0], run, lambda args: (
        f"scaling 1 -> 2 host threads, median of {args.reps} after a warm-up; ratio: PyPTO's "
        "speedup; time columns: on 2 threads"),
             patterns=("copy", "add"), flops=True, argv=argv, prepare=_blas_threads)


if __name__ == "__main__":
    main()
