"""Instruction value semantics as scalar native functions: `SEMANTICS[op].emit` at lane width 1.

Each distinct form (opcode, modifiers, operand shape) becomes one function
`i64 f(i64 src0, i64 src1, ..., [ptr out])`: sources are the operands' bit patterns, the first
result is returned and any further ones (a `d|p` predicate, the carry flag) are stored to
`out[0..]`. Immediates are passed as arguments, so `add.s32 %r1, %r2, 1` and `add.s32 %r1, %r2, 7`
share a function. Forms are compiled in batches (one LLVM module per batch) and kept for the
life of the process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import cffi
from llvmlite import binding as llvm
from llvmlite import ir

from zluda_py.compiler.errors import UnsupportedError
from zluda_py.compiler.lanes import Lanes, ptx_bits
from zluda_py.compiler.semantics import SEMANTICS
from zluda_py.ptx import ast

I64 = ir.IntType(64)
_llvm_ready = False


def target_machine(opt: int = 2) -> llvm.TargetMachine:
    """A TargetMachine for JIT-compiling on this host (LLVM's native target initialised once)."""
    global _llvm_ready
    if not _llvm_ready:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _llvm_ready = True
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
                                        opt=opt)


@dataclass
class ScalarForm:
    """One compiled form: PTX types of its sources and results, and the native function
    (`fn(*sources[, OUT])`: the first result; the others land in OUT)."""

    src: list[str]
    dst: list[str]
    fn: Callable[..., int] | None = None


_FORMS: dict[tuple, ScalarForm] = {}
_ENGINES: list = []  # compiled code lives as long as its engine
_FFI = cffi.FFI()  # cffi calls through a function pointer cost less than ctypes'
OUT = _FFI.new("uint64_t[4]")  # the extra results of the call just made


def form_key(inst: ast.Instruction) -> tuple:
    """What a form's code depends on: opcode, modifiers and the operand shape (semantics read
    operands only to see a `d|p` destination or count them)."""
    pred_out = bool(inst.operands) and isinstance(inst.operands[0], ast.PredOut)
    return inst.opcode, inst.mods, pred_out, len(inst.operands)


def _shape(inst: ast.Instruction) -> ast.Instruction:
    """A stand-in for `inst` with placeholder registers: the form's code cannot see operand values."""
    ops: list[ast.Operand] = [ast.Reg(f"%x{i}") for i in range(len(inst.operands))]
    if inst.operands and isinstance(inst.operands[0], ast.PredOut):
        ops[0] = ast.PredOut(ast.Reg("%d"), ast.Reg("%p"))
    return ast.Instruction(inst.opcode, inst.mods, ops)


def operand_types(inst: ast.Instruction) -> tuple[list[str], list[str]]:
    """(source types, result types) of a value instruction; NotImplementedError for a form the
    semantics refuse."""
    sem = SEMANTICS.get(inst.opcode)
    if sem is None:
        raise NotImplementedError(f"reference: no semantics for {'.'.join((inst.opcode, *inst.mods))}")
    try:
        types = sem.operands(inst)
    except UnsupportedError as e:
        raise NotImplementedError(f"reference: {e}") from e
    return list(types.src), list(types.dst)


def prepare(insts: list[ast.Instruction]) -> None:
    """Compile every form among `insts` not compiled yet, all in one LLVM module."""
    todo: dict[tuple, ast.Instruction] = {}
    for inst in insts:
        key = form_key(inst)
        if key not in _FORMS and key not in todo:
            operand_types(inst)  # refuse bad forms before building anything
            todo[key] = inst
    if not todo:
        return
    mod = ir.Module("reference")
    mod.triple = llvm.get_process_triple()
    built: dict[tuple, tuple[str, ScalarForm]] = {}
    for n, (key, inst) in enumerate(todo.items()):
        src, dst = operand_types(inst)
        name = f"form{n}"
        _emit_form(mod, name, _shape(inst), src, dst)
        built[key] = (name, ScalarForm(src, dst))
    llmod = llvm.parse_assembly(str(mod))
    llmod.verify()
    tm = target_machine()
    engine = llvm.create_mcjit_compiler(llmod, tm)
    engine.finalize_object()
    _ENGINES.append((engine, tm))  # the engine borrows its target machine
    for key, (name, form) in built.items():
        args = ["uint64_t"] * len(form.src) + (["uint64_t *"] if len(form.dst) > 1 else [])
        form.fn = _FFI.cast(f"uint64_t (*)({', '.join(args) or 'void'})", engine.get_function_address(name))
        _FORMS[key] = form


def scalar_form(inst: ast.Instruction) -> ScalarForm:
    """The compiled form of a value instruction (compiling it now if `prepare` did not)."""
    form = _FORMS.get(form_key(inst))
    if form is None:
        prepare([inst])
        form = _FORMS[form_key(inst)]
    return form


def _emit_form(mod: ir.Module, name: str, inst: ast.Instruction, src: list[str], dst: list[str]) -> None:
    extra = len(dst) > 1
    fn = ir.Function(mod, ir.FunctionType(I64, [I64] * len(src) + ([ir.PointerType()] if extra else [])), name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    lanes = Lanes(b, 1)
    srcs = [b.trunc(a, ir.IntType(ptx_bits(t))) for a, t in zip(fn.args, src)]
    results = SEMANTICS[inst.opcode].emit(lanes, inst, srcs)
    assert len(results) == len(dst), (name, inst, results)
    wide = [b.zext(v, I64) if v.type.width < 64 else v for v in results]
    for k, v in enumerate(wide[1:]):
        b.store(v, b.gep(fn.args[-1], [ir.Constant(I64, k)], source_etype=I64))
    b.ret(wide[0])
