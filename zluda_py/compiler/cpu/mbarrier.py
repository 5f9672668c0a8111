"""mbarrier objects, cp.async.mbarrier.arrive and the bulk copies (cp.async.bulk) on the CPU target.

The object's meaning is `compiler/mbarrier.py`; here each operation is applied per active lane
in lane order with plain loads and stores: an mbarrier lives in shared memory, and a block's
warps run one at a time on one worker thread, so nothing else touches it meanwhile.

Waiting. test_wait/try_wait return at once (try_wait's suspend-time hint is not needed: the
result is the same as the manual's when the wait times out). Programs call them in a loop
until the phase completes, so a lane whose wait failed must let the others run: the lanes
that failed are *parked* (function.py): the dispatcher skips them while other lanes of the
warp can run, and when only parked lanes are left the warp returns to the block runner (a
yield: the other warps run, then it resumes and the parked lanes retry). A wait is thus a
scheduling point, and an arrival by another lane of the same warp or by another warp is seen
on the next try.

Asynchronous copies complete at once: cp.async.mbarrier.arrive's arrive-on happens when it
executes, cp.async.bulk copies when it executes and then performs its complete-tx, and the
bulk-group commit/wait instructions have nothing to wait for.
"""

from __future__ import annotations

from typing import Callable

from llvmlite import ir

from zluda_py.compiler import mbarrier as M
from zluda_py.compiler.mbarrier import bulk_form, bulk_spaces
from zluda_py.compiler.cpu import values as V
from zluda_py.compiler.cpu.abi import Ctx
from zluda_py.ptx import ast

I1, I32, I64, PTR = V.I1, V.I32, V.I64, V.PTR


