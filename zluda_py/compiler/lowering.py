"""Instruction lowering both targets share: feeding operands to the shared semantics, and mov's
vector pack/unpack. A target passes its operand access as `read(op, ptx_type)` and
`write(op, value, ptx_type)` (the CPU target binds its lane mask into `write`)."""

from __future__ import annotations

from typing import Callable

from llvmlite import ir

from zluda_py.compiler.errors import unsupported
from zluda_py.compiler.lanes import Lanes, ptx_bits
from zluda_py.compiler.semantics import SEMANTICS
from zluda_py.ptx import ast

Read = Callable[[ast.Operand, str], ir.Value]
Write = Callable[[ast.Operand, ir.Value, str], None]
CARRY = ast.Reg("%cc")  # the register the extended-precision instructions' carry flag lives in
# LLVM cuts a local name (value or block) at 1024 characters and then refuses the IR as a
# redefinition, so the names the IR takes from PTX are cut well before (llvmlite keeps them unique)
LOCAL_NAME_MAX = 64


def local_name(ptx_name: str) -> str:
    """The IR name of a PTX register, function-scope variable or label."""
    return ptx_name[:LOCAL_NAME_MAX]


def split_operands(inst: ast.Instruction, dst_types: list[str]) -> tuple[list[ast.Operand], list[ast.Operand]]:
    """(destination registers, source operands) of a value instruction: a `d|p` destination
    is two; the carry flag (type "cc") is implicit, not an operand."""
    ops = list(inst.operands)
    dests: list[ast.Operand] = []
    while len(dests) < sum(1 for t in dst_types if t != "cc"):
        o = ops.pop(0)
        dests.extend([o.dest, o.pred] if isinstance(o, ast.PredOut) else [o])
    return dests, ops


def lower_semantic(lanes: Lanes, inst: ast.Instruction, read: Read, write: Write,
                   nan_payload_free: bool = False) -> None:
    """Lower an instruction through its one definition in SEMANTICS: sources in, results out
    (a `d|p` destination is two results; the carry flag is an implicit operand).
    `nan_payload_free`: no use observes a NaN result's bits (semantics/nan_payload.py)."""
    sem = SEMANTICS[inst.opcode]
    types = sem.operands(inst)
    dests, sources = split_operands(inst, types.dst)
    src_iter = iter(sources)
    srcs = [read(CARRY if t == "cc" else next(src_iter), t) for t in types.src]
    lanes.nan_payload_free = nan_payload_free
    try:
        results = sem.emit(lanes, inst, srcs)
    finally:
        lanes.nan_payload_free = False
    dest_iter = iter(dests)
    for t, value in zip(types.dst, results):
        write(CARRY if t == "cc" else next(dest_iter), value, t)


def mov_form(inst: ast.Instruction) -> None:
    """Refuse the moves between vector registers (`mov.v2.b32 %v1, %v0`, PTX 1.x): neither
    target declares vector registers (`.reg .v2 .b32`) yet."""
    if inst.has("v2") or inst.has("v4"):
        raise unsupported(inst, "vector registers")


def lower_mov_vector(lanes: Lanes, inst: ast.Instruction, read: Read, write: Write) -> bool:
    """mov between a register and a brace list (`mov.b64 {%r1,%r2}, %rd1` and back): the first
    element is the low part. False when neither side is a list (a plain value)."""
    b = lanes.b
    t = inst.types[-1]
    dst, src = inst.operands
    bits = ptx_bits(t)
    if isinstance(dst, ast.Vec):
        whole = read(src, t)
        part = bits // len(dst.elems)
        for i, e in enumerate(dst.elems):
            write(e, lanes.resize(b.lshr(whole, lanes.like(whole, part * i)), part, False), f"b{part}")
        return True
    if isinstance(src, ast.Vec):
        part = bits // len(src.elems)
        acc: ir.Value | None = None
        for i, e in enumerate(src.elems):
            piece = lanes.resize(read(e, f"b{part}"), bits, False)
            piece = b.shl(piece, lanes.like(piece, part * i)) if i else piece
            acc = piece if acc is None else b.or_(acc, piece)
        write(dst, acc, t)
        return True
    return False
