"""The package's shape, as a test: rooms in import order, and a line budget.

Every import of every module under ``pypto/`` (function-level ones included) is read with
``ast``. A module may import its own room and the rooms below it; an upward import fails
unless ``UPWARD`` lists it with the reason. A module over ``MAX_LINES`` fails unless it is one
of the few one-class modules in ``ONE_CLASS`` (tinygrad keeps its line budget as a test, too).
docs/architecture.md draws the rooms.
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pypto"

# Rooms from the bottom up: a module imports only its own room and those before it.
ROOMS = (
    ("foundation", ("envs", "errors", "target", "cache", "testing")),
    ("language", ("language",)),
    ("layout", ("layout",)),   # tensor formats over the language's dtypes (pypto.packed_int4 too)
    ("compiler", ("compiler",)),
    ("backends", ("backends",)),
    ("runtime", ("runtime",)),
    ("tuning", ("tuning",)),
    ("ascend_c", ("ascend_c",)),
    ("graph", ("graph",)),
    ("tools", ("tools",)),               # the CANN front end writes the profiler's output
    ("frontend", ("frontend",)),
    ("torch_ops", ("torch_ops",)),
)
RANK = {top: rank for rank, (_, tops) in enumerate(ROOMS) for top in tops}

# Upward imports that stay, each with its reason: (importer, imported module) -> why.
UPWARD: dict[tuple[str, str], str] = {
    ("pypto.runtime.device", "pypto.frontend.annotations"):
        "CANN's pypto.Tensor(shape, dtype) is both the device tensor and the front end's "
        "annotation, a subclass over CANN's DT_* types; imported only for an annotation call",
}

MAX_LINES = 600
# At most three modules may exceed MAX_LINES, each one class (a reader or builder whose
# methods share one state): module -> why it is one piece.
ONE_CLASS: dict[str, str] = {}
MAX_LOOSE = 5           # modules directly in pypto/ (besides __init__)


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None        # None: pypto/__init__, the facade


def _imports(module: str, path: Path):
    """(imported module, line) for every import of a pypto module in ``path``."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("pypto"):
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if not name.startswith("pypto"):
                continue
            for alias in node.names:
                sub = f"{name}.{alias.name}"
                yield (sub if sub in MODULES else name), node.lineno


def upward_imports() -> list[str]:
    found = []
    for module, path in MODULES.items():
        room = _room(module)
        if room is None:
            continue
        for target, line in _imports(module, path):
            there = _room(target)
            if there is None or there == room:
                continue
            if RANK[there] > RANK[room] and (module, target) not in UPWARD:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{line} ({room}) imports "
                             f"{target} ({there})")
    return found


def test_every_module_is_in_a_room():
    tops = {m.split(".")[1] for m in MODULES if "." in m}
    assert tops <= set(RANK), f"modules outside every room: {sorted(tops - set(RANK))}"


def test_imports_run_downward():
    found = upward_imports()
    assert not found, "upward imports (move the code, or add it to UPWARD with the reason):\n" \
        + "\n".join(found)


def test_upward_allowlist_is_short_and_current():
    assert len(UPWARD) <= 1             # the issue allows one cycle, labelled
    live = {(m, t) for m, p in MODULES.items() for t, _ in _imports(m, p)}
    assert set(UPWARD) <= live, f"stale UPWARD entries: {set(UPWARD) - live}"


def test_line_budget():
    over = {m: len(p.read_text().splitlines()) for m, p in MODULES.items()}
    over = {m: n for m, n in over.items() if n > MAX_LINES and m not in ONE_CLASS}
    assert not over, f"modules over {MAX_LINES} lines (split by responsibility): {over}"
    assert len(ONE_CLASS) <= 3
    for module in ONE_CLASS:
        tree = ast.parse(MODULES[module].read_text())
        classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
        assert len(classes) == 1, f"{module} is exempt as one class but has {len(classes)}"


def test_few_loose_modules():
    loose = [m for m, p in MODULES.items() if m.count(".") == 1 and p.name != "__init__.py"]
    assert len(loose) <= MAX_LOOSE, f"modules loose in pypto/: {sorted(loose)}"


def test_public_modules_keep_their_first_names():
    """Modules users import by name stay importable there after moving into their rooms:
    the same module objects, loaded on first use."""
    import importlib
    import subprocess
    import sys

    import pypto
    for short, real in pypto._PUBLIC_MODULES.items():
        assert importlib.import_module(f"pypto.{short}") is importlib.import_module(f"pypto.{real}")
    from pypto.compiler.errors import NotOnChip
    from pypto.profile import Profiler
    assert NotOnChip is pypto.errors.NotOnChip and Profiler is pypto.Profiler
    assert pypto.packed_int4.pack is pypto.layout.pack
    torch_names = ("register_op", "registered_ops")      # torch is optional
    assert all(hasattr(pypto, n) for n in pypto.__all__ if n not in torch_names)
    done = subprocess.run([sys.executable, "-m", "pypto.cli", "--help"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "usage: pypto" in done.stdout, done.stderr
