"""What a config costs: modelled NPU time (the cycle model on the compiled program, nothing
run) or measured host time (``pypto.testing.do_bench`` of real launches)."""
from __future__ import annotations

from ..compiler.pto.program import TensorArg
from ..layout import as_array
from ..runtime.hooks import pto_program
from ..target import get_target
from ..testing import do_bench


def npu_time_ms(jitfn, grid, values: dict) -> float:
    """The cycle model's time for launching ``jitfn[grid](**values)`` on its target."""
    from ..backends.ascend.model.launch import model_launch  # lazy: loads when a config is modelled
    bound = jitfn._bind((), values)
    kernel, grid, extents = jitfn.launch_plan(bound, grid)     # the launch form it runs in
    program = pto_program(kernel)
    given = {**bound, **extents}
    runtime = {p.name: given[p.name] for p in program.params
               if not (isinstance(p, TensorArg) and p.workspace)}
    return model_launch(program, grid, runtime, get_target(kernel.metadata["target"])).time_ms


def host_time_ms(jitfn, grid, values: dict, reset, warmup: float, rep: float) -> float:
    """Median host time of the launch, the ``reset`` tensors zeroed before every call (and
    before the compile, so a kernel that accumulates starts from zero each time)."""
    zeroed = [as_array(values[n]) for n in reset]
    launch = jitfn if grid is None else jitfn[grid]

    def call():
        for arr in zeroed:
            arr[...] = 0
        launch(**values)

    return do_bench(call, warmup=warmup, rep=rep)
