"""reader_ptoas: .pto written as PTOAS's own test/samples write it (no printer conventions,
level-2 text without addresses or flags) loads with pypto.load_pto and computes what numpy
says, on the native engine and -- when the oracle is present -- on the pto-isa engine, which
runs PTOAS's own lowering of the same text. The programs here are written for these tests in
the samples' style; the real samples run in the last test when PTOAS_SAMPLES names them."""
import os
import sys

import numpy as np
import pytest

import pypto
from pypto.errors import CompilationError
from pypto.compiler.pto import Inst, walk_insts
from pypto.compiler.pto.passes.hazards import find_hazards

ORACLE = os.environ.get("PTO_ORACLE")
SAMPLES = os.environ.get("PTOAS_SAMPLES")
needs_oracle = pytest.mark.skipif(not ORACLE, reason="PTO_ORACLE is not set (ptoas, pto-isa)")


def tb(loc, dtype, rows, cols, vr=None, vc=None):
    """A tile type as the samples spell it."""
    layout = {"vec": "blayout=row_major, slayout=none_box, fractal=512",
              "col": "blayout=col_major, slayout=none_box, fractal=512",
              "mat": "blayout=col_major, slayout=row_major, fractal=512",
              "left": "blayout=row_major, slayout=row_major, fractal=512",
              "right": "blayout=row_major, slayout=col_major, fractal=512",
              "acc": "blayout=col_major, slayout=row_major, fractal=1024"}[loc]
    where = "vec" if loc == "col" else loc
    return (f"!pto.tile_buf<loc={where}, dtype={dtype}, rows={rows}, cols={cols}, "
            f"v_row={vr or rows}, v_col={vc or cols}, {layout}, pad=0>")


V32 = tb("vec", "f32", 32, 32)
VADD = f"""module {{
  func.func @vadd(%arg0: !pto.ptr<f32>, %arg1: !pto.ptr<f32>, %arg2: !pto.ptr<f32>, %s: f32) {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    %0 = pto.make_tensor_view %arg0, shape = [%c32, %c32], strides = [%c32, %c1] : !pto.tensor_view<?x?xf32>
    %1 = pto.make_tensor_view %arg1, shape = [%c32, %c32], strides = [%c32, %c1] {{layout = #pto.layout<nd>}}: !pto.tensor_view<?x?xf32>
    %2 = pto.make_tensor_view %arg2, shape = [%c32, %c32], strides = [%c32, %c1] : !pto.tensor_view<?x?xf32>
    %3 = pto.partition_view %0, offsets = [%c0, %c0], sizes = [%c32, %c32] : !pto.tensor_view<?x?xf32> -> !pto.partition_tensor_view<32x32xf32>
    %4 = pto.partition_view %1, offsets = [%c0, %c0], sizes = [%c32, %c32] : !pto.tensor_view<?x?xf32> -> !pto.partition_tensor_view<32x32xf32>
    %5 = pto.alloc_tile : {V32}
    %6 = pto.alloc_tile : {V32}
    %7 = pto.alloc_tile : {V32}
    pto.tload ins(%3 : !pto.partition_tensor_view<32x32xf32>) outs(%5 : {V32})
    pto.tload ins(%4 : !pto.partition_tensor_view<32x32xf32>) outs(%6 : {V32})
    pto.tadd ins(%5, %6 : {V32}, {V32}) outs(%7 : {V32})
    pto.tmuls ins(%7, %s : {V32}, f32) outs(%7 : {V32})
    %8 = pto.partition_view %2, offsets = [%c0, %c0], sizes = [%c32, %c32] : !pto.tensor_view<?x?xf32> -> !pto.partition_tensor_view<32x32xf32>
    pto.tstore ins(%7 : {V32}) outs(%8 : !pto.partition_tensor_view<32x32xf32>)
    return
  }}
}}
"""


def _mats(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)).astype(np.float32),
            rng.standard_normal((k, n)).astype(np.float32))


