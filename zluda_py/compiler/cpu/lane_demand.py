"""Lanes of a block's values that a whole warp reads before they die (CPU target).

Where FunctionLowering._fork_lanes lowers a converged block whose branch splits every whole
warp the same known way (lane_masks) and runs one side in place, the side runs for its lanes
only: after `if ((tid & 31) == 0) out[i >> 5] = v; return` lane 0 of `v` is read, and back
through a `shfl.down` chain lanes 0-1, 0-3, ... 0-15 of the values before it. Lanes no one
reads are written as zeros (`FunctionLowering.write`), so LLVM folds their arithmetic away:
the reduction's upper halves, half of each permute and add (docs/cpu_target.md).

Backward over the block from what its end needs: a lane-wise instruction (LANE_WISE: lane k of
its results from lane k of its sources alone) needs of its sources the lanes needed of its
results; a `shfl` with constant lane operands the lanes it reads for them (warp_rules.
shfl_source: its own lane, or the lane it reads, exactly as the lowering picks them); any other
instruction every lane of every source (memory, collectives, calls: they run whole, faults
included). A guarded write keeps the lanes it does not write, so it kills no need.
"""

from __future__ import annotations

from collections.abc import Callable

from zluda_py.compiler import cfg
from zluda_py.compiler.cpu.abi import WARP
from zluda_py.compiler.cpu.affine import written
from zluda_py.compiler.warp_rules import shfl_source
from zluda_py.ptx import ast

ALL = (1 << WARP) - 1
LANE_WISE = frozenset({"add", "sub", "mul", "mad", "fma", "neg", "abs", "min", "max", "and", "or", "xor",
                       "not", "shl", "shr", "mov", "cvt", "cvta", "setp", "selp", "set", "slct", "copysign"})

Need = dict[str, int]  # register -> bit k set when lane k may be read


def reads(inst: ast.Instruction) -> set[str]:
    """Registers `inst` reads (its guard included)."""
    return cfg._source_regs(inst) | ({inst.guard.reg} if inst.guard is not None else set())


def side_reads(insts: list[ast.Instruction], lanes: int) -> Need | None:
    """What a side run in place for `lanes` needs of the registers it reads: those lanes, when
    its every instruction is lane-wise (LANE_WISE, ld, st: masked to those lanes); None else."""
    need: Need = {}
    for inst in insts:
        if inst.opcode not in LANE_WISE and inst.opcode not in ("ld", "st"):
            return None
        for r in reads(inst):
            need[r] = lanes
    return need


def demanded(insts: list[ast.Instruction], end: Need,
             constant: Callable[[ast.Instruction, ast.Operand], int | None]) -> dict[int, Need]:
    """For each instruction of `insts` (by id) that writes a register some lanes of which no
    later instruction nor `end` (what the block's end needs) reads: those registers and the
    lanes read. `constant(inst, op)`: an operand's value where it is one constant, else None."""
    need = dict(end)
    out: dict[int, Need] = {}
    for inst in reversed(insts):
        dests = written(inst)
        wanted = 0
        for r in dests:
            wanted |= need.get(r, 0)
        partial = {r: need.get(r, 0) for r in dests if need.get(r, 0) != ALL}
        if partial:
            out[id(inst)] = partial
        if inst.guard is None:
            for r in dests:
                need.pop(r, None)
        for r, lanes in _source_need(inst, wanted, constant).items():
            need[r] = need.get(r, 0) | lanes
    return out


def _source_need(inst: ast.Instruction, wanted: int,
                 constant: Callable[[ast.Instruction, ast.Operand], int | None]) -> Need:
    srcs = reads(inst)
    if inst.opcode in LANE_WISE:
        return {r: wanted for r in srcs}
    if inst.opcode == "shfl" and len(inst.operands) >= 4:
        mode = next((m for m in inst.mods if m in ("up", "down", "bfly", "idx")), None)
        bval, cval = (constant(inst, op) for op in inst.operands[2:4])
        a = inst.operands[1]
        if mode is not None and bval is not None and cval is not None and isinstance(a, ast.Reg):
            lanes = 0
            for k in range(WARP):
                if wanted >> k & 1:
                    lanes |= 1 << k | 1 << shfl_source(mode, k, bval, cval)[0]
            need = {r: ALL for op in inst.operands[2:] for r in cfg._regs_in(op)}
            if inst.guard is not None:
                need[inst.guard.reg] = ALL
            need[a.name] = need.get(a.name, 0) | lanes
            return need
    return {r: ALL for r in srcs}
