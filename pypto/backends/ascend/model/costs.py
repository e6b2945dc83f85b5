"""What each PTO instruction costs on the target: the cost families as data, and the rules
that turn an instruction's opcode, tile shapes, dtypes and locations into cycles.

The numbers come from ``targets.CostModel`` (shared/reference/ascend910b.md, "Cycle model
parameters"): cube fractals, vector bytes per cycle and issue overhead, transfer bandwidth per
path, the DMA start of GM loads, the bursts of a GM transfer, the launch and task dispatch.
The per-instruction figures are calibrated on the chip (``calibration.py``).
Nothing here knows about time lines; ``block.py`` places these costs on a core's pipes.
"""
from __future__ import annotations

from ....compiler.elementwise import BINARY, UNARY
from ....compiler.pto.isa import GROUP_REDUCE_SHAPES, EXPAND_OPS, is_scalar, is_sync, pipe_of
from ....compiler.pto import Tile
from ....language import dtypes as dt
from ....target import GiB, Target, get_target

# -- instruction families (rules as data) -------------------------------------------------------

_FAMILY_OPS = {
    "transcendental": ("texp", "tlog", "tsqrt"),
    "reciprocal": ("trsqrt", "trecip"),
    "divide": ("tdiv", "tdivs", "tfmod", "tfmods", "trem", "trems"),
    "convert": ("tcvt",),
    "transpose": ("ttrans",),
}
VECTOR_FAMILY = {
    **{op.pto: "unary" for op in UNARY.values() if op.pto},
    **{op.pto_scalar: "scalar" for op in BINARY.values() if op.pto_scalar},
    **{op.pto: "binary" for op in BINARY.values() if op.pto},
    "taddc": "binary", "tsubc": "binary",
    **{f"tcolexpand{op}": "divide" if op == "div" else "binary" for op in EXPAND_OPS},
    **{f"trowexpand{op}": "row_expand_binary" for op in EXPAND_OPS},
    **{op: family for family, ops in _FAMILY_OPS.items() for op in ops},
    **{f"trow{r}": "row_reduce" for r in ("sum", "max", "min", "prod", "any", "all")},
    **{f"tcol{r}": "col_reduce" for r in ("sum", "max", "min", "prod", "any", "all")},
    "trowexpand": "row_expand", "tsel": "select", "tsels": "select_scalar",
}
# vector instructions that move or convert data rather than compute (no flops)
DATA_MOVES = {"texpands", "tfillpad", "trowexpand", "tcolexpand", "tcvt", "textract", "tconcat",
              "ttrans", "tmov", "tsel", "tsels", "tgather"}


def vector_family(op: str) -> str:
    """Anything not listed (copies, expands, conversions) streams like a unary op."""
    return VECTOR_FAMILY.get(op, "unary")


# -- per-instruction cost -----------------------------------------------------------------------

def valid_shape(tile: Tile) -> tuple[int, int]:
    rows = tile.rows if tile.v_row is None else tile.v_row
    cols = tile.cols if tile.v_col is None else tile.v_col
    return rows, cols


def tile_bytes(tile: Tile) -> int:
    rows, cols = valid_shape(tile)
    return rows * cols * tile.dtype.itemsize


def bytes_per_cycle(gibps: float, target: Target) -> float:
    return gibps * GiB / (target.clock_ghz * 1e9)


def transfer_path(inst) -> tuple[str, str, Tile]:
    """(source, destination, on-chip tile) of a transfer; "gm" is global memory. A load of
    an ND window into L1 is converted to NZ fractals by the DMA on the way ("mat.nd2nz")."""
    if inst.op == "tload":
        tile = inst.outs[0]
        nd = getattr(inst.ins[0], "layout", "ND") == "ND"
        return "gm", ("mat.nd2nz" if tile.loc == "mat" and nd else tile.loc), tile
    src = inst.ins[0]
    if inst.op == "tstore":
        return src.loc, "gm", src
    if inst.op == "textract":        # a window of the source: it moves the destination's bytes
        return src.loc, inst.outs[0].loc, inst.outs[0]
    return src.loc, inst.outs[0].loc, src


