"""CANN ops run by pypto.frontend, each against a numpy/torch golden."""
import numpy as np
import pytest

import pypto

torch = pytest.importorskip("torch", reason="the CANN frontend's ops are checked on torch tensors")
RNG = np.random.default_rng(1)


def _x(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def test_elementwise_chain_on_rank4_writes_the_torch_tensor_in_place():
    @pypto.frontend.jit(runtime_options={"run_mode": pypto.RunMode.SIM})
    def k(x: pypto.Tensor((1, 4, 1, 64), pypto.DT_FP32),
          y: pypto.Tensor((1, 4, 1, 64), pypto.DT_FP32),
          out: pypto.Tensor((1, 4, 1, 64), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 4, 1, 64)
        a = pypto.where(x > y, pypto.exp(x), pypto.abs(y))
        out[:] = pypto.clip(pypto.maximum(a, pypto.sigmoid(y)) - pypto.relu(x), -1.0, 2.0)

    x, y = torch.randn(1, 4, 1, 64), torch.randn(1, 4, 1, 64)
    out = torch.full((1, 4, 1, 64), float("nan"))
    k(x, y, out)
    a = torch.where(x > y, torch.exp(x), torch.abs(y))
    want = torch.clamp(torch.maximum(a, torch.sigmoid(y)) - torch.relu(x), -1.0, 2.0)
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op, dim, keepdim", [("sum", -1, True), ("amax", 0, False),
                                              ("mean", 1, False), ("amin", -1, False),
                                              ("prod", 0, True)])
