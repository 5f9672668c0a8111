"""Lowering of one PTX function to a warp function: registers, operands, divergence.

Every register is a `<32 x iN>` alloca (promoted to SSA by LLVM). Each lane has a program
counter (its next block, numbered in reverse post-order); the dispatcher always runs the
lowest-numbered block some lane waits at, for exactly the lanes waiting there, so divergent
lanes reconverge at the earliest point and any CFG works (loops with per-lane trip counts,
early exits, exit inside calls).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from llvmlite import ir

from zluda_py.compiler import cfg
from zluda_py.compiler.cpu import affine, lane_demand, values as V
from zluda_py.compiler.cpu.abi import DONE, FAULT_STACK, FRAME_HEADER, RESERVED_SMEM, WARP, Ctx, Frame
from zluda_py.compiler.cpu.atomics import AtomicsMixin
from zluda_py.compiler.cpu.calls import CallMixin
from zluda_py.compiler.cpu.collectives import WarpMixin
from zluda_py.compiler.cpu.lane_masks import LaneMasks
from zluda_py.compiler.cpu.mbarrier import MbarrierMixin
from zluda_py.compiler.cpu.mma import MmaMixin
from zluda_py.compiler.cpu.scalar_lanes import ScalarLanesMixin
from zluda_py.compiler.cpu.memory import HALF, MemoryMixin
from zluda_py.compiler.cpu.texops import TextureMixin
from zluda_py.compiler.cpu.thread_ids import call_tid_3d
from zluda_py.compiler.cpu.warp_loop import WarpLoopMixin
from zluda_py.compiler.errors import CUDA_ERROR_LAUNCH_FAILED, UnsupportedError, unsupported
from zluda_py.compiler.lanes import Lanes, ptx_bits
from zluda_py.compiler.layout import kernel_params, reserved_smem_offset
from zluda_py.compiler.memops import cp_async_form, cvta_form, space_of, wide_atomic_op
from zluda_py.compiler.matrix import matrix_form, mma_form, wmma_form
from zluda_py.compiler.mbarrier import is_wait, mbarrier_form
from zluda_py.compiler.lowering import local_name, lower_mov_vector, lower_semantic, mov_form
from zluda_py.compiler.ptxtypes import align_up, immediate_bits, var_align, var_size
from zluda_py.compiler.semantics import SEMANTICS, nan_payload
from zluda_py.ptx import ast

if TYPE_CHECKING:
    from zluda_py.compiler.cpu.module import ModuleLowering

I1, I32, I64, PTR = V.I1, V.I32, V.I64, V.PTR

# Instructions with no effect on this target (ordering is already sequentially consistent
# per warp and atomics use seq_cst). This includes every `fence.proxy.*` (`.async`,
# `.async.shared::cta`, ...) and `fence.mbarrier_init`: the CPU has one coherent memory seen
# the same way by every "proxy", and our asynchronous copies (cp.async, cp.async.bulk) are
# done when they execute, so there is nothing to order between proxies.
NO_OPS = {"membar", "fence", "prefetch", "prefetchu", "pmevent", "discard", "applypriority",
          "createpolicy", "griddepcontrol", "setmaxnreg", "nanosleep"}
# PTX instructions in a function above which no converged clones are made: a clone doubles a
# block's IR. cub's 900-instruction scan kernels compiled 4x faster without them while Thrust's
# scan of 4M ints took 1.0-1.5x as long (docs/cpu_target.md, "Converged clones only below 500 PTX
# instructions"); its 400-450-instruction reduce kernels compile 2.5x faster without them and,
# with the whole-warp tests below, reduce as fast ("Whole-warp accesses without clones"). No
# kernel of the corpus lies between 190 and 400 instructions: the limit sits in that gap.
CLONE_LIMIT = 300
# PTX instructions up to which a function without converged clones still moves a whole warp's
# `ends`/`check` accesses inline after one test (MemoryMixin._whole_fits), else through the
# per-lane helper: ~25 IR lines per site, +40 % on cub's 950-instruction scan kernels
WHOLE_WARP_LIMIT = 500
FRAME_REGS_LIMIT = 2000  # PTX instructions above which a kernel keeps its registers in the warp frame
SEARCH = -1  # the dispatcher's `want`: find the lowest block a lane waits at
# PTX instructions up to which a side before a return (`if (lane == 0) store; ret`) runs in place
# in a converged warp instead of through the dispatcher: one more copy of the block per split
SIDE_LIMIT = 8
# launch-record slots the host sets before a launch and nothing changes during it
LAUNCH_CONSTANT = frozenset({Ctx.PARAMS, Ctx.GRID_X, Ctx.GRID_Y, Ctx.GRID_Z, Ctx.BLOCK_X, Ctx.BLOCK_Y, Ctx.BLOCK_Z})
# Families we refuse: the tensor cores past mma.sync, wmma and the matrix moves (cpu/mma.py).
REFUSED = {"wgmma", "tcgen05", "tensormap"}

# Per-opcode form checks of the target's own handlers: each raises the precise unsupported
# error for a modifier combination its handler does not translate. `zluda ptx coverage` asks
# the same functions, so the report and the compiler cannot disagree.
FORM_CHECKS: dict[str, Callable[[ast.Instruction], object]] = {"atom": wide_atomic_op, "red": wide_atomic_op,
                                                                "cp": cp_async_form, "mov": mov_form, "cvta": cvta_form,
                                                                "mbarrier": mbarrier_form, "mma": mma_form,
                                                                "ldmatrix": matrix_form, "stmatrix": matrix_form,
                                                                "movmatrix": matrix_form, "wmma": wmma_form}


class _DecidedClones:
    """Converged blocks as seen from where a row group's test held (FunctionLowering._fork_rows):
    clones lowered with the group decided, made on first use, except blocks that may change
    what the test saw (the root's definition) or that barriers, calls and waits reach from
    elsewhere; at most CLONES of them."""

    CLONES = 8

    def __init__(self, fn: "FunctionLowering", shared, group: tuple) -> None:
        self.fn, self.shared, self.made, self.pending = fn, shared, {}, []
        root = fn.affine()._def_inst.get(group[0][0])
        self.keep_out = {i for i, blk in enumerate(fn.body.blocks)
                         if root is None or any(x is root or x.opcode == "call" or cfg.is_block_barrier(x) or is_wait(x)
                                                for x in blk.insts)}

    def __getitem__(self, i: int) -> ir.Block:
        if i not in self.made:
            if i in self.keep_out or i in self.fn.never_converged or len(self.made) >= self.CLONES:
                return self.shared[i]
            self.made[i] = self.fn.llfn.append_basic_block(f"rows.all{i}")
            self.pending.append(i)
        return self.made[i]


def _successors(term: ir.Instruction | None) -> list[ir.Block]:
    if term is None:
        return []
    if term.opname == "switch":
        return [term.default, *(blk for _, blk in term.cases)]
    return [op for op in term.operands if isinstance(op, ir.Block)]


def check_form(inst: ast.Instruction) -> None:
    """Raise the unsupported error if this target does not translate `inst`'s form."""
    op = inst.opcode
    if op in REFUSED or (op in ("st", "red") and inst.has("async")):
        raise unsupported(inst)
    if op in FORM_CHECKS:
        FORM_CHECKS[op](inst)


@dataclass
class Symbol:
    """What a name used as an operand refers to.

    kind: kparam (offset into the kernel parameter blob), lparam (per-lane buffer: ptr,size),
    local (offset in this function's stack frame), shared (arena offset), global/const
    (a module global), func (a function), texref/surfref (a module word holding the handle of
    the object bound to a texture or surface reference).
    """

    kind: str
    offset: int = 0
    ptr: ir.Value | None = None
    size: int = 0


class FunctionLowering(AtomicsMixin, MemoryMixin, ScalarLanesMixin, WarpMixin, CallMixin, TextureMixin, MbarrierMixin,
                       MmaMixin, WarpLoopMixin):
    def __init__(self, mod: "ModuleLowering", fn: ast.Function, llfn: ir.Function) -> None:
        self.mod = mod
        self.fn = fn
        self.llfn = llfn
        self.is_kernel = fn.kind == "entry"
        self.body = cfg.build(fn.body or [], keep=lambda op: op in SEMANTICS)
        self.live = cfg.live_in(self.body)
        # arithmetic whose NaN results need not be canonical: no use reads their bits
        self.nan_free = nan_payload.free_results((i for blk in self.body.blocks for i in blk.insts),
                                                 (v.name for v in (*fn.params, *fn.returns)))
        # Registers live into some block: only their inactive lanes' values can be read later.
        self.carried = set().union(*self.live) if self.live else set()
        self.guarded_inst = False
        self.decided: tuple[ast.Instruction, ir.Value | None] | None = None  # _fork_lanes' branch, its mask
        self.lane_need: dict[int, lane_demand.Need] = {}  # _fork_lanes: lanes read of a block's values
        self.lanes_forked = False  # _fork_lanes lowered a block twice
        entry = llfn.append_basic_block("entry")
        self.b = V.Builder(entry)
        self.lanes = Lanes(self.b, WARP)
        self.regs: dict[str, tuple[ir.Value, int]] = {}  # name -> (alloca, bits)
        self.uniform_regs: set[str] = set()  # registers held as one scalar (_scalar_registers)
        self.symbols: dict[str, Symbol] = {}
        # (id, barrier or None for a yield, bar.red destination, registers saved, block resumed at,
        # whether all 32 lanes resume there: lower_barrier)
        self.resume_sites: list[tuple[int, ast.Instruction | None, ast.Operand | None, set[str], int | None, bool]] = []
        self.frame_size = 0  # local (stack) bytes of this function
        self.callees: set[str] = set()  # .funcs it calls directly (the kernel's static stack)
        self.frame_offsets: dict[str, int] = {}  # register -> its place in a warp frame
        self.frame_end = FRAME_HEADER
        self.in_frame = self.is_kernel and sum(len(b.insts) for b in self.body.blocks) > FRAME_REGS_LIMIT
        self._kernel_params: dict[tuple[int, int], ir.Value] = {}  # (offset, bits) -> kernel_param's load
        self.resumable = False  # a kernel returning at barriers: its entry block runs at every resume
        self.lane_copies: dict[str, list[ir.Value]] = {}  # register -> its scalar lane copies (scalar_lanes.py)
        self.tid_copies: list[list[ir.Value]] = []

    # ------------------------------------------------------------------ setup
    def lower(self) -> None:
        b = self.b
        args = list(self.llfn.args)
        self.ctx = args[0]
        # Converged clones double the code; very large functions (cub/thrust) go without them.
        size = sum(len(blk.insts) for blk in self.body.blocks)
        # mbarrier waits park the lanes whose wait failed (see park): the dispatcher must see
        # every block, so such functions have no converged clones
        self.has_waits = self.is_kernel and any(is_wait(i) for blk in self.body.blocks for i in blk.insts)
        self.cloned = size <= CLONE_LIMIT and not self.has_waits
        has_barriers = self.has_waits or any(cfg.is_block_barrier(i) for blk in self.body.blocks for i in blk.insts)
        if self.is_kernel:
            self.resume, self.sp = args[2], ir.Constant(I64, 0)
            # a small lockstep kernel whose region repeats runs each round of the block's warps in
            # its warp function (warp_loop.py; registers in the frame are places in the first warp's)
            self.warp_loop = has_barriers and self.cloned and not self.in_frame and self.lockstep_barriers() \
                and self.region_repeats()
            if self.warp_loop:
                self.open_warp_loop(args[1])
            else:
                self._frame = args[1]
                self._warp = self._frame_i32(Frame.WARP)
        else:
            self._warp, self.sp, entry_mask = args[1], args[2], args[3]
        self._declare_variables()
        self._declare_params(args)
        self.pc = self._slot("pc", 32)
        self.exited = b.alloca(I32, name="exited")
        b.store(ir.Constant(I32, 0), self.exited)
        self._specials_setup()
        self.dispatch_block = self.llfn.append_basic_block("dispatch")
        self.blocks = [self.llfn.append_basic_block(f"bb{i}" + (f".{local_name(blk.label)}" if blk.label else ""))
                       for i, blk in enumerate(self.body.blocks)]
        self.parked = None
        if self.has_waits:
            self.parked = b.alloca(I32, name="parked")
            b.store(ir.Constant(I32, 0), self.parked)
        self.uniform_regs = self._scalar_registers()
        self.whole_warp = size <= WHOLE_WARP_LIMIT
        # blocks only one lane ever reaches (`if (threadIdx.x == 0)`) get no clone: the
        # dispatcher runs their divergent copy should a whole warp arrive after all
        self.never_converged = self._one_lane_blocks() if self.cloned else set()
        self.converged_blocks = [llb if i in self.never_converged else self.llfn.append_basic_block(f"all{i}")
                                 for i, llb in enumerate(self.blocks)] if self.cloned else self.blocks
        if self.is_kernel:
            start = self.llfn.append_basic_block("start")
            self.resumable = has_barriers
            self._set_up_lane_copies()
            if self.warp_loop:
                self.resume = self.warp_loop_head()
            self.resume_block = self.llfn.append_basic_block("resume") if has_barriers else start
            self.entry_switch = b.switch(self.resume, self.resume_block)
            # %tid set up once, for the start and the resume points whose warp may read it
            # (_emit_resume: they enter through this block too), not once per point: ~50 IR
            # lines each (the 3-D division's loops)
            self.tid_block = self.llfn.append_basic_block("tid.setup") if self.tid_slots and has_barriers else None
            self.entry_switch.add_case(ir.Constant(I32, 0), self.tid_block or start)
            if self.tid_block is not None:
                b.position_at_end(self.tid_block)
                self.set_up_tid()
                self.tid_switch = b.switch(self.resume, self.resume_block)
                self.tid_switch.add_case(ir.Constant(I32, 0), start)
            b.position_at_end(start)
            if self.tid_slots and self.tid_block is None:
                self.set_up_tid()
        self._direct: dict[ir.Block, ir.Value] = {}  # block -> what it passes the dispatcher's `want`
        self._direct_targets: set[int] = set()
        if self.is_kernel:
            self._start_warp()
        else:
            self._check_stack(entry_mask)
            b.store(b.select(entry_mask, V.splat_const(I32, 0), V.splat_const(I32, DONE)), self.pc, align=16)
            self.enter_if_whole(entry_mask, 0)
        self._emit_dispatch()
        for blk, llb, conv in zip(self.body.blocks, self.blocks, self.converged_blocks):
            b.position_at_end(llb)
            self._lower_block(blk, converged=False)
            if conv is not llb:
                b.position_at_end(conv)
                self._lower_block(blk, converged=True)
        if self.is_kernel:
            self._emit_resume()
        self._keep_dispatcher_loop()
        for target in sorted(self._direct_targets):
            self._want_switch.add_case(ir.Constant(I32, target), self.converged_blocks[target])
        for blk in self.llfn.blocks:
            if self.dispatch_block in _successors(blk.terminator):
                self._want.add_incoming(self._direct.get(blk, ir.Constant(I32, SEARCH)), blk)

    def enter_if_whole(self, lanes: ir.Value, target: int) -> None:
        """Branch to the dispatcher after `lanes` were sent to `target`; when they are all 32
        lanes and every lane is there, it enters `target`'s converged clone without searching the
        pc vector (through the dispatcher's block, so that its loop keeps one entry)."""
        b = self.b
        if self.cloned and target not in self.never_converged:
            whole = b.icmp_unsigned("==", V.mask_bits(b, lanes), ir.Constant(I32, -1))
            self._direct[b.block] = b.select(whole, ir.Constant(I32, target), ir.Constant(I32, SEARCH))
            self._direct_targets.add(target)
        b.branch(self.dispatch_block)

    def _keep_dispatcher_loop(self) -> None:
        """Mark the dispatcher's loop (every edge back to `dispatch`) `llvm.licm.disable`. LICM
        hoisted every loop-invariant value of the function (alignment masks and widened address
        vectors of each memory access, per-lane values reloaded at a barrier) above the
        dispatcher, where the allocator spilled them: each entry and resume paid for all of them.
        Measured: scan 2.2x, 2-D stencil 1.4x, saxpy 1.3x faster; loops inside blocks keep LICM."""
        md = getattr(self.mod, "_dispatcher_loop_md", None)
        if md is None:
            hint = self.mod.ir.add_metadata([ir.MetaDataString(self.mod.ir, "llvm.licm.disable")])
            md = self.mod.ir.add_metadata([hint, hint])  # a node of its own (llvmlite shares equal ones)
            md.operands = (md, hint)  # a loop ID starts with itself
            self.mod._dispatcher_loop_md = md
        for blk in self.llfn.blocks:
            term = blk.terminator
            if term is not None and term.opname == "br" and self.dispatch_block in term.operands:
                term.set_metadata("llvm.loop", md)

    def _scalar_registers(self) -> set[str]:
        """Registers kept as one scalar instead of a 32-lane vector (`affine.warp_uniform`): in
        kernels whose lanes never park at mbarrier waits (parked lanes run a block apart from the
        others). Fewer vectors to carry across the dispatcher and to save at barriers; in a
        kernel whose registers live in the warp frame, scalar loads and stores of its place there
        instead of vector ones (cub's radix sort onesweep kernel: ~8 % less compile time)."""
        if not self.is_kernel or self.has_waits:
            return set()
        params = {n for n, s in self.symbols.items() if s.kind == "kparam"}
        names = affine.warp_uniform(self.body, {n: bits for n, (_, bits) in self.regs.items()},
                                    self._uniform_symbol, params.__contains__)
        if self.in_frame:
            return names  # the scalar takes the start of the register's place in the frame
        for name in [n for n in self.regs if n in names]:  # in declaration order, not the set's (hash seed)
            vector, bits = self.regs[name]
            vector.parent.instructions.remove(vector)  # the 32-lane slot _new_reg made, unused
            self.regs[name] = (self.b.alloca(ir.IntType(bits), name=local_name(name.lstrip("%"))), bits)
        return names

    def _one_lane_blocks(self) -> set[int]:
        """Blocks entered only through the side of a branch that at most one lane of a warp takes
        (`affine.Analysis.one_lane_side`), or from such blocks."""
        blocks, preds = self.body.blocks, [[] for _ in self.body.blocks]
        for blk in blocks:
            for succ in blk.succs:
                preds[succ].append(blk)

        def one_lane_edge(pred: cfg.BasicBlock, to: int) -> bool:
            term = pred.insts[-1] if pred.insts else None
            if term is None or term.opcode != "bra" or term.guard is None:
                return False
            target = self.body.labels.get(next((o.name for o in term.operands if isinstance(o, ast.Sym)), ""))
            side = self.affine().one_lane_side(term)
            if side is None or target == pred.fallthrough:
                return False
            return to == (target if side else pred.fallthrough)

        never: set[int] = set()
        changed = True
        while changed:
            changed = False
            for blk in blocks[1:]:
                if blk.index not in never and preds[blk.index] and all(
                        p.index in never or one_lane_edge(p, blk.index) for p in preds[blk.index]):
                    never.add(blk.index)
                    changed = True
        return never

    def _frame_i32(self, slot: int) -> ir.Value:
        return self.b.load(self.b.gep(self.frame, [ir.Constant(I64, slot * 4)], source_etype=V.I8), typ=I32)

    def _set_frame_i32(self, slot: int, value: ir.Value) -> None:
        self.b.store(value, self.b.gep(self.frame, [ir.Constant(I64, slot * 4)], source_etype=V.I8))

    def ctx_i64(self, slot: int, b: ir.IRBuilder | None = None) -> ir.Value:
        b = b or self.b
        v = b.load(b.gep(self.ctx, [ir.Constant(I64, slot * 8)], source_etype=V.I8), typ=I64)
        if slot in LAUNCH_CONSTANT:  # set before the launch: loop-invariant despite the stores between
            v.set_metadata("invariant.load", self.mod.ir.add_metadata([]))
        return v

    def preloads_kernel_params(self) -> bool:
        """`ld.param` of a kernel parameter reads `kernel_param`: in kernels run once per warp
        (a resumable one would reload every parameter at every resume) where no `st.param` may
        write one (PTX gives kernels no such store; kept exact all the same)."""
        if not hasattr(self, "_preloads"):
            def own_buffer(addr: ast.Operand) -> bool:
                return isinstance(addr, ast.Addr) and isinstance(addr.base, ast.Sym) \
                    and getattr(self.symbols.get(addr.base.name), "kind", None) == "lparam"
            self._preloads = self.is_kernel and not self.resumable and not any(
                i.opcode == "st" and space_of(i) == "param" and not own_buffer(i.operands[0])
                for blk in self.body.blocks for i in blk.insts)
        return self._preloads

    def kernel_param(self, offset: int, elt: ir.IntType) -> ir.Value:
        """A kernel parameter's value (`ld.param` of it), loaded once in the warp function's entry
        block: with the warp loop inlined into the block runner, LLVM hoists it out of that loop
        (the parameter blob is read-only for the whole launch: PTX gives kernels no way to write it)."""
        key = (offset, elt.width)
        if key not in self._kernel_params:
            b = ir.IRBuilder(self.llfn.entry_basic_block)
            b.position_before(self.llfn.entry_basic_block.terminator)
            address = b.add(self.ctx_i64(Ctx.PARAMS, b), ir.Constant(I64, offset))
            v = b.load(b.inttoptr(address, PTR), typ=elt)
            v.set_metadata("invariant.load", self.mod.ir.add_metadata([]))
            self._kernel_params[key] = v
        return self._kernel_params[key]

    def set_ctx_i64(self, slot: int, value: ir.Value) -> None:
        self.b.store(value, self.b.gep(self.ctx, [ir.Constant(I64, slot * 8)], source_etype=V.I8))

    def _declare_variables(self) -> None:
        b = self.b
        for v in self.body.variables:
            if v.space == "reg":
                bits = ptx_bits(v.type) if v.vector is None else None
                if bits is None:
                    raise UnsupportedError(f"vector register .v{v.vector}", v.pos)
                self._new_reg(v.name, bits)
            elif v.space == "local":
                self.frame_size = align_up(self.frame_size, var_align(v))
                self.symbols[v.name] = Symbol("local", self.frame_size)
                self.frame_size += var_size(v)
            elif v.space == "param":
                size = var_size(v)
                buf = b.alloca(ir.ArrayType(V.I8, size * WARP), name=local_name(v.name))
                buf.align = 16
                self.symbols[v.name] = Symbol("lparam", ptr=buf, size=size)
            elif v.space in ("shared", "global", "const"):
                self.symbols[v.name] = self.mod.function_variable(self.fn, v)
            else:
                raise UnsupportedError(f".{v.space} variable {v.name}", v.pos)
        # every frame a multiple of the module's largest .local alignment: a callee's frame starts
        # where its caller's ends, so each stays aligned in a window aligned to it
        self.frame_size = align_up(self.frame_size, self.mod.local_align)
        self._new_reg("%cc", 1)

    def _slot(self, name: str, bits: int) -> ir.Value:
        """Storage of a register: an alloca (promoted to SSA values by LLVM), or for very large
        kernels its place in the warp frame (no SSA webs across the dispatcher, which take LLVM
        minutes to optimise, and nothing to save at barriers)."""
        self.frame_offsets[name] = self.frame_end
        self.frame_end += max(16, WARP * bits // 8)
        if self.in_frame:
            return self.b.gep(self.frame, [ir.Constant(I64, self.frame_offsets[name])], source_etype=V.I8)
        return self.b.alloca(V.vec(ir.IntType(bits)), name=local_name(name.lstrip("%")))

    def _new_reg(self, name: str, bits: int) -> None:
        # no initial store: PTX leaves unwritten registers undefined, as is a fresh alloca
        self.regs[name] = (self._slot(name, bits), bits)

    def _declare_params(self, args: list[ir.Value]) -> None:
        if self.is_kernel:
            for p in kernel_params(self.fn)[0]:
                self.symbols[p["name"]] = Symbol("kparam", p["offset"], size=p["size"])
            return
        for p, arg in zip([*self.fn.returns, *self.fn.params], args[4:]):
            if p.space == "reg":
                self._new_reg(p.name, ptx_bits(p.type))
                self.symbols[p.name] = Symbol("regparam", ptr=arg, size=var_size(p))
                if p not in self.fn.returns:
                    slot, bits = self.regs[p.name]
                    self.b.store(self.b.load(arg, typ=V.vec(ir.IntType(bits)), align=16), slot, align=16)
            else:
                self.symbols[p.name] = Symbol("lparam", ptr=arg, size=var_size(p))

    def _start_warp(self) -> None:
        """Send the lanes that exist to block 0. Only the last warp of a block may be partial: a
        scalar test of the block's thread count, and a whole warp starts with a constant pc vector
        in block 0's converged clone, without a vector compare."""
        b = self.b
        threads = b.trunc(b.mul(b.mul(self.ctx_i64(Ctx.BLOCK_X), self.ctx_i64(Ctx.BLOCK_Y)),
                                self.ctx_i64(Ctx.BLOCK_Z)), I32)
        whole, part = self.llfn.append_basic_block("start.whole"), self.llfn.append_basic_block("start.part")
        b.cbranch(b.icmp_unsigned("<=", b.mul(b.add(self.warp, ir.Constant(I32, 1)), ir.Constant(I32, WARP)), threads),
                  whole, part)
        b.position_at_end(whole)
        b.store(V.splat_const(I32, 0), self.pc, align=16)
        if self.cloned and 0 not in self.never_converged:
            self._direct[whole] = ir.Constant(I32, 0)
            self._direct_targets.add(0)
        b.branch(self.dispatch_block)
        b.position_at_end(part)
        exists = b.icmp_unsigned("<", self.thread_index, V.splat(b, threads))
        b.store(b.select(exists, V.splat_const(I32, 0), V.splat_const(I32, DONE)), self.pc, align=16)
        b.branch(self.dispatch_block)

    def _check_stack(self, lanes: ir.Value) -> None:
        """A call whose frame does not fit the per-thread stack faults like a GPU stack overflow."""
        if self.frame_size == 0:
            return
        b = self.b
        end = b.add(self.sp, ir.Constant(I64, self.frame_size))
        over = b.icmp_unsigned(">", end, self.ctx_i64(Ctx.STACK_SIZE))
        with b.if_then(over, likely=False):
            self.set_ctx_i64(Ctx.STATUS, ir.Constant(I64, CUDA_ERROR_LAUNCH_FAILED))
            self.set_ctx_i64(Ctx.FAULT_LANES, b.zext(V.mask_bits(b, lanes), I64))
            self.set_ctx_i64(Ctx.FAULT_WARP, b.zext(self.warp, I64))
            self.set_ctx_i64(Ctx.FAULT_ARG, ir.Constant(I64, FAULT_STACK))
            b.ret(ir.Constant(I32, 0))

    # ------------------------------------------------------------------ divergence
    def _emit_dispatch(self) -> None:
        b = self.b
        b.position_at_end(self.dispatch_block)
        self._want = b.phi(I32, name="want")  # a converged clone to enter, or SEARCH (enter_if_whole)
        search = self.llfn.append_basic_block("dispatch.search")
        self._want_switch = b.switch(self._want, search)
        b.position_at_end(search)
        pcv = b.load(self.pc, typ=V.vec(I32), align=16)
        if self.parked is not None:  # parked lanes run only when no other lane can (see park)
            pcv = b.select(V.bits_mask(b, b.load(self.parked, typ=I32)), V.splat_const(I32, DONE), pcv)
        low = V.reduce(b, "umin", pcv)
        self.mask = b.icmp_unsigned("==", pcv, V.splat(b, low))
        finished = self.finished = self.llfn.append_basic_block("finished")
        general = self.llfn.append_basic_block("dispatch.some")
        converged = self.llfn.append_basic_block("dispatch.all")
        full = b.icmp_unsigned("==", V.mask_bits(b, self.mask), ir.Constant(I32, -1))
        b.cbranch(full if self.cloned else ir.Constant(I1, 0), converged, general)
        for where, targets in ((general, self.blocks), (converged, self.converged_blocks)):
            b.position_at_end(where)
            sw = b.switch(low, finished)
            for i, llb in enumerate(targets):
                sw.add_case(ir.Constant(I32, i), llb)
        b.position_at_end(finished)
        if self.parked is not None:
            parked = b.load(self.parked, typ=I32)
            with b.if_then(b.icmp_unsigned("!=", parked, ir.Constant(I32, 0))):
                self._yield_parked()
        if self.is_kernel:
            self._set_frame_i32(Frame.LIVE, ir.Constant(I32, 0))
            self.stop_warp(ir.Constant(I32, -1) if self.warp_loop else ir.Constant(I32, 0))
        else:
            for p in self.fn.returns:  # .reg return values go back through the caller's buffer
                if p.space == "reg":
                    slot, bits = self.regs[p.name]
                    t = V.vec(ir.IntType(bits))
                    b.store(b.load(slot, typ=t, align=16), self.symbols[p.name].ptr, align=16)
            b.ret(b.load(self.exited, typ=I32))

    def park(self, lanes: ir.Value) -> None:
        """`lanes` failed an mbarrier wait: they will spin until another thread arrives, so the
        dispatcher leaves them aside while other lanes of the warp can run (they may be the ones
        to arrive); once only parked lanes are left, `_yield_parked` lets the other warps run."""
        b = self.b
        b.store(b.or_(b.load(self.parked, typ=I32), V.mask_bits(b, lanes)), self.parked)

    def _yield_parked(self) -> None:
        """Every lane that has not finished is parked: return to the block runner (a kernel:
        save every register, resume here later, when the parked lanes retry their waits). A
        .func cannot return to the runner; the inliner inlines every .func with an mbarrier
        wait (compiler/inline.py), so this is reached only in a kernel."""
        b = self.b
        b.store(ir.Constant(I32, 0), self.parked)
        pcv = b.load(self.pc, typ=V.vec(I32), align=16)
        self._set_frame_i32(Frame.LIVE, V.popcount(b, V.mask_bits(b, b.icmp_unsigned("!=", pcv, V.splat_const(I32, DONE)))))
        self._set_frame_i32(Frame.YIELD, ir.Constant(I32, 1))
        self._set_frame_i32(Frame.SPILL_ALL, ir.Constant(I32, 1))
        site = len(self.resume_sites) + 1
        self.resume_sites.append((site, None, None, self.carried, None, False))
        self.spill(self.carried)
        b.ret(ir.Constant(I32, site))

    def goto(self, lanes: ir.Value, target: int | None) -> None:
        """Send `lanes` to block `target` (None: they finish)."""
        b = self.b
        t = ir.Constant(I32, DONE if target is None else target)
        b.store(b.select(lanes, V.splat(b, t), b.load(self.pc, typ=V.vec(I32), align=16)), self.pc, align=16)

    def _lower_block(self, blk: cfg.BasicBlock, converged: bool) -> None:
        """Lower one block for the lanes waiting at it; `converged`: all 32 lanes are (mask is a constant,
        so LLVM drops the selects and masks), and uniform branches jump straight to the next
        converged block without the dispatcher."""
        self.cur_mask = V.ALL if converged else self.mask
        self.rows_decided = {}
        self._lower_from(blk, 0, converged)

    def _lower_from(self, blk: cfg.BasicBlock, start: int, converged: bool) -> None:
        """Lower `blk` from its instruction `start` on, its terminator included."""
        insts = blk.insts
        term = insts[-1] if insts and cfg.is_terminator(insts[-1]) else None
        body = insts if term is None else insts[:-1]
        if converged and start == 0 and self.decided is None and self._fork_lanes(blk, term):
            return
        for k in range(start, len(body)):
            if converged and self._fork_rows(blk, k):
                return
            self.lower_inst(body[k])
        b = self.b
        if term is None or term.opcode == "call":
            if term is not None:
                self.lower_inst(term)  # calls end a block: lanes may have exited inside
            self.jump(self.cur_mask, blk.fallthrough, converged)
            return
        mask = self.cur_mask
        taken = self.guarded(term, mask)
        op = term.opcode
        if op == "bra":
            target = self._bra_target(term)
            if term.guard is None:
                self.jump(mask, target, converged)
            else:
                self.branch(term, mask, taken, target, blk.fallthrough, converged)
            return
        if term.guard is not None:
            self.goto(b.and_(mask, b.not_(taken)), blk.fallthrough)
        if op == "brx":
            self.lower_brx(term, taken)
        elif op in ("ret", "exit"):
            if op == "exit" and not self.is_kernel:
                b.store(b.or_(b.load(self.exited, typ=I32), V.mask_bits(b, taken)), self.exited)
            self.goto(taken, None)
        elif op == "trap":
            with b.if_then(V.any_lane(b, taken)):
                self.fault(CUDA_ERROR_LAUNCH_FAILED, taken)
        else:
            self.lower_barrier(term, taken, blk.fallthrough)
            return
        # every lane of a converged warp leaving at an unguarded ret/exit: nothing left to run
        done = converged and term.guard is None and op in ("ret", "exit")
        b.branch(self.finished if done else self.dispatch_block)

    def _fork_rows(self, blk: cfg.BasicBlock, k: int) -> bool:
        """At a converged block's first access of a row group (`MemoryMixin.row_group`) that no
        earlier block holds, where more of it follow in the block or its successors: test the
        group's spans once and lower the rest of the block twice, where the test held without
        the group's tests, going on in converged blocks cloned for that decision
        (`_DecidedClones`), elsewhere as before. (Per access, the stencil's tests cost ~15 %:
        docs/cpu_target.md.) False: no fork here."""
        inst = blk.insts[k]
        group = self.row_group(inst) if self.cloned else None
        if group is None or self.rows_decided or inst.guard is not None:  # one fork a block: no 2**n tails
            return False
        if not any(self.row_group(later) == group for later in blk.insts[k + 1:]) \
                and not any(self.row_group(x) == group for i in blk.succs for x in self.body.blocks[i].insts):
            return False  # nothing in this block or the next ones to spare a test
        if any(self.row_group(x) == group for other in self.body.blocks[:blk.index] for x in other.insts):
            return False  # an earlier block forked: this one runs where its test failed, or rarely
        addr, space = inst.operands[1 if inst.opcode == "ld" else 0], space_of(inst)
        b = self.b
        lanes = self._lanes(inst, addr, space) or {}  # the lane copies where the register has them
        host = self._locate(addr, space)[0]
        tested, untested = self.llfn.append_basic_block("rows.group"), self.llfn.append_basic_block("rows.each")
        go = self.rows_go(lambda lane: lanes[lane][0] if lane in lanes
                          else b.extract_element(host, ir.Constant(I32, lane)), group[2])
        checked, fits = self.group_window(blk.insts[k:], group)
        if fits is not None:  # and the block's .shared rows inside the window: no test of their own
            go = b.and_(go, fits)
        b.cbranch(go, tested, untested).set_weights([1000, 1])
        shared = self.converged_blocks
        clones = _DecidedClones(self, shared, group)
        self.converged_blocks, self.rows_decided = clones, {group: True}
        b.position_at_end(tested)
        self.rows_checked = checked
        self._lower_from(blk, k, True)
        self.rows_checked = set()
        while clones.pending:
            i = clones.pending.pop()
            b.position_at_end(clones.made[i])
            self.cur_mask, self.rows_decided = V.ALL, {group: True}
            self._lower_from(self.body.blocks[i], 0, True)
        self.converged_blocks, self.rows_decided = shared, {group: False}  # each access tests itself
        self.cur_mask = V.ALL  # a side run in place by a tail's branch changes it
        b.position_at_end(untested)
        self._lower_from(blk, k, True)
        return True

    def jump(self, lanes: ir.Value, target: int | None, converged: bool) -> None:
        """All of `lanes` continue at `target`; a converged warp that stays whole skips the dispatcher."""
        b = self.b
        if converged and target is not None and target not in self.never_converged:
            whole = b.icmp_unsigned("==", V.mask_bits(b, lanes), ir.Constant(I32, -1))
            slow = self.llfn.append_basic_block("leave")
            b.cbranch(whole, self.converged_blocks[target], slow)
            b.position_at_end(slow)
        self.goto(lanes, target)
        b.branch(self.dispatch_block)

    def branch(self, bra: ast.Instruction, lanes: ir.Value, taken: ir.Value, target: int, other: int | None,
               converged: bool) -> None:
        """A conditional branch; in a converged warp a uniform condition stays on the fast path
        (and a branch `_fork_lanes` decided takes its constant mask)."""
        b = self.b
        if self.decided is not None and self.decided[0] is bra and lanes is V.ALL and self.decided[1] is not None:
            taken = self.decided[1]
        if converged and other is not None and lanes is V.ALL and bra.guard.reg in self.uniform_regs:
            # a whole warp on a warp-uniform predicate: every lane goes the same way, one scalar
            # branch (the lane-mask tests below leave LLVM an unreachable split to keep)
            go = b.load(self.regs[bra.guard.reg][0], typ=I1)
            b.cbranch(b.not_(go) if bra.guard.negated else go, self._converged_entry(lanes, target),
                      self._converged_entry(lanes, other))
            return
        if converged and other is not None:
            bits = V.mask_bits(b, taken)
            all_taken = self.llfn.append_basic_block("uniform")
            split = self.llfn.append_basic_block("diverge")
            none = b.icmp_unsigned("==", bits, ir.Constant(I32, 0))
            not_none = self.llfn.append_basic_block("some")
            b.cbranch(none, self._converged_entry(lanes, other), not_none)
            b.position_at_end(not_none)
            b.cbranch(b.icmp_unsigned("==", bits, ir.Constant(I32, -1)), all_taken, split)
            b.position_at_end(all_taken)
            b.branch(self._converged_entry(lanes, target))
            b.position_at_end(split)
            side = self._side_in_place(bra, target, other)
            if side is not None:
                join = other if side == target else target
                self._run_side(side, join, taken if side == target else b.and_(lanes, b.not_(taken)), lanes,
                               self._equal_side(bra) == (side == target))
                return
        self.goto(b.and_(lanes, b.not_(taken)), other)
        self.goto(taken, target)
        b.branch(self.dispatch_block)

    def _fork_lanes(self, blk: cfg.BasicBlock, term: ast.Instruction | None) -> bool:
        """A whole warp at a block ending in a branch whose lanes `lane_masks` knows where %tid.x
        is aligned to the lanes, which splits it with a side run in place or sends it one way:
        lower the block twice, behind the block runner's test of the block's shape.
        Where it holds, the branch takes the constant mask, and lanes of the block's values that
        only the side's lanes read are written as zeros (`lane_demand`; the reduction's upper
        halves); elsewhere as before. False: nothing done."""
        if not (term is not None and term.opcode == "bra" and term.guard is not None and self.is_kernel
                and self.cloned and self.cur_mask is V.ALL):
            return False
        if not hasattr(self, "_lane_masks"):
            self._lane_masks = LaneMasks(self.body)
        known = self._lane_masks.taken_lanes(term, self.affine().equality_setp(term))
        target, other = self._bra_target(term), blk.fallthrough
        side = self._side_in_place(term, target, other) if other is not None else None
        if known is None or other is None or known not in (0, lane_demand.ALL) and side is None:
            return False
        b = self.b
        self.lanes_forked = True
        aligned, general = self.llfn.append_basic_block("lanes.aligned"), self.llfn.append_basic_block("lanes.any")
        b.cbranch(self.llfn.args[3], aligned, general)  # the block runner's lane_masks.aligned
        rows_decided = self.rows_decided
        b.position_at_end(aligned)
        self.decided = (term, V.lane_consts(I1, [known >> k & 1 for k in range(WARP)]))
        if known not in (0, lane_demand.ALL):
            join = other if side == target else target
            end = self._end_need(term, known, side, join, side == target)
            self.lane_need = lane_demand.demanded(blk.insts[:-1], end, self._constant_value)
        self._lower_from(blk, 0, True)
        self.lane_need = {}
        self.cur_mask, self.rows_decided = V.ALL, rows_decided  # a side run in place changed the mask
        b.position_at_end(general)
        self.decided = (term, None)
        self._lower_from(blk, 0, True)
        self.decided = None
        return True

    def _end_need(self, term: ast.Instruction, known: int, side: int, join: int, taken: bool) -> lane_demand.Need:
        """What a block's end needs of its registers where its branch (`known`: the lanes taking
        it) runs `side` in place for its lanes (`taken`: those taking it) and goes on whole at `join`."""
        side_insts = self.body.blocks[side].insts
        if side_insts and cfg.is_terminator(side_insts[-1]):
            side_insts = side_insts[:-1]
        lanes = known if taken else ~known & lane_demand.ALL
        reads = lane_demand.side_reads(side_insts, lanes)
        need = {r: lane_demand.ALL if reads is None else reads.get(r, lane_demand.ALL) for r in self.live[side]}
        need.update({r: lane_demand.ALL for r in self.live[join]})
        need[term.guard.reg] = lane_demand.ALL
        return need

    def _constant_value(self, inst: ast.Instruction, op: ast.Operand) -> int | None:
        c = self.constant_operand(inst, op)
        return int(c.value) if isinstance(c, ast.Imm) else None

    def _side_in_place(self, bra: ast.Instruction, target: int, other: int) -> int | None:
        """The side of a split whose lanes a converged warp runs in place: a short block
        numbered before the other side whose only way on is to that other side (no call, exit,
        barrier or further branch), where the warp returns, after a `setp.eq/ne` (`lane == 0`,
        which splits every whole warp; an ordered compare such as `i < n` mostly does not), or
        where it waits at a block barrier after any compare (`if (t < stride) s[t] += ...;
        __syncthreads()`: the warp leaves for the block runner there anyway). The dispatcher
        would run the side first, for its lanes, and then find the whole warp at the other side;
        running it here skips that round trip (warp reduction 1.3x, tree reduction ~1.15x).
        Other sides measured slower (docs/cpu_target.md, "Short sides in place")."""
        equality = self.affine().equality_setp(bra) is not None
        for side, join in ((target, other), (other, target)):
            blk = self.body.blocks[side]
            term = blk.insts[-1] if blk.insts and cfg.is_terminator(blk.insts[-1]) else None
            if term is None:
                to = blk.fallthrough
            elif term.opcode == "bra" and term.guard is None:
                to = self._bra_target(term)
            else:
                continue
            end = self.body.blocks[join].insts
            only = end[0] if len(end) == 1 and end[0].guard is None else None
            returns = only is not None and only.opcode in ("ret", "exit") and equality
            waits = only is not None and cfg.is_block_barrier(only) and not only.has("arrive")
            if (returns or waits) and side < join and to == join and len(blk.insts) <= SIDE_LIMIT:
                return side
        return None

    def _run_side(self, side: int, join: int, side_lanes: ir.Value, lanes: ir.Value, equal: bool) -> None:
        """Block `side` for `side_lanes` (its divergent copy, in place), then the whole warp
        (`lanes`) at `join`, where the side leads. `equal`: the side of `lane == k`, mostly one
        lane, whose memory accesses first test for one active lane (MemoryMixin.one_lane)."""
        blk = self.body.blocks[side]
        self.cur_mask, self.one_lane, self.side_done = side_lanes, equal, []
        for inst in blk.insts[:-1] if blk.insts and cfg.is_terminator(blk.insts[-1]) else blk.insts:
            self.lower_inst(inst)
            self.side_done.append(inst)
        self.one_lane = False
        self.b.branch(self._converged_entry(lanes, join))

    def _equal_side(self, bra: ast.Instruction) -> bool | None:
        """For a branch on an integer `setp.eq/ne`: True when lanes whose operands are equal take
        it, False when they fall through; None for any other branch."""
        setp = self.affine().equality_setp(bra)
        return None if setp is None else ("eq" in setp.mods) != bra.guard.negated

    def _bra_target(self, bra: ast.Instruction) -> int:
        return self.body.labels[next(o for o in bra.operands if isinstance(o, ast.Sym)).name]

    def _converged_entry(self, lanes: ir.Value, target: int) -> ir.Block:
        """Where a whole warp continues at `target` from a converged block: its clone, or for a
        block without one, through the dispatcher (which runs its divergent copy)."""
        if target not in self.never_converged:
            return self.converged_blocks[target]
        via = self.llfn.append_basic_block("via.dispatch")
        with self.b.goto_block(via):
            self.goto(lanes, target)
            self.b.branch(self.dispatch_block)
        return via

    def fault(self, status: int, lanes: ir.Value, arg: ir.Value | None = None) -> None:
        """Record a fault in the launch record and leave the function (the caller checks)."""
        b = self.b
        self.set_ctx_i64(Ctx.STATUS, ir.Constant(I64, status))
        self.set_ctx_i64(Ctx.FAULT_LANES, b.zext(V.mask_bits(b, lanes), I64))
        self.set_ctx_i64(Ctx.FAULT_WARP, b.zext(self.warp, I64))
        if arg is not None:
            self.set_ctx_i64(Ctx.FAULT_ARG, arg)
        b.ret(ir.Constant(I32, -status if self.is_kernel else 0))

    def guarded(self, inst: ast.Instruction, mask: ir.Value) -> ir.Value:
        if inst.guard is None:
            return mask
        p = self.read_reg(inst.guard.reg, 1)
        if inst.guard.negated:
            p = self.b.not_(p)
        return self.b.and_(mask, p)

    # ------------------------------------------------------------------ instructions
    def lower_inst(self, inst: ast.Instruction) -> None:
        op = inst.opcode
        check_form(inst)
        if op in NO_OPS:
            return
        mask = self.guarded(inst, self.cur_mask)
        self.guarded_inst = inst.guard is not None
        self.cur_inst, self.site_calls = inst, 0
        handler = getattr(self, "op_" + op, None)
        if handler is not None:
            handler(inst, mask)
        elif op in SEMANTICS:
            self.lower_semantic(inst, mask)
        else:
            raise unsupported(inst)
        if self.lane_copies:
            self.copy_lanes_of(inst)

    def lower_semantic(self, inst: ast.Instruction, mask: ir.Value) -> None:
        lane = self._one_lane(inst)
        if lane is None:
            lower_semantic(self.lanes, inst, self.read, lambda op, v, t: self.write(op, v, t, mask),
                           id(inst) in self.nan_free)
            return
        # only lane `lane` of the results is read (lane_demand): computed as a scalar from the
        # sources' lane, as LLVM does not narrow the vector arithmetic to it (the warp
        # reduction's last add and its NaN select: a permute of zeros, a 32-lane compare)
        b, k = self.b, ir.Constant(I32, lane)
        read = lambda op, t: b.extract_element(self.read(op, t), k)  # noqa: E731
        write = lambda op, v, t: self.write(  # noqa: E731
            op, b.insert_element(ir.Constant(V.vec(v.type), None), v, k), t, mask)
        lower_semantic(Lanes(b, 1), inst, read, write, id(inst) in self.nan_free)

    def _one_lane(self, inst: ast.Instruction) -> int | None:
        """The one lane of a lane-wise instruction's results that later instructions read, if
        lane_demand found one (every result that lane, none warp-uniform, no packed x2 values)."""
        need = self.lane_need.get(id(inst)) if self.lane_need else None
        dests = set(affine.written(inst))
        if not need or inst.opcode not in lane_demand.LANE_WISE or "cc" in inst.mods \
                or any(t.endswith("x2") for t in inst.types) or set(need) != dests or dests & self.uniform_regs:
            return None
        lanes = set(need.values())
        one = lanes.pop() if len(lanes) == 1 else 0
        return one.bit_length() - 1 if one and one & (one - 1) == 0 else None

    def op_mov(self, inst: ast.Instruction, mask: ir.Value) -> None:
        if lower_mov_vector(self.lanes, inst, self.read, lambda op, v, t: self.write(op, v, t, mask)):
            return
        if inst.types[-1] == "b128":  # a plain 128-bit copy (the value semantics stop at 64 bits)
            self.write(inst.operands[0], self.read(inst.operands[1], "b128"), "b128", mask)
            return
        self.lower_semantic(inst, mask)  # a plain value: the one definition of mov

    # ------------------------------------------------------------------ operands
    def read_reg(self, name: str, bits: int | None = None, signed: bool = False) -> ir.Value:
        if name not in self.regs:
            return self.special(name, bits or 32)
        slot, have = self.regs[name]
        if name in self.uniform_regs:
            v = V.splat(self.b, self.b.load(slot, typ=ir.IntType(have)))
        else:
            v = self.b.load(slot, typ=V.vec(ir.IntType(have)), align=16)
        return v if bits is None else V.resize(self.b, v, bits, signed)

    def read(self, op: ast.Operand, ptype: str) -> ir.Value:
        """An operand as `<32 x iN>` where N is the width of PTX type `ptype`."""
        bits = ptx_bits(ptype)
        b = self.b
        if isinstance(op, ast.Reg):
            return self.read_reg(op.name, bits, ptype.startswith("s"))
        if isinstance(op, ast.Not):
            return b.not_(self.read(op.operand, "pred"))
        if isinstance(op, ast.Imm):
            return V.splat_const(ir.IntType(bits), immediate_bits(op, ptype))
        if isinstance(op, ast.Sym):
            return V.resize(b, self.symbol_address(op.name, "generic"), bits, False)
        if isinstance(op, ast.Addr) and op.base is None:
            return V.splat_const(ir.IntType(bits), op.offset)
        raise UnsupportedError(f"operand {type(op).__name__}", getattr(op, "pos", ast.NOPOS))

    def write(self, op: ast.Operand, value: ir.Value, ptype: str, mask: ir.Value) -> None:
        if isinstance(op, ast.Sink):
            return
        if not isinstance(op, ast.Reg) or op.name not in self.regs:
            raise UnsupportedError(f"destination {op}", getattr(op, "pos", ast.NOPOS))
        slot, bits = self.regs[op.name]
        b = self.b
        value = V.resize(b, value, bits, ptype.startswith("s"))
        if op.name in self.uniform_regs:  # every lane computed the same value from uniform sources
            b.store(b.extract_element(value, ir.Constant(I32, 0)), slot)
            return
        lanes = self.lane_need.get(id(self.cur_inst), {}).get(op.name) if self.lane_need else None
        if lanes is not None and bits > 1:  # lanes no one reads (lane_demand): zeros, their work folds away
            keep = V.lane_consts(I1, [lanes >> k & 1 for k in range(WARP)])
            value = b.select(keep, value, ir.Constant(value.type, None))
        if op.name in self.carried or self.guarded_inst or op.name == "%cc":
            value = b.select(mask, value, b.load(slot, typ=value.type, align=16))
        # else: a block-local temporary; lanes outside the mask never read this value, and
        # writing it whole keeps it out of the dispatcher's loop-carried state
        b.store(value, slot, align=16)

    # ------------------------------------------------------------------ special registers
    def _specials_setup(self) -> None:
        b = self.b
        base = b.mul(self.warp, ir.Constant(I32, WARP))
        self._thread_index = b.add(V.splat(b, base), V.LANE_IDS)
        # every half-warp lies in one row of the block (the `halves` forms of cpu/affine.py)
        self.rows_in_halves = b.icmp_unsigned("==", b.and_(self.ctx_i64(Ctx.BLOCK_X), ir.Constant(I64, HALF - 1)),
                                              ir.Constant(I64, 0))
        self.tid_slots: list[ir.Value] = []
        if not any(n.startswith("%tid") for n in ast.mentioned_names(self.fn.body or [])):
            return  # %tid is never read (most .funcs): no %tid set-up
        self.tid_slots = [b.alloca(V.vec(I32), name=f"tid.{axis}") for axis in "xyz"]
        if not self.is_kernel:
            self.set_up_tid()
        # a kernel sets %tid up where it starts and where it resumes (_emit_resume)

    def set_up_tid(self) -> None:
        """%tid.x/y/z into their slots, at the builder's position."""
        b = self.b
        base = b.mul(self.warp, ir.Constant(I32, WARP))
        u32 = lambda slot: b.trunc(self.ctx_i64(slot), I32)  # noqa: E731
        nx, ny = u32(Ctx.BLOCK_X), u32(Ctx.BLOCK_Y)
        # %tid from the linear index: inline for the common 1-D block, else zluda.tid_3d
        one_d = b.icmp_unsigned("==", b.mul(ny, u32(Ctx.BLOCK_Z)), ir.Constant(I32, 1))
        pre = b.block
        multi = self.llfn.append_basic_block("tid.3d")
        joined = self.llfn.append_basic_block("tid")
        self.store_tid_copies(base, None)
        linear = self.thread_index
        b.cbranch(one_d, joined, multi)
        b.position_at_end(multi)
        tx, ty, tz = call_tid_3d(b, base, nx, ny)
        self.store_tid_copies(base, [tx, ty, tz])
        last = b.block
        b.branch(joined)
        b.position_at_end(joined)
        phis = [b.phi(V.vec(I32)) for _ in self.tid_slots]
        for phi, slot, fast, slow in zip(phis, self.tid_slots, (linear, V.splat_const(I32, 0),
                                                                 V.splat_const(I32, 0)), (tx, ty, tz)):
            phi.add_incoming(fast, pre)
            phi.add_incoming(slow, last)
            b.store(phi, slot, align=16)

    def reads_tid_after(self, start: int) -> bool:
        """Whether some block reachable from block `start` reads %tid."""
        blocks, seen, todo = self.body.blocks, {start}, [start]
        while todo:
            blk = blocks[todo.pop()]
            if any(n.startswith("%tid") for n in ast.mentioned_names(blk.insts)):
                return True
            todo += [s for s in blk.succs if s not in seen]
            seen.update(blk.succs)
        return False

    def special(self, name: str, bits: int) -> ir.Value:
        b = self.b
        base, _, comp = name.partition(".")
        axis = "xyz".index(comp) if comp in ("x", "y", "z") else 0
        u32 = lambda slot: b.trunc(self.ctx_i64(slot), I32)  # noqa: E731
        if base == "%tid":
            v = b.load(self.tid_slots[axis], typ=V.vec(I32), align=16)
        elif base in ("%ntid", "%ctaid", "%nctaid", "%clusterid", "%nclusterid"):
            # without cluster launches every CTA is a cluster of one: cluster ids are CTA ids
            first = {"%ntid": Ctx.BLOCK_X, "%ctaid": Ctx.CTA_X, "%nctaid": Ctx.GRID_X,
                     "%clusterid": Ctx.CTA_X, "%nclusterid": Ctx.GRID_X}[base]
            v = V.splat(b, u32(first + axis))
        elif base in ("%envreg1", "%envreg2"):
            # the grid workspace of a cooperative launch (0 otherwise), as nvcc's grid.sync()
            # reads it: %envreg1 the high and %envreg2 the low 32 bits of its address
            ws = self.ctx_i64(Ctx.GRID_WORKSPACE)
            v = V.splat(b, b.trunc(b.lshr(ws, ir.Constant(I64, 32)) if base == "%envreg1" else ws, I32))
        elif base in ("%cluster_ctaid", "%cluster_ctarank", "%is_explicit_cluster") or base.startswith("%envreg"):
            v = V.splat_const(I32, 0)
        elif base in ("%cluster_nctaid", "%cluster_nctarank"):
            v = V.splat_const(I32, 1)
        elif base == "%laneid":
            v = V.LANE_IDS
        elif base == "%warpid":
            v = V.splat(b, self.warp)
        elif base == "%nwarpid":
            v = V.splat(b, u32(Ctx.NWARPS))
        elif base == "%smid":
            v = V.splat(b, u32(Ctx.SMID))
        elif base == "%nsmid":
            v = V.splat(b, u32(Ctx.NSMID))
        elif base == "%gridid":
            v = V.splat(b, self.ctx_i64(Ctx.GRIDID))
        elif base.startswith("%lanemask_"):
            rel = base[len("%lanemask_"):]
            pick = {"eq": lambda i, j: j == i, "lt": lambda i, j: j < i, "le": lambda i, j: j <= i,
                    "gt": lambda i, j: j > i, "ge": lambda i, j: j >= i}[rel]
            v = V.lane_consts(I32, [sum(1 << j for j in range(WARP) if pick(i, j)) for i in range(WARP)])
        elif base in ("%clock", "%clock64", "%clock_hi"):
            v = V.splat(b, V.intrinsic(b, "llvm.readcyclecounter", I64, []))
            if base == "%clock_hi":
                v = b.lshr(v, V.splat_const(I64, 32))
        elif base in ("%globaltimer", "%globaltimer_lo", "%globaltimer_hi"):
            v = V.splat(b, self.mod.globaltimer(b))
            if base == "%globaltimer_hi":
                v = b.lshr(v, V.splat_const(I64, 32))
        elif base == "%dynamic_smem_size":
            v = V.splat(b, u32(Ctx.DYN_SMEM))
        elif base in ("%total_smem_size", "%aggr_smem_size"):
            v = V.splat(b, u32(Ctx.TOTAL_SMEM))
        elif base.startswith("%reserved_smem_offset_"):
            # the region is the window's last RESERVED_SMEM bytes
            self.mod.reads_reserved_smem = True  # launches then add the region to the window
            offset = reserved_smem_offset(name)
            if offset is None:
                v = V.splat_const(I32, RESERVED_SMEM)
            else:
                begin = b.sub(u32(Ctx.SHARED_WINDOW), ir.Constant(I32, RESERVED_SMEM))
                v = V.splat(b, b.add(begin, ir.Constant(I32, offset)))
        else:
            raise UnsupportedError(f"register {name} (not declared)")
        return V.resize(b, v, bits, False)
