"""Python source of the ``@pypto.jit`` kernels behind ``pypto.conv2d``: the implicit GEMM on
the cube and the layout conversions around it.

Every kernel sees its tensors as rank-2 host views (zero-copy reshapes or strided views made
by ``convolution.py``), so rank-2 tiles suffice:

- a feature map in NC1HWC0 ``(N, C1, H, W, C0)`` is ``(N*C1*H*W, C0)``: one row per pixel of
  one channel block, C0 channels across;
- the cube's right operand is, per filter tap ``(c1, kh, kw)``, a ``C0 x Cout`` block: either
  FRACTAL_Z ``(C1*KH*KW*N1*16, C0)`` read transposed (float16: ``matmul(b_trans=True)``), or the
  "KN" form ``(C1*KH*KW*C0, Cout_padded)`` (A2/A3 cannot read a float32 operand transposed);
- an OIHW weight is ``(Cout, Cin*KH*KW)``, an NCHW tensor ``(N*C, H*W)``.

Why not ``pto.timg2col``: the oracle's PTOAS (a56b18c3) registers no ``pto.timg2col`` nor
``pto.tset_img2col_*`` op (they appear only in its bytecode opcode table; the parser answers
"custom op 'pto.timg2col' is unknown"), so a program using them could not be verified or
lowered. The conv kernel therefore builds the image-to-column operand in L1 itself: for each
tap one rectangular window of TM pixels (a strided view when the stride is > 1) is loaded and
multiplied into the accumulators. Spatial padding is done once by the input conversion kernel,
so every window lies inside the padded feature map.

All sizes are literals in the source (each conv shape gets its own kernel, cached by source
in ``codegen.make_kernel``).
"""
from __future__ import annotations

# Output pixels per cube tile at most (M of each matmul) and C0 blocks of output channels per
# kernel block at most; rows x NB accumulators are held in L0C at once.
MAX_TM = 128
MAX_NB = 8
MAX_ROWS = 8            # output rows per block at most
MAX_ACCS = 16           # accumulators per block at most (rows x NB)
MAX_ACC_BYTES = 64 * 1024   # of L0C's 128 KB
WEIGHT_TILE = 16        # output channels per weight-conversion tile


def _dtype(dtype) -> str:
    return f"pl.{dtype}"


def persistent(source: str, grid: tuple, cores: int) -> tuple[str, tuple]:
    """(source, grid) of ``source`` (written for one block per work item of ``grid``, up to
    three axes) as a persistent kernel: at most ``cores`` blocks, each looping over the items
    ``pid, pid + blocks, ...``. The cycle model charges every block its dispatch (2000 cycles,
    ``CostModel.block_dispatch_cycles``), so a launch of many small blocks pays that many times;
    one block per core pays it once."""
    grid = tuple(grid) + (1,) * (3 - len(grid))
    items = grid[0] * grid[1] * grid[2]
    head, doc, *body = source.rstrip("\n").split("\n")
    loop = [head, doc,
            f"    for item in range(pl.program_id(0), {items}, pl.num_programs(0)):",
            f"        pid0 = item // {grid[1] * grid[2]}",
            f"        pid1 = (item // {grid[2]}) % {grid[1]}",
            f"        pid2 = item % {grid[2]}"]
    for line in body:
        for k in range(3):
            line = line.replace(f"pl.program_id({k})", f"pid{k}")
        loop.append("    " + line)
    return "\n".join(loop) + "\n", (min(items, cores),)


def feature_map_kernel(name, *, nchw, n, c, c1, c0, h, w, hp, wp, ph, pw, dtype) -> str:
    """NCHW ``(N*C, H*W)`` or NC1HWC0 ``(N*C1*H*W, C0)`` → zero-padded NC1HWC0
    ``(N*C1*HP*WP, C0)``; one block per padded row ``(n, c1, ih)``. A row of the padding is
    stored as zeros; an inner row is zeros at its borders, then the input row at column PW."""
    padded = (hp, wp) != (h, w)
    lines = [f"def {name}(x, out):",
             f'    """{"NCHW" if nchw else "NC1HWC0"} -> padded NC1HWC0 (pad {ph}, {pw}), '
             f'one block per padded row."""',
             "    r = pl.program_id(0)",
             f"    ih = r % {hp} - {ph}",
             f"    nc1 = r // {hp}"]
    if padded:
        lines.append(f"    pl.store(out, offsets=(r * {wp}, 0), "
                     f"value=pl.zeros(({wp}, {c0}), dtype={_dtype(dtype)}))")
    body = []
    if nchw:
        body += [f"t = pl.load(x, offsets=((nc1 // {c1}) * {c} + (nc1 % {c1}) * {c0}, "
                 f"ih * {w}), shape=({c0}, {w}))"]
        if c % c0 and n > 1:      # rows past C belong to the next image: zero them
            # (the compare is made on the whole tile: an (M, 1) compare's mask is printed
            # with a valid shape PTOAS rejects)
            body += [f"keep = pl.broadcast_to(pl.reshape(pl.arange(0, {c0}), ({c0}, 1)), "
                     f"({c0}, {w})) < {c} - (nc1 % {c1}) * {c0}",
                     "t = pl.where(keep, t, pl.zeros_like(t))"]
        body.append("t = pl.trans(t)")
    else:
        body.append(f"t = pl.load(x, offsets=((nc1 * {h} + ih) * {w}, 0), shape=({w}, {c0}))")
    body.append(f"pl.store(out, offsets=(r * {wp} + {pw}, 0), value=t)")
    if hp != h:
        lines.append(f"    if ih >= 0:")
        lines.append(f"        if ih < {h}:")
        lines += ["            " + b for b in body]
    else:
        lines += ["    " + b for b in body]
    return "\n".join(lines) + "\n"


