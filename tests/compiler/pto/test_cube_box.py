"""Cube tiles allocated in whole fractal boxes (passes/cube_box.py), their matrices kept as the
valid region.

The box rules are written out here from PTOAS's verifier (``getBoxedTileInnerShape``: fractal
1024 is 16 x 16; fractal 512 is 16 rows x 32 bytes with ``slayout=row_major``, 32 bytes x 16
columns with ``slayout=col_major``) and pto-isa's TMOV / TMATMUL shape rules, independently of
the compiler's ``fractal_box``. The oracle tests (``pto-oracle check`` / ``lower --level3`` /
``npu-check`` with ptoas 0.60 and 0.27) skip, saying why, without ``../shared/pto-oracle``
(or ``$PTO_ORACLE``).
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.compiler.pto.program import fractal_box
from pypto.language import dtypes as dt

from .corpus import matmul_single

ROOT = Path(__file__).resolve().parents[3]
I8, I32, F16, F32 = np.int8, np.int32, np.float16, np.float32


@pypto.jit
def matmul_a_trans(a, b, c, M: pl.constexpr, N: pl.constexpr, K: pl.constexpr):
    ta = pl.load(a, offsets=(0, 0), shape=(K, M))
    tb = pl.load(b, offsets=(0, 0), shape=(K, N))
    pl.store(c, offsets=(0, 0), value=pl.matmul(ta, tb, a_trans=True))


@pypto.jit
def matmul_k_loop(a, b, c, k_total, M: pl.constexpr, N: pl.constexpr, BK: pl.constexpr):
    """A run-time K loop that may not run: the accumulator is zeroed by a matmul of zero
    operands (pto/passes/acc_init.py), which must be allocated as the accumulator is."""
    acc = pl.zeros((M, N), dtype=pl.int32 if a.dtype == pl.int8 else pl.float32)
    for k in range(0, k_total, BK):
        ta = pl.load(a, offsets=(0, k), shape=(M, BK))
        tb = pl.load(b, offsets=(k, 0), shape=(BK, N))
        acc = pl.matmul(ta, tb, acc=acc)
    pl.store(c, offsets=(0, 0), value=acc)


# (kernel, operand dtype, M, N, K): int8 of 16 columns (L1's int8 box is 32 wide), float32
# of 8 rows (L1's box is 16 rows), float16 of 4 rows, K padding (int8 K = 16 < 32), odd sizes
PADDED = [
    (matmul_single, I8, 16, 16, 32),
    (matmul_single, I8, 16, 16, 16),
    (matmul_single, I8, 8, 24, 40),
    (matmul_single, F32, 8, 8, 8),
    (matmul_single, F32, 4, 12, 20),
    (matmul_single, F16, 4, 16, 16),
    (matmul_a_trans, F16, 4, 24, 8),
    (matmul_k_loop, I8, 16, 16, 32),
]
# every cube tile already whole boxes: nothing is padded
FITTING = [(matmul_single, F16, 32, 32, 32), (matmul_single, I8, 16, 32, 64),
           (matmul_single, F32, 16, 16, 16), (matmul_k_loop, F16, 16, 16, 16)]


def _args(kernel, dtype, m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == I8:
        make = lambda *s: rng.integers(-128, 128, s).astype(I8)   # noqa: E731
    else:
        make = lambda *s: rng.standard_normal(s).astype(dtype)   # noqa: E731
    a = make(k, m) if kernel is matmul_a_trans else make(m, 2 * k if kernel is matmul_k_loop
                                                          else k)
    b = make(2 * k if kernel is matmul_k_loop else k, n)
    c = np.zeros((m, n), I32 if dtype == I8 else F32)
    args = (a, b, c, 2 * k) if kernel is matmul_k_loop else (a, b, c)
    params = dict(M=m, N=n, BK=k) if kernel is matmul_k_loop else dict(M=m, N=n, K=k)
    return args, params


def _reference(kernel, args) -> np.ndarray:
    a, b = (x.astype(np.float64) for x in args[:2])
    return (a.T if kernel is matmul_a_trans else a) @ b


def _pto(kernel, dtype, m, n, k) -> str:
    args, params = _args(kernel, dtype, m, n, k)
    return kernel.compile(*args, **params).asm["pto"]


_TYPE = re.compile(r"!pto\.tile_buf<([^>]*)>")


def _fields(type_text: str) -> dict:
    return dict(item.split("=", 1) for item in type_text.replace(" ", "").split(","))


def _box(f: dict) -> tuple[int, int] | None:
    """PTOAS's inner box of a tile type (getBoxedTileInnerShape), from its own fields."""
    if f["slayout"] == "none_box":
        return None
    if f["fractal"] == "1024":
        return 16, 16
    per = 32 // (int(re.search(r"\d+", f["dtype"]).group()) // 8)
    return (16, per) if f["slayout"] == "row_major" else (per, 16)


