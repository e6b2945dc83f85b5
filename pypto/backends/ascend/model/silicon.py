"""What was measured on silicon, whole kernels on a 24-core A3 / 910B2 board
(shared/reference/ascend910b.md, "Measured on silicon"; the source beside each figure).

The cycle model is held against these (``benchmarks/board.py``) and the profile's roofline marks
them (``tools/profiler/html.py``), so the figures live once, here, as data. ``bytes`` is each
kernel's compulsory HBM traffic (its inputs read and outputs written once), the roofline's
denominator for the board's points and the profile's kernels alike.
"""
from __future__ import annotations

from dataclasses import dataclass

BOARD_TARGET = "ascend910b2"        # 24 AIC / 48 AIV at 1.80 GHz

# m = k = n: (ms, cube busy %, TLOAD busy %), pto-isa kernels/manual/a2a3/gemm_performance README
GEMM_BOARD = {1536: (0.0388, 54.5, 72.2), 3072: (0.2067, 79.0, 90.9),
              6144: (1.5060, 86.7, 95.2), 7680: (3.1680, 80.6, 98.4)}
# S: us, head 128, fp16, pto-isa kernels/manual/common/flash_atten README (910B2 multi-core)
FA_BOARD = {1024: 20.96, 2048: 32.461, 4096: 88.902, 8192: 292.626, 16384: 909.058,
            32768: 3262.645}
# rows of 1280 fp32 columns (the first 1024 searched), k = 1000: us, on 48 vector cores,
# pto-isa kernels/manual/a2a3/topk README
TOPK_BOARD = {4800: 324.106, 3456: 238.819, 2304: 161.375}
TOPK_COLUMNS, TOPK_K = 1280, 1000


@dataclass(frozen=True)
class BoardPoint:
    """One board measurement as a roofline point: FLOPs and compulsory bytes per run."""
    kernel: str
    size: str
    time_us: float
    flops: float
    bytes: float

    @property
    def flops_per_s(self) -> float:
        return self.flops / (self.time_us * 1e-6)

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / (self.time_us * 1e-6)


def board_points() -> list[BoardPoint]:
    """Every board figure: GEMM fp16 -> fp32 (2 n^3 FLOPs; A, B read, C written), flash
    attention (4 S^2 128 FLOPs, as the source counts them; Q, K, V read, O written, fp16) and
    top-k (no FLOPs counted; the rows read, k values and int32 indices written)."""
    out = [BoardPoint("GEMM fp16", f"{n}^3", ms * 1e3, 2.0 * n ** 3, 2 * n * n * 2 + 4 * n * n)
           for n, (ms, _, _) in GEMM_BOARD.items()]
    out += [BoardPoint("flash attention h128", f"S={s // 1024}k", us, 4.0 * s * s * 128,
                       4 * s * 128 * 2) for s, us in FA_BOARD.items()]
    out += [BoardPoint("top-k k=1000", f"{rows}x1024", us, 0.0,
                       rows * TOPK_COLUMNS * 4 + rows * TOPK_K * 8)
            for rows, us in TOPK_BOARD.items()]
    return out
