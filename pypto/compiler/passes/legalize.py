"""Legalisation: rewrite ops PTO has no instruction for into ops it has.

The rules are data: ``RULES`` maps an op (and, for unary/binary ops, its ``op`` attribute) to a
function that rebuilds it from native ops with an ``Emitter``. Half-precision inputs are
widened to float32 for the whole decomposition and rounded once at the end, as a hand-written
Ascend C kernel would. The reference interpreter runs the IR from before this pass, so it keeps
defining the exact meaning; the decompositions are tested against it within tolerances.
"""
from __future__ import annotations

import math

from ...language import dtypes as dt
from ..elementwise import BINARY, UNARY
from ..ir import Block, Module, Op, ScalarType, TileType, Value, replace_uses
from . import legalize_indexed, legalize_sort, legalize_sort32, legalize_windows

HALF = (dt.float16, dt.bfloat16)


class Emitter:
    """Builds replacement ops in front of the op being legalised."""

    def __init__(self, loc):
        self.ops: list[Op] = []
        self.loc = loc

    def emit(self, name, operands, result_type, attrs=None) -> Value:
        op = Op(name, operands, [result_type], attrs, loc=self.loc)
        self.ops.append(op)
        return op.result

    def const(self, value, dtype) -> Value:
        value = float(value) if dtype.is_floating else (bool(value) if dtype == dt.bool_
                                                        else int(value))
        return self.emit("arith.constant", [], ScalarType(dtype), {"value": value})

    def unary(self, name, x) -> Value:
        return self.emit("tile.unary", [x], x.type, {"op": name})

    def binary(self, name, x, y) -> Value:
        if not isinstance(y, Value):
            y = self.const(y, x.type.dtype)
        result = TileType(dt.bool_, x.type.shape) if BINARY[name].result == "bool" else x.type
        return self.emit("tile.binary", [x, y], result, {"op": name})

    def where(self, cond, x, y) -> Value:
        if not isinstance(y, Value):
            y = self.full(y, x.type)
        if not isinstance(x, Value):
            x = self.full(x, y.type)
        return self.emit("tile.where", [cond, x, y], x.type)

    def full(self, value, ttype) -> Value:
        return self.emit("tile.full", [], ttype, {"value": value})

    def cast(self, x, dtype, rounding=None, saturate=False) -> Value:
        """``saturate``: the chip's TCVT clamps to ``dtype``'s range (SaturationMode::ON),
        for a conversion that would otherwise wrap (``target.WRAPPING_CONVERSIONS``)."""
        attrs = {"dtype": dtype}
        if rounding:
            attrs["rounding"] = rounding
        if saturate:
            attrs["saturate"] = True
        return self.emit("tile.cast", [x], TileType(dtype, x.type.shape), attrs)

    def poly(self, x, coeffs) -> Value:
        """Horner: coeffs[0] + x*(coeffs[1] + x*(...))."""
        acc = self.full(coeffs[-1], x.type)
        for c in reversed(coeffs[:-1]):
            acc = self.binary("add", self.binary("mul", acc, x), c)
        return acc


# -- unary decompositions (x is float32 here) --------------------------------------------------------

def _exp2(e, x):
    return e.unary("exp", e.binary("mul", x, math.log(2.0)))


def _log2(e, x):
    return e.binary("mul", e.unary("log", x), 1.0 / math.log(2.0))


def _sigmoid(e, x):
    return e.unary("reciprocal", e.binary("add", e.unary("exp", e.unary("neg", x)), 1.0))


def _tanh(e, x):
    # 1 - 2 / (exp(2x) + 1): saturates to ±1 without overflow trouble
    t = e.unary("reciprocal", e.binary("add", e.unary("exp", e.binary("mul", x, 2.0)), 1.0))
    return e.binary("sub", e.full(1.0, x.type), e.binary("mul", t, 2.0))


