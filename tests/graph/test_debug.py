"""pypto.debug: the graph in the reference interpreter, breakpoints per tile, and nothing of it
in compiled kernels."""
import io
import sys

import numpy as np
import pytest

import pypto
import pypto.tools.debug
import pypto.language as pl

from .utils import rand


@pypto.tile_op
def scaled(a, b):
    s = a * 2.0
    pypto.debug.breakpoint()
    return s + b


@pytest.fixture
def graph():
    g = pypto.TensorGraph(name="dbg2d")
    x = g.placeholder((20, 30), pypto.float32)
    y = g.placeholder((30,), pypto.float32)
    pypto.tile_map(scaled, [x, y], tile_size=(16, 16))
    yield g
    pypto.debug.disable()
    pypto.debug.set_hook(None)


def test_hook_sees_every_tile_and_its_live_tiles(graph):
    seen = []
    pypto.debug.set_hook(seen.append)
    a, b = rand((20, 30), "float32", 1), rand(30, "float32", 2)
    got = pypto.debug.run(graph, {"x": a, "y": b}).to_numpy()
    np.testing.assert_array_equal(got, a * 2 + b)
    assert not pypto.debug.is_enabled()                  # debug.run restores the state
    assert sorted(s.tile for s in seen) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert seen == pypto.debug.snapshots
    snap = next(s for s in seen if s.tile == (1, 0))
    assert list(snap.tiles) == ["a", "b", "s"]
    np.testing.assert_array_equal(snap.tiles["a"][:4], a[16:20, :16])
    np.testing.assert_array_equal(snap.tiles["a"][4:], 0)         # padding past the end
    np.testing.assert_array_equal(snap.tiles["s"][:4], a[16:20, :16] * 2)
    np.testing.assert_array_equal(snap.tiles["b"], b[:16])
    assert snap.kernel == "dbg2d_scaled"


def test_default_hook_prints_and_continues_without_a_terminal(graph, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))      # not a TTY: never waits
    pypto.debug.enable()
    module = pypto.compile(graph)
    a, b = rand((20, 30), "float32", 1), rand(30, "float32", 2)
    got = module.run(pypto.Context(), {"x": a, "y": b}).to_numpy()   # interpreted
    np.testing.assert_array_equal(got, a * 2 + b)
    out = capsys.readouterr().out
    assert out.count("[pypto.debug] breakpoint at") == 4
    assert "tile (1, 1) of dbg2d_scaled: a: float32[16, 16]" in out


def test_compiled_kernels_drop_the_breakpoint(graph):
    module = pypto.compile(graph)
    (kernel,) = module.kernels
    assert "debug" in kernel.compiled.asm["source_ir"]         # the frontend emits it
    assert "debug" not in kernel.compiled.asm["tile_ir"]       # and the passes drop it
    assert "debug" not in kernel.compiled.asm["pto"]
    pypto.debug.clear()
    a, b = rand((20, 30), "float32", 1), rand(30, "float32", 2)
    np.testing.assert_array_equal(module.run(pypto.Context(), {"x": a, "y": b}).to_numpy(),
                                  a * 2 + b)
    assert pypto.debug.snapshots == []


def test_breakpoint_in_a_jit_kernel_under_pypto_interpret(monkeypatch):
    @pypto.jit
    def kernel(x, out, B: pl.constexpr):
        t = pl.load(x, [pl.program_id(0) * B], [B])
        breakpoint()                   # Python's builtin is the same builtin in a kernel
        pl.store(out, [pl.program_id(0) * B], t)

    seen = []
    pypto.debug.enable(hook=seen.append)
    try:
        monkeypatch.setenv("PYPTO_INTERPRET", "1")
        x = np.arange(8, dtype=np.float32)
        out = np.empty_like(x)
        kernel[(2,)](x, out, B=4)
    finally:
        pypto.debug.disable()
        pypto.debug.set_hook(None)
    np.testing.assert_array_equal(out, x)
    assert [s.block for s in seen] == [(0, 0, 0), (1, 0, 0)]
    assert seen[0].tile is None and list(seen[0].tiles) == ["t"]


def test_breakpoint_outside_a_kernel_and_bad_hook():
    with pytest.raises(RuntimeError, match="only be used inside a @pypto.jit kernel"):
        pypto.debug.breakpoint()
    with pytest.raises(TypeError, match="must be callable"):
        pypto.debug.set_hook(3)
    with pytest.raises(TypeError, match="takes a pypto.TensorGraph or a Module"):
        pypto.debug.run(None, {})


def test_module_run_under_pypto_interpret(graph, monkeypatch):
    """Outside debug mode the generated kernels are ordinary jit kernels: PYPTO_INTERPRET runs
    them (grid-stride form included) in the interpreter, and breakpoints stay silent."""
    g = pypto.TensorGraph(name="interp")
    x = g.placeholder((48 * 5 * 64 + 3,), pypto.float32)
    pypto.tile_map(scaled, [x, x], tile_size=64, parallel_strategy="grid_stride")
    module = pypto.compile(g)
    assert module.kernels[0].form == "stride"
    pypto.debug.clear()
    monkeypatch.setenv("PYPTO_INTERPRET", "1")
    a = rand(x.shape, "float32")
    np.testing.assert_array_equal(module.run(pypto.Context(), {"x": a}).to_numpy(), a * 3)
    assert pypto.debug.snapshots == []


@pypto.tile_op
def doubled(a):
    return a * 2.0


def test_debug_mode_fuses_as_the_compiled_module_did():
    """Debug kernels are built on the first debug run; nodes added to the graph after compile
    must not change which nodes they fuse (they used to ask the live graph who reads a
    tensor, so a later reader of an intermediate split the group)."""
    g = pypto.TensorGraph(name="late_reader")
    x = g.placeholder((32,), pypto.float32)
    mid = pypto.tile_map(doubled, [x], tile_size=16)
    pypto.tile_map(doubled, [mid], tile_size=16)
    module = pypto.compile(g)
    assert len(module.kernels) == 1                      # the chain is fused
    pypto.tile_map(doubled, [mid], tile_size=16)         # a reader added after compile
    a = rand((32,), "float32", 3)
    pypto.debug.enable()
    try:
        got = module.run({"x": a}).to_numpy()
        assert len(module._debug()) == len(module.kernels)
    finally:
        pypto.debug.disable()
    np.testing.assert_array_equal(got, a * 4)
