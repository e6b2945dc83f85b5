"""Kernels that load NZ and NC1HWC0 tensors (pypto.layout.LayoutTensor) in logical
coordinates: results against numpy on the native engine and the interpreter, the errors for
bad layouts and windows, the layout in the launch key, and what the cycle model charges."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pypto
import pypto.language as pl
from pypto import layout
from pypto.backends.ascend.model.costs import gm_bursts
from pypto.backends.ascend.model.launch import model_kernel
from pypto.errors import CompilationError


@pypto.jit
def nc1hwc0_window(x, out, C: pl.constexpr, P: pl.constexpr, CB: pl.constexpr):
    """Every (P pixels, CB channels) window of image n, copied to rows of ``out``."""
    N, _, H, W = x.shape
    p0 = pl.program_id(0) * P
    n = pl.program_id(1)
    groups = (C + CB - 1) // CB
    rows = pl.num_programs(0) * P
    for g in range(groups):
        t = pl.load(x, offsets=(n, g * CB, 0, p0), shape=(P, CB))
        pl.store(out, offsets=((n * groups + g) * rows + p0, 0), value=t)


@pypto.jit
def nz_matmul(a, b, c, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    M, K = a.shape
    i = pl.program_id(0)
    j = pl.program_id(1)
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in range(0, K, BK):
        acc = pl.matmul(pl.load(a, offsets=(i * BM, k), shape=(BM, BK)),
                        pl.load(b, offsets=(k, j * BN), shape=(BK, BN)), acc)
    pl.store(c, offsets=(i * BM, j * BN), value=acc)


@pypto.jit
def conv1x1(x, w, y, P: pl.constexpr, O: pl.constexpr):
    """A 1x1 convolution: (pixels, channel group) windows as the cube's left operand (L1)."""
    N, C, H, W = x.shape
    p0 = pl.program_id(0) * P
    n = pl.program_id(1)
    acc = pl.zeros((P, O), dtype=pl.float32)
    for c in range(0, C, 16):
        acc = pl.matmul(pl.load(x, offsets=(n, c, 0, p0), shape=(P, 16)),
                        pl.load(w, offsets=(c, 0), shape=(16, O)), acc)
    pl.store(y, offsets=(n * H * W + p0, 0), value=acc)


@pypto.jit
def nz_vector_load(a, out):
    """Refused on the chip: NZ fractals cannot be loaded into a row-major UB tile."""
    pl.store(out, offsets=(0, 0), value=pl.load(a, offsets=(0, 0), shape=(32, 32)) * 2)


@pypto.jit
def nz_store(a, out):
    pl.store(a, offsets=(0, 0), value=pl.load(out, offsets=(0, 0), shape=(16, 16)))


def _nc1hwc0_reference(x, P, CB, tiles):
    """What nc1hwc0_window writes, from the logical NCHW array (zeros outside it)."""
    n, c, h, w = x.shape
    groups = -(-c // CB)
    rows = tiles * P
    out = np.zeros((n * groups * rows, CB), x.dtype)
    pixels = x.reshape(n, c, h * w)
    for i in range(n):
        for g in range(groups):
            chans = pixels[i, g * CB:(g + 1) * CB].T        # (HW, <= CB)
            base = (i * groups + g) * rows
            out[base:base + h * w, :chans.shape[1]] = chans
    return out


ENGINES = ["native", "interpreter"]


def _launch(engine, monkeypatch, kernel, grid, *args, **kwargs):
    if engine == "interpreter":
        monkeypatch.setenv("PYPTO_INTERPRET", "1")
    kernel[grid](*args, **kwargs)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype,cb", [(np.float16, 16), (np.float16, 8), (np.float32, 8)])
def test_nc1hwc0_windows_equal_numpy(engine, dtype, cb, monkeypatch):
    """Pixels wrap from one image row to the next, the last tile runs past H*W (padding),
    and C = 20 leaves a partly filled last channel group (its padding channels read 0)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 20, 5, 7)).astype(dtype)
    P = 16
    tiles = -(-35 // P)
    out = np.full((2 * -(-20 // cb) * tiles * P, cb), np.nan, dtype)
    _launch(engine, monkeypatch, nc1hwc0_window, (tiles, 2), layout.nc1hwc0(x), out,
            C=20, P=P, CB=cb)
    np.testing.assert_array_equal(out, _nc1hwc0_reference(x, P, cb, tiles))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_nz_matmul_equals_numpy(engine, dtype, monkeypatch):
    """Tails in every dimension: the NZ tensors' padding (zeros) fills the last fractals."""
    rng = np.random.default_rng(2)
    m, k, n = 40, 24 if dtype == np.float32 else 40, 40
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    c = np.full((m, n), np.nan, np.float32)
    _launch(engine, monkeypatch, nz_matmul, (3, 3), layout.nz(a), layout.nz(b), c,
            BM=16, BN=16, BK=16)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4)


