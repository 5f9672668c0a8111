"""The PTX ISA's definitions of warp collectives that both targets share: the source lane of
shfl.sync (with its clamp and segment mask) and the operations of redux.sync."""

from __future__ import annotations

from llvmlite import ir

from zluda_py.compiler.errors import unsupported
from zluda_py.compiler.lanes import Lanes
from zluda_py.ptx import ast

SHFL_MODES = ("up", "down", "bfly", "idx")
REDUX_OPS = ("add", "min", "max", "and", "or", "xor")


def shfl_source(mode: str, lane: int, bval: int, cval: int) -> tuple[int, bool]:
    """(source lane, in range) of one lane for constant operands; `cval` packs the clamp
    (bits 0-4) and the segment mask (bits 8-12). Out of range, a lane reads its own value."""
    seg = (cval >> 8) & 0x1F
    clamp = cval & 0x1F
    max_lane = (lane & seg) | (clamp & ~seg & 0x1F)
    min_lane = lane & seg
    bval &= 0x1F
    if mode == "up":
        j = lane - bval
        ok = j >= max_lane
    elif mode == "down":
        j = lane + bval
        ok = j <= max_lane
    elif mode == "bfly":
        j = lane ^ bval
        ok = j <= max_lane
    else:
        j = min_lane | (bval & ~seg & 0x1F)
        ok = j <= max_lane
    return (j if ok else lane), ok


def shfl_source_lanes(lanes: Lanes, mode: str, lane: ir.Value, bval: ir.Value,
                      cval: ir.Value) -> tuple[ir.Value, ir.Value]:
    """`shfl_source` over i32 lane values of any width (W=32 vectors or W=1 scalars)."""
    b = lanes.b
    c = lambda x: lanes.like(lane, x)  # noqa: E731
    seg = b.and_(b.lshr(cval, c(8)), c(0x1F))
    notseg = b.xor(seg, c(0x1F))
    max_lane = b.or_(b.and_(lane, seg), b.and_(b.and_(cval, c(0x1F)), notseg))
    bval = b.and_(bval, c(0x1F))
    if mode == "up":
        j = b.sub(lane, bval)
        ok = b.icmp_signed(">=", j, max_lane)
    else:
        j = {"down": lambda: b.add(lane, bval), "bfly": lambda: b.xor(lane, bval),
             "idx": lambda: b.or_(b.and_(lane, seg), b.and_(bval, notseg))}[mode]()
        ok = b.icmp_signed("<=", j, max_lane)
    return b.select(ok, j, lane), ok


def redux_form(inst: ast.Instruction) -> tuple[str, bool]:
    """(operation, signed) of a redux.sync; only the 32-bit integer forms are translated."""
    if inst.types[-1] not in ("u32", "s32", "b32"):
        raise unsupported(inst)
    return next(m for m in inst.mods if m in REDUX_OPS), inst.types[-1] == "s32"


def redux_identity(op: str, signed: bool) -> int:
    """The u32 bit pattern that leaves `op` unchanged (what non-member lanes contribute)."""
    return {"add": 0, "and": -1, "or": 0, "xor": 0,
            "min": 0x7FFFFFFF if signed else -1, "max": -(1 << 31) if signed else 0}[op] & 0xFFFFFFFF


def redux_intrinsic(op: str, signed: bool) -> str:
    """The llvm.vector.reduce.<name> / integer min-max flavour of a redux op."""
    return {"min": "smin" if signed else "umin", "max": "smax" if signed else "umax"}.get(op, op)


def redux_f32_key(lanes: Lanes, value: ir.Value, magnitude_only: bool) -> tuple[ir.Value, ir.Value]:
    """(order key, is NaN) of redux.sync.min/max{.abs}.f32 operands (i32 patterns, any width).
    As signed integers the patterns order like their numbers once negative ones flip their
    magnitude bits (-0 becomes -1, below +0); the flip is its own inverse (`redux_f32_unkey`)."""
    b = lanes.b
    c = lambda x: lanes.like(value, x)  # noqa: E731
    magnitude = b.and_(value, c(0x7FFFFFFF))
    if magnitude_only:
        value = magnitude
    return redux_f32_unkey(lanes, value), b.icmp_unsigned(">", magnitude, c(0x7F800000))


def redux_f32_unkey(lanes: Lanes, key: ir.Value) -> ir.Value:
    """The f32 pattern of an order key (and the key of a pattern: the flip is an involution)."""
    b = lanes.b
    negative = b.icmp_signed("<", key, lanes.like(key, 0))
    return b.select(negative, b.xor(key, lanes.like(key, 0x7FFFFFFF)), key)


def redux_f32_fill(smaller: bool) -> int:
    """The key non-members and NaNs contribute: the extreme i32."""
    return 0x7FFFFFFF if smaller else -0x80000000


REDUX_F32_NONE = 0x7FFFFFFF  # the canonical NaN: the result without numbers, or of .NaN with a NaN
