"""Float min/max (.NaN, .xorsign.abs, .ftz), abs, neg, copysign, testp; exhaustive for 16-bit types."""

from __future__ import annotations

import numpy as np
import pytest

from conformance.floatvals import operand_sets
from conformance.refs import FORMATS, decode, flush
from conformance.values import check_bits

ALL16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)


def minmax_ref(op: str, a: int, b: int, t: str, nan_mode: bool, xorsign: bool, ftz: bool) -> int:
    f = FORMATS[t]
    if ftz:
        a, b = flush(a, f), flush(b, f)
    sign = 1 << (f.total - 1)
    if xorsign:
        s, a, b = (a ^ b) & sign, a & ~sign, b & ~sign
    x, y = decode(a, f), decode(b, f)
    if x.kind == "nan" or y.kind == "nan":  # the manual's order: NaN rules, then the xor sign
        if nan_mode or (x.kind == "nan" and y.kind == "nan"):
            return f.nan
        r = b if x.kind == "nan" else a
        return r | s if xorsign else r

    def key(v, bits):  # total order with -0 < +0
        inf = float("inf")
        val = (-inf if v.neg else inf) if v.kind == "inf" else v.v
        return (val, 0 if bits & sign else 1)

    pick = min if op == "min" else max
    r = pick((a, b), key=lambda z: key(decode(z, f), z))
    return r | s if xorsign else r


def split16(v):
    return v & 0xFFFF, v >> 16


@pytest.mark.parametrize("op", ["min", "max"])
@pytest.mark.parametrize("t,mods", [("f32", ""), ("f32", ".ftz"), ("f32", ".NaN"), ("f32", ".xorsign.abs"),
                                    ("f32", ".ftz.NaN.xorsign.abs"), ("f64", ""), ("f16", ""), ("f16", ".ftz.NaN"),
                                    ("f16", ".xorsign.abs"), ("bf16", ""), ("bf16", ".NaN"),
                                    ("f16x2", ".NaN"), ("bf16x2", ".xorsign.abs"), ("f16x2", "")])
def test_min_max(run, op, t, mods):
    e = t[:-2] if t.endswith("x2") else t
    f = FORMATS[e]
    a, b = operand_sets(f, 2, n=2000, seed=3)
    if t.endswith("x2"):
        a = (a.astype(np.uint32) | (b.astype(np.uint32)[::-1] << 16))
        b = (b.astype(np.uint32) | (a.astype(np.uint32)[::-1] << 16)) & 0xFFFFFFFF
    (d,) = run.run(f"{op}{mods}.{t}", [a, b])
    kw = dict(nan_mode=".NaN" in mods, xorsign="xorsign" in mods, ftz="ftz" in mods)
    exp = []
    for x, y in zip(a.tolist(), b.tolist()):
        if t.endswith("x2"):
            (xl, xh), (yl, yh) = split16(x), split16(y)
            exp.append(minmax_ref(op, xl, yl, e, **kw) | (minmax_ref(op, xh, yh, e, **kw) << 16))
        else:
            exp.append(minmax_ref(op, x, y, e, **kw))
    check_bits(d, exp, [a, b], f"{op}{mods}.{t}")


@pytest.mark.parametrize("op", ["min", "max"])
@pytest.mark.parametrize("mods", ["", ".ftz", ".NaN", ".abs", ".ftz.NaN.abs"])
def test_min_max_three_inputs(run, op, mods):
    """min/max d, a, b, c on .f32: the two-input rules applied twice (of |a| |b| |c| with .abs)."""
    f = FORMATS["f32"]
    a, b = operand_sets(f, 2, n=1500, seed=8)
    c = np.concatenate([b[len(b) // 2:], a[: len(b) - len(b) // 2]])[::-1].copy()
    text = f"{op}{mods}.f32"
    (d,) = run.run(text, [a, b, c])
    kw = dict(nan_mode=".NaN" in mods, xorsign=False, ftz="ftz" in mods)
    mag = (lambda v: v & 0x7FFFFFFF) if ".abs" in mods else (lambda v: v)
    exp = [minmax_ref(op, minmax_ref(op, mag(x), mag(y), "f32", **kw), mag(z), "f32", **kw)
           for x, y, z in zip(a.tolist(), b.tolist(), c.tolist())]
    check_bits(d, exp, [a, b, c], text)


@pytest.mark.parametrize("op", ["abs", "neg"])
@pytest.mark.parametrize("t,ftz", [("f16", False), ("f16", True), ("bf16", False)])
def test_abs_neg_16_exhaustive(run, op, t, ftz):
    f = FORMATS[t]
    (d,) = run.run(f"{op}{'.ftz' if ftz else ''}.{t}", [ALL16])
    src = [flush(int(x), f) if ftz else int(x) for x in ALL16]
    exp = [x & 0x7FFF if op == "abs" else x ^ 0x8000 for x in src]
    check_bits(d, exp, [ALL16], f"{op}.{t}")


@pytest.mark.parametrize("op", ["abs", "neg"])
@pytest.mark.parametrize("t,mods", [("f32", ""), ("f32", ".ftz"), ("f64", ""), ("f16x2", ""), ("bf16x2", "")])
def test_abs_neg(run, op, t, mods):
    bits = 64 if t == "f64" else 32
    f = FORMATS[t[:-2] if t.endswith("x2") else t]
    (a,) = operand_sets(FORMATS["f64" if bits == 64 else "f32"], 1, n=3000, seed=4)
    (d,) = run.run(f"{op}{mods}.{t}", [a])
    exp = []
    for x in a.tolist():
        parts = [x & 0xFFFF, x >> 16] if t.endswith("x2") else [x]
        out = 0
        for i, p in enumerate(parts):
            if mods:
                p = flush(p, f)
            sign = 1 << (f.total - 1)
            p = p & ~sign if op == "abs" else p ^ sign
            out |= p << (16 * i)
        exp.append(out)
    check_bits(d, exp, [a], f"{op}{mods}.{t}")


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_copysign(run, t):
    f = FORMATS[t]
    a, b = operand_sets(f, 2, n=2000, seed=5)
    (d,) = run.run(f"copysign.{t}", [a, b])
    sign = 1 << (f.total - 1)
    exp = [(x & sign) | (y & ~sign) for x, y in zip(a.tolist(), b.tolist())]
    check_bits(d, exp, [a, b], f"copysign.{t}")


@pytest.mark.parametrize("test", ["finite", "infinite", "number", "notanumber", "normal", "subnormal"])
@pytest.mark.parametrize("t", ["f32", "f64"])
def test_testp(run, test, t):
    f = FORMATS[t]
    (a,) = operand_sets(f, 1, n=3000, seed=6)
    (d,) = run.run(f"testp.{test}.{t}", [a])
    exp = []
    for x in a.tolist():
        v = decode(x, f)
        e = (x >> f.mbits) & ((1 << f.ebits) - 1)
        exp.append(int({"finite": v.kind == "fin", "infinite": v.kind == "inf", "number": v.kind != "nan",
                        "notanumber": v.kind == "nan", "normal": v.kind == "fin" and e != 0,
                        "subnormal": v.kind == "fin" and e == 0 and not v.is_zero}[test]))
    check_bits(d, exp, [a], f"testp.{test}.{t}")
