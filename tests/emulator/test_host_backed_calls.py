"""Virtual memory management and IPC memory handles map device memory as this process's host
pages, which only the CPU backend's device memory is. On the HIP backend (here over the
emulator) they answer CUDA_ERROR_NOT_SUPPORTED (801), never a mapping a kernel would
then fault on (e2e_memory_api.cu's vmm section once got an illegal address on the emulator)."""

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
ptr = c_ulonglong()
print("reserve", cu.cuMemAddressReserve(byref(ptr), c_size_t(2 << 20), c_size_t(0), c_ulonglong(0), c_ulonglong(0)))
prop = (ctypes.c_ubyte * 64)()
prop[0] = 1  # CU_MEM_ALLOCATION_TYPE_PINNED; location type device 0 below
prop[8] = 1
handle = c_ulonglong()
print("create", cu.cuMemCreate(byref(handle), c_size_t(2 << 20), prop, c_ulonglong(0)))
assert cu.cuMemAlloc_v2(byref(ptr), c_size_t(4096)) == 0
ipc = (ctypes.c_ubyte * 64)()
print("ipc", cu.cuIpcGetMemHandle(ipc, ptr))
"""


def test_vmm_and_ipc_memory_are_refused_on_the_hip_backend(tmp_path) -> None:
    env = dict(os.environ, ZLUDA_HIP="emulator", ZLUDA_HIP_ARCH="gfx1100", CUDA_CACHE_PATH=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", "import sys; from zluda_py.cli import main; sys.exit(main())",
                        "run", "--backend", "hip", "--", sys.executable, "-c", SCRIPT],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.split() == ["reserve", "801", "create", "801", "ipc", "801"], r.stdout + r.stderr
