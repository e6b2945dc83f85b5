"""torch CPU tensors as kernel arguments: the warm path (keyed like numpy arrays, data
pointers to the kernel's _ptr entry), views, half types, and the refusals torch would make."""
import numpy as np
import pytest

from .ops import scale_add, torch

import pypto  # noqa: E402
import pypto.language as pl  # noqa: E402


@pypto.jit(dynamic=["x", "out"])
def copy_rows(x, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    pl.store(out, offsets=(pid * BLOCK,), value=pl.load(x, offsets=(pid * BLOCK,),
                                                        shape=(BLOCK,)))


def _launch(x, y, out, alpha=2.0):
    n = x.shape[0]
    scale_add[(-(-n // 256),)](x, y, out, n, alpha, BLOCK=256)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32"])
def test_results_and_the_warm_path(dtype):
    tdtype = getattr(torch, dtype)
    x = (torch.randn(1000) * 8).to(tdtype)
    y = (torch.randn(1000) * 8).to(tdtype)
    out = torch.zeros(1000, dtype=tdtype)
    _launch(x, y, out, 3)
    expected = (x.float() * 3 + y.float()).to(tdtype) if dtype != "int32" else x * 3 + y
    torch.testing.assert_close(out, expected, rtol=1e-2 if "16" in dtype else 1e-6, atol=0.1)
    key = scale_add._key(x, y, out, 1000, 3, BLOCK=256)
    assert key in scale_add._fast, "a second launch with the same layout takes the warm path"
    compiled = scale_add.compile(x, y, out, 1000, 3, BLOCK=256)
    assert compiled.pointer_entry is not None           # static layout: data pointers only
    out.zero_()
    _launch(x, y, out, 3)
    torch.testing.assert_close(out, expected, rtol=1e-2 if "16" in dtype else 1e-6, atol=0.1)


def test_views_and_dynamic_shapes_use_numpy_views():
    base = torch.arange(4000, dtype=torch.float32)
    x, y, out = base[::4], torch.ones(1000), torch.zeros(1000)
    for _ in range(2):
        _launch(x, y, out)
        torch.testing.assert_close(out, x * 2 + 1)
    for n in (300, 700):
        src, dst = torch.randn(n), torch.zeros(n)
        copy_rows[(-(-n // 128),)](src, dst, BLOCK=128)
        assert torch.equal(src, dst)
    assert copy_rows.compile(src, dst, BLOCK=128).pointer_entry is None


def test_numpy_and_torch_mixed():
    x, y = torch.randn(500), np.ones(500, np.float32)
    out = torch.zeros(500)
    _launch(x, y, out)
    torch.testing.assert_close(out, x * 2 + 1)


def test_writing_a_tensor_that_requires_grad_is_refused():
    x, y = torch.randn(64), torch.randn(64)
    leaf = torch.zeros(64, requires_grad=True)
    with pytest.raises(RuntimeError, match="argument 'out' is stored to but is a leaf "
                                           "Variable that requires grad"):
        _launch(x, y, leaf)
    with pytest.raises(RuntimeError, match="autograd cannot see a kernel's writes"):
        _launch(x, y, leaf * 1)
    with torch.no_grad():                      # as torch allows in-place writes there
        _launch(x, y, leaf)
    torch.testing.assert_close(leaf.detach(), x * 2 + y)
    _launch(torch.randn(64, requires_grad=True), y, torch.zeros(64))   # reading is fine
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        _launch(x.numpy(), y, leaf)                # a numpy/torch mix is checked too


def test_tensor_on_another_device_names_argument_and_device():
    x = torch.randn(64)
    with pytest.raises(TypeError, match=r"argument 'y': it is a torch tensor on device "
                                        r"'meta'.*pass a CPU tensor"):
        _launch(x, torch.empty(64, device="meta"), torch.zeros(64))


def test_cuda_and_npu_tensors_name_the_argument_and_what_to_do():
    """No CUDA or NPU here: fake tensors carry those devices without memory."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        on_cuda = mode.from_tensor(torch.zeros(64), static_shapes=True).to("cuda:0")
    with pytest.raises(TypeError, match=r"argument 'out': it is a torch tensor on device "
                                        r"'cuda:0'.*pass a CPU tensor \(tensor.cpu\(\)\)"):
        _launch(torch.randn(64), torch.randn(64), on_cuda)
    from pypto.layout import device_hint
    assert "needs the CANN runtime" in device_hint("npu") and device_hint("cuda") == ""


def test_freed_tensors_are_not_read_through_stale_keys():
    """The warm key holds layouts, not tensors: a new tensor of the same layout is launched
    with its own data pointer."""
    for value in (1.0, 2.0, 3.0):
        x, y, out = torch.full((256,), value), torch.zeros(256), torch.zeros(256)
        _launch(x, y, out, 1.0)
        assert torch.all(out == value)
        del x, y, out


def test_parameters_take_the_warm_path_and_are_read_only_under_grad():
    weight = torch.nn.Parameter(torch.randn(512))
    y, out = torch.randn(512), torch.zeros(512)
    _launch(weight, y, out, 0.5)
    torch.testing.assert_close(out, weight.detach() * 0.5 + y)
    assert scale_add._key(weight, y, out, 512, 0.5, BLOCK=256) in scale_add._fast
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        _launch(y, y, weight)
