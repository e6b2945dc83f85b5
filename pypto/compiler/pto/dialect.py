"""Which spelling of the ``.pto`` each PTOAS version reads, as data.

PTOAS changed a few constructs between 0.27 and 0.60; PyPTO prints the form of the assembler
it will hand the text to (``ptoas --version``), and the newest form when there is none. Each
change is a row of ``CHANGES``: the first version whose ``--version`` carries it (the version
in PTOAS's CMakeLists.txt at the upstream commit that made it) and that commit. The reader
accepts both forms of each.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

OLDEST = (0, 27)        # the oldest PTOAS PyPTO prints for (PTOAS a56b18c3)
NEWEST = (0, 60)        # the newest it knows (PTOAS e32488c9)


@dataclass(frozen=True)
class Change:
    feature: str
    since: tuple[int, int]
    commit: str          # the PTOAS commit that made it
    what: str


CHANGES = (
    Change("ffts_ptr", (0, 55), "8d1d8b5d",
           "pto.set_ffts takes !pto.ptr<i64> (before: memref<256xi64>)"),
    Change("gather_axis", (0, 56), "bb284c03",
           'a mask-pattern pto.tgather names its axis: ins(%src, {maskPattern} : T, "row")'),
    Change("tci_tmp", (0, 57), "8d30be93",
           "pto.tci takes an explicit tmp tile at level 3 (before: no tmp in its grammar)"),
    Change("while_results_anywhere", (0, 58), "e9e45308",
           "every scf.while goes through MLIR's SCFToCF (before: PTOAS's own pattern, which "
           "refuses a while whose results are used in another block; lowering a later while "
           "first moves what follows it into one)"),
)


@dataclass(frozen=True)
class Dialect:
    """The forms one PTOAS version reads (``version`` as (major, minor))."""
    version: tuple[int, int]

    def has(self, feature: str) -> bool:
        change = next(c for c in CHANGES if c.feature == feature)
        return self.version >= change.since

    @property
    def ffts_type(self) -> str:
        return "!pto.ptr<i64>" if self.has("ffts_ptr") else "memref<256xi64>"

DEFAULT = Dialect(NEWEST)


class UnsupportedAssembler(RuntimeError):
    """The assembler PyPTO was pointed at is older than any form it can print."""


def parse_version(text: str) -> tuple[int, int] | None:
    """(major, minor) of ``ptoas --version``'s output ("ptoas 0.60"), or None."""
    m = re.search(r"\bptoas\s+(?:version\s+)?v?(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _named(version: tuple[int, int]) -> str:
    return f"ptoas {version[0]}.{version[1]}"


def for_version(text: str, path: str = "ptoas") -> tuple[Dialect, str]:
    """(the dialect to print for the assembler whose ``--version`` printed ``text``, a
    warning or ""). Older than ``OLDEST`` is an error; newer than ``NEWEST`` prints the
    newest form with a warning; an unreadable version the newest form, with a warning."""
    version = parse_version(text)
    oldest, newest = _named(OLDEST), _named(NEWEST)
    if version is None:
        return DEFAULT, (f"{path} --version printed {text.strip()[:80]!r}, not 'ptoas X.Y': "
                         f"PyPTO prints {newest}'s .pto (it knows {oldest} to {newest})")
    if version < OLDEST:
        raise UnsupportedAssembler(
            f"{path} is {_named(version)}, older than {oldest}, the oldest PTOAS PyPTO prints "
            f"for: install {newest} (or at least {oldest}), or unset PYPTO_PTOAS")
    if version > NEWEST:
        return Dialect(version), (
            f"{path} is {_named(version)}, newer than {newest}, the newest PyPTO knows: it "
            f"prints {newest}'s .pto; if the assembler rejects it, point PYPTO_PTOAS at "
            f"{newest} and report the change")
    return Dialect(version), ""
