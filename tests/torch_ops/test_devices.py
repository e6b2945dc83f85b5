"""The NPU path of a registered op, with stand-ins (no NPU here): tensors on a device with a
registered runtime are not read on the host; each kernel is compiled for their layout and
handed to the runtime with their device pointers, the grid and torch's current stream."""
import types

import pytest

from .ops import gelu, scale_add, torch

from pypto.torch_ops import devices  # noqa: E402
from pypto.torch_ops.sources import make_source  # noqa: E402


class StandInNPUTensor:
    """What a torch_npu tensor offers the hand-off: device, data pointer, layout, dtype."""

    def __init__(self, shape, ptr, dtype=torch.float32):
        self.shape, self.dtype, self._ptr = torch.Size(shape), dtype, ptr
        self.device = types.SimpleNamespace(type="npu")

    def data_ptr(self):
        return self._ptr

    def stride(self):
        strides, step = [], 1
        for n in reversed(self.shape):
            strides.insert(0, step)
            step *= n
        return tuple(strides)

    def numel(self):
        return self.shape.numel()

    def reshape(self, *shape):
        return StandInNPUTensor(shape[0] if len(shape) == 1 else shape, self._ptr, self.dtype)


class RecordingRuntime:
    def __init__(self):
        self.launches = []

    def launch(self, kernel, grid, args, stream):
        self.launches.append((kernel, grid, args, stream))


@pytest.fixture
def npu(monkeypatch):
    runtime = RecordingRuntime()
    monkeypatch.setattr(devices, "DEVICE_RUNTIMES", {})
    devices.register_device_runtime("npu", runtime)
    monkeypatch.setattr(torch, "npu", types.SimpleNamespace(current_stream=lambda: "stream 7"),
                        raising=False)
    return runtime


def test_kernel_op_is_handed_to_the_runtime(npu):
    source = make_source(scale_add, outputs={"out": "x"},
                         args={"n": lambda x: x.numel(), "BLOCK": 1024},
                         grid=lambda x, BLOCK: (-(-x.numel() // BLOCK),))
    x, y, out = (StandInNPUTensor((5000,), ptr) for ptr in (0x1000, 0x9000, 0x20000))
    source.run({"x": x, "y": y, "alpha": 2.0}, [out])
    [(kernel, grid, args, stream)] = npu.launches
    assert grid == (5,) and stream == "stream 7"
    assert [a.data_ptr for a in args[:3]] == [0x1000, 0x9000, 0x20000]
    assert args[0].shape == (5000,) and args[0].strides == (1,)
    assert args[3:] == [5000, 2.0]                      # n, alpha; BLOCK is compiled in
    assert "pto.tstore" in kernel.asm["pto"]             # the chip's program, for the runtime


def test_tile_op_runs_every_kernel_on_the_device(npu):
    source = make_source(gelu)
    x, out = StandInNPUTensor((3, 64, 128), 0x4000), StandInNPUTensor((3, 64, 128), 0x8000)
    source.run({"x": x}, [out])
    [(kernel, grid, args, _)] = npu.launches
    assert [a.data_ptr for a in args] == [0x4000, 0x8000]
    assert args[0].shape == (192, 128)                   # leading dims flattened into rows


def test_without_a_runtime_the_error_says_so(monkeypatch):
    monkeypatch.setattr(devices, "DEVICE_RUNTIMES", {})
    source = make_source(scale_add, outputs={"out": "x"}, args={"n": 8, "BLOCK": 8})
    x = StandInNPUTensor((8,), 0x1000)
    with pytest.raises(RuntimeError, match=r"argument\(s\) 'x', 'y', 'out' are on torch device "
                                           r"'npu', which has no PyPTO runtime.*CANN runtime"):
        source.run({"x": x, "y": x, "alpha": 1.0}, [x])
    with pytest.raises(TypeError, match="launch"):
        devices.register_device_runtime("npu", object())


def test_register_op_adds_a_kernel_for_each_registered_device(monkeypatch):
    """``register_op`` registers the op's implementation for every device type that has a
    runtime (torch_npu's "npu" on Ascend; "cuda" here, a dispatch key every torch build has)."""
    import pypto
    monkeypatch.setattr(devices, "DEVICE_RUNTIMES", {})
    devices.register_device_runtime("cuda", RecordingRuntime())
    pypto.register_op("test_gelu_on_device", gelu, alias=False)
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    assert has("pypto::test_gelu_on_device", "CUDA")
    assert not has("pypto::test_gelu", "CUDA")          # registered with no runtime
