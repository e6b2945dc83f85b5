"""``parallel_strategy="auto"`` with a given tile size: the launch form of a graph kernel --
``"tile"`` (one block per tile, ``"data_parallel"``) or ``"stride"`` (a block per core looping
over tiles, ``"grid_stride"``) -- that the cycle model ranks fastest on the compile's target.

The tuner of ``tile_size="auto"`` and ``@pypto.autotune`` (``tuning.report.sweep``), applied
where the form matters: to the kernel as fused and launched, when ``pypto.compile`` builds it,
so a chain of "auto" nodes still fuses and the target is the compile's. Each form's kernel is
compiled (the winner's compile is the one ``pypto.compile`` then uses) and modelled; the
ranking is remembered per kernel sources, tile ops' sources, grids and target, in memory and on
disk (``tuning.results``). ``pypto.compile(options={"autotune": False})`` keeps
``plan.choose_form``'s tile-count rule instead. It is the graph's (the tuner knows nothing of
graphs): the graph imports the tuner, not the other way.
"""
from __future__ import annotations

from ..runtime.kernel import __version__
from ..tuning import results
from ..tuning.objectives import npu_time_ms
from ..tuning.report import AutotuneError, TuningReport, compiling, sweep

STRATEGY_OF = {"tile": "data_parallel", "stride": "grid_stride"}
_MEMO: dict = {}


def fastest(kernels: list, target):
    """The one of ``kernels`` (a group's ``graph.module.Kernel`` in each candidate form) that
    models fastest on ``target``; its ``tuning`` is the report."""
    ops = [node.op.source_hash() for node in kernels[0].group.nodes]   # the source calls them
    digest = results.entry_digest(([(k.source, k.grid) for k in kernels], ops, target.name,
                                   "launch form", __version__))
    tiling = kernels[0].group.tiling
    fields = dict(kernel=kernels[0].name, objective="npu", target=target.name,
                  key=f"{tiling.num_tiles} tiles of {tiling.tile}")
    try:
        data, cached = results.memoised(_MEMO, digest, lambda: _sweep(kernels, fields),
                                        lambda d: 0 <= d.get("winner", -1) < len(kernels))
    except AutotuneError:          # neither form compiles: pypto.compile reports why, in the
        return kernels[0]          # graph's terms (the kernel and its tile_map nodes)
    report = TuningReport.from_json(data, cached=cached, **fields)
    winner = kernels[report.winner]
    winner.tuning = report
    return winner


def _sweep(kernels, fields) -> dict:
    report = sweep(kernels, lambda k: f"{STRATEGY_OF[k.form]}, grid {k.grid}", _time,
                   f"parallel_strategy='auto': neither launch form of {fields['kernel']} "
                   "compiles", fields)
    return report.to_json()


def _time(kernel, spent) -> float:
    with compiling(spent):
        kernel.compiled = kernel.jit.compile(*kernel.standins())
    return kernel_time_ms(kernel)


def kernel_time_ms(kernel) -> float:
    """The cycle model's time for a graph's generated kernel (``module.Kernel``), on stand-in
    arrays of its arguments' shapes: the model reads shapes, not data."""
    values = dict(zip(kernel.jit.arg_names, kernel.standins()))
    return npu_time_ms(kernel.jit, kernel.grid, values)
