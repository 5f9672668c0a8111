"""Integer arithmetic against the exact Python integer references of models/integer.py, over
edge-value pairs and large random samples (the sweep runs every form on fewer inputs)."""

from __future__ import annotations

import numpy as np
import pytest

from conformance.models import integer as ref
from conformance.values import check_bits, pairs, random_bits

TYPES = ["u16", "u32", "u64", "s16", "s32", "s64"]


def bits_of(t: str) -> int:
    return int(t[1:])


@pytest.mark.parametrize("op", ["add", "sub"])
@pytest.mark.parametrize("t", TYPES)
def test_add_sub(run, op, t):
    a, b = pairs(bits_of(t))
    (d,) = run.run(f"{op}.{t}", [a, b])
    check_bits(d, ref.over(lambda x, y: ref.add_sub(op, t, x, y), a, b), [a, b], f"{op}.{t}")


@pytest.mark.parametrize("op", ["add", "sub"])
def test_add_sub_sat(run, op):
    a, b = pairs(32)
    (d,) = run.run(f"{op}.sat.s32", [a, b])
    check_bits(d, ref.over(lambda x, y: ref.add_sub(op, "s32", x, y, sat=True), a, b), [a, b], f"{op}.sat.s32")


@pytest.mark.parametrize("mode,t", [(m, t) for m in ("lo", "hi", "wide") for t in TYPES
                                    if not (m == "wide" and t.endswith("64"))])
def test_mul(run, mode, t):
    a, b = pairs(bits_of(t))
    (d,) = run.run(f"mul.{mode}.{t}", [a, b])
    check_bits(d, ref.over(lambda x, y: ref.product(mode, t, x, y), a, b), [a, b], f"mul.{mode}.{t}")


@pytest.mark.parametrize("mode,t", [(m, t) for m in ("lo", "hi", "wide") for t in ("u32", "s32", "u64", "s64", "s16")
                                    if not (m == "wide" and t.endswith("64"))])
def test_mad(run, mode, t):
    n = bits_of(t)
    a, b = pairs(n)
    c = random_bits(2 * n if mode == "wide" else n, len(a), seed=99)
    (d,) = run.run(f"mad.{mode}.{t}", [a, b, c])
    check_bits(d, ref.over(lambda x, y, z: ref.mad(mode, t, x, y, z), a, b, c), [a, b, c], f"mad.{mode}.{t}")


def test_mad_hi_sat(run):
    a, b = pairs(32)
    c = random_bits(32, len(a), seed=5)
    c[: len(c) // 2] = np.where(c[: len(c) // 2] & 1, 0x7FFFFFFF, 0x80000000)
    (d,) = run.run("mad.hi.sat.s32", [a, b, c])
    check_bits(d, ref.over(lambda x, y, z: ref.mad("hi", "s32", x, y, z, sat=True), a, b, c), [a, b, c],
               "mad.hi.sat.s32")


@pytest.mark.parametrize("op,t", [(op, t) for op in ("mul24.lo", "mul24.hi", "mad24.lo", "mad24.hi", "mad24.hi.sat")
                                  for t in ("u32", "s32") if not (op.endswith("sat") and t == "u32")])
def test_24bit(run, op, t):
    a, b = pairs(32)
    c = random_bits(32, len(a), seed=3)
    hi = ".hi" in op
    if op.startswith("mul"):
        srcs, f = [a, b], (lambda x, y: ref.mul24(hi, t, x, y))
    else:
        srcs, f = [a, b, c], (lambda x, y, z: ref.mad24(hi, t, x, y, z, sat=op.endswith("sat")))
    (d,) = run.run(f"{op}.{t}", srcs)
    check_bits(d, ref.over(f, *srcs), srcs, f"{op}.{t}")


@pytest.mark.parametrize("t", TYPES)
def test_sad(run, t):
    n = bits_of(t)
    a, b = pairs(n)
    c = random_bits(n, len(a), seed=11)
    (d,) = run.run(f"sad.{t}", [a, b, c])
    check_bits(d, ref.over(lambda x, y, z: ref.sad(t, x, y, z), a, b, c), [a, b, c], f"sad.{t}")


@pytest.mark.parametrize("op", ["div", "rem"])
@pytest.mark.parametrize("t", TYPES)
def test_div_rem(run, op, t):
    """Truncating division; x/0 = x%0 = all ones, INT_MIN/-1 = INT_MIN, INT_MIN%-1 = 0."""
    a, b = pairs(bits_of(t))
    (d,) = run.run(f"{op}.{t}", [a, b])
    check_bits(d, ref.over(lambda x, y: ref.div_rem(op, t, x, y), a, b), [a, b], f"{op}.{t}")


@pytest.mark.parametrize("op", ["abs", "neg"])
@pytest.mark.parametrize("t", ["s16", "s32", "s64"])
def test_abs_neg(run, op, t):
    a, _ = pairs(bits_of(t))
    (d,) = run.run(f"{op}.{t}", [a])
    check_bits(d, ref.over(lambda x: ref.abs_neg(op, t, x), a), [a], f"{op}.{t}")


@pytest.mark.parametrize("op,t", [(op, t) for op in ("min", "max") for t in TYPES]
                         + [("min.relu", "s32"), ("max.relu", "s32")])
def test_min_max(run, op, t):
    a, b = pairs(bits_of(t))
    (d,) = run.run(f"{op}.{t}", [a, b])
    f = (lambda x, y: ref.min_max(op[:3], t, x, y, relu="relu" in op))
    check_bits(d, ref.over(f, a, b), [a, b], f"{op}.{t}")


PACKED = [("add", "u16x2", False), ("add", "s16x2", False), ("min", "u16x2", False), ("min", "s16x2", False), ("max", "u16x2", False), ("max", "s16x2", False),
          ("min", "s16x2", True), ("max", "s16x2", True)]


@pytest.mark.parametrize("op,t,relu", PACKED)
def test_packed_16x2(run, op, t, relu):
    """Each 16-bit half on its own: wrapping add, signed or unsigned min/max, .relu at 0."""
    a, b = pairs(32)
    edges16 = np.array([0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0xFFFE], np.uint32)
    ea, eb = np.meshgrid(edges16, edges16)
    a = np.concatenate([(ea.ravel() << 16) | eb.ravel()[::-1], a])
    b = np.concatenate([(eb.ravel() << 16) | ea.ravel(), b])
    text = f"{op}{'.relu' if relu else ''}.{t}"
    (d,) = run.run(text, [a, b])
    if op == "add":
        f = (lambda x, y: ref.add_sub(op, t, x, y))
    else:
        f = (lambda x, y: ref.min_max(op, t, x, y, relu))
    check_bits(d, ref.over(f, a, b), [a, b], text)
