"""Integer arithmetic against exact Python integer references."""

from __future__ import annotations

import numpy as np
import pytest

from conformance.values import as_ints, check_bits, from_int, pairs, random_bits, to_signed

TYPES = ["u16", "u32", "u64", "s16", "s32", "s64"]


def bits_of(t: str) -> int:
    return int(t[1:])


def ints(arr, t):
    return as_ints(arr, bits_of(t), t[0] == "s")


@pytest.mark.parametrize("op", ["add", "sub"])
@pytest.mark.parametrize("t", TYPES)
def test_add_sub(run, op, t):
    n = bits_of(t)
    a, b = pairs(n)
    (d,) = run.run(f"{op}.{t}", [a, b])
    f = (lambda x, y: x + y) if op == "add" else (lambda x, y: x - y)
    check_bits(d, [from_int(f(x, y), n) for x, y in zip(ints(a, t), ints(b, t))], [a, b], f"{op}.{t}")


@pytest.mark.parametrize("op", ["add", "sub"])
def test_add_sub_sat(run, op):
    a, b = pairs(32)
    (d,) = run.run(f"{op}.sat.s32", [a, b])
    f = (lambda x, y: x + y) if op == "add" else (lambda x, y: x - y)
    exp = [from_int(max(-2**31, min(2**31 - 1, f(x, y))), 32) for x, y in zip(ints(a, "s32"), ints(b, "s32"))]
    check_bits(d, exp, [a, b], f"{op}.sat.s32")


@pytest.mark.parametrize("mode,t", [(m, t) for m in ("lo", "hi", "wide") for t in TYPES
                                    if not (m == "wide" and t.endswith("64"))])
def test_mul(run, mode, t):
    n = bits_of(t)
    a, b = pairs(n)
    (d,) = run.run(f"mul.{mode}.{t}", [a, b])
    prods = [x * y for x, y in zip(ints(a, t), ints(b, t))]
    exp = {"lo": [from_int(p, n) for p in prods], "hi": [from_int(p >> n, n) for p in prods],
           "wide": [from_int(p, 2 * n) for p in prods]}[mode]
    check_bits(d, exp, [a, b], f"mul.{mode}.{t}")


@pytest.mark.parametrize("mode,t", [(m, t) for m in ("lo", "hi", "wide") for t in ("u32", "s32", "u64", "s64", "s16")
                                    if not (m == "wide" and t.endswith("64"))])
def test_mad(run, mode, t):
    n = bits_of(t)
    a, b = pairs(n)
    cn = 2 * n if mode == "wide" else n
    c = random_bits(cn, len(a), seed=99)
    (d,) = run.run(f"mad.{mode}.{t}", [a, b, c])
    cs = as_ints(c, cn, t[0] == "s")
    prods = [x * y for x, y in zip(ints(a, t), ints(b, t))]
    part = {"lo": [from_int(p, n) for p in prods], "hi": [from_int(p >> n, n) for p in prods],
            "wide": [from_int(p, 2 * n) for p in prods]}[mode]
    check_bits(d, [from_int(p + z, cn) for p, z in zip(part, cs)], [a, b, c], f"mad.{mode}.{t}")


