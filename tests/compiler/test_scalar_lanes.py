"""Scalar copies of address registers' lanes (cpu/scalar_lanes.py): a whole warp's fast paths
test, range-check and move through lanes 0 and 31 (15 and 16 for rows) computed beside the
vectors. If a copy were wrong, data would come from the wrong place or a fault would be missed,
misplaced or invented: values are checked against numpy, faults (700, 716) by the lane and
address they name. Blocks whose %tid.x wraps inside a warp, partial warps, constant offsets,
32-bit shared addresses and descending addresses each make some lane differ from the line."""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler import LaunchError, cfg, compile
from zluda_py.compiler.cpu import scalar_lanes
from zluda_py.ptx import parse

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"

PTX = HEAD + r"""
// out[i] = in[i + K] + 1 for i = ctaid.x*ntid.x + tid.x < n (K = 0, 3: the address's offset)
.visible .entry plus_one(.param .u32 n, .param .u64 in, .param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u32 %r1, [n];
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.s32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd3, %rd1;
    mul.wide.s32 %rd4, %r5, 4;
    add.s64 %rd5, %rd3, %rd4;
    ld.global.u32 %r6, [%rd5];
    add.s64 %rd6, %rd2, %rd4;
    add.s32 %r7, %r6, 1;
    st.global.u32 [%rd6], %r7;
DONE:
    ret;
}

.visible .entry plus_one_at3(.param .u32 n, .param .u64 in, .param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u32 %r1, [n];
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.s32 %p1, %r5, %r1;
    @%p1 bra DONE;
    mul.wide.s32 %rd4, %r5, 4;
    add.s64 %rd5, %rd1, %rd4;
    ld.global.u32 %r6, [%rd5+12];
    add.s64 %rd6, %rd2, %rd4;
    add.s32 %r7, %r6, 1;
    st.global.u32 [%rd6], %r7;
DONE:
    ret;
}

// out[i] = in[i] + 1 through a base k elements in and an index i - k, negative for i < k
// (sign-extended by mul.wide.s32: a zero-extended lane would be 16 GiB off)
.visible .entry from_middle(.param .u32 k, .param .u64 in, .param .u64 out)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u32 %r1, [k];
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    mul.wide.s32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    sub.s32 %r6, %r5, %r1;
    mul.wide.s32 %rd5, %r6, 4;
    add.s64 %rd6, %rd4, %rd5;
    ld.global.u32 %r7, [%rd6];
    add.s32 %r7, %r7, 1;
    mul.wide.s32 %rd7, %r5, 4;
    add.s64 %rd7, %rd2, %rd7;
    st.global.u32 [%rd7], %r7;
    ret;
}

// out[n - 1 - i] = in[n - 1 - i] * 2: descending addresses (a stride of -4)
.visible .entry backwards(.param .u32 n, .param .u64 in, .param .u64 out)
{
    .reg .b32 %r<9>;
    .reg .b64 %rd<8>;
    ld.param.u32 %r1, [n];
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    sub.s32 %r6, %r1, 1;
    sub.s32 %r6, %r6, %r5;
    mul.wide.s32 %rd4, %r6, 4;
    add.s64 %rd5, %rd1, %rd4;
    ld.global.u32 %r7, [%rd5];
    add.s64 %rd6, %rd2, %rd4;
    shl.b32 %r8, %r7, 1;
    st.global.u32 [%rd6], %r8;
    ret;
}

// through .shared with 32-bit addresses: s[tid.x + 1] = in[tid.x], out[tid.x] = s[tid.x + 1] * 3,
// the store through a generic address (cvta)
.visible .entry via_shared(.param .u64 in, .param .u64 out)
{
    .reg .b32 %r<10>;
    .reg .b64 %rd<8>;
    .shared .align 4 .b32 s[300];
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r2, [%rd4];
    mov.u32 %r3, s;
    shl.b32 %r4, %r1, 2;
    add.s32 %r5, %r3, %r4;
    cvt.u64.u32 %rd5, %r5;
    cvta.shared.u64 %rd6, %rd5;
    st.u32 [%rd6+4], %r2;
    ld.shared.u32 %r6, [%r5+4];
    mul.lo.s32 %r7, %r6, 3;
    add.s64 %rd7, %rd2, %rd3;
    st.global.u32 [%rd7], %r7;
    ret;
}
"""


@pytest.fixture(scope="module")
def mod():
    return compile(PTX)


def _plus_one(mod, kernel: str, n: int, grid: tuple, block: tuple, skip: int = 0) -> tuple[np.ndarray, np.ndarray]:
    src = np.arange(1000, 1000 + n + skip, dtype=np.uint32)
    out = np.zeros(np.prod(grid) * np.prod(block) + 32, np.uint32)
    mod.launch(kernel, grid, block, [np.int32(n), src, out])
    return src, out


@pytest.mark.parametrize("n, grid, block", [(512, (2,), (256,)), (1000, (4,), (256,)), (300, (3,), (100,)),
                                            (64, (2,), (33,)), (256, (8,), (32,))])
def test_values_with_whole_and_partial_warps(mod, n, grid, block):
    src, out = _plus_one(mod, "plus_one", n, grid, block)
    expect = np.zeros_like(out)
    expect[:n] = src[:n] + 1
    np.testing.assert_array_equal(out, expect)


