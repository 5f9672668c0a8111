"""Float formats and exact rounding, independent of the host's rounding mode.

Every rounding the semantics need reduces to `round_pack`: a value m * 2^e (m an unsigned
64-bit integer) rounded into a format in one of rn, rna, rz, rm, rp, in integer arithmetic.
LLVM on x86 ignores the rounding argument of constrained intrinsics, and integer rounding is
target-independent (it works unchanged on AMDGPU). Rounding an f64 value to nearest into f32,
f16 or bf16, the common case, takes shorter paths with the same results (`narrow`).

Arithmetic in a narrow format (f32 with a directed mode, f16, bf16) is computed in f64 as the
round-to-nearest result s plus the sign of its exact error (from TwoSum / fma remainders),
folded into a round-to-odd f64 value (`odd_f64`); rounding that to the narrow format is then
exact, because f64 carries more than 2p+1 bits of the narrow precision p. f64 arithmetic with
a directed mode steps the round-to-nearest result by one ulp when the error points that way.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from llvmlite import ir

from zluda_py.compiler.lanes import F32, F64, I64, Lanes


@dataclass(frozen=True)
class Fmt:
    name: str
    ebits: int
    mbits: int
    has_inf: bool = True
    nan: int = 0          # the canonical NaN pattern PTX arithmetic produces
    storage: int = 0      # width of the PTX operand holding one value
    shift: int = 0        # tf32 lives in the top 19 bits of an f32 pattern

    @property
    def bias(self) -> int:
        return (1 << (self.ebits - 1)) - 1

    @property
    def emin(self) -> int:
        return 1 - self.bias

    @property
    def total(self) -> int:
        return 1 + self.ebits + self.mbits

    @property
    def inf_bits(self) -> int:
        return ((1 << self.ebits) - 1) << self.mbits

    @property
    def max_bits(self) -> int:
        """Largest finite magnitude (e4m3 has no infinity: 0x7e, because 0x7f is NaN)."""
        return self.inf_bits - 1 if self.has_inf else (1 << (self.total - 1)) - 2


F64_FMT = Fmt("f64", 11, 52, nan=0x7FFFFFFFFFFFFFFF, storage=64)
F32_FMT = Fmt("f32", 8, 23, nan=0x7FFFFFFF, storage=32)
F16_FMT = Fmt("f16", 5, 10, nan=0x7FFF, storage=16)
BF16_FMT = Fmt("bf16", 8, 7, nan=0x7FFF, storage=16)
TF32_FMT = Fmt("tf32", 8, 10, nan=0x7FFFE000, storage=32, shift=13)  # the low 13 bits stay clear
E4M3_FMT = Fmt("e4m3", 4, 3, has_inf=False, nan=0x7F, storage=8)
E5M2_FMT = Fmt("e5m2", 5, 2, nan=0x7F, storage=8)
FMTS = {f.name: f for f in (F64_FMT, F32_FMT, F16_FMT, BF16_FMT, TF32_FMT, E4M3_FMT, E5M2_FMT)}

MODES = ("rn", "rna", "rz", "rm", "rp")


def _i64(L: Lanes, like: ir.Value, v: int) -> ir.Constant:
    return L.like(like, v, I64)


def round_pack(L: Lanes, sign: ir.Value, m: ir.Value, e: ir.Value, fmt: Fmt, mode: str,
               satfinite: bool = False) -> ir.Value:
    """Round (-1)^sign * m * 2^e into `fmt` with `mode`; i64 lanes holding the format's bits.

    m is unsigned; e signed. Overflow gives inf or the largest finite value as IEEE directs
    (always the largest finite with satfinite; NaN for formats without infinity).
    """
    b = L.b
    c = lambda v: _i64(L, m, v)  # noqa: E731
    zero = b.icmp_unsigned("==", m, c(0))
    lz = L.intrinsic("ctlz", m.type, [m, ir.Constant(ir.IntType(1), 0)])
    big_e = b.sub(b.add(e, c(63)), lz)                       # floor(log2(value))
    t = b.select(b.icmp_signed("<", big_e, c(fmt.emin)), c(fmt.emin), big_e)
    shift = b.sub(b.sub(t, c(fmt.mbits)), e)                  # quantum exponent minus e
    left = b.icmp_signed("<=", shift, c(0))
    far = b.icmp_signed(">=", shift, c(64))
    sh = b.select(left, c(0), b.select(far, c(63), shift))
    k = b.select(far, c(0), b.lshr(m, sh))
    neg_sh = b.sub(c(0), shift)
    k = b.select(left, b.shl(m, b.select(b.icmp_signed(">", neg_sh, c(63)), c(63), neg_sh)), k)
    rem = b.and_(m, b.sub(b.shl(c(1), sh), c(1)))
    half = b.lshr(b.shl(c(1), sh), c(1))
    at64 = b.icmp_signed("==", shift, c(64))
    top = c(1 << 63)
    gt = b.select(far, b.and_(at64, b.icmp_unsigned(">", m, top)),
                  b.and_(b.icmp_unsigned(">", rem, half), b.not_(left)))
    eq = b.select(far, b.and_(at64, b.icmp_unsigned("==", m, top)),
                  b.and_(b.icmp_unsigned("==", rem, half), b.icmp_unsigned("!=", rem, c(0))))
    inexact = b.select(far, b.not_(zero), b.icmp_unsigned("!=", rem, c(0)))
    inexact = b.and_(inexact, b.not_(left))
    if mode == "rn":
        up = b.or_(gt, b.and_(eq, b.trunc(k, L.retype(k, ir.IntType(1)))))
    elif mode == "rna":
        up = b.or_(gt, eq)
    elif mode == "rz":
        up = L.like(sign, 0)
    elif mode == "rm":
        up = b.and_(sign, inexact)
    elif mode == "rp":
        up = b.and_(b.not_(sign), inexact)
    else:
        raise ValueError(mode)
    k = b.add(k, b.zext(up, k.type))
    base = b.add(t, c(fmt.bias - 1))
    res = b.add(b.shl(base, c(fmt.mbits)), k)
    res = b.select(zero, c(0), res)
    emax = (fmt.max_bits >> fmt.mbits) - fmt.bias
    over = b.or_(b.icmp_signed(">", t, c(emax)), b.icmp_unsigned(">", res, c(fmt.max_bits)))
    if satfinite:
        huge = c(fmt.max_bits)
    else:
        to_inf = {"rn": True, "rna": True, "rz": False}.get(mode)
        inf = c(fmt.inf_bits if fmt.has_inf else fmt.nan)
        if to_inf is None:
            to_inf_v = sign if mode == "rm" else b.not_(sign)
            huge = b.select(to_inf_v, inf, c(fmt.max_bits))
        else:
            huge = inf if to_inf else c(fmt.max_bits)
    res = b.select(over, huge, res)
    signed_res = b.or_(res, b.shl(b.zext(sign, res.type), c(fmt.total - 1)))
    if not fmt.has_inf and not satfinite:  # an overflow to NaN carries no sign
        return b.select(b.and_(over, b.icmp_unsigned("==", huge, c(fmt.nan))), res, signed_res)
    return signed_res


def narrow(L: Lanes, x: ir.Value, fmt: Fmt, mode: str, satfinite: bool = False) -> ir.Value:
    """Round f64 lanes into `fmt`; the result is an integer of the format's storage width.

    NaN becomes the format's canonical NaN; infinity stays infinite (largest finite with
    satfinite; NaN in formats without infinity).
    """
    b = L.b
    if fmt is F32_FMT and mode == "rn" and not satfinite:
        # IEEE's f64 -> f32 conversion is this rounding (to nearest even, subnormals exact,
        # overflow to infinity) in one instruction instead of round_pack's ~70 vector ones;
        # only its NaN pattern is unspecified, so NaN gets the canonical one as below.
        r = b.bitcast(b.fptrunc(x, L.retype(x, F32)), L.retype(x, ir.IntType(32)))
        return b.select(is_nan_f(L, x), L.like(r, fmt.nan), r)
    if mode == "rn" and not satfinite and fmt.has_inf and not fmt.shift:
        return _nearest(L, x, fmt)
    bits = b.bitcast(x, L.retype(x, I64))
    c = lambda v: _i64(L, bits, v)  # noqa: E731
    sign = b.trunc(b.lshr(bits, c(63)), L.retype(bits, ir.IntType(1)))
    mag = b.and_(bits, c((1 << 63) - 1))
    ef = b.lshr(mag, c(52))
    normal = b.icmp_unsigned("!=", ef, c(0))
    m = b.or_(b.and_(mag, c((1 << 52) - 1)), b.shl(b.zext(normal, mag.type), c(52)))
    e = b.sub(b.select(normal, ef, c(1)), c(1075))
    r = round_pack(L, sign, m, e, fmt, mode, satfinite)
    inf_bits = c(fmt.max_bits if satfinite else fmt.inf_bits if fmt.has_inf else fmt.nan)
    signed_inf = b.or_(inf_bits, b.shl(b.zext(sign, mag.type), c(fmt.total - 1)))
    if not fmt.has_inf and not satfinite:
        signed_inf = inf_bits
    r = b.select(b.icmp_unsigned("==", mag, c(0x7FF << 52)), signed_inf, r)
    if fmt.shift:
        r = b.shl(r, c(fmt.shift))
    r = b.select(b.icmp_unsigned(">", mag, c(0x7FF << 52)), c(fmt.nan), r)
    return L.resize(r, fmt.storage, signed=False)


def _f64_bits(v: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", v))[0]


def _nearest(L: Lanes, x: ir.Value, fmt: Fmt) -> ir.Value:
    """`narrow` with rn into a format with infinity and no shift (f16, bf16), in ~20 vector
    instructions instead of round_pack's ~70: the same rounding of the same f64 value."""
    b = L.b
    bits = b.bitcast(x, L.retype(x, I64))
    c = lambda v: _i64(L, bits, v)  # noqa: E731
    mag = b.and_(bits, c((1 << 63) - 1))
    s = 52 - fmt.mbits
    # Normal results: the exponent rebiased, the fraction rounded to nearest even on the pattern
    # (a carry into the exponent field is the next binade's value).
    t = b.sub(mag, c((1023 - fmt.bias) << 52))
    lsb = b.and_(b.lshr(t, c(s)), c(1))
    normal = b.lshr(b.add(t, b.add(lsb, c((1 << (s - 1)) - 1))), c(s))
    # Subnormal results (|x| < 2^emin): next to 2^(emin - mbits + 52) f64's ulp is the format's
    # quantum, so one f64 addition rounds |x| to nearest even there; the patterns' difference
    # counts quanta (2^mbits of them encode 2^emin, the smallest normal).
    magic = 2.0 ** (fmt.emin - fmt.mbits + 52)
    quanta = b.fadd(b.bitcast(mag, x.type), L.like(x, magic))
    sub = b.sub(b.bitcast(quanta, bits.type), c(_f64_bits(magic)))
    r = b.select(b.icmp_unsigned("<", mag, c(_f64_bits(2.0 ** fmt.emin))), sub, normal)
    # From the largest finite value plus half an ulp on (a tie, its fraction odd), infinity.
    over = 2.0 ** (fmt.bias + 1) - 2.0 ** (fmt.bias - fmt.mbits - 1)
    r = b.select(b.icmp_unsigned(">=", mag, c(_f64_bits(over))), c(fmt.inf_bits), r)
    r = b.or_(r, b.shl(b.lshr(bits, c(63)), c(fmt.total - 1)))
    r = b.select(b.icmp_unsigned(">", mag, c(0x7FF << 52)), c(fmt.nan), r)
    return L.resize(r, fmt.storage, signed=False)