def _gelu(e, x):
    inner = e.binary("mul", e.binary("add", x, e.binary("mul", e.binary(
        "mul", e.binary("mul", x, x), x), 0.044715)), math.sqrt(2.0 / math.pi))
    return e.binary("mul", e.binary("mul", x, 0.5), e.binary("add", _tanh(e, inner), 1.0))


_ERF = (0.0, 0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def _erf(e, x):
    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7)
    ax = e.unary("abs", x)
    t = e.unary("reciprocal", e.binary("add", e.binary("mul", ax, 0.3275911), 1.0))
    p = e.poly(t, list(_ERF))
    y = e.binary("sub", e.full(1.0, x.type),
                 e.binary("mul", p, e.unary("exp", e.unary("neg", e.binary("mul", x, x)))))
    return e.where(e.binary("lt", x, 0.0), e.unary("neg", y), y)


_SIN = [0.0, 1.0, 0.0, -1.0 / 6, 0.0, 1.0 / 120, 0.0, -1.0 / 5040, 0.0, 1.0 / 362880, 0.0,
        -1.0 / 39916800]
# Cody–Waite split of pi in three parts (exact products for |k| < 2**12); beyond that the
# reduction loses accuracy, and the result is clamped to [-1, 1] so it stays a sine.
_PI_PARTS = (3.140625, 9.67502593994140625e-4, 1.509957990978376432e-7)


def _reduce_pi(e, x, offset):
    """k = rint(x/pi - offset) and r = x - (k + offset)·pi with a three-part pi."""
    k = e.cast(e.binary("sub", e.binary("mul", x, 1.0 / math.pi), offset), x.type.dtype, "rint")
    shifted = e.binary("add", k, offset) if offset else k
    r = x
    for part in _PI_PARTS:
        r = e.binary("sub", r, e.binary("mul", shifted, part))
    return k, r


def _sine_of(e, k, r, negate_even):
    """±sin(r), negated when k is odd (xor ``negate_even``), clamped to [-1, 1]."""
    s = e.poly(r, _SIN)
    half = e.cast(e.binary("mul", k, 0.5), k.type.dtype, "floor")
    odd = e.binary("ne", e.binary("sub", k, e.binary("mul", half, 2.0)), 0.0)
    if negate_even:
        odd = e.binary("xor", odd, e.full(True, odd.type))
    s = e.where(odd, e.unary("neg", s), s)
    return e.binary("max", e.binary("min", s, 1.0), -1.0)


def _sin(e, x):
    # x = k·pi + r: sin(x) = (-1)^k sin(r)
    k, r = _reduce_pi(e, x, 0.0)
    return _sine_of(e, k, r, negate_even=False)


def _cos(e, x):
    # x = (k + 1/2)·pi + r: cos(x) = -(-1)^k sin(r)
    k, r = _reduce_pi(e, x, 0.5)
    return _sine_of(e, k, r, negate_even=True)


def _rounding(mode):
    return lambda e, x: e.cast(x, x.type.dtype, mode)


UNARY_RULES = {"exp2": _exp2, "log2": _log2, "sigmoid": _sigmoid, "tanh": _tanh,
               "gelu": _gelu, "erf": _erf, "sin": _sin, "cos": _cos,
               "floor": _rounding("floor"), "ceil": _rounding("ceil")}


# -- binary decompositions ------------------------------------------------------------------------------

# A float32 quotient scaled by this is below the exact one in magnitude, whatever the rounding
# of the conversions, the division and this product (each off by at most 2**-23 relative, the
# chip's division by a few units of the last place): 2**-18 leaves room for ~25 of them.
TOWARD_ZERO = 1.0 - 2.0 ** -18


