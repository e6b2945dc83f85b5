"""``.pto`` read back: print → parse → print is the identity, a parsed program lowers to the
same LLVM IR as the compiled one and runs to the numpy results, malformed text fails at its
line, and ``PYPTO_OVERRIDE_DIR`` compiles a hand-edited file in place of the generated program.

Programs come from real kernels (every tutorial kernel, plus kernels here that reach every
instruction, attribute and control-flow form the printer writes, a mixed cube/vector kernel
and a double-buffered loop); the sync forms no kernel produces yet (barriers, syncall, counted
cross-core waits) are built by hand.
"""
import copy
import functools
import importlib.util
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.backends.ascend.codegen import generate_llvm_ir
from pypto.target import get_target
from pypto import cache as cache_mod
from pypto.backends.ascend import compile as ascend_compile
from pypto.errors import CompilationError, NotOnChip
from pypto.compiler.pto import WORKSPACE, For, If, Inst, Program, TensorArg, While
from pypto.compiler.pto.reader import PtoParseError, parse_program
from pypto.compiler.pto.printer import print_program
from pypto.compiler.pto.dialect import Dialect
from pypto.language import dtypes as dt
from pypto.runtime.specialize import spec_key, specialise
from tests.quick import quick_cases

ROOT = Path(__file__).resolve().parents[3]
BF16 = np.dtype(ml_dtypes.bfloat16)
RNG = np.random.default_rng(7)


