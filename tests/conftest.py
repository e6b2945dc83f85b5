"""Test-wide setup: every test session gets its own kernel cache directory, so tests never
read kernels compiled by another checkout and never write into the user's cache; and every
compile checks its .pto round trip."""
import itertools
import os
import re
import tempfile

import pytest

_session_cache = tempfile.mkdtemp(prefix="pypto-test-cache-")
os.environ["PYPTO_CACHE_DIR"] = _session_cache
# every kernel the tests compile (tutorials included) must print .pto that reads back
# identically; the hazard checker runs on every compile anyway
os.environ["PYPTO_VERIFY_PTO"] = "1"
# CANN-style RunMode.SIM calls write ./output/output_*/ swim lanes (pypto/frontend/sim_output.py);
# not from the tests, which would litter the checkout (test_spelling turns it on in a tmp dir)
os.environ["PYPTO_SIM_OUTPUT"] = "off"


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """A cache directory of the test's own (for tests that count compiles or corrupt files)."""
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


# The quick subset (`pytest -m "not slow and not heavy"`, 163 s on a 2-core machine): these modules are
# marked heavy -- the tutorial and benchmark runs, the pto-isa simulator, the differential and
# hypothesis sweeps, torch.compile -- each a minute-scale share of the default suite.
HEAVY_MODULES = {
    "test_tutorials_and_benchmarks.py", "engines/test_ptoisa.py", "engines/test_special_values.py",
    "engines/test_engine_selection.py", "test_matmul.py", "test_vector_add.py",
    "language/test_differential.py", "language/test_elementwise.py",
    "language/test_dtype_promotion.py", "compiler/test_target_model.py",
    "tuning/test_tile_size.py", "backends/ascend/test_fusion.py",
    "backends/ascend/test_forwarding.py", "graph/test_tiling.py", "graph/test_hypothesis.py",
    "language/test_casts.py", "language/test_shapes.py", "language/test_reductions.py",
    "compiler/pto/test_conformance.py", "torch_ops/", "ascend_c/test_run.py",
    "ascend_c/test_graph.py", "graph/test_conv2d.py",
    "language/test_lowp_dtypes.py", "language/test_rank34.py", "frontend/test_ops.py",
}


def _heavy(path) -> bool:
    rel = os.path.relpath(str(path), os.path.dirname(os.path.abspath(__file__)))
    rel = rel.replace(os.sep, "/")
    return any(rel == m or (m.endswith("/") and rel.startswith(m)) for m in HEAVY_MODULES)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _heavy(item.fspath):
            item.add_marker(pytest.mark.heavy)


def pytest_ignore_collect(collection_path, config):
    """A run whose -m leaves every heavy test out does not import the heavy modules either:
    some build their parameters at import (engines/test_ptoisa.py compiles the .pto corpus,
    a quarter of the quick subset's time when it was only collected to be deselected)."""
    if _heavy(collection_path) and _leaves_heavy_out(config.getoption("markexpr")):
        return True
    return None


def _leaves_heavy_out(markexpr: str) -> bool:
    """Is the -m expression false for a heavy test, whatever its other marks?"""
    if not markexpr:
        return False
    from _pytest.mark.expression import Expression      # what -m itself evaluates with
    expr = Expression.compile(markexpr)
    names = sorted(set(re.findall(r"[A-Za-z_][\w.]*", markexpr)) - {"and", "or", "not"})
    return not any(expr.evaluate(lambda name, **_: name == "heavy" or name in chosen)
                   for n in range(len(names) + 1) for chosen in itertools.combinations(names, n))
