"""The block runner opens a barrier when its last thread arrives, however it arrives.

It tests the barrier a warp stops at, and every barrier after a warp passed one with `bar.arrive`
or threads exited (`block_runner._general_schedule`). Here warp 1 completes barrier 2 with `bar.arrive`
and stops at barrier 3, while warp 0 waits at barrier 2; both then meet at barrier 4. A runner
that tested only the barrier a warp stops at would leave barrier 2 closed: warp 0 waits there,
warp 1 at barrier 4, and the launch fails as a deadlock. Expected values: numpy model of the
producer/consumer exchange.
"""

from __future__ import annotations

import numpy as np

from zluda_py.compiler import compile

PTX = """
.version 8.0
.target sm_80
.address_size 64

.visible .entry exchange(.param .u64 out)
{
  .reg .pred %p<2>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<4>;
  .shared .align 4 .b32 sm[64];
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  mov.u32 %r3, sm;
  shl.b32 %r4, %r1, 2;
  add.u32 %r5, %r3, %r4;
  shr.u32 %r2, %r1, 5;
  setp.ne.u32 %p1, %r2, 0;
  @%p1 bra W1;
  mul.lo.u32 %r6, %r1, 3;
  st.shared.u32 [%r5], %r6;
  bar.arrive 1, 64;
  bar.sync 2, 64;
  ld.shared.u32 %r7, [%r5+128];
  bar.sync 4, 64;
  bra.uni DONE;
W1:
  bar.sync 1, 64;
  ld.shared.u32 %r7, [%r5+-128];
  mul.lo.u32 %r6, %r1, 5;
  st.shared.u32 [%r5], %r6;
  bar.arrive 2, 64;
  bar.sync 3, 32;
  bar.sync 4, 64;
DONE:
  mul.wide.u32 %rd2, %r1, 4;
  add.u64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r7;
  ret;
}
"""


def test_barrier_completed_by_arrive_opens() -> None:
    out = np.zeros(64, np.uint32)
    compile(PTX).launch("exchange", (1,), (64,), [out])
    t = np.arange(64)
    np.testing.assert_array_equal(out, np.where(t < 32, (t + 32) * 5, (t - 32) * 3).astype(np.uint32))
