"""Reference model for the SIMD video instructions (vadd2 ... vset4; see models/__init__.py).

Exact Python from the PTX ISA manual's definition (SIMD Video Instructions): n elements of
32/n bits are taken from a and b, sign- or zero-extended by .atype/.btype, operated on as
unbounded integers (vavrg: (s + 1) >> 1 for s >= 0, else s >> 1), clamped to .dtype's element
range under .sat, compared to 0/1 by vset; then merged into c's elements (the result truncated
to the element width) or, with .add, summed onto c modulo 2^32. Operands use the default
selectors (a.b3210/a.h10, b.b7654/b.h32) and the default full mask.

The scalar forms (vadd vsub vabsdiff vmin vmax vshl vshr vset) and vmad follow what an NVIDIA
H200 computes (tests/hardware/golden/video.npz), where it departs from the manual:
* a and b are extended to 33 bits by .atype/.btype and the exact result T is formed (vshl/vshr
  shift by b, limited to 32 by .clamp or taken mod 32 by .wrap; vset gives 0/1).
* .sat into .s32 clamps T to the signed range; into .u32 it only clamps below (T < 0 gives 0):
  a T above 2^32 - 1 is kept, so d wraps (vadd.u32.u32.u32.sat(1, 0xffffffff) = 0). vshl is
  different: its T is taken modulo 2^64, and .sat clamps T modulo 2^34, read as signed, both
  ways (vshl.u32.u32.u32.clamp.sat(1, 32) = 0xffffffff, vshl.s32.s32.u32.clamp.sat(2, 32) =
  0x80000000: 2^33 is negative in 34 bits).
* .add: d = T + c modulo 2^32.
* .min/.max: c is read as .dtype (vset: as .atype) and compared with a key of T, signed for .s32
  and unsigned for .u32 (a negative key is above every c there); the winner's low 32 bits are d.
  The key is T wrapped to 32 bits and sign-extended for vadd and vsub, also for vshl and vshr
  with .sat into .u32; otherwise T itself. So vadd.s32.s32.s32.max(1, 0x7fffffff, 0x7fffffff) =
  0x7fffffff, and vadd.u32.u32.u32.max(7, 0x7fffffff, 0xa073ad41) = 0x80000006.
* vmad (no negated operands): a, b and c are all read as signed, whatever their types;
  a*b + c (+1 for .po) is taken as a 64-bit pattern and shifted by .shr7/.shr15, arithmetically
  when .atype or .btype is signed ("signed final"), logically otherwise; .sat clamps that
  (as a signed 64-bit value) to the s32 range (signed final) or to [0, 2^32 - 1]. .dtype does not
  enter. So vmad.u32.u32.u32.shr7(0, 0, 0x80000000) = 0xff000000 and vmad.u32.u32.u32.sat.shr15
  of any negative sum is 0xffffffff.
"""

from __future__ import annotations

import numpy as np

from conformance.harness import DTYPES
from conformance.models import Case
from conformance.values import int_edges, pairs, random_bits, to_signed

ARITH = ("vadd", "vsub", "vavrg", "vabsdiff", "vmin", "vmax")
CMP = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
       "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y}
SCALAR = ("vadd", "vsub", "vabsdiff", "vmin", "vmax", "vshl", "vshr", "vset")
SECONDARY = ("add", "min", "max")
N_RANDOM = 256  # random rows per form in the sweep, after the edge rows


def elements(word: int, n: int, signed: bool) -> list[int]:
    """The n elements of a 32-bit word, lowest first, as the integers .s32/.u32 make them."""
    e = 32 // n
    parts = [(word >> (i * e)) & ((1 << e) - 1) for i in range(n)]
    return [to_signed(p, e) if signed else p for p in parts]


def element_op(base: str, x: int, y: int) -> int:
    if base == "vadd":
        return x + y
    if base == "vsub":
        return x - y
    if base == "vavrg":
        s = x + y
        return (s + 1) >> 1 if s >= 0 else s >> 1
    if base == "vabsdiff":
        return abs(x - y)
    if base == "vmin":
        return min(x, y)
    return max(x, y)


def simd(opcode: str, mods: tuple[str, ...], a: int, b: int, c: int) -> int:
    """d for one row of `opcode.mods` (vop2/vop4 .dtype.atype.btype, vset2/vset4 .atype.btype.cmp)."""
    base, n = opcode[:-1], int(opcode[-1])
    e = 32 // n
    types = [m for m in mods if m in ("u32", "s32")]
    va, vb = elements(a, n, types[-2] == "s32"), elements(b, n, types[-1] == "s32")
    if base == "vset":
        cmp = next(CMP[m] for m in mods if m in CMP)
        t = [int(cmp(x, y)) for x, y in zip(va, vb)]
    else:
        t = [element_op(base, x, y) for x, y in zip(va, vb)]
        if "sat" in mods:
            lo, hi = (-(1 << (e - 1)), (1 << (e - 1)) - 1) if types[0] == "s32" else (0, (1 << e) - 1)
            t = [min(hi, max(lo, v)) for v in t]
    if "add" in mods:
        return (c + sum(t)) & 0xFFFFFFFF
    return sum((v & ((1 << e) - 1)) << (i * e) for i, v in enumerate(t))


