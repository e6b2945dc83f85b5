"""The cycle model against the chip, per instruction: pto-isa's cost-model test cases with the
cycle counts measured on a 910B (pypto/backends/ascend/model/ptoisa_st_cycles.csv, copied from
shared/reference/ptoisa-st-cycles.csv). Issue 31: within 25 % for at least 85 % of the cases
PyPTO can produce, median error under 15 %; every case off by more has its reason here."""
import csv
from pathlib import Path

import pytest

from pypto.backends.ascend.model import calibration
from pypto.backends.ascend.model.calibration import CASES_CSV, TARGET_MEDIAN, TARGET_SHARE

REFERENCE = Path(__file__).resolve().parents[3] / "shared" / "reference" / "ptoisa-st-cycles.csv"

# The cases the model misses, and why (any other miss fails the test).
MISSES = {
    # figures below the vector unit's floor (every byte of the source read at 256 B/cycle at
    # most): not the whole instruction's time. pto-isa's test leaves them unchecked (accuracy 0)
    **{(suite, test): "below the floor" for suite, test in [
        ("TRowMax", "float_16x256"), ("TRowMax", "half_16x256"), ("TRowMin", "float_64x64"),
        ("TRowMin", "float_16x256"), ("TRowMin", "half_64x128"), ("TRowMin", "half_16x256"),
        ("TRowSum", "float_16x256"), ("TRowSum", "half_16x256")]},
    # the same instruction sequence as TCOLMAX f16 64x64 (63 dependent vmax, a barrier after
    # each: 2713 cycles measured) measured 6x faster; unchecked (accuracy 0)
    ("TColMax", "int16_64x64"): "inconsistent with TColMax half_64x64",
    ("TColMax", "half_16x256"): "inconsistent with TColMax half_64x64",
    ("TColSum", "half_16x256"): "inconsistent with TColMax half_64x64",
    # 64 repeats in 55 cycles, while TADDS f16 63x64 (the same row-by-row issue) takes 69 and
    # TMULS f32 256x16 one cycle a repeat: the model charges every repeat a cycle (+42 %)
    ("TMins", "half_64x64"): "faster than a cycle a repeat",
}


def test_the_table_is_the_reference_copy():
    if REFERENCE.exists():
        assert CASES_CSV.read_bytes() == REFERENCE.read_bytes()
    with open(CASES_CSV, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 235 and sum(float(r["profiling_cycles"] or 0) > 0 for r in rows) == 89


def test_every_measured_case_is_modelled_or_excluded_with_a_reason():
    cases = calibration.cases()
    assert len(cases) == 89
    excluded = [c for c in cases if c.model is None]
    assert all(c.excluded for c in excluded) and len(excluded) == 10
    assert all(c.model > 0 for c in cases if c.model is not None)


def test_issue_31_per_instruction_target():
    a = calibration.agreement()
    assert a.compared == 79 and a.possible == 71
    assert a.possible_within >= TARGET_SHARE and a.possible_median < TARGET_MEDIAN
    assert a.median_error < TARGET_MEDIAN          # with the impossible figures too


def test_the_misses_are_the_known_ones():
    missed = {(c.suite, c.test) for c in calibration.cases()
              if c.model is not None and not c.within}
    assert missed == set(MISSES)
    below = {(c.suite, c.test) for c in calibration.cases()
             if c.model is not None and not c.possible}
    assert below == {k for k, why in MISSES.items() if why == "below the floor"}


@pytest.mark.parametrize("suite", ["TAdd", "TMul", "TExp", "TRowSum", "TColMax", "TLoad",
                                   "TMatmul", "TRowExpand"])
def test_each_family_within_25_percent_where_the_figure_is_checked(suite):
    """The figures pto-isa's own test checks (accuracy > 0) are all met."""
    checked = [c for c in calibration.cases() if c.suite == suite and c.guarded
               and c.model is not None]
    assert checked and all(c.within for c in checked), [(c.test, c.error) for c in checked]
