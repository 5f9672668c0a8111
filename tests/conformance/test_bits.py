"""Bit manipulation, shifts, logic and byte dot products against the Python references of
models/integer.py, over edge values and large random samples."""

from __future__ import annotations

import numpy as np
import pytest

from conformance.harness import Imm
from conformance.models import integer as ref
from conformance.values import check_bits, pairs, random_bits


@pytest.mark.parametrize("op", ["popc", "clz", "brev"])
@pytest.mark.parametrize("n", [32, 64])
def test_count_reverse(run, op, n):
    a, _ = pairs(n)
    (d,) = run.run(f"{op}.b{n}", [a])
    f = {"popc": ref.popc, "clz": ref.clz, "brev": ref.brev}[op]
    check_bits(d, ref.over(lambda x: f(n, x), a), [a], f"{op}.b{n}")


@pytest.mark.parametrize("t", ["u32", "s32", "u64", "s64"])
@pytest.mark.parametrize("shiftamt", [False, True])
def test_bfind(run, t, shiftamt):
    a, _ = pairs(int(t[1:]))
    (d,) = run.run(f"bfind{'.shiftamt' if shiftamt else ''}.{t}", [a])
    check_bits(d, ref.over(lambda x: ref.bfind(t, shiftamt, x), a), [a], t)


def test_fns(run):
    g = np.random.default_rng(5)
    n = 4000
    mask = np.concatenate([np.array([0, 0xFFFFFFFF, 1, 0x80000000, 0x12345678] * 40, np.uint32),
                           g.integers(0, 2**32, n, dtype=np.uint32)])
    base = g.integers(0, 32, len(mask), dtype=np.uint32)
    offset = g.integers(-33, 34, len(mask)).astype(np.int32).view(np.uint32)
    (d,) = run.run("fns.b32", [mask, base, offset])
    check_bits(d, ref.over(ref.fns, mask, base, offset), [mask, base, offset], "fns.b32")


