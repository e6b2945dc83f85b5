"""Read ``.pto`` text back into a PTO ``Program``: the inverse of ``printer.print_program``.

Why: a printed kernel can be edited by hand and compiled again (``PYPTO_OVERRIDE_DIR``), and
print → parse → print being the identity is the test that the text says everything the backend
needs. The parser is line based, as the printer is: one statement per line, regions closed by
``}``, statements dispatched on their operation name through one table (``_STATEMENTS``; the
``arith`` handlers are ``read_scalars``, the tile, window and flag ones ``read_tiles``; this
module reads the module, its functions' prologues and regions). It undoes the printer's
spellings (``spelling``):

* constants the printer hoists to the top of a function (``%c16_i64``, named after value and
  type) fold back into the ints and attribute values they came from; the program's own
  constants are ordinary ``arith.constant`` instructions with their own names;
* ``pto.make_tensor_view`` gives each tensor parameter its dims and strides (a hoisted constant
  where specialised, the extra ``%x_d0`` / ``%x_s0`` argument where not); a 1-D tensor is
  printed as a ``1 x n`` view with stride 0, and its partition views get a leading 0 offset;
* ``pto.partition_view`` + ``pto.tload``/``pto.tstore`` become one instruction whose operands
  are the tensor and the offsets; ``pto.texpands`` of a hoisted constant is the ``value`` form;
* ``arith.addi <extent>, %c0_i64`` is ``tensor.dim``; ``floordivsi``/``muli``/``subi`` through
  the printer's ``%q``/``%m`` temporaries is Python's ``%``; the default ``rmode`` that the
  printer writes on a float → int ``tcvt`` is dropped again (an explicit ``trunc`` converts
  the same way; every other explicit mode is kept).

What the text does not say cannot come back: host hints (attributes starting with ``_``, the
fusion groups) are not printed, so a parsed program runs unfused; ``tensor.dim`` of a
specialised extent names the first tensor with that extent; an explicit "trunc" from float to
int reads back as the default conversion, which converts the same.
"""
from __future__ import annotations

import dataclasses
import math
import re

from ...language import dtypes as dt
from ...target import TARGETS
from . import read_scalars, read_tiles
from .read_text import statements
from .isa import SYNC_OPS, tile_extent
from .program import (WORKSPACE, For, If, Inst, Program, Scalar, TensorArg, Tile,
                      While, row_tile, walk_insts)
from .spelling import (ALLOC_TILE, BLOCK_ARGS, CASTS, CLOSERS, CONDITION, CONSTANT, DTYPES,
                       EXECUTED, EXECUTED_LINE, EXECUTED_TYPE, FFTS_PARAM, FOR_HEAD,
                       FUNC_HEAD, GRID_PARAMS, HOISTED_NONFINITE, IF_HEAD, INDEX_CAST,
                       KERNEL_KIND, MODULE_HEAD, RESHAPE, STATEMENT, TENSOR_VIEW, VIEW_LAYOUTS,
                       WHILE_HEAD, WORKSPACE_BLOCK, closing_bracket, constant_lines,
                       constant_name, constant_value, derived_base, gm_type,
                       nonfinite_constant, split_list, unspell_attr)
from .subblocks import SUBBLOCK


class PtoParseError(ValueError):
    """Malformed ``.pto`` text; ``line`` is 1-based and ``text`` is that line."""

    def __init__(self, message: str, line: int | None = None, text: str = ""):
        self.message, self.line, self.text = message, line, text
        where = f"line {line}: " if line else ""
        super().__init__(f"{where}{message}" + (f"\n    {text}" if text else ""))


def parse_program(text: str, target=None) -> Program:
    """The ``Program`` that ``print_program`` printed as ``text``. ``target`` defaults to the
    chip named by the module's ``"pto.device-spec"``."""
    return Parser(text).module(target)


def signature(p) -> tuple:
    """A kernel parameter as the launch sees it (a mixed kernel's functions and an override
    of a compiled kernel must agree on these)."""
    if isinstance(p, TensorArg):      # as the chip sees it: a bool tensor is bytes
        return ("tensor", p.name, gm_type(p.dtype), tuple(p.dims), tuple(p.strides))
    return ("scalar", p.name, p.dtype.name)


