"""The block's warps as a loop inside a lockstep kernel's warp function.

A kernel whose barriers are all `bar.sync 0` without a thread count (`CallMixin.lockstep_barriers`)
runs in rounds: every unfinished warp, in warp order, to its next barrier. With a *warp loop* (a
kernel small enough for converged clones) its warp function runs a whole round itself: it starts
at warp 0's frame, and where a warp stops at the barrier (or finishes) it records its state in its
frame and goes on with the next warp, returning to the block runner after the last. The frame and
the warp index are slots LLVM promotes to values carried round that loop (`frame`, `warp`); every
register slot is undefined again for the next warp, as at a call.

In a round the warps run the same region one after another: a whole warp that stops at a
barrier leaves the next warp, most often, at the resume point it resumed from itself. So after
such a stop the next warp's state is tested against the whole-warp resume points from which that
barrier is reached, and a match enters a copy of that point's reload directly: each region is a
loop over the block's warps through its own code, without the runner's per-warp bookkeeping or
the switch on the resume point (docs/cpu_target.md, "Barrier regions as loops over the warps").
"""

from __future__ import annotations

from llvmlite import ir

from zluda_py.compiler import cfg
from zluda_py.compiler.cpu import values as V
from zluda_py.compiler.cpu.abi import WARP, Ctx, Frame

I1, I32, PTR = V.I1, V.I32, V.PTR


