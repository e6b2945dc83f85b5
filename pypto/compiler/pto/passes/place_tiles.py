"""Addresses for the tiles of a ``.pto`` text that gives none (PTOAS's level 2, where the
assembler plans memory).

Why not PyPTO's memory planner: it plans Tile IR values before they become tiles; a read text
has only the tiles and the instructions using them. So this is a small planner of its own:
each tile is live from its first to its last use in program order (a tile used inside a loop
is live for the whole loop: the next iteration may read it), and tiles are placed first fit,
in the order their lives start, in bytes no live tile holds. Tiles the text does place
(``addr``) keep their bytes, and the planned ones go above them. A ``treshape`` result is a
view: it takes its source's address and extends its source's life. The sync pass and the
hazard checker then see the reuse as the byte overlaps it is (``isa.accesses``).
"""
from __future__ import annotations

from ..isa import footprint
from ..program import For, Inst, Tile, While, nested_bodies

# a cube buffer's tiles start on a whole fractal (512 bytes; L0C's are 1024)
_ALIGN = {"mat": 512, "left": 512, "right": 512, "acc": 1024}


def place_tiles(tiles: list, body: list, views: dict, target) -> None:
    """Give every tile with ``addr < 0`` an address, in place; ``views`` maps a view tile's
    name to the tile whose bytes it shares. Raises ``ValueError`` when a buffer overflows."""
    source = {t.name: views[t.name] if t.name in views else t for t in tiles}
    lives: dict[str, list] = {}
    _live_ranges(body, lambda tile, first, last: _extend(lives, source.get(tile.name, tile),
                                                         first, last), [0])
    floor: dict[str, int] = {}
    for t in tiles:
        if t.addr >= 0:
            floor[t.loc] = max(floor.get(t.loc, 0), t.addr + _bytes(t, target))
    placed: list[tuple] = []                    # (loc, start, end, last use)
    order = sorted((t for t in tiles if t.addr < 0 and t.name not in views),
                   key=lambda t: lives.get(t.name, [0, 0])[0])
    for t in order:
        first, last = lives.get(t.name, [0, 0])
        placed = [p for p in placed if p[3] >= first]          # lives that ended are free
        t.addr = _first_fit(t, floor.get(t.loc, 0), [p for p in placed if p[0] == t.loc],
                            target)
        placed.append((t.loc, t.addr, t.addr + _bytes(t, target), last))
    for t in tiles:
        if t.name in views:
            t.addr = views[t.name].addr


def _bytes(t: Tile, target) -> int:
    return footprint(t.loc, t.dtype, *t.alloc_shape, target)


def _first_fit(t: Tile, floor: int, live: list, target) -> int:
    align = _ALIGN.get(t.loc, target.alignment)
    size = _bytes(t, target)
    at = -(-floor // align) * align
    for _, start, end, _ in sorted(live, key=lambda p: p[1]):
        if at + size <= start:
            break
        at = max(at, -(-end // align) * align)
    if at + size > target.buffers[t.loc]:
        raise ValueError(f"the tiles without addresses need {at + size} bytes of {t.loc} at "
                         f"once, which holds {target.buffers[t.loc]}")
    return at


def _extend(lives: dict, tile: Tile, first: int, last: int) -> None:
    life = lives.setdefault(tile.name, [first, last])
    life[0], life[1] = min(life[0], first), max(life[1], last)


def _live_ranges(body: list, use, clock: list, loop: tuple | None = None) -> None:
    """Calls ``use(tile, first, last)`` for every tile an instruction of ``body`` touches;
    inside a loop the range is the loop's."""
    for node in body:
        start = clock[0]
        if isinstance(node, Inst):
            clock[0] += 1
            touched = list(node.ins) + list(node.outs) + [node.attrs.get("tmp")]
            for x in touched:
                if isinstance(x, Tile):
                    use(x, *(loop or (start, start)))
            continue
        span = [start, start + _count(node) - 1]
        inner = loop or (tuple(span) if isinstance(node, (For, While)) else None)
        for nested in nested_bodies(node):
            _live_ranges(nested, use, clock, inner)


def _count(node) -> int:
    if isinstance(node, Inst):
        return 1
    return sum(_count(n) for nested in nested_bodies(node) for n in nested)
