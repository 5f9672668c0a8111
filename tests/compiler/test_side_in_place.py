"""A converged warp runs the short side of a split in place (`FunctionLowering._run_side`): the
`if (lane == 0) store` tail of a shuffle reduction, a lane-0 store before a barrier, or a side
that branches back to the join. The side's lanes alone execute it: its register writes, memory
accesses and warp collectives (shuffles with member-mask subsets and clamped, out-of-range
sources; ballots) see only them, and the warp goes on whole at the join. Whole warps take the in-place path, the partial last
warp of each block the dispatcher's. Expected values: the reference interpreter."""

from __future__ import annotations

import numpy as np

from zluda_py.compiler import compile
from zluda_py.compiler.cpu.function import FunctionLowering
from zluda_py.reference import run as reference

HEAD = ".version 7.8\n.target sm_80\n.address_size 64\n"

# bench/cuda/suite.cu's warp_reduce as nvcc -O3 emits it: shfl.down chain, then lane 0 stores
WARP_REDUCE = HEAD + """
.visible .entry warp_reduce(.param .u32 n, .param .u64 in, .param .u64 out)
{
    .reg .pred %p<3>;
    .reg .f32 %f<8>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u32 %r3, [n];
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %ctaid.x;
    mov.u32 %r1, %tid.x;
    mad.lo.s32 %r2, %r5, %r4, %r1;
    setp.ge.s32 %p1, %r2, %r3;
    mov.f32 %f1, 0f00000000;
    @%p1 bra LOADED;
    mul.wide.s32 %rd4, %r2, 4;
    add.s64 %rd5, %rd1, %rd4;
    ld.global.f32 %f1, [%rd5];
LOADED:
    shfl.sync.down.b32 %f2, %f1, 16, 31, -1;
    add.f32 %f2, %f1, %f2;
    shfl.sync.down.b32 %f3, %f2, 8, 31, -1;
    add.f32 %f3, %f2, %f3;
    shfl.sync.down.b32 %f4, %f3, 4, 31, -1;
    add.f32 %f4, %f3, %f4;
    shfl.sync.down.b32 %f5, %f4, 2, 31, -1;
    add.f32 %f5, %f4, %f5;
    shfl.sync.down.b32 %f6, %f5, 1, 31, -1;
    add.f32 %f6, %f5, %f6;
    and.b32 %r6, %r1, 31;
    setp.ne.s32 %p2, %r6, 0;
    @%p2 bra DONE;
    shr.s32 %r7, %r2, 5;
    mul.wide.s32 %rd6, %r7, 4;
    add.s64 %rd7, %rd2, %rd6;
    st.global.f32 [%rd7], %f6;
DONE:
    ret;
}
"""

PROLOGUE = """
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    and.b32 %r5, %r1, 31;
    mad.lo.s32 %r6, %r4, 7, 3;
    mul.wide.u32 %rd2, %r4, 8;
    add.s64 %rd3, %rd1, %rd2;
    st.global.v2.u32 [%rd3], {%r6, %r5};
"""
# Every lane stores (value, lane); then in `fours` lanes 0, 4, ..., 28 run a side that swaps
# values with lane ^ 4 among themselves (their activemask as the member mask) and ballots the
# received value's low bit, and store again. In `last`, lane 31 alone runs a side placed after
# the `ret` it branches to.
SIDES = HEAD + """
.visible .entry fours(.param .u64 out)
{""" + PROLOGUE + """
    and.b32 %r10, %r5, 3;
    setp.ne.u32 %p1, %r10, 0;
    @%p1 bra DONE;
    activemask.b32 %r11;
    shfl.sync.bfly.b32 %r7, %r6, 4, 31, %r11;
    and.b32 %r9, %r7, 1;
    setp.ne.u32 %p2, %r9, 0;
    vote.sync.ballot.b32 %r8, %p2, %r11;
    st.global.v2.u32 [%rd3], {%r7, %r8};
DONE:
    ret;
}
.visible .entry last(.param .u64 out)
{""" + PROLOGUE + """
    setp.eq.u32 %p3, %r5, 31;
    @%p3 bra LAST;
DONE:
    ret;
LAST:
    shfl.sync.idx.b32 %r9, %r6, 31, 31, 0x80000000;
    add.s32 %r7, %r9, 1000;
    st.global.v2.u32 [%rd3], {%r7, %r5};
    bra.uni DONE;
}
"""


