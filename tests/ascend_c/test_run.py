"""Ascend C kernels built for pto-isa's CPU simulator and run on arrays, against numpy; the
disk cache; compile errors at the user's line; simulator failures as SimulatorError."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pypto
from pypto.ascend_c import AscendCCompileError
from pypto.backends.ptoisa import engine

from .kernels import MATMUL, VADD, declare_matmul, declare_sum_diff, declare_vadd, needs_tools

pytestmark = needs_tools
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def vadd():
    return declare_vadd()


@pytest.fixture(scope="module")
def matmul():
    return declare_matmul()


@pytest.mark.parametrize("n", [1, 1000, 1024, 5000])
def test_elementwise_kernel_equals_numpy(vadd, n):
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal((2, n), dtype=np.float32)
    z = pypto.call_ascend_c(vadd, [x, y])
    assert z.dtype == np.float32 and z.shape == (n,)
    np.testing.assert_array_equal(z, x + y)          # one fp32 add per element: exact


def test_two_outputs_from_in_out_marks():
    op = declare_sum_diff()
    assert op.inputs == ["x", "y"] and op.outputs == ["s", "d"]
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 1300)).astype(np.float16)
    s, d = op(x, y)
    np.testing.assert_array_equal(s, x + y)          # fp16 add/sub, rounded once
    np.testing.assert_array_equal(d, x - y)


@pytest.mark.parametrize("m, k, n", [(64, 64, 64), (128, 256, 192)])
def test_matmul_kernel_equals_numpy(matmul, m, k, n):
    rng = np.random.default_rng(m + k + n)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = pypto.call_ascend_c(matmul, [a, b])
    ref = a.astype(np.float64) @ b.astype(np.float64)
    # fp16 products are exact in fp32; only the fp32 accumulation rounds
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-4 * np.sqrt(k))


def test_torch_tensors_in_torch_tensors_out(vadd):
    torch = pytest.importorskip("torch")
    x, y = torch.randn(3000), torch.randn(3000)
    z = pypto.call_ascend_c(vadd, [x, y])
    assert isinstance(z, torch.Tensor)
    torch.testing.assert_close(z, x + y, rtol=0, atol=0)


def test_non_contiguous_inputs_are_copied(vadd):
    x = np.arange(4000, dtype=np.float32)[::2]
    y = np.ones(2000, np.float32)
    np.testing.assert_array_equal(vadd(x, y), x + 1)


def test_profiled_with_host_time_and_no_model(vadd):
    x = np.ones(2048, np.float32)
    with pypto.Profiler() as prof:
        vadd(x, x)
    [launch] = prof.kernels
    assert (launch.name, launch.grid, launch.mode) == ("vadd", (2,), "ascend-c")
    assert launch.host_time_ms > 0 and launch.npu_time_ms is None and "Ascend C" in launch.error


def test_second_declaration_hits_the_disk_cache(vadd, monkeypatch):
    vadd.build()                                     # in the cache now
    monkeypatch.setattr(engine, "build", _no_compiles)
    again = declare_vadd()                           # a new object: nothing built in memory
    x = np.ones(10, np.float32)
    np.testing.assert_array_equal(again(x, x), 2 * x)


def test_pypto_cache_list_names_the_kernel(vadd):
    from pypto.cache import admin as cache_admin
    vadd.build()
    assert "vadd" in [e.name for e in cache_admin.entries() if e.kind == "ascend-c"]


def _no_compiles(*_):
    raise AssertionError("compiled although the library is in the cache")


def test_another_process_hits_the_disk_cache(vadd):
    vadd.build()
    script = textwrap.dedent("""
        import numpy as np
        from pypto.backends.ptoisa import engine
        from tests.ascend_c.kernels import declare_vadd
        def refuse(*_):
            raise SystemExit("compiled although the library is in the cache")
        engine.build = refuse
        x = np.arange(5, dtype=np.float32)
        print(declare_vadd()(x, x).tolist())
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=dict(os.environ),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[0.0, 2.0, 4.0, 6.0, 8.0]"


def test_compile_error_has_the_compilers_message_at_the_users_line():
    source = VADD.replace("TADD(tz, tx, ty);", "TADDD(tz, tx, ty);")
    op = pypto.ascend_c_kernel(source, "vadd", outputs=lambda x, y: pypto.OutputSpec(x.shape,
                                                                                     x.dtype),
                               scalars={"n": 1})
    with pytest.raises(AscendCCompileError, match="use of undeclared identifier 'TADDD'") as e:
        op.build()
    line = next(i for i, t in enumerate(source.splitlines(), 1) if "TADDD" in t)
    assert (e.value.loc.filename, e.value.loc.line) == ("<ascend_c vadd>", line)
    assert "TADDD(tz, tx, ty);" in str(e.value)


def test_an_error_inside_pto_isa_points_at_the_users_call():
    # an fp32 L1 tile loaded from an fp16 tensor: pto-isa's static_assert fires in its header,
    # and the error is placed at the user's TLOAD that instantiated it
    source = MATMUL.replace("Tile<TileType::Mat, half, BM, BK,",
                            "Tile<TileType::Mat, float, BM, BK,")
    op = pypto.ascend_c_kernel(source, "matmul", outputs=lambda a, b: pypto.OutputSpec(
        (a.shape[0], b.shape[1]), "float32"), scalars={"m": 64, "n": 64, "k": 64})
    with pytest.raises(AscendCCompileError, match=r"the C\+\+ compiler rejects Ascend C kernel "
                                                  r"'matmul': error: static assertion") as e:
        op.build()
    line = next(i for i, t in enumerate(source.splitlines(), 1) if "TLOAD(a1, ga);" in t)
    assert (e.value.loc.filename, e.value.loc.line) == ("<ascend_c matmul>", line)
    assert "(in " in e.value.message and "TLoad.hpp" in e.value.message


def test_a_kernels_assertion_is_a_simulator_error():
    source = VADD.replace("if (start >= n) return;", "assert(n < 2000 && \"n is too big\");")
    op = pypto.ascend_c_kernel(source, "vadd", outputs=lambda x, y: pypto.OutputSpec(x.shape,
                                                                                     x.dtype),
                               grid=lambda x, y: -(-x.size // 1024),
                               scalars={"n": lambda x, y: x.size})
    x = np.ones(3000, np.float32)
    with pytest.raises(engine.SimulatorError, match="assertion failed: n < 2000"):
        op(x, x)
    np.testing.assert_array_equal(op(x[:100], x[:100]), 2 * x[:100])   # still usable