def test_mad_hi_sat(run):
    a, b = pairs(32)
    c = random_bits(32, len(a), seed=5)
    c[: len(c) // 2] = np.where(c[: len(c) // 2] & 1, 0x7FFFFFFF, 0x80000000)
    (d,) = run.run("mad.hi.sat.s32", [a, b, c])
    exp = [from_int(max(-2**31, min(2**31 - 1, ((x * y) >> 32) + z)), 32)
           for x, y, z in zip(ints(a, "s32"), ints(b, "s32"), ints(c, "s32"))]
    check_bits(d, exp, [a, b, c], "mad.hi.sat.s32")


@pytest.mark.parametrize("op,t", [(op, t) for op in ("mul24.lo", "mul24.hi", "mad24.lo", "mad24.hi", "mad24.hi.sat")
                                  for t in ("u32", "s32") if not (op.endswith("sat") and t == "u32")])
def test_24bit(run, op, t):
    a, b = pairs(32)
    c = random_bits(32, len(a), seed=3)
    srcs = [a, b] if op.startswith("mul") else [a, b, c]
    (d,) = run.run(f"{op}.{t}", srcs)
    exp = []
    for i, (x, y) in enumerate(zip(ints(a, t), ints(b, t))):
        x24, y24 = (to_signed(x, 24), to_signed(y, 24)) if t == "s32" else (x & 0xFFFFFF, y & 0xFFFFFF)
        p = x24 * y24
        r = (p >> 16) & 0xFFFFFFFF if ".hi" in op else p & 0xFFFFFFFF
        if op.startswith("mad"):
            z = ints(c[i:i + 1], t)[0]
            if op.endswith("sat"):
                r = from_int(max(-2**31, min(2**31 - 1, to_signed(r, 32) + z)), 32)
            else:
                r = from_int(r + z, 32)
        exp.append(r)
    check_bits(d, exp, srcs, f"{op}.{t}")


@pytest.mark.parametrize("t", TYPES)
def test_sad(run, t):
    n = bits_of(t)
    a, b = pairs(n)
    c = random_bits(n, len(a), seed=11)
    (d,) = run.run(f"sad.{t}", [a, b, c])
    exp = [from_int(z + abs(x - y), n) for x, y, z in zip(ints(a, t), ints(b, t), ints(c, t))]
    check_bits(d, exp, [a, b, c], f"sad.{t}")


@pytest.mark.parametrize("op", ["div", "rem"])
@pytest.mark.parametrize("t", TYPES)
def test_div_rem(run, op, t):
    """Truncating division; x/0 = all ones, x%0 = x, INT_MIN/-1 = INT_MIN, INT_MIN%-1 = 0."""
    n = bits_of(t)
    a, b = pairs(n)
    (d,) = run.run(f"{op}.{t}", [a, b])
    exp = []
    for x, y in zip(ints(a, t), ints(b, t)):
        if y == 0:
            r = -1 if op == "div" else x
        else:
            q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
            r = q if op == "div" else x - q * y
        exp.append(from_int(r, n))
    check_bits(d, exp, [a, b], f"{op}.{t}")


@pytest.mark.parametrize("op", ["abs", "neg"])
@pytest.mark.parametrize("t", ["s16", "s32", "s64"])
def test_abs_neg(run, op, t):
    n = bits_of(t)
    a, _ = pairs(n)
    (d,) = run.run(f"{op}.{t}", [a])
    f = abs if op == "abs" else (lambda x: -x)
    check_bits(d, [from_int(f(x), n) for x in ints(a, t)], [a], f"{op}.{t}")


@pytest.mark.parametrize("op,t", [(op, t) for op in ("min", "max") for t in TYPES]
                         + [("min.relu", "s32"), ("max.relu", "s32")])
def test_min_max(run, op, t):
    n = bits_of(t)
    a, b = pairs(n)
    (d,) = run.run(f"{op}.{t}", [a, b])
    f = min if op.startswith("min") else max
    exp = [f(x, y) for x, y in zip(ints(a, t), ints(b, t))]
    if "relu" in op:
        exp = [max(v, 0) for v in exp]
    check_bits(d, [from_int(v, n) for v in exp], [a, b], f"{op}.{t}")


PACKED = [("add", "u16x2", False), ("add", "s16x2", False), ("sub", "u16x2", False), ("sub", "s16x2", False),
          ("min", "u16x2", False), ("min", "s16x2", False), ("max", "u16x2", False), ("max", "s16x2", False),
          ("min", "s16x2", True), ("max", "s16x2", True)]


@pytest.mark.parametrize("op,t,relu", PACKED)
def test_packed_16x2(run, op, t, relu):
    """Each 16-bit half on its own: wrapping add/sub, signed or unsigned min/max, .relu at 0."""
    a, b = pairs(32)
    edges16 = np.array([0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0xFFFE], np.uint32)
    ea, eb = np.meshgrid(edges16, edges16)
    a = np.concatenate([(ea.ravel() << 16) | eb.ravel()[::-1], a])
    b = np.concatenate([(eb.ravel() << 16) | ea.ravel(), b])
    text = f"{op}{'.relu' if relu else ''}.{t}"
    (d,) = run.run(text, [a, b])
    sgn = t[0] == "s"
    f = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "min": min, "max": max}[op]
    exp = []
    for x, y in zip(a.tolist(), b.tolist()):
        out = 0
        for k in (0, 16):
            v = f(as_ints([(x >> k) & 0xFFFF], 16, sgn)[0], as_ints([(y >> k) & 0xFFFF], 16, sgn)[0])
            out |= from_int(max(v, 0) if relu else v, 16) << k
        exp.append(out)
    check_bits(d, exp, [a, b], text)
