"""Ascend C kernels in a PyPTO program (docs/ascend_c.md).

``ascend_c_kernel(source, name, outputs=...)`` declares a kernel written in C++ against pto-isa
(``kernel``; its signature read by ``signature``, its options checked by ``declaration``);
``call_ascend_c(op, inputs)`` (``call``) runs it on arrays now, or adds it to a graph
(``graph/ascend_c_node.py``). On this host it is built for
pto-isa's CPU simulator as the pto-isa engine builds kernels (``library``); for the NPU the
declaration records its bisheng build and launch (``npu``).
"""
from .call import call_ascend_c
from .kernel import (AscendCKernel, Binding, OutputRuleError, OutputSpec, TensorSpec,
                     ascend_c_kernel)
from .library import AscendCCompileError
from .npu import NpuBuild, NpuLaunch

__all__ = ["AscendCKernel", "AscendCCompileError", "Binding", "NpuBuild", "NpuLaunch",
           "OutputRuleError", "OutputSpec", "TensorSpec", "ascend_c_kernel", "call_ascend_c"]
