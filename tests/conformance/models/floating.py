"""Reference models for the floating family (see models/__init__.py): every form of add sub mul
fma mad div rcp sqrt rsqrt sin cos lg2 ex2 tanh min max abs neg copysign testp on float types.

IEEE forms are bit-exact against refs.py's exact Fraction arithmetic (canonical NaN for f32,
f16 and bf16 results; any NaN for f64, whose payload PTX leaves open). .approx and div.full
forms are checked against PTX's documented error bounds by `check_approx`, which the family
test files use as well (one reference per instruction).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from conformance.floatvals import edges, operand_sets, patterns
from conformance.harness import DTYPES
from conformance.models import Case
from conformance.refs import (FORMATS, NAN, Format, Val, decode, encode, flush, floor_log2, is_subnormal, op_exact,
                              reference, saturate, sqrt_odd)

FLOAT_TYPES = frozenset({"f16", "f16x2", "bf16", "bf16x2", "f32", "f64"})
EXACT_ARITH = {"add": 2, "sub": 2, "mul": 2, "fma": 3, "mad": 3, "div": 2, "rcp": 1, "sqrt": 1}
APPROX = frozenset({"sin", "cos", "lg2", "ex2", "tanh", "rsqrt"})
MODES = ("rn", "rz", "rm", "rp")
N_RANDOM = 300  # per form, after the edge cross products: the family tests go deeper


def elem(t: str) -> str:
    return t[:-2] if t.endswith("x2") else t


# --------------------------------------------------------------------------- exact references

def arith_ref(op: str, xs: list[int], e: str, mode: str, ftz: bool, sat: bool = False, relu: bool = False) -> int:
    """add sub mul fma mad div rcp sqrt in rounding mode `mode`; .ftz flushes inputs and result,
    .sat clamps to [0, 1] (NaN to +0), .relu maps negative results to +0 (NaN stays)."""
    f = FORMATS[e]
    r = reference("fma" if op == "mad" else op, xs, f, mode, ftz)
    if sat:
        r = saturate(r, f)
    if relu and r >> (f.total - 1) and r != f.nan:
        r = 0
    return r


def minmax_ref(op: str, a: int, b: int, t: str, nan_mode: bool, xorsign: bool, ftz: bool) -> int:
    """Two-input min/max: -0 < +0; one NaN operand yields the other, two NaNs (or any NaN with
    .NaN) the canonical NaN, on f64 the second operand quieted (measured on NVIDIA H200, driver
    580.159.04: min/max.f64(0x7ff0000000000001, 0xfff0000000000001) = 0xfff8000000000001);
    .xorsign.abs compares |a| |b| and gives the result the xor of the input signs (not to a NaN
    result)."""
    f = FORMATS[t]
    if ftz:
        a, b = flush(a, f), flush(b, f)
    sign = 1 << (f.total - 1)
    s = 0
    if xorsign:
        s, a, b = (a ^ b) & sign, a & ~sign, b & ~sign
    x, y = decode(a, f), decode(b, f)
    if x.kind == NAN or y.kind == NAN:  # the manual's order: NaN rules, then the xor sign
        if t == "f64" and x.kind == NAN and y.kind == NAN:
            return b | 1 << (f.mbits - 1)
        if nan_mode or (x.kind == NAN and y.kind == NAN):
            return f.nan
        return (b if x.kind == NAN else a) | s

    def key(bits: int) -> tuple:  # total order with -0 < +0
        v = decode(bits, f)
        val = (-math.inf if v.neg else math.inf) if v.kind == "inf" else v.v
        return (val, 0 if bits & sign else 1)

    return (min if op == "min" else max)((a, b), key=key) | s


def minmax3_ref(op: str, a: int, b: int, c: int, nan_mode: bool, absolute: bool, ftz: bool) -> int:
    """Three-input min/max on .f32: the two-input rule applied twice, of |a| |b| |c| with .abs."""
    mag = (lambda v: v & 0x7FFFFFFF) if absolute else (lambda v: v)
    kw = dict(nan_mode=nan_mode, xorsign=False, ftz=ftz)
    return minmax_ref(op, minmax_ref(op, mag(a), mag(b), "f32", **kw), mag(c), "f32", **kw)


def absneg_ref(op: str, x: int, f: Format, ftz: bool) -> int:
    """abs/neg on the sign bit; .ftz flushes a subnormal input first. A NaN (PTX: an unspecified
    NaN) comes out as measured on NVIDIA H200, driver 580.159.04: the canonical NaN, on f64 the
    operand quieted with its sign unchanged."""
    if ftz:
        x = flush(x, f)
    if decode(x, f).kind == NAN:
        return x | 1 << (f.mbits - 1) if f is FORMATS["f64"] else f.nan
    sign = 1 << (f.total - 1)
    return x & ~sign if op == "abs" else x ^ sign


def copysign_ref(a: int, b: int, f: Format) -> int:
    """copysign d, a, b: b with a's sign."""
    sign = 1 << (f.total - 1)
    return (a & sign) | (b & ~sign)


