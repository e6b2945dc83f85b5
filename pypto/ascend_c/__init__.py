"""Ascend C kernels in a PyPTO program (docs/ascend_c.md).

``ascend_c_kernel(source, name, outputs=...)`` declares a kernel written in C++ against pto-isa
(``kernel``; its signature read by ``signature``, its options checked by ``declaration``);
``pypto.call_ascend_c(op, inputs)`` (``graph/ascend_c_node.py``) runs it on arrays now
(``AscendCKernel.run``), or adds it to a graph. On this host it is built for
pto-isa's CPU simulator as the pto-isa engine builds kernels (``library``); for the NPU the
declaration records its bisheng build and launch (``npu``).
"""
from .kernel import (AscendCKernel, Binding, OutputRuleError, OutputSpec, TensorSpec,
                     ascend_c_kernel)
from .library import AscendCCompileError
from .npu import NpuBuild, NpuLaunch

__all__ = ["AscendCKernel", "AscendCCompileError", "Binding", "NpuBuild", "NpuLaunch",
           "OutputRuleError", "OutputSpec", "TensorSpec", "ascend_c_kernel"]
