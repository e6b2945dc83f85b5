"""What the NPU target refuses (docs/pto.md): each refused corpus kernel raises ``NotOnChip``
at its own line, saying what A2/A3 lacks and what to write instead, and never prints."""
import pytest

from pypto.errors import CompilationError, NotOnChip

from . import corpus

REFUSED = [entry for entry in corpus.CORPUS if entry.refused]


@pytest.mark.parametrize("entry", REFUSED, ids=[e.name for e in REFUSED])
def test_the_npu_target_refuses_it_with_a_clear_error(entry):
    with pytest.raises(NotOnChip) as got:
        entry.build()
    message = str(got.value)
    assert entry.refused in message
    assert got.value.loc is not None and got.value.loc.line > 0     # at the kernel's line
    assert "A2/A3" in message
    assert isinstance(got.value, CompilationError)


def test_every_kind_of_refusal_is_in_the_corpus():
    kinds = ("pl.signal", "int64 tile", "a slice at column", "a concatenation at column",
             "transposed float32")
    assert all(any(kind in e.refused for e in REFUSED) for kind in kinds)
