"""New values of atom/red: integer operations in Python, float ones through the value
semantics (add.rn without flushing, min/max), as the CPU target defines them."""

from __future__ import annotations

from typing import Callable

from zluda_py.compiler.lanes import ptx_bits
from zluda_py.ptx import ast
from zluda_py.reference import jit

FLOAT_OP = {"add": "add.rn", "min": "min", "max": "max"}


def update(inst: ast.Instruction, op: str, t: str) -> Callable[..., int]:
    """`f(old, x[, y])` -> the new memory value of an atomic `op` on type `t`."""
    width = ptx_bits(t)
    m = (1 << width) - 1
    if op == "cas":
        return lambda old, x, y: y if old == x else old
    if op == "exch":
        return lambda old, x: x
    if t.startswith("f") or t.startswith("bf"):
        if op not in FLOAT_OP:
            raise NotImplementedError(f"reference: {'.'.join((inst.opcode, *inst.mods))}")
        name = f"{FLOAT_OP[op]}.{t}"
        opcode, *mods = name.split(".")
        sem = ast.Instruction(opcode, tuple(mods), [ast.Reg("%d"), ast.Reg("%a"), ast.Reg("%b")])
        fn = jit.scalar_form(sem).fn
        return lambda old, x: fn(old, x)
    signed = t.startswith("s")

    def s(v: int) -> int:
        return v - (1 << width) if signed and v >> (width - 1) else v
    ops: dict[str, Callable[[int, int], int]] = {
        "add": lambda old, x: (old + x) & m, "and": lambda old, x: old & x, "or": lambda old, x: old | x,
        "xor": lambda old, x: old ^ x, "min": lambda old, x: old if s(old) <= s(x) else x,
        "max": lambda old, x: old if s(old) >= s(x) else x,
        "inc": lambda old, x: 0 if old >= x else old + 1,
        "dec": lambda old, x: x if old == 0 or old > x else old - 1}
    if op not in ops:
        raise NotImplementedError(f"reference: {'.'.join((inst.opcode, *inst.mods))}")
    return ops[op]
