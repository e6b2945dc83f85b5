"""CANN PyPTO's top-level names that ``import pypto`` resolves on first use.

``pypto/__init__.py`` asks ``lookup(name)`` for a name it does not define: CANN's dtypes,
``RunMode``, ``DYNAMIC``, option scopes, the ops (``pypto.add``, ``pypto.amax``, ...), control
(``pypto.loop``, ``pypto.view``, ``pypto.assemble``), and the unavailable names, which raise
when called. PyPTO's own names (``pypto.exp``, ``pypto.sum``, ``pypto.matmul``, ...) stay
PyPTO's; inside a traced CANN kernel they act as CANN's op of the same name.
"""
from __future__ import annotations

from . import build, options
from .annotations import DYNAMIC
from .dtypes import BY_NAME, DataType
from .unavailable import CATALOGUE, unavailable


class TileOpFormat:
    """``pypto.TileOpFormat``: tensor formats (PyPTO takes ND tensors; NZ is accepted and
    computed as ND, see docs/from_cann_pypto.md)."""
    TILEOP_ND = "ND"
    TILEOP_NZ = "NZ"


EXPORTS = {**BY_NAME, "DataType": DataType, "RunMode": options.RunMode, "DYNAMIC": DYNAMIC,
           "DYN": DYNAMIC, "options": options.options, "set_options": options.set_options,
           "TileOpFormat": TileOpFormat, **build.FUNCTIONS}


def lookup(name: str):
    """The object CANN's ``pypto.<name>`` is here; AttributeError if CANN has no such name."""
    if name in EXPORTS:
        return EXPORTS[name]
    if name in CATALOGUE:
        return unavailable(name)
    raise AttributeError(name)
