"""Scalar copies of a few lanes of address registers, beside their `<32 x iN>` vectors (CPU target).

A whole warp's memory access tests and range-checks its addresses through a few lanes only
(lanes 0 and 31: the `ends` test, the range check, the vector move's base; lanes 15 and 16 too
for the rows of 2-D blocks). Extracted from the address vector, those lanes keep the vector on
the hot path: LLVM does not scalarise an extraction from a vector with other uses (the per-lane
fallback reads it). So each register an address is computed from carries scalar copies of
those lanes (`LANES`), computed by the same semantics at width 1 from its operands' copies, and
the access reads them; the vector is left to the cold per-lane path.

The copies are one scalar per register, not per lane group, so a copy is right only where the
last write of it computed the lane's value. That holds for *invariant* registers: exactly one
definition in the function, unguarded, an integer add/sub/mul/mad/shl/cvt/mov/cvta of
immediates, launch constants (`SPECIAL`), kernel parameters (`ld.param`, where they are loaded
once) and other invariant registers. Every run of that definition, by any lanes at any time,
then computes the same value for a given lane, and a use that exactly one definition reaches
(a known `affine.Form`) comes after some run of it. Kernels only, without barriers (a resume
would lose the copies) and with their registers in SSA values (`in_frame` kernels keep them in
memory).
"""

from __future__ import annotations

from typing import Callable

from llvmlite import ir

from zluda_py.compiler.cpu import affine
from zluda_py.compiler.cpu import values as V
from zluda_py.compiler.cpu.abi import Ctx
from zluda_py.compiler.lanes import Lanes, ptx_bits
from zluda_py.compiler.lowering import lower_semantic
from zluda_py.compiler.memops import space_of
from zluda_py.compiler.ptxtypes import immediate_bits
from zluda_py.ptx import ast

ROW_LANES = (0, 15, 16, 31)  # each half-warp's two ends (`MemoryMixin._emit`'s rows paths)
WARP_LANES = (0, 31)
OPS = {"add", "sub", "mul", "mad", "shl", "cvt", "mov"}
SIDE_OPS = OPS | {"shr"}  # evaluated for one lane of a side (one_lane_address)
# launch constants (the same in every lane: lane k of the splat) and the lane's position
SPECIAL = {f"%{r}.{a}" for r in ("ctaid", "ntid", "nctaid") for a in "xyz"} | {"%warpid", "%laneid"}
TID = {"%tid.x": 0, "%tid.y": 1, "%tid.z": 2}


def invariant_registers(blocks, addresses: set[str], uniform: set[str], kernel_param: Callable[[ast.Instruction], bool],
                        uniform_symbol: Callable[[str], bool]) -> set[str]:
    """The invariant registers (module docstring) among those `addresses` are computed from.
    `uniform`: registers held as one scalar; `kernel_param(inst)`: inst loads a kernel parameter;
    `uniform_symbol(name)`: the symbol's address is the same in every lane."""
    defs: dict[str, list[ast.Instruction]] = {}
    for blk in blocks:
        for inst in blk.insts:
            for name in affine.written(inst):
                defs.setdefault(name, []).append(inst)
    sources: dict[str, list[str]] = {}
    todo, seen = list(addresses), set(addresses)
    while todo:  # the registers the addresses are computed from, through their one definition
        name = todo.pop()
        found = defs.get(name, [])
        if len(found) != 1 or found[0].guard is not None:
            continue
        srcs = _sources(found[0], kernel_param, uniform_symbol)
        if srcs is None or found[0].opcode == "ld" and name not in uniform:  # a parameter: its scalar
            continue
        sources[name] = srcs
        todo += [s for s in srcs if s not in seen]
        seen.update(srcs)
    keep = set(sources)
    changed = True
    while changed:  # greatest fixed point: every register read is invariant too
        changed = False
        for name in list(keep):
            if any(s not in keep and (s in defs or s not in SPECIAL and s not in TID) for s in sources[name]):
                keep.discard(name)
                changed = True
    used, todo = set(), [a for a in addresses if a in keep]  # only what an invariant address reads
    while todo:
        name = todo.pop()
        if name not in used:
            used.add(name)
            todo += [s for s in sources[name] if s in keep]
    return used


def _sources(inst: ast.Instruction, kernel_param, uniform_symbol, ops: set[str] = OPS) -> list[str] | None:
    """The registers read by `inst` when it may define an invariant register (or, with `ops`,
    be evaluated at width 1 from its operands), else None."""
    if inst.opcode == "ld":
        return [] if kernel_param(inst) else None
    if inst.opcode not in ops and inst.opcode != "cvta" or "cc" in inst.mods:
        return None
    if inst.opcode == "cvta" and space_of(inst) not in ("global", "shared", "generic"):
        return None
    if not inst.types or any(t not in affine.INT_TYPES for t in inst.types):
        return None
    dst, *srcs = inst.operands
    if not isinstance(dst, ast.Reg) or not all(isinstance(s, (ast.Reg, ast.Imm)) or isinstance(s, ast.Sym)
                                               and uniform_symbol(s.name) for s in srcs):
        return None
    return [s.name for s in srcs if isinstance(s, ast.Reg)]