def test_nz_and_nd_operands_mix():
    """One operand NZ, the other ND: each load reads its own layout."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((32, 32)).astype(np.float16)
    b = rng.standard_normal((32, 32)).astype(np.float16)
    c = np.zeros((32, 32), np.float32)
    nz_matmul[(2, 2)](layout.nz(a), b, c, BM=16, BN=16, BK=16)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3,
                               atol=1e-3)


def test_layout_is_part_of_the_launch_key():
    """The same physical array as a plain ND tensor and as an NZ tensor: two kernels, each
    right, and the warm path keeps them apart."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((32, 32)).astype(np.float16)
    eye = np.eye(32, dtype=np.float16)
    an = layout.nz(a)
    c1, c2 = np.zeros((32, 32), np.float32), np.zeros((32, 32), np.float32)
    for _ in range(2):                                     # the second round is warm
        nz_matmul[(2, 2)](an, eye, c1, BM=16, BN=16, BK=16)
        nz_matmul[(2, 2)](a, eye, c2, BM=16, BN=16, BK=16)
        np.testing.assert_array_equal(c1, a.astype(np.float32))
        np.testing.assert_array_equal(c2, a.astype(np.float32))


def test_as_layout_checks_the_physical_array():
    x = np.zeros((1, 2, 3, 4, 16), np.float16)
    with pytest.raises(ValueError, match=r"held in an array of shape \(1, 2, 3, 4, 16\), "
                                         r"got \(1, 2, 3, 4, 8\).*to_nc1hwc0"):
        layout.as_layout(x[..., :8].copy(), "NC1HWC0", (1, 20, 3, 4))
    with pytest.raises(ValueError, match="C-contiguous"):
        layout.as_layout(np.zeros((1, 2, 4, 3, 16), np.float16).transpose(0, 1, 3, 2, 4),
                         "NC1HWC0", (1, 20, 3, 4))
    with pytest.raises(ValueError, match="must be one of NZ, NC1HWC0"):
        layout.as_layout(x, "NHWC", (1, 20, 3, 4))
    with pytest.raises(ValueError, match=r"logical shape \(M, K\)"):
        layout.as_layout(x, "NZ", (1, 20, 3))
    t = layout.as_layout(x, "nc1hwc0", (1, 20, 3, 4))
    assert t.shape == (1, 20, 3, 4) and t._data.shape == (1, 2, 1, 12, 16)
    assert np.shares_memory(t._data, x)


def test_bad_windows_are_compile_errors():
    x = layout.nc1hwc0(np.zeros((1, 32, 4, 4), np.float16))
    out = np.zeros((64, 32), np.float16)
    with pytest.raises(CompilationError, match="at most C0 = 16 channels"):
        nc1hwc0_window[(1, 1)](x, out, C=32, P=16, CB=32)
    a = layout.nz(np.zeros((32, 32), np.float16))
    c = np.zeros((32, 32), np.float32)
    with pytest.raises(CompilationError, match=r"whole 16 x 16 fractals.*\(16, 8\)"):
        nz_matmul[(1, 1)](a, a, c, BM=16, BN=16, BK=8)
    with pytest.raises(CompilationError, match="kernels store into ND tensors only"):
        nz_store(a, np.zeros((16, 16), np.float16))
    with pytest.raises(CompilationError, match="NZ tensor into a vector"):
        nz_vector_load(a, np.zeros((32, 32), np.float16))