def test_wrapping_tid_x_in_a_2d_block(mod):
    """A 1-D index in an 8x4 block: every row of a warp reads and writes the same 8 elements
    (lane 31 has %tid.x 7), so nothing past out[8 * grid] may be written."""
    src, out = _plus_one(mod, "plus_one", 1 << 20, (3,), (8, 4))
    expect = np.zeros_like(out)
    expect[:24] = src[:24] + 1
    np.testing.assert_array_equal(out, expect)


def test_constant_offset(mod):
    src, out = _plus_one(mod, "plus_one_at3", 256, (1,), (256,), skip=3)
    np.testing.assert_array_equal(out[:256], src[3:259] + 1)
    assert not out[256:].any()


def test_only_the_last_lane_past_the_end_faults(mod):
    """64 threads reading a 63-element array: lane 31 of warp 1 alone is outside."""
    src = np.arange(63, dtype=np.uint32)
    with pytest.raises(LaunchError) as e:
        mod.launch("plus_one", (1,), (64,), [np.int32(64), src, np.zeros(64, np.uint32)])
    assert e.value.cu_result == 700
    assert str(e.value).endswith(f"warp 1, lane 31 (thread (63,0,0)), address 0x{src.ctypes.data + 63 * 4:x}"), \
        str(e.value)


@pytest.mark.parametrize("short, lane", [(1, 31), (3, 29)])
def test_offset_past_the_end_faults_at_its_first_lane(mod, short, lane):
    """in[i + 3] over an array `short` elements too small for 32 threads."""
    src = np.arange(32 + 3 - short, dtype=np.uint32)
    with pytest.raises(LaunchError) as e:
        mod.launch("plus_one_at3", (1,), (32,), [np.int32(32), src, np.zeros(32, np.uint32)])
    assert e.value.cu_result == 700
    address = src.ctypes.data + (lane + 3) * 4
    assert str(e.value).endswith(f"lane {lane} (thread ({lane},0,0)), address 0x{address:x}"), str(e.value)


def test_a_partial_last_warp_inside_the_array_does_not_fault(mod):
    """n = 40 of 64 threads: the second warp's lanes 8..31 stay inactive, past the 40 elements."""
    src = np.arange(40, dtype=np.uint32)
    out = np.zeros(40, np.uint32)
    mod.launch("plus_one", (1,), (64,), [np.int32(40), src, out])
    np.testing.assert_array_equal(out, src + 1)


def test_misaligned_base_faults_at_lane_0(mod):
    raw = np.zeros(80, np.uint32)
    p = raw.ctypes.data + 2
    with pytest.raises(LaunchError) as e:
        mod.launch("plus_one", (1,), (32,), [np.int32(32), p, np.zeros(32, np.uint32)])
    assert e.value.cu_result == 716
    assert str(e.value).endswith(f"lane 0 (thread (0,0,0)), address 0x{p:x}"), str(e.value)


@pytest.mark.parametrize("k", [40, 1000, 17])
def test_negative_indices(mod, k):
    """Whole warps of negative, mixed and positive indices from a base k elements into the array
    (k = 1000: past its end, every index negative)."""
    src = np.arange(3, 3 + 256, dtype=np.uint32)
    out = np.zeros(256, np.uint32)
    mod.launch("from_middle", (2,), (128,), [np.int32(k), src, out])
    np.testing.assert_array_equal(out, src + 1)


def test_descending_addresses(mod):
    src = np.arange(7, 7 + 256, dtype=np.uint32)
    out = np.zeros(256, np.uint32)
    mod.launch("backwards", (4,), (64,), [np.int32(256), src, out])
    np.testing.assert_array_equal(out, src * 2)


@pytest.mark.parametrize("block", [(256,), (96,), (8, 4)])
def test_shared_and_generic_addresses(mod, block):
    threads = int(np.prod(block))
    src = np.arange(5, 5 + 256, dtype=np.uint32)
    out = np.zeros(256, np.uint32)
    mod.launch("via_shared", (1,), block, [src, out])
    expect = np.zeros_like(out)
    tid_x = np.arange(threads) % block[0]
    expect[tid_x] = src[tid_x] * 3
    np.testing.assert_array_equal(out, expect)


def test_copies_made_where_expected():
    """The copies exist for the address registers of these kernels, so the tests above run
    through them: plus_one's whole chain from the parameters and special registers; via_shared's
    shared address from the symbol (its global one too)."""
    functions = {f.name: f for f in parse(PTX).functions()}

    def invariant(kernel: str, addresses: set[str], uniform: set[str]) -> set[str]:
        blocks = cfg.build(functions[kernel].body, keep=lambda op: True).blocks
        return scalar_lanes.invariant_registers(blocks, addresses, uniform,
                                                lambda inst: inst.opcode == "ld" and inst.has("param"),
                                                lambda name: name == "s")

    assert invariant("plus_one", {"%rd5", "%rd6"}, {"%r1", "%rd1", "%rd2"}) == \
        {"%rd1", "%rd2", "%rd3", "%rd4", "%rd5", "%rd6", "%r2", "%r3", "%r4", "%r5"}
    assert invariant("via_shared", {"%rd4", "%rd6", "%r5", "%rd7"}, {"%rd1", "%rd2"}) == \
        {"%rd1", "%rd2", "%rd3", "%rd4", "%rd5", "%rd6", "%rd7", "%r1", "%r3", "%r4", "%r5"}
    # a register written twice (backwards' %r6) has no copy, nor what is computed from it, nor
    # what only such addresses read
    assert invariant("backwards", {"%rd5", "%rd6"}, {"%r1", "%rd1", "%rd2"}) == set()
