"""Read ``.pto`` text back into a PTO ``Program``: the inverse of ``printer.print_program``.

Why: a printed kernel can be edited by hand and compiled again (``PYPTO_OVERRIDE_DIR``), and
print → parse → print being the identity is the test that the text says everything the backend
needs. The parser is line based, as the printer is: one statement per line, regions closed by
``}``, statements dispatched on their operation name through one table. It undoes the
printer's spellings:

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

import numpy as np

from ...target import TARGETS
from ...language import dtypes as dt
from . import printer
from ...errors import CompilationError, SourceLoc
from . import isa
from .isa import SYNC_OPS, TMP_OPS, tile_extent
from .program import (BOXED, WORKSPACE, For, If, Inst, Program, Scalar, TensorArg, Tile,
                      While, walk_insts)

_N = r"%[^\s,():\[\]{}=<>]+"              # an SSA name as the printer writes them
_DTYPES = {d.mlir: d for d in dt.ALL}
_STMT = re.compile(rf"(?:(?P<res>{_N}(?:, {_N})*) = )?(?P<op>[A-Za-z_][\w.]*)(?P<rest>.*)")
_MODULE = re.compile(r'module(?: attributes \{"pto\.device-spec" = "([^"]*)"\})? \{')
_FUNC = re.compile(r"func\.func @([\w$.]+)\((.*)\)(?: attributes \{(.*)\})? \{")
_KIND = re.compile(r"pto\.kernel_kind = #pto\.kernel_kind<(\w+)>")
_CONST = re.compile(rf"({_N}) = arith\.constant (\S+) : (\w+)")
_VIEW = re.compile(rf"({_N}) = pto\.make_tensor_view ({_N}), shape = \[(.*)\], "
                   rf"strides = \[(.*?)\](?: \{{layout = #pto\.layout<(nd|nz)>\}})? : "
                   rf"!pto\.tensor_view<.*>")
# a view's explicit layout attribute → the PyPTO layout it marks (printer.tensor_view); an
# explicit nd on a 5-D view is an NC1HWC0 tensor (an ND one has at most 4 axes)
_VIEW_LAYOUTS = {None: "ND", "nz": "NZ", "nd": "ND"}
_ALLOC = re.compile(rf"({_N}) = pto\.alloc_tile(?: addr = ({_N}))?"
                    rf"(?: valid_row = ({_N}) valid_col = ({_N}))? : (!pto\.tile_buf<.*>)")
# the printer's index casts are value-preserving: an operand's index, a while result's copy
_INDEX_CAST = re.compile(rf"({_N}) = arith\.index_cast ({_N}) : (?:i\d+|index) to (?:i\d+|index)")
_FOR = re.compile(rf"\s*({_N}) = ({_N}) to ({_N}) step ({_N})"
                  rf"(?: iter_args\((.*)\) -> \((.*)\))?(?: : (\w+))? \{{")
_IF = re.compile(rf"\s*({_N})(?: -> \((.*)\))? \{{")
_WHILE = re.compile(r"\s*\((.*)\) : \((.*)\) -> \((.*)\) \{")
_BB = re.compile(r"\^bb\d*\((.*)\):")
_PARTITION = re.compile(rf"\s*({_N}), offsets = \[(.*)\], sizes = \[(.*)\] : .* -> .*")
_UNARY = re.compile(rf"\s*({_N}) : (\w+) to (\w+)")
_BINARY = re.compile(rf"\s*({_N}), ({_N}) : (\w+)")
_SELECT = re.compile(rf"\s*({_N}), ({_N}), ({_N}) : (\w+)")
_CMP = re.compile(rf"\s*(\w+), ({_N}), ({_N}) : (\w+)")
_COND = re.compile(r"\((\S+)\)\s*(.*)")
_FLAG = re.compile(r"\[<PIPE_(\w+)>, <PIPE_(\w+)>, <EVENT_ID(\d+)>\]")
_BARRIER = re.compile(r"\s*#pto\.pipe<PIPE_(\w+)>")
_CROSS = re.compile(r"\s*#pto\.pipe<PIPE_(\w+)>, (\d+)(?: \{ffts_mode = (\d+) : i32\})?")
_RESHAPE = re.compile(rf"\s*({_N}) : (!pto\.tile_buf<.*>) -> (!pto\.tile_buf<.*>)")
_INT = re.compile(r"-?\d+")
_CASTS = ("extf", "truncf", "fptosi", "sitofp", "extsi", "trunci", "extui", "uitofp",
          "fptoui", "bitcast")
_CMP_PRED = {v: k for table in (printer._CMP_I, printer._CMP_U, printer._CMP_F)
             for k, v in table.items()}
# integer mnemonics the printer does not form as name + "i" (floats: name + "f")
# (the reader's integers are signless too: an unsigned form reads as its signed name)
_INT_NAMES = {"floordivsi": "floordiv", "minsi": "min", "maxsi": "max", "divsi": "div",
              "shrsi": "shr", "shrui": "shr", "shli": "shl", "andi": "and", "ori": "or",
              "xori": "xor", "minui": "min", "maxui": "max", "divui": "div", "remui": "mod"}
_UNSIGNED_FORMS = ("shrui", "minui", "maxui", "divui", "remui")
_FLOAT_NAMES = {"minimumf": "min", "maximumf": "max"}
_CLOSERS = ("}", "} else {", "} do {", "return")


def _read_unsigned(values) -> None:
    """An unsigned form (``maxui``, ``cmpi ult``) read its i8 operands as unsigned: they were
    (arith is signless; PyPTO's one unsigned integer is uint8)."""
    for v in values:
        if v.dtype == dt.int8:
            v.dtype = dt.uint8


class PtoParseError(ValueError):
    """Malformed ``.pto`` text; ``line`` is 1-based and ``text`` is that line."""

    def __init__(self, message: str, line: int | None = None, text: str = ""):
        self.message, self.line, self.text = message, line, text
        where = f"line {line}: " if line else ""
        super().__init__(f"{where}{message}" + (f"\n    {text}" if text else ""))


def parse_program(text: str, target=None) -> Program:
    """The ``Program`` that ``print_program`` printed as ``text``. ``target`` defaults to the
    chip named by the module's ``"pto.device-spec"``."""
    return _Parser(text).module(target)


def override_program(compiled: Program, path: str, text: str) -> Program:
    """PYPTO_OVERRIDE_DIR: the hand-edited ``text`` of ``path`` parsed in place of
    ``compiled``. The launch ABI comes from the kernel's signature, so the file must keep the
    name and parameters of this specialisation; anything else is the user's to change."""
    try:
        program = parse_program(text, compiled.target)
    except PtoParseError as e:
        raise CompilationError(e.message, SourceLoc(path, e.line or 0, 0, source_line=e.text,
                                                    function=compiled.name)) from None
    expected = [_signature(p) for p in compiled.params]
    found = [_signature(p) for p in program.params]
    if program.name != compiled.name or found != expected:
        raise CompilationError(
            f"{path} does not match this specialisation of {compiled.name}: it declares "
            f"{program.name}{found}, the kernel was compiled as {compiled.name}{expected}")
    return program


def _signature(p) -> tuple:
    if isinstance(p, TensorArg):      # as the chip sees it: a bool tensor is bytes
        return ("tensor", p.name, printer.gm_type(p.dtype), tuple(p.dims), tuple(p.strides))
    return ("scalar", p.name, p.dtype.name)


# -- text helpers ------------------------------------------------------------------------------

def _split(text: str, sep: str = ",") -> list[str]:
    """``text`` cut at the ``sep`` characters outside (), [], {} and <>; empty parts dropped."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _close(text: str, start: int) -> int:
    """Index of the bracket closing the one at ``text[start]`` (or -1)."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] in "([{<":
            depth += 1
        elif text[i] in ")]}>":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _literal(text: str):
    """An attribute or constant value as ``str(value)`` printed it."""
    t = text.strip()
    if t in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[t]
    if _INT.fullmatch(t):
        return int(t)
    if t[:1] in "([" and t[-1:] == {"(": ")", "[": "]"}[t[:1]]:
        items = [_literal(x) for x in _split(t[1:-1])]
        return tuple(items) if t[0] == "(" else items
    try:
        return float(t)
    except ValueError:
        return t


_ATTR_KEYS = {text_key: key for key, (text_key, _) in printer.ATTR_SPELLING.items()}
_ATTR_VALUES = {"rmode": {v: k for k, v in printer.ROUND_MODES.items()},
                "atomic": {v: k for k, v in printer.ATOMIC_TYPES.items()}}


def _unspell(text_key: str, text: str) -> tuple[str, object]:
    """(Program key, value) of an attribute the printer spelled (printer.ATTR_SPELLING)."""
    if text_key == "maskPattern":       # TGATHER's (printer.sort_inst)
        m = re.fullmatch(r"#pto\.mask_pattern<(\w+)>", text.strip())
        if m is not None:
            return "pattern", m.group(1)
    key = _ATTR_KEYS.get(text_key, text_key)
    if key in printer.ATTR_SPELLING:
        m = re.fullmatch(r"#pto<\w+ (\w+)>", text.strip())
        if m is not None:
            word = m.group(1)
            return key, _ATTR_VALUES.get(key, {}).get(word, word)
    return key, _literal(text)


_MASK_OPS = ("tand", "tor", "txor", "tmov", "tnot", "tcolexpand")


def _restore_masks(insts: list) -> None:
    """A mask is printed as ui8 bytes holding a bit per element (Program.element_type): the
    tiles that comparisons write, and what mask-to-mask instructions make of them, are bool
    tiles again, as wide as the compared tile."""
    changed, rounds = True, 0
    while changed:
        changed, rounds = False, rounds + 1
        if rounds > len(insts) + 1:       # two writers disagree about a mask's width
            raise PtoParseError("the widths of the masks (ui8 tiles) written by pto.tcmp and "
                                "the mask instructions do not agree")
        for i in insts:
            src = i.ins[0] if i.ins and isinstance(i.ins[0], Tile) else None
            if src is None or not i.outs or not isinstance(i.outs[0], Tile):
                continue
            if i.op in ("tcmp", "tcmps") or (i.op in _MASK_OPS and src.dtype == dt.bool_):
                dst = i.outs[0]
                if src.is_column or src.is_column_mask:     # (M, 1): Tile.is_column_mask
                    shape = (src.rows, 1, src.v_row, 1)
                else:                   # its own rows; the columns it compares
                    shape = (dst.rows, src.cols, dst.v_row, src.v_col)
                if (dst.dtype, dst.rows, dst.cols, dst.v_row, dst.v_col) != (dt.bool_, *shape):
                    dst.dtype, (dst.rows, dst.cols, dst.v_row, dst.v_col) = dt.bool_, shape
                    changed = True
    for i in insts:
        if i.op == "texpands" and not i.ins and i.outs[0].dtype == dt.bool_:
            i.attrs["value"] = bool(i.attrs["value"])


def _base(name: str) -> str:
    """What a printer-derived name ``%<base>.<tag>`` derives from (printer.py's docstring)."""
    return name.split(".", 1)[0]


def _pad_value(kind: int, dtype: dt.dtype):
    """The value a tile's pad field produces (printer.pad_kind's inverse)."""
    if kind == isa.PAD_ZERO or dtype == dt.bool_:
        return 0
    if dtype.is_floating:
        return math.inf if kind == isa.PAD_MAX else -math.inf
    info = np.iinfo(dtype.to_numpy())
    return int(info.max if kind == isa.PAD_MAX else info.min)


def _const_value(text: str, ty: str):
    """A constant's value: floats written as hexadecimal bits are infinities or NaN."""
    if text.startswith("0x") and ty in printer._SPECIAL_BITS:
        names = {bits: name for name, bits in printer._SPECIAL_BITS[ty].items()}
        if text in names:
            return float(names[text])
    return _literal(text)


_HOISTED_NONFINITE = re.compile(r"(%c(?:m?inf|nan)_(?:f16|bf16|f32|f64))\.b = arith\.constant .*")


def _nonfinite(name: str, lines: list[str]):
    """(value, type) when ``lines`` are ``printer.constant_lines`` of a non-finite float."""
    for ty in printer._BITS_TYPE:
        for value in (math.inf, -math.inf, math.nan):
            if printer.constant_lines(name, value, ty) == lines:
                return value, ty
    return None


def _const_name(value_text: str, ty: str) -> str:
    """The name ``_Printer.const`` gives a hoisted constant."""
    return f"%c{value_text.replace('-', 'm').replace('.', 'p')}_{ty}"


def _printer_default(inst: Inst) -> bool:
    """Is the ``rmode`` of this ``tcvt`` the one the printer writes when there is none? It
    writes one only for float → int, where truncation is what an explicit ``trunc`` does too."""
    if not inst.ins or not inst.outs or "rmode" not in inst.attrs:
        return False
    src, dst = inst.ins[0].dtype, inst.outs[0].dtype
    return src.is_floating and not dst.is_floating and inst.attrs["rmode"] == "trunc"


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


class _Parser:
    def __init__(self, text: str):
        self.lines = [(no, s.strip()) for no, s in enumerate(text.splitlines(), 1)
                      if s.strip() and not s.strip().startswith("//")]
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
        m = self.match(_MODULE, self.next("empty text: expected a module"), "module header")
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
        m = self.match(_FUNC, self.next(), "func.func header")
        name, args, attrs = m.groups()
        kind, header = _KIND.search(attrs or ""), self.at
        self.kind = kind.group(1) if kind else "vector"
        scope = _Scope()
        self.prologue(scope)
        after_prologue, self.at = self.at, header      # errors in parameters: the header's
        params = self.params(_split(args), scope, shared)
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
        _restore_masks([i for f in funcs for i in walk_insts(f.body) if isinstance(i, Inst)])
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
        return Program(name, "mixed", parts["cube"].params, tiles, parts["cube"].body, target,
                       usage, vector_body=parts["vector"].body)

    # -- prologue: hoisted constants, tensor views, tiles ---------------------------------------
    def prologue(self, scope: _Scope) -> None:
        while self.peek() is not None:
            line = self.peek()
            if line == printer.EXECUTED_LINE:          # TMRGSORT's counts (printer.executed)
                self.next()
                scope.consts[printer.EXECUTED] = (0, printer.EXECUTED_TYPE)
                continue
            const = _CONST.fullmatch(line)
            value = _const_value(*const.group(2, 3)) if const else None
            if const and const.group(1) in (_const_name(str(value), const.group(3)),
                                            _const_name(str(value), "u" + const.group(3))):
                self.next()
                ty = const.group(1).rsplit("_", 1)[1]      # ui8 constants are i8 bits
                scope.consts[const.group(1)] = (value, ty)
            elif _HOISTED_NONFINITE.fullmatch(line):
                base = _HOISTED_NONFINITE.fullmatch(line).group(1)
                lines = [self.next() for _ in printer.constant_lines(base, math.inf, "f32")]
                found = _nonfinite(base, lines)
                if found is None:
                    raise self.error(f"the lines deriving {base} are not a non-finite constant "
                                     "as the printer writes it")
                scope.consts[base] = found
            elif _INDEX_CAST.fullmatch(line):
                self.next()
                res, src = _INDEX_CAST.fullmatch(line).groups()
                scope.aliases[res] = src
            elif _VIEW.fullmatch(line):
                self.next()
                tv, ptr, shape, strides, layout = _VIEW.fullmatch(line).groups()
                kind = "NC1HWC0" if layout == "nd" and len(_split(shape)) == 5 else \
                    _VIEW_LAYOUTS[layout]
                scope.views[ptr] = (tv, [scope.aliases.get(e, e) for e in _split(shape)],
                                    [scope.aliases.get(e, e) for e in _split(strides)], kind)
            elif " = pto.alloc_tile" in line:
                self.next()
                name, addr, _, _, type_text = self.match(_ALLOC, line, "pto.alloc_tile").groups()
                if "." in name:
                    self.alias_tile(name, type_text, scope, addr)
                else:
                    self.alloc(scope, name, addr, type_text)
            else:
                return

    def alloc(self, scope: _Scope, name: str, addr: str | None, type_text: str) -> None:
        if addr is None or addr not in scope.consts:
            raise self.error("pto.alloc_tile needs addr = <a constant>")
        tile = self.tile_type(name[1:], scope.consts[addr][0], type_text)
        old = self.tiles.get(name)
        if old is not None and (old.type_text(), old.addr) != (tile.type_text(), tile.addr):
            raise self.error(f"tile {name} is declared twice with different types")
        self.tiles.setdefault(name, tile)
        scope.values[name] = self.tiles[name]
        scope.tiles.append(name)

    def alias_tile(self, name: str, type_text: str, scope: _Scope, addr=None) -> None:
        """Another view of a declared tile's bytes (an edge window's clipped tile, the row
        view of an (M, 1) tile): it stands for the tile it is named after."""
        base = _base(name)
        if base not in scope.values or not isinstance(scope.values[base], Tile):
            raise self.error(f"{name} is not named after a declared tile")
        scope.aliases[name] = base
        if addr is not None:
            scope.alias_addr[name] = scope.consts[addr][0]
        pad = re.search(r"pad=(\d+)>", type_text)
        scope.pads[name] = int(pad.group(1)) if pad else 0

    def tile_type(self, name: str, addr: int, text: str) -> Tile:
        """A ``Tile`` from ``!pto.tile_buf<...>``; the layout fields must be those the printer
        derives from the location and shape, since a Tile has no others."""
        fields = {f.name for f in dataclasses.fields(Tile)} - {"name", "addr"}
        kwargs = {}
        for item in _split(text[len("!pto.tile_buf<"):-1]):
            key, _, value = (s.strip() for s in item.partition("="))
            if key in fields:
                kwargs[key] = (self.dtype(value) if key == "dtype" else
                               None if value == "?" else _literal(value))
        allocated = kwargs.get("rows"), kwargs.get("cols")
        for size, valid in (("rows", "v_row"), ("cols", "v_col")):
            if kwargs.get(valid) is not None:     # a UB row is allocated in whole 32 bytes
                kwargs[size] = kwargs[valid]
        if kwargs.get("loc") in BOXED and allocated != (kwargs.get("rows"), kwargs.get("cols")):
            kwargs["alloc"] = allocated           # whole fractal boxes (passes/cube_box.py)
        try:
            tile = Tile(name=name, addr=addr, **kwargs)
            printed = tile.type_text()
            if printed != text and tile.dtype == dt.uint8:     # a mask: bits, not bytes
                mask = dataclasses.replace(tile, dtype=dt.bool_, cols=tile.cols * 8,
                                           v_col=None if tile.v_col is None else tile.v_col * 8)
                if mask.type_text() == text:
                    tile, printed = mask, text
        except (TypeError, KeyError) as e:
            raise self.error(f"incomplete or unknown tile type ({e})") from None
        if printed != text:
            raise self.error(f"tile type not representable; the printer would write {printed}")
        return tile

    def dtype(self, text: str) -> dt.dtype:
        if text not in _DTYPES:
            raise self.error(f"unknown element type {text!r}")
        return _DTYPES[text]

    def params(self, args: list[str], scope: _Scope, shared) -> list:
        """Kernel parameters in call order; the i64 extents and strides that tensor views
        name are not parameters of their own."""
        extents = {e for _, shape, strides, _ in scope.views.values() for e in shape + strides}
        params = []
        for arg in args:
            name, _, ty = (s.strip() for s in arg.partition(":"))
            ptr = re.fullmatch(r"!pto\.ptr<(\w+)>", ty)
            if name[1:] == printer.FFTS_PARAM:          # either PTOAS's type (dialect.py)
                continue
            if ptr:
                params.append(self.tensor(name, self.dtype(ptr.group(1)), scope))
            elif name[1:] in printer.GRID_PARAMS:
                scope.values[name] = Scalar(name[1:], dt.int64)
            elif name not in extents:
                params.append(Scalar(name[1:], self.dtype(ty)))
        if shared is not None:
            if [_signature(p) for p in params] != [_signature(p) for p in shared]:
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
        dims = [self.static(e, scope) for e in shape]
        steps = [self.static(e, scope) for e in strides]
        if len(dims) == 2 and dims[0] == 1 and steps[0] == 0:     # a 1-D tensor as 1 x n
            dims, steps = dims[1:], steps[1:]
        workspace = re.fullmatch(rf"{WORKSPACE}\d*", name[1:]) is not None   # one per slot
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
            if line in _CLOSERS:
                return insts, term, line
            if term is not None:
                raise self.error("nothing may follow scf.yield or scf.condition in a region")
            m = _STMT.fullmatch(line)
            if m is None:
                raise self.unreadable(line)
            results = _split(m.group("res") or "")
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
        if results and all("." in r for r in results):
            self.derived(op, results, rest, line, scope, out)
            return True
        if op == "pto.tmov" and rest.strip()[4:].split(" ", 1)[0] in scope.reshape_views:
            return True                         # the copy half of a treshape (printer)
        if len(results) == 1 and results[0] in scope.derived and op != "pto.partition_view":
            self.macro_end(results[0], line, scope, out)
            return True
        return False

    def derived(self, op, results, rest, line, scope: _Scope, out: list) -> None:
        """A statement whose results are printer-derived names (``%<base>.<tag>``)."""
        name = results[0]
        if op == "arith.index_cast":
            scope.aliases[name] = self.match(_INDEX_CAST, line, op).group(2)
        elif op == "arith.bitcast" and name.split(".", 1)[1].startswith("b"):
            scope.aliases[name] = _base(name)      # a fill's bits (printer.fill_scalar)
        elif op == "pto.alloc_tile":
            m = self.match(_ALLOC, line, op)
            self.alias_tile(name, m.group(5), scope, m.group(2))
        elif op == "pto.treshape":
            scope.reshape_views.add(name)
            src = self.match(_RESHAPE, rest, op).group(1)
            out.append(Inst("treshape", [self.value(src, scope)],
                            [self.value(_base(name), scope)]))
        else:
            scope.derived.setdefault(_base(name), []).append(line)

    def macro_end(self, result: str, line: str, scope: _Scope, out: list) -> None:
        """The last line of a block-index macro (printer.block_query_lines)."""
        lines = scope.derived.pop(result) + [line]
        select = re.fullmatch(rf"{re.escape(result)} = arith\.select ({_N}), .* : (\w+)", line)
        if select and printer.bool_to_float_lines(result, select.group(1), select.group(2)) == lines:
            res = self.define(result, self.dtype(select.group(2)), scope)
            out.append(Inst("arith.cast", [self.value(select.group(1), scope)], [res], {"dtype": res.dtype}))
            return
        found = _nonfinite(result, lines)
        if found is not None:
            res = self.define(result, self.dtype(found[1]), scope)
            out.append(Inst("arith.constant", [], [res], {"value": found[0]}))
            return
        add = re.fullmatch(rf"{re.escape(result)}\.n = arith\.negf ({_N}) : (\w+)", lines[0])
        sub = re.fullmatch(rf"{re.escape(result)} = arith\.subf ({_N}), "
                           rf"{re.escape(result)}\.n : (\w+)", lines[-1])
        if len(lines) == 2 and add and sub:          # printer: a + b as a - (-b)
            ins = [self.value(sub.group(1), scope), self.value(add.group(1), scope)]
            out.append(Inst("arith.add", ins, [self.define(result, self.dtype(add.group(2)),
                                                           scope)]))
            return
        macro = self.float_macro(result, lines, scope)
        if macro is not None:
            out.append(macro)
            return
        for op in ("pto.program_id", "pto.num_programs"):
            for axis in range(3):
                if printer.block_query_lines(result, op, axis, True) == lines:
                    res = self.define(result, dt.int64, scope)
                    out.append(Inst(op, [], [res], {"axis": axis}))
                    return
        raise self.error(f"the lines deriving {result} are not a block index or count "
                         f"as the printer writes them")

    def float_macro(self, result: str, lines: list[str], scope: _Scope) -> Inst | None:
        """``printer.FLOAT_MACROS``: a float ``%`` or ``//`` written as several lines."""
        first = re.fullmatch(rf"{re.escape(result)}(?:\.md)?\.m = arith\.remf ({_N}), ({_N}) "
                             r": (\w+)", lines[0])
        if first is None:
            return None
        a, b, ty = first.groups()
        for name, macro in printer.FLOAT_MACROS.items():
            if macro(result, a, b, ty) == lines:
                ins = [self.value(a, scope), self.value(b, scope)]
                return Inst(f"arith.{name}", ins, [self.define(result, self.dtype(ty), scope)])
        return None

    def statement(self, op: str, results: list, rest: str, scope: _Scope, out: list) -> None:
        handler = _STATEMENTS.get(op)
        if handler is None:
            if op.startswith("arith.") and len(results) == 1:
                handler = _Parser.s_binary
            elif op.startswith("pto.") and op[4:] in SYNC_OPS and not results:
                handler = _Parser.s_sync
            elif op.startswith("pto.") and not results:
                handler = _Parser.s_tile
            else:
                raise self.error(f"unknown operation {op}")
        handler(self, op, results, rest, scope, out)

    def terminator(self, op: str, rest: str, scope: _Scope):
        if op == "scf.yield":
            return [self.value(n, scope) for n in _split(rest.split(":", 1)[0])]
        m = self.match(_COND, rest, "scf.condition")
        forwarded = [self.value(n, scope) for n in _split(m.group(2).split(":", 1)[0])]
        return self.value(m.group(1), scope), forwarded

    def value(self, name: str, scope: _Scope):
        while name in scope.aliases:
            name = scope.aliases[name]
        if name in scope.values:
            return scope.values[name]
        if name in scope.consts or name in scope.partitions or name in scope.extents:
            raise self.error(f"{name} cannot be used here")
        raise self.error(f"undefined value {name}")

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
        m = self.match(_FOR, rest, "scf.for")
        iv_name, lb, ub, step, pairs, types, iv_type = m.groups()
        bounds = [self.value(n, scope) for n in (lb, ub, step)]
        pairs, types = _split(pairs or ""), [self.dtype(t) for t in _split(types or "")]
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
        m = self.match(_IF, rest, "scf.if")
        cond = self.value(m.group(1), scope)
        types = [self.dtype(t) for t in _split(m.group(2) or "")]
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
        m = self.match(_WHILE, rest, "scf.while")
        pairs, types = _split(m.group(1)), [self.dtype(t) for t in _split(m.group(2))]
        if len(pairs) != len(types):
            raise self.error("scf.while: arguments and their types differ in number")
        inits = [self.value(p.partition("=")[2].strip(), scope) for p in pairs]
        before_args = [self.define(p.partition("=")[0].strip(), d, scope)
                       for p, d in zip(pairs, types)]
        before, term, closer = self.block(scope)
        if closer != "} do {" or term is None or term[0] != "scf.condition":
            raise self.error("the before region of scf.while ends with scf.condition and } do {")
        cond, forwarded = term[1]
        bb = self.match(_BB, self.next(), "^bb0(...) block header")
        after_args = []
        for arg in _split(bb.group(1)):
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
    def s_partition(self, op, results, rest, scope, out):
        m = self.match(_PARTITION, rest, "pto.partition_view")
        if len(results) != 1 or m.group(1) not in scope.tensor_views:
            raise self.error("pto.partition_view of an unknown tensor view")
        tensor = scope.tensor_views[m.group(1)]
        offsets = _split(m.group(2))
        if tensor.layout != "ND":
            offsets = self.layout_offsets(tensor, results[0], offsets, scope)
        elif tensor.rank == 1:           # printed with a leading 0 offset, as a 1 x n view
            offsets = offsets[1:]
        elif tensor.rank > 2:            # a plane's clamped offsets (printer.plane)
            offsets = [f"{results[0]}.o{axis}" if o == f"{results[0]}.c{axis}" else o
                       for axis, o in enumerate(offsets)]
        offsets = [self.value(o, scope) for o in offsets]
        scope.derived.pop(results[0], None)      # the clipped sizes: derived again
        scope.partitions[results[0]] = (tensor, offsets)

    def layout_offsets(self, tensor: TensorArg, view: str, offsets: list, scope) -> list:
        """A layout tensor's logical offsets, read back from the lines printer.layout_partition
        derives the physical ones with (NZ: the fractal divisions; NC1HWC0: the channel
        group's division and the pixel's h * W + w, which also gives W)."""
        lines = {ln.strip().split(" = ", 1)[0]: ln.strip().split(" = ", 1)[1]
                 for ln in scope.derived.get(view, [])}

        def operand(tag, op, index=0):
            text = lines.get(f"{view}.{tag}", "")
            m = re.fullmatch(rf"{op} ({_N}), ({_N}) : index", text)
            if m is None:
                raise self.error(f"{view}: the {tensor.layout} window's line {view}.{tag} is "
                                 "not as the printer writes it")
            return m.group(1 + index)
        if tensor.layout == "NZ":
            return [operand("f2", "arith.divsi"), operand("f1", "arith.divsi")]
        width = self.static(operand("hw", "arith.muli", 1), scope)
        n, c1s, _, hw, c0 = tensor.dims
        tensor.logical = (n, c1s * c0, hw // width, width)
        return [operand("nn", "arith.minsi"), operand("g", "arith.floordivsi"),
                operand("hw", "arith.muli"), operand("px", "arith.addi", 1)]

    def s_misplaced(self, op, results, rest, scope, out):
        raise self.error(f"{op} belongs at the top of a function, before its instructions")

    def s_block_query(self, op, results, rest, scope, out):
        if rest.strip():
            raise self.error(f"{op} takes no operands or attributes")
        name = "pto.program_id" if op == "pto.get_block_idx" else "pto.num_programs"
        res = self.define(self.one(results), dt.int64, scope)
        out.append(Inst(name, [], [res], {"axis": 0}))

    def one(self, results: list) -> str:
        if len(results) != 1:
            raise self.error("expected one result")
        return results[0]

    def s_constant(self, op, results, rest, scope, out):
        value, _, ty = rest.strip().rpartition(" : ")
        res = self.define(self.one(results), self.dtype(ty), scope)
        out.append(Inst("arith.constant", [], [res], {"value": _const_value(value, ty)}))

    def s_cast(self, op, results, rest, scope, out):
        m = self.match(_UNARY, rest, op)
        src = self.value(m.group(1), scope)
        dtype = self.dtype(m.group(3))
        if op in ("arith.extui", "arith.uitofp") and src.dtype == dt.int8:
            src.dtype = dt.uint8        # read as unsigned: it was (arith is signless)
        if op == "arith.fptoui" and dtype == dt.int8:
            dtype = dt.uint8
        res = self.define(self.one(results), dtype, scope)
        out.append(Inst("arith.cast", [src], [res], {"dtype": res.dtype}))

    def s_select(self, op, results, rest, scope, out):
        m = self.match(_SELECT, rest, op)
        ins = [self.value(n, scope) for n in m.groups()[:3]]
        res = self.define(self.one(results), self.dtype(m.group(4)), scope)
        out.append(Inst("arith.select", ins, [res]))

    def s_cmp(self, op, results, rest, scope, out):
        m = self.match(_CMP, rest, op)
        if m.group(1) not in _CMP_PRED:
            raise self.error(f"unknown comparison predicate {m.group(1)}")
        ins = [self.value(n, scope) for n in m.groups()[1:3]]
        if m.group(1) in printer._CMP_U.values() and m.group(1) not in ("eq", "ne"):
            _read_unsigned(ins)
        res = self.define(self.one(results), dt.bool_, scope)
        out.append(Inst("arith.cmp", ins, [res], {"pred": _CMP_PRED[m.group(1)]}))

    def s_binary(self, op, results, rest, scope, out):
        a, b, ty = self.match(_BINARY, rest, op).groups()
        dtype, result = self.dtype(ty), self.one(results)
        if op == "arith.addi" and scope.consts.get(b) == (0, "i64") and (
                a in scope.consts or a in scope.extents):
            out.append(self.tensor_dim(a, result, scope))
            return
        mnemonic = op[len("arith."):]
        if dtype.is_floating:
            name = _FLOAT_NAMES.get(mnemonic, mnemonic.removesuffix("f"))
        else:
            name = _INT_NAMES.get(mnemonic, mnemonic.removesuffix("i"))
        mod = self.python_mod(result, a, b, ty) if op == "arith.floordivsi" else None
        if mod is not None:
            name, result = "mod", mod
        ins = [self.value(a, scope), self.value(b, scope)]
        if mnemonic in _UNSIGNED_FORMS:
            _read_unsigned(ins)
            dtype = ins[0].dtype
        out.append(Inst(f"arith.{name}", ins, [self.define(result, dtype, scope)]))

    def python_mod(self, q: str, a: str, b: str, ty: str) -> str | None:
        """Is ``q = a floordiv b`` the first of the printer's three lines for ``a % b``
        (through its temporaries %qN and %mN+1)? If so, consume the other two and return the
        name of the remainder."""
        n = re.fullmatch(r"%q(\d+)", q)
        if n is None or self.i + 1 >= len(self.lines):
            return None
        m = f"%m{int(n.group(1)) + 1}"
        mul, sub = self.lines[self.i][1], self.lines[self.i + 1][1]
        tail = re.fullmatch(rf"({_N}) = arith\.subi {re.escape(a)}, {m} : {ty}", sub)
        if mul != f"{m} = arith.muli {q}, {b} : {ty}" or tail is None:
            return None
        self.next()
        self.next()
        return tail.group(1)

    def tensor_dim(self, extent: str, result: str, scope: _Scope) -> Inst:
        """``arith.addi <extent>, %c0_i64``: a dynamic extent names its tensor; a specialised
        one is the same number whichever tensor it came from."""
        if extent in scope.extents:
            tensor, axis = scope.extents[extent]
        else:
            value = scope.consts[extent][0]
            found = [(p, i) for p in scope.tensor_views.values()
                     for i, d in enumerate(p.dims) if d == value]
            if not found:
                raise self.error(f"no tensor has an extent of {value}")
            tensor, axis = found[0]
        return Inst("tensor.dim", [tensor], [self.define(result, dt.int64, scope)],
                    {"axis": axis})

    # -- synchronisation and tile instructions -------------------------------------------------
    def s_sync(self, op, results, rest, scope, out):
        name = op[len("pto."):]
        if name in ("set_flag", "wait_flag"):
            src, dst, event = self.match(_FLAG, rest, op).groups()
            attrs = {"src": src, "dst": dst, "event": int(event)}
        elif name == "barrier":
            attrs = {"pipe": self.match(_BARRIER, rest, op).group(1)}
        else:
            pipe, flag, mode = self.match(_CROSS, rest, op).groups()
            attrs = {"pipe": pipe, "flag": int(flag)}
            if mode is not None:
                attrs["mode"] = int(mode)
            syncall, part = Inst("syncall", [], []), self.kind
            if name == "sync.wait" and out and out[-1].op == "sync.set" and \
                    printer.sync_lines(syncall, part) == [
                        printer.sync_lines(out[-1], part)[0],
                        printer.sync_lines(Inst(name, [], [], attrs), part)[0]]:
                out[-1] = syncall       # FFTS mode 0 set + wait: every block meets
                return
        out.append(Inst(name, [], [], attrs))

    def s_tile(self, op, results, rest, scope, out):
        """``pto.<op> ins(...) outs(...) {attrs}``: any tile instruction, known or not."""
        ins, outs, inner, attrs = self.operands(rest, op)
        name = op[len("pto."):]
        attrs = {**inner, **self.attrs(attrs)}
        if name == "tfillpad":          # the window a load read, again (printer.fill_pad)
            window = re.fullmatch(r"%[^.]+\.(pv\d+)", ins[0]) if ins else None
            if window is None or f"%{window.group(1)}" not in scope.partitions:
                raise self.error("tfillpad pads the window of a pto.partition_view")
            tensor, offsets = scope.partitions[f"%{window.group(1)}"]
            tile = self.value(outs[0], scope)
            pad = _pad_value(scope.pads.get(ins[0], isa.PAD_ZERO), tile.dtype)
            out.append(Inst("tfillpad", [tensor, *offsets], [tile], {"pad": pad}))
            return
        if name == "texpands" and outs and re.search(r"\.h\d+$", outs[0]) and ins and \
                ins[0] in scope.consts:
            tile = self.value(outs[0], scope)     # bytes or bfloat16 through an i16 view
            half = scope.consts[ins[0]][0] & 0xFFFF
            byte = half & 0xFF
            if tile.dtype == dt.bfloat16:
                value = float(np.array(half, np.uint16).view(tile.dtype.to_numpy()))
            elif tile.dtype == dt.bool_:
                value = half != 0
            else:
                value = byte - 256 if tile.dtype.is_signed and byte >= 128 else byte
            out.append(Inst("texpands", [], [tile], {"value": value}))
            return
        if name == "tload":
            tensor, offsets = self.partition(ins, outs, scope)
            tile = self.value(outs[0], scope)
            kind = scope.pads.get(outs[0], isa.PAD_ZERO)
            fill = next((i for i in reversed(out) if isinstance(i, Inst) and i.outs == [tile]
                         and i.op == "texpands" and not i.ins), None)
            if kind == isa.PAD_NULL and fill is not None:
                attrs["pad"] = fill.attrs["value"]       # filled first (lower._tile_load)
            else:
                attrs["pad"] = _pad_value(kind, tile.dtype)
            out.append(Inst("tload", [tensor, *offsets], [tile], attrs))
            return
        if name == "tstore":
            tensor, offsets = self.partition(outs, ins, scope)
            out.append(Inst("tstore", [self.value(ins[0], scope)], [tensor, *offsets], attrs))
            return
        if name in ("tcvt", "tci") and len(ins) == 2:      # the scratch (lower.scratch_type)
            attrs["tmp"] = self.value(ins.pop(), scope)
        if name in ("texpands", "tci") and len(ins) == 1 and ins[0] in scope.consts:
            value = scope.consts[ins[0]][0]
            # a fresh NaN per use, as the compiler makes them: NaN != NaN, so the printer
            # hoists one %cnan_<type> line per use, and the reprint must too
            attrs["value" if name == "texpands" else "start"] = float("nan") if isinstance(
                value, float) and math.isnan(value) else value
            ins = []
        if name == "tmuls" and len(outs) == 1 and ins and (
                self.piece(ins[0], outs[0], scope, out)):
            return
        if name == "tmov" and ins and re.search(r"\.t\d+$", ins[0]):
            attrs["transpose"] = True        # through a transposed view (printer.transposed)
        if name == "textract" and len(ins) == 3:       # from L1: offsets as operands
            attrs["starts"] = tuple(scope.consts[n][0] for n in ins[1:])
            ins = ins[:1]
        row = re.search(r"\.k(\d+)_(\d+)$", ins[0]) if name == "tcvt" and ins else None
        if row is not None:              # a conversion row by row (printer.cvt_rows)
            if row.group(2) == "0":
                out.append(Inst("tcvt", [self.value(ins[0], scope)],
                                [self.value(outs[0], scope)], attrs))
                if _printer_default(out[-1]):
                    del attrs["rmode"]
            return
        if name in ("tmrgsort", "tgather"):
            self.sort_inst(name, ins, outs, inner, scope, out)
            return
        if name == "trowexpand" and outs and outs[0].endswith(".row"):
            name = "tcolexpand"          # (1, 1) → (M, 1) on the row view (printer.inst)
        if name == "tsort32" and len(ins) == 3:      # the unaligned form's scratch row
            attrs["tmp"] = self.value(ins.pop(), scope)
        if name in TMP_OPS:
            if not ins:
                raise self.error(f"{op} takes a scratch tile as its last input")
            attrs["tmp"] = self.value(ins.pop(), scope)
        inst = Inst(name, [self.value(n, scope) for n in ins],
                    [self.value(n, scope) for n in outs], attrs)
        if name == "tcvt" and _printer_default(inst):
            del attrs["rmode"]
        out.append(inst)

    def sort_inst(self, name, ins, outs, inner, scope, out) -> None:
        """printer.sort_inst's forms: TMRGSORT with a blockLen constant or with lists, a
        scratch and the counts vector; TGATHER with a mask pattern."""
        if name == "tgather":
            if "pattern" not in inner or len(ins) != 1:
                raise self.error("pto.tgather: only the mask-pattern form is read")
            out.append(Inst("tgather", [self.value(ins[0], scope)],
                            [self.value(outs[0], scope)], {"pattern": inner["pattern"]}))
            return
        attrs = {}
        if len(ins) == 2 and ins[1] in scope.consts and len(outs) == 1:
            attrs["block_len"] = scope.consts[ins[1]][0]
            ins = ins[:1]
        elif len(ins) >= 3 and len(outs) == 2 and outs[1] == printer.EXECUTED:
            attrs["tmp"] = self.value(ins.pop(), scope)
            outs = outs[:1]
        else:
            raise self.error("pto.tmrgsort: expected ins(%src, %blockLen) outs(%dst) or "
                             "ins(%lists..., %tmp) outs(%dst, %executed)")
        out.append(Inst("tmrgsort", [self.value(n, scope) for n in ins],
                        [self.value(outs[0], scope)], attrs))

    def s_getval(self, op, results, rest, scope, out):
        """``%r = pto.tgetval ins(%tile, %r.ix : ...) outs : T``: the scalar has the tile's
        dtype (the text's type is signless)."""
        ins, _, _, _ = self.operands(rest, op)
        if len(ins) != 2:
            raise self.error("pto.tgetval reads one tile at one offset")
        tile = self.value(ins[0], scope)
        res = self.define(self.one(results), tile.dtype, scope)
        out.append(Inst("tgetval", [tile, self.value(ins[1], scope)], [res]))

    def piece(self, src: str, dst: str, scope: _Scope, out: list) -> bool:
        """A ``tmuls`` by 1 from or to a view at an offset (printer.moves): one piece of a UB
        slice (``%<src>.x<n>_0``) or concatenation (``%<dst>.c<n>_<k>``)."""
        for name, tag in ((src, "x"), (dst, "c")):
            m = re.fullmatch(rf"(%[^.]+)\.{tag}(\d+)_(\d+)", name)   # the other's view
            if m is None or name not in scope.alias_addr:
                continue
            whole = self.value(m.group(1), scope)
            offset = scope.alias_addr[name] - whole.addr
            row = -(-whole.cols * whole.dtype.itemsize // 32) * 32
            at = (offset // row, offset % row // whole.dtype.itemsize)
            if tag == "x":
                out.append(Inst("textract", [whole], [self.value(dst, scope)],
                                {"starts": at}))
                return True
            piece = self.value(src, scope)
            key = (m.group(1), m.group(2))
            if int(m.group(3)) == 0:
                out.append(Inst("tconcat", [piece], [whole], {"axis": 0, "_piece": key}))
            elif out and out[-1].op == "tconcat" and out[-1].attrs.get("_piece") == key:
                out[-1].ins.append(piece)
                out[-1].attrs["axis"] = 0 if at[1] == 0 else 1
            else:
                raise self.error(f"{name} continues no concatenation")
            return True
        return False

    def operands(self, rest: str, op: str) -> tuple[list, list, dict, str]:
        """Operand names of ``ins(...)`` and ``outs(...)`` (types are the objects' own), the
        attributes written inside ``ins`` after its first operand, and the attribute text
        after both."""
        groups, inner = {}, {}
        text = rest.strip()
        for key in ("ins", "outs"):
            if text.startswith(key + "("):
                end = _close(text, len(key))
                if end < 0:
                    raise self.error(f"{op}: unbalanced parentheses in {key}(...)")
                names = _split(text[len(key) + 1:end].split(" : ", 1)[0])
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
        if not (text.startswith("{") and _close(text, 0) == len(text) - 1):
            raise self.error(f"expected {{attributes}}, found {text!r}")
        out = {}
        for item in _split(text[1:-1]):
            key, eq, value = (s.strip() for s in item.partition("="))
            if not eq:
                raise self.error(f"attribute {item!r} is not key = value")
            key, value = _unspell(key, value)
            out[key] = value
        return out

    def partition(self, views: list, tiles: list, scope: _Scope) -> tuple:
        """The tensor and offsets of the one partition view of a tload/tstore."""
        if len(views) != 1 or views[0] not in scope.partitions or len(tiles) != 1:
            raise self.error("tload/tstore move one tile from or to one pto.partition_view")
        tile = self.value(tiles[0], scope)
        if not isinstance(tile, Tile):
            raise self.error(f"{tiles[0]} is not a tile")
        return scope.partitions[views[0]]


_STATEMENTS = {
    "scf.for": _Parser.s_for, "scf.if": _Parser.s_if, "scf.while": _Parser.s_while,
    "pto.partition_view": _Parser.s_partition, "pto.tgetval": _Parser.s_getval,
    "pto.make_tensor_view": _Parser.s_misplaced, "pto.alloc_tile": _Parser.s_misplaced,
    "pto.set_ffts": lambda self, op, results, rest, scope, out: None,   # printer-derived
    "pto.get_block_idx": _Parser.s_block_query, "pto.get_block_num": _Parser.s_block_query,
    "arith.constant": _Parser.s_constant, "arith.select": _Parser.s_select,
    "arith.cmpi": _Parser.s_cmp, "arith.cmpf": _Parser.s_cmp,
    **{f"arith.{c}": _Parser.s_cast for c in _CASTS},
}
