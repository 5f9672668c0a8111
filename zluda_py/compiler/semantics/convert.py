"""cvt between every pair of integer and float types (f16 bf16 tf32 f32 f64 e4m3 e5m2 and their
packed pairs), with rounding, .ftz, .sat, .relu, .satfinite; and cvt.pack.sat.

* float -> int rounds with .rni/.rzi/.rmi/.rpi and always saturates; NaN gives 0, or the
  destination's sign bit alone (1 << (n - 1)) from .f64 or into a 64-bit integer, as PTX says.
* int -> float and float narrowing round with .rn/.rz/.rm/.rp (.rna for tf32), exactly
  (`rounding.round_pack`). Float widening is exact.
* NaN results, as NVIDIA hardware gives them (docs/semantics.md): conversions to or from .f64
  keep the sign and the top payload bits and set the quiet bit; bf16 -> f32 shifts the pattern
  (not quieted); cvt.f32.f32 and cvt.f64.f64 without modifiers move the bits; the rest give the
  destination's canonical NaN (tf32: 0x7fffe000), .ftz canonicalizing an f32 source first.
  .ftz does not flush the f32 source of cvt.f16.f32.
* int -> int truncates or extends by the source's signedness; .sat clamps to the destination.
"""

from __future__ import annotations

from llvmlite import ir

from zluda_py.compiler.lanes import F32, I64, Lanes
from zluda_py.compiler.semantics.base import (INT_TYPES, OperandTypes, Semantic, form, register, signed, types_of,
                                              unsupported, width)
from zluda_py.compiler.semantics.floating import canonical_nan, flush, relu, saturate
from zluda_py.compiler.semantics.rounding import (BF16_FMT, E4M3_FMT, E5M2_FMT, F16_FMT, F32_FMT, F64_FMT, TF32_FMT,
                                                  Fmt, is_nan_f, narrow, round_pack, widen)
from zluda_py.ptx import ast

SCALAR_FMT = {"f16": F16_FMT, "bf16": BF16_FMT, "f32": F32_FMT, "f64": F64_FMT, "tf32": TF32_FMT}
PAIR_FMT = {"f16x2": F16_FMT, "bf16x2": BF16_FMT, "e4m3x2": E4M3_FMT, "e5m2x2": E5M2_FMT}
FLOAT_RND = ("rn", "rz", "rm", "rp", "rna")
INT_RND = ("rni", "rzi", "rmi", "rpi")
CVT_INTS = INT_TYPES - {"b8", "b16", "b32", "b64"}
PACK_TYPES = ("u16", "s16", "u8", "s8", "u4", "s4", "u2", "s2")
PRECISION = {"f16": (5, 10), "bf16": (8, 7), "tf32": (8, 10), "f32": (8, 23), "f64": (11, 52)}


def _widening(src: str, dst: str) -> bool:
    """Every src value is exactly representable in dst."""
    (se, sm), (de, dm) = PRECISION[src], PRECISION[dst]
    return se <= de and sm <= dm


def int_to_float(L: Lanes, v: ir.Value, t: str, fmt: Fmt, mode: str) -> ir.Value:
    b = L.b
    x = L.resize(v, 64, signed(t))
    if signed(t):
        sign = b.icmp_signed("<", x, L.like(x, 0))
        mag = b.select(sign, b.sub(L.like(x, 0), x), x)
    else:
        sign, mag = L.like(x, 0, ir.IntType(1)), x
    r = round_pack(L, sign, mag, L.like(x, 0), fmt, mode)
    if fmt.shift:
        r = b.shl(r, L.like(r, fmt.shift))
    return L.resize(r, fmt.storage, False)


def float_to_int(L: Lanes, x: ir.Value, t: str, mode: str, nan: int = 0) -> ir.Value:
    """Round f32/f64 lanes to an integer (mode rni rzi rmi rpi), saturating; NaN -> `nan`."""
    name = {"rni": "roundeven", "rzi": "trunc", "rmi": "floor", "rpi": "ceil"}[mode]
    r = L.intrinsic(name, x.type, [x])
    out = L.retype(x, ir.IntType(width(t)))
    r = L.intrinsic("fptosi.sat" if signed(t) else "fptoui.sat", out, [r], overload=[out, x.type])
    return L.b.select(is_nan_f(L, x), L.like(r, nan), r) if nan else r


