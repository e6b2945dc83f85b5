"""How the ``.pto`` text spells a PTO ``Program``: the one vocabulary of both directions.

The printer (``printer.py``) writes with it and the readers (``reader.py``, ``reader_ptoas.py``)
read with it, so a spelling changes in one place: the names the printer gives (hidden
parameters, hoisted constants, ``%<base>.<tag>`` derived names), how scalars, attributes and
flags are written, the line macros for what ``arith`` or PTOAS lacks (each a function of its
names, so the reader recognises one by writing it again and comparing), and the patterns the
readers match statements with. What each PTOAS version spells differently is ``dialect.py``.
"""
from __future__ import annotations

import math
import re

import numpy as np

from ...errors import NotOnChip
from ...language import dtypes as dt
from .dialect import DEFAULT, Dialect
from .isa import PAD_MAX, PAD_ZERO
from .program import Inst, Tile, walk_insts

# -- names the printer gives ---------------------------------------------------------------------

EXECUTED, EXECUTED_TYPE = "%mrgsort_executed", "vector<4xi16>"
EXECUTED_LINE = f"{EXECUTED} = arith.constant dense<0> : {EXECUTED_TYPE}"
GRID_PARAMS = ("pypto_grid0", "pypto_grid1")     # hidden extents of a multi-dimensional grid
FFTS_PARAM = "pypto_ffts"                       # the FFTS base, for cross-core sync


def constant_name(value, ty: str) -> str:
    """The name of a constant the printer hoists to the top of a function (``%c16_i64``)."""
    return f"%c{str(value).replace('-', 'm').replace('.', 'p')}_{ty}"


def derived_base(name: str) -> str:
    """What a printer-derived name ``%<base>.<tag>`` derives from (printer.py's docstring)."""
    return name.split(".", 1)[0]


def tiles_used(body: list, dialect: Dialect = DEFAULT) -> set[str]:
    """Names of the tiles that the instructions of ``body`` (nested ones included) touch, as
    ``dialect`` prints them (not our simulator's own, ``_host_only``)."""
    return {x.name for inst in walk_insts(body)
            if isinstance(inst, Inst) and not inst.attrs.get("_host_only")
            for x in inst.ins + inst.outs + [printed_tmp(inst, dialect)] if isinstance(x, Tile)}


def printed_tmp(inst: Inst, dialect: Dialect):
    """The scratch tile ``inst`` names in ``dialect``'s text, or None (TCI's before 0.57)."""
    if inst.op == "tci" and not dialect.has("tci_tmp"):
        return None
    return inst.attrs.get("tmp")


# -- scalars -------------------------------------------------------------------------------------

CMP_SIGNED = {"lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge", "eq": "eq", "ne": "ne"}
CMP_UNSIGNED = {"lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge", "eq": "eq", "ne": "ne"}
# arith's integers are signless: these read their operands as unsigned (name → mnemonic)
UNSIGNED_INT = {"min": "minui", "max": "maxui", "div": "divui", "floordiv": "divui",
                "mod": "remui", "shr": "shrui"}
CMP_FLOAT = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}


def gm_type(dtype) -> str:
    """A tensor's element type in global memory: a bool is a byte there, and so is a float8
    (A2/A3 loads no f8 tiles: legalize_storage)."""
    return "i8" if dtype == dt.bool_ else "ui8" if dtype.storage_only else dtype.mlir


def scalar_type(dtype) -> str:
    """A scalar's type in ``arith`` (signless)."""
    return signless(dtype.mlir)


def signless(ty: str) -> str:
    """``arith`` takes signless integers only: an unsigned scalar is its bits (ui8 → i8)."""
    return ty[1:] if ty.startswith("ui") else ty


def cast_op(src, dst) -> str:
    """arith's integers are signless: the operation says how to read them (a bool or an
    unsigned source is zero-extended: True is 1, not -1)."""
    unsigned_src = src == dt.bool_ or is_unsigned(src)
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


