"""A converged warp that splits at any compare before a block barrier (`if (t < stride) s[t] +=
s[t + stride]; __syncthreads();`) runs the short side in place (`FunctionLowering._run_side`)
and reaches the barrier whole, without the dispatcher. Values computed before a barrier and
read after it differ per lane, per warp and per block, a register is written by the side's
lanes only, the side reads `activemask`, and blocks of 48 and 80 threads end in a partial warp
(the dispatcher's path). Expected values: the reference interpreter.
"""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler import compile
from zluda_py.compiler.cpu.function import FunctionLowering
from zluda_py.reference import run as reference

# %r4 is set before the first barrier and read after every one; %r9 accumulates in the side
TREE = """
.version 8.0
.target sm_80
.address_size 64

.visible .entry tree(.param .u64 out)
{
  .reg .pred %p<4>;
  .reg .b32 %r<20>;
  .reg .b64 %rd<4>;
  .shared .align 4 .b32 sm[1024];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.u32 %r4, %r1, 3, %r2;
  mul.lo.u32 %r5, %r1, %r1;
  add.u32 %r5, %r5, %r2;
  shl.b32 %r6, %r1, 2;
  mov.u32 %r7, sm;
  add.u32 %r8, %r7, %r6;
  st.shared.u32 [%r8], %r5;
  mov.u32 %r9, 0;
  mov.u32 %r17, 0;
  shr.u32 %r10, %r3, 1;
  bar.sync 0;
  setp.eq.u32 %p1, %r10, 0;
  @%p1 bra DONE;
LOOP:
  setp.ge.u32 %p2, %r1, %r10;
  @%p2 bra SKIP;
  shl.b32 %r11, %r10, 2;
  add.u32 %r12, %r8, %r11;
  ld.shared.u32 %r13, [%r8];
  ld.shared.u32 %r14, [%r12];
  add.u32 %r13, %r13, %r14;
  st.shared.u32 [%r8], %r13;
  add.u32 %r9, %r9, %r4;
  activemask.b32 %r17;
SKIP:
  bar.sync 0;
  shr.u32 %r10, %r10, 1;
  setp.ne.u32 %p3, %r10, 0;
  @%p3 bra LOOP;
DONE:
  ld.shared.u32 %r15, [%r8];
  mad.lo.u32 %r16, %r2, %r3, %r1;
  mul.wide.u32 %rd1, %r16, 16;
  ld.param.u64 %rd2, [out];
  add.u64 %rd3, %rd2, %rd1;
  st.global.v4.u32 [%rd3], {%r15, %r9, %r4, %r17};
  ret;
}
"""


@pytest.mark.parametrize("threads", [48, 80, 256])
def test_tree_reduction_with_the_side_in_place(threads: int) -> None:
    got, want = (np.zeros((3 * threads, 4), np.uint32) for _ in range(2))
    compile(TREE).launch("tree", (3,), (threads,), [got])  # later blocks find the earlier blocks' frames
    reference(TREE, "tree", (3,), (threads,), [want])
    np.testing.assert_array_equal(got, want)
    if threads & (threads - 1) == 0:  # a power of two: the tree sums every s[t] = t*t + block into s[0]
        assert got[0, 0] == sum(t * t for t in range(threads))


def test_only_a_side_before_a_lone_barrier_runs_in_place(monkeypatch) -> None:
    """The side before `SKIP: bar.sync` does; with a store before that barrier (the join is
    more than the barrier, as in bench/cuda/suite.cu's scan) the dispatcher keeps it."""
    sides = []
    run_side = FunctionLowering._run_side
    monkeypatch.setattr(FunctionLowering, "_run_side", lambda self, side, *a: sides.append(side) or run_side(self, side, *a))
    compile(TREE)
    assert sides == [3]  # LOOP's fall-through block, numbered before SKIP
    sides.clear()
    compile(TREE.replace("SKIP:\n  bar.sync 0;", "SKIP:\n  st.shared.u32 [%r8+4], %r9;\n  bar.sync 0;"))
    assert sides == []
