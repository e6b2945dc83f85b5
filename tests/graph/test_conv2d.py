"""pypto.conv2d (graph/convolution.py) against torch.nn.functional.conv2d, or a numpy reference
without torch: float16 (fp32 accumulation) and float32, hypothesis-drawn shapes, strides,
paddings, dilations and groups; the graph form with NC1HWC0 / FRACTAL_Z placeholders; the
profiler's view of the conversion kernels; clear errors for bad arguments."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pypto
from pypto import layout

try:
    import torch
except ImportError:          # the numpy reference below is used instead
    torch = None


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def numpy_conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """The definition, in float64: y[n, o] = sum over taps of w[o, i, kh, kw] * x_padded."""
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, c, h, wd = x.shape
    cout, cin_g, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((n, cout, oh, ow))
    cout_g = cout // groups
    for g in range(groups):
        xs = xp[:, g * cin_g:(g + 1) * cin_g]
        for i in range(kh):
            for j in range(kw):
                win = xs[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                         j * dw:j * dw + sw * (ow - 1) + 1:sw]
                y[:, g * cout_g:(g + 1) * cout_g] += np.einsum(
                    "ncij,oc->noij", win, w[g * cout_g:(g + 1) * cout_g, :, i, j])
    if b is not None:
        y += b.astype(np.float64)[None, :, None, None]
    return y


def reference(x, w, b=None, **kw):
    """float64 result: torch's conv2d when torch is installed, else numpy_conv2d."""
    if torch is None:
        return numpy_conv2d(x, w, b, **kw)
    t = lambda a: None if a is None else torch.from_numpy(a.astype(np.float64))  # noqa: E731
    return torch.nn.functional.conv2d(t(x), t(w), t(b), **kw).numpy()


def assert_close(got, x, w, b=None, **kw):
    """|got - exact| <= (K + 2) 2^-24 (|x| * |w| + |b|) (+ half an fp16 ulp of the result
    for float16 outputs): fp32 accumulation of K = Cin/groups * KH * KW products (fp16
    products are exact in fp32), then the output's rounding."""
    exact = reference(x, w, b, **kw)
    scale = reference(np.abs(x), np.abs(w), None if b is None else np.abs(b), **kw)
    k = w.shape[1] * w.shape[2] * w.shape[3]
    tol = (k + 2) * 2.0 ** -24 * scale + 1e-30
    if got.dtype == np.float16:
        tol += 2.0 ** -11 * np.abs(exact) + 2.0 ** -25
    assert got.shape == exact.shape
    err = np.abs(got.astype(np.float64) - exact)
    assert (err <= tol).all(), f"max error {err.max()} (tolerance there {tol.flat[err.argmax()]})"


