"""Where a kernel's warp resumes after a block barrier (`CallMixin.lower_barrier`, `_emit_resume`).

A converged clone's unguarded barrier sends all 32 lanes to the next block and gets a resume point
of its own: it reloads what is live there and sets the pc to that block, with no lane mask saved or
rebuilt. `%tid` is set up, by one block, for the kernel's start and each resume point from which a
block reading it can be reached (`FunctionLowering.reads_tid_after`), so a resume whose code never
reads `%tid` skips the 1-D/3-D test. Here `%tid` is read again after a barrier and, through the loop's back edge,
after the other one; the warp resumes whole and then splits on `%tid.x`'s parity; blocks are 2-D,
1-D and have partial warps. Expected values: a numpy model of the kernel.
"""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler import compile, lower
from zluda_py.ptx import parse

# Each round: thread (x, y) publishes lin*(round+1) + y at sm[lin] (lin = y*ntid.x + x), then
# reads %tid again, adds its successor's value (lin+1 mod the block's threads), and 3 more if x
# is odd; after the second barrier the loop goes back to the top, which reads %tid.
TID_AFTER_BARRIERS = """
.version 8.0
.target sm_80
.address_size 64

.visible .entry tid_after(.param .u64 out, .param .u32 rounds)
{
  .reg .pred %p<3>;
  .reg .b32 %r<24>;
  .reg .b64 %rd<4>;
  .shared .align 4 .u32 sm[1024];
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r10, [rounds];
  mov.u32 %r11, 0;
  mov.u32 %r12, 0;
  mov.u32 %r6, sm;
LOOP:
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %tid.y;
  mov.u32 %r3, %ntid.x;
  mad.lo.u32 %r4, %r2, %r3, %r1;
  shl.b32 %r5, %r4, 2;
  add.u32 %r7, %r6, %r5;
  add.u32 %r9, %r11, 1;
  mul.lo.u32 %r8, %r4, %r9;
  add.u32 %r8, %r8, %r2;
  st.shared.u32 [%r7], %r8;
  bar.sync 0;
  mov.u32 %r13, %tid.x;
  mov.u32 %r14, %tid.y;
  mov.u32 %r15, %ntid.y;
  mul.lo.u32 %r16, %r3, %r15;
  mad.lo.u32 %r17, %r14, %r3, %r13;
  add.u32 %r17, %r17, 1;
  rem.u32 %r17, %r17, %r16;
  shl.b32 %r17, %r17, 2;
  add.u32 %r17, %r6, %r17;
  ld.shared.u32 %r18, [%r17];
  add.u32 %r12, %r12, %r18;
  and.b32 %r19, %r13, 1;
  setp.eq.u32 %p1, %r19, 0;
  @%p1 bra EVEN;
  add.u32 %r12, %r12, 3;
EVEN:
  bar.sync 0;
  add.u32 %r11, %r11, 1;
  setp.lt.u32 %p2, %r11, %r10;
  @%p2 bra LOOP;
  mov.u32 %r20, %ctaid.x;
  mad.lo.u32 %r22, %r20, %r16, %r4;
  mul.wide.u32 %rd2, %r22, 4;
  add.u64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r12;
  ret;
}
"""

# %tid is read before the first barrier only: no resume point needs it.
TID_BEFORE_BARRIERS = """
.version 8.0
.target sm_80
.address_size 64

.visible .entry tid_before(.param .u64 out)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;
  .shared .align 4 .u32 sm[256];
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  shl.b32 %r2, %r1, 2;
  mov.u32 %r3, sm;
  add.u32 %r4, %r3, %r2;
  st.shared.u32 [%r4], %r1;
  bar.sync 0;
  ld.shared.u32 %r5, [sm];
  bar.sync 0;
  add.u32 %r6, %r5, %r1;
  mul.wide.u32 %rd2, %r1, 4;
  add.u64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r6;
  ret;
}
"""


def tid_after_model(nx: int, ny: int, rounds: int, blocks: int) -> np.ndarray:
    n = nx * ny
    lin = np.arange(n, dtype=np.uint32)
    x, y = lin % nx, lin // nx
    acc = np.zeros(n, np.uint32)
    for r in range(rounds):
        published = lin * np.uint32(r + 1) + y
        acc += published[(lin + 1) % n] + np.where(x % 2 == 1, 3, 0).astype(np.uint32)
    return np.tile(acc, blocks)


@pytest.mark.parametrize("block", [(32, 8), (16, 4), (20, 3), (33, 2), (70, 1), (1, 64), (256, 1)])
@pytest.mark.parametrize("rounds", [1, 3])
def test_tid_read_after_barriers_matches_model(block: tuple[int, int], rounds: int) -> None:
    m = compile(TID_AFTER_BARRIERS)
    blocks = 3
    out = np.zeros(blocks * block[0] * block[1], np.uint32)
    m.launch("tid_after", (blocks,), block, [out, np.uint32(rounds)])
    np.testing.assert_array_equal(out, tid_after_model(*block, rounds, blocks))


@pytest.mark.parametrize("threads", [20, 33, 70, 256])
def test_tid_read_before_barriers_only(threads: int) -> None:
    m = compile(TID_BEFORE_BARRIERS)
    out = np.zeros(threads, np.uint32)
    m.launch("tid_before", (1,), (threads,), [out])
    np.testing.assert_array_equal(out, np.arange(threads, dtype=np.uint32))


def _entries_setting_up_tid(ir_text: str) -> int:
    """How many of the warp function's entries (0: the start, n: resume point n) go through the
    one block that sets %tid up."""
    entry = next(line for line in ir_text.splitlines() if line.lstrip().startswith('switch i32') and 'tid.setup' in line)
    return entry.count('label %"tid.setup"')


def test_whole_warp_resumes_skip_the_tid_set_up() -> None:
    """Two barriers, each with a resume point for whole warps and one for the rest: %tid is set
    up for the start and the two others (a divergent warp may wait anywhere), by one block that
    they all enter through (one 1-D test and 3-D division in the IR, not one per entry)."""
    ir_text, _ = lower(parse(TID_BEFORE_BARRIERS))
    assert ir_text.count('\ntid.3d') == 1
    assert _entries_setting_up_tid(ir_text) == 3
    ir_text, _ = lower(parse(TID_AFTER_BARRIERS))
    assert ir_text.count('\ntid.3d') == 1
    assert _entries_setting_up_tid(ir_text) == 5
