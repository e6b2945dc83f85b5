"""Print a PTO ``Program`` as ``.pto`` text: the PTO-ISA MLIR dialect that PTOAS reads.

The text targets PTOAS 0.27 to 0.60 (``dialect.py``: each version's spelling), A2/A3
verifiers, lowered at ``--pto-level=level3``: every tile is ``pto.alloc_tile`` pinned to its
planned ``addr`` and the program's own flags are kept. Scalars and loops are ``arith`` /
``scf`` (i64); global memory is ``pto.make_tensor_view`` + ``pto.partition_view`` over
``index`` operands; instructions are destination-passing ``pto.<op> ins(...) outs(...)``.

One ``Program`` instruction may print as several lines (a *macro*): the address arithmetic of
a partition, the clipping of an edge window, the decoding of a multi-dimensional block index.
Every name such a macro introduces is ``%<base>.<tag>``, where ``<base>`` is what it derives
from (a partition, a tile, a result); the reader (``reader.py``) skips or resolves dotted names
by that rule and the printer derives them again, so print → parse → print is the identity.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from ...language import dtypes as dt
from ...errors import NotOnChip
from .dialect import DEFAULT, Dialect
from .isa import CROSS_CORE_OPS, PAD_NULL, SYNC_OPS, pad_kind
from .program import (For, If, Inst, Program, Tile, TensorArg, While, element_type,
                      mask_row_bytes, walk_insts)

_CMP_I = {"lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge", "eq": "eq", "ne": "ne"}
_CMP_U = {"lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge", "eq": "eq", "ne": "ne"}
# arith's integers are signless: these read their operands as unsigned (name → mnemonic)
_UNSIGNED_INT = {"min": "minui", "max": "maxui", "div": "divui", "floordiv": "divui",
                 "mod": "remui", "shr": "shrui"}
_CMP_F = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}

# instructions that read or write an (M, 1) tile in its column-major (DN) form; every other
# instruction sees such a tile through its row-major (1, M) view (Tile.type_text)
_COLUMN_NATIVE = ("trowsum", "trowmax", "trowmin", "trowprod", "trowargmax", "trowargmin",
                  "trowexpand", "trowexpandadd",
                  "trowexpandsub", "trowexpandmul", "trowexpanddiv", "trowexpandmax",
                  "trowexpandmin", "tload", "tstore")
# attributes that the dialect wants inside ``ins(...)``, after the first operand


def _on_halves(op: str, dtype) -> bool:
    """Does this bitwise op run on i16 views (``_Printer.in_halves``)? A2/A3 takes 8/16-bit
    tiles (``tnot``: 16-bit only): int32 ops, and a mask's ``tnot``."""
    if op not in ("tand", "tor", "txor", "tnot"):
        return False
    return dtype.bits == 32 if dtype != dt.bool_ else op == "tnot"


EXECUTED, EXECUTED_TYPE = "%mrgsort_executed", "vector<4xi16>"
EXECUTED_LINE = f"{EXECUTED} = arith.constant dense<0> : {EXECUTED_TYPE}"
_INNER_ATTRS = {"tcvt": "rmode", "tcmp": "cmp", "tcmps": "cmp"}
GRID_PARAMS = ("pypto_grid0", "pypto_grid1")     # hidden extents of a multi-dimensional grid
FFTS_PARAM = "pypto_ffts"                       # the FFTS base, for cross-core sync

