"""UB planning for double buffering (issue 33 item 1): a widening cast is moved to its first
reader (compiler/passes/sink_widening.py) and a double-buffered loop's loads are planned with
their second buffers (passes/memory_plan._reserve), so SwiGLU's 8 x 1376 fp16 tile runs
double-buffered in the persistent form. Before, it needed 198,144 bytes of a 188,416-byte UB
and ran single-buffered."""
import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.compiler.ir import GRID_PARAMS, Module
from pypto.compiler.passes import PIPELINE, run_pipeline

from ..engines.tools import needs_tools, retarget
from .pto.corpus import _bench


STREAMING = _bench("streaming")             # benchmarks/streaming.py: its kernels
swiglu, rms_norm = STREAMING.swiglu, STREAMING.rms_norm
_reference = STREAMING._swiglu_ref


def _persistent(kernel, shape, bm=8, bn=1376):
    g = np.zeros(shape, np.float16)
    return kernel._get_kernel(kernel._bind((g, g, g.copy()), {"BM": bm, "BN": bn}),
                              persistent=True)[0]


def test_a_widening_cast_moves_to_its_first_reader():
    from pypto.compiler.ast_to_ir import build_function
    from pypto.runtime.specialize import spec_key, specialise
    g = np.zeros((16, 1376), np.float16)
    bound = swiglu._bind((g, g, g.copy()), {"BM": 8, "BN": 1376})
    spec_args, _, _ = specialise(swiglu, spec_key(swiglu, bound), bound)
    fn = build_function(swiglu.source, spec_args, "swiglu")
    upto = [p for p in PIPELINE if p[0] != "plan-memory"]
    ops = [op for op in run_pipeline(Module(fn, pypto.get_target("ascend910b1")), upto).kernel.body.ops]
    names = [(op.name, op.attrs.get("op")) for op in ops]
    casts = [i for i, n in enumerate(names) if n[0] == "tile.cast"]
    division = names.index(("tile.binary", "div"))
    assert casts[1] == division + 1          # u's widening waits for the multiply's turn


def test_swiglu_8x1376_runs_double_buffered_in_the_persistent_form():
    kernel = _persistent(swiglu, (64, 2752))
    assert kernel.metadata["persistent"] == 2
    assert kernel.metadata["buffer_bytes"]["vec"] <= 188416
    assert kernel.asm["pto"].count("_pong") >= 2


