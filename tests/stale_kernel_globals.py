"""Kernels of tests/test_stale_kernels.py that read module globals: a constant, a plain helper
and an imported module's attribute (``kern``), or only pl, a dtype and math (``plain``)."""
import math

import pypto.language as pl
from tests import stale_kernel_cfg as cfg

SCALE = 3.0
B = 5      # globals that plain's parameter and local shadow: not read, not rechecked
a = 7


def rows(b):
    return b * 3


def kern(x, out, B: pl.constexpr):
    a = pl.load(x, offsets=(0,), shape=(64,))
    pl.store(out, offsets=(0,), value=a * B * SCALE + rows(1) + cfg.FACTOR)


def plain(x, out, B: pl.constexpr):
    a = pl.load(x, offsets=(0,), shape=(64,))
    pl.store(out, offsets=(0,), value=a * B * math.floor(1.5) + pl.zeros((64,), pl.float32))
