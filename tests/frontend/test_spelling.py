"""CANN PyPTO's spelling: annotations, dtypes, option groups, run modes, errors."""
import copy
import pickle
import warnings

import numpy as np
import pytest

import pypto
from pypto.frontend import NoNPUWarning, NotAvailableError, TileShapeWarning
from pypto.frontend.annotations import TensorSpec
from pypto.frontend.options import UnknownOptionWarning


def test_tensor_is_both_annotation_and_device_tensor():
    spec = pypto.Tensor([4, pypto.DYNAMIC], pypto.DT_FP16, "x")
    assert isinstance(spec, TensorSpec) and isinstance(spec, pypto.Tensor)
    assert spec.shape == (4, pypto.DYNAMIC) and spec.dtype is pypto.DT_FP16 and spec.dim == 2
    assert pypto.Tensor[[8, 8], pypto.DT_FP32].shape == (8, 8)
    assert pypto.Tensor().shape is None
    device = pypto.Tensor.from_numpy(np.ones(3, np.float32))
    assert not isinstance(device, TensorSpec) and device.to_numpy().sum() == 3
    for again in (copy.deepcopy(device), pickle.loads(pickle.dumps(device))):
        assert type(again) is pypto.Tensor and again.to_numpy().sum() == 3


def test_annotation_mismatch_names_the_argument():
    @pypto.frontend.jit
    def k(x: pypto.Tensor([4, 8], pypto.DT_FP32), out: pypto.Tensor([4, 8], pypto.DT_FP32)):
        out[:] = x

    with pytest.raises(ValueError, match="argument 'x': axis 1 is 9"):
        k(np.zeros((4, 9), np.float32), np.zeros((4, 8), np.float32))
    with pytest.raises(TypeError, match="argument 'x'.*DT_FP32"):
        k(np.zeros((4, 8), np.float16), np.zeros((4, 8), np.float32))


