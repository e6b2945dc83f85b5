"""Whether the pto-isa engine's tools are here: the engine tests skip, with the reason, if not."""
import pytest

from pypto.backends.ptoisa import toolchain

try:
    TOOLS = toolchain.find()
    MISSING = ""
except toolchain.ToolMissing as e:
    TOOLS, MISSING = None, str(e)

needs_tools = pytest.mark.skipif(TOOLS is None, reason=f"pto-isa engine unavailable: {MISSING}")
