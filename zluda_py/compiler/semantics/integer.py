"""Integer arithmetic: add sub mul mad mul24 mad24 sad div rem abs neg min max.

Results PTX leaves machine-specific are pinned to what NVIDIA hardware returns and are listed
in docs/semantics.md: x/0 and x%0 are all ones (-1 signed), INT_MIN/-1 is INT_MIN and
INT_MIN%-1 is 0.
"""

from __future__ import annotations

from llvmlite import ir

from zluda_py.compiler.lanes import Lanes
from zluda_py.compiler.semantics.base import (OperandTypes, Semantic, form, register, signed, types_of,
                                              unsupported, width)
from zluda_py.ptx import ast

ARITH_TYPES = frozenset({"u16", "u32", "u64", "s16", "s32", "s64"})
SIGNED_TYPES = frozenset({"s16", "s32", "s64"})
PACKED_TYPES = frozenset({"u16x2", "s16x2"})  # add min max: each 16-bit half on its own


def halfwise(L: Lanes, t: str, fn, srcs: list[ir.Value]) -> ir.Value:
    """fn over the two 16-bit halves of packed u16x2/s16x2 lanes; over the lanes themselves otherwise."""
    if t not in PACKED_TYPES:
        return fn(*srcs)
    halves = [L.split2(v, 16) for v in srcs]
    return L.join2(fn(*[h[0] for h in halves]), fn(*[h[1] for h in halves]))


def _typed(kinds: frozenset[str]):
    return lambda t: t in kinds


def saturate_s32(L: Lanes, wide: ir.Value) -> ir.Value:
    """Clamp a signed 64-bit lane value to the s32 range and truncate it."""
    b = L.b
    lo, hi = L.like(wide, -(1 << 31)), L.like(wide, (1 << 31) - 1)
    wide = b.select(b.icmp_signed("<", wide, lo), lo, wide)
    wide = b.select(b.icmp_signed(">", wide, hi), hi, wide)
    return L.resize(wide, 32, signed=True)


@register("integer", "add", "sub")
class AddSub(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, {"sat"}, type_ok=_typed(ARITH_TYPES | PACKED_TYPES))
        if inst.opcode == "sub" and f.type in PACKED_TYPES:  # PTX defines packed pairs for add only
            raise unsupported(inst, "packed 16-bit pairs are add-only")
        if f.has("sat") and f.type != "s32":
            raise unsupported(inst, ".sat needs .s32")
        return OperandTypes([f.type], [f.type, f.type])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        a, c = srcs
        b = L.b
        op = b.add if inst.opcode == "add" else b.sub
        if inst.has("sat"):
            return [saturate_s32(L, op(L.sext(a, 64), L.sext(c, 64)))]
        return [halfwise(L, types_of(inst)[-1], op, [a, c])]


def product(L: Lanes, a: ir.Value, c: ir.Value, t: str, mode: str) -> tuple[ir.Value, int]:
    """a*c for mul/mad: mode lo, hi or wide. Returns the value and its width."""
    n = width(t)
    b = L.b
    if mode == "lo":
        return b.mul(a, c), n
    wide = b.mul(L.resize(a, 2 * n, signed(t)), L.resize(c, 2 * n, signed(t)))
    if mode == "wide":
        return wide, 2 * n
    return L.resize(b.lshr(wide, L.like(wide, n)), n, False), n


def _mul_mode(inst: ast.Instruction) -> str:
    modes = [m for m in ("lo", "hi", "wide") if inst.has(m)]
    if len(modes) != 1:
        raise unsupported(inst, "needs one of .lo .hi .wide")
    return modes[0]


def _wide_type(t: str) -> str:
    return f"{t[0]}{2 * width(t)}"


@register("integer", "mul")
class Mul(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, {"lo", "hi", "wide"}, type_ok=_typed(ARITH_TYPES))
        mode = _mul_mode(inst)
        if mode == "wide" and width(f.type) == 64:
            raise unsupported(inst, "mul.wide of 64-bit operands")
        return OperandTypes([_wide_type(f.type) if mode == "wide" else f.type], [f.type, f.type])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        return [product(L, srcs[0], srcs[1], inst.types[-1], _mul_mode(inst))[0]]


@register("integer", "mad")
class Mad(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, {"lo", "hi", "wide", "sat"}, type_ok=_typed(ARITH_TYPES))
        mode = _mul_mode(inst)
        if f.has("sat") and (mode != "hi" or f.type != "s32"):
            raise unsupported(inst, ".sat needs .hi.s32")
        if mode == "wide" and width(f.type) == 64:
            raise unsupported(inst, "mad.wide of 64-bit operands")
        d = _wide_type(f.type) if mode == "wide" else f.type
        return OperandTypes([d], [f.type, f.type, d])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        a, c, addend = srcs
        t = inst.types[-1]
        p, _ = product(L, a, c, t, _mul_mode(inst))
        if inst.has("sat"):
            return [saturate_s32(L, L.b.add(L.sext(p, 64), L.sext(addend, 64)))]
        return [L.b.add(p, addend)]


