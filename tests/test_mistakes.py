"""Mistakes a kernel author makes, each run in a fresh Python (issue 34, item 4).

Every row of MISTAKES is a small script, written to a temporary ``mistake.py`` and run in a
subprocess with a timeout, and what it must end in:

- ``err(type, *fragments, at=...)``: the script raises ``type`` (matched exactly, by its
  qualified name), its message holds every fragment (the argument it names, the fix it
  suggests) and, with ``at=``, names the script's line holding that text (``mistake.py:N:``);
- ``ok(*fragments)``: the documented behaviour; the script checks its own result against
  numpy and ends normally, printing every fragment.

Either way the process must not die of a signal, hang, or raise anything else (an internal
AttributeError or KeyError fails the row, since the type is compared exactly). The bad-input
matrix (tests/test_bad_input_matrix.py) covers other mistakes in-process; none is repeated
here. Rules as data: a new mistake is one more row.
"""
import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 60

# Every script starts with this: an uncaught exception prints one JSON line (type, message,
# the files of its frames) and exits with code 3, so a crash (a signal, another exit code)
# and a clean error are told apart.
PRELUDE = '''\
import json, os, sys, traceback, warnings
def _mistake_hook(t, e, tb):
    frames = [f.filename for f in traceback.extract_tb(tb)]
    print("MISTAKE-RESULT " + json.dumps({"type": f"{t.__module__}.{t.__qualname__}",
          "msg": str(e), "frames": frames}), flush=True)
    traceback.print_exception(t, e, tb)
    sys.stderr.flush()
    os._exit(3)
sys.excepthook = _mistake_hook
import numpy as np
import pypto
import pypto.language as pl
'''
CAUGHT = 3

# -- kernels the scripts share ---------------------------------------------------------------
COPY = '''
@pypto.jit
def copy(x, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    pl.store(out, offsets=(pid * BLOCK,), value=pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,)))
x = np.arange(16, dtype=np.float32)
o = np.zeros(16, np.float32)
'''
ADD = '''
@pypto.jit
def add(x, y, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    a = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    b = pl.load(y, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(pid * BLOCK,), value=a + b)
'''
MM = '''
@pypto.jit
def mm(a, b, c, M: pl.constexpr, N: pl.constexpr, K: pl.constexpr, K2: pl.constexpr):
    ta = pl.load(a, offsets=(0, 0), shape=(M, K))
    tb = pl.load(b, offsets=(0, 0), shape=(K2, N))
    pl.store(c, offsets=(0, 0), value=pl.matmul(ta, tb))
'''
MM16 = '''
@pypto.jit
def mm(a, b, c):
    ta = pl.load(a, offsets=(0, 0), shape=(16, 16))
    tb = pl.load(b, offsets=(0, 0), shape=(16, 16))
    {}
a = np.ones((16, 16), np.float16)
c = np.zeros((16, 16), np.float32)
mm[(1,)](a, a, c)
'''
TUNED = '''
@pypto.jit
def kk(x, out, n, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    pl.store(out, offsets=(pid * BLOCK,), value=pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,)))
x = np.arange(64, dtype=np.float32)
o = np.zeros(64, np.float32)
'''
GRAPH = '''
g = pypto.TensorGraph(name="g")
a = g.placeholder(shape=(64,), dtype=pypto.float32, name="a")
b = g.placeholder(shape=(64,), dtype=pypto.float32, name="b")
@pypto.tile_op
def addt(u, v):
    return u + v
'''
PTO = COPY + "txt = copy.compile(x, o, BLOCK=16).asm['pto']\n"
RUN_GRAPH = "m = pypto.compile(g)\n"


def kernel(body, params="x, out", launch="k[(1,)](x, o)"):
    """A kernel ``k(params)`` with ``body``, 16 float32 inputs ``x``/``o`` and ``launch``."""
    return (f"@pypto.jit\ndef k({params}):\n"
            f"{textwrap.indent(textwrap.dedent(body).strip(), '    ')}\n"
            "x = np.arange(16, dtype=np.float32)\no = np.zeros(16, np.float32)\n"
            f"{launch}\n")


def err(type_name, *fragments, at=None, user_frame=False):
    """The script raises ``type_name`` with every fragment in its message; ``at``: text of
    the line the message must name; ``user_frame``: the exception comes from the user's own
    code (the deepest frame is the script's)."""
    return {"raises": type_name if "." in type_name else "builtins." + type_name,
            "fragments": fragments, "at": at, "user_frame": user_frame}


def ok(*fragments, stderr=()):
    """The script ends normally (its own numpy checks passed), printing every fragment."""
    return {"raises": None, "fragments": fragments, "stderr": stderr}


# Each row costs a Python start and often a compile: all of them take two minutes of a 2-core
# machine. The quick subset (-m "not slow and not heavy") keeps QUICK; the default suite every
# third row more (heavy), 66 of them, to stay in its 15-minute budget; `-m slow` runs the rest.
QUICK = {"launch-0d-array", "body-print", "strided-transposed-input", "graph-run-missing-input"}
_ROWS = itertools.count()


def M(mistake_id, script, expect, env=None):
    row = next(_ROWS)
    marks = () if mistake_id in QUICK else \
        (pytest.mark.heavy,) if row % 3 == 0 else (pytest.mark.slow,)
    return pytest.param(script, expect, env or {}, id=mistake_id, marks=marks)


SCALAR_MUL = "pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(16,)) * f)"
LOAD16 = "pl.load(x, offsets=(0,), shape=(16,))"