M32, L32, R32, A32 = (tb(x, "f32", 32, 32) for x in ("mat", "left", "right", "acc"))
# split-K matmul: a loop, scf.if on its index, tmatmul then tmatmul.acc (the samples' form)
SPLITK = f"""module {{
  func.func @qk_splitk(%q: !pto.ptr<f32>, %kt: !pto.ptr<f32>, %scores: !pto.ptr<f32>) {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    %c128 = arith.constant 128 : index
    %c4 = arith.constant 4 : index
    %q_tv = pto.make_tensor_view %q, shape = [%c32, %c128], strides = [%c128, %c1] : !pto.tensor_view<?x?xf32>
    %kt_tv = pto.make_tensor_view %kt, shape = [%c128, %c32], strides = [%c32, %c1] : !pto.tensor_view<?x?xf32>
    %s_tv = pto.make_tensor_view %scores, shape = [%c32, %c32], strides = [%c32, %c1] : !pto.tensor_view<?x?xf32>
    %s_pt = pto.partition_view %s_tv, offsets = [%c0, %c0], sizes = [%c32, %c32] : !pto.tensor_view<?x?xf32> -> !pto.partition_tensor_view<32x32xf32>
    %q_mat = pto.alloc_tile : {M32}
    %k_mat = pto.alloc_tile : {M32}
    %q_left = pto.alloc_tile : {L32}
    %k_right = pto.alloc_tile : {R32}
    %acc = pto.alloc_tile : {A32}
    scf.for %i = %c0 to %c4 step %c1 {{
      %off = arith.muli %i, %c32 : index
      %q_pt = pto.partition_view %q_tv, offsets = [%c0, %off], sizes = [%c32, %c32] : !pto.tensor_view<?x?xf32> -> !pto.partition_tensor_view<32x32xf32>
      %k_pt = pto.partition_view %kt_tv, offsets = [%off, %c0], sizes = [%c32, %c32] : !pto.tensor_view<?x?xf32> -> !pto.partition_tensor_view<32x32xf32>
      pto.tload ins(%q_pt : !pto.partition_tensor_view<32x32xf32>) outs(%q_mat : {M32})
      pto.tload ins(%k_pt : !pto.partition_tensor_view<32x32xf32>) outs(%k_mat : {M32})
      pto.tmov ins(%q_mat : {M32}) outs(%q_left : {L32})
      pto.tmov ins(%k_mat : {M32}) outs(%k_right : {R32})
      %first = arith.cmpi eq, %i, %c0 : index
      scf.if %first {{
        pto.tmatmul ins(%q_left, %k_right : {L32}, {R32}) outs(%acc : {A32})
      }} else {{
        pto.tmatmul.acc ins(%acc, %q_left, %k_right : {A32}, {L32}, {R32}) outs(%acc : {A32})
      }}
    }}
    pto.tstore ins(%acc : {A32}) outs(%s_pt : !pto.partition_tensor_view<32x32xf32>)
    return
  }}
}}
"""