def is_transfer(inst, pipe: str) -> bool:
    if inst.op in ("tload", "tstore") or pipe in ("MTE1", "FIX"):
        return True
    return inst.op == "tmov" and isinstance(inst.ins[0], Tile) and inst.ins[0].loc == "vec" \
        and inst.outs[0].loc == "vec"


def burst_bytes(bursts: tuple, target: Target) -> int:
    """Path bytes of a GM transfer made of ``bursts = (count, length in bytes)``: whole DMA
    blocks per burst plus the burst's start-up (``CostModel.burst_*``)."""
    costs = target.costs
    count, length = bursts
    blocks = -(-length // costs.burst_block_bytes)
    return count * (blocks * costs.burst_block_bytes + costs.burst_overhead_bytes)


def transfer_cycles(src: str, dst: str, nbytes: int, target: Target,
                    active_cores: int = 1, bursts: tuple | None = None,
                    gm_cycles: float | None = None) -> float:
    """Cycles to move ``nbytes`` on one path. Paths touching global memory get at most their
    share of the chip's memory bandwidth: ``gm_cycles`` when the caller knows it (the L2 and
    HBM time of this transfer at the core's shares, ``model/memory.py``), else the HBM's
    (``hbm_gbps`` over the active cores). ``bursts`` (count, length) is the GM side's shape
    (``gm_bursts``); without it the bytes count as one contiguous run with no burst cost (the
    per-instruction figures of the reference)."""
    costs = target.costs
    if bursts is not None and bursts[0]:
        nbytes = burst_bytes(bursts, target)
    path = (src, dst)
    if path in costs.dma:
        head, rate = costs.dma[path]
        cycles = head + nbytes / rate
    elif path in costs.transfer_gibps:
        cycles = nbytes / bytes_per_cycle(costs.transfer_gibps[path], target)
    else:
        raise ValueError(f"the cycle model has no bandwidth for {src} -> {dst} on "
                         f"{target.name}")
    if "gm" in path:
        if gm_cycles is None:
            share = target.hbm_gbps * 1e9 / max(1, active_cores) / (target.clock_ghz * 1e9)
            gm_cycles = nbytes / share
        cycles = max(cycles, gm_cycles)
    return cycles


def matmul_cycles(left: Tile, right: Tile, target: Target) -> tuple[float, int]:
    """(cycles, flops): fractals of M x K x N padded to the cube's fractal shape."""
    costs = target.costs
    m, k = valid_shape(left)
    n = valid_shape(right)[1]
    frac_k = target.fractal_bytes // left.dtype.itemsize
    rows = target.fractal_rows
    fractals = -(-m // rows) * -(-k // frac_k) * -(-n // rows)
    per = costs.cube_fractal_cycles.get(left.dtype.name)
    if per is None:
        raise ValueError(f"the cube has no {left.dtype.name} matmul")
    return costs.cube_head_cycles + fractals * per, 2 * m * k * n


def sort_cycles(inst, target: Target) -> tuple[float, int, int]:
    """(cycles, flops, bytes) of TSORT32, TMRGSORT and TGATHER's mask form, per pto-isa's
    cost model lines (targets.CostModel.sort32 / mrgsort / mask_gather). A multi-list
    TMRGSORT also copies its staging tile into the destination (a UB move)."""
    costs = target.costs
    src, dst = inst.ins[0], inst.outs[0]
    if inst.op == "tsort32":
        rows, cols = valid_shape(src)
        head, per = costs.sort32
        return head + per * rows * -(-cols // 32), rows * cols, tile_bytes(dst)
    if inst.op == "tgather":
        head, per = costs.mask_gather
        nbytes = tile_bytes(src)
        return head + per * -(-nbytes // costs.repeat_bytes), 0, nbytes
    head, per = costs.mrgsort
    pairs = sum(valid_shape(t)[0] * valid_shape(t)[1] for t in inst.ins) // 2
    cycles = head + per * pairs / 128
    if "tmp" in inst.attrs:
        cycles += _streaming_cycles("unary", dst, target)
    return cycles, pairs, tile_bytes(dst)


SORT_OPS = ("tsort32", "tmrgsort", "tgather")


# families pto-isa issues through TUnaryOp, which checks at run time whether the rows are whole
RUNTIME_WHOLE_ROWS = ("unary", "transcendental", "reciprocal")


def vector_repeats(tile: Tile, family: str, target: Target) -> int:
    """The repeats of a vector instruction over ``tile``: the whole
    valid region at once when its rows are back to back, else each row's repeats, issued row
    by row (pto-isa's A2/A3 code for a tile whose valid shape is known only at run time: a
    unary instruction checks at run time whether its rows are whole, the others cannot:
    ``RUNTIME_WHOLE_ROWS``)."""
    rows, cols = valid_shape(tile)
    row_bytes = cols * tile.dtype.itemsize
    step = target.costs.repeat_bytes
    dynamic = tile.v_row is None or tile.v_col is None
    whole_rows = cols == tile.cols or rows == 1
    if whole_rows and (family in RUNTIME_WHOLE_ROWS or not dynamic):
        return -(-rows * row_bytes // step)
    return rows * -(-row_bytes // step)


def _streaming_cycles(family: str, tile: Tile, target: Target) -> float:
    costs = target.costs
    spec = costs.vector[family]
    repeats = vector_repeats(tile, family, target)
    issues = max(1, -(-repeats // costs.max_repeats))
    return issues * spec.head_cycles + repeats * spec.repeat_cycles


def _row_reduce_cycles(inst, src: Tile, target: Target) -> float:
    """A whole-row reduce a row; wider rows first fold their repeats into one with binary
    instructions over every row, one after another, each behind a barrier (pto-isa's A2/A3
    TRowReduceOps.hpp FillTmp/TmpProc, TRowSum.hpp's pairwise tree: a row of n repeats takes
    n - 1 of them, as a column reduction takes a step a row). The fp32 shapes of
    ``isa.GROUP_REDUCE_SHAPES`` go through vcgmax/vcgadd instead: one pass folds every
    32-byte block to one element, then a few small steps (a group step folds 8 partials, a
    binary one 2) finish each row."""
    costs = target.costs
    rows, cols = valid_shape(src)
    if _group_reducible(inst, src):
        bits = (cols // 8).bit_length() - 1          # log2 of the partials a row keeps
        steps = bits // 3 + bits % 3
        first = rows * cols * src.dtype.itemsize // costs.repeat_bytes
        return (costs.vector_issue_cycles + first * costs.group_reduce_cycles
                + (steps + 1) * costs.vector_barrier_cycles + steps * costs.vector_issue_cycles)
    per_row = -(-cols * src.dtype.itemsize // costs.repeat_bytes)
    fold = 0.0
    if per_row > 1:
        fold = (per_row - 1) * (rows * costs.vector["binary"].repeat_cycles
                                + costs.vector_issue_cycles + costs.vector_barrier_cycles)
    return costs.vector_issue_cycles + fold + rows * costs.row_reduce_cycles


def _group_reducible(inst, src: Tile) -> bool:
    out = inst.outs[0] if inst.outs and isinstance(inst.outs[0], Tile) else None
    return (src.dtype == dt.float32 and out is not None and out.is_column
            and (src.v_row, src.v_col) == (src.rows, src.cols) == src.alloc_shape
            and (src.rows, src.cols) in GROUP_REDUCE_SHAPES)


def _col_reduce_cycles(inst, src: Tile, target: Target) -> float:
    """pto-isa copies the first row, then combines row after row, one instruction and one
    barrier each; TCOLSUM with a scratch tile adds rows pairwise instead (a tree of
    single-row adds, a barrier per level)."""
    costs = target.costs
    rows, cols = valid_shape(src)
    row_bytes = cols * src.dtype.itemsize
    copy = row_bytes / costs.ub_copy_bytes_per_cycle + costs.vector["unary"].head_cycles
    if rows <= 1:
        return copy
    per_add = (costs.vector_issue_cycles
               + -(-row_bytes // costs.repeat_bytes) * costs.vector["binary"].repeat_cycles)
    if inst.op == "tcolsum" and "tmp" in inst.attrs:
        levels = (rows - 1).bit_length()
        return copy + (rows - 1) * per_add + 2 * levels * costs.vector_barrier_cycles
    return copy + (rows - 1) * (per_add + costs.vector_barrier_cycles)


def _per_row_cycles(family: str, tile: Tile, target: Target) -> float:
    """Row expansion and select: work for every row on top of streaming the tile."""
    costs = target.costs
    rows, _ = valid_shape(tile)
    per_row = costs.row_expand_cycles if family == "row_expand" else costs.select_row_cycles
    repeats = vector_repeats(tile, "unary", target)
    return costs.vector["unary"].head_cycles + rows * per_row + repeats


def _select_scalar_cycles(tile: Tile, target: Target) -> float:
    """TSELS (pto-isa a2a3/TSels.hpp): the scalar stored, an S-to-V flag, SET_CMPMASK and a
    barrier once, then one vsel a row over the row's repeats, the row's mask bits read in
    place, no per-row mask setup (TSEL's 16 cycles a row). No silicon figure: a vsel issue
    is priced as a unary instruction's (TABS)."""
    costs = target.costs
    spec = costs.vector["unary"]
    rows, cols = valid_shape(tile)
    repeats = -(-cols * tile.dtype.itemsize // costs.repeat_bytes)
    setup = costs.vector_issue_cycles + costs.vector_barrier_cycles
    return setup + rows * (spec.head_cycles + repeats * spec.repeat_cycles)


def _row_expand_binary_cycles(tile: Tile, target: Target, op: str) -> float:
    """pto-isa's A2/A3 TRowExpandBinOp: vbrcb copies each row's scalar eight times (a repeat
    per 8 rows) and a barrier, then the op over the tile: one instruction per 256-byte column
    block with a repeat a row, or one a row when a row has more blocks than the tile rows;
    TROWEXPANDDIV's op is a vdiv, at the divide family's cost."""
    costs = target.costs
    spec = costs.vector["divide" if op == "trowexpanddiv" else "binary"]
    rows, cols = valid_shape(tile)
    blocks = -(-cols * tile.dtype.itemsize // costs.repeat_bytes)
    issues = rows if blocks > rows else blocks
    brcb = costs.vector_issue_cycles + -(-rows // 8) + costs.vector_barrier_cycles
    return brcb + issues * spec.head_cycles + rows * blocks * spec.repeat_cycles


def vector_cycles(inst, target: Target) -> tuple[float, int, int]:
    """(cycles, flops, bytes) of a vector instruction by its family (``VECTOR_FAMILY``;
    anything unlisted streams like a unary op): the largest tile sets the repeats."""
    if inst.op in SORT_OPS:
        return sort_cycles(inst, target)
    tiles = [t for t in (*inst.ins, *inst.outs) if isinstance(t, Tile)]
    big = max(tiles, key=tile_bytes)
    nbytes = tile_bytes(big)
    elements = max(valid_shape(t)[0] * valid_shape(t)[1] for t in tiles)
    family = vector_family(inst.op)
    if family == "row_reduce":
        cycles = _row_reduce_cycles(inst, inst.ins[0], target)
    elif family == "col_reduce":
        cycles = _col_reduce_cycles(inst, inst.ins[0], target)
    elif family in ("row_expand", "select"):
        cycles = _per_row_cycles(family, inst.outs[0], target)
    elif family == "select_scalar":
        cycles = _select_scalar_cycles(inst.outs[0], target)
    elif family == "row_expand_binary":
        cycles = _row_expand_binary_cycles(inst.outs[0], target, inst.op)
    else:
        cycles = _streaming_cycles(family, big, target)
    flops = 0 if inst.op in DATA_MOVES else elements
    return cycles, flops, nbytes


def instruction_cycles(inst, target, *, nbytes: int | None = None,
                       active_cores: int = 1, bursts: tuple | None = None,
                       gm_cycles: float | None = None) -> tuple[float, int, int]:
    """(cycles, flops, bytes) of one instruction on ``target``. ``nbytes`` overrides a
    transfer's size (the part of the tile inside the tensor), ``bursts`` gives its shape in
    global memory; ``active_cores`` share HBM, or ``gm_cycles`` is the transfer's memory time
    (``transfer_cycles``)."""
    target = as_target(target)
    costs = target.costs
    if is_sync(inst):
        return costs.sync_cycles, 0, 0
    if is_scalar(inst):
        return costs.scalar_cycles, 0, 0
    pipe = pipe_of(inst)
    if is_transfer(inst, pipe):
        src, dst, tile = transfer_path(inst)
        moved = tile_bytes(tile) if nbytes is None else nbytes
        return transfer_cycles(src, dst, moved, target, active_cores, bursts,
                               gm_cycles), 0, moved
    if inst.op in ("tmatmul", "tmatmul.acc", "tmatmul.bias"):
        left, right = inst.ins[-2], inst.ins[-1]
        cycles, flops = matmul_cycles(left, right, target)
        return cycles, flops, tile_bytes(left) + tile_bytes(right)
    if pipe == "M":               # texpands on the accumulator: the cube fills L0C
        acc = inst.outs[0]
        fractals = -(-tile_bytes(acc) // costs.acc_fractal_bytes)
        return costs.cube_head_cycles + fractals, 0, tile_bytes(acc)
    if pipe == "S":               # tci writes element by element; treshape is metadata
        out = inst.outs[0]
        count = out.rows * out.cols if inst.op == "tci" else 1
        return count * costs.scalar_cycles, 0, tile_bytes(out) if inst.op == "tci" else 0
    return vector_cycles(inst, target)


def as_target(target) -> Target:
    return get_target(target) if isinstance(target, str) else target


# -- global memory bursts -----------------------------------------------------------------------

def gm_bursts(tensor, dims: tuple, strides: tuple, window: tuple, itemsize: int) -> tuple:
    """(count, bytes) of the contiguous runs of global memory a transfer of the valid
    ``window`` (rows, cols) touches. ND: one run per row of the window, merged into one when
    the rows are whole and back to back; a column stride other than 1 makes every element a
    run. NZ: one run per column of fractals (16 rows x 32 bytes each, consecutive down the
    rows), one in all when the window spans every row. NC1HWC0: one run of pixels x 32 bytes
    when the window takes the whole channel group, else one per pixel."""
    rows, cols = window
    if not rows or not cols:
        return (0, 0)
    layout = getattr(tensor, "layout", "ND")
    if layout == "NZ":
        k1, m1, m0, c0 = dims
        if rows >= m1 * m0:
            return (1, rows * cols * itemsize)
        return (-(-cols // c0), rows * c0 * itemsize)
    if layout == "NC1HWC0":
        c0 = dims[-1]
        return (1, rows * cols * itemsize) if cols == c0 else (rows, cols * itemsize)
    if len(dims) == 1:
        return (1, cols * itemsize) if strides[0] == 1 else (cols, itemsize)
    s0, s1 = strides[-2], strides[-1]
    if s1 != 1:
        return (rows * cols, itemsize)
    if rows == 1 or (cols == dims[-1] and s0 == cols):
        return (1, rows * cols * itemsize)
    return (rows, cols * itemsize)


# -- launch and task dispatch -------------------------------------------------------------------

def dispatch_cycles(target: Target, unit: str = "block") -> tuple[float, float]:
    """(launch, dispatch per block of an SPMD launch, or with ``unit="task"`` per task of an
    MPMD graph) in cycles of the target's clock (``CostModel``)."""
    c = target.costs
    launch = c.launch_us * target.clock_ghz * 1e3
    if unit == "task":
        return launch, c.task_dispatch_us * target.clock_ghz * 1e3
    return launch, c.block_dispatch_cycles