MISTAKES = [
    # -- launch: arguments ----------------------------------------------------------------------
    M("launch-same-argument-twice", COPY + "copy[(1,)](x, o, 16, BLOCK=16)\n",
      err("TypeError", "multiple values for argument 'BLOCK'")),
    M("launch-arrays-in-one-list", COPY + "copy[(1,)]([x, o], BLOCK=16)\n",
      err("TypeError", "missing 1 required positional argument: 'out'")),
    M("launch-0d-array", COPY + "copy[(1,)](np.zeros((), np.float32), o, BLOCK=16)\n",
      err("TypeError", "argument 'x' is a 0-d array", "pass a Python number")),
    M("launch-int-for-a-tensor", COPY + "copy[(1,)](3, o, BLOCK=16)\n",
      err("pypto.errors.CompilationError", "must be a tensor parameter", at="value=pl.load(x")),
    M("launch-tensor-for-a-scalar", kernel(SCALAR_MUL, "x, out, f", "k[(1,)](x, o, x)"),
      err("pypto.errors.CompilationError", "pl.load a tile of it first", at="* f)")),
    M("launch-complex-scalar", kernel(SCALAR_MUL, "x, out, f", "k[(1,)](x, o, 1j)"),
      err("TypeError", "argument 'f' must be a tensor", "an int, a float or a bool",
          "got complex")),
    M("launch-uint64-array", COPY + "copy[(1,)](np.arange(16, dtype=np.uint64), o, BLOCK=16)\n",
      err("TypeError", "argument 'x'", "uint64 is not supported")),
    M("launch-bool-scalar", kernel(SCALAR_MUL, "x, out, f",
                                   "k[(1,)](x, o, True); np.testing.assert_array_equal(o, x)\n"
                                   "k[(1,)](x, o, False); np.testing.assert_array_equal(o, 0 * x)"),
      ok()),
    M("launch-nan-scalar", kernel(SCALAR_MUL, "x, out, f",
                                  "k[(1,)](x, o, float('nan')); assert np.isnan(o).all()"), ok()),
    M("launch-float64-scalar", kernel(SCALAR_MUL, "x, out, f",
                                      "k[(1,)](x, o, np.float64(2.5))\n"
                                      "np.testing.assert_array_equal(o, x * np.float32(2.5))"),
      ok()),
    M("compile-missing-argument", COPY + "copy.compile(x, BLOCK=16)\n",
      err("TypeError", "copy()", "missing a required argument: 'out'")),
    M("set-num-threads-zero", "pypto.set_num_threads(0)\n",
      err("ValueError", "set_num_threads()", "positive int")),
    # -- the decorator --------------------------------------------------------------------------
    M("jit-unknown-target", "@pypto.jit(target='gpu')\ndef k(x):\n    pass\n"
                            "k[(1,)](np.zeros(4, np.float32))\n",
      err("ValueError", "unknown target 'gpu'", "ascend910b1")),
    M("jit-unknown-engine", "@pypto.jit(engine='gpu')\ndef k(x):\n    pass\n"
                            "k[(1,)](np.zeros(4, np.float32))\n",
      err("ValueError", "engine must be one of 'native', 'pto-isa'", "'gpu'")),
    M("jit-do-not-specialize-unknown", "@pypto.jit(do_not_specialize=['nope'])\n"
                                       "def k(x, n):\n    pass\n"
                                       "k[(1,)](np.zeros(4, np.float32), 3)\n",
      err("ValueError", "do_not_specialize", "'nope'")),
    M("jit-dynamic-unknown", "@pypto.jit(dynamic=['nope'])\ndef k(x, n):\n    pass\n"
                             "k[(1,)](np.zeros(4, np.float32), 3)\n",
      err("ValueError", "dynamic", "'nope'")),
    M("jit-kernel-made-by-exec", "exec('@pypto.jit\\ndef k(x, out):\\n    pass\\n')\n"
                                 "k[(1,)](np.zeros(4, np.float32), np.zeros(4, np.float32))\n",
      err("TypeError", "cannot read the source of k", "define them in a file")),
    M("jit-star-args", "@pypto.jit\ndef k(x, *rest):\n    pass\n"
                       "k[(1,)](np.zeros(4, np.float32))\n",
      err("TypeError", "plain named parameters", "*rest")),
    M("jit-star-star-kwargs", "@pypto.jit\ndef k(x, **kw):\n    pass\n"
                              "k[(1,)](np.zeros(4, np.float32))\n",
      err("TypeError", "plain named parameters", "**kw")),
    M("jit-applied-twice", "@pypto.jit\n@pypto.jit\ndef k(x, out):\n"
                           "    pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(4,)))\n"
                           "x = np.arange(4, dtype=np.float32); o = np.zeros(4, np.float32)\n"
                           "k[(1,)](x, o); np.testing.assert_array_equal(o, x)\n", ok()),
    M("jit-tensor-parameter-defaults-to-none", "@pypto.jit\ndef k(x, out=None):\n    pass\n"
                                               "k[(1,)](np.zeros(4, np.float32))\n",
      err("TypeError", "argument 'out' must be a tensor", "got NoneType None")),
    # -- grids ------------------------------------------------------------------------------------
    M("grid-empty-tuple", COPY + "copy[()](x, o, BLOCK=16)\n",
      err("ValueError", "grid must be a tuple of 1 to 3 ints", "got ()")),
    M("grid-bool", COPY + "copy[(True,)](x, o, BLOCK=16)\n",
      err("ValueError", "grid must be a tuple of 1 to 3 ints", "(True,)")),
    M("grid-nested-tuple", COPY + "copy[((2,),)](x, o, BLOCK=16)\n",
      err("ValueError", "grid must be a tuple of 1 to 3 ints", "((2,),)")),
    M("grid-numpy-int", COPY + "copy[(np.int64(2),)](x, o, BLOCK=8)\n"
                               "np.testing.assert_array_equal(o, x)\n", ok()),
    M("grid-plain-int", COPY + "copy[2](x, o, BLOCK=8); np.testing.assert_array_equal(o, x)\n",
      ok()),
    M("grid-passed-as-the-first-argument", COPY + "copy((1,), x, o, BLOCK=16)\n",
      err("TypeError", "looks like a grid", "copy[grid](...)")),
    M("grid-callable-takes-no-argument", COPY + "copy[lambda: (1,)](x, o, BLOCK=16)\n",
      err("TypeError", "a callable grid takes one argument", "lambda meta:")),
    M("jit-do-not-specialize-a-constexpr", "@pypto.jit(do_not_specialize=['B'])\n"
      "def k(x, B: pl.constexpr):\n    pass\n",
      err("ValueError", "do_not_specialize=", "pl.constexpr parameters ['B']")),
    M("jit-dynamic-a-constexpr", "@pypto.jit(dynamic=['B'])\ndef k(x, B: pl.constexpr):\n"
      "    pass\n", err("ValueError", "dynamic=", "pl.constexpr parameters ['B']")),
    M("grid-callable-raises", COPY + "copy[lambda m: (m['NOPE'],)](x, o, BLOCK=16)\n",
      err("KeyError", "NOPE", user_frame=True)),
    M("program-id-axis-3", kernel("pl.store(out, offsets=(pl.program_id(3),), value=" + LOAD16 + ")"),
      err("pypto.errors.CompilationError", "axis must be the constant 0, 1 or 2", "got 3",
          at="pl.program_id(3)")),
    M("program-id-runtime-axis", kernel("pl.store(out, offsets=(pl.program_id(n),), value="
                                        + LOAD16 + ")", "x, out, n", "k[(1,)](x, o, 0)"),
      err("pypto.errors.CompilationError", "axis must be the constant 0, 1 or 2",
          at="pl.program_id(n)")),
    # -- dtypes -----------------------------------------------------------------------------------
    M("dtype-float16-plus-float32", ADD + "x = np.linspace(0, 1, 16).astype(np.float16)\n"
      "y = np.linspace(1, 2, 16).astype(np.float32); o = np.zeros(16, np.float16)\n"
      "add[(1,)](x, y, o, BLOCK=16)\n"
      "np.testing.assert_array_equal(o, (x.astype(np.float32) + y).astype(np.float16))\n", ok()),
    M("dtype-int32-plus-float32", ADD + "x = np.arange(16, dtype=np.int32)\n"
      "y = np.full(16, 0.5, np.float32); o = np.zeros(16, np.float32)\n"
      "add[(1,)](x, y, o, BLOCK=16); np.testing.assert_array_equal(o, x + y)\n", ok()),
    M("dtype-uint8-plus-int8", ADD + "x = np.arange(200, 216).astype(np.uint8)\n"
      "y = np.full(16, -100, np.int8); o = np.zeros(16, np.int16)\n"
      "add[(1,)](x, y, o, BLOCK=16); np.testing.assert_array_equal(o, x.astype(np.int16) + y)\n",
      ok()),
    M("dtype-float-stored-into-int32", COPY + "oi = np.zeros(16, np.int32); x = x * 1.7 - 5\n"
      "copy[(1,)](x, oi, BLOCK=16); np.testing.assert_array_equal(oi, x.astype(np.int32))\n",
      ok()),
    M("dtype-float16-into-float32", COPY + "h = (np.arange(16) / 3).astype(np.float16)\n"
      "copy[(1,)](h, o, BLOCK=16); np.testing.assert_array_equal(o, h.astype(np.float32))\n",
      ok()),
    M("dtype-bool-arrays", COPY + "b = np.arange(16) % 3 == 0; ob = np.zeros(16, bool)\n"
      "copy[(1,)](b, ob, BLOCK=16); np.testing.assert_array_equal(ob, b)\n", ok()),
    M("dtype-float16-times-big-scalar", kernel(SCALAR_MUL, "x, out, f",
      "x = x.astype(np.float16); o = np.zeros(16, np.float16); k[(1,)](x, o, 1e6)\n"
      "with np.errstate(all='ignore'):\n"
      "    np.testing.assert_array_equal(o, x * np.float16(1e6))"), ok()),
    # -- shapes and windows -----------------------------------------------------------------------
    M("shape-a-list", kernel("pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=[16]))",
                             launch="k[(1,)](x, o); np.testing.assert_array_equal(o, x)"), ok()),
    M("shape-a-bare-int", kernel("pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=16))",
                                 launch="k[(1,)](x, o); np.testing.assert_array_equal(o, x)"),
      ok()),
    M("offsets-a-bare-int", kernel("pl.store(out, offsets=0, value=pl.load(x, offsets=0, shape=(16,)))",
                                   launch="k[(1,)](x, o); np.testing.assert_array_equal(o, x)"),
      ok()),
    M("shape-none", kernel("t = pl.load(x, offsets=(0,), shape=None)"),
      err("pypto.errors.CompilationError", "shape must be a tuple of positive compile-time integers",
          "got None", at="shape=None")),
    M("zero-size-input", COPY + "copy[(1,)](np.zeros(0, np.float32), o, BLOCK=16)\n"
                                "np.testing.assert_array_equal(o, np.zeros(16))\n", ok()),
    M("zero-size-output", COPY + "z = np.zeros(0, np.float32); copy[(1,)](x, z, BLOCK=16)\n"
                                 "assert z.shape == (0,)\n", ok()),
    M("store-a-tile-of-another-rank",
      kernel("pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0, 0), shape=(4, 4)))",
             launch="k[(1,)](x.reshape(4, 4), o)"),
      err("pypto.errors.CompilationError", "cannot be stored into a rank-1 tensor",
          at="pl.store(out")),
    M("padding-a-runtime-value",
      kernel("pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(16,), padding=p))",
             "x, out, p", "k[(1,)](x, o, 1.0)"),
      err("pypto.errors.CompilationError", "padding must be a compile-time number",
          at="padding=p")),
    M("reshape-with-minus-one",
      kernel("pl.store(out, offsets=(0,), value=pl.reshape(" + LOAD16 + ", (2, -1)).reshape((16,)))",
             launch="k[(1,)](x, o); np.testing.assert_array_equal(o, x)"), ok()),
    M("reshape-into-short-rows",
      kernel("pl.store(out, offsets=(0,), value=pl.reshape(" + LOAD16 + ", (4, -1)).reshape((16,)))"),
      err("pypto.errors.NotOnChip", "whole 32 bytes", at="pl.reshape(")),
    M("static-slice-past-the-end",
      kernel("t = " + LOAD16 + "\npl.store(out, offsets=(0,), value=t[8:32])",
             launch="k[(1,)](x, o)\nnp.testing.assert_array_equal(o, np.r_[x[8:32], np.zeros(8)])"),
      ok()),
    M("static-index-out-of-range", kernel("t = " + LOAD16 + "\nv = t[20]"),
      err("pypto.errors.CompilationError", "index 20 out of range for a tile axis of size 16",
          at="t[20]")),
    M("float-offset", kernel("pl.store(out, offsets=(a,), value=pl.load(x, offsets=(a,), shape=(16,)))",
                             "x, out, a", "k[(1,)](x, o, 1.5)"),
      err("pypto.errors.CompilationError", "offset must be an integer scalar", "f32",
          at="offsets=(a,)")),
    M("tile-as-offset", kernel("t = pl.load(x, offsets=(0,), shape=(1,))\n"
                               "pl.store(out, offsets=(t,), value=t)"),
      err("pypto.errors.CompilationError", "offset must be an integer scalar", "got a tile",
          at="offsets=(t,)")),
    # -- constexprs -------------------------------------------------------------------------------
    M("constexpr-a-string", COPY + "copy[(1,)](x, o, BLOCK='16')\n",
      err("pypto.errors.CompilationError", "expected a number", "str '16'", at="pid * BLOCK,)")),
    M("constexpr-a-bool", COPY + "copy[(1,)](x, o, BLOCK=True)\n",
      err("pypto.errors.CompilationError", "positive compile-time integers", "(True,)")),
    M("constexpr-none", COPY + "copy[(1,)](x, o, BLOCK=None)\n",
      err("pypto.errors.CompilationError", "expected a number", "None")),
    M("constexpr-absurdly-large", COPY + "copy[(1,)](x, o, BLOCK=1 << 40)\n",
      err("pypto.errors.BufferOverflow", "UB (vec) overflow", "188416")),
    M("constexpr-changed-between-launches",
      COPY + "copy[(2,)](x, o, BLOCK=8); np.testing.assert_array_equal(o, x)\n"
             "o2 = np.zeros(16, np.float32); copy[(4,)](x, o2, BLOCK=4)\n"
             "np.testing.assert_array_equal(o2, x)\n", ok()),
    M("constexpr-left-to-its-default",
      kernel("pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(B,)))",
             "x, out, B: pl.constexpr = 16",
             "k[(1,)](x, o); np.testing.assert_array_equal(o, x)"), ok()),
    M("constexpr-dtype-changed",
      kernel("pl.store(out, offsets=(0,), value=" + LOAD16 + ".to(D))", "x, out, D: pl.constexpr",
             "x = x + 0.7; k[(1,)](x, o, D=pl.float16)\n"
             "np.testing.assert_array_equal(o, x.astype(np.float16))\n"
             "k[(1,)](x, o, D=pl.int32); np.testing.assert_array_equal(o, x.astype(np.int32))"),
      ok()),
    M("constexpr-a-float", kernel("pl.store(out, offsets=(0,), value=" + LOAD16 + " * S)",
                                  "x, out, S: pl.constexpr",
                                  "k[(1,)](x, o, 2.5); np.testing.assert_array_equal(o, x * 2.5)"),
      ok()),
    M("constexpr-a-shape-tuple",
      kernel("pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=S))",
             "x, out, S: pl.constexpr",
             "k[(1,)](x, o, S=(16,)); np.testing.assert_array_equal(o, x)"), ok()),
    # -- kernel bodies: Python a kernel does not have ---------------------------------------------
    M("body-try-except", kernel("try:\n    t = " + LOAD16 + "\nexcept Exception:\n    pass"),
      err("pypto.errors.CompilationError", "try/except is not supported", "pl.where", at="try:")),
    M("body-with", kernel("with open('f') as f:\n    pass"),
      err("pypto.errors.CompilationError", "with block is not supported", at="with open")),
    M("body-lambda", kernel("f = lambda v: v * 2\npl.store(out, offsets=(0,), value=f(" + LOAD16 + "))"),
      err("pypto.errors.CompilationError", "lambda is not supported", "@pypto.jit helper",
          at="lambda v")),
    M("body-generator", kernel("s = sum(i for i in range(3))"),
      err("pypto.errors.CompilationError", "generator expression is not supported",
          "pl.static_range", at="sum(i for")),
    M("body-recursion", "@pypto.jit\ndef k(x, out):\n    k(x, out)\n"
                        "x = np.zeros(16, np.float32)\nk[(1,)](x, x)\n",
      err("pypto.errors.CompilationError", "k calls itself", "recursion is not supported",
          at="    k(x, out)")),
    M("body-print", kernel("t = " + LOAD16 + "\nprint(t)\npl.store(out, offsets=(0,), value=t)"),
      err("pypto.errors.CompilationError", "cannot call print on runtime values",
          "only pypto.language functions", at="print(t)")),
    M("body-global", "G = 1\n" + kernel("global G\nG = 2"),
      err("pypto.errors.CompilationError", "global is not supported", "pass values as arguments",
          at="global G")),
    M("body-nested-def", kernel("def f(v):\n    return v\npl.store(out, offsets=(0,), value=f("
                                + LOAD16 + "))"),
      err("pypto.errors.CompilationError", "nested def is not supported", "@pypto.jit",
          at="def f(v)")),
    M("body-calls-a-plain-helper", "def twice(v):\n    return v * 2\n"
      + kernel("pl.store(out, offsets=(0,), value=twice(" + LOAD16 + "))"),
      err("pypto.errors.CompilationError", "cannot call twice on runtime values",
          "@pypto.jit functions", at="twice(pl.load")),
    M("body-plain-helper-on-constants", "def half(n):\n    return n // 2\n"
      + kernel("pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(half(B),)))",
               "x, out, B: pl.constexpr", "k[(1,)](x, o, B=32); np.testing.assert_array_equal(o, x)"),
      ok()),
    M("body-round-on-a-tile", kernel("pl.store(out, offsets=(0,), value=round(" + LOAD16 + "))"),
      err("pypto.errors.CompilationError", "cannot call round on runtime values", at="round(")),
    M("body-numpy-method-on-a-tile",
      kernel("pl.store(out, offsets=(0,), value=" + LOAD16 + ".astype(np.float16))"),
      err("pypto.errors.CompilationError", "has no attribute 'astype'", at=".astype(")),
    M("body-misspelt-primitive",
      kernel("pl.store(out, offsets=(0,), value=pl.softplusx(" + LOAD16 + "))"),
      err("pypto.errors.CompilationError", "has no attribute 'softplusx'", at="pl.softplusx")),
    M("body-python-list-of-tiles",
      kernel("t = " + LOAD16 + "\nts = [t, t * 2]\npl.store(out, offsets=(0,), value=ts[1])",
             launch="k[(1,)](x, o); np.testing.assert_array_equal(o, 2 * x)"), ok()),
    M("body-returns-a-value", kernel("t = " + LOAD16 + "\nreturn t"),
      err("pypto.errors.CompilationError", "a launched kernel cannot return a value",
          "store it to a tensor", at="return t")),
    M("body-len-of-a-tensor",
      kernel("pl.store(out, offsets=(len(x) - 16,), value=" + LOAD16 + ")",
             launch="k[(1,)](x, o); np.testing.assert_array_equal(o, x)"), ok()),
    M("body-shape-index-past-the-rank", kernel("n = x.shape[5]"),
      err("pypto.errors.CompilationError", "index 5 is out of range for a tuple of 1",
          at="x.shape[5]")),
    M("body-list-append", kernel("t = " + LOAD16 + "\nts = [t]\nts.append(t)"),
      err("pypto.errors.CompilationError", "has no attribute 'append'", "ts = ts + (t,)",
          at="ts.append(t)")),
    M("body-walrus", kernel("if (m := n) > 0:\n    pass", params="x, out, n",
                            launch="k[(1,)](x, o, 3)"),
      err("pypto.errors.CompilationError", "assignment expression (:=)", "on a line of its own",
          at="(m := n)")),
    M("body-runtime-reduction-axis",
      kernel("pl.store(out, offsets=(0,), value=pl.sum(" + LOAD16 + ", axis=n, keepdims=True))",
             params="x, out, n", launch="k[(1,)](x, o, 0)"),
      err("pypto.errors.CompilationError", "axis must be a compile-time int",
          "known only at run time", at="axis=n")),
    M("body-f-string", kernel("s = f'{1}'"),
      err("pypto.errors.CompilationError", "f-strings are not supported", at="f'{1}'")),
    M("body-chained-comparison",
      kernel("t = " + LOAD16 + "\npl.store(out, offsets=(0,), value=pl.where(0 < t < 5, t, 0.0))"),
      err("pypto.errors.CompilationError", "chained comparisons are not supported", "&",
          at="0 < t < 5")),
    M("body-and-on-tiles",
      kernel("t = " + LOAD16 + "\npl.store(out, offsets=(0,), value=pl.where((t > 1) and (t < 5), t, 0.0))"),
      err("pypto.errors.CompilationError", "'and'/'or' work on scalars", "&", at="and (t < 5)")),
    M("body-continue", kernel("for i in range(n):\n    continue", "x, out, n", "k[(1,)](x, o, 3)"),
      err("pypto.errors.CompilationError", "continue is not supported", "if not cond",
          at="    continue")),
    M("body-for-else", kernel("for i in range(n):\n    pass\nelse:\n    pass", "x, out, n",
                              "k[(1,)](x, o, 3)"),
      err("pypto.errors.CompilationError", "'for ... else' is not supported", at="for i in")),
    M("body-while-true", kernel("while True:\n    pass"),
      err("pypto.errors.CompilationError", "would never end", at="while True")),
    M("body-reassigns-a-tensor", kernel("for i in range(n):\n    x = out", "x, out, n",
                                        "k[(1,)](x, o, 3)"),
      err("pypto.errors.CompilationError", "tensor 'x' cannot be reassigned", at="for i in")),
    M("body-carried-tile-changes-dtype",
      kernel("acc = pl.zeros((16,), dtype=pl.float16)\nfor i in range(n):\n    acc = acc + "
             + LOAD16 + "\npl.store(out, offsets=(0,), value=acc)", "x, out, n", "k[(1,)](x, o, 3)"),
      err("pypto.errors.CompilationError", "'acc' changes type inside the loop", "f16", "f32",
          at="acc = acc +")),
    M("body-variable-set-in-one-branch",
      kernel("if n > 0:\n    t = " + LOAD16 + "\npl.store(out, offsets=(0,), value=t)", "x, out, n",
             "k[(1,)](x, o, 3)"),
      err("pypto.errors.CompilationError", "'t' is assigned in only one branch",
          "assign it before the if", at="value=t)")),
    M("body-import", kernel("import math"),
      err("pypto.errors.CompilationError", "import is not supported", "import at module level",
          at="import math")),
    M("body-del", kernel("t = " + LOAD16 + "\ndel t"),
      err("pypto.errors.CompilationError", "del is not supported", at="del t")),
    M("body-class", kernel("class A:\n    pass"),
      err("pypto.errors.CompilationError", "class definition is not supported", at="class A")),
    M("body-yield", kernel("yield 1"),
      err("pypto.errors.CompilationError", "yield is not supported", "return", at="yield 1")),
    M("body-assert-on-a-runtime-value",
      kernel("assert n > 0, 'n must be positive'", "x, out, n", "k[(1,)](x, o, 3)"),
      err("pypto.errors.CompilationError", "assert needs a compile-time condition",
          at="assert n > 0")),
    M("body-static-assert-fails",
      kernel("pl.static_assert(B % 32 == 0, 'B must be a multiple of 32')", "x, out, B: pl.constexpr",
             "k[(1,)](x, o, B=16)"),
      err("pypto.errors.CompilationError", "B must be a multiple of 32", at="pl.static_assert")),
    M("body-runtime-scalar-power", kernel("pl.store(out, offsets=(0,), value=pl.full((16,), n ** 2))",
                                          "x, out, n", "k[(1,)](x, o, 3)"),
      err("pypto.errors.CompilationError", "'**' on runtime scalars is not supported", at="n ** 2")),
    M("body-assigns-a-tile-element", kernel("t = " + LOAD16 + "\nt[0] = 1.0"),
      err("pypto.errors.CompilationError", "only names and tuples of names can be assigned",
          at="t[0] = 1.0")),
    M("body-reads-a-mutable-global", "TABLE = [1, 2]\n"
      + kernel("pl.store(out, offsets=(0,), value=" + LOAD16 + " * TABLE[0])"),
      err("pypto.errors.CompilationError", "global 'TABLE' is a list", "Pass it as an argument",
          at="TABLE[0]")),
    M("body-load-keyword-misspelt",
      kernel("pl.store(out, offsets=(0,), value=pl.load(x, offset=(0,), shape=(16,)))"),
      err("pypto.errors.CompilationError", "load()", "missing a required argument: 'offsets'",
          at="offset=(0,)")),
    M("body-atomic-mul", kernel("pl.store(out, offsets=(0,), value=" + LOAD16 + ", atomic='mul')"),
      err("pypto.errors.CompilationError", "atomic must be None or 'add'", "'mul'",
          at="atomic='mul'")),
    M("body-atomic-add-int8",
      kernel("pl.store(out, offsets=(0,), value=" + LOAD16 + ", atomic='add')",
             launch="k[(1,)](np.ones(16, np.int8), np.zeros(16, np.int8))"),
      err("pypto.errors.CompilationError", "atomic='add'", "int32", "not int8", at="atomic='add'")),
    M("body-tile-as-loop-bound", kernel("t = pl.load(x, offsets=(0,), shape=(1,))\n"
                                        "for i in range(t):\n    pass"),
      err("pypto.errors.CompilationError", "range stop must be an integer scalar", "got a tile",
          at="range(t)")),
    M("body-num-stages-3", kernel("for i in pl.range(0, n, 1, num_stages=3):\n    pass",
                                  "x, out, n", "k[(1,)](x, o, 3)"),
      err("pypto.errors.CompilationError", "num_stages must be 1 or 2", at="num_stages=3")),
    M("body-static-range-of-a-runtime-value",
      kernel("for i in pl.static_range(n):\n    pass", "x, out, n", "k[(1,)](x, o, 3)"),
      err("pypto.errors.CompilationError", "static_range() takes 1 to 3 compile-time integers",
          at="pl.static_range(n)")),
    M("body-range-float-step", kernel("for i in range(0, n, 0.5):\n    pass", "x, out, n",
                                      "k[(1,)](x, o, 3)"),
      err("pypto.errors.CompilationError", "range step must be an integer", at="range(0, n, 0.5)")),
    M("body-range-zero-step", kernel("for i in range(0, n, 0):\n    pass", "x, out, n",
                                     "k[(1,)](x, o, 3)"),
      err("pypto.errors.CompilationError", "step must be positive", at="range(0, n, 0)")),
    M("body-jit-helper-missing-argument", "@pypto.jit\ndef h(a, b):\n    return a + b\n"
      + kernel("pl.store(out, offsets=(0,), value=h(" + LOAD16 + "))"),
      err("pypto.errors.CompilationError", "call to h", "missing a required argument: 'b'",
          at="value=h(")),
    M("body-launches-a-kernel", "@pypto.jit\ndef h(a, b):\n    pass\n" + kernel("h[(1,)](x, out)"),
      err("pypto.errors.CompilationError", "cannot call", "on runtime values", at="h[(1,)](x, out)")),
    M("body-load-from-a-tile", kernel("t = " + LOAD16 + "\nu = pl.load(t, offsets=(0,), shape=(16,))"),
      err("pypto.errors.CompilationError", "load(): the first argument must be a tensor parameter",
          "got a tile", at="pl.load(t,")),
    M("body-store-to-a-scalar", kernel("pl.store(n, offsets=(0,), value=" + LOAD16 + ")", "x, out, n",
                                       "k[(1,)](x, o, 3)"),
      err("pypto.errors.CompilationError", "store(): the first argument must be a tensor parameter",
          at="pl.store(n,")),
    M("body-padding-a-string",
      kernel("pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(16,), padding='a'))"),
      err("pypto.errors.CompilationError", "padding must be a compile-time number", "str 'a'",
          at="padding='a'")),
    M("body-arange-of-a-runtime-value", kernel("pl.store(out, offsets=(0,), value=pl.arange(0, n))",
                                               "x, out, n", "k[(1,)](x, o, 16)"),
      err("pypto.errors.CompilationError", "arange(): end must be a compile-time integer",
          "pl.constexpr", at="pl.arange(0, n)")),
    M("body-tile-in-a-conditional-expression",
      kernel("t = " + LOAD16 + "\npl.store(out, offsets=(0,), value=t if t else -t)"),
      err("pypto.errors.CompilationError", "must be a scalar", "pl.where(cond, a, b)",
          at="t if t else -t")),
    M("body-where-on-a-scalar-condition",
      kernel("t = " + LOAD16 + "\npl.store(out, offsets=(0,), value=pl.where(n > 0, t, -t))",
             "x, out, n", "for n in (3, 1, -2):\n    k[(1,)](x, o, n)\n"
             "    np.testing.assert_array_equal(o, x if n > 0 else -x)"), ok()),
    M("body-where-of-scalars-on-a-scalar-condition",
      kernel("pl.store(out, offsets=(0,), value=pl.full((16,), pl.where(n > 0, 1.0, 2.0)))",
             "x, out, n", "k[(1,)](x, o, 3)"),
      err("pypto.errors.CompilationError", "where() of two scalars", "x if cond else y",
          at="pl.where(n > 0")),
    M("body-transpose-of-a-tensor",
      kernel("pl.store(out, offsets=(0,), value=pl.load(x.T, offsets=(0,), shape=(16,)))"),
      err("pypto.errors.CompilationError", "has no attribute 'T'", at="x.T")),
    M("body-cast-to-a-numpy-dtype",
      kernel("pl.store(out, offsets=(0,), value=" + LOAD16 + ".to(np.float16))",
             launch="k[(1,)](x + 0.3, o)\n"
                    "np.testing.assert_array_equal(o, (x + 0.3).astype(np.float16))"), ok()),
    # -- matmul -----------------------------------------------------------------------------------
    M("matmul-inner-dimensions-differ",
      MM + "a = np.ones((16, 32), np.float16); b = np.ones((16, 16), np.float16)\n"
           "mm[(1,)](a, b, np.zeros((16, 16), np.float32), M=16, N=16, K=32, K2=16)\n",
      err("pypto.errors.CompilationError", "inner dimensions differ", "(16, 32) @ (16, 16)",
          at="pl.matmul(ta, tb)")),
    M("matmul-float16-with-float32",
      MM + "a = np.ones((16, 16), np.float16); b = np.ones((16, 16), np.float32)\n"
           "mm[(1,)](a, b, np.zeros((16, 16), np.float32), M=16, N=16, K=16, K2=16)\n",
      err("pypto.errors.CompilationError", "(float16, float32) are not a legal cube pair",
          "(float16, float16)", at="pl.matmul(ta, tb)")),
    M("matmul-of-1d-tiles", "@pypto.jit\ndef mm(a, b, c):\n    pl.store(c, offsets=(0,), value="
      "pl.matmul(pl.load(a, offsets=(0,), shape=(16,)), pl.load(b, offsets=(0,), shape=(16,))))\n"
      "a = np.ones(16, np.float16); mm[(1,)](a, a, np.zeros(16, np.float32))\n",
      err("pypto.errors.CompilationError", "must be a tile of rank 2 to 4", at="pl.matmul(")),
    M("matmul-accumulator-of-another-shape",
      MM16.format("pl.store(c, offsets=(0, 0), value=pl.matmul(ta, tb, acc=pl.zeros((16, 32))))"),
      err("pypto.errors.CompilationError", "acc must be a (16, 16) tile", at="acc=pl.zeros")),
    M("matmul-transposed-float32",
      MM16.format("pl.store(c, offsets=(0, 0), value=pl.matmul(ta, tb, b_trans=True))")
      .replace("a = np.ones((16, 16), np.float16)", "a = np.ones((16, 16), np.float32)"),
      err("pypto.errors.NotOnChip", "transposed float32 matmul operand", "float16/bfloat16",
          at="b_trans=True")),
    M("matmul-operand-also-used-by-vector-code",
      MM16.format("pl.store(c, offsets=(0, 0), value=pl.matmul(ta, tb) + ta.to(pl.float32))"),
      err("pypto.errors.CompilationError", "also used by vector code", "Load the tile once for each unit",
          at="ta.to(pl.float32)")),
    M("matmul-int8-into-int32",
      MM + "a = (np.arange(256).reshape(16, 16) % 7 - 3).astype(np.int8)\n"
           "c = np.zeros((16, 16), np.int32); mm[(1,)](a, a, c, M=16, N=16, K=16, K2=16)\n"
           "np.testing.assert_array_equal(c, a.astype(np.int32) @ a.astype(np.int32))\n", ok()),
    M("matmul-float16-result-into-float16",
      MM + "a = (np.arange(256).reshape(16, 16) % 7 / 4).astype(np.float16)\n"
           "c = np.zeros((16, 16), np.float16); mm[(1,)](a, a, c, M=16, N=16, K=16, K2=16)\n"
           "np.testing.assert_array_equal(c, (a.astype(np.float32) @ a.astype(np.float32))"
           ".astype(np.float16))\n", ok()),
    # -- read-only, strided and aliased arrays ----------------------------------------------------
    M("readonly-output-flag", COPY + "o.flags.writeable = False; copy[(1,)](x, o, BLOCK=16)\n",
      err("ValueError", "argument 'out' is stored to but is a read-only array")),
    M("readonly-input-flag", COPY + "x.flags.writeable = False; copy[(1,)](x, o, BLOCK=16)\n"
                                    "np.testing.assert_array_equal(o, x)\n", ok()),
    M("strided-transposed-input", "@pypto.jit\ndef k(x, out):\n    pl.store(out, offsets=(0, 0), "
      "value=pl.load(x, offsets=(0, 0), shape=(4, 8)))\n"
      "x = np.arange(32, dtype=np.float32).reshape(8, 4); o = np.zeros((4, 8), np.float32)\n"
      "k[(1,)](x.T, o); np.testing.assert_array_equal(o, x.T)\n", ok()),
    M("strided-negative-stride", COPY + "copy[(1,)](x[::-1], o, BLOCK=16)\n"
                                        "np.testing.assert_array_equal(o, x[::-1])\n", ok()),
    M("strided-output-view", COPY + "big = np.zeros(32, np.float32); copy[(1,)](x, big[::2], BLOCK=16)\n"
      "np.testing.assert_array_equal(big[::2], x); assert not big[1::2].any()\n", ok()),
    M("strided-fortran-order", "@pypto.jit\ndef k(x, out):\n    pl.store(out, offsets=(0, 0), "
      "value=pl.load(x, offsets=(0, 0), shape=(4, 8)) + 1)\n"
      "x = np.asfortranarray(np.arange(32, dtype=np.float32).reshape(4, 8))\n"
      "o = np.zeros((4, 8), np.float32); k[(1,)](x, o); np.testing.assert_array_equal(o, x + 1)\n",
      ok()),
    M("strided-zero-stride-input", COPY + "bx = np.broadcast_to(np.float32(7), (16,))\n"
      "copy[(1,)](bx, o, BLOCK=16); np.testing.assert_array_equal(o, bx)\n", ok()),
    M("strided-every-other-column", "@pypto.jit\ndef k(x, out):\n    pl.store(out, offsets=(0, 0), "
      "value=pl.load(x, offsets=(0, 0), shape=(4, 4)) * 2)\n"
      "x = np.arange(32, dtype=np.float32).reshape(4, 8); o = np.zeros((4, 4), np.float32)\n"
      "k[(1,)](x[:, 1::2], o); np.testing.assert_array_equal(o, 2 * x[:, 1::2])\n", ok()),
    M("strided-transposed-output", "@pypto.jit\ndef k(x, out):\n    pl.store(out, offsets=(0, 0), "
      "value=pl.load(x, offsets=(0, 0), shape=(4, 8)))\n"
      "x = np.arange(32, dtype=np.float32).reshape(4, 8); o = np.zeros((8, 4), np.float32)\n"
      "k[(1,)](x, o.T); np.testing.assert_array_equal(o.T, x)\n", ok()),
    M("misaligned-by-one-element", COPY + "buf = np.zeros(17, np.float32); buf[1:] = x\n"
      "copy[(1,)](buf[1:], o, BLOCK=16); np.testing.assert_array_equal(o, x)\n", ok()),
    M("misaligned-by-one-byte", COPY + "raw = np.zeros(16 * 4 + 1, np.uint8)\n"
      "v = raw[1:].view(np.float32); v[:] = x\n"
      "copy[(1,)](v, o, BLOCK=16); np.testing.assert_array_equal(o, x)\n", ok()),
    M("alias-output-shifted-over-input", COPY + "y = np.arange(17, dtype=np.float32)\n"
      "copy[(1,)](y[1:], y[:-1], BLOCK=16); np.testing.assert_array_equal(y[:-1], np.arange(1, 17))\n",
      ok()),
    M("alias-in-place-over-blocks", "@pypto.jit\ndef k(x, out):\n    pid = pl.program_id(0)\n"
      "    pl.store(out, offsets=(pid * 8,), value=pl.load(x, offsets=(pid * 8,), shape=(8,)) + 1)\n"
      "x = np.arange(32, dtype=np.float32); k[(4,)](x, x)\n"
      "np.testing.assert_array_equal(x, np.arange(32) + 1)\n", ok()),
    # -- the interpreter --------------------------------------------------------------------------
    M("interpret-same-result", ADD + "x = np.random.rand(100).astype(np.float32)\n"
      "y = np.random.rand(100).astype(np.float32); o = np.zeros(100, np.float32)\n"
      "add[(4,)](x, y, o, BLOCK=32); np.testing.assert_array_equal(o, x + y)\n", ok(),
      env={"PYPTO_INTERPRET": "1"}),
    M("interpret-window-outside-with-padding-none",
      kernel("pl.store(out, offsets=(0,), value=pl.load(x, offsets=(8,), shape=(16,), padding=None))"),
      err("IndexError", "padding=None", "(16,) at (8,)", "give a padding value"),
      env={"PYPTO_INTERPRET": "1"}),
    M("interpret-compile-error-is-the-same",
      kernel("t = " + LOAD16 + "\nif t > 0:\n    pass"),
      err("pypto.errors.CompilationError", "must be a scalar", "pl.where", at="if t > 0"),
      env={"PYPTO_INTERPRET": "1"}),
    M("interpret-switched-on-between-launches", ADD + "x = np.random.rand(64).astype(np.float32)\n"
      "o1 = np.zeros(64, np.float32); o2 = np.zeros(64, np.float32)\n"
      "add[(2,)](x, x, o1, BLOCK=32); os.environ['PYPTO_INTERPRET'] = '1'\n"
      "add[(2,)](x, x, o2, BLOCK=32)\n"
      "np.testing.assert_array_equal(o1, o2); np.testing.assert_array_equal(o1, 2 * x)\n", ok()),
    # -- the environment --------------------------------------------------------------------------
    M("env-unknown-target", COPY + "copy[(1,)](x, o, BLOCK=16)\n",
      err("ValueError", "PTO_TARGET='ascend999'", "unknown target", "ascend910b1"),
      env={"PTO_TARGET": "ascend999"}),
    M("env-opt-level-o9", COPY + "copy[(1,)](x, o, BLOCK=16)\n",
      err("ValueError", "PTO_OPT_LEVEL must be one of O0, O1, O2, O3", "'O9'"),
      env={"PTO_OPT_LEVEL": "O9"}),
    M("env-sync-timeout-not-a-number", COPY + "copy[(1,)](x, o, BLOCK=16)\n",
      err("ValueError", "PYPTO_SYNC_TIMEOUT='soon'", "expected a number >= 1"),
      env={"PYPTO_SYNC_TIMEOUT": "soon"}),
    M("env-sync-timeout-negative", COPY + "copy[(1,)](x, o, BLOCK=16)\n",
      err("ValueError", "PYPTO_SYNC_TIMEOUT='-1'", "expected a number >= 1", "unset it"),
      env={"PYPTO_SYNC_TIMEOUT": "-1"}),
    M("env-override-dir-is-a-file", COPY + "copy[(1,)](x, o, BLOCK=16)\n",
      err("ValueError", "PYPTO_OVERRIDE_DIR='{tmp}/mistake.py' is not a directory"),
      env={"PYPTO_OVERRIDE_DIR": "{tmp}/mistake.py"}),
    M("env-disable-cache-writes-nothing", COPY + "copy[(1,)](x, o, BLOCK=16)\n"
      "import os; assert not os.path.exists(os.environ['PYPTO_CACHE_DIR']), "
      "list(os.walk(os.environ['PYPTO_CACHE_DIR']))\n",
      ok(), env={"PYPTO_DISABLE_CACHE": "1", "PYPTO_CACHE_DIR": "{tmp}/cache"}),
    M("jit-keyword-only-parameter", "@pypto.jit\ndef k(x, *, out, B: pl.constexpr = 4):\n"
      "    pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(B,)) + 1)\n"
      "o = np.zeros(4, np.float32)\nfor _ in range(2): k[(1,)](np.ones(4, np.float32), out=o)\n"
      "np.testing.assert_array_equal(o, 2)\n", ok()),
    M("jit-positional-only-parameter", "@pypto.jit\ndef k(x, /, out):\n    pass\n",
      err("TypeError", "'x' (positional-only)", "remove the /")),
    M("constexpr-numpy-integer", COPY + "copy[(1,)](x, o, BLOCK=np.int64(x.size))\n"
      "copy[(1,)](x, o, BLOCK=16)\nnp.testing.assert_array_equal(o, x)\n", ok()),
    M("jit-on-a-class", "@pypto.jit\nclass K:\n    pass\n",
      err("TypeError", "@pypto.jit compiles a function written with def", "got type")),
    M("jit-on-a-lambda", "k = pypto.jit(lambda x: x)\n",
      err("TypeError", "@pypto.jit compiles a function written with def", "got a lambda")),
    M("jit-no-parameters", "@pypto.jit\ndef k():\n    pl.static_print('compiled')\n"
      "k[(1,)](); k[(1,)](); print('ran')\n", ok("compiled", "ran")),
    M("jit-opt-level-argument", "@pypto.jit(opt_level='O7')\ndef k(x):\n    pass\n",
      err("ValueError", "@pypto.jit(k, opt_level='O7')", "O0, O1, O2, O3")),
    M("env-num-threads-not-a-number", COPY + "copy[(1,)](x, o, BLOCK=16)\n",
      err("ValueError", "PYPTO_NUM_THREADS must be a positive integer", "'abc'"),
      env={"PYPTO_NUM_THREADS": "abc"}),
    M("env-num-threads-zero", COPY + "copy[(1,)](x, o, BLOCK=16)\n",
      err("ValueError", "PYPTO_NUM_THREADS must be a positive integer", "0"),
      env={"PYPTO_NUM_THREADS": "0"}),
    M("env-unknown-engine", COPY + "copy[(1,)](x, o, BLOCK=16)\n",
      err("ValueError", "PYPTO_ENGINE", "'native', 'pto-isa'", "'cuda'"),
      env={"PYPTO_ENGINE": "cuda"}),
    M("env-ptoas-not-an-executable", COPY + "copy[(1,)](x, o, BLOCK=16)\n",
      err("pypto.backends.ascend.ptoas.ToolMissing", "PYPTO_PTOAS='{tmp}/ptoas'", "or unset it"),
      env={"PYPTO_PTOAS": "{tmp}/ptoas"}),
    M("env-sanitize-any-other-value-warns", COPY + "with warnings.catch_warnings(record=True) as w:\n"
      "    warnings.simplefilter('always')\n    copy[(2,)](x[:8], np.zeros(32, 'f4'), BLOCK=16)\n"
      "print([type(i.message).__name__ + ': ' + str(i.message) for i in w])\n",
      ok("SanitizerWarning", "x[16:32] reaches outside x's extent (8,)"),
      env={"PYPTO_SANITIZE": "maybe"}),
    M("env-cache-max-bytes-not-a-size", COPY + "with warnings.catch_warnings(record=True) as w:\n"
      "    warnings.simplefilter('always')\n    copy[(1,)](x, o, BLOCK=16)\n"
      "np.testing.assert_array_equal(o, x); print([str(i.message) for i in w])\n",
      ok("PYPTO_CACHE_MAX_BYTES: 'lots' is not a size", "500M"),
      env={"PYPTO_CACHE_DIR": "{tmp}/cache", "PYPTO_CACHE_MAX_BYTES": "lots"}),
    M("env-override-dir-holds-a-malformed-pto", "os.makedirs(os.environ['PYPTO_OVERRIDE_DIR'])\n"
      "open(os.path.join(os.environ['PYPTO_OVERRIDE_DIR'], 'copy.pto'), 'w').write('garbage')\n"
      + COPY + "copy[(1,)](x, o, BLOCK=16)\n",
      err("pypto.errors.CompilationError", "{tmp}/override/copy.pto:1:1", "malformed module header"),
      env={"PYPTO_OVERRIDE_DIR": "{tmp}/override", "PYPTO_CACHE_DIR": "{tmp}/cache"}),
    # -- the cache directory ----------------------------------------------------------------------
    M("cache-dir-is-a-file", "open(os.environ['PYPTO_CACHE_DIR'], 'w').write('not a folder')\n"
      + COPY + "copy[(1,)](x, o, BLOCK=16); np.testing.assert_array_equal(o, x)\n",
      ok(stderr=("cache directory {tmp}/afile is unusable",
                 "RuntimeWarning: PyPTO cannot write its disk cache {tmp}/afile")),
      env={"PYPTO_CACHE_DIR": "{tmp}/afile", "PYPTO_LOG": "cache"}),
    M("cache-dir-is-a-file-warns", "open(os.environ['PYPTO_CACHE_DIR'], 'w').write('x')\n"
      + COPY + "copy[(1,)](x, o, BLOCK=16)\n",
      ok(stderr=("RuntimeWarning: PyPTO cannot write its disk cache {tmp}/afile",
                 "Point PYPTO_CACHE_DIR at a writable directory")),
      env={"PYPTO_CACHE_DIR": "{tmp}/afile"}),
    M("cache-dir-inside-a-file", "open(os.path.dirname(os.environ['PYPTO_CACHE_DIR']), 'w')"
      ".write('not a folder')\n"
      + COPY + "copy[(1,)](x, o, BLOCK=16); np.testing.assert_array_equal(o, x)\n",
      ok(stderr=("cache directory {tmp}/afile/sub is unusable",)),
      env={"PYPTO_CACHE_DIR": "{tmp}/afile/sub", "PYPTO_LOG": "cache"}),
    M("cache-dir-relative", COPY + "copy[(1,)](x, o, BLOCK=16); np.testing.assert_array_equal(o, x)\n"
      "assert os.listdir('relcache'), 'the relative cache folder is under the working directory'\n",
      ok(), env={"PYPTO_CACHE_DIR": "relcache"}),
    # -- pypto.load_pto ---------------------------------------------------------------------------
    M("load-pto-garbage", "k = pypto.load_pto('this is not pto')\n",
      err("pypto.errors.CompilationError", "<pto text>:1:1", "malformed module header")),
    M("load-pto-empty", "k = pypto.load_pto('')\n",
      err("pypto.errors.CompilationError", "empty text: expected a module")),
    M("load-pto-missing-file", "k = pypto.load_pto('/nonexistent/k.pto')\n",
      err("FileNotFoundError", "/nonexistent/k.pto")),
    M("load-pto-truncated", PTO + "k = pypto.load_pto(txt[: len(txt) // 2])\n",
      err("pypto.errors.CompilationError", "<pto text>:", "not closed by }")),
    M("load-pto-bytes", PTO + "k = pypto.load_pto(txt.encode())\n",
      err("TypeError", "load_pto(source=...) takes a .pto path or its text, got bytes")),
    M("load-pto-wrong-extent", PTO + "pypto.load_pto(txt)[(1,)](np.zeros(8, np.float32), o)\n",
      err("ValueError", "argument 'x' has shape (8,)", "written for shape (16,)")),
    M("load-pto-wrong-dtype", PTO + "pypto.load_pto(txt)[(1,)](x.astype(np.float16), o)\n",
      err("TypeError", "argument 'x' is float16, the program declares float32")),
    M("load-pto-missing-argument", PTO + "pypto.load_pto(txt)[(1,)](x)\n",
      err("TypeError", "is missing ['out']")),
    M("load-pto-round-trip", PTO + "o2 = np.zeros(16, np.float32); pypto.load_pto(txt)[(1,)](x, o2)\n"
                                   "np.testing.assert_array_equal(o2, x)\n", ok()),
    # -- @pypto.autotune and pypto.Config ---------------------------------------------------------
    M("autotune-config-sets-a-runtime-parameter",
      TUNED + "pypto.autotune(configs=[pypto.Config({'n': 4})], key=[])(kk)\n",
      err("ValueError", "sets ['n']", "not pl.constexpr parameters of kk", "BLOCK")),
    M("autotune-config-unknown-name",
      TUNED + "pypto.autotune(configs=[pypto.Config({'BLOCKZ': 4})], key=[])(kk)\n",
      err("ValueError", "['BLOCKZ']", "not parameters of kk (x, out, n, BLOCK)")),
    M("autotune-caller-passes-a-tuned-value",
      TUNED + "t = pypto.autotune(configs=[pypto.Config({'BLOCK': 16})], key=['n'])(kk)\n"
              "t[lambda m: (4,)](x, o, 64, BLOCK=16)\n",
      err("ValueError", "BLOCK are chosen by @pypto.autotune", "do not pass them")),
    M("autotune-no-configs", TUNED + "pypto.autotune(configs=[], key=['n'])(kk)\n",
      err("TypeError", "configs must be a non-empty list of pypto.Config")),
    M("autotune-config-pre-hook-not-callable", TUNED + "pypto.Config({'BLOCK': 16}, pre_hook=3)\n",
      err("TypeError", "pre_hook=3", "must be a function")),
    M("autotune-key-names-no-parameter",
      TUNED + "pypto.autotune(configs=[pypto.Config({'BLOCK': 16})], key=['m'])(kk)\n",
      err("ValueError", "key= names ['m']", "not parameters of kk")),
    M("autotune-key-a-string",
      TUNED + "pypto.autotune(configs=[pypto.Config({'BLOCK': 16})], key='n')(kk)\n",
      err("TypeError", "key=...) must be a list of argument names", "'n'")),
    M("autotune-no-config-compiles",
      TUNED + "t = pypto.autotune(configs=[pypto.Config({'BLOCK': 0}), pypto.Config({'BLOCK': -1})],"
              " key=['n'])(kk)\nt[lambda m: (1,)](x, o, 64)\n",
      err("pypto.tuning.report.AutotuneError", "no config can run", "BLOCK: 0", "BLOCK: -1",
          "positive compile-time integers")),
    M("autotune-config-value-a-list",
      TUNED + "t = pypto.autotune(configs=[pypto.Config({'BLOCK': [16]})], key=['n'])(kk)\n"
              "t[lambda m: (4,)](x, o, 64)\n",
      err("pypto.tuning.report.AutotuneError", "no config can run", "BLOCK: [16]",
          "expected a number, got list [16]")),
    M("autotune-num-stages-3", "pypto.Config({'BLOCK': 16}, num_stages=3)\n",
      err("ValueError", "num_stages=3", "1 or 2")),
    M("autotune-config-not-a-dict", "pypto.Config(16)\n",
      err("TypeError", "must be a dict of meta-parameter names to values", "got 16")),
    M("autotune-above-a-plain-function", "def f(x):\n    pass\n"
      "pypto.autotune(configs=[pypto.Config({'BLOCK': 16})], key=[])(f)\n",
      err("TypeError", "@pypto.autotune goes above @pypto.jit")),
    M("autotune-works", TUNED + "t = pypto.autotune(configs=[pypto.Config({'BLOCK': b}) "
      "for b in (16, 32)], key=['n'])(kk)\n"
      "t[lambda m: (pl.cdiv(64, m['BLOCK']),)](x, o, 64); np.testing.assert_array_equal(o, x)\n",
      ok()),
    # -- the graph API ----------------------------------------------------------------------------
    M("graph-tile-size-rank-3-for-rank-1",
      GRAPH + "pypto.tile_map(addt, [a, b], tile_size=(16, 16, 16))\n" + RUN_GRAPH,
      err("ValueError", "tile_map(tile_size=(16, 16, 16)) has 3 dimension(s)", "(rank 1)",
          "tile_size=256")),
    M("graph-tile-size-zero", GRAPH + "pypto.tile_map(addt, [a, b], tile_size=0)\n" + RUN_GRAPH,
      err("ValueError", "tile_map(tile_size=0)", "must be positive")),
    M("graph-tile-size-float", GRAPH + "pypto.tile_map(addt, [a, b], tile_size=16.0)\n" + RUN_GRAPH,
      err("TypeError", "tile_size=...) must be an int", "got 16.0")),
    M("graph-tile-size-auto-misspelt",
      GRAPH + "pypto.tile_map(addt, [a, b], tile_size='autox')\n" + RUN_GRAPH,
      err("ValueError", "tile_size='autox'", '"auto"')),
    M("graph-tile-size-larger-than-the-tensor",
      GRAPH + "pypto.tile_map(addt, [a, b], tile_size=1000)\n" + RUN_GRAPH
      + "av = np.arange(64, dtype=np.float32)\n"
        "np.testing.assert_array_equal(m.run(pypto.Context(), {'a': av, 'b': av}).numpy(), 2 * av)\n",
      ok()),
    M("graph-ragged-tile-size", GRAPH + "pypto.tile_map(addt, [a, b], tile_size=24)\n" + RUN_GRAPH
      + "av = np.arange(64, dtype=np.float32)\n"
        "np.testing.assert_array_equal(m.run(pypto.Context(), {'a': av, 'b': av}).numpy(), 2 * av)\n",
      ok()),
    M("graph-reduction-axis-cut",
      "g = pypto.TensorGraph(name='g')\na = g.placeholder(shape=(64, 64), dtype=pypto.float32, name='a')\n"
      "@pypto.tile_op\ndef rs(u):\n    return pypto.sum(u, axis=1, keepdims=True) + u\n"
      "pypto.tile_map(rs, [a], tile_size=(16, 16))\n" + RUN_GRAPH,
      err("ValueError", "cuts output axis 1", "use 64 (or more) for axis 1")),
    M("graph-run-missing-input", GRAPH + "pypto.tile_map(addt, [a, b], tile_size=16)\n" + RUN_GRAPH
      + "m.run(pypto.Context(), {'a': np.zeros(64, np.float32)})\n",
      err("pypto.graph.module.InputNameError", "missing ['b']", "expects exactly ['a', 'b']")),
    M("graph-run-unknown-input", GRAPH + "pypto.tile_map(addt, [a, b], tile_size=16)\n" + RUN_GRAPH
      + "z = np.zeros(64, np.float32); m.run(pypto.Context(), {'a': z, 'b': z, 'c': z})\n",
      err("pypto.graph.module.InputNameError", "unknown ['c']")),
    M("graph-run-inputs-a-list", GRAPH + "pypto.tile_map(addt, [a, b], tile_size=16)\n" + RUN_GRAPH
      + "z = np.zeros(64, np.float32); m.run(pypto.Context(), [z, z])\n",
      err("TypeError", "must be a dict of the graph's inputs ['a', 'b']", "got list")),
    M("graph-run-wrong-shape", GRAPH + "pypto.tile_map(addt, [a, b], tile_size=16)\n" + RUN_GRAPH
      + "m.run(pypto.Context(), {'a': np.zeros(32, np.float32), 'b': np.zeros(64, np.float32)})\n",
      err("ValueError", "input 'a' has shape (32,)", "placeholder has shape (64,)")),
    M("graph-run-wrong-dtype", GRAPH + "pypto.tile_map(addt, [a, b], tile_size=16)\n" + RUN_GRAPH
      + "m.run(pypto.Context(), {'a': np.zeros(64, np.float16), 'b': np.zeros(64, np.float32)})\n",
      err("TypeError", "input 'a' has dtype float16", "placeholder has dtype float32")),
    M("graph-compile-unknown-option", GRAPH + "pypto.tile_map(addt, [a, b], tile_size=16)\n"
      "pypto.compile(g, options={'fusion': True})\n",
      err("ValueError", "unknown option(s) 'fusion'", "tile_fusion")),
    M("graph-tile-map-of-a-plain-function", GRAPH + "def plain(u, v):\n    return u + v\n"
      "pypto.tile_map(plain, [a, b], tile_size=16)\n",
      err("TypeError", "plain is not a tile op", "@pypto.tile_op")),
    M("graph-too-few-inputs", GRAPH + "pypto.tile_map(addt, [a], tile_size=16)\n",
      err("TypeError", "addt takes 2 tile(s) (u, v), got 1 input(s)")),
    M("graph-array-as-input", GRAPH + "pypto.tile_map(addt, [a, np.zeros(64, np.float32)], tile_size=16)\n",
      err("TypeError", "inputs[1] is a ndarray, not a graph tensor", "graph.placeholder")),
    M("graph-inputs-of-two-graphs", GRAPH + "g2 = pypto.TensorGraph(name='g2')\n"
      "c = g2.placeholder(shape=(64,), dtype=pypto.float32, name='c')\n"
      "pypto.tile_map(addt, [a, c], tile_size=16)\n",
      err("ValueError", "belongs to graph 'g2'", "must come from one graph")),
    M("graph-placeholder-unknown-dtype",
      "pypto.TensorGraph(name='g').placeholder(shape=(64,), dtype='float17')\n",
      err("TypeError", "placeholder(dtype=...)", "'float17'")),
    M("graph-placeholder-zero-extent",
      "pypto.TensorGraph(name='g').placeholder(shape=(0,), dtype=pypto.float32)\n",
      err("ValueError", "placeholder(shape=...) must be a non-empty tuple of positive ints", "(0,)")),
    M("graph-placeholder-layout-rank",
      "pypto.TensorGraph(name='g').placeholder(shape=(64,), dtype=pypto.float32, layout='NC1HWC0')\n",
      err("ValueError", "layout='NC1HWC0') needs a rank-5 shape", "(64,)")),
    M("graph-placeholder-layout-unknown",
      "pypto.TensorGraph(name='g').placeholder(shape=(64,), dtype=pypto.float32, layout='NHCW')\n",
      err("ValueError", "must be one of ND, NCHW", "'NHCW'")),
    M("graph-compile-empty-graph", "pypto.compile(pypto.TensorGraph(name='g'))\n",
      err("ValueError", "graph 'g' has no tile_map nodes")),
    M("graph-parallel-strategy-unknown",
      GRAPH + "pypto.tile_map(addt, [a, b], tile_size=16, parallel_strategy='model_parallel')\n",
      err("ValueError", "parallel_strategy='model_parallel'", "'data_parallel', 'grid_stride'")),
    M("graph-tile-op-returns-nothing", GRAPH + "@pypto.tile_op\ndef nothing(u, v):\n    pass\n"
      "pypto.tile_map(nothing, [a, b], tile_size=16)\n",
      err("pypto.errors.CompilationError", "must return one tile, it returns nothing",
          at="def nothing")),
    M("graph-tile-op-returns-two", GRAPH + "@pypto.tile_op\ndef two(u, v):\n    return u, v\n"
      "pypto.tile_map(two, [a, b], tile_size=16)\n",
      err("pypto.errors.CompilationError", "must return one tile, it returns 2 values",
          at="def two")),
    M("graph-inputs-do-not-broadcast",
      "g = pypto.TensorGraph(name='g')\na = g.placeholder(shape=(64,), dtype=pypto.float32, name='a')\n"
      "b = g.placeholder(shape=(48,), dtype=pypto.float32, name='b')\n"
      "@pypto.tile_op\ndef addt(u, v):\n    return u + v\n"
      "pypto.tile_map(addt, [a, b], tile_size=16)\n",
      err("pypto.errors.CompilationError", "(64,) and (48,) cannot be broadcast", "input_tiles=",
          at="return u + v")),
    M("graph-tile-op-called-with-too-few-arrays",
      "@pypto.tile_op\ndef addt(u, v):\n    return u + v\naddt(np.zeros(4, np.float32))\n",
      err("TypeError", "addt() takes 2 arrays (u, v), got 1")),
    M("graph-tile-op-called-on-arrays",
      "@pypto.tile_op\ndef addt(u, v):\n    return u + v\n"
      "r = addt(np.arange(4, dtype=np.float32), np.ones(4, np.float32))\n"
      "np.testing.assert_array_equal(r, np.arange(4) + 1)\n", ok()),
]