@functools.cache
def tutorial(name: str):
    spec = importlib.util.spec_from_file_location(f"tutorial_{name[:2]}",
                                                  ROOT / "tutorials" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- kernels that reach the forms the printer writes ---------------------------------------------

@pypto.jit
def control_kernel(x, out, o_scalars, n, f, BLOCK: pl.constexpr):
    """scf.for with scalar and tile iter_args, scf.if with results, scf.while, every scalar
    operator, comparisons, selects, casts, and scalars of every dtype as tile operands."""
    pid = pl.program_id(0)
    t = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    acc = 0
    g = f * 2.0
    for i in range(0, n, 3):
        acc = acc + i % 5 - i // 2 + min(i, 7) + max(i, 2) + (i << 1) + (i >> 1) + (i & 3) \
            + (i | 1) + (i ^ 2)
        g = g - 0.5 if i > 4 else g + 1.0
        t = t * 0.5 + 1.0
    if n > pl.num_programs(0):
        t = t + 1.0
        h = g - 0.25
    else:
        t = t - 1.0
        h = g * 3.0
    k = 0
    while k < n:
        k = k + 2
    pl.store(out, offsets=(pid * BLOCK,), value=t + acc + h + k + (1.0 if f < 2.0 else 2.0))
    s = pl.full((BLOCK,), 1, dtype=pl.int8) * k.to(pl.int8)
    s = s.to(pl.int32) + pl.full((BLOCK,), 1, dtype=pl.int16) * k.to(pl.int16)
    s = s + pl.full((BLOCK,), 2, dtype=pl.uint8) * k.to(pl.uint8)
    v = pl.full((BLOCK,), 0.5, dtype=pl.float16) * f.to(pl.float16)
    v = v.to(pl.float32) + pl.full((BLOCK,), 0.5, dtype=pl.bfloat16) * f.to(pl.bfloat16)
    e = f.to(pl.float16).to(pl.float32) + k.to(pl.int8).to(pl.int64) + max(f, 0.5) \
        + min(f, 0.25) + ((n > 3) & (f < 2.0))
    pl.store(o_scalars, offsets=(pid * BLOCK,),
             value=v + s + (n > 3) + (f / 4.0).to(pl.int32) + pl.full((BLOCK,), n, dtype=pl.int32)
             + e)


def control_expect(args):
    _, out, o_scalars, n, f = args
    acc, g = 0, f * 2.0
    t = x0 = np.asarray(CONTROL_X)
    for i in range(0, n, 3):
        acc += i % 5 - i // 2 + min(i, 7) + max(i, 2) + (i << 1) + (i >> 1) + (i & 3) \
            + (i | 1) + (i ^ 2)
        g = g - 0.5 if i > 4 else g + 1.0
        t = t * np.float32(0.5) + np.float32(1.0)
    t, h = (t + 1, g - 0.25) if n > 1 else (t - 1, g * 3.0)   # grid (1,)
    k = n + n % 2
    np.testing.assert_allclose(out, t + acc + h + k + (1.0 if f < 2.0 else 2.0), rtol=1e-6)
    ints = k + k + 2 * k + (n > 3) + int(f / 4.0) + n
    e = f + k + max(f, 0.5) + min(f, 0.25) + ((n > 3) & (f < 2.0))
    np.testing.assert_allclose(o_scalars, np.full_like(x0, f + ints + e), rtol=1e-6)


CONTROL_X = RNG.random(128).astype(np.float32)


@pypto.jit
def tile_ops_kernel(x, y, o_pad, o_cvt, o_cmp, o_full, o_red, o_slice, o_cat, o_tr, o_acc,
                    M: pl.constexpr, N: pl.constexpr):
    """tload padding, tcvt with and without rmode, tcmp/tcmps, texpands of every dtype, tci,
    row and column reductions, textract, tconcat on both axes, ttrans, treshape, atomic
    tstore."""
    t = pl.load(x, offsets=(0, 0), shape=(M, N), padding=float("-inf"))
    u = pl.load(y, offsets=(0, 0), shape=(M, N), padding=1.5)
    pl.store(o_pad, offsets=(0, 0), value=pl.maximum(t, u))
    pl.store(o_cvt, offsets=(0, 0), value=pl.cast(u, pl.int32, rounding="floor") + u.to(pl.int32))
    pl.store(o_cmp, offsets=(0, 0), value=pl.where(u < t, u, 0.0) + pl.where(u >= 2.0, 1.0, u))
    full = (pl.full((M, N), 3, dtype=pl.int8).to(pl.float32)
            + pl.full((M, N), 2, dtype=pl.int16).to(pl.float32)
            + pl.full((M, N), 1.5, dtype=pl.float16).to(pl.float32)
            + pl.full((M, N), 2.5, dtype=pl.bfloat16).to(pl.float32)
            + pl.full((M, N), True, dtype=pl.bool_).to(pl.float32)
            + pl.full((M, N), 7, dtype=pl.uint8).to(pl.float32)
            + pl.full((M, N), -4, dtype=pl.int32).to(pl.float32)
            + pl.arange(0, N)[None, :].to(pl.float32))
    pl.store(o_full, offsets=(0, 0), value=full)
    pl.store(o_red, offsets=(0, 0), value=pl.sum(u, axis=1, keepdims=True)
             + pl.max(u, axis=1, keepdims=True) + pl.min(u, axis=1, keepdims=True)
             + pl.sum(u, axis=0, keepdims=True))
    pl.store(o_slice, offsets=(0, 0), value=u[2:6, 8:16])     # UB pieces: 32-byte aligned
    pl.store(o_cat, offsets=(0, 0), value=pl.concat([u[0:2, :], u[4:6, :]], axis=0)
             + pl.concat([u[0:4, 0:8], u[0:4, 8:16]], axis=1))
    pl.store(o_tr, offsets=(0,), value=pl.reshape(pl.trans(u), (N * M,)))
    pl.store(o_acc, offsets=(0, 0), value=u, atomic="add")


def tile_ops_args():
    x = RNG.random((6, 12)).astype(np.float32)
    y = (RNG.random((6, 12)) * 4).astype(np.float32)
    outs = [np.zeros((8, 16), np.float32), np.zeros((8, 16), np.int32),
            np.zeros((8, 16), np.float32), np.zeros((8, 16), np.float32),
            np.zeros((8, 16), np.float32), np.zeros((4, 8), np.float32),
            np.zeros((4, 16), np.float32), np.zeros(128, np.float32),
            np.ones((8, 16), np.float32)]
    return [x, y, *outs]


def tile_ops_expect(args):
    x, y, o_pad, o_cvt, o_cmp, o_full, o_red, o_slice, o_cat, o_tr, o_acc = args
    t = np.full((8, 16), -np.inf, np.float32)
    t[:6, :12] = x
    u = np.full((8, 16), 1.5, np.float32)
    u[:6, :12] = y
    np.testing.assert_array_equal(o_pad, np.maximum(t, u))
    np.testing.assert_array_equal(o_cvt, np.floor(u).astype(np.int32) + u.astype(np.int32))
    np.testing.assert_array_equal(o_cmp, np.where(u < t, u, 0) + np.where(u >= 2, 1, u))
    np.testing.assert_array_equal(o_full, np.broadcast_to(13.0 + np.arange(16), (8, 16)))
    red = u.sum(1, keepdims=True) + u.max(1, keepdims=True) + u.min(1, keepdims=True) \
        + u.sum(0, keepdims=True)
    np.testing.assert_allclose(o_red, red, rtol=1e-6)
    np.testing.assert_array_equal(o_slice, u[2:6, 8:16])
    np.testing.assert_array_equal(o_cat, np.concatenate([u[0:2], u[4:6]]) + u[0:4])
    np.testing.assert_array_equal(o_tr, u.T.reshape(-1))
    np.testing.assert_array_equal(o_acc, u + 1)


@pypto.jit(dynamic=["x"])
def dynamic_kernel(x, y, out, BLOCK: pl.constexpr):
    """A dynamic tensor (extents as extra i64 arguments), a strided one (strides as
    arguments) and tensor.dim of both kinds of extent."""
    pid = pl.program_id(0)
    rows = x.shape[0]
    cols = y.shape[1]
    t = pl.load(x, offsets=(pid * BLOCK, 0), shape=(BLOCK, 16))
    u = pl.load(y, offsets=(pid * BLOCK, 0), shape=(BLOCK, 16))
    pl.store(out, offsets=(pid * BLOCK, 0), value=t * u + rows + cols)


def dynamic_args():
    x = RNG.random((20, 16)).astype(np.float32)
    y = RNG.random((20, 32)).astype(np.float32)[:, ::2]
    return [x, y, np.zeros((20, 16), np.float32)]


def dynamic_expect(args):
    x, y, out = args
    np.testing.assert_allclose(out, x * y + 20 + 16, rtol=1e-6)


@pypto.jit
def cube_kernel(a, b, c, c8, a8, b8, M: pl.constexpr, N: pl.constexpr, K: pl.constexpr):
    """tmatmul without an accumulator, a transposed float16 operand (tmov from the ZN view),
    int8."""
    ta = pl.load(a, offsets=(0, 0), shape=(K, M))
    tb = pl.load(b, offsets=(0, 0), shape=(K, N))
    pl.store(c, offsets=(0, 0), value=pl.matmul(ta, tb, a_trans=True))
    ia = pl.load(a8, offsets=(0, 0), shape=(M, K))
    ib = pl.load(b8, offsets=(0, 0), shape=(K, N))
    pl.store(c8, offsets=(0, 0), value=pl.matmul(ia, ib))


def cube_args():
    a = RNG.random((32, 16)).astype(np.float16)
    b = RNG.random((32, 16)).astype(np.float16)
    a8 = RNG.integers(-8, 8, (16, 32)).astype(np.int8)
    b8 = RNG.integers(-8, 8, (32, 16)).astype(np.int8)
    return [a, b, np.zeros((16, 16), np.float32), np.zeros((16, 16), np.int32), a8, b8]


def cube_expect(args):
    a, b, c, c8, a8, b8 = args
    np.testing.assert_allclose(c, a.T.astype(np.float32) @ b.astype(np.float32), rtol=1e-5)
    np.testing.assert_array_equal(c8, a8.astype(np.int32) @ b8.astype(np.int32))


@pypto.jit
def mixed_kernel(a, b, c):
    """A matmul result read by vector code: a cube and a vector function exchanging the tile
    through the GM workspace, with cross-core flags."""
    acc = pl.matmul(pl.load(a, offsets=(0, 0), shape=(16, 16)),
                    pl.load(b, offsets=(0, 0), shape=(16, 16)))
    pl.store(c, offsets=(0, 0), value=acc * 2.0 + 1.0)


def mixed_args():
    a, b = (RNG.random((16, 16)).astype(np.float16) for _ in range(2))
    return [a, b, np.zeros((16, 16), np.float32)]


def mixed_expect(args):
    a, b, c = args
    ref = 2 * (a.astype(np.float32) @ b.astype(np.float32)) + 1
    np.testing.assert_allclose(c, ref, rtol=1e-3)


@pypto.jit
def double_buffered_kernel(x, out, n, BLOCK: pl.constexpr):
    """num_stages=2: ping/pong tiles and a prefetching loop."""
    acc = pl.zeros((BLOCK,), dtype=pl.float32)
    for i in pl.range(0, n, BLOCK, num_stages=2):
        acc = acc + pl.load(x, offsets=(i,), shape=(BLOCK,))
    pl.store(out, offsets=(0,), value=acc)


# -- the cases ------------------------------------------------------------------------------------

@dataclass
class Case:
    kernel: Callable[[], object]        # the JITFunction (tutorials are imported lazily)
    grid: tuple
    args: Callable[[], list]            # fresh arguments, arrays first
    expect: Callable[[list], None]      # checks the arguments after the launch with numpy
    constexprs: dict = field(default_factory=dict)


def _vector_add():
    x, y = RNG.random(1000).astype(np.float32), RNG.random(1000).astype(np.float32)
    return [x, y, np.zeros(1000, np.float32)]


def _softmax_args():
    return [RNG.standard_normal((10, 100)).astype(np.float32), np.zeros((10, 100), np.float32)]


def _layer_norm_args():
    x = RNG.standard_normal((10, 100)).astype(np.float32)
    w, b = RNG.random(100).astype(np.float32), RNG.random(100).astype(np.float32)
    return [x, w, b, np.zeros((10, 100), np.float32), 1e-5]


def _matmul_args():
    a = RNG.random((64, 96)).astype(np.float16)
    b = RNG.random((96, 64)).astype(np.float16)
    return [a, b, np.zeros((64, 64), np.float32), 96]


CASES = {
    "tutorial_vector_add": Case(
        lambda: tutorial("01_vector_add").add_kernel, (4,), _vector_add,
        lambda a: np.testing.assert_array_equal(a[2], a[0] + a[1]), {"BLOCK": 256}),
    "tutorial_softmax": Case(
        lambda: tutorial("02_fused_softmax").softmax_kernel, (2,), _softmax_args,
        lambda a: np.testing.assert_allclose(
            a[1], tutorial("02_fused_softmax").softmax_numpy(a[0]), rtol=1e-5, atol=1e-7),
        {"BLOCK_M": 8, "BLOCK_N": 128}),
    "tutorial_matmul": Case(
        lambda: tutorial("03_matmul").matmul_kernel, (2, 2), _matmul_args,
        lambda a: np.testing.assert_allclose(
            a[2], a[0].astype(np.float32) @ a[1].astype(np.float32), rtol=1e-3),
        {"BM": 32, "BN": 32, "BK": 32}),
    "tutorial_layer_norm": Case(
        lambda: tutorial("04_layer_norm").layer_norm_kernel, (2,), _layer_norm_args,
        lambda a: np.testing.assert_allclose(
            a[3], tutorial("04_layer_norm").layer_norm_numpy(*a[:3]), rtol=1e-4, atol=1e-5),
        {"BLOCK_M": 8, "BLOCK_N": 128}),
    "control_flow": Case(
        lambda: control_kernel, (1,),
        lambda: [CONTROL_X.copy(), np.zeros(128, np.float32), np.zeros(128, np.float32), 11,
                 1.5],
        control_expect, {"BLOCK": 128}),
    "tile_ops": Case(lambda: tile_ops_kernel, (1,), tile_ops_args, tile_ops_expect,
                     {"M": 8, "N": 16}),
    "dynamic_and_strided": Case(lambda: dynamic_kernel, (3,), dynamic_args, dynamic_expect,
                                {"BLOCK": 8}),
    "cube": Case(lambda: cube_kernel, (1,), cube_args, cube_expect,
                 {"M": 16, "N": 16, "K": 32}),
    "mixed": Case(lambda: mixed_kernel, (1,), mixed_args, mixed_expect),
    "double_buffered": Case(
        lambda: double_buffered_kernel, (1,),
        lambda: [RNG.random(320).astype(np.float32), np.zeros(64, np.float32), 320],
        lambda a: np.testing.assert_allclose(a[1], a[0].reshape(5, 64).sum(0), rtol=1e-6),
        {"BLOCK": 64}),
}


class _Captured(Exception):
    pass


def program_of(case: Case) -> Program:
    """The kernel's final PTO program, taken where the compile driver hands it to codegen
    (before any LLVM work, which is not needed here)."""
    kernel = case.kernel()
    bound = kernel._bind(case.args(), case.constexprs)
    spec_args, tensor_specs, _ = specialise(kernel, spec_key(kernel, bound), bound)

    def capture(program):
        raise _Captured(program)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ascend_compile, "generate_llvm_ir", capture)
        with pytest.raises(_Captured) as got:
            ascend_compile.compile_kernel(kernel.source, spec_args, tensor_specs,
                                          get_target("ascend910b1"), "O0")
    return got.value.args[0]


