"""CANN PyPTO's r0.2.0 examples, unchanged, in ``--run_mode sim``: every kernel call checked.

Set PYPTO_CANN_EXAMPLES to the examples folder of hicann/pypto at tag r0.2.0 (e.g.
/tmp/cann_examples/examples). The same check as a table:
``PYTHONPATH=. python tests/frontend/cann_examples.py $PYPTO_CANN_EXAMPLES``.
"""
import os

import pytest

from .cann_examples import EXAMPLES, check, verdict

ROOT = os.environ.get("PYPTO_CANN_EXAMPLES")
# examples that stop at a feature PyPTO does not have yet (the reason is asserted)
EXPECTED_FAILURES = {
    "03_advanced/aclgraph/aclgraph.py": "no kernel ran",  # NPU only: stops at TILE_FWK_DEVICE_ID
}


@pytest.mark.slow
@pytest.mark.skipif(not ROOT, reason="PYPTO_CANN_EXAMPLES is not set (the folder of CANN "
                                     "PyPTO r0.2.0's examples/)")
@pytest.mark.parametrize("name", EXAMPLES)
def test_cann_example(name):
    pytest.importorskip("torch", reason="CANN's examples need torch")
    path = os.path.join(ROOT, name)
    if not os.path.exists(path):
        pytest.skip(f"{path} does not exist")
    status, reason = verdict(check(path))
    if name in EXPECTED_FAILURES:
        assert status == "fail" and EXPECTED_FAILURES[name] in reason, reason
    else:
        assert status == "pass", reason


def test_the_runner_catches_a_wrong_output():
    """The check each example call gets: the reference rerun differs from a corrupted output."""
    pytest.importorskip("torch", reason="the reference rerun (pypto.frontend.reference) is torch")
    import numpy as np
    import pypto
    from .cann_examples import _compare
    from pypto.frontend.tracer import run as trace

    def kernel(x, out):
        out[:] = x * 2.0

    specs = [("x", (2, 8), pypto.float32), ("out", (2, 8), pypto.float32)]
    t = trace(kernel, specs, {})
    x = np.ones((2, 8), np.float32)
    record = {"calls": 0, "mismatches": [], "replay": []}
    _compare(kernel, t, [x, np.zeros_like(x)], [x, np.full_like(x, 2.0)], record)
    assert record["mismatches"] == []
    _compare(kernel, t, [x, np.zeros_like(x)], [x, np.full_like(x, 2.5)], record)
    assert record["mismatches"] == ["kernel argument 1: max |diff| 0.5"]


def test_the_runner_catches_a_wrong_lowering_and_a_wrong_merge(monkeypatch):
    """The check sees the kernel's own mistakes, not only a corrupted array: a wrong ``ops.EW``
    row (the compiled segment) and a wrong loop merge (the reference reruns the writes as
    traced, before ``coalesce``)."""
    pytest.importorskip("torch", reason="the reference rerun (pypto.frontend.reference) is torch")
    import numpy as np
    import pypto
    from pypto.frontend import launch as runtime, ops
    from .cann_examples import _compare

    @pypto.frontend.jit
    def kernel(x: pypto.Tensor(), out: pypto.Tensor()):
        for i in pypto.loop(2):
            out[i:i + 1, :] = x[i:i + 1, :] * 3.0

    record = {"calls": 0, "mismatches": [], "replay": []}
    monkeypatch.setattr(runtime, "CALL_HOOKS", [lambda *a: _compare(*a, record)])
    x = np.ones((2, 8), np.float32)
    kernel(x, np.zeros_like(x))
    assert record["calls"] == 1 and record["mismatches"] == []
    kernel._traces.clear()              # traced and lowered again, with the wrong row
    with monkeypatch.context() as m:
        m.setitem(ops.EW, "mul", "({0} + {1})")
        kernel(x, np.zeros_like(x))
    assert record["mismatches"] == ["kernel argument 1: max |diff| 1"]
    kernel._traces.clear()
    monkeypatch.setattr(runtime, "coalesce", lambda writes: writes[:1])  # the last row lost
    kernel(x, np.zeros_like(x))
    assert record["mismatches"][1:] == ["kernel argument 1: max |diff| 3"]


def test_the_reference_has_a_torch_rule_for_every_op():
    """reference.py computes ``ops.EW``/``ops.REDUCE`` rows as torch's function of that name."""
    torch = pytest.importorskip("torch", reason="the reference is torch")
    from pypto.frontend import ops
    special = {"cast", "clip", "ceil_div"}       # rules of their own in reference._value
    assert [op for op in (*ops.EW, *ops.REDUCE) if op not in special
            and not callable(getattr(torch, op, None))] == []
