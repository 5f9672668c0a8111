"""Instruction semantics: the single definition of every pure-value PTX instruction.

`SEMANTICS` maps an opcode to its `Semantic` (see SEMANTICS_CONTRACT: `operands(inst)` gives
the PTX types of destinations and sources, `emit(lanes, inst, srcs)` computes the results over
lane values). `supports(opcode, mods)` answers whether a form is translated, for the coverage
report.
"""

from __future__ import annotations

from zluda_py.compiler.semantics import (bits, compare, convert, extended, floating, integer,  # noqa: F401
                                         transcendental, video)
from zluda_py.compiler.semantics.base import SEMANTICS, OperandTypes, Semantic, UnsupportedError
from zluda_py.ptx import ast

__all__ = ["SEMANTICS", "OperandTypes", "Semantic", "UnsupportedError", "supports"]


def supports(opcode: str, mods: tuple[str, ...] | list[str]) -> bool:
    """Whether `opcode.mods` is a form the semantics translate (operands' shapes aside)."""
    sem = SEMANTICS.get(opcode)
    if sem is None:
        return False
    try:
        sem.operands(ast.Instruction(opcode, tuple(mods)))
    except UnsupportedError:
        return False
    return True