def _without_host_hints(body):
    """The program as the text says it: no "_" attributes (fusion groups are host hints)."""
    for node in body or ():
        if isinstance(node, For):
            _without_host_hints(node.body)
        elif isinstance(node, If):
            _without_host_hints(node.then_body)
            _without_host_hints(node.else_body)
        elif isinstance(node, While):
            _without_host_hints(node.before_body)
            _without_host_hints(node.after_body)
        else:
            node.attrs = {k: v for k, v in node.attrs.items() if not k.startswith("_")}


def _walk(body):
    for node in body or ():
        yield node
        for inner in ("body", "then_body", "else_body", "before_body", "after_body"):
            yield from _walk(getattr(node, inner, None))


# -- round trip -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", CASES)
def test_print_parse_print_is_the_identity(name):
    program = program_of(CASES[name])
    text = print_program(program)
    parsed = parse_program(text)
    assert print_program(parsed) == text
    assert (parsed.name, parsed.kind, parsed.target) == (program.name, program.kind,
                                                         program.target)
    assert [(type(p), p.name, p.dtype) for p in parsed.params] == \
        [(type(p), p.name, p.dtype) for p in program.params]


@pytest.mark.parametrize("name", quick_cases(list(CASES), "tile_ops", "cube"))
def test_parsed_program_lowers_to_the_same_llvm_ir(name):
    program = program_of(CASES[name])
    parsed = parse_program(print_program(program))
    plain = copy.deepcopy(program)
    _without_host_hints(plain.body)
    _without_host_hints(plain.vector_body)
    assert generate_llvm_ir(parsed) == generate_llvm_ir(plain)


