"""The ordered pass pipeline. Each pass is ``Module -> Module``; the verifier runs after each,
and ``PYPTO_DUMP_IR=1`` prints the IR after every pass."""
from __future__ import annotations

import sys

from ... import envs
from ..verifier import verify
from .cse import common_subexpression_elimination
from .dce import dead_code_elimination
from .expand import fuse_expands
from .fuse_elementwise import fuse_elementwise
from .hoist import hoist_invariants
from .legalize import legalize
from .legalize_storage import legalize_storage
from .legalize_types import legalize_types
from .masks import narrow_masks
from .chunk_epilogue import plan_memory_in_chunks
from .memory_space import infer_memory_space
from .narrow import narrow_before_widening
from .persistent import persistent_grid
from .row_reduce import reduce_wide_rows_in_two_stages
from .sink_widening import sink_widening_casts
from .unbatch import unbatch

PIPELINE = (
    ("persistent-grid", persistent_grid),           # the persistent launch form, if asked
    ("unbatch", unbatch),
    ("narrow-before-widening", narrow_before_widening),   # max(abs(x.to(f32))) in float16
    ("common-subexpression-elimination", common_subexpression_elimination),
    ("dead-code-elimination", dead_code_elimination),
    ("legalize-storage", legalize_storage),
    ("legalize", legalize),
    ("legalize-types", legalize_types),
    ("narrow-masks", narrow_masks),                 # no block-sized tiles for a causal mask
    ("row-reduce-in-two-stages", reduce_wide_rows_in_two_stages),   # wide rows: one fold
    ("expand", fuse_expands),
    ("infer-memory-space", infer_memory_space),
    ("hoist-invariants", hoist_invariants),         # loop-invariant vector work out of loops
    ("sink-widening-casts", sink_widening_casts),   # wide copies live from first use
    ("fuse-elementwise", fuse_elementwise),
    ("plan-memory", plan_memory_in_chunks),       # epilogues in row chunks if need be
)


def run_pipeline(module, passes=PIPELINE):
    dump = envs.PYPTO_DUMP_IR.get() not in ("", "0")
    verify(module, "the frontend")
    if dump:
        print(f"// ----- after frontend -----\n{module}", file=sys.stderr)
    for name, fn in passes:
        module = fn(module)
        verify(module, name)
        if dump:
            print(f"// ----- after {name} -----\n{module}", file=sys.stderr)
    return module
