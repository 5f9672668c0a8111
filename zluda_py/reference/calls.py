"""call: a new frame with its own registers, .param buffers and .local frame (recursion works up
to the per-thread stack size); results copied back on return."""

from __future__ import annotations

from zluda_py.compiler.ptxtypes import var_size
from zluda_py.ptx import ast
from zluda_py.reference.memory import STOP, ReferenceFault
from zluda_py.reference.program import Func, Step, bits_of

SYSCALLS = {"vprintf", "malloc", "free", "__assertfail"}
CUDA_ERROR_ASSERT = 710


def _formals(prog, inst: ast.Instruction, target: ast.Operand, proto: ast.Operand | None, func: Func) -> ast.Function:
    """The signature a call passes arguments to: the callee's, or an indirect call's prototype."""
    if isinstance(target, ast.Sym):
        return prog.functions[target.name].fn
    name = proto.name if isinstance(proto, ast.Sym) else None
    d = next((d for d in func.directives if d.name in ("callprototype", "calltargets") and d.args[0] == name), None)
    if d is None:
        raise NotImplementedError(f"reference: indirect call without a prototype at {inst.pos}")
    if d.name == "callprototype":
        return ast.Function(name, "func", returns=list(d.args[1]), params=list(d.args[2]))
    return prog.functions[d.args[1].name].fn


def call_step(dec, inst: ast.Instruction) -> Step:
    prog, func = dec.prog, dec.func
    ops = list(inst.operands)
    rets = ops.pop(0).args if ops and isinstance(ops[0], ast.ArgList) else []
    target = ops.pop(0)
    args = ops.pop(0).args if ops and isinstance(ops[0], ast.ArgList) else []
    if isinstance(target, ast.Sym) and target.name not in prog.functions:
        if target.name in SYSCALLS:
            return _syscall(inst, target.name)
        raise NotImplementedError(f"reference: call to {target.name} (no body) at {inst.pos}")
    formals = _formals(prog, inst, target, ops[0] if ops else None, func)
    if len(formals.returns) != len(rets) or len(formals.params) != len(args):
        raise NotImplementedError(f"reference: call with {len(rets)}/{len(args)} arguments at {inst.pos}")
    # per argument: (formal, by-reference caller .param name or None, reader of its value)
    ins = []
    for formal, actual in zip(formals.params, args):
        by_ref = actual.name if isinstance(actual, ast.Sym) and func.symbols.get(actual.name) and \
            func.symbols[actual.name].kind == "param" else None
        ins.append((formal, by_ref, None if by_ref else dec.read(actual, formal.type, inst)))
    outs = []
    for formal, actual in zip(formals.returns, rets):
        by_ref = actual.name if isinstance(actual, ast.Sym) and func.symbols.get(actual.name) and \
            func.symbols[actual.name].kind == "param" else None
        outs.append((formal, by_ref, None if by_ref else dec.write(actual, formal.type, inst)))
    pick = dec.read(target, "u64", inst) if not isinstance(target, ast.Sym) else None
    fixed = prog.functions[target.name] if isinstance(target, ast.Sym) else None

    def call(t, r):
        callee = fixed
        if callee is None:
            callee = prog.function_at(pick(t, r))
            if callee is None:
                raise ReferenceFault(700, f"indirect call to 0x{pick(t, r):x} (no function) by {t.name()}")
        caller = t.frame
        frame = t.push(callee)
        regs = frame.regs
        for (_, by_ref, rd), mine in zip(ins, callee.fn.params):
            if by_ref is not None:
                frame.params[mine.name] = caller.params[by_ref]
            elif mine.space == "reg":
                regs[callee.regs[mine.name][0]] = rd(t, r) & ((1 << bits_of(mine.type)) - 1)
            else:
                size = var_size(mine)
                frame.params[mine.name] = bytearray(rd(t, r).to_bytes(max(size, 8), "little")[:size])
        copy = []
        for (_, by_ref, w), mine in zip(outs, callee.fn.returns):
            if by_ref is not None:
                frame.params[mine.name] = caller.params[by_ref]
            elif mine.space == "reg":
                i = callee.regs[mine.name][0]
                copy.append(lambda f, w=w, i=i: w(t, r, f.regs[i]))
            else:
                buf = frame.params[mine.name] = bytearray(var_size(mine))
                n = bits_of(mine.type) // 8
                copy.append(lambda f, w=w, buf=buf, n=n: w(t, r, int.from_bytes(buf[:n], "little")))
        frame.on_return = copy
        return STOP
    return call


def _syscall(inst: ast.Instruction, name: str) -> Step:
    if name == "vprintf":  # output is not modelled; printf returns 0 (its result is rarely read)
        return lambda t, r: None
    if name == "__assertfail":
        def fail(t, r):
            raise ReferenceFault(CUDA_ERROR_ASSERT, f"device-side assert triggered by {t.name()}")
        return fail
    raise NotImplementedError(f"reference: device-side {name} at {inst.pos}")