@pytest.mark.parametrize("name", quick_cases(list(CASES), "tutorial_vector_add", "mixed",
                                             "dynamic_and_strided"))
def test_parsed_program_runs_to_the_numpy_results(name, tmp_path, monkeypatch):
    """The printed text compiled through PYPTO_OVERRIDE_DIR (parse → codegen → run)."""
    case = CASES[name]
    program = program_of(case)
    (tmp_path / f"{program.name}.pto").write_text(print_program(program))
    monkeypatch.setenv("PYPTO_OVERRIDE_DIR", str(tmp_path))
    monkeypatch.setenv("PTO_OPT_LEVEL", "O1")
    parsed = []
    real = ascend_compile.override_program
    monkeypatch.setattr(ascend_compile, "override_program",
                        lambda *a: parsed.append(real(*a)) or parsed[-1])
    args = case.args()
    case.kernel()[case.grid](*args, **case.constexprs)
    assert len(parsed) == 1 and print_program(parsed[0]) == print_program(program)
    case.expect(args)


@pytest.mark.parametrize("version, ffts_type", [((0, 27), "memref<256xi64>"),
                                                ((0, 60), "!pto.ptr<i64>")])
def test_hand_built_sync_mixed_and_workspace_forms_round_trip(version, ffts_type):
    """Every sync instruction with every attribute (barrier ALL, syncall, an FFTS mode,
    ...) in both functions of a hand-made mixed kernel with a workspace parameter, in each
    PTOAS version's spelling of the FFTS base."""
    dialect = Dialect(version)
    cube = program_of(CASES["tutorial_matmul"])
    vector = copy.deepcopy(cube)
    vector.body = [node for node in vector.body if isinstance(node, Inst)
                   and node.op in ("pto.program_id", "arith.constant", "arith.mul")]
    sync = [Inst("set_flag", [], [], {"src": "MTE2", "dst": "V", "event": 0}),
            Inst("wait_flag", [], [], {"src": "FIX", "dst": "MTE2", "event": 7}),
            Inst("barrier", [], [], {"pipe": "ALL"}), Inst("barrier", [], [], {"pipe": "V"}),
            Inst("syncall", [], [], {}), Inst("sync.set", [], [], {"pipe": "FIX", "flag": 3}),
            Inst("sync.wait", [], [], {"pipe": "MTE2", "flag": 3}),
            Inst("sync.set", [], [], {"pipe": "MTE3", "flag": 9, "mode": 1}),
            Inst("sync.wait", [], [], {"pipe": "MTE2", "flag": 15})]
    workspace = TensorArg(f"{WORKSPACE}0", dt.float32, (64, 64), (64, 1), workspace=True)
    mixed = Program(cube.name, "mixed", cube.params + [workspace], cube.tiles,
                    sync + cube.body, cube.target, {}, vector_body=vector.body + sync)
    text = print_program(mixed, dialect)
    assert f"@{cube.name}_cube(" in text and f"@{cube.name}_vector(" in text
    assert "pto.sync.set #pto.pipe<PIPE_MTE3>, 9 {ffts_mode = 1 : i32}" in text
    assert "pto.sync.wait #pto.pipe<PIPE_MTE2>, 15" in text
    assert text.count(f"pto.set_ffts %pypto_ffts : {ffts_type}") == 2
    assert text.count(f"%pypto_ffts: {ffts_type}") == 2
    counted = copy.deepcopy(mixed)
    counted.body.append(Inst("sync.wait", [], [], {"pipe": "MTE2", "flag": 15, "count": 2}))
    with pytest.raises(NotOnChip, match="carry no count"):
        print_program(counted)
    parsed = parse_program(text)
    assert print_program(parsed, dialect) == text
    assert (parsed.name, parsed.kind) == (cube.name, "mixed")
    assert parsed.params[-1].workspace and not any(
        getattr(p, "workspace", False) for p in parsed.params[:-1])
    for body in (parsed.body, parsed.vector_body):
        got = [(i.op, i.attrs) for i in _walk(body) if isinstance(i, Inst) and not i.ins
               and not i.outs]
        assert got[:len(sync)] == [(i.op, i.attrs) for i in sync] or \
            got[-len(sync):] == [(i.op, i.attrs) for i in sync]


