"""Which cases of a parametrized test the quick subset runs (`pytest -m "not slow and not
heavy"`, tests/conftest.py): the others are marked heavy, so the default suite still runs
every case and the quick one a cross-section of them."""
import pytest


def quick_cases(values, *kept, unpack=False):
    """``values`` for ``pytest.mark.parametrize``, all but ``kept`` marked heavy; ``unpack``
    when each value is a tuple of several arguments."""
    def heavy(v):
        return pytest.param(*(v if unpack else (v,)), marks=pytest.mark.heavy)
    return [v if v in kept else heavy(v) for v in values]
