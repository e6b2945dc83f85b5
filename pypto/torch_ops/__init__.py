"""PyPTO kernels as PyTorch operators: ``pypto.register_op``.

``sources`` turns what the user registers (a ``@pypto.tile_op``, a compiled graph
``Module``, a ``@pypto.jit`` kernel with a launch rule) into one interface: the op's
parameters, its outputs' shapes and dtypes from PyPTO's own shape inference, and the run on
the tensors' own memory. ``register`` makes that a ``torch.library`` custom op with a CPU
implementation, a fake implementation and, given ``backward=``, an autograd formula.
torch is imported on first use, never by ``import pypto``.
"""
from .register import register_op, registered_ops

__all__ = ["register_op", "registered_ops"]
