"""Extended-precision arithmetic: the carry flag in and out (cc), against Python integers."""

from __future__ import annotations

import pytest

from conformance.values import check_bits, pairs, random_bits


def u(arr) -> list[int]:
    return [int(x) for x in arr]


@pytest.mark.parametrize("op", ["add.cc", "addc", "addc.cc", "sub.cc", "subc", "subc.cc"])
@pytest.mark.parametrize("t", ["u32", "s32", "u64", "s64"])
def test_add_sub_carry(run, op, t):
    n = int(t[1:])
    a, b = pairs(n)
    cin = random_bits(1, len(a), seed=31)
    srcs = [a, b] + ([cin] if op.startswith(("addc", "subc")) else [])
    outs = run.run(f"{op}.{t}", srcs)
    cins = u(cin) if len(srcs) == 3 else [0] * len(a)
    m = (1 << n) - 1
    if op.startswith("add"):
        full = [x + y + c for x, y, c in zip(u(a), u(b), cins)]
        carry = [int(v > m) for v in full]
    else:
        full = [x - y - c for x, y, c in zip(u(a), u(b), cins)]
        carry = [int(v < 0) for v in full]  # borrow
    check_bits(outs[0], [v & m for v in full], srcs, op)
    if op.endswith("cc"):
        check_bits(outs[1], carry, srcs, op + " carry-out")


@pytest.mark.parametrize("op", ["mad.lo.cc", "mad.hi.cc", "madc.lo", "madc.hi", "madc.lo.cc", "madc.hi.cc"])
@pytest.mark.parametrize("t", ["u32", "s32", "u64", "s64"])
def test_mad_carry(run, op, t):
    n = int(t[1:])
    a, b = pairs(n)
    c = random_bits(n, len(a), seed=32)
    cin = random_bits(1, len(a), seed=33)
    srcs = [a, b, c] + ([cin] if op.startswith("madc") else [])
    outs = run.run(f"{op}.{t}", srcs)
    m = (1 << n) - 1

    def sval(x):
        return x - (1 << n) if (t[0] == "s" and x >> (n - 1)) else x

    cins = u(cin) if len(srcs) == 4 else [0] * len(a)
    full = []
    for x, y, z, k in zip(u(a), u(b), u(c), cins):
        p = sval(x) * sval(y)
        part = (p >> n) & m if ".hi" in op else p & m
        full.append(part + z + k)
    check_bits(outs[0], [v & m for v in full], srcs, op)
    if op.endswith("cc"):
        check_bits(outs[1], [int(v > m) for v in full], srcs, op + " carry-out")
