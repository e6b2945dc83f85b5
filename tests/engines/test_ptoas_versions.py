"""The pto-isa engine runs the C++ of either ptoas: 0.27 (PTOAS a56b18c3) and 0.60 (e32488c9).

0.60's C++ differs where the engine meets it (pto-oracle's README): functions carrying
``pto.entry`` are ``extern "C" __global__ AICORE``; cube<->vector and SYNCALL flags are
``__builtin_cce_ffts_cross_core_sync`` / ``__builtin_cce_wait_flag_dev``; ``TCI`` and narrowing
``TCVT`` take a tmp tile. 0.60 also wants a different ``.pto`` (``pto.entry``, ``set_ffts`` of
a ``!pto.ptr<i64>``, the tmp tiles): until the printer writes it, ``as_060`` edits PyPTO's
0.27 text into that form, as the printer will (a no-op on text already in it).
"""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

from pypto.backends.ptoisa import engine
from tests.engines.tools import needs_tools

ORACLE = os.environ.get("PTO_ORACLE", "")
PTOAS = {"0.27": os.path.join(ORACLE, "bin", "0.27", "ptoas"),
         "0.60": os.path.join(ORACLE, "bin", "ptoas")}
pytestmark = [needs_tools,
              pytest.mark.skipif(not all(os.access(p, os.X_OK) for p in PTOAS.values()),
                                 reason="needs both ptoas versions of pto-oracle (PTO_ORACLE: "
                                        "bin/ptoas is 0.60, bin/0.27/ptoas 0.27)"),
              pytest.mark.filterwarnings("ignore::pypto.LaunchWarning")]

_SIZE = {"f32": 4, "i32": 4, "ui32": 4, "f16": 2, "bf16": 2, "i16": 2, "ui16": 2, "i8": 1,
         "ui8": 1}
_NARROWING = {("f32", "i16"), ("f16", "i16"), ("f16", "i8")}     # non-saturating: need a tmp
_TCI_TMP = ("!pto.tile_buf<loc=vec, dtype=f32, rows=1, cols=192, v_row=1, v_col=192, "
            "blayout=row_major, slayout=none_box, fractal=512, pad=0>")


def as_060(text: str) -> str:
    """PyPTO's ptoas-0.27 ``.pto`` in ptoas 0.60's form: what the printer is changing to."""
    text = re.sub(r"attributes \{pto\.kernel_kind", "attributes {pto.entry, pto.kernel_kind",
                  text)
    text = text.replace("memref<256xi64>", "!pto.ptr<i64>")
    return "".join(_with_tmps(f) for f in re.split(r"(?=^  func\.func )", text, flags=re.M))


def _with_tmps(func: str) -> str:
    """tci and narrowing tcvt with a tmp tile, each allocated past the function's UB tiles."""
    consts = dict(re.findall(r"(%c\w+_i64) = arith\.constant (\d+) : i64", func))
    ends = [int(consts[a]) + int(r) * int(c) * _SIZE[d] for a, d, r, c in re.findall(
        r"alloc_tile addr = (%\w+) .*?loc=vec, dtype=(\w+), rows=(\d+), cols=(\d+)", func)]
    free, allocs, tmps = -(-max(ends, default=0) // 512) * 512, [], {}

    def tmp(ty: str) -> str:
        nonlocal free
        if ty not in tmps:
            r, c, d = (re.search(rf"{k}=(\w+)", ty).group(1) for k in ("rows", "cols", "dtype"))
            name = f"%pypto_tmp{len(tmps)}"
            allocs.append(f"    {name}.addr = arith.constant {free} : i64\n"
                          f"    {name} = pto.alloc_tile addr = {name}.addr : {ty}\n")
            tmps[ty], free = name, free + -(-int(r) * int(c) * _SIZE[d] // 512) * 512
        return tmps[ty]

    def tci(m):
        return f"pto.tci ins({m[1]}, {tmp(_TCI_TMP)} : {m[2]}, {_TCI_TMP}) outs("

    def tcvt(m):
        src, dst = re.search(r"dtype=(\w+)", m[3])[1], re.search(r"dtype=(\w+)", m[4])[1]
        if (src, dst) not in _NARROWING:
            return m[0]
        return f"pto.tcvt ins({m[1]}, {tmp(m[3])}{m[2]} : {m[3]}, {m[3]}) outs({m[5]} : {m[4]})"

    func = re.sub(r"pto\.tci ins\((%[\w.]+) : (\w+)\) outs\(", tci, func)
    func = re.sub(r"pto\.tcvt ins\((%[\w.]+)( \{[^}]*\})? : (!pto\.tile_buf<[^>]*>)\) "
                  r"outs\((%[\w.]+) : (!pto\.tile_buf<[^>]*>)\)",
                  lambda m: tcvt([m[0], m[1], m[2] or "", m[3], m[5], m[4]]), func)
    if not allocs:
        return func
    at = func.index("\n", func.index("pto.alloc_tile")) + 1
    return func[:at] + "".join(allocs) + func[at:]


def _case(name: str):
    from tests.compiler.pto import corpus
    corpus.BY_NAME[name].build()
    return corpus.LAST_CALL[0]


def _jit(kernel, engine_name):
    import pypto
    return pypto.jit(kernel.fn, target=kernel.target_name, auto_sync=kernel.auto_sync,
                     engine=engine_name, dynamic=dict(kernel.dynamic),
                     do_not_specialize=tuple(kernel.do_not_specialize))


def _launch(kernel, args, kwargs) -> list:
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    kwargs = {n: v.copy() if isinstance(v, np.ndarray) else v for n, v in kwargs.items()}
    grid = kwargs.pop("grid", None)
    (kernel if grid is None else kernel[grid])(*args, **kwargs)
    return [a for a in list(args) + list(kwargs.values()) if isinstance(a, np.ndarray)]


def _on_ptoas(kernel, version: str, args, kwargs, monkeypatch):
    """A pto-isa build of the kernel lowered by that ptoas (0.60: from ``as_060``'s text)."""
    sim = _jit(kernel, "pto-isa")
    compiled = sim.compile(*args, **{n: v for n, v in kwargs.items() if n != "grid"})
    if version == "0.60":
        compiled.asm["pto"] = as_060(compiled.asm["pto"])
    compiled.asm.pop("cpp", None)
    with monkeypatch.context() as m:         # only for this build: the jit's key names ptoas
        m.setenv("PYPTO_PTOAS", PTOAS[version])
        compiled.simulated = engine.load(compiled, compiled.cache_key)
    return sim, compiled


# mixed cube/vector (one after the other; both at once), a SYNCALL, tci, narrowing tcvt
CASES = ["rt_mixed", "matmul_softmax_mixed", "tut05_scale_barrier", "creation", "elementwise_i8"]


@pytest.mark.parametrize("version", ["0.27", "0.60"])
@pytest.mark.parametrize("name", CASES)
def test_a_corpus_kernel_agrees_with_native_on_either_ptoas(name, version, monkeypatch):
    kernel, args, kwargs = _case(name)
    sim, compiled = _on_ptoas(kernel, version, args, kwargs, monkeypatch)
    assert ('extern "C" __global__ AICORE' in compiled.asm["cpp"]) == (version == "0.60")
    want = _launch(_jit(kernel, "native"), args, kwargs)
    for i, (got, ref) in enumerate(zip(_launch(sim, args, kwargs), want)):
        if ref.dtype.kind in "iub":
            np.testing.assert_array_equal(got, ref, err_msg=f"{name} output {i}")
        else:
            np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64),
                                       rtol=1e-5, atol=1e-5 * max(1.0, np.abs(ref).max()),
                                       err_msg=f"{name} output {i}")


