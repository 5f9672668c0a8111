"""%tid in 2-D and 3-D blocks comes from one shared helper, `zluda.tid_3d` (cpu/thread_ids.py),
compiled with the shared helpers: a kernel's own IR holds only the 1-D case and the call. Every
thread of blocks of many shapes (lanes split across rows, rows split across warps, partial last
warps) reads its %tid.x/y/z, in kernels with and without barriers, and in a `.func`. Expected
values come from numpy's unravelling of the linear thread index, not from our output.
"""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler import compile
from zluda_py.compiler.cpu.module import helpers_ir
from zluda_py.compiler.cpu.target import CPU, host_layout
from zluda_py.ptx import parse

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"
# out[linear thread] = tid.x | tid.y << 10 | tid.z << 20, where the linear index is computed from
# %tid and %ntid as PTX defines it (x fastest)
KERNEL = HEAD + """
.visible .entry ids(.param .u64 out)
{
  .reg .b32 %r<16>;
  .reg .b64 %rd<4>;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %tid.y;
  mov.u32 %r3, %tid.z;
  BARRIER
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %ntid.y;
  mad.lo.s32 %r6, %r3, %r5, %r2;
  mad.lo.s32 %r6, %r6, %r4, %r1;
  shl.b32 %r7, %r2, 10;
  or.b32 %r7, %r7, %r1;
  shl.b32 %r8, %r3, 20;
  or.b32 %r7, %r7, %r8;
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r6, 4;
  add.u64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r7;
  ret;
}
"""
# the same from a .func (its %tid is set up where it starts) and a kernel that reads %tid.x only
FUNC = HEAD + """
.func (.reg .b32 v) packed()
{
  .reg .b32 %r<8>;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %tid.y;
  mov.u32 %r3, %tid.z;
  shl.b32 %r4, %r2, 10;
  or.b32 %r4, %r4, %r1;
  shl.b32 %r5, %r3, 20;
  or.b32 v, %r4, %r5;
  ret;
}
.visible .entry ids(.param .u64 out, .param .u64 xs)
{
  .reg .b32 %r<16>;
  .reg .b64 %rd<8>;
  call (%r7), packed, ();
  mov.u32 %r1, %tid.x;
  and.b32 %r2, %r7, 1047552;
  shr.u32 %r2, %r2, 10;
  shr.u32 %r3, %r7, 20;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %ntid.y;
  mad.lo.s32 %r6, %r3, %r5, %r2;
  mad.lo.s32 %r6, %r6, %r4, %r1;
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r6, 4;
  add.u64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r7;
  ld.param.u64 %rd4, [xs];
  add.u64 %rd5, %rd4, %rd2;
  st.global.u32 [%rd5], %r1;
  ret;
}
"""
SHAPES = [(96, 1, 1), (7, 5, 1), (3, 4, 5), (32, 2, 3), (33, 3, 2), (1, 1, 40), (16, 16, 1), (5, 1, 9)]


def _expected(block: tuple[int, int, int]) -> np.ndarray:
    bx, by, bz = block
    z, y, x = np.unravel_index(np.arange(bx * by * bz), (bz, by, bx))
    return (x | y << 10 | z << 20).astype(np.uint32)


# the three schedules of cpu/block_runner.py: no barriers, lockstep rounds, the general one (two ids)
@pytest.mark.parametrize("barrier", ["", "bar.sync 0;", "bar.sync 0; bar.sync 1;"], ids=["none", "lockstep", "general"])
@pytest.mark.parametrize("block", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_every_thread_reads_its_tid(block: tuple[int, int, int], barrier: str) -> None:
    threads = int(np.prod(block))
    module = compile(KERNEL.replace("BARRIER", barrier))
    out = np.full(threads, 0xFFFFFFFF, np.uint32)
    module.launch("ids", (2, 1, 1), block, [out])
    np.testing.assert_array_equal(out, _expected(block))


@pytest.mark.parametrize("block", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_a_func_and_its_kernel_read_the_same_tid(block: tuple[int, int, int]) -> None:
    module = compile(FUNC)
    threads = int(np.prod(block))
    out, xs = np.full(threads, 0xFFFFFFFF, np.uint32), np.full(threads, 0xFFFFFFFF, np.uint32)
    module.launch("ids", (1, 1, 1), block, [out, xs])
    np.testing.assert_array_equal(out, _expected(block))
    np.testing.assert_array_equal(xs, _expected(block) & 1023)


def test_the_3d_case_is_one_call_of_the_shared_helper() -> None:
    """The kernel's IR calls zluda.tid_3d where the block is not 1-D and holds no division loop
    of its own (fails before: each kernel reading %tid carried the divisions and two per-lane
    loops); the shared helpers' module defines it."""
    text = CPU.lower_part(parse(KERNEL.replace("BARRIER", "")), "ids").text
    assert text.count('call void @"zluda.tid_3d"') == 1
    assert 'declare void @"zluda.tid_3d"' in text
    warp = text.split('@"ids.warp"(', 1)[1].split("\n}", 1)[0]
    assert "udiv" not in warp and "urem" not in warp and "divmod" not in warp
    defined = [line for line in helpers_ir(*host_layout()).splitlines() if line.startswith("define ")]
    assert any('@"zluda.tid_3d"(' in line for line in defined)
