"""The .approx functions against PTX's documented error bounds (models/floating.py's
`check_approx`: exact values, or Python's libm in double precision, far more accurate than
the bounds), plus their exact special values."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from conformance.models.floating import check_approx
from conformance.refs import F32, decode, to_float

ALL16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)


def f32_in(lo: float, hi: float, n: int = 4000, seed: int = 0) -> np.ndarray:
    g = np.random.default_rng(seed)
    return g.uniform(lo, hi, n).astype(np.float32).view(np.uint32)


def test_sin_cos_abs_error(run):
    a = f32_in(-math.pi, math.pi)
    for name in ("sin", "cos"):
        (d,) = run.run(f"{name}.approx.f32", [a])
        check_approx(f"{name}.approx.f32", [a], d)


def test_lg2_error(run):
    a = np.concatenate([f32_in(0.5, 2.0, seed=1), f32_in(1e-30, 1e30, seed=2)])
    (d,) = run.run("lg2.approx.f32", [a])
    check_approx("lg2.approx.f32", [a], d)


def test_ex2_ulp(run):
    a = f32_in(-125.0, 127.0, seed=3)
    (d,) = run.run("ex2.approx.f32", [a])
    check_approx("ex2.approx.f32", [a], d)


def test_rsqrt_rel_error(run):
    a = f32_in(1e-30, 1e30, seed=4)
    (d,) = run.run("rsqrt.approx.f32", [a])
    check_approx("rsqrt.approx.f32", [a], d)
    b = np.random.default_rng(5).uniform(1e-200, 1e200, 2000).view(np.uint64)
    (d64,) = run.run("rsqrt.approx.f64", [b])
    check_approx("rsqrt.approx.f64", [b], d64)


def test_tanh_f32(run):
    a = f32_in(-10.0, 10.0, seed=6)
    (d,) = run.run("tanh.approx.f32", [a])
    check_approx("tanh.approx.f32", [a], d)


@pytest.mark.parametrize("text", ["ex2.approx.f16", "ex2.approx.ftz.bf16", "tanh.approx.f16", "tanh.approx.bf16",
                                  "ex2.approx.f16x2", "tanh.approx.bf16x2"])
def test_16bit_exhaustive(run, text):
    """All 65,536 inputs within the bound (2 ulp of the format), with exact specials; .ftz
    results below the smallest normal may be zero. Packed forms carry the inputs in both halves."""
    src = ALL16.astype(np.uint32) | (ALL16[::-1].astype(np.uint32) << 16) if text.endswith("x2") else ALL16
    (d,) = run.run(text, [src])
    check_approx(text, [src], d)


@pytest.mark.parametrize("text,x,expect", [
    ("sin.approx.f32", math.inf, math.nan), ("cos.approx.f32", -math.inf, math.nan),
    ("lg2.approx.f32", 0.0, -math.inf), ("lg2.approx.f32", -1.0, math.nan), ("lg2.approx.f32", math.inf, math.inf),
    ("ex2.approx.f32", -math.inf, 0.0), ("ex2.approx.f32", math.inf, math.inf), ("ex2.approx.f32", 0.0, 1.0),
    ("tanh.approx.f32", math.inf, 1.0), ("tanh.approx.f32", -math.inf, -1.0), ("rsqrt.approx.f32", 0.0, math.inf),
    ("rsqrt.approx.f32", -0.0, -math.inf), ("rsqrt.approx.f32", -4.0, math.nan), ("sin.approx.f32", -0.0, -0.0),
])
def test_specials(run, text, x, expect):
    (d,) = run.run(text, [np.array([x], np.float32).view(np.uint32)])
    y = to_float(int(d[0]), F32)
    if math.isnan(expect):
        assert int(d[0]) == F32.nan
    else:
        assert y == expect and math.copysign(1, y) == math.copysign(1, expect), (text, x, y)


def test_ftz(run):
    """.ftz: a subnormal input acts as zero (ex2 -> 1.0); a subnormal result becomes zero."""
    sub = np.array([1, 0x80000001, 0x007FFFFF], np.uint32)
    (d,) = run.run("ex2.approx.ftz.f32", [sub])
    assert [to_float(int(v), F32) for v in d] == [1.0, 1.0, 1.0]
    (d,) = run.run("ex2.approx.ftz.f32", [np.array([-130.0], np.float32).view(np.uint32)])
    assert int(d[0]) == 0
    (d,) = run.run("ex2.approx.f32", [np.array([-130.0], np.float32).view(np.uint32)])
    assert decode(int(d[0]), F32).v == Fraction(2) ** -130


@pytest.mark.parametrize("text", ["rcp.approx.f32", "rcp.approx.ftz.f32", "sqrt.approx.f32", "sqrt.approx.ftz.f32"])
def test_rcp_sqrt_approx(run, text):
    a = np.concatenate([f32_in(1e-30, 1e30, seed=7), f32_in(0.5, 4.0, seed=8)])
    (d,) = run.run(text, [a])
    check_approx(text, [a], d)


def test_rcp_approx_f64(run):
    b = np.random.default_rng(9).uniform(1e-200, 1e200, 2000).view(np.uint64)
    (d,) = run.run("rcp.approx.ftz.f64", [b])
    check_approx("rcp.approx.ftz.f64", [b], d)


def test_div_approx_f32(run):
    """div.approx.f32: at most 2 ulp for |b| in [2^-126, 2^126]."""
    g = np.random.default_rng(10)
    a = f32_in(-1e30, 1e30, seed=11)
    b = (g.uniform(1, 2, len(a)) * 2.0 ** g.integers(-126, 126, len(a))).astype(np.float32).view(np.uint32)
    for text in ("div.approx.f32", "div.approx.ftz.f32", "div.full.f32", "div.full.ftz.f32"):
        (d,) = run.run(text, [a, b])
        check_approx(text, [a, b], d)


@pytest.mark.parametrize("text", ["div.approx.f32", "div.approx.ftz.f32"])
def test_div_approx_huge_divisor(run, text):
    """For 2^126 < |b| < 2^128, div.approx.f32 gives 0, or NaN for an infinite a (regression:
    a * (1/b) used the subnormal 1/b and gave e.g. 1 / 2^127 = 2^-127)."""
    b = np.array([2.0 ** 127, -2.0 ** 127, 3e38, 2.0 ** 126 * 1.5, 2.0 ** 127], np.float32).view(np.uint32)
    a = np.array([1.0, 2.0 ** 100, -5.0, math.inf, 3e38], np.float32).view(np.uint32)
    (d,) = run.run(text, [a, b])
    assert [to_float(int(v), F32) for v in d[:3]] == [0.0, 0.0, 0.0]
    assert int(d[3]) & 0x7FFFFFFF > 0x7F800000 and to_float(int(d[4]), F32) == 0.0
