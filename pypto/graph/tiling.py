"""The tiling rule: how each input of a tile_map is cut for one output tile.

1. **Output shape and dtype**: the tile op is traced on the whole inputs (one tile each, no
   data, no capacity limits: only the frontend runs). Its result's shape is the output shape,
   so ``a + b`` gives the broadcast shape and ``pypto.matmul(a, b)`` gives ``(M, N)``.
2. **Each input's tiling**, from the same trace (``flow.analyse``): an input axis that reaches
   output axis ``d`` elementwise *follows* ``d`` — it is loaded at the output tile's offset
   along ``d`` with the tile's extent; an axis that reaches no output axis (matmul's ``K``,
   a reduced axis) is loaded *whole*; an axis of extent 1 broadcasts (offset 0, extent 1). So
   a matmul's ``a`` is loaded as row panels ``(TM, K)`` and ``b`` as column panels ``(K, TN)``.
3. **Safety**: an input axis the tile op combines (reduces, contracts, slices...) may follow an
   output axis only if ``tile_size`` keeps that axis whole; an output axis made inside the
   tile op (not from any input) cannot be cut; one input axis cannot follow two output axes.
   Each case is an error naming ``tile_size`` or ``inputs``, never a silently wrong result.
4. The tile op is traced again on the chosen tiles: the result must be the tile's shape (or
   broadcast to it), and the same checks run on that trace, so overrides are checked too.

``input_tiles=`` overrides step 2 (one entry per input: per axis the output axis it follows, or
None for whole) for tile ops that only compile on tiles; ``out_shape=`` then gives the output
shape when no input axis determines it. Tile extents are ``min(tile_size[d], out_shape[d])``:
a tile never exceeds the tensor, so a whole axis is never padded.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..compiler.ir import CROSS_BLOCK_OPS, TileType, walk
from .flow import analyse
from .trace import trace

# tile axes of a tile_map: one launch-grid axis each in the "tile" form (the grid has three)
MAX_MAP_RANK = 3


@dataclass(frozen=True)
class Tiling:
    """How one tile_map node is tiled. ``maps[k][i]``: the output axis axis ``i`` of input
    ``k`` follows, or None (whole); ``in_tiles[k]``: the tile shape loaded from input ``k``."""
    out_shape: tuple
    out_dtype: object
    tile: tuple
    maps: tuple
    in_tiles: tuple
    uses_cube: bool
    cross_block: bool
    broadcast_result: bool

    @property
    def grid(self) -> tuple:
        """Tiles along each output axis."""
        return tuple(math.ceil(n / e) for n, e in zip(self.out_shape, self.tile))

    @property
    def num_tiles(self) -> int:
        return math.prod(self.grid)

    def describe_input(self, k: int) -> str:
        """``a: tile (16, 64) at (16*i, 0)`` style text for the tile graph IR."""
        letters = "ij"
        offsets = []
        for m in self.maps[k]:
            offsets.append("0" if m is None else f"{self.tile[m]}*{letters[m]}"
                           if self.grid[m] > 1 else "0")
        comma = "," if len(offsets) == 1 else ""
        return f"tile {self.in_tiles[k]} at ({', '.join(offsets)}{comma})"


def decide(op, inputs, tile_size, input_tiles=None, out_shape=None) -> Tiling:
    """The tiling of ``tile_map(op, inputs, tile_size, input_tiles=, out_shape=)``."""
    names = [t.name for t in inputs]
    shapes = [t.shape for t in inputs]
    for name, shape in zip(names, shapes):
        if not 1 <= len(shape) <= MAX_MAP_RANK:
            raise ValueError(f"tile_map(inputs=...): input {name!r} has shape {shape}; "
                             f"tile_map takes tensors of rank 1 to {MAX_MAP_RANK} (one grid "
                             "axis per tile axis; reshape it first)")
    if input_tiles is None:
        whole = trace(op, [TileType(t.dtype, t.shape) for t in inputs],
                      f"while tracing {op.__name__} on the whole inputs {_shapes(inputs)} to "
                      "find the output shape and each input's tiling; a tile op that only "
                      "compiles on tiles needs tile_map(..., input_tiles=..., out_shape=...)")
        wflow = analyse(whole, [[n != 1 for n in s] for s in shapes])
        traced = whole.result.type.shape
        if out_shape is not None and _shape_arg(out_shape) != traced:
            raise ValueError(f"tile_map(out_shape={out_shape!r}): {op.__name__} gives shape "
                             f"{traced} on the whole inputs")
        out_shape = traced
        maps = _maps_from_flow(wflow, names, shapes, out_shape, op)
    else:
        wflow = None
        maps = _check_input_tiles(input_tiles, names, shapes, out_shape)
        out_shape = _out_shape_from_maps(maps, names, shapes, out_shape)
    if not 1 <= len(out_shape) <= MAX_MAP_RANK:
        raise ValueError(f"tile_map: the output of {op.__name__} has shape {out_shape}; "
                         f"tile_map writes outputs of rank 1 to {MAX_MAP_RANK}")
    tile = _check_tile_size(tile_size, out_shape, op)
    cut = [e < n for e, n in zip(tile, out_shape)]
    if wflow is not None:
        _check_flow(wflow, maps, cut, names, tile_size, tile, out_shape, op, whole=True)
    in_tiles = tuple(tuple(n if m is None else tile[m] for n, m in zip(s, mk))
                     for s, mk in zip(shapes, maps))
    t = trace(op, [TileType(x.dtype, s) for x, s in zip(inputs, in_tiles)],
              f"while tracing {op.__name__} on the tiles {_shapes(inputs, in_tiles)} of "
              f"tile_size={tile_size!r}")
    tflow = analyse(t, [[m is not None for m in mk] for mk in maps])
    _check_flow(tflow, maps, cut, names, tile_size, tile, out_shape, op, whole=False)
    result = t.result.type.shape
    broadcast = result != tile
    if broadcast and not _broadcasts(result, tile):
        raise ValueError(f"tile_map: on tiles {_shapes(inputs, in_tiles)} {op.__name__} gives "
                         f"a tile of shape {result}, but an output tile of tile_size="
                         f"{tile_size!r} is {tile}; the tile op must give one output tile per "
                         "call (check input_tiles / out_shape)")
    ops = list(walk(t.body))
    return Tiling(tuple(out_shape), t.result.type.dtype, tile, maps, in_tiles,
                  any(o.name == "tile.matmul" for o in ops),
                  any(o.name in CROSS_BLOCK_OPS for o in ops), broadcast)


def _shapes(inputs, shapes=None) -> str:
    shapes = shapes or [t.shape for t in inputs]
    return ", ".join(f"{t.name}{tuple(s)}" for t, s in zip(inputs, shapes))


def _shape_arg(shape) -> tuple:
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in shape):
        raise TypeError(f"tile_map(out_shape=...) must be a tuple of positive ints, got "
                        f"{shape!r}")
    return tuple(shape)


def _broadcasts(result: tuple, tile: tuple) -> bool:
    if len(result) > len(tile):
        return False
    return all(r in (1, t) for r, t in zip(result[::-1], tile[::-1]))


def _maps_from_flow(flow, names, shapes, out_shape, op) -> tuple:
    maps = []
    for k, (name, shape) in enumerate(zip(names, shapes)):
        mk = []
        for i, n in enumerate(shape):
            targets = [d for d, axes in enumerate(flow.result_axes) if (k, i) in axes]
            if len(targets) > 1:
                raise ValueError(
                    f"tile_map(inputs=...): axis {i} of input {name!r} reaches output axes "
                    f"{targets} of {op.__name__} (an outer product of a tensor with itself?); "
                    "tile_map loads each input once per tile, so pass the tensor once per "
                    "use (inputs=[x, x]) with one tile op parameter each")
            d = targets[0] if targets else None
            if d is not None and (d >= len(out_shape) or out_shape[d] != n):
                raise ValueError(f"tile_map(inputs=...): axis {i} of input {name!r} (extent "
                                 f"{n}) reaches output axis {d} of shape {out_shape}; pass "
                                 "input_tiles= to say how to tile it")
            mk.append(d)
        maps.append(tuple(mk))
    return tuple(maps)


def _check_input_tiles(input_tiles, names, shapes, out_shape) -> tuple:
    if not isinstance(input_tiles, (tuple, list)) or len(input_tiles) != len(names):
        raise TypeError(f"tile_map(input_tiles=...) needs one entry per input ({len(names)}: "
                        f"{', '.join(names)}), got {input_tiles!r}")
    maps = []
    for name, shape, entry in zip(names, shapes, input_tiles):
        if not isinstance(entry, (tuple, list)) or len(entry) != len(shape) or not all(
                e is None or (isinstance(e, int) and not isinstance(e, bool) and 0 <= e <= 1)
                for e in entry):
            raise TypeError(f"tile_map(input_tiles=...): the entry of input {name!r} (shape "
                            f"{shape}) must give, per axis, the output axis it follows (0 or "
                            f"1) or None for whole, e.g. (0, None); got {entry!r}")
        maps.append(tuple(entry))
    return tuple(maps)


def _out_shape_from_maps(maps, names, shapes, out_shape) -> tuple:
    given = _shape_arg(out_shape) if out_shape is not None else None
    rank = len(given) if given else 1 + max((m for mk in maps for m in mk if m is not None),
                                             default=0)
    result = []
    for d in range(rank):
        extents = {(names[k], s[i]) for k, (s, mk) in enumerate(zip(shapes, maps))
                   for i, m in enumerate(mk) if m == d}
        sizes = {n for _, n in extents}
        if len(sizes) > 1:
            raise ValueError(f"tile_map(input_tiles=...): axes following output axis {d} have "
                             f"different extents: {sorted(extents)}")
        if given is not None:
            if sizes and sizes != {given[d]}:
                raise ValueError(f"tile_map(out_shape={out_shape!r}): output axis {d} has "
                                 f"extent {given[d]} but input_tiles maps axes of extent "
                                 f"{sizes.pop()} to it")
            result.append(given[d])
        elif sizes:
            result.append(sizes.pop())
        else:
            raise ValueError(f"tile_map: no input axis follows output axis {d} in "
                             "input_tiles, so its extent is unknown: pass out_shape=")
    return tuple(result)


def _check_tile_size(tile_size, out_shape, op) -> tuple:
    rank = len(out_shape)
    example = "tile_size=256" if rank == 1 else "tile_size=(16, 16)"
    ts = (tile_size,) if isinstance(tile_size, int) and not isinstance(tile_size, bool) \
        else tile_size
    if not isinstance(ts, (tuple, list)) or not all(
            isinstance(t, int) and not isinstance(t, bool) for t in ts):
        raise TypeError(f"tile_map(tile_size=...) must be an int (1-D) or a tuple of ints "
                        f"(2-D), got {tile_size!r}")
    if len(ts) != rank:
        raise ValueError(f"tile_map(tile_size={tile_size!r}) has {len(ts)} dimension(s) but "
                         f"the output of {op.__name__} has shape {out_shape} (rank {rank}); "
                         f"give one tile extent per output axis, e.g. {example}")
    if any(t <= 0 for t in ts):
        raise ValueError(f"tile_map(tile_size={tile_size!r}): tile extents must be positive")
    return tuple(min(t, n) for t, n in zip(ts, out_shape))


def _check_flow(flow, maps, cut, names, tile_size, tile, out_shape, op, whole) -> None:
    """Refuse cutting an axis the tile op combines, cutting an output axis no input gives,
    and (on the tile trace) a result axis fed by an input axis that follows another one."""
    for (k, i), why in sorted(flow.mixed.items()):
        d = maps[k][i]
        if d is not None and cut[d]:
            raise ValueError(
                f"tile_map(tile_size={tile_size!r}) cuts output axis {d} into tiles of "
                f"{tile[d]}, but {op.__name__} combines the elements of input {names[k]!r} "
                f"along its axis {i}, which follows output axis {d} ({why}); the tile must "
                f"hold that axis whole: use {out_shape[d]} (or more) for axis {d} of "
                "tile_size")
    offset = len(out_shape) - len(flow.result_axes)
    for j, axes in enumerate(flow.result_axes):
        d = j + offset
        if whole and not axes and cut[d] and out_shape[d] > 1:
            raise ValueError(
                f"tile_map(tile_size={tile_size!r}) cuts output axis {d}, but that axis of "
                f"{op.__name__}'s result comes from no input (it is made inside the tile op, "
                f"e.g. by a fixed shape); tile_size must cover it whole ({out_shape[d]})")
        for k, i in sorted(axes):
            m = maps[k][i]
            if m != d and (cut[d] or (m is not None and cut[m])):
                raise ValueError(
                    f"tile_map(input_tiles=...): axis {i} of input {names[k]!r} reaches "
                    f"output axis {d} of {op.__name__}, but it is tiled as "
                    f"{'whole' if m is None else f'output axis {m}'}")

