"""At a barrier a converged warp saves only the registers live after it that some lane may have
written since the warp last resumed (`cpu/frame_sync.py`), and its pc as the mask of lanes
that continue; the others are still in its frame. Here registers are written once before the
first barrier, by odd lanes only, in every other round, by a bar.red at its resume, and the
carry flag both before the loop and in it; warps also reach the loop's second barrier
divergent (lanes 0-15 at one `bar.sync`, 16-31 at another, so every register is saved and
reloaded there). Under the lockstep runner and the general one (a bar.red makes it general).
Expected values: a numpy model of the kernel.
"""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler import compile, lower
from zluda_py.ptx import parse

KERNEL = """
.version 8.0
.target sm_80
.address_size 64

.visible .entry keep(.param .u64 out, .param .u32 rounds)
{
  .reg .pred %p<6>;
  .reg .b32 %r<16>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r14, [rounds];
  mov.u32 %r1, %tid.x;
  mad.lo.u32 %r2, %r1, 3, 1;
  add.cc.u32 %r3, %r1, 0xFFFFFFF0;
  mov.u32 %r4, 0;
  mov.u32 %r5, 0;
  mov.u32 %r6, 0;
  and.b32 %r7, %r1, 1;
  setp.ne.u32 %p1, %r7, 0;
  and.b32 %r8, %r1, 16;
  setp.ne.u32 %p2, %r8, 0;
  FIRST_BARRIER
LOOP:
  @!%p1 bra EVEN;
  add.u32 %r4, %r4, %r2;
EVEN:
  bar.sync 0;
  and.b32 %r9, %r6, 1;
  setp.eq.u32 %p3, %r9, 0;
  @%p3 bra SKIPC;
  add.u32 %r5, %r5, 1;
  add.cc.u32 %r12, %r5, 0xFFFFFFFF;
SKIPC:
  @%p2 bra HIGH;
  bar.sync 0;
  bra.uni JOIN;
HIGH:
  barrier.sync 0;
JOIN:
  add.u32 %r6, %r6, 1;
  setp.lt.u32 %p4, %r6, %r14;
  @%p4 bra LOOP;
  bar.sync 0;
  addc.u32 %r10, 0, 0;
  mov.u32 %r13, %ctaid.x;
  mov.u32 %r15, %ntid.x;
  mad.lo.u32 %r13, %r13, %r15, %r1;
  mul.wide.u32 %rd2, %r13, 20;
  add.u64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r2;
  st.global.u32 [%rd3+4], %r4;
  st.global.u32 [%rd3+8], %r5;
  st.global.u32 [%rd3+12], %r10;
  st.global.u32 [%rd3+16], %r11;
  ret;
}
"""
RUNNERS = {
    "lockstep": "bar.sync 0;\n  mov.u32 %r11, 7;",
    "general": "bar.red.popc.u32 %r11, 0, %p1;",  # the number of odd threads, delivered at the resume
}


def model(threads: int, rounds: int, runner: str) -> np.ndarray:
    t = np.arange(threads, dtype=np.int64)
    a = 3 * t + 1
    b = np.where(t % 2 == 1, rounds * a, 0)
    c = np.full(threads, rounds // 2)
    carry = np.ones(threads, np.int64) if rounds >= 2 else (t >= 16).astype(np.int64)
    red = np.full(threads, threads // 2 if runner == "general" else 7)
    return np.stack([a, b, c, carry, red], axis=1).astype(np.uint32)


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_runner_taken(runner: str) -> None:
    ir_text, _ = lower(parse(KERNEL.replace("FIRST_BARRIER", RUNNERS[runner])))
    assert ("rounds.done" in ir_text) == (runner == "lockstep")


@pytest.mark.parametrize("runner", sorted(RUNNERS))
@pytest.mark.parametrize("threads", [48, 96, 256])
@pytest.mark.parametrize("rounds", [1, 2, 5])
def test_registers_survive_barriers(runner: str, threads: int, rounds: int) -> None:
    m = compile(KERNEL.replace("FIRST_BARRIER", RUNNERS[runner]))
    out = np.zeros((2 * threads, 5), np.uint32)
    m.launch("keep", (2,), (threads,), [out, np.uint32(rounds)])  # the second block finds the first's frames
    np.testing.assert_array_equal(out, np.tile(model(threads, rounds, runner), (2, 1)))