def _cube_types(text: str) -> list[dict]:
    return [f for f in map(_fields, _TYPE.findall(text)) if f["loc"] != "vec"]


def _operands(text: str, op: str) -> list[list[dict]]:
    """The tile types of each ``op`` line, in order (ins then outs)."""
    return [[_fields(t) for t in _TYPE.findall(line)] for line in text.splitlines()
            if line.strip().startswith(f"pto.{op} ")]


def _shape(f: dict) -> tuple[int, int]:
    return int(f["rows"]), int(f["cols"])


@pytest.mark.parametrize("case", PADDED, ids=lambda c: f"{c[0].__name__}-{np.dtype(c[1])}-"
                         f"{'x'.join(map(str, c[2:]))}")
def test_cube_tiles_are_whole_boxes_along_the_chain(case):
    text = _pto(*case)
    types = _cube_types(text)
    assert any(_shape(f) != (int(f["v_row"]), int(f["v_col"])) for f in types
               if f["v_row"] != "?"), "expected some padding for this shape"
    for f in types:
        box = _box(f)
        assert box is not None
        rows, cols = _shape(f)
        assert rows % box[0] == 0 and cols % box[1] == 0, f
        if f["v_row"] != "?":
            assert int(f["v_row"]) <= rows and int(f["v_col"]) <= cols, f
    for src, dst in _operands(text, "tmov"):          # pto-isa: src and dst of one shape
        assert _shape(src) == _shape(dst), (src, dst)
        assert (src["v_row"], src["v_col"]) == (dst["v_row"], dst["v_col"])
    matmuls = _operands(text, "tmatmul") + [t[1:] for t in _operands(text, "tmatmul.acc")]
    assert matmuls
    for left, right, acc in matmuls:                   # cpu/TMatmul.hpp CheckMadValid
        assert int(left["rows"]) == int(acc["rows"])
        assert int(left["cols"]) == int(right["rows"])
        assert int(right["cols"]) == int(acc["cols"])
        assert left["v_col"] == right["v_row"]


def test_the_valid_region_is_the_users_matrix():
    """int8 16x32 @ 32x16: L1/L0B of B are 32x32 (L1's box is 32 int8 wide, and the move to
    L0B keeps the shape), L0C 16x32; each holds the 32x16 / 16x16 matrix as its valid region."""
    text = _pto(matmul_single, I8, 16, 16, 32)
    declared = {m.group(1): _fields(m.group(2)) for m in re.finditer(
        r"%(\w+) = pto\.alloc_tile addr = \S+ : !pto\.tile_buf<([^>]*)>", text)}
    got = sorted((f["loc"], _shape(f), (int(f["v_row"]), int(f["v_col"])))
                 for f in declared.values() if f["loc"] != "vec")
    assert got == sorted([("mat", (16, 32), (16, 32)), ("mat", (32, 32), (32, 16)),
                          ("left", (16, 32), (16, 32)), ("right", (32, 32), (32, 16)),
                          ("acc", (16, 32), (16, 16))])
    # B's L1 fill before its load covers the whole allocation (the K padding is zero); A's
    # window is whole at compile time and its tile is its box: no fill (passes/fillpad.py)
    fills = [_fields(t) for line in text.splitlines() if "pto.texpands" in line
             for t in _TYPE.findall(line)]
    assert sorted((_shape(f), f["dtype"]) for f in fills) == [((32, 16), "i16")]
    assert all((f["v_row"], f["v_col"]) == (f["rows"], f["cols"]) for f in fills)


