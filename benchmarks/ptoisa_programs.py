"""pto-isa's hand-written board kernels, instruction for instruction, as PTO programs for the
cycle model (``model_launch``): the model held against the board on the board's own
instruction stream, apart from what PyPTO's compiler emits (benchmarks/board.py).

* ``gemm_program``: ``kernels/manual/a2a3/gemm_performance`` (4 K steps per TLOAD of
  512-byte rows, TEXTRACT of 64-wide slices into double-buffered L0A/L0B).
* ``topk_program``: ``kernels/manual/a2a3/topk`` (float, k = 1000): TSORT32, the blockLen
  and list-form TMRGSORTs, TMOV and TGATHER per row, two buffers of two rows.
* ``fa_program``: ``kernels/manual/common/flash_atten`` with its defaults (CUBE_S0 = CUBE_S1
  = 128, TILE_S1 = 256, 4 QK tiles preloaded, FIFOs 8 deep, both AIVs): the cube's QK and PV
  matmuls and the AIVs' softmax (``compute_p``) and running update (``compute_gu``), handed
  over through GM FIFOs with FFTS flags (TPUSH/TPOP/TALLOC/TFREE), each AIV owning 64 of the
  block's 128 query rows in two 32-row slices.

The loops over K (GEMM) and over the key tiles (FA) are unrolled in Python: the slots,
ping-pong buffers and flag ids are then plain numbers, as the C++ computes them.
"""
from __future__ import annotations

import dataclasses
import itertools
from types import SimpleNamespace

from pypto.compiler.pto import For, Inst, Program, Scalar, TensorArg, Tile
from pypto.language import dtypes as dt
from pypto.target import get_target

F16, F32, I64 = dt.float16, dt.float32, dt.int64
_NAMES = itertools.count()         # scalar names, unique across a program's streams


class _Stream:
    """An instruction list with the helpers both kernels use."""

    def __init__(self):
        self.out: list = []

    def arith(self, op, x, y):
        r = Scalar(f"s{next(_NAMES)}", I64)
        self.out.append(Inst(f"arith.{op}", [x, y], [r]))
        return r

    def query(self, op, **attrs):
        r = Scalar(f"s{next(_NAMES)}", I64)
        self.out.append(Inst(op, [], [r], attrs))
        return r

    def flag(self, op, src, dst, event):
        self.out.append(Inst(op, [], [], {"src": src, "dst": dst, "event": event}))

    def handoff(self, kind, pipe, flag):
        """A cross-core flag: ``kind`` "set" (TPUSH / TFREE) or "wait" (TPOP / TALLOC)."""
        self.out.append(Inst(f"sync.{kind}", [], [], {"pipe": pipe, "flag": flag}))

    def inst(self, op, ins, outs, **attrs):
        self.out.append(Inst(op, list(ins), list(outs), attrs))

    def events(self, op, table):
        """``op`` (set_flag to prime, wait_flag to drain) for each (src, dst, events)."""
        for src, dst, count in table:
            for event in range(count):
                self.flag(op, src, dst, event)


def _shapes(**dims) -> dict:
    """A launch's arguments as the model needs them: only their shapes."""
    return {name: SimpleNamespace(shape=shape) for name, shape in dims.items()}


# -- GEMM --------------------------------------------------------------------------------------

GEMM_EVENTS = (("MTE1", "MTE2", 2), ("M", "MTE1", 2))     # primed at the start, drained at the end

