"""PyPTO dtypes ↔ torch dtypes (by name: both spell the types alike)."""
from __future__ import annotations

from ..language import dtypes as dt


def to_torch(dtype):
    """The torch dtype of a PyPTO (or numpy, or torch) dtype."""
    import torch
    d = dt.from_any(dtype)
    found = getattr(torch, d.name, None)
    if not isinstance(found, torch.dtype):
        raise TypeError(f"PyPTO dtype {d} has no torch counterpart")
    return found


def hint(n) -> int:
    """A concrete size for ``n``: itself if an int, else the value a symbolic size (torch's
    SymInt under dynamic shapes) was traced with. PyPTO's kernels are compiled for concrete
    shapes; the symbolic output dims are rebuilt from the input dims they follow."""
    if isinstance(n, int):
        return n
    value = getattr(getattr(n, "node", None), "hint", None)
    return int(value) if value is not None else int(n)