def test_unknown_tile_instructions_parse_generically():
    """A ``pto.<op> ins(...) outs(...) {attrs}`` the parser has no rule for is kept as it
    stands, so a printer that learns a new instruction still reads back."""
    text = print_program(program_of(CASES["tutorial_vector_add"]))
    line = next(s for s in text.splitlines() if "pto.tadd " in s)
    new = line.replace("pto.tadd ", "pto.tfancy.v2 ") + " {mode = #pto<fancy 3>, k = (1, 2)}"
    edited = text.replace(line, new)
    parsed = parse_program(edited)
    assert print_program(parsed) == edited
    [inst] = [i for i in _walk(parsed.body) if getattr(i, "op", "") == "tfancy.v2"]
    assert inst.attrs == {"mode": "#pto<fancy 3>", "k": (1, 2)} and len(inst.ins) == 2


# -- malformed text -------------------------------------------------------------------------------

def _edit(text: str, old: str, new: str) -> tuple[str, int]:
    """``text`` with the first line containing ``old`` changed, and that line's number."""
    lines = text.splitlines()
    at = next(i for i, s in enumerate(lines) if old in s)
    lines[at] = lines[at].replace(old, new)
    return "\n".join(lines) + "\n", at + 1


def _appended(text: str, where: str, extra: str) -> tuple[str, int]:
    """``text`` with ``extra`` after the first line containing ``where``."""
    line = next(s for s in text.splitlines() if where in s).strip()
    return _edit(text, line, line + extra)