def gemm_program(m, n, k, grid=(4, 6), base=(128, 256, 64), step_k=4, target="ascend910b2"):
    """gemm_performance_kernel.cpp: each core owns a (m / grid[0]) x (n / grid[1]) block of C,
    walked in base_m x base_n tiles; each L1 buffer holds ``step_k`` K steps; flags as the
    kernel's set_flag / wait_flag; the K loop is unrolled by 2 L1 buffers x step_k."""
    bm, bn, bk = base
    sm, sn = m // grid[0], n // grid[1]
    ta = TensorArg("a", F16, (m, k), (k, 1))
    tb = TensorArg("b", F16, (n, k), (k, 1))
    tc = TensorArg("c", F32, (m, n), (n, 1))
    a_mat = [Tile(f"amat{i}", "mat", F16, bm, bk * step_k, 0) for i in range(2)]
    b_mat = [Tile(f"bmat{i}", "mat", F16, bn, bk * step_k, 0) for i in range(2)]
    a_l0 = [Tile(f"a{i}", "left", F16, bm, bk, 0) for i in range(2)]
    b_l0 = [Tile(f"b{i}", "right", F16, bk, bn, 0) for i in range(2)]
    acc = Tile("acc", "acc", F32, bm, bn, 0)
    i, j, k0 = (Scalar(x, I64) for x in ("i", "j", "k0"))
    head = _Stream()
    pid = head.query("pto.program_id", axis=0)
    am0 = head.arith("mul", head.arith("mod", pid, grid[0]), sm)
    bn0 = head.arith("mul", head.arith("floordiv", pid, grid[0]), sn)
    head.events("set_flag", GEMM_EVENTS)
    kb = _Stream()
    row_a, row_b = kb.arith("add", am0, i), kb.arith("add", bn0, j)
    for s in range(2 * step_k):
        buf, l0, first = s // step_k, s % 2, s % step_k == 0
        if first:
            col = kb.arith("add", k0, s * bk)
            kb.flag("wait_flag", "MTE1", "MTE2", buf)
            kb.inst("tload", [ta, row_a, col], [a_mat[buf]])
            kb.flag("set_flag", "MTE2", "MTE1", 0)
            kb.inst("tload", [tb, row_b, col], [b_mat[buf]])
            kb.flag("set_flag", "MTE2", "MTE1", 1)
        kb.flag("wait_flag", "M", "MTE1", l0)
        if first:
            kb.flag("wait_flag", "MTE2", "MTE1", 0)
        kb.inst("textract", [a_mat[buf]], [a_l0[l0]], starts=(0, s % step_k * bk))
        if first:
            kb.flag("wait_flag", "MTE2", "MTE1", 1)
        kb.inst("textract", [b_mat[buf]], [b_l0[l0]], starts=(s % step_k * bk, 0))
        if s % step_k == step_k - 1:
            kb.flag("set_flag", "MTE1", "MTE2", buf)
        kb.flag("set_flag", "MTE1", "M", l0)
        kb.flag("wait_flag", "MTE1", "M", l0)
        kb.inst("tmatmul.acc", [acc, a_l0[l0], b_l0[l0]], [acc])
        kb.flag("set_flag", "M", "MTE1", l0)
    jb = _Stream()
    jb.out.append(For(k0, 0, k, 2 * step_k * bk, [], [], [], kb.out))
    jb.flag("set_flag", "M", "FIX", 0)
    jb.flag("wait_flag", "M", "FIX", 0)
    row_c, col_c = jb.arith("add", am0, i), jb.arith("add", bn0, j)
    jb.inst("tstore", [acc], [tc, row_c, col_c])
    jb.flag("set_flag", "FIX", "M", 0)
    jb.flag("wait_flag", "FIX", "M", 0)
    tail = _Stream()
    tail.events("wait_flag", GEMM_EVENTS)
    loops = For(i, 0, sm, bm, [], [], [], [For(j, 0, sn, bn, [], [], [], jb.out)])
    body = head.out + [loops] + tail.out
    return Program("gemm_ptoisa", "cube", [ta, tb, tc], [], body, get_target(target), {})


def gemm_args(m, n, k) -> dict:
    return _shapes(a=(m, k), b=(n, k), c=(m, n))


# -- flash attention ---------------------------------------------------------------------------

# the FFTS flags of the kernel's three FIFOs (FftsBufferFlag): ready / consumed per FIFO
QK_READY, QK_FREE, P_READY, P_FREE, PV_READY, PV_FREE = range(6)
FA_S0, FA_S1, FA_TILE, FA_HEAD = 128, 128, 256, 128   # CUBE_S0, CUBE_S1, TILE_S1, HEAD_SIZE
FA_PRELOAD, FA_FIFO, FA_AIVS = 4, 8, 2
FA_CUBE_EVENTS = (("M", "MTE1", 2), ("MTE1", "MTE2", 4), ("FIX", "M", 2))
FA_VECTOR_EVENTS = (("V", "MTE2", 2), ("MTE3", "V", 2))


