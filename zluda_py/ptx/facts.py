"""What a module load asks of every function body besides the front end's checks: why the
module must stay whole (compiler/parts.py, `whole_reason`) and whether a function makes a query
NVIDIA's driver builds no kernel with (compiler/linker.py, `absent_kernels`).

The checker (checks.py) records both per function (`Function.facts`) during its one walk of the
statements, so a load does not walk the bodies twice more (CuPy's CUB module: 517k
instructions). The per-statement tests are here once, for the checker and for the compiler's
walk of a function that has no facts (an AST built by hand) or facts about another set of
function names (a module linked from several).
"""

from __future__ import annotations

from dataclasses import dataclass

from .ast import Addr, ArgList, Directive, Function, Instruction, Operand, Reg, Statement, Sym, Variable, mentioned_names

# txq queries of a texture or sampler handle with which NVIDIA's driver loads the module but
# builds no kernel that uses them: cuModuleGetFunction answers CUDA_ERROR_NOT_FOUND (an H100,
# driver 580.159.04: tests/hardware/golden/ptx_forms_probe.txt; the size queries, txq.level's
# too, build). compiler/linker.py leaves those kernels out.
NVIDIA_ABSENT_TXQ = frozenset({"channel_order", "channel_data_type", "num_samples", "normalized_coords",
                               "filter_mode", "addr_mode_0", "addr_mode_1", "addr_mode_2", "array_size",
                               "num_mipmap_levels"})


@dataclass(slots=True)
class BodyFacts:
    functions: frozenset[str]  # the module's function names that `whole` was found against
    whole: str | None  # the first reason in the body why the module stays whole, or None
    absent_query: bool  # an instruction of the body is an absent query (absent_query)


def names_a_function(op: Operand, functions: frozenset[str] | set[str]) -> bool:
    """Whether a name in `op` (ast.mentioned_names) is one of `functions`."""
    kind = type(op)
    if kind is Reg or kind is Sym:
        return op.name in functions
    if kind is Addr and not op.extra:
        return op.base is not None and op.base.name in functions
    return not mentioned_names([op]).isdisjoint(functions)


def taken_function(inst: Instruction, functions: frozenset[str] | set[str]) -> str | None:
    """A function whose address `inst` takes: one it names other than as a call's target."""
    ops = list(inst.operands)
    if inst.opcode == "call":  # `call (rets), target, (args)`: calling does not take the address
        k = 1 if ops and type(ops[0]) is ArgList else 0
        if k < len(ops) and type(ops[k]) is Sym:
            del ops[k]
    names = mentioned_names(ops) | ({inst.guard.reg} if inst.guard is not None else set())
    return next((n for n in names if n in functions), None)


def statement_reason(s: Statement, function: str, functions: frozenset[str] | set[str]) -> str | None:
    """Why statement `s` of `function` keeps its module whole (see compiler/parts.py), or None."""
    if type(s) is Variable:
        return variable_reason(s, function)
    if type(s) is Instruction:
        if (s.guard is not None and s.guard.reg in functions) or any(names_a_function(op, functions)
                                                                     for op in s.operands):
            taken = taken_function(s, functions)
            if taken:
                return taken_reason(taken, function)
        return None
    if type(s) is Directive and s.name == "calltargets":
        return f"{function} has .calltargets (an indirect call)"
    return None


def variable_reason(v: Variable, function: str) -> str | None:
    if v.space in ("global", "const"):
        return f".{v.space} variable {v.name} declared inside {function}"
    return None


def taken_reason(taken: str, function: str) -> str:
    return f"the address of {taken} is taken in {function}"


def absent_query(inst: Instruction) -> bool:
    """Whether `inst` queries a texture or sampler handle (a register, not a .texref) for one of
    the properties NVIDIA's driver builds no kernel with (NVIDIA_ABSENT_TXQ)."""
    return (inst.opcode == "txq" and not NVIDIA_ABSENT_TXQ.isdisjoint(inst.mods)
            and isinstance(inst.operands[1].base, Reg))


# the last (recorded, asked) pair of name sets found equal: the checker records one set for all
# of a module's functions and whole_reason asks with one, so a module compares them once, not
# once per function (quadratic in a module of thousands of functions)
_agreed: tuple[frozenset[str], frozenset[str] | set[str]] | None = None


def facts_for(f: Function, functions: frozenset[str] | set[str]) -> BodyFacts | None:
    """f's facts if the checker recorded them against these function names, else None."""
    global _agreed
    facts = f.facts
    if facts is None:
        return None
    agreed = _agreed
    if agreed is not None and agreed[0] is facts.functions and agreed[1] is functions:
        return facts
    if facts.functions != functions:
        return None
    _agreed = (facts.functions, functions)
    return facts
