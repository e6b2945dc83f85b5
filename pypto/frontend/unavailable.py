"""What CANN PyPTO 0.2.0 exports that PyPTO cannot run yet, and the error that says so.

Every name CANN exports is either implemented by the frontend (``build.FUNCTIONS``, the kernel
spelling) or listed here with the reason, so that a kernel using it stops at the call with
"not available in PyPTO yet: <name>" instead of an ``AttributeError`` or a wrong result.
"""
from __future__ import annotations

# name -> why it is missing (what PyPTO would need)
CATALOGUE = {
    **{n: "data-dependent addressing (gather/scatter/index ops) on whole tensors"
       for n in ("gathermask", "index_select", "index_add", "index_add_", "index_put_",
                 "scatter_", "scatter_update", "one_hot")},
    **{n: "CANN's interleaved (value, index) block-sort format in the CANN frontend"
       for n in ("sort32", "mrgsort")},
    **{n: "distributed shared-memory ops (one simulated device only)"
       for n in ("create_shmem_tensor", "create_shmem_signal", "shmem_put", "shmem_get",
                 "shmem_signal", "shmem_wait_until", "shmem_view", "shmem_barrier_all",
                 "shmem_clear_data", "shmem_clear_signal", "my_symbolic_pe")},
    **{n: "this op in the CANN frontend" for n in (
        "cbrt", "expm1", "log10", "log1p", "gcd", "hypot", "copysign", "signbit", "sign",
        "fmod", "remainder", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
        "bitwise_left_shift", "bitwise_right_shift", "isfinite", "lrelu", "prelu",
        "expand_exp_dif", "var", "cumsum", "scaled_mm", "conv", "pad", "fillpad", "tril",
        "triu", "clone", "sin", "cos", "cond", "loop_unroll", "pass_verify_print",
        "pass_verify_save", "set_conv_tile_shapes", "get_conv_tile_shapes", "from_torch")},
}


class NotAvailableError(NotImplementedError):
    """A CANN PyPTO feature PyPTO cannot run yet (the message says what and why)."""

    def __init__(self, what: str, why: str = ""):
        reason = f" ({why})" if why else ""
        super().__init__(f"not available in PyPTO yet: {what}{reason}")


def unavailable(name: str):
    """A stand-in for CANN's ``pypto.<name>`` that raises when called."""

    def stand_in(*args, **kwargs):
        raise NotAvailableError(f"pypto.{name}", CATALOGUE.get(name, ""))

    stand_in.__name__ = name
    stand_in.__doc__ = f"CANN's pypto.{name}: not available in PyPTO yet."
    return stand_in
