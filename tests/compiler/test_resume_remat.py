"""A whole warp resuming after a barrier recomputes live registers that are pure functions of
launch constants, symbol addresses and reloaded registers instead of loading them from its
frame (`cpu/remat.py`): the tree reduction's `&s[t]` from `t`. Here against numpy: the tree
reduction, and a loop whose live registers form a chain (`%r10` reads `%r5`, which reads the
reloaded `%r3`; `%r10` sorts first, so the reruns must be ordered by their sources), in 1-D
and 2-D blocks, with a register defined on one path only (reloaded, not recomputed).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from zluda_py.compiler import compile, lower
from zluda_py.ptx import parse

HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n"
REDUCE = HEADER + """
.visible .entry reduce(.param .u64 in, .param .u64 out)
{
  .reg .pred %p<5>;
  .reg .f32 %f<8>;
  .reg .b32 %r<16>;
  .reg .b64 %rd<8>;
  .shared .align 4 .b8 s[4096];
  ld.param.u64 %rd1, [in];
  ld.param.u64 %rd2, [out];
  mov.u32 %r1, %ntid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %tid.x;
  mad.lo.s32 %r4, %r2, %r1, %r3;
  mul.wide.s32 %rd4, %r4, 4;
  add.s64 %rd5, %rd1, %rd4;
  ld.global.f32 %f1, [%rd5];
  shl.b32 %r10, %r3, 2;
  mov.u32 %r11, s;
  add.s32 %r5, %r11, %r10;
  st.shared.f32 [%r5], %f1;
  bar.sync 0;
  shr.u32 %r14, %r1, 1;
LOOP:
  setp.ge.u32 %p3, %r3, %r14;
  @%p3 bra SKIP;
  shl.b32 %r12, %r14, 2;
  add.s32 %r13, %r5, %r12;
  ld.shared.f32 %f4, [%r5];
  ld.shared.f32 %f5, [%r13];
  add.f32 %f6, %f5, %f4;
  st.shared.f32 [%r5], %f6;
SKIP:
  bar.sync 0;
  shr.u32 %r14, %r14, 1;
  setp.ne.s32 %p4, %r14, 0;
  @%p4 bra LOOP;
  setp.ne.s32 %p2, %r3, 0;
  @%p2 bra DONE;
  ld.shared.f32 %f7, [s];
  mul.wide.u32 %rd7, %r2, 4;
  add.s64 %rd3, %rd2, %rd7;
  st.global.f32 [%rd3], %f7;
DONE:
  ret;
}
"""
CHAIN = HEADER + """
.visible .entry chain(.param .u64 out, .param .u32 rounds)
{
  .reg .pred %p<4>;
  .reg .b32 %r<20>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r9, [rounds];
  mov.u32 %r1, %tid.x;
  mov.u32 %r15, %tid.y;
  mov.u32 %r2, %ntid.x;
  mad.lo.u32 %r16, %r15, %r2, %r1;
  mad.lo.u32 %r3, %r16, 7, 5;
  shl.b32 %r4, %r3, 3;
  add.u32 %r5, %r4, %r2;
  mul.lo.u32 %r10, %r5, 3;
  mov.u32 %r6, 0;
  mov.u32 %r8, 0;
  mov.u32 %r12, 100;
  setp.eq.u32 %p2, %r9, 2;
  @%p2 bra LOOP;
  add.u32 %r12, %r2, 1;
LOOP:
  add.u32 %r6, %r6, %r10;
  add.u32 %r6, %r6, %r5;
  add.u32 %r6, %r6, %r12;
  bar.sync 0;
  add.u32 %r8, %r8, 1;
  setp.lt.u32 %p1, %r8, %r9;
  @%p1 bra LOOP;
  mov.u32 %r13, %ctaid.x;
  mov.u32 %r14, %ntid.y;
  mul.lo.u32 %r14, %r14, %r2;
  mad.lo.u32 %r13, %r13, %r14, %r16;
  mul.wide.u32 %rd2, %r13, 8;
  add.u64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r6;
  st.global.u32 [%rd3+4], %r3;
  ret;
}
"""


def whole_resume_stores(ir_text: str, kernel: str, reg: str) -> list[str]:
    """For each whole-warp resume block of `kernel`'s warp function that stores register `reg`'s
    vector: the instruction that computed the stored value."""
    fn = ir_text[ir_text.index(f'define internal i32 @"{kernel}.warp"'):]
    fn = fn[:fn.index("\n}")]
    defs = dict(re.findall(r'^\s*(%"\.\d+") = (.*)$', fn, re.M))
    out = []
    for block in re.split(r"\n(?=\S)", fn):
        if re.match(r"resume\d+:", block):
            for value in re.findall(rf'store <32 x i32> (%"\.\d+"), <32 x i32>\* %"{reg[1:]}"', block):
                out.append(defs[value])
    return out


def test_address_recomputed_not_reloaded() -> None:
    ir_text, _ = lower(parse(REDUCE))
    stores = whole_resume_stores(ir_text, "reduce", "%r5")
    assert stores and not any(s.startswith("load") for s in stores)  # &s[t] from t
    assert all(s.startswith("load") for s in whole_resume_stores(ir_text, "reduce", "%r3"))  # t itself: reloaded


@pytest.mark.parametrize("threads", [64, 256, 1024])
def test_tree_reduction(threads: int) -> None:
    x = np.random.default_rng(threads).integers(-100, 100, 64 * threads).astype(np.float32)
    out = np.zeros(64, np.float32)
    compile(REDUCE).launch("reduce", (64,), (threads,), [x, out])
    np.testing.assert_array_equal(out, x.reshape(64, threads).sum(1))


@pytest.mark.parametrize("block", [(64, 1), (32, 4), (48, 3), (16, 6)])
@pytest.mark.parametrize("rounds", [1, 2, 5])
def test_chain_of_recomputed_registers(block: tuple[int, int], rounds: int) -> None:
    nx, ny = block
    out = np.zeros((3 * nx * ny, 2), np.uint32)
    compile(CHAIN).launch("chain", (3,), block, [out, np.uint32(rounds)])
    t = np.tile(np.arange(nx * ny, dtype=np.uint64), 3)
    r3 = (7 * t + 5) % 2**32
    r5 = ((r3 << 3) + nx) % 2**32
    r12 = 100 if rounds == 2 else nx + 1
    want = np.stack([(rounds * (3 * r5 + r5 + r12)) % 2**32, r3], axis=1).astype(np.uint32)
    np.testing.assert_array_equal(out, want)
