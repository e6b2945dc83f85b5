"""CANN's SIM-mode artefacts: a ``RunMode.SIM`` kernel writes a swim lane and a report.

CANN PyPTO's simulation writes ``./output/output_<timestamp>_<pid>/CostModelSimulationOutput/``
after each SIM call (PyPTO: after the first call of each shape signature, see ``runtime``), with ``merged_swimlane.json`` (a Chrome/Perfetto trace of its machine
model) and ``_simulate.stat.report.txt``; its own ``cost_model.py`` example asserts on the
first. PyPTO writes the same two files from its cycle model: the trace is
``pypto.Profiler``'s (one process per core, one thread per pipe, modelled NPU time), the
report its ``summary()``. ``PYPTO_SIM_OUTPUT`` moves the folder (default ``./output``, as CANN)
or turns it off (``off``); the test suite turns it off.
"""
from __future__ import annotations

import datetime
import json
import os
from contextlib import contextmanager

from .. import envs
# back edge: CANN's SIM-mode artefacts are the profiler's swim lane and report (a tool, in the
# room above); the profiler is loaded by ``import pypto`` anyway
from ..tools.profiler import Profiler

SUBFOLDER = "CostModelSimulationOutput"


def folder_root() -> str | None:
    """Where SIM calls write, or None when ``PYPTO_SIM_OUTPUT=off``."""
    value = envs.PYPTO_SIM_OUTPUT.get().strip()
    if value.lower() in ("off", "0", "no", "false"):
        return None
    return value or "output"


@contextmanager
def recorded(kernel_name: str):
    """Profile the launches inside the block and write CANN's two files after it (when on)."""
    root = folder_root()
    if root is None:
        yield None
        return
    with Profiler() as prof:
        yield prof
    write(root, kernel_name, prof.report())


def write(root: str, kernel_name: str, report) -> str:
    """The run folder ``root/output_<timestamp>_<pid>/CostModelSimulationOutput``, written."""
    stamp = datetime.datetime.now().strftime("%Y%m%d_%H%M%S_%f")
    folder = os.path.join(root, f"output_{stamp}_{os.getpid()}", SUBFOLDER)
    os.makedirs(folder, exist_ok=True)
    trace = report.chrome_trace()
    trace["otherData"]["kernel"] = kernel_name
    with open(os.path.join(folder, "merged_swimlane.json"), "w") as f:
        json.dump(trace, f)
    with open(os.path.join(folder, "_simulate.stat.report.txt"), "w") as f:
        f.write(f"PyPTO cycle-model report for pypto.frontend kernel {kernel_name} "
                f"(modelled, not measured)\n\n{report.summary()}\n")
    return folder
