"""Warp collectives and barriers on AMDGPU, with exact 32-lane CUDA warps on wave64 too.

On wave64 GPUs (CDNA) one hardware wave carries two CUDA warps: hardware lanes 0-31 are one
warp and 32-63 the next (threads fill lanes in linear thread-id order). So the CUDA lane is
`hwlane & 31`, shuffles read from lane `(hwlane & 32) | source`, and ballots are the half of
the 64-bit ballot that holds the lane's warp. On wave32 (RDNA) a wave is a warp.
"""

from __future__ import annotations

from llvmlite import ir
from llvmlite.ir.instructions import StoreAtomicInstr

from zluda_py.compiler.amdgpu.ir_extras import ScopedCmpXchg, insert
from zluda_py.compiler.errors import unsupported
from zluda_py.compiler.memops import cas_loop
from zluda_py.compiler.warp_rules import (REDUX_F32_NONE, SHFL_MODES, redux_f32_fill, redux_f32_key, redux_f32_unkey,
                                          redux_form, redux_identity, redux_intrinsic, shfl_source_lanes)
from zluda_py.ptx import ast

I1, I32, I64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)
WARP = 32
LDS = 3
NAMED_BARRIERS = 16  # PTX barriers 0-15 per CTA
NAMED_BARRIER_WORDS = 4  # per named barrier: its word, then bar.red's count per phase mod 3
PHASE = 1 << 16  # a named barrier's word: arrivals below, the phase count above


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v & 0xFFFFFFFF)


def counted_barrier(inst: ast.Instruction) -> bool:
    """bar.arrive, or bar.sync/barrier.sync/bar.red with a thread count: the barriers lowered as
    LDS words; the others are the hardware barrier."""
    return inst.opcode in ("bar", "barrier") and not inst.has("warp") and \
        (inst.has("arrive") or len(inst.operands) > (3 if inst.has("red") else 1))


