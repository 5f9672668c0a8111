"""Small IR helpers over warp vectors: types, splats, masks, lane constants."""

from __future__ import annotations

from functools import cache

from llvmlite import binding as llvm
from llvmlite import ir

from zluda_py.compiler.cpu.abi import WARP
from zluda_py.compiler.vector_constants import int_vector, splat_vector

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
PTR = ir.PointerType()
MASK = ir.VectorType(I1, WARP)


def vec(t: ir.Type) -> ir.VectorType:
    return ir.VectorType(t, WARP)


class Builder(ir.IRBuilder):
    """llvmlite's builder whose `not_` of a vector xors a shared all-ones constant
    (vector_constants.py) instead of a fresh one, formatted again at each use."""

    def not_(self, value: ir.Value, name: str = "") -> ir.Value:
        if isinstance(value.type, ir.VectorType):
            return self.xor(value, splat_vector(value.type, -1), name=name)
        return super().not_(value, name)


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
    return int_vector(vec(t), values)


_ZEROS = int_vector(vec(I32), [0] * WARP)
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


@cache
def _avx512() -> bool:
    """The host's code (runtime.target_machine: host CPU, all its features) may use AVX-512F."""
    return bool(llvm.get_host_cpu_features().get("avx512f"))


def lane_of(b: ir.IRBuilder, v: ir.Value, lane: ir.Value) -> ir.Value:
    """Lane `lane` (a run-time i32 in 0..31) of a warp vector. LLVM extracts at a variable index
    through the stack (the vector stored, 128 or 256 bytes, and one element loaded back); with
    AVX-512 a 32/64-bit lane is picked from the registers instead (`_lane_function`), that of a
    widened 32-bit vector or of a sum with a splat from the narrower or other operands."""
    el = v.type.element
    if isinstance(lane, ir.Constant) or isinstance(v, ir.Constant) or _is_splat(v) \
            or not isinstance(el, ir.IntType) or el.width not in (32, 64) or not _avx512():
        return b.extract_element(v, lane)  # (LLVM folds a splat's or a constant lane's)
    if isinstance(v, ir.CastInstr) and v.opname in ("zext", "sext") and v.operands[0].type.element.width == 32:
        return (b.zext if v.opname == "zext" else b.sext)(lane_of(b, v.operands[0], lane), el)
    if isinstance(v, ir.Instruction) and v.opname == "add" \
            and any(isinstance(x, ir.Constant) or _is_splat(x) for x in v.operands):
        return b.add(*(lane_of(b, x, lane) for x in v.operands))
    return b.call(_lane_function(b.module, el), [v, lane])


def _is_splat(v: ir.Value) -> bool:
    return isinstance(v, ir.instructions.ShuffleVector) and v.operands[2] is _ZEROS


def _lane_function(module: ir.Module, el: ir.IntType) -> ir.Function:
    """`zluda.lane.iN(v, lane)`, inlined at every call: a two-table permute picks the lane
    (vpermi2d over the two registers of 32 dwords; vpermi2q over each pair of the four registers
    of 32 qwords, then the lane's bit 4 chooses between the two results)."""
    name = f"zluda.lane.i{el.width}"
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(el, [vec(el), I32]), name)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    b = ir.IRBuilder(fn.append_basic_block())
    v, lane = fn.args
    n = 512 // el.width  # elements per register
    regs = [b.shuffle_vector(v, undef(v.type), int_vector(ir.VectorType(I32, n), range(k, k + n)))
            for k in range(0, WARP, n)]
    poison = _Splat(regs[0].type, "poison")
    at = b.insert_element(poison, b.zext(lane, el) if el.width == 64 else lane, ir.Constant(I32, 0))
    at = b.shuffle_vector(at, poison, int_vector(ir.VectorType(I32, n), [0] * n))
    permute = f"llvm.x86.avx512.vpermi2var.{'d' if el.width == 32 else 'q'}.512"
    picked = [b.extract_element(intrinsic(b, permute, regs[0].type, [regs[k], at, regs[k + 1]]), ir.Constant(I32, 0))
              for k in range(0, len(regs), 2)]
    b.ret(picked[0] if len(picked) == 1 else
          b.select(b.icmp_unsigned("<", lane, ir.Constant(I32, WARP // 2)), picked[0], picked[1]))
    return fn


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
