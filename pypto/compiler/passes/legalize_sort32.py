"""``tile.sort`` of a float tile as the chip's sort instructions: TSORT32, TMRGSORT, TGATHER.

A2/A3's vector core sorts on its SFU: TSORT32 sorts every 32-element block of a row, descending,
into 8-byte (value, index) pairs (ties: the smaller index first); TMRGSORT merges sorted lists
of pairs (ties: the earlier list first), four runs of a row at once (``blockLen``, one row-major
list) or two to four separate lists. The pairs are split again by TGATHER's P0101 / P1010 mask
patterns. The decomposition (docs/language.md, "Sorting"):

1. the key: the values in float32 (float16 is widened exactly: pto-isa's CPU simulator lays out
   half pairs at a stride the chip does not use), negated for an ascending sort (exact), NaN
   replaced by +inf (the instructions compare with ``>``, for which NaN is never larger, so
   its place in their output is not defined);
2. the payload: ``2 * index + isnan``, so the index and the NaN come back from the pairs, and
   equal keys still leave in index order (TSORT32 breaks ties on the payload, TMRGSORT on the
   list, and the runs are in index order);
3. the pairs' row padded to ``32 * c * 4**m`` pairs (c in 1, 2, 3), so TMRGSORT merges whole
   runs: TSORT32 writes its pairs over a tile of -inf (``tile.sort32``'s third operand), whose
   ties sort after every element (TSORT32 sorts a partial last block alone on pto-isa's
   simulator, and pads it with -NaN, its minimum, on the chip);
4. TSORT32, then merges of four runs until one or two or three are left, merged by the 2- or
   3-list form (``tile.mrgsort``, ``tile.mrglists``); a top-k (k below the width) instead
   merges a tree of lists cut to their first k pairs (``tile.mrglists``, ``top_levels``);
5. values and payloads deinterleaved, the first ``k`` columns kept, the index shifted out and
   NaN put back where the payload says.

So NaN counts as equal to +inf in a descending sort and to -inf in an ascending one: NaNs and
that infinity come first, in index order.
"""
from __future__ import annotations

import math

from ...language import dtypes as dt
from ..ir import Op, TileType
from .legalize_sort import column_indices, reshaped, sort_input

BLOCK = 32                      # TSORT32's block
FLOATS = (dt.float16, dt.float32)
UB_SHARE = 0.75                 # the sort's tiles may take at most this share of UB


def padded_width(n: int) -> int:
    """The smallest ``32 * c * 4**m`` (c in 1, 2, 3) that holds ``n``: TMRGSORT merges four
    runs at once, and two or three in its last step."""
    best = None
    for c in (1, 2, 3):
        w = BLOCK * c
        while w < n:
            w *= 4
        best = w if best is None else min(best, w)
    return best


def merge_runs(width: int) -> list[int]:
    """The run length (pairs) each merge starts from: four runs at once while they divide the
    row, then the two or three that are left."""
    runs, r = [], BLOCK
    while r < width:
        runs.append(r)
        r = r * 4 if width % (4 * r) == 0 else width
    return runs


def applies(op: Op, target) -> bool:
    """TSORT32 takes float16/float32; a target says whether its vector cores have the sort
    instructions; the pairs must fit in UB next to the rest."""
    x = op.operands[0]
    if x.type.dtype not in FLOATS or not getattr(target, "sort_instructions", False):
        return False
    shape = x.type.shape
    rows = shape[0] if len(shape) == 2 else 1
    width = padded_width(shape[-1])
    # the peak: the source, key and payload around TSORT32, or two pair tiles (each twice
    # as wide) during the merges, plus a merge's scratch row
    return rows * width * 4 * 6 + 2 * width * 4 <= target.buffers["vec"] * UB_SHARE


