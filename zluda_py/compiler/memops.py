"""Target-neutral facts about PTX memory instructions: state space, vector width, atomic ops."""

from __future__ import annotations

from typing import Callable

from llvmlite import ir

from zluda_py.compiler.errors import UnsupportedError, unsupported
from zluda_py.compiler.lanes import Lanes, ptx_bits
from zluda_py.compiler.mbarrier import bulk_form
from zluda_py.ptx import ast

SPACES = ("global", "shared", "local", "param", "const", "generic")
FLOATS = {"f32": ir.FloatType(), "f64": ir.DoubleType(), "f16": ir.HalfType()}
ATOMIC_OPS = {"add", "inc", "dec", "min", "max", "and", "or", "xor", "exch", "cas"}
FLOAT_RMW = {"add": "fadd", "min": "fmin", "max": "fmax"}  # atomicrmw on float types (min/max: minnum/maxnum)


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
    if t.startswith("bf"):
        raise UnsupportedError(f"atomic on {t}")
    if t in ("f32", "f64", "f16", "f16x2"):
        fty = ir.VectorType(ir.HalfType(), 2) if t == "f16x2" else FLOATS[t]
        if op == "exch":
            return "xchg", ir.IntType(bits)
        if op not in FLOAT_RMW:
            raise UnsupportedError(f"atomic {op} on {t}")
        return FLOAT_RMW[op], fty
    signed = t.startswith("s")
    return {"add": "add", "inc": "uinc_wrap", "dec": "udec_wrap", "and": "and", "or": "or",
            "xor": "xor", "exch": "xchg", "min": "min" if signed else "umin",
            "max": "max" if signed else "umax"}[op], ir.IntType(bits)


def atomic_op(inst: ast.Instruction, wide: bool = False) -> str:
    """The operation of an atom/red; vector and 128-bit forms are refused unless `wide` (a
    target that does them: one atomic per element, a 128-bit compare-and-swap)."""
    ops = [m for m in inst.mods if m in ATOMIC_OPS]
    if len(ops) != 1 or (not wide and (ptx_bits(inst.types[-1]) > 64 or vector_count(inst) > 1)):
        raise unsupported(inst)
    return ops[0]


def wide_atomic_op(inst: ast.Instruction) -> str:
    """atomic_op for a target that does vector and 128-bit atomics."""
    return atomic_op(inst, wide=True)


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


def cas_loop(b: ir.IRBuilder, first: ir.Value, update: Callable[[ir.Value], ir.Value],
             cas: Callable[[ir.Value, ir.Value], ir.Value]) -> ir.Value:
    """Atomically replace a cell by update(its value) with a compare-and-swap loop starting from
    `first` (a plain read of it); `cas(expected, new)` emits the target's cmpxchg. Returns the old value."""
    pre = b.block
    loop = b.append_basic_block("cas")
    done = b.append_basic_block("cas.done")
    b.branch(loop)
    b.position_at_end(loop)
    cur = b.phi(first.type)
    cur.add_incoming(first, pre)
    pair = cas(cur, update(cur))
    seen = b.extract_value(pair, 0)
    cur.add_incoming(seen, loop)
    b.cbranch(b.extract_value(pair, 1), done, loop)
    b.position_at_end(done)
    return seen


def bf16_op(b: ir.IRBuilder, op: str, x: ir.Value, y: ir.Value, parts: int) -> ir.Value:
    """Packed bf16 add/min/max of x and y, no flush (.noftz). Two bf16 values add exactly in f32
    unless one is below half a bf16 ulp of the other, so rounding the f32 sum to nearest even is
    the correctly rounded bf16 sum; a NaN sum gives the canonical 0x7FFF. min/max return the
    other operand when one is NaN, 0x7FFF when both are."""
    i16, i32, f32 = ir.IntType(16), ir.IntType(32), ir.FloatType()
    out = ir.Constant(x.type, 0)
    nan = ir.Constant(i32, 0x7FFF)
    for k in range(parts):
        half = lambda v: b.zext(b.trunc(b.lshr(v, ir.Constant(v.type, 16 * k)), i16), i32)  # noqa: E731
        hx, hy = half(x), half(y)
        fx, fy = (b.bitcast(b.shl(h, ir.Constant(i32, 16)), f32) for h in (hx, hy))
        if op == "add":
            total = b.fadd(fx, fy)
            raw = b.bitcast(total, i32)
            odd = b.and_(b.lshr(raw, ir.Constant(i32, 16)), ir.Constant(i32, 1))
            rounded = b.lshr(b.add(raw, b.add(ir.Constant(i32, 0x7FFF), odd)), ir.Constant(i32, 16))
            r16 = b.select(b.fcmp_unordered("uno", total, total), nan, rounded)
        else:
            x_nan, y_nan = b.fcmp_unordered("uno", fx, fx), b.fcmp_unordered("uno", fy, fy)
            take_y = b.or_(b.fcmp_ordered("<" if op == "min" else ">", fy, fx), x_nan)
            r16 = b.select(b.and_(x_nan, y_nan), nan, b.select(take_y, hy, hx))
        out = b.or_(out, b.shl(b.zext(b.trunc(r16, i16), x.type), ir.Constant(x.type, 16 * k)))
    return out


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


def cvta_form(inst: ast.Instruction) -> None:
    """Refuse cvta on 32-bit addresses (modules with .address_size 32): a generic address is a
    host address here, which needs 64 bits."""
    if inst.has("u32"):
        raise unsupported(inst, "32-bit generic addresses")


def cp_async_form(inst: ast.Instruction) -> None:
    """The cp forms the CPU target translates: cp.async (with commit/wait groups),
    cp.async.mbarrier.arrive(.noinc) (compiler/mbarrier.py), and the bulk copies that
    cpu/mbarrier.bulk_form accepts."""
    if inst.has("bulk") or inst.has("reduce"):
        bulk_form(inst)


def cp_async_src_size(inst: ast.Instruction) -> ast.Operand | None:
    """The src-size (bytes past it are zero-filled) or ignore-src (a predicate: all zeros when
    set) operand of a cp.async, if it has one; a cache policy comes after it."""
    ops = inst.operands
    has = len(ops) > (4 if inst.has("L2::cache_hint") else 3)
    return ops[3] if has and isinstance(ops[3], (ast.Imm, ast.Reg)) else None


def cp_async_limit(lanes: Lanes, operand: ast.Operand, is_predicate: bool, n: int,
                   read: Callable[[ast.Operand, str], ir.Value]) -> ir.Value:
    """How many source bytes a cp.async of `n` bytes copies: its src-size, or for the ignore-src
    predicate none when set and all when clear."""
    if is_predicate:
        return lanes.b.select(read(operand, "pred"), lanes.const(ir.IntType(32), 0), lanes.const(ir.IntType(32), n))
    return read(operand, "u32")


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
