"""The text of a ``.pto`` file as the reader takes it: one statement a line.

MLIR lets a statement run over several lines and name types once at the top (``!t =
!pto.tile_buf<...>``, ``#a = ...``); PTOAS's own samples do both. Here comments go, type and
attribute aliases are substituted where they are used, and a statement's continuation lines
(inside brackets, after a trailing comma, or starting with ``:``, ``->``, ``outs(``,
``iter_args(`` or ``attributes``) are joined to it, keeping the number of its first line for
error messages.
"""
from __future__ import annotations

import re

_ALIAS = re.compile(r"^([!#][A-Za-z_][\w.$-]*)\s*=\s*(.+)$")
_CONTINUES = (":", "->", "attributes", "outs(", "iter_args(", ")", "]", ">")
_OPEN, _CLOSE = "([<", ")]>"
# a line that begins a statement whatever its predecessor left open (so one unbalanced
# bracket is reported at its own line): results, an operation's name, a closing brace
_STARTS = re.compile(r"%[\w.$#-]+(?::\d+)?(?:\s*,\s*%[\w.$#-]+)*\s*=\s|[a-z_]+\.[a-z_]|}|return\b")


def _depth(text: str) -> int:
    """Brackets left open by ``text``: (), [] and <> (an arrow's ``>`` is not one); braces
    open regions, so they do not count."""
    text = text.replace("->", "")
    return sum(text.count(c) for c in _OPEN) - sum(text.count(c) for c in _CLOSE)


def _uncomment(line: str) -> str:
    """``line`` without its ``//`` comment (one inside a string literal is text)."""
    quoted = False
    for i, c in enumerate(line):
        if c == '"':
            quoted = not quoted
        elif c == "/" and not quoted and line.startswith("//", i):
            return line[:i]
    return line


def _substitute(line: str, aliases: dict) -> str:
    if not aliases:
        return line
    return re.sub(r"[!#][A-Za-z_][\w.$-]*",
                  lambda m: aliases.get(m.group(0), m.group(0)), line)


def _joined(text: str) -> list[tuple[int, str]]:
    """(first line number, statement) with each statement's continuation lines joined."""
    out: list = []
    pending: list | None = None          # [line number, text so far]
    for no, raw in enumerate(text.splitlines(), 1):
        line = _uncomment(raw).strip()
        if not line:
            continue
        if pending is not None and not _STARTS.match(line) and (
                _depth(pending[1]) > 0 or pending[1].endswith(",")
                or line.startswith(_CONTINUES)):
            pending[1] += " " + line
            continue
        if pending is not None:
            out.append(tuple(pending))
        pending = [no, line]
    if pending is not None:
        out.append(tuple(pending))
    # a bracket opened at a line's end and closed at the next line's start leave spaces
    return [(no, re.sub(r"\( ", "(", re.sub(r" \)", ")", text))) for no, text in out]


def statements(text: str) -> list[tuple[int, str]]:
    """(line number, statement) for every statement of ``text``, aliases substituted."""
    aliases: dict = {}
    out = []
    for no, statement in _joined(text):
        alias = _ALIAS.match(statement)
        if alias:
            aliases[alias.group(1)] = _substitute(alias.group(2).strip(), aliases)
        else:
            out.append((no, _substitute(statement, aliases)))
    return out
