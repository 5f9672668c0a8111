"""Memory on the CPU target: state-space addresses, ld/st, atomics, cvta and isspacep.

Device pointers are host pointers. A `.shared` address is an offset into the block's arena and
a `.local` address an offset into the lane's stack window, as on the GPU (so 32-bit shared and
local addresses work); cvta adds the arena or the lane's window base to make a generic
(host) address. Accesses from consecutive lanes to consecutive elements become one masked
vector load/store; anything else is a masked gather/scatter.
"""

from __future__ import annotations

from llvmlite import ir

from zluda_py.compiler.cpu import values as V
from zluda_py.compiler.cpu.abi import BOUNDS_CACHE_ENTRIES, WARP, Ctx
from zluda_py.compiler.errors import CUDA_ERROR_ILLEGAL_ADDRESS, UnsupportedError, unsupported
from zluda_py.compiler.lanes import ptx_bits
from zluda_py.compiler.memops import (SPACES, atomic_op, atomic_update, cp_async_fill, cp_async_size, cp_async_src_size,
                                      space_of, vector_count)
from zluda_py.ptx import ast

I1, I32, I64, PTR = V.I1, V.I32, V.I64, V.PTR


class MemoryMixin:
    # ------------------------------------------------------------------ addresses
    def lane_local_base(self) -> ir.Value:
        """Generic address of local offset 0 for each lane (its stack window)."""
        b = self.b
        t = b.zext(self.thread_index, V.vec(I64))
        return b.add(V.splat(b, self.ctx_i64(Ctx.STACK)), b.mul(t, V.splat(b, self.ctx_i64(Ctx.STACK_SIZE))))

    def space_base(self, space: str) -> ir.Value | None:
        """What to add to a `space` address to get a host address (None: it already is one)."""
        if space == "shared":
            return V.splat(self.b, self.ctx_i64(Ctx.SHARED))
        if space == "local":
            return self.lane_local_base()
        return None

    def symbol(self, name: str, pos: ast.Pos = ast.NOPOS):
        sym = self.symbols.get(name) or self.mod.symbol(name)
        if sym is None:
            raise UnsupportedError(f"symbol {name} (not declared)", pos)
        return sym

    def symbol_address(self, name: str, _space: str = "generic") -> ir.Value:
        """The value of a symbol used as an operand: its address in its own state space."""
        b = self.b
        sym = self.symbol(name)
        if sym.kind == "kparam":
            return V.splat(b, b.add(self.ctx_i64(Ctx.PARAMS), ir.Constant(I64, sym.offset)))
        if sym.kind == "local":
            return V.splat(b, b.add(self.sp, ir.Constant(I64, sym.offset)))
        if sym.kind == "shared":
            return V.splat_const(I64, sym.offset)
        if sym.kind in ("global", "const", "func"):
            return V.splat(b, b.ptrtoint(sym.ptr, I64))
        if sym.kind == "lparam":
            return self.lane_param_address(sym, 0)
        raise UnsupportedError(f"address of {name}")

    def lane_param_address(self, sym, offset: int) -> ir.Value:
        b = self.b
        base = V.splat(b, b.ptrtoint(sym.ptr, I64))
        lanes = V.lane_consts(I64, [i * sym.size + offset for i in range(WARP)])
        return b.add(base, lanes)

    def address(self, addr: ast.Addr, space: str, nbytes: int = 0, mask: ir.Value | None = None) -> ir.Value:
        """Host address per lane (`<32 x i64>`), or a scalar i64 when it is the same for all lanes.

        With a `mask`, an address computed from a register is checked for an access of
        `nbytes` per lane (addresses of symbols plus constant offsets are valid by construction).
        """
        b = self.b
        off = ir.Constant(I64, addr.offset)
        if isinstance(addr.base, ast.Sym):
            sym = self.symbol(addr.base.name, addr.pos)
            if sym.kind == "kparam":
                return b.add(self.ctx_i64(Ctx.PARAMS), ir.Constant(I64, sym.offset + addr.offset))
            if sym.kind in ("global", "const"):
                return b.add(b.ptrtoint(sym.ptr, I64), off)
            if sym.kind == "shared":
                return b.add(self.ctx_i64(Ctx.SHARED), ir.Constant(I64, sym.offset + addr.offset))
            if sym.kind == "local":
                return b.add(self.lane_local_base(), V.splat(b, b.add(self.sp, ir.Constant(I64, sym.offset + addr.offset))))
            if sym.kind in ("lparam", "regparam"):
                return self.lane_param_address(sym, addr.offset)
            raise UnsupportedError(f"memory operand {addr.base.name}", addr.pos)
        if addr.base is None:
            value = V.splat_const(I64, addr.offset)
        else:  # a 32-bit address register (shared/local windows) is zero-extended
            value = V.resize(b, self.read(addr.base, "u64" if self.reg_bits(addr.base) == 64 else "u32"), 64, False)
            if addr.offset:
                value = b.add(value, V.splat(b, off))
        if mask is not None:
            self.check_bounds(value, space, nbytes, mask)
        base = self.space_base(space)
        return value if base is None else b.add(base, value)

    # ------------------------------------------------------------------ bounds checks (error 700)
    def check_bounds(self, value: ir.Value, space: str, nbytes: int, mask: ir.Value) -> None:
        """Fault with 700 unless every active lane's [value, value+nbytes) is valid in `space`.

        .shared/.local offsets are checked against the arena / the lane's stack window; host
        addresses (global, const, generic) against the launch's range table: first the range
        this site hit last (cached in the launch record), then the out-of-line search `zluda.bounds`.
        """
        b = self.b
        if space == "param":  # kernel/.func parameter buffers: only symbol-based in practice
            return
        size = ir.Constant(I64, nbytes)
        if space in ("shared", "local"):
            total = self.ctx_i64(Ctx.TOTAL_SMEM if space == "shared" else Ctx.STACK_SIZE)
            limit = b.sub(total, size)
            over = b.and_(mask, b.icmp_unsigned(">", value, V.splat(b, limit)))
            bad = b.or_(V.any_lane(b, over), b.and_(V.any_lane(b, mask), b.icmp_unsigned("<", total, size)))
            with b.if_then(bad, likely=False):
                first = V.intrinsic(b, "llvm.cttz.i32", I32, [V.mask_bits(b, mask), ir.Constant(I1, 1)])
                self.fault(CUDA_ERROR_ILLEGAL_ADDRESS, mask, b.extract_element(value, first))
            return
        cache = self._bounds_cache()
        lo = V.reduce(b, "umin", b.select(mask, value, V.splat_const(I64, -1)))
        top = V.reduce(b, "umax", b.select(mask, value, V.splat_const(I64, 0)))
        hi = b.add(top, size)
        c_lo = b.load(cache, typ=I64)
        c_hi = b.load(b.gep(cache, [ir.Constant(I64, 1)], source_etype=I64), typ=I64)
        ok = b.and_(b.and_(b.icmp_unsigned(">=", lo, c_lo), b.icmp_unsigned("<=", hi, c_hi)),
                    b.icmp_unsigned(">=", hi, top))
        with b.if_then(b.not_(ok), likely=False):
            found = b.call(_bounds_function(self.mod), [self.ctx, value, mask, size, cache])
            with b.if_then(b.not_(found), likely=False):
                self.fault(CUDA_ERROR_ILLEGAL_ADDRESS, mask)

    def _bounds_cache(self) -> ir.Value:
        """[lo, hi) of the range this access site last hit: one of the worker's launch-record
        entries (zeroed per launch, kept across warps and blocks), shared round-robin by sites."""
        self._bounds_sites = getattr(self, "_bounds_sites", 0) + 1
        entry = Ctx.BOUNDS_CACHE + 2 * (self._bounds_sites % BOUNDS_CACHE_ENTRIES)
        return self.b.gep(self.ctx, [ir.Constant(I64, 8 * entry)], source_etype=V.I8)

    def reg_bits(self, op: ast.Operand) -> int:
        if isinstance(op, ast.Reg) and op.name in self.regs:
            return self.regs[op.name][1]
        return 64

    # ------------------------------------------------------------------ vector memory access
    def load(self, ptrs: ir.Value, elt: ir.Type, n: int, mask: ir.Value) -> list[ir.Value]:
        """n consecutive elements per lane starting at each lane's address."""
        b = self.b
        size = elt.width // 8
        if not isinstance(ptrs.type, ir.VectorType):  # uniform address: scalar loads
            return [V.splat(b, b.load(b.inttoptr(b.add(ptrs, ir.Constant(I64, k * size)), PTR), typ=elt))
                    for k in range(n)]
        contiguous = self._contiguous(ptrs, size * n)
        with b.if_else(contiguous, likely=True) as (then, other):
            with then:
                wide = ir.VectorType(elt, WARP * n)
                base = b.inttoptr(b.extract_element(ptrs, ir.Constant(I32, 0)), PTR)
                whole = V.intrinsic(b, f"llvm.masked.load.v{WARP * n}i{elt.width}.p0", wide,
                                    [base, ir.Constant(I32, size), self._widen_mask(mask, n),
                                     ir.Constant(wide, None)])
                fast = [b.shuffle_vector(whole, ir.Constant(wide, None),
                                         V.lane_consts(I32, [i * n + k for i in range(WARP)])) for k in range(n)]
                fast_block = b.block
            with other:
                slow = []
                for k in range(n):
                    p = b.inttoptr(b.add(ptrs, V.splat_const(I64, k * size)), ir.VectorType(PTR, WARP))
                    slow.append(V.intrinsic(b, f"llvm.masked.gather.v{WARP}i{elt.width}.v{WARP}p0", V.vec(elt),
                                            [p, ir.Constant(I32, size), mask, ir.Constant(V.vec(elt), None)]))
                slow_block = b.block
        out = []
        for f, s in zip(fast, slow):
            phi = b.phi(V.vec(elt))
            phi.add_incoming(f, fast_block)
            phi.add_incoming(s, slow_block)
            out.append(phi)
        return out

    def store(self, ptrs: ir.Value, values: list[ir.Value], mask: ir.Value) -> None:
        b = self.b
        elt = values[0].type.element
        size, n = elt.width // 8, len(values)
        if not isinstance(ptrs.type, ir.VectorType):
            ptrs = V.splat(b, ptrs)
        contiguous = self._contiguous(ptrs, size * n)
        with b.if_else(contiguous, likely=True) as (then, other):
            with then:
                whole = values[0]
                if n > 1:
                    whole = _concat(b, values)
                    order = [ir.Constant(I32, k * WARP + i) for i in range(WARP) for k in range(n)]
                    whole = b.shuffle_vector(whole, ir.Constant(whole.type, None),
                                             ir.Constant(ir.VectorType(I32, WARP * n), order))
                base = b.inttoptr(b.extract_element(ptrs, ir.Constant(I32, 0)), PTR)
                V.intrinsic(b, f"llvm.masked.store.v{WARP * n}i{elt.width}.p0", ir.VoidType(),
                            [whole, base, ir.Constant(I32, size), self._widen_mask(mask, n)])
            with other:
                for k, v in enumerate(values):
                    p = b.inttoptr(b.add(ptrs, V.splat_const(I64, k * size)), ir.VectorType(PTR, WARP))
                    V.intrinsic(b, f"llvm.masked.scatter.v{WARP}i{elt.width}.v{WARP}p0", ir.VoidType(),
                                [v, p, ir.Constant(I32, size), mask])

    def _contiguous(self, ptrs: ir.Value, stride: int) -> ir.Value:
        b = self.b
        first = V.splat(b, b.extract_element(ptrs, ir.Constant(I32, 0)))
        expect = b.add(first, V.lane_consts(I64, [i * stride for i in range(WARP)]))
        return V.reduce(b, "and", b.icmp_unsigned("==", ptrs, expect))

    def _widen_mask(self, mask: ir.Value, n: int) -> ir.Value:
        if n == 1:
            return mask
        return self.b.shuffle_vector(mask, ir.Constant(V.MASK, None), ir.Constant(
            ir.VectorType(I32, WARP * n), [ir.Constant(I32, i) for i in range(WARP) for _ in range(n)]))

    # ------------------------------------------------------------------ instructions
    def _mem_type(self, inst: ast.Instruction) -> str:
        types = inst.types
        if not types:
            raise unsupported(inst, "no type")
        return types[-1]

    def op_ld(self, inst: ast.Instruction, mask: ir.Value) -> None:
        t = self._mem_type(inst)
        dst, addr = inst.operands[0], inst.operands[1]
        bits = ptx_bits(t)
        n = vector_count(inst)
        values = self.load(self.address(addr, space_of(inst), bits // 8 * n, mask), ir.IntType(bits), n, mask)
        dests = dst.elems if isinstance(dst, ast.Vec) else [dst]
        for d, v in zip(dests, values):
            self.write(d, v, t, mask)

    op_ldu = op_ld

    def op_st(self, inst: ast.Instruction, mask: ir.Value) -> None:
        t = self._mem_type(inst)
        addr, src = inst.operands[0], inst.operands[1]
        srcs = src.elems if isinstance(src, ast.Vec) else [src]
        self.store(self.address(addr, space_of(inst), ptx_bits(t) // 8 * len(srcs), mask),
                   [self.read(s, t) for s in srcs], mask)

    def op_cvta(self, inst: ast.Instruction, mask: ir.Value) -> None:
        t = inst.types[-1]
        dst, src = inst.operands
        space = next(m for m in inst.mods if m in SPACES)
        value = V.resize(self.b, self.read(src, t), 64, False)
        base = self.space_base(space)
        if base is not None:
            value = self.b.sub(value, base) if inst.has("to") else self.b.add(value, base)
        self.write(dst, value, t, mask)

    def op_isspacep(self, inst: ast.Instruction, mask: ir.Value) -> None:
        b = self.b
        p, a = inst.operands
        space = next(m for m in inst.mods if m in SPACES or m.startswith("shared"))
        space = "shared" if space.startswith("shared") else space
        addr = self.read(a, "u64")
        if space in ("shared", "local"):
            lo = self.ctx_i64(Ctx.SHARED if space == "shared" else Ctx.STACK)
            threads = b.mul(b.mul(self.ctx_i64(Ctx.BLOCK_X), self.ctx_i64(Ctx.BLOCK_Y)), self.ctx_i64(Ctx.BLOCK_Z))
            size = self.ctx_i64(Ctx.TOTAL_SMEM) if space == "shared" else b.mul(threads, self.ctx_i64(Ctx.STACK_SIZE))
            off = b.sub(addr, V.splat(b, lo))
            result = b.icmp_unsigned("<", off, V.splat(b, size))
        elif space in ("global", "generic"):
            result = b.not_(b.or_(self._in_window(addr, Ctx.SHARED), self._in_window(addr, Ctx.STACK)))
        else:  # const and param windows are ordinary host memory here
            result = V.ALL
        self.write(p, result, "pred", mask)

    def _in_window(self, addr: ir.Value, which: int) -> ir.Value:
        b = self.b
        lo = self.ctx_i64(which)
        if which == Ctx.SHARED:
            size = self.ctx_i64(Ctx.TOTAL_SMEM)
        else:
            threads = b.mul(b.mul(self.ctx_i64(Ctx.BLOCK_X), self.ctx_i64(Ctx.BLOCK_Y)), self.ctx_i64(Ctx.BLOCK_Z))
            size = b.mul(threads, self.ctx_i64(Ctx.STACK_SIZE))
        return b.icmp_unsigned("<", b.sub(addr, V.splat(b, lo)), V.splat(b, size))

    # ------------------------------------------------------------------ atomics
    def op_atom(self, inst: ast.Instruction, mask: ir.Value) -> None:
        self._atomic(inst, mask, inst.operands[0], inst.operands[1], inst.operands[2:])

    def op_red(self, inst: ast.Instruction, mask: ir.Value) -> None:
        self._atomic(inst, mask, None, inst.operands[0], inst.operands[1:])

    def _atomic(self, inst: ast.Instruction, mask: ir.Value, dst, addr, srcs) -> None:
        """One atomic per active lane, in lane order (LLVM atomicrmw/cmpxchg, seq_cst)."""
        b = self.b
        t = inst.types[-1]
        op = atomic_op(inst)
        bits = ptx_bits(t)
        ity = ir.IntType(bits)
        ptrs = self.address(addr, space_of(inst), bits // 8, mask)
        if not isinstance(ptrs.type, ir.VectorType):
            ptrs = V.splat(b, ptrs)
        vals = [self.read(s, t) for s in srcs]
        result = V.entry_alloca(b, V.vec(ity))
        if t in ("bf16", "bf16x2"):
            if op != "add":
                raise unsupported(inst)
            b.store(ir.Constant(V.vec(ity), None), result)
            for idx in V.each_active_lane(b, mask):
                p = b.inttoptr(b.extract_element(ptrs, idx), PTR)
                old = _cas_loop(b, p, ity, lambda cur: _bf16_add(b, cur, b.extract_element(vals[0], idx), bits // 16))
                b.store(b.insert_element(b.load(result, typ=V.vec(ity)), old, idx), result)
            if dst is not None:
                self.write(dst, b.load(result, typ=V.vec(ity)), t, mask)
            return
        b.store(ir.Constant(V.vec(ity), None), result)
        for idx in V.each_active_lane(b, mask):
            p = b.inttoptr(b.extract_element(ptrs, idx), PTR)
            old = atomic_update(b, op, t, b.extract_element(vals[0], idx),
                                b.extract_element(vals[1], idx) if op == "cas" else None,
                                lambda name, arg: b.atomic_rmw(name, p, arg, "seq_cst"),
                                lambda x, y: b.cmpxchg(p, x, y, "seq_cst", "seq_cst"))
            b.store(b.insert_element(b.load(result, typ=V.vec(ity)), old, idx), result)
        if dst is not None:
            self.write(dst, b.load(result, typ=V.vec(ity)), t, mask)

    def op_cp(self, inst: ast.Instruction, mask: ir.Value) -> None:
        """cp.async: the copy completes at once (see cp_async_size)."""
        n = cp_async_size(inst)
        if n is None:
            return
        dst, src = inst.operands[:2]
        src_size = cp_async_src_size(inst)
        # with a src-size operand the source may legally be partly (or wholly, size 0) invalid
        loaded = self.load(self.address(src, "global", n, mask if src_size is None else None), I32, n // 4, mask)
        if src_size is not None:  # bytes past src-size are zero-filled
            limit = self.read(src_size, "u32")
            loaded = [cp_async_fill(self.lanes, v, k, limit) for k, v in enumerate(loaded)]
        self.store(self.address(dst, "shared", n, mask), loaded, mask)


HOST_BOUNDS = 3  # zluda_host kind: is [a, b) registered now (memory registered during the launch)?


def _bounds_function(mod) -> ir.Function:
    """`i1 zluda.bounds(ctx, <32 x i64> addr, <32 x i1> mask, i64 size, ptr cache)`: every active lane's
    [addr, addr+size) lies in the shared arena, the stacks, the parameter blob or a registered
    range (binary search of the launch's table, then the host's live table). Updates `cache` to
    the range last found; on failure stores the first bad address in FAULT_ARG."""
    fn = mod.ir.globals.get("zluda.bounds")
    if fn is not None:
        return fn
    fn = ir.Function(mod.ir, ir.FunctionType(I1, [PTR, V.vec(I64), V.MASK, I64, PTR]), "zluda.bounds")
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    fn.attributes.add("cold")
    ctx, addrs, mask, size, cache = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    slot = lambda i: b.load(b.gep(ctx, [ir.Constant(I64, 8 * i)], source_etype=V.I8), typ=I64)  # noqa: E731
    cache_hi = b.gep(cache, [ir.Constant(I64, 1)], source_etype=I64)
    threads = b.mul(b.mul(slot(Ctx.BLOCK_X), slot(Ctx.BLOCK_Y)), slot(Ctx.BLOCK_Z))
    windows = [(slot(Ctx.SHARED), slot(Ctx.TOTAL_SMEM)), (slot(Ctx.STACK), b.mul(threads, slot(Ctx.STACK_SIZE))),
               (slot(Ctx.PARAMS), slot(Ctx.PARAM_SIZE))]
    table = b.inttoptr(slot(Ctx.RANGES), PTR)
    count = slot(Ctx.NRANGES)
    fail = fn.append_basic_block("fail")
    for lane in V.each_active_lane(b, mask):
        p = b.extract_element(addrs, lane)
        e = b.add(p, size)
        next_lane = fn.append_basic_block("next")
        found = fn.append_basic_block("found")
        with b.if_then(b.icmp_unsigned("<", e, p), likely=False):  # wraps around: never valid
            b.store(p, b.gep(ctx, [ir.Constant(I64, 8 * Ctx.FAULT_ARG)], source_etype=V.I8))
            b.branch(fail)
        hit = b.and_(b.icmp_unsigned(">=", p, b.load(cache, typ=I64)), b.icmp_unsigned("<=", e, b.load(cache_hi, typ=I64)))
        search = fn.append_basic_block("search")
        b.cbranch(hit, next_lane, search)
        b.position_at_end(search)
        start, end = ir.Constant(I64, 0), ir.Constant(I64, 0)
        for base, length in windows:  # the launch's own windows, then the table
            inside = b.and_(b.icmp_unsigned(">=", p, base), b.icmp_unsigned("<=", e, b.add(base, length)))
            start, end = b.select(inside, base, start), b.select(inside, b.add(base, length), end)
        in_window = b.icmp_unsigned("!=", end, ir.Constant(I64, 0))
        bsearch = fn.append_basic_block("bsearch")
        window_hit = b.block
        b.cbranch(in_window, found, bsearch)
        b.position_at_end(bsearch)
        lo_i, hi_i = b.phi(I64), b.phi(I64)
        lo_i.add_incoming(ir.Constant(I64, 0), window_hit)
        hi_i.add_incoming(count, window_hit)
        step = fn.append_basic_block("bsearch.step")
        after = fn.append_basic_block("bsearch.done")
        b.cbranch(b.icmp_unsigned("<", lo_i, hi_i), step, after)
        b.position_at_end(step)
        mid = b.lshr(b.add(lo_i, hi_i), ir.Constant(I64, 1))
        below = b.icmp_unsigned("<=", b.load(b.gep(table, [b.shl(mid, ir.Constant(I64, 1))], source_etype=I64), typ=I64), p)
        lo_i.add_incoming(b.select(below, b.add(mid, ir.Constant(I64, 1)), lo_i), step)
        hi_i.add_incoming(b.select(below, hi_i, mid), step)
        b.branch(bsearch)
        b.position_at_end(after)
        idx = b.shl(b.sub(lo_i, ir.Constant(I64, 1)), ir.Constant(I64, 1))
        have = b.icmp_unsigned("!=", lo_i, ir.Constant(I64, 0))
        safe = b.select(have, idx, ir.Constant(I64, 0))
        t_start = b.load(b.gep(table, [safe], source_etype=I64), typ=I64)
        t_end = b.load(b.gep(table, [b.add(safe, ir.Constant(I64, 1))], source_etype=I64), typ=I64)
        in_table = b.and_(have, b.icmp_unsigned("<=", e, t_end))
        ask_host = fn.append_basic_block("host")
        table_hit = fn.append_basic_block("table")
        b.cbranch(in_table, table_hit, ask_host)
        b.position_at_end(table_hit)
        b.branch(found)
        b.position_at_end(ask_host)
        zero = ir.Constant(I64, 0)
        live = b.call(mod.host_fn(), [ir.Constant(I32, HOST_BOUNDS), ctx, p, e, zero, zero, zero])
        with b.if_then(b.icmp_unsigned("==", live, zero), likely=False):
            b.store(p, b.gep(ctx, [ir.Constant(I64, 8 * Ctx.FAULT_ARG)], source_etype=V.I8))
            b.branch(fail)
        host_hit = b.block
        b.branch(found)
        b.position_at_end(found)
        f_start, f_end = b.phi(I64), b.phi(I64)
        f_start.add_incoming(start, window_hit)
        f_end.add_incoming(end, window_hit)
        f_start.add_incoming(t_start, table_hit)
        f_end.add_incoming(t_end, table_hit)
        f_start.add_incoming(p, host_hit)
        f_end.add_incoming(e, host_hit)
        b.store(f_start, cache)
        b.store(f_end, cache_hi)
        b.branch(next_lane)
        b.position_at_end(next_lane)
    b.ret(ir.Constant(I1, 1))
    b.position_at_end(fail)
    b.ret(ir.Constant(I1, 0))
    return fn


def _cas_loop(b: ir.IRBuilder, p: ir.Value, ity: ir.Type, update) -> ir.Value:
    """Atomically replace *p by update(*p) with a compare-and-swap loop; returns the old value."""
    pre = b.block
    first = b.load(p, typ=ity)
    loop = b.append_basic_block("cas")
    done = b.append_basic_block("cas.done")
    b.branch(loop)
    b.position_at_end(loop)
    cur = b.phi(ity)
    cur.add_incoming(first, pre)
    pair = b.cmpxchg(p, cur, update(cur), "seq_cst", "seq_cst")
    seen = b.extract_value(pair, 0)
    cur.add_incoming(seen, loop)
    b.cbranch(b.extract_value(pair, 1), done, loop)
    b.position_at_end(done)
    return seen


def _bf16_add(b: ir.IRBuilder, x: ir.Value, y: ir.Value, parts: int) -> ir.Value:
    """Packed bf16 addition, round to nearest even, no flush (atom.add.noftz.bf16/bf16x2).
    Two bf16 values add exactly in f32 unless one is below half a bf16 ulp of the other, so
    rounding the f32 sum to bf16 is the correctly rounded bf16 sum; NaN gives the canonical 0x7FFF."""
    out = ir.Constant(x.type, 0)
    f32 = ir.FloatType()
    for k in range(parts):
        half = lambda v: b.shl(b.zext(b.trunc(b.lshr(v, ir.Constant(v.type, 16 * k)), V.I16), I32),  # noqa: E731
                               ir.Constant(I32, 16))
        total = b.fadd(b.bitcast(half(x), f32), b.bitcast(half(y), f32))
        raw = b.bitcast(total, I32)
        rounded = b.lshr(b.add(raw, b.add(ir.Constant(I32, 0x7FFF), b.and_(b.lshr(raw, ir.Constant(I32, 16)),
                                                                          ir.Constant(I32, 1)))), ir.Constant(I32, 16))
        r16 = b.select(b.fcmp_unordered("uno", total, total), ir.Constant(I32, 0x7FFF), rounded)
        out = b.or_(out, b.shl(b.zext(b.trunc(r16, V.I16), x.type), ir.Constant(x.type, 16 * k)))
    return out


def _concat(b: ir.IRBuilder, values: list[ir.Value]) -> ir.Value:
    """Concatenate equal-length vectors into one."""
    while len(values) > 1:
        nxt = []
        for i in range(0, len(values), 2):
            a, c = values[i], values[i + 1]
            n = a.type.count
            nxt.append(b.shuffle_vector(a, c, ir.Constant(ir.VectorType(I32, 2 * n),
                                                          [ir.Constant(I32, j) for j in range(2 * n)])))
        values = nxt
    return values[0]
