"""Names the seed uses that depend on code it never defines: clear errors, not AttributeError.

They stand for integrations with the real CANN stack (the NPU's convolution), which a host
simulation of the NPU does not have. (``register_op`` is real: ``pypto/torch_ops``;
``call_ascend_c`` too: ``pypto/ascend_c``.)
"""
from __future__ import annotations


def conv2d(input, weight, *args, **kwargs):
    """Not available: no convolution primitive exists in the kernel language yet."""
    raise NotImplementedError(
        "pypto.conv2d: there is no convolution in PyPTO yet (tiles have rank <= 2); express "
        "it as a matmul over an im2col view of the input, or a @pypto.jit kernel")
