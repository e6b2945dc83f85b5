"""Tutorial 15 -- MPMD: the Execution Graph, tiles scheduled by their dependencies.

    python tutorials/15_mpmd.py [--quick] [--reps N]

(Issue 16 asks for this as tutorial 08, the number the tutorials skipped then; 08 is now the
safety-nets tutorial, so MPMD is 15.)

One idea: a graph is not a list of kernels. pypto.compile keeps four levels -- the Tensor Graph
you wrote, the Tile Graph (how each node is cut), the Block Graph (the kernels: fused nodes,
grids) and the Execution Graph, whose tasks are (node, tile) pairs and whose edges say which
tile reads which. Run in order, every kernel waits for the whole previous one; run MPMD, a
softmax tile starts as soon as the GELU tile under it is done, and the cube's matmul tiles
overlap the vector cores' GELU tiles.
"""
import argparse
import os
import tempfile
import time

import numpy as np

import pypto

# ----------------------------------------------------------------------------------------------
# 1. Three nodes: a matmul on the cube, bias + GELU and a row softmax on the vector cores.
#    The tiles differ per node (GELU (32, 256), softmax whole rows), so nothing fuses and the
#    Execution Graph has real edges between nodes.
# ----------------------------------------------------------------------------------------------


@pypto.tile_op
def matmul(a, b):
    return pypto.matmul(a, b)


@pypto.tile_op
def bias_gelu(x, bias):
    y = x + bias
    return 0.5 * y * (1.0 + pypto.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))


@pypto.tile_op
def softmax(t):
    e = pypto.exp(t - pypto.max(t, axis=1, keepdims=True))
    return e / pypto.sum(e, axis=1, keepdims=True)


def build(m, k, n):
    graph = pypto.TensorGraph(name="mpmd")
    a = graph.placeholder((m, k), pypto.float16)
    b = graph.placeholder((k, n), pypto.float16)
    bias = graph.placeholder((1, n), pypto.float32)
    c = pypto.tile_map(matmul, [a, b], tile_size=(64, 128))
    h = pypto.tile_map(bias_gelu, [c, bias], tile_size=(32, 256))
    pypto.tile_map(softmax, [h], tile_size=(16, n))
    return graph


def reference(x):
    y = x["a"].astype(np.float32) @ x["b"].astype(np.float32) + x["bias"]
    y = 0.5 * y * (1 + np.tanh(0.7978845608 * (y + 0.044715 * y ** 3)))
    e = np.exp(y - y.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def best_time(fn, reps):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args(argv)
    m, k, n = (512, 128, 256) if args.quick else (1536, 256, 256)
    module = pypto.compile(build(m, k, n))

    # ------------------------------------------------------------------------------------------
    # 2. The four levels. tile_graph_ir also lists every kernel's source and Tile IR; its node
    #    part is printed here. The Execution Graph prints each task and what it waits for, and
    #    exports Graphviz text (dot -Tsvg mpmd.dot > mpmd.svg).
    # ------------------------------------------------------------------------------------------
    print(module.tensor_graph_ir)
    print(module.tile_graph_ir.split("\nkernel ")[0])
    print(module.block_graph_ir)
    print(module.execution_graph.text(limit=3))
    dot = os.path.join(tempfile.gettempdir(), "mpmd.dot")
    with open(dot, "w") as f:
        f.write(module.execution_graph.to_dot())
    print(f"Graphviz: {dot} ({len(module.execution_graph.edges)} edges)\n")

    # ------------------------------------------------------------------------------------------
    # 3. The modelled NPU: the same DAG under each parallel_strategy. data_parallel is the old
    #    way (each kernel an SPMD launch after the previous one, a launch cost each); mpmd is
    #    one launch whose tasks go to any free core of their kind; pipelined gives each node
    #    cores of its own. Every task pays a pickup on its core (0.8 us, measured on the
    #    chip; targets.CostModel says where each number comes from).
    # ------------------------------------------------------------------------------------------
    print(f"{'strategy':<16}{'NPU (model)':>14}{'launches':>10}")
    for s in ("data_parallel", "mpmd", "pipelined", "auto"):
        d = module.model(s)
        print(f"{d.strategy:<16}{d.time_us:>11.2f} us{d.launches:>10}")
    print()
    mp = module.model("mpmd")
    print(mp.bubbles().text())
    trace = os.path.join(tempfile.gettempdir(), "mpmd_trace.json")
    mp.export_chrome_trace(trace)
    print(f"Chrome trace of the tasks by node and core: {trace} (ui.perfetto.dev)\n")

    # ------------------------------------------------------------------------------------------
    # 4. The host: module.run(parallel_strategy="mpmd") hands ready tasks to the host threads
    #    as their inputs complete. The result is bit-identical to the in-order run, and the
    #    recorded task order shows a GELU tile starting before the matmul has finished.
    # ------------------------------------------------------------------------------------------
    rng = np.random.default_rng(0)
    x = {"a": (rng.standard_normal((m, k)) * 0.1).astype(np.float16),
         "b": (rng.standard_normal((k, n)) * 0.1).astype(np.float16),
         "bias": rng.standard_normal((1, n)).astype(np.float32)}
    in_order = module.run(x, parallel_strategy="data_parallel").to_numpy()
    mpmd = module.run(x, parallel_strategy="mpmd").to_numpy()
    print(f"max error vs numpy: {np.abs(mpmd - reference(x)).max():.2e}; MPMD and in order "
          f"{'bit-identical' if np.array_equal(mpmd, in_order) else 'DIFFER'}")
    order = module.last_task_order
    if order is not None:
        mm = module.steps[0]
        last_mm = max(i for i, (w, t) in enumerate(order) if w == "end" and t.step is mm)
        first_gelu = next(i for i, (w, t) in enumerate(order)
                          if w == "start" and t.step is module.steps[1])
        print(f"task order: the first GELU tile started at event {first_gelu}, the last "
              f"matmul tile ended at event {last_mm} of {len(order)}")
    else:
        print("task order: not recorded (one host thread: the run was in order)")
    t_order = best_time(lambda: module.run(x, parallel_strategy="data_parallel"), args.reps)
    t_mpmd = best_time(lambda: module.run(x, parallel_strategy="mpmd"), args.reps)
    print(f"\n{'run':<12}{'host':>12}{'NPU (model)':>14}")
    print(f"{'in order':<12}{t_order * 1e3:>9.2f} ms{module.model('data_parallel').time_us:>11.2f} us")
    print(f"{'MPMD':<12}{t_mpmd * 1e3:>9.2f} ms{mp.time_us:>11.2f} us")
    print("(host: best of --reps runs on this machine's threads; NPU: the cycle model)")


if __name__ == "__main__":
    main()