class WarpLoopMixin:
    warp_loop = False  # this kernel's warp function runs a round of the block's warps

    @property
    def frame(self) -> ir.Value:
        """The current warp's frame."""
        return self.b.load(self._frame, typ=PTR) if self.warp_loop else self._frame

    @property
    def warp(self) -> ir.Value:
        """The current warp's index in its block."""
        return self.b.load(self._warp, typ=I32) if self.warp_loop else self._warp

    @property
    def thread_index(self) -> ir.Value:
        """Each lane's linear thread index in the block."""
        if not self.warp_loop:
            return self._thread_index
        b = self.b
        return b.add(V.splat(b, b.mul(self.warp, ir.Constant(I32, WARP))), V.LANE_IDS)

    def region_repeats(self) -> bool:
        """Some block barrier is reached again from the block after it without passing another
        (a tree reduction's loop): there the warps of a round run the same region again and again,
        which the warp loop enters directly. Only such kernels get one: it costs other lockstep
        kernels 10-30 % more compile time (docs/cpu_target.md)."""
        blocks = self.body.blocks
        for blk in blocks:
            if not (blk.insts and cfg.is_block_barrier(blk.insts[-1])) or blk.fallthrough is None:
                continue
            seen, todo = {blk.fallthrough}, [blk.fallthrough]
            while todo:
                at = blocks[todo.pop()]
                if at is blk:
                    return True
                if at.insts and cfg.is_block_barrier(at.insts[-1]):
                    continue
                todo += [i for i in at.succs if i not in seen]
                seen.update(at.succs)
        return False

    def open_warp_loop(self, first_frame: ir.Value) -> None:
        """In the entry block: the frame and warp slots start at `first_frame`'s warp."""
        b = self.b
        self._frame = b.alloca(PTR, name="frame")
        b.store(first_frame, self._frame)
        self._warp = b.alloca(I32, name="warp")
        b.store(self._frame_i32(Frame.WARP), self._warp)
        self._stopped = b.alloca(I1, name="stopped")  # some warp of this round stopped at the barrier
        b.store(ir.Constant(I1, 0), self._stopped)
        self._fast_resume: dict[int, ir.Block] = {}  # resume point -> its reload for the next warp
        self._next_warps: dict[int | None, ir.Block] = {}  # _next_warp's blocks
        self._after_stop: dict[int, ir.Block] = {}  # resume point -> where the next warp goes from its barrier

    def warp_loop_head(self) -> ir.Value:
        """From the entry block: the loop's head, which skips finished warps; returns the current
        warp's state (0: not started, else its resume point), the builder where it is known >= 0."""
        b = self.b
        self._warps_head = self.llfn.append_basic_block("warps")
        self._warps_end = self.llfn.append_basic_block("warps.end")
        b.branch(self._warps_head)
        with b.goto_block(self._warps_end):
            b.ret(b.zext(b.load(self._stopped, typ=I1), I32))
        b.position_at_end(self._warps_head)
        state = self._frame_i32(Frame.STATE)
        run, skip = self.llfn.append_basic_block("warps.run"), self.llfn.append_basic_block("warps.skip")
        b.cbranch(b.icmp_signed("<", state, ir.Constant(I32, 0)), skip, run)
        with b.goto_block(skip):
            b.branch(self._next_warp(None))
        b.position_at_end(run)
        return state

    def stop_warp(self, state: ir.Value, whole_site: int | None = None) -> None:
        """The current warp stops with `state` (a resume point, or -1 when it finished): return it
        to the block runner, or in a warp loop record it and go on with the next warp.
        `whole_site`: the resume point of a whole warp at a barrier (see `_next_warp`)."""
        b = self.b
        if not self.warp_loop:
            b.ret(state)
            return
        self._set_frame_i32(Frame.STATE, state)
        if not (isinstance(state, ir.Constant) and state.constant < 0):
            b.store(ir.Constant(I1, 1), self._stopped)
        b.branch(self._next_warp(whole_site))

    def _next_warp(self, whole_site: int | None) -> ir.Block:
        """The block that goes on with the next warp of the block, or returns after the last (one
        for every stop of a whole warp at the barrier of resume point `whole_site`, one for all
        other stops). After such a stop the next warp enters the reload of the resume point it
        waits at directly when that is one from which warps reach this barrier (`link_regions`)."""
        if whole_site in self._next_warps:
            return self._next_warps[whole_site]
        b = self.b
        block = self._next_warps[whole_site] = self.llfn.append_basic_block(
            "warps.next" if whole_site is None else f"warps.after{whole_site}")
        with b.goto_block(block):
            w = b.add(self.warp, ir.Constant(I32, 1))
            more = self.llfn.append_basic_block("warps.more")
            b.cbranch(b.icmp_unsigned("==", b.zext(w, V.I64), self.ctx_i64(Ctx.NWARPS)), self._warps_end, more)
            b.position_at_end(more)
            frame = b.gep(self.frame, [ir.Constant(V.I64, self.frame_end)], source_etype=V.I8)
            b.store(frame, self._frame)
            b.store(w, self._warp)
            self._forget_registers()
            if whole_site is None:
                b.branch(self._warps_head)
            else:  # link_regions fills it
                self._after_stop[whole_site] = self.llfn.append_basic_block(f"warps.after{whole_site}.test")
                b.branch(self._after_stop[whole_site])
        return block

    def _forget_registers(self) -> None:
        """The warp that stopped leaves nothing in registers for the next: every slot read before
        it is written in some block undefined again, as at a warp function's entry (else LLVM
        carries each register round the loop, and what a resume does not reload stays live
        through it)."""
        b = self.b
        carried = [slot for name, (slot, _) in self.regs.items() if name in self.carried]
        for slot in [self.pc, *self.tid_slots, *carried]:
            b.store(ir.Constant(slot.allocated_type, ir.Undefined), slot)

    def link_regions(self) -> None:
        """Once every resume point is known: after a whole warp's stop at a barrier, the next warp
        waits at one of the whole-warp resume points from which that barrier is reached without
        another barrier (in lockstep rounds, where the warp before it resumed): a test per such
        point sends it to a copy of that point's reload (`fast_resume`), anything else to the
        loop's head."""
        b = self.b
        for site, block in self._after_stop.items():
            b.position_at_end(block)
            state = self._frame_i32(Frame.STATE)
            for entry in self._region_entries(site):
                other = self.llfn.append_basic_block(f"warps.after{site}.not{entry}")
                b.cbranch(b.icmp_unsigned("==", state, ir.Constant(I32, entry)), self.fast_resume(entry), other)
                b.position_at_end(other)
            b.branch(self._warps_head)

    def _region_entries(self, site: int) -> list[int]:
        """The whole-warp resume points from whose block the barrier of resume point `site` is
        reached without passing another barrier, but for those that set %tid up."""
        blocks = self.body.blocks
        barrier = next(s[1] for s in self.resume_sites if s[0] == site)
        entries = []
        for entry, _, _, _, start, whole in self.resume_sites:
            if not whole or self.tid_slots and self.reads_tid_after(start):
                continue  # (a point whose warp reads %tid enters through the shared tid.setup)
            seen, todo = {start}, [start]
            while todo:
                blk = blocks[todo.pop()]
                if blk.insts and blk.insts[-1] is barrier:
                    entries.append(entry)
                    break
                if blk.insts and cfg.is_block_barrier(blk.insts[-1]):
                    continue
                todo += [i for i in blk.succs if i not in seen]
                seen.update(blk.succs)
        return entries

    def fast_resume(self, site: int) -> ir.Block:
        """The block where a warp loop enters whole-warp resume point `site` from the warp before
        (`CallMixin._emit_resume` fills it with a copy of that point's reload)."""
        if site not in self._fast_resume:
            self._fast_resume[site] = self.llfn.append_basic_block(f"resume{site}.next")
        return self._fast_resume[site]
