"""f16 add/sub/mul and bf16 mul are exact in f64 (`floating.EXACT_IN_F64`), so they are lowered
as one f64 operation and one rounding, without TwoSum / fma error terms or finiteness tests;
fma.f16 and add.bf16 are not exact and keep them. Results against numpy's f16 arithmetic (which
rounds through f32, innocuous for + - * of f16: 24 >= 2*11 + 2 bits) over every f16 rounding
boundary (each finite value plus half its ulp, and the nearest f16 addends either side of that
half; products onto subnormal midpoints), cancellation, overflow, infinities and NaNs; bf16
products against the conformance model's exact Fraction arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

from conformance.models.floating import arith_ref
from tests.compiler.test_nearest_narrow import _kernel
from zluda_py.compiler import compile
from zluda_py.compiler.cpu.target import CPU
from zluda_py.ptx import parse

CASES = {
    "add_f16": (16, 16, "add.f16 %d, %a, %b;", 2),
    "sub_f16": (16, 16, "sub.f16 %d, %a, %b;", 2),
    "mul_f16": (16, 16, "mul.f16 %d, %a, %b;", 2),
    "mul_bf16": (16, 16, "mul.rn.bf16 %d, %a, %b;", 2),
    "add_f16x2": (32, 32, "add.f16x2 %d, %a, %b;", 2),
    "mul_ftz_f16": (16, 16, "mul.ftz.f16 %d, %a, %b;", 2),
}
NOT_EXACT = {
    "fma_f16": (16, 16, "fma.rn.f16 %d, %a, %b, %a;", 2),
    "add_bf16": (16, 16, "add.rn.bf16 %d, %a, %b;", 2),
}


def _ptx(name: str, spec: tuple) -> str:
    return _kernel(name, *spec).replace("sm_80", "sm_90")  # mul/add.rn.bf16 need sm_90


@pytest.fixture(scope="module")
def mods():
    return {name: compile(_ptx(name, spec)) for name, spec in CASES.items() if name != "add_f16x2"}


def _ir(name: str, spec: tuple) -> str:
    return CPU.lower_part(parse(_ptx(name, spec)), name).text


@pytest.mark.parametrize("name", list(CASES))
def test_exact_operations_have_no_error_terms(name):
    ir = _ir(name, CASES[name])
    assert " fsub " not in ir  # TwoSum's
    assert "llvm.fma." not in ir  # a product's remainder
    assert "llvm.fabs" not in ir  # the finiteness tests of exact_op


@pytest.mark.parametrize("name", list(NOT_EXACT))
def test_inexact_operations_keep_them(name):
    ir = _ir(name, NOT_EXACT[name])
    assert " fsub " in ir and "llvm.fabs" in ir


def _run(mods, name: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    out = np.zeros(len(x), np.uint16)
    mods[name].launch(name, ((len(x) + 127) // 128,), (128,), [x, y, out, np.uint32(len(x))])
    return out


def _want(op, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        r = op(x.view(np.float16), y.view(np.float16))
    bits = r.view(np.uint16).copy()
    bits[np.isnan(r)] = 0x7FFF  # PTX's canonical f16 NaN
    return bits


def _f16(v) -> np.ndarray:
    return np.asarray(v, np.float64).astype(np.float16).view(np.uint16)


def _sum_pairs() -> tuple[np.ndarray, np.ndarray]:
    """Every finite f16 x with y = half its ulp (a tie), the f16 values next to that half (just
    either side of the midpoint), minus half an ulp, -x (an exact zero) and -next(x); both signs
    of x with y's sign following; then every pattern against infinities, NaNs and zeros."""
    x = np.concatenate([np.arange(0x7C00), np.arange(0x8000, 0xFC00)]).astype(np.uint16)
    xf = x.view(np.float16).astype(np.float64)
    ulp = 2.0 ** (np.maximum((x >> 10) & 0x1F, 1).astype(np.float64) - 25)  # of |x|, 65504's included
    half = ulp / 2
    sign = np.where(xf < 0, -1.0, 1.0)
    ys = [sign * half, -sign * half]
    h16 = _f16(half).view(np.float16)
    ys += [sign * np.nextafter(h16, np.float16(np.inf)).astype(np.float64),
           sign * np.nextafter(h16, np.float16(0)).astype(np.float64)]
    xs = [x] * len(ys)
    ys = [_f16(v) for v in ys]
    xs += [x, x]
    ys += [x ^ 0x8000, (x + 1).astype(np.uint16) ^ 0x8000]
    every = np.arange(65536).astype(np.uint16)
    for special in (0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE00, 0x0000, 0x8000):
        xs.append(every)
        ys.append(np.full(65536, special, np.uint16))
    return np.concatenate(xs), np.concatenate(ys)


