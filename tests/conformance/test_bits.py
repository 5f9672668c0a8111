"""Bit manipulation, shifts, logic and byte dot products against Python references."""

from __future__ import annotations

import numpy as np
import pytest

from conformance.harness import Imm
from conformance.values import as_ints, check_bits, from_int, pairs, random_bits, to_signed


def u(arr) -> list[int]:
    return [int(x) for x in arr]


def bit(x: int, i: int) -> int:
    return (x >> i) & 1


@pytest.mark.parametrize("op", ["popc", "clz", "brev"])
@pytest.mark.parametrize("n", [32, 64])
def test_count_reverse(run, op, n):
    a, _ = pairs(n)
    (d,) = run.run(f"{op}.b{n}", [a])
    ref = {"popc": lambda x: bin(x).count("1"),
           "clz": lambda x: n - x.bit_length(),
           "brev": lambda x: int(format(x, f"0{n}b")[::-1], 2)}[op]
    check_bits(d, [ref(x) for x in u(a)], [a], f"{op}.b{n}")


@pytest.mark.parametrize("t", ["u32", "s32", "u64", "s64"])
@pytest.mark.parametrize("shiftamt", [False, True])
def test_bfind(run, t, shiftamt):
    n = int(t[1:])
    a, _ = pairs(n)
    (d,) = run.run(f"bfind{'.shiftamt' if shiftamt else ''}.{t}", [a])
    exp = []
    for x in as_ints(a, n, t[0] == "s"):
        y = ~x if x < 0 else x  # signed: the first bit that differs from the sign
        pos = y.bit_length() - 1
        exp.append(0xFFFFFFFF if pos < 0 else (n - 1 - pos if shiftamt else pos))
    check_bits(d, exp, [a], t)


def test_fns(run):
    g = np.random.default_rng(5)
    n = 4000
    mask = np.concatenate([np.array([0, 0xFFFFFFFF, 1, 0x80000000, 0x12345678] * 40, np.uint32),
                           g.integers(0, 2**32, n, dtype=np.uint32)])
    base = g.integers(0, 32, len(mask), dtype=np.uint32)
    offset = g.integers(-33, 34, len(mask)).astype(np.int32).view(np.uint32)
    (d,) = run.run("fns.b32", [mask, base, offset])
    exp = []
    for m, bs, off in zip(u(mask), u(base), as_ints(offset, 32, True)):
        r = 0xFFFFFFFF
        if off == 0:
            r = bs if bit(m, bs) else r
        else:
            order = range(bs, 32) if off > 0 else range(bs, -1, -1)
            hits = [p for p in order if bit(m, p)]
            if len(hits) >= abs(off):
                r = hits[abs(off) - 1]
        exp.append(r)
    check_bits(d, exp, [mask, base, offset], "fns.b32")