def classify_ref(test: str, x: int, f: Format) -> int:
    """testp: whether x is in the class `test` (named classify_ref so pytest does not collect it);
    PTX counts both zeros as normal."""
    v = decode(x, f)
    e = (x >> f.mbits) & ((1 << f.ebits) - 1)
    return int({"finite": v.kind == "fin", "infinite": v.kind == "inf", "number": v.kind != NAN,
                "notanumber": v.kind == NAN, "normal": v.kind == "fin" and (e != 0 or v.is_zero),
                "subnormal": v.kind == "fin" and e == 0 and not v.is_zero}[test])


# --------------------------------------------------------------------------- bounded results

ANY_NAN = "any NaN"
ANY_ZERO = "+0 or -0"
FREE = None  # PTX leaves the result open


@dataclass(frozen=True)
class Near:
    """A finite or overflowing result within tol of value (infinity counts as 2^(emax+1));
    zero_ok: a zero is accepted too (an .ftz-flushed tiny result)."""

    value: Fraction
    tol: Fraction
    zero_ok: bool = False

    def __str__(self) -> str:
        return f"{float(self.value):.9g} +- {float(self.tol):.3g}" + (" or 0" if self.zero_ok else "")


Want = int | str | Near | None


def ulp(v: Fraction, f: Format) -> Fraction:
    """The spacing of f at |v| (the subnormal spacing below the normal range)."""
    e = max(floor_log2(abs(v)), 1 - f.bias) if v else 1 - f.bias
    return Fraction(2) ** (e - f.mbits)


def _inf_value(f: Format) -> Fraction:
    return Fraction(2) ** (f.bias + 1)


def near(v: Fraction, tol: Fraction | None, f: Format, ftz: bool, ulps: int = 0) -> Near:
    """Within tol (or `ulps` ulp) of v; beyond the range every approximation rounds to infinity."""
    top = _inf_value(f)
    v = max(-top, min(top, v))
    tol = ulps * ulp(v, f) if tol is None else tol
    return Near(v, tol, ftz and abs(v) - tol < Fraction(2) ** (1 - f.bias))


def accepts(want: Want, got: int, f: Format, ftz: bool) -> bool:
    if want is FREE:
        return True
    g = decode(got, f)
    if isinstance(want, int):
        return got == want
    if want == ANY_NAN:
        return g.kind == NAN
    if want == ANY_ZERO:
        return g.is_zero
    if g.kind == NAN or (ftz and is_subnormal(got, f)):
        return False
    if g.is_zero and want.zero_ok:
        return True
    gv = (-_inf_value(f) if g.neg else _inf_value(f)) if g.kind == "inf" else g.v
    return abs(gv - want.value) <= want.tol


def _exact_bits(v: Val, f: Format, ftz: bool) -> int:
    r = encode(v, f)
    return flush(r, f) if ftz else r


def _one(f: Format, neg: bool = False) -> int:
    return encode(Val("fin", neg, Fraction(-1 if neg else 1)), f)


