"""Autotuning: choose a kernel's meta-parameters (tile sizes, stages) for the NPU, by the cycle
model, or for the host, by measurement.

``config`` is Triton's ``Config``; ``autotuner`` the ``@pypto.autotune`` decorator and the
sweep; ``objectives`` the two ways of timing a config; ``results`` the in-memory and on-disk
memory of past sweeps; ``report`` what a sweep found and the sweep loop all share. The graph
API's ``tile_map(..., tile_size="auto")`` and ``parallel_strategy="auto"`` kernels use the same
sweep from above (``graph/autotile.py``, ``graph/launch_form.py``): nothing here knows graphs.
"""
from .autotuner import Autotuner, autotune
from .config import Config
from .report import AutotuneError, TuningReport

__all__ = ["Autotuner", "AutotuneError", "Config", "TuningReport", "autotune"]