def int_trunc_divmod(e, a, c):
    """C's ``a / c`` and ``a % c`` (truncating; the remainder has the dividend's sign) of
    integer tiles, exactly, from instructions A2/A3 has: its vector unit divides only floats
    (TDIV and TFMOD static_assert on float types; TREM's int32 form converts to float32 in
    place and loses the low bits beyond 2**24), so the quotient comes from float32 divisions
    that never overshoot, each remainder from an integer multiply-subtract, and one last
    integer correction.

    Why it is exact (docs/pto.md, "int32 // and %"): with
    q1 = trunc(f(a) / f(c) · TOWARD_ZERO), |q1| ≤ |trunc(a / c)| and q1 has the quotient's
    sign, so q1·c and r1 = a - q1·c lie between 0 and a (no overflow, r1 has a's sign), and
    |a/c| - |q1| < 2**31 · 1.125 · 2**-18 + 1 = 9217. A second step on r1 leaves
    |r2| < 2|c| (9217 · 1.125 · 2**-18 < 1), and one compare and subtract of c finishes.
    Int16 and 8-bit quotients are below 2**15 (2**15 · 1.125 · 2**-18 + 1 < 2), so one step
    is enough. ``x / 0`` and ``x % 0`` are 0, ``x / -1`` is -x (wrapping at the minimum),
    ``x % -1`` is 0: those divisors are replaced by 1 and the results chosen after, so the
    chip is never asked to divide by 0."""
    dtype = a.type.dtype
    if not c.is_tile:
        c = e.emit("tile.full", [c], TileType(dtype, a.type.shape))
    zero = e.binary("eq", c, 0)
    minus_one = e.binary("eq", c, -1) if dtype.is_signed else None
    trivial = zero if minus_one is None else e.binary("or", zero, minus_one)
    c = e.where(trivial, 1, c)
    fc = e.cast(c, dt.float32)
    q, r = None, a
    for _ in range(2 if dtype.itemsize >= 4 else 1):
        quotient = e.binary("mul", e.binary("div", e.cast(r, dt.float32), fc), TOWARD_ZERO)
        step = e.cast(quotient, dtype, "trunc")
        r = e.binary("sub", r, e.binary("mul", step, c))
        q = step if q is None else e.binary("add", q, step)
    # |r| < 2|c| with a's sign: one more c where |r| >= |c|
    if dtype.is_signed:
        negative = e.binary("xor", e.binary("lt", a, 0), e.binary("lt", c, 0))
        t = e.where(negative, e.binary("add", r, c), e.binary("sub", r, c))
        # t = sign(a)·(|r| - |c|) and |t| < |c|: negating it cannot overflow
        over = e.binary("ge", e.where(e.binary("lt", a, 0), e.unary("neg", t), t), 0)
        one = e.where(negative, e.full(-1, a.type), e.full(1, a.type))
    else:
        over = e.binary("ge", r, c)
        t = e.binary("sub", r, c)
        one = e.full(1, a.type)
    q = e.binary("add", q, e.where(over, one, e.full(0, a.type)))
    r = e.where(over, t, r)
    if minus_one is not None:                 # (r is already 0 for both trivial divisors)
        q = e.where(minus_one, e.unary("neg", a), q)
    return e.where(zero, e.full(0, a.type), q), r


def _int_divmod(e, a, c):
    """Truncating quotient and remainder, and where the floor's correction applies (a nonzero
    remainder whose sign differs from the divisor's)."""
    q, r = int_trunc_divmod(e, a, c)
    fix = e.binary("and", e.binary("ne", r, 0),
                   e.binary("xor", e.binary("lt", r, 0), e.binary("lt", c, 0)))
    return q, r, fix


def _negative(e, x):
    """x < 0 or x is -0.0 (1/x is -inf): the sign bit, without a bit-cast instruction."""
    return e.binary("or", e.binary("lt", x, 0.0), e.binary("lt", e.unary("reciprocal", x), 0.0))


def _signed_zero(e, negative, like):
    return e.where(negative, e.full(-0.0, like.type), e.full(0.0, like.type))


