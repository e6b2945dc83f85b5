"""The A2/A3 forms the printer writes, one rule each (docs/pto.md). Every one of these printed
something PTOAS rejects before (test_conformance.py checks the whole corpus with the real
assembler when it is installed; these need no assembler)."""
import re

import numpy as np

import pypto
import pypto.language as pl


@pypto.jit
def rows(x, out, R: pl.constexpr, C: pl.constexpr):
    pid = pl.program_id(0)
    t = pl.load(x, offsets=(pid * R, 0), shape=(R, C), padding=float("-inf"))
    pl.store(out, offsets=(pid * R, 0), value=t - pl.max(t, axis=1, keepdims=True))


@pypto.jit
def grid2d(x, out, B: pl.constexpr):
    i, j = pl.program_id(0), pl.program_id(1)
    pl.store(out, offsets=(j * B, i * B), value=pl.load(x, offsets=(j * B, i * B),
                                                          shape=(B, B)) * pl.num_programs(1))


@pypto.jit
def bits(x, out, B: pl.constexpr):
    t = pl.load(x, offsets=(0,), shape=(B,))
    pl.store(out, offsets=(0,), value=(t & 0xF0F) | (t ^ 3))


@pypto.jit
def mm(a, b, c, K, BK: pl.constexpr):
    acc = pl.zeros((32, 32), dtype=pl.float32)
    for k in range(0, K, BK):
        acc = pl.matmul(pl.load(a, offsets=(0, k), shape=(32, BK)),
                        pl.load(b, offsets=(k, 0), shape=(BK, 32)), acc=acc)
    pl.store(c, offsets=(0, 0), value=acc)


def _pto(kernel, *args, **kw) -> str:
    return pypto.jit(kernel.fn).compile(*args, **kw).asm["pto"]


def test_an_edge_window_is_a_clipped_partition_with_a_valid_region_and_its_padding():
    x = np.zeros((37, 100), np.float32)           # 100 columns in 128-wide tiles
    text = _pto(rows, x, x, R=8, C=128)
    assert re.search(r"%pv1\.v1 = arith\.minsi %pv1\.m1, %c128_index : index", text)
    assert "sizes = [%pv1.v0, %pv1.v1] : !pto.tensor_view<?x?xf32> -> " \
           "!pto.partition_tensor_view<?x?xf32>" in text
    assert re.search(r"valid_row = %pv1\.v0 valid_col = %pv1\.v1 : !pto\.tile_buf<loc=vec, "
                     r"dtype=f32, rows=8, cols=128, v_row=\?, v_col=\?.*pad=3>", text)  # -inf
    fill, wait = text.index("pto.tfillpad"), text.index("pto.wait_flag[<PIPE_MTE2>, <PIPE_V>")
    assert wait < fill < text.index("pto.trowmax")  # padded after the load, before its use
    assert "i64" not in text.split("pto.make_tensor_view")[1].split("\n")[0]   # index views
    assert "trowmax ins(%vec" in text and re.search(r"trowmax ins\(%\w+, %\w+ :", text)  # tmp


def test_a_two_dimensional_grid_is_one_linear_block_index():
    x = np.zeros((64, 64), np.float32)
    text = _pto(grid2d, x, x, B=32)
    assert "%pypto_grid0: i64, %pypto_grid1: i64" in text
    assert text.count("pto.get_block_idx") == 2 and "{dim" not in text
    assert re.search(r"= arith\.remsi %\w+\.b, %pypto_grid0 : i64", text)        # axis 0
    assert re.search(r"= arith\.remsi %\w+\.q, %pypto_grid1 : i64", text)        # axis 1


def test_int32_bitwise_ops_run_on_i16_views():
    x = np.zeros(64, np.int32)
    text = _pto(bits, x, x, B=64)
    ops = [ln for ln in text.splitlines() if re.search(r"pto\.t(and|or|xor)s? ", ln)]
    assert ops and all("dtype=i16" in ln and "dtype=i32" not in ln for ln in ops)
    assert "pto.tands" not in text and "pto.txors" not in text     # scalars became tiles


def test_an_accumulator_is_never_filled():
    a = np.zeros((32, 64), np.float16)
    text = _pto(mm, a, a.T.copy(), np.zeros((32, 32), np.float32), 64, BK=32)
    assert not re.search(r"pto\.texpands .*outs\(%\w+ : !pto\.tile_buf<loc=acc", text)
    assert "pto.tmatmul ins(" in text and "pto.tmatmul.acc ins(" in text


# -- rules found by running the .pto on pto-isa's CPU simulator (docs/engines.md) ---------------

@pypto.jit
def weight_row(x, w, y, M: pl.constexpr, N: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(M, N))
    wt = pl.load(w, offsets=(0,), shape=(N,))
    pl.store(y, offsets=(0, 0), value=t * wt[None, :])