MALFORMED = {
    "undefined value": (lambda t: _edit(t, "pto.tadd ins(%", "pto.tadd ins(%nope, %"),
                        "undefined value %nope"),
    "unknown device": (lambda t: _edit(t, "Ascend910B1", "Ascend999"), "unknown pto.device-spec"),
    "garbage line": (lambda t: _edit(t, "pto.tadd ", "?? "), "cannot read this line"),
    "unknown op": (lambda t: _edit(t, "pto.tadd ins", "what ins"), "unknown operation what"),
    "unknown scalar op": (lambda t: _edit(t, "pto.get_block_idx", "pto.get_warp"),
                          "unknown operation pto.get_warp"),
    "bad tile type": (lambda t: _edit(t, "blayout=row_major", "blayout=zigzag"),
                      "tile type not representable"),
    "unknown dtype": (lambda t: _edit(t, "!pto.ptr<f32>", "!pto.ptr<f7>"),
                      "unknown element type 'f7'"),
    "bad attribute": (lambda t: _appended(t, "pto.tadd ins(", " {pad_value}"),
                      "attribute 'pad_value' is not key = value"),
    "unbalanced": (lambda t: _edit(t, "pto.tadd ins(", "pto.tadd ins(("), "unbalanced"),
}


@pytest.mark.parametrize("what", MALFORMED)
def test_malformed_text_names_its_line(what):
    text = print_program(program_of(CASES["tutorial_vector_add"]))
    edit, message = MALFORMED[what]
    bad, line = edit(text)
    with pytest.raises(PtoParseError, match=rf"^line {line}: .*{message}") as info:
        parse_program(bad)
    assert isinstance(info.value, ValueError) and info.value.line == line