def _float_divmod(e, a, c):
    """numpy's npy_divmod: floor division consistent with fmod, with its signed zeros."""
    mod = e.binary("fmod", a, c)
    div = e.binary("div", e.binary("sub", a, mod), c)
    fix = e.binary("and", e.binary("ne", mod, 0.0),
                   e.binary("xor", e.binary("lt", mod, 0.0), e.binary("lt", c, 0.0)))
    div = e.where(fix, e.binary("sub", div, 1.0), div)
    mod = e.where(fix, e.binary("add", mod, c), mod)
    mod = e.where(e.binary("eq", mod, 0.0), _signed_zero(e, _negative(e, c), mod), mod)
    fl = e.cast(div, div.type.dtype, "floor")
    fl = e.where(e.binary("gt", e.binary("sub", div, fl), 0.5), e.binary("add", fl, 1.0), fl)
    quotient = e.binary("div", a, c)
    fl = e.where(e.binary("eq", div, 0.0), _signed_zero(e, _negative(e, quotient), fl), fl)
    fl = e.where(e.binary("eq", c, 0.0), quotient, fl)
    return fl, mod


def _floordiv(e, a, c):
    if a.type.dtype.is_floating:
        return _float_divmod(e, a, c)[0]
    q, _, fix = _int_divmod(e, a, c)
    return e.binary("sub", q, e.cast(fix, a.type.dtype))


def _mod(e, a, c):
    if a.type.dtype.is_floating:
        return _float_divmod(e, a, c)[1]
    _, r, fix = _int_divmod(e, a, c)
    return e.where(fix, e.binary("add", r, c), r)


def _pow(e, a, c):
    """exp(c·log|a|) with the sign and special cases of C's pow (and numpy's)."""
    mag = e.unary("exp", e.binary("mul", c, e.unary("log", e.unary("abs", a))))
    finite_c = e.binary("lt", e.unary("abs", c), float(2 ** 24))
    is_int = e.binary("eq", e.cast(c, c.type.dtype, "floor"), c)
    odd = e.binary("and", e.binary("and", is_int, finite_c),
                   e.binary("ne", e.binary("fmod", c, 2.0), 0.0))
    signed = e.where(odd, e.unary("neg", mag), mag)
    finite_a = e.binary("lt", e.unary("abs", a), float("inf"))
    non_int_of_negative = e.binary("and", e.binary("and", finite_a, e.binary("lt", a, 0.0)),
                                   e.binary("xor", is_int, e.full(True, is_int.type)))
    r = e.where(_negative(e, a), signed, mag)
    r = e.where(non_int_of_negative, e.full(float("nan"), a.type), r)
    minus_one_to_inf = e.binary("and", e.binary("eq", a, -1.0),
                                e.binary("eq", e.unary("abs", c), float("inf")))
    one = e.binary("or", e.binary("or", e.binary("eq", c, 0.0), e.binary("eq", a, 1.0)),
                   minus_one_to_inf)
    return e.where(one, 1.0, r)


BINARY_RULES = {"floordiv": _floordiv, "mod": _mod, "pow": _pow}
# whole ops decomposed by a rule of their own module, by op name
OP_RULES = {**legalize_indexed.RULES, **legalize_sort.RULES}


# -- driver -----------------------------------------------------------------------------------------------

def _as_tile(e, v, like):
    """Decompositions work tile-to-tile: a scalar operand becomes a full tile."""
    if v.is_tile:
        return v
    return e.emit("tile.full", [v], like)


