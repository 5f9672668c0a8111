"""Inlining, into the kernels, of every call to a `.func` that reaches a block barrier.

The CPU target implements `bar.sync`/`barrier.sync`/`bar.red`/`bar.arrive` by returning from
the kernel's warp function and resuming it later (docs/cpu_target.md), which a called function
cannot do. nvcc leaves such calls in `__noinline__` functions that call `__syncthreads()` and in
`-G` builds, where nothing is inlined. This pass replaces each direct call to a `.func` that
contains a block barrier, or calls one that does, by a copy of the callee's body:

* the callee's registers, `.local`/`.param` variables and labels get a per-call-site suffix
  (`.inlN`: a dot never occurs in PTX identifiers, so no name can collide);
* each parameter becomes a variable of the call site: a `.reg` parameter a register, a
  `.param` parameter a `.local` variable (its `ld/st.param` become `ld/st.local`), because it
  must outlive the barriers and the CPU target keeps `.param` variables in the warp function's
  stack frame, which a barrier leaves. Arguments are copied in before the body (from the call
  sequence's `.param` variables piece by piece, or from a register or immediate) and results
  copied out at the return label that `ret` now branches to; a guarded call branches around
  all of it;
* `.shared`/`.global`/`.const` variables declared in the callee's body are static, one per
  program and not one per call site: they move to module scope (renamed `name.fn.fname`);
* instructions keep their positions, so errors name the callee's file:line.

mbarrier waits (test_wait/try_wait) count as barriers here: a warp waiting on one returns to
the block runner too (cpu/mbarrier.py).

Recursion through such a function cannot be inlined and is refused, as are indirect calls
that may reach one. Target-independent: AST in, AST out; the functions it inlined everywhere
leave the module.
"""

from __future__ import annotations

from itertools import count
from typing import Iterator

from zluda_py.compiler import cfg
from zluda_py.compiler.errors import UnsupportedError
from zluda_py.compiler.mbarrier import is_wait
from zluda_py.compiler.ptxtypes import var_align, var_size
from zluda_py.ptx import ast

# Instructions in one kernel after inlining above which the pass refuses (calls nested k deep,
# each calling the next twice, grow the kernel 2**k times).
MAX_INLINED = 200_000
_PER_CALL_SPACES = {"reg", "local", "param"}  # every other state space in a body is static

_WHY = "barriers in .funcs work by inlining the calls"


def inline_barrier_calls(module: ast.Module) -> ast.Module:
    """The module with every direct call to a `.func` that reaches a block barrier inlined into
    the kernels, and those functions removed. Unchanged (the same object) when there are none."""
    defs = {f.name: f for f in module.functions() if f.kind == "func" and f.body is not None}
    barrier = _barrier_reach(defs)
    if not barrier:
        return module
    _refuse_address_taken(module, barrier)
    inliner = _Inliner(defs, barrier)
    kernels = {id(k): inliner.kernel(k) for k in module.kernels()}
    items: list[ast.Function | ast.Variable | ast.Directive] = []
    for item in module.items:
        if isinstance(item, ast.Function) and item.name in barrier:
            items.extend(inliner.hoisted.pop(item.name, []))  # static variables where their function was
        else:
            items.append(kernels.get(id(item), item))
    return ast.Module(module.version, module.target, module.address_size, items, module.filename)


# --------------------------------------------------------------------------- analysis


def _instructions(stmts: list[ast.Statement]) -> Iterator[ast.Instruction]:
    for s in stmts:
        if isinstance(s, ast.Instruction):
            yield s
        elif isinstance(s, ast.Block):
            yield from _instructions(s.body)


def _is_barrier(inst: ast.Instruction) -> bool:
    """A block barrier, or an mbarrier wait (test_wait/try_wait): a thread spinning on one
    must let the block's other warps run, which a warp function does by returning to the
    block runner, so these too must not sit in a called function."""
    return cfg.is_block_barrier(cfg.normalize(inst, lambda _: False)) or is_wait(inst)