def widen(L: Lanes, v: ir.Value, fmt: Fmt) -> ir.Value:
    """Exact f64 value of `fmt` bits (NaN payloads kept in the top fraction bits, quieted)."""
    b = L.b
    if fmt is F64_FMT:
        return b.bitcast(v, L.retype(v, F64))
    if fmt is F32_FMT:
        return b.fpext(b.bitcast(v, L.retype(v, ir.FloatType())), L.retype(v, F64))
    x = L.zext(v, 64)
    if fmt.shift:
        x = b.lshr(x, _i64(L, x, fmt.shift))
    c = lambda k: _i64(L, x, k)  # noqa: E731
    sign = b.and_(b.lshr(x, c(fmt.total - 1)), c(1))
    ef = b.and_(b.lshr(x, c(fmt.mbits)), c((1 << fmt.ebits) - 1))
    frac = b.and_(x, c((1 << fmt.mbits) - 1))
    top = (1 << fmt.ebits) - 1
    normal_bits = b.or_(b.shl(b.add(ef, c(1023 - fmt.bias)), c(52)), b.shl(frac, c(52 - fmt.mbits)))
    # Subnormals: frac * 2^(emin - mbits), exact in f64.
    sub = b.fmul(b.uitofp(frac, L.retype(x, F64)), L.like(x, 2.0 ** (fmt.emin - fmt.mbits), F64))
    sub_bits = b.bitcast(sub, L.retype(x, I64))
    r = b.select(b.icmp_unsigned("==", ef, c(0)), sub_bits, normal_bits)
    if fmt.has_inf:
        special = b.icmp_unsigned("==", ef, c(top))
        nan_or_inf = b.or_(c(0x7FF << 52), b.shl(frac, c(52 - fmt.mbits)))
        quiet = b.select(b.icmp_unsigned("!=", frac, c(0)), c(1 << 51), c(0))
        r = b.select(special, b.or_(nan_or_inf, quiet), r)
    else:
        is_nan = b.icmp_unsigned("==", b.and_(x, c((1 << (fmt.total - 1)) - 1)), c(fmt.nan))
        r = b.select(is_nan, c(0x7FF8 << 48), r)
    r = b.or_(r, b.shl(sign, c(63)))
    return b.bitcast(r, L.retype(x, F64))


