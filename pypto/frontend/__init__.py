"""``pypto.frontend``: Huawei CANN PyPTO 0.2.0 kernels, unchanged, with real results on the host.

``@pypto.frontend.jit`` kernels written for CANN's PyPTO are traced with symbolic tensors
(``symbolic``, ``scalars``, ``tracer``, ``build``; unrolled loop iterations merged back by
``coalesce``), lowered to fused rank-2 ``@pypto.jit`` kernels through the graph API (``ops``
rules, ``lowering``, ``indexing``, ``sorting``, ``evaluate``) and run on the caller's torch CPU tensors or
numpy arrays (``runtime``; SIM calls also write CANN's swim lane, ``sim_output``); ``reference`` runs a trace op by op in torch, to check against.
CANN's other top-level names (``pypto.DT_*``, ``pypto.RunMode``, ``pypto.loop``, ...) are
resolved by ``names``. docs/from_cann_pypto.md.
"""
from .launch import JitKernel, NoNPUWarning, dynamic, function, jit
from .lowering import TileShapeWarning
from .unavailable import NotAvailableError
from . import names

__all__ = ["jit", "function", "dynamic", "JitKernel", "NoNPUWarning", "NotAvailableError",
           "TileShapeWarning", "names"]
