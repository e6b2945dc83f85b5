"""Autotuning: choose a kernel's meta-parameters (tile sizes, stages) for the NPU, by the cycle
model, or for the host, by measurement.

``config`` is Triton's ``Config``; ``autotuner`` the ``@pypto.autotune`` decorator and the
sweep; ``objectives`` the two ways of timing a config; ``results`` the in-memory and on-disk
memory of past sweeps; ``report`` what a sweep found and the sweep loop all share;
``tile_size`` the same tuner for the graph API's ``tile_map(..., tile_size="auto")``, and
``launch_form`` for its ``parallel_strategy="auto"`` kernels.
"""
from .autotuner import Autotuner, autotune
from .config import Config
from .report import AutotuneError, TuningReport

__all__ = ["Autotuner", "AutotuneError", "Config", "TuningReport", "autotune"]
