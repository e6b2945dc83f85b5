"""The profiler (pypto.Profiler, pypto.profile, the module-level enable_profiling API) and
memory analysis (pypto.memory.analyze), against the real cycle model."""
import json

import numpy as np
import pytest

import pypto
from pypto.target import UB_USABLE
import pypto.language as pl
from pypto import profile
from pypto.runtime import hooks
from pypto.backends.ascend.model.launch import model_launch
from pypto.compiler.pto.reader import parse_program

from .kernels import mm_bias_sigmoid

PIPES = {"MTE2", "MTE1", "M", "V", "MTE3", "FIX", "S"}
BLOCK = 1024


@pypto.jit
def add(x, y, out, n, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    a = pl.load(x, [pid * BLOCK], [BLOCK])
    b = pl.load(y, [pid * BLOCK], [BLOCK])
    pl.store(out, [pid * BLOCK], pl.where(pl.arange(0, BLOCK) < n, a + b, 0.0))



def arrays(blocks, dtype=np.float32):
    rng = np.random.default_rng(blocks)
    x = rng.standard_normal(blocks * BLOCK).astype(dtype)
    y = rng.standard_normal(blocks * BLOCK).astype(dtype)
    return x, y, np.zeros_like(x)


@pytest.fixture(autouse=True)
def no_profiler_left_running():
    yield
    pypto.disable_profiling()
    assert hooks.ACTIVE == [], "a test left a profiler running"


def test_profiler_records_each_launch_with_host_and_modelled_time_labelled():
    x, y, out = arrays(4)
    add[(4,)](x, y, out, x.size, BLOCK=BLOCK)            # compiled before profiling
    with pypto.Profiler() as prof:
        add[(4,)](x, y, out, x.size, BLOCK=BLOCK)
        add[(2, 1)](x, y, out, x.size, BLOCK=BLOCK)
    np.testing.assert_allclose(out, x + y)
    assert [(k.name, k.grid) for k in prof.kernels] == [("add", (4,)), ("add", (2, 1))]
    for k in prof.kernels:
        assert k.mode == "compiled" and k.target == pypto.get_target("ascend910b1").name
        assert k.host_time_ms > 0 and k.npu_time_ms > 0 and k.cycles > 0
        assert 0 < k.core_utilization <= 1 and k.bound_pipe in PIPES
    text = prof.summary()
    assert "add" in text and "(4,)" in text and "(2, 1)" in text
    assert "measured" in text and "modelled" in text and "ascend910b1" in text
    assert "host us" in text and "NPU us" in text and "bound by" in text


def test_profiler_numbers_agree_with_model_launch():
    x, y, out = arrays(6)
    with pypto.Profiler() as prof:
        add[(6,)](x, y, out, 5000, BLOCK=BLOCK)
    compiled = add.compile(x, y, out, 5000, BLOCK=BLOCK)
    model = model_launch(parse_program(compiled.asm["pto"]), (6,),
                         {"x": x, "y": y, "out": out, "n": 5000})
    (k,) = prof.kernels
    assert k.cycles == pytest.approx(model.cycles)
    assert k.npu_time_ms == pytest.approx(model.time_ms)
    assert k.core_utilization == pytest.approx(model.core_utilization)
    assert prof.core_utilization == pytest.approx(model.core_utilization)
    assert k.cores == model.cores and k.pipe_busy == pytest.approx(model.pipe_busy)
    assert k.bound_pipe == model.bound_pipe()
    # per block: one tile entry per modelled block, the same spans and instruction times
    assert len(prof.tiles) == len(model.blocks) == 6
    ms = model.time_ms / model.cycles
    for tile, block in zip(prof.tiles, model.blocks):
        assert tile.name == f"add[{block.pid[0]}]" and tile.core == block.core
        assert tile.time_ms == pytest.approx((block.end - block.start) * ms)
        compute = sum(r.end - r.start for r in block.records if r.kind == "compute")
        memory = sum(r.end - r.start for r in block.records if r.kind == "memory")
        assert tile.compute_time == pytest.approx(compute * ms)
        assert tile.memory_time == pytest.approx(memory * ms)
        assert tile.flops == sum(r.flops for r in block.records) > 0
    # per instruction: what the model's records add up to
    ops = {op.name: op for op in prof.operations}
    records = [r for b in model.blocks for r in b.records]
    assert set(ops) == {r.name for r in records} >= {"tload", "tstore"}
    assert ops["tload"].count == 12 and ops["tload"].memory_time == pytest.approx(
        sum(r.end - r.start for r in records if r.name == "tload") * ms)
    assert ops["tload"].compute_time == 0


def test_core_utilization_of_one_block_is_one_core_of_48():
    x, y, out = arrays(1)
    with pypto.Profiler() as prof:
        add[(1,)](x, y, out, x.size, BLOCK=BLOCK)
    assert prof.kernels[0].cores == 48        # 910B1's vector cores
    block = prof.kernels[0].model.blocks[0]   # after the launch and dispatch costs
    assert prof.core_utilization == pytest.approx(block.cycles / (48 * prof.kernels[0].cycles))
    assert prof.core_utilization < 1 / 48


def test_core_utilization_of_a_large_balanced_grid_is_high():
    blocks = 48 * 8
    x, y, out = arrays(blocks)
    in_waves = pypto.jit(launch_form="grid")(add.fn)
    with pypto.Profiler() as prof:
        in_waves[(blocks,)](x, y, out, x.size, BLOCK=BLOCK)
        add[(blocks,)](x, y, out, x.size, BLOCK=BLOCK)
    waves, persistent = prof.kernels
    # 8 waves, each block paying its dispatch: high only beside one block's 1/48
    assert waves.core_utilization > 8 / 48
    tiles = [t for t in prof.tiles if t.launch == 0]
    assert len(tiles) == blocks and {t.core for t in tiles} == set(range(48))
    # the persistent form: one block per core running its 8 programs back to back
    assert persistent.grid == (48,) and persistent.blocks == 48
    assert persistent.core_utilization > waves.core_utilization
    assert persistent.npu_time_ms < waves.npu_time_ms


def test_utilization_over_several_launches_weights_them_by_makespan():
    x, y, out = arrays(48)
    with pypto.Profiler() as prof:
        add[(1,)](x, y, out, x.size, BLOCK=BLOCK)
        add[(48,)](x, y, out, x.size, BLOCK=BLOCK)
    one, full = prof.kernels
    busy = sum(k.core_utilization * k.cores * k.cycles for k in (one, full))
    assert prof.core_utilization == pytest.approx(
        busy / sum(k.cores * k.cycles for k in (one, full)))
    assert one.core_utilization < prof.core_utilization < full.core_utilization


@pytest.mark.heavy
def test_chrome_trace_has_a_process_per_core_and_a_track_per_pipe(tmp_path):
    x, y, out = arrays(4)
    a = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float16)
    b = np.random.default_rng(1).standard_normal((64, 64)).astype(np.float16)
    bias = np.zeros((1, 64), np.float32)
    c = np.zeros((64, 64), np.float32)
    with pypto.Profiler() as prof:
        add[(3,)](x, y, out, x.size, BLOCK=BLOCK)
        mm_bias_sigmoid[(2, 2)](a, b, bias, c, 64, BM=32, BN=32, BK=32)
    path = prof.export_chrome_trace(tmp_path / "trace.json")
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    meta = [e for e in events if e["ph"] == "M"]
    spans = [e for e in events if e["ph"] == "X"]
    assert {e["ph"] for e in events} == {"M", "X"}
    processes = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in meta
               if e["name"] == "thread_name"}
    # every span sits on a named core process and a named pipe track
    assert {e["pid"] for e in spans} == set(processes)
    assert {(e["pid"], e["tid"]) for e in spans} == set(threads)
    assert set(threads.values()) <= PIPES and {"MTE2", "V", "MTE3", "M", "FIX"} <= \
        set(threads.values())
    for e in spans:
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert e["ts"] >= 0 and e["dur"] >= 0 and e["name"] and e["cat"] in ("compute", "memory")
        assert threads[(e["pid"], e["tid"])] == e["args"]["pipe"]
    # the vector launch ran on AIV cores 0-2; the mixed kernel's 4 blocks on clusters 0-3,
    # each an AIC (cube part: M, MTE1, FIX...) and the cluster's two AIVs, 2n and 2n + 1 as
    # the chip numbers them (its vector epilogue, half the rows each: passes/split_rows.py)
    cube = profile.CUBE_PID_BASE
    assert processes == {**{n: f"AIV core {n}" for n in range(8)},
                         **{cube + n: f"AIC core {n}" for n in range(4)}}
    assert {threads[(cube, t)] for p, t in threads if p == cube} >= {"M", "MTE1", "FIX"}
    # launches laid end to end: the second starts after the first's makespan
    us_first = prof.kernels[0].npu_time_ms * 1e3
    first = [e for e in spans if e["args"]["launch"] == 0]
    second = [e for e in spans if e["args"]["launch"] == 1]
    assert max(e["ts"] + e["dur"] for e in first) <= us_first + 1e-9
    assert min(e["ts"] for e in second) >= us_first - 1e-9
    # one pipe runs one instruction at a time: no two spans of a track overlap
    for track in threads:
        row = sorted((e["ts"], e["ts"] + e["dur"]) for e in spans
                     if (e["pid"], e["tid"]) == track)
        assert all(a_end <= b_start + 1e-9 for (_, a_end), (b_start, _) in zip(row, row[1:]))


