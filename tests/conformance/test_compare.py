"""setp / set with every comparison and combining operation, selp, slct."""

from __future__ import annotations

import numpy as np
import pytest

from conformance.floatvals import operand_sets
from conformance.refs import FORMATS, decode, flush
from conformance.values import as_ints, check_bits, pairs, random_bits

INT_OPS = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
           "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y}
UNSIGNED_OPS = {"lo": INT_OPS["lt"], "ls": INT_OPS["le"], "hi": INT_OPS["gt"], "hs": INT_OPS["ge"]}
FLOAT_OPS = ["eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"]
BOOL = {None: lambda p, c: p, "and": lambda p, c: p & c, "or": lambda p, c: p | c, "xor": lambda p, c: p ^ c}


def float_cmp(op: str, x, y) -> bool:
    unordered = x.kind == "nan" or y.kind == "nan"
    if op == "num":
        return not unordered
    if op == "nan":
        return unordered
    if unordered:
        return op.endswith("u")
    inf = float("inf")
    vx = (-inf if x.neg else inf) if x.kind == "inf" else x.v
    vy = (-inf if y.neg else inf) if y.kind == "inf" else y.v
    return INT_OPS[op.rstrip("u") if op != "neu" else "ne"](vx, vy)


SETP_INT = [(op, t) for t in ("s16", "s32", "s64", "u16", "u32", "u64") for op in INT_OPS] + \
    [(op, t) for t in ("u16", "u32", "u64") for op in UNSIGNED_OPS] + [(op, t) for t in ("b16", "b32", "b64")
                                                                       for op in ("eq", "ne")]
SETP_FLOAT = [(op, t, ftz) for op in FLOAT_OPS for t, ftz in (("f32", False), ("f32", True), ("f64", False),
                                                              ("f16", False), ("bf16", False), ("f16", True))]


@pytest.fixture(scope="module")
def setp_int(run):
    cases = {(op, t): (f"setp.{op}.{t}", list(pairs(int(t[1:]))), True) for op, t in SETP_INT}
    return cases, run.batch(cases)


@pytest.mark.parametrize("op,t", SETP_INT)
def test_setp_int(setp_int, op, t):
    cases, outs = setp_int
    _, (a, b), _ = cases[(op, t)]
    p, q = outs[(op, t)]
    n = int(t[1:])
    f = {**INT_OPS, **UNSIGNED_OPS}[op]
    exp = [int(f(x, y)) for x, y in zip(as_ints(a, n, t[0] == "s"), as_ints(b, n, t[0] == "s"))]
    check_bits(p, exp, [a, b], f"setp.{op}.{t}")
    check_bits(q, [1 - e for e in exp], [a, b], f"setp.{op}.{t} q")


@pytest.fixture(scope="module")
def setp_float(run):
    cases = {(op, t, ftz): (f"setp.{op}{'.ftz' if ftz else ''}.{t}", operand_sets(FORMATS[t], 2, n=1500, seed=9))
             for op, t, ftz in SETP_FLOAT}
    return cases, run.batch(cases)


@pytest.mark.parametrize("op,t,ftz", SETP_FLOAT)
def test_setp_float(setp_float, op, t, ftz):
    cases, outs = setp_float
    text, (a, b) = cases[(op, t, ftz)]
    (p,) = outs[(op, t, ftz)]
    f = FORMATS[t]
    exp = []
    for x, y in zip(a.tolist(), b.tolist()):
        if ftz:
            x, y = flush(x, f), flush(y, f)
        exp.append(int(float_cmp(op, decode(x, f), decode(y, f))))
    check_bits(p, exp, [a, b], text)


@pytest.mark.parametrize("boolop", ["and", "or", "xor"])
@pytest.mark.parametrize("op,t", [("lt", "s32"), ("gtu", "f32"), ("ne", "f64")])
def test_setp_combine(run, boolop, op, t):
    if t[0] == "f":
        a, b = operand_sets(FORMATS[t], 2, n=1500, seed=10)
    else:
        a, b = pairs(32)
    c = random_bits(1, len(a), seed=11)
    p, q = run.run(f"setp.{op}.{boolop}.{t}", [a, b, c], pred_out=True)
    if t[0] == "f":
        f = FORMATS[t]
        base = [float_cmp(op, decode(x, f), decode(y, f)) for x, y in zip(a.tolist(), b.tolist())]
    else:
        base = [INT_OPS[op](x, y) for x, y in zip(as_ints(a, 32, True), as_ints(b, 32, True))]
    cs = c.tolist()
    check_bits(p, [int(BOOL[boolop](int(r), k)) for r, k in zip(base, cs)], [a, b, c], "p")
    check_bits(q, [int(BOOL[boolop](1 - int(r), k)) for r, k in zip(base, cs)], [a, b, c], "q")