def approx_want(opcode: str, e: str, ftz: bool, xs: list[int]) -> Want:
    """What PTX allows for one element of rcp sqrt rsqrt sin cos lg2 ex2 tanh .approx: the
    documented bound around the exact value, exact special values (.ftz: subnormal inputs act
    as zeros, tiny results may flush)."""
    f = FORMATS[e]
    upper = ftz and e == "f64"  # rcp/rsqrt .approx.ftz.f64 read a's upper 32 bits only (PTX)
    (x,) = [decode(flush(v & ~0xFFFFFFFF if upper else v, f) if ftz else v, f) for v in xs]
    # Their results carry 20 fraction bits (the upper word): measured on NVIDIA H200, driver
    # 580.159.04, the exact value truncated there.
    f64_bound = Fraction(2) ** (-19 if upper else -50)
    if x.kind == NAN:
        return ANY_NAN
    if opcode in ("rcp", "sqrt"):
        exact = op_exact(opcode, [x], "rn")
        if exact.kind != "fin" or exact.is_zero:
            return ANY_NAN if exact.kind == NAN else _exact_bits(exact, f, ftz)
        if e == "f64":  # rcp.approx.ftz.f64
            return near(exact.v, abs(exact.v) * f64_bound, f, ftz)
        return near(exact.v, None, f, ftz, ulps=1)  # rcp/sqrt .approx.f32: 1 ulp
    if opcode == "rsqrt":
        if x.is_zero or x.kind == "inf":  # 1/sqrt(+-0) = +-inf, 1/sqrt(+inf) = +0
            return encode(Val("inf", x.neg), f) if x.is_zero else (ANY_NAN if x.neg else 0)
        if x.neg:
            return ANY_NAN
        root = sqrt_odd(x.v)
        bound = f64_bound if e == "f64" else Fraction(2.0 ** -22.9)
        return near(1 / root, bound / root, f, ftz)
    if x.kind == "inf":
        return {"sin": ANY_NAN, "cos": ANY_NAN, "lg2": ANY_NAN if x.neg else f.inf,
                "ex2": 0 if x.neg else f.inf, "tanh": _one(f, x.neg)}[opcode]
    xf = float(x.v)
    if x.is_zero and opcode in ("sin", "tanh"):
        return encode(x, f)  # odd functions keep the zero's sign
    if opcode in ("sin", "cos"):
        if abs(xf) > math.pi:  # the bound holds on [-pi, pi]; beyond, only |result| <= 1
            return Near(Fraction(0), Fraction(1))
        return near(Fraction((math.sin if opcode == "sin" else math.cos)(xf)), Fraction(2.0 ** -20.5), f, ftz)
    if opcode == "lg2":
        if x.is_zero:
            return f.inf | (1 << (f.total - 1))
        if x.neg:
            return ANY_NAN
        exact = math.log2(xf)
        # PTX documents 2^-22.6 absolute on [0.5, 2]; over every input there, NVIDIA H200 (driver
        # 580.159.04) errs up to 2^-22.148 (0x3f075fff -> 0xbf6b4f8a, golden/approx_bounds.txt):
        # the hardware's bound is the one kept.
        return near(Fraction(exact), Fraction(2.0 ** -22.14 if 0.5 <= xf <= 2.0 else 2.0 ** -22 * abs(exact)), f, ftz)
    if opcode == "ex2":  # 2 ulp of the format (f32, f16, bf16)
        if x.is_zero:
            return _one(f)
        lim = f.bias + f.mbits + 2  # 2^x beyond the range, or below half the smallest subnormal
        exact = Fraction(2) ** (lim if xf > lim else -lim) if abs(xf) > lim else Fraction(2.0 ** xf)
        bound = near(exact, None, f, ftz, ulps=2)
        # NVIDIA H200 (driver 580.159.04) errs up to 2.055 ulp near the top of a binade
        # (0xbf8a0100 -> 0x3ef28025) and up to 2^-22.73 relative anywhere (golden/approx_bounds.txt):
        # either bound is accepted
        return Near(bound.value, max(bound.tol, abs(exact) * Fraction(2.0 ** -22.7)), bound.zero_ok) if e == "f32" else bound
    if opcode == "tanh":
        exact = Fraction(math.tanh(xf))
        if e == "f32":  # relative 2^-10.987
            return near(exact, Fraction(2.0 ** -10.987) * max(abs(exact), Fraction(2) ** -126), f, ftz)
        return near(exact, None, f, ftz, ulps=2)  # f16 / bf16: 2 ulp of the format
    raise ValueError(opcode)