def test_module_level_profiling_api():
    x, y, out = arrays(2)
    add[(2,)](x, y, out, x.size, BLOCK=BLOCK)
    pypto.enable_profiling()
    add[(2,)](x, y, out, x.size, BLOCK=BLOCK)
    pypto.disable_profiling()
    add[(2,)](x, y, out, x.size, BLOCK=BLOCK)            # not recorded
    report = pypto.get_profiling_report()
    assert len(report.kernels) == 1
    ops = {op.name: op for op in report.operations}
    assert {"tload", "tstore"} <= set(ops)
    assert ops["tload"].memory_time > 0 and ops["tload"].compute_time == 0
    compute = [op for op in report.operations if op.compute_time > 0]
    assert compute and all(op.pipe in ("V", "M", "S") for op in compute)
    assert "tload" in report.summary() and "modelled" in report.summary()
    # a fresh enable starts a new report
    pypto.enable_profiling()
    assert pypto.get_profiling_report().kernels == []
    pypto.disable_profiling()


def test_start_stop_report_and_tiles_as_in_the_seed():
    assert pypto.profile.Profiler is pypto.Profiler
    x, y, out = arrays(3)
    prof = pypto.profile.Profiler()
    prof.start()
    add[(3,)](x, y, out, x.size, BLOCK=BLOCK)
    prof.stop()
    report = prof.report()
    assert [t.name for t in report.tiles] == ["add[0]", "add[1]", "add[2]"]
    for tile in report.tiles:
        assert tile.time_ms > 0 and tile.flops > 0
        assert tile.memory_time > 0 and tile.compute_time > 0
    assert report.core_utilization == prof.core_utilization


