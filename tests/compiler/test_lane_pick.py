"""A lane picked at a run-time index (`values.lane_of`): with AVX-512 a two-table permute over
the vector's registers instead of LLVM's extraction through the stack. Used where the `lane ==
k` side of a split runs in place: the side's address operands read before it and the stored
value, at the one active lane. Expected values: numpy."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from llvmlite import binding as llvm
from llvmlite import ir

from zluda_py.compiler import LaunchError, compile
from zluda_py.compiler.cpu import runtime
from zluda_py.compiler.cpu import values as V
from zluda_py.compiler.cpu.target import CPU
from zluda_py.ptx import parse

avx512 = pytest.mark.skipif(not V._avx512(), reason="the permute path needs AVX-512F on the host")


def _picker(width: int, permute: bool, monkeypatch) -> tuple[object, ctypes.CFUNCTYPE]:
    """A native f(const iN *v, i32 lane) -> v[lane] through lane_of (the permute or the fallback)."""
    monkeypatch.setattr(V, "_avx512", lambda: permute)
    el = ir.IntType(width)
    m = ir.Module("pick")
    m.triple = llvm.get_process_triple()
    fn = ir.Function(m, ir.FunctionType(el, [V.PTR, V.I32]), "pick")
    b = ir.IRBuilder(fn.append_basic_block())
    b.ret(V.lane_of(b, b.load(fn.args[0], typ=V.vec(el), align=8), fn.args[1]))
    text = str(m)
    assert ("zluda.lane" in text) == permute
    mod = llvm.parse_assembly(text)
    engine = llvm.create_mcjit_compiler(mod, runtime.target_machine())
    engine.finalize_object()
    ctype = ctypes.c_uint32 if width == 32 else ctypes.c_uint64
    return engine, ctypes.CFUNCTYPE(ctype, ctypes.c_void_p, ctypes.c_uint32)(engine.get_function_address("pick"))


@pytest.mark.parametrize("width", [32, 64])
@pytest.mark.parametrize("permute", [pytest.param(True, marks=avx512), False], ids=["permute", "extract"])
def test_every_lane_is_picked(width, permute, monkeypatch):
    """All 32 lanes of a vector whose elements differ in every byte (high halves included)."""
    dtype = np.uint32 if width == 32 else np.uint64
    v = np.random.default_rng(width).integers(0, 2**width - 1, 32, dtype=dtype, endpoint=True)
    v[31] = (1 << width) - 1
    engine, pick = _picker(width, permute, monkeypatch)
    got = [pick(v.ctypes.data, lane) for lane in range(32)]
    assert got == [int(x) for x in v]
    del engine


# thread `sel` alone: dst[sel] = a 64-bit value and dst32[sel] = a 32-bit one, both computed per
# lane before the split; the side's addresses are computed from %rd3 (64 bits) and %r1 (32 bits),
# registers written before it
PICK = """.version 7.8
.target sm_80
.address_size 64
.visible .entry pick(.param .u64 dst, .param .u64 dst32, .param .u32 sel)
{
    .reg .pred %p<2>;
    .reg .b32 %r<5>;
    .reg .b64 %rd<9>;
    ld.param.u64 %rd1, [dst];
    ld.param.u64 %rd2, [dst32];
    ld.param.u32 %r2, [sel];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 8;
    mad.lo.s32 %r3, %r1, -1640531535, 12345;
    cvt.u64.u32 %rd4, %r3;
    mul.lo.u64 %rd5, %rd4, -7046029254386353131;
    setp.ne.s32 %p1, %r1, %r2;
    @%p1 bra DONE;
    add.s64 %rd6, %rd1, %rd3;
    st.global.u64 [%rd6], %rd5;
    shl.b32 %r4, %r1, 2;
    cvt.u64.u32 %rd7, %r4;
    add.s64 %rd8, %rd2, %rd7;
    st.global.u32 [%rd8], %r3;
DONE:
    ret;
}
"""


@pytest.fixture(scope="module")
def pick_module():
    return compile(PICK)


@pytest.mark.parametrize("sel, block", [(k, 32) for k in range(32)] + [(45, 64), (37, 40)])  # 37: a partial warp
def test_the_side_stores_its_lane(pick_module, sel, block):
    n = 64
    dst, dst32 = np.zeros(n, np.uint64), np.zeros(n, np.uint32)
    pick_module.launch("pick", (1,), (block,), [dst, dst32, np.uint32(sel)])
    v32 = (sel * -1640531535 + 12345) % 2**32
    want, want32 = np.zeros(n, np.uint64), np.zeros(n, np.uint32)
    want[sel] = v32 * (-7046029254386353131 % 2**64) % 2**64
    want32[sel] = v32
    np.testing.assert_array_equal(dst, want)
    np.testing.assert_array_equal(dst32, want32)


@avx512
def test_the_side_picks_by_permute():
    """The side's 64-bit operand (%rd3), 32-bit operand (%r1) and stored values are picked by
    zluda.lane.* (its one-lane path), not extracted at a variable index."""
    text = CPU.lower_part(parse(PICK), "pick").text
    assert 'call i64 @"zluda.lane.i64"' in text and 'call i32 @"zluda.lane.i32"' in text


@avx512
@pytest.mark.parametrize("op", ["zext", "sext"])
def test_a_widened_sum_is_picked_from_its_32_bit_lanes(op):
    """base + widen(v + k), the form of a .shared address, picked at every lane through one
    32-bit permute (no 64-bit one)."""
    m = ir.Module("pick")
    m.triple = llvm.get_process_triple()
    fn = ir.Function(m, ir.FunctionType(V.I64, [V.PTR, V.I64, V.I32]), "pick")
    b = ir.IRBuilder(fn.append_basic_block())
    narrow = b.add(b.load(fn.args[0], typ=V.vec(V.I32), align=4), V.splat_const(V.I32, 0x7FFFFFF0))
    wide = b.add(V.splat(b, fn.args[1]), getattr(b, op)(narrow, V.vec(V.I64)))
    b.ret(V.lane_of(b, wide, fn.args[2]))
    text = str(m)
    assert "zluda.lane.i32" in text and "zluda.lane.i64" not in text
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(text), runtime.target_machine())
    engine.finalize_object()
    pick = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32)(
        engine.get_function_address("pick"))
    v = np.random.default_rng(5).integers(0, 2**32, 32, dtype=np.uint64).astype(np.uint32)
    base = 0x1234_5678_9ABC_DEF0
    sums = (v.astype(np.uint64) + 0x7FFFFFF0) % 2**32
    widened = sums if op == "zext" else (sums.astype(np.int64) - ((sums >= 2**31) << 32)).astype(np.uint64)
    assert [pick(v.ctypes.data, base, lane) for lane in range(32)] == [int((base + int(w)) % 2**64) for w in widened]


# every thread clears its word of sm (64 words), then the threads whose bit is set in `bits`
# store tid + 1 at sm + 4*tid + off (a divergent .shared store: its first and last lanes are
# picked at run time), and every thread copies its word out
MASKED = """.version 7.8
.target sm_80
.address_size 64
.visible .entry masked(.param .u64 out, .param .u32 bits, .param .u32 off)
{
    .reg .pred %p<2>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<4>;
    .shared .align 4 .b8 sm[256];
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r7, [bits];
    ld.param.u32 %r8, [off];
    mov.u32 %r1, %tid.x;
    mov.u32 %r9, sm;
    shl.b32 %r2, %r1, 2;
    add.s32 %r3, %r9, %r2;
    st.shared.u32 [%r3], 0;
    bar.sync 0;
    shr.u32 %r5, %r7, %r1;
    and.b32 %r5, %r5, 1;
    setp.eq.s32 %p1, %r5, 0;
    @%p1 bra SKIP;
    add.s32 %r4, %r3, %r8;
    add.s32 %r6, %r1, 1;
    st.shared.u32 [%r4], %r6;
SKIP:
    bar.sync 0;
    ld.shared.u32 %r6, [%r3];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r6;
    ret;
}
"""


@pytest.fixture(scope="module")
def masked_module():
    return compile(MASKED)


MASKS = [0x1, 0x80000000, 0x80000001, 0x00F0F000, 0xFFFFFFFE, 0x7FFFFFFF, 0x00010000, 0x0000FFFF, 0x5A5AC3C3]


@pytest.mark.parametrize("bits", MASKS, ids=hex)
@pytest.mark.parametrize("words", [0, 1, 32])
def test_a_divergent_shared_store_lands_at_its_lanes(masked_module, bits, words):
    out = np.zeros(32, np.uint32)
    masked_module.launch("masked", (1,), (32,), [out, np.uint32(bits), np.uint32(4 * words)])
    sm = np.zeros(64, np.uint32)
    for t in range(32):
        if bits >> t & 1:
            sm[t + words] = t + 1
    np.testing.assert_array_equal(out, sm[:32])


@pytest.mark.parametrize("bits, first", [(0x80000001, 31), (0xFFFF0000, 20), (0x00F00000, 20), (0x0F000000, 24)])
def test_the_first_lane_past_the_arena_faults(masked_module, bits, first):
    """off = 4*44: lanes 20-31 store past the 256-byte arena; the lowest active one is named (700)."""
    with pytest.raises(LaunchError) as e:
        masked_module.launch("masked", (1,), (32,), [np.zeros(32, np.uint32), np.uint32(bits), np.uint32(4 * 44)])
    assert e.value.cu_result == 700
    assert f"lane {first} (thread ({first},0,0))" in str(e.value), str(e.value)


@avx512
def test_the_divergent_shared_store_picks_its_lanes_by_permute():
    text = CPU.lower_part(parse(MASKED), "masked").text
    assert 'call i32 @"zluda.lane.i32"' in text
