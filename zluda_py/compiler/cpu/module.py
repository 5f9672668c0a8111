"""Lowering of a whole PTX module for the CPU target: variables, functions, block runners.

Output: an LLVM module plus JSON-able metadata (kernels, parameters, globals), so an object
built once can be loaded later without re-running the optimiser.
"""

from __future__ import annotations

from contextlib import contextmanager

from llvmlite import ir

from zluda_py.compiler.cpu import lane_masks, values as V
from zluda_py.compiler.cpu.calls import SYSCALLS
from zluda_py.compiler.cpu.abi import (BAR_SLOTS, BASE_ALIGN, FAULT_DEADLOCK, NBARRIERS, STACK_ALIGN, STALLED_ROUNDS,
                                       WARP, BarSlot, Ctx, Frame)
from zluda_py.compiler import parts
from zluda_py.compiler.cpu.function import FunctionLowering, Symbol
from zluda_py.compiler.cpu.memory import define_shared_helpers
from zluda_py.compiler.cpu.shared import layout_shared
from zluda_py.compiler.errors import UnsupportedError
from zluda_py.compiler.layout import (address_offsets, directive_dims, init_type, initial_value, kernel_params,
                                     max_threads)
from zluda_py.compiler.ptxtypes import global_align, is_dynamic_shared, var_align, var_size
from zluda_py.ptx import ast

I1, I32, I64, PTR = V.I1, V.I32, V.I64, V.PTR


