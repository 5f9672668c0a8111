"""Warp collectives as vector operations: shfl, vote, match, redux, activemask, elect.

A warp is one vector, so warp-synchronous code needs no exchange buffers: a shuffle with
constant operands is a `shufflevector`, other shuffles index a spilled copy of the vector.
The lanes taking part are the executing lanes (the active mask) intersected with membermask.
"""

from __future__ import annotations

from typing import Callable

from llvmlite import ir

from zluda_py.compiler.cpu import values as V
from zluda_py.compiler.cpu.abi import WARP
from zluda_py.compiler.errors import unsupported
from zluda_py.compiler.warp_rules import (REDUX_F32_NONE, SHFL_MODES, redux_f32_fill, redux_f32_key, redux_f32_unkey,
                                          redux_form, redux_identity, redux_intrinsic, shfl_source, shfl_source_lanes)
from zluda_py.ptx import ast

I1, I32, I64 = V.I1, V.I32, V.I64


class WarpMixin:
    def constant_operand(self, inst: ast.Instruction, op: ast.Operand | None) -> ast.Operand | None:
        """`op`, or the immediate it always holds here (`affine.CONSTANT_OPERANDS`)."""
        if isinstance(op, ast.Reg) and op.name in self.regs:
            value = self.affine().constant(inst, op.name)
            if value is not None:
                return ast.Imm(value, pos=op.pos)
        return op

    def per_member_mask(self, inst: ast.Instruction, op: ast.Operand | None, mask: ir.Value,
                        body: Callable[[ir.Value], list[ir.Value]]) -> list[ir.Value]:
        """Run `body(member)` once per distinct membermask among the active lanes.

        Lanes of one warp may pass different masks (divergent groups, or 16-lane tiles that are
        converged at the instruction); each lane's result comes from the body run with its own
        mask (intersected with the active lanes). An immediate mask, one a register always
        holds, or none needs one run."""
        b = self.b
        op = self.constant_operand(inst, op)
        if op is None or isinstance(op, ast.Imm):
            member = mask if op is None else b.and_(mask, V.bits_mask(b, ir.Constant(I32, int(op.value) & 0xFFFFFFFF)))
            return body(member)
        masks = self.read(op, "b32")
        pending = V.entry_alloca(b, V.MASK)
        b.store(mask, pending)
        loop = b.append_basic_block("members")
        run = b.append_basic_block("members.run")
        done = b.append_basic_block("members.done")
        b.branch(loop)
        b.position_at_end(loop)
        left = b.load(pending, typ=V.MASK)
        b.cbranch(V.any_lane(b, left), run, done)
        b.position_at_end(run)
        lane = V.intrinsic(b, "llvm.cttz.i32", I32, [V.mask_bits(b, left), ir.Constant(I1, 1)])
        bits = b.extract_element(masks, lane)
        group = b.and_(left, b.icmp_unsigned("==", masks, V.splat(b, bits)))
        outs = body(b.and_(mask, V.bits_mask(b, bits)))
        accs = [V.entry_alloca(b, r.type) for r in outs]
        for acc, r in zip(accs, outs):
            b.store(b.select(group, r, b.load(acc, typ=r.type)), acc)
        b.store(b.and_(left, b.not_(group)), pending)
        b.branch(loop)
        b.position_at_end(done)
        return [b.load(acc, typ=r.type) for acc, r in zip(accs, outs)]

    def op_shfl(self, inst: ast.Instruction, mask: ir.Value) -> None:
        b = self.b
        mode = next(m for m in inst.mods if m in SHFL_MODES)
        dst, a, bop, cop = inst.operands[:4]
        d, p = (dst.dest, dst.pred) if isinstance(dst, ast.PredOut) else (dst, None)
        value = self.read(a, "b32")
        bop, cop = self.constant_operand(inst, bop), self.constant_operand(inst, cop)
        if isinstance(bop, ast.Imm) and isinstance(cop, ast.Imm):
            table = [shfl_source(mode, i, int(bop.value), int(cop.value)) for i in range(WARP)]
            out = b.shuffle_vector(value, ir.Constant(value.type, None), V.lane_consts(I32, [j for j, _ in table]))
            ok = V.lane_consts(I1, [int(k) for _, k in table])
        else:
            src, ok = shfl_source_lanes(self.lanes, mode, V.LANE_IDS, self.read(bop, "b32"), self.read(cop, "b32"))
            out = self.permute(value, src)
        self.write(d, out, "b32", mask)
        if p is not None:
            self.write(p, ok, "pred", mask)

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
        pred = self.read(a, "pred")
        if inst.has("ballot"):
            kind, t = "ballot", "b32"
        else:
            kind, t = next(k for k in ("all", "any", "uni") if inst.has(k)), "pred"

        def vote(member: ir.Value) -> list[ir.Value]:
            mbits = V.mask_bits(b, member)
            tbits = V.mask_bits(b, b.and_(pred, member))
            if kind == "ballot":
                return [V.splat(b, tbits)]
            none = b.icmp_unsigned("==", tbits, ir.Constant(I32, 0))
            every = b.icmp_unsigned("==", tbits, mbits)
            r = {"all": every, "any": b.not_(none), "uni": b.or_(every, none)}[kind]
            return [V.splat(b, r)]
        member_op = inst.operands[2] if sync and len(inst.operands) > 2 else None
        self.write(dst, self.per_member_mask(inst, member_op, mask, vote)[0], t, mask)

    def op_activemask(self, inst: ast.Instruction, mask: ir.Value) -> None:
        self.write(inst.operands[0], V.splat(self.b, V.mask_bits(self.b, mask)), "b32", mask)

    def op_elect(self, inst: ast.Instruction, mask: ir.Value) -> None:
        b = self.b
        dst = inst.operands[0]
        d, p = (dst.dest, dst.pred) if isinstance(dst, ast.PredOut) else (dst, None)

        def elect(member: ir.Value) -> list[ir.Value]:
            leader = V.intrinsic(b, "llvm.cttz.i32", I32, [V.mask_bits(b, member), ir.Constant(I1, 0)])
            return [V.splat(b, leader)]
        leader = self.per_member_mask(inst, inst.operands[1], mask, elect)[0]
        self.write(d, leader, "u32", mask)
        if p is not None:
            self.write(p, b.icmp_unsigned("==", V.LANE_IDS, leader), "pred", mask)

    def op_match(self, inst: ast.Instruction, mask: ir.Value) -> None:
        b = self.b
        t = inst.types[-1]
        dst, a, m = inst.operands[:3]
        d, p = (dst.dest, dst.pred) if isinstance(dst, ast.PredOut) else (dst, None)
        value = self.read(a, t)
        if inst.has("any"):
            def match_any(member: ir.Value) -> list[ir.Value]:
                out = ir.Constant(V.vec(I32), None)
                for lane in range(WARP):
                    same = b.icmp_unsigned("==", value, V.splat(b, b.extract_element(value, ir.Constant(I32, lane))))
                    out = b.insert_element(out, V.mask_bits(b, b.and_(same, member)), ir.Constant(I32, lane))
                return [out]
            self.write(d, self.per_member_mask(inst, m, mask, match_any)[0], "b32", mask)
            return

        def match_all(member: ir.Value) -> list[ir.Value]:
            leader = V.intrinsic(b, "llvm.cttz.i32", I32, [V.mask_bits(b, member), ir.Constant(I1, 0)])
            first = V.splat(b, b.extract_element(value, leader))
            differ = b.and_(b.icmp_unsigned("!=", value, first), member)
            equal = V.splat(b, b.icmp_unsigned("==", V.mask_bits(b, differ), ir.Constant(I32, 0)))
            return [b.select(equal, V.splat(b, V.mask_bits(b, member)), V.splat_const(I32, 0)), equal]
        out, equal = self.per_member_mask(inst, m, mask, match_all)
        self.write(d, out, "b32", mask)
        if p is not None:
            self.write(p, equal, "pred", mask)

    def op_redux(self, inst: ast.Instruction, mask: ir.Value) -> None:
        b = self.b
        t = inst.types[-1]
        dst, a, m = inst.operands[:3]
        if t == "f32":
            value = self.read(a, "b32")
            self.write(dst, self.per_member_mask(inst, m, mask, lambda member: [self.redux_f32(inst, value, member)])[0],
                       "b32", mask)
            return
        op, signed = redux_form(inst)
        value = self.read(a, t)
        identity = V.splat_const(I32, redux_identity(op, signed))
        name = redux_intrinsic(op, signed)

        def redux(member: ir.Value) -> list[ir.Value]:
            lanes = b.select(member, value, identity)
            return [V.splat(b, V.reduce(b, name, lanes))]
        self.write(dst, self.per_member_mask(inst, m, mask, redux)[0], t, mask)

    def redux_f32(self, inst: ast.Instruction, value: ir.Value, member: ir.Value) -> ir.Value:
        """redux.sync.min/max{.abs}{.NaN}.f32 on bit patterns: NaNs are left out (with .NaN any NaN
        gives the canonical NaN, as do no numbers at all) and +0 > -0."""
        b = self.b
        key, nan = redux_f32_key(self.lanes, value, inst.has("abs"))
        numbers = b.and_(member, b.not_(nan))
        smaller = inst.has("min")
        fill = V.splat_const(I32, redux_f32_fill(smaller))
        best = redux_f32_unkey(self.lanes, V.reduce(b, "smin" if smaller else "smax", b.select(numbers, key, fill)))
        none = b.not_(V.any_lane(b, numbers))
        if inst.has("NaN"):
            none = b.or_(none, V.any_lane(b, b.and_(member, nan)))
        return V.splat(b, b.select(none, ir.Constant(I32, REDUX_F32_NONE), best))

    def op_bar(self, inst: ast.Instruction, mask: ir.Value) -> None:
        """Only bar.warp.sync reaches here (block barriers end a basic block): a warp is in lockstep."""
        if not inst.has("warp"):
            raise unsupported(inst)

