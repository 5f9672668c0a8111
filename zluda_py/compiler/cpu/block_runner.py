"""Block runners: `i32 zluda_run.K(ptr ctx)` runs blocks FIRST..FIRST+COUNT of a launch of kernel K.

What is the same for every kernel is compiled once, with the shared helpers
(`define_shared_runners`), so that a kernel's module holds little besides its warp function:
* without barriers, K's runner is one loop over its warps of every block it runs (with the warp
  function inlined where it has converged clones: what is the same for every warp is hoisted
  out of the loop, once per call); after a block's last warp, `zluda.next_block(ctx, blk)` tests
  the stop flag and sets %ctaid. One loop, not a block loop around a warp loop: the optimiser
  took longer over the nested pair, and a call per block (a block function) cost small kernels
  run time.
* with lockstep barriers (`lockstep_barriers`), the block's rounds are K's *block function*,
  `i32 zluda_block.K(ptr ctx, i64 threads, i64 nwarps, i1 aligned)` (0, or a fault's status),
  which `zluda.run_blocks(ctx, block)` calls once per block.
* the general schedule (barrier ids and counts, bar.arrive/red, mbarrier waits) never inlines
  its warp function: `zluda.run_general(ctx, warp, frame_bytes)` is the whole runner.
docs/cpu_target.md, "One block runner for every kernel".
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager

from llvmlite import ir

from zluda_py.compiler.cpu import lane_masks, values as V
from zluda_py.compiler.cpu.abi import (BAR_SLOTS, FAULT_DEADLOCK, NBARRIERS, STALLED_ROUNDS, WARP, BarSlot, Ctx,
                                       Frame)

I1, I32, I64, PTR = V.I1, V.I32, V.I64, V.PTR

BLOCK_FN = ir.FunctionType(I32, [PTR, I64, I64, I1])  # (ctx, threads, nwarps, aligned)
RUN_BLOCKS, RUN_GENERAL, NEXT_BLOCK = "zluda.run_blocks", "zluda.run_general", "zluda.next_block"
_SHARED = {RUN_BLOCKS: (I32, [PTR, PTR]), RUN_GENERAL: (I32, [PTR, PTR, I64]), NEXT_BLOCK: (I1, [PTR, I64])}

Fail = Callable[[ir.Value], None]  # leave the block with a fault's status


def kernel_runner(runner: ir.Function, warp: ir.Function, frame_bytes: int, barriers: bool, lockstep: bool,
                  by_shape: bool, warp_loop: bool) -> None:
    """K's runner (declared with the kernel: its address is the kernel's). `barriers` without
    `lockstep`: the general schedule; `lockstep`: see `lockstep_barriers`; `warp_loop`: the warp
    function runs each round's warps itself (cpu/warp_loop.py). `by_shape`: one warp loop for
    blocks whose %tid.x is aligned to the lanes and one for others, each with its own inlined copy
    of the warp function, where the aligned test is a constant (FunctionLowering._fork_lanes:
    that copy has no general blocks)."""
    if not barriers:
        _warps_of_blocks(runner, warp, frame_bytes, by_shape)
        return
    b = ir.IRBuilder(runner.append_basic_block("entry"))
    ctx = runner.args[0]
    if not lockstep:
        r = b.call(_shared(runner.module, RUN_GENERAL), [ctx, warp, ir.Constant(I64, frame_bytes)], tail=True)
    else:
        block = ir.Function(runner.module, BLOCK_FN, name="zluda_block." + runner.name.removeprefix("zluda_run."))
        block.linkage = "internal"
        _lockstep_block(block, warp, frame_bytes, warp_loop)
        r = b.call(_shared(runner.module, RUN_BLOCKS), [ctx, block], tail=True)
    b.ret(r)


def define_shared_runners(module: ir.Module) -> None:
    """`zluda.run_blocks`, `zluda.run_general` and `zluda.next_block` (the stop flag, then %ctaid of
    block `blk`), defined (exported) in the shared helpers' module."""
    run = _shared(module, RUN_BLOCKS)

    def call_block(b: ir.IRBuilder, ctx, threads, nwarps, aligned, fail: Fail) -> None:
        block = b.inttoptr(b.ptrtoint(run.args[1], I64), BLOCK_FN.as_pointer())  # llvmlite reads the signature
        status = b.call(block, [ctx, threads, nwarps, aligned])
        with b.if_then(b.icmp_unsigned("!=", status, ir.Constant(I32, 0)), likely=False):
            fail(status)
    _blocks(run, call_block)

    general = _shared(module, RUN_GENERAL)
    warp_type = ir.FunctionType(I32, [PTR, PTR, I32, I1])

    def schedule(b: ir.IRBuilder, ctx, threads, nwarps, aligned, fail: Fail) -> None:
        warp = b.inttoptr(b.ptrtoint(general.args[1], I64), warp_type.as_pointer())
        _general_schedule(b, ctx, warp, general.args[2], threads, nwarps, aligned, fail)
    _blocks(general, schedule)

    next_block = _shared(module, NEXT_BLOCK)
    b = ir.IRBuilder(next_block.append_basic_block("entry"))
    c = _Ctx(b, next_block.args[0], None)
    with b.if_then(b.icmp_unsigned("!=", b.load(c.pointer(Ctx.STOP), typ=I32), ir.Constant(I32, 0)), likely=False):
        b.ret(ir.Constant(I1, 0))
    _next_cta(c, next_block.args[1], c.get(Ctx.FIRST), c.get(Ctx.GRID_X), c.get(Ctx.GRID_Y))
    b.ret(ir.Constant(I1, 1))


