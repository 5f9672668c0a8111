"""Calls, returns, barriers and the CUDA system calls (vprintf, malloc, free, __assertfail, and the
device runtime's `__cudaCDP2*` calls of CUDA Dynamic Parallelism: device_launch.py).

A `.func` runs for the calling warp under the caller's mask. Parameters travel in per-lane
buffers (lane i's copy at `buf + i*size`), so `st.param`/`ld.param` are ordinary lane-wise
accesses and `.reg` parameters are a plain vector store/load. The callee's `.local` frame is
allocated at the caller's stack pointer plus the caller's frame size, per lane window, so
recursion works up to the per-thread stack size.
"""

from __future__ import annotations

from llvmlite import ir

from zluda_py.compiler import cfg
from zluda_py.compiler.cpu import values as V
from zluda_py.compiler.cpu.abi import DONE, FAULT_BRKPT, FRAME_HEADER, WARP, BarSlot, Ctx, Frame
from zluda_py.compiler.cpu.frame_sync import written_since_resume
from zluda_py.compiler.cpu.remat import Remat
from zluda_py.compiler.device_runtime import LAUNCH_FUNCTIONS as DEVICE_RUNTIME
from zluda_py.compiler.errors import CUDA_ERROR_ASSERT, CUDA_ERROR_LAUNCH_FAILED, UnsupportedError, unsupported
from zluda_py.compiler.lanes import ptx_bits
from zluda_py.ptx import ast

I1, I32, I64, PTR = V.I1, V.I32, V.I64, V.PTR

# Host services reached through the one imported callback `zluda_host(kind, ctx, a, b, c, d, e)`.
HOST_VPRINTF = 1
HOST_ASSERT = 2
HOST_MALLOC = 4  # device-side malloc/free: (un)register the block as valid device memory
HOST_FREE = 5
HOST_DEVICE_RUNTIME = 16  # + the index of a device_runtime.LAUNCH_FUNCTIONS name (CUDA Dynamic Parallelism)
SYSCALLS = {"vprintf", "malloc", "free", "__assertfail", *DEVICE_RUNTIME}