@pypto.jit
def special_constants(x, out, N: pl.constexpr):
    t = pl.load(x, offsets=(0,), shape=(N,))
    pl.store(out, offsets=(0,), value=pl.maximum(t * 1e-05, float("-inf")) + pl.max(t))


@pypto.jit
def bool_to_float(x, out, a, b, N: pl.constexpr):
    t = pl.load(x, offsets=(0,), shape=(N,))
    flag = (a > 0) & (b > 0)
    pl.store(out, offsets=(0,), value=t * flag.to(pl.float32))


def test_a_reshape_is_a_view_of_its_sources_bytes():
    """A2/A3's TRESHAPE renames its source's bytes; memory planning gives the result the
    source's buffer (memory_plan._byte_view), so no TMOV copies it (it did, into a buffer
    of its own: 512 bytes here, a wide row's 32 KiB in a two-stage row reduction)."""
    x = np.zeros((8, 128), np.float32)
    text = _pto(weight_row, x, np.zeros(128, np.float32), x, M=8, N=128)
    view = re.search(r"(%\w+)\.(rs\d+) = pto\.treshape (%\w+) :", text)
    assert view and "pto.tmov" not in text


def test_float_constants_are_mlir_literals_and_non_finite_ones_are_bitcast_bits():
    text = _pto(special_constants, np.zeros(64, np.float32), np.zeros(64, np.float32), N=64)
    assert "1.0e-05 : f32" in text and not re.search(r"constant \d+e", text)
    assert "0xFF800000" not in text                      # ptoas would print -Inf.0f
    bits = re.search(r"(%[\w]+)\.b = arith\.constant -8388608 : i32", text)   # -inf's bits
    assert bits and f"{bits.group(1)} = arith.bitcast {bits.group(1)}.s : i32 to f32" in text


def test_bool_to_float_is_a_select_not_uitofp():
    x = np.zeros(64, np.float32)
    text = _pto(bool_to_float, x, x, 1, 2, N=64)
    assert "uitofp" not in text and re.search(r"arith\.select %\w+, %\w+\.one, %\w+\.zero : f32",
                                              text)


@pypto.jit
def column_bits(x, out, M: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(M, 1))
    pl.store(out, offsets=(0, 0), value=t ^ 5)


def test_the_i16_view_of_a_column_tile_is_its_row():
    """An (M, 1) tile's M elements are contiguous (DN): its i16 view for a bitwise op is one
    row of 2M halves, not M rows of one element (pto-isa read elements 1.. as zeros)."""
    x = np.zeros((30, 1), np.int32)
    text = _pto(column_bits, x, x, M=30)
    views = re.findall(r"= pto\.alloc_tile addr = %\w+ : !pto\.tile_buf<loc=vec, dtype=i16, "
                       r"rows=(\d+), cols=(\d+), v_row=(\d+), v_col=(\d+)", text)
    assert views and all(v == ("1", "64", "1", "60") for v in views), views


@pypto.jit
def shift_by(x, out, s, B: pl.constexpr):
    pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(B,)) << s)


@pypto.jit
def shift_k(x, out, S: pl.constexpr, B: pl.constexpr):
    pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(B,)) << S)


def test_unsigned_scalars_use_unsigned_forms():
    """arith's integers are signless; a uint8 scalar (a weak scalar taking a uint8 tile's
    dtype) was clamped with minsi, which read 253 (-3 as uint8) as -3: a shift by 0."""
    x = np.zeros(16, np.uint8)
    text = _pto(shift_by, x, x, -3, B=16)
    assert re.search(r"arith\.minui %s\d+, %s\d+ : i8", text)
    assert not re.search(r"arith\.(min|max)si %s\d+, %s\d+ : i8", text)


def test_a_shift_amount_only_known_at_run_time_is_clamped_first():
    """The chip's shift instructions are undefined for amounts outside [0, bits): a runtime
    amount reaches them clamped to [0, 31], then a second shift by 0 or 1 finishes amounts
    >= 32 (legalize_types._guarded_shift); a constant amount in range is shifted once."""
    x = np.zeros(16, np.int32)
    text = _pto(shift_by, x, x, 40, B=16)
    first, second = re.findall(r"pto\.tshls ins\(%\w+, (%s\d+)", text)
    assert re.search(rf"{first} = arith\.minsi %s\d+, %s\d+ : i32", text)
    assert re.search(rf"{second} = arith\.subi %s\d+, {first} : i32", text)
    assert _pto(shift_k, x, x, S=3, B=16).count("pto.tshls") == 1


@pypto.jit
def named_like_the_printer(x, y, n, pv1, pv2, q1, q2, m1, m2, m3):
    for m in range(n):
        r = (m % 3 + pv1 % 2 + pv2 + q1 + q2 + m1 + m2 + m3) % 4
        pl.store(y, offsets=(m * 8, 0), value=pl.load(x, offsets=(r * 8, 0), shape=(8, 16)))