def _positions(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(seed)
    small = np.array([0, 1, 7, 8, 31, 32, 33, 63, 64, 65, 255, 256, 0x1FF, 0xFFFFFFFF], np.uint32)
    pos = np.concatenate([np.repeat(small, len(small)), g.integers(0, 80, count, dtype=np.uint32)])
    ln = np.concatenate([np.tile(small, len(small)), g.integers(0, 80, count, dtype=np.uint32)])
    return pos, ln


@pytest.mark.parametrize("t", ["u32", "s32", "u64", "s64"])
def test_bfe(run, t):
    n = int(t[1:])
    pos, ln = _positions(3000, 2)
    a = random_bits(n, len(pos), seed=4)
    (d,) = run.run(f"bfe.{t}", [a, pos, ln])
    exp = []
    for x, p, l in zip(u(a), u(pos), u(ln)):
        p, l = p & 0xFF, l & 0xFF
        sbit = 0 if (t[0] == "u" or l == 0) else bit(x, min(p + l - 1, n - 1))
        r = 0
        for i in range(n):
            b = bit(x, p + i) if (i < l and p + i <= n - 1) else sbit
            r |= b << i
        exp.append(r)
    check_bits(d, exp, [a, pos, ln], f"bfe.{t}")


@pytest.mark.parametrize("n", [32, 64])
def test_bfi(run, n):
    pos, ln = _positions(3000, 3)
    f, base = random_bits(n, len(pos), seed=8), random_bits(n, len(pos), seed=9)
    (d,) = run.run(f"bfi.b{n}", [f, base, pos, ln])
    exp = []
    for x, y, p, l in zip(u(f), u(base), u(pos), u(ln)):
        p, l = p & 0xFF, l & 0xFF
        r = y
        for i in range(l):
            if p + i < n:
                r = (r & ~(1 << (p + i))) | (bit(x, i) << (p + i))
        exp.append(r)
    check_bits(d, exp, [f, base, pos, ln], f"bfi.b{n}")


@pytest.mark.parametrize("mode", ["clamp", "wrap"])
@pytest.mark.parametrize("t", ["u32", "s32"])
def test_szext(run, mode, t):
    a = random_bits(32, 3000, seed=10)
    w = np.random.default_rng(1).integers(0, 70, len(a), dtype=np.uint32)
    w[:4] = [0, 32, 0xFFFFFFFF, 31]
    (d,) = run.run(f"szext.{mode}.{t}", [a, w])
    exp = []
    for x, k in zip(u(a), u(w)):
        k = k % 32 if mode == "wrap" else min(k, 32)
        v = x & ((1 << k) - 1)
        exp.append(from_int(to_signed(v, k) if (t == "s32" and k) else v, 32))
    check_bits(d, exp, [a, w], f"szext.{mode}.{t}")


@pytest.mark.parametrize("mode", ["clamp", "wrap"])
def test_bmsk(run, mode):
    g = np.random.default_rng(12)
    a = g.integers(0, 70, 3000, dtype=np.uint32)
    b = g.integers(0, 70, 3000, dtype=np.uint32)
    a[:3], b[:3] = [0xFFFFFFFF, 0, 31], [1, 0xFFFFFFFF, 1]
    (d,) = run.run(f"bmsk.{mode}.b32", [a, b])
    exp = []
    for p, l in zip(u(a), u(b)):
        if mode == "wrap":
            p, l = p % 32, l % 32
        else:
            p, l = min(p, 32), min(l, 32)
        exp.append(sum(1 << i for i in range(p, min(p + l, 32))))
    check_bits(d, exp, [a, b], f"bmsk.{mode}.b32")


PRMT_TABLE = {  # d.b3 d.b2 d.b1 d.b0 for selector 0..3, as listed in the PTX manual
    "f4e": ["3210", "4321", "5432", "6543"],
    "b4e": ["5670", "6701", "7012", "0123"],
    "rc8": ["0000", "1111", "2222", "3333"],
    "ecl": ["3210", "3211", "3222", "3333"],
    "ecr": ["0000", "1110", "2210", "3210"],
    "rc16": ["1010", "3232", "1010", "3232"],
}


@pytest.mark.parametrize("mode", [None, *PRMT_TABLE])
def test_prmt(run, mode):
    a, b = random_bits(32, 3000, seed=13), random_bits(32, 3000, seed=14)
    c = random_bits(32, 3000, seed=15)
    (d,) = run.run(f"prmt.b32{'.' + mode if mode else ''}", [a, b, c])
    exp = []
    for x, y, s in zip(u(a), u(b), u(c)):
        src = [(x >> (8 * i)) & 0xFF for i in range(4)] + [(y >> (8 * i)) & 0xFF for i in range(4)]
        r = 0
        for i in range(4):
            if mode is None:
                nib = (s >> (4 * i)) & 0xF
                byte = src[nib & 7]
                if nib & 8:
                    byte = 0xFF if byte & 0x80 else 0
            else:
                byte = src[int(PRMT_TABLE[mode][s & 3][3 - i])]
            r |= byte << (8 * i)
        exp.append(r)
    check_bits(d, exp, [a, b, c], f"prmt {mode}")


@pytest.mark.parametrize("direction", ["l", "r"])
@pytest.mark.parametrize("mode", ["clamp", "wrap"])
def test_shf(run, direction, mode):
    a, b = random_bits(32, 3000, seed=16), random_bits(32, 3000, seed=17)
    c = np.concatenate([np.arange(0, 70, dtype=np.uint32), np.array([0xFFFFFFFF, 0x80000020], np.uint32),
                        random_bits(32, 2928, seed=18)])
    (d,) = run.run(f"shf.{direction}.{mode}.b32", [a, b, c])
    exp = []
    for lo, hi, n in zip(u(a), u(b), u(c)):
        n = n & 31 if mode == "wrap" else min(n, 32)
        both = (hi << 32) | lo
        exp.append(((both << n) >> 32) & 0xFFFFFFFF if direction == "l" else (both >> n) & 0xFFFFFFFF)
    check_bits(d, exp, [a, b, c], f"shf.{direction}.{mode}")


@pytest.mark.parametrize("op,t", [("shl", f"b{n}") for n in (16, 32, 64)]
                         + [("shr", f"{k}{n}") for k in "bus" for n in (16, 32, 64)])
def test_shifts(run, op, t):
    n = int(t[1:])
    a = random_bits(n, 3000, seed=19)
    s = np.concatenate([np.arange(0, 130, dtype=np.uint32), np.array([0xFFFFFFFF, 0x80000001, 1 << 16], np.uint32),
                        np.random.default_rng(2).integers(0, 2**32, 2867, dtype=np.uint32)])
    (d,) = run.run(f"{op}.{t}", [a, s])
    exp = []
    for x, k in zip(as_ints(a, n, t[0] == "s"), u(s)):
        exp.append(from_int(x << min(k, n), n) if op == "shl" else from_int(x >> min(k, n), n))
    check_bits(d, exp, [a, s], f"{op}.{t}")


@pytest.mark.parametrize("op,t", [(op, t) for op in ("and", "or", "xor", "not", "cnot")
                                  for t in ("b16", "b32", "b64", "pred") if not (op == "cnot" and t == "pred")])
def test_logic(run, op, t):
    n = 1 if t == "pred" else int(t[1:])
    a, b = pairs(n) if n > 1 else (random_bits(1, 64, 1), random_bits(1, 64, 2))
    srcs = [a] if op in ("not", "cnot") else [a, b]
    (d,) = run.run(f"{op}.{t}", srcs)
    m = (1 << n) - 1
    ref = {"and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y,
           "not": lambda x, y: ~x & m, "cnot": lambda x, y: int(x == 0)}[op]
    check_bits(d, [ref(x, y) for x, y in zip(u(a), u(b))], srcs, f"{op}.{t}")


@pytest.mark.parametrize("lut", [0x00, 0xFF, 0xF0, 0xCC, 0xAA, 0x96, 0xE8, 0x80, 0xFE, 0x1E, 0x6A, 0xB4])
def test_lop3(run, lut):
    a, b, c = (random_bits(32, 2000, seed=s) for s in (20, 21, 22))
    (d,) = run.run("lop3.b32", [a, b, c, Imm(lut)])
    exp = []
    for x, y, z in zip(u(a), u(b), u(c)):
        r = 0
        for i in range(32):
            idx = (bit(x, i) << 2) | (bit(y, i) << 1) | bit(z, i)
            r |= bit(lut, idx) << i
        exp.append(r)
    check_bits(d, exp, [a, b, c], f"lop3 {lut:#x}")


@pytest.mark.parametrize("op", ["dp4a", "dp2a.lo", "dp2a.hi"])
@pytest.mark.parametrize("ta,tb", [("u32", "u32"), ("u32", "s32"), ("s32", "u32"), ("s32", "s32")])
def test_dot(run, op, ta, tb):
    a, b = pairs(32)
    c = random_bits(32, len(a), seed=23)
    (d,) = run.run(f"{op}.{ta}.{tb}", [a, b, c])
    sa, sb = ta == "s32", tb == "s32"
    exp = []
    for x, y, z in zip(u(a), u(b), u(c)):
        yb = [(to_signed((y >> (8 * i)) & 0xFF, 8) if sb else (y >> (8 * i)) & 0xFF) for i in range(4)]
        if op == "dp4a":
            xs = [(to_signed((x >> (8 * i)) & 0xFF, 8) if sa else (x >> (8 * i)) & 0xFF) for i in range(4)]
            r = z + sum(p * q for p, q in zip(xs, yb))
        else:
            xs = [(to_signed((x >> (16 * i)) & 0xFFFF, 16) if sa else (x >> (16 * i)) & 0xFFFF) for i in range(2)]
            k = 2 if op.endswith("hi") else 0
            r = z + xs[0] * yb[k] + xs[1] * yb[k + 1]
        exp.append(from_int(r, 32))
    check_bits(d, exp, [a, b, c], f"{op}.{ta}.{tb}")