def to_nchw_kernel(name, *, c, c1, c0, h, w) -> str:
    """NC1HWC0 ``(N*C1*H*W, C0)`` → NCHW ``(N*C, H*W)``, one block per row ``(n, c1, h)``;
    the last channel block stores only its ``C % C0`` real channels."""
    tail = c - (c1 - 1) * c0
    lines = [f"def {name}(x, out):",
             '    """NC1HWC0 -> NCHW, one block per (n, c1, h) row."""',
             "    r = pl.program_id(0)",
             f"    nc1 = r // {h}",
             f"    k = nc1 % {c1}",
             f"    row = (nc1 // {c1}) * {c} + k * {c0}",
             f"    col = (r % {h}) * {w}",
             f"    t = pl.trans(pl.load(x, offsets=(r * {w}, 0), shape=({w}, {c0})))"]
    if tail == c0:
        lines.append("    pl.store(out, offsets=(row, col), value=t)")
    else:
        lines += [f"    if k < {c1 - 1}:",
                  "        pl.store(out, offsets=(row, col), value=t)",
                  "    else:",
                  f"        pl.store(out, offsets=(row, col), value=t[0:{tail}, :])"]
    return "\n".join(lines) + "\n"


def dense_weight_kernel(name, *, cin, cin_g, cout_g, kk, dtype) -> str:
    """Grouped OIHW ``(Cout, Cin/g*KK)`` → the block-diagonal dense ``(Cout, Cin*KK)``: one
    block per output channel, its row zeroed then its group's columns written."""
    return "\n".join([
        f"def {name}(x, out):",
        '    """grouped weights -> block-diagonal dense weights, one block per output channel."""',
        "    o = pl.program_id(0)",
        f"    pl.store(out, offsets=(o, 0), value=pl.zeros((1, {cin * kk}), "
        f"dtype={_dtype(dtype)}))",
        f"    t = pl.load(x, offsets=(o, 0), shape=(1, {cin_g * kk}))",
        f"    pl.store(out, offsets=(o, (o // {cout_g}) * {cin_g * kk}), value=t)"]) + "\n"


def oihw_to_kn_kernel(name, *, c0, kk) -> str:
    """OIHW ``(Cout, Cin*KK)`` → KN ``(C1*KK*C0, Cout_p)``; block ``(c1, o-tile)`` loads the
    ``(16, C0*KK)`` window of its channel block (past Cin and Cout: zeros), transposes it to
    rows ``(ci, tap)``, views it as ``(C0, KK*16)`` and stores each tap's ``(C0, 16)``."""
    to = WEIGHT_TILE
    lines = [f"def {name}(x, out):",
             '    """OIHW -> the cube\'s K x N weight form, one block per (c1, 16 outputs)."""',
             "    c1 = pl.program_id(0)",
             f"    o0 = pl.program_id(1) * {to}",
             f"    t = pl.load(x, offsets=(o0, c1 * {c0 * kk}), shape=({to}, {c0 * kk}))",
             f"    u = pl.reshape(pl.trans(t), ({c0}, {kk * to}))"]
    for k in range(kk):
        lines.append(f"    pl.store(out, offsets=((c1 * {kk} + {k}) * {c0}, o0), "
                     f"value=u[:, {k * to}:{(k + 1) * to}])")
    return "\n".join(lines) + "\n"