def test_an_inactive_profiler_records_nothing():
    x, y, out = arrays(2)
    prof = pypto.Profiler()
    add[(2,)](x, y, out, x.size, BLOCK=BLOCK)
    assert prof.kernels == [] and not prof.active
    with prof:
        add[(2,)](x, y, out, x.size, BLOCK=BLOCK)
    add[(2,)](x, y, out, x.size, BLOCK=BLOCK)
    assert len(prof.kernels) == 1
    assert prof.core_utilization > 0
    assert "no kernel launches" in pypto.Profiler().summary()


def test_nested_profilers_both_record():
    x, y, out = arrays(2)
    with pypto.Profiler() as outer:
        add[(2,)](x, y, out, x.size, BLOCK=BLOCK)
        with pypto.Profiler() as inner:
            add[(1,)](x, y, out, x.size, BLOCK=BLOCK)
    assert [k.grid for k in outer.kernels] == [(2,), (1,)]
    assert [k.grid for k in inner.kernels] == [(1,)]


def test_the_model_runs_when_the_profile_is_read_and_once_per_identical_launch(monkeypatch):
    calls = []
    import pypto.backends.ascend.model.launch as cm
    original = cm.model_launch

    def counting(*args, **kwargs):
        calls.append(args[1])
        return original(*args, **kwargs)

    monkeypatch.setattr(cm, "model_launch", counting)
    x, y, out = arrays(5)          # a shape no other test uses: no cached model
    with pypto.Profiler() as prof:
        for _ in range(3):
            add[(5,)](x, y, out, 4097, BLOCK=BLOCK)
    assert calls == []             # nothing modelled inside the launches
    assert len(prof.kernels) == 3 and calls == [(5,)]
    assert len({id(k.model) for k in prof.kernels}) == 1


