"""Video instructions, as the PTX ISA defines them: the SIMD vadd2 vsub2 vavrg2 vabsdiff2 vmin2
vmax2 vset2 and their quad-byte twins (vadd4 ... vset4), and the scalar ones (vadd ... vmad).

Each of the n elements (2 half-words or 4 bytes) of a and b is sign- or zero-extended by the
operand's type (.atype/.btype) and operated on exactly; vavrg rounds halves away from zero;
.sat clamps to the element range of .dtype; vset gives 0/1. The secondary operation then
either merges (each element of d is the result, truncated to the element width, where the
mask selects it, else c's element) or, with .add, accumulates: d = c + the sum of the selected
full-precision results (sum of absolute differences is vabsdiff4.add), modulo 2^32.

The scalar video instructions vadd vsub vabsdiff vmin vmax vshl vshr vset work on whole words,
as an NVIDIA H200 computes them (tests/hardware/golden/video.npz; docs/semantics.md): a and b
extended to 33 bits by their types, the exact result T (vshl/vshr shift by b, clamped to 32 or
taken mod 32 by .clamp/.wrap; vshl's T is taken modulo 2^64); .sat clamps T to the .s32 range,
or for .u32 only below (T < 0 gives 0, larger values wrap), except that vshl clamps its T
modulo 2^34 (read as signed) both ways; .add gives T + c mod 2^32; .min/.max compare a key of
T with c read as .dtype (vset: as .atype), signed for .s32 and unsigned for .u32 (a negative
key above every c): the key is T wrapped to 32 bits and sign-extended for vadd and vsub (and
vshl/vshr with .sat into .u32), T itself otherwise; d is the low 32 bits of the winner. vmad
reads a, b and c as signed whatever their types, computes a*b + c (+1 with .po) in 64 bits,
shifts it by .shr7/.shr15 (arithmetically when .atype or .btype is signed, else logically) and
clamps it with .sat to the s32 range or, unsigned, to [0, 2^32 - 1] (the 64-bit value read as
signed). Negated vmad operands (-a, -c) do not reach the semantics: the parser does not read
them.

Only the default operand selectors and mask are translated (a.h10/b.h32, a.b3210/b.b7654,
d.h10/d.b3210; whole words for the scalar forms): a selector on an operand is refused by name.
"""

from __future__ import annotations

import re

from llvmlite import ir

from zluda_py.compiler.lanes import Lanes
from zluda_py.compiler.semantics.base import Form, OperandTypes, Semantic, form, register, signed, unsupported
from zluda_py.ptx import ast

ARITH = ("vadd", "vsub", "vavrg", "vabsdiff", "vmin", "vmax")
SCALAR = ("vadd", "vsub", "vabsdiff", "vmin", "vmax", "vshl", "vshr", "vset")
SECONDARY = ("add", "min", "max")
CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
VIDEO_TYPES = frozenset({"u32", "s32"})
# A video selector or mask written on an operand register: %r1.b3210, %r2.h32.
_SELECTOR = re.compile(r"\.([bh][0-7]+)$")


def _split(opcode: str) -> tuple[str, int]:
    """vabsdiff4 -> ("vabsdiff", 4)."""
    return opcode[:-1], int(opcode[-1])


def _compare_form(inst: ast.Instruction, secondary: set[str]) -> Form:
    """vset/vset2/vset4 .atype.btype with exactly one comparison."""
    f = form(inst, set(CMP) | secondary, ntypes=2, type_ok=VIDEO_TYPES.__contains__)
    if len([m for m in CMP if f.has(m)]) != 1:
        raise unsupported(inst, "needs one comparison")
    return f


def _refuse_selectors(inst: ast.Instruction) -> None:
    for op in inst.operands:
        if isinstance(op, ast.Reg) and (m := _SELECTOR.search(op.name)):
            raise unsupported(inst, f"operand selector .{m.group(1)} on {op.name[:m.start()]}: "
                                    "only the default selectors and mask are translated")


