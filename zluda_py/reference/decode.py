"""Instruction closures: operands resolved once, value instructions through the JIT'd
semantics, memory / control flow / rendezvous through the reference's own rules (see
program.py for the closure convention and executor.py for the Thread they run on)."""

from __future__ import annotations

from functools import lru_cache

from zluda_py.compiler.layout import kernel_params
from zluda_py.compiler.lowering import CARRY, split_operands
from zluda_py.compiler.memops import ATOMIC_OPS, space_of, vector_count
from zluda_py.compiler.ptxtypes import align_up, immediate_bits, var_align, var_size
from zluda_py.compiler.semantics import SEMANTICS
from zluda_py.ptx import ast
from zluda_py.reference import jit
from zluda_py.reference.memory import CUDA_ERROR_LAUNCH_FAILED, LOCAL_BASE, PARAM_BASE, SHARED_BASE, ReferenceFault
from zluda_py.reference.program import Func, Program, Read, Step, Symbol, Write, bits_of

NO_OPS = {"membar", "fence", "prefetch", "prefetchu", "pmevent", "discard", "applypriority", "createpolicy",
          "griddepcontrol", "setmaxnreg", "nanosleep"}
COLLECTIVES = {"shfl", "vote", "match", "redux", "activemask", "elect"}


@lru_cache(maxsize=16)
def load(ptx: str | tuple[str, ...]) -> Program:
    """Parse, lay out and decode a module (cached: a fuzzer runs one module many times)."""
    prog = Program(ptx if isinstance(ptx, str) else list(ptx))
    values = []
    for func in prog.func_list:
        variables, stmts, directives = prog.bodies[func.name]
        values += _declare(prog, func, variables, stmts, directives)
    jit.prepare(values)  # one LLVM compilation for all the module's new forms
    for func in prog.func_list:
        _, stmts, _ = prog.bodies[func.name]
        d = Decoder(prog, func)
        func.code = [d.step(s) for s in stmts if isinstance(s, ast.Instruction)]
        func.code.append(d.implicit_return())
    return prog


def _declare(prog: Program, func: Func, variables, stmts, directives) -> list[ast.Instruction]:
    """Registers, frame layout, labels and parameters of `func`; returns its value instructions."""
    func.directives = directives
    func.regs["%cc"] = (0, 1)
    for v in variables:
        if v.space == "reg":
            if v.vector is not None:
                raise NotImplementedError(f"reference: vector register {v.name}")
            func.regs[v.name] = (len(func.regs), bits_of(v.type))
        elif v.space == "local":
            func.frame_size = align_up(func.frame_size, var_align(v))
            func.symbols[v.name] = Symbol("local", func.frame_size, var_size(v))
            func.frame_size += var_size(v)
        elif v.space == "param":
            func.symbols[v.name] = Symbol("param", 0, var_size(v))
            func.param_vars.append((v.name, var_size(v)))
        elif v.space not in ("shared", "global", "const"):
            raise NotImplementedError(f"reference: .{v.space} variable {v.name}")
    func.frame_size = align_up(func.frame_size, 16)
    fn = func.fn
    if fn.kind == "entry":
        for p in kernel_params(fn)[0]:
            func.symbols[p["name"]] = Symbol("kparam", PARAM_BASE + p["offset"], p["size"])
    else:
        for p in [*fn.returns, *fn.params]:
            if p.space == "reg":
                func.regs[p.name] = (len(func.regs), bits_of(p.type))
            else:
                func.symbols[p.name] = Symbol("param", 0, var_size(p))
    index = 0
    values = []
    for s in stmts:
        if isinstance(s, ast.Label):
            func.labels[s.name] = index
        elif isinstance(s, ast.Instruction):
            index += 1
            if s.opcode in SEMANTICS and not (s.opcode == "mov" and _own_mov(s)):
                values.append(s)
    return values


def _own_mov(inst: ast.Instruction) -> bool:
    """mov forms the reference moves itself: brace lists, 128 bits, vector registers."""
    return any(isinstance(o, ast.Vec) for o in inst.operands) or "b128" in inst.types or inst.has("v2") \
        or inst.has("v4")


def _name(inst: ast.Instruction) -> str:
    return ".".join((inst.opcode, *inst.mods))