def _positions(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(seed)
    small = np.array([0, 1, 7, 8, 31, 32, 33, 63, 64, 65, 255, 256, 0x1FF, 0xFFFFFFFF], np.uint32)
    pos = np.concatenate([np.repeat(small, len(small)), g.integers(0, 80, count, dtype=np.uint32)])
    ln = np.concatenate([np.tile(small, len(small)), g.integers(0, 80, count, dtype=np.uint32)])
    return pos, ln


@pytest.mark.parametrize("t", ["u32", "s32", "u64", "s64"])
def test_bfe(run, t):
    pos, ln = _positions(3000, 2)
    a = random_bits(int(t[1:]), len(pos), seed=4)
    (d,) = run.run(f"bfe.{t}", [a, pos, ln])
    check_bits(d, ref.over(lambda x, p, l: ref.bfe(t, x, p, l), a, pos, ln), [a, pos, ln], f"bfe.{t}")


@pytest.mark.parametrize("n", [32, 64])
def test_bfi(run, n):
    pos, ln = _positions(3000, 3)
    f, base = random_bits(n, len(pos), seed=8), random_bits(n, len(pos), seed=9)
    (d,) = run.run(f"bfi.b{n}", [f, base, pos, ln])
    check_bits(d, ref.over(lambda x, y, p, l: ref.bfi(n, x, y, p, l), f, base, pos, ln), [f, base, pos, ln],
               f"bfi.b{n}")


@pytest.mark.parametrize("mode", ["clamp", "wrap"])
@pytest.mark.parametrize("t", ["u32", "s32"])
def test_szext(run, mode, t):
    a = random_bits(32, 3000, seed=10)
    w = np.random.default_rng(1).integers(0, 70, len(a), dtype=np.uint32)
    w[:4] = [0, 32, 0xFFFFFFFF, 31]
    (d,) = run.run(f"szext.{mode}.{t}", [a, w])
    check_bits(d, ref.over(lambda x, k: ref.szext(mode, t, x, k), a, w), [a, w], f"szext.{mode}.{t}")


@pytest.mark.parametrize("mode", ["clamp", "wrap"])
def test_bmsk(run, mode):
    g = np.random.default_rng(12)
    a = g.integers(0, 70, 3000, dtype=np.uint32)
    b = g.integers(0, 70, 3000, dtype=np.uint32)
    a[:3], b[:3] = [0xFFFFFFFF, 0, 31], [1, 0xFFFFFFFF, 1]
    (d,) = run.run(f"bmsk.{mode}.b32", [a, b])
    check_bits(d, ref.over(lambda p, l: ref.bmsk(mode, p, l), a, b), [a, b], f"bmsk.{mode}.b32")


@pytest.mark.parametrize("mode", [None, *ref.PRMT_TABLE])
def test_prmt(run, mode):
    a, b = random_bits(32, 3000, seed=13), random_bits(32, 3000, seed=14)
    c = random_bits(32, 3000, seed=15)
    (d,) = run.run(f"prmt.b32{'.' + mode if mode else ''}", [a, b, c])
    check_bits(d, ref.over(lambda x, y, s: ref.prmt(mode, x, y, s), a, b, c), [a, b, c], f"prmt {mode}")


@pytest.mark.parametrize("direction", ["l", "r"])
@pytest.mark.parametrize("mode", ["clamp", "wrap"])
def test_shf(run, direction, mode):
    a, b = random_bits(32, 3000, seed=16), random_bits(32, 3000, seed=17)
    c = np.concatenate([np.arange(0, 70, dtype=np.uint32), np.array([0xFFFFFFFF, 0x80000020], np.uint32),
                        random_bits(32, 2928, seed=18)])
    (d,) = run.run(f"shf.{direction}.{mode}.b32", [a, b, c])
    check_bits(d, ref.over(lambda lo, hi, k: ref.shf(direction, mode, lo, hi, k), a, b, c), [a, b, c],
               f"shf.{direction}.{mode}")


@pytest.mark.parametrize("op,t", [("shl", f"b{n}") for n in (16, 32, 64)]
                         + [("shr", f"{k}{n}") for k in "bus" for n in (16, 32, 64)])
def test_shifts(run, op, t):
    a = random_bits(int(t[1:]), 3000, seed=19)
    s = np.concatenate([np.arange(0, 130, dtype=np.uint32), np.array([0xFFFFFFFF, 0x80000001, 1 << 16], np.uint32),
                        np.random.default_rng(2).integers(0, 2**32, 2867, dtype=np.uint32)])
    (d,) = run.run(f"{op}.{t}", [a, s])
    check_bits(d, ref.over(lambda x, k: ref.shift(op, t, x, k), a, s), [a, s], f"{op}.{t}")


@pytest.mark.parametrize("op,t", [(op, t) for op in ("and", "or", "xor", "not", "cnot")
                                  for t in ("b16", "b32", "b64", "pred") if not (op == "cnot" and t == "pred")])
def test_logic(run, op, t):
    n = 1 if t == "pred" else int(t[1:])
    a, b = pairs(n) if n > 1 else (random_bits(1, 64, 1), random_bits(1, 64, 2))
    srcs = [a] if op in ("not", "cnot") else [a, b]
    (d,) = run.run(f"{op}.{t}", srcs)
    check_bits(d, ref.over(lambda x, y=0: ref.logic(op, n, x, y), *srcs), srcs, f"{op}.{t}")


@pytest.mark.parametrize("lut", [0x00, 0xFF, 0xF0, 0xCC, 0xAA, 0x96, 0xE8, 0x80, 0xFE, 0x1E, 0x6A, 0xB4])
def test_lop3(run, lut):
    a, b, c = (random_bits(32, 2000, seed=s) for s in (20, 21, 22))
    (d,) = run.run("lop3.b32", [a, b, c, Imm(lut)])
    check_bits(d, ref.over(lambda x, y, z: ref.lop3(lut, x, y, z), a, b, c), [a, b, c], f"lop3 {lut:#x}")


@pytest.mark.parametrize("op", ["dp4a", "dp2a.lo", "dp2a.hi"])
@pytest.mark.parametrize("ta,tb", [("u32", "u32"), ("u32", "s32"), ("s32", "u32"), ("s32", "s32")])
def test_dot(run, op, ta, tb):
    a, b = pairs(32)
    c = random_bits(32, len(a), seed=23)
    (d,) = run.run(f"{op}.{ta}.{tb}", [a, b, c])
    check_bits(d, ref.over(lambda x, y, z: ref.dot(op, ta, tb, x, y, z), a, b, c), [a, b, c], f"{op}.{ta}.{tb}")
