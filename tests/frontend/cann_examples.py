"""Run CANN PyPTO's r0.2.0 examples unchanged (``--run_mode sim``) and check every kernel call.

    PYTHONPATH=. python tests/frontend/cann_examples.py /path/to/examples [names...]

The examples compare with their torch golden only on an NPU, so each kernel call is checked
here instead: after the call, the same trace (its writes as traced, before ``coalesce``) is
run on the call's inputs by ``pypto.frontend.reference`` (torch, op by op) and every argument
must agree with what the kernel wrote (dtype tolerances). ``check(path)`` runs one example in a subprocess and returns
``{"calls", "mismatches", "error", "seconds"}``; ``test_cann_examples.py`` tabulates them.
With ``--profile`` the table also gives, per example, every call replayed once more warm:
the host time (measured) and the NPU time (modelled by ``pypto.Profiler``), summed.
"""
from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
import time
import traceback

import numpy as np

EXAMPLES = [
    "00_hello_world/hello_world.py",
    "01_beginner/basic/basic_ops.py", "01_beginner/basic/symbolic_scalar.py",
    "01_beginner/basic/tensor_creation.py", "01_beginner/compute/elementwise_ops.py",
    "01_beginner/compute/matmul_ops.py", "01_beginner/compute/reduce_ops.py",
    "01_beginner/tiling/tiling_config.py",
    "01_beginner/transform/add_scalar_loop_view_assemble.py",
    "01_beginner/transform/transform_ops.py",
    "02_intermediate/basic_nn/ffn/ffn_module.py",
    "02_intermediate/basic_nn/layer_normalization/layer_norm.py",
    "02_intermediate/controlflow/condition/condition.py",
    "02_intermediate/controlflow/loop/loop.py",
    "02_intermediate/controlflow/others/dynamic.py",
    "02_intermediate/controlflow/others/kernel_input.py",
    "02_intermediate/operators/activation/activation.py",
    "02_intermediate/operators/softmax/softmax.py",
    "03_advanced/advanced_nn/attention/attention.py",
    "03_advanced/patterns/function/function.py", "03_advanced/patterns/function/multi_jit.py",
    "03_advanced/cost_model/cost_model.py", "03_advanced/aclgraph/aclgraph.py",
]
# examples whose argparse has no --run_mode (they run in their one mode as they are)
NO_RUN_MODE_FLAG = {"03_advanced/cost_model/cost_model.py", "03_advanced/aclgraph/aclgraph.py"}
_TOL = {"float16": (3e-3, 3e-3), "bfloat16": (2e-2, 2e-2), "float32": (1e-4, 1e-5),
        "float64": (1e-10, 1e-12)}
_MARK = "CANN_EXAMPLE_RESULT "


def _compare(kernel, trace, before, after, record):
    from pypto.frontend import reference
    record["replay"].append((trace, [a.copy() for a in before]))
    expected = [a.copy() for a in before]
    reference.run(trace, expected)
    record["calls"] += 1
    for k, (got, want) in enumerate(zip(after, expected)):
        rtol, atol = _TOL.get(got.dtype.name, (0, 0))
        g, w = got.astype(np.float64), want.astype(np.float64)
        scale = max(1.0, float(np.nanmax(np.abs(w)))) if w.size else 1.0   # sums of products
        if not np.allclose(g, w, rtol=rtol, atol=atol * scale, equal_nan=True):
            diff = float(np.nanmax(np.abs(g - w))) if g.size else 0.0
            record["mismatches"].append(f"{kernel.__name__} argument {k}: max |diff| {diff:.3g}")


def _replay(record) -> None:
    """Each call again, warm: host seconds measured, NPU time modelled."""
    import pypto
    from pypto.frontend.evaluate import Evaluator
    host = npu = 0.0
    for trace, arrays in record.pop("replay"):
        t0 = time.perf_counter()
        Evaluator(trace, arrays).run()
        host += time.perf_counter() - t0
        with pypto.Profiler() as prof:
            Evaluator(trace, arrays).run()
        npu += sum(k.npu_time_ms for k in prof.kernels)
    record["host_ms"], record["npu_us"] = round(host * 1e3, 2), round(npu * 1e3, 1)


def _main(path: str, profile: bool) -> None:
    from pypto.frontend import launch as runtime
    record = {"calls": 0, "mismatches": [], "error": None, "replay": []}
    runtime.CALL_HOOKS.append(lambda *a: _compare(*a, record))
    flag = not any(path.endswith(name) for name in NO_RUN_MODE_FLAG)
    sys.argv = [path, "--run_mode", "sim"] if flag else [path]
    sys.path.insert(0, os.path.dirname(path))
    t0 = time.perf_counter()
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        if e.code not in (0, None):
            record["error"] = f"exit status {e.code}"
    except BaseException as e:  # noqa: BLE001 - the runner reports whatever stopped it
        last = traceback.extract_tb(e.__traceback__)[-1]
        record["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}" \
                          f" ({os.path.basename(last.filename)}:{last.lineno})"
    record["seconds"] = round(time.perf_counter() - t0, 1)
    if profile and not record["error"]:
        _replay(record)
    record.pop("replay", None)
    print(_MARK + json.dumps(record), flush=True)


def check(path: str, timeout: float = 900, profile: bool = False) -> dict:
    """Run the example at ``path`` in a subprocess with this worktree first on the path."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    env.pop("PYPTO_SIM_OUTPUT", None)   # as CANN: SIM calls write ./output (cost_model.py reads it)
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", path,
                           *(["--profile"] if profile else [])],
                          capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=os.path.dirname(path))
    for line in proc.stdout.splitlines():
        if line.startswith(_MARK):
            return json.loads(line[len(_MARK):])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
    return {"calls": 0, "mismatches": [], "error": f"crashed: {tail[0]}", "seconds": None}


def verdict(result: dict) -> tuple[str, str]:
    if result["error"]:
        return "fail", result["error"]
    if result["mismatches"]:
        return "fail", "; ".join(result["mismatches"][:3])
    if not result["calls"]:
        return "fail", "no kernel ran"
    return "pass", f"{result['calls']} kernel calls match the torch reference"


if __name__ == "__main__":
    if sys.argv[1] == "--one":
        _main(sys.argv[2], "--profile" in sys.argv)
        sys.exit(0)
    profiled = "--profile" in sys.argv
    base, *names = [a for a in sys.argv[1:] if a != "--profile"]
    for name in names or EXAMPLES:
        result = check(os.path.join(base, name), profile=profiled)
        status, reason = verdict(result)
        times = f" host {result['host_ms']} ms, NPU {result['npu_us']} us (modelled) |" \
            if "host_ms" in result else ""
        print(f"| {name} | {status} | {reason} |{times}", flush=True)