def test_a_launch_the_model_cannot_handle_is_reported_without_breaking_the_profile(
        monkeypatch):
    import pypto.backends.ascend.model.launch as cm

    def failing(program, grid, args, target=None):
        if grid == (7,):
            raise ValueError("no bandwidth for this path")
        return original(program, grid, args, target)

    original = cm.model_launch
    monkeypatch.setattr(cm, "model_launch", failing)
    x, y, out = arrays(7)
    with pypto.Profiler() as prof:
        add[(7,)](x, y, out, 7000, BLOCK=BLOCK)
        add[(3,)](x, y, out, 7000, BLOCK=BLOCK)
    bad, good = prof.kernels
    assert bad.npu_time_ms is None and "no bandwidth" in bad.error and bad.host_time_ms > 0
    assert good.npu_time_ms > 0
    assert prof.core_utilization == pytest.approx(good.core_utilization)
    assert "no bandwidth" in prof.summary()


def test_profiling_interpreted_launches(monkeypatch):
    x, y, out = arrays(2)
    with pypto.Profiler() as compiled:
        add[(2,)](x, y, out, 1500, BLOCK=BLOCK)
    monkeypatch.setenv("PYPTO_INTERPRET", "1")
    out[:] = 0
    with pypto.Profiler() as prof:
        add[(2,)](x, y, out, 1500, BLOCK=BLOCK)
    monkeypatch.delenv("PYPTO_INTERPRET")
    np.testing.assert_allclose(out[:1500], (x + y)[:1500])
    (k,) = prof.kernels
    assert k.mode == "interpreted" and k.host_time_ms > 0
    assert k.cycles == pytest.approx(compiled.kernels[0].cycles)
    assert "(interp)" in prof.summary()


def test_warm_launches_do_not_call_the_profiler_when_none_is_active(monkeypatch):
    x, y, out = arrays(2)
    add[(2,)](x, y, out, x.size, BLOCK=BLOCK)
    add[(2,)](x, y, out, x.size, BLOCK=BLOCK)
    callers = [c for c in add._fast.values()]
    assert callers
    seen = []
    for caller in callers:
        monkeypatch.setitem(caller.__globals__, "_profiled",
                            lambda *a, **k: seen.append(a) or (_ for _ in ()).throw(
                                AssertionError("profiled path taken")))
    monkeypatch.setattr(hooks, "record_compiled",
                        lambda *a, **k: seen.append(a))
    out[:] = 0
    add[(2,)](x, y, out, x.size, BLOCK=BLOCK)
    assert seen == []
    np.testing.assert_allclose(out, x + y)
    # and the one test it makes is the profiler list itself
    assert all(c.__globals__["_prof"] is hooks.ACTIVE for c in callers)


def test_profiled_launch_errors_are_the_usual_ones():
    x, y, out = arrays(2)
    add[(2,)](x, y, out, x.size, BLOCK=BLOCK)
    with pypto.Profiler() as prof:
        with pytest.raises(ValueError, match="grid dimensions must be >= 0"):
            add[(-1,)](x, y, out, x.size, BLOCK=BLOCK)
    assert prof.kernels == []


# -- memory analysis ----------------------------------------------------------------------------

