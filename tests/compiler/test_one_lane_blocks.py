"""A block only one lane of a warp can reach (`if (threadIdx.x == 0)`) has no converged clone;
should a whole warp reach it after all (a 2-D block with %ntid.x = 1, where every lane has
%tid.x = 0), the dispatcher runs its divergent copy and the results stay right. Expected values:
the kernel's C meaning, out[linear id] = 100 + tid.y where tid.x == 0, else 7."""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler import compile
from zluda_py.compiler.cpu.function import FunctionLowering

PTX = """.version 7.8
.target sm_80
.address_size 64
.visible .entry k(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %tid.y;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r4, 4;
    add.s64 %rd3, %rd1, %rd2;
    mov.u32 %r5, 7;
    setp.ne.s32 %p1, %r1, 0;
    @%p1 bra SKIP;
    add.s32 %r5, %r2, 100;
SKIP:
    st.global.u32 [%rd3], %r5;
    ret;
}
"""


@pytest.mark.parametrize("block", [(64, 1), (1, 64), (16, 4), (33, 2)])
def test_one_lane_block_with_any_block_shape(block):
    m = compile(PTX)
    x, y = block
    out = np.zeros(x * y, np.uint32)
    m.launch("k", 1, block, [out])
    tx, ty = np.meshgrid(np.arange(x), np.arange(y))
    np.testing.assert_array_equal(out, np.where(tx == 0, 100 + ty, 7).ravel())


def test_the_tid_x_zero_block_has_no_clone(monkeypatch):
    found = []
    one_lane = FunctionLowering._one_lane_blocks
    monkeypatch.setattr(FunctionLowering, "_one_lane_blocks", lambda self: found.append(one_lane(self)) or found[-1])
    compile(PTX)
    assert found == [{1}]  # block 1: `add.s32 %r5, %r2, 100` under tid.x == 0
