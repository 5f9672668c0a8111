"""Reconvergence order: every block of a loop runs before the loop's exits (cfg.reconvergence_order).

The PTX reproduces numba-cuda's `@cuda.reduce` tail: NVVM put the loop's back edge in a block of
its own that the loop body falls through to (`@%p bra EXIT; bra.uni LOOP;`). Reverse post-order
numbered that latch after the exit and the join, so lanes that skipped the loop ran the join's
barrier (or warp collective) while one lane was still iterating.
"""

from __future__ import annotations

import random

import numpy as np

from zluda_py.compiler import compile
from zluda_py.compiler.cfg import reconvergence_order

# Thread `looper` sums sm[looper+1 .. looper+n-1] into sm[looper] in a loop with a separate
# latch block; every other thread goes straight to the join. After the join: a barrier, then
# thread 0 reads the sum (kernel `tail_barrier`), or a full-warp ballot (kernel `tail_ballot`).
PTX = """
.version 8.0
.target sm_80
.address_size 64

.visible .entry tail_barrier(.param .u64 out, .param .u32 n, .param .u32 looper)
{
  .reg .pred %p<4>;
  .reg .b32 %r<20>;
  .reg .b64 %rd<4>;
  .shared .align 4 .b32 sm[64];
  mov.u32 %r1, %tid.x;
  shl.b32 %r2, %r1, 2;
  mov.u32 %r3, sm;
  add.u32 %r4, %r3, %r2;
  st.shared.u32 [%r4], 1;
  bar.sync 0;
  ld.param.u32 %r13, [looper];
  setp.ne.u32 %p1, %r1, %r13;
  @%p1 bra JOIN;
  ld.param.u32 %r6, [n];
  mov.u32 %r7, 1;
  ld.shared.u32 %r8, [%r4];
LOOP:
  shl.b32 %r9, %r7, 2;
  add.u32 %r10, %r4, %r9;
  ld.shared.u32 %r11, [%r10];
  add.u32 %r8, %r8, %r11;
  add.u32 %r7, %r7, 1;
  setp.ge.u32 %p2, %r7, %r6;
  @%p2 bra EXIT;
  bra.uni LOOP;
EXIT:
  st.shared.u32 [%r4], %r8;
JOIN:
  bar.sync 0;
  setp.ne.u32 %p3, %r1, 0;
  @%p3 bra DONE;
  shl.b32 %r14, %r13, 2;
  add.u32 %r15, %r3, %r14;
  ld.shared.u32 %r12, [%r15];
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd2, %rd1;
  st.global.u32 [%rd2], %r12;
DONE:
  ret;
}

.visible .entry tail_ballot(.param .u64 out, .param .u32 n)
{
  .reg .pred %p<4>;
  .reg .b32 %r<20>;
  .reg .b64 %rd<6>;
  mov.u32 %r1, %tid.x;
  mov.u32 %r8, 0;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra JOIN;
  ld.param.u32 %r6, [n];
  mov.u32 %r7, 1;
LOOP:
  add.u32 %r8, %r8, %r7;
  add.u32 %r7, %r7, 1;
  setp.ge.u32 %p2, %r7, %r6;
  @%p2 bra JOIN;
  bra.uni LOOP;
JOIN:
  setp.eq.u32 %p3, %r1, %r1;
  vote.sync.ballot.b32 %r9, %p3, 0xffffffff;
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r1, 8;
  add.u64 %rd4, %rd2, %rd3;
  st.global.v2.u32 [%rd4], {%r9, %r8};
  ret;
}
"""


def test_a_barrier_after_a_loop_with_a_separate_latch_waits_for_the_looping_lane():
    m = compile(PTX)
    for looper in (0, 32, 33):  # first warp, lane 0 of the second warp, lane 1 of it
        out = np.zeros(1, np.uint32)
        m.launch("tail_barrier", (1,), (64,), [out, np.uint32(64 - looper), np.uint32(looper)])
        assert out[0] == 64 - looper, f"looper {looper}: sum {out[0]}"


def test_a_warp_collective_after_a_loop_with_a_separate_latch_sees_the_whole_warp():
    m = compile(PTX)
    out = np.zeros((32, 2), np.uint32)
    m.launch("tail_ballot", (1,), (32,), [out, np.uint32(10)])
    assert (out[:, 0] == 0xFFFFFFFF).all(), [hex(v) for v in out[:, 0]]
    assert out[0, 1] == sum(range(1, 10)) and (out[1:, 1] == 0).all()


def _reachable(succs: list[list[int]], start: int) -> set[int]:
    seen, todo = {start}, [start]
    while todo:
        for s in succs[todo.pop()]:
            if s not in seen:
                seen.add(s)
                todo.append(s)
    return seen


def test_random_graphs_put_whatever_can_only_come_later_later():
    """The order's defining property, checked by brute force: when b is reachable from a but a
    is not reachable from b (b lies after a's loop, if any), a comes first; and each strongly
    connected region (a loop, irreducible ones included) is contiguous."""
    rng = random.Random(13)
    for _ in range(400):
        n = rng.randint(1, 24)
        succs = [rng.sample(range(n), rng.randint(0, min(3, n))) for _ in range(n)]
        order = reconvergence_order(succs)
        reach = [_reachable(succs, a) for a in range(n)]
        assert order[0] == 0 and sorted(order) == sorted(reach[0])
        pos = {b: i for i, b in enumerate(order)}
        for a in order:
            for b in reach[a]:
                if a not in reach[b]:
                    assert pos[a] < pos[b], (succs, order, a, b)
            region = [b for b in order if b in reach[a] and a in reach[b]]
            spots = sorted(pos[b] for b in region)
            assert spots == list(range(spots[0], spots[0] + len(spots))), (succs, order, region)


def test_loops_nested_deeper_than_the_recursion_limit():
    depth = 3000  # block k enters loop k+1; the innermost body jumps back to every header
    succs = [[k + 1] for k in range(depth)] + [[]]
    for k in range(1, depth):
        succs[k].append(k - 1 if k > 1 else depth)
    order = reconvergence_order(succs)
    assert order[0] == 0 and len(order) == depth + 1
