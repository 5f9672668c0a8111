"""atom and red on the CPU target: .global and generic ones through one out-of-line helper per
(operation, type, vector count).

A warp's atomic is a loop over its active lanes, lowest first, one LLVM atomicrmw/cmpxchg
(seq_cst) per lane and element, after the address checks (716, then 700) and, on memory other
blocks see, the launch's stop flag. Inline, that was ~60 IR lines per site, every site of a
kernel and of its converged clone (e2e_atomics' global_atomics: 68 sites, 7.6k lines); the helper
holds it once per module and kind, and a site stores its operands and makes one call. .shared
atomics stay inline (see AtomicsMixin._atomic).
"""
from __future__ import annotations

from llvmlite import ir

from zluda_py.compiler.cpu import values as V
from zluda_py.compiler.cpu.abi import WARP
from zluda_py.compiler.cpu.memory import STOP_CHECK, _helper, atomic_checks_function
from zluda_py.compiler.lanes import ptx_bits
from zluda_py.compiler.memops import atomic_update, bf16_op, cas_loop, space_of, vector_count, wide_atomic_op
from zluda_py.ptx import ast

I32, I64, PTR = ir.IntType(32), ir.IntType(64), ir.PointerType()


class AtomicsMixin:
    """atom/red for FunctionLowering (MemoryMixin's addresses, checks and lane buffers)."""

    def op_atom(self, inst: ast.Instruction, mask: ir.Value) -> None:
        self._atomic(inst, mask, inst.operands[0], inst.operands[1], inst.operands[2:])

    def op_red(self, inst: ast.Instruction, mask: ir.Value) -> None:
        self._atomic(inst, mask, None, inst.operands[0], inst.operands[1:])

    def _atomic(self, inst: ast.Instruction, mask: ir.Value, dst, addr, srcs) -> None:
        """One atomic per active lane, in lane order; a vector form is one atomic per element (PTX
        makes each element's access atomic on its own), element by element, its lanes' addresses
        checked as an access of the whole vector. .global and generic atomics call the kind's
        helper, a fault leaving through the function's recorded-fault block; a .shared one keeps its
        lane loop inline after the one-vector window test (through the helper, a shared-memory
        histogram's loop ran 12-15 % slower)."""
        b = self.b
        t = inst.types[-1]
        op = wide_atomic_op(inst)
        space = space_of(inst)  # .global, .shared or generic (the grammar's spaces)
        n = vector_count(inst)
        nbytes = ptx_bits(t) // 8 * n
        elems = lambda o: o.elems if isinstance(o, ast.Vec) else [o]  # noqa: E731
        operands = srcs[:2] if op == "cas" else srcs[:1]  # a cache-policy operand is a hint only
        dests = elems(dst) if dst is not None else []
        if space == "shared":
            ptrs = self.address(addr, space, nbytes, mask)
            if not isinstance(ptrs.type, ir.VectorType):
                ptrs = V.splat(b, ptrs)
            vals = [[self.read(e, t) for e in elems(s)] for s in operands]
            for k in range(n):
                at = b.add(ptrs, V.splat(b, ir.Constant(I64, k * nbytes // n))) if k else ptrs
                old = _atomic_lanes(b, op, t, at, [v[k] for v in vals], mask)
                if dests:
                    self.write(dests[k], old, t, mask)
            return
        host, offsets = self._locate(addr, space)
        addrs, data = self._lane_buffers()
        b.store(host if isinstance(host.type, ir.VectorType) else V.splat(b, host), addrs)
        vt = V.vec(ir.IntType(ptx_bits(t)))
        slot = lambda k: b.bitcast(  # noqa: E731
            b.gep(data, [ir.Constant(I64, 0), ir.Constant(I64, k * WARP * vt.element.width // 8)]), vt.as_pointer())
        for k, v in enumerate(self.read(e, t) for s in operands for e in elems(s)):
            b.store(v, slot(k))
        fn = _atomic_function(self.mod, op, t, n)
        status = b.call(fn, [self.ctx, addrs, V.mask_bits(b, mask), ir.Constant(I64, nbytes | STOP_CHECK),
                             ir.Constant(PTR, None) if offsets is None else self._bounds_cache(), data])
        with b.if_then(b.icmp_unsigned("!=", status, ir.Constant(I32, 0)), likely=False):
            self._leave_recorded(status)
        for k, d in enumerate(dests):
            self.write(d, b.load(slot(k)), t, mask)


def _atomic_lanes(b: ir.IRBuilder, op: str, t: str, ptrs: ir.Value, args: list[ir.Value], mask: ir.Value) -> ir.Value:
    """Inline: the old values of one atomic `op` per active lane on the cells `ptrs`."""
    ity = ir.IntType(ptx_bits(t))
    result = V.entry_alloca(b, V.vec(ity))
    b.store(ir.Constant(V.vec(ity), None), result)
    for idx in V.each_active_lane(b, mask):
        p = b.inttoptr(b.extract_element(ptrs, idx), PTR)
        old = _one_atomic(b, op, t, p, b.extract_element(args[0], idx),
                          b.extract_element(args[1], idx) if op == "cas" else None)
        b.store(b.insert_element(b.load(result, typ=V.vec(ity)), old, idx), result)
    return b.load(result, typ=V.vec(ity))


def _one_atomic(b: ir.IRBuilder, op: str, t: str, p: ir.Value, x: ir.Value, y: ir.Value | None) -> ir.Value:
    """One lane's atomic on the cell at `p` (seq_cst): its old value."""
    if t in ("bf16", "bf16x2"):  # no native bf16 arithmetic: a compare-and-swap loop
        return cas_loop(b, b.load(p, typ=x.type), lambda cur: bf16_op(b, op, cur, x, ptx_bits(t) // 16),
                        lambda e, new: b.cmpxchg(p, e, new, "seq_cst", "seq_cst"))
    return atomic_update(b, op, t, x, y, lambda name, arg: b.atomic_rmw(name, p, arg, "seq_cst"),
                         lambda e, new: b.cmpxchg(p, e, new, "seq_cst", "seq_cst"))


def _atomic_function(mod, op: str, t: str, n: int) -> ir.Function:
    """`i32 zluda.atom.<op>.<t>.xN(ctx, ptr addrs, i32 mask, i64 size, ptr cache, ptr data)`: the
    shared `zluda.atomic_checks` (stop flag, the lanes' addresses), then for each of the N
    elements, for each active lane lowest first, the atomic on addrs[lane] + the element's offset
    with data's operand vectors (element k in vector k; cas: compare in vector 0, new value in 1),
    its old value written over vector k. Returns the status (0: done; else what the checks
    recorded)."""
    name = f"zluda.atom.{op}.{t}.x{n}"
    fn = mod.ir.globals.get(name)
    if fn is not None:
        return fn
    fn = _helper(mod, name, I32, [PTR, PTR, I32, I64, PTR, PTR])
    ctx, addrs_p, bits, size, cache, data = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    status = b.call(atomic_checks_function(mod), [ctx, addrs_p, bits, size, cache])
    with b.if_then(b.icmp_unsigned("!=", status, ir.Constant(I32, 0)), likely=False):
        b.ret(status)
    width = ptx_bits(t)
    ity = ir.IntType(width)
    for k in range(n):
        for lane in V.each_set_bit(b, bits):
            index = b.zext(lane, I64)
            at = b.load(b.gep(addrs_p, [index], source_etype=I64), typ=I64)
            p = b.inttoptr(b.add(at, ir.Constant(I64, k * width // 8)) if k else at, PTR)
            cell = b.gep(data, [b.add(index, ir.Constant(I64, k * WARP)) if k else index], source_etype=ity)
            new = b.load(b.gep(data, [b.add(index, ir.Constant(I64, WARP))], source_etype=ity), typ=ity) \
                if op == "cas" else None
            old = _one_atomic(b, op, t, p, b.load(cell, typ=ity), new)
            b.store(old, cell)
    b.ret(ir.Constant(I32, 0))
    return fn

