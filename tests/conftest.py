"""Test-wide setup: every test session gets its own kernel cache directory, so tests never
read kernels compiled by another checkout and never write into the user's cache; and every
compile checks its .pto round trip."""
import itertools
import os
import re
import shutil
import tempfile

import pytest

# One cache per pytest run, shared by its xdist workers (they inherit the controller's
# environment: a PCH and a kernel are built once, not once per worker) and removed when the run
# ends: a run writes about 1 GB of kernels, and CI's several runs once filled the disk.
_OWNER = "PYPTO_TEST_CACHE_OWNER"
if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get(_OWNER):
    _session_cache = None                           # a worker: the controller's cache
else:
    _session_cache = tempfile.mkdtemp(prefix="pypto-test-cache-")
    os.environ["PYPTO_CACHE_DIR"] = _session_cache
    os.environ[_OWNER] = str(os.getpid())
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


# The quick subset (`pytest -m "not slow and not heavy"`, 70 s on a 2-core machine with
# PTO_ORACLE set, 80 s without; 218 s and 150 s before): these modules are marked heavy -- the tutorial and benchmark
# runs, the pto-isa simulator, the differential and hypothesis sweeps, torch -- each a
# minute-scale share of the default suite, but for the few tests QUICK_IN_HEAVY keeps, so the
# quick subset still touches every area. Elsewhere, tests that take seconds are marked heavy
# where they stand, and parametrized ones keep a case or two (tests/quick.py).
HEAVY_MODULES = {
    "test_tutorials_and_benchmarks.py", "engines/test_ptoisa.py", "engines/test_special_values.py",
    "engines/test_engine_selection.py", "test_matmul.py", "test_vector_add.py",
    "language/test_differential.py", "language/test_elementwise.py",
    "language/test_dtype_promotion.py", "compiler/test_target_model.py",
    "graph/test_autotile.py", "backends/ascend/test_fusion.py",
    "backends/ascend/test_forwarding.py", "graph/test_tiling.py", "graph/test_hypothesis.py",
    "language/test_casts.py", "language/test_shapes.py", "language/test_reductions.py",
    "compiler/pto/test_conformance.py", "torch_ops/", "ascend_c/test_run.py",
    "ascend_c/test_graph.py", "graph/test_conv2d.py",
    "language/test_lowp_dtypes.py", "language/test_rank34.py", "frontend/test_ops.py",
    "frontend/test_assembler.py", "language/test_int_division.py",
}
# Tests of heavy modules that the quick subset runs (a fraction of a second each).
QUICK_IN_HEAVY = {
    "language/test_casts.py": {"test_cast_all_pairs[float32-to-floats]",
                               "test_float_to_int_saturates"},
    "language/test_elementwise.py": {"test_unary[sigmoid-float32]", "test_relu_negative_zero"},
    "language/test_shapes.py": {"test_broadcast_to[float32]", "test_static_slicing[float32]"},
    "language/test_reductions.py": {"test_reduce[mean-float32]",
                                    "test_reduce_padded_partial_tile[sum-int32]"},
    "language/test_dtype_promotion.py": {"test_tile_tile[int16+float32]",
                                         "test_table_is_symmetric_and_matches_the_rule"},
    "language/test_lowp_dtypes.py": {"test_ints_wrap_into_int4",
                                     "test_uint16_division_and_reduction"},
    "language/test_rank34.py": {"test_rank4_sum_over_each_axis_matches_numpy[0]"},
    "test_vector_add.py": {"test_padding_values[float32-3.5]", "test_bad_grid_rejected[3]"},
    "test_matmul.py": {"test_matmul_tiles_not_multiple_of_fractal[i8-i32-3x5x7]"},
    "graph/test_tiling.py": {"test_ragged_2d_33x47[bfloat16]",
                             "test_tile_op_inlines_into_a_jit_kernel"},
    "graph/test_conv2d.py": {"test_bad_arguments_name_the_argument"},
    "backends/ascend/test_fusion.py": {
        "test_windows_with_different_valid_columns_take_the_masked_path"},
    "backends/ascend/test_forwarding.py": {"test_softmax_in_place"},
    "compiler/test_target_model.py": {"test_flags_balance_in_every_block_of_the_text",
                                      "test_ub_overflow_names_the_buffer_sizes_and_tiles"},
    "graph/test_autotile.py": {"test_candidates_and_bad_values"},
    # what a machine without ptoas / pto-isa / clang++ is told (.ci/run runs the quick subset
    # without them too): the two variables, and every missing tool at once
    "engines/test_engine_selection.py": {
        "test_a_missing_tool_names_the_variable_to_set[PYPTO_CXX-/nonexistent/clang++-PYPTO_CXX]",
        "test_a_missing_tool_names_the_variable_to_set[PYPTO_PTOAS-/nonexistent/ptoas-"
        "PYPTO_PTOAS]", "test_every_missing_tool_is_named_at_once"},
    "language/test_int_division.py": {"test_no_integer_tile_reaches_a_float_only_division[int32]",
                                      "test_int32_by_a_runtime_scalar[-2147483648]"},
}


def _heavy_module(path) -> str | None:
    """The HEAVY_MODULES entry that ``path`` falls under, or None."""
    rel = os.path.relpath(str(path), os.path.dirname(os.path.abspath(__file__)))
    rel = rel.replace(os.sep, "/")
    return next((m for m in HEAVY_MODULES
                 if rel == m or (m.endswith("/") and rel.startswith(m))), None)


def pytest_unconfigure(config):
    """The run's cache goes with the run (only the process that made it removes it)."""
    if _session_cache:
        shutil.rmtree(_session_cache, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = _heavy_module(item.fspath)
        if module and item.name not in QUICK_IN_HEAVY.get(module, ()):
            item.add_marker(pytest.mark.heavy)


def pytest_ignore_collect(collection_path, config):
    """A run whose -m leaves every heavy test out does not import the heavy modules either:
    some build their parameters at import (engines/test_ptoisa.py compiles the .pto corpus,
    a quarter of the quick subset's time when it was only collected to be deselected)."""
    module = _heavy_module(collection_path)
    if module and module not in QUICK_IN_HEAVY and \
            _leaves_heavy_out(config.getoption("markexpr")):
        return True
    return None


def _leaves_heavy_out(markexpr: str) -> bool:
    """Is the -m expression false for a heavy test, whatever its other marks?"""
    if not markexpr:
        return False
    try:               # pytest's own -m evaluator; private, so a pytest that moved it or
        from _pytest.mark.expression import Expression      # changed it collects everything
        expr = Expression.compile(markexpr)
        names = sorted(set(re.findall(r"[A-Za-z_][\w.]*", markexpr)) - {"and", "or", "not"})
        return not any(expr.evaluate(lambda name, **_: name == "heavy" or name in chosen)
                       for n in range(len(names) + 1)
                       for chosen in itertools.combinations(names, n))
    except (ImportError, AttributeError, TypeError):
        return False
