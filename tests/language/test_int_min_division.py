"""``MIN // -1`` and ``MIN % -1`` of int8, int16 and int32 tiles (issue 34), decided by the
chip's rule: what the compiled program's own instruction sequence gives.

The program never asks A2/A3 for an integer division (``legalize.int_trunc_divmod``): a -1
divisor is replaced by 1 and the quotient taken as ``-x``. int16/int32 negation is TNEG, which
pto-isa's NPU code implements as TMULS by -1 (``npu/a2a3/TUnaryOp.hpp``), an integer multiply
that wraps (the CTRL saturation bit, ``npu/a2a3/TCvt.hpp``, governs float -> int conversions
only); int8 has no vector arithmetic, so its negation is computed in int16 (128) and wrapped
back into int8 by integer operations. So the chip gives MIN, with remainder 0, for all three,
which is what docs/tile_ir.md states and numpy's wrap-around gives. (Even the float32 quotient
path alone would: its 127.9995 truncates to 127, and the integer correction step adds the
last 1, wrapping.) The tests run the legalised program op by op in the interpreter (the
chip's sequence, each conversion with its rule), the native engine, the interpreter, and
pto-isa's simulator when its tools are there, and all must say MIN and 0.
"""
from __future__ import annotations

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.backends.interpreter.run import run_function
from pypto.compiler.ast_to_ir import build_function
from pypto.compiler.ir import Module
from pypto.compiler.passes import run_pipeline
from pypto.runtime.specialize import spec_key, specialise
from tests.engines.tools import needs_tools, retarget
from tests.language.test_int_division import divmod_kernel

R, C = 2, 32
DTYPES = ["int8", "int16", "int32"]


@pypto.jit
def divmod_by_constant(x, q, r, R: pl.constexpr, C: pl.constexpr):
    a = pl.load(x, offsets=(0, 0), shape=(R, C))
    pl.store(q, offsets=(0, 0), value=a // -1)
    pl.store(r, offsets=(0, 0), value=a % -1)


def _inputs(dtype):
    info = np.iinfo(dtype)
    x = np.full((R, C), info.min, dtype)
    x[1] = np.arange(C) - 16           # ordinary values beside it
    return x, np.full((R, C), -1, dtype)


def _want(x):
    return np.negative(x), np.zeros_like(x)           # numpy wraps: -MIN is MIN


def _check(q, r, x, what):
    want_q, want_r = _want(x)
    np.testing.assert_array_equal(q, want_q, err_msg=f"{what}: x // -1")
    np.testing.assert_array_equal(r, want_r, err_msg=f"{what}: x % -1")
    assert q[0, 0] == np.iinfo(x.dtype).min


def _launch(kernel, x, y):
    q, r = np.zeros_like(x), np.zeros_like(x)
    kernel[(1,)](x, y, q, r, R=R, C=C)
    return q, r


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_chips_own_sequence_gives_min(dtype):
    """The Tile IR after every pass (legalised: float32 quotients, integer corrections, the
    -1 divisor's select, int8 computed in int16 and wrapped back), run op by op."""
    x, y = _inputs(np.dtype(dtype))
    bound = divmod_kernel._bind((x, y, np.zeros_like(x), np.zeros_like(x)), dict(R=R, C=C))
    spec_args, _, _ = specialise(divmod_kernel, spec_key(divmod_kernel, bound), bound)
    fn = build_function(divmod_kernel.source, spec_args, divmod_kernel.source.node.name)
    module = run_pipeline(Module(fn, divmod_kernel.target()))
    names = [op.attrs.get("op") for op in _ops(module.kernel.body) if op.name == "tile.binary"]
    assert "floordiv" not in names and "div" in names     # legalised: float32 division
    q, r = np.zeros_like(x), np.zeros_like(x)
    run_function(module.kernel, {"x": x, "y": y, "q": q, "r": r}, (1, 1, 1))
    _check(q, r, x, f"legalised {dtype}")


def _ops(block):
    for op in block.ops:
        yield op
        for b in op.blocks:
            yield from _ops(b)


@pytest.mark.parametrize("dtype", DTYPES)
def test_native_engine_and_interpreter_agree(dtype, monkeypatch):
    x, y = _inputs(np.dtype(dtype))
    _check(*_launch(divmod_kernel, x, y), x, f"native {dtype}")
    q, r = np.zeros_like(x), np.zeros_like(x)
    divmod_by_constant[(1,)](x, q, r, R=R, C=C)
    _check(q, r, x, f"native {dtype}, constant -1")
    monkeypatch.setenv("PYPTO_INTERPRET", "1")
    _check(*_launch(pypto.jit(divmod_kernel.fn), x, y), x, f"interpreter {dtype}")


@needs_tools
@pytest.mark.heavy                      # a pto-isa build per dtype: about 20 s each
@pytest.mark.parametrize("dtype", DTYPES)
def test_pto_isa_simulator_agrees(dtype):
    x, y = _inputs(np.dtype(dtype))
    _check(*_launch(retarget(divmod_kernel, "pto-isa"), x, y), x, f"pto-isa {dtype}")