X = tb("vec", "f32", 16, 64)
COL = tb("col", "f32", 16, 1)
ROW = tb("vec", "f32", 1, 64)
BRCB = tb("vec", "f32", 1, 128)          # ceil(16 / 8) x 256 bytes
# a row-wise softmax-like update with the instructions PyPTO's compiler never writes:
# trowexpandsub/div (div in PTOAS 0.60's form with a vbrcb scratch, which PyPTO drops: its
# own form keeps the copies in the UB's reserved top 8 KiB), tcolexpandmul, taddc; a (16, 1)
# column-major tile; trowmax with scratch;
# a multi-line function header, an i32 scalar through index_cast, a "true" constant
BROADCASTS = f"""module attributes {{pto.target_arch = "a2a3"}} {{
  func.func @bcast(%x: !pto.ptr<f32>, %w: !pto.ptr<f32>, %out: !pto.ptr<f32>,
      %row0: i32) attributes {{pto.kernel_kind = #pto.kernel_kind<vector>}} {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %c64 = arith.constant 64 : index
    %on = arith.constant true
    %r = arith.index_cast %row0 : i32 to index
    %x_tv = pto.make_tensor_view %x, shape = [%c16, %c64], strides = [%c64, %c1] : !pto.tensor_view<?x?xf32>
    %w_tv = pto.make_tensor_view %w, shape = [%c1, %c64], strides = [%c64, %c1] : !pto.tensor_view<?x?xf32>
    %o_tv = pto.make_tensor_view %out, shape = [%c16, %c64], strides = [%c64, %c1] : !pto.tensor_view<?x?xf32>
    %x_pt = pto.partition_view %x_tv, offsets = [%r, %c0], sizes = [%c16, %c64] : !pto.tensor_view<?x?xf32> -> !pto.partition_tensor_view<16x64xf32>
    %w_pt = pto.partition_view %w_tv, offsets = [%c0, %c0], sizes = [%c1, %c64] : !pto.tensor_view<?x?xf32> -> !pto.partition_tensor_view<1x64xf32>
    %o_pt = pto.partition_view %o_tv, offsets = [%c0, %c0], sizes = [%c16, %c64] : !pto.tensor_view<?x?xf32> -> !pto.partition_tensor_view<16x64xf32>
    %t = pto.alloc_tile : {X}
    %tmp = pto.alloc_tile : {X}
    %e = pto.alloc_tile : {X}
    %y = pto.alloc_tile : {X}
    %m = pto.alloc_tile : {COL}
    %wt = pto.alloc_tile : {ROW}
    %bt = pto.alloc_tile : {BRCB}
    pto.tload ins(%x_pt : !pto.partition_tensor_view<16x64xf32>) outs(%t : {X})
    pto.tload ins(%w_pt : !pto.partition_tensor_view<1x64xf32>) outs(%wt : {ROW})
    pto.trowmax ins(%t, %tmp : {X}, {X}) outs(%m : {COL})
    pto.trowexpandsub ins(%t, %m : {X}, {COL}) outs(%e : {X})
    pto.texp ins(%e : {X}) outs(%e : {X})
    pto.trowsum ins(%e, %tmp : {X}, {X}) outs(%m : {COL})
    pto.trowexpanddiv ins(%e, %m, %bt : {X}, {COL}, {BRCB}) outs(%y : {X})
    scf.if %on {{
      pto.tcolexpandmul ins(%y, %wt : {X}, {ROW}) outs(%e : {X})
    }}
    pto.taddc ins(%y, %e, %t : {X}, {X}, {X}) outs(%y : {X})
    pto.tstore ins(%y : {X}) outs(%o_pt : !pto.partition_tensor_view<16x64xf32>)
    return
  }}
}}
"""


def _broadcast_inputs():
    rng = np.random.default_rng(3)
    return (rng.standard_normal((16, 64)).astype(np.float32),
            rng.standard_normal((1, 64)).astype(np.float32), np.zeros((16, 64), np.float32))


def _broadcast_expected(x, w):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    y = e / e.sum(axis=1, keepdims=True)
    return (y + y * w) + x


def _on_both_engines(kernel, args, monkeypatch, grid=(1,)):
    """The outputs of the native run, and of the pto-isa run when the oracle is present."""
    runs = []
    engines = ["native"] + (["pto-isa"] if ORACLE else [])
    for engine in engines:
        copy = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        kernel.engine = engine
        kernel[grid](*copy)
        runs.append(copy)
    return runs


@pytest.fixture
def assembler(monkeypatch):
    """PTOAS lowers the text itself (the pto-isa engine then runs the vendor's reading)."""
    if ORACLE:
        monkeypatch.setenv("PYPTO_PTOAS", os.path.join(ORACLE, "bin", "ptoas"))


