"""Lanes of a block's values that only a side run in place reads (cpu/lane_demand.py): where
%tid.x is aligned to the lanes, a `(tid & m) ==/!= c` split is a constant mask, and the block's
values are kept only in the lanes the side or the join reads, others written as zeros, so the
warp reduction's shuffle chain keeps 16, 8, 4, 2 and 1 lanes. The block runner tests the
block's shape once and runs warps through a copy of the warp function for aligned blocks and
one for others. Values against the reference interpreter, in every shfl mode, clamp and
segment, aligned and unaligned blocks, partial warps, a side that is not lane-wise and values
live past a barrier."""

from __future__ import annotations

import numpy as np
import pytest

from tests.compiler.test_aligned_lanes import WARP_REDUCE
from zluda_py.compiler import cfg, compile
from zluda_py.compiler.cpu import lane_demand
from zluda_py.compiler.cpu.target import CPU
from zluda_py.ptx import parse
from zluda_py.reference import run as reference

# B: a value v, two shuffles of it and a guarded write; the side (lanes whose tid & MASK
# CMP VALUE fall through) stores them; the join returns
SPLIT = r"""
.version 7.8
.target sm_80
.address_size 64
.visible .entry split(.param .u64 out)
{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %tid.y;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %ntid.y;
    mov.u32 %r5, %ctaid.x;
    mad.lo.s32 %r6, %r2, %r3, %r1;
    mul.lo.s32 %r7, %r3, %r4;
    mad.lo.s32 %r8, %r5, %r7, %r6;
    mul.lo.s32 %r9, %r8, 40503;
    shfl.sync.MODE.b32 %r10|%p2, %r9, BVAL, CVAL, -1;
    add.s32 %r11, %r9, %r10;
    shfl.sync.MODE.b32 %r12, %r11, BVAL2, CVAL, -1;
    xor.b32 %r13, %r12, %r11;
    selp.u32 %r14, 1000, 0, %p2;
    setp.lt.u32 %p3, %r1, 5;
    @%p3 add.s32 %r13, %r13, %r14;
    and.b32 %r15, %r1, MASK;
    setp.CMP.s32 %p1, %r15, VALUE;
    @%p1 bra END;
    SIDE
END:
    ret;
}
"""
STORE = "mul.wide.u32 %rd2, %r8, 4; add.s64 %rd3, %rd1, %rd2; st.global.u32 [%rd3], %r13;"
ATOM = "atom.global.add.u32 %r16, [%rd1], %r13;"  # not lane-wise: every lane of %r13 kept

# the side before a barrier; after it every thread stores a value of the split's block
BARRIER = r"""
.version 7.8
.target sm_80
.address_size 64
.visible .entry barrier(.param .u64 out)
{
    .reg .pred %p<3>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<8>;
    .shared .align 4 .b32 s[32];
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r5, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r8, %r5, %r3, %r1;
    mul.lo.s32 %r9, %r8, 40503;
    shfl.sync.down.b32 %r10, %r9, 1, 31, -1;
    add.s32 %r11, %r9, %r10;
    shfl.sync.bfly.b32 %r12, %r11, 4, 31, -1;
    and.b32 %r15, %r1, 31;
    setp.ne.s32 %p1, %r15, 0;
    @%p1 bra JOIN;
    shr.u32 %r16, %r1, 5;
    shl.b32 %r17, %r16, 2;
    mov.u32 %r18, s;
    add.s32 %r19, %r18, %r17;
    st.shared.u32 [%r19], %r12;
JOIN:
    bar.sync 0;
    shr.u32 %r16, %r1, 5;
    shl.b32 %r17, %r16, 2;
    mov.u32 %r18, s;
    add.s32 %r19, %r18, %r17;
    ld.shared.u32 %r14, [%r19];
    add.s32 %r13, %r14, %r11;
    mul.wide.u32 %rd2, %r8, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r13;
    ret;
}
"""

BLOCKS = [(256, 1), (96, 1), (64, 2), (48, 2)]  # 1-D, aligned 2-D, rows ending inside warps


def split_ptx(mode: str = "down", b: int = 16, b2: int = 8, c: int = 31, mask: int = 7, cmp: str = "ne",
              value: int = 3, side: str = STORE) -> str:
    text = SPLIT
    for k, v in (("BVAL2", b2), ("BVAL", b), ("CVAL", c), ("MODE", mode), ("MASK", mask), ("CMP", cmp),
                 ("VALUE", value), ("SIDE", side)):
        text = text.replace(k, str(v))
    return text