def is_nan_f(L: Lanes, x: ir.Value) -> ir.Value:
    return L.b.fcmp_unordered("uno", x, x)


def two_sum(L: Lanes, a: ir.Value, c: ir.Value) -> tuple[ir.Value, ir.Value]:
    """s = RN(a + c) and the exact error a + c - s (Knuth's TwoSum, branch-free)."""
    b = L.b
    s = b.fadd(a, c)
    cv = b.fsub(s, a)
    av = b.fsub(s, cv)
    return s, b.fadd(b.fsub(a, av), b.fsub(c, cv))


def _step(L: Lanes, s: ir.Value, toward_zero: ir.Value, away: ir.Value) -> ir.Value:
    """Move f64 s one ulp toward zero / away from zero where asked (on the magnitude bits)."""
    b = L.b
    bits = b.bitcast(s, L.retype(s, I64))
    one = L.like(bits, 1)
    bits = b.select(toward_zero, b.sub(bits, one), b.select(away, b.add(bits, one), bits))
    return b.bitcast(bits, s.type)


def error_signs(L: Lanes, s: ir.Value, err: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(error nonzero, error opposite to s, s negative) for a finite s."""
    b = L.b
    zero = L.like(err, 0.0)
    nz = b.fcmp_ordered("!=", err, zero)
    s_neg = b.icmp_signed("<", b.bitcast(s, L.retype(s, I64)), L.like(s, 0, I64))
    err_neg = b.fcmp_ordered("<", err, zero)
    return nz, b.and_(nz, b.xor(err_neg, s_neg)), s_neg


def odd_f64(L: Lanes, s: ir.Value, err: ir.Value) -> ir.Value:
    """Round-to-odd from s = RN(exact) and err = exact - s (only its sign matters)."""
    b = L.b
    nz, opposite, _ = error_signs(L, s, err)
    t = _step(L, s, opposite, L.like(nz, 0))
    bits = b.bitcast(t, L.retype(t, I64))
    bits = b.select(nz, b.or_(bits, L.like(bits, 1, I64)), bits)
    return b.bitcast(bits, s.type)


def directed_f64(L: Lanes, s: ir.Value, err: ir.Value, mode: str, overflow: ir.Value | None = None) -> ir.Value:
    """f64 result in `mode` from s = RN(exact) and err = exact - s.

    `overflow` marks lanes where s is an infinity produced from finite operands: the exact
    value is finite and beyond the largest double, so rz/rm/rp may step back to it.
    """
    if mode in ("rn", None):
        return s
    b = L.b
    nz, opposite, s_neg = error_signs(L, s, err)
    if overflow is not None:
        opposite = b.or_(opposite, overflow)
        nz = b.or_(nz, overflow)
    same = b.and_(nz, b.not_(opposite))
    if mode == "rz":
        return _step(L, s, opposite, L.like(nz, 0))
    if mode == "rp":  # err > 0: s < 0 steps toward zero, s >= 0 away from zero
        want = b.select(s_neg, opposite, same)
        return _step(L, s, b.and_(want, s_neg), b.and_(want, b.not_(s_neg)))
    if mode == "rm":
        want = b.select(s_neg, same, opposite)
        return _step(L, s, b.and_(want, b.not_(s_neg)), b.and_(want, s_neg))
    raise ValueError(mode)
