"""Memory on AMDGPU: PTX state spaces as LLVM address spaces, ld/st, atomics, fences, cvta.

generic -> flat (0), global -> 1, shared -> LDS (3, 32-bit offsets), const and kernel
parameters -> constant (4), local and .param buffers -> private (5, 32-bit). A PTX address in
a register is an integer in its own space, so shared and local addresses are 32-bit offsets as
on NVIDIA GPUs, and cvta converts them with addrspacecast.
"""

from __future__ import annotations

from dataclasses import replace

from llvmlite import ir
from llvmlite.ir.instructions import StoreAtomicInstr

from zluda_py.compiler.amdgpu.ir_extras import ScopedAtomicRMW, ScopedCmpXchg, insert
from zluda_py.compiler.errors import UnsupportedError, unsupported
from zluda_py.compiler.lanes import ptx_bits
from zluda_py.compiler.memops import (atomic_update, bf16_op, cas_loop, cp_async_fill, cp_async_limit,
                                      cp_async_size, cp_async_src_size, space_of, vector_count, wide_atomic_op)
from zluda_py.ptx import ast

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
ADDRESS_SPACE = {"generic": 0, "global": 1, "shared": 3, "const": 4, "local": 5}
SYMBOL_SPACE = {"kparam": 4, "pbuf": 5, "local": 5, "shared": 3, "global": 1, "const": 4}
NARROW = (3, 5)  # address spaces with 32-bit pointers
# PTX scope -> LLVM AMDGPU sync scope ("" is the system scope).
SCOPES = {"cta": "workgroup", "cluster": "agent", "gpu": "agent", "sys": ""}
ORDERINGS = {"relaxed": "monotonic", "acquire": "acquire", "release": "release", "acq_rel": "acq_rel",
             "sc": "seq_cst"}


def ptr_ty(space: int) -> ir.PointerType:
    return ir.PointerType(addrspace=space)