def _split_call(inst: ast.Instruction) -> tuple[list[ast.Operand], ast.Operand, list[ast.Operand]]:
    """(returns, target, arguments) of `call (rets), target, (args), proto`."""
    ops = list(inst.operands)
    rets = ops.pop(0).args if ops and isinstance(ops[0], ast.ArgList) else []
    target = ops.pop(0)
    args = ops.pop(0).args if ops and isinstance(ops[0], ast.ArgList) else []
    return rets, target, args


def _callee(inst: ast.Instruction) -> str | None:
    if inst.opcode != "call" or not inst.operands:
        return None
    target = _split_call(inst)[1]
    return target.name if isinstance(target, ast.Sym) else None


def _barrier_reach(defs: dict[str, ast.Function]) -> dict[str, ast.Instruction]:
    """For each .func that executes a block barrier itself or through direct calls: the barrier."""
    reach: dict[str, ast.Instruction] = {}
    calls: dict[str, set[str]] = {}
    for name, f in defs.items():
        calls[name] = set()
        for inst in _instructions(f.body or []):
            if name not in reach and _is_barrier(inst):
                reach[name] = inst
            callee = _callee(inst)
            if callee in defs:
                calls[name].add(callee)
    changed = True
    while changed:
        changed = False
        for name, callees in calls.items():
            if name not in reach:
                hit = next((c for c in sorted(callees) if c in reach), None)
                if hit is not None:
                    reach[name] = reach[hit]
                    changed = True
    return reach


def _describe(inst: ast.Instruction) -> str:
    return f"{'.'.join((inst.opcode, *inst.mods))} at {inst.pos.file}:{inst.pos.line}"


def _initializer_syms(init: ast.Initializer | None) -> Iterator[ast.Sym]:
    if init is None:
        return
    if isinstance(init.value, ast.Sym):
        yield init.value
    for item in init.items or []:
        yield from _initializer_syms(item)


def _operand_syms(op: ast.Operand) -> Iterator[ast.Sym]:
    if isinstance(op, ast.Sym):
        yield op
    elif isinstance(op, ast.Addr):
        for o in [op.base, *op.extra]:
            if o is not None:
                yield from _operand_syms(o)
    elif isinstance(op, ast.Vec):
        for e in op.elems:
            yield from _operand_syms(e)
    elif isinstance(op, ast.ArgList):
        for a in op.args:
            yield from _operand_syms(a)


def _refuse_address_taken(module: ast.Module, barrier: dict[str, ast.Instruction]) -> None:
    """A .func reaching a barrier whose address is taken may be called indirectly, which
    inlining cannot follow: refuse at the first indirect call, or else where the address is taken."""
    taken: list[tuple[str, ast.Pos]] = []
    indirect: ast.Instruction | None = None
    for item in module.items:
        if isinstance(item, ast.Variable):
            taken += [(s.name, item.pos) for s in _initializer_syms(item.init) if s.name in barrier]
        if not isinstance(item, ast.Function) or item.body is None:
            continue
        for s in _body_directives(item.body):
            if s.name == "calltargets":
                taken += [(a.name, s.pos) for a in s.args[1:] if isinstance(a, ast.Sym) and a.name in barrier]
        for inst in _instructions(item.body):
            ops = inst.operands
            if inst.opcode == "call" and ops:
                rets, target, args = _split_call(inst)
                if not isinstance(target, ast.Sym):
                    indirect = indirect or inst
                ops = [*rets, *args]
            taken += [(s.name, inst.pos) for op in ops for s in _operand_syms(op) if s.name in barrier]
    if not taken:
        return
    name, pos = taken[0]
    reached = f".func {name}, which reaches a barrier ({_describe(barrier[name])}; {_WHY}, which needs direct calls)"
    if indirect is not None:
        raise UnsupportedError(f"indirect call that may reach {reached}", indirect.pos)
    raise UnsupportedError(f"address taken of {reached}", pos)


