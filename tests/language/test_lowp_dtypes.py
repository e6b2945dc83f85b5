"""uint16, uint32 and float8 (e4m3fn, e5m2): A2/A3 keeps them in memory and computes them as
bits of types it has (passes/legalize_storage.py). Each kernel runs compiled and in the
reference interpreter and both are checked against numpy / ml_dtypes, bit for bit: the
conversions are exact by construction, so there is no tolerance to hide behind.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypto
import pypto.language as pl
from pypto.errors import CompilationError
from pypto.packed_int4 import pack, unpack
from tests.language.utils import assert_exact, interpret_mode

E4M3, E5M2 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)
FP8 = {"float8_e4m3fn": E4M3, "float8_e5m2": E5M2}
UNSIGNED = {"uint16": np.dtype(np.uint16), "uint32": np.dtype(np.uint32)}
SETTINGS = settings(max_examples=3, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
# rows and columns that leave a partial block in both directions (R=4, C=32 blocks)
SHAPES = st.tuples(st.integers(1, 9), st.integers(1, 70))


def _run_both(kernel, grid, *arrays, **constants):
    """The kernel's outputs compiled, then interpreted (fresh copies of ``arrays`` each)."""
    results = []
    for interpret in (False, True):
        args = [pypto.int4_tensor(a.data.copy(), a.shape) if hasattr(a, "layout") else
                a.copy() for a in arrays]
        if interpret:
            with interpret_mode():
                kernel[grid](*args, **constants)
        else:
            kernel[grid](*args, **constants)
        results.append(args)
    return results


