"""Kernel source → Tile IR → PTO program: the compiler's half of a compile.

``build_program`` takes the frontend's function through the Tile IR passes, the lowering and the
PTO passes; what follows (PTOAS, code generation, object code) is the backend's
(``backends/ascend/compile.py``).
The memory-plan queries below (``plan_memory``, ``with_fitting_sizes``) stop after the Tile IR
passes, so ``pypto.memory`` can size a kernel before any compile.
"""
from __future__ import annotations

import ast
import itertools
import math

from ..errors import BufferOverflow
from .ast_to_ir import build_function
from .ir import Module, walk
from .source import KernelSource
from .passes import run_pipeline
from .pto.lower import lower_to_pto
from .pto.passes import PTO_PASSES, SELF_SYNCED_PASSES, run_pto_passes
from .pto.program import RowSplitRefused, RunAheadRefused


def build_program(fn, tensor_specs: dict, target, auto_sync: bool = True,
                  interleave: bool = True, persistent: int = 0, *, fresh):
    """The frontend's function through the Tile IR passes and the PTO passes: (Tile IR
    module, PTO program, the host's interleaved program or None); the module's function is
    the one built. No code is generated, so ``pypto.memory.analyze`` reads a kernel's tiles
    and buffers from it before any compile. ``persistent``: the persistent launch form
    (``passes/persistent.py``), its loop's ``num_stages`` (0: the grid form). Built again
    without hoisting loop-invariant work (``passes/hoist.py``) when the hoisted tiles make it
    overflow a buffer, on ``fresh()``, the function made again (the passes rewrite ``fn`` in
    place)."""
    return _hoisting_if_it_fits(fn, fresh, target, lambda module: _build(
        module, tensor_specs, auto_sync, interleave, persistent))


def _build(module: Module, tensor_specs: dict, auto_sync: bool, interleave: bool,
           persistent: int):
    # a kernel that orders its own pipes keeps its windows as written (legalize_windows)
    module.facts["self_synced"] = not auto_sync
    module.facts["persistent"] = persistent
    planned = run_pipeline(module)
    passes = PTO_PASSES if auto_sync else SELF_SYNCED_PASSES
    program, host = run_pto_passes(lower_to_pto(planned, tensor_specs), passes, interleave)
    return planned, program, host


def _hoisting_if_it_fits(fn, fresh, target, run):
    """``run(module)`` of ``fn`` with loop-invariant work hoisted out of its loops
    (``passes/hoist.py``) and the UB planned for the half rows each AIV holds when the vector
    part will be split between them (``passes/half_rows.py``). When the hoisted tiles make
    it overflow a buffer, of ``fresh()`` (passes rewrite their function in place) without
    hoisting; when the split refuses the part (``RowSplitRefused``), without the half-row
    plan; when run-ahead refuses the vector part's loop (``RunAheadRefused``), without the
    memory plan's run-ahead rules."""
    module, facts = Module(fn, target), {}
    while True:
        try:
            return run(module)
        except BufferOverflow:
            if not module.facts.get("hoisted"):
                raise
            facts["hoist"] = False
        except RowSplitRefused:
            facts["split_rows_plan"] = False
        except RunAheadRefused:
            facts["run_ahead_plan"] = False
        module = Module(fresh(), target)
        module.facts.update(facts)


MAX_PLANS = 160          # memory plans the joint search of with_fitting_sizes may try
SIZE_STEP = 16          # sizes between halvings are tried in multiples of this (a cube fractal)


