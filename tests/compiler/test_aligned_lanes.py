"""Branches whose lanes are known where %tid.x is aligned to the lanes (cpu/lane_masks.py):
`if ((threadIdx.x & m) == c)` with m < 32 splits every whole warp of a 1-D block, or of a block
whose %ntid.x is a multiple of 32, in one pattern known at compile time; the converged clone
tests that block shape once and runs the branch with the constant mask, elsewhere (2-D blocks
whose rows end inside a warp, partial warps) the lane compare as before. Values against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler import LaunchError, compile
from zluda_py.compiler.cpu.target import CPU
from zluda_py.ptx import parse

# out[i] = in[i] + 1000 * tid.x for the threads whose (tid.x & MASK) CMP VALUE, i the thread's
# index in the grid; the side is the fall-through, the join a return
LANES = r"""
.version 7.8
.target sm_80
.address_size 64
.visible .entry lanes(.param .u64 in, .param .u64 out, .param .u32 stride)
{
    .reg .pred %p<2>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r14, [stride];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %tid.y;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %ntid.y;
    mov.u32 %r5, %ctaid.x;
    mad.lo.s32 %r6, %r2, %r3, %r1;
    mul.lo.s32 %r7, %r3, %r4;
    mad.lo.s32 %r8, %r5, %r7, %r6;
    and.b32 %r9, %r1, MASK;
    setp.CMP.s32 %p1, %r9, VALUE;
    @GUARD%p1 bra END;
    mul.lo.s32 %r15, %r8, %r14;
    mul.wide.u32 %rd3, %r15, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r10, [%rd4];
    mul.lo.s32 %r11, %r1, 1000;
    add.s32 %r12, %r10, %r11;
    add.s64 %rd5, %rd2, %rd3;
    st.global.u32 [%rd5], %r12;
END:
    ret;
}
"""

# the suite's warp reduction as nvcc writes it: five shfl.down, lane 0 stores its warp's sum
WARP_REDUCE = r"""
.version 7.8
.target sm_80
.address_size 64
.visible .entry warp_reduce(.param .u32 n, .param .u64 in, .param .u64 out)
{
    .reg .pred %p<8>;
    .reg .f32 %f<16>;
    .reg .b32 %r<26>;
    .reg .b64 %rd<9>;
    ld.param.u32 %r3, [n];
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %ctaid.x;
    mov.u32 %r1, %tid.x;
    mad.lo.s32 %r2, %r5, %r4, %r1;
    setp.ge.s32 %p1, %r2, %r3;
    mov.f32 %f14, 0f00000000;
    @%p1 bra L2;
    cvta.to.global.u64 %rd3, %rd1;
    mul.wide.s32 %rd4, %r2, 4;
    add.s64 %rd5, %rd3, %rd4;
    ld.global.f32 %f14, [%rd5];
L2:
    mov.b32 %r6, %f14;
    shfl.sync.down.b32 %r11|%p2, %r6, 16, 31, -1;
    mov.b32 %f5, %r11;
    add.f32 %f6, %f14, %f5;
    mov.b32 %r12, %f6;
    shfl.sync.down.b32 %r14|%p3, %r12, 8, 31, -1;
    mov.b32 %f7, %r14;
    add.f32 %f8, %f6, %f7;
    mov.b32 %r15, %f8;
    shfl.sync.down.b32 %r17|%p4, %r15, 4, 31, -1;
    mov.b32 %f9, %r17;
    add.f32 %f10, %f8, %f9;
    mov.b32 %r18, %f10;
    shfl.sync.down.b32 %r19|%p5, %r18, 2, 31, -1;
    mov.b32 %f11, %r19;
    add.f32 %f12, %f10, %f11;
    mov.b32 %r20, %f12;
    shfl.sync.down.b32 %r22|%p6, %r20, 1, 31, -1;
    mov.b32 %f13, %r22;
    add.f32 %f3, %f12, %f13;
    and.b32 %r23, %r1, 31;
    setp.ne.s32 %p7, %r23, 0;
    @%p7 bra L4;
    shr.s32 %r24, %r2, 5;
    cvta.to.global.u64 %rd6, %rd2;
    mul.wide.s32 %rd7, %r24, 4;
    add.s64 %rd8, %rd6, %rd7;
    st.global.f32 [%rd8], %f3;
L4:
    ret;
}
"""


def lanes_ptx(mask: int, cmp: str, value: int, negated: bool = False) -> str:
    return LANES.replace("MASK", str(mask)).replace("CMP", cmp).replace("VALUE", str(value)) \
        .replace("GUARD", "!" if negated else "")


def test_the_lane_test_is_decided_by_the_block_shape():
    """`(tid.x & 31) != 0`: one scalar test of the block's shape leads to a copy of the branch
    with the lane mask as a constant (fails before: the lane compare was the only way)."""
    text = CPU.lower_part(parse(WARP_REDUCE), "warp_reduce").text
    assert text.count('"lanes.aligned') == 1 and text.count('"lanes.any') == 1
    aligned = text.split('lanes.aligned', 2)[2].split('lanes.any')[0]
    assert "bitcast <32 x i1> <i1 0, i1 1, i1 1, i1 1" in aligned  # lanes 1-31 branch, lane 0 runs the side


@pytest.mark.parametrize("mask,value", [(63, 0), (31, 32)])
def test_no_claim_without_a_low_mask(mask, value):
    """& 63 keeps a bit of the warp's first %tid.x, which is not known: a lane compare; & 31 != 32
    holds in every lane: decided (the whole warp branches)."""
    text = CPU.lower_part(parse(lanes_ptx(mask, "ne", value)), "lanes").text
    assert ('"lanes.aligned' in text) == (mask < 32)


def test_tid_itself_is_not_a_lane_pattern():
    text = CPU.lower_part(parse(lanes_ptx(31, "ne", 0).replace("and.b32 %r9, %r1, 31", "mov.u32 %r9, %r1")),
                          "lanes").text
    assert '"lanes.aligned' not in text


def expected(x: np.ndarray, grid: int, block: tuple[int, int], mask: int, cmp: str, value: int,
             negated: bool) -> np.ndarray:
    nx, ny = block
    tx = np.tile(np.arange(nx), ny * grid)
    p = ((tx & mask) == value) if cmp == "eq" else ((tx & mask) != value)
    stores = p if negated else ~p  # the side runs for the threads that do not branch
    out = np.full(grid * nx * ny, 0xDEAD, np.uint32)
    out[stores] = (x[stores] + 1000 * tx[stores]).astype(np.uint32)
    return out


@pytest.mark.parametrize("block", [(256, 1), (96, 1), (100, 1), (17, 1), (64, 2), (32, 3), (48, 2), (40, 3), (8, 4)])
@pytest.mark.parametrize("mask,cmp,value,negated", [(31, "ne", 0, False), (31, "eq", 0, True), (7, "ne", 3, False),
                                                     (0, "ne", 0, False), (31, "eq", 5, False), (16, "ne", 16, False)])
def test_lanes_store_where_numpy_says(block, mask, cmp, value, negated):
    """1-D blocks (aligned; 100 and 17 end in a partial warp), 2-D blocks with %ntid.x a multiple
    of 32 (aligned) and without (48, 40, 8: rows end inside warps, the lane compare decides)."""
    m = compile(lanes_ptx(mask, cmp, value, negated))
    grid = 3
    n = grid * block[0] * block[1]
    x = np.random.default_rng(n + mask).integers(0, 1 << 20, n, dtype=np.uint32)
    out = np.full(n, 0xDEAD, np.uint32)
    m.launch("lanes", (grid,), block, [x, out, np.uint32(1)])
    np.testing.assert_array_equal(out, expected(x, grid, block, mask, cmp, value, negated))


@pytest.mark.parametrize("block", [(64, 1), (32, 2)])
def test_the_side_still_faults_past_the_end(block):
    """stride 1 << 24: lane 0 of warp 1 stores 64 MiB past `out` (700), on the aligned path."""
    m = compile(lanes_ptx(31, "ne", 0))
    n = block[0] * block[1]
    with pytest.raises(LaunchError) as e:
        m.launch("lanes", (1,), block, [np.zeros(n, np.uint32), np.zeros(n, np.uint32), np.uint32(1 << 24)])
    assert e.value.cu_result == 700


@pytest.mark.parametrize("n,block", [(1 << 14, 256), (1000, 256), (999, 128), (77, 96), (4096, 1024)])
def test_warp_reduce_against_numpy(n, block):
    """Sizes not a multiple of 32: lanes past n add 0.0; each warp's lane 0 stores its sum."""
    m = compile(WARP_REDUCE)
    grid = (n + block - 1) // block
    x = np.random.default_rng(n).integers(-8, 8, n).astype(np.float32)
    out = np.full(grid * block // 32, -1.0, np.float32)
    m.launch("warp_reduce", (grid,), (block,), [np.int32(n), x, out])
    padded = np.zeros(grid * block, np.float32)
    padded[:n] = x
    np.testing.assert_array_equal(out, padded.reshape(-1, 32).sum(1))
