"""Reference models for cvt (see models/__init__.py), written from the PTX ISA's cvt definition
with exact Python arithmetic (refs.py rounds exactly in every mode):

* int -> int: sign- or zero-extend by the source type, truncate to the destination; .sat clamps
  the source value to the destination's range.
* float -> int: round with .rni/.rzi/.rmi/.rpi, always saturating; NaN gives 0, except from
  .f64 or into a 64-bit integer, where it gives 1 << (n - 1) (the PTX ISA's rule).
* int -> float and float -> float: round once with the named mode (.rn when exact); .ftz
  flushes f32 subnormal inputs (not those of cvt.f16.f32) and results to signed zero; .sat
  clamps to [0, 1] (NaN -> +0); .relu makes negative results +0 (NaN stays NaN); .satfinite
  turns overflow and infinities into the largest finite value of the same sign.
* NaN results, which PTX leaves unspecified, as measured on NVIDIA H200, driver 580.159.04
  (`nan_ref`): to or from .f64 the sign and top payload bits stay and the quiet bit is set;
  bf16 -> f32 keeps the bits (without .ftz); plain cvt.f32.f32 / cvt.f64.f64 move them; otherwise the
  destination's canonical NaN (tf32: 0x7fffe000, fp8: 0x7f), an .ftz f32 source made
  canonical first.
* float -> the same float type with integer rounding: round to an integral value, the sign of a
  zero result following the operand.
* packed pairs: `cvt.f16x2.f32 d, a, b` puts a in the upper half; x2 sources convert per half.
* cvt.pack.sat: d = c << 2n | sat(a) << n | sat(b) (no c for 16-bit halves).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from conformance.floatvals import operand_sets
from conformance.models import Case
from conformance.refs import (BF16, E4M3, E5M2, F16, F32, F64, TF32, Format, Val, decode, encode, fin, floor_log2,
                              flush, saturate)
from conformance.values import as_ints, int_edges, pairs, random_bits

INTS = ("u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64")
FLOATS = {"f16": F16, "bf16": BF16, "f32": F32, "f64": F64}
HALVES = {"f16x2": F16, "bf16x2": BF16}
FP8 = {"e4m3x2": E4M3, "e5m2x2": E5M2}
INT_RND = ("rni", "rzi", "rmi", "rpi")
FLOAT_RND = ("rn", "rna", "rz", "rm", "rp")
PACK = ("u16", "s16", "u8", "s8", "u4", "s4", "u2", "s2")
N_RANDOM = 300  # random patterns per form, on top of the edge values


# --------------------------------------------------------------------------- references

def nbits(t: str) -> int:
    return int(t[1:])


def int_range(t: str) -> tuple[int, int]:
    n = nbits(t)
    return (-(1 << (n - 1)), (1 << (n - 1)) - 1) if t[0] == "s" else (0, (1 << n) - 1)


def clamp(x: int, t: str) -> int:
    lo, hi = int_range(t)
    return min(max(x, lo), hi)


def int_int_ref(x: int, dst: str, sat: bool) -> int:
    """x: the source's value (signed per its type)."""
    return (clamp(x, dst) if sat else x) & ((1 << nbits(dst)) - 1)


def round_int(v: Fraction, mode: str) -> int:
    if mode == "rzi":
        return math.trunc(v)
    if mode == "rmi":
        return math.floor(v)
    if mode == "rpi":
        return math.ceil(v)
    return round(v)  # Fraction rounds half to even


def f2i_ref(x: Val, dst: str, mode: str, src: Format) -> int:
    if x.kind == "nan":
        r = 1 << (nbits(dst) - 1) if src is F64 or nbits(dst) == 64 else 0
    elif x.kind == "inf":
        r = int_range(dst)[0 if x.neg else 1]
    else:
        r = clamp(round_int(x.v, mode), dst)
    return r & ((1 << nbits(dst)) - 1)


def i2f_ref(x: int, df: Format, mode: str, sat: bool = False) -> int:
    r = encode(fin(Fraction(x)), df, mode)
    return saturate(r, df) if sat else r


