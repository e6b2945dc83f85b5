"""uint16/uint32 and float8 kernels on pto-isa's CPU simulator: the `.pto` that
legalize_storage produces (A2/A3 instructions on the values' bits) must compute what the
native engine and ml_dtypes/numpy compute, bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

import pypto
from tests.engines.tools import needs_tools
from pypto.packed_int4 import pack, unpack
from tests.language.test_lowp_dtypes import E4M3, E5M2, F32_EDGES, convert, unsigned_ops
from tests.language.utils import assert_exact

pytestmark = [needs_tools, pytest.mark.slow]


def _simulated(kernel, grid, *args, **constants):
    pypto.jit(kernel.fn, engine="pto-isa")[grid](*args, **constants)
    return args


@pytest.mark.parametrize("fmt", [E4M3, E5M2])
def test_float8_encode_and_decode_on_the_simulator(fmt):
    """Failed before the float32 -> float32 TCVT was dropped: pto-isa rounds it to an integer,
    so every fraction was lost before encoding."""
    x = np.concatenate([F32_EDGES, -F32_EDGES]).reshape(2, -1)
    (_, encoded) = _simulated(convert, (1, 3), x, np.zeros(x.shape, fmt), R=4, C=32)
    assert_exact(encoded, x.astype(fmt), f"float32 -> {fmt} on pto-isa")
    codes = np.arange(256, dtype=np.uint8).reshape(8, 32).view(fmt)
    (_, decoded) = _simulated(convert, (2, 1), codes, np.zeros((8, 32), np.float32), R=4, C=32)
    assert_exact(decoded, codes.astype(np.float32), f"{fmt} -> float32 on pto-isa")


@pytest.mark.parametrize("d", [np.uint16, np.uint32])
def test_unsigned_arithmetic_on_the_simulator(d):
    rng = np.random.default_rng(5)
    x, y = (rng.integers(0, np.iinfo(d).max, (8, 64), dtype=d, endpoint=True) for _ in "xy")
    simulated = _simulated(unsigned_ops, (2, 2), x, y, *[np.zeros((8, 64), d) for _ in range(7)],
                           R=4, C=32)
    native = [np.zeros((8, 64), d) for _ in range(7)]
    unsigned_ops[(2, 2)](x, y, *native, R=4, C=32)
    for got, want in zip(simulated[2:], native):
        assert_exact(got, want, f"{np.dtype(d)} on pto-isa vs native")


def test_packed_int4_on_the_simulator():
    """Odd rows (37 values: the last byte's high nibble is padding), partial blocks."""
    rng = np.random.default_rng(6)
    values = rng.integers(-8, 8, (5, 37)).astype(np.int8)
    (_, out) = _simulated(convert, (2, 2), pypto.int4_tensor(pack(values), (5, 37)),
                          np.zeros((5, 37), np.float32), R=4, C=32)
    assert_exact(out, values.astype(np.float32), "int4 -> float32 on pto-isa")
    x = rng.uniform(-10, 10, (5, 37)).astype(np.float32)
    packed = np.full((5, 19), 0x77, np.uint8)
    _simulated(convert, (2, 2), x, pypto.int4_tensor(packed, (5, 37)), R=4, C=32)
    assert (unpack(packed, 37) == np.clip(np.trunc(x), -8, 7)).all()
    assert (packed[:, -1] >> 4 == 0).all()