@pytest.mark.heavy
def test_level2_vector_text_runs_and_gets_flags(assembler, monkeypatch):
    kernel = pypto.load_pto(VADD)
    assert [p[:2] for p in kernel.params] == [("arg0", "tensor"), ("arg1", "tensor"),
                                             ("arg2", "tensor"), ("s", "float")]
    tiles = kernel.program.tiles
    assert len({t.addr for t in tiles}) == 3         # placed: three tiles live at once
    ops = [i.op for i in walk_insts(kernel.program.body) if isinstance(i, Inst)]
    assert "set_flag" in ops and not find_hazards(kernel.program)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 32, 32)).astype(np.float32)
    for _, _, out, _ in _on_both_engines(kernel, [a, b, np.zeros_like(a), 0.5], monkeypatch):
        np.testing.assert_allclose(out, (a + b) * np.float32(0.5), rtol=1e-6)


@pytest.mark.heavy
def test_split_k_matmul_with_a_loop_and_a_branch(assembler, monkeypatch):
    kernel = pypto.load_pto(SPLITK)        # a loop: the written-tensor scan used to fail on it
    assert kernel.program.kind == "cube"   # no kernel_kind: its buffers say so
    q, k = _mats(32, 32, 128)
    runs = _on_both_engines(kernel, [q, k, np.zeros((32, 32), np.float32)], monkeypatch)
    for _, _, scores in runs:
        np.testing.assert_allclose(scores, q @ k, rtol=1e-4, atol=1e-4)


@pytest.mark.heavy
def test_broadcast_and_ternary_instructions(assembler, monkeypatch):
    kernel = pypto.load_pto(BROADCASTS)
    x, w, out = _broadcast_inputs()
    runs = _on_both_engines(kernel, [x, w, out, 0], monkeypatch)
    for _, _, got, _ in runs:
        np.testing.assert_allclose(got, _broadcast_expected(x, w), rtol=1e-5, atol=1e-6)
    if len(runs) == 2:
        np.testing.assert_allclose(runs[0][2], runs[1][2], rtol=1e-6, atol=1e-7)


def test_tiles_without_addresses_reuse_bytes_once_dead():
    """Six 32 KiB tiles, at most three alive at once: they fit the 184 KiB UB only reused."""
    T = tb("vec", "f32", 64, 128)
    chain = "\n".join(
        f"    pto.tadds ins(%t{k}, %one : {T}, f32) outs(%t{k + 1} : {T})" for k in range(5))
    text = f"""module {{
  func.func @chain(%x: !pto.ptr<f32>, %y: !pto.ptr<f32>) {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    %c128 = arith.constant 128 : index
    %one = arith.constant 1.0 : f32
    %x_tv = pto.make_tensor_view %x, shape = [%c64, %c128], strides = [%c128, %c1] : !pto.tensor_view<?x?xf32>
    %y_tv = pto.make_tensor_view %y, shape = [%c64, %c128], strides = [%c128, %c1] : !pto.tensor_view<?x?xf32>
    %x_pt = pto.partition_view %x_tv, offsets = [%c0, %c0], sizes = [%c64, %c128] : !pto.tensor_view<?x?xf32> -> !pto.partition_tensor_view<64x128xf32>
    %y_pt = pto.partition_view %y_tv, offsets = [%c0, %c0], sizes = [%c64, %c128] : !pto.tensor_view<?x?xf32> -> !pto.partition_tensor_view<64x128xf32>
{chr(10).join(f"    %t{k} = pto.alloc_tile : {T}" for k in range(6))}
    pto.tload ins(%x_pt : !pto.partition_tensor_view<64x128xf32>) outs(%t0 : {T})
{chain}
    pto.tstore ins(%t5 : {T}) outs(%y_pt : !pto.partition_tensor_view<64x128xf32>)
    return
  }}
}}
"""
    kernel = pypto.load_pto(text)
    assert len({t.addr for t in kernel.program.tiles}) < 6
    assert not find_hazards(kernel.program)
    x = np.random.default_rng(1).standard_normal((64, 128)).astype(np.float32)
    y = np.zeros_like(x)
    kernel[(1,)](x, y)
    np.testing.assert_allclose(y, x + 5, rtol=1e-6)


