"""Registered ops on devices other than the host: the hand-off to a device runtime.

On the host, an op's tensors are host memory and PyPTO's simulated cores run on it
(``register._implementation``). On an Ascend machine, torch_npu tensors live in the NPU's HBM,
and the same op must run the *chip's* program on them: each kernel of the op, compiled for the
tensors' shapes and dtypes (specialised from stand-in arrays: no data is copied to the host),
handed to the NPU runtime with the tensors' device pointers and torch_npu's current stream.
That runtime is what CANN provides (``.pto`` → ``ptoas`` → pto-isa C++ → bisheng → a kernel
binary launched on the stream); this PyPTO has none, so ``DEVICE_RUNTIMES`` is empty unless a
runtime is registered, and an NPU tensor gets the clear error ``runtime/args.py`` gives.

``register_device_runtime("npu", runtime)`` installs one. A runtime is any object with

    launch(kernel: CompiledKernel, grid: tuple, args: list, stream) -> None

where ``args`` follows ``kernel.runtime_params``: tensors as ``DeviceTensor`` (device
pointer, shape, element strides, dtype), scalars as Python numbers; ``kernel.asm["pto"]`` is
the program, ``kernel.metadata`` its target, kind and buffers. ``register_op`` adds the op's
kernel for every registered device type that torch knows (``op.register_kernel``); the tests
drive ``launch_on_device`` with a stand-in runtime and stand-in tensors, as the benchmarks'
NPU baseline is tested with a stand-in torch.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..target import get_target
from ..language import dtypes as dt
from ..layout import device_hint
from ..runtime.args import standin, to_torch

DEVICE_RUNTIMES: dict = {}       # torch device type -> runtime


@dataclass(frozen=True)
class DeviceTensor:
    """A tensor argument as a device runtime receives it."""
    data_ptr: int
    shape: tuple
    strides: tuple            # in elements
    dtype: object             # PyPTO dtype


def register_device_runtime(device_type: str, runtime) -> None:
    """Run registered ops on torch tensors of ``device_type`` through ``runtime``."""
    if not callable(getattr(runtime, "launch", None)):
        raise TypeError("register_device_runtime: the runtime needs a "
                        "launch(kernel, grid, args, stream) method")
    DEVICE_RUNTIMES[device_type] = runtime


def current_stream(device_type: str):
    """torch's current stream for ``device_type`` (``torch.npu.current_stream()`` under
    torch_npu), or None where the device module has none."""
    import torch  # lazy: torch loads on first use, never with pypto
    module = getattr(torch, device_type, None)
    stream = getattr(module, "current_stream", None)
    return stream() if callable(stream) else None


def standin_of(tensor):
    """A host stand-in with ``tensor``'s shape, dtype and strides (``runtime.args.standin``)."""
    return standin(tensor.shape, tensor.dtype, tensor.stride())


def _device_arg(value):
    if hasattr(value, "data_ptr") and hasattr(value, "stride"):
        return DeviceTensor(value.data_ptr(), tuple(value.shape), tuple(value.stride()),
                            dt.from_any(value.dtype))
    return value


def launch_on_device(kernel, grid, values: dict, device_type: str) -> None:
    """Compile ``kernel`` (a JITFunction) for ``values`` (torch device tensors and scalars by
    parameter name) and hand it to the device's runtime."""
    runtime = DEVICE_RUNTIMES.get(device_type)
    if runtime is None:
        on_device = [n for n, v in values.items() if hasattr(v, "device")]
        raise RuntimeError(f"{kernel.__name__}: argument(s) {', '.join(map(repr, on_device))} "
                           f"are on torch device '{device_type}', which has no PyPTO runtime "
                           "(pypto.torch_ops.devices.register_device_runtime installs one)"
                           f"{device_hint(device_type)}")
    hosts = {n: standin_of(v) if hasattr(v, "stride") else v for n, v in values.items()}
    compiled = kernel.compile(**hosts)
    grid = kernel._grid(grid, hosts, compiled.metadata,       # as a host launch reads it
                        get_target(compiled.metadata["target"]))
    args = [_device_arg(values[name]) for name, _, _ in compiled.runtime_params]
    runtime.launch(compiled, grid, args, current_stream(device_type))


def device_of(named: dict, op_name: str) -> str:
    """The device type of an op's tensor arguments (``named``: parameter name -> value;
    "cpu" for host tensors). Tensors on two devices are refused, naming each, as torch's own
    ops refuse them (a meta tensor beside a CPU one would otherwise reach the fake kernel and
    return uninitialised memory)."""
    devices = {n: str(v.device) for n, v in named.items() if hasattr(v, "device")}
    if len(set(devices.values())) > 1:
        where = ", ".join(f"{n!r} on {d}" for n, d in devices.items())
        raise RuntimeError(f"{op_name}: expected all tensors on one device, but got {where}; "
                           "move them to one device first (tensor.to(device))")
    return next(iter(named[n].device.type for n in devices), "cpu")


def run_module_on_device(module, inputs: dict, outs: list, device_type: str) -> None:
    """A compiled graph's kernels in order on the device: intermediates allocated there,
    every launch handed to the device runtime."""
    import torch  # lazy: torch loads on first use, never with pypto
    values = {id(t): inputs[t.name] for t in module.placeholders}
    given = dict(zip((id(t) for t in module.outputs), outs))
    device = next(iter(inputs.values())).device
    if module.ascend_c_steps:
        raise NotImplementedError(
            f"graph {module.graph.name!r} calls Ascend C kernel(s) "
            f"{[s.name for s in module.ascend_c_steps]}: on a {device_type!r} device they need "
            "their bisheng build (kernel.npu_build), which PyPTO does not hand to device "
            "runtimes; run the graph on CPU tensors (pto-isa's CPU simulator)")
    for kernel in module.kernels:
        out = given.get(id(kernel.output))
        if out is None:
            out = torch.empty(kernel.output.shape, dtype=to_torch(kernel.output.dtype),
                              device=device)
        args = [values[id(t)] for t in kernel.params] + [out]
        launch_on_device(kernel.jit, kernel.grid, dict(zip(kernel.jit.arg_names, args)),
                         device_type)
        values[id(kernel.output)] = out
