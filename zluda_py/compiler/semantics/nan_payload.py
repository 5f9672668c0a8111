"""Where a NaN's bits cannot be observed, so float arithmetic may skip making NaN results canonical.

f32/f16/f64 arithmetic gives NaN results one canonical pattern (floating.canonical_nan), a
compare and select per operation. Only a use that moves the bits somewhere they can be read (a
store, a bit operation, a conversion keeping the payload, a call, any instruction not listed
here) tells two NaNs apart; the uses in `ANY_NAN_SOURCES` give the same result for every NaN.
`free_results` finds the arithmetic whose destination register reaches only such uses, directly
or through plain moves (mov, shfl, selp), and the targets emit it with `Lanes.nan_payload_free`.
"""

from __future__ import annotations

from typing import Callable, Iterable

from zluda_py.compiler.errors import UnsupportedError
from zluda_py.compiler.lanes import ptx_bits
from zluda_py.compiler.lowering import split_operands
from zluda_py.compiler.semantics.base import FLOAT_TYPES, SEMANTICS, types_of
from zluda_py.ptx import ast

Rule = Callable[[ast.Instruction, str], bool]
_always: Rule = lambda inst, t: True  # noqa: E731
_not_f64: Rule = lambda inst, t: t != "f64"  # noqa: E731
_not_upper_word: Rule = lambda inst, t: not (t == "f64" and inst.has("approx"))  # noqa: E731

# opcode -> the forms whose sources of the instruction's own float type may hold any NaN: the
# result is the same for every NaN there (the rules of floating.py, compare.py, transcendental.py).
ANY_NAN_SOURCES: dict[str, Rule] = {
    # a NaN operand gives a NaN result, made canonical (or itself free of demand)
    **dict.fromkeys(("add", "sub", "mul", "fma", "mad"), _always),
    # rcp.approx.ftz.f64 reads only the upper word: a NaN with its payload below is infinity
    **dict.fromkeys(("div", "rcp", "sqrt"), _not_upper_word),
    # one NaN gives the other operand, two the canonical NaN; not f64 (two NaNs give the second
    # operand quieted) nor .xorsign (the NaN's sign bit goes into the result)
    **dict.fromkeys(("min", "max"), lambda inst, t: t != "f64" and not inst.has("xorsign")),
    # a NaN gives the canonical NaN; on f64 the operand quieted
    **dict.fromkeys(("abs", "neg"), _not_f64),
    # comparisons and classes see only whether a value is NaN
    **dict.fromkeys(("setp", "set", "testp"), _always),
    # a NaN result from any NaN operand, made canonical; rsqrt.ftz.f64 reads the upper word
    **dict.fromkeys(("sin", "cos", "lg2", "ex2", "tanh", "rsqrt"), _not_f64),
}
# opcode -> the forms whose result `canonical_nan` may leave as computed: floating.arith with no
# step after it that reads a NaN's bits (rcp.approx.ftz.f64 keeps the result's upper word).
LEAVES_NAN: dict[str, Rule] = {
    **dict.fromkeys(("add", "sub", "mul", "fma", "mad"), _always),
    **dict.fromkeys(("div", "rcp", "sqrt"), _not_upper_word),
}
SENSITIVE = "sensitive"  # a register some use reads bit for bit


def _float_type(inst: ast.Instruction) -> str | None:
    types = types_of(inst)
    return types[-1] if types and types[-1] in FLOAT_TYPES else None


def _move(inst: ast.Instruction) -> tuple[str, list[str], int, list[ast.Operand]] | None:
    """(destination, sources, bits, other operands) of an instruction that only moves register
    bits; the other operands (a shuffle's lane, clamp and mask, selp's predicate) are read as is."""
    ops = inst.operands
    if inst.opcode == "mov" and len(ops) == 2 and all(isinstance(o, ast.Reg) for o in ops) and inst.types:
        return ops[0].name, [ops[1].name], ptx_bits(inst.types[-1]), []
    if inst.opcode == "selp" and len(ops) == 4 and isinstance(ops[0], ast.Reg) and inst.types:
        return ops[0].name, [o.name for o in ops[1:3] if isinstance(o, ast.Reg)], ptx_bits(inst.types[-1]), list(ops[3:])
    if inst.opcode == "shfl" and len(ops) >= 2 and isinstance(ops[1], ast.Reg):
        d = ops[0].dest if isinstance(ops[0], ast.PredOut) else ops[0]
        if isinstance(d, ast.Reg):
            return d.name, [ops[1].name], 32, list(ops[2:])
    return None


def _uses(inst: ast.Instruction) -> tuple[list[tuple[str, str]], list[str]] | None:
    """(payload-free uses as (register, type), other sources) of a value instruction; None when
    its operands are not known here (every register it names then counts as read bit for bit)."""
    sem = SEMANTICS.get(inst.opcode)
    if sem is None:
        return None
    try:
        types = sem.operands(inst)
    except UnsupportedError:
        return None
    _, sources = split_operands(inst, types.dst)
    t = _float_type(inst)
    rule = ANY_NAN_SOURCES.get(inst.opcode)
    free = t is not None and rule is not None and rule(inst, t)
    out: list[tuple[str, str]] = []
    rest: list[str] = []
    for st, op in zip([s for s in types.src if s != "cc"], sources):
        if free and st == t and isinstance(op, ast.Reg):
            out.append((op.name, t))
        else:
            rest.extend(ast.mentioned_names([op]))
    return out, rest


def free_results(insts: Iterable[ast.Instruction], escaping: Iterable[str]) -> set[int]:
    """ids of the instructions in `LEAVES_NAN` whose NaN results no use can tell apart.

    Each register gets the one float type all its uses read it as, payload-free (or SENSITIVE);
    a move passes its destination's demand to its sources when the widths match. Registers in
    `escaping` (a .func's parameters and results) are SENSITIVE. A register with several
    definitions has the demand of all its uses, so each definition is judged by all of them.
    """
    insts = list(insts)
    if not any(inst.opcode in LEAVES_NAN and _float_type(inst) for inst in insts):
        return set()  # no float arithmetic (most of an integer library's functions)
    demand: dict[str, str] = dict.fromkeys(escaping, SENSITIVE)

    def need(reg: str, want: str) -> bool:
        have = demand.get(reg)
        new = want if have in (None, want) else SENSITIVE
        demand[reg] = new
        return new != have

    moves = []
    for inst in insts:
        move = _move(inst)
        if move is not None:
            moves.append(move[:3])
            for name in ast.mentioned_names(move[3]):
                need(name, SENSITIVE)
            continue
        uses = _uses(inst)
        if uses is None:
            for name in ast.mentioned_names([inst]):
                need(name, SENSITIVE)
            continue
        for reg, t in uses[0]:
            need(reg, t)
        for reg in uses[1]:
            need(reg, SENSITIVE)
    changed = True
    while changed:
        changed = False
        for dst, srcs, bits in moves:
            d = demand.get(dst)
            if d is not None:
                want = d if d != SENSITIVE and ptx_bits(d) == bits else SENSITIVE
                for src in srcs:
                    changed |= need(src, want)
    free: set[int] = set()
    for inst in insts:
        t = _float_type(inst)
        rule = LEAVES_NAN.get(inst.opcode)
        if t is None or rule is None or not rule(inst, t) or not inst.operands:
            continue
        d = inst.operands[0]
        if isinstance(d, ast.Reg) and demand.get(d.name) in (None, t):
            free.add(id(inst))
    return free
