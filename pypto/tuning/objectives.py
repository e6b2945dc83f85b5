"""What a config costs: modelled NPU time (the cycle model on the compiled program, nothing
run) or measured host time (``pypto.testing.do_bench`` of real launches)."""
from __future__ import annotations

from ..layout import as_array
from ..testing import do_bench


def npu_time_ms(jitfn, grid, values: dict) -> float:
    """The cycle model's time for launching ``jitfn[grid](**values)`` on its target."""
    from ..backends.ascend.model.launch import model_kernel  # lazy: loads when a config is modelled
    return model_kernel(jitfn, grid, **values).time_ms


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