# -- per-function state ------------------------------------------------------------------------

class _Scope:
    """What the names of one ``func.func`` stand for."""

    def __init__(self):
        self.values: dict[str, object] = {}     # %name → Scalar | Tile | TensorArg
        self.consts: dict[str, tuple] = {}      # hoisted %cN_ty → (value, type)
        self.views: dict[str, tuple] = {}       # %x (pointer) → (%x_tv, shape, strides)
        self.tensor_views: dict[str, TensorArg] = {}
        self.partitions: dict[str, tuple] = {}  # %pvN → (tensor, offsets, sizes)
        self.extents: dict[str, tuple] = {}     # %x_d0 → (tensor, axis)
        self.tiles: list[str] = []              # alloc_tile names in order
        self.aliases: dict[str, str] = {}       # %<base>.<tag> → the name it stands for
        self.pads: dict[str, int] = {}          # a window tile's pad field
        self.alias_addr: dict[str, int] = {}    # a view's address
        self.row_addr: dict[str, str] = {}      # %<tile>.ra<n> (a run-time row's address)
        self.alias_row: dict[str, str] = {}     # a view at such an address -> its row
        self.derived: dict[str, list] = {}      # base → printer-derived lines (macros)
        self.reshape_views: set[str] = set()    # treshape results the printer copies by tmov


@dataclasses.dataclass
class _Func:
    name: str
    kind: str
    params: list
    body: list
    tiles: list
    header: tuple            # (line number, text) for errors about the function as a whole


