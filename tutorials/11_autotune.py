"""Tutorial 11 -- autotuning: choose tile sizes and pipelining for the NPU with the cycle model.

    python tutorials/11_autotune.py [--quick] [--reps N]

One idea: a kernel's best tile size depends on the chip, not on the machine you write it on.
@pypto.autotune sweeps pypto.Config points (Triton's spelling) and, by default, ranks them by
the cycle model's NPU time for the kernel's target (objective="npu"): nothing runs during the
sweep, so this works on a laptop. objective="host" measures host launches instead. The
winner is remembered per key, in memory and on disk, so the next process does not tune again;
the graph API's tile_map(..., tile_size="auto") uses the same tuner.
"""
import argparse
import os
import sys
import tempfile
import time

import numpy as np

import pypto
import pypto.language as pl

# ----------------------------------------------------------------------------------------------
# 1. A row softmax with two meta-parameters: rows per tile (BM) and pipelining (num_stages).
#
# num_stages reaches the kernel as its own constexpr parameter: the kernel says which loop is
# double-buffered (pl.range(..., num_stages=num_stages)), where Triton's compiler pipelines
# every loop. The grid-stride loop makes any grid correct, so the grid can stay the default
# (one block per core).
# ----------------------------------------------------------------------------------------------

CONFIGS = [pypto.Config({"BM": bm}, num_stages=s) for bm in (1, 2, 4, 8, 16, 32) for s in (1, 2)]


@pypto.jit
def softmax(x, out, M, BM: pl.constexpr, BN: pl.constexpr, num_stages: pl.constexpr):
    pid = pl.program_id(0)
    for r in pl.range(pid * BM, M, BM * pl.num_programs(0), num_stages=num_stages):
        t = pl.load(x, offsets=(r, 0), shape=(BM, BN), padding=float("-inf"))
        e = pl.exp(t - pl.max(t, axis=1, keepdims=True))
        pl.store(out, offsets=(r, 0), value=e / pl.sum(e, axis=1, keepdims=True))


def tuned(objective, **options):
    """A fresh autotuner over the same kernel (its in-memory table starts empty)."""
    return pypto.autotune(CONFIGS, key=["M", "BN"], objective=objective, progress=False,
                          **options)(softmax)


def reference(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args(argv)
    m, n = (512, 256) if args.quick else (4096, 1024)
    x = np.random.default_rng(0).standard_normal((m, n), dtype=np.float32)
    out = np.empty_like(x)

    # -- 2. tune for the NPU: the first call sweeps, later calls launch at once --------------
    kernel = tuned("npu")
    t0 = time.perf_counter()
    kernel(x, out, m, BN=n)
    first = time.perf_counter() - t0
    np.testing.assert_allclose(out, reference(x), rtol=1e-5, atol=1e-7)
    print(kernel.report)
    print(f"best_config: {kernel.best_config}")
    t0 = time.perf_counter()
    kernel(x, out, m, BN=n)
    warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = tuned("npu")                       # as a new process would: read from disk
    again(x, out, m, BN=n)
    cached = time.perf_counter() - t0
    print(f"first call {first:.2f} s (the sweep, {kernel.report.compile_seconds:.2f} s of it "
          f"compiling 12 configs); the same key again {warm * 1e3:.1f} ms; a new autotuner, "
          f"read from the disk cache: {cached * 1e3:.1f} ms ({again.report.cached=})")
    skipped = [t for t in kernel.report.trials if t.skipped is not None]
    if skipped:
        print(f"{len(skipped)} config(s) skipped, each with its reason above (a tile and its "
              "temporaries that overflow the UB); the sweep goes on without them.")

    # -- 3. the same sweep measured on the host ------------------------------------------------
    host = tuned("host", warmup=5, rep=20 if args.quick else 60, cache_results=False)
    host(x, out, m, BN=n)
    print()
    print(f"softmax {m}x{n}: each config by both objectives")
    print(f"{'config':>26}  {'NPU (model)':>11}  {'host':>9}")
    for a, b in zip(kernel.report.trials, host.report.trials):
        npu = f"{a.time_ms * 1e3:8.2f} us" if a.skipped is None else "skipped"
        hst = f"{b.time_ms * 1e3:6.1f} us" if b.skipped is None else "skipped"
        mark = ("  <- NPU best" if a is kernel.report.best else "") + \
            ("  <- host best" if b is host.report.best else "")
        print(f"{a.config:>26}  {npu:>11}  {hst:>9}{mark}")
    print("NPU: the cycle model's time on ascend910b1 (48 vector cores); host: measured here "
          "(host threads simulating the cores). They need not agree: the host's caches and "
          "vector units are not the AI Core's, which is why the default objective is npu.")

    # -- 4. the graph API ---------------------------------------------------------------------
    @pypto.tile_op
    def row_softmax(t):
        e = pypto.exp(t - pypto.max(t, axis=1, keepdims=True))
        return e / pypto.sum(e, axis=1, keepdims=True)

    g = pypto.TensorGraph("tuned_softmax")
    xs = g.placeholder((m, n), pypto.float32, name="x")
    y = pypto.tile_map(row_softmax, [xs], tile_size="auto")
    node = y.producer
    print()
    print(f"tile_map(row_softmax, tile_size='auto') chose tile_size={node.tiling.tile}, "
          f"{node.strategy}: {node.tuning.best.time_ms * 1e3:.2f} us modelled")
    result = pypto.compile(g).run({"x": x}).to_numpy()
    np.testing.assert_allclose(result, reference(x), rtol=1e-5, atol=1e-7)


if __name__ == "__main__":
    if "PYPTO_CACHE_DIR" not in os.environ:        # a tutorial run leaves no tuning behind
        os.environ["PYPTO_CACHE_DIR"] = tempfile.mkdtemp(prefix="pypto-tutorial-11-")
    main(sys.argv[1:])
