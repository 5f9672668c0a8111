"""Per-kernel .shared layout: each kernel of a module reports (and gets) only the shared memory
it uses, with a helper .func's shared array at one offset valid under every kernel."""

from __future__ import annotations

import re

import numpy as np
import pytest

from zluda_py.compiler import compile

N_A, N_B, THREADS = 10240, 5120, 256
HELPER_BYTES = 256 * 4


def hoisted(ptx: str) -> str:
    """The PTX with every function-scope .shared declaration moved to module scope (the form
    nvcc gives modules such as Thrust's/CUB's)."""
    decls = re.findall(r"^\s*(\.shared [^;]*;)\n", ptx, flags=re.M)
    body = re.sub(r"^\s*\.shared [^;]*;\n", "", ptx, flags=re.M)
    first = re.search(r"^\.(visible |weak )?(func|entry)|^\.func", body, flags=re.M).start()
    return body[:first] + "\n".join(decls) + "\n\n" + body[first:]


@pytest.fixture(scope="module", params=["function_scope", "module_scope"])
def module(request, nvcc):
    ptx = nvcc(["shared_per_kernel.cu"], ["-ptx", "-arch=sm_80"], ".ptx").read_text()
    if request.param == "module_scope":
        ptx = hoisted(ptx)
        assert re.search(r"^\.shared \.align 4 \.b8 _ZZ8kernel_aE1a\[40960\];", ptx, flags=re.M)
    return compile(ptx)


def test_static_shared_is_per_kernel(module):
    # each kernel: its own 40 KB array plus the helper's 1 KB (any .func's arrays come first)
    assert module.kernels["kernel_a"].static_shared == HELPER_BYTES + N_A * 4
    assert module.kernels["kernel_b"].static_shared == HELPER_BYTES + N_B * 8
    assert module.kernels["kernel_dyn"].static_shared == HELPER_BYTES + 16


def test_kernels_with_large_shared_arrays_and_a_shared_helper(module):
    rng = np.random.default_rng(7)
    fin = rng.standard_normal(N_A).astype(np.float32)
    fout = np.zeros(N_A + THREADS, np.float32)
    module.launch("kernel_a", 2, THREADS, [fin, fout])
    np.testing.assert_array_equal(fout[:N_A], (2 * fin)[::-1])
    np.testing.assert_array_equal(fout[N_A:], 3 * np.arange(THREADS, dtype=np.float32) + 1)

    din = rng.standard_normal(N_B)
    dout = np.zeros(N_B + THREADS)
    module.launch("kernel_b", 3, THREADS, [din, dout])
    np.testing.assert_array_equal(dout[:N_B], (din + 0.5)[::-1])
    np.testing.assert_array_equal(dout[N_B:], 3 * (np.arange(THREADS) + 1000) + 1.0)


def test_dynamic_shared_follows_the_kernels_own_static_part(module):
    n = 64
    src = np.arange(n, dtype=np.int32) * 7 - 100
    out = np.zeros(n, np.int32)
    module.launch("kernel_dyn", 1, n, [src, out], shared_mem=n * 4)
    expected = src[::-1] * 10 + 100 * (np.arange(n) % 4 + 1)
    np.testing.assert_array_equal(out, expected)


RESERVED = """.version 8.0
.target sm_80
.address_size 64
.visible .entry reserved(.param .u64 out)
{
  .reg .b32 %r<12>; .reg .b64 %rd<6>; .reg .pred %p<2>;
  .shared .align 4 .b8 own[20];
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %reserved_smem_offset_begin;
  mov.u32 %r2, %reserved_smem_offset_end;
  mov.u32 %r3, %reserved_smem_offset_cap;
  mov.u32 %r4, %reserved_smem_offset_0;
  mov.u32 %r5, %reserved_smem_offset_1;
  mov.u32 %r6, %total_smem_size;
  st.shared.u32 [%r5], 1234;          // the region is ordinary shared memory of the block
  sub.u32 %r7, %r2, 4;
  st.shared.u32 [%r7], 99;            // its last word is inside the window
  ld.shared.u32 %r8, [%r5];
  ld.shared.u32 %r9, [%r7];
  cvt.u64.u32 %rd2, %r5;
  cvta.shared.u64 %rd3, %rd2;
  isspacep.shared %p1, %rd3;
  selp.u32 %r10, 1, 0, %p1;
  st.global.v4.u32 [%rd1], {%r1, %r2, %r3, %r4};
  st.global.v4.u32 [%rd1+16], {%r5, %r6, %r8, %r9};
  st.global.u32 [%rd1+32], %r10;
  ret;
}
"""


@pytest.mark.parametrize("dynamic", [0, 36])
def test_reserved_shared_memory_follows_the_kernels_own(dynamic):
    """nvcc's cooperative groups (sm_80, -G) keep state at %reserved_smem_offset_1: the region is
    1 KiB (the RESERVED_SHARED_MEMORY_PER_BLOCK attribute) after static + dynamic shared memory."""
    out = np.zeros(9, np.uint32)
    compile(RESERVED).launch("reserved", 1, 1, [out], shared_mem=dynamic)
    total = 32 + dynamic  # own[20] rounded up to the 16-byte start of dynamic shared memory
    begin = (total + 15) // 16 * 16
    assert out.tolist() == [begin, begin + 1024, 1024, begin, begin + 512, total, 1234, 99, 1]
