"""Floating-point arithmetic on f16 f16x2 bf16 bf16x2 f32 f64: add sub mul fma mad div rcp sqrt
rsqrt, min max abs neg copysign testp, with .ftz .sat .relu and every rounding mode.

Values arrive as integer bits. f32 and f16 arithmetic results that are NaN are the canonical
NaN (0x7fffffff, 0x7fff), as PTX specifies; f64 NaN results are pinned to 0x7fffffffffffffff.
Packed x2 types apply the scalar definition to each 16-bit half.
"""

from __future__ import annotations

from typing import Callable

from llvmlite import ir

from zluda_py.compiler.lanes import F32, F64, I64, Lanes
from zluda_py.compiler.semantics.base import OperandTypes, Semantic, form, register, unsupported
from zluda_py.compiler.semantics.rounding import (BF16_FMT, F16_FMT, F32_FMT, F64_FMT, Fmt, directed_f64,
                                                  error_signs, narrow, odd_f64, round_pack, two_sum,
                                                  widen)
from zluda_py.ptx import ast

FMT = {"f32": F32_FMT, "f64": F64_FMT, "f16": F16_FMT, "bf16": BF16_FMT, "f16x2": F16_FMT, "bf16x2": BF16_FMT}
FLOATS = frozenset(FMT)
DIRECTED = ("rn", "rz", "rm", "rp")


def packed(t: str) -> bool:
    return t.endswith("x2")


def per_element(L: Lanes, t: str, fn: Callable[..., ir.Value], srcs: list[ir.Value]) -> ir.Value:
    """Apply fn (element bits -> element bits) to a scalar type, or to both halves of a packed one."""
    if not packed(t):
        return fn(*srcs)
    halves = [L.split2(s, 16) for s in srcs]
    lo = fn(*[h[0] for h in halves])
    hi = fn(*[h[1] for h in halves])
    return L.join2(lo, hi)


def c_like(L: Lanes, v: ir.Value, value: int) -> ir.Constant:
    return L.like(v, value)


def flush(L: Lanes, bits: ir.Value, fmt: Fmt) -> ir.Value:
    """Subnormals become zero of the same sign (.ftz)."""
    b = L.b
    exp_mask = ((1 << fmt.ebits) - 1) << fmt.mbits
    sign_mask = 1 << (fmt.total - 1)
    sub = b.icmp_unsigned("==", b.and_(bits, c_like(L, bits, exp_mask)), c_like(L, bits, 0))
    return b.select(sub, b.and_(bits, c_like(L, bits, sign_mask)), bits)


def upper_word(L: Lanes, bits: ir.Value) -> ir.Value:
    """f64 bits with the lower 32 zeroed: rcp/rsqrt .approx.ftz.f64 read only the upper word of
    their operand and write only that of their result (PTX; NVIDIA's H200 truncates there)."""
    return L.b.and_(bits, c_like(L, bits, 0xFFFFFFFF00000000))


def is_nan_bits(L: Lanes, bits: ir.Value, fmt: Fmt) -> ir.Value:
    if (fmt is F32_FMT or fmt is F64_FMT) and getattr(bits.type, "element", bits.type).width == fmt.total:
        x = as_float(L, bits, fmt)  # one unordered compare; the same set of bit patterns
        return L.b.fcmp_unordered("uno", x, x)
    mag = L.b.and_(bits, c_like(L, bits, (1 << (fmt.total - 1)) - 1))
    if not fmt.has_inf:  # e4m3: only S.1111.111 is NaN
        return L.b.icmp_unsigned("==", mag, c_like(L, bits, fmt.nan))
    return L.b.icmp_unsigned(">", mag, c_like(L, bits, fmt.inf_bits))


def saturate(L: Lanes, bits: ir.Value, fmt: Fmt) -> ir.Value:
    """.sat: clamp to [0, 1]; NaN and negative values (including -0) become +0."""
    b = L.b
    one = ((1 << (fmt.ebits - 1)) - 1) << fmt.mbits
    neg = b.icmp_unsigned("!=", b.lshr(bits, c_like(L, bits, fmt.total - 1)), c_like(L, bits, 0))
    r = b.select(b.icmp_unsigned(">", bits, c_like(L, bits, one)), c_like(L, bits, one), bits)
    return b.select(b.or_(neg, is_nan_bits(L, bits, fmt)), c_like(L, bits, 0), r)


