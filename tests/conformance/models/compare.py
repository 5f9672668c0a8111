"""Reference models for the compare family: setp, set, selp, slct (see models/__init__.py).

Written from the PTX ISA: a comparison t = (a CmpOp b) is combined with the predicate c as
BoolOp(t, c) (setp's q gets BoolOp(!t, c)). Integer comparisons use the operands' signedness
(lo ls hi hs are the unsigned ones, .b types compare with eq ne); float eq ne lt le gt ge are
ordered (false when either side is NaN), the u-suffixed ones unordered (true then), num/nan test
orderedness, and -0 == +0. .ftz flushes subnormal inputs to signed zero first. Packed sources
compare per 16-bit half (setp: p from the low halves, q from the high). `set` writes, where the
result is true, all ones in an integer destination (0xffff per half of a .u32/.s32 destination
of a packed compare) and 1.0 in a float one (per half for .f16x2/.bf16x2); 0 where false.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

import numpy as np

from conformance.floatvals import operand_sets
from conformance.harness import DTYPES
from conformance.models import Case
from conformance.refs import FORMATS, Val, decode, encode, fin, flush
from conformance.values import as_ints, int_edges, pairs, random_bits

INT_OPS = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
           "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y}
UNSIGNED_OPS = {"lo": INT_OPS["lt"], "ls": INT_OPS["le"], "hi": INT_OPS["gt"], "hs": INT_OPS["ge"]}
FLOAT_OPS = ["eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"]
BOOL = {None: lambda p, c: p, "and": lambda p, c: p & c, "or": lambda p, c: p | c, "xor": lambda p, c: p ^ c}
CMP_OPS = set(INT_OPS) | set(UNSIGNED_OPS) | set(FLOAT_OPS)

N_RANDOM = 200  # random patterns per form on top of the edge cross products: the sweep is about breadth


def float_cmp(op: str, x: Val, y: Val) -> bool:
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


def scalar_cmp(op: str, t: str, a: np.ndarray, b: np.ndarray, ftz: bool = False) -> np.ndarray:
    """(a op b) per element for a scalar .type (bit patterns in), as a bool array."""
    if t in FORMATS:
        f = FORMATS[t]
        fl = (lambda v: flush(v, f)) if ftz else (lambda v: v)
        return np.array([float_cmp(op, decode(fl(x), f), decode(fl(y), f)) for x, y in zip(a.tolist(), b.tolist())],
                        bool)
    n, sgn = int(t[1:]), t[0] == "s"
    fn = {**INT_OPS, **UNSIGNED_OPS}[op]
    return np.array([fn(x, y) for x, y in zip(as_ints(a, n, sgn), as_ints(b, n, sgn))], bool)


def halves(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v = v.astype(np.uint32)
    return v & 0xFFFF, v >> 16


def packed_cmp(op: str, t: str, a: np.ndarray, b: np.ndarray, ftz: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) half results of a packed .f16x2/.bf16x2 comparison."""
    (alo, ahi), (blo, bhi) = halves(a), halves(b)
    return scalar_cmp(op, t[:-2], alo, blo, ftz), scalar_cmp(op, t[:-2], ahi, bhi, ftz)