def _mul24(L: Lanes, a: ir.Value, c: ir.Value, t: str, hi: bool) -> ir.Value:
    """The 48-bit product of the low 24 bits of a and c; .lo keeps bits 0-31, .hi bits 16-47."""
    b = L.b
    sh = L.like(a, 8)
    if signed(t):
        a24, c24 = b.ashr(b.shl(a, sh), sh), b.ashr(b.shl(c, sh), sh)
    else:
        a24, c24 = b.and_(a, L.like(a, 0xFFFFFF)), b.and_(c, L.like(c, 0xFFFFFF))
    p = b.mul(L.resize(a24, 64, signed(t)), L.resize(c24, 64, signed(t)))
    if hi:
        p = b.lshr(p, L.like(p, 16))
    return L.resize(p, 32, False)


@register("any", "mul24", "mad24")
class Mul24(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, {"lo", "hi", "sat"}, type_ok=_typed(frozenset({"u32", "s32"})))
        if inst.has("lo") == inst.has("hi"):
            raise unsupported(inst, "needs one of .lo .hi")
        if f.has("sat") and (inst.opcode != "mad24" or not inst.has("hi") or f.type != "s32"):
            raise unsupported(inst, ".sat needs mad24.hi.s32")
        return OperandTypes([f.type], [f.type] * (2 if inst.opcode == "mul24" else 3))

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        p = _mul24(L, srcs[0], srcs[1], inst.types[-1], inst.has("hi"))
        if inst.opcode == "mul24":
            return [p]
        if inst.has("sat"):
            return [saturate_s32(L, L.b.add(L.sext(p, 64), L.sext(srcs[2], 64)))]
        return [L.b.add(p, srcs[2])]


@register("any", "sad")
class Sad(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, set(), type_ok=_typed(ARITH_TYPES))
        return OperandTypes([f.type], [f.type] * 3)

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        a, c, acc = srcs
        b = L.b
        lt = (b.icmp_signed if signed(inst.types[-1]) else b.icmp_unsigned)("<", a, c)
        diff = b.select(lt, b.sub(c, a), b.sub(a, c))
        return [b.add(acc, diff)]


@register("integer", "div", "rem")
class DivRem(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, set(), type_ok=_typed(ARITH_TYPES))
        return OperandTypes([f.type], [f.type, f.type])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        a, c = srcs
        b = L.b
        t = inst.types[-1]
        zero = b.icmp_unsigned("==", c, L.like(c, 0))
        ones = L.like(a, -1)  # x/0 and x%0 alike (measured on NVIDIA H200)
        # Substitute safe divisors so LLVM sees no undefined division, then patch the results.
        if signed(t):
            n = width(t)
            overflow = b.and_(b.icmp_signed("==", a, L.like(a, -(1 << (n - 1)))),
                              b.icmp_signed("==", c, L.like(c, -1)))
            safe = b.select(b.or_(zero, overflow), L.like(c, 1), c)
            if inst.opcode == "div":
                return [b.select(zero, ones, b.sdiv(a, safe))]  # INT_MIN / 1 is the overflow answer
            return [b.select(zero, ones, b.select(overflow, L.like(a, 0), b.srem(a, safe)))]
        safe = b.select(zero, L.like(c, 1), c)
        return [b.select(zero, ones, (b.udiv if inst.opcode == "div" else b.urem)(a, safe))]


@register("integer", "abs", "neg")
class AbsNeg(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, set(), type_ok=_typed(SIGNED_TYPES))
        return OperandTypes([f.type], [f.type])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        (a,) = srcs
        b = L.b
        neg = b.sub(L.like(a, 0), a)
        if inst.opcode == "neg":
            return [neg]
        return [b.select(b.icmp_signed("<", a, L.like(a, 0)), neg, a)]


@register("integer", "min", "max")
class MinMax(Semantic):
    """min/max, also per 16-bit half of u16x2/s16x2; .relu (s32, s16x2) clamps negative results at 0."""

    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, {"relu"}, type_ok=_typed(ARITH_TYPES | PACKED_TYPES))
        if f.has("relu") and f.type not in ("s32", "s16x2"):
            raise unsupported(inst, ".relu needs .s32 or .s16x2")
        return OperandTypes([f.type], [f.type, f.type])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        b = L.b
        t = types_of(inst)[-1]
        cmp = b.icmp_signed if signed(t) else b.icmp_unsigned

        def one(a: ir.Value, c: ir.Value) -> ir.Value:
            r = b.select(cmp("<" if inst.opcode == "min" else ">", a, c), a, c)
            if inst.has("relu"):
                r = b.select(b.icmp_signed("<", r, L.like(r, 0)), L.like(r, 0), r)
            return r

        return [halfwise(L, t, one, srcs)]
