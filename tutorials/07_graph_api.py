"""Tutorial 07 -- the graph API: TensorGraph, tile_op, tile_map, compile, run, and debug mode.

    python tutorials/07_graph_api.py [--quick] [--reps N]

One idea: you describe WHAT each tile computes and how big a tile is; PyPTO works out how to cut
every input into tiles, writes the @pypto.jit kernel that loads them, calls your function and
stores the result, and launches it over the cores. The graph API is a front end: every kernel
it makes is an ordinary jit kernel (tutorials 01-06), compiled by the same compiler.
"""
import argparse
import textwrap

import numpy as np

import pypto
import pypto.tools.debug

# ----------------------------------------------------------------------------------------------
# 1. A graph, its inputs, a tile op, a tile map.
#
# A TensorGraph holds placeholders (inputs with a shape and dtype, no data yet) and nodes.
# A placeholder without name= is named after the variable it is assigned to, so below the
# inputs are "x" and "y" -- the keys module.run expects.
#
# @pypto.tile_op marks a function whose parameters are TILES (on-chip blocks of data) and whose
# body is the kernel language: operators, pypto.exp, pypto.matmul, reductions, ...
#
# pypto.tile_map(op, inputs, tile_size) adds a node: the output is cut into tiles of
# tile_size, and op runs once per tile. The last tile may be ragged: its loads are padded and
# its store writes only what lies inside the tensor, so any size works with any tile size.
# ----------------------------------------------------------------------------------------------


@pypto.tile_op
def axpy(a, b):
    return a * 2.0 + b


@pypto.tile_op
def silu(t):
    return t * pypto.sigmoid(t)


@pypto.tile_op
def matmul_tile(a_tile, b_tile):
    return pypto.matmul(a_tile, b_tile)


@pypto.tile_op
def row_softmax(t):
    e = pypto.exp(t - pypto.max(t, axis=1, keepdims=True))
    pypto.debug.breakpoint()          # debug mode stops here; compiled kernels drop it
    return e / pypto.sum(e, axis=1, keepdims=True)


def silu_graph(n, tile):
    """out = silu(2x + y): two tile maps, chained."""
    graph = pypto.TensorGraph(name="axpy_silu")
    x = graph.placeholder(shape=(n,), dtype=pypto.float32)
    y = graph.placeholder(shape=(n,), dtype=pypto.float32)
    s = pypto.tile_map(axpy, [x, y], tile_size=tile)
    pypto.tile_map(silu, [s], tile_size=tile)
    return graph


def reference(x, y):
    s = x * np.float32(2.0) + y
    return s / (np.float32(1.0) + np.exp(-s))


# ----------------------------------------------------------------------------------------------
# 2. How tile_map cuts the inputs.
#
# tile_map traces the tile op once on the WHOLE inputs (nothing runs: the compiler's frontend
# only builds its Tile IR) and reads two things off the trace:
#   * the output's shape and dtype: what the op returns on whole inputs;
#   * for every input axis, which output axis it reaches element by element. Such an axis
#     FOLLOWS that output axis (it is loaded at the tile's offset, with the tile's extent);
#     an axis that reaches no output axis -- a matmul's K, a reduced axis -- is loaded WHOLE.
# For matmul_tile(a (128, 64), b (64, 128)) with tile_size=(16, 16) that gives row panels
# a[16i:16i+16, :] and column panels b[:, 16j:16j+16]. And an axis the op combines (a sum, a
# max, the matmul's K) may only be cut if the tile holds it whole: row_softmax with (16, 16)
# tiles would normalise 16 columns at a time, so tile_map refuses it, naming tile_size.
# ----------------------------------------------------------------------------------------------


def show_tiling():
    graph = pypto.TensorGraph(name="simple_matmul")
    a = graph.placeholder(shape=(128, 64), dtype=pypto.float16)
    b = graph.placeholder(shape=(64, 128), dtype=pypto.float16)
    pypto.tile_map(matmul_tile, [a, b], tile_size=(16, 16))
    module = pypto.compile(graph, target="ascend910b", emit_ir=True)
    print("The tile graph (module.tile_graph_ir, first lines):")
    for line in module.tile_graph_ir.splitlines()[:12]:
        print("   ", line)
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal((128, 64)).astype(np.float16)
    b_np = rng.standard_normal((64, 128)).astype(np.float16)
    c = module.run(pypto.Context(), {"a": a_np, "b": b_np}).to_numpy()
    np.testing.assert_allclose(c, a_np.astype(np.float32) @ b_np.astype(np.float32),
                               rtol=1e-5, atol=1e-4)
    print(f"matmul result {c.dtype}{list(c.shape)} == numpy (fp16 in, fp32 accumulate)\n")

    graph = pypto.TensorGraph(name="softmax")
    x = graph.placeholder(shape=(50, 100), dtype=pypto.float32)
    try:
        pypto.tile_map(row_softmax, [x], tile_size=(16, 16))
    except ValueError as e:
        print(f"tile_size=(16, 16) is refused:\n    {e}\n")
    pypto.tile_map(row_softmax, [x], tile_size=(8, 100))     # whole rows: fine
    return graph


