"""``pypto.Config``: one point of a tuning sweep, as Triton spells it."""
from __future__ import annotations


class Config:
    """``Config({"BLOCK": 256}, num_stages=2)``: meta-parameter values for the kernel's
    constexpr parameters, and a pipelining depth. ``num_stages`` reaches the kernel as its
    ``num_stages`` parameter (declare ``num_stages: pl.constexpr`` and write
    ``pl.range(..., num_stages=num_stages)``): in PyPTO the kernel says which loops are
    double-buffered, where Triton's compiler pipelines every loop. ``pre_hook(args)`` runs
    before each launch with this config (the arguments by name, the config's included)."""

    def __init__(self, kwargs, num_stages=1, pre_hook=None):
        if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
            raise TypeError(f"pypto.Config(kwargs=...) must be a dict of meta-parameter names "
                            f"to values, got {kwargs!r}")
        if num_stages not in (1, 2):
            raise ValueError(f"pypto.Config(num_stages={num_stages!r}): 1 or 2 (double "
                             "buffering) on this chip")
        if pre_hook is not None and not callable(pre_hook):
            raise TypeError(f"pypto.Config(pre_hook={pre_hook!r}) must be a function taking "
                            "the launch's arguments by name, or None")
        self.kwargs = dict(kwargs)
        self.num_stages = num_stages
        self.pre_hook = pre_hook

    def all_kwargs(self, takes_num_stages: bool) -> dict:
        """The keyword arguments a launch with this config adds."""
        extra = {"num_stages": self.num_stages} if takes_num_stages else {}
        return {**self.kwargs, **extra}

    def __str__(self) -> str:
        return ", ".join([f"{k}: {v}" for k, v in self.kwargs.items()] +
                         [f"num_stages: {self.num_stages}"])

    def __repr__(self) -> str:
        return f"pypto.Config({self.kwargs!r}, num_stages={self.num_stages})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Config) and (self.kwargs, self.num_stages) == \
            (other.kwargs, other.num_stages)

    def __hash__(self) -> int:
        return hash((tuple(sorted(self.kwargs.items(), key=str)), self.num_stages))
