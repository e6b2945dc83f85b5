"""MPMD: a graph's tile tasks scheduled by their dependencies, against in-order launches.

    python benchmarks/mpmd.py [--reps N] [--quick]

Issue 16's report. The three-node graph fp16 matmul 1024^3 (tiles BM 128, BK 64, BN 256, fp32
result) -> bias + GELU -> row softmax, on ascend910b1:

* modelled NPU time under each ``parallel_strategy`` (graph/npu_model.py): "data_parallel"
  (the kernels one after another, each an SPMD launch over all cores, one launch cost each),
  "mpmd" (one launch; every task on a free core of its kind as soon as its inputs are done),
  "pipelined" (each node on cores of its own), and what "auto" picks;
* host time (median of --reps runs) of ``module.run`` in order and under MPMD, 2 threads.

Then CANN PyPTO's simulated figures at the same shapes and tiles (shared/reference/
cann-pypto.md section 12) beside PyPTO's modelled SPMD launches of the same kernels, with the
ratio. The matmul is a kernel node (a jit kernel with its K loop: a tile_map loads whole K
panels, 768 KiB of L1 at these tiles) whose blocks each write one output tile, so the GELU tiles
wait only for the matmul tiles of their rows.
"""
from __future__ import annotations

import numpy as np
from _harness import fmt_time, format_table, median_time, parse_args, use_threads

import pypto
from pypto.graph.kernel_node import add_node

TARGET = "ascend910b1"

# CANN PyPTO's cost model in its simulation mode (cann-pypto.md section 12, E2E us)
CANN = {"add 1024x1024 fp32, tile (32, 512)": 14.30,
        "add 1024x1024 fp32, tile (16, 512)": 27.23,
        "softmax 3072x512 fp32, tile (16, 512)": 40.98,
        "softmax 3072x512 fp32, tile (8, 512)": 82.31,
        "matmul 1024^3 fp16->fp32, 128/64/256": 30.30,
        "matmul 2048^3 fp16->fp32, 128/64/256": 122.83}


@pypto.tile_op
def bias_gelu(x, bias):
    y = x + bias
    return 0.5 * y * (1.0 + pypto.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))


@pypto.tile_op
def softmax(t):
    e = pypto.exp(t - pypto.max(t, axis=1, keepdims=True))
    return e / pypto.sum(e, axis=1, keepdims=True)


@pypto.tile_op
def add(a, b):
    return a + b


MATMUL = '''
def {name}(a, b, c):
    pm = pl.program_id(0)
    pn = pl.program_id(1)
    acc = pl.zeros(({bm}, {bn}), dtype=pl.float32)
    for k in range(0, {k}, {bk}):
        ta = pl.load(a, offsets=(pm * {bm}, k), shape=({bm}, {bk}))
        tb = pl.load(b, offsets=(k, pn * {bn}), shape=({bk}, {bn}))
        acc = pl.matmul(ta, tb, acc=acc)
    pl.store(c, offsets=(pm * {bm}, pn * {bn}), value=acc)
'''


