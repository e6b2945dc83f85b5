"""Tutorial 14 -- below the tile language: an Ascend C kernel in a PyPTO program; hand-written PTO.

    python tutorials/14_ascend_c_and_pto.py [--quick] [--reps N]

One idea: PyPTO programs can drop a level where a hot kernel needs it. Section 1 mixes an
operator written in C++ against pto-isa (the vendor's tile library that Ascend C operators are
built on) into a graph with pypto.call_ascend_c, the seed's `call_ascend_c(optimized_matmul,
[a, b])`: on this host it is compiled for pto-isa's CPU simulator and cached; for the NPU the
same declaration records the bisheng build and the launch. Section 2 takes the PTO program a
jit kernel compiles to, edits its instructions by hand and runs that with pypto.load_pto: the
hazard checker guards the edit, the cycle model prices it.

Both sections need PTO_ORACLE (pto-isa's headers and clang++ 19: bash ../shared/pto-oracle/
setup.sh) for what runs on the simulator; without it they print why and skip those parts.
"""
import argparse
import os
import re
import time

import numpy as np

import pypto
import pypto.language as pl
from pypto.ascend_c import library
from pypto.backends.ptoisa import toolchain
from pypto.compiler.pto.passes.hazards import HazardError

# ----------------------------------------------------------------------------------------------
# 1. The Ascend C kernel: C = A @ B (fp16 in, fp32 out) on the cube, one 64 x 64 block of C per
#    core, K in steps of 64: GM -> L1 (TLOAD), L1 -> L0A/L0B (TMOV), TMATMUL / TMATMUL_ACC into
#    L0C, then TSTORE through the FIX pipe. The flags order the pipes as on the chip.
# ----------------------------------------------------------------------------------------------

OPTIMIZED_MATMUL = """#include <pto/pto-inst.hpp>
using namespace pto;

constexpr int BM = 64, BN = 64, BK = 64;

__global__ AICORE void optimized_matmul(__gm__ half *a, __gm__ half *b, __gm__ float *c,
                                        int32_t m, int32_t n, int32_t k) {
    const int32_t tiles_n = n / BN;
    const int32_t row = int32_t(get_block_idx()) / tiles_n * BM;
    const int32_t col = int32_t(get_block_idx()) % tiles_n * BN;
    using Rows = Stride<1, 1, 1, DYNAMIC, 1>;
    using GA = GlobalTensor<half, Shape<1, 1, 1, BM, BK>, Rows>;
    using GB = GlobalTensor<half, Shape<1, 1, 1, BK, BN>, Rows>;
    using GC = GlobalTensor<float, Shape<1, 1, 1, BM, BN>, Rows>;
    Tile<TileType::Mat, half, BM, BK, BLayout::ColMajor, BM, BK, SLayout::RowMajor, 512> a1;
    Tile<TileType::Mat, half, BK, BN, BLayout::ColMajor, BK, BN, SLayout::RowMajor, 512> b1;
    TileLeft<half, BM, BK, BM, BK> a0;
    TileRight<half, BK, BN, BK, BN> b0;
    TileAcc<float, BM, BN, BM, BN> acc;
    TASSIGN(a1, 0x0);
    TASSIGN(b1, 0x10000);
    TASSIGN(a0, 0x0);
    TASSIGN(b0, 0x0);
    TASSIGN(acc, 0x0);
    for (int32_t kk = 0; kk < k; kk += BK) {
        GA ga(a + row * k + kk, Shape<1, 1, 1, BM, BK>(), Rows(k));
        GB gb(b + kk * n + col, Shape<1, 1, 1, BK, BN>(), Rows(n));
        TLOAD(a1, ga);
        TLOAD(b1, gb);
        set_flag(PIPE_MTE2, PIPE_MTE1, EVENT_ID0);
        wait_flag(PIPE_MTE2, PIPE_MTE1, EVENT_ID0);
        TMOV(a0, a1);
        TMOV(b0, b1);
        set_flag(PIPE_MTE1, PIPE_M, EVENT_ID0);
        wait_flag(PIPE_MTE1, PIPE_M, EVENT_ID0);
        if (kk == 0)
            TMATMUL(acc, a0, b0);
        else
            TMATMUL_ACC(acc, acc, a0, b0);
        set_flag(PIPE_M, PIPE_MTE2, EVENT_ID0);
        wait_flag(PIPE_M, PIPE_MTE2, EVENT_ID0);
    }
    set_flag(PIPE_M, PIPE_FIX, EVENT_ID0);
    wait_flag(PIPE_M, PIPE_FIX, EVENT_ID0);
    GC gc(c + row * n + col, Shape<1, 1, 1, BM, BN>(), Rows(n));
    TSTORE(gc, acc);
}
"""


