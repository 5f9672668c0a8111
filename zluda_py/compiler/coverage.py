"""Which instruction forms the compiler translates on the CPU target (`zluda ptx coverage`).

Combines what the compiler already has: the pure-value semantics answer per form
(`semantics.supports`); the CPU target dispatches per opcode (`FunctionLowering.lower_inst`:
`check_form` with its refusals and per-opcode form checks, the NO_OPS set and `op_<name>`
handlers; `lower_block`: branches, returns, traps and block barriers).
"""

from __future__ import annotations

from zluda_py.compiler import cfg
from zluda_py.compiler.cpu.function import NO_OPS, FunctionLowering, check_form
from zluda_py.compiler.errors import UnsupportedError
from zluda_py.compiler.semantics import SEMANTICS, supports
from zluda_py.ptx import ast


def cpu_support(opcode: str, mods: tuple[str, ...]) -> str | None:
    """How the CPU target translates `opcode.mods` (grammar spelling, modifiers in any
    order): "semantics", "target" (a handler of the CPU target), "no-op", or None."""
    inst = cfg.normalize(ast.Instruction(opcode, tuple(mods)), keep=lambda op: op in SEMANTICS)
    op = inst.opcode
    try:
        check_form(inst)  # the refusals FunctionLowering.lower_inst makes
    except UnsupportedError:
        return None
    if op in NO_OPS:
        return "no-op"
    if (cfg.is_terminator(inst) and op != "call") or hasattr(FunctionLowering, "op_" + op):
        return "target"
    if op in SEMANTICS:
        return "semantics" if supports(op, inst.mods) else None
    return None
