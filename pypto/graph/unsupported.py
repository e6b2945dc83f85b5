"""Names the seed uses that depend on code it never defines: clear errors, not AttributeError.

They stand for integrations with the real CANN stack (Ascend C operator libraries, the NPU's
convolution), which a host simulation of the NPU does not have. (``register_op`` is real:
``pypto/torch_ops``.)
"""
from __future__ import annotations


def call_ascend_c(op, inputs, *args, **kwargs):
    """Not available: there is no Ascend C toolchain or operator library here."""
    raise NotImplementedError(
        "pypto.call_ascend_c: calling Ascend C operators needs the CANN toolchain and a real "
        "NPU; this PyPTO simulates the NPU on the host. Write the operator as a @pypto.jit "
        "kernel or a @pypto.tile_op instead")


def conv2d(input, weight, *args, **kwargs):
    """Not available: no convolution primitive exists in the kernel language yet."""
    raise NotImplementedError(
        "pypto.conv2d: there is no convolution in PyPTO yet (tiles have rank <= 2); express "
        "it as a matmul over an im2col view of the input, or a @pypto.jit kernel")
