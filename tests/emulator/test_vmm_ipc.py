"""Virtual memory management and IPC memory handles on the HIP backend, over the emulator's
libamdhip64 stand-in (hipMemAddressReserve/hipMemCreate/hipMemMap/hipMemSetAccess..., hipIpc*):
a buffer grown from two physical allocations holds what is copied in across the seam, the
unmapped range faults for copies again, and a process cannot open its own IPC handle (CUDA's
documented CUDA_ERROR_INVALID_CONTEXT). Kernels on such memory, and a second process opening the
handle, are e2e_memory_api.cu's vmm and ipc sections (test_programs.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("tinygrad", reason="the emulator decodes with tinygrad (pip install '.[test]')")

SCRIPT = r"""
import ctypes
from ctypes import byref, c_size_t, c_ulonglong, c_void_p
cu = ctypes.CDLL("libcuda.so.1")
assert cu.cuInit(0) == 0
ctx = c_void_p()
assert cu.cuCtxCreate_v2(byref(ctx), 0, 0) == 0
MB2 = 2 << 20
base = c_ulonglong()
print("reserve", cu.cuMemAddressReserve(byref(base), c_size_t(2 * MB2), c_size_t(0), c_ulonglong(0), c_ulonglong(0)))
prop = (ctypes.c_ubyte * 32)()
prop[0] = 1  # CU_MEM_ALLOCATION_TYPE_PINNED; location: type device (offset 8), id 0
prop[8] = 1
handles = [c_ulonglong(), c_ulonglong()]
for k, h in enumerate(handles):
    print("create", cu.cuMemCreate(byref(h), c_size_t(MB2), prop, c_ulonglong(0)))
    print("map", cu.cuMemMap(c_ulonglong(base.value + k * MB2), c_size_t(MB2), c_size_t(0), h, c_ulonglong(0)))
access = (ctypes.c_int * 3)(1, 0, 3)  # location device 0, read-write
print("access", cu.cuMemSetAccess(base, c_size_t(2 * MB2), access, c_size_t(1)))
data = (ctypes.c_ubyte * 4096)(*[(i * 7 + 3) % 251 for i in range(4096)])
seam = c_ulonglong(base.value + MB2 - 2048)
print("htod", cu.cuMemcpyHtoD_v2(seam, data, c_size_t(4096)))
back = (ctypes.c_ubyte * 4096)()
print("dtoh", cu.cuMemcpyDtoH_v2(back, seam, c_size_t(4096)))
print("same", int(bytes(back) == bytes(data)))
print("unmap", cu.cuMemUnmap(c_ulonglong(base.value + MB2), c_size_t(MB2)))
print("dtoh-unmapped", int(cu.cuMemcpyDtoH_v2(back, seam, c_size_t(4096)) != 0))
for h in handles:
    print("release", cu.cuMemRelease(h))
print("unmap", cu.cuMemUnmap(base, c_size_t(MB2)))
print("free", cu.cuMemAddressFree(base, c_size_t(2 * MB2)))
ptr = c_ulonglong()
assert cu.cuMemAlloc_v2(byref(ptr), c_size_t(4096)) == 0
class Handle(ctypes.Structure):  # CUipcMemHandle, passed by value
    _fields_ = [("reserved", ctypes.c_ubyte * 64)]
ipc = Handle()
print("ipc", cu.cuIpcGetMemHandle(byref(ipc), ptr))
opened = c_ulonglong()
print("open-own", cu.cuIpcOpenMemHandle_v2(byref(opened), ipc, ctypes.c_uint(1)))
"""
EXPECTED = ("reserve 0 create 0 map 0 create 0 map 0 access 0 htod 0 dtoh 0 same 1 unmap 0 dtoh-unmapped 1 "
            "release 0 release 0 unmap 0 free 0 ipc 0 open-own 201").split()


def test_vmm_and_ipc_on_the_hip_backend(tmp_path) -> None:
    env = dict(os.environ, ZLUDA_HIP="emulator", ZLUDA_HIP_ARCH="gfx1100", CUDA_CACHE_PATH=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", "import sys; from zluda_py.cli import main; sys.exit(main())",
                        "run", "--backend", "hip", "--", sys.executable, "-c", SCRIPT],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.split() == EXPECTED, r.stdout + r.stderr


def test_a_rocm_without_the_vmm_calls_answers_not_supported() -> None:
    """ROCm releases before the VMM API lack hipMemCreate & co.: CUDA_ERROR_NOT_SUPPORTED naming
    the call, never an AttributeError (the driver reports a HipError's cu_result)."""
    from types import SimpleNamespace

    from zluda_py.backends.hip_runtime import Hip, HipError

    hip = Hip.__new__(Hip)  # a library object without the entry points
    hip.lib, hip.path = SimpleNamespace(), "libamdhip64.so (an old ROCm)"
    with pytest.raises(HipError, match="hipMemUnmap.*newer ROCm") as err:
        hip.mem_unmap(0x1000, 4096)
    assert err.value.cu_result == 801
