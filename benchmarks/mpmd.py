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