@needs_tools
def test_the_double_buffered_swiglu_gives_numpys_result_on_pto_isa():
    """The persistent double-buffered program (what the chip runs) on pto-isa's simulator,
    two blocks looping over three programs each, against numpy."""
    from pypto.backends.ptoisa.engine import load
    sim = retarget(swiglu, "pto-isa")
    rng = np.random.default_rng(0)
    g, u = (rng.standard_normal((24, 2752)).astype(np.float16) for _ in range(2))
    out = np.zeros_like(g)
    kernel = sim._get_kernel(sim._bind((g, u, out), {"BM": 8, "BN": 1376}), persistent=True)[0]
    assert kernel.metadata["persistent"] == 2
    args = {"g": g, "u": u, "out": out, **dict(zip(GRID_PARAMS, (3, 2, 1)))}
    load(kernel, kernel.cache_key).launch((2,), {n: args[n] for n, _, _ in
                                                 kernel.runtime_params})
    np.testing.assert_allclose(out.astype(np.float32), _reference(g, u).astype(np.float32),
                               rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("bm, bn", [(8, 1376), (4, 1376)])
def test_the_host_result_is_unchanged(bm, bn):
    rng = np.random.default_rng(1)
    g, u = (rng.standard_normal((64, 2752)).astype(np.float16) for _ in range(2))
    out = np.zeros_like(g)
    swiglu[(64 // bm, 2752 // bn)](g, u, out, BM=bm, BN=bn)
    np.testing.assert_allclose(out.astype(np.float32), _reference(g, u).astype(np.float32),
                               rtol=2e-3, atol=2e-3)


def _double_buffered_loop(kernel, args, meta):
    """The persistent form's PTO program, built with its programs' loop double-buffered, and
    that loop."""
    from pypto.compiler.ast_to_ir import build_function
    from pypto.compiler.pipeline import build_program
    from pypto.compiler.pto.program import For, Inst, walk_insts
    from pypto.runtime.specialize import spec_key, specialise
    bound = kernel._bind(args, meta)
    spec_args, tensor_specs, _ = specialise(kernel, spec_key(kernel, bound), bound)
    make = lambda: build_function(kernel.source, spec_args, kernel.fn.__name__)
    _, program, _ = build_program(make(), tensor_specs, pypto.get_target("ascend910b1"),
                                  persistent=2, fresh=make)
    (loop,) = [n for _, body in program.parts for n in body if isinstance(n, For)]
    assert loop.stages == 2
    return program, [i for i in walk_insts(loop.body) if isinstance(i, Inst)]


def _sharing(tiles, others, target):
    """The tiles of ``others`` whose bytes overlap one of ``tiles``, but for the tile itself
    and its views (the same bytes: a treshape of a wide row, passes/row_reduce.py)."""
    from pypto.compiler.pto.isa import tile_extent
    spans = [tile_extent(t, target) for t in tiles]
    return [o for o in others if any(
        b == ob and s < oe and os_ < e and (s, e) != (os_, oe)
        for b, s, e in spans for ob, os_, oe in [tile_extent(o, target)])]


@pytest.mark.parametrize("kernel, args, meta, stores_kept", [
    (rms_norm, (np.zeros((256, 4096), np.float16), np.zeros((1, 4096), np.float16),
                np.zeros((256, 4096), np.float16)), {"BM": 2, "N": 4096}, True),
    # its output too would not fit beside two pairs of load buffers: only the loads keep theirs
    (swiglu, (np.zeros((64, 2752), np.float16),) * 2 + (np.zeros((64, 2752), np.float16),),
     {"BM": 8, "BN": 1376}, False)])
def test_a_double_buffered_loop_keeps_its_loads_and_stores_to_themselves(kernel, args, meta,
                                                                        stores_kept):
    """No temporary of the loop takes the bytes of a prefetched load's buffers (the prefetch
    would overwrite it) nor, where the UB allows, of a stored tile (the vector unit would
    wait for the store to finish: RMSNorm 8192 x 4096 was modelled 91.7 us, now 90.9)."""
    from pypto.compiler.pto.program import Tile
    program, insts = _double_buffered_loop(kernel, args, meta)
    target = program.target
    used = {id(x): x for i in insts for x in i.ins + i.outs if isinstance(x, Tile)}
    loads = [i.outs[0] for i in insts if i.op == "tload"]
    assert loads and not _sharing(loads, used.values(), target)
    stored = [i.ins[0] for i in insts if i.op == "tstore"]
    assert bool(_sharing(stored, used.values(), target)) != stores_kept


@pypto.jit(target="ascend910b1")
def _gemm(a, b, c, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    pm, pn = pl.program_id(0), pl.program_id(1)
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in pl.range(0, a.shape[1], BK, num_stages=2):
        acc = pl.matmul(pl.load(a, offsets=(pm * BM, k), shape=(BM, BK)),
                        pl.load(b, offsets=(k, pn * BN), shape=(BK, BN)), acc=acc)
    pl.store(c, offsets=(pm * BM, pn * BN), value=acc)


def test_a_loop_double_buffered_inside_the_programs_loop_keeps_two_buffers():
    """The programs' loop prefetches the next program's first K step (a copy of the K loop's
    load) into a buffer of its own. It took the bytes the K loop had reserved for its second
    buffer, so in every other program the K loop's two buffers were one (GEMM 3072^3 was
    modelled at 265.5 us; 214.0 with two)."""
    from pypto.compiler.pto.isa import tile_extent
    from pypto.compiler.pto.program import For, Inst, walk_insts
    a = np.zeros((256, 512), np.float16)
    program, insts = _double_buffered_loop(_gemm, (a, a.T.copy(), np.zeros((256, 256),
                                                   np.float32)), {"BM": 128, "BN": 256, "BK": 64})
    k_loops = [n for n in walk_insts(program.body) if isinstance(n, For) and
               not any(isinstance(i, For) for i in walk_insts(n.body))]
    assert len(k_loops) == 2                  # one per half of the unrolled programs' loop
    for loop in k_loops:
        loads = {tile_extent(i.outs[0], program.target)
                 for i in walk_insts(loop.body) if isinstance(i, Inst) and i.op == "tload"}
        assert len(loads) == 4                # A and B, ping and pong
        spans = sorted(loads)
        assert all(s1[2] <= s2[1] for s1, s2 in zip(spans, spans[1:]))


@needs_tools
def test_the_persistent_gemm_gives_numpys_result_on_pto_isa():
    """Three blocks over eight programs: every block runs both halves of the programs' loop,
    with the K loop's two buffers in each."""
    from pypto.backends.ptoisa.engine import load
    sim = retarget(_gemm, "pto-isa")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 256)).astype(np.float16)
    b = rng.standard_normal((256, 512)).astype(np.float16)
    c = np.zeros((512, 512), np.float32)
    kernel = sim._get_kernel(sim._bind((a, b, c), {"BM": 128, "BN": 256, "BK": 64}),
                             persistent=True)[0]
    assert kernel.metadata["persistent"] == 2
    args = {"a": a, "b": b, "c": c, **dict(zip(GRID_PARAMS, (4, 2, 1)))}
    load(kernel, kernel.cache_key).launch((3,), {n: args[n] for n, _, _ in kernel.runtime_params})
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-5,
                               atol=1e-4)
