"""Compare and select: setp set (every comparison, .and/.or/.xor combining), selp slct; and mov
of plain values.

Float comparisons: eq lt le gt ge and ne are ordered (false when either side is NaN), the
u-suffixed forms are unordered (true when either is NaN), num/nan test orderedness. -0 == +0.
"""

from __future__ import annotations

from llvmlite import ir

from zluda_py.compiler.lanes import Lanes
from zluda_py.compiler.semantics.base import (FLOAT_TYPES, OperandTypes, Semantic, form, has_pred_out,
                                              register, signed, unsupported, width)
from zluda_py.compiler.semantics.floating import FMT, as_float, flush, packed
from zluda_py.compiler.semantics.rounding import F32_FMT, F64_FMT, widen
from zluda_py.ptx import ast

INT_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
UNSIGNED_CMP = {"lo": "<", "ls": "<=", "hi": ">", "hs": ">="}
FLOAT_CMP = {"eq": ("o", "=="), "ne": ("o", "!="), "lt": ("o", "<"), "le": ("o", "<="), "gt": ("o", ">"),
             "ge": ("o", ">="), "equ": ("u", "=="), "neu": ("u", "!="), "ltu": ("u", "<"), "leu": ("u", "<="),
             "gtu": ("u", ">"), "geu": ("u", ">="), "num": ("o", "ord"), "nan": ("u", "uno")}
BOOL_OPS = ("and", "or", "xor")
CMP_INT_TYPES = frozenset({"b16", "b32", "b64", "u16", "u32", "u64", "s16", "s32", "s64"})
CMP_FLOAT_TYPES = frozenset({"f32", "f64", "f16", "bf16", "f16x2", "bf16x2"})


def _cmp_op(inst: ast.Instruction, t: str) -> str:
    table = FLOAT_CMP if t in FLOAT_TYPES else {**INT_CMP, **UNSIGNED_CMP}
    ops = [m for m in inst.mods if m in table]
    if len(ops) != 1:
        raise unsupported(inst, "needs one comparison")
    if ops[0] in UNSIGNED_CMP and t[0] != "u":
        raise unsupported(inst, f".{ops[0]} compares unsigned types")
    if t in CMP_INT_TYPES and t[0] == "b" and ops[0] not in ("eq", "ne"):
        raise unsupported(inst, f".{ops[0]} on untyped bits (.b types compare with .eq .ne)")
    return ops[0]


def _check(inst: ast.Instruction, types_n: int) -> tuple[str, str, str | None]:
    all_cmp = set(FLOAT_CMP) | set(INT_CMP) | set(UNSIGNED_CMP)
    f = form(inst, all_cmp | set(BOOL_OPS) | {"ftz"}, ntypes=types_n,
             type_ok=lambda t: t in CMP_INT_TYPES or t in CMP_FLOAT_TYPES or t in SET_DTYPES)
    t = f.type
    if t not in CMP_INT_TYPES and t not in CMP_FLOAT_TYPES:
        raise unsupported(inst, "operand type")
    if f.has("ftz") and t not in ("f32", "f16", "f16x2"):
        raise unsupported(inst, ".ftz applies to .f32 and .f16")
    bools = [m for m in BOOL_OPS if f.has(m)]
    if len(bools) > 1:
        raise unsupported(inst, "more than one combining operation")
    return t, _cmp_op(inst, t), bools[0] if bools else None


def compare(L: Lanes, inst: ast.Instruction, t: str, op: str, a: ir.Value, c: ir.Value) -> ir.Value:
    """One comparison of element bits (a scalar type, or one half of a packed one)."""
    b = L.b
    if t in CMP_INT_TYPES:
        if op in UNSIGNED_CMP:
            return b.icmp_unsigned(UNSIGNED_CMP[op], a, c)
        return (b.icmp_signed if signed(t) else b.icmp_unsigned)(INT_CMP[op], a, c)
    fmt = FMT[t]
    if inst.has("ftz"):
        a, c = flush(L, a, fmt), flush(L, c, fmt)
    if fmt in (F32_FMT, F64_FMT):
        x, y = as_float(L, a, fmt), as_float(L, c, fmt)
    else:
        x, y = widen(L, a, fmt), widen(L, c, fmt)
    kind, rel = FLOAT_CMP[op]
    return (b.fcmp_ordered if kind == "o" else b.fcmp_unordered)(rel, x, y)


def _halves(L: Lanes, v: ir.Value) -> tuple[ir.Value, ir.Value]:
    return L.split2(v, 16)


def _combine(L: Lanes, boolop: str | None, p: ir.Value, c: ir.Value | None) -> ir.Value:
    if boolop is None:
        return p
    return {"and": L.b.and_, "or": L.b.or_, "xor": L.b.xor}[boolop](p, c)


