"""cvt: every integer pair (with .sat), float<->int with each rounding, float<->float (narrowing
in every mode, exhaustive over 16-bit sources), .ftz .sat .relu .satfinite, tf32, fp8 pairs,
packed halves, and cvt.pack."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from conformance.floatvals import operand_sets
from conformance.refs import E4M3, E5M2, F16, F32, FORMATS, TF32, Val, decode, encode, fin, flush, saturate
from conformance.values import as_ints, check_bits, pairs

INTS = ["u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64"]
ALL16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)


def nbits(t: str) -> int:
    return int(t[1:])


def int_range(t: str) -> tuple[int, int]:
    n = nbits(t)
    return (-(1 << (n - 1)), (1 << (n - 1)) - 1) if t[0] == "s" else (0, (1 << n) - 1)


def fits(src: str, dst: str) -> bool:
    """Every value of src is a value of dst (PTX then has no .sat form: nothing to clamp)."""
    (slo, shi), (dlo, dhi) = int_range(src), int_range(dst)
    return dlo <= slo and shi <= dhi


INT_INT = [(d, s, sat) for d in INTS for s in INTS for sat in (False, True) if not (sat and fits(s, d))]
BF16_8BIT = {"u8", "s8"}  # PTX has no conversion between bf16 and 8-bit integers


@pytest.fixture(scope="module")
def int_int(run):
    cases = {(d, s, sat): (f"cvt{'.sat' if sat else ''}.{d}.{s}", [pairs(nbits(s), n=500)[0]])
             for d, s, sat in INT_INT}
    return cases, run.batch(cases)


@pytest.mark.parametrize("dst,src,sat", INT_INT)
def test_int_int(int_int, dst, src, sat):
    cases, outs = int_int
    text, (a,) = cases[(dst, src, sat)]
    (d,) = outs[(dst, src, sat)]
    lo, hi = int_range(dst)
    exp = []
    for x in as_ints(a, nbits(src), src[0] == "s"):
        if sat:
            x = min(max(x, lo), hi)
        exp.append(x & ((1 << nbits(dst)) - 1))
    check_bits(d, exp, [a], text)


def round_int(v: Fraction, mode: str) -> int:
    if mode == "rzi":
        return math.trunc(v)
    if mode == "rmi":
        return math.floor(v)
    if mode == "rpi":
        return math.ceil(v)
    return round(v)  # Fraction rounds half to even


def f2i_ref(x: Val, dst: str, mode: str) -> int:
    lo, hi = int_range(dst)
    if x.kind == "nan":
        r = 0
    elif x.kind == "inf":
        r = lo if x.neg else hi
    else:
        r = min(max(round_int(x.v, mode), lo), hi)
    return r & ((1 << nbits(dst)) - 1)


F2I = [(s, d, "rzi") for s in ("f16", "bf16", "f32", "f64") for d in INTS if not (s == "bf16" and d in BF16_8BIT)] + \
      [(s, d, m) for s, d in (("f32", "s32"), ("f64", "s64"), ("f16", "u16"), ("bf16", "s32"), ("f32", "u64"))
       for m in ("rni", "rmi", "rpi")]


@pytest.fixture(scope="module")
def f2i(run):
    cases = {}
    for src, dst, mode in F2I:
        f = FORMATS[src]
        a = ALL16 if f.total == 16 else operand_sets(f, 1, n=3000, seed=20)[0]
        cases[(src, dst, mode)] = (f"cvt.{mode}.{dst}.{src}", [a])
    return cases, run.batch(cases, group=12)


@pytest.mark.parametrize("src,dst,mode", F2I)
def test_float_int(f2i, src, dst, mode):
    cases, outs = f2i
    text, (a,) = cases[(src, dst, mode)]
    (d,) = outs[(src, dst, mode)]
    f = FORMATS[src]
    check_bits(d, [f2i_ref(decode(int(x), f), dst, mode) for x in a.tolist()], [a], text)


def test_float_int_ftz(run):
    (a,) = operand_sets(F32, 1, n=2000, seed=21)
    (d,) = run.run("cvt.rpi.ftz.s32.f32", [a])
    check_bits(d, [f2i_ref(decode(flush(int(x), F32), F32), "s32", "rpi") for x in a.tolist()], [a], "ftz")


I2F = [(s, d, "rn") for s in INTS for d in ("f16", "bf16", "f32", "f64") if not (d == "bf16" and s in BF16_8BIT)] + \
      [(s, d, m) for s, d in (("s64", "f32"), ("u64", "f64"), ("s32", "f16"), ("u32", "bf16"), ("s64", "f64"),
                              ("u16", "f16")) for m in ("rz", "rm", "rp")]


@pytest.fixture(scope="module")
def i2f(run):
    cases = {(s, d, m): (f"cvt.{m}.{d}.{s}", [pairs(nbits(s), n=2000)[0]]) for s, d, m in I2F}
    return cases, run.batch(cases)


@pytest.mark.parametrize("src,dst,mode", I2F)
def test_int_float(i2f, src, dst, mode):
    cases, outs = i2f
    text, (a,) = cases[(src, dst, mode)]
    (d,) = outs[(src, dst, mode)]
    f = FORMATS[dst]
    exp = [encode(fin(Fraction(x)), f, mode) for x in as_ints(a, nbits(src), src[0] == "s")]
    check_bits(d, exp, [a], text)


def test_int_float_sat(run):
    a, _ = pairs(32, n=1000)
    (d,) = run.run("cvt.rn.sat.f32.s32", [a])
    check_bits(d, [saturate(encode(fin(Fraction(x)), F32), F32) for x in as_ints(a, 32, True)], [a], "sat")


def sources(src: str) -> np.ndarray:
    f = FORMATS[src]
    return ALL16 if f.total == 16 else operand_sets(f, 1, n=4000, seed=22)[0]


def f2f_ref(x: int, sf, df, mode: str, ftz=False, sat=False, relu=False, satfinite=False) -> int:
    if ftz and sf is F32:
        x = flush(x, sf)
    v = decode(x, sf)
    r = encode(v, df, mode, satfinite=satfinite)
    if ftz and df is F32:
        r = flush(r, df)
    if sat:
        r = saturate(r, df)
    if relu and decode(r, df).neg and decode(r, df).kind != "nan":
        r = 0
    return r


NARROW = [(s, d, m) for s, d in (("f64", "f32"), ("f64", "f16"), ("f64", "bf16"), ("f32", "f16"), ("f32", "bf16"),
                                  ("f16", "bf16"), ("bf16", "f16")) for m in ("rn", "rz", "rm", "rp")]


@pytest.fixture(scope="module")
def narrowed(run):
    cases = {(s, d, m): (f"cvt.{m}.{d}.{s}", [sources(s)]) for s, d, m in NARROW}
    return cases, run.batch(cases, group=8)


@pytest.mark.parametrize("src,dst,mode", NARROW)
def test_float_narrow(narrowed, src, dst, mode):
    cases, outs = narrowed
    text, (a,) = cases[(src, dst, mode)]
    (d,) = outs[(src, dst, mode)]
    sf, df = FORMATS[src], FORMATS[dst]
    check_bits(d, [f2f_ref(int(x), sf, df, mode) for x in a.tolist()], [a], text)


@pytest.mark.parametrize("src,dst", [("f16", "f32"), ("bf16", "f32"), ("f16", "f64"), ("bf16", "f64"), ("f32", "f64")])
def test_float_widen(run, src, dst):
    a = sources(src)
    (d,) = run.run(f"cvt.{dst}.{src}", [a])
    sf, df = FORMATS[src], FORMATS[dst]
    check_bits(d, [f2f_ref(int(x), sf, df, "rn") for x in a.tolist()], [a], f"cvt.{dst}.{src}")


@pytest.mark.parametrize("text,src,dst,mode,kw", [
    ("cvt.rn.ftz.f32.f64", "f64", "f32", "rn", dict(ftz=True)),
    ("cvt.ftz.f64.f32", "f32", "f64", "rn", dict(ftz=True)),
    ("cvt.rz.ftz.sat.f32.f64", "f64", "f32", "rz", dict(ftz=True, sat=True)),
    ("cvt.ftz.sat.f32.f32", "f32", "f32", "rn", dict(ftz=True, sat=True)),
    ("cvt.rn.sat.f16.f32", "f32", "f16", "rn", dict(sat=True)),
    ("cvt.rn.relu.f16.f32", "f32", "f16", "rn", dict(relu=True)),
    ("cvt.rz.relu.bf16.f32", "f32", "bf16", "rz", dict(relu=True)),
    ("cvt.rn.satfinite.f16.f32", "f32", "f16", "rn", dict(satfinite=True)),
])
def test_float_modifiers(run, text, src, dst, mode, kw):
    a = sources(src)
    (d,) = run.run(text, [a])
    check_bits(d, [f2f_ref(int(x), FORMATS[src], FORMATS[dst], mode, **kw) for x in a.tolist()], [a], text)


@pytest.mark.parametrize("t", ["f32", "f64", "f16", "bf16"])
@pytest.mark.parametrize("mode", ["rni", "rzi", "rmi", "rpi"])
def test_round_integral(run, t, mode):
    a = sources(t)
    f = FORMATS[t]
    (d,) = run.run(f"cvt.{mode}.{t}.{t}", [a])
    exp = []
    for x in a.tolist():
        v = decode(x, f)
        if v.kind == "fin":
            r = round_int(v.v, mode)
            v = fin(Fraction(r), v.neg)  # the sign of a zero result follows the operand
        exp.append(encode(v, f))
    check_bits(d, exp, [a], f"cvt.{mode}.{t}.{t}")


@pytest.mark.parametrize("mods,mode,satfinite", [("rna", "rna", False), ("rna.satfinite", "rna", True),
                                                 ("rn", "rn", False), ("rz", "rz", False)])
def test_tf32(run, mods, mode, satfinite):
    (a,) = operand_sets(F32, 1, n=4000, seed=23)
    (d,) = run.run(f"cvt.{mods}.tf32.f32", [a])
    exp = []
    for x in a.tolist():
        v = decode(x, F32)
        exp.append(0x7FFFFFFF if v.kind == "nan" else encode(v, TF32, mode, satfinite=satfinite) << 13)
    check_bits(d, exp, [a], f"cvt.{mods}.tf32.f32")


FP8 = {"e4m3x2": E4M3, "e5m2x2": E5M2}


@pytest.mark.parametrize("t", list(FP8))
@pytest.mark.parametrize("relu", [False, True])
def test_fp8_from_f32(run, t, relu):
    a, b = operand_sets(F32, 2, n=2000, seed=24)
    (d,) = run.run(f"cvt.rn.satfinite{'.relu' if relu else ''}.{t}.f32", [a, b])
    f = FP8[t]
    exp = [(f2f_ref(int(x), F32, f, "rn", satfinite=True, relu=relu) << 8)
           | f2f_ref(int(y), F32, f, "rn", satfinite=True, relu=relu) for x, y in zip(a.tolist(), b.tolist())]
    check_bits(d, exp, [a, b], t)


@pytest.mark.parametrize("t", list(FP8))
def test_fp8_from_f16x2(run, t):
    a = ALL16.astype(np.uint32) | (ALL16[::-1].astype(np.uint32) << 16)
    (d,) = run.run(f"cvt.rn.satfinite.{t}.f16x2", [a])
    f = FP8[t]
    exp = [f2f_ref(x & 0xFFFF, F16, f, "rn", satfinite=True) | (f2f_ref(x >> 16, F16, f, "rn", satfinite=True) << 8)
           for x in a.tolist()]
    check_bits(d, exp, [a], t)


@pytest.mark.parametrize("t", list(FP8))
def test_f16x2_from_fp8(run, t):
    (d,) = run.run(f"cvt.rn.f16x2.{t}", [ALL16])
    f = FP8[t]
    exp = [encode(decode(x & 0xFF, f), F16) | (encode(decode(x >> 8, f), F16) << 16) for x in ALL16.tolist()]
    check_bits(d, exp, [ALL16], t)


@pytest.mark.parametrize("text,dst,mode,relu", [("cvt.rn.f16x2.f32", "f16", "rn", False),
                                                ("cvt.rz.relu.f16x2.f32", "f16", "rz", True),
                                                ("cvt.rn.bf16x2.f32", "bf16", "rn", False),
                                                ("cvt.rz.relu.bf16x2.f32", "bf16", "rz", True)])
def test_packed_halves(run, text, dst, mode, relu):
    a, b = operand_sets(F32, 2, n=2000, seed=25)
    (d,) = run.run(text, [a, b])
    f = FORMATS[dst]
    exp = [(f2f_ref(int(x), F32, f, mode, relu=relu) << 16) | f2f_ref(int(y), F32, f, mode, relu=relu)
           for x, y in zip(a.tolist(), b.tolist())]
    check_bits(d, exp, [a, b], text)


@pytest.mark.parametrize("t", ["u16", "s16", "u8", "s8", "u4", "s4", "u2", "s2"])
def test_cvt_pack(run, t):
    a, b = pairs(32, n=1500)
    lo, hi = int_range(t)
    n = nbits(t)
    sat = [[min(max(v, lo), hi) & ((1 << n) - 1) for v in as_ints(x, 32, True)] for x in (a, b)]
    if n == 16:
        (d,) = run.run(f"cvt.pack.sat.{t}.s32", [a, b])
        exp = [(x << 16) | y for x, y in zip(*sat)]
        check_bits(d, exp, [a, b], t)
    else:
        c = b[::-1].copy()
        (d,) = run.run(f"cvt.pack.sat.{t}.s32.b32", [a, b, c])
        exp = [((z << 2 * n) | (x << n) | y) & 0xFFFFFFFF for x, y, z in zip(*sat, c.tolist())]
        check_bits(d, exp, [a, b, c], t)