def fractal_z_to_kn_kernel(name, *, c0, cout_p) -> str:
    """FRACTAL_Z ``(T*Cout_p, C0)`` → KN ``(T*C0, Cout_p)``: each tap's block transposed."""
    to = WEIGHT_TILE
    return "\n".join([
        f"def {name}(x, out):",
        '    """FRACTAL_Z -> the cube\'s K x N weight form, one block per (tap, 16 outputs)."""',
        "    tap = pl.program_id(0)",
        f"    o0 = pl.program_id(1) * {to}",
        f"    t = pl.load(x, offsets=(tap * {cout_p} + o0, 0), shape=({to}, {c0}))",
        f"    pl.store(out, offsets=(tap * {c0}, o0), value=pl.trans(t))"]) + "\n"


def conv_kernel(name, *, c1, kh, kw, hp, wp, oh, ow, c1o, c0, sh, sw, dh, dw, tm, nb, rows,
                fractal_z, bias, cout_p) -> str:
    """The implicit GEMM. Block ``(n, rows output rows from oh0, ow-tile, channel-group)``
    computes ``TM`` output pixels of each of ``rows`` output rows for ``NB`` blocks of C0
    output channels (rows x NB accumulators in L0C): for every input channel block and
    filter row (a runtime loop) and filter column (unrolled), the windows of the TM input
    pixels each row reads are loaded (view ``x<s>`` holds every SW-th pixel from pixel s),
    then each weight block once, and multiplied into the accumulators; several rows share
    each weight block's load. The bias is one more product (a ones column times the bias
    row, both zero-padded by their loads). The windows and weight blocks lie inside their
    tensors (the feature map is padded, the weights' extents are whole blocks), so they are
    loaded with ``padding=None``: no fill of the L1 tile before each load, which was three
    quarters of the modelled time (layer3 3x3 256 of ResNet-50: 80 -> 21 us)."""
    views = [f"x{s}" for s in range(sw)]
    params = views + ["w"] + (["ones", "bias"] if bias else []) + ["out"]
    lines = [f"def {name}({', '.join(params)}):",
             f'    """conv2d as an implicit GEMM: {rows} row(s) x {tm} pixels x {nb} channel '
             f'block(s) of {c0} per block."""',
             "    r = pl.program_id(0)",
             f"    n = r // {oh // rows}",
             f"    oh0 = (r % {oh // rows}) * {rows}",
             f"    ow0 = pl.program_id(1) * {tm}",
             f"    cb = pl.program_id(2) * {nb}"]
    accs = [[f"acc{i}_{j}" for j in range(nb)] for i in range(rows)]
    for row in accs:
        for a in row:
            lines.append(f"    {a} = pl.zeros(({tm}, {c0}), dtype=pl.float32)")
    if bias:
        # own names: a tile bound before the loop and rebound in it would be loop-carried
        lines.append(f"    ones_t = pl.load(ones, offsets=(0, 0), shape=({tm}, {c0}))")
        for j in range(nb):
            lines.append(f"    bias_t = pl.load(bias, offsets=(0, (cb + {j}) * {c0}), "
                         f"shape=({c0}, {c0}))")
            for row in accs:
                lines.append(f"    {row[j]} = pl.matmul(ones_t, bias_t, acc={row[j]})")
    lines += [f"    for t in range({c1 * kh}):",
              f"        base = (((n * {c1} + t // {kh}) * {hp} + oh0 * {sh} + (t % {kh}) * {dh})"
              f" * {wp} + ow0 * {sw}) // {sw}"]
    pitch = sh * wp // sw              # view rows from one output row to the next
    for k in range(kw):
        off = k * dw
        for i in range(rows):
            lines.append(f"        a{i} = pl.load(x{off % sw}, offsets=(base + "
                         f"{off // sw + i * pitch}, 0), shape=({tm}, {c0}), padding=None)")
        for j in range(nb):
            if fractal_z:
                lines.append(f"        b = pl.load(w, offsets=((t * {kw} + {k}) * {cout_p} + "
                             f"(cb + {j}) * {c0}, 0), shape=({c0}, {c0}), padding=None)")
            else:
                lines.append(f"        b = pl.load(w, offsets=((t * {kw} + {k}) * {c0}, "
                             f"(cb + {j}) * {c0}), shape=({c0}, {c0}), padding=None)")
            trans = ", b_trans=True" if fractal_z else ""
            for i, row in enumerate(accs):
                lines.append(f"        {row[j]} = pl.matmul(a{i}, b, acc={row[j]}{trans})")
    for i, row in enumerate(accs):
        lines.append(f"    q = ((n * {c1o} + cb) * {oh} + oh0 + {i}) * {ow} + ow0")
        for j, a in enumerate(row):
            lines.append(f"    pl.store(out, offsets=(q + {j * oh * ow}, 0), "
                         f"value={a}.to(out.dtype))")
    return "\n".join(lines) + "\n"
