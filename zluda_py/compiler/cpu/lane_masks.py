"""Branches a whole warp takes in a lane pattern known before it runs (CPU target).

`if ((threadIdx.x & 31) == 0)` splits every whole warp the same way: lane 0 takes one side,
lanes 1-31 the other. That holds whenever %tid.x counts up by one from a multiple of 32 across
the warp's lanes, which is so for every whole warp of a 1-D block (%tid.x = 32*warp + lane) and
of a block whose %ntid.x is a multiple of 32 (no row ends inside a warp, and rows start at
multiples of 32); other blocks wrap %tid.x inside a warp. `taken_lanes` evaluates a branch's
predicate under that assumption; the block runner tests it once per launch (`aligned`) and
passes the answer to the warp function, whose FunctionLowering._fork_lanes lowers the branch's
block with the constant mask where it holds, so the lane compare, the side's one-lane tests and
its lane picks fold away, and so do the lanes of its values that only the side reads
(lane_demand.py; warp shuffle reduction, docs/cpu_target.md).

Registers are followed through their one definition in the function, unguarded, as in
scalar_lanes.invariant_registers: its every run gives a lane the same value, so any use after a
run reads it (a use before any run reads an undefined register). Followed: `mov` (%tid.x, a
register, an immediate) and `and` with an immediate (below 32 on %tid.x itself).
"""

from __future__ import annotations

from llvmlite import ir

from zluda_py.compiler import cfg
from zluda_py.compiler.cpu.abi import WARP
from zluda_py.compiler.cpu.affine import written
from zluda_py.compiler.ptxtypes import immediate_bits
from zluda_py.ptx import ast

TID = "tid"  # %tid.x's lanes: U + lane with U a multiple of 32 (not known itself)
Lanes = tuple[int, ...] | str  # one known value per lane, or TID


def aligned(b: ir.IRBuilder, ntid_x: ir.Value, ntid_y: ir.Value, ntid_z: ir.Value) -> ir.Value:
    """Whether %tid.x counts up from a multiple of 32 across every whole warp of such a block:
    a 1-D block, or %ntid.x a multiple of 32 (i64 dimensions, an i1 answer)."""
    one_d = b.icmp_unsigned("==", b.mul(ntid_y, ntid_z), ir.Constant(ntid_y.type, 1))
    rows = b.icmp_unsigned("==", b.and_(ntid_x, ir.Constant(ntid_x.type, WARP - 1)), ir.Constant(ntid_x.type, 0))
    return b.or_(one_d, rows)


class LaneMasks:
    """Whole-warp branch masks of one function body (module docstring)."""

    def __init__(self, body: cfg.FunctionBody) -> None:
        self._defs: dict[str, list[ast.Instruction]] = {}
        for blk in body.blocks:
            for inst in blk.insts:
                for name in written(inst):
                    self._defs.setdefault(name, []).append(inst)

    def taken_lanes(self, bra: ast.Instruction, setp: ast.Instruction | None) -> int | None:
        """Bit k set when lane k takes guarded `bra`, whose predicate `setp` (an unguarded integer
        `setp.eq/ne`, affine.Analysis.equality_setp) defines, in a whole warp whose %tid.x lanes
        are aligned (module docstring); None when not known."""
        if setp is None or len(self._defs.get(bra.guard.reg, [])) != 1:
            return None
        a, c = (self._lanes(op, setp.types[-1], 4) for op in setp.operands[1:])
        if not isinstance(a, tuple) or not isinstance(c, tuple):
            return None
        equal = sum(1 << k for k in range(WARP) if a[k] == c[k])
        taken = equal if "eq" in setp.mods else ~equal & 0xFFFFFFFF
        return ~taken & 0xFFFFFFFF if bra.guard.negated else taken

    def _lanes(self, op: ast.Operand, ptype: str, depth: int) -> Lanes | None:
        """`op`'s lanes as `ptype` (values below 32, so any integer width reads them alike)."""
        if isinstance(op, ast.Imm):
            return (immediate_bits(op, ptype),) * WARP
        if not isinstance(op, ast.Reg) or depth == 0:
            return None
        if op.name == "%tid.x":
            return TID
        found = self._defs.get(op.name, [])
        if len(found) != 1 or found[0].guard is not None or not found[0].types:
            return None
        inst = found[0]
        t = inst.types[-1]
        if t[0] not in "sub" or len(inst.operands) < 2:
            return None
        src = self._lanes(inst.operands[1], t, depth - 1)
        if inst.opcode == "mov" and len(inst.operands) == 2:
            return src
        if inst.opcode == "and" and len(inst.operands) == 3 and isinstance(inst.operands[2], ast.Imm):
            m = immediate_bits(inst.operands[2], t)
            if src == TID and m < WARP:  # (U + lane) & m with U a multiple of 32: lane & m
                return tuple(k & m for k in range(WARP))
            if isinstance(src, tuple):
                return tuple(v & m for v in src)
        return None
