"""Float min/max (.NaN, .xorsign.abs, .ftz), abs, neg, copysign, testp; exhaustive for 16-bit types."""

from __future__ import annotations

import numpy as np
import pytest

from conformance.floatvals import operand_sets
from conformance.models.floating import absneg_ref, copysign_ref, minmax3_ref, minmax_ref, classify_ref
from conformance.refs import FORMATS
from conformance.values import check_bits

ALL16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)


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
    exp = [minmax3_ref(op, x, y, z, ".NaN" in mods, ".abs" in mods, "ftz" in mods)
           for x, y, z in zip(a.tolist(), b.tolist(), c.tolist())]
    check_bits(d, exp, [a, b, c], text)


@pytest.mark.parametrize("op", ["abs", "neg"])
@pytest.mark.parametrize("t,ftz", [("f16", False), ("f16", True), ("bf16", False)])
def test_abs_neg_16_exhaustive(run, op, t, ftz):
    f = FORMATS[t]
    (d,) = run.run(f"{op}{'.ftz' if ftz else ''}.{t}", [ALL16])
    exp = [absneg_ref(op, int(x), f, ftz) for x in ALL16]
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
        exp.append(sum(absneg_ref(op, p, f, bool(mods)) << (16 * i) for i, p in enumerate(parts)))
    check_bits(d, exp, [a], f"{op}{mods}.{t}")


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_copysign(run, t):
    f = FORMATS[t]
    a, b = operand_sets(f, 2, n=2000, seed=5)
    (d,) = run.run(f"copysign.{t}", [a, b])
    exp = [copysign_ref(x, y, f) for x, y in zip(a.tolist(), b.tolist())]
    check_bits(d, exp, [a, b], f"copysign.{t}")


@pytest.mark.parametrize("test", ["finite", "infinite", "number", "notanumber", "normal", "subnormal"])
@pytest.mark.parametrize("t", ["f32", "f64"])
def test_testp(run, test, t):
    f = FORMATS[t]
    (a,) = operand_sets(f, 1, n=3000, seed=6)
    (d,) = run.run(f"testp.{test}.{t}", [a])
    exp = [classify_ref(test, x, f) for x in a.tolist()]
    check_bits(d, exp, [a], f"testp.{test}.{t}")