def scalar(opcode: str, mods: tuple[str, ...], a: int, b: int, c: int = 0) -> int:
    """d for one row of a scalar video form (whole-word operands, no data merge)."""
    types = [m for m in mods if m in ("u32", "s32")]
    signed_d = types[0] == "s32"  # vset: c is read as .atype
    x, y = (to_signed(v, 32) if t == "s32" else v for v, t in ((a, types[-2]), (b, types[-1])))
    if opcode == "vset":
        t = int(next(CMP[m] for m in mods if m in CMP)(x, y))
    elif opcode in ("vshl", "vshr"):
        n = min(y, 32) if "clamp" in mods else y & 31
        t = to_signed(x << n, 64) if opcode == "vshl" else x >> n  # vshl: modulo 2^64 (measured)
    else:
        t = element_op(opcode, x, y)
    if "sat" in mods:
        lo, hi = (-(1 << 31), (1 << 31) - 1) if signed_d else (0, (1 << 32) - 1)
        if opcode == "vshl":  # vshl saturates its result modulo 2^34, as signed, both ways
            t = min(hi, max(lo, to_signed(t, 34)))
        else:  # into .u32 the others clamp only below, keeping (and wrapping) a larger T
            t = min(hi, max(lo, t)) if signed_d else max(0, t)
    if "add" in mods:
        return (t + c) & 0xFFFFFFFF
    if "min" in mods or "max" in mods:
        wrapped = opcode in ("vadd", "vsub") or (opcode in ("vshl", "vshr") and "sat" in mods and not signed_d)
        key = to_signed(t, 32) if wrapped else t
        if signed_d:
            cv = to_signed(c, 32)
        else:  # unsigned comparison: a negative key is above every c
            key, cv = key % (1 << 64), c
        pick_t = key <= cv if "min" in mods else key >= cv
        t = t if pick_t else c
    return t & 0xFFFFFFFF


def vmad(mods: tuple[str, ...], a: int, b: int, c: int) -> int:
    """vmad without negation, as measured: a, b, c read as signed; a*b + c (+1 for .po) as a
    64-bit pattern, shifted arithmetically when .atype or .btype is signed (else logically),
    then clamped by .sat to the s32 range (signed) or [0, 2^32 - 1]."""
    _, atype, btype = (m for m in mods if m in ("u32", "s32"))
    sign = "s32" in (atype, btype)
    t = to_signed(a, 32) * to_signed(b, 32) + to_signed(c, 32) + ("po" in mods)
    scale = 7 if "shr7" in mods else 15 if "shr15" in mods else 0
    t = t >> scale if sign else to_signed((t % (1 << 64)) >> scale, 64)
    if "sat" in mods:
        t = min((1 << 31) - 1, max(-(1 << 31), t)) if sign else min((1 << 32) - 1, max(0, t))
    return t & 0xFFFFFFFF


def form_result(form: str, a: int, b: int, c: int) -> int:
    """d for one row of any video form, named by its full instruction text ("vadd4.u32.u32.u32.sat")."""
    opcode, *mods = form.split(".")
    if opcode == "vmad":
        return vmad(tuple(mods), a, b, c)
    return (scalar if opcode in SCALAR else simd)(opcode, tuple(mods), a, b, c)


def element_edges(e: int) -> list[int]:
    """Element patterns at the signed/unsigned limits and around them."""
    m = (1 << e) - 1
    h = 1 << (e - 1)
    return sorted({0, 1, 2, h - 2, h - 1, h, h + 1, m - 1, m})


def words(n: int, seed: int, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """a, b, c rows: every pair of element edges (alternating order across the elements, so
    each element sees both (x, y) and (y, x)), then random words."""
    e = 32 // n
    edges = element_edges(e)
    pack = lambda xs: sum(x << (i * e) for i, x in enumerate(xs))  # noqa: E731
    a = [pack([x if i % 2 == 0 else y for i in range(n)]) for x in edges for y in edges]
    b = [pack([y if i % 2 == 0 else x for i in range(n)]) for x in edges for y in edges]
    c_edges = [0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFE]
    c = [c_edges[k % len(c_edges)] for k in range(len(a))]
    u32 = DTYPES[32]
    return (np.concatenate([np.array(a, u32), random_bits(32, count, seed)]),
            np.concatenate([np.array(b, u32), random_bits(32, count, seed + 1)]),
            np.concatenate([np.array(c, u32), random_bits(32, count, seed + 2)]))


def expected(opcode: str, mods: tuple[str, ...], a: np.ndarray, b: np.ndarray, c: np.ndarray) -> list[int]:
    return [simd(opcode, mods, int(x), int(y), int(z)) for x, y, z in zip(a, b, c)]


def scalar_inputs(seed: int, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """a, b: every pair of 32-bit edges (shift amounts 0..65 among them), then random; c cycles
    through the edges, then random."""
    a, b = pairs(32, n=count, seed=seed)
    edges = int_edges(32)
    c = random_bits(32, len(a), seed + 2)
    c[: 4 * len(edges)] = np.array(edges * 4, DTYPES[32])
    return a, b, c


def model(opcode: str, mods: tuple[str, ...]) -> Case | None:
    if opcode == "vmad":
        a, b, c = scalar_inputs(seed=47, count=N_RANDOM)
        return Case([a, b, c], [[vmad(mods, int(x), int(y), int(z)) for x, y, z in zip(a, b, c)]])
    if opcode in SCALAR:
        a, b, c = scalar_inputs(seed=43, count=N_RANDOM)
        with_c = any(m in mods for m in SECONDARY)
        exp = [scalar(opcode, mods, int(x), int(y), int(z)) for x, y, z in zip(a, b, c)]
        return Case([a, b, c] if with_c else [a, b], [exp])
    if opcode[:-1] not in ARITH + ("vset",) or opcode[-1] not in "24":
        return None
    a, b, c = words(int(opcode[-1]), seed=41, count=N_RANDOM)
    return Case([a, b, c], [expected(opcode, mods, a, b, c)])
