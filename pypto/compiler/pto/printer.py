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

This module prints functions, control flow, scalars and the instructions that print as
themselves; global memory is ``print_windows``, instructions printed on views of a tile's bytes
are ``print_views``, and the spellings the reader shares are ``spelling``.
"""
from __future__ import annotations

from ...errors import NotOnChip
from ...language import dtypes as dt
from . import print_views, print_windows
from .dialect import DEFAULT, Dialect
from .subblocks import SUBBLOCK, skeleton
from .isa import CROSS_CORE_OPS, SYNC_OPS
from .program import For, If, Inst, Program, TensorArg, Tile, While, row_pitch, walk_insts
from .spelling import (CMP_FLOAT, CMP_SIGNED, CMP_UNSIGNED, EXECUTED, EXECUTED_LINE,
                       EXECUTED_TYPE, FFTS_PARAM, FLOAT_MACROS, GRID_PARAMS,
                       UNSIGNED_INT, attrs_text, block_query_lines, inner_text,
                       bool_to_float_lines, cast_op, constant_lines, constant_name, gm_type,
                       is_unsigned, printed_tmp, scalar_type, sync_lines, tiles_used)

# instructions that read or write an (M, 1) tile in its column-major (DN) form; every other
# instruction sees such a tile through its row-major (1, M) view (Tile.type_text)
_COLUMN_NATIVE = ("trowsum", "trowmax", "trowmin", "trowprod", "trowargmax", "trowargmin",
                  "trowexpand", "trowexpandadd",
                  "trowexpandsub", "trowexpandmul", "trowexpanddiv", "trowexpandmax",
                  "trowexpandmin", "tload", "tstore")


class _Printer:
    """The text of one program: the names it gives, the constants it hoists and the lines of
    the function being printed, which the instruction families of ``print_windows`` and
    ``print_views`` write through (``emit``, ``const``, ``index``, ``fresh``, ``operand``,
    ``ref``, ``extents``)."""

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
        """A line of the function's body, ``depth`` levels in."""
        self.lines.append("  " * depth + text)

    def const(self, value, ty) -> str:
        """The name of the constant ``value`` of type ``ty``, hoisted to the function's top."""
        key = (repr(value), ty)      # repr: -0.0 is not 0.0, and nan is one constant
        if key not in self.consts:
            name = constant_name(value, ty)
            self.consts[key] = name
            self.const_lines += [f"    {line}" for line in constant_lines(name, value, ty)]
        return self.consts[key]

    def address(self, tile: Tile, depth) -> str:
        """The i64 address of ``tile``'s bytes: its planned one, or for a row at a run-time
        row (``Tile.row_of``) that row's, ``%<tile>.ra<n>`` = address + row x row pitch."""
        if tile.row_of is None:
            return self.const(tile.addr, "i64")
        whole, row = tile.row_of
        pitch = row_pitch(whole) * whole.dtype.itemsize
        name = f"%{tile.name}.{self.fresh('ra')[1:]}"
        self.emit(f"{name}.o = arith.muli {self.ref(row)}, {self.const(pitch, 'i64')} : i64",
                  depth)
        self.emit(f"{name} = arith.addi {name}.o, {self.const(whole.addr, 'i64')} : i64",
                  depth)
        return name

    def ref(self, x) -> str:
        """How a use of the scalar ``x`` (or an operand name) prints."""
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
                args.append(f"%{a.name}: {scalar_type(a.dtype)}")
        if self.grid:
            args += [f"%{g}: i64" for g in GRID_PARAMS]
        cross_core = any(isinstance(i, Inst) and i.op in CROSS_CORE_OPS
                         for i in walk_insts(body))
        if cross_core:
            args.append(f"%{FFTS_PARAM}: {self.dialect.ffts_type}")
        for a in p.params:
            if isinstance(a, TensorArg):
                print_windows.tensor_view(self, a)
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
        if p.kind == "mixed" and kind == "vector" and p.vector_cores == 1:
            self.subblocks(body)
        else:
            self.body(body, 2)
        self.emit("return", 2)
        head = (f"  func.func @{name}({', '.join(args)}) attributes "
                f"{{pto.entry, pto.kernel_kind = #pto.kernel_kind<{kind}>}} {{")
        return [head] + self.const_lines + self.lines + ["  }"]

    def subblocks(self, body: list) -> None:
        """A mixed kernel's vector function, which both AIVs of a cluster run: the part on
        sub-block 0, its skeleton (``subblocks.py``) on sub-block 1."""
        sb = f"%{SUBBLOCK}"
        self.emit(f"{sb} = pto.get_subblock_idx", 2)
        self.emit(f"{sb}.p = arith.cmpi eq, {sb}, {self.const(0, 'i64')} : i64", 2)
        self.emit(f"scf.if {sb}.p {{", 2)
        self.body(body, 3)
        self.emit("} else {", 2)
        self.body(skeleton(body), 3)
        self.emit("}", 2)

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
                      f"{', '.join(scalar_type(v.dtype) for v in values)}", depth)

    def branch(self, node: If, depth) -> None:
        types = (f" -> ({', '.join(scalar_type(r.dtype) for r in node.results)})"
                 if node.results else "")
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
        types = ", ".join(scalar_type(a.dtype) for a in node.before_args)
        self.emit(f"{self._results(node.results)}scf.while ({pairs}) : ({types}) -> ({types}) {{",
                  depth)
        self.body(node.before_body, depth + 1)
        fwd = ", ".join(self.ref(v) for v in node.forwarded)
        self.emit(f"scf.condition({self.ref(node.cond)}) {fwd}"
                  f"{' : ' + types if node.forwarded else ''}", depth + 1)
        args = ", ".join(f"%{a.name}: {scalar_type(a.dtype)}" for a in node.after_args)
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
        ty, name = scalar_type(value.dtype), f"%{value.name}"
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
            types = ", ".join(scalar_type(a.dtype) for a in f.iter_args)
            res = ", ".join(f"%{r.name}" for r in f.results)
            head = f"{res} = {head} iter_args({pairs}) -> ({types})"
        self.emit(head + (" {" if over_index else " : i64 {"), depth)
        if over_index:
            self.emit(f"{iv} = arith.index_cast {iv}.ix : index to i64", depth + 1)
        self.body(f.body, depth + 1)
        if f.yields:
            self.emit(f"scf.yield {', '.join(self.ref(y) for y in f.yields)} : "
                      f"{', '.join(scalar_type(y.dtype) for y in f.yields)}", depth + 1)
        self.emit("}", depth)

    # -- instructions -----------------------------------------------------------------------
    def element(self, i: Inst, depth) -> None:
        """TGETVAL / TSETVAL: one UB element through the scalar unit, at an ``index`` offset
        in the chip's layout (lower._element_offset) named after the result or the tile."""
        if i.op == "tgetval":
            tile, at = i.ins
            res = self.ref(i.outs[0])
            off = self.index(at, f"{res}.ix", depth)
            name, ty = self.operand(tile, i.op)
            self.emit(f"{res} = pto.tgetval ins({name}, {off} : {ty}, index) outs : "
                      f"{scalar_type(tile.dtype)}", depth)
            return
        at, value = i.ins
        tile = i.outs[0]
        off = self.index(at, f"%{tile.name}.{self.fresh('ix')[1:]}", depth)
        name, ty = self.operand(tile, i.op)
        self.emit(f"pto.tsetval ins({off}, {self.ref(value)} : index, {scalar_type(value.dtype)}) "
                  f"outs({name} : {ty})", depth)

    def operand(self, x, op: str) -> tuple[str, str]:
        """(name, type) of an operand as ``op`` sees it."""
        if isinstance(x, Tile):
            if x.is_column and op not in _COLUMN_NATIVE:
                return f"%{x.name}.row", x.type_text(row_view=True)
            return f"%{x.name}", x.type_text()
        return self.ref(x), scalar_type(x.dtype)

    def inst(self, i: Inst, depth) -> None:
        op = i.op
        if i.attrs.get("_host_only"):       # our simulator's form of what precedes it
            return
        if op.startswith("arith.") or op in ("pto.program_id", "pto.num_programs", "tensor.dim",
                                             "pto.get_subblock_idx"):
            self.scalar_inst(i, depth)
            return
        if op in SYNC_OPS:
            for line in sync_lines(i, self.part):
                self.emit(line, depth)
            return
        if op == "tload":
            print_windows.load(self, i, depth)
            return
        if op == "tfillpad":
            print_windows.fill_pad(self, i, depth)
            return
        if op == "tstore":
            print_windows.store(self, i, depth)
            return
        if op in ("tgetval", "tsetval"):
            self.element(i, depth)
            return
        wide = next((x for x in i.ins + i.outs if isinstance(x, Tile) and x.dtype.bits == 64),
                    None)
        if wide is not None and op not in ("tmov",):
            raise NotOnChip(dt.wide_tile_advice(wide.dtype), i.attrs.get("_loc"))
        if op == "texpands" and not i.ins:
            print_views.fill(self, i.outs[0], i.attrs["value"], depth)
            return
        if op == "texpands" and i.outs[0].dtype not in print_views.FILLABLE:
            print_views.fill_scalar(self, i, depth)
            return
        if op in ("tmrgsort", "tgather"):
            self.sort_inst(i, depth)
            return
        attrs = {k: v for k, v in i.attrs.items() if k not in ("tmp", "start")}
        ins = [self.operand(x, op) for x in i.ins]
        if op == "tci":
            d = i.outs[0].dtype
            ins = [(self.const(int(i.attrs["start"]), d.mlir), d.mlir)]
        if printed_tmp(i, self.dialect) is not None:     # TSELS: ins(mask, src, tmp, scalar)
            ins.insert(2 if op == "tsels" else len(ins), self.operand(i.attrs["tmp"], op))
        outs = [self.operand(x, op) for x in i.outs]
        if op == "tcolexpand" and i.outs[0].is_column:
            op = "trowexpand"      # (1, 1) → (M, 1): on the (1, M) row view, a row expand
        if op in ("textract", "tconcat") and i.outs[0].loc == "vec":
            print_views.moves(self, i, depth)
            return
        if op == "textract":       # from L1: the offsets are operands
            r0, c0 = i.attrs["starts"]
            if attrs.pop("transpose", False):     # from the L1 tile's ZN view, transposed
                ins, (r0, c0) = [print_views.transposed(self, i, depth)], (c0, r0)
            ins += [(self.const(r0, "index"), "index"), (self.const(c0, "index"), "index")]
            del attrs["starts"]
        if print_views.on_halves(op, i.outs[0].dtype):
            print_views.in_halves(self, i, depth)
            return
        if op == "tmov" and attrs.pop("transpose", False):
            ins = [print_views.transposed(self, i, depth)]
        if op == "treshape":
            print_views.reshape(self, i, ins[0], outs[0], depth)
            return
        src = i.ins[0].dtype if i.ins else None
        if op == "tcvt" and "rmode" not in attrs and src.is_floating and \
                not i.outs[0].dtype.is_floating:
            attrs["rmode"] = "trunc"    # float → int truncates (an explicit trunc is the same)
        if op == "tcvt" and print_views.row_alloc(i.ins[0]) != print_views.row_alloc(i.outs[0]):
            print_views.cvt_rows(self, i, attrs, depth)
            return
        names = [n for n, _ in ins]
        names[-1] += inner_text(op, attrs)
        text = (f"pto.{op} ins({', '.join(names)} : {', '.join(t for _, t in ins)}) "
                f"outs({', '.join(f'{n} : {t}' for n, t in outs)}){attrs_text(attrs)}")
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

    def block_query(self, i: Inst, depth) -> None:
        for line in block_query_lines(self.ref(i.outs[0]), i.op, i.attrs["axis"], self.grid):
            self.emit(line, depth)

    def scalar_inst(self, i: Inst, depth) -> None:
        res = i.outs[0]
        r = self.ref(res)
        ty = scalar_type(res.dtype)
        name = i.op.split(".", 1)[1]
        if i.op in ("pto.program_id", "pto.num_programs"):
            self.block_query(i, depth)
        elif i.op == "pto.get_subblock_idx":      # both AIVs run the part (split_rows.py)
            self.emit(f"{r} = pto.get_subblock_idx", depth)
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
            self.emit(f"{r} = {cast_op(src.dtype, res.dtype)} {self.ref(src)} : "
                      f"{scalar_type(src.dtype)} to {ty}", depth)
        elif name == "select":
            c, a, b = (self.ref(x) for x in i.ins)
            self.emit(f"{r} = arith.select {c}, {a}, {b} : {ty}", depth)
        elif name == "cmp":
            a, b = i.ins
            if a.dtype.is_floating:
                self.emit(f"{r} = arith.cmpf {CMP_FLOAT[i.attrs['pred']]}, {self.ref(a)}, "
                          f"{self.ref(b)} : {scalar_type(a.dtype)}", depth)
            else:
                preds = CMP_UNSIGNED if is_unsigned(a.dtype) else CMP_SIGNED
                self.emit(f"{r} = arith.cmpi {preds[i.attrs['pred']]}, {self.ref(a)}, "
                          f"{self.ref(b)} : {scalar_type(a.dtype)}", depth)
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
            elif is_unsigned(res.dtype) and name in UNSIGNED_INT:
                self.emit(f"{r} = arith.{UNSIGNED_INT[name]} {a}, {b} : {ty}", depth)
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


def max_grid_axis(program: Program) -> int:
    """The highest grid axis the kernel asks about (0 for a one-dimensional grid)."""
    return max([i.attrs["axis"] for _, body in program.parts for i in walk_insts(body)
                if isinstance(i, Inst) and i.op in ("pto.program_id", "pto.num_programs")]
               + [0])


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
