"""CANN PyPTO's top-level names that ``import pypto`` resolves on first use.

``pypto/__init__.py`` asks ``lookup(name)`` for a name it does not define: CANN's dtypes,
``RunMode``, ``DYNAMIC``, option scopes, the ops (``pypto.add``, ``pypto.amax``, ...), control
(``pypto.loop``, ``pypto.view``, ``pypto.assemble``), and the unavailable names, which raise
when called. PyPTO's own names (``pypto.exp``, ``pypto.sum``, ``pypto.matmul``, ...) stay
PyPTO's; inside a traced CANN kernel they act as CANN's op of the same name.
"""
from __future__ import annotations

import enum

from . import build, options
from .annotations import DYNAMIC
from .dtypes import BY_NAME, DataType
from .unavailable import CATALOGUE, NotAvailableError, unavailable


class TileOpFormat:
    """``pypto.TileOpFormat``: tensor formats (PyPTO takes ND tensors; NZ is accepted and
    computed as ND, see docs/from_cann_pypto.md)."""
    TILEOP_ND = "ND"
    TILEOP_NZ = "NZ"


class CastMode(enum.Enum):
    """``pypto.CastMode``: how ``pypto.cast`` rounds (``rounding``: PyPTO's ``pl.cast`` name)."""
    CAST_NONE = None
    CAST_RINT = "rint"
    CAST_FLOOR = "floor"
    CAST_CEIL = "ceil"
    CAST_TRUNC = "trunc"
    CAST_ROUND = "<round half away from zero>"
    CAST_ODD = "<round to odd>"

    @classmethod
    def rounding(cls, mode):
        """``pl.cast``'s rounding for ``mode`` (None: the default); raises if it has none."""
        if mode is None:
            return None
        mode = cls(mode) if not isinstance(mode, cls) else mode
        if mode.value is not None and mode.value.startswith("<"):
            raise NotAvailableError(f"pypto.cast(mode=pypto.CastMode.{mode.name})",
                                    f"{mode.value[1:-1]} has no PTO conversion here")
        return mode.value


class SaturationMode(enum.Enum):
    """``pypto.SaturationMode``: PyPTO's conversions saturate float -> int (docs/tile_ir.md)."""
    OFF = 0
    ON = 1


EXPORTS = {**BY_NAME, "DataType": DataType, "RunMode": options.RunMode, "DYNAMIC": DYNAMIC,
           "DYN": DYNAMIC, "options": options.options, "set_options": options.set_options,
           "TileOpFormat": TileOpFormat, "CastMode": CastMode,
           "SaturationMode": SaturationMode, **build.FUNCTIONS}


def lookup(name: str):
    """The object CANN's ``pypto.<name>`` is here; AttributeError if CANN has no such name."""
    if name in EXPORTS:
        return EXPORTS[name]
    if name in CATALOGUE:
        return unavailable(name)
    raise AttributeError(name)