def test_memory_analyze_a_vector_kernel():
    x, y, out = arrays(4)
    report = pypto.memory.analyze(add, x, y, out, x.size, grid=(4,), BLOCK=BLOCK)
    compiled = add.compile(x, y, out, x.size, BLOCK=BLOCK)
    assert report.peak_memory["UB"] == compiled.metadata["buffer_bytes"]["vec"] > 0
    assert report.peak_memory["L0C"] == 0 and set(report.peak_memory) == {
        "UB", "L1", "L0A", "L0B", "L0C", "BT"}
    assert int(report.peak_memory) == sum(report.peak_memory.values())
    assert report.peak_memory / 1e6 == int(report.peak_memory) / 1e6     # the seed's use
    assert report.capacity["UB"] == UB_USABLE      # pto-isa keeps the top 8 KiB
    assert report.utilization["UB"] == pytest.approx(report.peak_memory["UB"] / UB_USABLE)
    assert report.global_memory == 3 * x.nbytes
    assert 0 < report.efficiency <= 100
    text = str(report)
    assert "UB" in text and "efficiency" in text and str(report.global_memory) in text
    # the same from the compiled kernel, sizes from its static shapes
    again = pypto.memory.analyze(compiled)
    assert dict(again.peak_memory) == dict(report.peak_memory)
    assert again.global_memory == report.global_memory


def test_memory_efficiency_counts_alignment_padding():
    @pypto.jit
    def tiny(x, out):
        pl.store(out, [0], pl.load(x, [0], [8]) * 2.0)      # 8 x fp16 = 16 bytes in 32

    x = np.ones(8, np.float16)
    out = np.zeros(8, np.float16)
    report = pypto.memory.analyze(tiny, x, out, grid=(1,))
    assert report.useful_bytes["UB"] < report.peak_memory["UB"]
    assert report.efficiency == pytest.approx(
        100 * report.useful_bytes["UB"] / int(report.peak_memory))
    assert report.efficiency < 100


def test_memory_analyze_a_mixed_kernel_counts_its_workspace():
    a = np.ones((64, 64), np.float16)
    b = np.ones((64, 64), np.float16)
    bias = np.zeros((1, 64), np.float32)
    c = np.zeros((64, 64), np.float32)
    report = pypto.memory.analyze(mm_bias_sigmoid, a, b, bias, c, 64, grid=(2, 2),
                                  BM=32, BN=32, BK=32)
    assert report.peak_memory["L0C"] > 0 and report.peak_memory["L1"] > 0
    assert report.peak_memory["UB"] > 0
    slot = 32 * 32 * 4
    assert report.global_breakdown["workspace"] == 4 * slot        # one slot per running block
    assert report.global_memory == a.nbytes + b.nbytes + bias.nbytes + c.nbytes + 4 * slot


def test_memory_analyze_counts_an_array_passed_twice_once():
    x, _, _ = arrays(2)
    report = pypto.memory.analyze(add, x, x, x, x.size, grid=(2,), BLOCK=BLOCK)
    assert report.global_memory == x.nbytes


def test_memory_analyze_rejects_other_objects():
    with pytest.raises(TypeError, match="CompiledKernel"):
        pypto.memory.analyze(object())


# -- pypto.memory.budget: the on-chip plan before compiling for real ------------------------------

@pypto.jit
def _rows_softmax(x, out, BM: pl.constexpr, BN: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(BM, BN))
    e = pl.exp(t - pl.max(t, axis=1, keepdims=True))
    pl.store(out, offsets=(0, 0), value=e / pl.sum(e, axis=1, keepdims=True))


def test_memory_budget_before_compiling(fresh_cache):
    x = np.zeros((64, 1024), np.float32)
    before = pypto.cache_stats["compiles"]
    ok = pypto.memory.budget(_rows_softmax, x, x, BM=8, BN=1024)
    assert ok.fits and ok.buffers["UB"][1] == pypto.get_target("ascend910b1").buffers["vec"]
    assert pypto.cache_stats["compiles"] == before          # nothing compiled for real
    compiled = _rows_softmax.compile(x, x, BM=8, BN=1024)
    assert ok.buffers["UB"][0] == compiled.metadata["buffer_bytes"]["vec"]
    # t, t - max, exp and the division share one tile (in place); row max/sum scratch
    assert "UB     49,216 of  188,416 bytes" in str(ok)
    bad = pypto.memory.budget(_rows_softmax, x, x, BM=64, BN=1024)
    assert not bad.fits and "does not fit" in str(bad)
    # (the in-place plan of elementwise results fits BM=16: before, BM=8)
    assert "BM=16 (instead of 64); BN=256 (instead of 1024)" in str(bad)