def test_the_printers_own_names_differ_from_the_programs():
    """Partitions (%pv1) and a scalar %'s quotient and remainder (%q1, %m2) are the printer's
    own names; a parameter, or a loop variable (m is %m<k> in the program), of the same name
    once gave the .pto two definitions of it, which PTOAS rejects."""
    x = np.zeros((32, 16), np.float32)
    pto = named_like_the_printer.compile(x, x.copy(), 4, *[3] * 7).asm["pto"]    # 1 folds
    defined = re.findall(r"^\s*(%[\w.]+) = ", pto, re.M) + re.findall(r"(%\w+): ", pto) + \
        re.findall(r"scf\.for (%\w+) ", pto)
    assert {"%pv1", "%q1", "%m2"} <= set(defined)
    assert len(defined) == len(set(defined)), sorted(d for d in defined if defined.count(d) > 1)


@pypto.jit
def select_wide(x, out, N: pl.constexpr):
    t = pl.load(x, offsets=(0, 0), shape=(2, N))
    pl.store(out, offsets=(0, 0), value=pl.where(t > 0, t, -t))


def test_a_mask_row_is_whole_32_bytes():
    """A mask of 300 columns takes 38 bytes a row; PTOAS 0.60 (and pto-isa) want row-major
    rows in whole 32 bytes, so it is allocated 64 (printed 38 before)."""
    x = np.zeros((2, 300), np.float32)
    text = select_wide.compile(x, x, N=300).asm["pto"]
    masks = set(re.findall(r"dtype=ui8, rows=2, cols=(\d+), v_row=2, v_col=(\d+)", text))
    assert masks == {("64", "38")}, masks


def test_loops_bounded_by_the_block_index_are_index_loops():
    """PTOAS 0.60's EmitC rejects an i64 loop whose bounds come from get_block_idx /
    get_block_num; such a loop runs over ``index`` (docs/pto.md, "The loop-bound bug")."""
    @pypto.jit
    def persistent(x, out, B: pl.constexpr):
        for t in range(pl.program_id(0), 16, pl.num_programs(0)):
            for u in range(t, t + 1):
                pl.store(out, offsets=(u * B,), value=pl.load(x, offsets=(u * B,), shape=(B,)))
        for v in range(0, 2):
            pl.store(out, offsets=(v * B,), value=pl.load(x, offsets=(v * B,), shape=(B,)))

    x = np.zeros(16 * 8, np.float32)
    text = persistent.compile(x, x, B=8).asm["pto"]
    index_loops = re.findall(r"scf\.for (%\w+)\.ix = \1\.lb to \1\.ub step \1\.st \{\n\s*"
                             r"\1 = arith\.index_cast \1\.ix : index to i64", text)
    assert len(index_loops) == 1, text          # the block-bounded loop only: 0.60 lowers
    assert len(re.findall(r"scf\.for .* : i64 \{", text)) == 2    # the i64 loop inside it


def test_cube_operand_views_have_the_static_axes_the_npu_tload_wants():
    """A2/A3's TLOAD into an L1 tile takes an ND view only with static 1s on its three
    leading axes (ND2NZ) and an NZ view only with static fractal axes (pto-isa
    tload_common.hpp); PTOAS makes the GlobalTensor's static shape from the partition's
    type, which printed every axis as ``?`` (pto-oracle npu-check refused NZ, NC1HWC0 and
    rank-3 matmul operands)."""
    from pypto import layout
    from tests.language.test_rank34 import batched_matmul
    from tests.test_layout_kernels import conv1x1, nz_matmul
    r = np.random.default_rng(0)
    text = _pto(nz_matmul, layout.nz(r.random((40, 24), np.float32)),
                layout.nz(r.random((24, 40), np.float32)), np.zeros((40, 40), np.float32),
                BM=16, BN=16, BK=16)
    assert "-> !pto.partition_tensor_view<1x?x?x16x8xf32>" in text
    text = _pto(conv1x1, layout.nc1hwc0(r.random((2, 40, 4, 8)).astype(np.float16)),
                np.zeros((48, 32), np.float16), np.zeros((64, 32), np.float32), P=32, O=32)
    assert "-> !pto.partition_tensor_view<1x1x1x?x?xf16>" in text
    assert "?x?x?x?x?xf16>" not in text.split("-> !pto.partition")[1].split("\n")[0]
    text = _pto(batched_matmul, np.zeros((5, 13, 40), np.float16),
                np.zeros((20, 40), np.float16), np.zeros((5, 13, 20), np.float32), B=2, M=16,
                K=40, N=32, BK=16, A_BATCH=True, B_BATCH=False, A_T=False, B_T=True,
                grid=(3,))
    assert "-> !pto.partition_tensor_view<1x?x?xf16>" in text