class _Printer:
    def __init__(self, program: Program, dialect: Dialect):
        self.p = program
        self.dialect = dialect
        self.lines: list[str] = []
        self.consts: dict = {}
        self.const_lines: list[str] = []
        self.n = 0
        self.grid = max_grid_axis(program) > 0
        self.taken = _defined_names(program)
        self.block_derived = _block_derived(program)
        self.nd_operands = _column_cube_operands(program)
        self.aliases: dict[str, str] = {}     # scalar name -> the name its uses print

    def fresh(self, base="t") -> str:
        return self.fresh_run(base)[0]

    def fresh_run(self, *bases) -> list[str]:
        """Names of the printer's own, ``%<base><n>`` for consecutive n (``%q4``, ``%m5``:
        the reader finds a modulo's by that), none a name the program defines (a loop
        variable ``m`` is ``%m4`` there, a parameter may be called ``pv1``)."""
        while True:
            names = [f"{base}{self.n + 1 + i}" for i, base in enumerate(bases)]
            self.n += len(bases)
            if self.taken.isdisjoint(names):
                return [f"%{name}" for name in names]

    def emit(self, text: str, depth: int) -> None:
        self.lines.append("  " * depth + text)

    def const(self, value, ty) -> str:
        key = (repr(value), ty)      # repr: -0.0 is not 0.0, and nan is one constant
        if key not in self.consts:
            name = f"%c{str(value).replace('-', 'm').replace('.', 'p')}_{ty}"
            self.consts[key] = name
            self.const_lines += [f"    {line}" for line in constant_lines(name, value, ty)]
        return self.consts[key]

    def ref(self, x) -> str:
        return x if isinstance(x, str) else self.aliases.get(x.name, f"%{x.name}")

    def index(self, x, name: str, depth) -> str:
        """``x`` (an i64 scalar or an int) as an ``index`` operand."""
        if isinstance(x, int):
            return self.const(x, "index")
        self.emit(f"{name} = arith.index_cast {self.ref(x)} : i64 to index", depth)
        return name

    # -- module, function, prologue ---------------------------------------------------------
    def program(self) -> str:
        p = self.p
        funcs = []
        for kind, body in p.parts:
            name = p.name if len(p.parts) == 1 else f"{p.name}_{kind}"
            funcs += self.function(name, kind, body)
        head = f'module attributes {{"pto.device-spec" = "{p.target.device_spec}"}} {{'
        return "\n".join([head] + funcs + ["}"]) + "\n"

    def function(self, name: str, kind: str, body: list) -> list[str]:
        p = self.p
        self.lines, self.consts, self.const_lines, self.n = [], {}, [], 0
        self.extents: dict[tuple, str] = {}
        self.part = kind
        args = []
        for a in p.params:
            if isinstance(a, TensorArg):
                args.append(f"%{a.name}: !pto.ptr<{gm_type(a.dtype)}>")
                args += [f"%{a.name}_d{i}: i64" for i, d in enumerate(a.dims) if d is None]
                args += [f"%{a.name}_s{i}: i64" for i, s in enumerate(a.strides) if s is None]
            else:
                args.append(f"%{a.name}: {_sty(a.dtype)}")
        if self.grid:
            args += [f"%{g}: i64" for g in GRID_PARAMS]
        cross_core = any(isinstance(i, Inst) and i.op in CROSS_CORE_OPS
                         for i in walk_insts(body))
        if cross_core:
            args.append(f"%{FFTS_PARAM}: {self.dialect.ffts_type}")
        for a in p.params:
            if isinstance(a, TensorArg):
                self.tensor_view(a)
        used = tiles_used(body, self.dialect)
        for t in p.tiles:
            if t.name in used:
                addr = self.const(t.addr, "i64")
                self.emit(f"%{t.name} = pto.alloc_tile addr = {addr} : {t.type_text()}", 2)
                if t.is_column:
                    self.emit(f"%{t.name}.row = pto.alloc_tile addr = {addr} : "
                              f"{t.type_text(row_view=True)}", 2)
        if cross_core:       # A2/A3's cross-core flags live where the runtime's FFTS says
            self.emit(f"pto.set_ffts %{FFTS_PARAM} : {self.dialect.ffts_type}", 2)
        self.body(body, 2)
        self.emit("return", 2)
        head = (f"  func.func @{name}({', '.join(args)}) attributes "
                f"{{pto.entry, pto.kernel_kind = #pto.kernel_kind<{kind}>}} {{")
        return [head] + self.const_lines + self.lines + ["  }"]

    def tensor_view(self, a: TensorArg) -> None:
        """A 1-D tensor is viewed as 1 x n with row stride 0 (the reader's mark for it)."""
        def entry(value, arg):
            return self.const(value, "index") if value is not None else self.index(
                f"%{arg}", f"%{arg}.ix", 2)
        dims = [entry(d, f"{a.name}_d{i}") for i, d in enumerate(a.dims)]
        strides = [entry(s, f"{a.name}_s{i}") for i, s in enumerate(a.strides)]
        if a.rank == 1:
            dims, strides = [self.const(1, "index")] + dims, [self.const(0, "index")] + strides
        attr = ""
        if a.layout == "NZ":        # pto-isa's NZ GlobalTensor: (1, K1, M1, 16, C0)
            dims = [self.const(1, "index")] + dims
            strides = [self.const(math.prod(a.dims), "index")] + strides
            attr = " {layout = #pto.layout<nz>}"
        elif a.layout == "NC1HWC0":  # an ND view; the explicit attribute marks the layout
            attr = " {layout = #pto.layout<nd>}"
        elif a.name in self.nd_operands:
            attr = " {layout = #pto.layout<nd>}"
        for axis, d in enumerate(dims[-a.rank:]):
            self.extents[(a.name, axis)] = d
        self.emit(f"%{a.name}_tv = pto.make_tensor_view %{a.name}, shape = ["
                  f"{', '.join(dims)}], strides = [{', '.join(strides)}]{attr} : "
                  f"!pto.tensor_view<{'x'.join('?' * len(dims))}x{gm_type(a.dtype)}>", 2)

    # -- control flow -----------------------------------------------------------------------
    def body(self, insts, depth) -> None:
        for inst in insts:
            if isinstance(inst, For):
                self.loop(inst, depth)
            elif isinstance(inst, If):
                self.branch(inst, depth)
            elif isinstance(inst, While):
                self.while_loop(inst, depth)
            else:
                self.inst(inst, depth)

    def _results(self, results) -> str:
        return f"{', '.join(f'%{r.name}' for r in results)} = " if results else ""

    def _yield(self, values, depth) -> None:
        if values:
            self.emit(f"scf.yield {', '.join(self.ref(v) for v in values)} : "
                      f"{', '.join(_sty(v.dtype) for v in values)}", depth)

    def branch(self, node: If, depth) -> None:
        types = f" -> ({', '.join(_sty(r.dtype) for r in node.results)})" if node.results else ""
        self.emit(f"{self._results(node.results)}scf.if {self.ref(node.cond)}{types} {{", depth)
        self.body(node.then_body, depth + 1)
        self._yield(node.then_yields, depth + 1)
        self.emit("} else {", depth)
        self.body(node.else_body, depth + 1)
        self._yield(node.else_yields, depth + 1)
        self.emit("}", depth)

    def while_loop(self, node: While, depth) -> None:
        pairs = ", ".join(f"%{a.name} = {self.ref(i)}" for a, i in zip(node.before_args,
                                                                       node.inits))
        types = ", ".join(_sty(a.dtype) for a in node.before_args)
        self.emit(f"{self._results(node.results)}scf.while ({pairs}) : ({types}) -> ({types}) {{",
                  depth)
        self.body(node.before_body, depth + 1)
        fwd = ", ".join(self.ref(v) for v in node.forwarded)
        self.emit(f"scf.condition({self.ref(node.cond)}) {fwd}"
                  f"{' : ' + types if node.forwarded else ''}", depth + 1)
        args = ", ".join(f"%{a.name}: {_sty(a.dtype)}" for a in node.after_args)
        self.emit(f"}} do {{\n{'  ' * (depth + 1)}^bb0({args}):", depth)
        self.body(node.after_body, depth + 1)
        self._yield(node.yields, depth + 1)
        self.emit("}", depth)
        if not self.dialect.has("while_results_anywhere"):
            for r in node.results:
                self.aliases[r.name] = self.opaque_copy(r, depth)

    def opaque_copy(self, value, depth) -> str:
        """A copy of the scalar ``value`` that MLIR's folder cannot see through, so that
        PTOAS before 0.58 finds a while's results used only next to it (``dialect.py``):
        integers round-trip through ``index``, floats first through their bits."""
        ty, name = _sty(value.dtype), f"%{value.name}"
        bits = ty if ty.startswith("i") else f"i{value.dtype.bits}"
        if bits != ty:
            self.emit(f"{name}.b = arith.bitcast {name} : {ty} to {bits}", depth)
            name = f"{name}.b"
        self.emit(f"{name}.ix = arith.index_cast {name} : {bits} to index", depth)
        self.emit(f"{name}.c = arith.index_cast {name}.ix : index to {bits}", depth)
        if bits != ty:
            self.emit(f"{name}.f = arith.bitcast {name}.c : {bits} to {ty}", depth)
            return f"{name}.f"
        return f"{name}.c"

    def loop(self, f: For, depth) -> None:
        """An i64 loop; one whose bounds come from the block index or count is an ``index``
        loop over ``%<iv>.ix`` (bounds ``%<iv>.lb/.ub/.st``, cast back to i64 first thing):
        PTOAS 0.60's EmitC rejects the i64 form (docs/pto.md, "The loop-bound bug")."""
        over_index = any(getattr(x, "name", None) in self.block_derived
                         for x in (f.lb, f.ub, f.step))
        iv = f"%{f.iv.name}"
        if over_index:
            bounds = [self.index(x, f"{iv}.{tag}", depth)
                      for x, tag in ((f.lb, "lb"), (f.ub, "ub"), (f.step, "st"))]
            head = f"scf.for {iv}.ix = {bounds[0]} to {bounds[1]} step {bounds[2]}"
        else:
            head = f"scf.for {iv} = {self.ref(f.lb)} to {self.ref(f.ub)} step {self.ref(f.step)}"
        if f.iter_args:
            pairs = ", ".join(f"%{a.name} = {self.ref(i)}" for a, i in zip(f.iter_args, f.inits))
            types = ", ".join(_sty(a.dtype) for a in f.iter_args)
            res = ", ".join(f"%{r.name}" for r in f.results)
            head = f"{res} = {head} iter_args({pairs}) -> ({types})"
        self.emit(head + (" {" if over_index else " : i64 {"), depth)
        if over_index:
            self.emit(f"{iv} = arith.index_cast {iv}.ix : index to i64", depth + 1)
        self.body(f.body, depth + 1)
        if f.yields:
            self.emit(f"scf.yield {', '.join(self.ref(y) for y in f.yields)} : "
                      f"{', '.join(_sty(y.dtype) for y in f.yields)}", depth + 1)
        self.emit("}", depth)

    # -- global memory ----------------------------------------------------------------------
    def partition(self, t: TensorArg, offsets, tile: Tile, depth) -> tuple[str, str, list]:
        """The window of ``tile``'s shape at ``offsets``, clipped to the tensor: its sizes are
        ``min(max(extent - offset, 0), tile size)`` per axis (what a load reads and a store
        writes; the rest of the tile is padding). A rank-3/4 tensor's leading axes select
        one plane (``plane``; one outside the tensor leaves the tile no valid row:
        passes/unbatch.py). Returns (name, type, the tile's valid rows and columns)."""
        name = self.fresh("pv")
        offs = list(offsets)
        if t.rank == 1:
            offs = [0] + offs
        offs = [self.index(o, f"{name}.o{axis}", depth) for axis, o in enumerate(offs)]
        lead = len(offs) - 2
        sizes, view_offs = [], list(offs)
        for axis in range(lead):
            sizes.append(self.const(1, "index"))
            view_offs[axis] = self.plane(name, axis, self.extents[(t.name, axis)], offs[axis],
                                         depth)
        for axis in range(lead, len(offs)):
            o, full = offs[axis], (tile.rows, tile.cols)[axis - lead]
            if t.rank == 1 and axis == 0:
                sizes.append(self.const(1, "index"))
                continue
            extent = self.extents[(t.name, axis - (len(offs) - t.rank))]
            sizes.append(self.clip(name, extent, o, full, depth, axis))
        valid = sizes[-2:]
        for axis in range(lead):            # rows of the planes inside the tensor: 0 or all
            self.emit(f"{name}.r{axis} = arith.muli {name}.v{axis}, {valid[0]} : index",
                      depth)
            valid = [f"{name}.r{axis}", valid[1]]
        sizes[lead] = valid[0]      # pto-isa: the window's shape is the tile's valid region
        offs = view_offs
        qs = "?x" * len(offs)
        # the plane axes' 1s are static in the type: A2/A3's ND2NZ TLOAD (GM into an L1 cube
        # tile) takes only GlobalTensors whose three leading axes are static 1s (pto-isa
        # common/arch/memory/tload_common.hpp, "GlobalTensor only support 2 dim when ND2NZ")
        ty = f"!pto.partition_tensor_view<{'1x' * lead}{'?x' * (len(offs) - lead)}" \
             f"{gm_type(t.dtype)}>"
        self.emit(f"{name} = pto.partition_view %{t.name}_tv, offsets = [{', '.join(offs)}], "
                  f"sizes = [{', '.join(sizes)}] : !pto.tensor_view<{qs}{gm_type(t.dtype)}> -> "
                  f"{ty}", depth)
        return name, ty, valid

    def plane(self, name: str, axis: int | str, extent: str, offset: str, depth) -> str:
        """A leading axis of a plane window: ``name.v<axis>`` is 1 when the plane lies inside
        the tensor (``clip``s of one element: before its end, and past -1), else 0; the view's
        offset is clamped into the tensor (``name.c<axis>``; PTOAS rejects views of size 0 or
        past the end), the reader reads it as the offset it clamps."""
        zero, one = self.const(0, "index"), self.const(1, "index")
        before_end = self.clip(f"{name}.u", extent, offset, 1, depth, axis)
        past_start = self.clip(f"{name}.w", offset, self.const(-1, "index"), 1, depth, axis)
        for line in [f"v{axis} = arith.muli {before_end}, {past_start}",
                     f"l{axis} = arith.subi {extent}, {one}",
                     f"n{axis} = arith.minsi {offset}, {name}.l{axis}",
                     f"c{axis} = arith.maxsi {name}.n{axis}, {zero}"]:
            self.emit(f"{name}.{line} : index", depth)
        return f"{name}.c{axis}"

    def clip(self, name: str, extent: str, offset: str, full: int, depth, axis="") -> str:
        """``min(max(extent - offset, 0), full)`` as index lines named ``name.e/m/v<axis>``."""
        self.emit(f"{name}.e{axis} = arith.subi {extent}, {offset} : index", depth)
        self.emit(f"{name}.m{axis} = arith.maxsi {name}.e{axis}, {self.const(0, 'index')} : "
                  "index", depth)
        self.emit(f"{name}.v{axis} = arith.minsi {name}.m{axis}, {self.const(full, 'index')} : "
                  "index", depth)
        return f"{name}.v{axis}"

    def layout_partition(self, t: TensorArg, offsets, tile: Tile, depth) -> tuple:
        """The window of a load from a layout tensor (pypto.layout.load_window): the 5-D
        partition of its physical view and the tile's valid (rows, cols). NZ: whole
        fractals, clipped in fractals. NC1HWC0: one image's channel group, the pixels from
        h * W + w (clipped to H * W) and the channels from c % C0 (clipped to C0); an image
        or group past the tensor's end gives no rows."""
        name = self.fresh("pv")
        offs = [self.index(o, f"{name}.o{axis}", depth) for axis, o in enumerate(offsets)]
        idx = lambda v: self.const(v, "index")        # noqa: E731
        if t.layout == "NZ":
            k1, m1, m0, c0 = t.dims
            self.emit(f"{name}.f1 = arith.divsi {offs[1]}, {idx(c0)} : index", depth)
            self.emit(f"{name}.f2 = arith.divsi {offs[0]}, {idx(m0)} : index", depth)
            cols = self.clip(f"{name}.k", idx(k1), f"{name}.f1", tile.cols // c0, depth)
            rows = self.clip(f"{name}.m", idx(m1), f"{name}.f2", tile.rows // m0, depth)
            p_offs = [idx(0), f"{name}.f1", f"{name}.f2", idx(0), idx(0)]
            sizes = [idx(1), cols, rows, idx(m0), idx(c0)]
            # the fractal's axes static in the type: A2/A3's NZ TLOAD wants them so (pto-isa
            # tload_common.hpp CheckNzFormat: "the last 2 dim must be static")
            static = f"1x?x?x{m0}x{c0}x"
            self.emit(f"{name}.r = arith.muli {rows}, {idx(m0)} : index", depth)
            self.emit(f"{name}.c = arith.muli {cols}, {idx(c0)} : index", depth)
            valid = [f"{name}.r", f"{name}.c"]
        else:
            nn, c1s, _, hw, c0 = t.dims
            self.emit(f"{name}.g = arith.floordivsi {offs[1]}, {idx(c0)} : index", depth)
            self.emit(f"{name}.gc = arith.muli {name}.g, {idx(c0)} : index", depth)
            self.emit(f"{name}.ch = arith.subi {offs[1]}, {name}.gc : index", depth)
            self.emit(f"{name}.hw = arith.muli {offs[2]}, {idx(t.logical[3])} : index", depth)
            self.emit(f"{name}.px = arith.addi {name}.hw, {offs[3]} : index", depth)
            # the image and the channel group are planes (self.plane: offsets clamped into
            # the tensor, 0 rows when outside), so the view's three leading sizes are static
            # 1s: A2/A3's ND2NZ TLOAD (into an L1 cube tile) takes nothing else (pto-isa
            # tload_common.hpp, "GlobalTensor only support 2 dim when ND2NZ")
            n_off = self.plane(name, "n", idx(nn), offs[0], depth)
            g_off = self.plane(name, "g", idx(c1s), f"{name}.g", depth)
            pixels = self.clip(f"{name}.p", idx(hw), f"{name}.px", tile.rows, depth)
            chans = self.clip(f"{name}.c0", idx(c0), f"{name}.ch", tile.cols, depth)
            p_offs = [n_off, g_off, idx(0), f"{name}.px", f"{name}.ch"]
            self.emit(f"{name}.r0 = arith.muli {name}.vn, {name}.vg : index", depth)
            self.emit(f"{name}.r = arith.muli {name}.r0, {pixels} : index", depth)
            sizes = [idx(1), idx(1), idx(1), f"{name}.r", chans]
            valid = [f"{name}.r", chans]
            static = "1x1x1x?x?x"
        gm = gm_type(t.dtype)
        ty = f"!pto.partition_tensor_view<{static}{gm}>"
        self.emit(f"{name} = pto.partition_view %{t.name}_tv, offsets = [{', '.join(p_offs)}], "
                  f"sizes = [{', '.join(sizes)}] : !pto.tensor_view<?x?x?x?x?x{gm}> -> {ty}",
                  depth)
        return name, ty, valid

    def window(self, t: TensorArg, offsets, tile: Tile, depth) -> tuple:
        """What a load (or its tfillpad) reads: (partition, its type, the valid sizes)."""
        if t.layout != "ND":
            return self.layout_partition(t, offsets, tile, depth)
        return self.partition(t, offsets, tile, depth)

    def window_tile(self, tile: Tile, view: str, sizes: list, depth, pad: int = 0) -> str:
        """The clipped tile of a window: ``tile``'s bytes with the window's valid sizes."""
        name = f"%{tile.name}.{view[1:]}"
        self.emit(f"{name} = pto.alloc_tile addr = {self.const(tile.addr, 'i64')} "
                  f"valid_row = {sizes[0]} valid_col = {sizes[1]} : "
                  f"{tile.type_text(dynamic=True, pad=pad)}", depth)
        return name

    def load(self, i: Inst, depth) -> None:
        """GM → tile: the clipped window read into the tile seen with the window's valid
        region and, for UB tiles, the pad field of the load's value (the ``tfillpad`` after
        it fills the rest; a value the hardware lacks was filled in before: lower.py)."""
        tensor, *offs = i.ins
        tile = i.outs[0]
        kind = (pad_kind(i.attrs["pad"], tile.dtype) if tile.loc == "vec" else None) or PAD_NULL
        if tensor.layout == "NZ" and tile.loc != "mat":
            raise NotOnChip("a load from an NZ tensor into a vector (UB) tile: A2/A3's TLOAD "
                            "copies NZ fractals only into NZ tiles, and the vector unit "
                            "computes on row-major ones; use the tile as a pl.matmul operand "
                            "(it is then loaded into L1), or pass the tensor in ND",
                            i.attrs.get("_loc"))
        pv, ty, sizes = self.window(tensor, offs, tile, depth)
        clipped = self.window_tile(tile, pv, sizes, depth, pad=kind)
        self.emit(f"pto.tload ins({pv} : {ty}) outs({clipped} : "
                  f"{tile.type_text(dynamic=True, pad=kind)})", depth)

    def fill_pad(self, i: Inst, depth) -> None:
        """``tfillpad``: the tile past the window its load read (clipped again from the same
        offsets, so a double-buffered loop pads each iteration's own window), filled with
        the pad value: the whole tile seen with that pad field."""
        tensor, *offs = i.ins
        tile = i.outs[0]
        kind = pad_kind(i.attrs["pad"], tile.dtype)
        pv, _, sizes = self.window(tensor, offs, tile, depth)
        clipped = self.window_tile(tile, pv, sizes, depth, pad=kind)
        full = f"{clipped}f"
        self.emit(f"{full} = pto.alloc_tile addr = {self.const(tile.addr, 'i64')} : "
                  f"{tile.type_text(pad=kind)}", depth)
        self.emit(f"pto.tfillpad ins({clipped} : {tile.type_text(dynamic=True, pad=kind)}) "
                  f"outs({full} : {tile.type_text(pad=kind)})", depth)

    def store(self, i: Inst, depth) -> None:
        tensor, *offs = i.outs
        tile = i.ins[0]
        pv, ty, sizes = self.partition(tensor, offs, tile, depth)
        clipped = self.window_tile(tile, pv, sizes, depth)
        attrs = {k: v for k, v in i.attrs.items() if k == "atomic"}
        if attrs and tile.dtype not in ATOMIC_ADD_TYPES:
            raise NotOnChip(f"an atomic add of {tile.dtype}: A2/A3's atomic store adds "
                            f"{', '.join(map(str, ATOMIC_ADD_TYPES))} only (pto-isa "
                            f"SetAtomicAdd). Accumulate in int32 or float32, or store without "
                            f"atomic", i.attrs.get("_loc"))
        self.emit(f"pto.tstore ins({clipped} : {tile.type_text(dynamic=True)}) "
                  f"outs({pv} : {ty}){_attrs(attrs)}", depth)

    def element(self, i: Inst, depth) -> None:
        """TGETVAL / TSETVAL: one UB element through the scalar unit, at an ``index`` offset
        in the chip's layout (lower._element_offset) named after the result or the tile."""
        if i.op == "tgetval":
            tile, at = i.ins
            res = self.ref(i.outs[0])
            off = self.index(at, f"{res}.ix", depth)
            name, ty = self.operand(tile, i.op)
            self.emit(f"{res} = pto.tgetval ins({name}, {off} : {ty}, index) outs : "
                      f"{_sty(tile.dtype)}", depth)
            return
        at, value = i.ins
        tile = i.outs[0]
        off = self.index(at, f"%{tile.name}.{self.fresh('ix')[1:]}", depth)
        name, ty = self.operand(tile, i.op)
        self.emit(f"pto.tsetval ins({off}, {self.ref(value)} : index, {_sty(value.dtype)}) "
                  f"outs({name} : {ty})", depth)

    # -- instructions -----------------------------------------------------------------------
    def fill(self, tile: Tile, value, depth) -> None:
        """``texpands``: every element of ``tile`` becomes ``value``. A2/A3 fills i16, i32,
        f16 and f32 tiles only, so a tile of bytes (a mask: eight elements a byte) or of
        bfloat16 is filled through an i16 view of its bytes, with the value's bits. An L1
        tile is filled whole, its fractal padding too (cube_box.py: the K padding is zero)."""
        padded = tile.alloc is not None
        if padded:
            rows, cols = tile.alloc
            tile = dataclasses.replace(tile, rows=rows, cols=cols, v_row=rows, v_col=cols,
                                       alloc=None)
        if tile.dtype in _FILLABLE:
            v = float(value) if tile.dtype.is_floating else int(value)
            c, ty = self.const(v, tile.dtype.mlir), tile.dtype.mlir
            name, dst_type = self.operand(tile, "texpands")
            if padded:                      # the whole allocation, seen as %<tile>.w<n>
                name = f"%{tile.name}.{self.fresh('w')[1:]}"
                self.emit(f"{name} = pto.alloc_tile addr = {self.const(tile.addr, 'i64')} : "
                          f"{dst_type}", depth)
            self.emit(f"pto.texpands ins({c} : {ty}) outs({name} : {dst_type})", depth)
            return
        bits = fill_bits(tile.dtype, value)
        if bits is None:
            raise NotOnChip(f"a {tile.dtype} tile: A2/A3's vector unit has no {tile.dtype} "
                            f"arithmetic; convert the values to a 32-bit type first")
        self.fill_halves(tile, self.const(bits, "i16"), depth)

    def fill_scalar(self, i: Inst, depth) -> None:
        """``texpands`` of a run-time scalar into a tile A2/A3 does not fill (bfloat16; PTOAS
        0.27 rejects it): the scalar's bits (``%<scalar>.b<n>``) into the tile's i16 view."""
        (value,), tile = i.ins, i.outs[0]
        if value.dtype.itemsize != 2:
            raise NotOnChip(f"a {tile.dtype} tile filled with a run-time {value.dtype}: A2/A3 "
                            f"fills 16- and 32-bit tiles only", i.attrs.get("_loc"))
        bits = f"{self.ref(value)}.{self.fresh('b')[1:]}"
        self.emit(f"{bits} = arith.bitcast {self.ref(value)} : {_sty(value.dtype)} to i16",
                  depth)
        self.fill_halves(tile, bits, depth)

    def fill_halves(self, tile: Tile, bits: str, depth) -> None:
        """``tile`` seen as i16 (``%<tile>.h<n>``, ``_halves``) filled with the i16 ``bits``."""
        view = _halves(tile)
        name = f"%{tile.name}.{self.fresh('h')[1:]}"
        self.emit(f"{name} = pto.alloc_tile addr = {self.const(tile.addr, 'i64')} : "
                  f"{view.type_text()}", depth)
        self.emit(f"pto.texpands ins({bits} : i16) outs({name} : {view.type_text()})", depth)

    def operand(self, x, op: str) -> tuple[str, str]:
        """(name, type) of an operand as ``op`` sees it."""
        if isinstance(x, Tile):
            if x.is_column and op not in _COLUMN_NATIVE:
                return f"%{x.name}.row", x.type_text(row_view=True)
            return f"%{x.name}", x.type_text()
        return self.ref(x), _sty(x.dtype)

    def inst(self, i: Inst, depth) -> None:
        op = i.op
        if op.startswith("arith.") or op in ("pto.program_id", "pto.num_programs", "tensor.dim"):
            self.scalar_inst(i, depth)
            return
        if op in SYNC_OPS:
            for line in sync_lines(i, self.part):
                self.emit(line, depth)
            return
        if op == "tload":
            self.load(i, depth)
            return
        if op == "tfillpad":
            self.fill_pad(i, depth)
            return
        if op == "tstore":
            self.store(i, depth)
            return
        if op in ("tgetval", "tsetval"):
            self.element(i, depth)
            return
        wide = next((x for x in i.ins + i.outs if isinstance(x, Tile) and x.dtype.bits == 64),
                    None)
        if wide is not None and op not in ("tmov",):
            raise NotOnChip(f"a {wide.dtype} tile: A2/A3's vector unit has no 64-bit "
                            f"arithmetic; give the tile a 32-bit type (for example "
                            f"pl.full(shape, n, dtype=pl.int32))", i.attrs.get("_loc"))
        if op == "texpands" and not i.ins:
            self.fill(i.outs[0], i.attrs["value"], depth)
            return
        if op == "texpands" and i.outs[0].dtype not in _FILLABLE:
            self.fill_scalar(i, depth)
            return
        if op in ("tmrgsort", "tgather"):
            self.sort_inst(i, depth)
            return
        attrs = {k: v for k, v in i.attrs.items() if k not in ("tmp", "start")}
        ins = [self.operand(x, op) for x in i.ins]
        if op == "tci":
            d = i.outs[0].dtype
            ins = [(self.const(int(i.attrs["start"]), d.mlir), d.mlir)]
        if printed_tmp(i, self.dialect) is not None:
            ins.append(self.operand(i.attrs["tmp"], op))
        outs = [self.operand(x, op) for x in i.outs]
        if op == "tcolexpand" and i.outs[0].is_column:
            op = "trowexpand"      # (1, 1) → (M, 1): on the (1, M) row view, a row expand
        if op in ("textract", "tconcat") and i.outs[0].loc == "vec":
            self.moves(i, depth)
            return
        if op == "textract":       # from L1: the offsets are operands
            r0, c0 = i.attrs["starts"]
            ins += [(self.const(r0, "index"), "index"), (self.const(c0, "index"), "index")]
            del attrs["starts"]
        if _on_halves(op, i.outs[0].dtype):
            self.in_halves(i, depth)
            return
        if op == "tmov" and attrs.pop("transpose", False):
            ins = [self.transposed(i, depth)]
        if op == "treshape" and element_type(i.ins[0].dtype) != element_type(i.outs[0].dtype):
            return     # a bitcast: dst's alloc_tile already views src's bytes (plan_memory)
        # (a mask and its ui8 bytes are the same element type: the reader may see a mask's
        # reshape into a tile no compare writes as bool -> uint8, and it must print alike)
        if op == "treshape":       # a view of the source's bytes, copied when dst is elsewhere
            _check_reshape(i)
            (src, sty), (dst, dty) = ins[0], outs[0]
            view = f"{dst}.{self.fresh('rs')[1:]}"
            self.emit(f"{view} = pto.treshape {src} : {sty} -> {dty}", depth)
            if i.ins[0].addr != i.outs[0].addr:
                self.emit(f"pto.tmov ins({view} : {dty}) outs({dst} : {dty})", depth)
            return
        src = i.ins[0].dtype if i.ins else None
        if op == "tcvt" and "rmode" not in attrs and src.is_floating and \
                not i.outs[0].dtype.is_floating:
            attrs["rmode"] = "trunc"    # float → int truncates (an explicit trunc is the same)
        if op == "tcvt" and _row_alloc(i.ins[0]) != _row_alloc(i.outs[0]):
            self.cvt_rows(i, attrs, depth)
            return
        inner = _INNER_ATTRS.get(op)
        names = [n for n, _ in ins]
        if inner in attrs:
            names[-1] += f" {{{_attr(inner, attrs.pop(inner))}}}"
        text = (f"pto.{op} ins({', '.join(names)} : {', '.join(t for _, t in ins)}) "
                f"outs({', '.join(f'{n} : {t}' for n, t in outs)}){_attrs(attrs)}")
        self.emit(text, depth)

    def sort_inst(self, i: Inst, depth) -> None:
        """TMRGSORT's two forms and TGATHER's mask form, as PTOAS's tests write them:
        ``ins(%src, %blockLen : T, i32)``; ``ins(%l0, %l1, %tmp {exhausted = false} : ...)
        outs(%dst, %executed : T, vector<4xi16>)`` (the counts a suspended merge reports,
        unused: it never suspends); ``ins(%src, {maskPattern = ...} : T)``."""
        src = [self.operand(x, i.op) for x in i.ins]
        dst = self.operand(i.outs[0], i.op)
        if i.op == "tgather":
            (name, ty), = src
            pattern = f"{{maskPattern = #pto.mask_pattern<{i.attrs['pattern']}>}}"
            axis = ', "row"' if self.dialect.has("gather_axis") else ""
            self.emit(f"pto.tgather ins({name}, {pattern} : {ty}{axis}) outs({dst[0]} : "
                      f"{dst[1]})", depth)
            return
        if "block_len" in i.attrs:
            (name, ty), = src
            bl = self.const(int(i.attrs["block_len"]), "i32")
            self.emit(f"pto.tmrgsort ins({name}, {bl} : {ty}, i32) outs({dst[0]} : {dst[1]})",
                      depth)
            return
        src.append(self.operand(i.attrs["tmp"], i.op))
        names = ", ".join(n for n, _ in src)
        types = ", ".join(t for _, t in src)
        ex = self.executed()
        self.emit(f"pto.tmrgsort ins({names} {{exhausted = false}} : {types}) "
                  f"outs({dst[0]}, {ex} : {dst[1]}, {EXECUTED_TYPE})", depth)

    def executed(self) -> str:
        """The hoisted ``vector<4xi16>`` a multi-list TMRGSORT reports its counts into."""
        if EXECUTED not in self.consts.values():
            self.consts[("executed", EXECUTED_TYPE)] = EXECUTED
            self.const_lines.append(f"    {EXECUTED_LINE}")
        return EXECUTED

    def transposed(self, i: Inst, depth) -> tuple[str, str]:
        """A transposing move L1 → L0A/L0B (``matmul(a_trans=True)``): an L1 tile in the NZ
        layout holds, byte for byte, its transpose in the ZN layout when the fractal is
        square (16 x 16 elements of 16 bits), so the move reads that view."""
        src = i.ins[0]
        if src.dtype.itemsize != 2:
            raise NotOnChip(
                f"a transposed {src.dtype} matmul operand: A2/A3's L1 fractal of "
                f"{src.dtype} is not square, so no view of it is its transpose. Store the "
                f"operand transposed, or use float16/bfloat16 operands", i.attrs.get("_loc"))
        view = dataclasses.replace(src, rows=src.cols, cols=src.rows, v_row=src.v_col,
                                   v_col=src.v_row, alloc=src.alloc and src.alloc[::-1])
        text = view.type_text().replace("blayout=col_major, slayout=row_major",
                                        "blayout=row_major, slayout=col_major")
        name = f"%{src.name}.{self.fresh('t')[1:]}"
        self.emit(f"{name} = pto.alloc_tile addr = {self.const(src.addr, 'i64')} : {text}",
                  depth)
        return name, text

    def cvt_rows(self, i: Inst, attrs: dict, depth) -> None:
        """A conversion between tiles whose rows are allocated differently (a row of 16 int8
        takes 32 bytes, of 16 float16 too, but one is 32 elements and the other 16): A2/A3's
        TCVT wants both allocated alike, so it converts row by row, each row seen as a
        one-row tile allocated as wide as the wider of the two (only its valid part is read
        or written)."""
        src, dst = i.ins[0], i.outs[0]
        width = max(_row_alloc(src), _row_alloc(dst))
        n = self.fresh("k")[2:]
        rmode = f" {{{_attr('rmode', attrs['rmode'])}}}" if "rmode" in attrs else ""
        rows, cols = (1, src.rows) if src.is_column else (src.rows, src.cols)
        for r in range(rows):
            names = []
            for t in (src, dst):
                view = dataclasses.replace(t, rows=1, cols=width, v_row=1, v_col=cols,
                                           addr=t.addr + r * _row_bytes(t))
                name = f"%{t.name}.k{n}_{r}"
                self.emit(f"{name} = pto.alloc_tile addr = {self.const(view.addr, 'i64')} : "
                          f"{view.type_text()}", depth)
                names.append((name, view.type_text()))
            (a, at), (b, bt) = names
            if "tmp" in i.attrs:
                tmp, tmp_type = self.operand(i.attrs["tmp"], "tcvt")
                a, at = f"{a}, {tmp}", f"{at}, {tmp_type}"
            self.emit(f"pto.tcvt ins({a}{rmode} : {at}) outs({b} : {bt})", depth)

    def in_halves(self, i: Inst, depth) -> None:
        """A2/A3's bitwise instructions take 8- and 16-bit tiles (``tnot`` 16-bit only), and a
        bitwise op does not care how its bits are grouped: a mask's ``tnot`` and an int32
        ``tand``/``tor``/``txor``/``tnot`` run on i16 views of the tiles' bytes (the bits
        past the valid ones are don't-cares)."""
        tiles = i.ins + i.outs + ([i.attrs["tmp"]] if "tmp" in i.attrs else [])
        views = {}
        for t in tiles:
            if t.name not in views:
                views[t.name] = f"%{t.name}.{self.fresh('h')[1:]}"
                self.emit(f"{views[t.name]} = pto.alloc_tile addr = "
                          f"{self.const(t.addr, 'i64')} : {_halves(t).type_text()}", depth)
        ins = i.ins + ([i.attrs["tmp"]] if "tmp" in i.attrs else [])
        self.emit(f"pto.{i.op} ins({', '.join(views[t.name] for t in ins)} : "
                  f"{', '.join(_halves(t).type_text() for t in ins)}) outs("
                  f"{views[i.outs[0].name]} : {_halves(i.outs[0]).type_text()})", depth)

    def moves(self, i: Inst, depth) -> None:
        """A UB slice or concatenation. A2/A3's TEXTRACT and TINSERT take L1 tiles only and
        its TMOV wants equal shapes, so each piece is copied by ``tmuls`` by 1 (exact on the
        bits: both sides are seen as integers of the element's width) between the piece and
        a view of the other tile's bytes at the piece's offset (a tile with the other's row
        stride, valid over the piece). A piece must start on a 32-byte boundary of its row."""
        dst = i.outs[0]
        if i.op == "textract":
            r0, c0 = i.attrs["starts"]
            pieces = [(i.ins[0], (r0, c0), dst, "x")]
        else:
            axis, at, pieces = i.attrs["axis"], 0, []
            for src in i.ins:
                pieces.append((dst, (at, 0) if axis == 0 else (0, at), src, "c"))
                at += src.rows if axis == 0 else src.cols
        bits = {2: dt.int16, 4: dt.int32}.get(dst.dtype.itemsize)
        what = "a slice" if i.op == "textract" else "a concatenation"
        if bits is None or dst.dtype == dt.bool_:
            raise NotOnChip(f"{what} of a {dst.dtype} tile: A2/A3 copies UB tiles of 16- and "
                            f"32-bit elements only. Slice or concatenate before converting "
                            f"to {dst.dtype}", i.attrs.get("_loc"))
        one = self.const(1, bits.mlir)
        n = self.fresh("v")[2:]
        for k, (whole, (r0, c0), piece, tag) in enumerate(pieces):
            if (c0 * whole.dtype.itemsize) % 32:
                raise NotOnChip(
                    f"{what} at column {c0} of a {whole.dtype} tile: A2/A3 moves UB tiles in "
                    f"32-byte steps, so a piece must start at a multiple of "
                    f"{32 // whole.dtype.itemsize} columns. Load the piece from global memory "
                    f"with pl.load instead", i.attrs.get("_loc"))
            addr = whole.addr + r0 * _row_bytes(whole) + c0 * whole.dtype.itemsize
            view = (f"%{whole.name}.{tag}{n}_{k}",
                    dataclasses.replace(_view(whole, piece), dtype=bits, addr=addr))
            own = (f"%{piece.name}.{tag}{n}_{k}p", dataclasses.replace(piece, dtype=bits))
            for name, t in (view, own):
                self.emit(f"{name} = pto.alloc_tile addr = {self.const(t.addr, 'i64')} : "
                          f"{t.type_text()}", depth)
            (a, at_), (b, bt) = (view, own) if tag == "x" else (own, view)
            self.emit(f"pto.tmuls ins({a}, {one} : {at_.type_text()}, {bits.mlir}) "
                      f"outs({b} : {bt.type_text()})", depth)

    def block_query(self, i: Inst, depth) -> None:
        for line in block_query_lines(self.ref(i.outs[0]), i.op, i.attrs["axis"], self.grid):
            self.emit(line, depth)

    def scalar_inst(self, i: Inst, depth) -> None:
        res = i.outs[0]
        r = self.ref(res)
        ty = _sty(res.dtype)
        name = i.op.split(".", 1)[1]
        if i.op in ("pto.program_id", "pto.num_programs"):
            self.block_query(i, depth)
        elif i.op == "tensor.dim":
            t = i.ins[0]
            axis = i.attrs["axis"]
            src = (self.const(t.dims[axis], "i64") if t.dims[axis] is not None
                   else f"%{t.name}_d{axis}")
            self.emit(f"{r} = arith.addi {src}, {self.const(0, 'i64')} : i64", depth)
        elif name == "constant":
            for line in constant_lines(r, i.attrs["value"], ty):
                self.emit(line, depth)
        elif name == "cast" and i.ins[0].dtype == dt.bool_ and res.dtype.is_floating:
            for line in bool_to_float_lines(r, self.ref(i.ins[0]), ty):
                self.emit(line, depth)
        elif name == "cast":
            src = i.ins[0]
            self.emit(f"{r} = {_cast_op(src.dtype, res.dtype)} {self.ref(src)} : "
                      f"{_sty(src.dtype)} to {ty}", depth)
        elif name == "select":
            c, a, b = (self.ref(x) for x in i.ins)
            self.emit(f"{r} = arith.select {c}, {a}, {b} : {ty}", depth)
        elif name == "cmp":
            a, b = i.ins
            if a.dtype.is_floating:
                self.emit(f"{r} = arith.cmpf {_CMP_F[i.attrs['pred']]}, {self.ref(a)}, "
                          f"{self.ref(b)} : {_sty(a.dtype)}", depth)
            else:
                preds = _CMP_U if _unsigned(a.dtype) else _CMP_I
                self.emit(f"{r} = arith.cmpi {preds[i.attrs['pred']]}, {self.ref(a)}, "
                          f"{self.ref(b)} : {_sty(a.dtype)}", depth)
        else:
            a, b = (self.ref(x) for x in i.ins)
            if res.dtype.is_floating and name in FLOAT_MACROS:
                for line in FLOAT_MACROS[name](r, a, b, ty):
                    self.emit(line, depth)
            elif res.dtype.is_floating and name == "add":
                # PTOAS a56b18c3 lowers no arith.addf to C++: a + b is a - (-b), bit for bit
                self.emit(f"{r}.n = arith.negf {b} : {ty}", depth)
                self.emit(f"{r} = arith.subf {a}, {r}.n : {ty}", depth)
            elif res.dtype.is_floating:
                mnemonic = {"min": "minimumf", "max": "maximumf"}.get(name, name + "f")
                self.emit(f"{r} = arith.{mnemonic} {a}, {b} : {ty}", depth)
            elif _unsigned(res.dtype) and name in _UNSIGNED_INT:
                self.emit(f"{r} = arith.{_UNSIGNED_INT[name]} {a}, {b} : {ty}", depth)
            elif name == "floordiv":
                self.emit(f"{r} = arith.floordivsi {a}, {b} : {ty}", depth)
            elif name == "mod":   # Python's modulo: the remainder takes the divisor's sign
                q, m = self.fresh_run("q", "m")
                self.emit(f"{q} = arith.floordivsi {a}, {b} : {ty}", depth)
                self.emit(f"{m} = arith.muli {q}, {b} : {ty}", depth)
                self.emit(f"{r} = arith.subi {a}, {m} : {ty}", depth)
            else:
                mnemonic = {"min": "minsi", "max": "maxsi", "div": "divsi", "shr": "shrsi",
                            "shl": "shli", "and": "andi", "or": "ori",
                            "xor": "xori"}.get(name, name + "i")
                self.emit(f"{r} = arith.{mnemonic} {a}, {b} : {ty}", depth)


ROUND_MODES = {"none": "NONE", "rint": "RINT", "round": "ROUND", "floor": "FLOOR",
               "ceil": "CEIL", "trunc": "TRUNC", "odd": "ODD"}
ATOMIC_TYPES = {"add": "atomic_add", "max": "atomic_max", "min": "atomic_min"}
# what A2/A3's TSTORE adds atomically (pto-isa common/arch/memory/tstore_common.hpp)
ATOMIC_ADD_TYPES = (dt.float16, dt.float32, dt.bfloat16, dt.int8, dt.int16, dt.int32)

# Program attribute → (key in the text, spelling of the value)
ATTR_SPELLING = {
    "rmode": ("rmode", lambda v: f"#pto<round_mode {ROUND_MODES[v]}>"),
    "cmp": ("cmpMode", lambda v: f"#pto<cmp {v}>"),
    "atomic": ("atomicType", lambda v: f"#pto<atomic_type {ATOMIC_TYPES[v]}>"),
}


def _attr(key: str, value) -> str:
    text_key, spell = ATTR_SPELLING.get(key, (key, str))
    return f"{text_key} = {spell(value)}"


def _attrs(attrs: dict) -> str:
    attrs = {k: v for k, v in attrs.items() if not k.startswith("_")}   # host-only hints
    if not attrs:
        return ""
    return " {" + ", ".join(_attr(k, v) for k, v in attrs.items()) + "}"


def sync_lines(i: Inst, part: str = "vector") -> list[str]:
    """The text of a synchronisation instruction.

    Within a core: ``pto.set_flag[<PIPE_MTE2>, <PIPE_V>, <EVENT_ID0>]``, ``pto.wait_flag``,
    ``pto.barrier #pto.pipe<PIPE_V>``. Across cores, A2/A3 has FFTS flags (16 per core):
    ``pto.sync.set #pto.pipe<PIPE_FIX>, 15`` / ``pto.sync.wait #pto.pipe<PIPE_MTE2>, 15``,
    whose ``ffts_mode`` says who meets: 0 all cores of one kind, 2 the cube and vector
    cores of a cluster (the default). ``syncall`` (every block of the launch meets) is
    pto-isa's SYNCALL: FFTS mode 0 on the flag it reserves for it (``SYNCALL``: 14 on the
    vector cores, from MTE3; 11 on the cube cores, from FIX); each core sets it, then waits
    until every core has."""
    a = i.attrs
    if i.op in ("set_flag", "wait_flag"):
        return [f"pto.{i.op}[<PIPE_{a['src']}>, <PIPE_{a['dst']}>, <EVENT_ID{a['event']}>]"]
    if i.op == "barrier":
        return [f"pto.barrier #pto.pipe<PIPE_{a['pipe']}>"]
    if i.op == "syncall":
        pipe, flag = SYNCALL[part]
        return [f"pto.sync.set #pto.pipe<PIPE_{pipe}>, {flag} {{ffts_mode = 0 : i32}}",
                f"pto.sync.wait #pto.pipe<PIPE_{pipe}>, {flag}"]
    if a.get("count", 1) != 1:
        raise NotOnChip(f"a {i.op} counting {a['count']}: A2/A3's cross-core flags carry no "
                        f"count", a.get("_loc"))
    mode = f" {{ffts_mode = {a['mode']} : i32}}" if i.op == "sync.set" and "mode" in a else ""
    return [f"pto.{i.op} #pto.pipe<PIPE_{a['pipe']}>, {a['flag']}{mode}"]


SYNCALL = {"vector": ("MTE3", 14), "cube": ("FIX", 11)}   # pto-isa's SyncAll.hpp


def sync_text(i: Inst) -> str:
    """One line for messages about a synchronisation instruction."""
    return "; ".join(sync_lines(i))


# IEEE bits of the values MLIR has no decimal literal for
_SPECIAL_BITS = {
    "f16": {"inf": "0x7C00", "-inf": "0xFC00", "nan": "0x7E00"},
    "bf16": {"inf": "0x7F80", "-inf": "0xFF80", "nan": "0x7FC0"},
    "f32": {"inf": "0x7F800000", "-inf": "0xFF800000", "nan": "0x7FC00000"},
    "f64": {"inf": "0x7FF0000000000000", "-inf": "0xFFF0000000000000",
            "nan": "0x7FF8000000000000"},
}


def _row_bytes(tile: Tile) -> int:
    return -(-tile.cols * tile.dtype.itemsize // 32) * 32


def _check_reshape(i: Inst) -> None:
    """A2/A3's TRESHAPE views the same bytes as another shape, so it reshapes only tiles
    whose elements lie end to end: one row, a column, or rows of whole 32 bytes. A padded
    row would move the elements (and PTOAS rejects the differing byte sizes)."""
    src, dst = i.ins[0], i.outs[0]
    if (src.rows, src.cols) == (dst.rows, dst.cols) or (_end_to_end(src) and _end_to_end(dst)):
        return
    padded = next(t for t in (src, dst) if not _end_to_end(t))
    raise NotOnChip(
        f"a reshape of a ({src.rows}, {src.cols}) {src.dtype} tile into ({dst.rows}, "
        f"{dst.cols}): A2/A3 reshapes a tile's bytes in place, and a row of {padded.cols} "
        f"{padded.dtype} is padded to whole 32 bytes on the chip, so the elements would have "
        f"to move. Reshape between shapes whose rows are whole 32 bytes, or load the data in "
        f"the shape you need", i.attrs.get("_loc"))


def _end_to_end(tile: Tile) -> bool:
    """Do a UB tile's elements lie at consecutive addresses (no padding between rows)?"""
    if tile.rows == 1 or tile.is_column or tile.is_column_mask or tile.loc != "vec":
        return True
    bits = 1 if tile.dtype == dt.bool_ else 8 * tile.dtype.itemsize
    return (tile.cols * bits) % 256 == 0


def _row_alloc(tile: Tile) -> int:
    """Elements a UB tile's row is allocated (a (M, 1) tile: its one column, seen as a row)."""
    cols = tile.rows if tile.is_column else tile.cols
    return -(-cols * tile.dtype.itemsize // 32) * 32 // tile.dtype.itemsize


def _view(whole: Tile, piece: Tile) -> Tile:
    """A tile over ``whole``'s rows (its row stride) holding ``piece``'s valid region."""
    cols = _row_bytes(whole) // whole.dtype.itemsize
    return dataclasses.replace(whole, rows=piece.rows, cols=cols, v_row=piece.rows,
                               v_col=piece.cols)


_FILLABLE = (dt.int16, dt.int32, dt.float16, dt.float32)


def fill_bits(dtype, value) -> int | None:
    """The signed i16 whose bits fill a tile of ``dtype`` (bytes or bfloat16) with ``value``."""
    if dtype == dt.bool_:
        half = 0xFFFF if value else 0
    elif dtype.itemsize == 1:
        half = (int(value) & 0xFF) * 0x101
    elif dtype == dt.bfloat16:
        half = int(np.array(value, dtype=dtype.to_numpy()).view(np.uint16))
    else:
        return None
    return half - 0x10000 if half & 0x8000 else half


def _halves(tile: Tile) -> Tile:
    """An i16 view of a tile's bytes (``_Printer.fill``, ``_Printer.in_halves``). A column
    tile's M elements are contiguous: the view is of its (1, M) row."""
    if tile.is_column or tile.is_column_mask:
        tile = dataclasses.replace(tile, rows=1, cols=tile.rows, v_row=1, v_col=tile.v_row)
    if tile.dtype == dt.bool_:
        nbytes, valid = mask_row_bytes(tile.cols), -(-(tile.v_col or tile.cols) // 8)
    else:
        item = tile.dtype.itemsize
        nbytes, valid = _row_bytes(tile), (tile.v_col or tile.cols) * item
    return dataclasses.replace(tile, dtype=dt.int16, cols=nbytes // 2, v_col=-(-valid // 2))


def mlir_literal(value, ty: str) -> str:
    """``value`` as an ``arith.constant`` literal of type ``ty``: infinities and NaN as
    their bits in hexadecimal; booleans as 1 and 0; a float always with a point (MLIR reads
    ``1e-05`` as the integer 1 followed by an unknown ``e``)."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float) and not math.isfinite(value):
        return _SPECIAL_BITS[ty][str(value)]
    text = str(value)
    if isinstance(value, float) and "e" in text and "." not in text:
        text = text.replace("e", ".0e")
    return text


def _unsigned(dtype) -> bool:
    return dtype.is_int and not dtype.is_signed


def _defined_names(program: Program) -> set:
    """The names of the program's parameters, tiles and defined values."""
    names = {a.name for a in program.params} | {t.name for t in program.tiles}
    for _, body in program.parts:
        for node in walk_insts(body or []):
            if isinstance(node, Inst):
                values = node.outs
            elif isinstance(node, For):
                values = [node.iv, *node.iter_args, *node.results]
            elif isinstance(node, While):
                values = [*node.before_args, *node.after_args, *node.results]
            else:
                values = node.results
            names.update(v.name for v in values if hasattr(v, "name"))   # not int offsets
    return names


def bool_to_float_lines(r: str, b: str, ty: str) -> list[str]:
    """A bool as 1.0 or 0.0. Not ``uitofp``: PTOAS inlines an ``andi`` operand without
    parentheses, ``(float) a & b``, which C++ rejects."""
    return [f"{r}.one = arith.constant 1.0 : {ty}", f"{r}.zero = arith.constant 0.0 : {ty}",
            f"{r} = arith.select {b}, {r}.one, {r}.zero : {ty}"]


def _fmod_lines(r: str, a: str, b: str, ty: str) -> list[str]:
    """``{r}.m`` = C's fmod(a, b) and ``{r}.fx``: is it non-zero with a sign unlike b's (the
    case where Python's ``%`` adds b and its ``//`` subtracts 1)? The condition is a select,
    not an ``andi``: PTOAS inlines operands without parentheses."""
    return [f"{r}.m = arith.remf {a}, {b} : {ty}",
            f"{r}.zero = arith.constant 0.0 : {ty}",
            f"{r}.nz = arith.cmpf one, {r}.m, {r}.zero : {ty}",
            f"{r}.mn = arith.cmpf olt, {r}.m, {r}.zero : {ty}",
            f"{r}.bn = arith.cmpf olt, {b}, {r}.zero : {ty}",
            f"{r}.sd = arith.cmpi ne, {r}.mn, {r}.bn : i1",
            f"{r}.fx = arith.select {r}.nz, {r}.sd, {r}.nz : i1"]


def float_mod_lines(r: str, a: str, b: str, ty: str) -> list[str]:
    """Python's float ``a % b`` (the divisor's sign; numpy's and the host lowering's
    ``_python_float_mod``): fmod, plus b in the ``fx`` case. arith has no such modulo
    (``arith.modf`` does not exist) and PTOAS lowers no ``addf``, so ``+ b`` is ``- (-b)``."""
    return _fmod_lines(r, a, b, ty) + [
        f"{r}.nb = arith.negf {b} : {ty}",
        f"{r}.s = arith.subf {r}.m, {r}.nb : {ty}",
        f"{r} = arith.select {r}.fx, {r}.s, {r}.m : {ty}"]


# 2^(mantissa bits): from there on every float is an integer, and below it (t + 2^p) - 2^p
# rounds t >= 0 to the nearest integer
_ROUNDING_MAGIC = {"f16": 1024.0, "bf16": 128.0, "f32": 8388608.0, "f64": 4503599627370496.0}


def float_floordiv_lines(r: str, a: str, b: str, ty: str) -> list[str]:
    """Python's float ``a // b`` as numpy's ``npy_floor_divide`` and the host lowering's
    ``safe_floordiv`` compute it: ``(a - fmod(a, b)) / b``, minus 1 in the ``fx`` case,
    rounded to the integer it is within rounding of; ``a / b`` (inf or nan) when b is 0.
    MLIR's arith has no ``floordivf`` (PTOAS: 'custom op arith.floordivf is unknown') and
    PTOAS lowers no ``math.round``, so the rounding is the magic-number one on |q| (exact
    under the FPU's round to nearest)."""
    magic = mlir_literal(_ROUNDING_MAGIC[ty], ty)
    return _fmod_lines(f"{r}.md", a, b, ty) + [
        f"{r}.x = arith.subf {a}, {r}.md.m : {ty}",
        f"{r}.q0 = arith.divf {r}.x, {b} : {ty}",
        f"{r}.one = arith.constant 1.0 : {ty}",
        f"{r}.q1 = arith.subf {r}.q0, {r}.one : {ty}",
        f"{r}.q = arith.select {r}.md.fx, {r}.q1, {r}.q0 : {ty}",
        f"{r}.neg = arith.cmpf olt, {r}.q, {r}.md.zero : {ty}",
        f"{r}.nq = arith.negf {r}.q : {ty}",
        f"{r}.t = arith.select {r}.neg, {r}.nq, {r}.q : {ty}",
        f"{r}.c = arith.constant {magic} : {ty}",
        f"{r}.nc = arith.constant -{magic} : {ty}",
        f"{r}.u = arith.subf {r}.t, {r}.nc : {ty}",
        f"{r}.v = arith.subf {r}.u, {r}.c : {ty}",
        f"{r}.small = arith.cmpf olt, {r}.t, {r}.c : {ty}",
        f"{r}.w = arith.select {r}.small, {r}.v, {r}.t : {ty}",
        f"{r}.nw = arith.negf {r}.w : {ty}",
        f"{r}.rq = arith.select {r}.neg, {r}.nw, {r}.w : {ty}",
        f"{r}.bz = arith.cmpf one, {b}, {r}.md.zero : {ty}",
        f"{r}.d = arith.divf {a}, {b} : {ty}",
        f"{r} = arith.select {r}.bz, {r}.rq, {r}.d : {ty}"]


# scalar float operations arith lacks, printed as several lines (the reader folds them back)
FLOAT_MACROS = {"mod": float_mod_lines, "floordiv": float_floordiv_lines}


_BITS_TYPE = {"f16": "i16", "bf16": "i16", "f32": "i32", "f64": "i64"}


def constant_lines(name: str, value, ty: str) -> list[str]:
    """``name = value`` as PTOAS can lower it. A non-finite float is not one ``arith.constant``:
    PTOAS a56b18c3 writes it as ``-Inf.0f`` / ``NaN.0f``, C++ that no compiler accepts
    (``ArithConstantToEmitC`` in lib/PTO/Transforms/PTOToEmitC.cpp looks for "inf"/"nan" but
    ``APFloat::toString`` spells them "Inf"/"NaN"), and it folds a bitcast of a constant
    back into one. So the bits are chosen by a condition its folder cannot decide (the block
    index below 0: never) and bitcast, which it emits as ``ptoas_bitcast<float>(...)``."""
    if not (isinstance(value, float) and not math.isfinite(value)):
        return [f"{name} = arith.constant {mlir_literal(value, ty)} : {signless(ty)}"]
    ity = _BITS_TYPE[ty]
    width = int(ity[1:])
    bits = int(_SPECIAL_BITS[ty][str(value)], 16)
    bits -= (1 << width) if bits >> (width - 1) else 0            # arith prints signed
    return [f"{name}.b = arith.constant {bits} : {ity}",
            f"{name}.z = arith.constant 0 : {ity}",
            f"{name}.k = pto.get_block_idx",
            f"{name}.k0 = arith.constant 0 : i64",
            f"{name}.n = arith.cmpi slt, {name}.k, {name}.k0 : i64",
            f"{name}.s = arith.select {name}.n, {name}.z, {name}.b : {ity}",
            f"{name} = arith.bitcast {name}.s : {ity} to {ty}"]


def gm_type(dtype) -> str:
    """A tensor's element type in global memory: a bool is a byte there, and so is a float8
    (A2/A3 loads no f8 tiles: legalize_storage)."""
    return "i8" if dtype == dt.bool_ else "ui8" if dtype.storage_only else dtype.mlir


def _sty(dtype) -> str:
    return signless(dtype.mlir)


def signless(ty: str) -> str:
    """``arith`` takes signless integers only: an unsigned scalar is its bits (ui8 → i8)."""
    return ty[1:] if ty.startswith("ui") else ty


def _cast_op(src, dst) -> str:
    """arith's integers are signless: the operation says how to read them (a bool or an
    unsigned source is zero-extended: True is 1, not -1)."""
    unsigned_src = src == dt.bool_ or _unsigned(src)
    if src.is_floating and dst.is_floating:
        return "arith.extf" if dst.bits > src.bits else "arith.truncf"
    if src.is_floating:
        return "arith.fptoui" if dst.is_int and not dst.is_signed else "arith.fptosi"
    if dst.is_floating:
        return "arith.uitofp" if unsigned_src else "arith.sitofp"
    if dst.bits == src.bits:
        return "arith.bitcast"
    if dst.bits > src.bits:
        return "arith.extui" if unsigned_src else "arith.extsi"
    return "arith.trunci"


def block_query_lines(r: str, op: str, axis: int, grid: bool) -> list[str]:
    """``pl.program_id`` / ``pl.num_programs`` (``op``, ``axis``) as ``r``. The chip has one
    linear block index and count; a kernel that asks about a second or third grid axis is
    launched over the product of the grid, axis 0 fastest, and takes the first two extents
    as the hidden parameters ``GRID_PARAMS``."""
    query = "get_block_idx" if op == "pto.program_id" else "get_block_num"
    if not grid:
        return [f"{r} = pto.{query}"]
    g0, g1 = (f"%{g}" for g in GRID_PARAMS)
    if op == "pto.program_id":
        tail = {0: [f"{r} = arith.remsi {r}.b, {g0} : i64"],
                1: [f"{r}.q = arith.divsi {r}.b, {g0} : i64",
                    f"{r} = arith.remsi {r}.q, {g1} : i64"],
                2: [f"{r}.g = arith.muli {g0}, {g1} : i64",
                    f"{r} = arith.divsi {r}.b, {r}.g : i64"]}[axis]
    else:      # the count of axis 0 and 1 are parameters; axis 2's is what remains
        tail = {0: [f"{r} = arith.minsi {r}.b, {g0} : i64"],
                1: [f"{r} = arith.minsi {r}.b, {g1} : i64"],
                2: [f"{r}.g = arith.muli {g0}, {g1} : i64",
                    f"{r} = arith.divsi {r}.b, {r}.g : i64"]}[axis]
    return [f"{r}.b = pto.{query}"] + tail


def max_grid_axis(program: Program) -> int:
    """The highest grid axis the kernel asks about (0 for a one-dimensional grid)."""
    return max([i.attrs["axis"] for _, body in program.parts for i in walk_insts(body)
                if isinstance(i, Inst) and i.op in ("pto.program_id", "pto.num_programs")]
               + [0])


def tiles_used(body: list, dialect: Dialect = DEFAULT) -> set[str]:
    """Names of the tiles that the instructions of ``body`` (nested ones included) touch, as
    ``dialect`` prints them."""
    return {x.name for inst in walk_insts(body) if isinstance(inst, Inst)
            for x in inst.ins + inst.outs + [printed_tmp(inst, dialect)] if isinstance(x, Tile)}


def printed_tmp(inst: Inst, dialect: Dialect):
    """The scratch tile ``inst`` names in ``dialect``'s text, or None (TCI's before 0.57)."""
    if inst.op == "tci" and not dialect.has("tci_tmp"):
        return None
    return inst.attrs.get("tmp")


def _column_cube_operands(program: Program) -> set[str]:
    """Names of the (M, 1) ND tensors loaded into cube tiles and into no vector tile: their
    view is ND and DN at once, and PTOAS takes the tile's col_major blayout to mean DN, which
    TLOAD into an L1 tile does not take (ND2NZ only); the explicit ``nd`` says which."""
    cube, vector = set(), set()
    for _, body in program.parts:
        for node in walk_insts(body):
            if isinstance(node, Inst) and node.op == "tload":
                tensor, tile = node.ins[0], node.outs[0]
                (vector if tile.loc == "vec" else cube).add(tensor.name)
    return {p.name for p in program.params if isinstance(p, TensorArg) and p.name in cube
            and p.name not in vector and p.layout == "ND" and p.rank == 2
            and p.dims[-1] == 1 and p.dims[-2] not in (None, 1)}


def _block_derived(program: Program) -> set[str]:
    """Names of the scalars computed from the block index or count: ``_Printer.loop`` prints
    loops bounded by them as index loops. (The i64 induction variable such a loop casts back
    is not one: 0.60 lowers an i64 loop bounded by it, and rejects an index loop.)"""
    derived: set[str] = set()
    for _, body in program.parts:
        for node in walk_insts(body):
            if isinstance(node, Inst) and (
                    node.op in ("pto.program_id", "pto.num_programs") or
                    (node.op.startswith("arith.") and
                     any(getattr(x, "name", None) in derived for x in node.ins))):
                derived.update(o.name for o in node.outs)
    return derived


def print_program(program: Program, dialect: Dialect = DEFAULT) -> str:
    """``program`` as the ``.pto`` text ``dialect``'s PTOAS reads (the newest by default)."""
    return _Printer(program, dialect).program()
