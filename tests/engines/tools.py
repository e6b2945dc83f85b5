"""Whether the pto-isa engine's tools are here: the engine tests skip, with the reason, if not;
and the same kernel on another engine."""
import pytest

import pypto

from pypto.backends.ptoisa import toolchain

try:
    TOOLS = toolchain.find()
    MISSING = ""
except toolchain.ToolMissing as e:
    TOOLS, MISSING = None, str(e)

needs_tools = pytest.mark.skipif(TOOLS is None, reason=f"pto-isa engine unavailable: {MISSING}")


def retarget(kernel, engine_name: str):
    """``kernel`` (a ``@pypto.jit`` function) with the same options on ``engine_name``."""
    return pypto.jit(kernel.fn, target=kernel.target_name, auto_sync=kernel.auto_sync,
                     engine=engine_name, dynamic=dict(kernel.dynamic),
                     do_not_specialize=tuple(kernel.do_not_specialize))
