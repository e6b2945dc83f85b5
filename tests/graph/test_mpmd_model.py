"""The modelled NPU run of a graph (graph/npu_model.py, backends/ascend/model/tasks.py): the
same DAG under each parallel_strategy, dispatch and launch costs, bubbles, Chrome trace."""
import json

import pytest

import pypto
from pypto.backends.ascend.model.costs import dispatch_cycles
from pypto.backends.ascend.model.launch import model_launch
from pypto.runtime.hooks import pto_program

from .mpmd_graphs import three_node


@pytest.fixture(scope="module")
def module():
    # 32 matmul tiles on 24 AICs, one block per tile: two waves, the second overlapping
    # vector tiles under MPMD (the tuner, ranking each kernel alone, would pick grid-stride)
    return pypto.compile(three_node(m=1024, k=128, n=256, mt=(64, 128), vt=(32, 256),
                                    st=(16, 256), strategy="data_parallel"))


def test_every_task_starts_after_its_inputs_and_its_dispatch(module):
    m = module.model("mpmd")
    launch, dispatch = dispatch_cycles(module.target, "task")
    for p in m.placed:
        deps_end = max((m.placed[d].end for d in p.spec.deps), default=launch)
        assert p.ready == pytest.approx(deps_end)
        assert p.start == pytest.approx(p.dispatched + dispatch) and p.dispatched >= p.ready
    # no core runs two tasks at once
    by_core = {}
    for p in m.placed:
        for c in p.cores:
            by_core.setdefault(c, []).append((p.dispatched, p.end))
    for runs in by_core.values():
        runs.sort()
        assert all(a[1] <= b[0] + 1e-6 for a, b in zip(runs, runs[1:]))
    assert {k for p in m.placed for k, _ in p.cores} == {"cube", "vector"}


def test_data_parallel_is_the_kernels_launched_one_after_another(module):
    dp = module.model("data_parallel")
    assert dp.launches == 3
    # each step starts one launch after the previous step's last task ends
    launch, _ = dispatch_cycles(module.target)
    ends = {}
    for p in dp.placed:
        ends[p.spec.node] = max(ends.get(p.spec.node, 0.0), p.end)
    names = [s.name for s in module.steps]
    for prev, step in zip(names, names[1:]):
        first = min(p.ready for p in dp.placed if p.spec.node == step)
        assert first == pytest.approx(ends[prev] + launch)
    # and each step's span is its SPMD launch's modelled time (same blocks, same dispatch)
    for step in module.steps:
        own = [p for p in dp.placed if p.spec.node == step.name]
        span = max(p.end for p in own) - min(p.ready for p in own)
        args = module._task_sims.args(step)
        alone = model_launch(pto_program(step.compiled), step.grid, args, module.target)
        assert span + launch == pytest.approx(alone.cycles, rel=0.05)


def test_mpmd_overlaps_nodes_and_beats_in_order(module):
    mpmd, dp = module.model("mpmd"), module.model("data_parallel")
    assert mpmd.cycles < dp.cycles
    mm_end = max(p.end for p in mpmd.placed if p.spec.node == module.steps[0].name)
    gelu_start = min(p.start for p in mpmd.placed if p.spec.node == module.steps[1].name)
    assert gelu_start < mm_end            # cube tiles still running while vector tiles start
    auto = module.model("auto")
    assert auto.cycles == min(module.model(s).cycles for s in
                              ("mpmd", "data_parallel", "pipelined"))
    assert auto.strategy.startswith("auto -> ")


def test_pipelined_gives_each_node_its_own_cores(module):
    pl = module.model("pipelined")
    cores = {}
    for p in pl.placed:
        cores.setdefault(p.spec.node, set()).update(p.cores)
    names = [s.name for s in module.steps]
    assert not cores[names[1]] & cores[names[2]]     # both vector nodes, disjoint AIVs


def test_bubble_report_and_chrome_trace(module, tmp_path):
    m = module.model("mpmd")
    report = m.bubbles()
    path = report.critical_path
    assert path[-1].end == m.cycles
    for a, b in zip(path, path[1:]):                 # each link held the next one's start
        assert a.end <= b.dispatched + 1e-6
    busy = sum(b for b, _ in report.cores.values())
    assert busy == pytest.approx(sum((p.end - p.start) * len(p.cores) for p in m.placed))
    text = report.text()
    assert "critical path" in text and "vector cores" in text and "cube cores" in text
    trace = json.loads(open(m.export_chrome_trace(tmp_path / "t.json")).read())
    tasks = [e for e in trace["traceEvents"] if e.get("tid") == 100 and e["ph"] == "X"]
    assert len(tasks) == sum(len(p.cores) for p in m.placed)
    assert {e["cat"] for e in tasks} == {s.name for s in module.steps}
    assert any(e["pid"] >= 1000 for e in tasks) and any(e["pid"] < 1000 for e in tasks)


def test_a_graph_run_takes_at_least_its_traffic_over_the_hbm():
    """Each task's HBM share is fixed when it starts, so the shares can sum past the HBM; the
    run is held to its tasks' traffic over the chip's bandwidths, as a launch is. Two tasks
    of 10 us that each say they moved 160 MB of HBM bytes (100 us each at 1.6 TB/s) on two
    cores at once: the schedule alone ends them at 10 us after the launch."""
    from pypto.backends.ascend.model.block import BlockTrace
    from pypto.backends.ascend.model.tasks import TaskSpec, schedule
    target = pypto.get_target("ascend910b1")
    cycles_10us = 10 * target.clock_ghz * 1e3
    hbm_bytes = 160e6

    def simulate(core, start, active):
        return BlockTrace((0, 0, 0), core, start, start + cycles_10us,
                          traffic=(hbm_bytes, hbm_bytes))
    specs = [TaskSpec(i, f"t{i}", "n", "vector", [], simulate) for i in range(2)]
    model = schedule(specs, target)
    launch = dispatch_cycles(target, "task")[0]
    floor_us = 2 * hbm_bytes / (target.hbm_gbps * 1e9) * 1e6
    assert max(p.end for p in model.placed) < launch + 2 * cycles_10us
    assert model.bandwidth_bound
    assert model.time_us == pytest.approx(launch / (target.clock_ghz * 1e3) + floor_us)