def with_fitting_sizes(error, source, spec_args: dict, target, tensor_specs=None):
    """``error`` (an on-chip overflow) with the constexpr values that would fit, found by
    memory plans alone (frontend and Tile IR passes, no code generation): each int constexpr
    halved in turn, the others as given; when no single one fits, the largest joint sizes
    (``_largest_fitting``). ``error.proposal`` {name: value} keeps the change with the most
    work per tile (the others as given), ``error.alive`` the tiles alive at the peak. Only
    tile constexprs are shrunk (``_tile_constexprs``), and the error always names a line of
    the user's (``_overflow_line``). An overflow found after memory planning (``error.late``:
    the second buffer of ``num_stages=2``) is checked against whole builds, with
    ``tensor_specs``."""
    late = tensor_specs if getattr(error, "late", False) else None

    def plans(args):
        return plans_within_buffers(source, args, target, late)
    loc = error.loc or _overflow_line(error, source)
    names = [n for n, v in spec_args.items()
             if isinstance(v, int) and not isinstance(v, bool) and v >= 2]
    names = _tile_constexprs(source, spec_args, names)
    singles = []
    for name in names:
        smaller = spec_args[name] // 2
        while smaller >= 1:
            if plans({**spec_args, name: smaller}):
                singles.append({name: smaller})
                break
            smaller //= 2
    if singles:
        proposal = max(singles, key=lambda c: _work({**spec_args, **c}, names))
        text = (f"\nWith the other constexprs as given, each of these fits {target.name}'s "
                "buffers: " + "; ".join(f"{n}={v} (instead of {spec_args[n]})"
                                        for c in singles for n, v in c.items()))
    else:
        proposal = _largest_fitting(plans, spec_args, names) if names else None
        if proposal is None:
            return _at(error, loc)
        text = (f"\nNo one constexpr alone fits; together these fit {target.name}'s buffers: "
                + ", ".join(f"{k}={v}" for k, v in proposal.items()) + " (instead of " +
                ", ".join(f"{k}={spec_args[k]}" for k in proposal) + ")")
    out = BufferOverflow(error.message + text, loc, error.call_chain, error.space,
                         error.asked, error.capacity, error.target)
    out.proposal, out.alive = proposal, getattr(error, "alive", [])
    return out


def _at(error, loc):
    """``error`` at ``loc`` (a copy, when it had no line)."""
    if error.loc is not None or loc is None:
        return error
    out = BufferOverflow(error.message, loc, error.call_chain, error.space, error.asked,
                         error.capacity, error.target)
    out.proposal, out.alive = getattr(error, "proposal", None), getattr(error, "alive", [])
    return out


def _overflow_line(error, source):
    """A line of the user's for an overflow whose failing tile has none of its own (a scratch
    tile, a loop-carried value): the first line of the largest tile alive then, else the
    kernel's ``def``."""
    for tile in sorted(getattr(error, "alive", []), key=lambda t: -t.bytes):
        for text in tile.lines:
            filename, _, rest = text.rpartition(":")
            filename, _, line = filename.rpartition(":")
            if line.isdigit() and filename == source.filename:
                return _line_loc(source, int(line) - source.first_line + 1)
    return source.loc(source.node)


def _line_loc(source, line: int):
    node = next((n for n in ast.walk(source.node)
                 if isinstance(n, ast.stmt) and getattr(n, "lineno", None) == line),
                source.node)
    return source.loc(node)


