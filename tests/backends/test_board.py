"""The launch-level model against the board (issue 31): pto-isa's hand-written GEMM and flash
attention, built instruction for instruction as PTO programs (benchmarks/ptoisa_programs.py),
and the GEMM schedule written as a PyPTO kernel (benchmarks/board.py), modelled on the board's
chip against the times and pipe ratios pto-isa measured on a 24-core A3 board. The larger
sizes, the flash-attention port and top-k are in ``python benchmarks/board.py``."""
import importlib.util
import sys
from pathlib import Path

import pytest

from pypto.backends.ascend.model.launch import model_kernel, model_launch

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def board():
    sys.path.insert(0, str(BENCHMARKS))          # board.py imports the benchmarks' harness
    try:
        spec = importlib.util.spec_from_file_location("board", BENCHMARKS / "board.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.mark.parametrize("n", [1536, 3072])
def test_ptoisa_gemm_schedule_within_25_percent_of_the_board(board, n):
    model = model_launch(board.gemm_program(n, n, n, board.GM_GRID), board.GM_GRID,
                         board.gemm_program_args(n, n, n))
    ms, cube, tload = board.GEMM_BOARD[n]
    assert model.time_ms == pytest.approx(ms, rel=0.25)
    assert abs(100 * model.busy_share("M") - cube) <= 10
    assert abs(100 * model.busy_share("MTE2") - tload) <= 10


@pytest.mark.parametrize("n", [1536, 3072])
def test_pypto_gemm_port_within_25_percent_of_the_board(board, n):
    """The same schedule written as a @pypto.jit kernel (4 K steps per load, slices of the
    L1 tiles extracted into double-buffered L0A/L0B): what PyPTO's compiler makes of it."""
    args, meta = board.gemm_args(n, n, n)
    model = model_kernel(board.gemm_kernel, board.GM_GRID, *args, **meta)
    ms, cube, tload = board.GEMM_BOARD[n]
    assert model.time_ms == pytest.approx(ms, rel=0.25)
    assert abs(100 * model.busy_share("M") - cube) <= 10
    if n == 3072:       # 1536: the test after this one
        assert abs(100 * model.busy_share("MTE2") - tload) <= 10


def test_pypto_gemm_port_tload_busy_at_1536_within_10_points(board):
    n = 1536
    args, meta = board.gemm_args(n, n, n)
    model = model_kernel(board.gemm_kernel, board.GM_GRID, *args, **meta)
    assert abs(100 * model.busy_share("MTE2") - board.GEMM_BOARD[n][2]) <= 10


@pytest.mark.parametrize("s", [1024, 2048])
def test_ptoisa_flash_attention_within_25_percent_of_the_board(board, s):
    """pto-isa's flash attention (both AIVs, 4 QK tiles in flight, FIFOs through GM): the
    short sequences; from S = 4k the model is 1.3-1.8x the board (docs/cycle_model.md)."""
    model = model_launch(board.fa_program(s), (s // 128,), board.fa_program_args(s))
    assert model.time_ms * 1e3 == pytest.approx(board.FA_BOARD[s], rel=0.25)


@pytest.mark.parametrize("s", [1024, 2048, 4096])
def test_pypto_flash_attention_port_within_25_percent_of_the_board(board, s):
    """The port at pto-isa's 128-row blocks (tutorial 12's online softmax, one head): 1.14 /
    1.05 / 1.18 of the board here, within 25 % up to 32k since the run-ahead UB rules
    (passes/in_place.py; 4k was 1.26 before). The longer sequences are in benchmarks/board.py."""
    grid, args, meta = board.fa_args(s, 128)
    model = model_kernel(board.fa_kernel, grid, *args, **meta)
    assert model.time_ms * 1e3 == pytest.approx(board.FA_BOARD[s], rel=0.25)


@pytest.mark.xfail(strict=True, reason="the model's sort instructions are too cheap: pto-isa's "
                   "own top-k is modelled at 0.54 of the board (docs/cycle_model.md); no "
                   "single-instruction figure says which of TMRGSORT's list form, TGATHER's "
                   "mask form or TMOV to correct")
def test_ptoisa_topk_within_25_percent_of_the_board(board):
    """pto-isa's top-k (k = 1000 of 1024, 48 vector cores) instruction for instruction: it
    shows the model's sort-family costs apart from PyPTO's port of it."""
    rows = 2304
    model = model_launch(board.topk_program(rows), (board.TOPK_CORES,),
                         board.topk_program_args(rows))
    assert model.time_ms * 1e3 == pytest.approx(board.TOPK_BOARD[rows], rel=0.25)