def test_f16_sums_and_differences_at_every_rounding_boundary(mods):
    x, y = _sum_pairs()
    assert np.array_equal(_run(mods, "add_f16", x, y), _want(np.add, x, y))
    # x - (-y) is x + y: the same boundaries through sub
    assert np.array_equal(_run(mods, "sub_f16", x, y ^ 0x8000), _want(np.subtract, x, y ^ 0x8000))


def test_f16_products_at_rounding_boundaries(mods):
    """Every f16 pattern times powers of two that shift it across the subnormal range (ties of
    the quantum where an odd significand loses its last bits), times 1 + ulp, 1.5 and 3 (ties
    among normals), times large values (overflow), and random pairs."""
    every = np.arange(65536).astype(np.uint16)
    factors = [2.0 ** -k for k in range(1, 26)] + [1 + 2.0 ** -10, 1.5, 3.0, 0.75, 65504.0, 2.0 ** 15]
    xs, ys = [], []
    for f in factors:
        xs += [every, every]
        ys += [np.full(65536, _f16(f)), np.full(65536, _f16(-f))]
    rng = np.random.default_rng(3700)
    xs.append(rng.integers(0, 65536, 100000).astype(np.uint16))
    ys.append(rng.integers(0, 65536, 100000).astype(np.uint16))
    x, y = np.concatenate(xs), np.concatenate(ys)
    want = _want(np.multiply, x, y)
    assert np.array_equal(_run(mods, "mul_f16", x, y), want)


def test_f16_ftz_products_match_exact_arithmetic(mods):
    """.ftz: subnormal inputs flushed, results tiny after rounding flushed; products around the
    smallest normal (x times 2^-k landing near 2^-14) and random pairs, against Fraction
    arithmetic."""
    rng = np.random.default_rng(3702)
    x = rng.integers(0, 65536, 8000).astype(np.uint16)
    near = np.resize(_f16([2.0 ** -k for k in range(0, 16)] + [-(2.0 ** -k) for k in range(0, 16)]), 4000)
    y = np.concatenate([near, rng.integers(0, 65536, 4000).astype(np.uint16)])
    x[:4000] = (x[:4000] & 0x83FF) | 0x3C00  # 1 <= |x| < 2, so x * 2^-k sweeps the boundary
    got = _run(mods, "mul_ftz_f16", x, y)
    want = [arith_ref("mul", [a, b], "f16", "rn", True) for a, b in zip(x.tolist(), y.tolist())]
    assert got.tolist() == want


def test_bf16_products_match_exact_arithmetic(mods):
    """bf16 significands times 1 + ulp, 1.5 and 3 (ties), products into bf16's subnormals and
    past its largest value, and random pairs, against Fraction arithmetic."""
    rng = np.random.default_rng(3701)
    x = rng.integers(0, 65536, 12000).astype(np.uint16)
    y = np.concatenate([np.resize(np.array([0x3F81, 0x3FC0, 0x4040, 0xBF81, 0x0D00, 0x7F00, 0x00FF], np.uint16), 6000),
                        rng.integers(0, 65536, 6000).astype(np.uint16)])
    got = _run(mods, "mul_bf16", x, y)
    want = [arith_ref("mul", [a, b], "bf16", "rn", False) for a, b in zip(x.tolist(), y.tolist())]
    assert got.tolist() == want
