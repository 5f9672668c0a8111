"""Warp collectives as vector operations: shfl, vote, match, redux, activemask, elect.

A warp is one vector, so warp-synchronous code needs no exchange buffers: a shuffle with
constant operands is a `shufflevector`, other shuffles index a spilled copy of the vector.
The lanes taking part are the executing lanes (the active mask) intersected with membermask.
"""

from __future__ import annotations

from llvmlite import ir

from zluda_py.compiler.cpu import values as V
from zluda_py.compiler.cpu.abi import WARP
from zluda_py.compiler.errors import unsupported
from zluda_py.ptx import ast

I1, I32, I64 = V.I1, V.I32, V.I64


def shfl_source(mode: str, lane: int, bval: int, cval: int) -> tuple[int, bool]:
    """(source lane, in range) for one lane, as the PTX ISA defines shfl.sync."""
    seg = (cval >> 8) & 0x1F
    clamp = cval & 0x1F
    max_lane = (lane & seg) | (clamp & ~seg & 0x1F)
    min_lane = lane & seg
    bval &= 0x1F
    if mode == "up":
        j = lane - bval
        ok = j >= max_lane
    elif mode == "down":
        j = lane + bval
        ok = j <= max_lane
    elif mode == "bfly":
        j = lane ^ bval
        ok = j <= max_lane
    else:
        j = min_lane | (bval & ~seg & 0x1F)
        ok = j <= max_lane
    return (j if ok else lane), ok


