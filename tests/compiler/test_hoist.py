"""Loop-invariant vector work hoisted out of loops (compiler/passes/hoist.py), and what it
exposed: the double-buffered loop whose store offset is defined before it (double_buffer's
address slice counted a store's offsets as definitions), and waits placed inside a branch
(pto/passes/sync.py) so the second half of a double-buffered loop computes while the first
half's store drains."""
import re

import numpy as np

import pypto
import pypto.language as pl
from pypto.backends.ascend.model.launch import model_kernel


def _asm(kernel, persistent=False):
    (compiled,) = [k for key, k in kernel._kernels.items() if key[-1] == persistent]
    return compiled.asm


def _hoisted(tile_ir: str, tensor: str) -> bool:
    """Is the load of ``tensor`` before the first loop of the Tile IR?"""
    load = re.search(rf"tile\.load %{tensor}_\d+", tile_ir)
    return load is not None and load.start() < tile_ir.index("scf.for")


@pypto.jit
def scale_rows(x, w, out, BM: pl.constexpr, N: pl.constexpr):
    """Every BM-row tile of x times the row w, the weight loaded in the loop as written."""
    for i in pl.range(0, x.shape[0] // BM):
        t = pl.load(x, offsets=(i * BM, 0), shape=(BM, N))
        pl.store(out, offsets=(i * BM, 0), value=t * pl.load(w, offsets=(0, 0), shape=(1, N)))


def test_an_invariant_load_leaves_the_loop():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((64, 128), np.float32), rng.standard_normal((1, 128), np.float32)
    out = np.zeros_like(x)
    scale_rows[(1,)](x, w, out, BM=8, N=128)
    np.testing.assert_allclose(out, x * w, rtol=1e-6)
    assert _hoisted(_asm(scale_rows)["tile_ir"], "w")


@pypto.jit
def running_sum(x, out, BM: pl.constexpr, N: pl.constexpr):
    """out[0:BM] accumulates the BM-row tiles of x through global memory: the load of out
    reads what the previous iteration stored, at the same offsets every iteration."""
    for i in pl.range(0, x.shape[0] // BM):
        acc = pl.load(out, offsets=(0, 0), shape=(BM, N))
        pl.store(out, offsets=(0, 0), value=acc + pl.load(x, offsets=(i * BM, 0), shape=(BM, N)))


def test_a_load_from_a_tensor_the_kernel_writes_stays():
    x = np.random.default_rng(1).standard_normal((32, 64), np.float32)
    out = np.zeros((8, 64), np.float32)
    running_sum[(1,)](x, out, BM=8, N=64)
    np.testing.assert_allclose(out, x.reshape(4, 8, 64).sum(0), rtol=1e-5, atol=1e-5)
    assert not _hoisted(_asm(running_sum)["tile_ir"], "out")


@pypto.jit
def two_phases(x, w, z, out, BM: pl.constexpr, N: pl.constexpr):
    """A 64 KiB weight tile used early in each iteration, then two 64 KiB tiles of other
    work: hoisted, the weight stays alive beside them (four tiles, more than the UB)."""
    for i in pl.range(0, x.shape[0] // BM):
        r = i * BM
        pl.store(out, offsets=(r, 0), value=pl.load(x, offsets=(r, 0), shape=(BM, N)) *
                 pl.load(w, offsets=(0, 0), shape=(BM, N)))
        b = pl.load(z, offsets=(r, 0), shape=(BM, N))
        pl.store(z, offsets=(r, 0), value=pl.exp(b) + b)


def test_hoisting_that_overflows_the_ub_is_undone():
    rng = np.random.default_rng(2)
    x, w, z = (rng.standard_normal((32, 1024), np.float32) for _ in range(3))
    w[16:] = 0.0
    z0, out = z.copy(), np.zeros_like(x)
    two_phases[(1,)](x, w, z, out, BM=16, N=1024)
    np.testing.assert_allclose(out, x * np.concatenate([w[:16], w[:16]]), rtol=1e-6)
    np.testing.assert_allclose(z, np.exp(z0) + z0, rtol=1e-5, atol=1e-6)
    assert not _hoisted(_asm(two_phases)["tile_ir"], "w")
    # the launch's record of what the kernel writes comes from the function built again (it
    # came from the first, half rewritten, and named nothing: a read-only out was not refused)
    (compiled,) = two_phases._kernels.values()
    assert compiled.metadata["written_tensors"] == ["out", "z"]


@pypto.jit
def shifted_copy(x, out, BM: pl.constexpr, N: pl.constexpr):
    for i in pl.range(0, x.shape[0] // BM, num_stages=2):
        pl.store(out, offsets=(i * BM, 0), value=pl.load(x, offsets=(i * BM, 0),
                                                          shape=(BM, N)) + 1.0)


def test_a_store_offset_from_before_the_loop_keeps_the_prefetch():
    """The column offset 0 is hoisted in front of the loop; the load's prefetch (its pong
    buffer) was dropped because the store's use of it looked like a definition in the loop."""
    x = np.random.default_rng(3).standard_normal((64, 64), np.float32)
    out = np.zeros_like(x)
    shifted_copy[(1,)](x, out, BM=8, N=64)
    np.testing.assert_allclose(out, x + 1.0)
    assert "_pong" in _asm(shifted_copy)["pto"]


@pypto.jit(target="ascend910b1")
def softmax_rows(x, out, BM: pl.constexpr, N: pl.constexpr):
    r = pl.program_id(0) * BM
    t = pl.load(x, offsets=(r, 0), shape=(BM, N))
    e = pl.exp(t - pl.max(t, axis=1, keepdims=True))
    pl.store(out, offsets=(r, 0), value=e / pl.sum(e, axis=1, keepdims=True))


def test_the_second_half_computes_while_the_first_half_stores():
    """The persistent form's loop, double-buffered: the second half (in a branch) reads only
    its own buffers until its prefetch's padding, so its vector work must not wait for the
    first half's store. It did: the wait stood before the whole branch."""
    x = np.zeros((48 * 8 * 2, 1024), np.float32)
    model = model_kernel(softmax_rows, (x.shape[0] // 2,), x, x.copy(), BM=2, N=1024)
    records = model.blocks[0].records
    store = next(r for r in records if r.name == "tstore")
    after = records[records.index(store) + 1:]
    assert any(r.pipe == "V" and r.start < store.end for r in after)