def _grid(shape):
    return (-(-shape[0] // 4), -(-shape[1] // 32))


@pypto.jit
def convert(x, out, R: pl.constexpr, C: pl.constexpr):
    i, j = pl.program_id(0), pl.program_id(1)
    t = pl.load(x, (i * R, j * C), (R, C))
    pl.store(out, (i * R, j * C), t.to(out.dtype))


@pypto.jit
def convert3(x, o1, o2, o3, R: pl.constexpr, C: pl.constexpr):
    """Three conversions of one tile (one compile for three destination dtypes)."""
    i, j = pl.program_id(0), pl.program_id(1)
    t = pl.load(x, (i * R, j * C), (R, C))
    pl.store(o1, (i * R, j * C), t.to(o1.dtype))
    pl.store(o2, (i * R, j * C), t.to(o2.dtype))
    pl.store(o3, (i * R, j * C), t.to(o3.dtype))


def _convert(x: np.ndarray, *dtypes) -> list:
    """``x`` converted to each of ``dtypes`` (one or three) by a kernel, compiled and
    interpreted (which must agree bit for bit)."""
    outs = [np.zeros(x.shape, d) for d in dtypes]
    kernel = convert if len(outs) == 1 else convert3
    compiled, interpreted = _run_both(kernel, _grid(x.shape), x, *outs, R=4, C=32)
    for got, interp in zip(compiled[1:], interpreted[1:]):
        assert_exact(got, interp, f"{x.dtype} -> {got.dtype}: compiled vs interpreter")
    return compiled[1:]


def _check_conversions(x: np.ndarray, dtypes, expected=None) -> None:
    with np.errstate(over="ignore", invalid="ignore"):
        wanted = expected or [x.astype(d) for d in dtypes]
    for got, want in zip(_convert(x, *dtypes), wanted):
        assert_exact(got, want, f"{x.dtype} -> {want.dtype}")


# -- float8 ------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", list(FP8))
def test_every_float8_code_decodes_exactly(fmt):
    codes = np.arange(256, dtype=np.uint8).reshape(8, 32).view(FP8[fmt])
    _check_conversions(codes, [np.float32, np.float16, ml_dtypes.bfloat16])


F32_EDGES = np.array(
    [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 448.0, 464.0, 464.01, 480.0, -500.0, 1e6,
     57344.0, 61439.0, 61440.0, 65504.0, 1e30, 2.0 ** -6, 2.0 ** -7, 2.0 ** -9, 2.0 ** -10,
     3 * 2.0 ** -11, 2.0 ** -14, 2.0 ** -16, 2.0 ** -17, 3 * 2.0 ** -18, 1e-30, 1e-45, 1.0625,
     1.125, 1.1875, 1.25, 0.9375, -0.3, 240.0, 248.0, 3.4e38], np.float32)


@pytest.mark.parametrize("fmt", list(FP8))
def test_float32_encodes_as_ml_dtypes_on_special_values(fmt):
    """NaN, inf, overflow (e4m3fn → NaN, e5m2 → inf, as ml_dtypes), halfway cases, subnormals
    and underflow to zero, both signs."""
    x = np.concatenate([F32_EDGES, -F32_EDGES]).reshape(2, -1)
    _check_conversions(x, [FP8[fmt]])


@SETTINGS
@given(shape=SHAPES, seed=st.integers(0, 2 ** 16), fmt=st.sampled_from(list(FP8)),
       src=st.sampled_from(["float32", "float16", "bfloat16"]))
def test_floats_encode_as_ml_dtypes(shape, seed, fmt, src):
    rng = np.random.default_rng(seed)
    scale = 2.0 ** rng.integers(-20, 18, size=shape)
    x = (rng.standard_normal(shape) * scale).astype(np.float32).astype(
        ml_dtypes.bfloat16 if src == "bfloat16" else src)
    _check_conversions(x, [FP8[fmt]], [x.astype(np.float32).astype(FP8[fmt])])


@pytest.mark.slow
@SETTINGS
@given(shape=SHAPES, seed=st.integers(0, 2 ** 16), fmt=st.sampled_from(list(FP8)))
def test_float8_round_trips_and_converts_to_ints(shape, seed, fmt):
    """Finite codes (a float8 NaN or inf → int32 is the saturation rule, tested elsewhere):
    to itself, to int32 and to the other float8."""
    codes = np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8).view(FP8[fmt])
    codes = np.where(np.isfinite(codes.astype(np.float32)), codes, FP8[fmt].type(-3.5))
    other = E5M2 if FP8[fmt] == E4M3 else E4M3
    wide = codes.astype(np.float32)
    _check_conversions(codes, [FP8[fmt], np.int32, other],
                       [codes, wide.astype(np.int32), wide.astype(other)])


@pypto.jit
def fp8_scale(x, s, out, R: pl.constexpr, C: pl.constexpr):
    """The intended use: float8 storage, float16/32 compute (a dequantise-scale-requantise)."""
    i = pl.program_id(0)
    t = pl.load(x, (i * R, 0), (R, C)).to(pl.float32)
    pl.store(out, (i * R, 0), (t * pl.load(s, (i * R, 0), (R, 1))).to(out.dtype))


def test_float8_dequantise_compute_requantise():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((12, 48)) * 20).astype(E4M3)
    s = rng.uniform(0.5, 2, (12, 1)).astype(np.float32)
    out = np.zeros((12, 48), E5M2)
    compiled, interpreted = _run_both(fp8_scale, (3,), x, s, out, R=4, C=48)
    expected = (x.astype(np.float32) * s).astype(E5M2)
    assert_exact(compiled[2], expected, "compiled")
    assert_exact(interpreted[2], expected, "interpreted")


@pypto.jit
def fp8_add(x, y, out, N: pl.constexpr):
    pl.store(out, (0,), pl.load(x, (0,), (N,)) + pl.load(y, (0,), (N,)))


def test_float8_arithmetic_is_refused_naming_the_target():
    x = np.ones(32, E4M3)
    with pytest.raises(CompilationError) as info:
        fp8_add[(1,)](x, x, x.copy(), N=32)
    message = str(info.value)
    for part in ("fp8_add", "add on a float8_e4m3fn tile", "ascend910b1", "x.to(pl.float16)"):
        assert part in message, message


# -- uint16 / uint32 ---------------------------------------------------------------------------

@pypto.jit
def unsigned_ops(x, y, o_add, o_mul, o_max, o_lt, o_xor, o_shr, o_sub, R: pl.constexpr,
                 C: pl.constexpr):
    i, j = pl.program_id(0), pl.program_id(1)
    a = pl.load(x, (i * R, j * C), (R, C))
    b = pl.load(y, (i * R, j * C), (R, C))
    at = (i * R, j * C)
    pl.store(o_add, at, a + b)
    pl.store(o_mul, at, a * b + 7)
    pl.store(o_max, at, pl.minimum(pl.maximum(a, b), 60000))
    pl.store(o_lt, at, pl.where(a < b, a, b) + (a >= 40000).to(a.dtype))
    pl.store(o_xor, at, (a ^ b) | 1)
    pl.store(o_shr, at, (a >> 3) + (b << 2))
    pl.store(o_sub, at, a - b - 1)