def matmul_outputs(a, b):
    """The output rule: C's shape and dtype from the inputs' (TensorSpecs). The kernel computes
    whole 64 x 64 blocks, so the rule refuses other shapes rather than let it read past A."""
    if a.shape[1] != b.shape[0] or any(d % 64 for d in (*a.shape, b.shape[1])):
        raise ValueError(f"want (M, K) @ (K, N) with M, K, N multiples of 64, got "
                         f"{a.shape} @ {b.shape}")
    return [pypto.OutputSpec((a.shape[0], b.shape[1]), "float32")]


# The declaration: the signature (names, order, dtypes) is read from the __global__ function;
# the output rule's parameter names say which pointers are inputs; the grid and the scalars
# are rules of the inputs too.
optimized_matmul = pypto.ascend_c_kernel(
    OPTIMIZED_MATMUL, "optimized_matmul", outputs=matmul_outputs,
    grid=lambda a, b: (a.shape[0] // 64) * (b.shape[1] // 64),
    scalars={"m": lambda a, b: a.shape[0], "n": lambda a, b: b.shape[1],
             "k": lambda a, b: a.shape[1]})


@pypto.tile_op
def scale_to_half(x):
    return (x * 0.125).to(pypto.float16)


@pypto.tile_op
def relu(x):
    return pypto.maximum(x, 0.0)


def seed_graph(m, k, n):
    """The seed's pattern: a PyPTO node -> the Ascend C matmul -> a PyPTO node."""
    graph = pypto.TensorGraph("mixed")
    a = graph.placeholder((m, k), pypto.float32)
    b = graph.placeholder((k, n), pypto.float16)
    a16 = pypto.tile_map(scale_to_half, [a], (32, k))
    c = pypto.call_ascend_c(optimized_matmul, [a16, b])
    pypto.tile_map(relu, [c], (32, 64))
    return graph


def best_ms(fn, reps):
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def tools_missing():
    try:
        library.tools("optimized_matmul")
        return None
    except toolchain.ToolMissing as e:
        return str(e)


def section_ascend_c(quick, reps, missing):
    print("== 1. An Ascend C kernel in a PyPTO program ==")
    print(optimized_matmul)
    print("for the NPU (recorded, not run: there is no bisheng here):")
    print("  build:", optimized_matmul.npu_build.command_line)
    print("  launcher:", optimized_matmul.npu_build.launcher_source.splitlines()[0])
    launch = optimized_matmul.npu_launch(pypto.ascend_c.TensorSpec("a", (128, 256), pypto.float16),
                                         pypto.ascend_c.TensorSpec("b", (256, 192), pypto.float16))
    print(f"  launch for (128, 256) @ (256, 192): block dim {launch.block_dim}: {launch.call}")
    try:
        optimized_matmul(np.zeros((100, 64), np.float16), np.zeros((64, 64), np.float16))
    except pypto.ascend_c.OutputRuleError as e:
        print(f"a shape the kernel cannot take is refused before anything runs:\n  {e}")
    if missing:
        print(f"skipped running it: {missing}")
        print_table([])
        return
    rng = np.random.default_rng(0)
    shapes = [(128, 256, 192)] if quick else [(128, 256, 192), (256, 512, 256)]
    rows = []
    for m, k, n in shapes:
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float16)
        a16 = (a * np.float32(0.125)).astype(np.float16)
        t0 = time.perf_counter()
        c = pypto.call_ascend_c(optimized_matmul, [a16, b])    # built (or read from the cache)
        first = time.perf_counter() - t0
        ref = a16.astype(np.float64) @ b.astype(np.float64)
        np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-3)
        module = pypto.compile(seed_graph(m, k, n))
        out = module.run({"a": a, "b": b}).to_numpy()
        np.testing.assert_allclose(out, np.maximum(ref, 0), rtol=1e-5, atol=1e-3)
        if (m, k, n) == shapes[0]:
            print(f"first call {first:.2f} s (compiled for pto-isa's CPU simulator, or read from "
                  "the disk cache); equal to numpy within fp32 accumulation")
            print(f"the graph's launch steps: {[type(s).__name__ for s in module.steps]}")
            print("\n".join(ln for ln in module.tile_graph_ir.splitlines()
                            if "call_ascend_c" in ln or "launch: call_" in ln))
        inputs = {"a": a, "b": b}
        rows.append((f"{m}x{k}x{n}",
                     best_ms(lambda: pypto.call_ascend_c(optimized_matmul, [a16, b]), reps),
                     best_ms(lambda: module.run(inputs), reps),
                     best_ms(lambda: np.maximum((a * np.float32(0.125)).astype(np.float16)
                                                .astype(np.float32) @ b.astype(np.float32), 0),
                             reps)))
    print_table(rows)