def test_truncated_text_is_an_error_at_the_end():
    text = print_program(program_of(CASES["tutorial_vector_add"]))
    lines = text.splitlines()
    with pytest.raises(PtoParseError, match="not closed"):
        parse_program("\n".join(lines[:-1]))
    with pytest.raises(PtoParseError, match="return"):
        parse_program(text.replace("    return\n", ""))
    with pytest.raises(PtoParseError, match="empty text"):
        parse_program("")


# -- PYPTO_OVERRIDE_DIR ---------------------------------------------------------------------------

def _add_kernel():
    """A new JITFunction each time (no in-memory kernels or warm launches carried over), so
    what is compiled or fetched depends on the disk cache and the override alone."""
    return pypto.jit(tutorial("01_vector_add").add_kernel.fn)


def _run_add(x, y):
    out = np.zeros_like(x)
    _add_kernel()[(4,)](x, y, out, BLOCK=256)
    return out


def test_override_dir_compiles_the_edited_pto(tmp_path, monkeypatch, fresh_cache):
    x, y = RNG.random(1000).astype(np.float32), RNG.random(1000).astype(np.float32)
    text = _add_kernel().compile(x, y, np.zeros_like(x), BLOCK=256).asm["pto"]
    assert text.count("pto.tadd ") == 1
    monkeypatch.setenv("PYPTO_OVERRIDE_DIR", str(tmp_path))
    pto_file = tmp_path / "add_kernel.pto"
    np.testing.assert_array_equal(_run_add(x, y), x + y)        # no file: the kernel as written

    pto_file.write_text(text.replace("pto.tadd ", "pto.tsub "))
    compiles = cache_mod.STATS["compiles"]
    np.testing.assert_array_equal(_run_add(x, y), x - y)
    assert cache_mod.STATS["compiles"] == compiles + 1

    pto_file.write_text(text.replace("pto.tadd ", "pto.tmul "))  # new content, new key
    np.testing.assert_array_equal(_run_add(x, y), x * y)
    assert cache_mod.STATS["compiles"] == compiles + 2

    pto_file.write_text(text.replace("pto.tadd ", "pto.tsub "))  # old content: from disk
    np.testing.assert_array_equal(_run_add(x, y), x - y)
    assert cache_mod.STATS["compiles"] == compiles + 2


