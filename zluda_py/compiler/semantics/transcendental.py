"""The .approx functions: sin cos lg2 ex2 tanh rsqrt.

They are computed in f64 (`Lanes.math`: LLVM's math intrinsics) and rounded once to the operand
type, so on the CPU the results are within a fraction of an ulp, well inside PTX's documented
error bounds. AMDGPU has no f64 transcendentals and computes them from its f32 hardware
functions instead (amdgpu/mathlib.py), also inside the bounds. .ftz flushes subnormal inputs
and results; rsqrt.approx.ftz.f64 works on the operand's upper word alone, as PTX defines it.
"""

from __future__ import annotations

from llvmlite import ir

from zluda_py.compiler.lanes import Lanes
from zluda_py.compiler.semantics.base import OperandTypes, Semantic, form, register, unsupported
from zluda_py.compiler.semantics.floating import FMT, canonical_nan, flush, per_element, upper_word
from zluda_py.compiler.semantics.rounding import F64_FMT, narrow, widen
from zluda_py.ptx import ast

TYPES = {
    "sin": {"f32"}, "cos": {"f32"}, "lg2": {"f32"}, "rsqrt": {"f32", "f64"},
    "ex2": {"f32", "f16", "f16x2", "bf16", "bf16x2"}, "tanh": {"f32", "f16", "f16x2", "bf16", "bf16x2"},
}
INTRINSIC = {"sin": "sin", "cos": "cos", "lg2": "log2", "ex2": "exp2", "tanh": "tanh"}


@register("any", *TYPES)
class Approx(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        f = form(inst, {"approx", "ftz"}, type_ok=lambda t: t in TYPES[inst.opcode])
        if not f.has("approx"):
            raise unsupported(inst, "needs .approx")
        if f.type.startswith("bf16") and f.has("ftz") != (inst.opcode == "ex2"):
            raise unsupported(inst, "ex2.approx.ftz.bf16 needs .ftz; tanh.approx.bf16 takes none")
        return OperandTypes([f.type], [f.type])

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        t = inst.types[-1]
        fmt = FMT[t]
        ftz = inst.has("ftz")
        upper = ftz and fmt is F64_FMT

        def one(a: ir.Value) -> ir.Value:
            b = L.b
            if ftz:
                a = flush(L, upper_word(L, a) if upper else a, fmt)
            x = widen(L, a, fmt)
            if inst.opcode == "rsqrt":
                y = b.fdiv(L.like(x, 1.0), L.intrinsic("sqrt", x.type, [x]))
            else:
                y = L.math(INTRINSIC[inst.opcode], x)
            if fmt is F64_FMT:
                r = b.bitcast(y, a.type)
            else:
                r = narrow(L, y, fmt, "rn")
            r = canonical_nan(L, r, fmt)
            if upper:
                r = upper_word(L, r)
            return flush(L, r, fmt) if ftz else r

        return [per_element(L, t, one, srcs)]