class WarpMixin:
    def member_mask(self, op: ast.Operand | None, mask: ir.Value) -> ir.Value:
        if op is None:
            return mask
        return self.b.and_(mask, V.bits_mask(self.b, self.b.extract_element(self.read(op, "b32"), ir.Constant(I32, 0))))

    def op_shfl(self, inst: ast.Instruction, mask: ir.Value) -> None:
        b = self.b
        mode = next(m for m in inst.mods if m in ("up", "down", "bfly", "idx"))
        dst, a, bop, cop = inst.operands[:4]
        d, p = (dst.dest, dst.pred) if isinstance(dst, ast.PredOut) else (dst, None)
        value = self.read(a, "b32")
        if isinstance(bop, ast.Imm) and isinstance(cop, ast.Imm):
            table = [shfl_source(mode, i, int(bop.value), int(cop.value)) for i in range(WARP)]
            out = b.shuffle_vector(value, ir.Constant(value.type, None), V.lane_consts(I32, [j for j, _ in table]))
            ok = V.lane_consts(I1, [int(k) for _, k in table])
        else:
            src, ok = self._shfl_lanes(mode, self.read(bop, "b32"), self.read(cop, "b32"))
            out = self.permute(value, src)
        self.write(d, out, "b32", mask)
        if p is not None:
            self.write(p, ok, "pred", mask)

    def _shfl_lanes(self, mode: str, bv: ir.Value, cv: ir.Value) -> tuple[ir.Value, ir.Value]:
        """Vector form of `shfl_source` for operands known only at run time."""
        b = self.b
        c = lambda x: V.splat_const(I32, x)  # noqa: E731
        lane = V.LANE_IDS
        seg = b.and_(b.lshr(cv, c(8)), c(0x1F))
        notseg = b.xor(seg, c(0x1F))
        max_lane = b.or_(b.and_(lane, seg), b.and_(b.and_(cv, c(0x1F)), notseg))
        bv = b.and_(bv, c(0x1F))
        if mode == "up":
            j = b.sub(lane, bv)
            ok = b.icmp_signed(">=", j, max_lane)
        else:
            j = {"down": lambda: b.add(lane, bv), "bfly": lambda: b.xor(lane, bv),
                 "idx": lambda: b.or_(b.and_(lane, seg), b.and_(bv, notseg))}[mode]()
            ok = b.icmp_signed("<=", j, max_lane)
        return b.select(ok, j, lane), ok

    def permute(self, value: ir.Value, src: ir.Value) -> ir.Value:
        """out[i] = value[src[i]]: an extract/insert chain, which LLVM folds to one shufflevector
        when the indices turn out constant (nvcc passes shuffle offsets in registers)."""
        b = self.b
        out = ir.Constant(value.type, ir.Undefined)
        for lane in range(WARP):
            idx = ir.Constant(I32, lane)
            out = b.insert_element(out, b.extract_element(value, b.extract_element(src, idx)), idx)
        return out

    def op_vote(self, inst: ast.Instruction, mask: ir.Value) -> None:
        b = self.b
        sync = inst.has("sync")
        dst, a = inst.operands[:2]
        member = self.member_mask(inst.operands[2] if sync and len(inst.operands) > 2 else None, mask)
        pred = self.read(a, "pred")
        mbits = V.mask_bits(b, member)
        tbits = V.mask_bits(b, b.and_(pred, member))
        if inst.has("ballot"):
            self.write(dst, V.splat(b, tbits), "b32", mask)
            return
        if inst.has("all"):
            r = b.icmp_unsigned("==", tbits, mbits)
        elif inst.has("any"):
            r = b.icmp_unsigned("!=", tbits, ir.Constant(I32, 0))
        elif inst.has("uni"):
            r = b.or_(b.icmp_unsigned("==", tbits, mbits), b.icmp_unsigned("==", tbits, ir.Constant(I32, 0)))
        else:
            raise unsupported(inst)
        self.write(dst, V.splat(b, r), "pred", mask)

    def op_activemask(self, inst: ast.Instruction, mask: ir.Value) -> None:
        self.write(inst.operands[0], V.splat(self.b, V.mask_bits(self.b, mask)), "b32", mask)

    def op_elect(self, inst: ast.Instruction, mask: ir.Value) -> None:
        b = self.b
        dst = inst.operands[0]
        d, p = (dst.dest, dst.pred) if isinstance(dst, ast.PredOut) else (dst, None)
        member = self.member_mask(inst.operands[1], mask)
        leader = V.intrinsic(b, "llvm.cttz.i32", I32, [V.mask_bits(b, member), ir.Constant(I1, 0)])
        self.write(d, V.splat(b, leader), "u32", mask)
        if p is not None:
            self.write(p, b.icmp_unsigned("==", V.LANE_IDS, V.splat(b, leader)), "pred", mask)

    def op_match(self, inst: ast.Instruction, mask: ir.Value) -> None:
        b = self.b
        t = inst.types[-1]
        dst, a, m = inst.operands[:3]
        d, p = (dst.dest, dst.pred) if isinstance(dst, ast.PredOut) else (dst, None)
        member = self.member_mask(m, mask)
        value = self.read(a, t)
        if inst.has("any"):
            out = ir.Constant(V.vec(I32), None)
            for lane in range(WARP):
                same = b.icmp_unsigned("==", value, V.splat(b, b.extract_element(value, ir.Constant(I32, lane))))
                out = b.insert_element(out, V.mask_bits(b, b.and_(same, member)), ir.Constant(I32, lane))
            self.write(d, out, "b32", mask)
            return
        leader = V.intrinsic(b, "llvm.cttz.i32", I32, [V.mask_bits(b, member), ir.Constant(I1, 0)])
        first = V.splat(b, b.extract_element(value, leader))
        differ = b.and_(b.icmp_unsigned("!=", value, first), member)
        equal = b.icmp_unsigned("==", V.mask_bits(b, differ), ir.Constant(I32, 0))
        self.write(d, b.select(V.splat(b, equal), V.splat(b, V.mask_bits(b, member)), V.splat_const(I32, 0)),
                   "b32", mask)
        if p is not None:
            self.write(p, V.splat(b, equal), "pred", mask)

    def op_redux(self, inst: ast.Instruction, mask: ir.Value) -> None:
        b = self.b
        t = inst.types[-1]
        if t not in ("u32", "s32", "b32"):
            raise unsupported(inst)
        op = next(m for m in inst.mods if m in ("add", "min", "max", "and", "or", "xor"))
        dst, a, m = inst.operands[:3]
        member = self.member_mask(m, mask)
        value = self.read(a, t)
        signed = t == "s32"
        identity = {"add": 0, "and": -1, "or": 0, "xor": 0,
                    "min": 0x7FFFFFFF if signed else -1, "max": -(1 << 31) if signed else 0}[op]
        value = b.select(member, value, V.splat_const(I32, identity & 0xFFFFFFFF))
        name = {"min": "smin" if signed else "umin", "max": "smax" if signed else "umax"}.get(op, op)
        self.write(dst, V.splat(b, V.reduce(b, name, value)), t, mask)

    def op_bar(self, inst: ast.Instruction, mask: ir.Value) -> None:
        """Only bar.warp.sync reaches here (block barriers end a basic block): a warp is in lockstep."""
        if not inst.has("warp"):
            raise unsupported(inst)