def _body_directives(stmts: list[ast.Statement]) -> Iterator[ast.Directive]:
    for s in stmts:
        if isinstance(s, ast.Directive):
            yield s
        elif isinstance(s, ast.Block):
            yield from _body_directives(s.body)


def _labels(stmts: list[ast.Statement]) -> Iterator[str]:
    """Every label a body defines, at any depth (labels and the names of .callprototype,
    .branchtargets and .calltargets tables)."""
    for s in stmts:
        if isinstance(s, ast.Label):
            yield s.name
        elif isinstance(s, ast.Directive) and s.name in ("callprototype", "branchtargets", "calltargets"):
            yield s.args[0]
        elif isinstance(s, ast.Block):
            yield from _labels(s.body)


# --------------------------------------------------------------------------- renaming


def _variable(v: ast.Variable, name: str) -> ast.Variable:
    return ast.Variable(name, v.space, v.type, v.array, v.align, v.vector, None, v.linkage, v.init, v.ptr, v.pos)


def _inst(opcode: str, mods: tuple[str, ...], operands: list[ast.Operand], pos: ast.Pos,
          guard: ast.Guard | None = None) -> ast.Instruction:
    return ast.Instruction(opcode, mods, operands, guard, pos)


def _chunk(v: ast.Variable) -> tuple[str, int]:
    """The widest untyped type that copies variable `v` in aligned pieces, and their number."""
    size, align = var_size(v), var_align(v)
    width = next(w for w in (8, 4, 2, 1) if size % w == 0 and align % w == 0)
    return f"b{8 * width}", size // width


def _bind(formal: ast.Variable, new: str, actual: ast.Operand, actual_space: str | None, pos: ast.Pos,
          tag: str, temps: set[str], out: bool) -> list[ast.Instruction]:
    """The moves between the callee's parameter (renamed `new`; a `.param` parameter is now a
    `.local` variable) and the call's operand: into the parameter before the body, or back into
    the operand after it (`out`). `actual_space` is the state space of a variable operand
    (`param` for the caller's call sequence variables), None for a value."""
    space = "local" if formal.space == "param" else None
    if space is not None and actual_space is not None:  # memory to memory, in aligned pieces
        t, n = _chunk(formal)
        temps.add(t)
        tmp, step = ast.Reg(f"%copy{t}{tag}"), int(t[1:]) // 8
        (src, src_space), (dst, dst_space) = (new, space), (actual.name, actual_space)  # type: ignore[union-attr]
        if not out:
            (src, src_space), (dst, dst_space) = (dst, dst_space), (src, src_space)
        return [move for k in range(n) for move in (
            _inst("ld", (src_space, t), [tmp, ast.Addr(ast.Sym(src), k * step)], pos),
            _inst("st", (dst_space, t), [ast.Addr(ast.Sym(dst), k * step), tmp], pos))]
    if formal.array or formal.vector:
        raise UnsupportedError(f"a register or immediate bound to the .param array or vector parameter "
                               f"{formal.name} (only a .param variable can be)", pos)
    t = formal.type
    if space is not None:  # a value into / out of the parameter's memory
        if out:
            return [_inst("ld", (space, t), [actual, ast.Addr(ast.Sym(new))], pos)]
        return [_inst("st", (space, t), [ast.Addr(ast.Sym(new)), actual], pos)]
    if actual_space is not None:  # a .reg parameter passed in a variable
        if out:
            return [_inst("st", (actual_space, t), [ast.Addr(actual), ast.Reg(new)], pos)]  # type: ignore[arg-type]
        return [_inst("ld", (actual_space, t), [ast.Reg(new), ast.Addr(actual)], pos)]  # type: ignore[arg-type]
    if out:
        return [_inst("mov", (t,), [actual, ast.Reg(new)], pos)]
    return [_inst("mov", (t,), [ast.Reg(new), actual], pos)]


