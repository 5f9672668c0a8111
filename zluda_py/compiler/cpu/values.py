"""Small IR helpers over warp vectors: types, splats, masks, lane constants."""

from __future__ import annotations

from llvmlite import ir

from zluda_py.compiler.cpu.abi import WARP

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
PTR = ir.PointerType()
MASK = ir.VectorType(I1, WARP)


def vec(t: ir.Type) -> ir.VectorType:
    return ir.VectorType(t, WARP)


class _Splat(ir.Constant):
    """A constant vector printed as `splat (T v)` / `undef`: the element-by-element form
    llvmlite prints costs most of the lowering time and bloats the IR text."""

    def __init__(self, typ: ir.VectorType, text: str) -> None:
        self.type = typ
        self.constant = text

    def _get_reference(self) -> str:
        return self.constant


def splat_const(t: ir.Type, value: int) -> ir.Constant:
    return _Splat(vec(t), f"splat ({t} {ir.Constant(t, value).get_reference()})")


def undef(t: ir.Type) -> ir.Constant:
    return _Splat(t, "undef")


def lane_consts(t: ir.Type, values: list[int]) -> ir.Constant:
    return ir.Constant(vec(t), [ir.Constant(t, v) for v in values])


_ZEROS = ir.Constant(vec(I32), [0] * WARP)  # one object: llvmlite caches its text
LANE_IDS = lane_consts(I32, list(range(WARP)))
ALL = splat_const(I1, 1)
NONE = splat_const(I1, 0)


def splat(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """Broadcast a scalar to all 32 lanes."""
    if isinstance(v, ir.Constant):
        return _Splat(vec(v.type), f"splat ({v.type} {v.get_reference()})")
    one = b.insert_element(_Splat(ir.VectorType(v.type, 1), "poison"), v, ir.Constant(I32, 0))
    return b.shuffle_vector(one, _Splat(ir.VectorType(v.type, 1), "poison"), _ZEROS)


def intrinsic(b: ir.IRBuilder, name: str, ret: ir.Type, args: list[ir.Value]) -> ir.Value:
    module = b.module
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, [a.type for a in args]), name)
    return b.call(fn, args)


def mask_bits(b: ir.IRBuilder, mask: ir.Value) -> ir.Value:
    """<32 x i1> -> i32 bitmask (lane i is bit i)."""
    return b.bitcast(mask, I32)


def bits_mask(b: ir.IRBuilder, bits: ir.Value) -> ir.Value:
    return b.bitcast(bits, MASK)


def any_lane(b: ir.IRBuilder, mask: ir.Value) -> ir.Value:
    return b.icmp_unsigned("!=", mask_bits(b, mask), ir.Constant(I32, 0))


def popcount(b: ir.IRBuilder, bits: ir.Value) -> ir.Value:
    return intrinsic(b, f"llvm.ctpop.i{bits.type.width}", bits.type, [bits])


def reduce(b: ir.IRBuilder, op: str, v: ir.Value) -> ir.Value:
    """llvm.vector.reduce.<op> over 32 lanes."""
    el = v.type.element
    return intrinsic(b, f"llvm.vector.reduce.{op}.v{WARP}i{el.width}", el, [v])


def resize(b: ir.IRBuilder, v: ir.Value, bits: int, signed: bool) -> ir.Value:
    have = v.type.element.width if isinstance(v.type, ir.VectorType) else v.type.width
    if have == bits:
        return v
    t = vec(ir.IntType(bits)) if isinstance(v.type, ir.VectorType) else ir.IntType(bits)
    if bits < have:
        return b.trunc(v, t)
    return b.sext(v, t) if signed else b.zext(v, t)


def entry_alloca(b: ir.IRBuilder, t: ir.Type) -> ir.Value:
    """An alloca in the entry block: allocas inside loops would grow the stack every iteration."""
    entry = b.function.entry_basic_block
    with b.goto_block(entry):
        b.position_at_start(entry)
        return b.alloca(t)


def typed(b: ir.IRBuilder, ptr: ir.Value, t: ir.Type) -> ir.Value:
    """`ptr` usable to load/store a `t` (llvmlite checks the pointee of typed allocas)."""
    if ptr.type.is_opaque or ptr.type.pointee == t:
        return ptr
    return b.bitcast(ptr, t.as_pointer())


def each_active_lane(b: ir.IRBuilder, mask: ir.Value):
    """Emit a loop over the set lanes of `mask`, lowest first; yields the lane index (i32).

    Used as `for lane in each_active_lane(b, mask): ...` with exactly one iteration at build time.
    """
    yield from each_set_bit(b, mask_bits(b, mask))


def each_set_bit(b: ir.IRBuilder, bits: ir.Value):
    """Emit a loop over the set bits of the integer `bits`, lowest first; yields the bit index
    (of the same type), as `each_active_lane`."""
    fn = b.function
    t = bits.type
    pre = b.block
    head = fn.append_basic_block("lane")
    body = fn.append_basic_block("lane.body")
    done = fn.append_basic_block("lane.done")
    b.branch(head)
    b.position_at_end(head)
    left = b.phi(t)
    left.add_incoming(bits, pre)
    b.cbranch(b.icmp_unsigned("==", left, ir.Constant(t, 0)), done, body)
    b.position_at_end(body)
    yield intrinsic(b, f"llvm.cttz.i{t.width}", t, [left, ir.Constant(I1, 1)])
    left.add_incoming(b.and_(left, b.sub(left, ir.Constant(t, 1))), b.block)  # clear the lowest bit
    b.branch(head)
    b.position_at_end(done)
