"""``pypto.conv2d``: a 2-D convolution as graph nodes, or a direct call on arrays.

On graph tensors it adds up to four kernel nodes (``kernel_node.py``; sources in
``conv_kernels.py``): the feature map's conversion to a zero-padded NC1HWC0 (only when the
input is NCHW, padded or its width not a multiple of the stride), the weights' conversion
(only for OIHW weights, float32, or groups > 1), the implicit GEMM on the cube, and, with
``output_layout="NCHW"``, the conversion back. Each is its own kernel launch, so the profiler
shows what each conversion costs. The result is NC1HWC0 ``(N, ceil(Cout/C0), OH, OW, C0)``
by default (``pypto.layout.from_nc1hwc0(y, Cout)`` gives NCHW on the host).

Groups are computed as one dense convolution with a block-diagonal weight (exact, but groups
times the multiply-adds).

On arrays (numpy or torch; NCHW or NC1HWC0 input, OIHW weight) it builds that graph once per
shape, dtype and parameters (cached), runs it and returns an array of the input's kind:
NCHW for an NCHW input, NC1HWC0 for an NC1HWC0 one.
"""
from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np

from ..language import dtypes as dt
from ..layout import as_array, c0_for
from . import conv_kernels as ck
from .graph import GraphTensor, TensorGraph
from .kernel_node import add_node
from .module import compile as compile_graph

DTYPES = (dt.float16, dt.float32)
CUBE_CORES = 24         # 910B's AI Cube and AI Vector cores (target.py): the blocks of the
VECTOR_CORES = 48       # persistent kernels, and the blocking choice
OUTPUT_LAYOUTS = ("NC1HWC0", "NCHW")


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, *,  # noqa: A002
           kernel_size=None, out_channels=None, output_layout="NC1HWC0", name=None):
    """``torch.nn.functional.conv2d``'s arguments. ``input``: an NC1HWC0 graph tensor (or
    NCHW: 4-D, layout ND/NCHW); ``weight``: FRACTAL_Z (``kernel_size=(kh, kw)`` needed unless
    the kernel is square; ``out_channels`` to drop padding channels, default ``N1 * 16``) or
    OIHW ``(Cout, Cin/groups, KH, KW)``; ``bias``: ``(Cout,)``. On arrays: see the module."""
    if isinstance(input, GraphTensor):
        return _graph_conv(input, weight, bias, stride, padding, dilation, groups,
                           kernel_size, out_channels, output_layout, name)
    return _direct(input, weight, bias, stride, padding, dilation, groups)


# -- checking -------------------------------------------------------------------------------------

def _pair(value, what: str, low: int) -> tuple:
    items = value if isinstance(value, (tuple, list)) else (value, value)
    if len(items) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) and v >= low
                                  for v in items):
        bound = "non-negative" if low == 0 else "positive"
        raise ValueError(f"conv2d({what}={value!r}) must be a {bound} int or a pair of them")
    return int(items[0]), int(items[1])


def _check_tensor(t, what: str, graph) -> GraphTensor:
    if not isinstance(t, GraphTensor):
        raise TypeError(f"conv2d({what}=...) must be a graph tensor like input (a "
                        f"placeholder or node output), got {type(t).__name__}")
    if t.graph is not graph:
        raise ValueError(f"conv2d({what}=...): {t.name!r} belongs to graph {t.graph.name!r}, "
                         f"input to {graph.name!r}")
    return t


def _input_dims(x, c0) -> tuple:
    """(N, C or None, C1, H, W, nchw?) of the feature map."""
    if x.layout == "NC1HWC0":
        n, c1, h, w, xc0 = x.shape
        if xc0 != c0:
            raise ValueError(f"conv2d(input=...): an NC1HWC0 {x.dtype} tensor has C0 = {c0}, "
                             f"got shape {x.shape}")
        return n, None, c1, h, w, False
    if x.layout in ("ND", "NCHW") and x.ndim == 4:
        n, c, h, w = x.shape
        return n, c, math.ceil(c / c0), h, w, True
    raise ValueError(f"conv2d(input=...) takes an NC1HWC0 tensor (layout='NC1HWC0', rank 5) "
                     f"or an NCHW one (rank 4), got layout {x.layout!r} with shape {x.shape}")