def test_a_never_met_barrier_is_a_deadlock_error_on_060(monkeypatch):
    """0.60's SYNCALL is __builtin_cce_*: a barrier one block skips still ends in an error."""
    monkeypatch.setenv("PYPTO_SYNC_TIMEOUT", "1")
    kernel, args, kwargs = _case("tut05_never_met")
    sim, _ = _on_ptoas(kernel, "0.60", args, kwargs, monkeypatch)
    with pytest.raises(engine.SimulatorError, match="deadlock"):
        _launch(sim, args, kwargs)


def test_two_kernels_of_one_name_share_a_060_library(monkeypatch):
    """0.60's ``extern "C"`` entry functions: two specialisations of one kernel in one batch
    (one C++ namespace each) were one C function defined twice."""
    kernel, args, kwargs = _case("tut01_vector_add")
    sim = _jit(kernel, "pto-isa")
    blocks = [256, 128]
    compiled = [sim.compile(*args, BLOCK=b) for b in blocks]
    for c in compiled:
        c.asm["pto"] = as_060(c.asm["pto"])
        c.asm.pop("cpp", None)
    with monkeypatch.context() as m:
        m.setenv("PYPTO_PTOAS", PTOAS["0.60"])
        built = engine.load_batch(compiled, [c.cache_key for c in compiled])
    x, y, out = (a.copy() for a in args)
    for c, b in zip(built, blocks):
        out[:] = 0
        c.launch((-(-x.size // b),), {"x": x, "y": y, "out": out})
        np.testing.assert_array_equal(out, x + y)


def test_as_060_is_what_ptoas_060_accepts_and_idempotent():
    for name in CASES:
        kernel, args, kwargs = _case(name)
        text = _jit(kernel, "pto-isa").compile(
            *args, **{n: v for n, v in kwargs.items() if n != "grid"}).asm["pto"]
        assert as_060(as_060(text)) == as_060(text)


def test_flash_attention_parts_run_together_on_060(monkeypatch):
    """Tutorial 12's cube and vector parts hand tiles both ways every iteration: the vector
    function runs on a second thread, the 0.60 builtins meeting through the block's Cluster
    (and its workspace, which the window check must accept on both threads)."""
    from pypto.backends.ptoisa import entry
    from tests.test_flash_attention import fa
    q, k, v = fa.inputs(np.random.default_rng(7), 1, 2, 100, 64)
    out = np.full_like(q, np.nan)
    grid, args, meta = fa.launch_args(q, k, v, out, False)
    sim, compiled = _on_ptoas(fa.flash_attention_kernel, "0.60", args, meta, monkeypatch)
    assert entry.parts_run_together(compiled.asm["pto"])
    sim[grid](*args, **meta)
    np.testing.assert_allclose(out.astype(np.float32), fa.reference(q, k, v), **fa.TOLERANCE)