# Left out of the child's environment: a setting inherited from the caller's shell would change
# what some rows do (each row sets what it needs).
_UNSET = ("PYPTO_INTERPRET", "PYPTO_SANITIZE", "PYPTO_ENGINE", "PYPTO_LOG", "PYPTO_DISABLE_CACHE",
          "PYPTO_CACHE_MAX_BYTES", "PTO_TARGET", "PTO_OPT_LEVEL", "PYPTO_NUM_THREADS",
          "PYPTO_OVERRIDE_DIR", "PYPTO_DEBUG")


def run_mistake(script: str, env: dict, tmp_path: Path) -> subprocess.CompletedProcess:
    """``PRELUDE + script`` as ``tmp_path/mistake.py``, run in a fresh Python there."""
    path = tmp_path / "mistake.py"
    path.write_text(PRELUDE + script + 'print("MISTAKE-OK")\n')
    child = {k: v for k, v in os.environ.items() if k not in _UNSET}
    child["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), child.get("PYTHONPATH")]))
    child["PYTHONWARNINGS"] = "default"
    child.update({k: v.replace("{tmp}", str(tmp_path)) for k, v in env.items()})
    return subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=child,
                          capture_output=True, text=True, timeout=TIMEOUT)


def line_of(text: str, tmp_path: Path) -> int:
    lines = (tmp_path / "mistake.py").read_text().splitlines()
    found = [i + 1 for i, line in enumerate(lines) if text in line]
    assert found, f"no line of the script holds {text!r}"
    return found[0]


