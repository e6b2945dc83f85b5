"""Mixed cube/vector kernels under the chip's launch rules (issue 30, item 2): every block
receives the same arguments, so the GM workspace is one allocation indexed by the block in the
``.pto``; and the vector function runs on both AIV cores of a cluster, sub-block 1 keeping step
through FFTS mode 2 (a cube's flag reaches both AIVs, the cube waits for both). pto-isa's
engine launches that way, so it proves the printed program: the same program with its block
index or its second vector core's part taken out fails there."""
import re

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.backends.ptoisa.engine import SimulatorError
from tests.engines.tools import needs_tools


@pypto.jit
def mm_rows(a, b, out, BM: pl.constexpr, N: pl.constexpr, K: pl.constexpr,
            STEPS: pl.constexpr):
    """A hand-off per loop iteration (the vector core acknowledges each one)."""
    p = pl.program_id(0)
    y = pl.load(b, offsets=(0, 0), shape=(K, N))
    for i in range(STEPS):
        row = (p * STEPS + i) * BM
        s = pl.matmul(pl.load(a, offsets=(row, 0), shape=(BM, K)), y)
        pl.store(out, offsets=(row, 0), value=pl.exp(s - pl.max(s, axis=1, keepdims=True)))


def _case():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 32)).astype(np.float16)
    b = rng.standard_normal((32, 32)).astype(np.float16)
    s = a.astype(np.float32) @ b.astype(np.float32)
    return a, b, np.exp(s - s.max(1, keepdims=True))


GRID, KW = (4,), {"BM": 16, "N": 32, "K": 32, "STEPS": 2}


def _pto():
    a, b, _ = _case()
    return mm_rows.compile(a, b, np.zeros((128, 32), np.float32), **KW).asm["pto"]


def test_the_pto_indexes_the_workspace_by_block_and_splits_the_two_vector_cores():
    text = _pto()
    view = re.search(r"pto\.make_tensor_view %pypto_workspace0, shape = \[(\S+), ", text)
    assert view and view.group(1) == "%pypto_workspace0.nbx"        # get_block_num slots
    assert "%pypto_workspace0.bk = pto.get_block_idx" in text
    vector = text[text.index("kernel_kind<vector>"):]
    assert "%pypto_sb = pto.get_subblock_idx" in vector
    part, skeleton = vector.split("} else {", 1)
    assert "pto.tload" in part and "pto.tload" not in skeleton.split("return")[0]
    assert skeleton.count("pto.sync.wait") == part.count("pto.sync.wait")
    assert skeleton.count("pto.sync.set") == part.count("pto.sync.set")


def _run(text, engine):
    a, b, want = _case()
    out = np.zeros((128, 32), np.float32)
    pypto.load_pto(text, engine=engine)[GRID](a, b, out)
    return out, want


def test_the_mixed_kernel_is_right_on_the_host():
    a, b, want = _case()
    out = np.zeros((128, 32), np.float32)
    mm_rows[GRID](a, b, out, **KW)
    np.testing.assert_allclose(out, want, rtol=2e-3, atol=2e-3)


def test_a_loaded_pto_whose_parts_must_run_at_once_is_refused_on_the_host():
    """The host ran its parts one after the other: the cube's second hand-off overwrote
    the first before the vector part read it, and the result was silently wrong."""
    with pytest.raises(ValueError, match="must run at once.*engine='pto-isa'"):
        _run(_pto(), "native")


@needs_tools
def test_on_pto_isa_every_block_shares_one_workspace_and_both_vector_cores_run():
    out, want = _run(_pto(), "pto-isa")
    np.testing.assert_allclose(out, want, rtol=2e-3, atol=2e-3)


@needs_tools
def test_a_workspace_not_indexed_by_block_is_caught(monkeypatch):
    """Every block writing slot 0, as a .pto that forgot the block would on the chip."""
    monkeypatch.setenv("PYPTO_SYNC_TIMEOUT", "2")
    text = re.sub(r"offsets = \[%(pv\d+)\.c0, ", r"offsets = [%c0_index, ", _pto())
    with pytest.raises(SimulatorError, match="outside the tensors and buffers"):
        _run(text, "pto-isa")


@needs_tools
def test_a_second_vector_core_that_does_not_keep_step_deadlocks(monkeypatch):
    """The cube waits for both AIVs' acknowledgements (FFTS mode 2)."""
    monkeypatch.setenv("PYPTO_SYNC_TIMEOUT", "2")
    text = _pto()
    head, rest = text.split("\n    } else {", 1)      # the sub-block branch's else
    head += "\n"
    skeleton, tail = rest.split("\n    }\n", 1)
    with pytest.raises(SimulatorError, match="deadlock: wait_flag_dev on a cross-core flag"):
        _run(head + "} else {\n    }\n" + tail, "pto-isa")