def test_a_free_form_text_naming_the_chip_is_read_freely():
    """``"pto.device-spec"`` alone does not make a text PyPTO's print (Sync/matmul.pto)."""
    text = VADD.replace("module {", 'module attributes {"pto.device-spec" = "Ascend910B1"} {', 1)
    kernel = pypto.load_pto(text)
    a = np.ones((32, 32), np.float32)
    out = np.zeros_like(a)
    kernel[(1,)](a, a, out, 2.0)
    np.testing.assert_array_equal(out, np.full_like(a, 4))


def test_strides_of_one_element_axes_are_not_checked():
    """A (16, 1) column declared with strides [1, 16] takes numpy's (16, 1) array."""
    c = tb("col", "f32", 16, 1)
    text = f"""module {{
  func.func @neg(%x: !pto.ptr<f32>, %y: !pto.ptr<f32>) {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %x_tv = pto.make_tensor_view %x, shape = [%c16, %c1], strides = [%c1, %c16] : !pto.tensor_view<?x?xf32>
    %y_tv = pto.make_tensor_view %y, shape = [%c16, %c1], strides = [%c1, %c16] : !pto.tensor_view<?x?xf32>
    %x_pt = pto.partition_view %x_tv, offsets = [%c0, %c0], sizes = [%c16, %c1] : !pto.tensor_view<?x?xf32> -> !pto.partition_tensor_view<16x1xf32>
    %y_pt = pto.partition_view %y_tv, offsets = [%c0, %c0], sizes = [%c16, %c1] : !pto.tensor_view<?x?xf32> -> !pto.partition_tensor_view<16x1xf32>
    %t = pto.alloc_tile : {c}
    pto.tload ins(%x_pt : !pto.partition_tensor_view<16x1xf32>) outs(%t : {c})
    pto.tstore ins(%t : {c}) outs(%y_pt : !pto.partition_tensor_view<16x1xf32>)
    return
  }}
}}
"""
    x = np.arange(16, dtype=np.float32).reshape(16, 1)
    y = np.zeros_like(x)
    pypto.load_pto(text)[(1,)](x, y)
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("edit, message", [
    (("module {", 'module attributes {pto.target_arch = "a5"} {'), "PyPTO models A2/A3"),
    (("%5 = pto.alloc_tile :", "%5 = pto.alloc_tile valid_row = %c32 valid_col = %c32 :"),
     "run-time valid region"),
    (("{layout = #pto.layout<nd>}", "{layout = #pto.layout<dn>}"), "row-major"),
    (("sizes = [%c32, %c32] : !pto.tensor_view<?x?xf32> -> !pto.partition_tensor_view<32x32xf32>\n"
      "    %4", "sizes = [%c32, %c1] : !pto.tensor_view<?x?xf32> -> "
      "!pto.partition_tensor_view<32x1xf32>\n    %4"), "PyPTO moves the tile's valid shape"),
])
def test_what_it_cannot_read_is_refused_at_its_line(edit, message):
    text = VADD.replace(*edit, 1)
    assert text != VADD
    with pytest.raises(CompilationError, match=message) as e:
        pypto.load_pto(text)
    assert e.value.loc.line >= 1


@pytest.mark.slow
@pytest.mark.skipif(not (SAMPLES and ORACLE), reason="set PTOAS_SAMPLES to a copy of PTOAS's "
                    "test/samples (and PTO_ORACLE) to run the real samples")