def matmul_node(graph, a, b, bm=128, bk=64, bn=256):
    """c = a @ b (fp32) as a kernel node: block (i, j) writes output tile (i, j)."""
    (m, k), n = a.shape, b.shape[1]
    grid = (-(-m // bm), -(-n // bn))
    return add_node(graph, "matmul", [a, b], (m, n), pypto.float32, "ND",
                    lambda fn: MATMUL.format(name=fn, bm=bm, bn=bn, bk=bk, k=k), grid,
                    lambda ins, out: [ins[0], ins[1], out], f"matmul {bm}/{bk}/{bn}",
                    uses_cube=True, tile=(bm, bn))


def three_node(m, k, n, gelu_tile, softmax_tile):
    g = pypto.TensorGraph(name="mm_gelu_softmax")
    a = g.placeholder((m, k), pypto.float16)
    b = g.placeholder((k, n), pypto.float16)
    bias = g.placeholder((1, n), pypto.float32)
    c = matmul_node(g, a, b)
    h = pypto.tile_map(bias_gelu, [c, bias], tile_size=gelu_tile)
    pypto.tile_map(softmax, [h], tile_size=softmax_tile)
    return g


def inputs(m, k, n):
    rng = np.random.default_rng(0)
    return {"a": (rng.standard_normal((m, k)) * 0.05).astype(np.float16),
            "b": (rng.standard_normal((k, n)) * 0.05).astype(np.float16),
            "bias": rng.standard_normal((1, n)).astype(np.float32)}


def report_three_node(args):
    m = k = n = 256 if args.quick else 1024
    module = pypto.compile(three_node(m, k, n, (32, 256), (8, n)), target=TARGET)
    print(f"three-node graph {m}x{k}x{n}: {len(module.execution_graph.tasks)} tasks, "
          f"{len(module.execution_graph.edges)} edges\n")
    rows = []
    for s in ("data_parallel", "mpmd", "pipelined", "auto"):
        d = module.model(s)
        rows.append([s, d.strategy, f"{d.time_us:,.2f} us", d.launches])
    print("modelled NPU time on ascend910b1 (cycle model, not measured)")
    print(format_table(["parallel_strategy", "schedule", "NPU time", "launches"], rows))
    dp, mp = module.model("data_parallel"), module.model("mpmd")
    print(f"MPMD vs in order: {dp.time_us / mp.time_us:.2f}x\n")
    print(mp.bubbles().text())
    x = inputs(m, k, n)
    use_threads(2)
    want = module.run(x, parallel_strategy="data_parallel").to_numpy()
    got = module.run(x, parallel_strategy="mpmd").to_numpy()
    print(f"host results bitwise equal: {np.array_equal(want, got)}")
    host = {s: median_time(lambda s=s: module.run(x, parallel_strategy=s), args.reps)
            for s in ("data_parallel", "mpmd")}
    print(format_table(["host, 2 threads", "time"],
                       [["in order (data_parallel)", fmt_time(host["data_parallel"])],
                        ["MPMD", fmt_time(host["mpmd"])]]))
    print(f"host MPMD vs in order: {host['data_parallel'] / host['mpmd']:.2f}x")
    for _ in range(6):
        module.run(x)                   # parallel_strategy="auto": times both ways first
    print(f'parallel_strategy="auto" on the host settled on: {module.host_strategy}\n')


def one_node(kind, shape, tile):
    g = pypto.TensorGraph(name=kind)
    if kind == "add":
        x = g.placeholder(shape, pypto.float32)
        y = g.placeholder(shape, pypto.float32)
        pypto.tile_map(add, [x, y], tile_size=tile, parallel_strategy="data_parallel")
    elif kind == "softmax":
        pypto.tile_map(softmax, [g.placeholder(shape, pypto.float32)], tile_size=tile,
                       parallel_strategy="data_parallel")
    else:
        a = g.placeholder(shape, pypto.float16)
        matmul_node(g, a, g.placeholder(shape, pypto.float16))
    return pypto.compile(g, target=TARGET)


def report_cann(args):
    cases = [("add 1024x1024 fp32, tile (32, 512)", "add", (1024, 1024), (32, 512)),
             ("add 1024x1024 fp32, tile (16, 512)", "add", (1024, 1024), (16, 512)),
             ("softmax 3072x512 fp32, tile (16, 512)", "softmax", (3072, 512), (16, 512)),
             ("softmax 3072x512 fp32, tile (8, 512)", "softmax", (3072, 512), (8, 512)),
             ("matmul 1024^3 fp16->fp32, 128/64/256", "matmul", (1024, 1024), None),
             ("matmul 2048^3 fp16->fp32, 128/64/256", "matmul", (2048, 2048), None)]
    if args.quick:
        cases = cases[:2] + cases[4:5]
    rows = []
    for label, kind, shape, tile in cases:
        try:
            module = one_node(kind, shape, tile)
        except pypto.CompilationError as e:
            why = "UB overflow" if "overflow" in str(e) else type(e).__name__
            rows.append([label, "-", f"{CANN[label]:.2f}", f"refused ({why})", "-"])
            continue
        ours = module.model("data_parallel")
        tasks = len(module.execution_graph.tasks)
        rows.append([label, tasks, f"{CANN[label]:.2f}", f"{ours.time_us:.2f}",
                     f"{CANN[label] / ours.time_us:.2f}x"])
    print("CANN PyPTO (simulated) beside PyPTO (modelled), us")
    print(format_table(["kernel", "tasks", "CANN", "PyPTO", "CANN/PyPTO"], rows))
    print("\nwhy they differ by more than 1.5x (or are missing):")
    for label, *_ in cases:
        row = next(r for r in rows if r[0] == label)
        ratio = CANN[label] / float(row[3]) if row[3][0].isdigit() else None
        if ratio is None or not 1 / 1.5 <= ratio <= 1.5:
            print(f"  {label}: {WHY.get(label, 'no reason recorded')}")


# why a case differs from CANN's figure by more than 1.5x, or is missing
WHY = {
    "add 1024x1024 fp32, tile (32, 512)":
        "three 64 KiB fp32 tiles (a, b, a + b) exceed the 184 KiB of UB pto-isa leaves usable "
        "(it keeps 8 KiB for TROWEXPAND/TCVT scratch); CANN reuses buffers and fits it",
    "add 1024x1024 fp32, tile (16, 512)":
        "CANN's simulator separates tasks on a core by 2.8-7.3 us; the chip's measured pickup is "
        "0.2-0.8 us, and our SPMD blocks pay pto-isa's board-fitted 2000-cycle (1.1 us) dispatch "
        "(targets.CostModel; docs/cycle_model.md)",
    "softmax 3072x512 fp32, tile (16, 512)":
        "CANN's simulated task gaps (2.8-7.3 us) against the chip's dispatch we charge (1.1 us a "
        "block), as for the add",
    "softmax 3072x512 fp32, tile (8, 512)":
        "384 tasks: CANN's time doubles with the task count (its one AICPU scheduler thread "
        "serialises dispatch), ours grows by one block dispatch (1.1 us) per wave of 48",
    "matmul 2048^3 fp16->fp32, 128/64/256":
        "CANN merges two tiles per task at 2048^3 (64 tasks, half our dispatches) and its model "
        "has no HBM contention, while ours shares the HBM and L2 between the 24 busy AICs",
}


def main(argv=None):
    args = parse_args(__doc__.splitlines()[0], argv)
    report_three_node(args)
    report_cann(args)


if __name__ == "__main__":
    main()