def relu(L: Lanes, bits: ir.Value, fmt: Fmt) -> ir.Value:
    """.relu: negative values become +0; NaN stays (canonical)."""
    b = L.b
    neg = b.icmp_unsigned("!=", b.lshr(bits, c_like(L, bits, fmt.total - 1)), c_like(L, bits, 0))
    return b.select(b.and_(neg, b.not_(is_nan_bits(L, bits, fmt))), c_like(L, bits, 0), bits)


def canonical_nan(L: Lanes, bits: ir.Value, fmt: Fmt) -> ir.Value:
    """A NaN becomes the format's canonical NaN, unless no use can tell NaNs apart (Lanes)."""
    if L.nan_payload_free:
        return bits
    return L.b.select(is_nan_bits(L, bits, fmt), c_like(L, bits, fmt.nan), bits)


def as_float(L: Lanes, bits: ir.Value, fmt: Fmt) -> ir.Value:
    return L.b.bitcast(bits, L.retype(bits, F32 if fmt is F32_FMT else F64))


def is_finite(L: Lanes, x: ir.Value) -> ir.Value:
    ax = L.intrinsic("fabs", x.type, [x])
    return L.b.fcmp_ordered("<", ax, L.like(x, float("inf")))


# --------------------------------------------------------------------------- exact arithmetic

def is_pos_zero(L: Lanes, x: ir.Value) -> ir.Value:
    return L.b.icmp_unsigned("==", L.b.bitcast(x, L.retype(x, I64)), L.like(x, 0, I64))