def test_reductions(op, dim, keepdim):
    shape = (3, 5, 16)
    out_shape = np.sum(np.zeros(shape), axis=dim, keepdims=keepdim).shape

    @pypto.frontend.jit
    def k(x: pypto.Tensor(shape, pypto.DT_FP32), out: pypto.Tensor(out_shape, pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 5, 16)
        out[:] = getattr(pypto, op)(x, dim=dim, keepdim=keepdim)

    x = _x(*shape) * 0.5 + 1.0
    out = np.zeros(out_shape, np.float32)
    k(x, out)
    want = getattr(torch, op)(torch.from_numpy(x), dim=dim, keepdim=keepdim)
    np.testing.assert_allclose(out, want.numpy(), rtol=1e-5, atol=1e-6)


def test_softmax_layer_norm_rms_norm_composites():
    @pypto.frontend.jit
    def k(x: pypto.Tensor([16, 64], pypto.DT_FP32), w: pypto.Tensor([64], pypto.DT_FP32),
          b: pypto.Tensor([64], pypto.DT_FP32), s: pypto.Tensor([16, 64], pypto.DT_FP32),
          ln: pypto.Tensor([16, 64], pypto.DT_FP32), rms: pypto.Tensor([16, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        s[:] = pypto.softmax(x, dim=-1)
        ln[:] = pypto.layer_norm(x, w, b, dim=-1, epsilon=1e-5)
        rms[:] = pypto.rms_norm(x, w, epsilon=1e-6)

    x, w, b = torch.randn(16, 64), torch.rand(64), torch.rand(64)
    s, ln, rms = (torch.empty(16, 64) for _ in range(3))
    k(x, w, b, s, ln, rms)
    torch.testing.assert_close(s, torch.softmax(x, -1))
    torch.testing.assert_close(ln, torch.nn.functional.layer_norm(x, (64,), w, b, 1e-5),
                               rtol=1e-5, atol=1e-5)
    want = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w
    torch.testing.assert_close(rms, want, rtol=1e-5, atol=1e-5)


def test_batched_matmul_with_transposed_operand_and_out_dtype():
    @pypto.frontend.jit
    def k(a: pypto.Tensor([2, 32, 64], pypto.DT_FP16), b: pypto.Tensor([48, 64], pypto.DT_FP16),
          c: pypto.Tensor([2, 32, 48], pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([16, 16], [64, 64], [16, 16])
        c[:] = pypto.matmul(a, b, pypto.DT_FP32, b_trans=True)

    a, b = torch.randn(2, 32, 64).half(), torch.randn(48, 64).half()
    c = torch.empty(2, 32, 48)
    k(a, b, c)
    torch.testing.assert_close(c, torch.matmul(a.float(), b.float().T), rtol=1e-3, atol=1e-3)


def test_shape_ops_creation_and_cast():
    @pypto.frontend.jit
    def k(x: pypto.Tensor([4, 8], pypto.DT_FP32), t: pypto.Tensor([8, 4], pypto.DT_FP32),
          cat: pypto.Tensor([4, 16], pypto.DT_FP32), h: pypto.Tensor([2, 16], pypto.DT_FP16),
          r: pypto.Tensor([3, 4, 8], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        t[:] = pypto.transpose(x, 0, 1)
        cat[:] = pypto.concat([x, pypto.full([4, 8], 3.0, pypto.DT_FP32)], dim=-1)
        h[:] = pypto.cast(pypto.reshape(x, [2, 16]), pypto.DT_FP16)
        r[:] = pypto.expand_clone(pypto.unsqueeze(x, 0), [3, 4, 8]) + pypto.ones([8])

    x = _x(4, 8)
    t, cat, r = np.zeros((8, 4), np.float32), np.zeros((4, 16), np.float32), \
        np.zeros((3, 4, 8), np.float32)
    h = np.zeros((2, 16), np.float16)
    k(x, t, cat, h, r)
    np.testing.assert_array_equal(t, x.T)
    np.testing.assert_array_equal(cat, np.concatenate([x, np.full((4, 8), 3.0)], -1))
    np.testing.assert_array_equal(h, x.reshape(2, 16).astype(np.float16))
    np.testing.assert_array_equal(r, np.broadcast_to(x, (3, 4, 8)) + 1)


def test_profiler_reports_modelled_npu_time_of_a_frontend_kernel():
    @pypto.frontend.jit
    def k(x: pypto.Tensor([64, 128], pypto.DT_FP32), out: pypto.Tensor([64, 128], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(16, 128)
        out[:] = pypto.softmax(x, dim=-1)

    x, out = _x(64, 128), np.zeros((64, 128), np.float32)
    with pypto.Profiler() as prof:
        k(x, out)
    assert prof.kernels and all(kk.npu_time_ms > 0 for kk in prof.kernels)
    np.testing.assert_allclose(out, torch.softmax(torch.from_numpy(x), -1).numpy(), rtol=1e-5)


def test_middle_axis_broadcast_of_a_rank3_operand_is_computed():
    @pypto.frontend.jit
    def k(x: pypto.Tensor([2, 3, 16], pypto.DT_FP32), y: pypto.Tensor([2, 1, 16], pypto.DT_FP32),
          out: pypto.Tensor([2, 3, 16], pypto.DT_FP32)):
        out[:] = x + y

    x, y, out = _x(2, 3, 16), _x(2, 1, 16), np.zeros((2, 3, 16), np.float32)
    k(x, y, out)
    np.testing.assert_allclose(out, x + y, rtol=1e-6)


@pytest.mark.parametrize("shape, axes", [((2, 3, 16), (0, 1)), ((2, 3, 16), (0, 2)),
                                         ((2, 3, 16), (2, 1)), ((2, 3, 5, 16), (1, 3)),
                                         ((2, 3, 5, 16), (3, 0)), ((2, 3, 5, 16), (0, 2))])
def test_transposes_of_any_two_axes(shape, axes):
    """Leading axes on the host, the last two a pl.trans kernel, the last with a non-adjacent
    one both (it was NotAvailableError: 'needs rank-3/4 tiles')."""
    out_shape = list(shape)
    out_shape[axes[0]], out_shape[axes[1]] = shape[axes[1]], shape[axes[0]]

    @pypto.frontend.jit
    def k(x: pypto.Tensor(list(shape), pypto.DT_FP32), out: pypto.Tensor(out_shape, pypto.DT_FP32)):
        out[:] = pypto.transpose(x, *axes) * 2.0

    x, out = _x(*shape), np.zeros(out_shape, np.float32)
    k(x, out)
    np.testing.assert_array_equal(out, np.swapaxes(x, *axes) * 2)


def test_a_tensor_variable_sees_writes_to_it_and_ops_see_the_value_they_were_given():
    """CANN's multi_jit pattern: ``t = pypto.tensor(...); t[:] = e; return t`` (failed before:
    the returned variable read the tensor as it was before the write)."""
    @pypto.frontend.jit
    def k(x: pypto.Tensor([2, 16], pypto.DT_FP32), out: pypto.Tensor([2, 16], pypto.DT_FP32),
          old: pypto.Tensor([2, 16], pypto.DT_FP32)):
        t = pypto.tensor([2, 16], pypto.DT_FP32)
        t[:] = x + 1.0
        before = t * 1.0
        t[:] = t * 3.0
        out[:] = t
        old[:] = before

    x = _x(2, 16)
    out, old = np.zeros_like(x), np.zeros_like(x)
    k(x, out, old)
    np.testing.assert_allclose(out, (x + 1) * 3, rtol=1e-6)
    np.testing.assert_allclose(old, x + 1, rtol=1e-6)


def test_unrolled_loop_over_windows_is_one_launch():
    """CANN's view → op → assemble loops (the softmax example's) merge into one kernel launch
    (before: one launch per iteration)."""
    @pypto.frontend.jit
    def k(x: pypto.Tensor([8, 4, 64], pypto.DT_FP32), b: pypto.Tensor([1, 1, 64], pypto.DT_FP32),
          out: pypto.Tensor([8, 4, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 4, 64)
        for i in pypto.loop(4, name="b", idx_name="i"):
            for j in pypto.loop(2):
                view = x[i * 2:i * 2 + 2, j * 2:j * 2 + 2, :]
                pypto.assemble(pypto.softmax(view, dim=-1) + b, [i * 2, j * 2, 0], out)

    x, b = _x(8, 4, 64), _x(1, 1, 64)
    out = np.zeros_like(x)
    with pypto.Profiler() as prof:
        k(x, b, out)
    assert len(prof.kernels) == 1
    want = torch.softmax(torch.from_numpy(x), -1).numpy() + b
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


def test_a_tensor_assembled_by_a_loop_is_read_after_it():
    """The merged loop write leaves the buffer at the version its later reads pinned (before:
    it counted one version for the four iterations, and the read raised KeyError)."""
    @pypto.frontend.jit
    def k(x: pypto.Tensor([4, 16], pypto.DT_FP32), out: pypto.Tensor([4, 16], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 16)
        tmp = pypto.tensor([4, 16], pypto.DT_FP32, "tmp")
        for i in pypto.loop(4):
            pypto.assemble(pypto.exp(pypto.view(x, [1, 16], [i, 0])), [i, 0], tmp)
        out[:] = tmp * 2.0

    x, out = _x(4, 16), np.zeros((4, 16), np.float32)
    with pypto.Profiler() as prof:
        k(x, out)
    assert len(prof.kernels) == 2           # the merged loop, then tmp * 2
    np.testing.assert_allclose(out, 2 * np.exp(x), rtol=1e-6)


def test_a_loop_whose_partial_result_is_read_later_is_not_merged():
    """A value taken between iterations reads a version a merged write would never make."""
    from pypto.frontend.coalesce import coalesce
    from pypto.frontend.tracer import run as trace

    def k(x: pypto.Tensor(), out: pypto.Tensor(), part: pypto.Tensor()):
        for i in pypto.loop(4):
            out[i:i + 1, :] = x[i:i + 1, :] + 1.0
            if i == 1:
                half = out * 1.0            # out after two iterations
        part[:] = half

    specs = [(n, (4, 16), pypto.float32) for n in ("x", "out", "part")]
    writes = trace(k, specs, {}).writes
    merged = coalesce(writes)               # 0-1 and 2-3 merge, not across version 2
    assert [w.version for w in merged] == [2, 4, 1] and len(writes) == 5
    x, out, part = _x(4, 16), np.zeros((4, 16), np.float32), np.zeros((4, 16), np.float32)
    pypto.frontend.jit(k)(x, out, part)
    np.testing.assert_allclose(out, x + 1, rtol=1e-6)
    np.testing.assert_allclose(part[:2], x[:2] + 1, rtol=1e-6)
    assert not part[2:].any()


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_gather_is_torch_gather(dim):
    shape = (3, 4, 16)

    @pypto.frontend.jit
    def k(x: pypto.Tensor(shape, pypto.DT_FP32), i: pypto.Tensor(shape, pypto.DT_INT64),
          out: pypto.Tensor(shape, pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(2, 4, 8)
        out[:] = pypto.gather(x, dim, i)

    x = torch.randn(shape)
    i = torch.randint(0, shape[dim], shape)
    out = torch.empty(shape)
    k(x, i, out)
    assert torch.equal(out, torch.gather(x, dim, i))


def test_scatter_of_a_number_and_of_a_tensor():
    @pypto.frontend.jit
    def k(x: pypto.Tensor([4, 8], pypto.DT_FP32), i0: pypto.Tensor([2, 8], pypto.DT_INT32),
          i1: pypto.Tensor([2, 8], pypto.DT_INT64), v: pypto.Tensor([2, 8], pypto.DT_FP32),
          a: pypto.Tensor([4, 8], pypto.DT_FP32), b: pypto.Tensor([4, 8], pypto.DT_FP32)):
        a[:] = pypto.scatter(x, 0, i0, 0.5)
        b[:] = pypto.scatter(x, 1, i1, v)

    x, v = torch.randn(4, 8), torch.randn(2, 8)
    i0 = torch.randint(0, 4, (2, 8), dtype=torch.int32)
    i1 = torch.stack([torch.randperm(8), torch.randperm(8)])    # no repeats in a row
    a, b = torch.empty(4, 8), torch.empty(4, 8)
    k(x, i0, i1, v, a, b)
    assert torch.equal(a, torch.scatter(x, 0, i0.long(), 0.5))
    assert torch.equal(b, torch.scatter(x, 1, i1, v))


def test_a_reduction_computed_after_its_input_is_overwritten_sees_the_old_input():
    """The (rows, axis, 1) reduction rewrites its input view when it runs; that view keeps the
    version the reduction was given (before: it read the overwritten tensor)."""
    @pypto.frontend.jit
    def k(x: pypto.Tensor([4, 16, 1], pypto.DT_FP32), out: pypto.Tensor([4, 1], pypto.DT_FP32)):
        s = pypto.sum(x, dim=1)
        x[:] = pypto.full([4, 16, 1], 0.0, pypto.DT_FP32)
        out[:] = s

    x = _x(4, 16, 1)
    want = x.sum(axis=1)
    out = np.zeros((4, 1), np.float32)
    k(x, out)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    assert not x.any()


def test_cast_modes_round_as_asked():
    @pypto.frontend.jit
    def k(x: pypto.Tensor([2, 16], pypto.DT_FP32), f: pypto.Tensor([2, 16], pypto.DT_INT32),
          c: pypto.Tensor([2, 16], pypto.DT_INT32), r: pypto.Tensor([2, 16], pypto.DT_INT32)):
        f[:] = pypto.cast(x, pypto.DT_INT32, mode=pypto.CastMode.CAST_FLOOR)
        c[:] = pypto.cast(x, pypto.DT_INT32, pypto.CastMode.CAST_CEIL)
        r[:] = pypto.cast(x, pypto.DT_INT32, mode=pypto.CastMode.CAST_RINT)

    x = (_x(2, 16) * 4).round(1)
    f, c, r = (np.zeros((2, 16), np.int32) for _ in range(3))
    k(x, f, c, r)
    np.testing.assert_array_equal(f, np.floor(x))
    np.testing.assert_array_equal(c, np.ceil(x))
    np.testing.assert_array_equal(r, np.rint(x))
    @pypto.frontend.jit
    def odd(x: pypto.Tensor(), out: pypto.Tensor()):
        out.move(pypto.cast(x, pypto.DT_FP16, pypto.CastMode.CAST_ODD))

    with pytest.raises(pypto.frontend.NotAvailableError, match="CAST_ODD"):
        odd(np.zeros((2, 16), np.float32), np.zeros((2, 16), np.float16))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
@pytest.mark.parametrize("k, dim, largest", [(4, -1, True), (1, -1, False), (40, 2, True),
                                             (3, 1, False)])
def test_topk_against_a_stable_torch_sort(dtype, k, dim, largest):
    """CANN's topk: values and int32 indices, ties in index order (the few distinct values
    make ties common), any dim (moved last on the host); one sort serves both outputs."""
    shape = (3, 5, 40)
    out_shape = list(shape)
    out_shape[dim] = k
    dt = {np.float32: pypto.DT_FP32, np.float16: pypto.DT_FP16, np.int32: pypto.DT_INT32}[dtype]

    @pypto.frontend.jit
    def kern(x: pypto.Tensor(shape, dt), v: pypto.Tensor(out_shape, dt),
             i: pypto.Tensor(out_shape, pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(1, 4, 64)
        v[:], i[:] = pypto.topk(x, k, dim, largest)

    x = torch.from_numpy(RNG.integers(-6, 6, size=shape).astype(dtype))
    v, i = torch.zeros(out_shape, dtype=x.dtype), torch.zeros(out_shape, dtype=torch.int32)
    kern(x, v, i)
    want = torch.sort(x, dim=dim, descending=largest, stable=True)
    torch.testing.assert_close(v, want.values.narrow(dim, 0, k))
    torch.testing.assert_close(i, want.indices.narrow(dim, 0, k).int())


@pytest.mark.parametrize("dim, descending", [(-1, False), (-1, True), (0, True)])
def test_argsort_is_stable_along_any_dim(dim, descending):
    shape = (4, 6, 33)

    @pypto.frontend.jit
    def kern(x: pypto.Tensor(shape, pypto.DT_FP32), out: pypto.Tensor(shape, pypto.DT_INT32)):
        out[:] = pypto.argsort(x, dim, descending)

    x = torch.from_numpy(RNG.integers(-3, 3, size=shape).astype(np.float32))
    out = torch.zeros(shape, dtype=torch.int32)
    kern(x, out)
    torch.testing.assert_close(out, torch.argsort(x, dim=dim, descending=descending,
                                                  stable=True).int())


def test_topk_misuse_and_sort32_say_what_to_do():
    @pypto.frontend.jit
    def too_many(x: pypto.Tensor([2, 8], pypto.DT_FP32), v: pypto.Tensor([2, 9], pypto.DT_FP32),
                 i: pypto.Tensor([2, 9], pypto.DT_INT32)):
        v[:], i[:] = pypto.topk(x, 9)

    @pypto.frontend.jit
    def bf16(x: pypto.Tensor([2, 8], pypto.DT_BF16), out: pypto.Tensor([2, 8], pypto.DT_INT32)):
        out[:] = pypto.argsort(x)

    @pypto.frontend.jit
    def block_sort(x: pypto.Tensor([2, 32], pypto.DT_FP32), out: pypto.Tensor([2, 64], pypto.DT_FP32)):
        out[:] = pypto.sort32(x)

    with pytest.raises(ValueError, match=r"topk\(k=9\): k must be an int in 1\.\.8"):
        too_many(_x(2, 8), torch.zeros(2, 9), torch.zeros(2, 9, dtype=torch.int32))
    with pytest.raises(pypto.frontend.NotAvailableError, match="argsort of bfloat16"):
        bf16(torch.zeros(2, 8, dtype=torch.bfloat16), torch.zeros(2, 8, dtype=torch.int32))
    with pytest.raises(pypto.frontend.NotAvailableError, match="sort32"):
        block_sort(_x(2, 32), torch.zeros(2, 64))


def test_topk_values_and_indices_come_from_one_sort(monkeypatch):
    """The two outputs are two trace nodes, each pinning its own read of the operand; the
    evaluator still runs one pl.topk kernel for both (it ran two before)."""
    from pypto.frontend import sorting
    runs = []
    real = sorting.topk
    monkeypatch.setattr(sorting, "topk", lambda *a: runs.append(1) or real(*a))

    @pypto.frontend.jit
    def kern(x: pypto.Tensor([4, 64], pypto.DT_FP32), v: pypto.Tensor([4, 8], pypto.DT_FP32),
             i: pypto.Tensor([4, 8], pypto.DT_INT32)):
        v[:], i[:] = pypto.topk(x, 8)
        v[:] = v + pypto.topk(x * 2.0, 8)[0]

    x, v, i = torch.randn(4, 64), torch.zeros(4, 8), torch.zeros(4, 8, dtype=torch.int32)
    kern(x, v, i)
    assert len(runs) == 2                   # topk(x) once, topk(x * 2) once
    want = torch.topk(x, 8)
    torch.testing.assert_close(v, want.values * 3)
    torch.testing.assert_close(i, want.indices.int())