def round_integral(L: Lanes, x: ir.Value, mode: str) -> ir.Value:
    name = {"rni": "roundeven", "rzi": "trunc", "rmi": "floor", "rpi": "ceil"}[mode]
    return L.intrinsic(name, x.type, [x])


def _f_in(L: Lanes, v: ir.Value, fmt: Fmt, ftz: bool) -> ir.Value:
    """Source float bits -> f64 lanes (after the .ftz flush of f32 sources, which also makes a
    NaN canonical)."""
    if ftz and fmt is F32_FMT:
        v = canonical_nan(L, flush(L, v, fmt), fmt)
    return widen(L, v, fmt)


def _payload_nan(L: Lanes, x: ir.Value, fmt: Fmt) -> ir.Value:
    """The `fmt` NaN an f64 conversion makes of NaN lanes x (f64): x's sign and top payload
    bits, quieted."""
    b = L.b
    bits = b.bitcast(x, L.retype(x, I64))
    c = lambda v: L.like(bits, v)  # noqa: E731
    sign = b.shl(b.lshr(bits, c(63)), c(fmt.total - 1))
    payload = b.lshr(b.and_(bits, c((1 << 52) - 1)), c(52 - fmt.mbits))
    r = b.or_(b.or_(sign, payload), c(fmt.inf_bits | 1 << (fmt.mbits - 1)))
    return L.resize(r, fmt.storage, False)


def _f_out(L: Lanes, inst: ast.Instruction, x: ir.Value, fmt: Fmt, mode: str,
           nan: ir.Value | None = None) -> ir.Value:
    """f64 lanes -> destination bits with rounding and the output modifiers; a NaN becomes
    `nan` (default: the canonical NaN)."""
    b = L.b
    if fmt is F64_FMT:
        r = b.bitcast(x, L.retype(x, I64))
    else:
        r = narrow(L, x, fmt, mode, satfinite=inst.has("satfinite"))
    if nan is not None or fmt is F64_FMT:
        r = b.select(is_nan_f(L, x), L.like(r, fmt.nan) if nan is None else nan, r)
    if inst.has("ftz") and fmt is F32_FMT:
        r = flush(L, r, fmt)
    if inst.has("sat"):
        r = saturate(L, r, fmt)
    if inst.has("relu"):  # tf32 results sit in the top bits of an f32 pattern
        r = relu(L, r, F32_FMT if fmt.shift else fmt)
    return r


def _fits(src: str, dst: str) -> bool:
    """Every integer value of src is a value of dst (so .sat has nothing to clamp)."""
    ns, nd = width(src), width(dst)
    if signed(src) and not signed(dst):
        return False
    return ns < nd or (ns == nd and signed(src) == signed(dst))


def _check_scalar(inst: ast.Instruction, dst: str, src: str, rnd: str | None, f) -> None:
    """The modifier rules of cvt.dtype.atype, as PTX (and ptxas) define them.

    Integer rounding: float to int, or a float to the same type. Float rounding: int to float
    and float to a narrower float (required), bf16 widening (a no-op). .ftz needs an .f32 side;
    .sat needs an overflow to clamp and no .bf16 side; 8-bit integers do not convert with bf16.
    """
    kd, ks = ("int" if dst in CVT_INTS else "float"), ("int" if src in CVT_INTS else "float")
    if kd == ks == "int":
        need, allowed = None, (None,)
    elif kd == "int" or dst == src:
        need, allowed = (INT_RND if kd == "int" else None), (None, *INT_RND)
    elif ks == "int" or not (_widening(src, dst) or {dst, src} == {"f16", "bf16"}):
        need, allowed = FLOAT_RND[:4], FLOAT_RND[:4]
    elif {dst, src} == {"f16", "bf16"}:
        need, allowed = FLOAT_RND[:4], FLOAT_RND[:4]
    else:  # exact widening
        need, allowed = None, (None, *FLOAT_RND[:4]) if src == "bf16" else (None,)
    if rnd not in allowed or (need and rnd is None):
        raise unsupported(inst, f"rounding for .{dst}.{src}" + (": needs ." + " .".join(need) if need else ""))
    if f.has("ftz") and "f32" not in (dst, src):
        raise unsupported(inst, ".ftz needs an .f32 source or destination")
    if f.has("sat") and ("bf16" in (dst, src) or (kd == ks == "int" and _fits(src, dst))):
        raise unsupported(inst, f".sat on .{dst}.{src}")
    if "bf16" in (dst, src) and {dst, src} & {"u8", "s8"}:
        raise unsupported(inst, "8-bit integers do not convert with .bf16")


