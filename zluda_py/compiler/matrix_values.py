"""The arithmetic of the warp-level matrix products, shared by the targets (cpu/mma.py,
amdgpu/mma.py): operand elements (integers of their PTX type's width) widened to the types the
products and sums are computed in, one multiply-add step, and a D element narrowed back. Values
are one lane's (AMDGPU) or a vector of lanes (CPU); the types follow the operand's shape.

The order and rounding (PTX leaves them open for all but .f64) are cpu/mma.py's, which match an
NVIDIA H100: .f16/.bf16/.tf32 products are exact in f32 and each addition rounds to f32 (an
.f16 D rounds the sum once more); .f64 is one fma per k; .s8/.u8 sum exactly in 64 bits, then
wrap to 32 bits or, with .satfinite, clamp to the s32 range.
"""

from __future__ import annotations

from typing import Callable

from llvmlite import ir

from zluda_py.compiler.matrix import MmaForm
from zluda_py.compiler.vector_constants import splat_vector

I16, I32, I64 = ir.IntType(16), ir.IntType(32), ir.IntType(64)
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()


def accumulator(form: MmaForm) -> ir.Type:
    """The element type C and the sums are held in."""
    return {"f64": F64, "s8": I64, "u8": I64}.get(form.atype, F32)


def multiplicand(form: MmaForm) -> ir.Type:
    """The element type A and B are multiplied in (integer products are exact in 32 bits)."""
    acc = accumulator(form)
    return I32 if isinstance(acc, ir.IntType) else acc


def _like(value: ir.Value, t: ir.Type) -> ir.Type:
    """`t`, or a vector of `t` as wide as `value`'s vector."""
    return ir.VectorType(t, value.type.count) if isinstance(value.type, ir.VectorType) else t


def _const(value: ir.Value, t: ir.Type, v: int) -> ir.Constant:
    shaped = _like(value, t)
    return splat_vector(shaped, v) if isinstance(shaped, ir.VectorType) else ir.Constant(t, v)


def widen(b: ir.IRBuilder, bits: ir.Value, etype: str, to: ir.Type) -> ir.Value:
    """Elements of PTX type `etype` (integers of its width) as `to` (accumulator/multiplicand)."""
    if etype == "f16":
        return b.fpext(b.bitcast(bits, _like(bits, F16)), _like(bits, F32))
    if etype == "bf16":
        return b.bitcast(b.shl(b.zext(bits, _like(bits, I32)), _const(bits, I32, 16)), _like(bits, F32))
    if etype == "tf32":  # the register's low 13 bits are ignored
        return b.bitcast(b.and_(bits, _const(bits, I32, 0xFFFFE000)), _like(bits, F32))
    if etype == "f32":
        return b.bitcast(bits, _like(bits, F32))
    if etype == "f64":
        return b.bitcast(bits, _like(bits, F64))
    return (b.zext if etype == "u8" else b.sext)(bits, _like(bits, to))


def multiply_add(b: ir.IRBuilder, total: ir.Value, x: ir.Value, y: ir.Value,
                 fma: Callable[[ir.Value, ir.Value, ir.Value], ir.Value]) -> ir.Value:
    """total + x * y in the accumulation type (`fma(x, y, total)`: the target's llvm.fma)."""
    element = total.type.element if isinstance(total.type, ir.VectorType) else total.type
    if element == F64:
        return fma(x, y, total)
    if isinstance(element, ir.IntType):
        return b.add(total, b.sext(b.mul(x, y), total.type))
    return b.fadd(total, b.fmul(x, y))


def narrow(b: ir.IRBuilder, value: ir.Value, form: MmaForm) -> ir.Value:
    """A D element from the accumulation type to an integer of D's element width."""
    if form.dtype == "f16":
        return b.bitcast(b.fptrunc(value, _like(value, F16)), _like(value, I16))
    if form.dtype == "f32":
        return b.bitcast(value, _like(value, I32))
    if form.dtype == "f64":
        return b.bitcast(value, _like(value, I64))
    if form.satfinite:
        lo, hi = _const(value, I64, -(1 << 31)), _const(value, I64, (1 << 31) - 1)
        value = b.select(b.icmp_signed("<", value, lo), lo, b.select(b.icmp_signed(">", value, hi), hi, value))
    return b.trunc(value, _like(value, I32))