def test_ptoas_samples_equal_on_both_engines():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "tools"))
    import ptoas_samples
    rows = ptoas_samples.run_all(SAMPLES)
    equal = [r.sample for r in rows if r.equal]
    print(ptoas_samples.table(rows))
    assert len(equal) >= 20, ptoas_samples.table(rows)
    assert all(r.numpy != "no" for r in rows), ptoas_samples.table(rows)
    assert sum(r.numpy == "yes" for r in rows) >= 15


@pytest.mark.heavy
def test_conversions_with_modes_written_against_the_operand(assembler, monkeypatch):
    """``%t{rmode = ...}`` (no space): ROUND to an int rounds half away from zero (pto-isa's
    std::round); between floats the mode is the chip's precision rounding, which pto-isa does
    not apply, so f32 -> f16 rounds to nearest even."""
    F, I, H = (tb("vec", d, 8, 64) for d in ("f32", "i32", "f16"))
    text = f"""module {{
  func.func @cvt(%x: !pto.ptr<f32>, %i: !pto.ptr<i32>, %h: !pto.ptr<f16>) {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
{chr(10).join(f"    %{n}_tv = pto.make_tensor_view %{n}, shape = [%c8, %c64], strides = [%c64, %c1] : !pto.tensor_view<?x?x{d}>" for n, d in (("x", "f32"), ("i", "i32"), ("h", "f16")))}
{chr(10).join(f"    %{n}_pt = pto.partition_view %{n}_tv, offsets = [%c0, %c0], sizes = [%c8, %c64] : !pto.tensor_view<?x?x{d}> -> !pto.partition_tensor_view<8x64x{d}>" for n, d in (("x", "f32"), ("i", "i32"), ("h", "f16")))}
    %t = pto.alloc_tile : {F}
    %ti = pto.alloc_tile : {I}
    %th = pto.alloc_tile : {H}
    pto.tload ins(%x_pt : !pto.partition_tensor_view<8x64xf32>) outs(%t : {F})
    pto.tcvt ins(%t{{rmode = #pto<round_mode ROUND>}} : {F}) outs(%ti : {I})
    pto.tcvt ins(%t{{rmode = #pto<round_mode FLOOR>}} : {F}) outs(%th : {H})
    pto.tstore ins(%ti : {I}) outs(%i_pt : !pto.partition_tensor_view<8x64xi32>)
    pto.tstore ins(%th : {H}) outs(%h_pt : !pto.partition_tensor_view<8x64xf16>)
    return
  }}
}}
"""
    kernel = pypto.load_pto(text)
    x = (np.random.default_rng(2).standard_normal((8, 64)) * 4).astype(np.float32)
    x[0, :4] = [2.5, -2.5, 0.5, 1.5]
    runs = _on_both_engines(kernel, [x, np.zeros((8, 64), np.int32),
                                     np.zeros((8, 64), np.float16)], monkeypatch)
    for _, i, h in runs:
        np.testing.assert_array_equal(i, np.where(x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5)))
        np.testing.assert_array_equal(h, x.astype(np.float16))


@pytest.mark.parametrize("text", [VADD, SPLITK, BROADCASTS], ids=["vadd", "splitk", "bcast"])
def test_the_reprint_is_pyptos_own_form(text, monkeypatch):
    """What PyPTO makes of foreign text prints as PyPTO's dialect: it reads back identically,
    PTOAS accepts it at level 3 (PyPTO's addresses and flags), and the cycle model times it."""
    from pypto.backends.ascend import ptoas
    from pypto.compiler.pto.printer import print_program
    from pypto.compiler.pto.reader import parse_program
    kernel = pypto.load_pto(text)
    printed = kernel.compiled.asm["pto"]
    assert print_program(parse_program(printed)) == printed
    if ORACLE:
        assert "TSTORE" in ptoas.lower(printed, os.path.join(ORACLE, "bin", "ptoas"))
    args = {"vadd": lambda: [*np.ones((3, 32, 32), np.float32), 1.0],
            "splitk": lambda: [*_mats(32, 32, 128), np.zeros((32, 32), np.float32)],
            "bcast": lambda: [*_broadcast_inputs(), 0]}[kernel.__name__.split("_")[0]
                                                      .replace("qk", "splitk")]()
    with pypto.Profiler() as prof:
        kernel[(1,)](*args)
    assert prof.kernels[0].npu_time_ms > 0