@register("any", "cvt")
class Cvt(Semantic):
    def operands(self, inst: ast.Instruction) -> OperandTypes:
        if inst.has("pack"):
            f = form(inst, {"pack", "sat"}, ntypes=len(types_of(inst)))
            if not f.has("sat") or f.types[1:2] != ("s32",) or f.types[0] not in PACK_TYPES:
                raise unsupported(inst, "cvt.pack forms: .sat.{u16,s16}.s32 and .sat.{u8,s8,u4,s4,u2,s2}.s32.b32")
            if f.types[0] not in ("u16", "s16"):
                if f.types[2:] != ("b32",):
                    raise unsupported(inst, f"cvt.pack.sat.{f.types[0]} takes .s32.b32")
                return OperandTypes(["b32"], ["s32", "s32", "b32"])
            if len(f.types) != 2:
                raise unsupported(inst, "operand type")
            return OperandTypes(["b32"], ["s32", "s32"])
        allowed = {*FLOAT_RND, *INT_RND, "ftz", "sat", "relu", "satfinite"}
        f = form(inst, allowed, ntypes=2)
        dst, src = f.types
        rnd = [m for m in inst.mods if m in FLOAT_RND or m in INT_RND]
        if len(rnd) > 1:
            raise unsupported(inst, "more than one rounding modifier")
        kinds = (self._kind(dst), self._kind(src))
        if None in kinds:
            raise unsupported(inst, "operand type")
        if kinds == ("int", "float") and not (rnd and rnd[0] in INT_RND):
            raise unsupported(inst, "float-to-integer conversion needs .rni .rzi .rmi or .rpi")
        if kinds[0] == "float" and rnd and rnd[0] in INT_RND and dst != src:
            raise unsupported(inst, "integer rounding to a float needs the same type")
        if (f.has("relu") or f.has("satfinite")) and not (src == "f32" and dst in ("f16", "bf16", "tf32")
                                                          or kinds[0] == "pair"):
            raise unsupported(inst, ".relu/.satfinite convert .f32 to .f16 .bf16 .tf32 or packed pairs")
        if dst == "tf32" and src != "f32":
            raise unsupported(inst, "tf32 converts from .f32")
        if kinds[0] != "pair" and dst != "tf32":
            _check_scalar(inst, dst, src, rnd[0] if rnd else None, f)
        if kinds == ("pair", "float"):
            if src != "f32":
                raise unsupported(inst, "packed conversions take .f32 pairs")
            if dst in ("e4m3x2", "e5m2x2") and not (f.has("satfinite") and f.has("rn")):
                raise unsupported(inst, "fp8 conversions need .rn.satfinite")
            if dst in ("f16x2", "bf16x2") and not f.has("rn", "rz"):
                raise unsupported(inst, "packed half conversions round with .rn or .rz")
            return OperandTypes([dst], ["f32", "f32"])
        if kinds == ("pair", "pair"):
            ok = {("e4m3x2", "f16x2"), ("e5m2x2", "f16x2"), ("f16x2", "e4m3x2"), ("f16x2", "e5m2x2")}
            if (dst, src) not in ok:
                raise unsupported(inst, "operand types")
            return OperandTypes([dst], [src])
        if "pair" in kinds:
            raise unsupported(inst, "operand types")
        return OperandTypes([dst], [src])

    @staticmethod
    def _kind(t: str) -> str | None:
        if t in CVT_INTS:
            return "int"
        if t in SCALAR_FMT:
            return "float"
        if t in PAIR_FMT:
            return "pair"
        return None

    def emit(self, L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        if inst.has("pack"):
            return [self._pack(L, inst, srcs)]
        dst, src = inst.types
        rnd = next((m for m in inst.mods if m in FLOAT_RND or m in INT_RND), None)
        kd, ks = self._kind(dst), self._kind(src)
        mode = rnd if rnd in FLOAT_RND else "rn"
        if kd == "pair":
            fmt = PAIR_FMT[dst]
            if ks == "float":  # cvt d, a, b: a to the upper half, b to the lower
                hi, lo = (_f_out(L, inst, _f_in(L, v, F32_FMT, inst.has("ftz")), fmt, mode) for v in srcs)
            else:
                sfmt = PAIR_FMT[src]
                parts = L.split2(srcs[0], sfmt.total)
                lo, hi = (_f_out(L, inst, widen(L, p, sfmt), fmt, mode) for p in parts)
            return [L.join2(lo, hi)]
        if kd == "int" and ks == "int":
            return [self._int_int(L, inst, srcs[0], dst, src)]
        if kd == "float" and ks == "int":
            r = int_to_float(L, srcs[0], src, SCALAR_FMT[dst], mode)
            return [saturate(L, r, SCALAR_FMT[dst]) if inst.has("sat") else r]
        sfmt, ftz = SCALAR_FMT[src], inst.has("ftz")
        if kd == "int":
            x = _f_in(L, srcs[0], sfmt, ftz)
            if sfmt is F32_FMT:  # the f32 intrinsics avoid an extra conversion
                x = L.b.fptrunc(x, L.retype(x, F32))
            wide_nan = src == "f64" or width(dst) == 64
            return [float_to_int(L, x, dst, rnd, 1 << (width(dst) - 1) if wide_nan else 0)]
        if dst == src and src in ("f32", "f64") and rnd is None and not (ftz or inst.has("sat")):
            return [srcs[0]]  # a move: even a signaling NaN passes unchanged
        dfmt = SCALAR_FMT[dst]
        x = _f_in(L, srcs[0], sfmt, ftz and dst != "f16")
        nan = None
        if "f64" in (dst, src):
            nan = _payload_nan(L, x, dfmt)
        elif (src, dst) == ("bf16", "f32") and not ftz:
            nan = L.b.shl(L.zext(srcs[0], 32), L.like(L.zext(srcs[0], 32), 16))
        elif dst == "tf32" and mode == "rna":
            # The pattern truncated (0x7f800001 -> 0x7f800000), one tf32 ulp less with .satfinite
            # (measured on NVIDIA H200, driver 580.159.04; .rn/.rz give the canonical NaN).
            nan = L.b.and_(srcs[0], L.like(srcs[0], ~0x1FFF & 0xFFFFFFFF))
            if inst.has("satfinite"):
                nan = L.b.sub(nan, L.like(nan, 0x2000))
        if rnd in INT_RND:
            x = round_integral(L, x, rnd)
        elif _widening(src, dst):
            mode = "rn"
        return [_f_out(L, inst, x, dfmt, mode, nan)]

    @staticmethod
    def _int_int(L: Lanes, inst: ast.Instruction, v: ir.Value, dst: str, src: str) -> ir.Value:
        b = L.b
        nd = width(dst)
        if not inst.has("sat"):
            return L.resize(v, nd, signed(src))
        x = L.resize(v, 65, signed(src))  # wide enough for every value of both types
        lo = -(1 << (nd - 1)) if signed(dst) else 0
        hi = (1 << (nd - 1)) - 1 if signed(dst) else (1 << nd) - 1
        x = b.select(b.icmp_signed("<", x, L.like(x, lo)), L.like(x, lo), x)
        x = b.select(b.icmp_signed(">", x, L.like(x, hi)), L.like(x, hi), x)
        return L.resize(x, nd, False)

    @staticmethod
    def _pack(L: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> ir.Value:
        b = L.b
        t = types_of(inst)[0]
        n = width(t)
        lo_v, hi_v = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if signed(t) else (0, (1 << n) - 1)

        def sat(v: ir.Value) -> ir.Value:
            v = b.select(b.icmp_signed("<", v, L.like(v, lo_v)), L.like(v, lo_v), v)
            v = b.select(b.icmp_signed(">", v, L.like(v, hi_v)), L.like(v, hi_v), v)
            return b.and_(v, L.like(v, (1 << n) - 1))

        a, c = sat(srcs[0]), sat(srcs[1])
        r = b.or_(b.shl(a, L.like(a, n)), c)
        if len(srcs) == 3:  # the rest of d comes from the low bits of the third operand
            r = b.or_(r, b.shl(srcs[2], L.like(r, 2 * n)))
        return r