def print_table(rows):
    print(f"\n{'shape':>12} {'call_ascend_c':>14} {'graph':>9} {'numpy':>9} {'graph/numpy':>12}")
    for shape, alone, graph, ref in rows:
        print(f"{shape:>12} {alone:>11.2f} ms {graph:>6.2f} ms {ref:>6.2f} ms {graph / ref:>11.1f}x")
    if not rows:
        print(f"{'(not run)':>12}")
    print("(host times, best of reps. The Ascend C kernel runs on pto-isa's CPU simulator, which "
          "executes each tile instruction as plain C++ loops: it checks the kernel's meaning, "
          "not its speed; the NPU time of a C++ kernel is not modelled, PyPTO has no PTO "
          "program for it.)\n")


# ----------------------------------------------------------------------------------------------
# 2. Hand-written PTO: start from what a jit kernel compiles to, tune it by hand, load it.
# ----------------------------------------------------------------------------------------------

N, BLOCK = 4096, 1024


@pypto.jit
def axpy(x, y, out, a: float, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    t = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    u = pl.load(y, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(pid * BLOCK,), value=t * a + u)


def without_fillpads(text):
    """The hand edit: a loaded tile is padded (tfillpad) in case the window runs past the
    tensor's end. A loaded .pto program is only ever launched on tensors of exactly its declared
    extents (4096 here, 4 whole blocks), so no window does: drop every tfillpad and its view."""
    return "".join(ln for ln in text.splitlines(True)
                   if "pto.tfillpad" not in ln and not re.search(r"%vec\d+\.pv\d+f = ", ln))


def section_pto(missing):
    print("== 2. Hand-written PTO with pypto.load_pto ==")
    rng = np.random.default_rng(1)
    x, y = rng.random(N, dtype=np.float32), rng.random(N, dtype=np.float32)
    text = axpy.compile(x, y, np.empty_like(x), 2.0, BLOCK=BLOCK).asm["pto"]
    edited = without_fillpads(text)
    dropped = len(text.splitlines()) - len(edited.splitlines())
    print(f"axpy's .pto: {len(text.splitlines())} lines; the edit drops {dropped}:")
    print("\n".join("  - " + ln.strip()[:100] for ln in text.splitlines()
                    if ln not in edited.splitlines()))
    original, tuned = pypto.load_pto(text), pypto.load_pto(edited)
    print(f"loaded: {tuned.params}")
    out0, out1 = np.zeros_like(x), np.zeros_like(x)
    with pypto.Profiler() as prof:
        original[(N // BLOCK,)](x, y, out0, 2.0)
        tuned[(N // BLOCK,)](x, y, out1, 2.0)
    np.testing.assert_array_equal(out1, x * np.float32(2) + y)
    np.testing.assert_array_equal(out1, out0)
    before, after = prof.kernels
    print(f"modelled NPU time: {before.cycles:.0f} -> {after.cycles:.0f} cycles "
          f"({after.npu_time_ms * 1e3:.3f} us, {100 * (1 - after.cycles / before.cycles):.1f}% "
          "less: the vector pipe no longer pads); results bit-identical")
    broken = edited.replace("pto.wait_flag", "// pto.wait_flag", 1)
    try:
        pypto.load_pto(broken)
    except HazardError as e:
        print("an edit that drops a flag is refused by the hazard checker:")
        print("\n".join("  " + ln for ln in str(e).splitlines()[:3]))
    if missing:
        print(f"skipped the pto-isa engine run: {missing}")
        return
    out2 = np.zeros_like(x)
    pypto.load_pto(edited, engine="pto-isa")[(N // BLOCK,)](x, y, out2, 2.0)
    np.testing.assert_array_equal(out2, out1)
    print("on the pto-isa engine (ptoas -> pto-isa's CPU simulator): bit-identical as well")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args(argv)
    missing = tools_missing()
    section_ascend_c(args.quick, max(1, args.reps), missing)
    section_pto(missing if missing or os.environ.get("PTO_ORACLE") else
                "PTO_ORACLE is not set (ptoas, for the pto-isa engine)")


if __name__ == "__main__":
    main()