def _data(shape, dtype, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@st.composite
def conv_cases(draw, max_side=9):
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    cin = groups * draw(st.integers(1, 12))
    cout = groups * draw(st.integers(1, 12))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    h = draw(st.integers(max(1, dilation[0] * (kh - 1) + 1 - 2 * padding[0]), max_side))
    w = draw(st.integers(max(1, dilation[1] * (kw - 1) + 1 - 2 * padding[1]), max_side))
    return dict(n=draw(st.integers(1, 2)), cin=cin, cout=cout, h=h, w=w, k=(kh, kw),
                stride=stride, padding=padding, dilation=dilation, groups=groups,
                bias=draw(st.booleans()), dtype=draw(st.sampled_from(["float16", "float32"])))


def _check_case(case, seed=0):
    dtype = np.dtype(case["dtype"])
    x = _data((case["n"], case["cin"], case["h"], case["w"]), dtype, seed)
    wt = _data((case["cout"], case["cin"] // case["groups"], *case["k"]), dtype, seed + 1)
    b = _data((case["cout"],), dtype, seed + 2) if case["bias"] else None
    kw = {k: case[k] for k in ("stride", "padding", "dilation", "groups")}
    got = pypto.conv2d(x, wt, b, **kw)
    assert got.dtype == dtype
    assert_close(got, x, wt, b, **kw)


@settings(max_examples=4, deadline=None, derandomize=True)
@given(case=conv_cases())
def test_conv2d_matches_the_reference(case):
    _check_case(case)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(case=conv_cases(max_side=20))
def test_conv2d_matches_the_reference_sweep(case):
    _check_case(case)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_conv2d_strided_padded_grouped_with_bias(dtype):
    _check_case(dict(n=2, cin=6, cout=9, h=9, w=8, k=(3, 3), stride=2, padding=1, dilation=1,
                     groups=3, bias=True, dtype=dtype))


def test_graph_nc1hwc0_and_fractal_z_placeholders():
    """The chip's layouts in and out: no conversion kernel at all for a float16 stride-1
    convolution without padding (the FRACTAL_Z weight is the cube's operand as it lies)."""
    x, wt = _data((2, 20, 7, 6), np.float16, 3), _data((24, 20, 3, 3), np.float16, 4)
    graph = pypto.TensorGraph(name="conv_layouts")
    xin = graph.placeholder(layout.to_nc1hwc0(x).shape, pypto.float16, layout="NC1HWC0")
    win = graph.placeholder(layout.to_fractal_z(wt).shape, pypto.float16, layout="FRACTAL_Z")
    y = pypto.conv2d(xin, win, out_channels=24)
    assert y.layout == "NC1HWC0" and y.shape == (2, 2, 5, 4, 16)
    module = pypto.compile(graph)
    assert len(module.kernels) == 1
    out = module.run({"xin": layout.to_nc1hwc0(x), "win": layout.to_fractal_z(wt)}).numpy()
    assert_close(layout.from_nc1hwc0(out, 24), x, wt)
    assert not out[:, 1, :, :, 8:].any()         # the padding channels 24..31 are zero
    assert "implicit GEMM" in module.tile_graph_ir


def test_graph_nchw_input_and_output_profiled():
    """NCHW in, OIHW weights, NCHW out: each conversion is a kernel launch of its own, with
    its modelled NPU time in the profile."""
    x, wt = _data((1, 5, 8, 8), np.float32, 5), _data((7, 5, 3, 3), np.float32, 6)
    graph = pypto.TensorGraph(name="conv_nchw")
    xin = graph.placeholder(x.shape, pypto.float32)
    win = graph.placeholder(wt.shape, pypto.float32)
    y = pypto.conv2d(xin, win, padding=1, output_layout="NCHW", name="c1")
    assert y.shape == (1, 7, 8, 8)
    module = pypto.compile(graph)
    with pypto.Profiler() as prof:
        out = module.run({"xin": x, "win": wt}).numpy()
    assert_close(out, x, wt, padding=1)
    names = [k.name for k in prof.kernels]
    assert names == ["conv_nchw_c1_input", "conv_nchw_c1_weight", "conv_nchw_c1",
                     "conv_nchw_c1_nchw"], names
    assert all(k.npu_time_ms > 0 for k in prof.kernels)


def test_direct_call_on_torch_and_nc1hwc0_arrays():
    if torch is None:
        pytest.skip("torch is not installed")
    x = torch.randn(1, 4, 6, 6, dtype=torch.float16)
    wt = torch.randn(8, 4, 1, 1, dtype=torch.float16)
    y = pypto.conv2d(x, wt, stride=(1, 2))
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float16
    assert_close(y.numpy(), x.numpy(), wt.numpy(), stride=(1, 2))
    y5 = pypto.conv2d(layout.to_nc1hwc0(x.numpy()), wt.numpy(), stride=(1, 2))
    assert y5.shape == (1, 1, 6, 3, 16)
    np.testing.assert_array_equal(layout.from_nc1hwc0(y5, 8), y.numpy())


def _graph(x_shape=(1, 16, 8, 8), dtype=pypto.float16, x_layout=None):
    g = pypto.TensorGraph(name="bad")
    return g, g.placeholder(x_shape, dtype, name="x", layout=x_layout)


def test_bad_arguments_name_the_argument():
    g, x = _graph()
    w = g.placeholder((8, 16, 3, 3), pypto.float16, name="w")
    with pytest.raises(ValueError, match=r"conv2d\(groups=3\).*16 channels"):
        pypto.conv2d(x, g.placeholder((9, 5, 3, 3), pypto.float16), groups=3)
    with pytest.raises(ValueError, match=r"conv2d\(groups=2\) must divide the 9 output"):
        pypto.conv2d(x, g.placeholder((9, 8, 3, 3), pypto.float16), groups=2)
    with pytest.raises(ValueError, match=r"spans more than the padded input 8x8"):
        pypto.conv2d(x, g.placeholder((8, 16, 9, 9), pypto.float16))
    with pytest.raises(ValueError, match=r"spans more than the padded input 10x10"):
        pypto.conv2d(x, w, padding=1, dilation=5)
    with pytest.raises(ValueError, match=r"conv2d\(stride=0\) must be a positive int"):
        pypto.conv2d(x, w, stride=0)
    with pytest.raises(ValueError, match=r"conv2d\(padding=\(1, -1\)\) must be a non-neg"):
        pypto.conv2d(x, w, padding=(1, -1))
    with pytest.raises(TypeError, match=r"conv2d\(weight=...\) must have the input's dtype"):
        pypto.conv2d(x, g.placeholder((8, 16, 3, 3), pypto.float32))
    with pytest.raises(ValueError, match=r"conv2d\(bias=...\) must be float16\[8\]"):
        pypto.conv2d(x, w, g.placeholder((7,), pypto.float16))
    with pytest.raises(ValueError, match=r"output_layout='NHWC'"):
        pypto.conv2d(x, w, output_layout="NHWC")
    with pytest.raises(TypeError, match=r"conv2d\(weight=...\) must be a graph tensor"):
        pypto.conv2d(x, np.zeros((8, 16, 3, 3), np.float16))


def test_bad_layouts_ranks_and_dtypes():
    g, x = _graph((1, 2, 8, 8, 16), x_layout="NC1HWC0")
    with pytest.raises(ValueError, match=r"C1\*KH\*KW = 2\*k"):
        pypto.conv2d(x, g.placeholder((9, 1, 16, 16), pypto.float16, layout="FRACTAL_Z"))
    with pytest.raises(ValueError, match=r"not a square kernel; pass kernel_size"):
        pypto.conv2d(x, g.placeholder((12, 1, 16, 16), pypto.float16, layout="FRACTAL_Z"))
    fz = g.placeholder((12, 1, 16, 16), pypto.float16, layout="FRACTAL_Z", name="fz")
    assert pypto.conv2d(x, fz, kernel_size=(2, 3)).shape == (1, 1, 7, 6, 16)
    with pytest.raises(ValueError, match=r"groups=2\) needs an OIHW weight"):
        pypto.conv2d(x, fz, kernel_size=(2, 3), groups=2)
    with pytest.raises(ValueError, match=r"do not fit the input's C1 = 2"):
        pypto.conv2d(x, g.placeholder((4, 40, 1, 1), pypto.float16))
    g2, x2 = _graph((1, 16, 8), x_layout=None)
    with pytest.raises(ValueError, match=r"conv2d\(input=...\) takes an NC1HWC0 tensor"):
        pypto.conv2d(x2, g2.placeholder((4, 16, 1, 1), pypto.float16))
    g3, x3 = _graph((1, 16, 8, 8), dtype=pypto.int32)
    with pytest.raises(TypeError, match=r"conv2d\(input=...\) must be float16 or float32"):
        pypto.conv2d(x3, g3.placeholder((4, 16, 1, 1), pypto.int32))
    with pytest.raises(ValueError, match=r"an array input is NCHW \(rank 4\)"):
        pypto.conv2d(np.zeros((3, 3), np.float32), np.zeros((1, 1, 1, 1), np.float32))
    g4, x4 = _graph((1, 2, 8, 8, 8), x_layout="NC1HWC0")
    with pytest.raises(ValueError, match=r"NC1HWC0 float16 tensor has C0 = 16"):
        pypto.conv2d(x4, g4.placeholder((4, 16, 1, 1), pypto.float16))


def test_numpy_reference_agrees_with_torch():
    """The fallback reference is itself checked, where torch is there to check it."""
    if torch is None:
        pytest.skip("torch is not installed")
    x, w, b = _data((2, 6, 7, 9), np.float64, 7), _data((4, 3, 2, 3), np.float64, 8), \
        _data((4,), np.float64, 9)
    kw = dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2)
    np.testing.assert_allclose(numpy_conv2d(x, w, b, **kw), reference(x, w, b, **kw),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.slow
def test_pto_isa_engine_agrees_with_native(monkeypatch):
    """float16 (bias, stride, padding, groups) on pto-isa's CPU simulator: within one fp16 ulp
    (pto-isa's matmul adds the fp32 products in another order, which can move the final
    rounding), and both within the accuracy bound. (float32 is refused by pto-isa's headers:
    its 8-column cube tiles are not whole fractals.)"""
    from tests.engines.tools import TOOLS
    if not TOOLS:
        pytest.skip("the pto-isa engine's tools (ptoas, clang++-19, pto-isa) are not installed")
    import pypto.graph.convolution as convolution
    x, wt, b = _data((2, 6, 7, 32), np.float16, 10), _data((6, 3, 3, 3), np.float16, 11), \
        _data((6,), np.float16, 12)
    results = []
    for engine in ("native", "pto-isa"):
        monkeypatch.setenv("PYPTO_ENGINE", engine)
        convolution._MODULES.clear()
        results.append(pypto.conv2d(x, wt, b, stride=(2, 1), padding=1, groups=2))
    np.testing.assert_array_max_ulp(results[0], results[1], maxulp=1)
    for r in results:
        assert_close(r, x, wt, b, stride=(2, 1), padding=1, groups=2)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_reference_interpreter_agrees_and_every_window_is_inside(dtype, monkeypatch):
    """Under PYPTO_INTERPRET=1 every kernel runs in the reference interpreter, which checks
    each pl.load(padding=None) promise (the conv kernel's windows and weight blocks)."""
    monkeypatch.setenv("PYPTO_INTERPRET", "1")
    _check_case(dict(n=2, cin=6, cout=10, h=11, w=9, k=(3, 2), stride=(2, 1), padding=(1, 2),
                     dilation=(1, 2), groups=2, bias=True, dtype=dtype), seed=5)