def fa_program(s, target="ascend910b2"):
    """runTFA<S, 128, S, 128, 128, 256, 4, 8, false, false> for one head, S0 = S1 = ``s``:
    one block per 128 query rows (launch grid s / 128)."""
    sub = FA_TILE // FA_S1                       # cube sub-tiles per key tile (kTileFactor)
    tiles = s // FA_TILE
    q, k, v = (TensorArg(x, F16, (s, FA_HEAD), (FA_HEAD, 1)) for x in "qkv")
    o = TensorArg("o", F32, (s, FA_HEAD), (FA_HEAD, 1))
    blocks = s // FA_S0
    slot_rows = FA_FIFO * sub * FA_S0
    qk_ws = TensorArg("qk_fifo", F32, (blocks, slot_rows, FA_S1), (slot_rows * FA_S1, FA_S1, 1),
                      workspace=True)
    p_ws = TensorArg("p_fifo", F16, (blocks, slot_rows, FA_S1), (slot_rows * FA_S1, FA_S1, 1),
                     workspace=True)
    pv_ws = TensorArg("pv_fifo", F32, (blocks, FA_FIFO * FA_S0, FA_HEAD),
                      (FA_FIFO * FA_S0 * FA_HEAD, FA_HEAD, 1), workspace=True)
    cube = _fa_cube(q, k, v, qk_ws, p_ws, pv_ws, tiles, sub)
    vector = _fa_vector(o, qk_ws, p_ws, pv_ws, tiles, sub)
    return Program("fa_ptoisa", "mixed", [q, k, v, o, qk_ws, p_ws, pv_ws], [], cube,
                   get_target(target), {}, vector, vector_cores=FA_AIVS)


def fa_args(s) -> dict:
    return _shapes(**{x: (s, FA_HEAD) for x in "qkvo"})