def nan_ref(x: int, sf: Format, df: Format, ftz: bool = False) -> int:
    """The df NaN that cvt makes of sf NaN pattern x (measured on NVIDIA H200, driver 580.159.04)."""
    if F64 not in (sf, df):
        return x << 16 if (sf, df) == (BF16, F32) and not ftz else df.nan
    sign = x >> (sf.total - 1)
    payload = x & ((1 << sf.mbits) - 1)
    payload = payload << (df.mbits - sf.mbits) if df.mbits > sf.mbits else payload >> (sf.mbits - df.mbits)
    return sign << (df.total - 1) | df.inf | payload | 1 << (df.mbits - 1)


def f2f_ref(x: int, sf: Format, df: Format, mode: str, ftz: bool = False, sat: bool = False, relu: bool = False,
            satfinite: bool = False) -> int:
    if sf is df and sf in (F32, F64) and not (ftz or sat):
        return x  # cvt.f32.f32 / cvt.f64.f64: a move
    if ftz and sf is F32 and df is not F16:
        x = flush(x, sf)
        x = F32.nan if decode(x, sf).kind == "nan" else x
    v = decode(x, sf)
    r = nan_ref(x, sf, df, ftz) if v.kind == "nan" else encode(v, df, mode, satfinite=satfinite)
    if ftz and df is F32:
        r = flush(r, df)
    if sat:
        r = saturate(r, df)
    if relu and decode(r, df).neg and decode(r, df).kind != "nan":
        r = 0
    return r


def round_integral_ref(x: int, f: Format, mode: str, ftz: bool = False, sat: bool = False) -> int:
    if ftz and f is F32:
        x = flush(x, f)
    v = decode(x, f)
    if v.kind == "fin":
        v = fin(Fraction(round_int(v.v, mode)), v.neg)  # the sign of a zero result follows the operand
    r = nan_ref(x, f, f) if v.kind == "nan" and f is F64 else encode(v, f)
    return saturate(r, f) if sat else r


def tf32_ref(x: int, mode: str, satfinite: bool = False, relu: bool = False) -> int:
    """tf32 in the upper 19 bits of a b32, the low 13 bits zero. NaN (measured on NVIDIA H200,
    driver 580.159.04): .rn and .rz give 0x7fffe000; .rna truncates the pattern to those 19 bits
    (a NaN may become an infinity), .rna.satfinite then subtracts one tf32 ulp from it."""
    if decode(x, F32).kind == "nan":
        if mode != "rna":
            return 0x7FFFE000
        return (x & ~0x1FFF) - (0x2000 if satfinite else 0)
    return f2f_ref(x, F32, TF32, mode, satfinite=satfinite, relu=relu) << 13


def pack_ref(a: int, b: int, c: int | None, t: str) -> int:
    """cvt.pack.sat.t: a, b are s32 values; c the b32 bits shifted above them (8/4/2-bit t)."""
    n = nbits(t)
    m = (1 << n) - 1
    r = (clamp(a, t) & m) << n | (clamp(b, t) & m)
    return (r | (c << 2 * n if c is not None else 0)) & 0xFFFFFFFF


# --------------------------------------------------------------------------- inputs

def _bits_of(values: list[Fraction], f: Format) -> list[int]:
    """Values as f's bit patterns (rounded toward zero where f cannot hold them)."""
    return [encode(fin(v), f, "rz") for v in values]