def test_override_errors_name_the_file_and_line(tmp_path, monkeypatch):
    x = RNG.random(1000).astype(np.float32)
    text = _add_kernel().compile(x, x, np.zeros_like(x), BLOCK=256).asm["pto"]
    monkeypatch.setenv("PYPTO_OVERRIDE_DIR", str(tmp_path))
    pto_file = tmp_path / "add_kernel.pto"
    bad, line = _edit(text, "pto.tadd ins(%", "pto.tadd ins(%nope, %")
    pto_file.write_text(bad)
    with pytest.raises(CompilationError, match=rf"add_kernel\.pto:{line}:.*undefined value"):
        _run_add(x, x)
    # a file written for another specialisation (here: another length) is refused
    pto_file.write_text(text.replace("%c1000_index", "%c2000_index").replace(
        "constant 1000 : index", "constant 2000 : index"))
    with pytest.raises(CompilationError, match="does not match this specialisation"):
        _run_add(x, x)


def test_hand_edited_pto_with_a_flag_removed_is_rejected_naming_both_instructions(
        tmp_path, monkeypatch):
    """The hazard checker runs on overridden programs too: deleting the MTE2 -> V wait of the
    vector add leaves the add reading tiles the loads may still be writing."""
    from pypto.compiler.pto.passes.hazards import HazardError
    x = RNG.random(1000).astype(np.float32)
    text = _add_kernel().compile(x, x, np.zeros_like(x), BLOCK=256).asm["pto"]
    wait = next(line for line in text.splitlines()
                if "pto.wait_flag[<PIPE_MTE2>, <PIPE_V>" in line)
    set_ = next(line for line in text.splitlines()
                if "pto.set_flag[<PIPE_MTE2>, <PIPE_V>" in line)
    monkeypatch.setenv("PYPTO_OVERRIDE_DIR", str(tmp_path))
    (tmp_path / "add_kernel.pto").write_text(
        text.replace(wait + "\n", "").replace(set_ + "\n", ""))
    with pytest.raises(HazardError) as e:
        _run_add(x, x)
    msg = str(e.value)
    assert "RAW" in msg and "pto.tload" in msg and "pto.tadd" in msg
    assert "MTE2" in msg and " V" in msg


def test_masks_whose_writers_disagree_about_the_width_are_an_error_not_a_hang():
    """A ui8 mask's width is not in the text; the reader takes it from the compares that
    write it. Two writers of one mask from tiles of different widths used to make that
    inference loop forever (a fill-initialised, loop-carried mask in a sort did)."""
    from pypto.compiler.pto.program import Tile
    from pypto.language import dtypes as ldt
    target = get_target("ascend910b1")
    wide = Tile("vec1", "vec", ldt.float32, 3, 8, 0, 3, 7)
    narrow = Tile("vec2", "vec", ldt.float32, 3, 8, 128, 3, 5)
    mask = Tile("vec3", "vec", ldt.bool_, 3, 7, 256, 3, 7)
    body = [Inst("tcmp", [wide, wide], [mask], {"cmp": "eq"}),
            Inst("tcmp", [narrow, narrow], [mask], {"cmp": "eq"})]
    program = Program("masks", "vector", [], [wide, narrow, mask], body, target, {})
    with pytest.raises(PtoParseError, match="widths of the masks"):
        parse_program(print_program(program))


@pytest.mark.parametrize("version", [(0, 27), (0, 60)])
def test_while_results_used_in_later_blocks_print_and_read_in_each_version(version):
    """PTOAS before 0.58 refuses a while whose results are used in another block (inside a
    later loop, or after a later while, which it lowers first): its text uses each result once,
    in a copy the folder cannot see through, and every later use reads the copy. The reader
    sees through the copy, so the text reads back to the same program."""
    from tests.language.test_control_flow import float_and_bool_while_results, whiles_in_a_for
    for kernel in (whiles_in_a_for, float_and_bool_while_results):
        x = np.arange(16, dtype=np.float32)
        program = program_of(Case(lambda: kernel, (1,), lambda: [x, np.zeros_like(x), 3], None))
        text = print_program(program, Dialect(version))
        results = [r.name for w in _walk(program.body) if isinstance(w, While) for r in w.results]
        copies = [r for r in results if f"%{r}.ix = arith.index_cast" in text
                  or f"%{r}.b = arith.bitcast %{r} :" in text]
        if version < (0, 58):
            assert copies == results
            assert all(len(re.findall(rf"%{r}\b(?!\.)", text)) == 2 for r in results), text
        else:
            assert not copies
        assert print_program(parse_program(text), Dialect(version)) == text