def _fa_cube(q, k, v, qk_ws, p_ws, pv_ws, tiles, sub):
    """compute_qk and compute_pv in runTFA's order: the preloaded QK tiles, then for each key
    tile its PV, interleaved sub-tile by sub-tile with the QK of the tile 4 ahead."""
    st = _Stream()
    mat = lambda name: Tile(name, "mat", F16, FA_S0, FA_HEAD, 0)         # noqa: E731
    q_mat, k_mat, p_mat, v_mat = mat("qmat"), [mat(f"kmat{i}") for i in (0, 1)], \
        [mat(f"pmat{i}") for i in (0, 1)], [mat(f"vmat{i}") for i in (0, 1)]
    l0a = [Tile(f"l0a{i}", "left", F16, FA_S0, 128, i * 0x8000) for i in (0, 1)]
    l0b = [Tile(f"l0b{i}", "right", F16, 128, FA_S1, i * 0x8000) for i in (0, 1)]
    acc = [Tile(f"acc{i}", "acc", F32, FA_S0, FA_S1, i * 0x10000) for i in (0, 1)]
    pid = st.query("pto.program_id", axis=0)
    q_row = st.arith("mul", pid, FA_S0)
    st.events("set_flag", FA_CUBE_EVENTS)
    state = {"l0": 0, "acc": 0, "k": 0, "pv": 0}

    def next_acc():                   # assign_running_acc_tile: one toggle for QK and PV
        got = state["acc"]
        state["acc"] ^= 1
        return got

    def matmul(a, b, out, accumulate):      # pto_macro_matmul<128, 128, 128>: one K segment
        pp = state["l0"]
        st.flag("wait_flag", "M", "MTE1", pp)
        st.inst("textract", [a], [l0a[pp]], starts=(0, 0))
        st.inst("textract", [b], [l0b[pp]], starts=(0, 0))
        st.flag("set_flag", "MTE1", "M", pp)
        st.flag("wait_flag", "MTE1", "M", pp)
        if accumulate:
            st.inst("tmatmul.acc", [out, l0a[pp], l0b[pp]], [out])
        else:
            st.inst("tmatmul", [l0a[pp], l0b[pp]], [out])
        st.flag("set_flag", "M", "MTE1", pp)
        state["l0"] ^= 1

    def qk(tile, part, a):
        kbuf = state["k"] % 2
        state["k"] += 1
        if part == 0 and tile >= FA_FIFO:
            st.handoff("wait", "S", QK_FREE)                          # TALLOC
        st.flag("wait_flag", "MTE1", "MTE2", kbuf)
        if tile == 0 and part == 0:
            st.inst("tload", [q, q_row, 0], [q_mat])
        st.inst("tload", [k, tile * FA_TILE + part * FA_S1, 0], [k_mat[kbuf]])
        st.flag("set_flag", "MTE2", "MTE1", 0)
        st.flag("wait_flag", "MTE2", "MTE1", 0)
        st.flag("wait_flag", "FIX", "M", a)
        matmul(q_mat, k_mat[kbuf], acc[a], accumulate=False)
        st.flag("set_flag", "MTE1", "MTE2", kbuf)
        st.flag("set_flag", "M", "FIX", 0)
        st.flag("wait_flag", "M", "FIX", 0)
        row = (tile % FA_FIFO * sub + part) * FA_S0
        st.inst("tstore", [acc[a]], [qk_ws, pid, row, 0])
        if part == sub - 1:
            st.handoff("set", "FIX", QK_READY)                        # TPUSH
        st.flag("set_flag", "FIX", "M", a)

    def pv(tile, part, a):
        buf = state["pv"] % 2
        state["pv"] += 1
        if part == 0:
            st.handoff("wait", "S", P_READY)                          # TPOP
        st.flag("wait_flag", "MTE1", "MTE2", 2 + buf)
        st.inst("tload", [v, tile * FA_TILE + part * FA_S1, 0], [v_mat[buf]])
        row = (tile % FA_FIFO * sub + part) * FA_S0
        st.inst("tload", [p_ws, pid, row, 0], [p_mat[buf]])
        if part == sub - 1:
            st.handoff("set", "MTE2", P_FREE)                         # TFREE
        st.flag("set_flag", "MTE2", "MTE1", 0)
        st.flag("wait_flag", "MTE2", "MTE1", 0)
        if part == 0:
            st.flag("wait_flag", "FIX", "M", a)
        matmul(p_mat[buf], v_mat[buf], acc[a], accumulate=part > 0)
        st.flag("set_flag", "MTE1", "MTE2", 2 + buf)
        if part == sub - 1:
            st.flag("set_flag", "M", "FIX", 0)
            st.flag("wait_flag", "M", "FIX", 0)
            if tile >= FA_FIFO:
                st.handoff("wait", "S", PV_FREE)                      # TALLOC
            st.inst("tstore", [acc[a]], [pv_ws, pid, tile % FA_FIFO * FA_S0, 0])
            st.handoff("set", "FIX", PV_READY)                        # TPUSH
            st.flag("set_flag", "FIX", "M", a)

    # assign_running_acc_tile(qk, 0) then (pv, 1) leave the toggle at buffer 0
    for tile in range(min(FA_PRELOAD, tiles)):
        for part in range(sub):
            qk(tile, part, next_acc())
    for tile in range(tiles):
        ahead = tile + FA_PRELOAD if tile + FA_PRELOAD < tiles else None
        qk_acc = next_acc() if ahead is not None else None
        pv_acc = next_acc()
        for part in range(sub):
            if ahead is not None:
                qk(ahead, part, qk_acc)
            pv(tile, part, pv_acc)
    st.events("wait_flag", FA_CUBE_EVENTS)
    return st.out