def mlir_literal(value, ty: str) -> str:
    """``value`` as an ``arith.constant`` literal of type ``ty``: infinities and NaN as
    their bits in hexadecimal; booleans as 1 and 0; a float always with a point (MLIR reads
    ``1e-05`` as the integer 1 followed by an unknown ``e``)."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float) and not math.isfinite(value):
        return SPECIAL_BITS[ty][str(value)]
    text = str(value)
    if isinstance(value, float) and "e" in text and "." not in text:
        text = text.replace("e", ".0e")
    return text


def is_unsigned(dtype) -> bool:
    """An unsigned integer, which ``arith`` holds as the bits of a signless one."""
    return dtype.is_int and not dtype.is_signed


# IEEE bits of the values MLIR has no decimal literal for
SPECIAL_BITS = {
    "f16": {"inf": "0x7C00", "-inf": "0xFC00", "nan": "0x7E00"},
    "bf16": {"inf": "0x7F80", "-inf": "0xFF80", "nan": "0x7FC0"},
    "f32": {"inf": "0x7F800000", "-inf": "0xFF800000", "nan": "0x7FC00000"},
    "f64": {"inf": "0x7FF0000000000000", "-inf": "0xFFF0000000000000",
            "nan": "0x7FF8000000000000"},
}


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


# the integer type of a float's bits
BITS_TYPE = {"f16": "i16", "bf16": "i16", "f32": "i32", "f64": "i64"}


def constant_lines(name: str, value, ty: str) -> list[str]:
    """``name = value`` as PTOAS can lower it. A non-finite float is not one ``arith.constant``:
    PTOAS a56b18c3 writes it as ``-Inf.0f`` / ``NaN.0f``, C++ that no compiler accepts
    (``ArithConstantToEmitC`` in lib/PTO/Transforms/PTOToEmitC.cpp looks for "inf"/"nan" but
    ``APFloat::toString`` spells them "Inf"/"NaN"), and it folds a bitcast of a constant
    back into one. So the bits are chosen by a condition its folder cannot decide (the block
    index below 0: never) and bitcast, which it emits as ``ptoas_bitcast<float>(...)``.
    A float past its type's range is its infinity (``x / 1e6`` of a float16 tile, ``/ 1e39``
    of a float32 one)."""
    if isinstance(value, float) and math.isfinite(value) and ty in SPECIAL_BITS:
        wide = dt.BY_MLIR[ty].rounded(value)
        value = value if math.isfinite(wide) else wide
    if not (isinstance(value, float) and not math.isfinite(value)):
        return [f"{name} = arith.constant {mlir_literal(value, ty)} : {signless(ty)}"]
    ity = BITS_TYPE[ty]
    width = int(ity[1:])
    bits = int(SPECIAL_BITS[ty][str(value)], 16)
    bits -= (1 << width) if bits >> (width - 1) else 0            # arith prints signed
    return [f"{name}.b = arith.constant {bits} : {ity}",
            f"{name}.z = arith.constant 0 : {ity}",
            f"{name}.k = pto.get_block_idx",
            f"{name}.k0 = arith.constant 0 : i64",
            f"{name}.n = arith.cmpi slt, {name}.k, {name}.k0 : i64",
            f"{name}.s = arith.select {name}.n, {name}.z, {name}.b : {ity}",
            f"{name} = arith.bitcast {name}.s : {ity} to {ty}"]


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


# -- attributes ----------------------------------------------------------------------------------

ROUND_MODES = {"none": "NONE", "rint": "RINT", "round": "ROUND", "floor": "FLOOR",
               "ceil": "CEIL", "trunc": "TRUNC", "odd": "ODD"}
ATOMIC_TYPES = {"add": "atomic_add", "max": "atomic_max", "min": "atomic_min"}

# attributes the dialect wants inside ``ins(...)``, after the last operand: op → Program keys
INNER_ATTRS = {"tcvt": ("rmode", "sat"), "tcmp": ("cmp",), "tcmps": ("cmp",)}

# Program attribute → (key in the text, spelling of the value)
ATTR_SPELLING = {
    "rmode": ("rmode", lambda v: f"#pto<round_mode {ROUND_MODES[v]}>"),
    "cmp": ("cmpMode", lambda v: f"#pto<cmp {v}>"),
    # TCVT's SaturationMode (ON clamps a float → int8/int16 conversion that would wrap)
    "sat": ("sat_mode", lambda v: f"#pto<saturation_mode {'ON' if v else 'OFF'}>"),
    "atomic": ("atomicType", lambda v: f"#pto<atomic_type {ATOMIC_TYPES[v]}>"),
    # a store from L0C through the FIX pipe's ReLU (TSTORE<..., ReluPreMode::NormalRelu>)
    "relu": ("reluPreMode", lambda v: f"#pto<relu_pre_mode {'normal_relu' if v else 'no_relu'}>"),
}


def attr_text(key: str, value) -> str:
    """``key = value`` as the dialect spells the attribute."""
    text_key, spell = ATTR_SPELLING.get(key, (key, str))
    return f"{text_key} = {spell(value)}"


def inner_text(op: str, attrs: dict) -> str:
    """`` {key = value, ...}`` of ``op``'s attributes the dialect wants inside ``ins(...)``
    (``INNER_ATTRS``), taken out of ``attrs``; or nothing."""
    inner = {k: attrs.pop(k) for k in INNER_ATTRS.get(op, ()) if k in attrs}
    return " {" + ", ".join(attr_text(k, v) for k, v in inner.items()) + "}" if inner else ""


def attrs_text(attrs: dict) -> str:
    """`` {key = value, ...}`` after an instruction, or nothing."""
    attrs = {k: v for k, v in attrs.items() if not k.startswith("_")}   # host-only hints
    if not attrs:
        return ""
    return " {" + ", ".join(attr_text(k, v) for k, v in attrs.items()) + "}"


_ATTR_KEYS = {text_key: key for key, (text_key, _) in ATTR_SPELLING.items()}
_ATTR_VALUES = {"rmode": {v: k for k, v in ROUND_MODES.items()},
                "atomic": {v: k for k, v in ATOMIC_TYPES.items()},
                "relu": {"normal_relu": True, "no_relu": False},
                "sat": {"ON": True, "OFF": False}}


def unspell_attr(text_key: str, text: str) -> tuple[str, object]:
    """(Program key, value) of an attribute the printer spelled (ATTR_SPELLING)."""
    if text_key == "maskPattern":       # TGATHER's (printer.sort_inst)
        m = re.fullmatch(r"#pto\.mask_pattern<(\w+)>", text.strip())
        if m is not None:
            return "pattern", m.group(1)
    key = _ATTR_KEYS.get(text_key, text_key)
    if key in ATTR_SPELLING:
        m = re.fullmatch(r"#pto<\w+ (\w+)>", text.strip())
        if m is not None:
            word = m.group(1)
            return key, _ATTR_VALUES.get(key, {}).get(word, word)
    return key, literal(text)


# -- synchronisation -----------------------------------------------------------------------------

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


# -- reading: statement patterns, lists, literals and the inverses of the spellings above -------

SSA_NAME = r"%[^\s,():\[\]{}=<>]+"              # an SSA name as the printer writes them
_N = SSA_NAME
DTYPES = {d.mlir: d for d in dt.ALL}
STATEMENT = re.compile(rf"(?:(?P<res>{_N}(?:, {_N})*) = )?(?P<op>[A-Za-z_][\w.]*)(?P<rest>.*)")
MODULE_HEAD = re.compile(r'module(?: attributes \{"pto\.device-spec" = "([^"]*)"\})? \{')
FUNC_HEAD = re.compile(r"func\.func @([\w$.]+)\((.*)\)(?: attributes \{(.*)\})? \{")
KERNEL_KIND = re.compile(r"pto\.kernel_kind = #pto\.kernel_kind<(\w+)>")
CONSTANT = re.compile(rf"({_N}) = arith\.constant (\S+) : (\w+)")
TENSOR_VIEW = re.compile(rf"({_N}) = pto\.make_tensor_view ({_N}), shape = \[(.*)\], "
                         rf"strides = \[(.*?)\](?: \{{layout = #pto\.layout<(nd|nz)>\}})? : "
                         rf"!pto\.tensor_view<.*>")
# a view's explicit layout attribute → the PyPTO layout it marks (print_windows.tensor_view);
# an explicit nd on a 5-D view is an NC1HWC0 tensor (an ND one has at most 4 axes)
VIEW_LAYOUTS = {None: "ND", "nz": "NZ", "nd": "ND"}
ALLOC_TILE = re.compile(rf"({_N}) = pto\.alloc_tile(?: addr = ({_N}))?"
                        rf"(?: valid_row = ({_N}) valid_col = ({_N}))? : (!pto\.tile_buf<.*>)")
# the printer's index casts are value-preserving: an operand's index, a while result's copy
# the block count and index a GM workspace's view reads (print_windows.workspace_view)
WORKSPACE_BLOCK = re.compile(rf"%\w+\.(?:nb|bk) = pto\.get_block_(?:num|idx)")
INDEX_CAST = re.compile(rf"({_N}) = arith\.index_cast ({_N}) : (?:i\d+|index) to "
                        rf"(?:i\d+|index)")
FOR_HEAD = re.compile(rf"\s*({_N}) = ({_N}) to ({_N}) step ({_N})"
                      rf"(?: iter_args\((.*)\) -> \((.*)\))?(?: : (\w+))? \{{")
IF_HEAD = re.compile(rf"\s*({_N})(?: -> \((.*)\))? \{{")
WHILE_HEAD = re.compile(r"\s*\((.*)\) : \((.*)\) -> \((.*)\) \{")
BLOCK_ARGS = re.compile(r"\^bb\d*\((.*)\):")
PARTITION = re.compile(rf"\s*({_N}), offsets = \[(.*)\], sizes = \[(.*)\] : .* -> .*")
UNARY = re.compile(rf"\s*({_N}) : (\w+) to (\w+)")
BINARY = re.compile(rf"\s*({_N}), ({_N}) : (\w+)")
SELECT = re.compile(rf"\s*({_N}), ({_N}), ({_N}) : (\w+)")
COMPARE = re.compile(rf"\s*(\w+), ({_N}), ({_N}) : (\w+)")
CONDITION = re.compile(r"\((\S+)\)\s*(.*)")
FLAG = re.compile(r"\[<PIPE_(\w+)>, <PIPE_(\w+)>, <EVENT_ID(\d+)>\]")
BARRIER = re.compile(r"\s*#pto\.pipe<PIPE_(\w+)>")
CROSS_CORE = re.compile(r"\s*#pto\.pipe<PIPE_(\w+)>, (\d+)(?: \{ffts_mode = (\d+) : i32\})?")
RESHAPE = re.compile(rf"\s*({_N}) : (!pto\.tile_buf<.*>) -> (!pto\.tile_buf<.*>)")
INT = re.compile(r"-?\d+")
CASTS = ("extf", "truncf", "fptosi", "sitofp", "extsi", "trunci", "extui", "uitofp",
         "fptoui", "bitcast")
CMP_PREDICATES = {v: k for table in (CMP_SIGNED, CMP_UNSIGNED, CMP_FLOAT)
                  for k, v in table.items()}
# integer mnemonics the printer does not form as name + "i" (floats: name + "f")
# (the reader's integers are signless too: an unsigned form reads as its signed name)
INT_NAMES = {"floordivsi": "floordiv", "minsi": "min", "maxsi": "max", "divsi": "div",
             "shrsi": "shr", "shrui": "shr", "shli": "shl", "andi": "and", "ori": "or",
             "xori": "xor", "minui": "min", "maxui": "max", "divui": "div", "remui": "mod"}
UNSIGNED_FORMS = ("shrui", "minui", "maxui", "divui", "remui")
FLOAT_NAMES = {"minimumf": "min", "maximumf": "max"}
CLOSERS = ("}", "} else {", "} do {", "return")


def split_list(text: str, sep: str = ",") -> list[str]:
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


def closing_bracket(text: str, start: int) -> int:
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


def literal(text: str):
    """An attribute or constant value as ``str(value)`` printed it."""
    t = text.strip()
    if t in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[t]
    if INT.fullmatch(t):
        return int(t)
    if t[:1] in "([" and t[-1:] == {"(": ")", "[": "]"}[t[:1]]:
        items = [literal(x) for x in split_list(t[1:-1])]
        return tuple(items) if t[0] == "(" else items
    try:
        return float(t)
    except ValueError:
        return t


def pad_value(kind: int, dtype: dt.dtype):
    """The value a tile's pad field produces (``isa.pad_kind``'s inverse)."""
    if kind == PAD_ZERO or dtype == dt.bool_:
        return 0
    if dtype.is_floating:
        return math.inf if kind == PAD_MAX else -math.inf
    info = np.iinfo(dtype.to_numpy())
    return int(info.max if kind == PAD_MAX else info.min)


def constant_value(text: str, ty: str):
    """A constant's value: floats written as hexadecimal bits are infinities or NaN."""
    if text.startswith("0x") and ty in SPECIAL_BITS:
        names = {bits: name for name, bits in SPECIAL_BITS[ty].items()}
        if text in names:
            return float(names[text])
    return literal(text)


# the first line of a hoisted non-finite constant (``constant_lines``)
HOISTED_NONFINITE = re.compile(r"(%c(?:m?inf|nan)_(?:f16|bf16|f32|f64))\.b = arith\.constant .*")


def nonfinite_constant(name: str, lines: list[str]):
    """(value, type) when ``lines`` are ``constant_lines`` of a non-finite float."""
    for ty in BITS_TYPE:
        for value in (math.inf, -math.inf, math.nan):
            if constant_lines(name, value, ty) == lines:
                return value, ty
    return None