def slct_ref(ctype: str, ftz: bool, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> list[int]:
    """slct: a where c >= 0 (c .s32, or .f32 where -0 counts and NaN does not), else b."""
    out = []
    for x, y, k in zip(a.tolist(), b.tolist(), c.tolist()):
        if ctype == "s32":
            take = k < 2**31
        else:
            v = decode(flush(k, FORMATS["f32"]) if ftz else k, FORMATS["f32"])
            take = v.kind != "nan" and (v.is_zero or not v.neg)
        out.append(x if take else y)
    return out


def set_true(dtype: str) -> int:
    """The bits `set` writes for true into one destination element of a scalar dtype."""
    if dtype in FORMATS:
        return encode(fin(Fraction(1)), FORMATS[dtype])
    return (1 << int(dtype[1:])) - 1


# --------------------------------------------------------------------------- inputs and truth tables


@lru_cache(maxsize=None)
def operands(t: str, n: int = N_RANDOM, seed: int = 21) -> tuple[np.ndarray, np.ndarray]:
    """Edge cross products then n random patterns for a comparison .type; packed types get pairs
    whose halves differ (one half from each scalar list, the other reversed)."""
    if t.endswith("x2"):
        a, b = (x.astype(np.uint32) for x in operands(t[:-2], n, seed))
        return a | (b[::-1] << 16), b | (a[::-1] << 16)
    if t in FORMATS:
        a, b = operand_sets(FORMATS[t], 2, n=n, seed=seed)
        return a, b
    return pairs(int(t[1:]), n=n, seed=seed)


@lru_cache(maxsize=None)
def _truth(op: str, t: str, ftz: bool) -> tuple[np.ndarray, ...]:
    a, b = operands(t)
    return packed_cmp(op, t, a, b, ftz) if t.endswith("x2") else (scalar_cmp(op, t, a, b, ftz),)


@lru_cache(maxsize=None)
def _pred(n: int) -> np.ndarray:
    return random_bits(1, n, seed=25)


def _parts(mods: tuple[str, ...]) -> tuple[str, str | None, bool]:
    cmp = [m for m in mods if m in CMP_OPS]
    boolop = [m for m in mods if m in BOOL]
    return cmp[0], (boolop[0] if boolop else None), "ftz" in mods


def _setp(mods: tuple[str, ...]) -> Case:
    op, boolop, ftz = _parts(mods)
    t = mods[-1]
    a, b = operands(t)
    srcs: list = [a, b]
    c = _pred(len(a)).astype(bool)
    if boolop:
        srcs.append(c.astype(np.uint8))
    comb = BOOL[boolop]
    res = _truth(op, t, ftz)
    if len(res) == 2:  # packed: p from the low halves, q from the high halves
        p, q = comb(res[0], c), comb(res[1], c)
    else:
        p, q = comb(res[0], c), comb(~res[0], c)
    if t in ("f16", "bf16"):  # the manual gives scalar .f16/.bf16 setp only a p destination
        return Case(srcs, [p.astype(np.uint8)])
    return Case(srcs, [p.astype(np.uint8), q.astype(np.uint8)], pred_out=True)


def _set(mods: tuple[str, ...]) -> Case:
    op, boolop, ftz = _parts(mods)
    dtype, t = mods[-2], mods[-1]
    a, b = operands(t)
    srcs: list = [a, b]
    c = _pred(len(a)).astype(bool)
    if boolop:
        srcs.append(c.astype(np.uint8))
    comb = BOOL[boolop]
    res = [comb(r, c) for r in _truth(op, t, ftz)]
    if len(res) == 2:
        true = 0xFFFF if dtype in ("u32", "s32") else set_true(dtype[:-2])
        lo, hi = (np.where(r, true, 0).astype(np.uint32) for r in res)
        return Case(srcs, [lo | (hi << 16)])
    return Case(srcs, [np.where(res[0], set_true(dtype), 0).astype(np.uint64)])


def _selp(mods: tuple[str, ...]) -> Case:
    n = int(mods[-1][1:])
    edges = np.array(int_edges(n), DTYPES[n])
    a = np.concatenate([edges, random_bits(n, N_RANDOM, seed=27)])
    b = np.concatenate([edges[::-1], random_bits(n, N_RANDOM, seed=28)])
    c = random_bits(1, len(a), seed=29)
    return Case([a, b, c], [np.where(c.astype(bool), a, b)])


def _slct(mods: tuple[str, ...]) -> Case:
    dtype, ctype = mods[-2], mods[-1]
    n = int(dtype[1:])
    if ctype == "f32":
        (c,) = operand_sets(FORMATS["f32"], 1, n=N_RANDOM, seed=31)
    else:
        c = np.concatenate([np.array(int_edges(32), np.uint32), random_bits(32, N_RANDOM, seed=31)])
    a, b = random_bits(n, len(c), seed=32), random_bits(n, len(c), seed=33)
    return Case([a, b, c], [slct_ref(ctype, "ftz" in mods, a, b, c)])


MODELS = {"setp": _setp, "set": _set, "selp": _selp, "slct": _slct}


def model(opcode: str, mods: tuple[str, ...]) -> Case | None:
    fn = MODELS.get(opcode)
    return fn(mods) if fn else None
