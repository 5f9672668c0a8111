"""Extended-precision arithmetic: the carry flag in and out (cc), against the Python-integer
reference of models/integer.py."""

from __future__ import annotations

import pytest

from conformance.models import integer as ref
from conformance.values import check_bits, pairs, random_bits


def _check(run, text: str, srcs: list, carry_in: bool) -> None:
    opcode, *mods = text.split(".")
    t = mods[-1]
    mode = "hi" if "hi" in mods else "lo"
    nsrc = len(srcs) - carry_in
    outs = run.run(text, srcs)
    exp = ref.over(lambda *xs: ref.carry_op(opcode, mode, t, list(xs[:nsrc]), xs[nsrc] if carry_in else 0), *srcs)
    check_bits(outs[0], [d for d, _ in exp], srcs, text)
    if "cc" in mods:
        check_bits(outs[1], [cc for _, cc in exp], srcs, text + " carry-out")


@pytest.mark.parametrize("op", ["add.cc", "addc", "addc.cc", "sub.cc", "subc", "subc.cc"])
@pytest.mark.parametrize("t", ["u32", "s32", "u64", "s64"])
def test_add_sub_carry(run, op, t):
    a, b = pairs(int(t[1:]))
    carry_in = op.startswith(("addc", "subc"))
    srcs = [a, b] + ([random_bits(1, len(a), seed=31)] if carry_in else [])
    _check(run, f"{op}.{t}", srcs, carry_in)


@pytest.mark.parametrize("op", ["mad.lo.cc", "mad.hi.cc", "madc.lo", "madc.hi", "madc.lo.cc", "madc.hi.cc"])
@pytest.mark.parametrize("t", ["u32", "s32", "u64", "s64"])
def test_mad_carry(run, op, t):
    n = int(t[1:])
    a, b = pairs(n)
    carry_in = op.startswith("madc")
    srcs = [a, b, random_bits(n, len(a), seed=32)] + ([random_bits(1, len(a), seed=33)] if carry_in else [])
    _check(run, f"{op}.{t}", srcs, carry_in)
