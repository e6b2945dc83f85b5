"""Ascend chip descriptions as data (reference: shared/reference/ascend910b.md).

A target decides capacities, legality and modelled time; it never decides host behaviour.
"""
from __future__ import annotations

from dataclasses import dataclass, field

KiB = 1024


@dataclass(frozen=True)
class Target:
    name: str
    device_spec: str          # spelling in .pto ("pto.device-spec")
    cube_cores: int
    vector_cores: int
    clock_ghz: float
    hbm_gib: int
    l2_mib: int
    hbm_gbps: float
    # bytes per on-chip buffer, keyed by PTO location
    buffers: dict = field(default_factory=lambda: {
        "vec": 192 * KiB, "mat": 512 * KiB, "left": 64 * KiB, "right": 64 * KiB,
        "acc": 128 * KiB, "bias": 1 * KiB})
    alignment: int = 32
    max_vec_rows: int = 4095
    max_matmul_dim: int = 4095
    fractal_bytes: int = 32   # cube operand fractal: 16 rows x 32 bytes
    fractal_rows: int = 16

    def cores_for(self, uses_cube: bool) -> int:
        return self.cube_cores if uses_cube else self.vector_cores


TARGETS = {t.name: t for t in (
    Target("ascend910b1", "Ascend910B1", 24, 48, 1.85, 64, 192, 1600.0),
    Target("ascend910b2", "Ascend910B2", 24, 48, 1.80, 64, 192, 1600.0),
    Target("ascend910b3", "Ascend910B3", 20, 40, 1.80, 64, 192, 1600.0),
    Target("ascend910b4", "Ascend910B4", 20, 40, 1.50, 32, 96, 800.0),
)}
ALIASES = {"ascend910b": "ascend910b1"}


def get_target(name: str) -> Target:
    key = ALIASES.get(name.lower(), name.lower())
    if key not in TARGETS:
        raise ValueError(f"unknown target {name!r}; known: {', '.join(sorted(TARGETS))} "
                         f"(and the alias 'ascend910b')")
    return TARGETS[key]