def _weight_dims(wt, c1, c0, groups, kernel_size, out_channels) -> tuple:
    """(Cout, Cin/groups or None, KH, KW, fractal_z?)."""
    if wt.layout == "FRACTAL_Z":
        rows, n1, n0, wc0 = wt.shape
        if groups != 1:
            raise ValueError(f"conv2d(groups={groups}) needs an OIHW weight (Cout, Cin/groups, "
                             "KH, KW); a FRACTAL_Z weight is a dense (groups=1) one")
        if wc0 != c0 or n0 != 16 or rows % c1:
            raise ValueError(f"conv2d(weight=...): a FRACTAL_Z weight for {c1} input channel "
                             f"block(s) of {c0} is (C1*KH*KW = {c1}*k, N1, 16, {c0}), got "
                             f"{wt.shape}")
        kh, kw = _kernel_size(rows // c1, kernel_size)
        cout = n1 * 16 if out_channels is None else out_channels
        if not isinstance(cout, int) or not 0 < cout <= n1 * 16:
            raise ValueError(f"conv2d(out_channels={out_channels!r}) must be an int in 1.."
                             f"{n1 * 16} for a FRACTAL_Z weight of {n1} block(s) of 16")
        return cout, None, kh, kw, True
    if wt.layout in ("ND", "NCHW") and wt.ndim == 4:
        cout, cin_g, kh, kw = wt.shape
        return cout, cin_g, kh, kw, False
    raise ValueError(f"conv2d(weight=...) takes a FRACTAL_Z weight (layout='FRACTAL_Z') or an "
                     f"OIHW one (rank 4), got layout {wt.layout!r} with shape {wt.shape}")


def _kernel_size(taps: int, kernel_size) -> tuple:
    if kernel_size is None:
        k = math.isqrt(taps)
        if k * k != taps:
            raise ValueError(f"conv2d(weight=...): the FRACTAL_Z weight has {taps} taps, not a "
                             f"square kernel; pass kernel_size=(kh, kw)")
        return k, k
    kh, kw = _pair(kernel_size, "kernel_size", 1)
    if kh * kw != taps:
        raise ValueError(f"conv2d(kernel_size={kernel_size!r}): the FRACTAL_Z weight has "
                         f"{taps} taps per channel block, not {kh * kw}")
    return kh, kw


def _largest_divisor(n: int, limit: int) -> int:
    return max(d for d in range(1, min(n, limit) + 1) if n % d == 0)


def _blocking(n, oh, ow, c1o, c0, taps) -> dict:
    """TM, NB and rows of the conv kernel's blocks: the choice the cube's pipes favour, by
    a coarse model of one tap fitted to the cycle model (ResNet-50's stem swept over rows x
    NB: the model ranks the seven choices as the cycle model does): MTE2 loads each row's
    (TM, C0) window and each weight block (4 ns + 1 ns per 110 bytes), M makes rows x NB
    products (2 ns + 1.8 ns per 14 pixels); the pipes overlap, so a tap costs the larger.
    Times the items each of the 24 cube cores loops over. At most 16 accumulators and 64 KB
    of L0C."""
    tm = _pixel_tile(ow)
    load = lambda nbytes: 4.0 + nbytes / 110.0          # noqa: E731
    best = None
    for nb in (d for d in range(1, min(c1o, ck.MAX_NB) + 1) if c1o % d == 0):
        for rows in (d for d in range(1, min(oh, ck.MAX_ROWS) + 1) if oh % d == 0):
            if nb * rows > ck.MAX_ACCS or nb * rows * tm * c0 * 4 > ck.MAX_ACC_BYTES:
                continue
            items = n * (oh // rows) * (ow // tm) * (c1o // nb)
            mte2 = rows * load(tm * 32) + nb * load(c0 * 32)
            cube = rows * nb * (2.0 + 1.8 * tm / 14)
            cost = -(-items // CUBE_CORES) * taps * max(mte2, cube)
            if best is None or cost < best[0]:
                best = (cost, nb, rows)
    return {"tm": tm, "nb": best[1], "rows": best[2]}


def _pixel_tile(ow: int) -> int:
    """Output pixels per cube tile: a divisor of OW (a tile never reaches into the next
    output row, which follows in the NC1HWC0 view), a multiple of 16 where OW has one (L1
    and L0A tiles are 16-row fractals: pto-isa refuses others), at most ``MAX_TM``."""
    aligned = [d for d in range(16, min(ow, ck.MAX_TM) + 1, 16) if ow % d == 0]
    return aligned[-1] if aligned else _largest_divisor(ow, ck.MAX_TM)


# -- the graph ------------------------------------------------------------------------------------

def _add(graph, name, inputs, shape, dtype, layout, source_fn, grid, views, role,
         uses_cube=False):
    """``add_node`` of a kernel written one block per work item of ``grid``, launched
    persistent (``conv_kernels.persistent``: one block per core looping over the items)."""
    cores = CUBE_CORES if uses_cube else VECTOR_CORES
    items = math.prod(grid)
    return add_node(graph, name, inputs, shape, dtype, layout,
                    lambda fn: ck.persistent(source_fn(fn), grid, cores)[0],
                    (min(items, cores),), views, role, uses_cube)


def _graph_conv(x, wt, bias, stride, padding, dilation, groups, kernel_size, out_channels,
                output_layout, name):
    graph = x.graph
    wt = _check_tensor(wt, "weight", graph)
    if x.dtype not in DTYPES:
        raise TypeError(f"conv2d(input=...) must be float16 or float32, got {x.dtype}")
    if wt.dtype != x.dtype:
        raise TypeError(f"conv2d(weight=...) must have the input's dtype {x.dtype}, got "
                        f"{wt.dtype}")
    sh, sw = _pair(stride, "stride", 1)
    ph, pw = _pair(padding, "padding", 0)
    dh, dw = _pair(dilation, "dilation", 1)
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        raise ValueError(f"conv2d(groups={groups!r}) must be a positive int")
    if output_layout not in OUTPUT_LAYOUTS:
        raise ValueError(f"conv2d(output_layout={output_layout!r}) must be one of "
                         f"{', '.join(OUTPUT_LAYOUTS)}")
    c0 = c0_for(x.dtype)
    n, c, c1, h, w, nchw = _input_dims(x, c0)
    cout, cin_g, kh, kw, fractal_z = _weight_dims(wt, c1, c0, groups, kernel_size,
                                                  out_channels)
    if cin_g is not None:
        cin = cin_g * groups
        if c is None and math.ceil(cin / c0) != c1:
            raise ValueError(f"conv2d(weight=...): {cin} input channels (weight {wt.shape}, "
                             f"groups={groups}) do not fit the input's C1 = {c1} blocks of {c0}")
        if c is not None and cin != c:
            raise ValueError(f"conv2d(groups={groups}): the input has {c} channels but the "
                             f"weight {wt.shape} expects {cin_g} per group, {cin} in all")
        if cout % groups:
            raise ValueError(f"conv2d(groups={groups}) must divide the {cout} output channels")
        c = cin
    if bias is not None:
        bias = _check_tensor(bias, "bias", graph)
        if bias.shape != (cout,) or bias.dtype != x.dtype:
            raise ValueError(f"conv2d(bias=...) must be {x.dtype}[{cout}], got "
                             f"{bias.dtype}{list(bias.shape)}")
    hp, wp_ = h + 2 * ph, w + 2 * pw
    if dh * (kh - 1) + 1 > hp or dw * (kw - 1) + 1 > wp_:
        raise ValueError(f"conv2d(weight=...): the kernel {kh}x{kw} (dilation {dh}, {dw}) "
                         f"spans more than the padded input {hp}x{wp_}")
    oh = (hp - dh * (kh - 1) - 1) // sh + 1
    ow = (wp_ - dw * (kw - 1) - 1) // sw + 1
    wp = -(-wp_ // sw) * sw           # rows of the strided views must be whole
    base = name or "conv2d"
    fmap = _feature_map(graph, base, x, nchw, n, c, c1, c0, h, w, hp, wp, ph, pw)
    weight, cout_p = _weights(graph, base, wt, fractal_z, groups, c, cin_g, cout, kh * kw, c1,
                              c0)
    c1o = math.ceil(cout / c0)
    out = _conv_node(graph, base, fmap, weight, bias, dict(
        c1=c1, kh=kh, kw=kw, hp=hp, wp=wp, oh=oh, ow=ow, c1o=c1o, c0=c0, sh=sh, sw=sw, dh=dh,
        dw=dw, **_blocking(n, oh, ow, c1o, c0, kh * kw * c1),
        fractal_z=fractal_z and x.dtype == dt.float16, bias=bias is not None, cout_p=cout_p),
        n, x.dtype)
    if output_layout == "NCHW":
        out = _to_nchw(graph, base, out, n, cout, c1o, c0, oh, ow)
    return out


def _feature_map(graph, base, x, nchw, n, c, c1, c0, h, w, hp, wp, ph, pw):
    if not nchw and (hp, wp) == (h, w):
        return x
    src = (lambda a: a.reshape(n * c, h * w)) if nchw else (lambda a: a.reshape(-1, c0))

    def views(inputs, out):
        return [src(inputs[0]), out.reshape(-1, c0)]
    source = lambda fn: ck.feature_map_kernel(   # noqa: E731
        fn, nchw=nchw, n=n, c=c, c1=c1, c0=c0, h=h, w=w, hp=hp, wp=wp, ph=ph, pw=pw,
        dtype=x.dtype)
    return _add(graph, f"{base}_input", [x], (n, c1, hp, wp, c0), x.dtype, "NC1HWC0",
                    source, (n * c1 * hp,), views,
                    f"{'NCHW' if nchw else 'NC1HWC0'} to padded NC1HWC0")


def _weights(graph, base, wt, fractal_z, groups, cin, cin_g, cout, kk, c1, c0):
    """(the weight tensor the conv kernel reads, its FRACTAL_Z Cout_p or 0 for KN)."""
    if fractal_z:
        cout_p = wt.shape[1] * 16
        if wt.dtype == dt.float16:
            return wt, cout_p
        source = lambda fn: ck.fractal_z_to_kn_kernel(fn, c0=c0, cout_p=cout_p)  # noqa: E731
        kn = _add(graph, f"{base}_weight", [wt], (wt.shape[0] * c0, cout_p), wt.dtype,
                      "ND", source, (wt.shape[0], cout_p // 16),
                      lambda i, o: [i[0].reshape(-1, c0), o], "FRACTAL_Z to KN")
        return kn, 0
    dense = wt
    if groups > 1:
        source = lambda fn: ck.dense_weight_kernel(   # noqa: E731
            fn, cin=cin, cin_g=cin_g, cout_g=cout // groups, kk=kk, dtype=wt.dtype)
        dense = _add(graph, f"{base}_dense_weight", [wt], (cout, cin * kk), wt.dtype, "ND",
                         source, (cout,), lambda i, o: [i[0].reshape(cout, -1), o],
                         f"groups={groups} to block-diagonal")
    source = lambda fn: ck.oihw_to_kn_kernel(fn, c0=c0, kk=kk)   # noqa: E731
    kn = _add(graph, f"{base}_weight", [dense], (c1 * kk * c0, math.ceil(cout / c0) * c0),
                  wt.dtype, "ND", source, (c1, math.ceil(cout / ck.WEIGHT_TILE)),
                  lambda i, o: [i[0].reshape(cout, -1), o], "OIHW to KN")
    return kn, 0


def _conv_node(graph, base, fmap, weight, bias, p, n, dtype):
    c0, sw = p["c0"], p["sw"]
    ones = np.ones((p["tm"], 1), dtype.to_numpy())
    fz = p["fractal_z"]             # the weight is FRACTAL_Z itself (float16), else KN

    def views(inputs, out):
        fm = inputs[0].reshape(-1, c0)
        if sw == 1:
            xs = [fm]
        else:
            rows = fm.shape[0] // sw
            xs = [np.lib.stride_tricks.as_strided(fm[s:], (rows, c0),
                                                  (sw * fm.strides[0], fm.strides[1]))
                  for s in range(sw)]
        w = inputs[1].reshape(-1, c0) if fz else inputs[1]
        extra = [ones, inputs[2].reshape(1, -1)] if p["bias"] else []
        return xs + [w] + extra + [out.reshape(-1, c0)]
    inputs = [fmap, weight] + ([bias] if bias is not None else [])
    return _add(graph, base, inputs, (n, p["c1o"], p["oh"], p["ow"], c0), dtype,
                    "NC1HWC0", lambda fn: ck.conv_kernel(fn, **p),
                    (n * p["oh"] // p["rows"], p["ow"] // p["tm"], p["c1o"] // p["nb"]), views,
                    f"conv2d {p['kh']}x{p['kw']} stride ({p['sh']}, {sw}) implicit GEMM",
                    uses_cube=True)


def _to_nchw(graph, base, y, n, cout, c1o, c0, oh, ow):
    source = lambda fn: ck.to_nchw_kernel(fn, c=cout, c1=c1o, c0=c0, h=oh, w=ow)  # noqa: E731
    return _add(graph, f"{base}_nchw", [y], (n, cout, oh, ow), y.dtype, "NCHW", source,
                    (n * c1o * oh,),
                    lambda i, o: [i[0].reshape(-1, c0), o.reshape(n * cout, oh * ow)],
                    "NC1HWC0 to NCHW")


# -- the direct call ------------------------------------------------------------------------------

_MODULES: OrderedDict = OrderedDict()
_MAX_MODULES = 64


def _direct(x, wt, bias, stride, padding, dilation, groups):
    arrays = {"input": x, "weight": wt}
    if bias is not None:
        arrays["bias"] = bias
    np_arrays = {}
    for key, value in arrays.items():
        arr = as_array(value)
        if arr is None:
            raise TypeError(f"conv2d({key}=...) must be a graph tensor or an array (numpy or "
                            f"torch), got {type(value).__name__}")
        np_arrays[key] = arr
    xa = np_arrays["input"]
    if xa.ndim not in (4, 5):
        raise ValueError(f"conv2d(input=...): an array input is NCHW (rank 4) or NC1HWC0 "
                         f"(rank 5), got shape {xa.shape}")
    key = (tuple((k, a.shape, str(a.dtype)) for k, a in np_arrays.items()), stride, padding,
           dilation, groups)
    module = _MODULES.get(key)
    if module is None:
        module = _build(np_arrays, stride, padding, dilation, groups)
        _MODULES[key] = module
        if len(_MODULES) > _MAX_MODULES:
            _MODULES.popitem(last=False)
    else:
        _MODULES.move_to_end(key)
    result = module.run(np_arrays).numpy()
    if type(x).__module__.startswith("torch"):
        import torch  # lazy: only torch callers load it
        return torch.from_numpy(result)
    return result


def _build(arrays, stride, padding, dilation, groups):
    graph = TensorGraph(name="conv2d")
    tensors = {}
    for key, arr in arrays.items():
        try:
            dtype = dt.from_any(arr.dtype)
        except TypeError as e:
            raise TypeError(f"conv2d({key}=...): {e}") from None
        layout = "NC1HWC0" if key == "input" and arr.ndim == 5 else None
        tensors[key] = graph.placeholder(arr.shape, dtype, name=key, layout=layout)
    nchw = arrays["input"].ndim == 4
    conv2d(tensors["input"], tensors["weight"], tensors.get("bias"), stride, padding,
           dilation, groups, output_layout="NCHW" if nchw else "NC1HWC0", name="conv2d")
    return compile_graph(graph)
