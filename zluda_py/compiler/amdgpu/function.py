"""Lowering of one PTX function for AMDGPU: one LLVM thread per PTX thread (W=1).

The GPU handles divergence in hardware, so the PTX control-flow graph becomes an ordinary
LLVM CFG; a guarded instruction is a branch around it. Every register is a private alloca of
its declared width, promoted to SSA by LLVM. Instruction meaning comes from the shared
semantics through `Lanes` of width 1; this file adds what is target-specific: operands,
special registers, calls and the block terminators.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from llvmlite import ir

from zluda_py.compiler import cfg
from zluda_py.compiler.amdgpu.ir_extras import PrivateAlloca, insert
from zluda_py.compiler.amdgpu.mbarrier import MbarrierMixin, first_sides
from zluda_py.compiler.amdgpu.memory import MemoryMixin
from zluda_py.compiler.amdgpu.mma import MmaMixin
from zluda_py.compiler.amdgpu.printf import PrintfMixin
from zluda_py.compiler.amdgpu.texture import TextureMixin
from zluda_py.compiler.amdgpu.warp import WarpMixin
from zluda_py.compiler.errors import UnsupportedError, unsupported
from zluda_py.compiler.amdgpu.mathlib import AmdgpuLanes
from zluda_py.compiler.lanes import ptx_bits
from zluda_py.compiler.layout import RESERVED_SMEM, reserved_smem_offset
from zluda_py.compiler.lowering import local_name, lower_mov_vector, lower_semantic
from zluda_py.compiler.ptxtypes import immediate_bits, var_align, var_size
from zluda_py.compiler.semantics import SEMANTICS
from zluda_py.ptx import ast

if TYPE_CHECKING:
    from zluda_py.compiler.amdgpu.module import ModuleLowering

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
CONST_AS = 4

# No effect on this target, or only a performance hint.
NO_OPS = {"prefetch", "prefetchu", "pmevent", "discard", "applypriority", "createpolicy", "griddepcontrol",
          "setmaxnreg", "nanosleep"}
# Refused: the tensor-core instructions of sm_90 and later (mma/wmma and the matrix moves: mma.py).
REFUSED = {"wgmma", "tcgen05", "tensormap"}
SYSCALLS = {"vprintf", "malloc", "free", "__assertfail"}
# v5 implicit kernel arguments (offsets from llvm.amdgcn.implicitarg.ptr).
IMPLICIT_BLOCK_COUNT = 0  # u32 x3
IMPLICIT_GROUP_SIZE = 12  # u16 x3
IMPLICIT_DYNAMIC_LDS = 120  # u32
# The grid workspace of a cooperative launch (0 otherwise): a u64 kernel argument after CUDA's
# parameter buffer, at the next multiple of 8, so it ends where the v5 hidden arguments begin.
GRID_WORKSPACE_ARG = "zluda.grid_workspace"
GRID_WORKSPACE_BYTES = 8
ENVREG_WORKSPACE = ("%envreg1", "%envreg2")  # its high and low 32 bits, as nvcc reads them


@dataclass
class Symbol:
    """What a name used as an operand refers to; `ptr` is its address in its own space.

    kind: kparam (kernarg, constant space), pbuf (a .param buffer in private memory), local,
    shared, global, const, func, managed (`ptr` is the cell holding the variable's address).
    """

    kind: str
    ptr: ir.Value
    size: int = 0


class FunctionLowering(MemoryMixin, WarpMixin, PrintfMixin, MbarrierMixin, TextureMixin, MmaMixin):
    def __init__(self, mod: "ModuleLowering", fn: ast.Function, llfn: ir.Function) -> None:
        self.mod = mod
        self.fn = fn
        self.llfn = llfn
        self.is_kernel = fn.kind == "entry"
        self.wave = mod.target.wave
        self.body = cfg.build(fn.body or [], keep=lambda op: op in SEMANTICS)
        self.allocas = ir.IRBuilder(llfn.append_basic_block("entry"))
        self.b = ir.IRBuilder(llfn.append_basic_block("start"))
        self.lanes = AmdgpuLanes(self.b, 1)
        self.regs: dict[str, tuple[ir.Value, int]] = {}
        self.symbols: dict[str, Symbol] = {}
        self.reg_returns: list[tuple[ast.Variable, ir.Value]] = []

    # ------------------------------------------------------------------ setup
    def lower(self) -> None:
        self._declare_variables()
        self._declare_params()
        if self.is_kernel and self.mod.has_bar_red:
            self.init_bar_red()
        if self.is_kernel and self.mod.has_counted_barrier:
            self.init_named_barriers()
        self.run_first = first_sides(self.body)  # mbarrier waits: which side of a branch runs first
        self.blocks = [self.llfn.append_basic_block(f"bb{i}" + (f".{local_name(blk.label)}" if blk.label else ""))
                       for i, blk in enumerate(self.body.blocks)]
        start = self.b.block
        self._goto(self.blocks[0] if self.blocks else None)
        for blk, llb in zip(self.body.blocks, self.blocks):
            self.b.position_at_end(llb)
            self._lower_block(blk)
        self.allocas.branch(start)

    def alloca(self, ty: ir.Type, align: int, name: str = "") -> ir.Value:
        """A private alloca in the entry block (allocas elsewhere would grow the stack in loops)."""
        return insert(self.allocas, PrivateAlloca(self.allocas.block, ty, align, name))

    def _declare_variables(self) -> None:
        for v in self.body.variables:
            if v.space == "reg":
                if v.vector is not None:
                    raise UnsupportedError(f"vector register .v{v.vector}", v.pos)
                self.new_reg(v.name, ptx_bits(v.type))
            elif v.space in ("local", "param"):
                size = max(var_size(v), 1)
                align = max(var_align(v), 4)
                slot = self.alloca(ir.ArrayType(I8, size), align, local_name(v.name.lstrip("%$")))
                self.symbols[v.name] = Symbol("local" if v.space == "local" else "pbuf", slot, size)
            elif v.space in ("shared", "global", "const"):
                self.symbols[v.name] = self.mod.function_variable(self.fn, v)
            else:
                raise UnsupportedError(f".{v.space} variable {v.name}", v.pos)
        self.new_reg("%cc", 1)  # the carry flag of add.cc/addc and friends

    def new_reg(self, name: str, bits: int) -> None:
        t = ir.IntType(bits)
        slot = self.alloca(t, max(bits // 8, 1), local_name(name.lstrip("%")))
        self.allocas.store(ir.Constant(t, 0), slot)
        self.regs[name] = (slot, bits)

    def _declare_params(self) -> None:
        args = list(self.llfn.args)
        if self.is_kernel:
            for p, arg in zip(self.fn.params, args):
                self.symbols[p.name] = Symbol("kparam", arg, var_size(p))
            return
        for p, arg in zip([*self.fn.returns, *self.fn.params], args):
            self.symbols[p.name] = Symbol("pbuf", arg, var_size(p))
            if p.space == "reg":
                self.new_reg(p.name, ptx_bits(p.type))
                if p in self.fn.returns:
                    self.reg_returns.append((p, arg))
                else:
                    slot, bits = self.regs[p.name]
                    self.allocas.store(self.allocas.load(arg, typ=ir.IntType(bits)), slot)

    # ------------------------------------------------------------------ control flow
    def _lower_block(self, blk: cfg.BasicBlock) -> None:
        insts = blk.insts
        term = insts[-1] if insts and cfg.is_terminator(insts[-1]) else None
        for inst in insts if term is None else insts[:-1]:
            self.lower_inst(inst)
        b = self.b
        fall = self.blocks[blk.fallthrough] if blk.fallthrough is not None else None
        if term is None:
            self._goto(fall)
            return
        if cfg.is_block_barrier(term):
            self.guarded(term, lambda: self.lower_barrier(term))
            self._goto(fall)
            return
        if term.opcode == "call":  # ends a CPU-target block; here an ordinary instruction
            self.lower_inst(term)
            self._goto(fall)
            return
        if term.opcode == "brx":
            self._lower_brx(term, fall)
            return
        if term.opcode == "bra":
            target = next(o for o in term.operands if isinstance(o, ast.Sym))
            dest = self.blocks[self.body.labels[target.name]]
        else:
            dest = self.llfn.append_basic_block(term.opcode if term.opcode in ("trap", "exit") else "ret")
        if term.guard is None:
            b.branch(dest)
        else:
            first = self.run_first.get(blk.index)
            if fall is None:
                fall = self.llfn.append_basic_block("end")
                with b.goto_block(fall):
                    self._return()
            if first is not None and term.opcode == "bra":
                self.branch_first(self.guard_value(term), dest, fall, self.blocks[first])
            else:
                b.cbranch(self.guard_value(term), dest, fall)
        if term.opcode != "bra":
            b.position_at_end(dest)
            if term.opcode == "trap":
                self.call_intrinsic("llvm.trap", ir.VoidType(), [])
                b.unreachable()
            else:
                self._return(exited=term.opcode == "exit")

    def _lower_brx(self, term: ast.Instruction, fall: ir.Block | None) -> None:
        """brx.idx: a switch over the `.branchtargets` list (an index past its end is undefined)."""
        b = self.b
        table = next((o.name for o in term.operands if isinstance(o, ast.Sym)), None)
        directive = self.body.table("branchtargets", table) if table else None
        if directive is None:
            raise unsupported(term, "brx.idx without its .branchtargets list")
        index = self.read(term.operands[0], "u32")
        if term.guard is not None:
            go = self.llfn.append_basic_block("brx")
            if fall is None:
                fall = self.llfn.append_basic_block("end")
                with b.goto_block(fall):
                    self._return()
            b.cbranch(self.guard_value(term), go, fall)
            b.position_at_end(go)
        undefined = self.llfn.append_basic_block("brx.out_of_range")
        sw = b.switch(index, undefined)
        for i, target in enumerate(directive.args[1:]):
            sw.add_case(ir.Constant(I32, i), self.blocks[self.body.labels[target.name]])
        b.position_at_end(undefined)
        b.unreachable()

    def _goto(self, block: ir.Block | None) -> None:
        if block is None:
            self._return()
        else:
            self.b.branch(block)

    def _return(self, exited: bool = False) -> None:
        """Return; a .func that may exit (ModuleLowering.func_result) says whether the thread did."""
        for p, ptr in self.reg_returns:
            slot, bits = self.regs[p.name]
            self.b.store(self.b.load(slot, typ=ir.IntType(bits)), ptr)
        if self.is_kernel or isinstance(self.mod.func_result, ir.VoidType):
            self.b.ret_void()
        else:
            self.b.ret(ir.Constant(I1, exited))

    def _after_call(self, result: ir.Value) -> None:
        """A thread that exited inside the callee leaves this function too (a kernel ends it)."""
        if isinstance(self.mod.func_result, ir.VoidType):
            return
        gone, back = self.llfn.append_basic_block("exited"), self.llfn.append_basic_block("returned")
        self.b.cbranch(result, gone, back)
        self.b.position_at_end(gone)
        self._return(exited=True)
        self.b.position_at_end(back)

    def guard_value(self, inst: ast.Instruction) -> ir.Value:
        p = self.read_reg(inst.guard.reg, 1)
        return self.b.not_(p) if inst.guard.negated else p

    def guarded(self, inst: ast.Instruction, body) -> None:
        """Run `body` (which emits the instruction) only where the guard predicate holds."""
        if inst.guard is None:
            body()
            return
        with self.b.if_then(self.guard_value(inst)):
            body()

    # ------------------------------------------------------------------ instructions
    def op_brkpt(self, inst: ast.Instruction) -> None:
        """brkpt suspends the thread for a debugger; with none attached CUDA fails the launch (719),
        so it traps as `trap` does (llvm.debugtrap, s_trap 3, would continue without a debugger)."""
        self.call_intrinsic("llvm.trap", ir.VoidType(), [])

    def lower_inst(self, inst: ast.Instruction) -> None:
        op = inst.opcode
        if op in ("st", "red") and inst.has("async"):  # remote stores completing on another CTA's mbarrier
            raise unsupported(inst, "asynchronous stores to another CTA are not supported")
        if op in REFUSED:
            raise unsupported(inst, "textures, surfaces and tensor-core instructions are not supported")
        if op in NO_OPS:
            return
        handler = getattr(self, "op_" + op, None)
        try:
            if handler is not None:
                self.guarded(inst, lambda: handler(inst))
            elif op in SEMANTICS:
                self.guarded(inst, lambda: self.lower_semantic(inst))
            else:
                raise unsupported(inst)
        except UnsupportedError as exc:
            if exc.line:
                raise
            raise UnsupportedError(exc.message.removeprefix("unsupported: "), inst.pos) from None  # name the line

    def lower_semantic(self, inst: ast.Instruction) -> None:
        lower_semantic(self.lanes, inst, self.read, self.write)

    def op_mov(self, inst: ast.Instruction) -> None:
        if not lower_mov_vector(self.lanes, inst, self.read, self.write):
            t = inst.types[-1]
            self.write(inst.operands[0], self.read(inst.operands[1], t), t)

    # ------------------------------------------------------------------ calls
    def op_call(self, inst: ast.Instruction) -> None:
        ops = list(inst.operands)
        rets: list[ast.Operand] = ops.pop(0).args if ops and isinstance(ops[0], ast.ArgList) else []
        target = ops.pop(0)
        args = ops.pop(0).args if ops and isinstance(ops[0], ast.ArgList) else []
        if not isinstance(target, ast.Sym) or target.name in self.regs:
            self._indirect_call(inst, target, [*rets, *args])
            return
        if target.name in SYSCALLS and target.name not in self.mod.llfns:
            self.syscall(inst, target.name, rets, args)
            return
        callee_fn = self.mod.functions.get(target.name)
        if callee_fn is None:
            raise UnsupportedError(f"call to undeclared function {target.name}", inst.pos)
        formals = [*callee_fn.returns, *callee_fn.params]
        actuals = [*rets, *args]
        if len(formals) != len(actuals):
            raise UnsupportedError(f"call to {target.name} with {len(actuals)} arguments for {len(formals)}",
                                   inst.pos)
        buffers, copy_back = [], []
        for i, (formal, actual) in enumerate(zip(formals, actuals)):
            sym = self.symbols.get(actual.name) if isinstance(actual, ast.Sym) else None
            if sym is not None and sym.kind == "pbuf":
                buffers.append(sym.ptr)
                continue
            bits = ptx_bits(formal.type)
            buf = self.alloca(ir.IntType(bits), max(bits // 8, 1))
            if i >= len(rets):
                self.b.store(self.read(actual, formal.type), buf)
            else:
                copy_back.append((actual, buf, formal.type))
            buffers.append(buf)
        self._after_call(self.b.call(self.mod.llfns[target.name], buffers))
        for actual, buf, t in copy_back:
            self.write(actual, self.b.load(buf, typ=ir.IntType(ptx_bits(t))), t)

    def _indirect_call(self, inst: ast.Instruction, target: ast.Operand, actuals: list[ast.Operand]) -> None:
        """A call through a function pointer: every .func takes one private buffer per parameter."""
        buffers = []
        for a in actuals:
            sym = self.symbols.get(a.name) if isinstance(a, ast.Sym) else None
            if sym is None or sym.kind != "pbuf":
                raise unsupported(inst, "indirect call with register arguments")
            buffers.append(sym.ptr)
        fnty = ir.FunctionType(self.mod.func_result, [ir.PointerType(addrspace=5)] * len(buffers))
        # a typed function pointer is how llvmlite's call learns an indirect callee's type
        callee = self.b.inttoptr(self.read(ast.Reg(target.name, target.pos), "u64"), fnty.as_pointer())
        self._after_call(self.b.call(callee, buffers))

    def syscall(self, inst: ast.Instruction, name: str, rets: list[ast.Operand], args: list[ast.Operand]) -> None:
        if name == "vprintf":
            result = self.lower_printf(inst, args)
        elif name == "__assertfail":  # the kernel stops with a trap; the runtime reports the failure
            self.lower_assert(inst, args)
            result = ir.Constant(I32, 0)
        else:
            raise unsupported(inst, f"device {name} (no device heap on the AMDGPU target yet)")
        for r in rets:
            sym = self.symbols.get(r.name) if isinstance(r, ast.Sym) else None
            if sym is not None:
                self.b.store(result, sym.ptr)
            else:
                self.write(r, result, "s32")

    def call_intrinsic(self, name: str, ret: ir.Type, args: list[ir.Value], argtys: list[ir.Type] | None = None):
        fn = self.mod.ir.globals.get(name)
        if fn is None:
            fn = ir.Function(self.mod.ir, ir.FunctionType(ret, argtys or [a.type for a in args]), name)
        return self.b.call(fn, args)

    # ------------------------------------------------------------------ operands
    def read_reg(self, name: str, bits: int | None = None, signed: bool = False) -> ir.Value:
        if name not in self.regs:
            return self.special(name, bits or 32)
        slot, have = self.regs[name]
        v = self.b.load(slot, typ=ir.IntType(have))
        return v if bits is None else self.lanes.resize(v, bits, signed)

    def read(self, op: ast.Operand, ptype: str) -> ir.Value:
        """An operand as an integer of the width of PTX type `ptype`."""
        bits = ptx_bits(ptype)
        if isinstance(op, ast.Reg) or (isinstance(op, ast.Sym) and op.name in self.regs):
            return self.read_reg(op.name, bits, ptype.startswith("s"))
        if isinstance(op, ast.Not):
            return self.b.not_(self.read(op.operand, "pred"))
        if isinstance(op, ast.Imm):
            return ir.Constant(ir.IntType(bits), immediate_bits(op, ptype))
        if isinstance(op, ast.Sym):
            return self.lanes.resize(self.symbol_value(op.name, op.pos), bits, False)
        if isinstance(op, ast.Addr) and op.base is None:
            return ir.Constant(ir.IntType(bits), op.offset)
        raise UnsupportedError(f"operand {type(op).__name__}", getattr(op, "pos", ast.NOPOS))

    def write(self, op: ast.Operand, value: ir.Value, ptype: str) -> None:
        if isinstance(op, ast.Sink):
            return
        if not isinstance(op, (ast.Reg, ast.Sym)) or op.name not in self.regs:  # `.reg .b16 r;` has no %
            raise UnsupportedError(f"destination {op}", getattr(op, "pos", ast.NOPOS))
        slot, bits = self.regs[op.name]
        self.b.store(self.lanes.resize(value, bits, ptype.startswith("s")), slot)

    # ------------------------------------------------------------------ special registers
    def implicit_arg(self, offset: int, ty: ir.Type) -> ir.Value:
        ptr = self.call_intrinsic("llvm.amdgcn.implicitarg.ptr", ir.PointerType(addrspace=CONST_AS), [])
        return self.b.load(self.b.gep(ptr, [ir.Constant(I64, offset)], source_etype=I8), typ=ty)

    def tid(self, axis: int) -> ir.Value:
        return self.call_intrinsic(f"llvm.amdgcn.workitem.id.{'xyz'[axis]}", I32, [])

    def ntid(self, axis: int) -> ir.Value:
        return self.b.zext(self.implicit_arg(IMPLICIT_GROUP_SIZE + 2 * axis, I16), I32)

    def flat_tid(self) -> ir.Value:
        b = self.b
        return b.add(self.tid(0), b.mul(self.ntid(0), b.add(self.tid(1), b.mul(self.ntid(1), self.tid(2)))))

    def special(self, name: str, bits: int) -> ir.Value:
        b = self.b
        base, _, comp = name.partition(".")
        axis = "xyz".index(comp) if comp in ("x", "y", "z") else 0
        if base == "%tid":
            v = self.tid(axis)
        elif base == "%ntid":
            v = self.ntid(axis)
        elif base == "%ctaid":
            v = self.call_intrinsic(f"llvm.amdgcn.workgroup.id.{'xyz'[axis]}", I32, [])
        elif base == "%nctaid":
            v = self.implicit_arg(IMPLICIT_BLOCK_COUNT + 4 * axis, I32)
        elif base == "%laneid":
            v = self.lane()
        elif base == "%warpid":
            v = b.lshr(self.flat_tid(), ir.Constant(I32, 5))
        elif base == "%nwarpid":
            threads = b.mul(b.mul(self.ntid(0), self.ntid(1)), self.ntid(2))
            v = b.lshr(b.add(threads, ir.Constant(I32, 31)), ir.Constant(I32, 5))
        elif base.startswith("%lanemask_"):
            v = self.lanemask(base[len("%lanemask_"):])
        elif base in ("%clock", "%clock64"):
            v = self.call_intrinsic("llvm.readcyclecounter", I64, [])
        elif base == "%globaltimer":  # the steady counter runs at 100 MHz on every supported GPU
            v = b.mul(self.call_intrinsic("llvm.readsteadycounter", I64, []), ir.Constant(I64, 10))
        elif base == "%dynamic_smem_size":
            v = self.implicit_arg(IMPLICIT_DYNAMIC_LDS, I32)
        elif base in ("%smid", "%gridid"):  # volatile ids: any value in range is a valid answer
            v = ir.Constant(I32, 0)
        elif base in ENVREG_WORKSPACE:
            # the grid workspace argument ends where the hidden arguments begin (module.py), so
            # kernels and the functions they call alike find it just before implicitarg.ptr
            ws = self.implicit_arg(-GRID_WORKSPACE_BYTES, I64)
            v = b.trunc(b.lshr(ws, ir.Constant(I64, 32)) if base == "%envreg1" else ws, I32)
        elif base.startswith("%envreg"):  # driver-defined; nothing else defines them for a launch
            v = ir.Constant(I32, 0)
        elif base.startswith("%reserved_smem_offset_"):  # an LDS array of its own (module.py)
            offset = reserved_smem_offset(name)
            v = ir.Constant(I32, RESERVED_SMEM) if offset is None else \
                b.add(b.ptrtoint(self.mod.reserved_smem(), I32), ir.Constant(I32, offset))
        else:
            raise UnsupportedError(f"register {name} (not declared)")
        return self.lanes.resize(v, bits, False)
