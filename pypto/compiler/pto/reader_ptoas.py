"""Read ``.pto`` that PyPTO's printer did not write: PTOAS's own ``test/samples``, other front
ends' output, kernels written by hand in the dialect's ordinary form.

Why a reader of its own: ``reader.py`` inverts the printer, whose spellings (hoisted constants
named after their value, views at the top of a function, every tile with an ``addr``) it relies
on. Text written elsewhere uses the dialect freely. This reader shares the statement grammar
(``reader.Parser`` and its statement handlers, ``read_scalars`` and ``read_tiles``: regions,
``scf``, ``arith``, tile instructions, flags) and reads, in addition:

* constants anywhere, of type ``index`` too (PyPTO's index and integer scalars are int64),
  ``arith.index_cast`` both ways, and the compile-time values of constants (folded through
  ``addi``/``subi``/``muli``) where the dialect wants a number: shapes, strides, tile
  addresses, partition sizes, ``textract`` offsets, ``get_tensor_view_dim``;
* ``pto.make_tensor_view`` and ``pto.partition_view`` anywhere in the body, with any SSA
  offsets (``layout = #pto.layout<nd>`` only), loads and stores whose partition is the tile's
  valid shape;
* ``pto.alloc_tile`` anywhere (inside loops too), with or without ``addr``: PTOAS "level 2"
  text plans no addresses, so tiles without one are placed by ``passes/place_tiles.py``;
  ``pto.treshape`` as a view of its source's bytes; ``scf.if`` yielding tiles (a result tile
  that each branch copies its own into);
* ``pto.barrier <PIPE_X>``; text with no flags or barriers at all (level 2: PTOAS inserts them)
  gets PyPTO's own (``passes/sync.insert_sync``), so the hazard checker and the cycle model see
  a synchronised program;
* ``mat``/``left``/``right`` tiles in another fractal order than PyPTO's (the same matrix:
  PyPTO's tiles are dense inside), the bias table (``loc=bias``) of ``tmatmul.bias``;
* functions without ``pto.kernel_kind``: the kind follows from the buffers the tiles live in;
  ``pto.target_arch = "a2a3"`` (other architectures are refused: PyPTO models A2/A3).

Every value is renamed ``%_<name>`` (parameters keep theirs: they are the launch's names), so
the printer's own names (``%c0_index``, ``%pv1``) cannot clash when the program is printed
again. What it does not read is refused at its line with the reason (``PtoParseError``), which
``benchmarks/ptoas_samples.py`` reports per sample.
"""
from __future__ import annotations

import re

from ...language import dtypes as dt
from . import read_scalars, read_tiles
from .isa import SYNC_OPS
from .passes.place_tiles import place_tiles
from .passes.sync import insert_sync
from .program import LAYOUTS, If, Inst, Program, Scalar, TensorArg, Tile, walk_insts
from .read_text import statements
from .reader import PtoParseError, Parser, parse_program
from .spelling import IF_HEAD, KERNEL_KIND, PARTITION, RESHAPE, split_list
from .spelling import SSA_NAME as _N
from .spelling import UNARY as _INDEX_CAST

_MODULE = re.compile(r"module(?: attributes \{(.*)\})? \{")
_ARCH = re.compile(r'pto\.target_arch = "(\w+)"')
_VIEW = re.compile(rf"\s*({_N}), shape = \[(.*)\], strides = \[(.*)\]"
                   rf"(?: \{{(.*)\}})?\s*: !pto\.tensor_view<.*>")
_ALLOC = re.compile(rf"(?: addr = ({_N}))?(?: valid_row = ({_N}) valid_col = ({_N}))?"
                    rf" : (!pto\.tile_buf<.*>)")
_DIM = re.compile(rf"\s*({_N}), ({_N})(?: : .*)?")
_BARRIER = re.compile(r"\s*(?:#pto\.pipe)?<PIPE_(\w+)>")
_CUBE = ("mat", "left", "right", "acc", "bias")
# cube buffers whose byte order the text may choose (no instruction here reads their bytes
# through another type: treshape is a vector-side view)
_REORDERABLE = ("mat", "left", "right")
_FOLD = {"arith.addi": lambda a, b: a + b, "arith.subi": lambda a, b: a - b,
         "arith.muli": lambda a, b: a * b}
# architectures whose verifiers are A2/A3's (PTOAS's --pto-arch=a3 covers both)
A2A3 = ("a2a3", "a2", "a3")