def test_a_tile_used_in_a_loop_keeps_its_bytes_for_the_whole_loop():
    """place_tiles: ``x``, read at the top of every iteration, may not share bytes with
    ``tmp``, first written further down the body (the next iteration reads ``x`` again);
    after the loop both are dead and ``after`` reuses the lowest bytes."""
    from pypto.target import get_target
    from pypto.compiler.pto.passes.place_tiles import place_tiles
    from pypto.compiler.pto.program import For, Scalar, Tile
    target = get_target("ascend910b1")
    x, acc, tmp, after = (Tile(n, "vec", pypto.language.float32, 8, 64, -1, 8, 64)
                          for n in ("x", "acc", "tmp", "after"))
    i = Scalar("i", pypto.language.int64)
    loop = For(i, i, i, i, [], [], [], [Inst("tadd", [acc, x], [acc]),
                                          Inst("texpands", [], [tmp], {"value": 1.0}),
                                          Inst("tadd", [acc, tmp], [acc])])
    body = [Inst("texpands", [], [x], {"value": 2.0}), Inst("texpands", [], [acc],
                                                            {"value": 0.0}),
            loop, Inst("tmuls", [acc, i], [after])]
    place_tiles([x, acc, tmp, after], body, {}, target)
    assert len({x.addr, acc.addr, tmp.addr}) == 3        # all three live through the loop
    assert after.addr in (x.addr, tmp.addr)              # dead after it: reused


@pytest.mark.heavy
def test_an_if_yielding_tiles(monkeypatch):
    """``%sel = scf.if ... -> (!pto.tile_buf<...>)`` with a different tile from each branch:
    the result is a tile both branches copy theirs into. The pto-isa engine runs PyPTO's
    reprint here (no ``assembler``): PTOAS a56b18c3's own C++ for a tile-valued ``scf.if``
    does not compile against pto-isa (it casts the Tile to ``float *``)."""
    monkeypatch.setenv("PYPTO_PTOAS", "")       # not the one a run may force (CI: 0.60)
    T = tb("vec", "f32", 16, 64)
    text = f"""module {{
  func.func @pick(%x: !pto.ptr<f32>, %y: !pto.ptr<f32>, %flag: i32) {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %c64 = arith.constant 64 : index
    %one = arith.constant 1.0 : f32
    %two = arith.constant 2.0 : f32
    %x_tv = pto.make_tensor_view %x, shape = [%c16, %c64], strides = [%c64, %c1] : !pto.tensor_view<?x?xf32>
    %y_tv = pto.make_tensor_view %y, shape = [%c16, %c64], strides = [%c64, %c1] : !pto.tensor_view<?x?xf32>
    %x_pt = pto.partition_view %x_tv, offsets = [%c0, %c0], sizes = [%c16, %c64] : !pto.tensor_view<?x?xf32> -> !pto.partition_tensor_view<16x64xf32>
    %y_pt = pto.partition_view %y_tv, offsets = [%c0, %c0], sizes = [%c16, %c64] : !pto.tensor_view<?x?xf32> -> !pto.partition_tensor_view<16x64xf32>
    %t = pto.alloc_tile : {T}
    %a = pto.alloc_tile : {T}
    %b = pto.alloc_tile : {T}
    pto.tload ins(%x_pt : !pto.partition_tensor_view<16x64xf32>) outs(%t : {T})
    %f = arith.index_cast %flag : i32 to index
    %on = arith.cmpi eq, %f, %c1 : index
    %sel = scf.if %on -> ({T}) {{
      pto.tadds ins(%t, %one : {T}, f32) outs(%a : {T})
      scf.yield %a : {T}
    }} else {{
      pto.tmuls ins(%t, %two : {T}, f32) outs(%b : {T})
      scf.yield %b : {T}
    }}
    pto.tstore ins(%sel : {T}) outs(%y_pt : !pto.partition_tensor_view<16x64xf32>)
    return
  }}
}}
"""
    kernel = pypto.load_pto(text)
    assert not find_hazards(kernel.program)
    x = np.random.default_rng(4).standard_normal((16, 64)).astype(np.float32)
    for flag, expected in ((1, x + 1), (0, x * 2)):
        for _, y, _ in _on_both_engines(kernel, [x, np.zeros_like(x), flag], monkeypatch):
            np.testing.assert_array_equal(y, expected)