def test_misaligned_nz_offset_is_an_error_in_the_interpreter(monkeypatch):
    """An NZ transfer moves whole fractals; the interpreter (the definition) refuses a
    window that starts inside one, and compiled code reads the chip's (unchecked) window."""
    monkeypatch.setenv("PYPTO_INTERPRET", "1")

    @pypto.jit
    def shifted(a, b, c):
        acc = pl.matmul(pl.load(a, offsets=(8, 0), shape=(16, 16)),
                        pl.load(b, offsets=(0, 0), shape=(16, 16)))
        pl.store(c, offsets=(0, 0), value=acc)

    x = np.random.default_rng(6).standard_normal((32, 16)).astype(np.float16)
    a, eye = layout.nz(x), np.eye(16, dtype=np.float16)
    c = np.zeros((16, 16), np.float32)
    with pytest.raises(IndexError, match="row offset must be a multiple of 16"):
        shifted[(1,)](a, eye, c)
    # compiled code reads what the chip's partition (offset / 16 fractals) reads: rows 0-15
    monkeypatch.delenv("PYPTO_INTERPRET")
    shifted[(1,)](a, eye, c)
    np.testing.assert_array_equal(c, x[:16].astype(np.float32))


def test_bursts_follow_the_layout():
    class ND:
        layout = "ND"

    class NZ:
        layout = "NZ"

    class NC:
        layout = "NC1HWC0"
    # ND: one run per row of a window narrower than the tensor, one run when rows are whole
    assert gm_bursts(ND, (64, 256), (256, 1), (32, 64), 2) == (32, 128)
    assert gm_bursts(ND, (64, 64), (64, 1), (32, 64), 2) == (1, 32 * 64 * 2)
    assert gm_bursts(ND, (64, 64), (1, 64), (32, 64), 2) == (32 * 64, 2)   # transposed view
    # NZ (K1, M1, 16, C0): one run per column of fractals, one when every row is taken
    assert gm_bursts(NZ, (4, 8, 16, 16), None, (32, 64), 2) == (4, 32 * 32)
    assert gm_bursts(NZ, (4, 2, 16, 16), None, (32, 64), 2) == (1, 32 * 64 * 2)
    # NC1HWC0: the whole channel group is one run of pixels x 32 bytes
    assert gm_bursts(NC, (2, 4, 1, 64, 16), None, (64, 16), 2) == (1, 64 * 32)
    assert gm_bursts(NC, (2, 4, 1, 64, 16), None, (64, 8), 2) == (64, 16)