def _halfway_points(df: Format, sf: Format) -> list[int]:
    """sf patterns at, and one sf ulp either side of, midpoints between neighbouring df values:
    in df's subnormals, around 1, and at its overflow threshold, where rounding decides."""
    g = np.random.default_rng(df.total * 64 + df.mbits)
    top = decode(df.max_finite, df).v
    emin, emax = 1 - df.bias, floor_log2(top)
    mids: list[Fraction] = []
    for e in (emin - df.mbits - 1, emin - df.mbits, emin - 1, emin, -1, 0, 1, emax - 1):
        q = Fraction(2) ** (max(e, emin) - df.mbits)  # df's spacing in binade [2^e, 2^(e+1))
        lo_k = math.floor(Fraction(2) ** e / q)
        hi_k = max(lo_k + 1, math.ceil(Fraction(2) ** (e + 1) / q))
        mids += [(int(g.integers(lo_k, hi_k)) + Fraction(1, 2)) * q for _ in range(2)]
    q = Fraction(2) ** (emax - df.mbits)
    mids += [top + q / 2, top + q, top + 2 * q]
    vals = []
    for m in mids:
        step = Fraction(2) ** (max(floor_log2(m), 1 - sf.bias) - sf.mbits)
        vals += [m, m + step, m - step, -m, -m - step]
    return _bits_of(vals, sf)


def _float_inputs(sf: Format, seed: int, df: Format | None = None) -> np.ndarray:
    """Edge patterns, random patterns, and df's rounding midpoints where df is narrower."""
    base = operand_sets(sf, 1, n=N_RANDOM, seed=seed)[0]
    narrower = df is not None and (df.mbits < sf.mbits or df.ebits < sf.ebits)
    extra = _halfway_points(df, sf) if narrower else []
    return np.concatenate([base, np.array(extra, base.dtype)])


def _int_boundaries(sf: Format, dst: str) -> list[int]:
    """Ties between small integers and the neighbourhood of dst's range limits, in sf."""
    lo, hi = int_range(dst)
    vals = [Fraction(k, 2) for k in range(-7, 8)]
    vals += [Fraction(x) + d for x in (lo, hi) for d in (Fraction(-1), Fraction(-1, 2), 0, Fraction(1, 2), 1)]
    vals += [Fraction(hi + 1), Fraction(2 * (hi + 1)), Fraction(lo) * 2]
    return [encode(fin(v), sf, "rn") for v in vals]


def _int_inputs(t: str, seed: int, df: Format | None = None) -> np.ndarray:
    """Edge values, random values, and (for a float destination df) integers at and around
    df's rounding midpoints."""
    n = nbits(t)
    vals = int_edges(n)
    if df is not None:
        top = n - 1 if t[0] == "s" else n
        for k in range(df.mbits + 1, top):
            half = 1 << (k - df.mbits - 1)
            for base in ((1 << k) + half, (1 << k) + 3 * half, (1 << (k + 1)) - half):
                vals += [base - 1, base, base + 1]
                if t[0] == "s":
                    vals += [-base - 1, -base, -base + 1]
    arr = np.array([v & ((1 << n) - 1) for v in vals], random_bits(n, 1).dtype)
    return np.concatenate([arr, random_bits(n, N_RANDOM, seed)])


def _ints_of(a: np.ndarray, t: str) -> list[int]:
    return as_ints(a, nbits(t), t[0] == "s")


# --------------------------------------------------------------------------- the model

def _unary(a: np.ndarray, fn: Callable[[int], int]) -> Case:
    return Case([a], [[fn(int(x)) for x in a.tolist()]])


def _pair_from_f32(dst: str, mode: str, satfinite: bool, relu: bool, seed: int) -> Case:
    """cvt d, a, b with two f32 sources: a to the upper half/byte, b to the lower."""
    df = HALVES.get(dst) or FP8[dst]
    a, b = operand_sets(F32, 2, n=N_RANDOM, seed=seed)
    mids = np.array(_halfway_points(df, F32), np.uint32)
    a, b = np.concatenate([a, mids]), np.concatenate([b, mids[::-1]])
    shift = df.total
    one = {x: f2f_ref(x, F32, df, mode, relu=relu, satfinite=satfinite) for x in set(a.tolist()) | set(b.tolist())}
    return Case([a, b], [[(one[x] << shift) | one[y] for x, y in zip(a.tolist(), b.tolist())]])


