"""The per-thread stack (CU_LIMIT_STACK_SIZE) as NVIDIA's driver documents it for cuCtxSetLimit:
"The driver automatically increases the per-thread stack size for each kernel launch as needed.
This size isn't reset back to the original value after each launch." A kernel whose own frame
plus its deepest non-recursive call chain is larger than the limit therefore runs (nvcc -G
builds inline many frames into a kernel), and cuCtxGetLimit reports the grown size afterwards;
recursion deeper than the limit allows faults with 719, and raising the limit lets it through.

Each case runs in its own process: a 719 leaves the context unusable, as on NVIDIA's driver."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.driver.conftest import CHILD_SETUP, shim_path

# kernel `chain`: a 1000-byte frame calling f (600 bytes) calling g (400 bytes), no recursion:
# 2000 bytes with 16-byte aligned frames. Kernel `recurse`: r(n) has a 512-byte frame and
# calls r(n - 1) until n is 0, so a depth of n needs about n * 512 bytes besides the kernel's.
PTX = r"""
.version 7.0
.target sm_80
.address_size 64

.func (.param .u32 ret) g(.param .u32 x)
{
  .local .align 4 .b8 buf[400];
  .reg .b32 %r<4>;
  .reg .b64 %rd<2>;
  ld.param.u32 %r1, [x];
  mov.u64 %rd1, buf;
  st.local.u32 [%rd1+396], %r1;
  ld.local.u32 %r2, [%rd1+396];
  add.u32 %r3, %r2, 3;
  st.param.u32 [ret], %r3;
  ret;
}

.func (.param .u32 ret) f(.param .u32 x)
{
  .local .align 4 .b8 buf[600];
  .reg .b32 %r<5>;
  .reg .b64 %rd<2>;
  ld.param.u32 %r1, [x];
  mov.u64 %rd1, buf;
  st.local.u32 [%rd1+596], %r1;
  ld.local.u32 %r2, [%rd1+596];
  { .param .u32 a; .param .u32 b; st.param.u32 [a], %r2; call (b), g, (a); ld.param.u32 %r3, [b]; }
  mul.lo.u32 %r4, %r3, 2;
  st.param.u32 [ret], %r4;
  ret;
}

.visible .entry chain(.param .u64 out)
{
  .local .align 4 .b8 buf[1000];
  .reg .b32 %r<4>;
  .reg .b64 %rd<5>;
  mov.u32 %r1, %tid.x;
  mov.u64 %rd1, buf;
  st.local.u32 [%rd1+996], %r1;
  ld.local.u32 %r2, [%rd1+996];
  { .param .u32 a; .param .u32 b; st.param.u32 [a], %r2; call (b), f, (a); ld.param.u32 %r3, [b]; }
  ld.param.u64 %rd2, [out];
  mul.wide.u32 %rd3, %r1, 4;
  add.u64 %rd4, %rd2, %rd3;
  st.global.u32 [%rd4], %r3;
  ret;
}

.func (.param .u32 ret) r(.param .u32 n)
{
  .local .align 4 .b8 buf[512];
  .reg .pred %p;
  .reg .b32 %r<5>;
  .reg .b64 %rd<2>;
  ld.param.u32 %r1, [n];
  mov.u64 %rd1, buf;
  st.local.u32 [%rd1+508], %r1;
  setp.eq.u32 %p, %r1, 0;
  mov.u32 %r3, 0;
  @%p bra done;
  sub.u32 %r2, %r1, 1;
  { .param .u32 a; .param .u32 b; st.param.u32 [a], %r2; call (b), r, (a); ld.param.u32 %r3, [b]; }
done:
  ld.local.u32 %r4, [%rd1+508];
  add.u32 %r3, %r3, %r4;
  st.param.u32 [ret], %r3;
  ret;
}

.visible .entry recurse(.param .u64 out, .param .u32 depth)
{
  .reg .b32 %r<3>;
  .reg .b64 %rd<2>;
  ld.param.u32 %r1, [depth];
  { .param .u32 a; .param .u32 b; st.param.u32 [a], %r1; call (b), r, (a); ld.param.u32 %r2, [b]; }
  ld.param.u64 %rd1, [out];
  st.global.u32 [%rd1], %r2;
  ret;
}
"""

CHILD = r"""
import ctypes, sys
from ctypes import byref, c_size_t, c_uint, c_ulonglong, c_void_p
cu = ctypes.CDLL(sys.argv[1])
case = sys.argv[2]
""" + CHILD_SETUP + r"""def limit():
    v = c_size_t()
    ok(cu.cuCtxGetLimit(byref(v), 0))
    return v.value
out = c_ulonglong()
ok(cu.cuMemAlloc_v2(byref(out), 256))
fn = c_void_p()
print("limit_before", limit())
if case == "chain":
    ok(cu.cuModuleGetFunction(byref(fn), mod, b"chain"))
    params = (c_void_p * 1)(ctypes.cast(byref(out), c_void_p))
    ok(cu.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, None, params, None))
    print("sync", cu.cuCtxSynchronize())
    host = (c_uint * 32)()
    ok(cu.cuMemcpyDtoH_v2(host, out, 128))
    print("values", list(host))
    print("limit_after", limit())
else:
    if case.startswith("raised"):
        ok(cu.cuCtxSetLimit(0, c_size_t(16384)))
    depth = c_uint(int(case.split("-")[1]))
    ok(cu.cuModuleGetFunction(byref(fn), mod, b"recurse"))
    params = (c_void_p * 2)(ctypes.cast(byref(out), c_void_p), ctypes.cast(byref(depth), c_void_p))
    ok(cu.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, None, params, None))
    print("sync", cu.cuCtxSynchronize())
    if case.startswith("raised"):
        host = c_uint()
        ok(cu.cuMemcpyDtoH_v2(byref(host), out, 4))
        print("value", host.value)
        print("limit_after", limit())  # after a 719 the context is unusable
"""


def _run(case: str, **env: str) -> tuple[dict[str, str], str]:
    """The child's printed values and its stderr; `env` picks another backend (the emulator's tests)."""
    r = subprocess.run([sys.executable, "-c", CHILD, str(shim_path()), case], input=PTX.encode(),
                       capture_output=True, timeout=300, env=dict(os.environ, **env))
    out = r.stdout.decode()
    assert r.returncode == 0, out + r.stderr.decode()
    return dict(line.split(" ", 1) for line in out.splitlines()), r.stderr.decode()


def test_a_call_chain_deeper_than_the_limit_runs_and_the_limit_grows() -> None:
    got, _ = _run("chain")
    assert got["limit_before"] == "1024"
    assert got["sync"] == "0"
    assert got["values"] == str([(t + 3) * 2 for t in range(32)])
    assert int(got["limit_after"]) >= 2000  # 1000 + 600 + 400 bytes of frames, at least


def test_recursion_past_the_limit_faults_naming_the_stack() -> None:
    got, err = _run("default-8")  # 8 frames of 512 bytes in a 1024-byte stack
    assert got["sync"] == "719"
    assert "per-thread stack" in err and "cudaLimitStackSize" in err, err


def test_raising_the_limit_lets_the_recursion_through() -> None:
    got, _ = _run("raised-8")
    assert got["limit_before"] == "1024"
    assert got["sync"] == "0"
    assert got["value"] == str(sum(range(9)))  # r(n) = n + r(n - 1), r(0) = 0
    assert got["limit_after"] == "16384"