# ----------------------------------------------------------------------------------------------
# 3. Compile, fuse, run.
#
# pypto.compile(graph) writes one jit kernel per node -- or per CHAIN of nodes: with
# options={"tile_fusion": True} (the default) axpy's tile goes straight into silu in on-chip
# memory instead of through a global-memory intermediate. module.run(ctx, inputs) checks each
# input's name, shape and dtype, allocates the outputs and launches the kernels in order.
# ----------------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description="PyPTO tutorial 07: the graph API")
    parser.add_argument("--reps", type=int, default=5, help="timed repetitions (default 5)")
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    ctx = pypto.Context(device_id=0)

    softmax_graph = show_tiling()

    n, tile = 10_000, 1024
    graph = silu_graph(n, tile)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    inputs = {"x": pypto.Tensor.from_numpy(x, ctx), "y": pypto.Tensor.from_numpy(y, ctx)}
    fused = pypto.compile(graph, target="ascend910b")
    unfused = pypto.compile(graph, target="ascend910b", options={"tile_fusion": False})
    for module in (fused, unfused):
        out = module.run(ctx, inputs).to_numpy()
        np.testing.assert_allclose(out, reference(x, y), rtol=1e-5, atol=1e-6)
    print(f"silu(2x + y), n={n}, tile {tile}: {len(fused.kernels)} kernel fused "
          f"({fused.kernels[0].name}), {len(unfused.kernels)} kernels unfused; both == numpy")
    try:
        fused.run(ctx, {"x": inputs["x"]})
    except KeyError as e:
        print(f"a missing input is named: {e}")

    # --- debug mode: the same graph in the reference interpreter, stopping in every tile ----
    # pypto.debug.run interprets the graph (one block per tile) and calls the hook at each
    # breakpoint with the tile's index and its live tiles; the default hook prints a line and
    # opens pdb only when stdin is a terminal. The tiles are kept in pypto.debug.snapshots.
    m = rng.standard_normal((50, 100), dtype=np.float32)
    pypto.debug.set_hook(lambda snap: None)        # quiet: we look at the snapshots below
    pypto.debug.run(softmax_graph, {"x": m})
    pypto.debug.set_hook(None)
    last = pypto.debug.snapshots[-1]
    print(f"\ndebug run: {len(pypto.debug.snapshots)} breakpoint hits, one per tile; the last "
          f"is tile {last.tile} at {last.location.rsplit('/', 1)[-1]} with tiles "
          f"{ {k: v.shape for k, v in last.tiles.items()} } (rows past 50 are padding)")

    # --- timing against numpy ------------------------------------------------------------------
    sizes = [10_000, 1 << 16] if args.quick else [10_000, 1 << 16, 1 << 20, 1 << 22]
    print(f"\nsilu(2x + y) through the graph API (fused), median of {args.reps} after a warm-up")
    print(f"{'size':>9}  {'tiles':>6}  {'PyPTO':>12}  {'numpy':>12}  {'ratio':>7}")
    for n in sizes:
        x = rng.standard_normal(n, dtype=np.float32)
        y = rng.standard_normal(n, dtype=np.float32)
        module = pypto.compile(silu_graph(n, 4096))
        inputs = {"x": pypto.Tensor.from_numpy(x, ctx), "y": pypto.Tensor.from_numpy(y, ctx)}
        np.testing.assert_allclose(module.run(ctx, inputs).to_numpy(), reference(x, y),
                                   rtol=1e-5, atol=1e-6)
        t_pypto = pypto.testing.do_bench(lambda: module.run(ctx, inputs), reps=args.reps)
        t_numpy = pypto.testing.do_bench(lambda: reference(x, y), reps=args.reps)
        tiles = module.kernels[0].group.tiling.num_tiles
        print(f"{n:>9}  {tiles:>6}  {t_pypto * 1e3:9.1f} us  {t_numpy * 1e3:9.1f} us  "
              f"{t_pypto / t_numpy:7.2f}")
    print(textwrap.fill(
        'ratio = PyPTO / numpy: module.run adds the output allocation and one launch per '
        "kernel to the kernel's own time; numpy computes the chain in three passes over "
        'memory.', 96))


if __name__ == "__main__":
    main()