class MbarrierMixin:
    # ------------------------------------------------------------------ per-lane read-modify-write
    def _mbar_lanes(self, inst: ast.Instruction, addr: ast.Addr, space: str, mask: ir.Value,
                    update: Callable[[ir.Value, ir.Value], ir.Value] | None) -> ir.Value:
        """Each active lane, lowest first: read its object, store `update(old, lane)` unless
        None; the old words as `<32 x i64>`."""
        b = self.b
        host = self.address(addr, space, 8, mask)
        if not isinstance(host.type, ir.VectorType):
            host = V.splat(b, host)
        if update is not None:  # progress, for the block runner's stall test
            self.set_ctx_i64(Ctx.MBAR_EPOCH, b.add(self.ctx_i64(Ctx.MBAR_EPOCH), ir.Constant(I64, 1)))
        result = V.entry_alloca(b, V.vec(I64))
        b.store(ir.Constant(V.vec(I64), None), result)
        for idx in V.each_active_lane(b, mask):
            p = b.inttoptr(b.extract_element(host, idx), PTR)
            old = b.load(p, typ=I64, align=8)
            if update is not None:
                b.store(update(old, idx), p, align=8)
            b.store(b.insert_element(b.load(result, typ=V.vec(I64)), old, idx), result)
        return b.load(result, typ=V.vec(I64))

    def _lane_u64(self, op: ast.Operand, ptype: str = "u32") -> ir.Value:
        return V.resize(self.b, self.read(op, ptype), 64, False)

    # ------------------------------------------------------------------ mbarrier.*
    def op_mbarrier(self, inst: ast.Instruction, mask: ir.Value) -> None:
        b = self.b
        what = M.operation(inst)
        space = M.space(inst)
        ops = inst.operands
        if what == "pending_count":
            state = self.read(ops[1], "b64")
            count = b.and_(b.lshr(state, V.splat_const(I64, M.PENDING)), V.splat_const(I64, M.FIELD_MASK))
            self.write(ops[0], count, "u32", mask)
            return
        if what == "init":
            count = self._lane_u64(ops[1])
            self._mbar_lanes(inst, ops[0], space, mask, lambda old, i: M.init(b, b.extract_element(count, i)))
            return
        if what == "inval":
            # the object is no longer one; its memory may be used for anything: nothing to do
            self.address(ops[0], space, 8, mask)  # still a bad address faults
            return
        if what in ("expect_tx", "complete_tx"):
            tx = self._lane_u64(ops[1])
            self._mbar_lanes(inst, ops[0], space, mask,
                             lambda old, i: M.tx_update(b, old, what, b.extract_element(tx, i)))
            return
        if what in ("arrive", "arrive_drop"):
            count, tx = (None if op is None else self._lane_u64(op) for op in M.arrive_operands(inst))

            def arrive(old: ir.Value, i: ir.Value) -> ir.Value:
                return M.arrive(b, inst, old, None if count is None else b.extract_element(count, i),
                                None if tx is None else b.extract_element(tx, i))

            # the state: the object before the instruction (an expect-tx changes neither the
            # phase nor the pending count, the two things a state is read for)
            self.write(ops[0], self._mbar_lanes(inst, ops[1], space, mask, arrive), "b64", mask)
            return
        if what in M.WAITS:
            if not self.is_kernel:  # a wait must be able to return to the block runner (see park)
                raise M.unsupported(inst, "mbarrier wait inside a .func that was not inlined")
            dst, addr, arg = ops[0], ops[1], ops[2]  # a suspend-time hint (ops[3]) changes nothing here
            words = self._mbar_lanes(inst, addr, space, mask, None)
            done = M.completed(b, inst, words, self._lane_u64(arg) if inst.has("parity") else self.read(arg, "b64"))
            self.write(dst, done, "pred", mask)
            self.park(b.and_(mask, b.not_(done)))
            return
        raise M.unsupported(inst)

    # ------------------------------------------------------------------ cp.async.mbarrier.arrive
    def cp_async_mbarrier_arrive(self, inst: ast.Instruction, mask: ir.Value) -> None:
        """The arrive-on that follows completion of the thread's earlier cp.async copies: those
        completed when they executed, so it happens now (M.cp_async_arrive)."""
        self._mbar_lanes(inst, inst.operands[0], M.space(inst), mask, lambda old, i: M.cp_async_arrive(self.b, inst, old))

    # ------------------------------------------------------------------ cp.async.bulk
    def cp_async_bulk(self, inst: ast.Instruction, mask: ir.Value) -> None:
        """Each active lane copies its `size` bytes now; with an mbarrier operand, it then
        performs complete-tx(size) on it (the copy's bytes were expected by an expect-tx)."""
        bulk_form(inst)
        mods = inst.mods
        if "commit_group" in mods or "wait_group" in mods or "prefetch" in mods:
            return  # every bulk copy has completed (reads and writes) when it executed
        b = self.b
        dst_space, src_space = bulk_spaces(inst)
        dst, src, size = inst.operands[:3]
        mbar = inst.operands[3] if inst.has("mbarrier::complete_tx::bytes") else None
        n = self._lane_u64(size)
        dst_host, _ = self._locate(dst, dst_space)
        src_host, _ = self._locate(src, src_space)
        dst_host = dst_host if isinstance(dst_host.type, ir.VectorType) else V.splat(b, dst_host)
        src_host = src_host if isinstance(src_host.type, ir.VectorType) else V.splat(b, src_host)
        self._check_aligned(dst_host, 16, mask)  # PTX: 16-byte aligned addresses, size a multiple of 16
        self._check_aligned(src_host, 16, mask)
        from zluda_py.compiler.cpu.memory import _bounds_function
        check = _bounds_function(self.mod)
        cache = self._bounds_cache()
        for idx in V.each_active_lane(b, mask):
            one = b.icmp_unsigned("==", V.LANE_IDS, V.splat(b, idx))
            bytes_ = b.extract_element(n, idx)
            for host in (src_host, dst_host):
                ok = b.call(check, [self.ctx, host, one, bytes_, cache])
                with b.if_then(b.not_(ok), likely=False):
                    self._illegal_address()
            V.intrinsic(b, "llvm.memmove.p0.p0.i64", ir.VoidType(),
                        [b.inttoptr(b.extract_element(dst_host, idx), PTR),
                         b.inttoptr(b.extract_element(src_host, idx), PTR), bytes_, ir.Constant(I1, 0)])
        if mbar is not None:
            self._mbar_lanes(inst, mbar, "shared", mask,
                             lambda old, i: M.tx_update(b, old, "complete_tx", b.extract_element(n, i)))