@pytest.mark.parametrize("t", ["f16x2", "bf16x2"])
@pytest.mark.parametrize("op", ["lt", "equ", "nan"])
def test_setp_packed(run, t, op):
    f = FORMATS[t[:-2]]
    a, b = operand_sets(f, 2, n=1500, seed=12)
    a32 = a.astype(np.uint32) | (b.astype(np.uint32)[::-1] << 16)
    b32 = b.astype(np.uint32) | (a.astype(np.uint32)[::-1] << 16)
    p, q = run.run(f"setp.{op}.{t}", [a32, b32], pred_out=True)
    lo = [int(float_cmp(op, decode(x & 0xFFFF, f), decode(y & 0xFFFF, f))) for x, y in zip(a32.tolist(), b32.tolist())]
    hi = [int(float_cmp(op, decode(x >> 16, f), decode(y >> 16, f))) for x, y in zip(a32.tolist(), b32.tolist())]
    check_bits(p, lo, [a32, b32], "p (low halves)")
    check_bits(q, hi, [a32, b32], "q (high halves)")


@pytest.mark.parametrize("dtype", ["u32", "s32", "f32"])
@pytest.mark.parametrize("op,t", [("lt", "s32"), ("hs", "u64"), ("leu", "f32"), ("ge", "f64")])
def test_set(run, dtype, op, t):
    if t[0] == "f":
        a, b = operand_sets(FORMATS[t], 2, n=1500, seed=13)
        f = FORMATS[t]
        base = [float_cmp(op, decode(x, f), decode(y, f)) for x, y in zip(a.tolist(), b.tolist())]
    else:
        n = int(t[1:])
        a, b = pairs(n)
        fn = {**INT_OPS, **UNSIGNED_OPS}[op]
        base = [fn(x, y) for x, y in zip(as_ints(a, n, t[0] == "s"), as_ints(b, n, t[0] == "s"))]
    (d,) = run.run(f"set.{op}.{dtype}.{t}", [a, b])
    true = 0x3F800000 if dtype == "f32" else 0xFFFFFFFF
    check_bits(d, [true if r else 0 for r in base], [a, b], f"set.{op}.{dtype}.{t}")


@pytest.mark.parametrize("t", ["b16", "b32", "b64", "f32", "f64", "s32"])
def test_selp(run, t):
    n = int(t[1:])
    a, b = random_bits(n, 2000, seed=14), random_bits(n, 2000, seed=15)
    c = random_bits(1, 2000, seed=16)
    (d,) = run.run(f"selp.{t}", [a, b, c])
    check_bits(d, [x if k else y for x, y, k in zip(a.tolist(), b.tolist(), c.tolist())], [a, b, c], f"selp.{t}")


@pytest.mark.parametrize("dt,ct,ftz", [("b32", "s32", False), ("f32", "s32", False), ("u64", "f32", False),
                                       ("s32", "f32", True)])
def test_slct(run, dt, ct, ftz):
    n = int(dt[1:])
    a, b = random_bits(n, 2000, seed=17), random_bits(n, 2000, seed=18)
    (c,) = operand_sets(FORMATS["f32"], 1, n=2000 - len(operand_sets(FORMATS["f32"], 1, n=0)[0]), seed=19)
    (d,) = run.run(f"slct{'.ftz' if ftz else ''}.{dt}.{ct}", [a, b, c])
    exp = []
    for x, y, k in zip(a.tolist(), b.tolist(), c.tolist()):
        if ct == "s32":
            take = k < 2**31
        else:
            v = decode(flush(k, FORMATS["f32"]) if ftz else k, FORMATS["f32"])
            take = v.kind != "nan" and (v.is_zero or not v.neg)
        exp.append(x if take else y)
    check_bits(d, exp, [a, b, c], f"slct.{dt}.{ct}")
