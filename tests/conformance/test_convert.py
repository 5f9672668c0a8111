"""cvt: every integer pair (with .sat), float<->int with each rounding, float<->float (narrowing
in every mode, exhaustive over 16-bit sources), .ftz .sat .relu .satfinite, tf32, fp8 pairs,
packed halves, and cvt.pack."""

from __future__ import annotations

import numpy as np
import pytest

from conformance.floatvals import operand_sets
from conformance.models.convert import (FP8, INTS, f2f_ref, f2i_ref, i2f_ref, int_int_ref, int_range, nbits, pack_ref,
                                        round_integral_ref, tf32_ref)
from conformance.refs import F16, F32, FORMATS, decode, flush
from conformance.values import as_ints, check_bits, pairs

ALL16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)


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
    check_bits(d, [int_int_ref(x, dst, sat) for x in as_ints(a, nbits(src), src[0] == "s")], [a], text)


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
    check_bits(d, [f2i_ref(decode(int(x), f), dst, mode, f) for x in a.tolist()], [a], text)


def test_float_int_ftz(run):
    (a,) = operand_sets(F32, 1, n=2000, seed=21)
    (d,) = run.run("cvt.rpi.ftz.s32.f32", [a])
    check_bits(d, [f2i_ref(decode(flush(int(x), F32), F32), "s32", "rpi", F32) for x in a.tolist()], [a], "ftz")


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
    exp = [i2f_ref(x, f, mode) for x in as_ints(a, nbits(src), src[0] == "s")]
    check_bits(d, exp, [a], text)


def test_int_float_sat(run):
    a, _ = pairs(32, n=1000)
    (d,) = run.run("cvt.rn.sat.f32.s32", [a])
    check_bits(d, [i2f_ref(x, F32, "rn", sat=True) for x in as_ints(a, 32, True)], [a], "sat")


def sources(src: str) -> np.ndarray:
    f = FORMATS[src]
    return ALL16 if f.total == 16 else operand_sets(f, 1, n=4000, seed=22)[0]


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
    check_bits(d, [round_integral_ref(x, f, mode) for x in a.tolist()], [a], f"cvt.{mode}.{t}.{t}")


@pytest.mark.parametrize("mods,mode,satfinite,relu", [
    ("rna", "rna", False, False), ("rna.satfinite", "rna", True, False), ("rn", "rn", False, False),
    ("rz", "rz", False, False),
    # regression: .relu tested the sign at bit 18 of the f32-shaped tf32 result, zeroing positives
    ("rn.relu", "rn", False, True), ("rz.satfinite.relu", "rz", True, True)])
def test_tf32(run, mods, mode, satfinite, relu):
    (a,) = operand_sets(F32, 1, n=4000, seed=23)
    (d,) = run.run(f"cvt.{mods}.tf32.f32", [a])
    check_bits(d, [tf32_ref(x, mode, satfinite, relu) for x in a.tolist()], [a], f"cvt.{mods}.tf32.f32")


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
    exp = [f2f_ref(x & 0xFF, f, F16, "rn") | (f2f_ref(x >> 8, f, F16, "rn") << 16) for x in ALL16.tolist()]
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
    sa, sb = as_ints(a, 32, True), as_ints(b, 32, True)
    if nbits(t) == 16:
        (d,) = run.run(f"cvt.pack.sat.{t}.s32", [a, b])
        check_bits(d, [pack_ref(x, y, None, t) for x, y in zip(sa, sb)], [a, b], t)
    else:
        c = b[::-1].copy()
        (d,) = run.run(f"cvt.pack.sat.{t}.s32.b32", [a, b, c])
        check_bits(d, [pack_ref(x, y, z, t) for x, y, z in zip(sa, sb, c.tolist())], [a, b, c], t)

