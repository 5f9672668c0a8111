"""Kernels on pageable host memory (issue 12): the CPU device reports
CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, so, as on NVIDIA with HMM, a kernel may load, store
and run atomics on any writable memory of the process, plain malloc included (cuda-samples'
systemWideAtomics); an address nothing maps stays 700."""

from __future__ import annotations

import pytest

from tests.driver.test_bad_arguments import run_case

# out[i] = 2 * in[i] + 1, then every thread adds in[i] to sum[0] and takes the max into sum[1]
PTX = r""".version 7.0
.target sm_60
.address_size 64
.visible .entry work(.param .u64 src, .param .u64 dst, .param .u64 sum, .param .u32 n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [dst];
  ld.param.u64 %rd3, [sum];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  setp.ge.u32 %p1, %r5, %r1;
  @%p1 bra DONE;
  mul.wide.u32 %rd4, %r5, 4;
  add.s64 %rd5, %rd1, %rd4;
  ld.global.u32 %r6, [%rd5];
  mad.lo.s32 %r7, %r6, 2, 1;
  add.s64 %rd6, %rd2, %rd4;
  st.global.u32 [%rd6], %r7;
  atom.global.add.u32 %r7, [%rd3], %r6;
  atom.global.max.u32 %r7, [%rd3+4], %r6;
DONE:
  ret;
}
"""


@pytest.mark.parametrize("native", ["1", "0"])
def test_kernel_on_malloc_memory_and_an_unmapped_address(native):
    ptx = PTX.replace("\n", "\\n")
    r = run_case(f"""
        libc.malloc.restype = c
        libc.malloc.argtypes = [ctypes.c_size_t]
        n = 1000
        src, dst, sums = (libc.malloc(4 * n), libc.malloc(4 * n), libc.malloc(8))
        values = [(i * 7919) % 1013 for i in range(n)]
        (ctypes.c_uint32 * n).from_address(src)[:] = values
        (ctypes.c_uint32 * 2).from_address(sums)[:] = [5, 0]
        mod, fn = c(), c()
        assert cu.cuModuleLoadData(ctypes.byref(mod), b"{ptx}") == 0
        assert cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"work") == 0

        def launch(a, b, s):
            args = [ctypes.c_uint64(a), ctypes.c_uint64(b), ctypes.c_uint64(s), ctypes.c_uint32(n)]
            params = (c * 4)(*(ctypes.cast(ctypes.pointer(x), c) for x in args))
            return cu.cuLaunchKernel(fn, 8, 1, 1, 128, 1, 1, 0, None, params, None), cu.cuCtxSynchronize()

        print(*launch(src, dst, sums))
        print(list((ctypes.c_uint32 * n).from_address(dst)) == [2 * v + 1 for v in values],
              list((ctypes.c_uint32 * 2).from_address(sums)) == [5 + sum(values), max(values)])
        print(*launch(src, unmapped(1 << 20), sums))  # stores where nothing is mapped
        """, env={**__import__("os").environ, "ZLUDA_NATIVE_LAUNCH": native})
    assert r.stdout.split() == ["0", "0", "True", "True", "0", "700"], r.stdout + r.stderr
