"""What a config costs: modelled NPU time (the cycle model on the compiled program, nothing
run) or measured host time (``pypto.testing.do_bench`` of real launches)."""
from __future__ import annotations

from ..target import get_target


def npu_time_ms(jitfn, grid, values: dict) -> float:
    """The cycle model's time for launching ``jitfn[grid](**values)`` on its target."""
    from ..backends.ascend.cycle_model import model_launch
    from ..compiler.pto.program import TensorArg
    from ..runtime.hooks import pto_program
    bound = jitfn._bind((), values)
    kernel, target = jitfn._get_kernel(bound)
    grid = jitfn._grid(grid, bound, kernel.metadata, target)
    program = pto_program(kernel)
    runtime = {p.name: bound[p.name] for p in program.params
               if not (isinstance(p, TensorArg) and p.workspace)}
    return model_launch(program, grid, runtime, get_target(kernel.metadata["target"])).time_ms


def kernel_time_ms(kernel) -> float:
    """The cycle model's time for a graph's generated kernel (``graph.module.Kernel``), on
    stand-in arrays of its arguments' shapes: the model reads shapes, not data."""
    from ..graph.module import _standins
    values = dict(zip(kernel.jit.arg_names, _standins(kernel)))
    return npu_time_ms(kernel.jit, kernel.grid, values)


def host_time_ms(jitfn, grid, values: dict, reset, warmup: float, rep: float) -> float:
    """Median host time of the launch, the ``reset`` tensors zeroed before every call (and
    before the compile, so a kernel that accumulates starts from zero each time)."""
    from ..runtime.args import as_array
    from ..testing import do_bench
    zeroed = [as_array(values[n]) for n in reset]
    launch = jitfn if grid is None else jitfn[grid]

    def call():
        for arr in zeroed:
            arr[...] = 0
        launch(**values)

    return do_bench(call, warmup=warmup, rep=rep)