@pytest.mark.heavy
def test_cycle_model_charges_the_nd_to_nz_conversion_more_than_nz_copies():
    """The same matmul, the same transfers and bytes: ND operands are converted to NZ by the
    DMA on their way into L1 (88 bytes a cycle, the board GEMM's rate: CostModel.dma), NZ ones
    are plain copies (134, measured); a GM run costs nothing by itself (TLOAD f32 128x127,
    128 runs of 508 B, measures 773 cycles against 776 for one 64 KiB run)."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((128, 128)).astype(np.float16)
    b = rng.standard_normal((128, 128)).astype(np.float16)
    c = np.zeros((128, 128), np.float32)
    nd = model_kernel(nz_matmul, (2, 2), a, b, c, BM=64, BN=64, BK=32)
    nz = model_kernel(nz_matmul, (2, 2), layout.nz(a), layout.nz(b), c, BM=64, BN=64, BK=32)
    moved = [sum(r.bytes for blk in m.blocks for r in blk.records if r.name == "tload")
             for m in (nd, nz)]
    assert moved[0] == moved[1]
    assert nz.pipe_busy["MTE2"] < 0.9 * nd.pipe_busy["MTE2"]
    assert nz.cycles < nd.cycles


def test_torch_tensors_in_a_layout():
    """pypto.layout.nz of a torch CPU tensor: the kernel reads the converted tensor's memory."""
    torch = pytest.importorskip("torch")
    a = torch.randn(32, 32, dtype=torch.float16)
    b = torch.randn(32, 32, dtype=torch.float16)
    c = torch.zeros(32, 32, dtype=torch.float32)
    an = layout.nz(a)
    assert isinstance(an.data, np.ndarray)          # a view of the converted torch tensor
    nz_matmul[(2, 2)](an, layout.nz(b), c, BM=16, BN=16, BK=16)
    ref = a.float() @ b.float()
    assert torch.allclose(c, ref, rtol=1e-3, atol=1e-3)


@pypto.jit
def nc1hwc0_at(x, out, n, c, h, w, P: pl.constexpr, CB: pl.constexpr):
    pl.store(out, offsets=(0, 0), value=pl.load(x, offsets=(n, c, h, w), shape=(P, CB),
                                                padding=-1))