def _fa_vector(o, qk_ws, p_ws, pv_ws, tiles, sub):
    """compute_p (the streaming softmax, pto_macro_fa_softmax) and compute_gu (the running
    update, pto_macro_fa_gu) in runTFA's order on one AIV: its 64 rows of the block, the
    softmax in ``sub`` slices of 32 rows x 256 keys."""
    st = _Stream()
    rows = FA_S0 // FA_AIVS
    vs0 = rows // sub                                 # Vec_S0
    vec = lambda name, r, c, d=F32, addr=0, vc=None: Tile(   # noqa: E731
        name, "vec", d, r, c, addr, r, c if vc is None else vc)
    qk_vec = [vec(f"qk{i}", vs0, FA_TILE) for i in (0, 1)]
    qk_half = [[vec(f"qk{i}h{h}", vs0, FA_TILE, addr=h * FA_S1 * 4, vc=FA_S1) for h in range(sub)]
               for i in (0, 1)]
    x_exp = [vec(f"xexp{i}", vs0, FA_TILE, F16) for i in (0, 1)]
    x_half = [[vec(f"xexp{i}h{h}", vs0, FA_TILE, F16, addr=h * FA_S1 * 2, vc=FA_S1)
               for h in range(sub)] for i in (0, 1)]
    p32 = vec("p32", vs0, FA_TILE)
    column = lambda name: vec(name, vs0, 1)                          # noqa: E731  (Vec_S0, 1) DN
    row = lambda name: vec(name, 1, vs0)                             # noqa: E731  its (1, Vec_S0) view
    local_max, local_sum, exp_max = column("lmax"), column("lsum"), [column(f"emax{i}")
                                                                     for i in range(FA_FIFO)]
    r_lmax, r_gmax, r_gsum, r_lsum = row("rlmax"), row("rgmax"), row("rgsum"), row("rlsum")
    r_emax = [row(f"remax{i}") for i in range(FA_FIFO)]
    gmax, gsum = column("gmax"), column("gsum")
    running, pv_vec = vec("o", rows, FA_HEAD), [vec(f"pv{i}", rows, FA_HEAD) for i in (0, 1)]
    o_col = [column(f"emaxo{i}") for i in range(FA_FIFO)]          # (64, 1) of the GU
    o_gsum = vec("gsumo", rows, 1)
    pid = st.query("pto.program_id", axis=0)
    sb = st.query("pto.get_subblock_idx")
    sb_rows = st.arith("mul", sb, rows)
    o_row = st.arith("add", st.arith("mul", pid, FA_S0), sb_rows)
    st.events("set_flag", FA_VECTOR_EVENTS)
    count = {"pp": 0}

    def ping():                   # p_gu_src_pingpong_id: one counter for P and GU buffers
        got = count["pp"] % 2
        count["pp"] += 1
        return got

    def softmax(tile, ev, slot):
        x, p, scale = qk_vec[ev], p32, 1.0
        bar = lambda: st.inst("barrier", [], [], pipe="V")           # noqa: E731
        if tile == 0:                                                # softmax_opt_fa_init_impl
            st.inst("trowmax", [x], [gmax]); bar()
            st.inst("trowexpandsub", [x, gmax], [p])
            st.inst("tmuls", [p, scale], [p])
            st.inst("texp", [p], [p]); bar()
            st.inst("trowsum", [p], [gsum])
            st.inst("tcvt", [p], [x_exp[ev]])
            return
        st.inst("trowmax", [x], [local_max]); bar()                   # ..._not_init_impl
        st.inst("tmax", [r_lmax, r_gmax], [r_lmax]); bar()
        st.inst("tsub", [r_gmax, r_lmax], [r_emax[slot]]); bar()
        st.inst("tmuls", [r_lmax, 1.0], [r_gmax]); bar()
        st.inst("trowexpandsub", [x, local_max], [p])
        st.inst("tmuls", [r_emax[slot], scale], [r_emax[slot]])
        st.inst("tmuls", [p, scale], [p])
        st.inst("texp", [r_emax[slot]], [r_emax[slot]])
        st.inst("texp", [p], [p])
        st.inst("tcvt", [p], [x_exp[ev]]); bar()
        st.inst("tmul", [r_emax[slot], r_gsum], [r_gsum])
        st.inst("trowsum", [p], [local_sum]); bar()
        st.inst("tadd", [r_gsum, r_lsum], [r_gsum])

    def compute_p(tile, part):
        ev, slot = ping(), tile % FA_FIFO
        st.flag("wait_flag", "V", "MTE2", ev)
        if part == 0:
            st.handoff("wait", "S", QK_READY)                         # TPOP
        for h in range(sub):
            r = st.arith("add", sb_rows, (slot * sub + h) * FA_S0 + part * vs0)
            st.inst("tload", [qk_ws, pid, r, 0], [qk_half[ev][h]])
        if part == sub - 1:
            st.handoff("set", "MTE2", QK_FREE)                        # TFREE
        st.flag("set_flag", "MTE2", "V", 0)
        st.flag("wait_flag", "MTE2", "V", 0)
        st.flag("wait_flag", "MTE3", "V", ev)
        softmax(tile, ev, slot)
        st.flag("set_flag", "V", "MTE2", ev)
        st.flag("set_flag", "V", "MTE3", 0)
        st.flag("wait_flag", "V", "MTE3", 0)
        if part == 0 and tile >= FA_FIFO:
            st.handoff("wait", "S", P_FREE)                           # TALLOC
        for h in range(sub):
            r = st.arith("add", sb_rows, (slot * sub + h) * FA_S0 + part * vs0)
            st.inst("tstore", [x_half[ev][h]], [p_ws, pid, r, 0])
        if part == sub - 1:
            st.handoff("set", "MTE3", P_READY)                        # TPUSH
        st.flag("set_flag", "MTE3", "V", ev)

    def compute_gu(tile):
        ev, slot = ping(), tile % FA_FIFO
        st.flag("wait_flag", "V", "MTE2", ev)
        st.handoff("wait", "S", PV_READY)                             # TPOP
        r = st.arith("add", sb_rows, slot * FA_S0)
        st.inst("tload", [pv_ws, pid, r, 0], [running if tile == 0 else pv_vec[ev]])
        st.flag("set_flag", "MTE2", "V", 0)
        st.flag("wait_flag", "MTE2", "V", 0)
        if tile > 0:
            st.inst("trowexpandmul", [running, o_col[slot]], [running])
            st.inst("tadd", [running, pv_vec[ev]], [running])
            if tile == tiles - 1:
                st.inst("trowexpanddiv", [running, o_gsum], [running])
        st.handoff("set", "MTE2", PV_FREE)                            # TFREE
        st.flag("set_flag", "V", "MTE2", ev)
        if tile == tiles - 1:
            st.flag("set_flag", "V", "MTE3", 0)
            st.flag("wait_flag", "V", "MTE3", 0)
            st.inst("tstore", [running], [o, o_row, 0])

    for tile in range(min(FA_PRELOAD, tiles)):
        for part in range(sub):
            compute_p(tile, part)
    for tile in range(tiles):
        ahead = tile + FA_PRELOAD if tile + FA_PRELOAD < tiles else None
        for part in range(sub):
            if ahead is not None:
                compute_p(ahead, part)
        compute_gu(tile)
    st.events("wait_flag", FA_VECTOR_EVENTS)
    return st.out


