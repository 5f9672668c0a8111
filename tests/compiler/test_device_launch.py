"""CUDA Dynamic Parallelism on the CPU target (compiler/cpu/device_launch.py): a kernel takes a
kernel's address and launches it through the device runtime's calls as nvcc's `-rdc` code
does; the child grid runs after its parent, its dim3 configuration read from the callers'
aggregate parameters."""

from __future__ import annotations

import numpy as np

from zluda_py.compiler import compile

# each of the parent's threads launches child<<<(2, 3, 1), (4, 1, 2)>>>(out + 48*tid, tid); the
# child writes 1000*tag + its linear thread number in the grid (48 threads)
PTX = r""".version 7.0
.target sm_80
.address_size 64
.extern .func (.param .b64 func_retval0) __cudaCDP2GetParameterBufferV2
(.param .b64 p0, .param .align 4 .b8 p1[12], .param .align 4 .b8 p2[12], .param .b32 p3);
.extern .func (.param .b32 func_retval0) __cudaCDP2LaunchDeviceV2(.param .b64 p0, .param .b64 p1);

.visible .entry child(.param .u64 out, .param .u32 tag)
{
  .reg .b32 %r<12>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [tag];
  mov.u32 %r2, %ctaid.y; mov.u32 %r3, %nctaid.x; mov.u32 %r4, %ctaid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  mov.u32 %r6, %tid.z; mov.u32 %r7, %ntid.x; mov.u32 %r8, %tid.x;
  mad.lo.s32 %r9, %r6, %r7, %r8;
  mad.lo.s32 %r10, %r5, 8, %r9;
  mad.lo.s32 %r11, %r1, 1000, %r10;
  mul.wide.u32 %rd2, %r10, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r11;
  ret;
}

.visible .entry parent(.param .u64 out, .param .u64 codes)
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<10>;
  .reg .pred %p1;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 192;
  add.s64 %rd3, %rd1, %rd2;
  mov.u64 %rd4, child;
  {
  .param .b64 param0;
  st.param.b64 [param0+0], %rd4;
  .param .align 4 .b8 param1[12];
  st.param.b32 [param1+0], 2;
  st.param.b32 [param1+4], 3;
  st.param.b32 [param1+8], 1;
  .param .align 4 .b8 param2[12];
  st.param.b32 [param2+0], 4;
  st.param.b32 [param2+4], 1;
  st.param.b32 [param2+8], 2;
  .param .b32 param3;
  st.param.b32 [param3+0], 0;
  .param .b64 retval0;
  call.uni (retval0), __cudaCDP2GetParameterBufferV2, (param0, param1, param2, param3);
  ld.param.b64 %rd5, [retval0+0];
  }
  setp.eq.s64 %p1, %rd5, 0;
  @%p1 bra DONE;
  st.u64 [%rd5], %rd3;
  st.u32 [%rd5+8], %r1;
  {
  .param .b64 param0;
  st.param.b64 [param0+0], %rd5;
  .param .b64 param1;
  st.param.b64 [param1+0], 0;
  .param .b32 retval0;
  call.uni (retval0), __cudaCDP2LaunchDeviceV2, (param0, param1);
  ld.param.b32 %r2, [retval0+0];
  }
  ld.param.u64 %rd6, [codes];
  mul.wide.u32 %rd7, %r1, 4;
  add.s64 %rd8, %rd6, %rd7;
  st.global.u32 [%rd8], %r2;
DONE:
  ret;
}
"""


def test_kernels_launch_kernels_with_three_dimensional_configurations():
    m = compile(PTX)
    threads = 5
    out = np.full(threads * 48, -1, np.int32)
    codes = np.full(threads, -1, np.int32)
    m.launch("parent", (1,), (threads,), [out, codes])
    want = np.array([1000 * t + i for t in range(threads) for i in range(48)], np.int32)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(codes, np.zeros(threads, np.int32))  # cudaSuccess