class _Unknown(Exception):
    """A one-lane value the side's instructions cannot give (ScalarLanesMixin.one_lane_address)."""


class ScalarLanesMixin:
    """FunctionLowering's scalar lane copies: `lane_copies` maps a register to its copies' slots
    (one alloca per lane of `copy_lanes`)."""

    def _set_up_lane_copies(self) -> None:
        self.lane_copies: dict[str, list[ir.Value]] = {}
        # rows of 2-D blocks are tested where %tid.y/%tid.z are read; elsewhere lanes 15 and 16
        # would be dead weight on the hot path (their rare uses extract them from the vector)
        self.copy_lanes = ROW_LANES if {"%tid.y", "%tid.z"} & ast.mentioned_names(self.fn.body or []) else WARP_LANES
        self.tid_copies: list[list[ir.Value]] = []
        if not self.is_kernel or self.resumable or self.in_frame or self.has_waits or not self.cloned:
            return
        addresses = {i.operands[o].base.name for blk in self.body.blocks for i in blk.insts
                     for o in _address_operands(i)}
        kparam = lambda inst: self.preloads_kernel_params() and _kernel_param_load(inst, self.symbols)  # noqa: E731
        names = invariant_registers(self.body.blocks, addresses, self.uniform_regs, kparam, self._uniform_symbol)
        b = self.b
        for name in [n for n in self.regs if n in names and n not in self.uniform_regs]:  # declaration order
            bits = self.regs[name][1]
            self.lane_copies[name] = [V.entry_alloca(b, ir.IntType(bits)) for _ in self.copy_lanes]
        if self.lane_copies and self.tid_slots:
            self.tid_copies = [[V.entry_alloca(b, V.I32) for _ in self.copy_lanes] for _ in TID]

    def store_tid_copies(self, base: ir.Value, tid: list[ir.Value] | None) -> None:
        """set_up_tid's %tid lanes: `base + lane` (x; y, z 0) in a 1-D block (`tid` None),
        else lanes of the vectors `tid`."""
        b = self.b
        for axis, slots in enumerate(self.tid_copies):
            for k, slot in zip(self.copy_lanes, slots):
                if tid is not None:
                    value = b.extract_element(tid[axis], ir.Constant(V.I32, k))
                else:
                    value = b.add(base, ir.Constant(V.I32, k)) if axis == 0 else ir.Constant(V.I32, 0)
                b.store(value, slot)

    def copy_lanes_of(self, inst: ast.Instruction) -> None:
        """After `inst` wrote its vector: the scalar copies of its destination, if it has them."""
        dst = inst.operands[0] if inst.operands else None
        if not isinstance(dst, ast.Reg) or dst.name not in self.lane_copies:
            return
        lanes = Lanes(self.b, 1)
        for j, k in enumerate(self.copy_lanes):
            read = lambda op, t, j=j, k=k: self._lane_operand(op, t, j, k)  # noqa: E731
            write = lambda op, v, t, j=j: self._store_copy(op, v, t, j)  # noqa: E731
            if inst.opcode == "cvta":
                self._copy_cvta(inst, read, write)
            else:
                lower_semantic(lanes, inst, read, write)

    def lane_copy(self, name: str, lane: int) -> ir.Value | None:
        """Register `name`'s value in `lane` as a scalar, if it has such a copy."""
        slots = self.lane_copies.get(name)
        if slots is None or lane not in self.copy_lanes:
            return None
        return self.b.load(slots[self.copy_lanes.index(lane)], typ=ir.IntType(self.regs[name][1]))

    def _lane_operand(self, op: ast.Operand, ptype: str, j: int, lane: int) -> ir.Value:
        b, bits = self.b, ptx_bits(ptype)
        if isinstance(op, ast.Imm):
            return ir.Constant(ir.IntType(bits), immediate_bits(op, ptype))
        if isinstance(op, ast.Sym):  # a symbol's address, the same in every lane
            return b.extract_element(self.read(op, ptype), ir.Constant(V.I32, 0))
        name = op.name
        if name in self.lane_copies:
            v = b.load(self.lane_copies[name][j], typ=ir.IntType(self.regs[name][1]))
        elif name in self.uniform_regs:
            v = b.load(self.regs[name][0], typ=ir.IntType(self.regs[name][1]))
        elif name in TID:
            v = b.load(self.tid_copies[TID[name]][j], typ=V.I32)
        elif name == "%laneid":
            v = ir.Constant(V.I32, lane)
        else:  # a launch constant: a splat, whose lane LLVM reads without the vector
            v = b.extract_element(self.special(name, 32), ir.Constant(V.I32, 0))
        return V.resize(b, v, bits, ptype.startswith("s"))

    def _store_copy(self, op: ast.Operand, value: ir.Value, ptype: str, j: int) -> None:
        slot = self.lane_copies[op.name][j]
        self.b.store(V.resize(self.b, value, self.regs[op.name][1], ptype.startswith("s")), slot)

    def _copy_cvta(self, inst: ast.Instruction, read, write) -> None:
        """op_cvta's value for one lane (global and generic: the same address; shared: the arena's base)."""
        b, t = self.b, inst.types[-1]
        value = V.resize(b, read(inst.operands[1], t), 64, False)
        if space_of(inst) == "shared":
            base = self.ctx_i64(Ctx.SHARED)
            value = b.sub(value, base) if inst.has("to") else b.add(value, base)
        write(inst.operands[0], value, t)


    def one_lane_address(self, addr: ast.Addr, space: str, lane: ir.Value) -> tuple[ir.Value, ir.Value] | None:
        """`[reg+offset]`'s host address and offset for one lane (`lane`, not a constant), as
        _locate computes them, with `reg` evaluated at width 1 through its definitions among the
        side's instructions lowered so far (`side_done`, straight-line); operands the side does
        not write are that lane of their vectors. None where the side does not define `reg`, or
        defines something on the way in a form not evaluated here (the vector then serves)."""
        b = self.b
        try:
            value = self._side_scalar(addr.base.name, lane, len(self.side_done))
        except _Unknown:
            return None
        if value is None:
            return None
        width = 64 if self.reg_bits(addr.base) == 64 else 32
        value = V.resize(b, value, width, False)
        if addr.offset:
            value = b.add(value, ir.Constant(value.type, addr.offset & ((1 << width) - 1)))
        value = V.resize(b, value, 64, False)
        return (b.add(self.ctx_i64(Ctx.SHARED), value) if space == "shared" else value), value

    def _side_scalar(self, name: str, lane: ir.Value, upto: int) -> ir.Value | None:
        """Register `name` in `lane` after the side's first `upto` instructions, if one of them
        wrote it last (None: none did)."""
        for i in range(upto - 1, -1, -1):
            inst = self.side_done[i]
            if name not in affine.written(inst):
                continue
            if inst.guard is not None or _sources(inst, lambda _: False, self._uniform_symbol, SIDE_OPS) is None:
                raise _Unknown
            out: dict[str, ir.Value] = {}
            read = lambda op, t: self._side_operand(op, t, lane, i)  # noqa: E731
            write = lambda op, v, t: out.__setitem__(  # noqa: E731
                op.name, V.resize(self.b, v, self.regs[op.name][1], t.startswith("s")))
            if inst.opcode == "cvta":
                self._copy_cvta(inst, read, write)
            else:
                lower_semantic(Lanes(self.b, 1), inst, read, write)
            if name not in out:
                raise _Unknown
            return out[name]
        return None

    def _side_operand(self, op: ast.Operand, ptype: str, lane: ir.Value, at: int) -> ir.Value:
        """Operand `op` of the side's instruction number `at`, in `lane`, read as `ptype`."""
        b, bits = self.b, ptx_bits(ptype)
        if isinstance(op, ast.Imm):
            return ir.Constant(ir.IntType(bits), immediate_bits(op, ptype))
        if isinstance(op, ast.Sym):  # a uniform symbol's address (_sources)
            return b.extract_element(self.read(op, ptype), ir.Constant(V.I32, 0))
        v = self._side_scalar(op.name, lane, at) if op.name in self.regs else None
        if v is not None:
            return V.resize(b, v, bits, ptype.startswith("s"))
        if any(op.name in affine.written(x) for x in self.side_done[at:]):
            raise _Unknown  # its vector now holds a later value
        return V.lane_of(b, self.read(op, ptype), lane)


def _address_operands(inst: ast.Instruction) -> list[int]:
    """Indices of `inst`'s register-based address operands (ld/st)."""
    if inst.opcode not in ("ld", "st"):
        return []
    return [i for i, o in enumerate(inst.operands) if isinstance(o, ast.Addr) and isinstance(o.base, ast.Reg)]


def _kernel_param_load(inst: ast.Instruction, symbols) -> bool:
    """`inst` is `ld.param` of a kernel parameter into one register."""
    if not inst.has("param") or len(inst.operands) != 2 or not isinstance(inst.operands[0], ast.Reg):
        return False
    addr = inst.operands[1]
    return isinstance(addr, ast.Addr) and isinstance(addr.base, ast.Sym) \
        and getattr(symbols.get(addr.base.name), "kind", None) == "kparam"