# A two-level block reduction: lane 0 of each warp stores its warp's butterfly sum to shared
# memory before a barrier (a side whose join is the barrier), then thread 0 adds the two warps'.
TWO_LEVEL = HEAD + """
.visible .entry two_level(.param .u64 in, .param .u64 out)
{
    .reg .pred %p<3>;
    .reg .f32 %f<5>;
    .reg .b32 %r<9>;
    .reg .b64 %rd<7>;
    .shared .align 4 .f32 s[2];
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    mul.wide.u32 %rd3, %r4, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.f32 %f1, [%rd4];
    shfl.sync.bfly.b32 %f2, %f1, 16, 31, -1;
    add.f32 %f1, %f1, %f2;
    shfl.sync.bfly.b32 %f2, %f1, 1, 31, -1;
    add.f32 %f1, %f1, %f2;
    and.b32 %r5, %r1, 31;
    shr.u32 %r6, %r1, 5;
    mov.u32 %r7, s;
    shl.b32 %r8, %r6, 2;
    add.s32 %r8, %r7, %r8;
    setp.ne.u32 %p1, %r5, 0;
    @%p1 bra JOIN;
    st.shared.f32 [%r8], %f1;
JOIN:
    bar.sync 0;
    setp.ne.u32 %p2, %r1, 0;
    @%p2 bra DONE;
    ld.shared.f32 %f3, [s];
    ld.shared.f32 %f4, [s+4];
    add.f32 %f3, %f3, %f4;
    mul.wide.u32 %rd5, %r2, 4;
    add.s64 %rd6, %rd2, %rd5;
    st.global.f32 [%rd6], %f3;
DONE:
    ret;
}
"""


def test_warp_reduce_tail_per_warp_and_partial_warps():
    n = 1000  # the last block's last warps lie partly or wholly past n
    x = np.random.default_rng(5).standard_normal(n).astype(np.float32)
    for block in (256, 96):
        grid = (n + block - 1) // block
        got, want = (np.full(grid * block // 32 + 1, -1, np.float32) for _ in range(2))
        compile(WARP_REDUCE).launch("warp_reduce", grid, block, [np.int32(n), x, got])
        reference(WARP_REDUCE, "warp_reduce", (grid,), (block,), [np.int32(n), x, want])
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_sides_with_collectives_and_a_side_after_its_return():
    grid, block = 2, 80  # each block's third warp has 16 lanes: it takes the dispatcher's path
    m = compile(SIDES)
    lanes = np.arange(grid * block) % block % 32
    for kernel in ("fours", "last"):
        got, want = (np.zeros(2 * grid * block, np.uint32) for _ in range(2))
        m.launch(kernel, grid, block, [got])
        reference(SIDES, kernel, (grid,), (block,), [want])
        np.testing.assert_array_equal(got, want)
        if kernel == "fours":
            side = lanes % 4 == 0
            assert (got[1::2][~side] == lanes[~side]).all() and (got[0::2][side] % 7 == 3).all()
        else:
            assert (got[0::2][lanes == 31] >= 1000).all()


def test_two_level_reduction_with_a_side_before_a_barrier():
    grid = 3
    x = np.random.default_rng(7).standard_normal(64 * grid).astype(np.float32)
    got, want = (np.full(grid, -1, np.float32) for _ in range(2))
    compile(TWO_LEVEL).launch("two_level", grid, 64, [x, got])
    reference(TWO_LEVEL, "two_level", (grid,), (64,), [x, want])
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_both_sides_run_in_place(monkeypatch):
    sides = []
    run_side = FunctionLowering._run_side
    monkeypatch.setattr(FunctionLowering, "_run_side", lambda self, side, *a: sides.append(side) or run_side(self, side, *a))
    compile(SIDES)
    # fours' block after the split; last's LAST, numbered before DONE; each twice, as their lane
    # tests (tid & 31 & 3, tid & 31 == 31) are decided where %tid.x is aligned (test_aligned_lanes.py)
    assert sides == [1, 1, 1, 1]
    sides.clear()
    compile(TWO_LEVEL)
    assert sides == [1, 1, 4]  # the shared store before the barrier (lane 0: twice); thread 0's tail
