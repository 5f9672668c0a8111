"""Lane values: the width-generic view of an IRBuilder that instruction semantics are written over.

W=32 gives `<32 x T>` vectors (CPU target: one warp is one vector), W=1 gives scalars
(AMDGPU target). Semantics never look at W directly; they build values through `Lanes`, and
constants are splatted to the shape of the value they combine with (`like`), so the same code
also works on the `<2W x half>` view of packed f16x2 registers.
"""

from __future__ import annotations

from llvmlite import ir

from zluda_py.compiler.vector_constants import splat_vector

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F16 = ir.HalfType()
F32 = ir.FloatType()
F64 = ir.DoubleType()

# PTX type name -> (bit width, kind) where kind is "u", "s", "b", "f" or "pred".
_FLOAT_TYPES = {"f16": F16, "f32": F32, "f64": F64}


def ptx_bits(ptx_type: str) -> int:
    """Width in bits of a PTX operand type (f16x2 -> 32, pred -> 1, e4m3x2 -> 16)."""
    if ptx_type == "pred" or ptx_type == "cc":
        return 1
    if ptx_type in ("f16x2", "bf16x2", "u16x2", "s16x2"):
        return 32
    if ptx_type in ("e4m3x2", "e5m2x2", "e2m3x2", "e3m2x2", "e2m1x2", "ue8m0x2"):
        return 16
    if ptx_type == "tf32":
        return 32
    if ptx_type in ("bf16",):
        return 16
    return int(ptx_type.lstrip("bsuf"))


def scalar_of(ty: ir.Type) -> ir.Type:
    return ty.element if isinstance(ty, ir.VectorType) else ty


def count_of(ty: ir.Type) -> int:
    """Number of elements of a lane value type (1 for a scalar)."""
    return ty.count if isinstance(ty, ir.VectorType) else 1


def mangle(ty: ir.Type) -> str:
    """LLVM overloaded-intrinsic suffix for a type: i32, f16, v32f32."""
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{mangle(ty.element)}"
    if isinstance(ty, ir.IntType):
        return f"i{ty.width}"
    return {"half": "f16", "float": "f32", "double": "f64"}[str(ty)]


class Lanes:
    """An IRBuilder plus a lane width; the vocabulary semantics use to build lane values."""

    def __init__(self, builder: ir.IRBuilder, width: int) -> None:
        self.b = builder
        self.width = width
        # True while the instruction being emitted has a result whose NaN bits no use can
        # observe (semantics/nan_payload.py): `canonical_nan` then leaves a NaN as computed
        self.nan_payload_free = False

    # ------------------------------------------------------------------ types and constants
    def ty(self, scalar_ty: ir.Type, count: int = 1) -> ir.Type:
        """The lane type for a scalar type; `count` elements per lane (2 for packed x2)."""
        n = self.width * count
        return scalar_ty if n == 1 else ir.VectorType(scalar_ty, n)

    def int_ty(self, bits: int) -> ir.Type:
        return self.ty(ir.IntType(bits))

    def const(self, scalar_ty: ir.Type, value: int | float, count: int = 1) -> ir.Constant:
        n = self.width * count
        return ir.Constant(scalar_ty, value) if n == 1 else splat_vector(ir.VectorType(scalar_ty, n), value)

    def like(self, v: ir.Value, value: int | float, scalar_ty: ir.Type | None = None) -> ir.Constant:
        """A constant with the shape (lane count) of `v`, of `scalar_ty` (default: v's own)."""
        return self.like_ty(self.retype(v, scalar_ty or scalar_of(v.type)), value)

    def retype(self, v: ir.Value, scalar_ty: ir.Type) -> ir.Type:
        """v's shape with another element type."""
        return ir.VectorType(scalar_ty, v.type.count) if isinstance(v.type, ir.VectorType) else scalar_ty

    # ------------------------------------------------------------------ intrinsics
    def intrinsic(self, name: str, ret_ty: ir.Type, args: list[ir.Value],
                  overload: list[ir.Type] | None = None) -> ir.Value:
        """Call `llvm.<name>` mangled on `overload` types (default: the return type).

        `ret_ty` is the full lane type of the result (use `self.retype`/`self.ty`).
        """
        module = self.b.module
        types = [ret_ty] if overload is None else overload
        full = f"llvm.{name}." + ".".join(mangle(t) for t in types)
        fn = module.globals.get(full)
        if fn is None:
            fn = ir.Function(module, ir.FunctionType(ret_ty, [a.type for a in args]), full)
        return self.b.call(fn, args)

    def math(self, name: str, x: ir.Value) -> ir.Value:
        """`llvm.<name>` (sin cos log2 exp2 tanh) of f64 lanes that hold f32-or-narrower values,
        to within a fraction of an f32 ulp. The CPU calls libm's f64 functions; a target without
        f64 transcendentals overrides this (amdgpu/mathlib.py)."""
        return self.intrinsic(name, x.type, [x])

    # ------------------------------------------------------------------ PTX value views
    def to_float(self, v: ir.Value, ptx_type: str) -> ir.Value:
        """View integer lane bits as floats: f32/f64/f16 directly, f16x2 as 2W halves."""
        if ptx_type == "f16x2":
            return self.b.bitcast(v, self.retype_count(v, F16, 2))
        return self.b.bitcast(v, self.retype(v, _FLOAT_TYPES[ptx_type]))

    def retype_count(self, v: ir.Value, scalar_ty: ir.Type, factor: int) -> ir.Type:
        n = count_of(v.type) * factor
        return scalar_ty if n == 1 else ir.VectorType(scalar_ty, n)

    def to_bits(self, v: ir.Value) -> ir.Value:
        """The inverse of `to_float`: floats (any shape) back to one integer per lane."""
        st = scalar_of(v.type)
        total = count_of(v.type) * {"half": 16, "float": 32, "double": 64}[str(st)]
        per_lane = total // self.width
        return self.b.bitcast(v, self.int_ty(per_lane))

    def split2(self, v: ir.Value, half_bits: int) -> tuple[ir.Value, ir.Value]:
        """Split each lane of a packed 2*half_bits integer into (low, high) halves."""
        t = self.retype(v, ir.IntType(half_bits))
        lo = self.b.trunc(v, t)
        hi = self.b.trunc(self.b.lshr(v, self.like(v, half_bits)), t)
        return lo, hi

    def join2(self, lo: ir.Value, hi: ir.Value) -> ir.Value:
        """Pack (low, high) halves into one integer of twice the width per lane."""
        bits = scalar_of(lo.type).width
        t = self.retype(lo, ir.IntType(2 * bits))
        return self.b.or_(self.b.zext(lo, t), self.b.shl(self.b.zext(hi, t), self.like_ty(t, bits)))

    def like_ty(self, ty: ir.Type, value: int | float) -> ir.Constant:
        return splat_vector(ty, value) if isinstance(ty, ir.VectorType) else ir.Constant(ty, value)

    # ------------------------------------------------------------------ small helpers
    def select(self, cond: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.select(cond, a, b)

    def zext(self, v: ir.Value, bits: int) -> ir.Value:
        return self.resize(v, bits, signed=False)

    def sext(self, v: ir.Value, bits: int) -> ir.Value:
        return self.resize(v, bits, signed=True)

    def resize(self, v: ir.Value, bits: int, signed: bool) -> ir.Value:
        """Integer width change: truncate, or extend by sign (signed) or zeros."""
        have = scalar_of(v.type).width
        t = self.retype(v, ir.IntType(bits))
        if bits == have:
            return v
        if bits < have:
            return self.b.trunc(v, t)
        return self.b.sext(v, t) if signed else self.b.zext(v, t)