class Parser:
    def __init__(self, text: str):
        self.lines = statements(text)
        self.i = 0
        self.at = (None, "")
        self.tiles: dict[str, Tile] = {}

    # -- cursor ---------------------------------------------------------------------------
    def error(self, message: str) -> PtoParseError:
        return PtoParseError(message, *self.at)

    def peek(self) -> str | None:
        return self.lines[self.i][1] if self.i < len(self.lines) else None

    def next(self, missing: str = "unexpected end of the text") -> str:
        if self.i >= len(self.lines):
            self.at = (self.lines[-1][0] if self.lines else None, "")
            raise self.error(missing)
        self.at = self.lines[self.i]
        self.i += 1
        return self.at[1]

    def match(self, pattern: re.Pattern, text: str, what: str) -> re.Match:
        m = pattern.fullmatch(text)
        if m is None:
            raise self.error(f"malformed {what}")
        return m

    # -- module and functions -------------------------------------------------------------
    def module(self, target) -> Program:
        m = self.match(MODULE_HEAD, self.next("empty text: expected a module"), "module header")
        target = self.target(m.group(1), target)
        funcs = []
        while self.peek() != "}":
            if self.peek() is None:
                self.next("the module is not closed by }")
            funcs.append(self.function(funcs[0].params if funcs else None))
        self.next()
        if self.peek() is not None:
            self.next()
            raise self.error("text after the end of the module")
        return self.program(funcs, target)

    def target(self, spec: str | None, target):
        by_spec = {t.device_spec: t for t in TARGETS.values()}
        if spec is None:
            if target is None:
                raise self.error('no "pto.device-spec" and no target given')
            return target
        if spec not in by_spec:
            raise self.error(f"unknown pto.device-spec {spec!r}; known: {', '.join(by_spec)}")
        if target is not None and target.device_spec != spec:
            raise self.error(f"the text is for {spec}, not for the target {target.name}")
        return target or by_spec[spec]

    def function(self, shared) -> _Func:
        m = self.match(FUNC_HEAD, self.next(), "func.func header")
        name, args, attrs = m.groups()
        kind, header = KERNEL_KIND.search(attrs or ""), self.at
        self.kind = kind.group(1) if kind else "vector"
        scope = _Scope()
        self.prologue(scope)
        after_prologue, self.at = self.at, header      # errors in parameters: the header's
        params = self.params(split_list(args), scope, shared)
        self.at = after_prologue
        body, term, closer = self.block(scope)
        if closer != "return" or term is not None:
            raise self.error("a function body ends with return")
        if self.next(f"func.func @{name} is not closed by }}") != "}":
            raise self.error("expected } after return")
        return _Func(name, kind.group(1) if kind else "vector", params, body, scope.tiles,
                     header)

    def program(self, funcs: list[_Func], target) -> Program:
        order: list[str] = []
        for f in funcs:                  # one tile list whose order fits every function's
            at = 0
            for name in f.tiles:
                if name in order:
                    at = order.index(name) + 1
                else:
                    order.insert(at, name)
                    at += 1
        tiles = [self.tiles[n] for n in order]
        if not read_tiles.restore_masks([i for f in funcs for i in walk_insts(f.body)
                                         if isinstance(i, Inst)]):
            raise PtoParseError("the widths of the masks (ui8 tiles) written by pto.tcmp and "
                                "the mask instructions do not agree")
        usage = {space: 0 for space in target.buffers}
        for t in tiles:
            usage[t.loc] = max(usage.get(t.loc, 0), tile_extent(t, target)[2])
        if len(funcs) == 1:
            f = funcs[0]
            return Program(f.name, f.kind, f.params, tiles, f.body, target, usage)
        parts = {f.kind: f for f in funcs}
        self.at = funcs[-1].header
        if len(funcs) != 2 or set(parts) != {"cube", "vector"}:
            raise self.error("a module holds one kernel function, or a cube and a vector "
                             f"part; found {[(f.name, f.kind) for f in funcs]}")
        name = parts["cube"].name.removesuffix("_cube")
        if parts["vector"].name != f"{name}_vector" or parts["cube"].name == name:
            raise self.error(f"the parts of a mixed kernel are @<name>_cube and "
                             f"@<name>_vector; found {[f.name for f in funcs]}")
        # without the sub-block split, both AIVs run the vector function (passes/split_rows.py)
        return Program(name, "mixed", parts["cube"].params, tiles, parts["cube"].body, target,
                       usage, vector_body=parts["vector"].body,
                       vector_cores=1 if getattr(self, "one_vector_core", False) else 2)

    # -- prologue: hoisted constants, tensor views, tiles ---------------------------------------
    def prologue(self, scope: _Scope) -> None:
        while self.peek() is not None:
            line = self.peek()
            if line == EXECUTED_LINE:          # TMRGSORT's counts (printer.executed)
                self.next()
                scope.consts[EXECUTED] = (0, EXECUTED_TYPE)
                continue
            if WORKSPACE_BLOCK.fullmatch(line):    # the workspace's block plane (workspace_view)
                self.next()
                continue
            const = CONSTANT.fullmatch(line)
            value = constant_value(*const.group(2, 3)) if const else None
            if const and const.group(1) in (constant_name(value, const.group(3)),
                                            constant_name(value, "u" + const.group(3))):
                self.next()
                ty = const.group(1).rsplit("_", 1)[1]      # ui8 constants are i8 bits
                scope.consts[const.group(1)] = (value, ty)
            elif HOISTED_NONFINITE.fullmatch(line):
                base = HOISTED_NONFINITE.fullmatch(line).group(1)
                lines = [self.next() for _ in constant_lines(base, math.inf, "f32")]
                found = nonfinite_constant(base, lines)
                if found is None:
                    raise self.error(f"the lines deriving {base} are not a non-finite constant "
                                     "as the printer writes it")
                scope.consts[base] = found
            elif INDEX_CAST.fullmatch(line):
                self.next()
                res, src = INDEX_CAST.fullmatch(line).groups()
                scope.aliases[res] = src
            elif TENSOR_VIEW.fullmatch(line):
                self.next()
                tv, ptr, shape, strides, layout = TENSOR_VIEW.fullmatch(line).groups()
                kind = "NC1HWC0" if layout == "nd" and len(split_list(shape)) == 5 else \
                    VIEW_LAYOUTS[layout]
                scope.views[ptr] = (tv, [scope.aliases.get(e, e) for e in split_list(shape)],
                                    [scope.aliases.get(e, e) for e in split_list(strides)], kind)
            elif " = pto.alloc_tile" in line:
                self.next()
                name, addr, _, _, type_text = self.match(ALLOC_TILE, line,
                                                         "pto.alloc_tile").groups()
                if "." in name:
                    self.alias_tile(name, type_text, scope, addr)
                else:
                    self.alloc(scope, name, addr, type_text)
            else:
                return

    def alloc(self, scope: _Scope, name: str, addr: str | None, type_text: str) -> None:
        if addr is None or addr not in scope.consts:
            raise self.error("pto.alloc_tile needs addr = <a constant>")
        tile = read_tiles.tile_type(self, name[1:], scope.consts[addr][0], type_text)
        old = self.tiles.get(name)
        if old is not None and (old.type_text(), old.addr) != (tile.type_text(), tile.addr):
            raise self.error(f"tile {name} is declared twice with different types")
        self.tiles.setdefault(name, tile)
        scope.values[name] = self.tiles[name]
        scope.tiles.append(name)

    def alias_tile(self, name: str, type_text: str, scope: _Scope, addr=None) -> None:
        """Another view of a declared tile's bytes (an edge window's clipped tile, the row
        view of an (M, 1) tile): it stands for the tile it is named after."""
        base = derived_base(name)
        if base not in scope.values or not isinstance(scope.values[base], Tile):
            raise self.error(f"{name} is not named after a declared tile")
        scope.aliases[name] = base
        if addr in scope.row_addr:
            scope.alias_row[name] = scope.row_addr[addr]
        elif addr is not None:
            scope.alias_addr[name] = scope.consts[addr][0]
        pad = re.search(r"pad=(\d+)>", type_text)
        scope.pads[name] = int(pad.group(1)) if pad else 0

    def dtype(self, text: str) -> dt.dtype:
        if text not in DTYPES:
            raise self.error(f"unknown element type {text!r}")
        return DTYPES[text]

    def params(self, args: list[str], scope: _Scope, shared) -> list:
        """Kernel parameters in call order; the i64 extents and strides that tensor views
        name are not parameters of their own."""
        extents = {e for _, shape, strides, _ in scope.views.values() for e in shape + strides}
        params = []
        for arg in args:
            name, _, ty = (s.strip() for s in arg.partition(":"))
            ptr = re.fullmatch(r"!pto\.ptr<(\w+)>", ty)
            if name[1:] == FFTS_PARAM:          # either PTOAS's type (dialect.py)
                continue
            if ptr:
                params.append(self.tensor(name, self.dtype(ptr.group(1)), scope))
            elif name[1:] in GRID_PARAMS:
                scope.values[name] = Scalar(name[1:], dt.int64)
            elif name not in extents:
                params.append(Scalar(name[1:], self.dtype(ty)))
        if shared is not None:
            if [signature(p) for p in params] != [signature(p) for p in shared]:
                raise self.error("the functions of a mixed kernel must take the same parameters")
            params = list(shared)
        for p in params:
            scope.values["%" + p.name] = p
            if isinstance(p, TensorArg):
                scope.tensor_views[scope.views["%" + p.name][0]] = p
        for p in scope.tensor_views.values():
            self.extents(p, scope)
        return params

    def tensor(self, name: str, dtype: dt.dtype, scope: _Scope) -> TensorArg:
        if name not in scope.views:
            raise self.error(f"tensor parameter {name} has no pto.make_tensor_view")
        _, shape, strides, layout = scope.views[name]
        workspace = re.fullmatch(rf"{WORKSPACE}\d*", name[1:]) is not None   # one per slot
        if workspace and len(shape) == 3:      # (blocks, rows, cols): a slot per block
            shape, strides = shape[1:], strides[1:]
        dims = [self.static(e, scope) for e in shape]
        steps = [self.static(e, scope) for e in strides]
        if len(dims) == 2 and dims[0] == 1 and steps[0] == 0:     # a 1-D tensor as 1 x n
            dims, steps = dims[1:], steps[1:]
        logical = ()
        if layout == "NZ":                       # printed with the batch axis of 1 in front
            dims, steps = dims[1:], steps[1:]
            logical = (dims[1] * dims[2], dims[0] * dims[3])
        elif layout == "NC1HWC0":                # W is read from the loads (s_partition)
            logical = (dims[0], dims[1] * dims[4], 1, dims[3])
        if layout != "ND" and (len(dims) != (4 if layout == "NZ" else 5) or None in dims):
            raise self.error(f"the {layout} tensor {name} needs a static 5-D view")
        return TensorArg(name[1:], dtype, tuple(dims), tuple(steps), workspace=workspace,
                         layout=layout, logical=logical)

    def extents(self, tensor: TensorArg, scope: _Scope) -> None:
        """Record which argument carries which dynamic extent (for ``tensor.dim``)."""
        _, shape, _, _ = scope.views["%" + tensor.name]
        for axis, e in enumerate(shape[len(shape) - tensor.rank:]):
            if e not in scope.consts:
                scope.extents[e] = (tensor, axis)

    @staticmethod
    def static(entry: str, scope: _Scope):
        return scope.consts[entry][0] if entry in scope.consts else None

    # -- regions --------------------------------------------------------------------------------
    def block(self, scope: _Scope) -> tuple[list, tuple | None, str]:
        """Statements up to a closing line; returns them, the terminator (``scf.yield`` or
        ``scf.condition``) if any, and the closing line."""
        insts, term = [], None
        while True:
            line = self.next("a region is not closed by }")
            if line in CLOSERS:
                return insts, term, line
            if term is not None:
                raise self.error("nothing may follow scf.yield or scf.condition in a region")
            m = STATEMENT.fullmatch(line)
            if m is None:
                raise self.unreadable(line)
            results = split_list(m.group("res") or "")
            op, rest = m.group("op"), m.group("rest")
            if op in ("scf.yield", "scf.condition"):
                term = (op, self.terminator(op, rest, scope))
                continue
            if not self.printer_form(op, results, rest, line, scope, insts):
                self.statement(op, results, rest, scope, insts)

    def unreadable(self, line: str) -> PtoParseError:
        return self.error("cannot read this line")

    def printer_form(self, op, results, rest, line, scope: _Scope, out: list) -> bool:
        """Is this line one of the printer's own spellings (derived names, macros), read
        here? (``reader_ptoas`` reads text no printer wrote and has none.)"""
        if results == [f"%{SUBBLOCK}"] and op == "pto.get_subblock_idx":
            return True                         # the two vector cores' split (subblocks.py)
        if results and all("." in r for r in results):
            self.derived(op, results, rest, line, scope, out)
            return True
        if op == "pto.tmov" and rest.strip()[4:].split(" ", 1)[0] in scope.reshape_views:
            return True                         # the copy half of a treshape (printer)
        if len(results) == 1 and results[0] in scope.derived and op != "pto.partition_view":
            read_scalars.macro_end(self, results[0], line, scope, out)
            return True
        return False

    def derived(self, op, results, rest, line, scope: _Scope, out: list) -> None:
        """A statement whose results are printer-derived names (``%<base>.<tag>``)."""
        name = results[0]
        if op == "arith.index_cast":
            scope.aliases[name] = self.match(INDEX_CAST, line, op).group(2)
        elif op == "arith.muli" and re.fullmatch(r"ra\d+\.o", name.split(".", 1)[1]):
            # a run-time row's address: row x pitch, then + the tile's (printer.address)
            scope.row_addr[name[:-2]] = split_list(rest.split(":", 1)[0])[0]
        elif op == "arith.addi" and name in scope.row_addr:
            pass
        elif op == "arith.bitcast" and name.split(".", 1)[1].startswith("b"):
            scope.aliases[name] = derived_base(name)      # a fill's bits (print_views.fill_scalar)
        elif op == "pto.alloc_tile":
            m = self.match(ALLOC_TILE, line, op)
            self.alias_tile(name, m.group(5), scope, m.group(2))
        elif op == "pto.treshape":
            scope.reshape_views.add(name)
            src = self.match(RESHAPE, rest, op).group(1)
            out.append(Inst("treshape", [self.value(src, scope)],
                            [self.value(derived_base(name), scope)]))
        else:
            scope.derived.setdefault(derived_base(name), []).append(line)

    def statement(self, op: str, results: list, rest: str, scope: _Scope, out: list) -> None:
        handler = _STATEMENTS.get(op)
        if handler is None:
            if op.startswith("arith.") and len(results) == 1:
                handler = read_scalars.s_binary
            elif op.startswith("pto.") and op[4:] in SYNC_OPS and not results:
                handler = read_tiles.s_sync
            elif op.startswith("pto.") and not results:
                handler = read_tiles.s_tile
            else:
                raise self.error(f"unknown operation {op}")
        handler(self, op, results, rest, scope, out)

    def terminator(self, op: str, rest: str, scope: _Scope):
        if op == "scf.yield":
            return [self.value(n, scope) for n in split_list(rest.split(":", 1)[0])]
        m = self.match(CONDITION, rest, "scf.condition")
        forwarded = [self.value(n, scope) for n in split_list(m.group(2).split(":", 1)[0])]
        return self.value(m.group(1), scope), forwarded

    def value(self, name: str, scope: _Scope):
        while name in scope.aliases:
            name = scope.aliases[name]
        if name in scope.values:
            return scope.values[name]
        if name in scope.consts or name in scope.partitions or name in scope.extents:
            raise self.error(f"{name} cannot be used here")
        raise self.error(f"undefined value {name}")

    def moved_tile(self, name: str, scope: _Scope) -> Tile:
        """The tile a tload/tstore moves: a declared tile, or the run-time row of one that a
        view at a row's address names (``Tile.row_of``)."""
        tile = self.value(name, scope)
        if name in scope.alias_row:
            return row_tile(tile, self.value(scope.alias_row[name], scope))
        return tile

    def define(self, name: str, dtype: dt.dtype, scope: _Scope) -> Scalar:
        s = Scalar(name[1:], dtype)
        scope.values[name] = s
        return s

    def yields(self, term, what: str) -> list:
        if term is not None and term[0] != "scf.yield":
            raise self.error(f"{what} ends with scf.yield, not {term[0]}")
        return term[1] if term else []

    # -- control flow ---------------------------------------------------------------------------
    def s_for(self, op, results, rest, scope, out):
        m = self.match(FOR_HEAD, rest, "scf.for")
        iv_name, lb, ub, step, pairs, types, iv_type = m.groups()
        bounds = [self.value(n, scope) for n in (lb, ub, step)]
        pairs, types = split_list(pairs or ""), [self.dtype(t) for t in split_list(types or "")]
        if len(pairs) != len(types) or len(results) != len(pairs):
            raise self.error("scf.for: iter_args, their types and the results differ in number")
        inits = [self.value(p.partition("=")[2].strip(), scope) for p in pairs]
        if iv_name.endswith(".ix") and iv_type is None:      # printer.loop's index form
            base = iv_name[:-3]
            iv = self.define(base, dt.int64, scope)
            scope.values[iv_name] = iv
            cast = f"{base} = arith.index_cast {iv_name} : index to i64"
            if self.next("scf.for's body is missing") != cast:
                raise self.error(f"an index loop over {iv_name} begins with {cast}")
        else:
            iv = self.define(iv_name, self.dtype(iv_type or "index"), scope)
        iter_args = [self.define(p.partition("=")[0].strip(), d, scope)
                     for p, d in zip(pairs, types)]
        body, term, closer = self.block(scope)
        if closer != "}":
            raise self.error("scf.for body is closed by }")
        yields = self.yields(term, "scf.for")
        res = [self.define(r, d, scope) for r, d in zip(results, types)]
        out.append(For(iv, *bounds, inits, iter_args, res, body, yields))

    def s_if(self, op, results, rest, scope, out):
        m = self.match(IF_HEAD, rest, "scf.if")
        if m.group(1) == f"%{SUBBLOCK}.p":      # sub-block 0's part; 1's skeleton is derived
            self.one_vector_core = True
            part, _, closer = self.block(scope)
            if closer != "} else {" or self.block(scope)[2] != "}":
                raise self.error("the vector cores' split is scf.if ... } else { ... }")
            out += part
            return
        cond = self.value(m.group(1), scope)
        types = [self.dtype(t) for t in split_list(m.group(2) or "")]
        if len(types) != len(results):
            raise self.error("scf.if: results and result types differ in number")
        then_body, then_term, closer = self.block(scope)
        else_body, else_term = [], None
        if closer == "} else {":
            else_body, else_term, closer = self.block(scope)
        if closer != "}":
            raise self.error("scf.if regions are closed by } else { and }")
        res = [self.define(r, d, scope) for r, d in zip(results, types)]
        out.append(If(cond, then_body, else_body, res, self.yields(then_term, "scf.if"),
                      self.yields(else_term, "scf.if")))

    def s_while(self, op, results, rest, scope, out):
        m = self.match(WHILE_HEAD, rest, "scf.while")
        pairs, types = split_list(m.group(1)), [self.dtype(t) for t in split_list(m.group(2))]
        if len(pairs) != len(types):
            raise self.error("scf.while: arguments and their types differ in number")
        inits = [self.value(p.partition("=")[2].strip(), scope) for p in pairs]
        before_args = [self.define(p.partition("=")[0].strip(), d, scope)
                       for p, d in zip(pairs, types)]
        before, term, closer = self.block(scope)
        if closer != "} do {" or term is None or term[0] != "scf.condition":
            raise self.error("the before region of scf.while ends with scf.condition and } do {")
        cond, forwarded = term[1]
        bb = self.match(BLOCK_ARGS, self.next(), "^bb0(...) block header")
        after_args = []
        for arg in split_list(bb.group(1)):
            name, _, ty = (s.strip() for s in arg.partition(":"))
            after_args.append(self.define(name, self.dtype(ty), scope))
        after, after_term, closer = self.block(scope)
        if closer != "}":
            raise self.error("scf.while's after region is closed by }")
        if len(results) != len(forwarded):
            raise self.error("scf.while: results and forwarded values differ in number")
        res = [self.define(r, v.dtype, scope) for r, v in zip(results, forwarded)]
        out.append(While(inits, before_args, before, cond, forwarded, after_args, after,
                         self.yields(after_term, "scf.while"), res))

    # -- scalars --------------------------------------------------------------------------------
    def s_misplaced(self, op, results, rest, scope, out):
        raise self.error(f"{op} belongs at the top of a function, before its instructions")

    def one(self, results: list) -> str:
        if len(results) != 1:
            raise self.error("expected one result")
        return results[0]

    # -- synchronisation and tile instructions -------------------------------------------------
    def operands(self, rest: str, op: str) -> tuple[list, list, dict, str]:
        """Operand names of ``ins(...)`` and ``outs(...)`` (types are the objects' own), the
        attributes written inside ``ins`` after its first operand, and the attribute text
        after both."""
        groups, inner = {}, {}
        text = rest.strip()
        for key in ("ins", "outs"):
            if text.startswith(key + "("):
                end = closing_bracket(text, len(key))
                if end < 0:
                    raise self.error(f"{op}: unbalanced parentheses in {key}(...)")
                names = split_list(text[len(key) + 1:end].split(" : ", 1)[0])
                for k, n in enumerate(names):
                    if "{" in n:            # "%x {a = b}", or "%x{a = b}" as others write
                        n, _, attr = n.partition("{")
                        inner.update(self.attrs("{" + attr.strip()))
                        names[k] = n.strip()
                groups[key] = [n for n in names if n]     # "%x, {a = b}" (tgather's mask)
                text = text[end + 1:].strip()
        return groups.get("ins", []), groups.get("outs", []), inner, text

    def attrs(self, text: str) -> dict:
        if not text:
            return {}
        if not (text.startswith("{") and closing_bracket(text, 0) == len(text) - 1):
            raise self.error(f"expected {{attributes}}, found {text!r}")
        out = {}
        for item in split_list(text[1:-1]):
            key, eq, value = (s.strip() for s in item.partition("="))
            if not eq:
                raise self.error(f"attribute {item!r} is not key = value")
            key, value = unspell_attr(key, value)
            out[key] = value
        return out


_STATEMENTS = {
    "scf.for": Parser.s_for, "scf.if": Parser.s_if, "scf.while": Parser.s_while,
    "pto.partition_view": read_tiles.s_partition, "pto.tgetval": read_tiles.s_getval,
    "pto.make_tensor_view": Parser.s_misplaced, "pto.alloc_tile": Parser.s_misplaced,
    "pto.set_ffts": lambda self, op, results, rest, scope, out: None,   # printer-derived
    "pto.get_block_idx": read_scalars.s_block_query,
    "pto.get_block_num": read_scalars.s_block_query,
    "pto.get_subblock_idx": read_scalars.s_subblock,
    "arith.constant": read_scalars.s_constant, "arith.select": read_scalars.s_select,
    "arith.cmpi": read_scalars.s_cmp, "arith.cmpf": read_scalars.s_cmp,
    **{f"arith.{c}": read_scalars.s_cast for c in CASTS},
}