class WarpMixin:
    # ------------------------------------------------------------------ lanes
    def hw_lane(self) -> ir.Value:
        """The lane in the hardware wave; mbcnt.lo alone would be wrong for lanes 32-63."""
        lo = self.call_intrinsic("llvm.amdgcn.mbcnt.lo", I32, [_c(-1), _c(0)])
        if self.wave == 32:
            return lo
        return self.call_intrinsic("llvm.amdgcn.mbcnt.hi", I32, [_c(-1), lo])

    def lane(self) -> ir.Value:
        return self.hw_lane() if self.wave == 32 else self.b.and_(self.hw_lane(), _c(31))

    def lanemask(self, rel: str) -> ir.Value:
        b = self.b
        lane = b.zext(self.lane(), I64)
        one = ir.Constant(I64, 1)
        below = b.sub(b.shl(one, lane), one)  # lanes < lane, computed in 64 bits so lane 31 is defined
        upto = b.sub(b.shl(one, b.add(lane, one)), one)
        v = {"eq": lambda: b.shl(one, lane), "lt": lambda: below, "le": lambda: upto,
             "gt": lambda: b.not_(upto), "ge": lambda: b.not_(below)}[rel]()
        return b.trunc(v, I32)

    def ballot(self, pred: ir.Value) -> ir.Value:
        """The 32-bit ballot of `pred` over the lane's CUDA warp (inactive lanes give 0)."""
        b = self.b
        if self.wave == 32:
            return self.call_intrinsic("llvm.amdgcn.ballot.i32", I32, [pred])
        whole = self.call_intrinsic("llvm.amdgcn.ballot.i64", I64, [pred])
        half = b.zext(b.and_(self.hw_lane(), _c(32)), I64)
        return b.trunc(b.lshr(whole, half), I32)

    def active_mask(self) -> ir.Value:
        return self.ballot(ir.Constant(I1, 1))

    def fetch(self, src_lane: ir.Value, value: ir.Value) -> ir.Value:
        """`value` as held by CUDA lane `src_lane` (0..31) of this lane's warp (ds_bpermute)."""
        b = self.b
        hw = src_lane if self.wave == 32 else b.or_(b.and_(self.hw_lane(), _c(32)), src_lane)
        bits = value.type.width
        if bits == 64:
            lo, hi = self.lanes.split2(value, 32)
            return self.lanes.join2(self.fetch(src_lane, lo), self.fetch(src_lane, hi))
        wide = self.lanes.resize(value, 32, False)
        got = self.call_intrinsic("llvm.amdgcn.ds.bpermute", I32, [b.shl(hw, _c(2)), wide])
        return self.lanes.resize(got, bits, False)

    def member_mask(self, op: ast.Operand | None) -> ir.Value:
        active = self.active_mask()
        return active if op is None else self.b.and_(active, self.read(op, "b32"))

    def _over_lanes(self, init: ir.Value, step) -> ir.Value:
        """acc = step(acc, j) for j in 0..31, as a loop (uniform trip count)."""
        b = self.b
        pre = b.block
        head = b.append_basic_block("lanes")
        done = b.append_basic_block("lanes.done")
        b.branch(head)
        b.position_at_end(head)
        j = b.phi(I32)
        acc = b.phi(init.type)
        j.add_incoming(_c(0), pre)
        acc.add_incoming(init, pre)
        new = step(acc, j)
        nxt = b.add(j, _c(1))
        j.add_incoming(nxt, b.block)
        acc.add_incoming(new, b.block)
        b.cbranch(b.icmp_unsigned("<", nxt, _c(WARP)), head, done)
        b.position_at_end(done)
        return new

    def _bit(self, mask: ir.Value, j: ir.Value) -> ir.Value:
        return self.b.trunc(self.b.lshr(mask, j), I1)

    # ------------------------------------------------------------------ shfl / vote / ...
    def op_shfl(self, inst: ast.Instruction) -> None:
        mode = next(m for m in inst.mods if m in SHFL_MODES)
        dst, a, bop, cop = inst.operands[:4]
        d, p = (dst.dest, dst.pred) if isinstance(dst, ast.PredOut) else (dst, None)
        value = self.read(a, "b32")
        src, ok = shfl_source_lanes(self.lanes, mode, self.lane(), self.read(bop, "b32"), self.read(cop, "b32"))
        self.write(d, self.fetch(src, value), "b32")
        if p is not None:
            self.write(p, ok, "pred")

    def op_vote(self, inst: ast.Instruction) -> None:
        b = self.b
        dst, a = inst.operands[:2]
        member = self.member_mask(inst.operands[2] if inst.has("sync") and len(inst.operands) > 2 else None)
        votes = b.and_(self.ballot(self.read(a, "pred")), member)
        if inst.has("ballot"):
            self.write(dst, votes, "b32")
            return
        if inst.has("all"):
            r = b.icmp_unsigned("==", votes, member)
        elif inst.has("any"):
            r = b.icmp_unsigned("!=", votes, _c(0))
        elif inst.has("uni"):
            r = b.or_(b.icmp_unsigned("==", votes, member), b.icmp_unsigned("==", votes, _c(0)))
        else:
            raise unsupported(inst)
        self.write(dst, r, "pred")

    def op_activemask(self, inst: ast.Instruction) -> None:
        self.write(inst.operands[0], self.active_mask(), "b32")

    def op_elect(self, inst: ast.Instruction) -> None:
        b = self.b
        dst = inst.operands[0]
        d, p = (dst.dest, dst.pred) if isinstance(dst, ast.PredOut) else (dst, None)
        member = self.member_mask(inst.operands[1])
        leader = self.call_intrinsic("llvm.cttz.i32", I32, [member, ir.Constant(I1, 0)])
        self.write(d, leader, "u32")
        if p is not None:
            self.write(p, b.icmp_unsigned("==", self.lane(), leader), "pred")

    def op_match(self, inst: ast.Instruction) -> None:
        b = self.b
        t = inst.types[-1]
        dst, a, m = inst.operands[:3]
        d, p = (dst.dest, dst.pred) if isinstance(dst, ast.PredOut) else (dst, None)
        member = self.member_mask(m)
        value = self.read(a, t)
        if inst.has("any"):
            def step(acc, j):
                same = b.icmp_unsigned("==", self.fetch(j, value), value)
                bit = b.shl(b.zext(b.and_(same, self._bit(member, j)), I32), j)
                return b.or_(acc, bit)
            self.write(d, self._over_lanes(_c(0), step), "b32")
            return
        leader = self.call_intrinsic("llvm.cttz.i32", I32, [member, ir.Constant(I1, 0)])
        differ = b.and_(self.ballot(b.icmp_unsigned("!=", value, self.fetch(leader, value))), member)
        equal = b.icmp_unsigned("==", differ, _c(0))
        self.write(d, b.select(equal, member, _c(0)), "b32")
        if p is not None:
            self.write(p, equal, "pred")

    def op_redux(self, inst: ast.Instruction) -> None:
        b = self.b
        t = inst.types[-1]
        dst, a, m = inst.operands[:3]
        member = self.member_mask(m)
        if t == "f32":
            self.write(dst, self._redux_f32(inst, self.read(a, "b32"), member), "b32")
            return
        op, signed = redux_form(inst)
        value = self.read(a, t)
        identity = _c(redux_identity(op, signed))

        def combine(x, y):
            if op in ("min", "max"):
                return self.call_intrinsic(f"llvm.{redux_intrinsic(op, signed)}.i32", I32, [x, y])
            return {"add": b.add, "and": b.and_, "or": b.or_, "xor": b.xor}[op](x, y)

        def step(acc, j):
            v = b.select(self._bit(member, j), self.fetch(j, value), identity)
            return combine(acc, v)
        self.write(dst, self._over_lanes(identity, step), t)

    def _redux_f32(self, inst: ast.Instruction, value: ir.Value, member: ir.Value) -> ir.Value:
        """redux.sync.min/max{.abs}{.NaN}.f32 on bit patterns: NaNs are left out (with .NaN any NaN
        gives the canonical NaN, as do no numbers at all) and +0 > -0 (warp_rules' order keys)."""
        b = self.b
        key, nan = redux_f32_key(self.lanes, value, inst.has("abs"))
        smaller = inst.has("min")
        fill = ir.Constant(I32, redux_f32_fill(smaller))
        key = b.select(nan, fill, key)
        name = f"llvm.{'smin' if smaller else 'smax'}.i32"

        def step(acc, j):
            return self.call_intrinsic(name, I32, [acc, b.select(self._bit(member, j), self.fetch(j, key), fill)])
        best = redux_f32_unkey(self.lanes, self._over_lanes(fill, step))
        none = b.icmp_unsigned("==", b.and_(self.ballot(b.not_(nan)), member), _c(0))
        if inst.has("NaN"):
            none = b.or_(none, b.icmp_unsigned("!=", b.and_(self.ballot(nan), member), _c(0)))
        return b.select(none, _c(REDUX_F32_NONE), best)

    def op_bar(self, inst: ast.Instruction) -> None:
        """Only bar.warp.sync reaches here (block barriers end a basic block)."""
        if not inst.has("warp"):
            raise unsupported(inst)
        self.call_intrinsic("llvm.amdgcn.wave.barrier", ir.VoidType(), [])

    # ------------------------------------------------------------------ block barriers
    def s_barrier(self) -> None:
        self.b.fence("release", "workgroup")
        self.call_intrinsic("llvm.amdgcn.s.barrier", ir.VoidType(), [])
        self.b.fence("acquire", "workgroup")

    def lower_barrier(self, inst: ast.Instruction) -> None:
        """bar.sync / barrier.sync / bar.arrive / bar.red: the workgroup's one hardware barrier (also
        valid inside a .func: every thread of the workgroup reaches it through its own call);
        bar.arrive and barriers with a thread count are the named barriers' LDS words."""
        ops = list(inst.operands)
        red = inst.has("red")
        dst = ops.pop(0) if red else None
        pred = ops.pop() if red else None
        if counted_barrier(inst):
            self._named_barrier(inst, ops, dst, pred)
        elif red:
            self._bar_red(inst, dst, pred)
        else:
            self.s_barrier()

    def init_named_barriers(self) -> None:
        """Zero the named barriers' words once per block; the hardware barrier orders it before any use."""
        b = self.b
        with b.if_then(b.icmp_unsigned("==", self.flat_tid(), _c(0))):
            self.call_intrinsic("llvm.memset.p3.i64", ir.VoidType(),
                                [self.mod.named_barriers(), ir.Constant(ir.IntType(8), 0),
                                 ir.Constant(I64, 4 * NAMED_BARRIER_WORDS * NAMED_BARRIERS), ir.Constant(I1, 0)])
        self.s_barrier()

    def _named_barrier(self, inst: ast.Instruction, ops: list[ast.Operand], dst: ast.Operand | None,
                       pred: ast.Operand | None) -> None:
        """Barrier `ops[0]` expecting `ops[1]` threads, words [id*4, id*4+4) of the LDS array: the
        barrier word, then bar.red's counts of phases 0, 1 and 2 (the phase runs mod 3). Each
        thread adds one arrival with a compare-and-swap; the arrival that completes the count zeroes
        it and advances the phase in the same swap. bar.arrive leaves; the others wait (polling,
        with s_sleep so the waves still to arrive get the SIMD) until the phase moves on. Lanes of
        a wave share a program counter: a lane waiting for an arrival its own wave makes later on
        another path waits for ever."""
        if len(ops) < 2:
            raise unsupported(inst, "bar.arrive without a thread count")
        b = self.b
        base = b.mul(b.and_(self.read(ops[0], "u32"), _c(NAMED_BARRIERS - 1)), _c(NAMED_BARRIER_WORDS))
        cell = lambda k: b.gep(self.mod.named_barriers(), [b.add(base, k)], source_etype=I32)  # noqa: E731
        word = cell(_c(0))
        count = self.read(ops[1], "u32")
        first = b.load_atomic(word, "monotonic", 4, typ=I32)
        if pred is not None:
            # the phase cannot move on before this thread arrives: count phase P in word 1 + P, and
            # zero the next phase's count, whose last readers arrived at the previous phase
            phase = b.lshr(first, _c(16))
            following = cell(b.add(_c(1), b.urem(b.add(phase, _c(1)), _c(3))))
            insert(b, StoreAtomicInstr(b.block, _c(0), following, "monotonic", 4))  # builder needs typed ptrs
            total = cell(b.add(_c(1), phase))
            b.atomic_rmw("add", total, b.zext(self.read(pred, "pred"), I32), "monotonic")

        def arrive(cur: ir.Value) -> ir.Value:
            last = b.icmp_unsigned("==", b.add(b.and_(cur, _c(PHASE - 1)), _c(1)), count)
            nxt = b.add(b.and_(cur, _c(-PHASE)), _c(PHASE))
            return b.select(last, b.select(b.icmp_unsigned("==", nxt, _c(3 * PHASE)), _c(0), nxt), b.add(cur, _c(1)))

        def cas(expected: ir.Value, new: ir.Value) -> ir.Value:
            return insert(b, ScopedCmpXchg(b.block, word, expected, new, "release", "monotonic", "workgroup"))
        old = cas_loop(b, first, arrive, cas)
        if inst.has("arrive"):
            return
        phase = b.and_(old, _c(-PHASE))
        poll, done = b.append_basic_block("bar.wait"), b.append_basic_block("bar.done")
        b.cbranch(b.icmp_unsigned("==", b.and_(arrive(old), _c(-PHASE)), phase), poll, done)
        b.position_at_end(poll)
        self.call_intrinsic("llvm.amdgcn.s.sleep", ir.VoidType(), [_c(1)])
        now = b.and_(b.load_atomic(word, "monotonic", 4, typ=I32), _c(-PHASE))
        b.cbranch(b.icmp_unsigned("==", now, phase), poll, done)
        b.position_at_end(done)
        b.fence("acquire", "workgroup")
        if pred is not None:
            self._bar_red_result(inst, dst, b.load(total, typ=I32), count)

    def init_bar_red(self) -> None:
        """Zero the bar.red counter once per block, before the first barrier orders it."""
        b = self.b
        with b.if_then(b.icmp_unsigned("==", self.flat_tid(), _c(0))):
            b.store(_c(0), self.mod.bar_red_counter())

    def _bar_red(self, inst: ast.Instruction, dst: ast.Operand, pred: ast.Operand) -> None:
        """Count the threads whose predicate holds with an LDS atomic between barriers; the
        third barrier's reset by thread 0 completes before anyone passes the next bar.red."""
        b = self.b
        counter = self.mod.bar_red_counter()
        p = self.read(pred, "pred")
        self.s_barrier()
        b.atomic_rmw("add", counter, b.zext(p, I32), "monotonic")
        self.s_barrier()
        popc = b.load(counter, typ=I32)
        self.s_barrier()
        with b.if_then(b.icmp_unsigned("==", self.flat_tid(), _c(0))):
            b.store(_c(0), counter)
        self._bar_red_result(inst, dst, popc, b.mul(b.mul(self.ntid(0), self.ntid(1)), self.ntid(2)))

    def _bar_red_result(self, inst: ast.Instruction, dst: ast.Operand, popc: ir.Value, threads: ir.Value) -> None:
        """bar.red's result from the count of true predicates among the barrier's `threads`."""
        b = self.b
        if inst.has("popc"):
            self.write(dst, popc, "u32")
            return
        r = b.icmp_unsigned("==", popc, threads) if inst.has("and") else b.icmp_unsigned("!=", popc, _c(0))
        self.write(dst, r, "pred")