def _legalize_op(op: Op, target=None):
    """Replacement ops and the value that replaces op's result, or None to keep op."""
    name = op.name
    if name == "tile.sort" and legalize_sort32.applies(op, target):
        return legalize_sort32.sort(op)       # the chip's sort instructions
    if name in OP_RULES:
        return OP_RULES[name](op)
    if name == "tile.unary" and UNARY[op.attrs["op"]].pto is None:
        rule = UNARY_RULES[op.attrs["op"]]
        return _widened(op, lambda e, x: rule(e, x))
    if name == "tile.binary" and BINARY[op.attrs["op"]].pto is None:
        rule = BINARY_RULES[op.attrs["op"]]
        return _widened(op, rule)
    if name == "tile.binary" and op.attrs["op"] == "div":
        return _divide_by_power_of_two(op)
    if name == "tile.reduce" and op.attrs["op"] in ("argmax", "argmin") and \
            len(op.operands[0].type.shape) == 2 and op.attrs["axis"] == 0:
        e = Emitter(op.loc)
        x = op.operands[0]
        xt = e.emit("tile.transpose", [x], TileType(x.type.dtype, x.type.shape[::-1]))
        rows = e.emit("tile.reduce", [xt], TileType(dt.int32, (x.type.shape[1], 1)),
                      dict(op.attrs, axis=1))
        return e.ops, e.emit("tile.reshape", [rows], op.result.type,
                             {"shape": op.result.type.shape})
    if name == "tile.reduce" and _over_one_element(op):
        # a sum/max/min/prod over an axis of extent 1 is its operand; A2/A3's row
        # reductions would also want an (M, 1) operand row-major, which it is not
        x = op.operands[0]
        if x.type == op.result.type:
            return [], x
        e = Emitter(op.loc)
        return e.ops, e.emit("tile.reshape", [x], op.result.type,
                             {"shape": op.result.type.shape})
    if name == "tile.cumsum":
        return _widened(op, lambda e, x: _scan(e, x, op.attrs.get("reverse", False)))
    if name == "tile.broadcast":
        return _split_broadcast(op)
    return None


def _divide_by_power_of_two(op: Op):
    """``x / c`` for a constant power of two ``c`` is ``x * (1 / c)``, the same bits: both
    round the exact ``x * 2**-k`` once (as LLVM rewrites an fdiv). A2/A3's divide costs the
    vector unit more than a multiply (``pl.sum(t) / N`` of a norm: 64 cycles against 15)."""
    x, c = op.operands
    if not x.type.dtype.is_floating or c.is_tile or c.owner is None or \
            c.owner.name != "arith.constant":
        return None
    value = float(c.owner.attrs["value"])
    if value == 0 or not math.isfinite(value) or math.frexp(value)[0] not in (0.5, -0.5):
        return None
    inverse = 1.0 / value
    if [x.type.dtype.rounded(v) for v in (value, inverse)] != [value, inverse]:
        return None          # c or 1 / c is not a number of x's dtype (c takes it first)
    e = Emitter(op.loc)
    return e.ops, e.binary("mul", x, float(inverse))


def _over_one_element(op: Op) -> bool:
    x = op.operands[0]
    shape = x.type.shape
    return op.attrs["op"] in ("sum", "max", "min", "prod") and len(shape) == 2 and \
        shape[op.attrs["axis"]] == 1 and x.type.dtype == op.result.type.dtype


def _widened(op: Op, rule):
    """Run ``rule`` in float32 when the op's dtype is a half type, rounding once at the end."""
    e = Emitter(op.loc)
    x = op.operands[0]
    out = op.result.type
    work = dt.float32 if x.type.dtype in HALF else x.type.dtype
    args = [e.cast(v, work) if v.type.dtype != work and v.is_tile else v for v in op.operands]
    if len(args) == 2 and not args[1].is_tile:
        c = args[1]
        if c.type.dtype != work:
            c = e.emit("arith.cast", [c], ScalarType(work), {"dtype": work})
        args[1] = _as_tile(e, c, TileType(work, x.type.shape))
    result = rule(e, *args)
    if result.type.dtype != out.dtype:
        result = e.cast(result, out.dtype)
    return e.ops, result