def _refuse(inst: ast.Instruction, why: str = "") -> NotImplementedError:
    return NotImplementedError(f"reference: {_name(inst)}{f' ({why})' if why else ''} at {inst.pos}")


def _mask(bits: int) -> int:
    return (1 << bits) - 1


def _resize(value: int, have: int, want: int, signed: bool) -> int:
    """An unsigned `have`-bit value as `want` bits: truncated, or extended by sign or zeros."""
    if want <= have:
        return value & _mask(want)
    if signed and value >> (have - 1) & 1:
        return value | (_mask(want) ^ _mask(have))
    return value


SPECIALS = {
    "%tid": lambda t, k: t.tid[k], "%ntid": lambda t, k: t.block.ntid[k], "%ctaid": lambda t, k: t.block.ctaid[k],
    "%nctaid": lambda t, k: t.launch.grid[k], "%laneid": lambda t, k: t.lane, "%warpid": lambda t, k: t.warp,
    "%nwarpid": lambda t, k: t.block.nwarps, "%smid": lambda t, k: 0, "%nsmid": lambda t, k: 1,
    "%gridid": lambda t, k: 0, "%clock": lambda t, k: t.launch.steps & 0xFFFFFFFF,
    "%clock64": lambda t, k: t.launch.steps, "%clock_hi": lambda t, k: 0, "%globaltimer": lambda t, k: t.launch.steps,
    "%globaltimer_lo": lambda t, k: t.launch.steps & 0xFFFFFFFF, "%globaltimer_hi": lambda t, k: 0,
    "%dynamic_smem_size": lambda t, k: t.launch.shared_mem, "%total_smem_size": lambda t, k: len(t.block.shared),
    "%clusterid": lambda t, k: t.block.ctaid[k], "%nclusterid": lambda t, k: t.launch.grid[k],
    "%cluster_ctaid": lambda t, k: 0, "%cluster_ctarank": lambda t, k: 0, "%cluster_nctaid": lambda t, k: 1,
    "%cluster_nctarank": lambda t, k: 1, "%is_explicit_cluster": lambda t, k: 0,
    **{f"%lanemask_{rel}": (lambda f: lambda t, k: sum(1 << j for j in range(32) if f(t.lane, j)))(f) for rel, f in (
        ("eq", lambda i, j: j == i), ("lt", lambda i, j: j < i), ("le", lambda i, j: j <= i),
        ("gt", lambda i, j: j > i), ("ge", lambda i, j: j >= i))},
}