def sort(op: Op):
    d, shape = op.operands[0].type.dtype, op.operands[0].type.shape
    e, xw, k, descending, rows, n = sort_input(op, dt.float32)
    key, payload = _key_and_payload(e, xw, descending)
    top = k < n                 # a top-k: merge only what can reach the first k
    width = -(-n // BLOCK) * BLOCK if top else padded_width(n)
    # the pairs past the row: -inf, whose ties sort after every element (a partial block is
    # sorted alone; the chip's own padding, -NaN, sorts below them)
    init = e.full(-math.inf, TileType(dt.float32, (rows, 2 * width)))
    idx = e.emit("tile.bitcast", [payload], TileType(dt.uint32, (rows, n)), {"dtype": dt.uint32})
    pairs = e.emit("tile.sort32", [key, idx, init], init.type)
    if top:
        pairs, width = _top_merges(e, pairs, width // BLOCK, k)
    else:
        for run in merge_runs(width):
            pairs = _merge_whole_rows(e, pairs, run)
    vals = e.emit("tile.gather_mask", [pairs], TileType(dt.float32, (rows, width)),
                  {"pattern": "P0101"})
    pays = e.emit("tile.gather_mask", [pairs], TileType(dt.int32, (rows, width)),
                  {"pattern": "P1010"})
    if k < width:
        vals, pays = _first_columns(e, vals, k), _first_columns(e, pays, k)
    if not descending:
        vals = e.unary("neg", vals)
    was_nan = e.binary("ne", e.binary("and", pays, 1), 0)
    vals = e.where(was_nan, math.nan, vals)
    idxs = e.binary("shr", pays, 1)
    if d != dt.float32:
        vals = e.cast(vals, d)
    if len(shape) == 1:
        vals, idxs = reshaped(e, vals, (k,)), reshaped(e, idxs, (k,))
    return e.ops, (vals, idxs)


def _merge_whole_rows(e, pairs, run):
    """One full-sort merge level: four runs of ``run`` pairs at once (``tile.mrgsort``, the
    blockLen form) while they divide the row, else the two or three left as one list-form
    group (``tile.mrglists``)."""
    ways = pairs.type.shape[1] // (2 * run)
    if ways % 4 == 0:
        return e.emit("tile.mrgsort", [pairs], pairs.type, {"run": run})
    return e.emit("tile.mrglists", [pairs], pairs.type,
                  {"groups": (ways,), "stride": run, "take": run})


def merge_groups(runs: int) -> list[int]:
    """How many consecutive runs each merge of a level takes: fours, the last two groups
    evened out so none is a lone run (a list-form TMRGSORT takes two to four lists)."""
    sizes = [4] * (runs // 4) + ([runs % 4] if runs % 4 else [])
    if len(sizes) > 1 and sizes[-1] == 1:
        sizes[-2:] = [3, 2]
    return sizes


def top_levels(runs: int, k: int) -> list[tuple[list[int], int, int, int]]:
    """The merge tree of a top-k over ``runs`` sorted runs of 32 pairs: per level (group
    sizes, run stride in pairs, pairs read per run, pairs per group's slot). Only a run's
    first k pairs can reach the first k of a merge, so each list is cut to them: the tree
    merges about k pairs per run where full merges move the row three times (1024 columns).
    A list-form TMRGSORT writes the whole merge (PTOAS: its destination has its scratch's
    shape), so a group's slot holds all its lists' pairs. Lists are cut to ``k`` rounded up
    to 8 pairs, so every slot, and the TGATHER after the last level, is a whole number of
    32-byte rows (PTOAS: a TGATHER's destination is valid over all its columns)."""
    k8 = -(-k // 8) * 8
    levels, stride, take = [], BLOCK, min(k8, BLOCK)
    while runs > 1:
        groups = merge_groups(runs)
        slot = max(groups) * take
        levels.append((groups, stride, take, slot))
        runs, stride, take = len(groups), slot, min(k8, slot)
    return levels


def _top_merges(e, pairs, runs, k):
    """Each row's runs merged until the first ``k`` pairs are the first of one run
    (``top_levels``): a (rows, 2 width) tile and that width. Each level's result starts as
    -inf pairs, so a group smaller than its slot (the row's last) is followed by pairs that
    sort after everything, as the row's padding does."""
    rows, width = pairs.type.shape[0], BLOCK
    for groups, stride, take, slot in top_levels(runs, k):
        init = e.full(-math.inf, TileType(dt.float32, (rows, 2 * len(groups) * slot)))
        pairs = e.emit("tile.mrglists", [pairs, init], init.type,
                       {"groups": tuple(groups), "stride": stride, "take": take})
        width = len(groups) * slot
    return pairs, width


def _key_and_payload(e, x, descending):
    """(key, payload): the key is descending-sortable and NaN-free, the payload 2 i + isnan."""
    rows, n = x.type.shape
    key = x if descending else e.unary("neg", x)
    nan = e.binary("ne", x, x)
    key = e.where(nan, math.inf, key)
    cols = column_indices(e, rows, n)
    payload = e.binary("add", e.binary("add", cols, cols), e.cast(nan, dt.int32))
    return key, payload


def _first_columns(e, x, k):
    rows = x.type.shape[0]
    return e.emit("tile.slice", [x], TileType(x.type.dtype, (rows, k)),
                  {"starts": (0, 0), "stops": (rows, k)})