def _shared(module: ir.Module, name: str) -> ir.Function:
    return _declared(module, name, ir.FunctionType(*_SHARED[name]))


def _declared(module: ir.Module, name: str, fnty: ir.FunctionType) -> ir.Function:
    fn = module.globals.get(name)
    return fn if fn is not None else ir.Function(module, fnty, name)


class _Ctx:
    """Slots of the launch record `ctx` and the per-warp frames, as IR."""

    def __init__(self, b: ir.IRBuilder, ctx: ir.Value, frame_bytes: ir.Value) -> None:
        self.b, self.ctx, self.frame_bytes = b, ctx, frame_bytes

    def slot(self, base, i, size=8):
        return self.b.gep(base, [self.b.mul(i, ir.Constant(I64, size))], source_etype=V.I8)

    def get(self, i: int) -> ir.Value:
        return self.b.load(self.slot(self.ctx, ir.Constant(I64, i)), typ=I64)

    def put(self, i: int, v: ir.Value) -> None:
        self.b.store(v, self.slot(self.ctx, ir.Constant(I64, i)))

    def pointer(self, i: int) -> ir.Value:
        return self.b.inttoptr(self.get(i), PTR)

    def frame_of(self, frames: ir.Value, w: ir.Value) -> ir.Value:
        return self.b.gep(frames, [self.b.mul(w, self.frame_bytes)], source_etype=V.I8)

    def hdr(self, fr: ir.Value, s: int) -> ir.Value:
        return self.b.gep(fr, [ir.Constant(I64, 4 * s)], source_etype=V.I8)


def _blocks(fn: ir.Function, body: Callable) -> None:
    """`fn`'s body: for each block of the launch, unless the stop flag is up (`zluda.next_block`), then
    `body(b, ctx, threads, nwarps, aligned, fail)`; `fail(status)` records the block and stops
    the launch."""
    ctx = fn.args[0]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    c = _Ctx(b, ctx, None)
    threads, nwarps, aligned = _launch_shape(c)
    stop = c.pointer(Ctx.STOP)
    first = c.get(Ctx.FIRST)
    with _for(b, first, b.add(first, c.get(Ctx.COUNT))) as (blk, _):
        with b.if_then(b.not_(b.call(_shared(fn.module, NEXT_BLOCK), [ctx, blk])), likely=False):
            b.ret(ir.Constant(I32, 0))

        def fail(status: ir.Value) -> None:
            c.put(Ctx.FAULT_BLOCK, blk)
            b.store(ir.Constant(I32, 1), stop)
            b.ret(status)
        body(b, ctx, threads, nwarps, aligned, fail)
    b.ret(ir.Constant(I32, 0))


