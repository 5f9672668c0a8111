"""Kernel parameters and the launch shape are loaded once per warp function (`kernel_param`,
`LAUNCH_CONSTANT`), marked invariant so that LLVM hoists them out of the block runner's loops.

They are invariant within one launch only: the same compiled kernel launched again with other
parameters, pointers or block shapes must see the new values, in every block where it reads
them (before and after divergence, in a loop). Expected values come from numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler import compile

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"

# y[i] = a * x[i] + y[i] for i < n, i the linear thread index of a 1-D or 2-D block, then in a
# loop of `reps` iterations y[i] += b (params read after a divergent branch and inside a loop)
KERNEL = HEAD + """
.visible .entry axpb(.param .u32 n, .param .f32 a, .param .u64 x, .param .u64 y, .param .align 8 .b8 pair[8])
{
  .reg .pred %p<3>;
  .reg .f32 %f<6>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<8>;
  ld.param.u32 %r2, [n];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mov.u32 %r6, %tid.y;
  mov.u32 %r7, %ntid.y;
  mul.lo.s32 %r8, %r4, %r7;
  mad.lo.s32 %r9, %r6, %r4, %r5;
  mad.lo.s32 %r1, %r3, %r8, %r9;
  setp.ge.s32 %p1, %r1, %r2;
  @%p1 bra DONE;
  ld.param.f32 %f1, [a];
  ld.param.u64 %rd1, [x];
  ld.param.u64 %rd2, [y];
  mul.wide.s32 %rd3, %r1, 4;
  add.s64 %rd4, %rd1, %rd3;
  add.s64 %rd5, %rd2, %rd3;
  ld.global.f32 %f2, [%rd4];
  ld.global.f32 %f3, [%rd5];
  fma.rn.f32 %f4, %f2, %f1, %f3;
  ld.param.v2.u32 {%r10, %r11}, [pair];
  mov.b32 %f5, %r10;
LOOP:
  setp.eq.u32 %p2, %r11, 0;
  @%p2 bra STORE;
  add.f32 %f4, %f4, %f5;
  sub.u32 %r11, %r11, 1;
  bra.uni LOOP;
STORE:
  st.global.f32 [%rd5], %f4;
DONE:
  ret;
}
"""


@pytest.mark.parametrize("order", [((256,), (16, 4), (100,)), ((8, 8), (256,), (33, 2))])
def test_parameters_and_block_shape_change_between_launches(order) -> None:
    module = compile(KERNEL)
    rng = np.random.default_rng(0)
    for k, block in enumerate(order):
        threads = int(np.prod(block))
        n = 1000 + 37 * k
        a, b, reps = np.float32(2.0 ** (k - 1)), np.float32(0.25 * (k + 1)), 3 - k % 2
        x = rng.standard_normal(n + 64).astype(np.float32)
        y = rng.standard_normal(n + 64).astype(np.float32)
        expected = y.copy()
        head = a * x[:n] + y[:n]  # a is a power of two: a * x is exact, as in the fma
        for _ in range(reps):
            head = head + b
        expected[:n] = head
        pair = np.uint64(int(b.view(np.uint32)) | reps << 32)  # .v2.u32 {bits of b, reps}
        grid = ((n + threads - 1) // threads,)
        module.launch("axpb", grid, block, [np.int32(n), a, x, y, pair])
        np.testing.assert_array_equal(y, expected)


# PTX gives kernels no store to their parameters, but this compiler accepts `st.param` to one:
# a later `ld.param` must read what was stored, not a copy loaded before
STORES_PARAM = HEAD + """
.visible .entry stores_param(.param .u64 out, .param .u32 v)
{
  .reg .b32 %r<3>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [v];
  add.u32 %r2, %r1, 5;
  st.param.u32 [v], %r2;
  ld.param.u32 %r1, [v];
  st.global.u32 [%rd1], %r1;
  ret;
}
"""


def test_a_stored_parameter_is_read_back() -> None:
    out = np.zeros(1, np.uint32)
    compile(STORES_PARAM).launch("stores_param", (1,), (1,), [out, np.uint32(7)])
    assert out[0] == 12
