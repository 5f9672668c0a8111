"""Loading native code into a fragmented address space (cuda-samples' dmmaTensorCoreGemm, whose
kernels load after gigabytes of device memory: the process aborted in LLVM's RuntimeDyld with
`isInt<32>(RealOffset)`, a PC-relative reference from code to its variables over 2 GiB). Here
holes of 64 KiB lie above 8 GiB of reserved address space, where a small section fits and the
module's 1 MiB variable does not."""

from __future__ import annotations

import subprocess
import sys
import textwrap

PTX = r""".version 7.0
.target sm_80
.address_size 64
.global .align 8 .b8 table[1048576];
.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<3>; .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 8;
  mov.u64 %rd3, table;
  add.s64 %rd4, %rd3, %rd2;
  mul.wide.u32 %rd5, %r1, 3;
  st.global.u64 [%rd4], %rd5;
  ld.global.u64 %rd6, [%rd4];
  add.s64 %rd7, %rd1, %rd2;
  st.global.u64 [%rd7], %rd6;
  ret;
}
"""


def test_module_loads_and_runs_with_its_sections_far_apart_in_free_address_space():
    code = textwrap.dedent(f"""
        import ctypes
        import numpy as np
        from zluda_py.compiler import compile
        libc = ctypes.CDLL(None)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        NORESERVE_ANON_PRIVATE = 0x4000 | 0x20 | 0x02
        small = [libc.mmap(None, 64 << 10, 0, NORESERVE_ANON_PRIVATE, -1, 0) for _ in range(64)]
        big = libc.mmap(None, 8 << 30, 0, NORESERVE_ANON_PRIVATE, -1, 0)  # PROT_NONE: address space only
        assert big != ctypes.c_void_p(-1).value
        for p in small:
            libc.munmap(p, 64 << 10)
        m = compile({PTX!r})
        out = np.zeros(64, np.uint64)
        m.launch("k", (1,), (64,), [out])
        assert (out == 3 * np.arange(64, dtype=np.uint64)).all(), out
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", f"rc {r.returncode}\n{r.stdout}{r.stderr[-2000:]}"