def is_pypto_text(text: str) -> bool:
    """PyPTO's printer always names the chip (``"pto.device-spec"``) in the module header."""
    first = next(iter(statements(text)), (0, ""))[1]
    return '"pto.device-spec"' in first


def read(text: str, target, default_target) -> Program:
    """The ``Program`` of any ``.pto`` text: PyPTO's own print through ``reader`` (exactly),
    anything else through this module. ``target`` (or else ``default_target()``) is the chip
    for text that names none; PyPTO's print names its own."""
    if not is_pypto_text(text):
        return parse_ptoas_text(text, target or default_target())
    try:
        return parse_program(text, target)
    except PtoParseError as exact:      # "pto.device-spec" written by hand: read it freely
        try:
            return parse_ptoas_text(text, target or default_target())
        except PtoParseError as free:  # the reading that got further says what is wrong
            raise (free if (free.line or 0) > (exact.line or 0) else exact) from None


def parse_ptoas_text(text: str, target) -> Program:
    return _PtoasParser(text).module(target)


def needs_level2(text: str) -> bool:
    """Does ``text`` leave tile addresses to the assembler (PTOAS's default level 2)?"""
    return re.search(r"pto\.alloc_tile(?! addr)", text) is not None


class _PtoasParser(Parser):
    """``reader.Parser``'s grammar without the printer's conventions (module docstring)."""

    def __init__(self, text: str):
        super().__init__(text)
        self.known: dict[str, object] = {}      # SSA name → its compile-time value
        self.sizes: dict[str, list] = {}        # partition view → its static sizes
        self.views: dict[str, Tile] = {}        # a treshape result's name → the tile it views

    # -- module and function ------------------------------------------------------------------
    def module(self, target) -> Program:
        m = self.match(_MODULE, self.next("empty text: expected a module"), "module header")
        arch = _ARCH.search(m.group(1) or "")
        if arch and arch.group(1) not in A2A3:
            raise self.error(f"the module is for pto.target_arch {arch.group(1)!r}; PyPTO "
                             "models A2/A3 (\"a2a3\") only")
        funcs = []
        while self.peek() != "}":
            if self.peek() is None:
                self.next("the module is not closed by }")
            if funcs:
                self.next()
                raise self.error("a second func.func: PyPTO loads one kernel function per "
                                 "module (calls between functions are not read)")
            funcs.append(self.function(None))
        self.next()
        if self.peek() is not None:
            self.next()
            raise self.error("text after the end of the module")
        f = funcs[0]
        f.kind = self.kind_of(f)
        self.at = f.header
        try:
            place_tiles([self.tiles[n] for n in f.tiles], f.body, self.views, target)
        except ValueError as e:
            raise self.error(str(e)) from None
        program = self.program(funcs, target)
        if not any(isinstance(i, Inst) and i.op in SYNC_OPS
                   for _, body in program.parts for i in walk_insts(body)):
            insert_sync(program)        # level-2 text: the assembler would insert them
        return program

    def kind_of(self, f) -> str:
        """The kind the tiles' buffers imply, which a declared ``pto.kernel_kind`` must
        match."""
        locs = {self.tiles[n].loc for n in f.tiles}
        self.at = f.header
        if locs & set(_CUBE) and "vec" in locs:
            raise self.error(f"one function uses {sorted(locs)} buffers: PyPTO runs a kernel "
                             "on one kind of core (a mixed kernel as @<name>_cube and "
                             "@<name>_vector functions)")
        inferred = "cube" if locs & set(_CUBE) else "vector"
        declared = KERNEL_KIND.search(f.header[1] or "")
        if declared and locs and declared.group(1) != inferred:
            raise self.error(f"a {declared.group(1)} kernel whose tiles live in "
                             f"{sorted(locs)}")
        return declared.group(1) if declared and not locs else inferred

    def params(self, args: list[str], scope, shared) -> list:
        """Parameters in call order: pointers become tensors (their shape comes from their
        ``make_tensor_view``), the rest scalars (``index`` as int64)."""
        params = []
        for arg in args:
            name, _, ty = (s.strip() for s in arg.partition(":"))
            ptr = re.fullmatch(r"!pto\.ptr<(\w+)>", ty)
            p = (TensorArg(name[1:], self.dtype(ptr.group(1)), (), ()) if ptr else
                 Scalar(name[1:], self.dtype(ty)))
            scope.values[name] = p
            params.append(p)
        self.pointers = [p for p in params if isinstance(p, TensorArg)]
        return params

    def prologue(self, scope) -> None:
        """No prologue: views, constants and tiles are statements wherever they stand."""

    def function(self, shared):
        f = super().function(shared)
        for p in self.pointers:
            if not p.dims:
                self.at = f.header
                raise self.error(f"pointer parameter %{p.name} has no pto.make_tensor_view")
        return f

    def printer_form(self, op, results, rest, line, scope, out) -> bool:
        return False

    def unreadable(self, line: str) -> PtoParseError:
        if re.match(rf"{_N}:\d+ = ", line):
            return self.error("a multi-result value (%x:N = ...) is not read; name each "
                              "result")
        return super().unreadable(line)

    def statement(self, op: str, results: list, rest: str, scope, out: list) -> None:
        if rest.rstrip().endswith("{") and not op.startswith("scf."):
            raise self.error(f"{op} opens a region: PyPTO reads scf.for/if/while regions only")
        handler = _STATEMENTS.get(op)
        if handler is None and op.startswith("pto.") and not results and \
                op[len("pto."):] not in SYNC_OPS:
            handler = _PtoasParser.s_tile
        if handler is not None:
            return handler(self, op, results, rest, scope, out)
        super().statement(op, results, rest, scope, out)
        if op in _FOLD and len(results) == 1:
            a, b = (n.strip() for n in rest.split(":", 1)[0].split(","))
            if a in self.known and b in self.known:
                self.known[results[0]] = _FOLD[op](self.known[a], self.known[b])

    def dtype(self, text: str) -> dt.dtype:
        return dt.int64 if text == "index" else super().dtype(text)

    def define(self, name: str, dtype: dt.dtype, scope) -> Scalar:
        s = Scalar(_renamed(name), dtype)
        scope.values[name] = s
        return s

    def number(self, name: str, what: str) -> int:
        if name not in self.known:
            raise self.error(f"{what} must be a constant; {name} is known only at run time")
        return self.known[name]

    # -- statements ---------------------------------------------------------------------------
    def s_constant(self, op, results, rest, scope, out):
        if rest.strip() in ("true", "false"):          # i1, its type implied
            rest = f"{rest.strip()} : i1"
        value, _, ty = rest.strip().rpartition(" : ")
        if ty == "i1" and value in ("true", "false"):
            rest = f" {int(value == 'true')} : {ty}"
        read_scalars.s_constant(self, op, results, rest, scope, out)
        self.known[results[0]] = out[-1].attrs["value"]

    def s_index_cast(self, op, results, rest, scope, out):
        src, a, b = self.match(_INDEX_CAST, rest, op).groups()
        value = self.value(src, scope)
        if src in self.known:
            self.known[results[0]] = self.known[src]
        if self.dtype(a) == self.dtype(b):
            scope.aliases[results[0]] = src        # index and i64 are one int64
            return
        res = self.define(self.one(results), self.dtype(b), scope)
        out.append(Inst("arith.cast", [value], [res], {"dtype": res.dtype}))

    def s_tensor_view(self, op, results, rest, scope, out):
        ptr, shape, strides, attrs = self.match(_VIEW, rest, op).groups()
        tensor = self.value(ptr, scope)
        if not isinstance(tensor, TensorArg):
            raise self.error(f"{ptr} is not a pointer parameter")
        if attrs and not re.fullmatch(r"\s*layout = #pto\.layout<nd>\s*", attrs):
            raise self.error(f"tensor view attributes {{{attrs}}}: PyPTO reads row-major "
                             "(#pto.layout<nd>) tensors only")
        dims = [self.number(e, "a tensor view's shape") for e in split_list(shape)]
        steps = [self.number(e, "a tensor view's strides") for e in split_list(strides)]
        if len(dims) > 2:
            raise self.error(f"a rank-{len(dims)} tensor view: PyPTO's loads and stores "
                             "move 2-D windows")
        if tensor.dims and (tuple(dims), tuple(steps)) != (tensor.dims, tensor.strides):
            raise self.error(f"%{tensor.name} is viewed with two shapes; a PyPTO tensor "
                             "parameter has one")
        tensor.dims, tensor.strides = tuple(dims), tuple(steps)
        scope.tensor_views[self.one(results)] = tensor

    def s_partition(self, op, results, rest, scope, out):
        tv, offsets, sizes = self.match(PARTITION, rest, op).groups()
        if tv not in scope.tensor_views:
            raise self.error(f"pto.partition_view of {tv}, which is not a "
                             "pto.make_tensor_view of a parameter")
        tensor = scope.tensor_views[tv]
        offsets, sizes = split_list(offsets), split_list(sizes)
        if len(offsets) != tensor.rank or len(sizes) != tensor.rank:
            raise self.error(f"a partition of a rank-{tensor.rank} view needs "
                             f"{tensor.rank} offsets and sizes")
        name = self.one(results)
        scope.partitions[name] = (tensor, [self.value(o, scope) for o in offsets])
        self.sizes[name] = [int(s) if _INT_TEXT.fullmatch(s) else
                            self.number(s, "a partition's sizes") for s in sizes]

    def s_view_dim(self, op, results, rest, scope, out):
        tv, axis = self.match(_DIM, rest, op).groups()
        if tv not in scope.tensor_views:
            raise self.error(f"{tv} is not a tensor view")
        value = scope.tensor_views[tv].dims[self.number(axis, "the axis")]
        self.s_constant("arith.constant", results, f" {value} : index", scope, out)

    def s_alloc(self, op, results, rest, scope, out):
        addr, vrow, _, type_text = self.match(_ALLOC, rest, op).groups()
        if vrow is not None:
            raise self.error("a tile with a run-time valid region (valid_row/valid_col "
                             "operands): PyPTO's tiles take theirs from the window they load")
        at = None if addr is None else self.number(addr, "a tile address")
        self.new_tile(self.one(results), at, type_text, scope)

    def tile(self, name: str, addr, text: str) -> Tile:
        """A ``Tile`` of ``!pto.tile_buf<...>`` whose layout is the one PyPTO gives its
        location (or the column-major (M, 1) tile of row reductions)."""
        fields = _fields(text)
        loc = fields.get("loc")
        if loc not in LAYOUTS:
            raise self.error(f"a tile in loc={loc}: PyPTO's tiles live in "
                             f"{', '.join(LAYOUTS)}")
        if "?" in (fields.get("v_row"), fields.get("v_col")):
            raise self.error("a tile with a run-time valid region (v_row/v_col = ?)")
        try:
            tile = Tile(_renamed(name), loc, self.dtype(fields["dtype"]), int(fields["v_row"]),
                        int(fields["v_col"]), addr if addr is not None else -1,
                        int(fields["v_row"]), int(fields["v_col"]), int(fields.get("pad", 0)))
        except (KeyError, ValueError) as e:
            raise self.error(f"incomplete tile type ({e})") from None
        printed = tile.type_text()
        if loc in _REORDERABLE:       # the same matrix in another fractal order: PyPTO's
            for key in ("blayout", "slayout"):      # cube tiles are dense inside, and print
                fields[key] = _fields(printed)[key]  # as PyPTO lays them out
        if _fields(printed) != fields:          # the same fields, in any order
            raise self.error(f"tile type {text} is not one PyPTO models (a tile in {loc} is "
                             f"{printed})")
        return tile

    def s_if(self, op, results, rest, scope, out):
        """``scf.if`` whose results may be tiles: each tile result is a tile of its own that
        both branches copy (``tmov``) the tile they yield into; scalars flow as in PyPTO's
        ``If``. (PyPTO's own tiles merge through one buffer and never need the copy.)"""
        cond_name, types_text = self.match(IF_HEAD, rest, "scf.if").groups()
        cond = self.value(cond_name, scope)
        types = split_list(types_text or "")
        if len(types) != len(results):
            raise self.error("scf.if: results and result types differ in number")
        tiles = {}
        if any(ty.startswith("!pto.tensor_view") for ty in types):
            raise self.error("an scf.if yielding tensor views: PyPTO's tensors are its "
                             "parameters, viewed by make_tensor_view")
        for k, (name, ty) in enumerate(zip(results, types)):
            if ty.startswith("!pto.tile_buf<"):
                tiles[k] = self.new_tile(name, None, ty, scope)
        then_body, then_term, closer = self.block(scope)
        else_body, else_term = [], None
        if closer == "} else {":
            else_body, else_term, closer = self.block(scope)
        if closer != "}":
            raise self.error("scf.if regions are closed by } else { and }")
        branches = []
        for body, term in ((then_body, then_term), (else_body, else_term)):
            yields = self.yields(term, "scf.if")
            if tiles and len(yields) != len(results):
                raise self.error("scf.if: each branch yields every result")
            for k, tile in tiles.items():
                body.append(Inst("tmov", [yields[k]], [tile]))
            branches.append([y for k, y in enumerate(yields) if k not in tiles])
        scalars = [self.define(r, self.dtype(t), scope)
                   for k, (r, t) in enumerate(zip(results, types)) if k not in tiles]
        out.append(If(cond, then_body, else_body, scalars, *branches))

    def new_tile(self, name: str, addr, type_text: str, scope) -> Tile:
        tile = self.tile(name, addr, type_text)
        self.tiles[name] = tile
        scope.values[name] = tile
        scope.tiles.append(name)
        return tile

    def s_reshape(self, op, results, rest, scope, out):
        """A view of the source's bytes with another shape: the same address, so the copy
        the ``Program`` makes of it (``treshape``) moves nothing."""
        src, _, type_text = self.match(RESHAPE, rest, op).groups()
        source = self.value(src, scope)
        name = self.one(results)
        tile = self.new_tile(name, source.addr if source.addr >= 0 else None, type_text, scope)
        self.views[tile.name] = source
        out.append(Inst("treshape", [source], [tile]))

    def s_tile(self, op, results, rest, scope, out):
        ins, outs, _, _ = self.operands(rest, op)
        name = op[len("pto."):]
        if name in ("tload", "tstore"):
            views, tiles = (ins, outs) if name == "tload" else (outs, ins)
            tile = self.value(tiles[0], scope) if len(tiles) == 1 else None
            sizes = self.sizes.get(views[0]) if len(views) == 1 else None
            if isinstance(tile, Tile) and sizes is not None:
                shape = [tile.v_row, tile.v_col][-len(sizes):]
                if len(sizes) == 2 and sizes != shape or len(sizes) == 1 and (
                        tile.v_row != 1 or sizes != shape):
                    raise self.error(f"{op} of a {sizes} partition into a tile whose valid "
                                     f"shape is {[tile.v_row, tile.v_col]}: PyPTO moves "
                                     "the tile's valid shape")
        if name == "textract" and len(ins) == 3:
            src, dst = self.value(ins[0], scope), self.value(outs[0], scope)
            starts = tuple(self.number(n, "textract's offsets") for n in ins[1:])
            out.append(Inst("textract", [src], [dst], {"starts": starts}))
            return
        read_tiles.s_tile(self, op, results, rest, scope, out)
        inst = out[-1]
        if name == "tconcat":
            inst.attrs["axis"] = 1              # pto-isa's TCONCAT joins columns
        if name == "tcvt" and inst.ins[0].dtype.is_floating and inst.outs[0].dtype.is_floating:
            # between floats the chip's mode is the precision rounding, which pto-isa's
            # TCVT does not apply (a static_cast); PyPTO's rmode rounds to an integral value
            inst.attrs.pop("rmode", None)

    def s_sync(self, op, results, rest, scope, out):
        if op == "pto.barrier":
            pipe = self.match(_BARRIER, rest, op).group(1)
            out.append(Inst("barrier", [], [], {"pipe": pipe}))
            return
        read_tiles.s_sync(self, op, results, rest, scope, out)


_INT_TEXT = re.compile(r"\d+")


def _fields(type_text: str) -> dict:
    """``!pto.tile_buf<k=v, ...>`` as {k: v}."""
    items = split_list(type_text[len("!pto.tile_buf<"):-1])
    return {k.strip(): v.strip() for k, _, v in (item.partition("=") for item in items)}


def _renamed(name: str) -> str:
    """``%x`` → ``_x``: no printer-made name starts with an underscore."""
    return "_" + name.lstrip("%")


_STATEMENTS = {
    "arith.constant": _PtoasParser.s_constant,
    "arith.index_cast": _PtoasParser.s_index_cast,
    "arith.index_castui": _PtoasParser.s_index_cast,
    "pto.make_tensor_view": _PtoasParser.s_tensor_view,
    "pto.partition_view": _PtoasParser.s_partition,
    "pto.get_tensor_view_dim": _PtoasParser.s_view_dim,
    "pto.alloc_tile": _PtoasParser.s_alloc,
    "pto.treshape": _PtoasParser.s_reshape,
    "pto.barrier": _PtoasParser.s_sync,
    "scf.if": _PtoasParser.s_if,
}