class MemoryMixin:
    # ------------------------------------------------------------------ addresses
    def symbol(self, name: str, pos: ast.Pos = ast.NOPOS):
        sym = self.symbols.get(name) or self.mod.symbols.get(name)
        if sym is None:
            raise UnsupportedError(f"symbol {name} (not declared)", pos)
        if sym.kind == "managed":  # the variable's address is in its cell, filled in at load
            address = self.b.load(sym.ptr, typ=I64)
            return replace(sym, kind="global", ptr=self.b.inttoptr(address, ptr_ty(1)))
        return sym

    def symbol_value(self, name: str, pos: ast.Pos = ast.NOPOS) -> ir.Value:
        """A symbol used as a value: its address in its own state space (32-bit for shared/local)."""
        sym = self.symbol(name, pos)
        if sym.kind == "func":
            return self.b.ptrtoint(sym.ptr, I64)
        return self.b.ptrtoint(sym.ptr, I32 if SYMBOL_SPACE[sym.kind] in NARROW else I64)

    def _param_space(self) -> int:
        return 4 if self.is_kernel else 5

    def pointer(self, addr: ast.Addr, space: str) -> ir.Value:
        """An LLVM pointer for a PTX address operand `[base+offset]` accessed in `space`."""
        b = self.b
        want = self._param_space() if space == "param" else ADDRESS_SPACE[space]
        if isinstance(addr.base, ast.Sym):
            sym = self.symbol(addr.base.name, addr.pos)
            if sym.kind == "func":
                raise UnsupportedError(f"memory operand {addr.base.name}", addr.pos)
            p = b.gep(sym.ptr, [ir.Constant(I64, addr.offset)], source_etype=I8)
            have = SYMBOL_SPACE[sym.kind]
            if space == "param" and sym.kind in ("kparam", "pbuf"):
                want = have  # a kernel's own parameters, or a call's .param buffer
            if have != want:
                if want != 0:
                    raise UnsupportedError(f"{addr.base.name} accessed as .{space}", addr.pos)
                p = b.addrspacecast(p, ptr_ty(0))
            return p
        width = 32 if want in NARROW else 64
        if addr.base is None:
            value: ir.Value = ir.Constant(ir.IntType(width), addr.offset & ((1 << width) - 1))
        else:  # the offset is added in the address's width (a 32-bit register's: 32 bits even for
            # a flat address, as under .address_size 32), so it wraps modulo 2**32 as on NVIDIA GPUs
            value = self.read_reg(addr.base.name)
            value = self.lanes.resize(value, min(64 if value.type.width == 64 else 32, width), False)
            if addr.offset:
                value = b.add(value, ir.Constant(value.type, addr.offset & ((1 << value.type.width) - 1)))
            value = self.lanes.resize(value, width, False)
        return b.inttoptr(value, ptr_ty(want))

    def to_generic(self, value: ir.Value, space: int) -> ir.Value:
        """cvta.<space>: an address in `space` as a generic (flat) address."""
        b = self.b
        if space not in NARROW:
            return self.lanes.resize(value, 64, False)
        p = b.inttoptr(self.lanes.resize(value, 32, False), ptr_ty(space))
        return b.ptrtoint(b.addrspacecast(p, ptr_ty(0)), I64)

    def from_generic(self, value: ir.Value, space: int) -> ir.Value:
        """cvta.to.<space>: a generic address as an address in `space`."""
        b = self.b
        if space not in NARROW:
            return self.lanes.resize(value, 64, False)
        p = b.inttoptr(self.lanes.resize(value, 64, False), ptr_ty(0))
        return b.ptrtoint(b.addrspacecast(p, ptr_ty(space)), I32)

    # ------------------------------------------------------------------ ld / st
    def _mem_type(self, inst: ast.Instruction) -> str:
        if not inst.types:
            raise unsupported(inst, "no type")
        return inst.types[-1]

    def _elements(self, inst: ast.Instruction, ptr: ir.Value, t: str) -> list[list[ir.Value]]:
        """Per element of the access, the pointers of its parts: one, or two 64-bit halves of a
        .b128 element (LLVM has no 128-bit atomics here; each half keeps the ordering)."""
        size = max(ptx_bits(t) // 8, 1)
        parts = range(0, size, 8) if size > 8 else [0]
        return [[self.b.gep(ptr, [ir.Constant(I64, k * size + h)], source_etype=I8) for h in parts]
                for k in range(vector_count(inst))]

    def op_ld(self, inst: ast.Instruction) -> None:
        b = self.b
        t = self._mem_type(inst)
        dst, addr = inst.operands[0], inst.operands[1]
        bits = ptx_bits(t)
        dests = dst.elems if isinstance(dst, ast.Vec) else [dst]
        ordering = _ordering(inst, "acquire")
        for d, ptrs in zip(dests, self._elements(inst, self.pointer(addr, space_of(inst)), t)):
            part = min(bits, 64)
            ty, align = ir.IntType(max(part, 8)), max(bits // 8, 1)
            value = ir.Constant(ir.IntType(max(bits, 8)), 0)
            for h, p in enumerate(ptrs):
                v = b.load(p, typ=ty, align=align if h == 0 else 8) if ordering is None else \
                    b.load_atomic(p, ordering, align if h == 0 else 8, typ=ty)
                v = self.lanes.resize(v, value.type.width, False)
                value = b.or_(value, b.shl(v, ir.Constant(value.type, 64 * h))) if h else v
            self.write(d, value, t)

    op_ldu = op_ld

    def op_st(self, inst: ast.Instruction) -> None:
        if inst.has("bulk"):
            self._st_bulk(inst)
            return
        b = self.b
        t = self._mem_type(inst)
        addr, src = inst.operands[0], inst.operands[1]
        bits = ptx_bits(t)
        srcs = src.elems if isinstance(src, ast.Vec) else [src]
        ordering = _ordering(inst, "release")
        for s, ptrs in zip(srcs, self._elements(inst, self.pointer(addr, space_of(inst)), t)):
            whole, align = self.lanes.resize(self.read(s, t), max(bits, 8), False), max(bits // 8, 1)
            for h, p in enumerate(ptrs):
                v = b.trunc(b.lshr(whole, ir.Constant(whole.type, 64 * h)), I64) if len(ptrs) > 1 else whole
                a = align if h == 0 else 8
                if ordering is None:
                    b.store(v, p, align=a)
                else:
                    insert(b, StoreAtomicInstr(b.block, v, p, ordering, a))  # builder needs typed ptrs

    def _st_bulk(self, inst: ast.Instruction) -> None:
        """st.bulk [a], size, 0: the thread zeroes `size` bytes at a (a multiple of 8, 8-aligned)."""
        addr, size = inst.operands[0], inst.operands[1]
        if not isinstance(size, ast.Imm):
            raise unsupported(inst, "non-constant size")
        ptr = self.pointer(addr, space_of(inst))
        space = ptr.type.addrspace
        self.call_intrinsic(f"llvm.memset.p{space}.i64", ir.VoidType(),
                            [ptr, ir.Constant(I8, 0), ir.Constant(I64, int(size.value)), ir.Constant(I1, 0)])

    def op_cvta(self, inst: ast.Instruction) -> None:
        t = inst.types[-1]
        dst, src = inst.operands
        space = space_of(inst)
        if space == "param" and not self.is_kernel:  # a .func's parameters are private buffers
            raise unsupported(inst, "cvta.param inside a .func")
        if ptx_bits(t) != 64:  # a flat address is 64 bits (shared and local ones carry the aperture above bit 32)
            raise unsupported(inst, "32-bit generic addresses")
        value = self.read(src, t)
        space_no = SYMBOL_SPACE["kparam"] if space == "param" else ADDRESS_SPACE[space]  # kernargs: global memory
        self.write(dst, self.from_generic(value, space_no) if inst.has("to") else self.to_generic(value, space_no), t)

    def op_isspacep(self, inst: ast.Instruction) -> None:
        p, a = inst.operands
        space = space_of(inst)
        ptr = self.b.inttoptr(self.read(a, "u64"), ptr_ty(0))
        shared = self.call_intrinsic("llvm.amdgcn.is.shared", I1, [ptr])
        private = self.call_intrinsic("llvm.amdgcn.is.private", I1, [ptr])
        if space == "shared":
            result = shared
        elif space == "local":
            result = private
        elif space == "const":  # inside one of the module's (or this function's) .const variables
            result = ir.Constant(I1, 0)
            for sym in {id(s): s for s in [*self.mod.symbols.values(), *self.symbols.values()]
                        if s.kind == "const"}.values():
                result = self.b.or_(result, self._within(ptr, sym.ptr, ir.Constant(I64, sym.size)))
        elif space == "param":  # inside the kernel's parameters (the explicit kernargs: CUDA's parameter buffer)
            if not self.is_kernel:
                raise unsupported(inst, "isspacep.param inside a .func")
            params = [self.symbols[q.name] for q in self.fn.params]
            result = ir.Constant(I1, 0)
            if params:
                end = self.b.add(self.b.ptrtoint(params[-1].ptr, I64), ir.Constant(I64, params[-1].size))
                result = self._within(ptr, params[0].ptr, self.b.sub(end, self.b.ptrtoint(params[0].ptr, I64)))
        else:  # the const and param windows lie inside the global one, as on the CPU target
            result = self.b.not_(self.b.or_(shared, private))
        self.write(p, result, "pred")

    def _within(self, ptr: ir.Value, start: ir.Value, size: ir.Value) -> ir.Value:
        """Whether flat `ptr` lies in [start, start + size) (`start` in a 64-bit address space)."""
        offset = self.b.sub(self.b.ptrtoint(ptr, I64), self.b.ptrtoint(start, I64))
        return self.b.icmp_unsigned("<", offset, size)

    # ------------------------------------------------------------------ ordering
    def _scope(self, inst: ast.Instruction) -> str:
        for m in inst.mods:
            if m in SCOPES:
                return SCOPES[m]
        return SCOPES["gpu"]

    def op_membar(self, inst: ast.Instruction) -> None:
        scope = {"cta": "workgroup", "gl": "agent", "sys": ""}.get(inst.mods[0] if inst.mods else "gl", "agent")
        self.b.fence("seq_cst", scope or None)

    def op_fence(self, inst: ast.Instruction) -> None:
        if inst.has("proxy") or inst.has("mbarrier_init"):
            return  # proxy fences order async/tensor proxies, which this target does not have
        ordering = "acq_rel" if inst.has("acq_rel") else "seq_cst"
        self.b.fence(ordering, self._scope(inst) or None)

    # ------------------------------------------------------------------ atomics
    def op_atom(self, inst: ast.Instruction) -> None:
        self._atomic(inst, inst.operands[0], inst.operands[1], inst.operands[2:])

    def op_red(self, inst: ast.Instruction) -> None:
        self._atomic(inst, None, inst.operands[0], inst.operands[1:])

    def _atomic(self, inst: ast.Instruction, dst, addr, srcs) -> None:
        """atom/red: a vector form is one atomic per element (PTX makes each element's access
        atomic on its own); bf16 has no atomicrmw here, so it is a compare-and-swap loop."""
        b = self.b
        t = inst.types[-1]
        op = wide_atomic_op(inst)
        bits = ptx_bits(t)
        if bits > 64:
            raise unsupported(inst, "128-bit atomic")
        ity = ir.IntType(bits)
        ptr = self.pointer(addr, space_of(inst))
        elems = lambda o: o.elems if isinstance(o, ast.Vec) else [o]  # noqa: E731
        operands = srcs[:2] if op == "cas" else srcs[:1]  # a cache-policy operand is a hint only
        vals = [[self.read(e, t) for e in elems(s)] for s in operands]
        ordering = next((ORDERINGS[m] for m in inst.mods if m in ORDERINGS), "monotonic")
        scope = self._scope(inst)
        # a failed cmpxchg only reads: no release part
        fail = {"release": "monotonic", "monotonic": "monotonic", "seq_cst": "seq_cst"}.get(ordering, "acquire")
        dests = elems(dst) if dst is not None else [None] * vector_count(inst)
        for k, d in enumerate(dests):
            p = b.gep(ptr, [ir.Constant(I64, k * bits // 8)], source_etype=I8) if k else ptr
            cas = lambda x, y, p=p: insert(b, ScopedCmpXchg(b.block, p, x, y, ordering, fail, scope))  # noqa: E731
            x = vals[0][k]
            if t in ("bf16", "bf16x2"):
                old = cas_loop(b, b.load(p, typ=ity, align=bits // 8),
                               lambda cur, x=x: bf16_op(b, op, cur, x, bits // 16), cas)
            else:
                old = atomic_update(b, op, t, x, vals[1][k] if op == "cas" else None,
                                    lambda name, arg, p=p: insert(b, ScopedAtomicRMW(b.block, name, p, arg, ordering,
                                                                                      scope)), cas)
            if d is not None:
                self.write(d, old, t)

    def op_cp(self, inst: ast.Instruction) -> None:
        """cp.async: the copy completes at once (see cp_async_size); the bulk copies and
        cp.async.mbarrier.arrive are mbarrier.py's."""
        if inst.has("bulk") or inst.has("reduce"):
            self.cp_async_bulk(inst)
            return
        if inst.has("mbarrier"):
            self.cp_async_mbarrier_arrive(inst)
            return
        n = cp_async_size(inst)
        if n is None:
            return
        b = self.b
        dst, src = inst.operands[:2]
        src_size = cp_async_src_size(inst)
        limit = None
        if src_size is not None:
            is_predicate = isinstance(src_size, ast.Reg) and self.regs.get(src_size.name, (None, 0))[1] == 1
            limit = cp_async_limit(self.lanes, src_size, is_predicate, n, self.read)
        sp, dp = self.pointer(src, "global"), self.pointer(dst, "shared")
        for k in range(n // 4):
            v = b.load(b.gep(sp, [ir.Constant(I64, 4 * k)], source_etype=I8), typ=I32, align=4)
            if limit is not None:
                v = cp_async_fill(self.lanes, v, k, limit)
            b.store(v, b.gep(dp, [ir.Constant(I64, 4 * k)], source_etype=I8), align=4)


def _ordering(inst: ast.Instruction, strong: str) -> str | None:
    """Atomic ordering of a ld/st: volatile and relaxed accesses are monotonic atomics (so they
    are neither hoisted out of spin loops nor merged), acquire/release as written."""
    if inst.has("acquire") or inst.has("release"):
        return strong
    if inst.has("volatile") or inst.has("relaxed"):
        return "monotonic"
    return None
