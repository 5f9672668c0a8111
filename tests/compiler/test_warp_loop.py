"""A lockstep kernel's warp function runs each round of the block's warps itself (`cpu/warp_loop.py`).

Where a whole warp stops at a barrier, the next warp goes straight into a copy of the reload of
the resume point it waits at, when that is one from which the barrier is reached (each region a
loop over the warps); anything else goes through the loop's head and its switch. The frame, the
warp index, `%tid` and what a fault names must follow the warp: kernels here read `%tid` after
barriers, write per-warp state that the next warp must not see, exit warps early, reach the
barrier at different places and fault in a late warp. Expected values: numpy models.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from zluda_py.compiler import LaunchError, compile, lower
from zluda_py.ptx import parse

# The tree reduction as nvcc writes it (bench/cuda/cpu_kernels.cu): the stride loop's barrier is
# reached from the first barrier's resume point and from its own.
TREE = """
.version 8.0
.target sm_80
.address_size 64

.visible .entry tree(.param .u64 in, .param .u64 out, .param .u32 n)
{
  .reg .pred %p<6>;
  .reg .f32 %f<9>;
  .reg .b32 %r<15>;
  .reg .b64 %rd<9>;
  .shared .align 4 .b8 s[4096];
  ld.param.u64 %rd1, [in];
  ld.param.u64 %rd2, [out];
  ld.param.u32 %r9, [n];
  mov.u32 %r1, %ntid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %tid.x;
  mad.lo.s32 %r4, %r2, %r1, %r3;
  setp.ge.s32 %p1, %r4, %r9;
  mov.f32 %f8, 0f00000000;
  @%p1 bra SKIP;
  cvta.to.global.u64 %rd3, %rd1;
  mul.wide.s32 %rd4, %r4, 4;
  add.s64 %rd5, %rd3, %rd4;
  ld.global.f32 %f8, [%rd5];
SKIP:
  shl.b32 %r10, %r3, 2;
  mov.u32 %r11, s;
  add.s32 %r5, %r11, %r10;
  st.shared.f32 [%r5], %f8;
  bar.sync 0;
  shr.u32 %r14, %r1, 1;
  setp.eq.s32 %p2, %r14, 0;
  @%p2 bra TAIL;
LOOP:
  setp.ge.s32 %p3, %r3, %r14;
  @%p3 bra NEXT;
  shl.b32 %r12, %r14, 2;
  add.s32 %r13, %r5, %r12;
  ld.shared.f32 %f4, [%r5];
  ld.shared.f32 %f5, [%r13];
  add.f32 %f6, %f5, %f4;
  st.shared.f32 [%r5], %f6;
NEXT:
  bar.sync 0;
  shr.u32 %r14, %r14, 1;
  setp.ne.s32 %p4, %r14, 0;
  @%p4 bra LOOP;
TAIL:
  setp.ne.s32 %p5, %r3, 0;
  @%p5 bra DONE;
  ld.shared.f32 %f7, [s];
  cvta.to.global.u64 %rd6, %rd2;
  mul.wide.u32 %rd7, %r2, 4;
  add.s64 %rd8, %rd6, %rd7;
  st.global.f32 [%rd8], %f7;
DONE:
  ret;
}
"""

# Three rounds of one barrier (double-buffered), each region reading %tid again and a register the
# warp keeps across barriers (%r20: its own accumulator; the next warp must not start from it).
# Every thread first writes b[0][t] = b[1][t] = t; warps whose index is 1 mod 3 then leave; in
# round 1 warp 0 reaches the barrier at a label of its own. Thread t: a = t; round k publishes
# b[k % 2][t] = a and, after the barrier, adds b[k % 2][(t + 1) mod T] * (k + 1);
# out[t] = a + 1000 * %tid.x. The store faults for thread `bad` < T (1 GiB past out).
CHAIN = """
.version 8.0
.target sm_80
.address_size 64