@register("any", "setp")
class Setp(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        t, _, boolop = _check(inst, 1)
        if has_pred_out(inst) and t in ("f16", "bf16"):
            raise unsupported(inst, "p|q destination (scalar .f16/.bf16 setp writes p only)")
        dst = ["pred", "pred"] if has_pred_out(inst) else ["pred"]
        return OperandTypes(dst, [t, t] + (["pred"] if boolop else []))

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        t, op, boolop = _check(inst, 1)
        a, c = srcs[:2]
        extra = srcs[2] if boolop else None
        if packed(t):  # p from the low halves, q from the high halves
            (alo, ahi), (clo, chi) = _halves(L, a), _halves(L, c)
            e = t[:-2]
            p = _combine(L, boolop, compare(L, inst, e, op, alo, clo), extra)
            q = _combine(L, boolop, compare(L, inst, e, op, ahi, chi), extra)
            return [p, q] if has_pred_out(inst) else [p]
        r = compare(L, inst, t, op, a, c)
        p = _combine(L, boolop, r, extra)
        if has_pred_out(inst):
            return [p, _combine(L, boolop, L.b.not_(r), extra)]
        return [p]


# set's destination types by source type, as ptxas accepts them (the PTX ISA's set and its
# half-precision variant): 16-bit integer results only from 16-bit float compares, packed results
# only from the same packed type, f32 results not from 16-bit floats, f16 results not from bf16.
SET_DTYPES = frozenset({"u32", "s32", "f32", "u16", "s16", "f16", "bf16", "f16x2", "bf16x2"})
# The value written where the (combined) comparison is true, per destination element; false is 0.
SET_TRUE = {"u32": 0xFFFFFFFF, "s32": 0xFFFFFFFF, "f32": 0x3F800000, "u16": 0xFFFF, "s16": 0xFFFF,
            "f16": 0x3C00, "bf16": 0x3F80}


def _set_types_ok(dtype: str, stype: str) -> bool:
    if packed(stype) or packed(dtype):
        return dtype in ("u32", "s32", stype)
    return {"u32": True, "s32": True, "f32": stype not in ("f16", "bf16"), "f16": stype != "bf16", "bf16": True,
            "u16": stype in ("f16", "bf16"), "s16": stype in ("f16", "bf16")}[dtype]


@register("any", "set")
class Set(Semantic):
    """set.cmp.dtype.stype: all ones (integer dtype), 1.0 in the dtype's format (float dtype) where
    true, else 0. Packed sources compare per half, and each half of d gets 0xffff (.u32 .s32) or
    1.0 (.f16x2 .bf16x2) where its comparison is true."""

    def operands(self, inst: ast.Instruction) -> OperandTypes:
        t, _, boolop = _check(inst, 2)
        dtype = inst.types[0]
        if dtype not in SET_DTYPES or not _set_types_ok(dtype, t):
            raise unsupported(inst, f"set.{dtype} of .{t} values")
        if dtype == "bf16" and inst.has("ftz"):
            raise unsupported(inst, ".ftz with a .bf16 result")
        return OperandTypes([dtype], [t, t] + (["pred"] if boolop else []))

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        t, op, boolop = _check(inst, 2)
        dtype = inst.types[0]
        extra = srcs[2] if boolop else None

        def result(e: str, a: ir.Value, c: ir.Value, true: int, bits: int) -> ir.Value:
            r = _combine(L, boolop, compare(L, inst, e, op, a, c), extra)
            return L.b.select(r, L.const(ir.IntType(bits), true), L.const(ir.IntType(bits), 0))

        if packed(t):
            true = 0xFFFF if dtype in ("u32", "s32") else SET_TRUE[dtype[:-2]]
            (alo, ahi), (clo, chi) = _halves(L, srcs[0]), _halves(L, srcs[1])
            return [L.join2(result(t[:-2], alo, clo, true, 16), result(t[:-2], ahi, chi, true, 16))]
        return [result(t, srcs[0], srcs[1], SET_TRUE[dtype], width(dtype))]


# PTX types selp/slct/mov name (f16/bf16 values move as .b16/.b32).
SELECT_TYPES = frozenset({"b16", "b32", "b64", "u16", "u32", "u64", "s16", "s32", "s64", "f32", "f64"})


@register("any", "selp")
class Selp(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, set(), type_ok=lambda t: t in SELECT_TYPES)
        return OperandTypes([f.type], [f.type, f.type, "pred"])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        a, c, p = srcs
        return [L.b.select(p, a, c)]


@register("any", "slct")
class Slct(Semantic):
    """slct.dtype.s32 / slct{.ftz}.dtype.f32 d, a, b, c: a where c >= 0 (-0 counts, NaN does not)."""

    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, {"ftz"}, ntypes=2, type_ok=lambda t: t in SELECT_TYPES)
        if f.types[1] not in ("s32", "f32") or (f.has("ftz") and f.types[1] != "f32"):
            raise unsupported(inst, "operand type")
        return OperandTypes([f.types[0]], [f.types[0], f.types[0], f.types[1]])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        a, c, sel = srcs
        b = L.b
        if inst.types[1] == "s32":
            take_a = b.icmp_signed(">=", sel, L.like(sel, 0))
        else:
            if inst.has("ftz"):
                sel = flush(L, sel, F32_FMT)
            x = as_float(L, sel, F32_FMT)
            take_a = b.fcmp_ordered(">=", x, L.like(x, 0.0))
        return [b.select(take_a, a, c)]


MOV_TYPES = SELECT_TYPES | {"pred"}


@register("any", "mov")
class Mov(Semantic):
    """mov of a plain value (vector pack/unpack and addresses are the framework's)."""

    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, set(), type_ok=lambda t: t in MOV_TYPES)
        return OperandTypes([f.type], [f.type])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        return [srcs[0]]