# -- top-k -------------------------------------------------------------------------------------

TOPK_ROWS, TOPK_COLS, TOPK_WHOLE, TOPK_K, TOPK_CORES = 2, 1024, 1280, 1000, 48


def topk_program(rows, target="ascend910b2"):
    """kernels/manual/a2a3/topk/topk_kernel.cpp (float, k = 1000 of 1024 columns of 1280):
    each of 48 cores takes rows / 48 rows, two sets of SINGLE_LOOP_ROW = 2 rows a round in
    two buffers; per row TSORT32, the blockLen TMRGSORTs (64, 256) each followed by a TMOV
    back, the tail's list-form TMRGSORT of two runs of 512 pairs, a TMOV of the k pairs, and
    TGATHER P0101 / P1010 for values and indices; a pipe_barrier(PIPE_V) after each step as
    the C++ has it."""
    per_core = rows // TOPK_CORES
    pairs = 2 * TOPK_COLS                              # a row's sorted (value, index) floats
    x = TensorArg("x", F32, (rows, TOPK_WHOLE), (TOPK_WHOLE, 1))
    ids = TensorArg("ids", dt.uint32, (1, TOPK_COLS), (TOPK_COLS, 1))
    out = TensorArg("values", F32, (rows, TOPK_K), (TOPK_K, 1))
    idx = TensorArg("indices", dt.uint32, (rows, TOPK_K), (TOPK_K, 1))
    tile = lambda name, dtype, r, c: Tile(name, "vec", dtype, r, c, 0)   # noqa: E731
    src = [tile(f"src{b}", F32, TOPK_ROWS, TOPK_COLS) for b in range(2)]
    sorted32 = [tile(f"sort{b}", F32, TOPK_ROWS, pairs) for b in range(2)]
    merged = [tile(f"mrg{b}", F32, TOPK_ROWS, pairs) for b in range(2)]
    values = [tile(f"d{b}", F32, TOPK_ROWS, TOPK_K) for b in range(2)]
    indices = [tile(f"i{b}", dt.uint32, TOPK_ROWS, TOPK_K) for b in range(2)]
    index = tile("index", dt.uint32, 1, TOPK_COLS)
    tmp = [tile(f"tmp{b}", F32, 1, pairs) for b in range(2)]
    row = lambda t, n=None: dataclasses.replace(t, rows=1, v_row=1,  # noqa: E731
                                                v_col=n or t.cols)
    st = _Stream()
    pid = st.query("pto.program_id", axis=0)
    first = st.arith("mul", pid, per_core)
    st.inst("tload", [ids, 0, 0], [index])
    st.events("set_flag", (("V", "MTE2", 2),))
    r0 = Scalar("r0", I64)
    st_ = _Stream()                                    # the loop's body
    for b in range(2):                                 # ProcessSingleRow(cur = b)
        r = st_.arith("add", st_.arith("add", first, r0), b * TOPK_ROWS)
        st_.flag("wait_flag", "V", "MTE2", b)
        st_.inst("tload", [x, r, 0], [src[b]])
        st_.flag("set_flag", "MTE2", "V", b)
        st_.flag("wait_flag", "MTE2", "V", b)
        for _ in range(TOPK_ROWS):                      # SortEachGroup
            st_.inst("tsort32", [row(src[b]), index], [row(sorted32[b])], tmp=tmp[b])
            st_.inst("barrier", [], [], pipe="V")
        st_.flag("set_flag", "V", "MTE2", b)
        st_.inst("barrier", [], [], pipe="V")
        for _ in range(TOPK_ROWS):                      # MrgsortSingleRow
            for block_len in (64, 256):
                st_.inst("tmrgsort", [row(sorted32[b])], [tmp[b]], block_len=block_len)
                st_.inst("barrier", [], [], pipe="V")
                st_.inst("tmov", [tmp[b]], [row(sorted32[b])])
                st_.inst("barrier", [], [], pipe="V")
            half = pairs // 2                           # SortTailBlock: two runs of 1024
            runs = [row(sorted32[b], half), row(sorted32[b], half)]
            st_.inst("tmrgsort", runs, [row(sorted32[b])], tmp=tmp[b])
            st_.inst("barrier", [], [], pipe="V")
            st_.inst("tmov", [row(sorted32[b], 2 * TOPK_K)], [row(merged[b], 2 * TOPK_K)])
        st_.inst("barrier", [], [], pipe="V")
        for _ in range(TOPK_ROWS):                      # ExtractDataOrIndex, values
            st_.inst("tgather", [row(merged[b])], [row(values[b])], pattern="P0101")
        st_.flag("set_flag", "V", "MTE3", b)
        st_.inst("barrier", [], [], pipe="V")
        for _ in range(TOPK_ROWS):                      # and indices
            st_.inst("tgather", [row(merged[b], 2 * TOPK_K)], [row(indices[b])],
                     pattern="P1010")
        st_.flag("set_flag", "V", "MTE3", b + 2)
        st_.flag("wait_flag", "V", "MTE3", b)
        st_.inst("tstore", [values[b]], [out, r, 0])
        st_.flag("wait_flag", "V", "MTE3", b + 2)
        st_.inst("tstore", [indices[b]], [idx, r, 0])
    st.out.append(For(r0, 0, per_core, 2 * TOPK_ROWS, [], [], [], st_.out))
    st.events("wait_flag", (("V", "MTE2", 2),))
    return Program("topk_ptoisa", "vector", [x, ids, out, idx], [], st.out,
                   get_target(target), {})


def topk_args(rows) -> dict:
    return _shapes(x=(rows, TOPK_WHOLE), ids=(1, TOPK_COLS), values=(rows, TOPK_K),
                   indices=(rows, TOPK_K))
