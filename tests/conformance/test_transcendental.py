"""The .approx functions against PTX's documented error bounds (reference: Python's libm in
double precision, far more accurate than the bounds), plus their exact special values."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from conformance.refs import BF16, F16, F32, F64, decode, to_float

ALL16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)


def f32_in(lo: float, hi: float, n: int = 4000, seed: int = 0) -> np.ndarray:
    g = np.random.default_rng(seed)
    return g.uniform(lo, hi, n).astype(np.float32).view(np.uint32)


def ulp32(x: float) -> float:
    x = abs(x)
    if x < 2.0 ** -126:
        return 2.0 ** -149
    return 2.0 ** (math.floor(math.log2(x)) - 23)


def values(d: np.ndarray, f) -> list[float]:
    return [to_float(int(x), f) for x in d.tolist()]


def test_sin_cos_abs_error(run):
    a = f32_in(-math.pi, math.pi)
    for fn, name in ((math.sin, "sin"), (math.cos, "cos")):
        (d,) = run.run(f"{name}.approx.f32", [a])
        err = max(abs(y - fn(x)) for x, y in zip(values(a, F32), values(d, F32)))
        assert err <= 2.0 ** -20.5, (name, err)


def test_lg2_error(run):
    a = np.concatenate([f32_in(0.5, 2.0, seed=1), f32_in(1e-30, 1e30, seed=2)])
    (d,) = run.run("lg2.approx.f32", [a])
    for x, y in zip(values(a, F32), values(d, F32)):
        exact = math.log2(x)
        bound = 2.0 ** -22.6 if 0.5 <= x <= 2.0 else 2.0 ** -22 * abs(exact)
        assert abs(y - exact) <= bound, (x, y)


def test_ex2_ulp(run):
    a = f32_in(-125.0, 127.0, seed=3)
    (d,) = run.run("ex2.approx.f32", [a])
    for x, y in zip(values(a, F32), values(d, F32)):
        exact = 2.0 ** x
        assert abs(y - exact) <= 2 * ulp32(exact), (x, y)


def test_rsqrt_rel_error(run):
    a = f32_in(1e-30, 1e30, seed=4)
    (d,) = run.run("rsqrt.approx.f32", [a])
    for x, y in zip(values(a, F32), values(d, F32)):
        exact = 1 / math.sqrt(x)
        assert abs(y - exact) <= 2.0 ** -22.9 * exact, (x, y)
    b = np.random.default_rng(5).uniform(1e-200, 1e200, 2000).view(np.uint64)
    (d64,) = run.run("rsqrt.approx.f64", [b])
    for x, y in zip(values(b, F64), values(d64, F64)):
        assert abs(y - 1 / math.sqrt(x)) <= 2.0 ** -50 / math.sqrt(x), (x, y)


def test_tanh_f32(run):
    a = f32_in(-10.0, 10.0, seed=6)
    (d,) = run.run("tanh.approx.f32", [a])
    for x, y in zip(values(a, F32), values(d, F32)):
        assert abs(y - math.tanh(x)) <= 2.0 ** -10.987 * max(abs(math.tanh(x)), 2.0 ** -126), (x, y)


@pytest.mark.parametrize("fn,t", [("ex2", "f16"), ("ex2.ftz", "bf16"), ("tanh", "f16"), ("tanh", "bf16"),
                                  ("ex2", "f16x2"), ("tanh", "bf16x2")])
def test_16bit_exhaustive(run, fn, t):
    """All 65,536 inputs: within 2 ulp of the format (the documented f16 ex2/tanh bounds are
    relative errors of 2^-9.9 and 2^-10.7), with exact specials; .ftz results below the
    smallest normal may be zero. Packed forms carry the inputs in both halves."""
    f = F16 if t.startswith("f16") else BF16
    ftz = fn.endswith(".ftz")
    fn = fn.split(".")[0]
    if t.endswith("x2"):
        packed = ALL16.astype(np.uint32) | (ALL16[::-1].astype(np.uint32) << 16)
        (d,) = run.run(f"{fn}.approx{'.ftz' if ftz else ''}.{t}", [packed])
        xs = np.concatenate([ALL16, ALL16[::-1]])
        ys = np.concatenate([(d & 0xFFFF).astype(np.uint16), (d >> 16).astype(np.uint16)])
    else:
        (d,) = run.run(f"{fn}.approx{'.ftz' if ftz else ''}.{t}", [ALL16])
        xs, ys = ALL16, d
    ref = (lambda x: 2.0 ** x) if fn == "ex2" else math.tanh
    for x, y in zip(values(xs, f), values(ys, f)):
        if math.isnan(x):
            assert math.isnan(y)
            continue
        try:
            exact = ref(x)
        except OverflowError:
            exact = math.inf
        top = to_float(f.max_finite, f)
        if exact > top:
            assert y == math.inf or y >= top, (x, y)
            continue
        if ftz and abs(exact) < 2.0 ** (1 - f.bias) and y == 0:
            continue
        step = 2.0 ** (math.floor(math.log2(abs(exact))) - f.mbits) if exact else 0
        tiny = 2.0 ** (1 - f.bias - f.mbits)
        assert abs(y - exact) <= 2 * max(step, tiny), (t, fn, x, y)


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


@pytest.mark.parametrize("text,fn,ulps", [("rcp.approx.f32", lambda x: 1 / x, 1), ("rcp.approx.ftz.f32", lambda x: 1 / x, 1),
                                          ("sqrt.approx.f32", math.sqrt, 1), ("sqrt.approx.ftz.f32", math.sqrt, 1)])
def test_rcp_sqrt_approx(run, text, fn, ulps):
    a = np.concatenate([f32_in(1e-30, 1e30, seed=7), f32_in(0.5, 4.0, seed=8)])
    (d,) = run.run(text, [a])
    for x, y in zip(values(a, F32), values(d, F32)):
        assert abs(y - fn(x)) <= ulps * ulp32(fn(x)), (text, x, y)


def test_rcp_approx_f64(run):
    b = np.random.default_rng(9).uniform(1e-200, 1e200, 2000).view(np.uint64)
    (d,) = run.run("rcp.approx.ftz.f64", [b])
    for x, y in zip(values(b, F64), values(d, F64)):
        assert abs(y - 1 / x) <= 2.0 ** -50 / x, (x, y)


def test_div_approx_f32(run):
    """div.approx.f32: at most 2 ulp for |b| in [2^-126, 2^126]."""
    g = np.random.default_rng(10)
    a = f32_in(-1e30, 1e30, seed=11)
    b = (g.uniform(1, 2, len(a)) * 2.0 ** g.integers(-126, 126, len(a))).astype(np.float32).view(np.uint32)
    for text in ("div.approx.f32", "div.approx.ftz.f32"):
        (d,) = run.run(text, [a, b])
        for x, y, q in zip(values(a, F32), values(b, F32), values(d, F32)):
            exact = x / y
            if 2.0 ** -126 <= abs(exact) <= 3.4e38:  # outside, the result is 0 or inf
                assert abs(q - exact) <= 2 * ulp32(exact), (text, x, y, q)