@register("any", *(f"{op}{n}" for n in (2, 4) for op in ARITH + ("vset",)))
class Simd(Semantic):
    """The shared shape: n elements of 32/n bits, then the merge or accumulate."""

    def operands(self, inst: ast.Instruction) -> OperandTypes:
        base, _ = _split(inst.opcode)
        if base == "vset":
            f = _compare_form(inst, {"add"})
            dtype = "u32"  # comparison results are unsigned
            atype, btype = f.types
        else:
            f = form(inst, {"sat", "add"}, ntypes=3, type_ok=VIDEO_TYPES.__contains__)
            if f.has("sat") and f.has("add"):
                raise unsupported(inst, ".sat cannot be used with the .add accumulate")
            dtype, atype, btype = f.types
        _refuse_selectors(inst)
        return OperandTypes([dtype], [atype, btype, dtype])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        b = L.b
        base, n = _split(inst.opcode)
        e = 32 // n
        a, bb, c = srcs
        i32 = L.int_ty(32)
        types = [m for m in inst.mods if m in VIDEO_TYPES]
        sa, sb = signed(types[-2]), signed(types[-1])

        def element(v: ir.Value, i: int, sign: bool) -> ir.Value:
            part = b.trunc(b.lshr(v, L.like(v, i * e)), L.int_ty(e))
            return L.resize(part, 32, sign)

        results = []
        for i in range(n):
            x, y = element(a, i, sa), element(bb, i, sb)
            if base == "vset":
                op = next(m for m in CMP if inst.has(m))
                t = b.zext(b.icmp_signed(CMP[op], x, y), i32)
            else:
                t = _arith(L, base, x, y)
                if inst.has("sat"):
                    t = _clamp(L, t, e, signed(types[0]))
            results.append(t)
        if inst.has("add"):
            d = c
            for t in results:  # full-precision results, added modulo 2^32
                d = b.add(d, t)
            return [d]
        d = L.like(c, 0)
        for i, t in enumerate(results):
            part = b.and_(t, L.like(t, (1 << e) - 1))
            d = b.or_(d, b.shl(part, L.like(part, i * e)))
        return [d]


def _arith(L: Lanes, base: str, x: ir.Value, y: ir.Value) -> ir.Value:
    """One element's exact result; the operands are extended elements, so i32 never overflows."""
    b = L.b
    if base == "vadd":
        return b.add(x, y)
    if base == "vsub":
        return b.sub(x, y)
    if base == "vavrg":
        s = b.add(x, y)
        up = b.icmp_signed(">=", s, L.like(s, 0))
        # (s + 1) >> 1 for s >= 0, s >> 1 (arithmetic) below: halves round away from zero
        return b.ashr(b.add(s, b.zext(up, s.type)), L.like(s, 1))
    if base == "vabsdiff":
        diff = b.sub(x, y)
        return L.select(b.icmp_signed("<", diff, L.like(diff, 0)), b.neg(diff), diff)
    return _min_max(L, base[1:], x, y)  # vmin vmax


def _clamp(L: Lanes, t: ir.Value, e: int, signed_d: bool) -> ir.Value:
    """Saturate the exact value t to the range of an e-bit signed or unsigned integer."""
    lo, hi = (-(1 << (e - 1)), (1 << (e - 1)) - 1) if signed_d else (0, (1 << e) - 1)
    return _min_max(L, "max", _min_max(L, "min", t, L.like(t, hi)), L.like(t, lo))


def _min_max(L: Lanes, op: str, x: ir.Value, y: ir.Value) -> ir.Value:
    return L.select(L.b.icmp_signed("<" if op == "min" else ">", x, y), x, y)