class CallMixin:
    # ------------------------------------------------------------------ call
    def op_call(self, inst: ast.Instruction, mask: ir.Value) -> None:
        ops = list(inst.operands)
        rets: list[ast.Operand] = []
        if ops and isinstance(ops[0], ast.ArgList):
            rets = ops.pop(0).args
        target = ops.pop(0)
        args = ops.pop(0).args if ops and isinstance(ops[0], ast.ArgList) else []
        if isinstance(target, ast.Sym) and target.name in SYSCALLS and target.name not in self.mod.defined:
            self.syscall(inst, target.name, rets, args, mask)
            return
        if isinstance(target, ast.Sym) and self.symbol(target.name, inst.pos).kind == "func":
            callee = self.mod.functions[target.name]
            self.callees.add(target.name)
            buffers = self._call_buffers(callee, rets, args, mask)
            exited = self.b.call(self.mod.llfns[target.name],
                                 [self.ctx, self.warp, self.b.add(self.sp, ir.Constant(I64, self.frame_size)), mask, *buffers])
        else:
            proto = self._prototype(ops[0] if ops else None)
            if proto is None:
                raise unsupported(inst, "indirect call without a .callprototype")
            buffers = self._call_buffers(proto, rets, args, mask)
            exited = self._indirect_call(self.read(target, "u64"), len(buffers), buffers, mask)
        self._after_call(exited, rets, mask)

    def _prototype(self, op: ast.Operand | None) -> ast.Function | None:
        """The signature an indirect call names: a .callprototype label (or .calltargets list)."""
        if not isinstance(op, ast.Sym):
            return None
        d = self.body.table("callprototype", op.name)
        if d is not None:
            return ast.Function(op.name, "func", returns=list(d.args[1]), params=list(d.args[2]))
        d = self.body.table("calltargets", op.name)
        if d is not None and len(d.args) > 1:
            return self.mod.functions.get(d.args[1].name)
        return None

    def _call_buffers(self, callee: ast.Function, rets, args, mask) -> list[ir.Value]:
        """Pointers to per-lane buffers for the callee's returns then parameters."""
        b = self.b
        out = []
        self._copy_back: list[tuple[ast.Operand, ir.Value, str]] = []
        formals = [*callee.returns, *callee.params]
        actuals = [*rets, *args]
        if len(formals) != len(actuals):
            raise UnsupportedError(f"call to {callee.name} with {len(actuals)} arguments for {len(formals)}")
        for i, (formal, actual) in enumerate(zip(formals, actuals)):
            if isinstance(actual, ast.Sym) and self.symbols.get(actual.name) and self.symbols[actual.name].kind == "lparam":
                out.append(self.symbols[actual.name].ptr)
                continue
            bits = ptx_bits(formal.type)
            t = V.vec(ir.IntType(bits))
            buf = V.entry_alloca(b, t)
            if i >= len(rets):
                b.store(self.read(actual, formal.type), buf)
            else:
                self._copy_back.append((actual, buf, formal.type))
            out.append(buf)
        return out

    def _after_call(self, exited: ir.Value, rets, mask: ir.Value) -> None:
        b = self.b
        for actual, buf, t in self._copy_back:
            self.write(actual, b.load(buf, typ=V.vec(ir.IntType(ptx_bits(t)))), t, mask)
        self.check_status()
        gone = V.bits_mask(b, exited)
        b.store(b.or_(b.load(self.exited, typ=I32), exited), self.exited)
        self.goto(gone, None)
        self.cur_mask = b.and_(self.cur_mask, b.not_(gone))

    def check_status(self) -> None:
        """Leave at once when a callee faulted."""
        b = self.b
        status = self.ctx_i64(Ctx.STATUS)
        with b.if_then(b.icmp_unsigned("!=", status, ir.Constant(I64, 0)), likely=False):
            b.ret(b.neg(b.trunc(status, I32)) if self.is_kernel else ir.Constant(I32, 0))

    def _indirect_call(self, fptrs: ir.Value, nbuf: int, buffers, mask: ir.Value) -> ir.Value:
        """Call each distinct target once, for the lanes that hold it, lowest lane first."""
        b = self.b
        fnty = ir.FunctionType(I32, [PTR, I32, I64, V.MASK, *([PTR] * nbuf)])
        pending = V.entry_alloca(b, V.MASK)
        b.store(mask, pending)
        exited = V.entry_alloca(b, I32)
        b.store(ir.Constant(I32, 0), exited)
        loop = b.append_basic_block("icall")
        done = b.append_basic_block("icall.done")
        b.branch(loop)
        b.position_at_end(loop)
        left = b.load(pending, typ=V.MASK)
        with b.if_then(b.not_(V.any_lane(b, left))):
            b.branch(done)
        lane = V.intrinsic(b, "llvm.cttz.i32", I32, [V.mask_bits(b, left), ir.Constant(I1, 1)])
        f = b.extract_element(fptrs, lane)
        sub = b.and_(left, b.icmp_unsigned("==", fptrs, V.splat(b, f)))
        callee = b.inttoptr(f, fnty.as_pointer())  # llvmlite reads the signature from the pointee
        r = b.call(callee, [self.ctx, self.warp, b.add(self.sp, ir.Constant(I64, self.frame_size)), sub, *buffers])
        b.store(b.or_(b.load(exited, typ=I32), r), exited)
        b.store(b.and_(left, b.not_(sub)), pending)
        b.branch(loop)
        b.position_at_end(done)
        return b.load(exited, typ=I32)

    # ------------------------------------------------------------------ system calls
    def syscall(self, inst: ast.Instruction, name: str, rets, args, mask: ir.Value) -> None:
        b = self.b
        vals = []
        for a in args:
            if isinstance(a, ast.Sym) and a.name in self.symbols and self.symbols[a.name].kind == "lparam":
                sym = self.symbols[a.name]
                if sym.size > 8:  # an aggregate (a dim3): the host reads each lane's copy
                    vals.append(self.lane_param_address(sym, 0))
                    continue
                bits = 8 * sym.size if sym.size in (4, 8) else 64
                vals.append(b.load(V.typed(b, sym.ptr, V.vec(ir.IntType(bits))), typ=V.vec(ir.IntType(bits)), align=16))
            else:
                vals.append(self.read(a, "u64"))
        vals = [V.resize(b, v, 64, False) for v in vals]
        result = V.entry_alloca(b, V.vec(I64))
        b.store(V.splat_const(I64, 0), result)
        host = self.mod.host_fn()
        libc_malloc, libc_free = self.mod.libc("malloc", I64, [I64]), self.mod.libc("free", ir.VoidType(), [I64])
        for idx in V.each_active_lane(b, mask):  # one call per active lane, in lane order
            a = [b.extract_element(v, idx) for v in vals]
            if name == "vprintf":
                who = b.zext(b.add(b.mul(self.warp, ir.Constant(I32, WARP)), idx), I64)
                r = b.call(host, [ir.Constant(I32, HOST_VPRINTF), self.ctx, a[0], a[1], who,
                                  ir.Constant(I64, 0), ir.Constant(I64, 0)])
            elif name == "malloc":
                r = b.call(libc_malloc, [a[0]])
                b.call(host, [ir.Constant(I32, HOST_MALLOC), self.ctx, r, a[0], *[ir.Constant(I64, 0)] * 3])
            elif name == "free":
                b.call(host, [ir.Constant(I32, HOST_FREE), self.ctx, a[0], *[ir.Constant(I64, 0)] * 4])
                b.call(libc_free, [a[0]])
                r = ir.Constant(I64, 0)
            elif name in DEVICE_RUNTIME:  # fewer than five arguments: the thread's index in its block last
                self.mod.device_runtime_users.add(self.fn.name)
                who = b.zext(b.add(b.mul(self.warp, ir.Constant(I32, WARP)), idx), I64)
                a = a if len(a) == 5 else (a + [ir.Constant(I64, 0)] * 4)[:4] + [who]
                r = b.call(host, [ir.Constant(I32, HOST_DEVICE_RUNTIME + DEVICE_RUNTIME.index(name)), self.ctx, *a])
            else:  # __assertfail(message, file, line, function, charSize)
                who = b.zext(b.add(b.mul(self.warp, ir.Constant(I32, WARP)), idx), I64)
                b.call(host, [ir.Constant(I32, HOST_ASSERT), self.ctx, a[0], a[1], a[2], a[3], who])
                r = ir.Constant(I64, 0)
            b.store(b.insert_element(b.load(result, typ=V.vec(I64)), r, idx), result)
        if name == "__assertfail":
            with b.if_then(V.any_lane(b, mask)):
                self.fault(CUDA_ERROR_ASSERT, mask)
        for r in rets:
            value = b.load(result, typ=V.vec(I64))
            if isinstance(r, ast.Sym) and r.name in self.symbols and self.symbols[r.name].kind == "lparam":
                sym = self.symbols[r.name]
                value = V.resize(b, value, 8 * sym.size, False)
                b.store(value, V.typed(b, sym.ptr, value.type), align=16)
            else:
                self.write(r, value, "u64", mask)

    def op_brkpt(self, inst: ast.Instruction, mask: ir.Value) -> None:
        """brkpt suspends the thread for a debugger; with none attached the launch fails (719)."""
        with self.b.if_then(V.any_lane(self.b, mask)):
            self.fault(CUDA_ERROR_LAUNCH_FAILED, mask, ir.Constant(I64, FAULT_BRKPT))

    # ------------------------------------------------------------------ barriers
    def lockstep_barriers(self) -> bool:
        """Every block barrier of this kernel is `bar.sync`/`barrier.sync` of one immediate id,
        without a thread count, and no lane parks at an mbarrier wait. Such a barrier opens once
        every warp that has not finished has reached it, so the block runner just runs each
        unfinished warp once per round, in warp order, and keeps no barrier state
        (`block_runner._lockstep_rounds`); the general runner's schedule is the same."""
        if getattr(self, "_lockstep", None) is None:
            ids: set[int] = set()
            simple = not self.has_waits
            for inst in (i for blk in self.body.blocks for i in blk.insts if cfg.is_block_barrier(i)):
                ops = inst.operands
                if inst.has("arrive") or inst.has("red") or len(ops) > 1 or (ops and not isinstance(ops[0], ast.Imm)):
                    simple = False
                ids.update(op.value for op in ops[:1] if isinstance(op, ast.Imm))
            self._lockstep = simple and len(ids) <= 1
        return self._lockstep

    def lower_barrier(self, inst: ast.Instruction, lanes: ir.Value, next_block: int | None) -> None:
        """bar/barrier: the arriving lanes continue at the next block once the barrier opens."""
        b = self.b
        if not self.is_kernel:
            # compiler.inline inlines every direct call to such a .func (or refuses the module)
            raise unsupported(inst, "barrier inside a .func that was not inlined")
        ops = list(inst.operands)
        red = inst.has("red")
        dst = ops.pop(0) if red else None
        pred = ops.pop() if red else None
        bar_id = b.extract_element(self.read(ops[0], "u32"), ir.Constant(I32, 0)) if ops else ir.Constant(I32, 0)
        count = b.extract_element(self.read(ops[1], "u32"), ir.Constant(I32, 0)) if len(ops) > 1 else ir.Constant(I32, 0)
        self.goto(lanes, next_block)
        pcv = b.load(self.pc, typ=V.vec(I32), align=16)
        if not self.lockstep_barriers():  # the general runner counts arrivals
            live = V.popcount(b, V.mask_bits(b, b.icmp_unsigned("!=", pcv, V.splat_const(I32, DONE))))
            slot = b.gep(b.inttoptr(self.ctx_i64(Ctx.BARRIERS), PTR),
                         [b.mul(b.zext(bar_id, I64), ir.Constant(I64, 8 * 8))], source_etype=V.I8)
            field = lambda f: b.gep(slot, [ir.Constant(I64, 8 * f)], source_etype=V.I8)  # noqa: E731
            b.store(b.add(b.load(field(BarSlot.ARRIVED), typ=I64), b.zext(live, I64)), field(BarSlot.ARRIVED))
            b.store(b.zext(count, I64), field(BarSlot.EXPECTED))
            if pred is not None:
                p = b.and_(self.read(pred, "pred"), lanes)
                b.store(b.add(b.load(field(BarSlot.ACC), typ=I64), b.zext(V.popcount(b, V.mask_bits(b, p)), I64)),
                        field(BarSlot.ACC))
            self._set_frame_i32(Frame.LIVE, live)
        if inst.has("arrive"):  # the block runner tests the barrier a warp stops at, and these
            bit = b.shl(ir.Constant(I64, 1), b.zext(b.and_(bar_id, ir.Constant(I32, 63)), I64))
            self.set_ctx_i64(Ctx.BAR_TOUCHED, b.or_(self.ctx_i64(Ctx.BAR_TOUCHED), bit))
            b.branch(self.dispatch_block)
            return
        if not self.lockstep_barriers():  # the lockstep runner has one barrier and no bar.red
            self._set_frame_i32(Frame.BAR_ID, bar_id)
            self._set_frame_i32(Frame.BAR_MASK, V.mask_bits(b, lanes))
        live = self.live[next_block] if next_block is not None else set()
        unsaved = self._unsaved(next_block)
        # In a converged clone an unguarded barrier sends all 32 lanes to next_block: its own resume
        # point reloads what is live there and enters that block's clone, with no pc or lane mask
        # to save, test or rebuild.
        whole = self.cur_mask is V.ALL and inst.guard is None and next_block is not None
        site = self._resume_site(inst, dst, live, next_block, whole)
        if whole:
            self.spill(live & unsaved, pc=False, cc="%cc" in unsaved)
            self.stop_warp(ir.Constant(I32, site), site)
            return
        # A converged warp (every live lane continues at next_block) saves only what is live there
        # and may have changed since it resumed (frame_sync), and the lanes at next_block for its pc.
        at_next = b.icmp_unsigned("==", pcv, V.splat_const(I32, next_block if next_block is not None else DONE))
        done = b.icmp_unsigned("==", pcv, V.splat_const(I32, DONE))
        converged = b.icmp_unsigned("==", V.mask_bits(b, b.or_(at_next, done)), ir.Constant(I32, -1))
        self._set_frame_i32(Frame.SPILL_ALL, b.zext(b.not_(converged), I32))
        some = self.llfn.append_basic_block(f"spill{site}")
        b.cbranch(converged, some, self._spill_all_block())
        self._spill_all_site.add_incoming(ir.Constant(I32, site), b.block)
        b.position_at_end(some)
        self._set_frame_i32(Frame.AT_NEXT, V.mask_bits(b, at_next))
        self.spill(live & unsaved, pc=False, cc="%cc" in unsaved)
        self.stop_warp(ir.Constant(I32, site))

    def _resume_site(self, inst: ast.Instruction, dst: ast.Operand | None, live: set[str], next_block: int | None,
                     whole: bool) -> int:
        """The resume point of barrier `inst`: one for its divergent block and the converged clones
        that may split there, one for a whole warp (`lower_barrier`)."""
        for site, at, *_, is_whole in self.resume_sites:
            if at is inst and is_whole == whole:
                return site
        site = len(self.resume_sites) + 1
        self.resume_sites.append((site, inst, dst, live, next_block, whole))
        return site

    def _unsaved(self, next_block: int | None) -> set[str]:
        """Registers that may differ from their frame slots at the barrier before `next_block`
        (frame_sync; all of them in functions whose lanes yield at mbarrier waits, which resume
        at the dispatcher)."""
        if self.has_waits or next_block is None:
            return set(self.regs)
        if getattr(self, "_dirty", None) is None:
            self._dirty = written_since_resume(self.body, set(self.regs))
        return self._dirty.get(next_block, set(self.regs))

    def _spill_all_block(self) -> ir.Block:
        """One shared block that saves the registers a divergent warp may read later, and returns
        the site id (code size). Lanes resume at block starts, so that is every register live
        into some block; block-local temporaries are dead there."""
        if getattr(self, "_spill_all", None) is None:
            b = self.b
            here = b.block
            self._spill_all = self.llfn.append_basic_block("spill.all")
            b.position_at_end(self._spill_all)
            self._spill_all_site = b.phi(I32)
            self.spill(self.carried)
            self.stop_warp(self._spill_all_site)
            b.position_at_end(here)
        return self._spill_all

    def frame_layout(self, live: set[str] | None = None, pc: bool = True,
                     cc: bool = True) -> list[tuple[ir.Value, ir.Type, int]]:
        """(slot, type, frame offset) of the registers saved across a barrier: the pc and the carry
        flag (unless not `pc`, `cc`) and `live` (None: all). Every register has a fixed place in the frame."""
        self.frame_bytes = self.frame_end
        if self.in_frame:  # the registers live in the frame already
            return []
        out = []
        for name, (slot, bits) in [("pc", (self.pc, 32)), *self.regs.items()]:
            if live is None or name in live or (name == "pc" and pc) or (name == "%cc" and cc):
                t = ir.IntType(bits) if name in self.uniform_regs else V.vec(ir.IntType(bits))
                out.append((slot, t, self.frame_offsets[name]))
        return out

    def spill(self, live: set[str] | None, pc: bool = True, cc: bool = True) -> None:
        b = self.b
        for slot, t, off in self.frame_layout(live, pc, cc):
            b.store(b.load(slot, typ=t, align=16), b.gep(self.frame, [ir.Constant(I64, off)], source_etype=V.I8),
                    align=16)

    def reload(self, live: set[str] | None, pc: bool = True) -> None:
        b = self.b
        for slot, t, off in self.frame_layout(live, pc):
            b.store(b.load(b.gep(self.frame, [ir.Constant(I64, off)], source_etype=V.I8), typ=t, align=16), slot,
                    align=16)

    def _emit_resume(self) -> None:
        """Per barrier site: reload what was saved, deliver bar.red results, continue at the dispatcher."""
        b = self.b
        self.frame_layout()
        if not self.resume_sites:  # no barrier: a frame holds only the header (and frame registers)
            self.frame_bytes = self.frame_end if self.in_frame else FRAME_HEADER
            return
        if self.warp_loop:
            self.link_regions()
        b.position_at_end(self.resume_block)
        sw = b.switch(self.resume, self.dispatch_block)
        reload_all = self.llfn.append_basic_block("reload.all")
        b.position_at_end(reload_all)
        self.reload(self.carried)
        after_all = b.switch(self.resume, self.dispatch_block)
        for site, inst, dst, live, next_block, whole in self.resume_sites:
            entry = self.llfn.append_basic_block(f"resume{site}")
            # %tid where the warp may read it (set up in tid_block): a whole warp only in blocks
            # reachable from next_block (the definitions it reruns read no %tid: remat.py)
            if self.tid_slots and not (whole and not self.reads_tid_after(next_block)):
                self.entry_switch.add_case(ir.Constant(I32, site), self.tid_block)
                self.tid_switch.add_case(ir.Constant(I32, site), entry)
            else:
                sw.add_case(ir.Constant(I32, site), entry)
            b.position_at_end(entry)
            if whole:  # all 32 lanes at next_block (lower_barrier)
                self._resume_whole(inst, dst, live, next_block)
                if self.warp_loop and site in self._fast_resume:  # the same, from the warp before
                    b.position_at_end(self._fast_resume[site])
                    self._resume_whole(inst, dst, live, next_block)
                continue
            some = self.llfn.append_basic_block(f"reload{site}")
            after = self.llfn.append_basic_block(f"resumed{site}")
            after_all.add_case(ir.Constant(I32, site), after)
            b.cbranch(b.icmp_unsigned("!=", self._frame_i32(Frame.SPILL_ALL), ir.Constant(I32, 0)), reload_all, some)
            b.position_at_end(some)
            self.reload(live, pc=inst is None)
            if inst is not None:  # a converged warp's pc: its lanes at next_block, the others done
                at_next = V.bits_mask(b, self._frame_i32(Frame.AT_NEXT))
                target = V.splat_const(I32, DONE if next_block is None else next_block)
                b.store(b.select(at_next, target, V.splat_const(I32, DONE)), self.pc, align=16)
            self._resume_at(inst, dst, next_block)
            b.position_at_end(after)
            self._resume_at(inst, dst, next_block)

    def _resume_whole(self, inst: ast.Instruction, dst: ast.Operand | None, live: set[str], next_block: int) -> None:
        """A whole warp resuming before `next_block` (%tid set up where it may read it): reload or
        recompute what is live there, enter that block's clone."""
        b = self.b
        remat, rerun = self._remat(live, next_block)
        self.reload(live - remat, pc=False)
        self.cur_mask, self.guarded_inst = V.ALL, False
        for d in rerun:
            self.lower_inst(d)
        b.store(V.splat_const(I32, next_block), self.pc, align=16)
        self._resume_at(inst, dst, next_block)

    def _remat(self, live: set[str], next_block: int) -> tuple[set[str], list[ast.Instruction]]:
        """The registers of `live` a whole warp recomputes at its resume point before `next_block`
        and the definitions it reruns there (remat.py); none where registers live in the frame
        or lanes park at mbarrier waits (they resume through the dispatcher)."""
        if self.in_frame or self.has_waits:
            return set(), []
        if getattr(self, "_remat_plan", None) is None:
            sites = set().union(*(s[3] for s in self.resume_sites if s[5]))
            self._remat_plan = Remat(self.body, sites, self.uniform_regs, self._uniform_symbol)
        return self._remat_plan.program(live, next_block)

    def _resume_at(self, inst: ast.Instruction | None, dst: ast.Operand | None, target: int | None) -> None:
        """Deliver a bar.red result and continue after a barrier at `target`, the block after it:
        a warp whose 32 lanes all wait there enters its converged clone without the dispatcher's
        search."""
        if dst is not None:
            self._bar_red_result(inst, dst)
        if target is None:
            self.b.branch(self.dispatch_block)
            return
        pcv = self.b.load(self.pc, typ=V.vec(I32), align=16)
        self.enter_if_whole(self.b.icmp_unsigned("==", pcv, V.splat_const(I32, target)), target)

    def _bar_red_result(self, inst: ast.Instruction, dst: ast.Operand) -> None:
        b = self.b
        bar_id = self._frame_i32(Frame.BAR_ID)
        slot = b.gep(b.inttoptr(self.ctx_i64(Ctx.BARRIERS), PTR),
                     [b.mul(b.zext(bar_id, I64), ir.Constant(I64, 8 * 8))], source_etype=V.I8)
        popc = b.load(b.gep(slot, [ir.Constant(I64, 8 * BarSlot.RES_POPC)], source_etype=V.I8), typ=I64)
        arrived = b.load(b.gep(slot, [ir.Constant(I64, 8 * BarSlot.RES_ARRIVED)], source_etype=V.I8), typ=I64)
        mask = V.bits_mask(b, self._frame_i32(Frame.BAR_MASK))
        if inst.has("popc"):
            self.write(dst, V.splat(b, b.trunc(popc, I32)), "u32", mask)
        elif inst.has("and"):
            self.write(dst, V.splat(b, b.icmp_unsigned("==", popc, arrived)), "pred", mask)
        else:
            self.write(dst, V.splat(b, b.icmp_unsigned("!=", popc, ir.Constant(I64, 0))), "pred", mask)

    def lower_brx(self, inst: ast.Instruction, lanes: ir.Value) -> None:
        """brx.idx: each lane goes to the label its index selects in the .branchtargets list."""
        b = self.b
        index, table = inst.operands[0], inst.operands[1]
        d = self.body.table("branchtargets", table.name) if isinstance(table, ast.Sym) else None
        if d is None:
            raise unsupported(inst, "branch target list not found")
        idx = self.read(index, "u32")
        pcv = b.load(self.pc, typ=V.vec(I32), align=16)
        for k, target in enumerate(d.args[1:]):
            hit = b.and_(lanes, b.icmp_unsigned("==", idx, V.splat_const(I32, k)))
            pcv = b.select(hit, V.splat_const(I32, self.body.labels[target.name]), pcv)
        b.store(pcv, self.pc, align=16)