def _launch_shape(c: _Ctx) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(threads per block, warps per block, whether %tid.x is aligned to the lanes); NWARPS set."""
    b = c.b
    threads = b.mul(b.mul(c.get(Ctx.BLOCK_X), c.get(Ctx.BLOCK_Y)), c.get(Ctx.BLOCK_Z))
    aligned = lane_masks.aligned(b, c.get(Ctx.BLOCK_X), c.get(Ctx.BLOCK_Y), c.get(Ctx.BLOCK_Z))
    nwarps = b.udiv(b.add(threads, ir.Constant(I64, WARP - 1)), ir.Constant(I64, WARP))
    c.put(Ctx.NWARPS, nwarps)
    return threads, nwarps, aligned


def _warps_of_blocks(fn: ir.Function, warp: ir.Function, frame_bytes: int, by_shape: bool) -> None:
    """A barrier-free kernel's runner: each warp of each block once, to completion, in one loop
    (per block shape with `by_shape`) whose last warp of a block goes on with the next block."""
    ctx = fn.args[0]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    c = _Ctx(b, ctx, ir.Constant(I64, frame_bytes))
    _, nwarps, aligned = _launch_shape(c)
    frames, stop = c.pointer(Ctx.FRAMES), c.pointer(Ctx.STOP)
    first = c.get(Ctx.FIRST)
    last = b.add(first, c.get(Ctx.COUNT))
    done = fn.append_basic_block("done")
    with b.goto_block(done):
        b.ret(ir.Constant(I32, 0))
    b.cbranch(b.icmp_unsigned("==", nwarps, ir.Constant(I64, 0)), done, fn.append_basic_block("blocks"))
    b.position_at_end(fn.blocks[-1])
    head, entry = b.block, fn.blocks[0]
    blk = b.phi(I64)
    blk.add_incoming(first, entry)
    start = fn.append_basic_block("block.start")
    b.cbranch(b.icmp_unsigned("<", blk, last), start, done)
    b.position_at_end(start)
    go = b.call(_shared(fn.module, NEXT_BLOCK), [ctx, blk])
    warps = fn.append_basic_block("block.warps")
    b.cbranch(go, warps, done)
    b.position_at_end(warps)

    def each_warp(shape: ir.Value) -> None:
        pre = b.block
        body = fn.append_basic_block("warp")
        b.branch(body)
        b.position_at_end(body)
        w = b.phi(I64)
        w.add_incoming(ir.Constant(I64, 0), pre)
        fr = c.frame_of(frames, w)
        b.store(b.trunc(w, I32), c.hdr(fr, Frame.WARP))
        r = b.call(warp, [ctx, fr, ir.Constant(I32, 0), shape])
        with b.if_then(b.icmp_signed("<", r, ir.Constant(I32, 0)), likely=False):
            c.put(Ctx.FAULT_BLOCK, blk)
            b.store(ir.Constant(I32, 1), stop)
            b.ret(b.neg(r))
        nxt = b.add(w, ir.Constant(I64, 1))
        w.add_incoming(nxt, b.block)
        after = fn.append_basic_block("block.end")
        b.cbranch(b.icmp_unsigned("<", nxt, nwarps), body, after)
        b.position_at_end(after)
        blk.add_incoming(b.add(blk, ir.Constant(I64, 1)), after)
        b.branch(head)
    if by_shape:
        aligned_warps, other_warps = fn.append_basic_block("aligned"), fn.append_basic_block("general")
        b.cbranch(aligned, aligned_warps, other_warps)
        b.position_at_end(aligned_warps)
        each_warp(ir.Constant(I1, 1))
        b.position_at_end(other_warps)
        each_warp(ir.Constant(I1, 0))
    else:
        each_warp(aligned)


def _lockstep_block(fn: ir.Function, warp: ir.Function, frame_bytes: int, warp_loop: bool) -> None:
    """A lockstep kernel's block function: its block's rounds."""
    ctx, _, nwarps, aligned = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    c = _Ctx(b, ctx, ir.Constant(I64, frame_bytes))
    _lockstep_rounds(c, warp, c.pointer(Ctx.FRAMES), nwarps, aligned, warp_loop, lambda status: b.ret(status))
    b.ret(ir.Constant(I32, 0))


def _lockstep_rounds(c: _Ctx, warp: ir.Function, frames, nwarps, aligned: ir.Value, warp_loop: bool,
                     fail: Fail) -> None:
    """Rounds in which every unfinished warp runs to its next barrier, in warp order, until all
    have finished: each round ends with every unfinished warp at the kernel's one barrier.
    `warp_loop`: one call runs a round (it returns whether some warp stopped at the barrier)."""
    b, ctx = c.b, c.ctx
    with _for(b, ir.Constant(I64, 0), nwarps, plain=True) as (w, _):
        fr = c.frame_of(frames, w)
        b.store(b.trunc(w, I32), c.hdr(fr, Frame.WARP))
        b.store(ir.Constant(I32, 0), c.hdr(fr, Frame.STATE))
    fn = b.function
    rounds, done = fn.append_basic_block("rounds"), fn.append_basic_block("rounds.done")
    left = None if warp_loop else V.entry_alloca(b, I1)  # some warp stopped at the barrier this round
    b.branch(rounds)
    b.position_at_end(rounds)
    if warp_loop:
        r = b.call(warp, [ctx, c.frame_of(frames, ir.Constant(I64, 0)), ir.Constant(I32, 0), aligned])
        with b.if_then(b.icmp_signed("<", r, ir.Constant(I32, 0)), likely=False):
            fail(b.neg(r))
        b.cbranch(b.icmp_signed(">", r, ir.Constant(I32, 0)), rounds, done)
        b.position_at_end(done)
        return
    b.store(ir.Constant(I1, 0), left)
    with _for(b, ir.Constant(I64, 0), nwarps) as (w, _):
        fr = c.frame_of(frames, w)
        state = b.load(c.hdr(fr, Frame.STATE), typ=I32)
        with b.if_then(b.icmp_signed(">=", state, ir.Constant(I32, 0))):
            r = b.call(warp, [ctx, fr, state, aligned])
            with b.if_then(b.icmp_signed("<", r, ir.Constant(I32, 0)), likely=False):
                fail(b.neg(r))
            stopped = b.icmp_signed(">", r, ir.Constant(I32, 0))
            b.store(b.select(stopped, r, ir.Constant(I32, -1)), c.hdr(fr, Frame.STATE))
            b.store(b.or_(b.load(left, typ=I1), stopped), left)
    b.cbranch(b.load(left, typ=I1), rounds, done)
    b.position_at_end(done)


def _general_schedule(b: ir.IRBuilder, ctx, warp, frame_bytes, threads, nwarps, aligned, fail: Fail) -> None:
    """One block under the general schedule: rounds over the warps that are not waiting at a
    barrier, releasing barriers as threads arrive or exit, until every warp has finished."""
    c = _Ctx(b, ctx, frame_bytes)
    fn = b.function
    frames, bars = c.pointer(Ctx.FRAMES), c.pointer(Ctx.BARRIERS)
    hdr = c.hdr
    bar_field = lambda i, f: b.gep(bars, [b.add(b.mul(i, ir.Constant(I64, 8 * BAR_SLOTS)),  # noqa: E731
                                                ir.Constant(I64, 8 * f))], source_etype=V.I8)
    memset = _declared(fn.module, "llvm.memset.p0.i64", ir.FunctionType(ir.VoidType(), [PTR, V.I8, I64, I1]))
    b.call(memset, [bars, ir.Constant(V.I8, 0), ir.Constant(I64, NBARRIERS * BAR_SLOTS * 8), ir.Constant(I1, 0)])
    with _for(b, ir.Constant(I64, 0), nwarps, plain=True) as (w, _):
        fr = c.frame_of(frames, w)
        b.store(b.trunc(w, I32), hdr(fr, Frame.WARP))
        lanes = b.sub(threads, b.mul(w, ir.Constant(I64, WARP)))
        lanes = b.select(b.icmp_unsigned(">", lanes, ir.Constant(I64, WARP)), ir.Constant(I64, WARP), lanes)
        b.store(b.trunc(lanes, I32), hdr(fr, Frame.LIVE))
        for field in (Frame.STATE, Frame.BAR_ID, Frame.WAITGEN, Frame.YIELD):
            b.store(ir.Constant(I32, 0), hdr(fr, field))
    total = V.entry_alloca(b, I64)  # threads of the block that have not exited
    b.store(threads, total)
    stalled = V.entry_alloca(b, I64)  # rounds in a row in which warps only yielded (mbarrier waits)
    b.store(ir.Constant(I64, 0), stalled)
    sched = fn.append_basic_block("schedule")
    block_done = fn.append_basic_block("block_done")
    b.branch(sched)
    b.position_at_end(sched)
    ran, left = V.entry_alloca(b, I64), V.entry_alloca(b, I64)
    moved = V.entry_alloca(b, I64)  # warps that did not just yield this round
    b.store(ir.Constant(I64, 0), ran)
    b.store(ir.Constant(I64, 0), left)
    b.store(ir.Constant(I64, 0), moved)
    epoch = c.get(Ctx.MBAR_EPOCH)
    with _for(b, ir.Constant(I64, 0), nwarps) as (w, _):
        fr = c.frame_of(frames, w)
        state = b.load(hdr(fr, Frame.STATE), typ=I32)
        with b.if_then(b.icmp_signed(">=", state, ir.Constant(I32, 0))):
            b.store(b.add(b.load(left, typ=I64), ir.Constant(I64, 1)), left)
            bar_id = b.zext(b.load(hdr(fr, Frame.BAR_ID), typ=I32), I64)
            gen = b.load(bar_field(bar_id, BarSlot.GEN), typ=I64)
            waiting = b.and_(b.icmp_signed(">", state, ir.Constant(I32, 0)),
                             b.icmp_unsigned("==", b.zext(b.load(hdr(fr, Frame.WAITGEN), typ=I32), I64), gen))
            # a warp that yielded (mbarrier waits) waits for nothing: it runs again next round
            waiting = b.and_(waiting, b.icmp_unsigned("==", b.load(hdr(fr, Frame.YIELD), typ=I32),
                                                      ir.Constant(I32, 0)))
            with b.if_then(b.not_(waiting)):
                before = b.load(hdr(fr, Frame.LIVE), typ=I32)
                b.store(ir.Constant(I32, 0), hdr(fr, Frame.YIELD))
                r = b.call(warp, [ctx, fr, state, aligned])
                exited = b.zext(b.sub(before, b.load(hdr(fr, Frame.LIVE), typ=I32)), I64)
                b.store(b.sub(b.load(total, typ=I64), exited), total)
                b.store(b.add(b.load(ran, typ=I64), ir.Constant(I64, 1)), ran)
                yielded = b.icmp_unsigned("!=", b.load(hdr(fr, Frame.YIELD), typ=I32), ir.Constant(I32, 0))
                b.store(b.add(b.load(moved, typ=I64), b.zext(b.not_(yielded), I64)), moved)
                with b.if_then(b.icmp_signed("<", r, ir.Constant(I32, 0)), likely=False):
                    fail(b.neg(r))
                b.store(b.select(b.icmp_signed("==", r, ir.Constant(I32, 0)), ir.Constant(I32, -1), r),
                        hdr(fr, Frame.STATE))
                bar_id = b.zext(b.load(hdr(fr, Frame.BAR_ID), typ=I32), I64)
                b.store(b.trunc(b.load(bar_field(bar_id, BarSlot.GEN), typ=I64), I32), hdr(fr, Frame.WAITGEN))
                # a barrier fills when threads arrive at it (the one this warp stops
                # at, those it passed with bar.arrive) or when threads exit (it then
                # waits for fewer): all barriers are tested only after those two
                touched = c.get(Ctx.BAR_TOUCHED)
                stopped = b.select(b.icmp_signed(">", r, ir.Constant(I32, 0)),
                                   b.shl(ir.Constant(I64, 1), b.and_(bar_id, ir.Constant(I64, 63))),
                                   ir.Constant(I64, 0))
                everything = b.icmp_unsigned("!=", b.or_(exited, touched), ir.Constant(I64, 0))
                which = b.select(everything, ir.Constant(I64, -1), stopped)
                which = b.and_(which, ir.Constant(I64, (1 << NBARRIERS) - 1))
                with b.if_then(everything, likely=False):
                    c.put(Ctx.BAR_TOUCHED, ir.Constant(I64, 0))
                _release(b, bar_field, b.load(total, typ=I64), which)
    b.cbranch(b.icmp_unsigned("==", b.load(left, typ=I64), ir.Constant(I64, 0)), block_done,
              fn.append_basic_block("check_progress"))
    b.position_at_end(fn.blocks[-1])
    with b.if_then(b.icmp_unsigned("==", b.load(ran, typ=I64), ir.Constant(I64, 0)), likely=False):
        c.put(Ctx.FAULT_ARG, ir.Constant(I64, FAULT_DEADLOCK))  # every live warp waits at a barrier no one else reaches
        fail(ir.Constant(I32, 719))
    # every warp that ran only yielded at failed mbarrier waits and no mbarrier changed:
    # the same again next round; after STALLED_ROUNDS of those the block is deadlocked
    idle = b.and_(b.icmp_unsigned("==", b.load(moved, typ=I64), ir.Constant(I64, 0)),
                  b.icmp_unsigned("==", c.get(Ctx.MBAR_EPOCH), epoch))
    b.store(b.select(idle, b.add(b.load(stalled, typ=I64), ir.Constant(I64, 1)), ir.Constant(I64, 0)), stalled)
    with b.if_then(b.icmp_unsigned(">=", b.load(stalled, typ=I64), ir.Constant(I64, STALLED_ROUNDS)), likely=False):
        c.put(Ctx.FAULT_ARG, ir.Constant(I64, FAULT_DEADLOCK))
        fail(ir.Constant(I32, 719))
    b.branch(sched)
    b.position_at_end(block_done)


def _next_cta(c: _Ctx, blk, first, gx, gy) -> None:
    """%ctaid of linear block `blk`: divide for the first block, then count (divisions are slow)."""
    b, get, put = c.b, c.get, c.put
    with b.if_else(b.icmp_unsigned("==", blk, first)) as (then, other):
        with then:
            put(Ctx.CTA_X, b.urem(blk, gx))
            put(Ctx.CTA_Y, b.urem(b.udiv(blk, gx), gy))
            put(Ctx.CTA_Z, b.udiv(blk, b.mul(gx, gy)))
        with other:
            x = b.add(get(Ctx.CTA_X), ir.Constant(I64, 1))
            wrap_x = b.icmp_unsigned("==", x, gx)
            y = b.add(get(Ctx.CTA_Y), b.zext(wrap_x, I64))
            wrap_y = b.icmp_unsigned("==", y, gy)
            put(Ctx.CTA_X, b.select(wrap_x, ir.Constant(I64, 0), x))
            put(Ctx.CTA_Y, b.select(wrap_y, ir.Constant(I64, 0), y))
            put(Ctx.CTA_Z, b.add(get(Ctx.CTA_Z), b.zext(wrap_y, I64)))


def _release(b: ir.IRBuilder, bar_field, total_v, which) -> None:
    """Open every barrier of the bit set `which` whose expected thread count (default: all
    live threads) has arrived."""
    for i in V.each_set_bit(b, which):
        arrived = b.load(bar_field(i, BarSlot.ARRIVED), typ=I64)
        expected = b.load(bar_field(i, BarSlot.EXPECTED), typ=I64)
        need = b.select(b.icmp_unsigned("==", expected, ir.Constant(I64, 0)), total_v, expected)
        full = b.and_(b.icmp_unsigned("!=", arrived, ir.Constant(I64, 0)), b.icmp_unsigned(">=", arrived, need))
        with b.if_then(full):
            b.store(b.add(b.load(bar_field(i, BarSlot.GEN), typ=I64), ir.Constant(I64, 1)), bar_field(i, BarSlot.GEN))
            b.store(b.load(bar_field(i, BarSlot.ACC), typ=I64), bar_field(i, BarSlot.RES_POPC))
            b.store(arrived, bar_field(i, BarSlot.RES_ARRIVED))
            for f in (BarSlot.ARRIVED, BarSlot.ACC, BarSlot.EXPECTED):
                b.store(ir.Constant(I64, 0), bar_field(i, f))


@contextmanager
def _for(b: ir.IRBuilder, start: ir.Value, stop: ir.Value, plain: bool = False):
    """A counted loop; yields (index, exit block). `plain`: neither vectorised nor unrolled."""
    fn = b.function
    pre = b.block
    head = fn.append_basic_block("for.head")
    body = fn.append_basic_block("for.body")
    end = fn.append_basic_block("for.end")
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64)
    i.add_incoming(start, pre)
    b.cbranch(b.icmp_unsigned("<", i, stop), body, end)
    b.position_at_end(body)
    yield i, end
    nxt = b.add(i, ir.Constant(I64, 1))
    i.add_incoming(nxt, b.block)
    latch = b.branch(head)
    if plain:
        latch.set_metadata("llvm.loop", _plain_loop(fn.module))
    b.position_at_end(end)


def _plain_loop(module: ir.Module) -> ir.MDValue:
    """Loop metadata: neither vectorised nor unrolled. For the frames' set-up loops over a block's
    warps (at most 32): O3 vectorised a lockstep kernel's (masked scatters, an epilogue, a runtime
    check and an 8x unrolled remainder: ~12 % of a small barrier kernel's optimised IR) for no run
    time worth having."""
    md = getattr(module, "_zluda_plain_loop", None)
    if md is None:
        hints = [module.add_metadata([ir.MetaDataString(module, "llvm.loop.vectorize.enable"), ir.Constant(I1, 0)]),
                 module.add_metadata([ir.MetaDataString(module, "llvm.loop.unroll.disable")])]
        md = module.add_metadata([*hints, *hints])  # a node of its own (llvmlite shares equal ones)
        md.operands = (md, *hints)  # a loop ID starts with itself
        module._zluda_plain_loop = md
    return md