def _tile_constexprs(source, spec_args: dict, names: list) -> list:
    """The constexprs a proposal may shrink: those that size tiles (halving one changes a
    tile's shape; a loop count or a flag does not) and are not data sizes. A data size (attention's head dimension ``D``,
    a row length ``N``) spans a whole axis: every window it sizes, of every ``pl.load`` and
    ``pl.store``, sits at the constant offset 0 on that axis while other windows move (with
    the block or a loop), so a smaller value would drop data rather than cut the work into
    more tiles. A kernel whose windows all sit at the origin keeps every tile constexpr."""
    base = _windows(source, spec_args)
    if base is not None and all(all(zeros) for _, zeros in base):
        base = None            # no window moves (one tile at the origin): sizes as declared
    out = []
    for name in names:
        smaller = _windows(source, {**spec_args, name: spec_args[name] // 2})
        if base is None or smaller is None or [w[0] for w in smaller] == [w[0] for w in base]:
            if _tile_shapes(source, {**spec_args, name: spec_args[name] // 2}) != \
                    _tile_shapes(source, spec_args):
                out.append(name)           # sizes tiles, but no window: not a data size
            continue
        if len(smaller) != len(base):
            out.append(name)               # the kernel's structure changed: a tile size
            continue
        changed = [(axis, zero) for (shape, zeros), (other, _) in zip(base, smaller)
                   for axis, zero in enumerate(zeros) if shape[axis] != other[axis]]
        if not all(zero for _, zero in changed):
            out.append(name)
    return out


def _windows(source, spec_args: dict):
    """Each ``tile.load``/``tile.store`` window the frontend builds, in program order: (its
    shape, per axis whether its offset is the constant 0). None if the kernel refuses."""
    try:
        fn = build_function(source, spec_args, source.node.name)
    except Exception:  # noqa: BLE001 - a size the kernel does not accept
        return None
    out = []
    for op in walk(fn.body):
        if op.name == "tile.load":
            shape, offsets = op.results[0].type.shape, op.operands[1:]
        elif op.name == "tile.store":
            shape, offsets = op.operands[-1].type.shape, op.operands[1:-1]
        else:
            continue
        if len(offsets) != len(shape):
            continue
        out.append((tuple(shape), tuple(_is_zero(v) for v in offsets)))
    return out


def _is_zero(value) -> bool:
    op = value.owner
    while op is not None and op.name == "arith.cast" and op.operands:
        op = op.operands[0].owner
    return op is not None and op.name == "arith.constant" and op.attrs.get("value") == 0


def _work(sizes: dict, names: list) -> int:
    """The product of the constexprs named: the tile volume they give, to rank proposals."""
    return math.prod(sizes[n] for n in names)


def _tile_shapes(source, spec_args: dict):
    """The tile types the frontend builds, specialised so (None if it refuses)."""
    try:
        fn = build_function(source, spec_args, source.node.name)
    except Exception:  # noqa: BLE001 - a size the kernel does not accept
        return None
    return sorted(str(r.type) for op in walk(fn.body) for r in op.results if r.is_tile)


def _largest_fitting(plans, spec_args: dict, names: list) -> dict | None:
    """The joint sizes of ``names`` with the largest product (the most work per tile) that
    fit: combinations of halvings by how many halvings they make in all (fewest first, so the
    first level that fits holds the largest powers-of-two shrinks; the most even split of a
    level wins its ties), then each name raised halfway back to its double, in multiples of
    ``SIZE_STEP``, while that fits. At most ``MAX_PLANS`` plans."""
    depth = {n: spec_args[n].bit_length() - 1 for n in names}
    budget = [MAX_PLANS]

    def fits(sizes):
        budget[0] -= 1
        return plans({**spec_args, **sizes})

    for total in range(1, sum(depth.values()) + 1):
        level = [ks for ks in itertools.product(*(range(depth[n] + 1) for n in names))
                 if sum(ks) == total]
        level.sort(key=lambda ks: max(ks) - min(ks))
        for ks in level:
            if budget[0] <= 0:
                return None
            sizes = {n: spec_args[n] >> k for n, k in zip(names, ks)}
            if fits(sizes):
                return _raise_halfway(sizes, spec_args, fits, budget)
    return None


def _raise_halfway(sizes: dict, spec_args: dict, fits, budget) -> dict:
    """Each size v that was halved raised to 1.5 v (a size between two halvings) if that is
    a multiple of ``SIZE_STEP`` and still fits."""
    for name, v in sizes.items():
        up = v + v // 2
        if v < spec_args[name] and up % SIZE_STEP == 0 and budget[0] > 0 and \
                fits({**sizes, name: up}):
            sizes = {**sizes, name: up}
    return sizes


def plan_memory(source: KernelSource, spec_args: dict, target) -> dict:
    """The kernel's on-chip plan, specialised so: bytes per buffer after the Tile IR passes
    (memory planning included; no PTO, no code). Raises ``BufferOverflow`` if it does not
    fit."""
    return plan_layout(source, spec_args, target)[0]


def plan_layout(source: KernelSource, spec_args: dict, target) -> tuple[dict, dict]:
    """``plan_memory``'s bytes per buffer and the placed tiles of each buffer
    (``passes.memory_plan.PlacedTile``)."""
    make = lambda: build_function(source, spec_args, source.node.name)  # noqa: E731
    planned = _hoisting_if_it_fits(make(), make, target, run_pipeline)
    return dict(planned.facts.get("buffer_bytes", {})), planned.facts.get("tile_layout", {})


def plans_within_buffers(source: KernelSource, spec_args: dict, target,
                         tensor_specs=None) -> bool:
    """Does the kernel, specialised so, fit the target's on-chip buffers? (Any other error
    counts as no.) With ``tensor_specs``, through the PTO passes too (what double buffering
    adds is placed there)."""
    try:
        if tensor_specs is None:
            plan_memory(source, spec_args, target)
        else:
            make = lambda: build_function(source, spec_args, source.node.name)  # noqa: E731
            build_program(make(), tensor_specs, target, fresh=make)
    except Exception:  # noqa: BLE001 - an overflow or any other reason this size cannot work
        return False
    return True