def _check_unsigned_ops(shape, seed, name):
    d = UNSIGNED[name]
    rng = np.random.default_rng(seed)
    x, y = (rng.integers(0, np.iinfo(d).max, shape, dtype=d, endpoint=True) for _ in "xy")
    x.ravel()[:2] = (np.iinfo(d).max, 0)[:x.size]
    outs = [np.zeros(shape, d) for _ in range(7)]
    compiled, interpreted = _run_both(unsigned_ops, _grid(shape), x, y, *outs, R=4, C=32)
    t = d.type
    with np.errstate(over="ignore"):
        expected = [x + y, x * y + t(7), np.minimum(np.maximum(x, y), t(60000)),
                    np.where(x < y, x, y) + (x >= t(40000)).astype(d), (x ^ y) | t(1),
                    (x >> t(3)) + (y << t(2)), x - y - t(1)]
    names = ["add", "mul", "max", "lt", "xor", "shr", "sub"]
    for got, interp, want, what in zip(compiled[2:], interpreted[2:], expected, names):
        assert_exact(got, want, f"{name} {what} compiled")
        assert_exact(interp, want, f"{name} {what} interpreted")


@pytest.mark.parametrize("name", list(UNSIGNED))
def test_unsigned_arithmetic_matches_numpy_on_partial_blocks(name):
    _check_unsigned_ops((5, 37), 0, name)


@pytest.mark.slow
@SETTINGS
@given(shape=SHAPES, seed=st.integers(0, 2 ** 16), name=st.sampled_from(list(UNSIGNED)))
def test_unsigned_arithmetic_matches_numpy(shape, seed, name):
    _check_unsigned_ops(shape, seed, name)


