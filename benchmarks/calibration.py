"""The cycle model against the chip, one instruction at a time.

    python benchmarks/calibration.py [--reps N] [--quick]

Each row is one case of pto-isa's cost-model tests that has a cycle count measured on a 910B
(pypto/backends/ascend/model/ptoisa_st_cycles.csv, from shared/reference/ptoisa-st-cycles.csv):
the figure, PyPTO's modelled cycles for the instruction it emits for the same dtypes and
shapes, and the error. Cases PyPTO never emits are listed with the reason; "floor" marks a
figure below what the vector unit could do (every byte of the source at 256 bytes a cycle),
which cannot be the whole instruction's time. --reps and --quick change nothing (the model is
deterministic); they are accepted like every benchmark's.
"""
from __future__ import annotations

from _harness import parse_args

from pypto.backends.ascend.model import calibration


def main(argv=None) -> None:
    parse_args(__doc__.splitlines()[1].strip(), argv)
    cases = calibration.cases()
    print(f"{'instruction':<12}{'case':<42}{'chip':>8}{'model':>9}{'error':>9}  note")
    for c in cases:
        if c.model is None:
            print(f"{c.suite:<12}{c.test:<42}{c.figure:>8.0f}{'-':>9}{'-':>9}  "
                  f"not emitted: {c.excluded}")
            continue
        note = "" if c.within else "OFF"
        if not c.possible:
            note += f" (floor {c.floor:.0f}: not the whole instruction)"
        if not c.guarded:
            note += " unchecked by pto-isa"
        print(f"{c.suite:<12}{c.test:<42}{c.figure:>8.0f}{c.model:>9.1f}{c.error:>+9.1%}  "
              f"{note.strip()}")
    print()
    print(f"model: {calibration.agreement()}")
    print(f"goal (issue 31): within {calibration.TOLERANCE:.0%} for >= "
          f"{calibration.TARGET_SHARE:.0%} of the cases, median error < "
          f"{calibration.TARGET_MEDIAN:.0%}")


if __name__ == "__main__":
    main()
