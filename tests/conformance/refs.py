"""Exact reference arithmetic for float formats, written from the IEEE 754 definitions with
Python's Fraction: decode a bit pattern, compute exactly, round once with the requested mode."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class Format:
    ebits: int
    mbits: int
    has_inf: bool = True
    nan: int = 0

    @property
    def bias(self) -> int:
        return (1 << (self.ebits - 1)) - 1

    @property
    def total(self) -> int:
        return 1 + self.ebits + self.mbits

    @property
    def inf(self) -> int:
        return ((1 << self.ebits) - 1) << self.mbits

    @property
    def max_finite(self) -> int:
        return self.inf - 1 if self.has_inf else (1 << (self.total - 1)) - 2


F64 = Format(11, 52, nan=0x7FFFFFFFFFFFFFFF)
F32 = Format(8, 23, nan=0x7FFFFFFF)
F16 = Format(5, 10, nan=0x7FFF)
BF16 = Format(8, 7, nan=0x7FFF)
TF32 = Format(8, 10)
E4M3 = Format(4, 3, has_inf=False, nan=0x7F)
E5M2 = Format(5, 2, nan=0x7F)
FORMATS = {"f64": F64, "f32": F32, "f16": F16, "bf16": BF16}

NAN = "nan"


class Val:
    """A decoded float: kind "nan", "inf" or "fin"; neg; exact value (Fraction) for finite."""

    __slots__ = ("kind", "neg", "v")

    def __init__(self, kind: str, neg: bool, v: Fraction = Fraction(0)) -> None:
        self.kind, self.neg, self.v = kind, neg, v

    @property
    def is_zero(self) -> bool:
        return self.kind == "fin" and self.v == 0


@functools.lru_cache(maxsize=1 << 18)
def decode(bits: int, f: Format) -> Val:
    """The exact value of a bit pattern (cached: the exhaustive tests decode the same 2^16 values)."""
    neg = bool(bits >> (f.total - 1) & 1)
    e = (bits >> f.mbits) & ((1 << f.ebits) - 1)
    m = bits & ((1 << f.mbits) - 1)
    if f.has_inf and e == (1 << f.ebits) - 1:
        return Val("inf", neg) if m == 0 else Val(NAN, neg)
    if not f.has_inf and (bits & ((1 << (f.total - 1)) - 1)) == f.nan:
        return Val(NAN, neg)
    if e == 0:
        mag = Fraction(m) * Fraction(2) ** (1 - f.bias - f.mbits)
    else:
        mag = Fraction((1 << f.mbits) | m) * Fraction(2) ** (e - f.bias - f.mbits)
    return Val("fin", neg, -mag if neg else mag)


def floor_log2(a: Fraction) -> int:
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    return e


def encode(x: Val, f: Format, mode: str = "rn", satfinite: bool = False, sticky: bool = False) -> int:
    """Round x into f with mode (rn rna rz rm rp). `sticky`: x.v is a round-to-odd stand-in."""
    sign = 1 << (f.total - 1)
    if x.kind == NAN:
        return f.nan
    if x.kind == "inf":
        if satfinite:
            return f.max_finite | (sign if x.neg else 0)
        return (f.inf | (sign if x.neg else 0)) if f.has_inf else f.nan
    a = abs(x.v)
    if a == 0:
        return sign if x.neg else 0
    neg = x.v < 0
    e = max(floor_log2(a), 1 - f.bias)
    q = Fraction(2) ** (e - f.mbits)
    k = math.floor(a / q)
    rem = a / q - k
    half = Fraction(1, 2)
    if mode == "rn":
        up = rem > half or (rem == half and k % 2 == 1)
    elif mode == "rna":
        up = rem >= half
    elif mode == "rz":
        up = False
    elif mode == "rm":
        up = neg and rem > 0
    elif mode == "rp":
        up = (not neg) and rem > 0
    else:
        raise ValueError(mode)
    k += up
    bits = ((e + f.bias - 1) << f.mbits) + k  # a carry out of k moves into the exponent
    if bits > f.max_finite:
        to_inf = {"rn": True, "rna": True, "rz": False, "rm": neg, "rp": not neg}[mode]
        if satfinite or not to_inf:
            bits = f.max_finite
        elif not f.has_inf:
            return f.nan
        else:
            bits = f.inf
    return bits | (sign if neg else 0)


def is_subnormal(bits: int, f: Format) -> bool:
    return (bits >> f.mbits) & ((1 << f.ebits) - 1) == 0 and bits & ((1 << f.mbits) - 1) != 0


def flush(bits: int, f: Format) -> int:
    return bits & (1 << (f.total - 1)) if is_subnormal(bits, f) else bits


def fin(v: Fraction, neg_zero: bool = False) -> Val:
    return Val("fin", v < 0 or (v == 0 and neg_zero), v)


def op_exact(op: str, xs: list[Val], mode: str) -> Val:
    """IEEE result of op on decoded operands, as an exact Val (sqrt is returned round-to-odd
    at 200 extra bits, which rounds correctly into any format here)."""
    if any(x.kind == NAN for x in xs):
        return Val(NAN, False)
    if op == "sub":
        y = xs[1]
        return op_exact("add", [xs[0], Val(y.kind, not y.neg, -y.v)], mode)
    if op == "add":
        x, y = xs
        if x.kind == "inf" or y.kind == "inf":
            if x.kind == "inf" and y.kind == "inf" and x.neg != y.neg:
                return Val(NAN, False)
            return x if x.kind == "inf" else y
        s = x.v + y.v
        if s == 0:
            if x.is_zero and y.is_zero and x.neg == y.neg:
                return fin(s, x.neg)
            return fin(s, mode == "rm")
        return fin(s)
    if op == "mul":
        x, y = xs
        neg = x.neg != y.neg
        if x.kind == "inf" or y.kind == "inf":
            if x.is_zero or y.is_zero:
                return Val(NAN, False)
            return Val("inf", neg)
        return fin(x.v * y.v, neg)
    if op in ("fma", "mad"):
        x, y, z = xs
        p = op_exact("mul", [x, y], mode)
        if p.kind == NAN:
            return p
        return op_exact("add", [p, z], mode)
    if op == "div":
        x, y = xs
        neg = x.neg != y.neg
        if (x.kind == "inf" and y.kind == "inf") or (x.is_zero and y.is_zero):
            return Val(NAN, False)
        if x.kind == "inf" or y.is_zero:
            return Val("inf", neg)
        if y.kind == "inf":
            return fin(Fraction(0), neg)
        return fin(x.v / y.v, neg)
    if op == "rcp":
        return op_exact("div", [fin(Fraction(1)), xs[0]], mode)
    if op == "sqrt":
        (x,) = xs
        if x.is_zero:
            return x
        if x.neg:
            return Val(NAN, False)
        if x.kind == "inf":
            return x
        return fin(sqrt_odd(x.v))
    raise ValueError(op)


def sqrt_odd(v: Fraction, extra: int = 200) -> Fraction:
    """sqrt(v) rounded to odd at `extra` fractional bits below its leading bit."""
    k = extra - floor_log2(v) // 2
    scaled = v * Fraction(4) ** k
    n = math.floor(scaled)
    r = math.isqrt(n)
    if r * r != scaled:
        r |= 1
    return Fraction(r) / Fraction(2) ** k


def reference(op: str, bits: list[int], f: Format, mode: str = "rn", ftz: bool = False) -> int:
    """Bits of op applied to operand bits in format f, correctly rounded with mode. .ftz flushes
    subnormal inputs, and results that are tiny after rounding: rounded in `mode` to f's
    precision with an unbounded exponent, below the smallest normal (measured on NVIDIA H200,
    driver 580.159.04: mul.rn.ftz.f32 0x3f7ffffe * 0x00800001 = 0x00800000, the exact value
    2^-126 (1 - 2^-46) rounding up to the smallest normal; .rm and .rz give +0;
    0x3f7fffff * 0x00800000 = 2^-126 (1 - 2^-24) exactly, which is tiny: +0)."""
    if ftz:
        bits = [flush(x, f) for x in bits]
    x = op_exact(op, [decode(b, f) for b in bits], mode)
    if ftz and x.kind == "fin" and _tiny_after_rounding(x, f, mode):
        x = fin(Fraction(0), x.neg)
    return encode(x, f, mode)


def _tiny_after_rounding(x: Val, f: Format, mode: str) -> bool:
    """|x| rounded in mode to f's precision, with no lower bound on the exponent, is below the
    smallest normal."""
    smallest = Fraction(2) ** (1 - f.bias)
    a = abs(x.v)
    if a >= smallest or a == 0:
        return False
    unit = Fraction(2) ** (floor_log2(a) - f.mbits)
    n, rest = divmod(a, unit)
    up = {"rn": rest > unit / 2 or (rest == unit / 2 and n % 2 == 1), "rz": False,
          "rp": rest > 0 and not x.neg, "rm": rest > 0 and x.neg}[mode]
    return (n + up) * unit < smallest


def saturate(bits: int, f: Format) -> int:
    x = decode(bits, f)
    if x.kind == NAN or x.neg:
        return 0
    one = encode(fin(Fraction(1)), f)
    return one if x.kind == "inf" or x.v > 1 else bits


def to_float(bits: int, f: Format) -> float:
    x = decode(bits, f)
    if x.kind == NAN:
        return math.nan
    if x.kind == "inf":
        return -math.inf if x.neg else math.inf
    return -0.0 if (x.v == 0 and x.neg) else float(x.v)
