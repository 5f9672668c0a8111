"""Bit manipulation, shifts and logic: popc clz bfind fns brev bfe bfi szext bmsk prmt shf
shl shr and or xor not cnot lop3, and the byte dot products dp4a dp2a."""

from __future__ import annotations

from llvmlite import ir

from zluda_py.compiler.lanes import Lanes
from zluda_py.compiler.semantics.base import (OperandTypes, Semantic, form, register, signed,
                                              unsupported, width)
from zluda_py.ptx import ast

B = frozenset({"b32", "b64"})


def _in(kinds: set[str] | frozenset[str]):
    return lambda t: t in kinds


def low_mask(L: Lanes, n: ir.Value) -> ir.Value:
    """(1 << n) - 1 per lane for 0 <= n <= width (n == width gives all ones)."""
    b = L.b
    bits = n.type.element.width if isinstance(n.type, ir.VectorType) else n.type.width
    full = b.icmp_unsigned(">=", n, L.like(n, bits))
    safe = b.select(full, L.like(n, 0), n)
    return b.select(full, L.like(n, -1), b.sub(b.shl(L.like(n, 1), safe), L.like(n, 1)))


def umin(L: Lanes, a: ir.Value, c: ir.Value) -> ir.Value:
    return L.b.select(L.b.icmp_unsigned("<", a, c), a, c)


@register("any", "popc", "clz")
class CountBits(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, set(), type_ok=_in(B))
        return OperandTypes(["u32"], [f.type])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        (a,) = srcs
        if inst.opcode == "popc":
            r = L.intrinsic("ctpop", a.type, [a])
        else:
            r = L.intrinsic("ctlz", a.type, [a, ir.Constant(ir.IntType(1), 0)])
        return [L.resize(r, 32, False)]


@register("any", "bfind")
class Bfind(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, {"shiftamt"}, type_ok=_in({"u32", "s32", "u64", "s64"}))
        return OperandTypes(["u32"], [f.type])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        (a,) = srcs
        b = L.b
        t = inst.types[-1]
        n = width(t)
        if signed(t):  # the most significant bit that differs from the sign
            a = b.select(b.icmp_signed("<", a, L.like(a, 0)), b.not_(a), a)
        lz = L.resize(L.intrinsic("ctlz", a.type, [a, ir.Constant(ir.IntType(1), 0)]), 32, False)
        none = b.icmp_unsigned("==", lz, L.like(lz, n))
        r = lz if inst.has("shiftamt") else b.sub(L.like(lz, n - 1), lz)
        return [b.select(none, L.like(lz, -1), r)]