@pypto.jit
def u16_divide(x, y, o_div, o_mod, o_sum, N: pl.constexpr):
    a = pl.load(x, (0, 0), (1, N))
    b = pl.load(y, (0, 0), (1, N))
    pl.store(o_div, (0, 0), a // b)
    pl.store(o_mod, (0, 0), a % b)
    pl.store(o_sum, (0, 0), pl.max(a, axis=1, keepdims=True))


def test_uint16_division_and_reduction():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 65536, (1, 64), dtype=np.uint16)
    y = rng.integers(1, 65536, (1, 64), dtype=np.uint16)
    y[0, :4] = (1, 65535, 3, 40000)
    outs = [np.zeros((1, 64), np.uint16), np.zeros((1, 64), np.uint16),
            np.zeros((1, 1), np.uint16)]
    compiled, _ = _run_both(u16_divide, (1,), x, y, *outs, N=64)
    for got, want, what in zip(compiled[2:], [x // y, x % y, x.max(1, keepdims=True)],
                               ["//", "%", "max"]):
        assert_exact(got, want, what)


U32_EDGES = np.array([0, 1, 2 ** 16 - 1, 2 ** 16, 2 ** 24 + 1, 2 ** 31 - 1, 2 ** 31,
                      2 ** 31 + 129, 2 ** 32 - 129, 2 ** 32 - 1, 3_000_000_000, 123_456_789],
                     np.uint32)


@pytest.mark.parametrize("dsts", [(np.float32, np.float16, np.int32),
                                  (np.int16, np.uint16, np.uint8)])
def test_uint32_converts_as_numpy(dsts):
    x = np.concatenate([U32_EDGES, np.random.default_rng(4).integers(
        0, 2 ** 32, 20, dtype=np.uint32)]).reshape(1, -1)
    _check_conversions(x, dsts)


@pytest.mark.parametrize("dsts", [(np.float32, np.float16, np.int32),
                                  (np.int16, np.uint32, np.int8)])
def test_uint16_converts_as_numpy(dsts):
    x = np.arange(0, 65536, 257, dtype=np.uint16).reshape(1, -1)
    _check_conversions(x, dsts)


@pytest.mark.parametrize("src", [np.float32, np.float16])
def test_floats_to_unsigned_truncate_and_saturate(src):
    """PyPTO's float → int rule: truncate, saturate to the range, NaN → 0 -- but float16 →
    uint8, which A2/A3's TCVT makes through int32, keeping the low 8 bits."""
    x = np.array([[0.0, 0.9, 1.5, 255.7, 65535.0, 65536.0, 70000.0, -1.0, -0.5, np.nan,
                   np.inf, -np.inf, 2.0 ** 31, 3e9, 4294967040.0, 5e9]], np.float32).astype(src)
    f = np.nan_to_num(x.astype(np.float64), nan=0.0, posinf=1e300, neginf=-1e300)
    unsigned = (np.uint16, np.uint32, np.uint8)
    want = [np.clip(np.trunc(f), 0, float(np.iinfo(d).max)).astype(d) for d in unsigned]
    if src == np.float16:
        wide = np.clip(np.trunc(f), -2.0 ** 31, 2.0 ** 31 - 1).astype(np.int64)
        want[2] = wide.astype(np.uint8)
    _check_conversions(x, unsigned, want)


@pytest.mark.parametrize("src", [np.int32, np.int16, np.int8])
def test_ints_to_unsigned_wrap(src):
    info = np.iinfo(src)
    x = np.array([[0, 1, -1, info.min, info.max, 100, -100, 77]], src)
    _check_conversions(x, [np.uint16, np.uint32, np.uint8])


@pypto.jit
def u32_div(x, out, N: pl.constexpr):
    t = pl.load(x, (0,), (N,))
    pl.store(out, (0,), t // t)


def test_uint32_division_is_refused_naming_the_target():
    x = np.ones(32, np.uint32)
    with pytest.raises(CompilationError, match="floordiv of uint32 tiles: ascend910b"):
        u32_div[(1,)](x, x.copy(), N=32)


def test_cycle_model_costs_the_legalised_sequences():
    """The float8 encode is ordinary A2/A3 instructions, each costed: a conversion of the
    same tile to float8 takes more modelled vector time than one to float16."""
    from pypto.backends.ascend.model.launch import model_launch
    from pypto.compiler.pto.reader import parse_program

    x = np.zeros((4, 32), np.float32)
    vector = {}
    for dtype in (np.float16, E4M3):
        out = np.zeros((4, 32), dtype)
        program = parse_program(convert.compile(x, out, R=4, C=32).asm["pto"])
        launch = model_launch(program, (1, 1), {"x": x, "out": out})
        vector[np.dtype(dtype).name] = launch.pipe_busy["V"]
        names = {r.name for r in launch.blocks[0].records}
        if dtype == E4M3:
            assert {"tand", "tshrs", "tsel", "tcvt", "tmin"} <= names, names
    assert vector["float8_e4m3fn"] > 5 * vector["float16"] > 0, vector


def test_torch_float8_and_unsigned_tensors_pass_without_copies():
    """torch.float8_* have no numpy dtype: the kernel sees their bytes through ml_dtypes (a
    view, so the kernel's stores land in the torch tensor); torch.uint16/uint32 map by name."""
    torch = pytest.importorskip("torch")
    from pypto.runtime.args import to_torch

    assert [to_torch(d) for d in (pl.uint16, pl.uint32, pl.float8_e4m3fn, pl.float8_e5m2)] \
        == [torch.uint16, torch.uint32, torch.float8_e4m3fn, torch.float8_e5m2]
    x = torch.randn(4, 32) * 30
    for _ in range(2):                                     # the cold and the warm launch
        out = torch.zeros(4, 32, dtype=torch.float8_e5m2)
        convert[(1, 1)](x, out, R=4, C=32)
        assert torch.equal(out.view(torch.uint8), x.to(torch.float8_e5m2).view(torch.uint8))
    u = torch.zeros(4, 32, dtype=torch.uint32)
    convert[(1, 1)](x.abs() * 1e6, u, R=4, C=32)
    assert torch.equal(u.to(torch.int64), (x.abs() * 1e6).to(torch.int64))


# -- packed int4 -------------------------------------------------------------------------------

def test_pack_is_low_nibble_first():
    assert pack(np.array([1, -2, 7])).tolist() == [0xE1, 0x07]
    assert unpack(np.array([0xE1, 0x07], np.uint8), 3).tolist() == [1, -2, 7]


@SETTINGS
@given(shape=SHAPES, seed=st.integers(0, 2 ** 16))
def test_int4_loads_unpack_negative_values_and_odd_tails(shape, seed):
    values = np.random.default_rng(seed).integers(-8, 8, shape).astype(np.int8)
    packed = pack(values)
    packed[..., -1] |= np.uint8(0xF0) if shape[1] % 2 else 0   # garbage in the padding nibble
    out = np.zeros(shape, np.float32)
    compiled, interpreted = _run_both(convert, _grid(shape), pypto.int4_tensor(packed, shape),
                                      out, R=4, C=32)
    assert_exact(compiled[1], values.astype(np.float32), f"int4 {shape} compiled")
    assert_exact(interpreted[1], values.astype(np.float32), f"int4 {shape} interpreted")


@SETTINGS
@given(shape=SHAPES, seed=st.integers(0, 2 ** 16))
def test_int4_stores_pack_and_stay_inside_the_buffer(shape, seed):
    """Floats truncate and saturate to [-8, 7] (NaN → 0); the bytes around the tensor (rows of
    a larger buffer) are untouched and an odd row's padding nibble is written as 0."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-12, 12, shape).astype(np.float32)
    x.ravel()[:3] = [np.nan, np.inf, -np.inf][:x.size]
    rows, nbytes = shape[0], -(-shape[1] // 2)
    for interpret in (False, True):
        buffer = np.full((rows + 2, nbytes), 0x5A, np.uint8)
        tensor = pypto.int4_tensor(buffer[1:-1], shape)
        if interpret:
            with interpret_mode():
                convert[_grid(shape)](x, tensor, R=4, C=32)
        else:
            convert[_grid(shape)](x, tensor, R=4, C=32)
        expected = np.clip(np.trunc(np.nan_to_num(x, nan=0.0, posinf=99, neginf=-99)), -8, 7)
        assert (unpack(buffer[1:-1], shape[1]) == expected).all(), (shape, interpret)
        assert (buffer[0] == 0x5A).all() and (buffer[-1] == 0x5A).all()
        if shape[1] % 2:
            assert (buffer[1:-1, -1] >> 4 == 0).all()


def test_ints_wrap_into_int4():
    x = np.array([[0, 7, 8, -8, -9, 15, 16, 100, -100, 3]], np.int32)
    packed = np.zeros((1, 5), np.uint8)
    convert[(1, 1)](x, pypto.int4_tensor(packed, (1, 10)), R=1, C=32)
    assert unpack(packed, 10).tolist() == [((x.astype(np.int64) + 8) % 16 - 8).ravel().tolist()]


@pypto.jit
def int4_misuse(w, out, HOW: pl.constexpr, C: pl.constexpr):
    if HOW == "add":
        t = pl.load(w, (0, 0), (1, C))
        pl.store(out, (0, 0), (t + t).to(pl.float32))
    elif HOW == "odd offset":
        pl.store(out, (0, 0), pl.load(w, (0, pl.program_id(0) + 1), (1, C)).to(pl.float32))
    elif HOW == "padding":
        pl.store(out, (0, 0), pl.load(w, (0, 0), (1, C), padding=1).to(pl.float32))
    else:
        pl.store(out, (0, 0), pl.load(w, (0, 0), (1, C)).to(pl.float32))


@pytest.mark.parametrize("how, c, message", [
    ("add", 8, "add on a int4 tile: ascend910b1"),
    ("odd offset", 8, "column offset must be even"),
    ("padding", 8, "pads with 0"),
    ("odd tile", 7, "even last dimension"),
])
def test_int4_misuse_is_refused_clearly(how, c, message):
    w = pypto.int4_tensor(np.zeros((1, 4), np.uint8), (1, 8))
    with pytest.raises(CompilationError, match=message):
        int4_misuse[(1,)](w, np.zeros((1, 8), np.float32), HOW=how, C=c)


def test_an_unpacked_int4_array_is_refused():
    x = np.zeros((1, 8), ml_dtypes.int4)
    with pytest.raises(CompilationError, match="an int4 tensor is packed bytes"):
        convert[(1, 1)](x, np.zeros((1, 8), np.float32), R=1, C=32)


def test_int4_tensor_checks_the_bytes_it_is_given():
    with pytest.raises(TypeError, match="packed bytes .uint8 or int8., got a float32"):
        pypto.int4_tensor(np.zeros((2, 4), np.float32), (2, 8))
    with pytest.raises(ValueError, match=r"held in bytes of shape \(2, 4\)"):
        pypto.int4_tensor(np.zeros((2, 3), np.uint8), (2, 8))
    with pytest.raises(ValueError, match="C-contiguous"):
        pypto.int4_tensor(np.zeros((2, 8), np.uint8)[:, ::2], (2, 8))