@pytest.mark.heavy
def test_matmul_with_a_bias_table_and_other_fractal_orders(assembler, monkeypatch):
    """``tmatmul.bias`` through the bias table (a (1, N) row-major L1 tile moved to
    ``loc=bias``), with the left operand in col-major (zN) order: the same matrices."""
    left_zn = L32.replace("loc=left, dtype=f32, rows=32, cols=32, v_row=32, v_col=32, "
                          "blayout=row_major", "loc=left, dtype=f32, rows=32, cols=32, "
                          "v_row=32, v_col=32, blayout=col_major")
    bm = "!pto.tile_buf<loc=mat, dtype=f32, rows=1, cols=32, v_row=1, v_col=32, " \
         "blayout=row_major, slayout=none_box, fractal=512, pad=0>"
    bt = bm.replace("loc=mat", "loc=bias")
    text = SPLITK.replace("@qk_splitk(%q: !pto.ptr<f32>, %kt: !pto.ptr<f32>, %scores: "
                          "!pto.ptr<f32>)", "@qk_bias(%q: !pto.ptr<f32>, %kt: !pto.ptr<f32>, "
                          "%scores: !pto.ptr<f32>, %bias: !pto.ptr<f32>)")
    text = text.replace(L32, left_zn).replace("    %acc = pto.alloc_tile", f"""    %b_tv = pto.make_tensor_view %bias, shape = [%c1, %c32], strides = [%c32, %c1] : !pto.tensor_view<?x?xf32>
    %b_pt = pto.partition_view %b_tv, offsets = [%c0, %c0], sizes = [%c1, %c32] : !pto.tensor_view<?x?xf32> -> !pto.partition_tensor_view<1x32xf32>
    %b_mat = pto.alloc_tile : {bm}
    %b_tab = pto.alloc_tile : {bt}
    pto.tload ins(%b_pt : !pto.partition_tensor_view<1x32xf32>) outs(%b_mat : {bm})
    pto.tmov ins(%b_mat : {bm}) outs(%b_tab : {bt})
    %acc = pto.alloc_tile""")
    first = f"pto.tmatmul ins(%q_left, %k_right : {left_zn}, {R32}) outs(%acc : {A32})"
    assert first in text
    text = text.replace(first, f"pto.tmatmul.bias ins(%q_left, %k_right, %b_tab : {left_zn}, "
                               f"{R32}, {bt}) outs(%acc : {A32})")
    kernel = pypto.load_pto(text)
    q, k = _mats(32, 32, 128)
    bias = np.random.default_rng(5).standard_normal((1, 32)).astype(np.float32)
    for _, _, scores, _ in _on_both_engines(kernel, [q, k, np.zeros((32, 32), np.float32),
                                                     bias], monkeypatch):
        np.testing.assert_allclose(scores, q @ k + bias, rtol=1e-4, atol=1e-4)
    with pypto.Profiler() as prof:
        kernel[(1,)](q, k, np.zeros((32, 32), np.float32), bias)
    assert prof.kernels[0].npu_time_ms > 0          # the L1 -> bias table path is costed
