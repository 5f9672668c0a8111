"""A Python client of the driver API through ctypes: JIT-loads PTX text with
cuModuleLoadData and launches it with kernelParams and with `extra`."""

from __future__ import annotations

import subprocess
import sys

from tests.driver.conftest import shim_path

PTX = r""".version 7.5
.target sm_75
.address_size 64
.visible .entry fill(.param .u64 out, .param .u32 k)
{
  .reg .b32 %r<5>; .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r4, [k];
  cvta.to.global.u64 %rd2, %rd1;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r1, %r2, %r3, %r1;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd2, %rd3;
  add.s32 %r2, %r1, %r4;
  st.global.u32 [%rd4], %r2;
  ret;
}
"""

CLIENT = """
import ctypes, struct, sys
import numpy as np
from ctypes import byref, c_void_p, c_ulonglong, c_size_t, c_uint
lib = ctypes.CDLL(sys.argv[1])
ptx = sys.stdin.read().encode() + b"\\0"
def ok(rc):
    assert rc == 0, rc
ok(lib.cuInit(0))
ctx = c_void_p(); ok(lib.cuCtxCreate_v2(byref(ctx), 0, 0))
mod = c_void_p(); ok(lib.cuModuleLoadData(byref(mod), ptx))
fn = c_void_p(); ok(lib.cuModuleGetFunction(byref(fn), mod, b"fill"))
d = c_ulonglong(); ok(lib.cuMemAlloc_v2(byref(d), c_size_t(1024 * 4)))
out, k = c_ulonglong(d.value), c_uint(1000)
params = (c_void_p * 2)(ctypes.addressof(out), ctypes.addressof(k))
ok(lib.cuLaunchKernel(fn, 4, 1, 1, 256, 1, 1, 0, None, params, None))
h = np.zeros(1024, dtype=np.uint32)
ok(lib.cuMemcpyDtoH_v2(h.ctypes.data_as(c_void_p), d, c_size_t(h.nbytes)))
first = np.array_equal(h, np.arange(1024, dtype=np.uint32) + 1000)
buf = ctypes.create_string_buffer(struct.pack("<QI4x", d.value, 7))
size = c_size_t(16)
extra = (c_void_p * 5)(1, ctypes.addressof(buf), 2, ctypes.addressof(size), 0)
ok(lib.cuLaunchKernel(fn, 2, 1, 1, 512, 1, 1, 0, None, None, extra))
ok(lib.cuCtxSynchronize())
ok(lib.cuMemcpyDtoH_v2(h.ctypes.data_as(c_void_p), d, c_size_t(h.nbytes)))
second = np.array_equal(h, np.arange(1024, dtype=np.uint32) + 7)
print("blocks too big:", lib.cuLaunchKernel(fn, 1, 1, 1, 2048, 1, 1, 0, None, params, None))
print("ok" if first and second else "mismatch")
"""


def test_ctypes_client_jit_loads_ptx_and_launches():
    r = subprocess.run([sys.executable, "-c", CLIENT, str(shim_path())], input=PTX, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["blocks too big: 1", "ok"], r.stdout + r.stderr
