"""Kernels whose barriers are all `bar.sync`/`barrier.sync` of one immediate id without a thread
count run under the lockstep block runner (`CallMixin.lockstep_barriers`): every unfinished warp
runs to its next barrier once per round. It must give what the general runner gives when warps
exit early, reach the barrier at different places or arrive divergent, and when the block's last
warp is partial. Expected values: numpy models of the kernels.
"""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler import compile, lower
from zluda_py.compiler.errors import LaunchError
from zluda_py.ptx import parse

# Warps with an odd index leave before the loop. Each round of the loop is two barriers: every
# remaining thread publishes its value, then adds the value of the thread `stride` below it
# in the same (kept) half of the block, with the `t >= stride` test divergent inside warps.
# Warp 0 reaches the first barrier of each round at a label of its own (`W0`), the others at
# `OTHER`: the barrier is one, wherever it stands.
SCAN = """
.version 8.0
.target sm_80
.address_size 64

.visible .entry scan(.param .u64 out, .param .u32 rounds)
{
  .reg .pred %p<6>;
  .reg .b32 %r<20>;
  .reg .f32 %f<6>;
  .reg .b64 %rd<4>;
  .shared .align 4 .f32 sm[1024];
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r10, [rounds];
  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 5;
  and.b32 %r3, %r2, 1;
  setp.ne.u32 %p1, %r3, 0;
  @%p1 bra LEAVE;
  cvt.rn.f32.u32 %f1, %r1;
  mov.u32 %r4, sm;
  shl.b32 %r5, %r1, 2;
  add.u32 %r6, %r4, %r5;
  mov.u32 %r7, 1;
  mov.u32 %r11, 0;
LOOP:
  st.shared.f32 [%r6], %f1;
  setp.eq.u32 %p2, %r2, 0;
  @%p2 bra W0;
OTHER:
  bar.sync 0;
  bra.uni ADD;
W0:
  barrier.sync.aligned 0;
ADD:
  setp.lt.u32 %p3, %r1, %r7;
  @%p3 bra SKIP;
  shl.b32 %r8, %r7, 2;
  sub.u32 %r9, %r6, %r8;
  ld.shared.f32 %f2, [%r9];
  add.f32 %f1, %f1, %f2;
SKIP:
  bar.sync 0;
  shl.b32 %r7, %r7, 1;
  add.u32 %r11, %r11, 1;
  setp.lt.u32 %p4, %r11, %r10;
  @%p4 bra LOOP;
  mul.wide.u32 %rd2, %r1, 4;
  add.u64 %rd3, %rd1, %rd2;
  st.global.f32 [%rd3], %f1;
LEAVE:
  ret;
}
"""

# Two barrier ids: the general runner (here warp 0 waits at barrier 1, the others at barrier 0,
# which no thread completes: the launch must fail as a deadlock, not pass).
TWO_IDS = """
.version 8.0
.target sm_80
.address_size 64

.visible .entry two_ids()
{
  .reg .pred %p<2>;
  .reg .b32 %r<4>;
  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 5;
  setp.eq.u32 %p1, %r2, 0;
  @%p1 bra W0;
  bar.sync 0;
  ret;
W0:
  bar.sync 1;
  ret;
}
"""


def scan_model(threads: int, rounds: int) -> np.ndarray:
    t = np.arange(threads)
    kept = (t // 32) % 2 == 0
    v = t.astype(np.float32)
    stride = 1
    for _ in range(rounds):
        published = np.where(kept, v, 0)  # an exited warp's slots are never written: zero
        take = kept & (t >= stride)
        v = np.where(take, v + published[np.clip(t - stride, 0, None)], v)
        stride *= 2
    return np.where(kept, v, 0).astype(np.float32)


def test_scan_kernel_takes_the_lockstep_runner() -> None:
    ir_text, _ = lower(parse(SCAN))
    assert "rounds.done" in ir_text
    ir_text, _ = lower(parse(TWO_IDS))
    assert "rounds.done" not in ir_text


@pytest.mark.parametrize("threads", [32, 80, 256, 1024])
@pytest.mark.parametrize("rounds", [1, 2, 7])
def test_lockstep_scan_matches_model(threads: int, rounds: int) -> None:
    m = compile(SCAN)
    out = np.zeros(threads, np.float32)
    m.launch("scan", (3,), (threads,), [out, np.uint32(rounds)])
    np.testing.assert_array_equal(out, scan_model(threads, rounds))


def test_two_barrier_ids_keep_the_general_runner() -> None:
    m = compile(TWO_IDS)
    with pytest.raises(LaunchError, match="deadlock"):
        m.launch("two_ids", (1,), (64,), [])
