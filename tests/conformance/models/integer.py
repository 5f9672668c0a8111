"""Reference models for the integer and bit families (see models/__init__.py).

One exact Python-int reference per instruction, written from the PTX ISA manual's definitions
(and, where PTX calls a result machine-specific, the values docs/semantics.md pins: x/0, x%0,
INT_MIN/-1). References take and return unsigned bit patterns; the family tests
(test_integer.py, test_bits.py, test_extended.py) use the same functions over larger inputs.
Float-typed forms of shared opcodes (add.f32, min.f16x2, ...) are the floating model's: None
here; the exception is mov, a bit copy whatever its type, modelled here for .f32/.f64 too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from conformance import floatvals
from conformance.harness import DTYPES, Imm
from conformance.models import Case
from conformance.refs import FORMATS
from conformance.values import from_int, int_edges, random_bits, to_signed

PACKED = ("u16x2", "s16x2")
N_RANDOM = 256  # random rows per form, after the edge cross product


def bits_of(t: str) -> int:
    """Width of an integer/bit PTX type: pred 1, packed pairs 32, else the number in the name."""
    if t in PACKED:
        return 32
    return 1 if t == "pred" else int(t[1:])


def value(x: int, t: str) -> int:
    """The integer a bit pattern denotes under type t (two's complement for .sN)."""
    return to_signed(x, bits_of(t)) if t[0] == "s" else x


def saturate_s32(v: int) -> int:
    return max(-(1 << 31), min((1 << 31) - 1, v))


def bit(x: int, i: int) -> int:
    return (x >> i) & 1


def halfwise(f: Callable[..., int], *xs: int) -> int:
    """f on the low and on the high 16-bit halves of packed operands, repacked."""
    return f(*(x & 0xFFFF for x in xs)) | (f(*(x >> 16 for x in xs)) << 16)


# --------------------------------------------------------------------------- integer arithmetic

def add_sub(op: str, t: str, x: int, y: int, sat: bool = False) -> int:
    """add/sub: wrapping, or .sat (s32) clamped; packed types per 16-bit half."""
    if t in PACKED:
        return halfwise(lambda a, b: add_sub(op, t[:3], a, b), x, y)
    r = value(x, t) + value(y, t) if op == "add" else value(x, t) - value(y, t)
    return from_int(saturate_s32(r) if sat else r, bits_of(t))


def product(mode: str, t: str, x: int, y: int) -> int:
    """mul.lo/.hi/.wide: the low half, high half, or whole of the exact 2n-bit product."""
    n = bits_of(t)
    p = value(x, t) * value(y, t)
    return {"lo": from_int(p, n), "hi": from_int(p >> n, n), "wide": from_int(p, 2 * n)}[mode]


def mad(mode: str, t: str, x: int, y: int, z: int, sat: bool = False) -> int:
    """mad: product(mode) + c, wrapping at the destination width; .hi.sat.s32 clamps the sum."""
    n = bits_of(t)
    if sat:
        return from_int(saturate_s32((value(x, t) * value(y, t) >> n) + to_signed(z, 32)), 32)
    return from_int(product(mode, t, x, y) + z, 2 * n if mode == "wide" else n)


def mul24(hi: bool, t: str, x: int, y: int) -> int:
    """The 48-bit product of the low 24 bits (sign-extended for .s32); .lo bits 0-31, .hi 16-47."""
    x24, y24 = (to_signed(x, 24), to_signed(y, 24)) if t == "s32" else (x & 0xFFFFFF, y & 0xFFFFFF)
    p = x24 * y24
    return from_int(p >> 16 if hi else p, 32)


def mad24(hi: bool, t: str, x: int, y: int, z: int, sat: bool = False) -> int:
    """mul24 + c; .hi.sat.s32 adds the signed high part to c and clamps."""
    p = mul24(hi, t, x, y)
    if sat:
        return from_int(saturate_s32(to_signed(p, 32) + to_signed(z, 32)), 32)
    return from_int(p + z, 32)


def sad(t: str, x: int, y: int, z: int) -> int:
    """c + |a - b|, wrapping."""
    return from_int(value(z, t) + abs(value(x, t) - value(y, t)), bits_of(t))


def div_rem(op: str, t: str, x: int, y: int) -> int:
    """Truncating division. PTX leaves x/0 machine-specific: x/0 and x%0 are all ones (-1 signed),
    measured on NVIDIA H200, driver 580.159.04; INT_MIN/-1 wraps to INT_MIN and INT_MIN%-1 is 0."""
    a, b = value(x, t), value(y, t)
    if b == 0:
        r = -1
    else:
        q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
        r = q if op == "div" else a - q * b
    return from_int(r, bits_of(t))


def abs_neg(op: str, t: str, x: int) -> int:
    v = value(x, t)
    return from_int(abs(v) if op == "abs" else -v, bits_of(t))


def min_max(op: str, t: str, x: int, y: int, relu: bool = False) -> int:
    """min/max by the type's signedness; .relu clamps a negative result at 0; packed per half."""
    if t in PACKED:
        return halfwise(lambda a, b: min_max(op, t[:3], a, b, relu), x, y)
    r = (min if op == "min" else max)(value(x, t), value(y, t))
    return from_int(max(r, 0) if relu else r, bits_of(t))


# --------------------------------------------------------------------------- bits

def popc(n: int, x: int) -> int:
    return bin(x).count("1")


def clz(n: int, x: int) -> int:
    return n - x.bit_length()


def brev(n: int, x: int) -> int:
    return int(format(x, f"0{n}b")[::-1], 2)


def bfind(t: str, shiftamt: bool, x: int) -> int:
    """Position of the most significant non-sign bit (0xffffffff if none); .shiftamt counts from the msb."""
    n = bits_of(t)
    v = value(x, t)
    pos = (~v if v < 0 else v).bit_length() - 1
    return 0xFFFFFFFF if pos < 0 else (n - 1 - pos if shiftamt else pos)


def fns(mask: int, base: int, offset: int) -> int:
    """The |offset|-th set bit of mask from bit base, upwards (offset > 0) or down; offset 0
    asks whether bit base itself is set. 0xffffffff when not found. offset is the s32 pattern."""
    off = to_signed(offset, 32)
    if off == 0:
        return base if bit(mask, base) else 0xFFFFFFFF
    order = range(base, 32) if off > 0 else range(base, -1, -1)
    hits = [p for p in order if bit(mask, p)]
    return hits[abs(off) - 1] if len(hits) >= abs(off) else 0xFFFFFFFF


def bit_field(n: int, pos: int, ln: int) -> tuple[int, int]:
    """Position and length: PTX reduces both mod 256, which the 32-bit forms do; the 64-bit ones
    take the whole u32 values (measured on NVIDIA H200, driver 580.159.04)."""
    return (pos & 0xFF, ln & 0xFF) if n == 32 else (pos, ln)


def bfe(t: str, x: int, pos: int, ln: int) -> int:
    """Extract len bits from pos; bits past the msb and the padding take sbit."""
    n = bits_of(t)
    p, l = bit_field(n, pos, ln)
    sbit = 0 if (t[0] == "u" or l == 0) else bit(x, min(p + l - 1, n - 1))
    return sum((bit(x, p + i) if (i < l and p + i <= n - 1) else sbit) << i for i in range(n))


def bfi(n: int, f: int, base: int, pos: int, ln: int) -> int:
    """Insert the low len bits of f into base at pos, dropping bits past the msb."""
    p, l = bit_field(n, pos, ln)
    r = base
    for i in range(min(l, n)):
        if p + i < n:
            r = (r & ~(1 << (p + i))) | (bit(f, i) << (p + i))
    return r


def szext(mode: str, t: str, x: int, w: int) -> int:
    """Sign- or zero-extend the low w bits (w clamped to 32 or taken mod 32); w = 0 gives 0."""
    k = w % 32 if mode == "wrap" else min(w, 32)
    v = x & ((1 << k) - 1)
    return from_int(to_signed(v, k) if (t == "s32" and k) else v, 32)


def bmsk(mode: str, pos: int, ln: int) -> int:
    """Ones at bits [pos, pos+len) below 32, pos and len clamped to 32 or taken mod 32."""
    if mode == "wrap":
        p, l = pos % 32, ln % 32
    else:
        p, l = min(pos, 32), min(ln, 32)
    return sum(1 << i for i in range(p, min(p + l, 32)))


PRMT_TABLE = {  # d.b3 d.b2 d.b1 d.b0 for selector c[1:0] = 0..3, as listed in the PTX manual
    "f4e": ["3210", "4321", "5432", "6543"],
    "b4e": ["5670", "6701", "7012", "0123"],
    "rc8": ["0000", "1111", "2222", "3333"],
    "ecl": ["3210", "3211", "3222", "3333"],
    "ecr": ["0000", "1110", "2210", "3210"],
    "rc16": ["1010", "3232", "1010", "3232"],
}


def prmt(mode: str | None, x: int, y: int, s: int) -> int:
    """Bytes of {b, a} picked by selector nibbles (bit 3 replicates the byte's sign), or by a mode."""
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
    return r


def shf(direction: str, mode: str, lo: int, hi: int, amount: int) -> int:
    """Funnel shift of {hi, lo}: .l keeps the upper 32 bits, .r the lower."""
    k = amount & 31 if mode == "wrap" else min(amount, 32)
    both = (hi << 32) | lo
    return ((both << k) >> 32) & 0xFFFFFFFF if direction == "l" else (both >> k) & 0xFFFFFFFF


def shift(op: str, t: str, x: int, amount: int) -> int:
    """shl/shr; amounts past the width clamp (zero fill, sign fill for .sN shr)."""
    n = bits_of(t)
    v = value(x, t)
    return from_int(v << min(amount, n), n) if op == "shl" else from_int(v >> min(amount, n), n)


def logic(op: str, n: int, x: int, y: int = 0) -> int:
    m = (1 << n) - 1
    return {"and": x & y, "or": x | y, "xor": x ^ y, "not": ~x & m, "cnot": int(x == 0)}[op]


def lop3(lut: int, x: int, y: int, z: int) -> int:
    """Bit i of the result is bit (a_i b_i c_i) of the LUT (ta = 0xF0, tb = 0xCC, tc = 0xAA)."""
    return sum(bit(lut, (bit(x, i) << 2) | (bit(y, i) << 1) | bit(z, i)) << i for i in range(32))


def dot(op: str, ta: str, tb: str, x: int, y: int, z: int) -> int:
    """dp4a: c + four byte products; dp2a.lo/.hi: c + two 16-bit halves of a times bytes 0-1 / 2-3 of b."""
    def parts(v: int, width: int, count: int, sign: bool) -> list[int]:
        ps = [(v >> (width * i)) & ((1 << width) - 1) for i in range(count)]
        return [to_signed(p, width) for p in ps] if sign else ps

    xs = parts(x, 8, 4, ta == "s32") if op == "dp4a" else parts(x, 16, 2, ta == "s32")
    ys = parts(y, 8, 4, tb == "s32")
    if op != "dp4a":
        ys = ys[2:] if op == "dp2a.hi" else ys[:2]
    return from_int(z + sum(p * q for p, q in zip(xs, ys)), 32)


# --------------------------------------------------------------------------- extended precision

def carry_op(opcode: str, mode: str | None, t: str, srcs: list[int], cin: int = 0) -> tuple[int, int]:
    """add/addc: a + b + CC; mad/madc: (a*b).lo|.hi + c + CC; sub: a - b, subc: a - b - (1 - CC),
    CC out 1 when nothing is borrowed: CC stays a carry ("no borrow") in subtraction, as measured
    on NVIDIA H200, driver 580.159.04 (PTX's text has CC as the borrow: a - (b + CC)).
    Returns (d, carry-out); the sums are unsigned, whatever the type's signedness."""
    n = bits_of(t)
    m = (1 << n) - 1
    if opcode in ("mad", "madc"):
        full = product(mode or "lo", t, srcs[0], srcs[1]) + srcs[2] + cin
    elif opcode in ("add", "addc"):
        full = srcs[0] + srcs[1] + cin
    else:
        full = srcs[0] - srcs[1] - (1 - cin if opcode == "subc" else 0)
        return full & m, int(full >= 0)
    return full & m, int(full > m)


# --------------------------------------------------------------------------- inputs

@dataclass
class Src:
    """One source operand: its width, the values worth crossing, and how to draw random ones
    (full-width patterns, or below `below` for amounts and positions)."""

    bits: int
    special: list[int]
    below: int | None = None

    def random(self, n: int, seed: int) -> np.ndarray:
        if self.below is None:
            return random_bits(self.bits, n, seed)
        return np.random.default_rng(seed).integers(0, self.below, n).astype(DTYPES[self.bits])


def edges(bits: int) -> Src:
    return Src(bits, [0, 1] if bits == 1 else int_edges(bits))


def amounts(limit: int, below: int = 80) -> Src:
    """u32 shift amounts / positions / lengths around 0, the width `limit` and 255/256 (bfe and
    bfi read the low 8 bits), and huge ones; random draws below `below` fill in between."""
    near = {0, 1, 2, 7, 8, 15, 16, 17, limit - 2, limit - 1, limit, limit + 1, limit + 2, 2 * limit}
    return Src(32, sorted(near | {255, 256, 257, 0x1FF, 1 << 16, 0x80000001, 0xFFFFFFFF}), below)


def inputs(srcs: list[Src], cross: tuple[int, ...] = (0, 1), seed: int = 0) -> list[np.ndarray]:
    """Every combination of the `cross` operands' special values (the others drawn from their
    specials or at random), then N_RANDOM rows of random operands."""
    g = np.random.default_rng(seed)
    cross = tuple(k for k in cross if k < len(srcs))
    grids = np.meshgrid(*[np.array(srcs[k].special, dtype=object) for k in cross], indexing="ij")
    rows = grids[0].size
    out = []
    for k, s in enumerate(srcs):
        if k in cross:
            head = np.array([int(v) for v in grids[cross.index(k)].ravel()], dtype=DTYPES[s.bits])
        else:
            pick = g.integers(0, 2, rows).astype(bool)
            head = np.where(pick, g.choice(np.array(s.special, dtype=DTYPES[s.bits]), rows),
                            s.random(rows, seed + 100 + k))
        out.append(np.concatenate([head, s.random(N_RANDOM, seed + 1 + k)]))
    return out


def over(ref: Callable[..., int | tuple[int, ...]], *arrays: np.ndarray) -> list:
    """A scalar reference applied row by row to arrays of bit patterns."""
    return [ref(*row) for row in zip(*([int(v) for v in a] for a in arrays))]


def case(srcs: list[np.ndarray], ref: Callable[..., int | tuple[int, ...]], nout: int = 1,
         imms: dict[int, int] | None = None) -> Case:
    """Apply a scalar reference row by row (immediates `imms` spliced into the source list)."""
    imms = imms or {}
    results = over(ref, *srcs)
    expected = [[r if nout == 1 else r[k] for r in results] for k in range(nout)]
    operands: list[np.ndarray | Imm] = list(srcs)
    for k in sorted(imms):
        operands.insert(k, Imm(imms[k]))
    return Case(operands, expected)


# --------------------------------------------------------------------------- the model

FLOAT_TYPES = frozenset({"f16", "f16x2", "bf16", "bf16x2", "f32", "f64"})


def _type(mods: tuple[str, ...]) -> str:
    """The last integer/bit type modifier (the instruction type; dp4a's is its b type)."""
    return [m for m in mods if m == "pred" or m in PACKED or (m[0] in "bus" and m[1:].isdigit())][-1]


def _mode(mods: tuple[str, ...], *choices: str) -> str | None:
    return next((m for m in choices if m in mods), None)


def _arith(op: str, mods: tuple[str, ...]) -> Case:
    t = _type(mods)
    n = bits_of(t)
    if op in ("add", "sub"):
        return case(inputs([edges(n)] * 2), lambda x, y: add_sub(op, t, x, y, "sat" in mods))
    if op in ("min", "max"):
        return case(inputs([edges(n)] * 2), lambda x, y: min_max(op, t, x, y, "relu" in mods))
    if op in ("div", "rem"):
        return case(inputs([edges(n)] * 2), lambda x, y: div_rem(op, t, x, y))
    if op in ("abs", "neg"):
        return case(inputs([edges(n)]), lambda x: abs_neg(op, t, x))
    if op == "mul":
        mode = _mode(mods, "lo", "hi", "wide")
        return case(inputs([edges(n)] * 2), lambda x, y: product(mode, t, x, y))
    if op == "mad":
        mode = _mode(mods, "lo", "hi", "wide")
        cn = 2 * n if mode == "wide" else n
        return case(inputs([edges(n), edges(n), edges(cn)]), lambda x, y, z: mad(mode, t, x, y, z, "sat" in mods))
    if op in ("mul24", "mad24"):
        hi = "hi" in mods
        a = Src(32, sorted(set(int_edges(32)) | {0x7FFFFF, 0x800000, 0xFFFFFF, 0x1000000, 0xFF800000}))
        if op == "mul24":
            return case(inputs([a, a]), lambda x, y: mul24(hi, t, x, y))
        return case(inputs([a, a, edges(32)]), lambda x, y, z: mad24(hi, t, x, y, z, "sat" in mods))
    assert op == "sad"
    return case(inputs([edges(n)] * 3), lambda x, y, z: sad(t, x, y, z))


def _bits(op: str, mods: tuple[str, ...]) -> Case:
    t = _type(mods)
    n = bits_of(t)
    if op in ("popc", "clz", "brev"):
        ref = {"popc": popc, "clz": clz, "brev": brev}[op]
        return case(inputs([edges(n)]), lambda x: ref(n, x))
    if op == "bfind":
        return case(inputs([edges(n)]), lambda x: bfind(t, "shiftamt" in mods, x))
    if op == "fns":
        base = Src(32, [0, 1, 2, 15, 16, 30, 31], below=32)
        offset = Src(32, [from_int(v, 32) for v in range(-33, 34)])
        mask = Src(32, [0, 0xFFFFFFFF, 1, 0x80000000, 0xAAAAAAAA, 0x12345678])
        return case(inputs([mask, base, offset], cross=(1, 2)), fns)
    if op == "bfe":
        return case(inputs([edges(n), amounts(n), amounts(n)], cross=(1, 2)), lambda x, p, l: bfe(t, x, p, l))
    if op == "bfi":
        return case(inputs([edges(n), edges(n), amounts(n), amounts(n)], cross=(2, 3)),
                    lambda f, b, p, l: bfi(n, f, b, p, l))
    if op == "szext":
        mode = _mode(mods, "clamp", "wrap")
        return case(inputs([edges(32), amounts(32)]), lambda x, w: szext(mode, t, x, w))
    if op == "bmsk":
        mode = _mode(mods, "clamp", "wrap")
        return case(inputs([amounts(32), amounts(32)]), lambda p, l: bmsk(mode, p, l))
    if op == "prmt":
        mode = _mode(mods, *PRMT_TABLE)
        sel = Src(32, [0x3210, 0x7654, 0x0000, 0x8888, 0xFFFF, 0x1357, 0xBA98, 1, 2, 3, 0xFFFFFFFC, 0x12345677])
        ab = Src(32, [0x03020100, 0x87868584, 0x807F00FF, 0xFFFFFFFF, 0])
        return case(inputs([ab, ab, sel], cross=(0, 1, 2)), lambda x, y, s: prmt(mode, x, y, s))
    if op == "shf":
        d, mode = _mode(mods, "l", "r"), _mode(mods, "clamp", "wrap")
        return case(inputs([edges(32), edges(32), amounts(32)], cross=(0, 2)),
                    lambda lo, hi, k: shf(d, mode, lo, hi, k))
    if op in ("shl", "shr"):
        return case(inputs([edges(n), amounts(n)]), lambda x, k: shift(op, t, x, k))
    if op in ("and", "or", "xor", "not", "cnot"):
        srcs = [edges(n)] * (1 if op in ("not", "cnot") else 2)
        return case(inputs(srcs), lambda x, y=0: logic(op, n, x, y))
    if op == "lop3":
        return _lop3()
    assert op in ("dp4a", "dp2a")
    ta, tb = [m for m in mods if m in ("u32", "s32")]
    name = f"dp2a.{_mode(mods, 'lo', 'hi')}" if op == "dp2a" else op
    byte_edges = Src(32, [0, 0x7F7F7F7F, 0x80808080, 0xFFFFFFFF, 0x01FF807F, 0x7FFF8000, 0x80007FFF, 0x12345678])
    return case(inputs([byte_edges, byte_edges, edges(32)]), lambda x, y, z: dot(name, ta, tb, x, y, z))


def _lop3() -> Case:
    """lop3's LUT is an immediate and the form is one, so the sweep checks one LUT: a ? b : c,
    which changes under any swap of the inputs or reversal of the minterm order."""
    lut = 0xCA
    srcs = inputs([edges(32), edges(32), edges(32)])
    return case(srcs, lambda x, y, z: lop3(lut, x, y, z), imms={3: lut})


def _extended(op: str, mods: tuple[str, ...]) -> Case:
    t = _type(mods)
    n = bits_of(t)
    cin = op in ("addc", "subc", "madc")
    base = op[:-1] if cin else op
    mode = _mode(mods, "lo", "hi")
    nsrc = 3 if base == "mad" else 2
    srcs = [edges(n)] * nsrc + ([Src(1, [0, 1])] if cin else [])
    nout = 2 if "cc" in mods else 1

    def ref(*xs: int) -> int | tuple[int, int]:
        d, cc = carry_op(op, mode, t, list(xs[:nsrc]), xs[nsrc] if cin else 0)
        return (d, cc) if nout == 2 else d

    return case(inputs(srcs, cross=(0, 1, nsrc) if cin else (0, 1)), ref, nout)


BITS_OPS = frozenset({"popc", "clz", "brev", "bfind", "fns", "bfe", "bfi", "szext", "bmsk", "prmt", "shf", "shl",
                      "shr", "and", "or", "xor", "not", "cnot", "lop3", "dp4a", "dp2a"})
ARITH_OPS = frozenset({"add", "sub", "mul", "mad", "mul24", "mad24", "sad", "div", "rem", "abs", "neg", "min", "max"})


def _mov(t: str) -> Case:
    """mov copies the bits: float types over their specials (NaN payloads, -0, subnormals)."""
    src = Src(floatvals.WIDTH[t], floatvals.edges(FORMATS[t])) if t in FORMATS else edges(bits_of(t))
    return case(inputs([src]), lambda x: x)


def model(opcode: str, mods: tuple[str, ...]) -> Case | None:
    """The Case for an integer/bit form (or any mov); None for float-typed and foreign forms."""
    if opcode == "mov":
        return _mov(mods[-1])
    if any(m in FLOAT_TYPES for m in mods):
        return None
    if opcode in ("addc", "subc", "madc") or (opcode in ("add", "sub", "mad") and "cc" in mods):
        return _extended(opcode, mods)
    if opcode in ARITH_OPS:
        return _arith(opcode, mods)
    if opcode in BITS_OPS:
        return _bits(opcode, mods)
    return None