def exact_op(L: Lanes, op: str, xs: list[ir.Value], mode: str) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(s, err, overflow) on f64 lanes: s = RN(op(xs)) (with rm's zero sign), sign(err) = sign(exact - s).

    Exact for operands of any format up to f64, except an f64 fma whose product has bits below
    2^-1074 (its error then underflows): `_f64_fma` rescales those.
    overflow marks an infinite s from finite operands (the exact value is finite).
    """
    b = L.b
    zero = L.like(xs[0], 0.0)
    addends = None
    if op in ("add", "sub"):
        x, y = xs
        if op == "sub":
            y = b.fneg(y)
        s, err = two_sum(L, x, y)
        addends = (x, y)
    elif op == "mul":
        x, y = xs
        s = b.fmul(x, y)
        err = L.intrinsic("fma", s.type, [x, y, b.fneg(s)])
    elif op in ("fma", "mad"):
        x, y, z = xs
        s = L.intrinsic("fma", x.type, [x, y, z])
        # Boldo-Muller ErrFma: x*y + z = s + r2 + r3 exactly, |r3| <= ulp(r2)/2.
        u1 = b.fmul(x, y)
        u2 = L.intrinsic("fma", x.type, [x, y, b.fneg(u1)])
        a1, z1 = two_sum(L, z, u2)
        b1, b2 = two_sum(L, u1, a1)
        gamma = b.fadd(b.fsub(b1, s), b2)
        r2, r3 = two_sum(L, gamma, z1)
        err = b.select(b.fcmp_ordered("==", r2, zero), r3, r2)
        addends = (u1, z)
    elif op in ("div", "rcp"):
        x, y = (L.like(xs[0], 1.0), xs[0]) if op == "rcp" else xs
        s = b.fdiv(x, y)
        r = L.intrinsic("fma", s.type, [b.fneg(s), y, x])
        err = b.select(b.fcmp_ordered("<", y, zero), b.fneg(r), r)
        xs = [x, y]
    elif op == "sqrt":
        (x,) = xs
        s = L.intrinsic("sqrt", x.type, [x])
        err = L.intrinsic("fma", s.type, [b.fneg(s), s, x])
    else:
        raise ValueError(op)
    finite_in = is_finite(L, xs[0])
    for x in xs[1:]:
        finite_in = b.and_(finite_in, is_finite(L, x))
    ovf = b.and_(b.not_(is_finite(L, s)), finite_in)
    if op in ("div", "rcp"):  # x/0 is an exact infinity, not an overflow
        ovf = b.and_(ovf, b.fcmp_ordered("!=", xs[1], zero))
    if addends is not None and mode == "rm":
        # An exact zero sum is +0 in every mode but rm, where it is -0 unless both terms are +0.
        x, y = addends
        exact_zero = b.and_(b.fcmp_ordered("==", s, zero), b.fcmp_ordered("==", err, zero))
        keep = b.and_(is_pos_zero(L, x), is_pos_zero(L, y))
        s = b.select(b.and_(exact_zero, b.not_(keep)), L.like(s, -0.0), s)
    return s, err, ovf


def _native_f32(L: Lanes, op: str, xs: list[ir.Value]) -> ir.Value:
    b = L.b
    if op == "add":
        return b.fadd(*xs)
    if op == "sub":
        return b.fsub(*xs)
    if op == "mul":
        return b.fmul(*xs)
    if op in ("fma", "mad"):
        return L.intrinsic("fma", xs[0].type, xs)
    if op == "div":
        return b.fdiv(*xs)
    if op == "rcp":
        return b.fdiv(L.like(xs[0], 1.0), xs[0])
    if op == "sqrt":
        return L.intrinsic("sqrt", xs[0].type, xs)
    raise ValueError(op)


def arith(L: Lanes, op: str, t: str, mode: str, ftz: bool, srcs: list[ir.Value]) -> ir.Value:
    """One correctly rounded IEEE operation on element bits of type t (f32 f64 f16 bf16)."""
    b = L.b
    fmt = FMT[t]
    if ftz:
        srcs = [flush(L, s, fmt) for s in srcs]
    if fmt is F32_FMT and mode == "rn":
        r = b.bitcast(_native_f32(L, op, [as_float(L, s, fmt) for s in srcs]), srcs[0].type)
    elif fmt is F64_FMT and mode != "rn" and op in ("mul", "div", "rcp", "sqrt"):
        r = _f64_scaled(L, op, [as_float(L, x, fmt) for x in srcs], mode)
    elif fmt is F64_FMT and mode != "rn" and op in ("fma", "mad"):
        r = _f64_fma(L, [as_float(L, x, fmt) for x in srcs], mode)
    elif fmt is F64_FMT:
        s, err, ovf = exact_op(L, op, [as_float(L, x, fmt) for x in srcs], mode)
        r = b.bitcast(directed_f64(L, s, err, mode, ovf), srcs[0].type)
    else:
        r = narrow(L, _odd_exact(L, op, fmt, mode, srcs), fmt, mode)
    r = canonical_nan(L, r, fmt)
    if not ftz:
        return r
    # .ftz flushes a result that is tiny after rounding: the exact value rounded in the
    # instruction's mode to the format's precision with an unbounded exponent lies below the
    # smallest normal (measured on NVIDIA H200, driver 580.159.04: mul.rn.ftz.f32 0x3f7ffffe *
    # 0x00800001 = 0x00800000, mul.rm.ftz.f32 of the same = +0). Scaled by 2^-emin, that
    # boundary is 1.0, inside the normal range, where `narrow` rounds as if unbounded; the
    # round-to-odd f64 exact value rounds correctly a second time.
    exact = _odd_exact(L, op, fmt, mode, srcs)
    scaled = narrow(L, b.fmul(exact, L.like(exact, 2.0 ** -fmt.emin)), fmt, mode)
    magnitude = b.and_(scaled, c_like(L, scaled, (1 << (fmt.total - 1)) - 1))
    tiny = b.icmp_unsigned("<", magnitude, c_like(L, scaled, fmt.bias << fmt.mbits))
    return b.select(tiny, b.and_(r, c_like(L, r, 1 << (fmt.total - 1))), r)


# Operations whose f64 result is exact for every pair of operands of the format (f16/bf16
# arithmetic is .rn only): two finite f16 values are integer multiples of 2^-24 below 2^16,
# so their sum or difference is one below 2^41 * 2^-24; their product is an 11 x 11-bit
# significand product (22 bits) times 2^k, k >= -48; a bf16 product is 8 x 8 bits, its
# magnitude between 2^-266 and 2^256: all inside f64's 53 bits and normal range. Infinite or
# NaN operands give the same s, whose TwoSum error is NaN and was ignored. So RN(op) is the
# exact value and its own round-to-odd: no error term is needed.
EXACT_IN_F64 = frozenset({("f16", "add"), ("f16", "sub"), ("f16", "mul"), ("bf16", "mul")})


def _odd_exact(L: Lanes, op: str, fmt: Fmt, mode: str, srcs: list[ir.Value]) -> ir.Value:
    """op on element bits of a format narrower than f64, rounded to odd in f64."""
    xs = [widen(L, x, fmt) for x in srcs]
    if (fmt.name, op) in EXACT_IN_F64:
        x, y = xs
        return L.b.fmul(x, y) if op == "mul" else L.b.fadd(x, L.b.fneg(y) if op == "sub" else y)
    s, err, _ = exact_op(L, op, xs, mode)
    return odd_f64(L, s, err)


def _split_f64(L: Lanes, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """|x| = m * 2^e with m in [2^52, 2^53) for finite nonzero x (subnormals normalized); and sign."""
    b = L.b
    bits = b.bitcast(x, L.retype(x, I64))
    c = lambda v: L.like(bits, v)  # noqa: E731
    sign = b.trunc(b.lshr(bits, c(63)), L.retype(bits, ir.IntType(1)))
    ef = b.and_(b.lshr(bits, c(52)), c(0x7FF))
    frac = b.and_(bits, c((1 << 52) - 1))
    lz = b.sub(L.intrinsic("ctlz", frac.type, [frac, ir.Constant(ir.IntType(1), 0)]), c(11))
    sub = b.icmp_unsigned("==", ef, c(0))
    m = b.select(sub, b.shl(frac, b.select(sub, lz, c(0))), b.or_(frac, c(1 << 52)))
    e = b.select(sub, b.sub(c(-1074), lz), b.sub(ef, c(1075)))
    return sign, m, e


def _unit(L: Lanes, m: ir.Value) -> ir.Value:
    """m * 2^-52 as f64 (m < 2^54): a value in [1, 4)."""
    b = L.b
    return b.fmul(b.uitofp(m, L.retype(m, F64)), L.like(m, 2.0 ** -52, F64))


def _f64_scaled(L: Lanes, op: str, xs: list[ir.Value], mode: str) -> ir.Value:
    """Directed f64 mul/div/rcp/sqrt, exact also for subnormal and overflowing results.

    The operands are normalized to [1, 4), where the operation cannot underflow and its error
    is exact; the result, widened to 54 bits with a sticky bit, then goes through `round_pack`
    with the true exponent.
    """
    b = L.b
    if op == "rcp":
        op, xs = "div", [L.like(xs[0], 1.0), xs[0]]
    plain = b.bitcast(exact_op(L, op, xs, mode)[0], L.retype(xs[0], I64))
    parts = [_split_f64(L, x) for x in xs]
    units = [_unit(L, p[1]) for p in parts]
    if op == "sqrt":
        sign, m, e = parts[0]
        odd = b.trunc(e, L.retype(e, ir.IntType(1)))
        m = b.select(odd, b.shl(m, L.like(m, 1)), m)
        e = b.select(odd, b.sub(e, L.like(e, 1)), e)
        s, err, _ = exact_op(L, "sqrt", [_unit(L, m)], mode)
        scale = b.ashr(b.add(e, L.like(e, 52)), L.like(e, 1))
    else:
        s, err, _ = exact_op(L, op, units, mode)
        (sa, _, ea), (sb, _, eb) = parts
        sign = b.xor(sa, sb)
        scale = b.add(b.add(ea, eb), L.like(ea, 104)) if op == "mul" else b.sub(ea, eb)
    s = b.select(sign, b.fneg(s), s)  # s is positive here; the operands' sign goes on it
    r = _from_scaled(L, s, b.select(sign, b.fneg(err), err), scale, mode)
    # Zeros, infinities and NaNs (in or out of range of the scaling) are exact in plain RN.
    special = L.like(r, 0, ir.IntType(1))
    for x in xs:
        finite_nonzero = b.and_(is_finite(L, x), b.fcmp_ordered("!=", x, L.like(x, 0.0)))
        special = b.or_(special, b.not_(finite_nonzero))
    if op == "sqrt":
        special = b.or_(special, sign)
    return b.select(special, plain, r)


def _compose(L: Lanes, sign: ir.Value, m: ir.Value, e: ir.Value) -> ir.Value:
    """(-1)^sign * m * 2^e as f64, for m in [2^52, 2^53) and a normal result."""
    b = L.b
    bits = b.or_(b.shl(b.add(e, L.like(e, 1075)), L.like(e, 52)), b.and_(m, L.like(m, (1 << 52) - 1)))
    bits = b.or_(bits, b.shl(b.zext(sign, bits.type), L.like(bits, 63)))
    return b.bitcast(bits, L.retype(bits, F64))


def _from_scaled(L: Lanes, s: ir.Value, err: ir.Value, scale: ir.Value, mode: str) -> ir.Value:
    """Directed rounding of (s + err) * 2^scale, s the RN value and err its exact error (only the
    sign of err matters). s -+ ulp(s)/4 stands in for the exact value: both lie strictly between
    the same neighbours of every coarser grid, so they round alike; `round_pack` then rounds
    with the true exponent (exact for subnormal and overflowing results too)."""
    b = L.b
    nz, opposite, _ = error_signs(L, s, err)
    sign, qm, qe = _split_f64(L, s)
    adj = b.select(nz, b.select(opposite, L.like(qm, -1), L.like(qm, 1)), L.like(qm, 0))
    m2 = b.add(b.shl(qm, L.like(qm, 2)), adj)
    return round_pack(L, sign, m2, b.add(b.sub(qe, L.like(qe, 2)), scale), F64_FMT, mode)


def _finite_nonzero(L: Lanes, x: ir.Value) -> ir.Value:
    return L.b.and_(is_finite(L, x), L.b.fcmp_ordered("!=", x, L.like(x, 0.0)))


def _f64_fma(L: Lanes, xs: list[ir.Value], mode: str) -> ir.Value:
    """Directed f64 fma, exact for every input.

    The exact error of an fma (Boldo-Muller) needs the product's error a*b - RN(a*b) to be
    representable, which fails once a*b's low bits fall below 2^-1074. For such tiny products
    the operation is rescaled: a and b become units in [1, 2) (product in [1, 4)) and c is
    scaled by the same power of two, where everything is exact; `_from_scaled` rounds back
    with the true exponent. A c too small to matter next to the product's 106 exact bits is
    replaced by a stand-in of the same sign (2^-248 < any nonzero product bit); a c so large
    that it does not fit after scaling dwarfs the product, which then only decides the direction.
    """
    b = L.b
    a, x, c = xs
    s, err, ovf = exact_op(L, "fma", xs, mode)
    plain = b.bitcast(directed_f64(L, s, err, mode, ovf), L.retype(a, I64))
    (sa, ma, ea), (sx, mx, ex), (sc, mc, ec) = (_split_f64(L, v) for v in xs)
    scale = b.add(b.add(ea, ex), L.like(ea, 104))
    d = b.sub(ec, scale)
    d = b.select(b.icmp_signed("<", d, L.like(d, -300)), L.like(d, -300), d)
    c_zero = b.fcmp_ordered("==", c, L.like(c, 0.0))
    cs = b.select(c_zero, L.like(c, 0.0), _compose(L, sc, mc, d))
    ua = _unit(L, ma)
    ua = b.select(b.xor(sa, sx), b.fneg(ua), ua)
    s2, err2, _ = exact_op(L, "fma", [ua, _unit(L, mx), cs], mode)
    r = _from_scaled(L, s2, err2, scale, mode)
    # An exact cancellation is +0 (-0 in rm): the product is nonzero, so the terms differ in sign.
    zero = L.like(r, 1 << 63 if mode == "rm" else 0)
    r = b.select(b.fcmp_ordered("==", s2, L.like(s2, 0.0)), zero, r)
    # c beyond the scaled range: a*b is far below ulp(c)/2 and only its sign counts.
    sign_p = b.select(b.xor(sa, sx), L.like(c, -1.0), L.like(c, 1.0))
    r = b.select(b.and_(b.not_(c_zero), b.icmp_signed(">", d, L.like(d, 900))),
                 b.bitcast(directed_f64(L, c, sign_p, mode), r.type), r)
    tiny = b.icmp_signed("<", b.add(ea, ex), L.like(ea, -900))
    use = b.and_(tiny, b.and_(b.and_(_finite_nonzero(L, a), _finite_nonzero(L, x)), is_finite(L, c)))
    return b.select(use, r, plain)


def _elem(t: str) -> str:
    return t[:-2] if packed(t) else t


def _check_float_mods(inst: ast.Instruction, t: str, flags: frozenset[str]) -> None:
    e = _elem(t)
    if "ftz" in flags and e not in ("f32", "f16"):
        raise unsupported(inst, ".ftz applies to .f32 and .f16 only")
    if "sat" in flags and e not in ("f32", "f16"):
        raise unsupported(inst, ".sat applies to .f32 and .f16 only")
    if "relu" in flags and e not in ("f16", "bf16"):
        raise unsupported(inst, ".relu applies to .f16 and .bf16 only")


def _finish(L: Lanes, inst: ast.Instruction, t: str, r: ir.Value) -> ir.Value:
    fmt = FMT[t]
    if inst.has("sat"):
        r = saturate(L, r, fmt)
    if inst.has("relu"):
        r = relu(L, r, fmt)
    return r


@register("float", "add", "sub", "mul", "fma", "mad")
class Arith(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        allowed = {*DIRECTED, "ftz", "sat"} | ({"relu"} if inst.opcode in ("fma", "mad") else set())
        f = form(inst, allowed, type_ok=lambda t: t in FLOATS)
        _check_float_mods(inst, f.type, f.flags)
        if _elem(f.type) in ("f16", "bf16") and f.has("rz", "rm", "rp"):
            raise unsupported(inst, "f16/bf16 arithmetic rounds with .rn only")
        if inst.opcode == "mad" and not f.has(*DIRECTED):
            raise unsupported(inst, "mad on floats needs .rn .rz .rm or .rp")
        n = 3 if inst.opcode in ("fma", "mad") else 2
        return OperandTypes([f.type], [f.type] * n)

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        t = inst.types[-1]
        mode = next((m for m in DIRECTED if inst.has(m)), "rn")
        e = _elem(t)
        return [per_element(L, t, lambda *xs: _finish(L, inst, e, arith(L, inst.opcode, e, mode, inst.has("ftz"),
                                                                          list(xs))), srcs)]


@register("float", "div")
@register("any", "rcp", "sqrt")
class DivRcpSqrt(Semantic):
    """IEEE forms (.rn .rz .rm .rp), .full (within 2 ulp: computed exactly) and .approx.

    div.approx.f32 is a * RN(1/b), as PTX defines it, with 1/b flushed (PTX gives 0 for
    2^126 < |b| < 2^128); rcp/sqrt .approx.f32 are computed correctly rounded, which is within
    their documented bounds; rcp.approx.ftz.f64 is 1/a of a's upper word, truncated to one.
    """

    def operands(self, inst: ast.Instruction) -> OperandTypes:
        allowed = {*DIRECTED, "ftz", "approx"} | ({"full"} if inst.opcode == "div" else set())
        f = form(inst, allowed, type_ok=lambda t: t in ("f32", "f64"))
        kinds = [m for m in (*DIRECTED, "approx", "full") if f.has(m)]
        if len(kinds) != 1:
            raise unsupported(inst, "needs exactly one of .approx .full .rn .rz .rm .rp")
        if f.type == "f64" and f.has("full"):
            raise unsupported(inst, "operand type")
        if f.type == "f64" and f.has("approx") and (inst.opcode != "rcp" or not f.has("ftz")):
            raise unsupported(inst, ".approx.f64 exists as rcp.approx.ftz.f64 only")
        if f.type == "f64" and f.has("ftz") and not f.has("approx"):
            raise unsupported(inst, ".ftz applies to .f32 only")
        return OperandTypes([f.type], [f.type] * (2 if inst.opcode == "div" else 1))

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        t = inst.types[-1]
        ftz = inst.has("ftz")
        mode = next((m for m in DIRECTED if inst.has(m)), "rn")
        if inst.opcode == "div" and inst.has("approx"):
            # 1/b flushes even without .ftz: PTX gives 0 (NaN for an infinite a) for
            # 2^126 < |b| < 2^128, where 1/b is subnormal.
            r = flush(L, arith(L, "rcp", t, "rn", ftz, [srcs[1]]), FMT[t])
            return [arith(L, "mul", t, "rn", ftz, [srcs[0], r])]
        if t == "f64" and inst.has("approx"):
            x = flush(L, upper_word(L, srcs[0]), F64_FMT)
            return [flush(L, upper_word(L, arith(L, "rcp", t, "rn", False, [x])), F64_FMT)]
        return [arith(L, inst.opcode, t, mode, ftz, srcs)]


FMIN_TYPES = frozenset({"f32", "f64", "f16", "f16x2", "bf16", "bf16x2"})


def _minmax(L: Lanes, is_max: bool, fmt: Fmt, a: ir.Value, c: ir.Value, nan_mode: bool, xorsign: bool) -> ir.Value:
    """min/max on bits: -0 < +0; one NaN operand yields the other (.NaN: the canonical NaN); two
    give the canonical NaN, on f64 the second quieted (measured on NVIDIA H200, driver 580.159.04)."""
    b = L.b
    sign_mask = c_like(L, a, 1 << (fmt.total - 1))
    if xorsign:
        sgn = b.and_(b.xor(a, c), sign_mask)
        a, c = b.and_(a, b.not_(sign_mask)), b.and_(c, b.not_(sign_mask))
    # Order bit patterns as sign-magnitude integers: flip negatives so the integer order matches.
    def key(v: ir.Value) -> ir.Value:
        neg = b.icmp_unsigned("!=", b.and_(v, sign_mask), c_like(L, v, 0))
        return b.select(neg, b.not_(v), b.or_(v, sign_mask))
    ka, kc = key(a), key(c)
    pick_a = b.icmp_unsigned(">" if is_max else "<", ka, kc)
    r = b.select(pick_a, a, c)
    na, nc = is_nan_bits(L, a, fmt), is_nan_bits(L, c, fmt)
    nan = c_like(L, a, fmt.nan)
    if nan_mode:
        r = b.select(b.or_(na, nc), nan, r)
    else:
        both = b.or_(c, c_like(L, c, 1 << (fmt.mbits - 1))) if fmt is F64_FMT else nan
        r = b.select(na, b.select(nc, both, c), b.select(nc, a, r))
    if xorsign:
        r = b.select(is_nan_bits(L, r, fmt), r, b.or_(r, sgn))
    return r


def _three_inputs(inst: ast.Instruction) -> bool:
    """min/max d, a, b, c (PTX 8.8): told by the operand count, or for a bare form by .abs alone."""
    if inst.operands:
        return len(inst.operands) == 4
    return inst.has("abs") and not inst.has("xorsign")


@register("float", "min", "max")
class FMinMax(Semantic):
    """Two inputs (.NaN .xorsign.abs .ftz), or three on .f32 (.NaN .abs .ftz: of |a| |b| |c|)."""

    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, {"ftz", "NaN", "xorsign", "abs"}, type_ok=lambda t: t in FMIN_TYPES)
        _check_float_mods(inst, f.type, f.flags)
        if _three_inputs(inst):
            if f.type != "f32" or f.has("xorsign"):
                raise unsupported(inst, "three-input min/max is .f32 with .ftz .NaN .abs")
            return OperandTypes([f.type], [f.type] * 3)
        if f.has("xorsign") != f.has("abs"):
            raise unsupported(inst, ".xorsign and .abs go together")
        if f.type == "f64" and f.flags:
            raise unsupported(inst, "modifiers on .f64")
        return OperandTypes([f.type], [f.type, f.type])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        t = inst.types[-1]
        fmt = FMT[t]
        is_max, nan_mode = inst.opcode == "max", inst.has("NaN")

        def one(*xs: ir.Value) -> ir.Value:
            if inst.has("ftz"):
                xs = tuple(flush(L, x, fmt) for x in xs)
            if len(xs) == 3:  # min(min(a, b), c) keeps the NaN rules: only all-NaN gives NaN
                if inst.has("abs"):
                    xs = tuple(L.b.and_(x, c_like(L, x, (1 << (fmt.total - 1)) - 1)) for x in xs)
                r = _minmax(L, is_max, fmt, xs[0], xs[1], nan_mode, False)
                return _minmax(L, is_max, fmt, r, xs[2], nan_mode, False)
            return _minmax(L, is_max, fmt, xs[0], xs[1], nan_mode, inst.has("xorsign"))

        return [per_element(L, t, one, srcs)]


@register("float", "abs", "neg")
class FAbsNeg(Semantic):
    """Sign-bit operations; .ftz flushes subnormal inputs first. A NaN (PTX: an unspecified NaN)
    comes out as NVIDIA hardware gives it: the canonical NaN, on f64 the operand quieted."""

    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, {"ftz"}, type_ok=lambda t: t in FLOATS)
        _check_float_mods(inst, f.type, f.flags)
        return OperandTypes([f.type], [f.type])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        t = inst.types[-1]
        fmt = FMT[t]

        def one(a: ir.Value) -> ir.Value:
            if inst.has("ftz"):
                a = flush(L, a, fmt)
            sign = c_like(L, a, 1 << (fmt.total - 1))
            r = L.b.xor(a, sign) if inst.opcode == "neg" else L.b.and_(a, L.b.not_(sign))
            nan = L.b.or_(a, c_like(L, a, 1 << (fmt.mbits - 1))) if fmt is F64_FMT else c_like(L, a, fmt.nan)
            return L.b.select(is_nan_bits(L, a, fmt), nan, r)

        return [per_element(L, t, one, srcs)]


@register("any", "copysign")
class Copysign(Semantic):
    """copysign d, a, b: b's magnitude with a's sign."""

    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, set(), type_ok=lambda t: t in ("f32", "f64"))
        return OperandTypes([f.type], [f.type, f.type])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        a, c = srcs
        b = L.b
        sign = c_like(L, a, 1 << (FMT[inst.types[-1]].total - 1))
        return [b.or_(b.and_(a, sign), b.and_(c, b.not_(sign)))]


TESTP = ("finite", "infinite", "number", "notanumber", "normal", "subnormal")


@register("any", "testp")
class Testp(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, set(TESTP), type_ok=lambda t: t in ("f32", "f64"))
        if len(f.flags) != 1:
            raise unsupported(inst, "needs one test")
        return OperandTypes(["pred"], [f.type])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        (a,) = srcs
        b = L.b
        fmt = FMT[inst.types[-1]]
        mag = b.and_(a, c_like(L, a, (1 << (fmt.total - 1)) - 1))
        exp = b.lshr(mag, c_like(L, a, fmt.mbits))
        top = (1 << fmt.ebits) - 1
        test = next(m for m in TESTP if inst.has(m))
        cmp = b.icmp_unsigned
        r = {
            "finite": lambda: cmp("<", mag, c_like(L, a, fmt.inf_bits)),
            "infinite": lambda: cmp("==", mag, c_like(L, a, fmt.inf_bits)),
            "number": lambda: cmp("<=", mag, c_like(L, a, fmt.inf_bits)),
            "notanumber": lambda: cmp(">", mag, c_like(L, a, fmt.inf_bits)),
            "normal": lambda: b.and_(cmp("!=", exp, c_like(L, a, top)),  # PTX counts zeros as normal
                                     b.or_(cmp("!=", exp, c_like(L, a, 0)), cmp("==", mag, c_like(L, a, 0)))),
            "subnormal": lambda: b.and_(cmp("==", exp, c_like(L, a, 0)), cmp("!=", mag, c_like(L, a, 0))),
        }[test]()
        return [r]