def against_reference(text: str, kernel: str, blocks: list[tuple[int, int]], words: int = 0) -> None:
    m = compile(text)
    for block in blocks:
        grid = 3
        n = words or grid * block[0] * block[1]
        got, want = (np.full(n, 0xDEAD, np.uint32) for _ in range(2))
        m.launch(kernel, (grid,), block, [got])
        reference(text, kernel, (grid,), block, [want])
        np.testing.assert_array_equal(got, want, err_msg=f"block {block}")


def test_the_reduction_keeps_the_lanes_lane_zero_reads():
    """Back from lane 0's store: the five adds keep lanes 0-15, 0-7, 0-3, 0-1 and 0 (fails
    before: no such analysis)."""
    body = cfg.build(parse(WARP_REDUCE).functions()[0].body)
    blk = next(blk for blk in body.blocks if any(i.opcode == "shfl" for i in blk.insts))
    constant = lambda inst, op: int(op.value)  # noqa: E731  (immediate b and c)
    need = lane_demand.demanded(blk.insts[:-1], {"%f3": 1, "%r2": 1, "%p7": lane_demand.ALL}, constant)
    adds = [i for i in blk.insts if i.opcode == "add"]
    assert [need[id(i)][i.operands[0].name] for i in adds] == [0xFFFF, 0xFF, 0xF, 0x3, 0x1]


def test_the_runner_decides_the_shape_once():
    """Two warp loops, the warp function inlined into both with the shape a constant (fails
    before: one loop, the shape tested inside); the aligned copy zeroes the upper lanes."""
    text = CPU.lower_part(parse(WARP_REDUCE), "warp_reduce").text
    lines = [line for line in text.splitlines() if '@"warp_reduce.warp"(' in line]
    calls = [line for line in lines if not line.startswith("define")]
    assert len(lines) == 3 and any(line.startswith("define") and line.endswith("alwaysinline") for line in lines)
    assert calls[0].endswith("i32 0, i1 1)") and calls[1].endswith("i32 0, i1 0)")
    aligned = text.split('lanes.aligned', 2)[2].split('lanes.any')[0]
    for k in (16, 8, 4, 2, 1):  # each add's value kept in its first k lanes, zeros above
        assert "select  <32 x i1> <" + ", ".join(["i1 1"] * k + ["i1 0"] * (32 - k)) + ">" in aligned


@pytest.mark.parametrize("mode,b,b2,c", [("down", 16, 8, 31), ("down", 3, 1, 0x1807), ("up", 2, 1, 0),
                                         ("up", 5, 3, 0x1800), ("bfly", 1, 16, 31), ("bfly", 6, 2, 0x1007),
                                         ("idx", 5, 0, 31), ("idx", 3, 9, 0x1807)])
def test_shuffles_kept_where_the_side_reads(mode, b, b2, c):
    against_reference(split_ptx(mode, b, b2, c), "split", BLOCKS)


@pytest.mark.parametrize("mask,cmp,value", [(31, "ne", 0), (31, "eq", 0), (16, "ne", 16), (0, "ne", 0)])
def test_sides_of_other_lanes(mask, cmp, value):
    """Lane 0, lanes 1-31, lanes 16-31, no lane (the warp goes one way)."""
    against_reference(split_ptx(mask=mask, cmp=cmp, value=value), "split", BLOCKS)


def test_a_side_that_is_not_lane_wise():
    against_reference(split_ptx(side=ATOM, mask=31, cmp="ne", value=5), "split", BLOCKS, words=1)


def test_values_live_past_a_barrier_stay_whole():
    against_reference(BARRIER, "barrier", [(256, 1), (96, 1), (64, 1)])


def test_the_warp_reduction_against_numpy():
    """The suite's reduction on the aligned path: lane 0 of each warp stores its warp's sum."""
    m = compile(WARP_REDUCE)
    n = 4096
    x = np.random.default_rng(3).integers(-8, 8, n).astype(np.float32)
    out = np.zeros(n // 32, np.float32)
    m.launch("warp_reduce", (n // 256,), (256,), [np.int32(n), x, out])
    np.testing.assert_array_equal(out, x.reshape(-1, 32).sum(1))
