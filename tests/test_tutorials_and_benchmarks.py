"""Smoke test: every tutorial and benchmark runs to the end with --quick --reps 1 and prints its
table. Each runs in a subprocess (the interpreter running the tests), in the repository root,
with this session's PYPTO_CACHE_DIR (set by conftest.py) so nothing lands in the user's cache.
benchmarks/run_all.py runs every benchmark family in one process, with and without torch."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The benchmarks' goal table (benchmarks/_harness.py print_rows)
GOAL_TABLE = (r"^kernel\s+size\s+PyPTO\s+numpy\s+torch\s+PyPTO rate\s+ratio\s+% limit"
              r"\s+goal\s+met$")

# script -> a regular expression for its table's header line
SCRIPTS = {
    "tutorials/01_vector_add.py": r"^\s*size\s+PyPTO\s+numpy\s+ratio\s*$",
    "tutorials/02_fused_softmax.py": r"^\s*shape\s+PyPTO\s+numpy\s+torch\s+ratio\s*$",
    "tutorials/03_matmul.py": r"^\s*size\s+PyPTO\s+numpy\s+ratio\s+PyPTO GFLOP/s\s*$",
    "tutorials/04_layer_norm.py": r"^\s*shape\s+PyPTO\s+numpy\s+torch\s+ratio\s*$",
    "tutorials/05_multicore_barrier.py":
        r"^\s*size\s+blocks\s+1 launch\s+2 launches\s+numpy\s+ratio\s*$",
    "tutorials/06_double_buffering.py": r"^\s*shape\s+stages=1\s+stages=2\s+numpy\s+2 vs 1\s*$",
    "tutorials/07_graph_api.py": r"^\s*size\s+tiles\s+PyPTO\s+numpy\s+ratio\s*$",
    "tutorials/10_torch_custom_op.py": r"^\s*shape\s+torch eager\s+PyPTO op\s+inductor\s+ratio\s*$",
    "tutorials/08_safety_nets.py": r"^\s*kernel\s+native\s+sanitized\s+slowdown\s*$",
    "tutorials/11_autotune.py": r"^\s*config\s+NPU \(model\)\s+host\s*$",
    "tutorials/14_ascend_c_and_pto.py":
        r"^\s*shape\s+call_ascend_c\s+graph\s+numpy\s+graph/numpy\s*$",
    "tutorials/13_layouts_and_conv.py": r"^layout\s+kernel\s+host\s+NPU \(model\)\s+max err$",
    "tutorials/15_mpmd.py": r"^run\s+host\s+NPU \(model\)$",
    "tutorials/12_flash_attention.py":
        r"^\s*shape\s+causal\s+PyPTO\s+torch SDPA\s+torch/PyPTO\s+NPU \(model\)$",
    "tutorials/16_moe.py": r"^\s*size\s+PyPTO\s+numpy\s+NPU router\s+NPU experts$",
    "benchmarks/flash_attention.py":
        r"^shape \(B, H, S, D\)\s+causal\s+PyPTO host\s+torch SDPA\s+torch/PyPTO\s+NPU \(model\)$",
    "tutorials/17_from_cann_pypto.py": r"^kernel\s+host\s+NPU \(model\)\s+max err$",
    "benchmarks/mpmd.py": r"^kernel\s+tasks\s+CANN\s+PyPTO\s+CANN/PyPTO$",
    "tutorials/09_profiling.py":
        r"^\s*stages\s+blocks\s+host time\s+NPU time\s+util\s+bound by\s*$",
    "benchmarks/vector_add.py": GOAL_TABLE,
    "benchmarks/matmul.py": GOAL_TABLE,
    "benchmarks/softmax.py": GOAL_TABLE,
    "benchmarks/layer_norm.py": GOAL_TABLE,
    "benchmarks/launch.py": GOAL_TABLE,
    "benchmarks/startup.py": GOAL_TABLE,
    "benchmarks/scaling.py": GOAL_TABLE,
    "benchmarks/machine.py": GOAL_TABLE,
    "benchmarks/conv2d.py":
        r"^layer\s+input\s+count\s+PyPTO host\s+torch fp32\s+torch/PyPTO\s+NPU conv",
    "benchmarks/conv2d.py":
        r"^layer\s+input\s+count\s+PyPTO host\s+torch fp32\s+torch/PyPTO\s+NPU conv",
    "benchmarks/embedding.py": r"^lookup \(tokens x D of vocab\)\s+PyPTO host\s+numpy\s+torch\s+"
                               r"numpy/PyPTO\s+NPU \(model\)\s+HBM floor\s+share of HBM$",
    "benchmarks/topk.py": r"^shape\s+k\s+PyPTO host\s+numpy\s+torch\s+torch/PyPTO\s+NPU \(model\)$",
    "benchmarks/streaming.py": r"^kernel\s+NPU shape\s+NPU \(model\)\s+share of HBM\s+>= 80 %\s+"
                               r"host shape\s+PyPTO host\s+numpy\s+numpy/PyPTO$",
    # modelled NPU time against pto-isa's board figures: run_all.py does not run it
    "benchmarks/board.py":
        r"^kernel\s+size\s+board\s+model\s+model/board\s+cube % model/board\s+"
        r"TLOAD % model/board\s+modelled in$",
    # modelled NPU time, not the goal table: run_all.py does not run it
    "benchmarks/tuning_table.py":
        r"^tuning\s+before\s+after\s+NPU before\s+NPU after\s+gain\s+ours\s+seed's figure$",
    # the cycle model against the chip's measured instructions: run_all.py does not run it
    "benchmarks/calibration.py": r"^instruction\s+case\s+chip\s+model\s+error\s+note$",
    # tuning costs against their goals, its own table: run_all.py does not run it
    "benchmarks/autotune.py": r"^measurement\s+time\s+goal\s+met$",
}

# What a tutorial must show besides its table (the .pto lines and errors it teaches)
SHOWS = {
    "tutorials/03_matmul.py": ["modelled on ascend910b1, 1536^3", "pto-isa's GEMM on the board"],
    "benchmarks/matmul.py": ["modelled NPU time (ascend910b1", "GEMM float16", "GEMM bfloat16"],
    "tutorials/05_multicore_barrier.py": [
        "pto.barrier #pto.pipe<PIPE_ALL>",
        "pto.sync.set #pto.pipe<PIPE_MTE3>, 14 {ffts_mode = 0 : i32}",
        "pto.sync.wait #pto.pipe<PIPE_MTE3>, 14", "without pl.barrier()",
        "refused at compile time", "A2/A3 has no flag from one block to another",
        "more blocks than the 48 cores", "deadlocked"],
    "tutorials/06_double_buffering.py": [
        "bit-identical", "_pong", "set_flag  MTE2 -> V", "wait_flag V -> MTE2",
        "L1 used 40 KiB -> 72 KiB", "is read before pl.synchronize()"],
    "tutorials/07_graph_api.py": [
        "tiles: 8 x 8 = 64 tile(s) of (16, 16)", "%a: tile (16, 64) at (16*i, 0)",
        "tile_size=(16, 16) is refused", "1 kernel fused", "2 kernels unfused",
        "missing ['y']", "breakpoint hits, one per tile"],
    "tutorials/10_torch_custom_op.py": [
        "gradcheck(bias_gelu) (float32, eps 1e-3): True",
        "opcheck(bias_gelu): {'test_schema': 'SUCCESS', 'test_autograd_registration': "
        "'SUCCESS', 'test_faketensor': 'SUCCESS', 'test_aot_dispatch_dynamic': 'SUCCESS'}",
        "opcheck(bias_gelu_grad): {'test_schema': 'SUCCESS'", "compiled PyPTO"],
    "tutorials/08_safety_nets.py": [
        "LaunchWarning: add was launched without a grid", "[pypto sanitize: unwritten] add:",
        "[pypto sanitize: out of range] add: block (64, 0, 0)", "[pypto sanitize: race]",
        "the right grid: no report\n\n", "sanitized", "BM=16 (instead of 64)",
        "[pypto sanitize: unfilled buffer] fill_if_asked: block (0, 0, 0)", "host cores"],
    "tutorials/11_autotune.py": [
        "objective npu (modelled NPU time): 12 configs", "<- best", "best_config: BM: ",
        "read from the disk cache", "again.report.cached=True", "<- NPU best", "<- host best",
        "tile_map(row_softmax, tile_size='auto') chose tile_size="],
    "tutorials/09_profiling.py": [
        "(measured on this machine", "not measured)", "core utilization 12.5%", "bound by V",
        "per block (prof.tiles", "Chrome trace:", "ui.perfetto.dev", "efficiency",
        "96 KiB more UB", "profile page: ", "self-contained"],
    "tutorials/14_ascend_c_and_pto.py": [
        "--npu-arch=dav-2201", "call_optimized_matmul(6, stream, a, b, c, m=128, n=192, k=256)",
        "is refused before anything runs", "the edit drops 4", "modelled NPU time: ",
        "results bit-identical", "refused by the hazard checker"],
    "tutorials/15_mpmd.py": [
        'execution graph "mpmd"', "Graphviz:", "auto -> ", "bubble report (mpmd",
        "critical path", "bit-identical", "Chrome trace of the tasks"],
    "benchmarks/mpmd.py": ["MPMD vs in order", "host results bitwise equal: True"],
    "benchmarks/calibration.py": ["not emitted: ", "model: within 25% of the chip for "],
    "tutorials/12_flash_attention.py": [
        "causal=True: matches the fp32 reference", "kind=mixed",
        "pto.sync.set #pto.pipe<PIPE_MTE3>", "func.func @flash_attention_kernel_vector"],
    "tutorials/16_moe.py": ["top-2: tokens per expert", "matches numpy", "kind=mixed"],
    "tutorials/13_layouts_and_conv.py": [
        "LayoutTensor(NC1HWC0, logical shape", "{layout = #pto.layout<nz>}",
        "as_layout with the wrong array",
        # pypto.conv2d's part
        "from_nc1hwc0(x5, 20) == x: True", "round trip exact: True",
        "FRACTAL_Z -> output (1, 2, 224, 224, 16) NC1HWC0", "nchw_conv_conv3x3_input",
        "nchw_conv_conv3x3_weight", "nchw_conv_conv3x3_nchw", "converting layouts",
        "graph                                kernels  PyPTO host  NPU (model)  max error"],
    "benchmarks/tuning_table.py": [
        "modelled NPU time", "tile size", "multi-core", "memory layout", "sync",
        "memory layout (cube)", "NZ operands",
        "one core of 8). Utilization is busy core-cycles", "Why ours differ from the seed's figures",
        "TILE=8192 (pypto.autotune)", "pypto.autotune over TILE in", "its sweep"],
    "benchmarks/board.py": ["host runs of the three ports at small sizes: match numpy",
                            "GEMM fp16", "flash attn h128", "top-k fp32 k=1000"],
    "benchmarks/autotune.py": [
        "12 configs", "objective npu", "configs' compiles", "tuning overhead", "cached call",
        "new autotuner", "new process"],
}

# What run_all.py's one table must hold: a line from every family.
RUN_ALL_KERNELS = ["STREAM copy", "sgemm fp32", "vector add float32", "softmax fp32",
                   "layer norm fp32", "matmul fp32", "scaling matmul fp32", "launch, grid 1",
                   "launch, grid 2", "import pypto", "cold compile, vector add",
                   "first call, cached"]

# Runs a benchmark as if torch were not installed (as on a clean CI machine).
WITHOUT_TORCH = (
    "import runpy, sys\n"
    "sys.modules['torch'] = None\n"
    "path = sys.argv[1]\n"
    "sys.path.insert(0, str(__import__('pathlib').Path(path).parent))\n"
    "sys.argv = sys.argv[1:]\n"
    "runpy.run_path(path, run_name='__main__')\n"
)


def _run(argv, extra=()):
    proc = subprocess.run([sys.executable, *argv, "--quick", "--reps", "1", *extra], cwd=ROOT,
                          env=dict(os.environ), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (
        f"{argv} exited with {proc.returncode}\n--- stdout\n{proc.stdout}\n"
        f"--- stderr\n{proc.stderr}")
    return proc.stdout


NEEDS_TORCH = {"tutorials/10_torch_custom_op.py"}


def _torch_installed() -> bool:
    import importlib.util
    return importlib.util.find_spec("torch") is not None


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_script_runs_and_prints_its_table(script):
    if script in NEEDS_TORCH and not _torch_installed():
        pytest.skip(f"{script} needs torch (pip install -e '.[torch]')")
    out = _run([script])
    assert re.search(SCRIPTS[script], out, re.M), f"no table header in the output of {script}:\n{out}"
    for text in SHOWS.get(script, ()):
        assert text in out, f"{script} does not show {text!r}:\n{out}"


@pytest.mark.parametrize("script", ["benchmarks/vector_add.py", "benchmarks/matmul.py",
                                    "benchmarks/topk.py", "benchmarks/flash_attention.py",
                                    "tutorials/02_fused_softmax.py",
                                    "tutorials/04_layer_norm.py",
                                    "tutorials/10_torch_custom_op.py"])
def test_script_runs_without_torch(script):
    out = _run(["-c", WITHOUT_TORCH, script])
    assert "torch: not installed" in out
    if script in NEEDS_TORCH:
        return
    assert re.search(SCRIPTS[script], out, re.M), f"no table header in the output of {script}:\n{out}"


def _check_run_all(out):
    assert re.search(GOAL_TABLE, out, re.M), f"no table header in the output of run_all:\n{out}"
    table = out[re.search(GOAL_TABLE, out, re.M).start():]
    for kernel in RUN_ALL_KERNELS:
        assert re.search(rf"^{re.escape(kernel)}\b", table, re.M), \
            f"run_all's table has no {kernel!r} line:\n{out}"
    assert "matplotlib is not installed" in out or "plots written to" in out


def test_run_all_prints_one_table_with_every_family(tmp_path):
    _check_run_all(_run(["benchmarks/run_all.py"], ["--plots", str(tmp_path)]))


def test_run_all_runs_without_torch(tmp_path):
    out = _run(["-c", WITHOUT_TORCH, "benchmarks/run_all.py"], ["--plots", str(tmp_path)])
    assert "torch: not installed" in out
    _check_run_all(out)


class _StandInTorch:
    """Just enough of torch for TorchBaseline: tensors remember where they were sent."""

    class Tensor:
        def __init__(self, array, device="cpu"):
            self.array, self.device = array, device

        def to(self, device):
            return _StandInTorch.Tensor(self.array, device)

    def __init__(self, npu_present):
        import types
        self.calls = []
        self.npu = types.SimpleNamespace(is_available=lambda: npu_present,
                                         synchronize=lambda: self.calls.append("synchronize"))

    def from_numpy(self, array):
        return self.Tensor(array)

    def empty(self, shape, dtype, device):
        return self.Tensor(None, device)


@pytest.mark.parametrize("torch_npu,npu_present,on_npu", [
    (True, True, True), (True, False, False), (False, True, False)])
def test_torch_baselines_move_to_the_npu_when_torch_npu_has_one(monkeypatch, torch_npu,
                                                                 npu_present, on_npu):
    """The code path for a machine with an Ascend NPU (none here): with torch_npu importable
    and a device present, the families' torch baselines get their inputs on the NPU and
    are timed to the device's completion; otherwise they run on the host, on PyPTO's own
    arrays."""
    import types

    import numpy as np
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    monkeypatch.setitem(sys.modules, "torch_npu", types.ModuleType("torch_npu") if torch_npu
                        else None)
    from _harness import TorchBaseline
    torch = _StandInTorch(npu_present)
    base = TorchBaseline(torch)
    assert base.npu is on_npu
    x = np.zeros(4, np.float32)
    t = base.tensor(x)
    assert t.device == ("npu" if on_npu else "cpu") and t.array is x
    assert base.empty((2, 2), "f32").device == ("npu" if on_npu else "cpu")
    ran = []
    base.timed(lambda: ran.append("kernel"))()
    assert ran == ["kernel"] and torch.calls == (["synchronize"] if on_npu else [])
    assert ("NPU" in base.where) is on_npu
