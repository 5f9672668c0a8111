"""Extended-precision integer arithmetic through the carry flag CC (pseudo-type "cc", an i1).

add.cc/addc set CC to the unsigned carry-out. sub.cc/subc keep CC a carry too, as NVIDIA hardware
does (measured on an H200; PTX's text calls it a borrow): they compute a + ~b + 1 (sub) or
a + ~b + CC (subc) and set CC to that sum's carry-out, i.e. to "no borrow". Chains of
sub.cc/subc form multi-word subtraction either way; mixing add.cc with subc is where it shows.
mad.cc/madc add (a*b).lo or .hi plus c (plus CC) and set CC to that addition's carry-out.
"""

from __future__ import annotations

from llvmlite import ir

from zluda_py.compiler.lanes import Lanes
from zluda_py.compiler.semantics.base import OperandTypes, Semantic, form, register, unsupported, width
from zluda_py.compiler.semantics.integer import product
from zluda_py.ptx import ast

CARRY_TYPES = frozenset({"u32", "s32", "u64", "s64"})


def _carry_in(inst: ast.Instruction) -> bool:
    return inst.opcode in ("addc", "subc", "madc")


@register("carry", "add", "sub", "mad")
@register("any", "addc", "subc", "madc")
class Carry(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        allowed = {"cc", "lo", "hi"} if inst.opcode in ("mad", "madc") else {"cc"}
        f = form(inst, allowed, type_ok=lambda t: t in CARRY_TYPES)
        if inst.opcode in ("mad", "madc") and inst.has("lo") == inst.has("hi"):
            raise unsupported(inst, "needs one of .lo .hi")
        nsrc = 3 if inst.opcode in ("mad", "madc") else 2
        dst = [f.type, "cc"] if f.has("cc") else [f.type]
        return OperandTypes(dst, [f.type] * nsrc + (["cc"] if _carry_in(inst) else []))

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        b = L.b
        t = inst.types[-1]
        n = width(t)
        if inst.opcode in ("mad", "madc"):
            p, _ = product(L, srcs[0], srcs[1], t, "hi" if inst.has("hi") else "lo")
            x, y, rest = p, srcs[2], srcs[3:]
        else:
            x, y, rest = srcs[0], srcs[1], srcs[2:]
        if inst.opcode in ("sub", "subc"):
            y = b.not_(y)
            rest = rest or [L.const(ir.IntType(1), 1)]
        wide = [L.zext(x, 2 * n), L.zext(y, 2 * n)] + [L.zext(cf, 2 * n) for cf in rest]
        r = b.add(wide[0], wide[1])
        if rest:
            r = b.add(r, wide[2])
        out = [L.resize(r, n, False)]
        if inst.has("cc"):
            out.append(L.resize(b.lshr(r, L.like(r, n)), 1, False))
        return out