def div_want(approx: bool, ftz: bool, a: int, b: int) -> Want:
    """div.approx.f32 (a * (1/b): 2 ulp for |b| in [2^-126, 2^126]; for 2^126 < |b| < 2^128,
    NaN if a is infinite, else 0) and div.full.f32 (2 ulp across the full range)."""
    f = FORMATS["f32"]
    if ftz:
        a, b = flush(a, f), flush(b, f)
    x, y = decode(a, f), decode(b, f)
    exact = op_exact("div", [x, y], "rn")
    if exact.kind == NAN:
        return ANY_NAN
    lo, hi = Fraction(2) ** -126, Fraction(2) ** 126
    if approx and y.kind == "fin" and not y.is_zero and not lo <= abs(y.v) <= hi:
        if abs(y.v) < lo:
            return FREE  # a subnormal divisor: PTX bounds nothing
        return ANY_NAN if x.kind == "inf" else ANY_ZERO
    if exact.kind != "fin" or exact.is_zero:
        return _exact_bits(exact, f, ftz)
    return near(exact.v, None, f, ftz, ulps=2)


def bounds_check(text: str, srcs: list[np.ndarray], out: np.ndarray, want: Callable[[list[int]], Want],
                 e: str, ftz: bool) -> None:
    """Assert that every element (each half of a packed type) is one PTX allows."""
    f = FORMATS[e]
    packed = out.dtype == np.uint32 and f.total == 16
    halves = [(0, 0xFFFF), (16, 0xFFFF)] if packed else [(0, (1 << f.total) - 1)]
    bad, first = 0, None
    for i, row in enumerate(zip(*[s.tolist() for s in srcs])):
        for sh, m in halves:
            xs = [(x >> sh) & m for x in row]
            w = want(xs)
            got = (int(out[i]) >> sh) & m
            if not accepts(w, got, f, ftz):
                bad += 1
                first = first or (row, got, w)
    if bad:
        row, got, w = first
        allowed = hex(w) if isinstance(w, int) else str(w)
        raise AssertionError(f"{text}: {bad} of {len(out)} not what PTX allows; first: "
                             f"({', '.join(hex(x) for x in row)}) -> {hex(got)}, allowed {allowed}")


def check_approx(text: str, srcs: list[np.ndarray], out: np.ndarray) -> None:
    """Assert that `out` is what PTX allows for the .approx / .full form `text` over srcs."""
    opcode, *mods = text.split(".")
    t = next(m for m in mods if m in FLOAT_TYPES)
    ftz = "ftz" in mods
    if opcode == "div":
        approx = "approx" in mods
        bounds_check(text, srcs, out, lambda xs: div_want(approx, ftz, *xs), elem(t), ftz)
    else:
        bounds_check(text, srcs, out, lambda xs: approx_want(opcode, elem(t), ftz, xs), elem(t), ftz)


# --------------------------------------------------------------------------- inputs

def _seed(text: str) -> int:
    return zlib.crc32(text.encode())


def pack(cols: list[np.ndarray]) -> list[np.ndarray]:
    """x2 operands: each column in the low halves and, shifted by some rows, in the high halves
    (so every row pairing of the columns also occurs in the high halves)."""
    return [c.astype(np.uint32) | (np.roll(c, 7).astype(np.uint32) << 16) for c in cols]


DOMAINS = {"sin": (-math.pi, math.pi), "cos": (-math.pi, math.pi), "lg2": (1e-30, 1e30), "ex2": (-130.0, 130.0),
           "tanh": (-10.0, 10.0), "rsqrt": (1e-30, 1e30), "rcp": (-1e30, 1e30), "sqrt": (0, 1e30)}