def test_the_memory_plan_counts_the_padded_bytes():
    args, params = _args(matmul_single, I8, 16, 16, 32)
    used = matmul_single.compile(*args, **params).metadata["buffer_bytes"]
    assert used["mat"] == 16 * 32 + 32 * 32     # A as is, B padded to 32 columns
    assert used["right"] == 32 * 32
    assert used["acc"] == 16 * 32 * 4           # 16x16 int32 padded to 32 columns


@pytest.mark.parametrize("case", FITTING, ids=lambda c: f"{c[0].__name__}-{np.dtype(c[1])}-"
                         f"{'x'.join(map(str, c[2:]))}")
def test_tiles_that_fit_the_box_are_not_padded(case):
    for f in _cube_types(_pto(*case)):
        if f["v_row"] != "?":
            assert _shape(f) == (int(f["v_row"]), int(f["v_col"])), f


def test_fractal_box_is_ptoas_inner_box():
    assert fractal_box("mat", dt.int8) == (16, 32)
    assert fractal_box("left", dt.float32) == (16, 8)
    assert fractal_box("right", dt.int8) == (32, 16)
    assert fractal_box("right", dt.float16) == (16, 16)
    assert fractal_box("acc", dt.int32) == (16, 16)
    assert fractal_box("vec", dt.float32) is None


@pytest.mark.parametrize("case", PADDED, ids=lambda c: f"{c[0].__name__}-{np.dtype(c[1])}-"
                         f"{'x'.join(map(str, c[2:]))}")
def test_padded_kernels_compute_the_product(case):
    """The native engine (which keeps the matrices dense) and the reprint of the .pto
    (PYPTO_VERIFY_PTO: print -> parse -> print is the identity) on the padded kernels."""
    kernel, dtype, m, n, k = case
    args, params = _args(kernel, dtype, m, n, k, seed=1)
    kernel[(1,)](*args, **params)
    tol = 0 if dtype == I8 else 1e-3 * max(1.0, float(np.abs(_reference(kernel, args)).max()))
    np.testing.assert_allclose(args[2], _reference(kernel, args), rtol=0, atol=tol)


# -- the real assembler -----------------------------------------------------------------------

def _oracle() -> Path:
    d = Path(os.environ["PTO_ORACLE"]) if os.environ.get("PTO_ORACLE") else \
        ROOT.parent / "shared" / "pto-oracle"
    if not (d / "pto-oracle").is_file():
        pytest.skip(f"pto-oracle not found at {d} (set PTO_ORACLE to the pto-oracle directory)")
    return d / "pto-oracle"


def _run(oracle: Path, version: str, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PTO_ORACLE_VERSION": version}
    if version == "0.60":
        env.pop("PTO_ORACLE_VERSION")         # the default
    return subprocess.run([str(oracle), *map(str, args)], capture_output=True, text=True,
                          timeout=600, env=env)


@pytest.mark.parametrize("version", ["0.60", "0.27"])
def test_ptoas_accepts_and_lowers_the_padded_kernels(version, tmp_path, monkeypatch):
    """ptoas 0.60 refused every one of these ("boxed tile cols to be a multiple of innerCols
    (32), but got 16", "rows ... innerRows (16), but got 8"); the lowered kernels also compile
    against pto-isa's NPU headers (whose Tile static_asserts are the same rule). Each is
    printed for the version that checks it."""
    oracle = _oracle()
    bin_dir = oracle.parent / "bin" / ("" if version == "0.60" else version)
    monkeypatch.setenv("PYPTO_PTOAS", str(bin_dir / "ptoas"))
    files = []
    for i, case in enumerate(PADDED):
        path = tmp_path / f"k{i}.pto"
        path.write_text(_pto(*case))
        files.append(path)
    check = _run(oracle, version, "check", *files)
    assert check.returncode == 0, check.stdout + check.stderr
    cpps = []
    for path in files:
        out = path.with_suffix(".cpp")
        low = _run(oracle, version, "lower", path, "-o", out, "--level3")
        assert low.returncode == 0 and out.stat().st_size > 0, low.stderr[-2000:]
        cpps.append(out)
    if version == "0.60":
        # int8 16x16x32, float32 8^3, the int8 K loop with its padded zero operands
        npu = _run(oracle, version, "npu-check", cpps[0], cpps[3], cpps[-1])
        assert npu.returncode == 0, npu.stdout[-3000:] + npu.stderr[-2000:]