class Decoder:
    """Turns the instructions of one function into closures."""

    def __init__(self, prog: Program, func: Func) -> None:
        self.prog, self.func = prog, func

    # ------------------------------------------------------------------ operands
    def symbol(self, name: str, inst: ast.Instruction) -> Symbol:
        sym = self.func.symbols.get(name) or self.prog.module_symbols.get(name)
        if sym is None:
            raise _refuse(inst, f"unknown symbol {name}")
        return sym

    def reg(self, name: str, inst: ast.Instruction) -> tuple[int, int]:
        if name not in self.func.regs:
            raise _refuse(inst, f"unknown register {name}")
        return self.func.regs[name]

    def read(self, op: ast.Operand, ptype: str, inst: ast.Instruction) -> Read:
        """`f(t, r)`: the operand's value as an unsigned integer of `ptype`'s width."""
        want = bits_of(ptype)
        signed = ptype.startswith("s")
        if isinstance(op, ast.Reg):
            if op.name not in self.func.regs:
                return self._special(op.name, want, inst)
            i, have = self.func.regs[op.name]
            if have == want or (have < want and not signed):
                return lambda t, r: r[i]
            if have > want:
                m = _mask(want)
                return lambda t, r: r[i] & m
            return lambda t, r: _resize(r[i], have, want, True)
        if isinstance(op, ast.Not):
            i, _ = self.reg(op.operand.name, inst)
            return lambda t, r: r[i] ^ 1
        if isinstance(op, ast.Imm):
            value = immediate_bits(op, ptype) if want <= 64 else op.value & _mask(want)
            return lambda t, r: value
        if isinstance(op, ast.Sym):
            address = self.address_of(op.name, inst)
            m = _mask(want)
            return lambda t, r: address(t) & m
        raise _refuse(inst, f"operand {op}")

    def _special(self, name: str, want: int, inst: ast.Instruction) -> Read:
        base, _, comp = name.partition(".")
        k = "xyz".index(comp) if comp in ("x", "y", "z") else 0
        f = SPECIALS.get(base)
        if f is None:
            raise _refuse(inst, f"register {name}")
        m = _mask(want)
        return lambda t, r: f(t, k) & m

    def address_of(self, name: str, inst: ast.Instruction):
        """`f(t)`: a symbol's value as an operand (its address in its own state space)."""
        sym = self.symbol(name, inst)
        if sym.kind == "local":
            off = sym.value
            return lambda t: t.frame.sp + off
        if sym.kind == "param":
            raise _refuse(inst, f"address of .param {name}")
        value = sym.value
        return lambda t: value

    def write(self, op: ast.Operand, ptype: str, inst: ast.Instruction) -> Write:
        """`f(t, r, value)`: store a `ptype` value (unsigned, its width) to a register."""
        if isinstance(op, ast.Sink):
            return lambda t, r, v: None
        if not isinstance(op, ast.Reg):
            raise _refuse(inst, f"destination {op}")
        i, have = self.reg(op.name, inst)
        want = bits_of(ptype)
        if want == have or (want < have and not ptype.startswith("s")):
            def put(t, r, v):
                r[i] = v
            return put
        if want > have:
            m = _mask(have)

            def put_trunc(t, r, v):
                r[i] = v & m
            return put_trunc

        def put_sext(t, r, v):
            r[i] = _resize(v, want, have, True)
        return put_sext

    def location(self, addr: ast.Addr, space: str, nbytes: int, inst: ast.Instruction):
        """`f(t, r) -> (buffer, offset)` of an access of `nbytes` through `addr` (checked)."""
        off = addr.offset
        if isinstance(addr.base, ast.Sym):
            sym = self.symbol(addr.base.name, inst)
            name = addr.base.name
            if sym.kind == "param":
                def param(t, r):
                    buf = t.frame.params[name]
                    if off < 0 or off + nbytes > len(buf):
                        raise ReferenceFault(700, f"illegal address: .param {name}+{off} by {t.name()}")
                    return buf, off
                return param
            own = {"kparam": "param", "local": "local", "shared": "shared", "func": "global"}.get(sym.kind, sym.kind)
            if sym.kind == "local":
                base = sym.value
                return lambda t, r: t.launch.memory.window(t, "local", t.frame.sp + base + off, nbytes)
            at = sym.value + off
            return lambda t, r: t.launch.memory.window(t, own, at, nbytes)
        if addr.base is None:
            return lambda t, r: t.launch.memory.window(t, space, off, nbytes)
        i, bits = self.reg(addr.base.name, inst)
        m = _mask(bits)  # a 32-bit address plus offset wraps at 32 bits
        return lambda t, r: t.launch.memory.window(t, space, (r[i] + off) & m, nbytes)

    # ------------------------------------------------------------------ instructions
    def step(self, inst: ast.Instruction) -> Step:
        op = inst.opcode
        if op in NO_OPS:
            body: Step = lambda t, r: None  # noqa: E731
        else:
            handler = getattr(self, "op_" + op.replace(".", "_"), None)
            if handler is not None:
                body = handler(inst)
            elif op in SEMANTICS:
                body = self.value(inst)
            else:
                raise _refuse(inst)
        if inst.guard is None or getattr(body, "guarded", False):
            return body
        g, _ = self.reg(inst.guard.reg, inst)
        neg = int(inst.guard.negated)

        def guarded(t, r):
            if r[g] ^ neg:
                return body(t, r)
        return guarded

    def value(self, inst: ast.Instruction) -> Step:
        """A value instruction through its JIT'd semantics (sources in, results out), as
        generated Python: operands become inline expressions (`r[3]`, `(r[3] & 255)`, 7)."""
        form = jit.scalar_form(inst)
        dests, ops = split_operands(inst, form.dst)
        cc = CARRY
        env: dict[str, object] = {"fn": form.fn, "OUT": jit.OUT, "_resize": _resize}
        srcs = iter(ops)
        args = [self.read_expr(cc if t == "cc" else next(srcs), t, inst, env) for t in form.src]
        dest_iter = iter(dests)
        outs = [cc if t == "cc" else next(dest_iter) for t in form.dst]
        if len(outs) > 1:
            args.append("OUT")
        lines = [] if inst.guard is None else [self.guard_test(inst)]
        call = f"fn({', '.join(args)})"
        if len(outs) == 1:
            lines.append(self.write_stmt(outs[0], form.dst[0], call, inst))
        else:
            lines.append(self.write_stmt(outs[0], form.dst[0], call, inst))
            lines += [self.write_stmt(o, t, f"OUT[{k}]", inst) for k, (o, t) in enumerate(zip(outs[1:], form.dst[1:]))]
        source = "def step(t, r):\n" + "".join(f"    {line}\n" for line in lines)
        exec(compile(source, f"<{_name(inst)} at {inst.pos}>", "exec"), env)
        step = env["step"]
        step.guarded = True  # type: ignore[attr-defined]
        return step  # type: ignore[return-value]

    def guard_test(self, inst: ast.Instruction) -> str:
        g, _ = self.reg(inst.guard.reg, inst)
        return f"if {'' if inst.guard.negated else 'not '}r[{g}]: return"

    def read_expr(self, op: ast.Operand, ptype: str, inst: ast.Instruction, env: dict) -> str:
        """`read` as a Python expression over `t` and `r` (closures it needs go into `env`)."""
        want = bits_of(ptype)
        if isinstance(op, ast.Reg) and op.name in self.func.regs:
            i, have = self.func.regs[op.name]
            if have == want or (have < want and not ptype.startswith("s")):
                return f"r[{i}]"
            if have > want:
                return f"(r[{i}] & {_mask(want)})"
            return f"_resize(r[{i}], {have}, {want}, True)"
        if isinstance(op, ast.Imm):
            return str(self.read(op, ptype, inst)(None, None))
        name = f"_rd{len(env)}"
        env[name] = self.read(op, ptype, inst)
        return f"{name}(t, r)"

    def write_stmt(self, op: ast.Operand, ptype: str, value: str, inst: ast.Instruction) -> str:
        """`write` as a Python statement storing the expression `value`."""
        if isinstance(op, ast.Sink):
            return value
        if not isinstance(op, ast.Reg):
            raise _refuse(inst, f"destination {op}")
        i, have = self.reg(op.name, inst)
        want = bits_of(ptype)
        if want == have or (want < have and not ptype.startswith("s")):
            return f"r[{i}] = {value}"
        if want > have:
            return f"r[{i}] = {value} & {_mask(have)}"
        return f"r[{i}] = _resize({value}, {want}, {have}, True)"

    def op_mov(self, inst: ast.Instruction) -> Step:
        if inst.has("v2") or inst.has("v4"):
            raise _refuse(inst, "vector registers")
        t = inst.types[-1]
        bits = bits_of(t)
        dst, src = inst.operands
        if isinstance(dst, ast.Vec):  # unpack: the first element is the low part
            part = bits // len(dst.elems)
            whole = self.read(src, t, inst)
            parts = [(self.write(e, f"b{part}", inst), part * k) for k, e in enumerate(dst.elems)]
            m = _mask(part)

            def unpack(tt, r):
                v = whole(tt, r)
                for w, shift in parts:
                    w(tt, r, v >> shift & m)
            return unpack
        if isinstance(src, ast.Vec):
            part = bits // len(src.elems)
            pieces = [(self.read(e, f"b{part}", inst), part * k) for k, e in enumerate(src.elems)]
            w = self.write(dst, t, inst)
            return lambda tt, r: w(tt, r, sum(rd(tt, r) << shift for rd, shift in pieces))
        if t == "b128":
            rd, w = self.read(src, t, inst), self.write(dst, t, inst)
            return lambda tt, r: w(tt, r, rd(tt, r))
        return self.value(inst)

    def op_ld(self, inst: ast.Instruction) -> Step:
        t = inst.types[-1]
        n, size = vector_count(inst), bits_of(t) // 8
        dst, addr = inst.operands[0], inst.operands[1]
        where = self.location(addr, space_of(inst), size * n, inst)
        dests = [(self.write(d, t, inst), k * size)
                 for k, d in enumerate(dst.elems if isinstance(dst, ast.Vec) else [dst])]

        def ld(tt, r):
            buf, off = where(tt, r)
            for w, k in dests:
                w(tt, r, int.from_bytes(buf[off + k:off + k + size], "little"))
        return ld

    op_ldu = op_ld

    def op_st(self, inst: ast.Instruction) -> Step:
        if inst.has("bulk") or inst.has("async"):
            raise _refuse(inst)
        t = inst.types[-1]
        size = bits_of(t) // 8
        addr, src = inst.operands[0], inst.operands[1]
        srcs = [(self.read(s, t, inst), k * size)
                for k, s in enumerate(src.elems if isinstance(src, ast.Vec) else [src])]
        where = self.location(addr, space_of(inst), size * len(srcs), inst)

        def st(tt, r):
            buf, off = where(tt, r)
            for rd, k in srcs:
                buf[off + k:off + k + size] = rd(tt, r).to_bytes(size, "little")
        return st

    def op_atom(self, inst: ast.Instruction) -> Step:
        return self._atomic(inst, inst.operands[0], inst.operands[1], inst.operands[2:])

    def op_red(self, inst: ast.Instruction) -> Step:
        if inst.has("async"):
            raise _refuse(inst)
        return self._atomic(inst, None, inst.operands[0], inst.operands[1:])

    def _atomic(self, inst, dst, addr, srcs) -> Step:
        from zluda_py.reference.atomics import update  # the operations on old values
        t = inst.types[-1]
        ops = [m for m in inst.mods if m in ATOMIC_OPS]
        if len(ops) != 1 or vector_count(inst) > 1 or bits_of(t) > 64:
            raise _refuse(inst)
        size = bits_of(t) // 8
        apply = update(inst, ops[0], t)
        where = self.location(addr, space_of(inst), size, inst)
        readers = [self.read(s, t, inst) for s in srcs[:2 if ops[0] == "cas" else 1]]
        w = self.write(dst, t, inst) if dst is not None else None

        def atomic(tt, r):
            buf, off = where(tt, r)
            old = int.from_bytes(buf[off:off + size], "little")
            buf[off:off + size] = apply(old, *[rd(tt, r) for rd in readers]).to_bytes(size, "little")
            if w is not None:
                w(tt, r, old)
        return atomic

    def op_cvta(self, inst: ast.Instruction) -> Step:
        t = inst.types[-1]
        dst, src = inst.operands
        space = space_of(inst)
        base = {"shared": SHARED_BASE, "local": LOCAL_BASE}.get(space, 0)  # param/global: generic already
        if inst.has("to"):
            base = -base
        rd, w, m = self.read(src, t, inst), self.write(dst, t, inst), _mask(bits_of(t))
        return lambda tt, r: w(tt, r, (rd(tt, r) + base) & m)

    def op_isspacep(self, inst: ast.Instruction) -> Step:
        dst, a = inst.operands
        space = space_of(inst)
        if space == "generic":
            raise _refuse(inst)
        # as on the CPU target, the .const and .param windows count as inside the global one
        spaces = {"global", "const", "param"} if space == "global" else {space}
        rd, w = self.read(a, "u64", inst), self.write(dst, "pred", inst)
        return lambda tt, r: w(tt, r, int(tt.launch.memory.space_of(rd(tt, r)) in spaces))

    # ------------------------------------------------------------------ control flow
    def target(self, name: str, inst: ast.Instruction) -> int:
        if name not in self.func.labels:
            raise _refuse(inst, f"unknown label {name}")
        return self.func.labels[name]

    def op_bra(self, inst: ast.Instruction) -> Step:
        k = self.target(next(o for o in inst.operands if isinstance(o, ast.Sym)).name, inst)

        return lambda t, r: k

    def op_brx(self, inst: ast.Instruction) -> Step:
        index, table = inst.operands[0], inst.operands[1]
        d = next((d for d in self.func.directives if d.name == "branchtargets" and isinstance(table, ast.Sym)
                  and d.args[0] == table.name), None)
        if d is None:
            raise _refuse(inst, "branch target list not found")
        targets = [self.target(s.name, inst) for s in d.args[1:]]
        rd = self.read(index, "u32", inst)

        def brx(t, r):
            i = rd(t, r)
            if i >= len(targets):
                raise ReferenceFault(CUDA_ERROR_LAUNCH_FAILED, f"brx.idx index {i} out of range by {t.name()}")
            return targets[i]
        return brx

    def op_ret(self, inst: ast.Instruction) -> Step:
        return lambda t, r: t.ret()

    def implicit_return(self) -> Step:
        return lambda t, r: t.ret()

    def op_exit(self, inst: ast.Instruction) -> Step:
        return lambda t, r: t.exit()

    def op_trap(self, inst: ast.Instruction) -> Step:
        def trap(t, r):
            raise ReferenceFault(CUDA_ERROR_LAUNCH_FAILED, f"trap by {t.name()} at {inst.pos}")
        return trap

    def op_brkpt(self, inst: ast.Instruction) -> Step:
        return self.op_trap(inst)

    def op_call(self, inst: ast.Instruction) -> Step:
        from zluda_py.reference.calls import call_step
        return call_step(self, inst)

    # ------------------------------------------------------------------ rendezvous
    def op_bar(self, inst: ast.Instruction) -> Step:
        if inst.has("warp"):
            return self._collective(inst, [], [], inst.operands[0])
        if inst.has("cluster"):
            raise _refuse(inst)
        ops = list(inst.operands)
        red = inst.has("red")
        dst = self.write(ops.pop(0), "u32" if inst.has("popc") else "pred", inst) if red else None
        pred = self.read(ops.pop(), "pred", inst) if red else (lambda t, r: 0)
        bar_id = self.read(ops[0], "u32", inst) if ops else (lambda t, r: 0)
        count = self.read(ops[1], "u32", inst) if len(ops) > 1 else (lambda t, r: 0)
        kind = "popc" if inst.has("popc") else "and" if inst.has("and") else "or" if inst.has("or") else None
        arrive = inst.has("arrive")
        if arrive and red:
            raise _refuse(inst)

        def bar(t, r):
            return t.block.arrive(t, bar_id(t, r), count(t, r), pred(t, r), kind, dst, arrive)
        return bar

    op_barrier = op_bar

    def op_shfl(self, inst: ast.Instruction) -> Step:
        if not inst.has("b32"):
            raise _refuse(inst)
        dst = inst.operands[0]
        d, p = (dst.dest, dst.pred) if isinstance(dst, ast.PredOut) else (dst, ast.Sink())
        srcs = inst.operands[1:4]
        mask = inst.operands[4] if inst.has("sync") else None
        return self._collective(inst, [(s, "b32") for s in srcs], [(d, "b32"), (p, "pred")], mask)

    def op_vote(self, inst: ast.Instruction) -> Step:
        dst, a = inst.operands[:2]
        mask = inst.operands[2] if inst.has("sync") else None
        return self._collective(inst, [(a, "pred")], [(dst, "b32" if inst.has("ballot") else "pred")], mask)

    def op_match(self, inst: ast.Instruction) -> Step:
        t = inst.types[-1]
        dst, a, mask = inst.operands[:3]
        d, p = (dst.dest, dst.pred) if isinstance(dst, ast.PredOut) else (dst, ast.Sink())
        outs = [(d, "b32")] + ([(p, "pred")] if inst.has("all") else [])
        return self._collective(inst, [(a, t)], outs, mask)

    def op_redux(self, inst: ast.Instruction) -> Step:
        t = inst.types[-1]
        dst, a, mask = inst.operands[:3]
        return self._collective(inst, [(a, t)], [(dst, t)], mask)

    def op_activemask(self, inst: ast.Instruction) -> Step:
        return self._collective(inst, [], [(inst.operands[0], "b32")], None)

    def op_elect(self, inst: ast.Instruction) -> Step:
        dst = inst.operands[0]
        d, p = (dst.dest, dst.pred) if isinstance(dst, ast.PredOut) else (dst, ast.Sink())
        return self._collective(inst, [], [(d, "u32"), (p, "pred")], inst.operands[1])

    def _collective(self, inst: ast.Instruction, srcs, dsts, mask_op) -> Step:
        """Wait at a warp rendezvous with the sources' values; the results arrive when the
        group completes (membermask `mask_op`; None: the legacy forms, see Warp)."""
        readers = [self.read(o, t, inst) for o, t in srcs]
        writers = [self.write(o, t, inst) for o, t in dsts]
        mask = self.read(mask_op, "b32", inst) if mask_op is not None else None
        key = (inst.opcode, inst.mods) if mask is not None else id(inst)

        def collective(t, r):
            inputs = tuple(rd(t, r) for rd in readers)
            return t.block.warps[t.warp].wait(t, inst, key, mask(t, r) if mask else None, inputs, writers)
        return collective