.visible .entry chain(.param .u64 out, .param .u32 bad)
{
  .reg .pred %p<6>;
  .reg .b32 %r<40>;
  .reg .b64 %rd<8>;
  .shared .align 4 .u32 s[2048];
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r30, [bad];
  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 5;
  rem.u32 %r3, %r2, 3;
  mov.u32 %r5, s;
  shl.b32 %r7, %r1, 2;
  add.u32 %r8, %r5, %r7;
  st.shared.u32 [%r8], %r1;
  st.shared.u32 [%r8+4096], %r1;
  setp.eq.u32 %p1, %r3, 1;
  @%p1 bra LEAVE;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r20, %r1;
  mov.u32 %r21, 0;
ROUND:
  mov.u32 %r6, %tid.x;
  and.b32 %r15, %r21, 1;
  shl.b32 %r15, %r15, 12;
  add.u32 %r16, %r5, %r15;
  shl.b32 %r7, %r6, 2;
  add.u32 %r8, %r16, %r7;
  st.shared.u32 [%r8], %r20;
  setp.eq.u32 %p2, %r2, 0;
  setp.eq.u32 %p3, %r21, 1;
  and.pred %p4, %p2, %p3;
  @%p4 bra W0;
  bar.sync 0;
  bra.uni AFTER;
W0:
  barrier.sync.aligned 0;
AFTER:
  mov.u32 %r9, %tid.x;
  add.u32 %r10, %r9, 1;
  rem.u32 %r10, %r10, %r4;
  shl.b32 %r10, %r10, 2;
  add.u32 %r10, %r16, %r10;
  ld.shared.u32 %r11, [%r10];
  add.u32 %r12, %r21, 1;
  mad.lo.u32 %r20, %r11, %r12, %r20;
  add.u32 %r21, %r21, 1;
  setp.lt.u32 %p5, %r21, 3;
  @%p5 bra ROUND;
  mov.u32 %r13, %tid.x;
  mad.lo.u32 %r14, %r13, 1000, %r20;
  mul.wide.u32 %rd2, %r13, 4;
  setp.eq.u32 %p1, %r13, %r30;
  selp.b64 %rd3, 1073741824, 0, %p1;
  add.u64 %rd4, %rd1, %rd2;
  add.u64 %rd4, %rd4, %rd3;
  st.global.u32 [%rd4], %r14;
LEAVE:
  ret;
}
"""


def chain_model(threads: int) -> np.ndarray:
    t = np.arange(threads, dtype=np.int64)
    kept = (t // 32) % 3 != 1
    a = t.copy()
    buf = [t.copy(), t.copy()]
    for k in range(3):
        buf[k % 2] = np.where(kept, a, buf[k % 2])  # an exited warp's slots keep t
        a = np.where(kept, a + buf[k % 2][(t + 1) % threads] * (k + 1), a)
    return np.where(kept, (a + 1000 * t) % 2**32, 0).astype(np.uint32)


def test_lockstep_kernels_loop_over_their_warps() -> None:
    """The tree reduction's warp function runs the round (its head, `warps`), and both whole-warp
    resume points that lead to the loop's barrier have a copy entered from the warp before."""
    ir_text, _ = lower(parse(TREE))
    assert "warps.run" in ir_text
    entered = set(re.findall(r"\bresume(\d+)\.next:", ir_text))
    assert len(entered) == 2, entered
    for site in entered:
        assert re.search(rf"br i1 %\S+, label %\"?resume{site}\.next\"?", ir_text), site


def test_only_repeating_regions_loop() -> None:
    """The chain's barrier is reached again from its own region: a warp loop. bar.red needs the
    general runner, and a tree without its loop has no region that repeats: no warp loop."""
    assert "warps.run" in lower(parse(CHAIN))[0]
    ptx = TREE.replace("bar.sync 0;\n  shr.u32 %r14, %r14, 1;", "bar.red.popc.u32 %r12, 0, %p3;\n  shr.u32 %r14, %r14, 1;")
    assert "warps.run" not in lower(parse(ptx))[0]
    once = TREE.replace("@%p4 bra LOOP;", "")  # one halving: the first barrier leads to the second, that to the end
    assert "warps.run" not in lower(parse(once))[0]


@pytest.mark.parametrize("n, block", [(1 << 14, 256), (4096, 1024), (1000, 96), (999, 100), (77, 64), (31, 32),
                                      (700, 160), (300, 33)])
def test_tree_reduction(n: int, block: int) -> None:
    x = ((np.arange(n) * 7919) % 17 - 8).astype(np.float32)
    blocks = (n + block - 1) // block
    out = np.zeros(blocks, np.float32)
    compile(TREE).launch("tree", blocks, block, [x, out, np.uint32(n)])
    padded = np.zeros(blocks * block, np.float32)
    padded[:n] = x
    # the tree adds exact small integers only when the block's width is a power of two; other
    # widths drop the odd elements at each halving, so the model runs the same halvings
    s = padded.reshape(blocks, block).copy()
    stride = block // 2
    while stride > 0:
        s[:, :stride] += s[:, stride:2 * stride]
        stride //= 2
    np.testing.assert_array_equal(out, s[:, 0])


@pytest.mark.parametrize("threads", [32, 96, 100, 256, 333, 1024])
def test_regions_with_exits_and_two_places(threads: int) -> None:
    out = np.zeros(threads, np.uint32)
    compile(CHAIN).launch("chain", 1, threads, [out, np.uint32(1 << 20)])
    np.testing.assert_array_equal(out, chain_model(threads))


@pytest.mark.parametrize("bad", [0, 200, 383])
def test_fault_names_the_late_warp(bad: int) -> None:
    """Thread `bad` stores 1 GiB past `out` after the last barrier: 700 names it, whichever warp."""
    out = np.zeros(384, np.uint32)
    with pytest.raises(LaunchError) as e:
        compile(CHAIN).launch("chain", 1, 384, [out, np.uint32(bad)])
    assert e.value.cu_result == 700
    assert f"lane {bad % 32} (thread ({bad},0,0))" in str(e.value), str(e.value)