def _scan(e, x, reverse=False):
    """Hillis–Steele scan along the last axis: log2(n) adds of the tile and a copy of it
    shifted by 2^k (towards the end, or towards the start for a ``reverse`` scan). A2/A3
    moves UB tiles in 32-byte steps, so a shift by a few columns is no view of the tile: it
    is transposed (TTRANS), scanned down its rows (a shift by whole rows is), and transposed
    back. A single row is doubled first (its transpose would be an (n, 1) column, which
    A2/A3 keeps as the row's own bytes)."""
    shape = x.type.shape
    dtype = x.type.dtype
    m, n = math.prod(shape[:-1]), shape[-1]
    if n == 1:
        return e.emit("tile.mov", [x], x.type)
    flat = x if len(shape) == 2 else e.emit("tile.reshape", [x], TileType(dtype, (m, n)),
                                             {"shape": (m, n)})
    single = m == 1         # its transpose would be an (n, 1) column: the row's own bytes
    if single:
        m = 2
        flat = e.emit("tile.broadcast", [flat], TileType(dtype, (m, n)), {"shape": (m, n)})
    t = e.emit("tile.transpose", [flat], TileType(dtype, (n, m)))
    shift = 1
    while shift < n:
        zeros = e.full(0, TileType(dtype, (shift, m)))
        start = shift if reverse else 0
        window = e.emit("tile.slice", [t], TileType(dtype, (n - shift, m)),
                        {"starts": (start, 0), "stops": (start + n - shift, m)})
        pieces = [window, zeros] if reverse else [zeros, window]
        shifted = e.emit("tile.concat", pieces, t.type, {"axis": 0})
        t = e.binary("add", t, shifted)
        shift *= 2
    back = e.emit("tile.transpose", [t], TileType(dtype, (m, n)))
    if single:
        back = e.emit("tile.slice", [back], TileType(dtype, (1, n)),
                      {"starts": (0, 0), "stops": (1, n)})
    if back.type.shape == shape:
        return back
    return e.emit("tile.reshape", [back], x.type, {"shape": shape})


def _view2d(shape):
    return (1, 1) if not shape else ((1,) + shape if len(shape) == 1 else shape)


def _split_broadcast(op: Op):
    """PTO expands rows (TROWEXPAND) or columns (TCOLEXPAND), one at a time."""
    src = _view2d(op.operands[0].type.shape)
    dst = _view2d(op.result.type.shape)
    if src[0] == dst[0] or src[1] == dst[1]:
        return None
    e = Emitter(op.loc)
    x = op.operands[0]
    mid_shape = (dst[0], 1) if len(op.result.type.shape) == 2 else None
    if mid_shape is None:
        return None
    mid = e.emit("tile.broadcast", [x], TileType(x.type.dtype, mid_shape), {"shape": mid_shape})
    return e.ops, e.emit("tile.broadcast", [mid], op.result.type,
                         {"shape": op.result.type.shape})


def rewrite_block(block: Block, root: Block, rule) -> bool:
    """Replace every op for which ``rule(op)`` gives (new ops, value) by those ops (nested
    blocks first), the value taking over the op's uses (None: the op had no result)."""
    changed = False
    out = []
    for op in block.ops:
        for b in op.blocks:
            changed |= rewrite_block(b, root, rule)
        replacement = rule(op)
        if replacement is None:
            out.append(op)
            continue
        new_ops, value = replacement
        out.extend(new_ops)
        values = value if isinstance(value, tuple) else (value,) if value is not None else ()
        for result, v in zip(op.results, values):       # a tuple for several results
            replace_uses(root, result, v)
            v.hint = v.hint or result.hint
        changed = True
    block.ops[:] = out
    return changed


def legalize(module: Module) -> Module:
    body = module.kernel.body
    bounds = None if module.facts.get("self_synced") else legalize_windows.Bounds(module)

    def rule(op):
        return (bounds and legalize_windows.rule(op, bounds)) or _legalize_op(op, module.target)
    while rewrite_block(body, body, rule):   # rules may emit ops that need rules
        pass
    return module