def _approx_inputs(text: str, opcode: str, f: Format) -> np.ndarray:
    """Edges, samples over the documented domain, and random patterns."""
    g = np.random.default_rng(_seed(text))
    lo, hi = DOMAINS[opcode]
    if opcode in ("lg2", "rsqrt", "rcp", "sqrt"):  # log-uniform magnitudes
        span = min(60.0, f.bias * 0.9)
        dom = np.exp2(g.uniform(-span, span, N_RANDOM)) * (np.where(g.random(N_RANDOM) < 0.5, -1, 1) if lo < 0 else 1)
    else:
        dom = g.uniform(max(lo, -f.bias), min(hi, f.bias), N_RANDOM)
    np_t = {64: np.float64, 32: np.float32, 16: np.float16}[f.total]
    if f is FORMATS["bf16"]:
        dom_bits = (dom.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    else:
        dom_bits = dom.astype(np_t).view(DTYPES[f.total])
    return np.concatenate([np.array(edges(f), DTYPES[f.total]), dom_bits, patterns(f, N_RANDOM, _seed(text) + 1)])


# --------------------------------------------------------------------------- the model

def _bits_case(text: str, srcs: list[np.ndarray], t: str, ref: Callable[..., int]) -> Case:
    """Exact expectations from ref (element bits -> bits). Where PTX leaves a NaN's payload open
    (f64 results), any NaN is accepted."""
    e = elem(t)
    if e != "f64":
        return Case(srcs, [_per_element(t, srcs, ref)])
    f = FORMATS[e]

    def want(xs: list[int]) -> Want:
        r = ref(*xs)
        return ANY_NAN if decode(r, f).kind == NAN else r

    return Case(srcs, check=lambda outs: bounds_check(text, srcs, outs[0], want, e, False))


def _per_element(t: str, srcs: list[np.ndarray], fn: Callable[..., int]) -> list[int]:
    rows = zip(*[s.tolist() for s in srcs])
    if not t.endswith("x2"):
        return [fn(*r) for r in rows]
    return [fn(*[x & 0xFFFF for x in r]) | (fn(*[x >> 16 for x in r]) << 16) for r in rows]


def _inputs(text: str, e: str, arity: int, packed: bool) -> list[np.ndarray]:
    cols = operand_sets(FORMATS[e], arity, n=N_RANDOM if arity > 1 else 3 * N_RANDOM, seed=_seed(text) % 10_000)
    return pack(cols) if packed else cols


OPCODES = frozenset(EXACT_ARITH) | APPROX | {"min", "max", "abs", "neg", "copysign", "testp"}


def model(opcode: str, mods: tuple[str, ...]) -> Case | None:
    t = next((m for m in mods if m in FLOAT_TYPES), None)
    if opcode not in OPCODES or t is None:
        return None
    text = ".".join((opcode, *mods))
    e, packed, ftz = elem(t), t.endswith("x2"), "ftz" in mods
    f = FORMATS[e]
    if opcode in EXACT_ARITH and "approx" not in mods and "full" not in mods:
        mode = next((m for m in MODES if m in mods), "rn")
        sat, relu = "sat" in mods, "relu" in mods
        srcs = _inputs(text, e, EXACT_ARITH[opcode], packed)
        return _bits_case(text, srcs, t, lambda *xs: arith_ref(opcode, list(xs), e, mode, ftz, sat, relu))
    if opcode in ("min", "max"):
        nan_mode, xorsign = "NaN" in mods, "xorsign" in mods
        if "abs" in mods and not xorsign:  # three inputs: min{.ftz}{.NaN}.abs.f32 d, a, b, c
            a, b = operand_sets(f, 2, n=N_RANDOM, seed=_seed(text) % 10_000)
            srcs = [a, b, np.roll(b, 11)]
            return _bits_case(text, srcs, t, lambda x, y, z: minmax3_ref(opcode, x, y, z, nan_mode, True, ftz))
        srcs = _inputs(text, e, 2, packed)
        return _bits_case(text, srcs, t, lambda x, y: minmax_ref(opcode, x, y, e, nan_mode, xorsign, ftz))
    if opcode in ("abs", "neg"):  # a NaN input: the NaN NVIDIA hardware gives (absneg_ref)
        srcs = _inputs(text, e, 1, packed)
        return _bits_case(text, srcs, t, lambda x: absneg_ref(opcode, x, f, ftz))
    if opcode in ("copysign", "testp"):
        srcs = _inputs(text, e, 2 if opcode == "copysign" else 1, False)
        if opcode == "copysign":
            return _bits_case(text, srcs, t, lambda x, y: copysign_ref(x, y, f))
        test = next(m for m in mods if m != t)
        return Case(srcs, [_per_element(t, srcs, lambda x: classify_ref(test, x, f))])
    if opcode == "div":  # .approx / .full (f32), with divisors across [2^-126, 2^126] added
        g = np.random.default_rng(_seed(text))
        a = patterns(f, N_RANDOM, _seed(text) + 2)
        b = (g.uniform(1, 2, N_RANDOM) * 2.0 ** g.integers(-126, 127, N_RANDOM)).astype(np.float32).view(np.uint32)
        srcs = [np.concatenate([c, x]) for c, x in zip(_inputs(text, e, 2, False), (a, b))]
    else:
        srcs = [_approx_inputs(text, opcode, f)]
        if packed:
            srcs = pack(srcs)
    return Case(srcs, check=lambda outs: check_approx(text, srcs, outs[0]))