@register("any", *SCALAR)
class Scalar(Semantic):
    """The scalar forms over whole words; every value is exact in i64 (33-bit inputs)."""

    def operands(self, inst: ast.Instruction) -> OperandTypes:
        op = inst.opcode
        if op == "vset":
            f = _compare_form(inst, set(SECONDARY))
            dtype = "u32"  # comparison results are unsigned, and so is c
            atype, btype = f.types
        else:
            shift = {"clamp", "wrap"} if op in ("vshl", "vshr") else set()
            f = form(inst, {"sat"} | set(SECONDARY) | shift, ntypes=3, type_ok=VIDEO_TYPES.__contains__)
            dtype, atype, btype = f.types
            if shift and (len([m for m in shift if f.has(m)]) != 1 or btype != "u32"):
                raise unsupported(inst, "a shift needs .u32 amounts and one of .clamp .wrap")
        if len([m for m in SECONDARY if f.has(m)]) > 1:
            raise unsupported(inst, "more than one secondary operation")
        _refuse_selectors(inst)
        # Without a secondary operation c may still be written (d = the result; c unused).
        with_c = any(f.has(m) for m in SECONDARY) or len(inst.operands) == 4
        return OperandTypes([dtype], [atype, btype] + ([dtype] if with_c else []))

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        b = L.b
        op = inst.opcode
        types = [m for m in inst.mods if m in VIDEO_TYPES]
        signed_d = signed(types[0])  # vset: c is read as .atype (measured)
        width = 64  # exact for all but vshl, whose result is taken modulo 2^64 (measured)
        x = L.resize(srcs[0], width, signed(types[-2]))
        y = L.resize(srcs[1], width, signed(types[-1]))
        if op == "vset":
            cmp = next(m for m in CMP if inst.has(m))
            t = b.zext(b.icmp_signed(CMP[cmp], x, y), x.type)
        elif op in ("vshl", "vshr"):
            n = _min_max(L, "min", y, L.like(y, 32)) if inst.has("clamp") else b.and_(y, L.like(y, 31))
            t = b.shl(x, n) if op == "vshl" else b.ashr(x, n)
        else:
            t = _arith(L, op, x, y)
        if inst.has("sat"):
            if op == "vshl":  # the result modulo 2^34, as signed, clamped both ways (measured)
                t = _clamp(L, b.sext(b.trunc(t, L.int_ty(34)), t.type), 32, signed_d)
            elif signed_d:
                t = _clamp(L, t, 32, True)
            else:  # .u32 clamps below only (measured): a result above 2^32 - 1 wraps
                t = _min_max(L, "max", t, L.like(t, 0))
        i32 = L.int_ty(32)
        if inst.has("add"):
            return [b.add(b.trunc(t, i32), srcs[2])]
        second = [m for m in ("min", "max") if inst.has(m)]
        if second:
            # The comparison key (measured): T wrapped to 32 bits and sign-extended for vadd and
            # vsub, and for vshl/vshr with .sat into .u32; T otherwise. Signed against c as .s32,
            # unsigned against c as .u32 (a negative key is then above every c).
            wrapped = op in ("vadd", "vsub") or (op in ("vshl", "vshr") and inst.has("sat") and not signed_d)
            key = b.sext(b.trunc(t, i32), t.type) if wrapped else t
            c = L.resize(srcs[2], width, signed_d)
            rel = "<=" if second[0] == "min" else ">="
            t = L.select(b.icmp_signed(rel, key, c) if signed_d else b.icmp_unsigned(rel, key, c), t, c)
        return [b.trunc(t, i32)]


@register("any", "vmad")
class Vmad(Semantic):
    """vmad without operand negation, as an NVIDIA H200 computes it: a, b and c signed whatever
    their types, so every value fits i64 (|s32 * s32| + 2^31 + 1 < 2^63)."""

    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, {"sat", "po", "shr7", "shr15"}, ntypes=3, type_ok=VIDEO_TYPES.__contains__)
        if f.has("shr7") and f.has("shr15"):
            raise unsupported(inst, "more than one scale")
        dtype, atype, btype = f.types
        _refuse_selectors(inst)
        return OperandTypes([dtype], [atype, btype, "s32" if _vmad_signed(f.types) else "u32"])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        b = L.b
        types = [m for m in inst.mods if m in VIDEO_TYPES]
        sign = _vmad_signed(types)
        # Measured: a, b and c are read as signed whatever their types.
        x, y, c = (L.resize(v, 64, True) for v in srcs)
        t = b.add(b.mul(x, y), c)
        if inst.has("po"):
            t = b.add(t, L.like(t, 1))
        scale = 7 if inst.has("shr7") else 15 if inst.has("shr15") else 0
        if scale:  # on the 64-bit pattern: arithmetic when signed final, else logical
            t = (b.ashr if sign else b.lshr)(t, L.like(t, scale))
        if inst.has("sat"):
            if sign:
                t = _clamp(L, t, 32, True)
            else:  # the 64-bit value read as signed, clamped to [0, 2^32 - 1]
                t = _clamp(L, t, 33, True)
                t = _min_max(L, "max", t, L.like(t, 0))
        return [b.trunc(t, L.int_ty(32))]


def _vmad_signed(types: "tuple[str, ...] | list[str]") -> bool:
    return signed(types[1]) or signed(types[2])