@pypto.jit
def _one_matmul(a, b, c, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    ta = pl.load(a, offsets=(0, 0), shape=(BM, BK))
    tb = pl.load(b, offsets=(0, 0), shape=(BK, BN))
    pl.store(c, offsets=(0, 0), value=pl.matmul(ta, tb))


@pytest.mark.parametrize("size, buffer", [(256, "L0A"), (512, "L1")])
def test_overflow_advice_changes_several_constexprs_when_no_single_one_fits(size, buffer):
    """BM = BN = BK = 256 overflows L0A and 512 overflows L1, and halving any one constexpr
    (down to 1) fits neither: the advice is the largest joint sizes found, and they compile."""
    a = np.zeros((512, 512), np.float16)
    c = np.zeros((512, 512), np.float32)
    given = dict(BM=size, BN=size, BK=size)
    report = pypto.memory.budget(_one_matmul, a, a, c, **given)
    assert not report.fits and report.error.message.startswith(buffer)
    proposal = report.error.proposal
    assert set(proposal) == set(given) and all(proposal[k] <= given[k] for k in given)
    text = ", ".join(f"{k}={v}" for k, v in proposal.items())
    assert f"together these fit ascend910b1's buffers: {text}" in report.error.message
    assert pypto.memory.budget(_one_matmul, a, a, c, **proposal).fits
    _one_matmul.compile(a, a, c, **proposal)                      # and compile for real
    for name in given:               # largest: doubling any one of them again does not fit
        if proposal[name] < given[name]:
            assert not pypto.memory.budget(_one_matmul, a, a, c,
                                           **{**proposal, name: min(2 * proposal[name], given[name])}).fits


def test_memory_analyze_explains_the_plan_before_compiling(fresh_cache):
    """analyze(jit_fn, ...) compiles nothing for real: the tiles alive at each buffer's peak
    (with their lines), and, for a kernel that overflows, the report instead of the error."""
    x = np.zeros((64, 1024), np.float32)
    before = pypto.cache_stats["compiles"]
    ok = pypto.memory.analyze(_rows_softmax, x, x, grid=(1,), BM=8, BN=1024)
    bad = pypto.memory.analyze(_rows_softmax, x, x, grid=(1,), BM=64, BN=1024)
    assert pypto.cache_stats["compiles"] == before
    assert ok.fits and ok.plan.fits and ok.proposal is None
    [top, *_] = ok.plan.peak_tiles["UB"]
    assert top.type == "tile<8x1024xf32, vec>" and top.bytes == 32768
    assert any(f"{__file__}:{_line(_rows_softmax, 2)}:" in line for line in top.lines)
    assert "at its peak:" in str(ok) and "tile<8x1024xf32, vec> (32,768 bytes)" in str(ok)
    compiled = _rows_softmax.compile(x, x, BM=8, BN=1024)
    assert ok.peak_memory["UB"] == compiled.metadata["buffer_bytes"]["vec"]
    assert not bad.fits and bad.proposal in ({"BM": 16}, {"BN": 256})
    assert [t.type for t in bad.peak_tiles["UB"]][0] == "tile<64x1024xf32, vec>"
    assert bad.buffers["UB"][1] == pypto.get_target("ascend910b1").buffers["vec"]
    assert "does not fit" in str(bad) and "BM=16 (instead of 64)" in str(bad)


def _line(kernel, offset):
    return kernel.fn.__code__.co_firstlineno + offset


def test_the_summary_says_when_the_hbm_bandwidth_bounds_a_kernel():
    """A vector add streaming 192 MiB is bound by the chip's HBM, not by any pipe of a core
    (each core's MTE2 looked like the bound before the model stretched the launch to its
    bytes over the HBM's bandwidth)."""
    from .kernels import vadd
    n = 1 << 24
    x, y, out = (np.ones(n, np.float32) for _ in range(3))
    with pypto.Profiler() as prof:
        vadd[(n // 8192,)](x, y, out, n, BLOCK=8192)
    np.testing.assert_array_equal(out, 2.0)
    assert prof.kernels[0].model.bandwidth_bound
    assert "the chip's HBM bandwidth" in prof.summary()