def test_dynamic_and_ellipsis_dims_take_any_extent():
    @pypto.frontend.jit
    def k(x: pypto.Tensor([pypto.DYNAMIC, ...], pypto.DT_FP32),
          out: pypto.Tensor([pypto.DYNAMIC, ...], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(2, 2, 16)
        out[:] = x * 2.0

    x = np.arange(3 * 2 * 16, dtype=np.float32).reshape(3, 2, 16)
    out = np.zeros_like(x)
    k(x, out)
    np.testing.assert_array_equal(out, x * 2)


def test_unknown_option_keys_are_warned_about():
    with pytest.warns(UnknownOptionWarning, match=r"runtime_options\['run_mdoe'\]"):
        pypto.frontend.jit(runtime_options={"run_mdoe": 1})(lambda x: None)
    with pytest.warns(UnknownOptionWarning, match="runtime_optoins"):
        pypto.frontend.jit(runtime_optoins={})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pypto.frontend.jit(runtime_options={"run_mode": pypto.RunMode.SIM},
                           pass_options={"vec_nbuffer_setting": {-1: 2}},
                           debug_options={"runtime_debug_mode": 0})(lambda x: None)
    with pytest.raises(ValueError, match="run_mode"):
        pypto.frontend.jit(runtime_options={"run_mode": "gpu"})(lambda x: None)


def test_npu_mode_runs_on_the_host_and_says_so_once(monkeypatch):
    from pypto.frontend import launch as runtime
    monkeypatch.setattr(runtime, "_SAID_NO_NPU", [])

    @pypto.frontend.jit(runtime_options={"run_mode": pypto.RunMode.NPU})
    def k(x: pypto.Tensor([2, 8], pypto.DT_FP32), out: pypto.Tensor([2, 8], pypto.DT_FP32)):
        out[:] = x + 1.0

    x, out = np.ones((2, 8), np.float32), np.zeros((2, 8), np.float32)
    with pytest.warns(NoNPUWarning, match="no NPU here"):
        k(x, out)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k(x, out)
    np.testing.assert_array_equal(out, 2)


def test_options_scope_gives_tile_shapes_and_rejects_unknown_groups():
    with pypto.options(vec_tile_shapes=[4, 16]):
        assert pypto.get_vec_tile_shapes() == [4, 16]
    with pytest.raises(TypeError, match="not one of CANN's option groups"):
        pypto.options(colour_options={})


def test_unavailable_names_and_dtypes_say_so():
    with pytest.raises(NotAvailableError, match="not available in PyPTO yet: pypto.index_select"):
        pypto.index_select(None, 0, None)
    with pytest.raises(NotAvailableError, match="DT_FP8"):
        pypto.DT_FP8.pypto
    with pytest.raises(AttributeError):
        pypto.no_such_name_anywhere


def test_an_array_for_an_unannotated_parameter_is_an_error():
    @pypto.frontend.jit
    def k(x, out: pypto.Tensor()):
        out[:] = x

    with pytest.raises(TypeError, match="parameter 'x' is not annotated"):
        k(np.ones(4, np.float32), np.zeros(4, np.float32))


def test_returning_a_value_is_an_error():
    @pypto.frontend.jit
    def k(x: pypto.Tensor([2, 8], pypto.DT_FP32)):
        return x + 1.0

    with pytest.raises(TypeError, match="returns nothing"):
        k(np.ones((2, 8), np.float32))


def test_helpers_loops_and_views_assemble():
    @pypto.frontend.function
    def twice(t):
        return pypto.mul(t, 2.0)

    @pypto.frontend.jit
    def k(x: pypto.Tensor([4, 32], pypto.DT_FP32), out: pypto.Tensor([4, 32], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(2, 16)
        for i in pypto.loop(2, name="rows", idx_name="i"):
            tile = pypto.view(x, [2, 32], [i * 2, 0])
            if pypto.is_loop_begin(i):
                pypto.assemble(twice(tile), [i * 2, 0], out)
            else:
                out[2:4, :] = tile + 1.0

    x = np.random.default_rng(0).standard_normal((4, 32)).astype(np.float32)
    out = np.zeros_like(x)
    k(x, out)
    np.testing.assert_allclose(out, np.concatenate([x[:2] * 2, x[2:] + 1]), rtol=1e-6)


def test_a_tile_shape_too_big_for_ub_is_shrunk_with_a_warning_in_cann_terms():
    """A 64 x 4096 float32 tile of a fused chain (1 MiB a buffer) cannot fit the 910B's
    192 KiB UB: the kernel still runs, on smaller tiles, and says what it did."""
    @pypto.frontend.jit
    def k(x: pypto.Tensor([64, 4096], pypto.DT_FP32), out: pypto.Tensor([64, 4096], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(64, 4096)
        out[:] = pypto.exp(x) * 2.0 + x

    x = np.random.default_rng(1).standard_normal((64, 4096)).astype(np.float32)
    out = np.zeros_like(x)
    with pytest.warns(TileShapeWarning, match=r"64 x 4096 elements.*MEM_UB.*ran \d+ x 4096"):
        k(x, out)
    np.testing.assert_allclose(out, np.exp(x) * 2 + x, rtol=1e-5, atol=1e-5)


def test_a_sort_tile_too_big_for_ub_is_shrunk_with_the_same_warning():
    """topk keeps the sorted axis whole and halves the rows, warning as fused ops do (it
    shrank silently before)."""
    @pypto.frontend.jit
    def k(x: pypto.Tensor([32, 4096], pypto.DT_FP32), v: pypto.Tensor([32, 4], pypto.DT_FP32),
          i: pypto.Tensor([32, 4], pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(32, 4096)
        v[:], i[:] = pypto.topk(x, 4)

    x = np.random.default_rng(2).standard_normal((32, 4096)).astype(np.float32)
    v, i = np.zeros((32, 4), np.float32), np.zeros((32, 4), np.int32)
    with pytest.warns(TileShapeWarning, match=r"topk: the tile shape's 32 x 4096 .* ran \d+ x 4096"):
        k(x, v, i)
    np.testing.assert_array_equal(i, np.argsort(-x, axis=1, kind="stable")[:, :4])


def test_sim_calls_write_cann_swim_lane_and_report(tmp_path, monkeypatch):
    """As CANN: a RunMode.SIM call writes output_<stamp>_<pid>/CostModelSimulationOutput/
    with merged_swimlane.json (a Chrome trace of the modelled pipes) and the report, once per
    shape signature; NPU mode (host simulation here) and PYPTO_SIM_OUTPUT=off write nothing."""
    import json

    def kernel(mode):
        @pypto.frontend.jit(runtime_options={"run_mode": mode})
        def k(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
            pypto.set_vec_tile_shapes(8, 64)
            out[:] = pypto.exp(x) + 1.0
        return k

    monkeypatch.setenv("PYPTO_SIM_OUTPUT", str(tmp_path / "output"))
    x, out = np.ones((8, 64), np.float32), np.zeros((8, 64), np.float32)
    kernel(pypto.RunMode.SIM)(x, out)
    np.testing.assert_allclose(out, np.exp(x) + 1, rtol=1e-6)
    runs = list((tmp_path / "output").iterdir())
    assert len(runs) == 1 and runs[0].name.startswith("output_")
    lane = json.loads((runs[0] / "CostModelSimulationOutput" / "merged_swimlane.json").read_text())
    work = [e for e in lane["traceEvents"] if e["ph"] == "X"]
    assert work and {"TLOAD", "TEXP", "TSTORE"} <= {e["name"].upper() for e in work}
    assert all(e["dur"] >= 0 for e in work) and lane["otherData"]["kernel"] == "k"
    report = (runs[0] / "CostModelSimulationOutput" / "_simulate.stat.report.txt").read_text()
    assert "NPU us" in report
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoNPUWarning)
        kernel(pypto.RunMode.NPU)(x, out)
    sim = kernel(pypto.RunMode.SIM)
    sim(x, out)
    sim(x, out)                         # the same shape signature: written once
    assert len(list((tmp_path / "output").iterdir())) == 2
    monkeypatch.setenv("PYPTO_SIM_OUTPUT", "off")
    kernel(pypto.RunMode.SIM)(x, out)
    assert len(list((tmp_path / "output").iterdir())) == 2


def test_symbolic_scalars_concrete_and_named():
    s = pypto.symbolic_scalar(10)
    assert s.is_concrete() and s.concrete() == 10 and isinstance(s < 2, pypto.symbolic_scalar)
    assert (s < 2).concrete() == 0 and (s + 1).min(5) == 5
    b = pypto.symbolic_scalar("b")
    assert b.is_symbol() and not b.is_concrete()
    assert str((b >= 2) * (b < 8)) == "((b>=2)*(b<8))"
    with pytest.raises(NotAvailableError, match="symbolic scalar b used as a number"):
        range(b)


def test_slice_assignment_assembles_the_value_at_the_slice_start():
    """CANN's __setitem__: ``a[0:, 0:] = b`` is ``assemble(b, (0, 0), a)`` and ``a[0, 1:3] = c``
    writes c as a (1, 2) row (before: the value was broadcast over the whole slice)."""
    @pypto.frontend.jit
    def k(b: pypto.Tensor([2, 2], pypto.DT_FP32), c: pypto.Tensor([2], pypto.DT_FP32),
          a: pypto.Tensor([4, 4], pypto.DT_FP32)):
        a[0:, 0:] = b
        a[3, 1:3] = c

    b, c = np.full((2, 2), 10, np.float32), np.array([7, 8], np.float32)
    a = np.zeros((4, 4), np.float32)
    k(b, c, a)
    want = np.zeros((4, 4), np.float32)
    want[:2, :2], want[3, 1:3] = 10, [7, 8]
    np.testing.assert_array_equal(a, want)


def test_every_op_kind_has_a_lowering():
    from pypto.frontend import evaluate, ops
    assert set(ops.OTHER) == set(evaluate._RULES) | {"read"}
    assert not set(ops.EW) & set(ops.REDUCE) and not set(ops.OTHER) & set(ops.EW)