class _Inliner:
    def __init__(self, defs: dict[str, ast.Function], barrier: dict[str, ast.Instruction]) -> None:
        self.defs = defs
        self.barrier = barrier
        self.sites = count(1)
        self.hoisted: dict[str, list[ast.Variable]] = {}  # function -> its static variables
        self.static_names: dict[int, str] = {}  # id(declaration) -> module-scope name
        self.kernel_name = ""
        self.size = 0  # instructions of the kernel being expanded
        self.localized: set[str] = set()  # the .param parameters turned into .local variables

    def _space_of(self, actual: ast.Operand, params: frozenset[str]) -> str | None:
        if isinstance(actual, ast.Sym) and actual.name in params:
            return "param"
        if isinstance(actual, ast.Sym) and actual.name in self.localized:
            return "local"
        return None

    def kernel(self, k: ast.Function) -> ast.Function:
        self.size = sum(1 for _ in _instructions(k.body or []))
        self.kernel_name = k.name
        body = self.expand(k.body or [], frozenset(), ())
        return ast.Function(k.name, k.kind, k.linkage, k.params, k.returns, body, k.directives, k.pos)

    def expand(self, stmts: list[ast.Statement], params: frozenset[str],
               stack: tuple[str, ...]) -> list[ast.Statement]:
        """`stmts` with the calls to barrier functions inlined; `params` are the names of the
        `.param` variables in scope (the caller's side of a call sequence)."""
        declared = [v for v in stmts if isinstance(v, ast.Variable)]
        params = (params - {n for v in declared for n in ast.declared_names(v, params)}) | {
            v.name for v in declared if v.space == "param"}
        out: list[ast.Statement] = []
        for s in stmts:
            if isinstance(s, ast.Block):
                out.append(ast.Block(self.expand(s.body, params, stack), s.pos))
            elif isinstance(s, ast.Instruction) and _callee(s) in self.barrier:
                out.append(self.inline(s, params, stack))
            else:
                out.append(s)
        return out

    def inline(self, call: ast.Instruction, params: frozenset[str],
               stack: tuple[str, ...]) -> ast.Block:
        rets, target, args = _split_call(call)
        name = target.name  # type: ignore[union-attr]
        callee = self.defs[name]
        if name in stack:
            raise UnsupportedError(f"recursive call to .func {name}, which reaches a barrier "
                                   f"({_describe(self.barrier[name])}; {_WHY}, which recursion rules out)", call.pos)
        formals = [*callee.returns, *callee.params]
        actuals = [*rets, *args]
        if len(formals) != len(actuals):
            raise UnsupportedError(f"call to {name} with {len(actuals)} arguments for {len(formals)}", call.pos)
        self.size += sum(1 for _ in _instructions(callee.body or []))
        if self.size > MAX_INLINED:
            raise UnsupportedError(f"inlining the .funcs with barriers into {self.kernel_name} exceeds "
                                   f"{MAX_INLINED} instructions", call.pos)
        tag = f".inl{next(self.sites)}"
        env = {label: label + tag for label in _labels(callee.body or [])}
        decls: list[ast.Statement] = []
        temps: set[str] = set()  # types of the registers that copy .param bytes
        copy_in: list[ast.Statement] = []
        copy_out: list[ast.Statement] = []
        for i, (formal, actual) in enumerate(zip(formals, actuals)):
            new = env[formal.name] = formal.name + tag
            space = "local" if formal.space == "param" else formal.space
            decls.append(ast.Variable(new, space, formal.type, formal.array, formal.align, formal.vector,
                                      pos=formal.pos))
            if space == "local":
                self.localized.add(new)
            if isinstance(actual, ast.Sink):
                continue
            moves = _bind(formal, new, actual, self._space_of(actual, params), call.pos, tag, temps,
                          out=i < len(rets))
            (copy_out if i < len(rets) else copy_in).extend(moves)
        decls += [ast.Variable(f"%copy{t}{tag}", "reg", t) for t in sorted(temps)]
        returned = "$ret" + tag
        body = self._copy(callee.body or [], env, tag, returned, name, ast.mentioned_names(callee.body or []))
        skip: list[ast.Statement] = []
        end: list[ast.Statement] = []
        if call.guard is not None:  # lanes whose guard fails skip the whole call, copy-out included
            done = "$end" + tag
            skip = [_inst("bra", (), [ast.Sym(done)], call.pos, ast.Guard(call.guard.reg, not call.guard.negated))]
            end = [ast.Label(done, call.pos)]
        stmts = [*decls, *skip, *copy_in, *body, ast.Label(returned, call.pos), *copy_out, *end]
        return ast.Block(self.expand(stmts, params, (*stack, name)), call.pos)

    def _copy(self, stmts: list[ast.Statement], env: dict[str, str], tag: str, returned: str,
              fname: str, mentioned: set[str]) -> list[ast.Statement]:
        """The callee's statements renamed for one call site, `ret` branching to `returned`."""
        env = dict(env)
        out: list[ast.Statement] = []
        for v in stmts:
            if isinstance(v, ast.Variable):
                if v.space in _PER_CALL_SPACES:
                    for n in ast.declared_names(v, mentioned):
                        env[n] = n + tag
                else:
                    env[v.name] = self._static(fname, v)
        for s in stmts:
            if isinstance(s, ast.Variable):
                if s.space in _PER_CALL_SPACES:
                    out.extend(_variable(s, env[n]) for n in ast.declared_names(s, mentioned))
            elif isinstance(s, ast.Block):
                out.append(ast.Block(self._copy(s.body, env, tag, returned, fname, mentioned), s.pos))
            elif isinstance(s, ast.Label):
                out.append(ast.Label(env[s.name], s.pos))
            elif isinstance(s, ast.Directive):
                out.append(self._directive(s, env))
            elif isinstance(s, ast.Instruction):
                guard = s.guard
                if guard is not None and guard.reg in env:
                    guard = ast.Guard(env[guard.reg], guard.negated)
                if s.opcode == "ret":
                    out.append(_inst("bra", (), [ast.Sym(returned)], s.pos, guard))
                else:
                    ops = [ast.renamed(o, env) for o in s.operands]
                    out.append(_inst(s.opcode, self._space(s.mods, ops), ops, s.pos, guard))
        return out

    def _space(self, mods: tuple[str, ...], ops: list[ast.Operand]) -> tuple[str, ...]:
        """ld/st.param of a parameter that became a .local variable (it must outlive barriers,
        and the CPU target keeps .param variables in the warp function's stack frame) is
        ld/st.local."""
        if "param" in mods and any(isinstance(o, ast.Addr) and isinstance(o.base, ast.Sym)
                                   and o.base.name in self.localized for o in ops):
            return tuple("local" if m == "param" else m for m in mods)
        return mods

    @staticmethod
    def _directive(d: ast.Directive, env: dict[str, str]) -> ast.Directive:
        if d.name == "callprototype" or d.name == "calltargets":
            return ast.Directive(d.name, [env[d.args[0]], *d.args[1:]], d.pos)
        if d.name == "branchtargets":
            return ast.Directive(d.name, [env[d.args[0]], *[ast.renamed(a, env) for a in d.args[1:]]], d.pos)
        return d

    def _static(self, fname: str, v: ast.Variable) -> str:
        """The module-scope name of a static variable declared in a function body (one per
        declaration, whatever the number of call sites)."""
        if id(v) not in self.static_names:
            new = f"{v.name}.fn.{fname}"
            taken = {x.name for xs in self.hoisted.values() for x in xs}
            k = 1
            while new in taken:  # the same name declared in two scopes of one function
                k += 1
                new = f"{v.name}.fn{k}.{fname}"
            self.static_names[id(v)] = new
            self.hoisted.setdefault(fname, []).append(_variable(v, new))
        return self.static_names[id(v)]
