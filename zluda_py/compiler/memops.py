"""Target-neutral facts about PTX memory instructions: state space, vector width, atomic ops."""

from __future__ import annotations

from typing import Callable

from llvmlite import ir

from zluda_py.compiler.errors import UnsupportedError, unsupported
from zluda_py.compiler.lanes import Lanes, ptx_bits
from zluda_py.ptx import ast

SPACES = ("global", "shared", "local", "param", "const", "generic")
FLOATS = {"f32": ir.FloatType(), "f64": ir.DoubleType(), "f16": ir.HalfType()}
ATOMIC_OPS = {"add", "inc", "dec", "min", "max", "and", "or", "xor", "exch", "cas"}


def space_of(inst: ast.Instruction) -> str:
    """The state space an ld/st/atom/red/cp names (generic when none)."""
    for m in inst.mods:
        if m in SPACES:
            return m
        if m.startswith("shared::"):  # shared::cta / shared::cluster (a cluster of one CTA)
            return "shared"
        if m.startswith("param::"):
            return "param"
    return "generic"


def vector_count(inst: ast.Instruction) -> int:
    """Elements moved by one access: 2, 4 or 8 for .v2/.v4/.v8, else 1."""
    for m in inst.mods:
        if m in ("v2", "v4", "v8"):
            return int(m[1:])
    return 1


def rmw_op(op: str, t: str) -> tuple[str, ir.Type]:
    """LLVM atomicrmw operation and value type for PTX atomic `op` on type `t` ("cas" for cas)."""
    bits = ptx_bits(t)
    if op == "cas":
        return "cas", ir.IntType(bits)
    if t in ("f32", "f64", "f16"):
        fty = FLOATS[t]
        return {"add": "fadd", "min": "fmin", "max": "fmax", "exch": "xchg"}.get(op, op), \
            (fty if op != "exch" else ir.IntType(bits))
    if t in ("f16x2", "bf16x2", "bf16"):
        base = ir.HalfType() if t.startswith("f16") else ir.IntType(16)
        if t.startswith("bf"):
            raise UnsupportedError(f"atomic on {t}")
        return ("fadd" if op == "add" else "xchg"), (ir.VectorType(base, 2) if op == "add" else ir.IntType(bits))
    signed = t.startswith("s")
    return {"add": "add", "inc": "uinc_wrap", "dec": "udec_wrap", "and": "and", "or": "or",
            "xor": "xor", "exch": "xchg", "min": "min" if signed else "umin",
            "max": "max" if signed else "umax"}[op], ir.IntType(bits)


def atomic_op(inst: ast.Instruction) -> str:
    """The operation of an atom/red; vector and wider-than-64-bit forms are refused."""
    ops = [m for m in inst.mods if m in ATOMIC_OPS]
    if len(ops) != 1 or ptx_bits(inst.types[-1]) > 64 or vector_count(inst) > 1:
        raise unsupported(inst)
    return ops[0]


def atomic_update(b: ir.IRBuilder, op: str, t: str, x: ir.Value, y: ir.Value | None,
                  rmw: Callable[[str, ir.Value], ir.Value],
                  cas: Callable[[ir.Value, ir.Value], ir.Value]) -> ir.Value:
    """The old value of one atomic `op` on PTX type `t` with operands x (and y for cas), as an
    integer of t's width; the target emits the instruction (`rmw(operation, value)` for
    atomicrmw, `cas(expected, new)` for cmpxchg) with its own ordering and scope."""
    ity = ir.IntType(ptx_bits(t))
    if op == "cas":
        return b.extract_value(cas(x, y), 0)
    name, vty = rmw_op(op, t)
    old = rmw(name, b.bitcast(x, vty) if vty != ity else x)
    return b.bitcast(old, ity) if vty != ity else old


def cp_async_size(inst: ast.Instruction) -> int | None:
    """Bytes one cp.async copies, or None for commit_group/wait_group/wait_all (a copy completes
    at once on our targets, so there is nothing to wait for)."""
    if not inst.has("async"):
        raise unsupported(inst)
    if inst.has("commit_group") or inst.has("wait_group") or inst.has("wait_all"):
        return None
    size = inst.operands[2]
    if not isinstance(size, ast.Imm):
        raise unsupported(inst, "non-constant copy size")
    return int(size.value)


def cp_async_src_size(inst: ast.Instruction) -> ast.Operand | None:
    """The src-size operand of a cp.async (bytes past it are zero-filled), if it has one."""
    ops = inst.operands
    return ops[3] if len(ops) > 3 and isinstance(ops[3], (ast.Imm, ast.Reg)) else None


def cp_async_fill(lanes: Lanes, word: ir.Value, k: int, src_size: ir.Value) -> ir.Value:
    """Word k (bytes 4k..4k+3) of a cp.async's copy with the bytes at or past `src_size` zeroed."""
    b = lanes.b
    i64 = lanes.retype(src_size, ir.IntType(64))
    base = lanes.like(src_size, 4 * k)
    kept = b.select(b.icmp_unsigned("<=", src_size, base), lanes.like(src_size, 0),
                    b.select(b.icmp_unsigned(">=", src_size, lanes.like(src_size, 4 * k + 4)),
                             lanes.like(src_size, 32), b.shl(b.sub(src_size, base), lanes.like(src_size, 3))))
    one = lanes.like_ty(i64, 1)
    keep = b.trunc(b.sub(b.shl(one, b.zext(kept, i64)), one), word.type)
    return b.and_(word, keep)