@pytest.mark.parametrize("script,expect,env", MISTAKES)
def test_mistake(script, expect, env, tmp_path):
    proc = run_mistake(script, env, tmp_path)
    where = f"\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr[-3000:]}"
    assert proc.returncode >= 0, f"killed by signal {-proc.returncode}{where}"
    assert "Fatal Python error" not in proc.stderr, where
    if expect["raises"] is None:
        assert proc.returncode == 0 and "MISTAKE-OK" in proc.stdout, \
            f"expected the documented behaviour{where}"
        assert "Traceback" not in proc.stderr, where
        for fragment in expect["fragments"]:
            assert fragment in proc.stdout, f"{fragment!r} not printed{where}"
        for fragment in expect["stderr"]:
            fragment = fragment.replace("{tmp}", str(tmp_path))
            assert fragment in proc.stderr, f"{fragment!r} not on stderr{where}"
        return
    assert proc.returncode == CAUGHT, f"expected {expect['raises']}{where}"
    result = json.loads(proc.stdout.split("MISTAKE-RESULT ", 1)[1].splitlines()[0])
    assert result["type"] == expect["raises"], where
    message = result["msg"]
    for fragment in expect["fragments"]:
        fragment = fragment.replace("{tmp}", str(tmp_path))
        assert fragment in message, f"{fragment!r} not in the message: {message}"
    if expect["at"] is not None:
        line = line_of(expect["at"], tmp_path)
        assert f"mistake.py:{line}:" in message, f"line {line} not named: {message}"
    if expect["user_frame"]:
        assert result["frames"][-1] == str(tmp_path / "mistake.py"), result["frames"]


def test_the_table_has_at_least_60_distinct_mistakes():
    ids = [p.id for p in MISTAKES]
    assert len(set(ids)) == len(ids) >= 60
    scripts = [p.values[0] + repr(sorted(p.values[2].items())) for p in MISTAKES]
    assert len(set(scripts)) == len(scripts), "two rows run the same script"