def _fp8_from_f16x2(df: Format, mode: str, relu: bool, seed: int) -> Case:
    """cvt.e4m3x2/e5m2x2.f16x2 d, a: each f16 half of a to the byte in the same position."""
    lo = np.concatenate([_float_inputs(F16, seed), np.array(_halfway_points(df, F16), np.uint16)])
    a = lo.astype(np.uint32) | (lo[::-1].astype(np.uint32) << 16)
    one = {x: f2f_ref(x, F16, df, mode, relu=relu, satfinite=True) for x in lo.tolist()}
    return Case([a], [[one[x & 0xFFFF] | one[x >> 16] << 8 for x in a.tolist()]])


def _f16x2_from_fp8(sf: Format, relu: bool) -> Case:
    """cvt.f16x2.e4m3x2/e5m2x2 d, a: each byte of a to the f16 half in the same position; every
    fp8 pattern in each byte."""
    lo = np.arange(256, dtype=np.uint16)
    a = lo | (np.roll(lo[::-1], 3) << 8)
    one = [f2f_ref(x, sf, F16, "rn", relu=relu) for x in range(256)]
    return Case([a], [[one[x & 0xFF] | one[x >> 8] << 16 for x in a.tolist()]])


def model(opcode: str, mods: tuple[str, ...]) -> Case | None:
    if opcode != "cvt":
        return None
    rnd = next((m for m in mods if m in FLOAT_RND or m in INT_RND), None)
    flags = set(mods)
    types = [m for m in mods if m in INTS or m in FLOATS or m in HALVES or m in FP8 or m in PACK
             or m in ("tf32", "b32")]
    seed = sum(map(ord, ".".join(mods)))
    if "pack" in flags:
        t = types[0]
        a, b = pairs(32, n=N_RANDOM, seed=seed)
        sa, sb = as_ints(a, 32, True), as_ints(b, 32, True)
        if t in ("u16", "s16"):
            return Case([a, b], [[pack_ref(x, y, None, t) for x, y in zip(sa, sb)]])
        c = np.roll(b, 5)
        return Case([a, b, c], [[pack_ref(x, y, z, t) for x, y, z in zip(sa, sb, c.tolist())]])
    dst, src = types
    mode = rnd or "rn"
    kw = {k: k in flags for k in ("ftz", "sat", "relu", "satfinite")}
    if dst in HALVES or dst in FP8:
        if src == "f32":
            return _pair_from_f32(dst, mode, kw["satfinite"], kw["relu"], seed)
        if src == "f16x2":
            return _fp8_from_f16x2(FP8[dst], mode, kw["relu"], seed)
        return _f16x2_from_fp8(FP8[src], kw["relu"])
    if dst == "tf32":
        a = _float_inputs(F32, seed, TF32)
        return _unary(a, lambda x: tf32_ref(x, mode, kw["satfinite"], kw["relu"]))
    if dst in INTS and src in INTS:
        a = _int_inputs(src, seed)
        return Case([a], [[int_int_ref(x, dst, kw["sat"]) for x in _ints_of(a, src)]])
    if src in INTS:
        df = FLOATS[dst]
        a = _int_inputs(src, seed, df)
        return Case([a], [[i2f_ref(x, df, mode, kw["sat"]) for x in _ints_of(a, src)]])
    sf = FLOATS[src]
    if dst in INTS:
        a = _float_inputs(sf, seed)
        a = np.concatenate([a, np.array(_int_boundaries(sf, dst), a.dtype)])
        return _unary(a, lambda x: f2i_ref(decode(flush(x, sf) if kw["ftz"] and sf is F32 else x, sf), dst, rnd, sf))
    df = FLOATS[dst]
    if rnd in INT_RND:
        a = _float_inputs(sf, seed)
        a = np.concatenate([a, np.array(_int_boundaries(sf, "s32"), a.dtype)])
        return _unary(a, lambda x: round_integral_ref(x, sf, rnd, kw["ftz"], kw["sat"]))
    return _unary(_float_inputs(sf, seed, df), lambda x: f2f_ref(x, sf, df, mode, **kw))