@register("any", "fns")
class Fns(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        form(inst, set(), type_ok=_in({"b32"}))
        return OperandTypes(["b32"], ["b32", "u32", "s32"])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        mask, base, offset = srcs
        b = L.b
        one, zero = L.like(mask, 1), L.like(mask, 0)
        fwd = b.icmp_signed(">=", offset, zero)
        at_base = b.icmp_signed("==", offset, zero)  # offset 0: is bit `base` itself set?
        goal = b.select(fwd, b.select(at_base, one, offset), b.sub(zero, offset))
        result, count = L.like(mask, -1), zero
        for i in range(32):
            pos = b.select(fwd, L.like(mask, i), L.like(mask, 31 - i))
            eligible = b.select(fwd, b.icmp_unsigned(">=", pos, base), b.icmp_unsigned("<=", pos, base))
            eligible = b.and_(eligible, b.or_(b.not_(at_base), b.icmp_unsigned("==", pos, base)))
            bit = b.trunc(b.lshr(mask, pos), L.int_ty(1))
            hit = b.and_(eligible, bit)
            count = b.add(count, b.zext(hit, mask.type))
            first = b.icmp_signed("==", result, L.like(mask, -1))
            found = b.and_(b.and_(hit, first), b.icmp_unsigned("==", count, goal))
            result = b.select(found, pos, result)
        return [result]


@register("any", "brev")
class Brev(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, set(), type_ok=_in(B))
        return OperandTypes([f.type], [f.type])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        return [L.intrinsic("bitreverse", srcs[0].type, srcs)]


def _bit_field(L: Lanes, n: int, pos32: ir.Value, len32: ir.Value) -> tuple[ir.Value, ir.Value]:
    """bfe/bfi position and length at width n. PTX reduces both mod 256; the 32-bit forms do,
    but the 64-bit ones use the whole u32 values (measured on NVIDIA H200, driver 580.159.04:
    bfe.u64(a, 0, 256) = a)."""
    if n == 32:
        return L.b.and_(pos32, L.like(pos32, 0xFF)), L.b.and_(len32, L.like(len32, 0xFF))
    return L.zext(pos32, n), L.zext(len32, n)


@register("any", "bfe")
class Bfe(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, set(), type_ok=_in({"u32", "s32", "u64", "s64"}))
        return OperandTypes([f.type], [f.type, "u32", "u32"])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        a, pos32, len32 = srcs
        b = L.b
        t = inst.types[-1]
        n = width(t)
        pos, ln = _bit_field(L, n, pos32, len32)
        msb = L.like(a, n - 1)
        inside = b.icmp_unsigned("<", pos, L.like(a, n))
        field_len = b.select(inside, umin(L, ln, b.sub(L.like(a, n), pos)), L.like(a, 0))
        mask = low_mask(L, field_len)
        field = b.and_(b.lshr(a, umin(L, pos, msb)), mask)
        if not signed(t):
            return [field]
        # The sign comes from the field's last bit, clamped to the msb; an empty field is 0.
        top = umin(L, b.sub(b.add(pos, ln), L.like(a, 1)), msb)
        sbit = b.and_(b.trunc(b.lshr(a, top), L.int_ty(1)), b.icmp_unsigned("!=", ln, L.like(a, 0)))
        return [b.select(sbit, b.or_(field, b.not_(mask)), field)]


@register("any", "bfi")
class Bfi(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, set(), type_ok=_in(B))
        return OperandTypes([f.type], [f.type, f.type, "u32", "u32"])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        f, base, pos32, len32 = srcs
        b = L.b
        n = width(inst.types[-1])
        pos, ln = _bit_field(L, n, pos32, len32)
        inside = b.icmp_unsigned("<", pos, L.like(f, n))
        safe_pos = b.select(inside, pos, L.like(f, 0))
        field_len = b.select(inside, umin(L, ln, b.sub(L.like(f, n), pos)), L.like(f, 0))
        mask = b.shl(low_mask(L, field_len), safe_pos)
        return [b.or_(b.and_(base, b.not_(mask)), b.and_(b.shl(f, safe_pos), mask))]


def _clamp_or_wrap(L: Lanes, inst: ast.Instruction, v: ir.Value) -> ir.Value:
    """Shift-like amounts: .wrap takes the low 5 bits, .clamp saturates at 32."""
    if inst.has("wrap"):
        return L.b.and_(v, L.like(v, 31))
    return umin(L, v, L.like(v, 32))


def _need_one(inst: ast.Instruction, *mods: str) -> None:
    if sum(inst.has(m) for m in mods) != 1:
        raise unsupported(inst, "needs one of ." + " .".join(mods))


@register("any", "szext")
class Szext(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, {"clamp", "wrap"}, type_ok=_in({"u32", "s32"}))
        _need_one(inst, "clamp", "wrap")
        return OperandTypes([f.type], [f.type, "u32"])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        a, w = srcs
        b = L.b
        w = _clamp_or_wrap(L, inst, w)
        if not signed(inst.types[-1]):
            return [b.and_(a, low_mask(L, w))]
        sh = b.sub(L.like(a, 32), w)
        safe = b.select(b.icmp_unsigned(">=", sh, L.like(a, 32)), L.like(a, 0), sh)
        ext = b.ashr(b.shl(a, safe), safe)
        return [b.select(b.icmp_unsigned("==", w, L.like(a, 0)), L.like(a, 0), ext)]


@register("any", "bmsk")
class Bmsk(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        form(inst, {"clamp", "wrap"}, type_ok=_in({"b32"}))
        _need_one(inst, "clamp", "wrap")
        return OperandTypes(["b32"], ["u32", "u32"])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        pos, ln = (_clamp_or_wrap(L, inst, v) for v in srcs)
        b = L.b
        end = umin(L, b.add(pos, ln), L.like(pos, 32))
        return [b.and_(low_mask(L, end), b.not_(low_mask(L, pos)))]


# prmt modes: result byte i takes source byte f(selector s = c[1:0], i), from bytes {b:a}.
PRMT_MODES = {
    "f4e": lambda s, i: (s + i) % 8,
    "b4e": lambda s, i: (s - i) % 8,
    "rc8": lambda s, i: s,
    "ecl": lambda s, i: max(s, i),
    "ecr": lambda s, i: min(s, i),
    "rc16": lambda s, i: 2 * (s & 1) + (i & 1),
}


@register("any", "prmt")
class Prmt(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, set(PRMT_MODES), type_ok=_in({"b32"}))
        if len(f.flags) > 1:
            raise unsupported(inst, "more than one mode")
        return OperandTypes(["b32"], ["b32", "b32", "b32"])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        a, c, sel = srcs
        b = L.b
        both = b.or_(L.zext(a, 64), b.shl(L.zext(c, 64), L.like(L.zext(a, 64), 32)))
        mode = next((m for m in PRMT_MODES if inst.has(m)), None)
        result = L.like(a, 0)
        for i in range(4):
            if mode is None:
                nib = b.and_(b.lshr(sel, L.like(sel, 4 * i)), L.like(sel, 0xF))
                idx = b.and_(nib, L.like(sel, 7))
            else:
                s = b.and_(sel, L.like(sel, 3))
                idx = L.like(sel, 0)
                for sv in range(4):
                    idx = b.select(b.icmp_unsigned("==", s, L.like(sel, sv)), L.like(sel, PRMT_MODES[mode](sv, i)), idx)
            byte = b.and_(L.resize(b.lshr(both, L.zext(b.shl(idx, L.like(idx, 3)), 64)), 32, False), L.like(a, 0xFF))
            if mode is None:  # selector bit 3 replicates the chosen byte's sign over the byte
                rep = b.icmp_unsigned("!=", b.and_(nib, L.like(sel, 8)), L.like(sel, 0))
                neg = b.icmp_unsigned("!=", b.and_(byte, L.like(byte, 0x80)), L.like(byte, 0))
                byte = b.select(rep, b.select(neg, L.like(byte, 0xFF), L.like(byte, 0)), byte)
            result = b.or_(result, b.shl(byte, L.like(byte, 8 * i)))
        return [result]


@register("any", "shf")
class Shf(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        form(inst, {"l", "r", "clamp", "wrap"}, type_ok=_in({"b32"}))
        _need_one(inst, "l", "r")
        _need_one(inst, "clamp", "wrap")
        return OperandTypes(["b32"], ["b32", "b32", "u32"])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        a, hi, n = srcs
        b = L.b
        n = _clamp_or_wrap(L, inst, n)
        if inst.has("l"):  # upper half of {hi:a} << n; n == 32 leaves a
            r = L.intrinsic("fshl", a.type, [hi, a, n])
            return [b.select(b.icmp_unsigned("==", n, L.like(n, 32)), a, r)]
        r = L.intrinsic("fshr", a.type, [hi, a, n])
        return [b.select(b.icmp_unsigned("==", n, L.like(n, 32)), hi, r)]


SHIFT_TYPES = frozenset({"b16", "b32", "b64", "u16", "u32", "u64", "s16", "s32", "s64"})


@register("any", "shl", "shr")
class Shift(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, set(), type_ok=_in(SHIFT_TYPES))
        if inst.opcode == "shl" and f.type[0] != "b":
            raise unsupported(inst, "shl takes .b16 .b32 .b64")
        return OperandTypes([f.type], [f.type, "u32"])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        a, n32 = srcs
        b = L.b
        t = inst.types[-1]
        bits = width(t)
        # Amounts at or above the width shift everything out (sign fill for signed shr).
        arith = inst.opcode == "shr" and signed(t)
        n = L.resize(umin(L, n32, L.like(n32, bits - 1 if arith else bits)), bits, False)
        if arith:
            return [b.ashr(a, n)]
        over = b.icmp_unsigned("==", n, L.like(a, bits))
        safe = b.select(over, L.like(a, 0), n)
        r = b.shl(a, safe) if inst.opcode == "shl" else b.lshr(a, safe)
        return [b.select(over, L.like(a, 0), r)]


LOGIC_TYPES = frozenset({"pred", "b16", "b32", "b64"})


@register("any", "and", "or", "xor", "not", "cnot")
class Logic(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, set(), type_ok=_in(LOGIC_TYPES - ({"pred"} if inst.opcode == "cnot" else set())))
        return OperandTypes([f.type], [f.type] * (1 if inst.opcode in ("not", "cnot") else 2))

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        b = L.b
        a = srcs[0]
        if inst.opcode == "not":
            return [b.not_(a)]
        if inst.opcode == "cnot":
            return [b.zext(b.icmp_unsigned("==", a, L.like(a, 0)), a.type)]
        op = {"and": b.and_, "or": b.or_, "xor": b.xor}[inst.opcode]
        return [op(a, srcs[1])]


@register("any", "lop3")
class Lop3(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        form(inst, set(), type_ok=_in({"b32"}))
        return OperandTypes(["b32"], ["b32", "b32", "b32", "b32"])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        a, c, d, lut = srcs
        b = L.b
        result = L.like(a, 0)
        for i in range(8):  # minterm i: a = bit 2, b = bit 1, c = bit 0 of i (ta=0xF0 tb=0xCC tc=0xAA)
            term = L.like(a, -1)
            for v, bit in ((a, 4), (c, 2), (d, 1)):
                term = b.and_(term, v if i & bit else b.not_(v))
            take = b.sub(L.like(a, 0), b.and_(b.lshr(lut, L.like(lut, i)), L.like(lut, 1)))
            result = b.or_(result, b.and_(term, take))
        return [result]


def _dot_types(inst: ast.Instruction) -> tuple[str, str, str]:
    f = form(inst, {"lo", "hi"}, ntypes=2, type_ok=_in({"u32", "s32"}))
    acc = "u32" if f.types == ("u32", "u32") else "s32"
    return f.types[0], f.types[1], acc


@register("any", "dp4a", "dp2a")
class Dot(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        ta, tb, acc = _dot_types(inst)
        if inst.opcode == "dp2a":
            _need_one(inst, "lo", "hi")
        elif inst.has("lo") or inst.has("hi"):
            raise unsupported(inst, "dp4a takes no .lo/.hi")
        return OperandTypes([acc], [ta, tb, acc])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        a, c, acc = srcs
        b = L.b
        ta, tb, _ = _dot_types(inst)

        def part(v: ir.Value, index: int, bits: int, sign: bool) -> ir.Value:
            x = L.resize(b.lshr(v, L.like(v, index * bits)), bits, False)
            return L.resize(x, 32, sign)

        r = acc
        if inst.opcode == "dp4a":
            pairs = [(part(a, i, 8, signed(ta)), part(c, i, 8, signed(tb))) for i in range(4)]
        else:
            k = 2 if inst.has("hi") else 0
            pairs = [(part(a, i, 16, signed(ta)), part(c, k + i, 8, signed(tb))) for i in range(2)]
        for x, y in pairs:
            r = b.add(r, b.mul(x, y))
        return [r]