class ModuleLowering:
    def __init__(self, module: ast.Module, triple: str, data_layout: str) -> None:
        self.ast = module
        self.ir = ir.Module(name=module.filename)
        self.ir.triple = triple
        self.ir.data_layout = data_layout
        self.symbols: dict[str, Symbol] = {}
        self.functions: dict[str, ast.Function] = {}
        self.llfns: dict[str, ir.Function] = {}
        self.defined: set[str] = set()
        self.shared = layout_shared(module)
        self.local_align = window_align(module, "local", STACK_ALIGN)
        window_align(module, "shared", 1)
        self._shared_symbols: dict[str, Symbol] = {}  # module .shared variables as the function being lowered sees them
        self._lowering: ast.Function | None = None
        self.globals_meta: dict[str, dict] = {}
        self.kernels_meta: dict[str, dict] = {}
        self.frames: dict[str, tuple[int, set[str]]] = {}  # function -> (.local frame bytes, direct callees)
        self.reads_reserved_smem = False  # set by FunctionLowering.special
        self._initializers: list[tuple[ast.Variable, ir.GlobalVariable]] = []
        self.helpers_here = False  # True only in the shared helpers' own module (`helpers_ir`)
        self.device_runtime_users: set[str] = set()  # functions calling the device runtime (calls.py)

    # ------------------------------------------------------------------ top level
    def lower(self) -> dict:
        for f in self.ast.functions():
            self._declare(f)
        for v in self.ast.variables():
            if v.space != "shared":  # .shared offsets depend on the kernel (see _define)
                self.symbols[v.name] = self._variable(v, v.name)
        for v, g in self._initializers:  # after every symbol exists: initializers may hold addresses
            g.initializer = self._initializer(v)
        for f in self.ast.functions():
            if f.body is not None:
                self._define(f)
        for name, k in self.kernels_meta.items():
            k["stack_size"] = self._static_stack(name)
            k["device_launches"] = bool(self._reached(name) & self.device_runtime_users)
        return {"kernels": self.kernels_meta, "globals": self.globals_meta,
                "reserved_smem": self.reads_reserved_smem}

    def symbol(self, name: str) -> Symbol | None:
        return self._shared_symbols.get(name) or self.symbols.get(name)

    def function_variable(self, fn: ast.Function, v: ast.Variable) -> Symbol:
        """A .shared/.global/.const variable declared inside a function body."""
        sym = self._variable(v, f"{fn.name}.{v.name}")
        if self._initializers and self._initializers[-1][0] is v:  # module symbols all exist by now
            _, g = self._initializers.pop()
            g.initializer = self._initializer(v)
        return sym

    def _variable(self, v: ast.Variable, name: str) -> Symbol:
        if v.type in ("texref", "surfref"):  # a word holding the bound object's handle (driver/texrefs.py)
            g = ir.GlobalVariable(self.ir, I64, name=name)
            g.align, g.initializer = 8, ir.Constant(I64, 0)
            self.globals_meta[v.name] = {"symbol": name, "size": 8, "space": v.type}
            return Symbol(v.type, ptr=g, size=8)
        if v.type == "samplerref":
            return Symbol("samplerref")  # only the independent-sampler forms and istypep name these
        if v.space == "shared":  # declared in the body of the function being lowered
            if is_dynamic_shared(v):
                return Symbol("shared", self.shared.dynamic_base[self._lowering.name])
            return Symbol("shared", self.shared.local_offsets[(self._lowering.name, v.name)], size=var_size(v))
        if v.space in ("global", "const"):
            size = var_size(v)
            if v.linkage == "extern" and v.init is None:
                raise UnsupportedError(f"unresolved .extern variable {v.name}", v.pos)
            g = ir.GlobalVariable(self.ir, init_type(size, address_offsets(v)), name=name)
            g.align = global_align(v)
            self._initializers.append((v, g))
            self.globals_meta[v.name] = {"symbol": name, "size": size, "space": v.space, "managed": v.managed}
            return Symbol(v.space, ptr=g, size=size)
        raise UnsupportedError(f"module variable in .{v.space}", v.pos)

    def _initializer(self, v: ast.Variable) -> ir.Constant:
        """The contents, with address items (`fn`, `var`, `generic(var)+4`) as constant expressions."""
        def address(item: ast.Initializer) -> ir.Constant:
            sym = self.symbols.get(item.value.name)
            if sym is None or sym.kind not in ("global", "const", "func"):
                raise UnsupportedError(f"address of {item.value.name} in an initializer", v.pos)
            return sym.ptr.bitcast(V.I8.as_pointer()).gep([ir.Constant(I64, item.offset)]).ptrtoint(I64)
        return initial_value(v, address)

    def _declare(self, f: ast.Function) -> None:
        if f.kind == "entry":
            if f.body is not None:  # a kernel's address (a device-side launch names it) is its block runner's
                runner = ir.Function(self.ir, ir.FunctionType(I32, [PTR]), name=f"zluda_run.{f.name}")
                self.symbols[f.name] = Symbol("func", ptr=runner)
            return
        if f.body is None:
            if any(g.name == f.name and g.body is not None for g in self.ast.functions()):
                return  # a forward declaration of a function defined in this module
            self.functions[f.name] = f
            if f.name in SYSCALLS or not parts.mentioned(self.ast, f.name):
                return
            raise UnsupportedError(f"unresolved .extern .func {f.name} (link the module that defines it)", f.pos)
        self.functions[f.name] = f
        nparams = len(f.returns) + len(f.params)
        fnty = ir.FunctionType(I32, [PTR, I32, I64, V.MASK, *([PTR] * nparams)])
        llfn = ir.Function(self.ir, fnty, name=f.name)
        llfn.linkage = "internal"
        self.llfns[f.name] = llfn
        self.symbols[f.name] = Symbol("func", ptr=llfn)
        self.defined.add(f.name)

    def _define(self, f: ast.Function) -> None:
        self._lowering = f
        offsets, base = self.shared.offsets[f.name], self.shared.dynamic_base[f.name]
        self._shared_symbols = {
            v.name: Symbol("shared", base) if is_dynamic_shared(v) else Symbol("shared", offsets[v.name], size=var_size(v))
            for v in self.ast.variables() if v.space == "shared" and (is_dynamic_shared(v) or v.name in offsets)}
        if f.kind == "func":
            lowering = FunctionLowering(self, f, self.llfns[f.name])
            lowering.lower()
            self.frames[f.name] = (lowering.frame_size, lowering.callees)
            return
        # (ctx, frame, resume point, whether %tid.x is aligned to the lanes: lane_masks.aligned)
        warp = ir.Function(self.ir, ir.FunctionType(I32, [PTR, PTR, I32, I1]), name=f"{f.name}.warp")
        warp.linkage = "internal"
        warp.attributes.add("noinline")  # one call per warp and barrier; keeps the runner small
        lowering = FunctionLowering(self, f, warp)
        lowering.lower()
        self.frames[f.name] = (lowering.frame_size, lowering.callees)
        runner = f"zluda_run.{f.name}"
        lockstep = bool(lowering.resume_sites) and lowering.lockstep_barriers()
        by_shape = False
        if (lockstep or not lowering.resume_sites) and lowering.cloned:
            # one call site: inlined, each warp's run (to its next barrier, if any) is a loop
            # iteration of the runner instead of a call, and what is the same for every warp of
            # the block is hoisted out of that loop (small kernels; large ones keep compile time down)
            warp.attributes.discard("noinline")
            # without barriers, a block forked on its lanes (_fork_lanes): one call site per shape
            by_shape = not lowering.resume_sites and lowering.lanes_forked
            if by_shape:
                warp.attributes.add("alwaysinline")
        self._block_runner(runner, warp, lowering.frame_bytes, bool(lowering.resume_sites), lockstep, by_shape,
                           lowering.warp_loop)
        params, param_size = kernel_params(f)
        self.kernels_meta[f.name] = {
            "runner": runner, "params": params, "param_size": param_size,
            "local_size": lowering.frame_size, "frame_bytes": lowering.frame_bytes, "local_align": self.local_align,
            "static_shared": self.shared.static[f.name], "declared_shared": self.shared.declared[f.name],
            "max_threads": max_threads(f), "reqntid": directive_dims(f, "reqntid"),
        }

    def _reached(self, kernel: str) -> set[str]:
        """The kernel and every function its calls reach."""
        seen, todo = set(), [kernel]
        while todo:
            name = todo.pop()
            if name not in seen and name in self.frames:
                seen.add(name)
                todo.extend(self.frames[name][1])
        return seen

    def _static_stack(self, kernel: str) -> int:
        """The per-thread stack a kernel needs without recursion: its frame plus the deepest chain
        of direct calls, a recursive cycle counted once. NVIDIA's driver grows the stack to what a
        launch needs (cuCtxSetLimit: it "automatically increases the per-thread stack size for
        each kernel launch as needed"); the limit bounds only what recursion adds to this."""
        deepest: dict[str, int] = {}

        def below(name: str, path: set[str]) -> int:
            if name not in deepest:
                deepest[name] = max((self.frames[c][0] + below(c, path | {c})
                                     for c in self.frames[name][1] if c in self.frames and c not in path), default=0)
            return deepest[name]

        return self.frames[kernel][0] + below(kernel, {kernel})

    # ------------------------------------------------------------------ runtime services
    def host_fn(self) -> ir.Function:
        fn = self.ir.globals.get("zluda_host")
        if fn is None:
            fn = ir.Function(self.ir, ir.FunctionType(I64, [I32, PTR, I64, I64, I64, I64, I64]), "zluda_host")
        return fn

    def libc(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        fn = self.ir.globals.get(name)
        if fn is None:
            fn = ir.Function(self.ir, ir.FunctionType(ret, args), name)
        return fn

    def globaltimer(self, b: ir.IRBuilder) -> ir.Value:
        """Nanoseconds of CLOCK_REALTIME (what %globaltimer counts on the GPU)."""
        ts = V.entry_alloca(b, ir.ArrayType(I64, 2))
        b.call(self.libc("clock_gettime", I32, [I32, PTR]), [ir.Constant(I32, 0), ts])
        sec = b.load(b.gep(ts, [ir.Constant(I64, 0)], source_etype=I64), typ=I64)
        nsec = b.load(b.gep(ts, [ir.Constant(I64, 1)], source_etype=I64), typ=I64)
        return b.add(b.mul(sec, ir.Constant(I64, 1_000_000_000)), nsec)

    # ------------------------------------------------------------------ block runner
    def _block_runner(self, name: str, warp: ir.Function, frame_bytes: int, barriers: bool, lockstep: bool,
                      by_shape: bool, warp_loop: bool) -> None:
        """`i32 run(ptr ctx)`: run blocks FIRST..FIRST+COUNT, each warp by warp, barrier by barrier
        (without barriers: each warp once, to completion; `lockstep`: see `lockstep_barriers`;
        `warp_loop`: the warp function runs each round's warps itself, cpu/warp_loop.py).
        `by_shape`: one warp loop for blocks whose %tid.x is aligned to the lanes and one for
        others, each with its own inlined copy of the warp function, where the aligned test is a
        constant (FunctionLowering._fork_lanes: that copy has no general blocks)."""
        fn = self.ir.globals[name]  # declared with the kernel (_declare)
        ctx = fn.args[0]
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        slot = lambda base, i, size=8: b.gep(base, [b.mul(i, ir.Constant(I64, size))], source_etype=V.I8)  # noqa: E731
        get = lambda i: b.load(slot(ctx, ir.Constant(I64, i)), typ=I64)  # noqa: E731
        put = lambda i, v: b.store(v, slot(ctx, ir.Constant(I64, i)))  # noqa: E731
        threads = b.mul(b.mul(get(Ctx.BLOCK_X), get(Ctx.BLOCK_Y)), get(Ctx.BLOCK_Z))
        aligned = lane_masks.aligned(b, get(Ctx.BLOCK_X), get(Ctx.BLOCK_Y), get(Ctx.BLOCK_Z))
        nwarps = b.udiv(b.add(threads, ir.Constant(I64, WARP - 1)), ir.Constant(I64, WARP))
        put(Ctx.NWARPS, nwarps)
        frames = b.inttoptr(get(Ctx.FRAMES), PTR)
        bars = b.inttoptr(get(Ctx.BARRIERS), PTR)
        stop = b.inttoptr(get(Ctx.STOP), PTR)
        frame_of = lambda w: b.gep(frames, [b.mul(w, ir.Constant(I64, frame_bytes))], source_etype=V.I8)  # noqa: E731
        hdr = lambda fr, s: b.gep(fr, [ir.Constant(I64, 4 * s)], source_etype=V.I8)  # noqa: E731
        bar_field = lambda i, f: b.gep(bars, [b.add(b.mul(i, ir.Constant(I64, 8 * BAR_SLOTS)),  # noqa: E731
                                                    ir.Constant(I64, 8 * f))], source_etype=V.I8)
        first, count = get(Ctx.FIRST), get(Ctx.COUNT)
        gx, gy = get(Ctx.GRID_X), get(Ctx.GRID_Y)
        with _for(b, first, b.add(first, count)) as (blk, exit_loop):
            with b.if_then(b.icmp_unsigned("!=", b.load(stop, typ=I32), ir.Constant(I32, 0)), likely=False):
                b.ret(ir.Constant(I32, 0))
            self._next_cta(b, blk, first, gx, gy, get, put)
            if not barriers:
                def each_warp(shape: ir.Value) -> None:
                    with _for(b, ir.Constant(I64, 0), nwarps) as (w, _):
                        fr = frame_of(w)
                        b.store(b.trunc(w, I32), hdr(fr, Frame.WARP))
                        r = b.call(warp, [ctx, fr, ir.Constant(I32, 0), shape])
                        with b.if_then(b.icmp_signed("<", r, ir.Constant(I32, 0)), likely=False):
                            put(Ctx.FAULT_BLOCK, blk)
                            b.store(ir.Constant(I32, 1), stop)
                            b.ret(b.neg(r))
                if by_shape:
                    with b.if_else(aligned) as (then, otherwise):
                        with then:
                            each_warp(ir.Constant(I1, 1))
                        with otherwise:
                            each_warp(ir.Constant(I1, 0))
                else:
                    each_warp(aligned)
            elif lockstep:
                self._lockstep_rounds(b, warp, ctx, nwarps, frame_of, hdr, blk, stop, put, aligned, warp_loop)
            else:
                b.call(self.libc("llvm.memset.p0.i64", ir.VoidType(), [PTR, V.I8, I64, I1]),
                       [bars, ir.Constant(V.I8, 0), ir.Constant(I64, NBARRIERS * BAR_SLOTS * 8), ir.Constant(I1, 0)])
                with _for(b, ir.Constant(I64, 0), nwarps) as (w, _):
                    fr = frame_of(w)
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
                epoch = get(Ctx.MBAR_EPOCH)
                with _for(b, ir.Constant(I64, 0), nwarps) as (w, _):
                    fr = frame_of(w)
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
                                put(Ctx.FAULT_BLOCK, blk)
                                b.store(ir.Constant(I32, 1), stop)
                                b.ret(b.neg(r))
                            b.store(b.select(b.icmp_signed("==", r, ir.Constant(I32, 0)), ir.Constant(I32, -1), r),
                                    hdr(fr, Frame.STATE))
                            bar_id = b.zext(b.load(hdr(fr, Frame.BAR_ID), typ=I32), I64)
                            b.store(b.trunc(b.load(bar_field(bar_id, BarSlot.GEN), typ=I64), I32), hdr(fr, Frame.WAITGEN))
                            # a barrier fills when threads arrive at it (the one this warp stops
                            # at, those it passed with bar.arrive) or when threads exit (it then
                            # waits for fewer): all barriers are tested only after those two
                            touched = get(Ctx.BAR_TOUCHED)
                            stopped = b.select(b.icmp_signed(">", r, ir.Constant(I32, 0)),
                                               b.shl(ir.Constant(I64, 1), b.and_(bar_id, ir.Constant(I64, 63))),
                                               ir.Constant(I64, 0))
                            everything = b.icmp_unsigned("!=", b.or_(exited, touched), ir.Constant(I64, 0))
                            which = b.select(everything, ir.Constant(I64, -1), stopped)
                            which = b.and_(which, ir.Constant(I64, (1 << NBARRIERS) - 1))
                            with b.if_then(everything, likely=False):
                                put(Ctx.BAR_TOUCHED, ir.Constant(I64, 0))
                            self._release(b, bar_field, b.load(total, typ=I64), which)
                b.cbranch(b.icmp_unsigned("==", b.load(left, typ=I64), ir.Constant(I64, 0)), block_done,
                          fn.append_basic_block("check_progress"))
                b.position_at_end(fn.blocks[-1])
                with b.if_then(b.icmp_unsigned("==", b.load(ran, typ=I64), ir.Constant(I64, 0)), likely=False):
                    put(Ctx.FAULT_BLOCK, blk)  # every live warp waits at a barrier no one else reaches
                    put(Ctx.FAULT_ARG, ir.Constant(I64, FAULT_DEADLOCK))
                    b.store(ir.Constant(I32, 1), stop)
                    b.ret(ir.Constant(I32, 719))
                # every warp that ran only yielded at failed mbarrier waits and no mbarrier changed:
                # the same again next round; after STALLED_ROUNDS of those the block is deadlocked
                idle = b.and_(b.icmp_unsigned("==", b.load(moved, typ=I64), ir.Constant(I64, 0)),
                              b.icmp_unsigned("==", get(Ctx.MBAR_EPOCH), epoch))
                b.store(b.select(idle, b.add(b.load(stalled, typ=I64), ir.Constant(I64, 1)), ir.Constant(I64, 0)), stalled)
                with b.if_then(b.icmp_unsigned(">=", b.load(stalled, typ=I64), ir.Constant(I64, STALLED_ROUNDS)),
                               likely=False):
                    put(Ctx.FAULT_BLOCK, blk)
                    put(Ctx.FAULT_ARG, ir.Constant(I64, FAULT_DEADLOCK))
                    b.store(ir.Constant(I32, 1), stop)
                    b.ret(ir.Constant(I32, 719))
                b.branch(sched)
                b.position_at_end(block_done)
        b.ret(ir.Constant(I32, 0))

    def _lockstep_rounds(self, b: ir.IRBuilder, warp: ir.Function, ctx, nwarps, frame_of, hdr, blk, stop, put,
                         aligned: ir.Value, warp_loop: bool) -> None:
        """Rounds in which every unfinished warp runs to its next barrier, in warp order, until all
        have finished: each round ends with every unfinished warp at the kernel's one barrier.
        `warp_loop`: one call runs a round (it returns whether some warp stopped at the barrier)."""
        with _for(b, ir.Constant(I64, 0), nwarps) as (w, _):
            fr = frame_of(w)
            b.store(b.trunc(w, I32), hdr(fr, Frame.WARP))
            b.store(ir.Constant(I32, 0), hdr(fr, Frame.STATE))
        fn = b.function
        rounds, done = fn.append_basic_block("rounds"), fn.append_basic_block("rounds.done")
        left = None if warp_loop else V.entry_alloca(b, I1)  # some warp stopped at the barrier this round
        b.branch(rounds)
        b.position_at_end(rounds)
        if warp_loop:
            r = b.call(warp, [ctx, frame_of(ir.Constant(I64, 0)), ir.Constant(I32, 0), aligned])
            with b.if_then(b.icmp_signed("<", r, ir.Constant(I32, 0)), likely=False):
                put(Ctx.FAULT_BLOCK, blk)
                b.store(ir.Constant(I32, 1), stop)
                b.ret(b.neg(r))
            b.cbranch(b.icmp_signed(">", r, ir.Constant(I32, 0)), rounds, done)
            b.position_at_end(done)
            return
        b.store(ir.Constant(I1, 0), left)
        with _for(b, ir.Constant(I64, 0), nwarps) as (w, _):
            fr = frame_of(w)
            state = b.load(hdr(fr, Frame.STATE), typ=I32)
            with b.if_then(b.icmp_signed(">=", state, ir.Constant(I32, 0))):
                r = b.call(warp, [ctx, fr, state, aligned])
                with b.if_then(b.icmp_signed("<", r, ir.Constant(I32, 0)), likely=False):
                    put(Ctx.FAULT_BLOCK, blk)
                    b.store(ir.Constant(I32, 1), stop)
                    b.ret(b.neg(r))
                stopped = b.icmp_signed(">", r, ir.Constant(I32, 0))
                b.store(b.select(stopped, r, ir.Constant(I32, -1)), hdr(fr, Frame.STATE))
                b.store(b.or_(b.load(left, typ=I1), stopped), left)
        b.cbranch(b.load(left, typ=I1), rounds, done)
        b.position_at_end(done)

    def _next_cta(self, b: ir.IRBuilder, blk, first, gx, gy, get, put) -> None:
        """%ctaid of linear block `blk`: divide for the first block, then count (divisions are slow)."""
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

    def _release(self, b, bar_field, total_v, which) -> None:
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


def helpers_ir(triple: str, data_layout: str) -> str:
    """The module of the helpers every kernel's module declares (memory.SHARED_HELPERS)."""
    lowering = ModuleLowering(ast.Module((8, 0), ("sm_80",), filename="zluda_helpers"), triple, data_layout)
    lowering.helpers_here = True
    define_shared_helpers(lowering)
    return str(lowering.ir)


@contextmanager
def _for(b: ir.IRBuilder, start: ir.Value, stop: ir.Value):
    """A counted loop; yields (index, exit block)."""
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
    b.branch(head)
    b.position_at_end(end)


def window_align(module: ast.Module, space: str, least: int) -> int:
    """The largest alignment a .shared or .local variable of the module declares (at least
    `least`). The launch aligns the windows' bases to BASE_ALIGN (runtime.py, native_launch.c);
    a variable asking for more is refused rather than misplaced."""
    def aligns(stmts: list) -> list[int]:
        return [a for s in stmts for a in (aligns(s.body) if isinstance(s, ast.Block) else
                                          [var_align(s)] if isinstance(s, ast.Variable) and s.space == space else [])]

    found = [var_align(v) for v in module.variables() if v.space == space]
    found += [a for f in module.functions() for a in aligns(f.body or [])]
    align = max([least, *found])
    if align > BASE_ALIGN:
        raise UnsupportedError(f".{space} variable with .align {align} (at most {BASE_ALIGN})")
    return align