def _window_reference(x, n, c, h, w, P, CB, c0):
    """pypto.layout.load_window's NC1HWC0 rule from the logical array: padding -1 outside."""
    N, C, H, W = x.shape
    padded = np.zeros((N, -(-C // c0) * c0, H * W), x.dtype)
    padded[:, :C] = x.reshape(N, C, H * W)
    out = np.full((P, CB), -1, x.dtype)
    group = c // c0
    for i in range(P):
        q = h * W + w + i
        for j in range(CB):
            if 0 <= n < N and 0 <= group < padded.shape[1] // c0 and 0 <= q < H * W \
                    and c - group * c0 + j < c0:
                out[i, j] = padded[n, c + j, q]
    return out


@pytest.mark.heavy
@settings(max_examples=12, deadline=None)
@given(n=st.integers(-1, 2), c=st.integers(-3, 40), h=st.integers(-2, 5), w=st.integers(-9, 9))
def test_nc1hwc0_windows_at_any_offsets(n, c, h, w):
    """Runtime offsets anywhere, inside or past the tensor (one compiled kernel): the native
    code, the interpreter and the rule written out in numpy agree."""
    x = np.arange(2 * 20 * 5 * 7, dtype=np.float32).reshape(2, 20, 5, 7)
    xl = layout.nc1hwc0(x)
    want = _window_reference(x, n, c, h, w, 16, 8, 8)
    got = np.zeros((16, 8), np.float32)
    nc1hwc0_at[(1,)](xl, got, n, c, h, w, P=16, CB=8)
    np.testing.assert_array_equal(got, want)
    where, values = layout.load_window("NC1HWC0", xl._data, xl.shape, (n, c, h, w), (16, 8))
    interpreted = np.full((16, 8), -1, np.float32)
    interpreted[where] = values
    np.testing.assert_array_equal(interpreted, want)


@pytest.mark.parametrize("n,c,h,w", [(-1, 0, 0, 0), (0, -3, 0, 0), (1, -1, -2, -9),
                                     (2, 0, 0, 0), (1, 9, 2, 3), (0, 17, 1, -2)])
def test_nc1hwc0_windows_outside_the_tensor_on_the_pto_isa_engine(n, c, h, w):
    """An image or channel group before the tensor's start reads nothing on pto-isa's
    simulator too: the printed view once kept a negative image offset and read before the
    tensor. Its image and group are now planes, clamped into the tensor with 0 rows when
    outside, which also gives the view the static leading 1s A2/A3's ND2NZ TLOAD needs."""
    from tests.engines.tools import TOOLS, MISSING
    if TOOLS is None:
        pytest.skip(f"pto-isa engine unavailable: {MISSING}")
    x = np.arange(2 * 20 * 5 * 7, dtype=np.float32).reshape(2, 20, 5, 7)
    got = np.zeros((16, 8), np.float32)
    pypto.jit(nc1hwc0_at.fn, engine="pto-isa")[(1,)](layout.nc1hwc0(x), got, n, c, h, w,
                                                     P=16, CB=8)
    np.testing.assert_array_equal(got, _window_reference(x, n, c, h, w, 16, 8, 8))


@pypto.jit
def nz_at(a, eye, out, r, k):
    """The (16, 8) float32 NZ window at (r, k), through the cube (times the identity)."""
    pl.store(out, offsets=(0, 0), value=pl.matmul(pl.load(a, offsets=(r, k), shape=(16, 8)),
                                                  pl.load(eye, offsets=(0, 0), shape=(8, 8))))


@pytest.mark.heavy
@settings(max_examples=10, deadline=None)
@given(ri=st.integers(-2, 4), ki=st.integers(-2, 4))
def test_nz_windows_at_any_aligned_offsets(ri, ki):
    """Fractal-aligned runtime offsets inside or past a (40, 20) float32 NZ tensor: the
    rows and columns inside its physical (48, 24) array are read (the padding as the zeros
    to_nz wrote), the rest is padding."""
    x = np.arange(40 * 20, dtype=np.float32).reshape(40, 20) + 1
    padded = np.zeros((48, 24), np.float32)
    padded[:40, :20] = x
    r, k = 16 * ri, 8 * ki
    want = np.zeros((16, 8), np.float32)
    for i in range(16):
        for j in range(8):
            if 0 <= r + i < 48 and 0 <= k + j < 24:
                want[i, j] = padded[r + i, k + j]
    got = np.full((16, 8), np.nan, np.float32)
    nz_at[(1,)](layout.nz(x), np.eye(8, dtype=np.float32), got, r, k)
    np.testing.assert_array_equal(got, want)


def test_sanitizer_reports_layout_loads_past_the_logical_extent():
    """A window past C (the zero padding channels of the last group) is out of range in the
    tensor's logical terms; a window inside is not."""
    from pypto.backends.interpreter.sanitizer import SanitizerWarning
    x = layout.nc1hwc0(np.ones((1, 20, 4, 4), np.float32))      # groups of 8: 0-7, 8-15, 16-23
    out = np.zeros((16, 8), np.float32)
    watched = pypto.jit(nc1hwc0_at.fn, sanitize=True)
    with pytest.warns(SanitizerWarning, match=r"reaches outside .* NC1HWC0 \(1, 20, 4, 4\)"):
        watched[(1,)](x, out, 0, 16, 0, 0, P=16, CB=8)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", SanitizerWarning)
        watched[(1,)](x, out, 0, 8, 0, 0, P=16, CB=8)
    np.testing.assert_array_equal(out, np.ones((16, 8), np.float32))


@pytest.mark.parametrize("engine", ENGINES)
def test_nc1hwc0_windows_feed_the_cube(engine, monkeypatch):
    """NC1HWC0 windows loaded into L1 (ND -> NZ on the way) as a matmul's left operand: a
    1x1 convolution, against numpy's einsum; 40 channels leave 8 zero padding channels."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 40, 4, 8)).astype(np.float16)
    w = np.zeros((48, 32), np.float16)
    w[:40] = rng.standard_normal((40, 32))
    y = np.full((2 * 32, 32), np.nan, np.float32)
    _launch(engine, monkeypatch, conv1x1, (1, 2), layout.nc1hwc0(x), w, y, P=32, O=32)
    ref = np.einsum("nchw,co->nhwo", x.astype(np.float64), w[:40].astype(np.float64))
    np.testing.assert_allclose(y, ref.reshape(-1, 32), rtol=1e-4, atol=1e-4)
