"""Results of warp collectives for one completed group, as the PTX ISA defines them.

`group` maps each participating lane to its inputs (a tuple of operand values); the result
maps each lane to the values it writes. `Undefined` is raised where PTX leaves the outcome
undefined (a shuffle reading a lane outside the group).
"""

from __future__ import annotations

from typing import Callable

from zluda_py.compiler.warp_rules import REDUX_OPS, SHFL_MODES, shfl_source
from zluda_py.ptx import ast
from zluda_py.reference.memory import ReferenceFault

Group = dict[int, tuple[int, ...]]
Results = dict[int, tuple[int, ...]]


class Undefined(ReferenceFault):
    """A program whose result PTX leaves undefined (cu_result -1): not a valid oracle test."""

    def __init__(self, message: str) -> None:
        super().__init__(-1, f"undefined behaviour: {message}")


def _bits(lanes) -> int:
    return sum(1 << i for i in lanes)


def shfl(inst: ast.Instruction, group: Group) -> Results:
    """inputs (a, b, c): each lane reads a from its source lane; p says the source was in range."""
    mode = next(m for m in inst.mods if m in SHFL_MODES)
    out: Results = {}
    for lane, (_, b, c) in group.items():
        src, ok = shfl_source(mode, lane, b, c)
        if src not in group:
            raise Undefined(f"{'.'.join((inst.opcode, *inst.mods))} lane {lane} reads lane {src}, "
                            "which does not take part")
        out[lane] = (group[src][0], int(ok))
    return out


def vote(inst: ast.Instruction, group: Group) -> Results:
    """inputs (p,): all/any/uni give a predicate, ballot the mask of lanes whose p is set."""
    true = _bits(lane for lane, (p,) in group.items() if p)
    member = _bits(group)
    if inst.has("ballot"):
        value = true
    elif inst.has("all"):
        value = int(true == member)
    elif inst.has("any"):
        value = int(true != 0)
    else:
        value = int(true in (0, member))
    return {lane: (value,) for lane in group}


def match(inst: ast.Instruction, group: Group) -> Results:
    """inputs (a,): .any the lanes holding the same a; .all the group (and p = 1) when all agree."""
    if inst.has("any"):
        return {lane: (_bits(j for j, (b,) in group.items() if b == a),) for lane, (a,) in group.items()}
    same = len({a for (a,) in group.values()}) == 1
    value = _bits(group) if same else 0
    return {lane: (value, int(same)) for lane in group}


def redux(inst: ast.Instruction, group: Group) -> Results:
    """inputs (a,): the 32-bit integer reduction of a over the group."""
    t = inst.types[-1] if inst.types else ""
    if t not in ("u32", "s32", "b32"):
        raise NotImplementedError(f"reference: {'.'.join((inst.opcode, *inst.mods))}")
    op = next(m for m in inst.mods if m in REDUX_OPS)
    values = [a for (a,) in group.values()]
    if t == "s32":
        values = [a - (1 << 32) if a >> 31 else a for a in values]
    fold: Callable[[int, int], int] = {"add": lambda x, y: x + y, "and": lambda x, y: x & y,
                                        "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y,
                                        "min": min, "max": max}[op]
    acc = values[0]
    for v in values[1:]:
        acc = fold(acc, v)
    return {lane: (acc & 0xFFFFFFFF,) for lane in group}


def elect(inst: ast.Instruction, group: Group) -> Results:
    """The lowest lane of the group is the leader: d = its lane id, p = whether I am it."""
    leader = min(group)
    return {lane: (leader, int(lane == leader)) for lane in group}


def members(inst: ast.Instruction, group: Group) -> Results:
    """activemask (the lanes that arrived together) and bar.warp.sync (no result)."""
    value = _bits(group)
    return {lane: (value,) for lane in group}


RESULTS: dict[str, Callable[[ast.Instruction, Group], Results]] = {
    "shfl": shfl, "vote": vote, "match": match, "redux": redux, "elect": elect, "activemask": members,
    "bar": members}
