"""Float add sub mul fma div rcp sqrt in every rounding mode, with .ftz and .sat, checked
bit-exactly against the exact Fraction reference (canonical NaN for f32/f16/bf16)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conformance.floatvals import operand_sets
from conformance.harness import DTYPES
from conformance.models.floating import arith_ref, check_approx
from conformance.refs import FORMATS, reference
from conformance.values import check_bits

ARITY = {"add": 2, "sub": 2, "mul": 2, "fma": 3, "div": 2, "rcp": 1, "sqrt": 1}
MODES = ["rn", "rz", "rm", "rp"]


def expected(op: str, t: str, mode: str, ftz: bool, sat: bool, cols: list[np.ndarray]) -> tuple[list[int], list[bool]]:
    f = FORMATS[t]
    exp, nan = [], []
    for xs in zip(*cols):
        r = arith_ref(op, [int(x) for x in xs], t, mode, ftz, sat)
        exp.append(r)
        nan.append(r == f.nan and t == "f64")
    return exp, nan


def run_and_check(run, text: str, op: str, t: str, mode: str, ftz: bool = False, sat: bool = False, n: int = 2500,
                  cols: list[np.ndarray] | None = None):
    f = FORMATS[t]
    if cols is None:
        cols = operand_sets(f, ARITY["fma" if op == "mad" else op], n=n, seed=len(text))
    (d,) = run.run(text, cols)
    exp, f64_nan = expected(op, t, mode, ftz, sat, cols)
    if t == "f64":  # PTX leaves f64 NaN payloads open: any NaN matches
        got_nan = np.isnan(d.view(np.float64))
        assert np.array_equal(got_nan, np.array(f64_nan)), f"{text}: NaN mismatch"
        keep = ~got_nan
        check_bits(d[keep], np.array(exp, np.uint64)[keep], [c[keep] for c in cols], text)
    else:
        check_bits(d, exp, cols, text)


# f16/bf16 arithmetic exists with .rn only (their directed rounding is covered through cvt).
CASES = [(op, t, mode) for op in ("add", "sub", "mul", "fma") for t in ("f32", "f64", "f16", "bf16") for mode in MODES
         if t in ("f32", "f64") or mode == "rn"]


@pytest.mark.parametrize("op,t,mode", CASES)
def test_arith_rounding(run, op, t, mode):
    run_and_check(run, f"{op}.{mode}.{t}", op, t, mode)


@pytest.mark.parametrize("op,t,mode", [(op, t, m) for op in ("div", "rcp", "sqrt") for t in ("f32", "f64") for m in MODES])
def test_div_rcp_sqrt_rounding(run, op, t, mode):
    run_and_check(run, f"{op}.{mode}.{t}", op, t, mode)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "fma", "div", "rcp", "sqrt"])
@pytest.mark.parametrize("mode", MODES)
def test_f32_ftz(run, op, mode):
    run_and_check(run, f"{op}.{mode}.ftz.f32", op, "f32", mode, ftz=True)


# Tininess for .ftz: inputs whose exact result lies just below the smallest normal, close enough
# that rounding it to the format's precision with an unbounded exponent gives the smallest normal.
# Tininess detected before rounding flushes them to zero; after rounding keeps the smallest normal.
# mul.rn.ftz.f32(0x3f7ffffe, 0x00800001) = 2^-126 * (1 - 2^-46): 0 before, 0x00800000 after.
# Only mul and fma can land there. A sum or difference of normals below 2^-126 is a multiple of
# 2^-149, so it is exact (nothing to round); a quotient (or reciprocal) of two 24-bit significands
# misses the power of two below it by at least 2^-24 relatively, which every mode keeps tiny.
TININESS = {
    "f32": {
        "mul": [(0x3F7FFFFE, 0x00800001), (0xBF7FFFFE, 0x00800001), (0x00800001, 0x3F7FFFFE),
                (0x3E7FFFFE, 0x02000001), (0x3F7FFFFF, 0x00800000), (0x3F7FFFFE, 0x00800000)],
        "fma": [(0x3F7FFFFE, 0x00800001, 0x00000000), (0xBF7FFFFE, 0x00800001, 0x80000000),
                (0x3F7FFFFE, 0x01000001, 0x80800000), (0xBF7FFFFE, 0x01000001, 0x00800000),
                (0x3F800000, 0x00800000, 0x80000000)],
    },
    "f16": {
        "mul": [(0x3BFE, 0x0401), (0xBBFE, 0x0401), (0x0401, 0x3BFE), (0x3BFF, 0x0400)],
        "fma": [(0x3BFE, 0x0401, 0x0000), (0x3BFE, 0x0801, 0x8400), (0xBBFE, 0x0801, 0x0400)],
    },
}


@pytest.mark.parametrize("t,op,mode", [(t, op, mode) for t, ops in TININESS.items() for op in ops
                                       for mode in (MODES if t == "f32" else ["rn"])])
def test_ftz_tininess(run, t, op, mode):
    """The .ftz forms on results just below the smallest normal that round up to it: the rows
    tell tininess before rounding (flushed to zero) from after rounding (kept)."""
    cols = [np.array(col, DTYPES[FORMATS[t].total]) for col in zip(*TININESS[t][op])]
    run_and_check(run, f"{op}.{mode}.ftz.{t}", op, t, mode, ftz=True, cols=cols)


H200_TININESS = Path(__file__).parents[1] / "hardware" / "golden" / "ftz_tininess.txt"


def test_ftz_tininess_as_the_h200_gives_it(run):
    """Every row of test_ftz_tininess as recorded on an NVIDIA H200: the reference and the target
    give the hardware's bits (tininess after rounding, in the instruction's rounding mode)."""
    rows: dict[str, list[tuple[list[int], int]]] = {}
    for line in H200_TININESS.read_text().splitlines():
        if line and not line.startswith("#"):
            text, *operands, _, result = line.split()
            rows.setdefault(text, []).append(([int(v, 16) for v in operands], int(result, 16)))
    assert len(rows) == 10 and sum(map(len, rows.values())) == 51
    for text, cases in rows.items():
        op, mode, t = text.split(".")[0], text.split(".")[1], text.split(".")[-1]
        f = FORMATS[t]
        h200 = [want for _, want in cases]
        assert [reference(op, ops, f, mode, ftz=True) for ops, _ in cases] == h200, f"{text}: reference"
        cols = [np.array(col, DTYPES[f.total]) for col in zip(*[ops for ops, _ in cases])]
        (d,) = run.run(text, cols)
        assert [int(v) for v in d] == h200, f"{text}: target"


@pytest.mark.parametrize("op,t", [(op, t) for op in ("add", "sub", "mul", "fma") for t in ("f32", "f16")])
def test_sat(run, op, t):
    run_and_check(run, f"{op}.rn.sat.{t}", op, t, "rn", sat=True)
    mode = "rz" if t == "f32" else "rn"
    run_and_check(run, f"{op}.{mode}.ftz.sat.{t}", op, t, mode, ftz=True, sat=True)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "mad"])
def test_default_rounding_is_rn(run, op):
    text = "mad.rn.f32" if op == "mad" else f"{op}.f32"
    run_and_check(run, text, op, "f32", "rn")
    run_and_check(run, f"{op}.f64" if op != "mad" else "mad.rn.f64", op, "f64", "rn")


def test_div_full_f32(run):
    """div.full.f32 is within 2 ulp, not correctly rounded (NVIDIA's results differ from .rn)."""
    cols = operand_sets(FORMATS["f32"], 2, n=2500, seed=len("div.full.f32"))
    (d,) = run.run("div.full.f32", cols)
    check_approx("div.full.f32", cols, d)


PACKED = [("add.rn.f16x2", "add", "f16", {}), ("sub.f16x2", "sub", "f16", {}), ("mul.rn.bf16x2", "mul", "bf16", {}),
          ("fma.rn.f16x2", "fma", "f16", {}), ("fma.rn.relu.bf16x2", "fma", "bf16", {"relu": True}),
          ("add.rn.ftz.sat.f16x2", "add", "f16", {"ftz": True, "sat": True}), ("fma.rn.relu.f16", "fma", "f16",
                                                                                {"relu": True})]


@pytest.mark.parametrize("text,op,e,kw", PACKED)
def test_packed_and_relu(run, text, op, e, kw):
    """x2 types apply the scalar operation to each 16-bit half; .relu maps negatives to +0."""
    f = FORMATS[e]
    cols = operand_sets(f, ARITY[op], n=2000, seed=31)
    if text.endswith("x2"):
        srcs = [c.astype(np.uint32) | (c[::-1].astype(np.uint32) << 16) for c in cols]
    else:
        srcs = cols
    (d,) = run.run(text, srcs)

    def one(xs):
        return arith_ref(op, xs, e, "rn", kw.get("ftz", False), kw.get("sat", False), kw.get("relu", False))

    exp = []
    for xs in zip(*[s.tolist() for s in srcs]):
        if text.endswith("x2"):
            exp.append(one([x & 0xFFFF for x in xs]) | (one([x >> 16 for x in xs]) << 16))
        else:
            exp.append(one(list(xs)))
    check_bits(d, exp, srcs, text)


def tiny_product_operands(n: int = 3000, seed: int = 77) -> list[np.ndarray]:
    """f64 fma operands whose product a*b lies around the subnormal range (2^-1130 .. 2^-900),
    with c of every relative size: 0, tiny, close to -a*b (cancellation), comparable, huge."""
    g = np.random.default_rng(seed)
    mant = lambda: g.integers(0, 1 << 52, n, dtype=np.uint64)  # noqa: E731
    sign = lambda: g.integers(0, 2, n, dtype=np.uint64) << np.uint64(63)  # noqa: E731
    total = g.integers(-1130, -900, n)
    ea = g.integers(-1000, -100, n)
    eb = np.clip(total - ea, -1074, 1023)
    a = sign() | ((ea + 1023).astype(np.uint64) << np.uint64(52)) | mant()
    b_exp = np.maximum(eb + 1023, 0).astype(np.uint64)  # eb below -1022: a subnormal b
    b = sign() | (b_exp << np.uint64(52)) | (mant() >> (np.maximum(-1022 - eb, 0)).astype(np.uint64))
    prod = a.view(np.float64) * b.view(np.float64)
    kind = g.integers(0, 6, n)
    near = (-prod).view(np.uint64) + g.integers(-3, 4, n).astype(np.uint64)
    c_exp = np.clip(total + g.integers(-60, 60, n) + 1023, 0, 2046).astype(np.uint64)
    comparable = sign() | (c_exp << np.uint64(52)) | mant()
    c = np.select([kind == 0, kind == 1, kind == 2, kind == 3, kind == 4],
                  [np.zeros(n, np.uint64), sign() | g.integers(1, 64, n, dtype=np.uint64), near, comparable,
                   sign() | (np.uint64(1100) << np.uint64(52)) | mant()], sign() | mant())
    return [a, b, c.astype(np.uint64)]


@pytest.mark.parametrize("mode", MODES)
def test_fma_f64_tiny_products(run, mode):
    """Directed f64 fma is exact also where the product's low bits lie below 2^-1074."""
    run_and_check(run, f"fma.{mode}.f64", "fma", "f64", mode, cols=tiny_product_operands())
