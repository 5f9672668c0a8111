"""Driver calls through our libcuda.so.1 with ZLUDA_BACKEND=hip, run by test_hip_fake.py in a
child process (the backend is chosen once per process) against the fake libamdhip64.so.
Prints one JSON object: each call's CUresult and the bytes read back."""

from __future__ import annotations

import ctypes
import json
import sys

from zluda_py.cli.run_cmd import SHIM_DIR

PTX = b"""
.version 8.0
.target sm_80
.address_size 64
.global .u32 counter = 7;
.visible .entry scale(.param .u64 p, .param .u32 n, .param .f64 x)
{
  .reg .b32 %r<3>; .reg .b64 %rd<4>; .reg .f64 %fd<3>;
  ld.param.u64 %rd1, [p]; ld.param.u32 %r1, [n]; ld.param.f64 %fd1, [x];
  cvt.rn.f64.u32 %fd2, %r1; mul.f64 %fd2, %fd2, %fd1;
  st.global.f64 [%rd1], %fd2;
  ret;
}
.visible .entry fault() { ret; }
"""

cu = ctypes.CDLL(str(SHIM_DIR / "libcuda.so.1"))
out: dict = {}


def call(name: str, *args) -> int:
    rc = getattr(cu, name)(*args)
    out.setdefault("rc", {}).setdefault(name, []).append(rc)
    return rc


def main(step: str) -> None:
    if call("cuInit", 0) != 0:
        return
    ctx, dev = ctypes.c_void_p(), ctypes.c_uint64()
    call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), 0)
    call("cuCtxSetCurrent", ctx)
    if step == "memory":
        memory(dev)
    elif step == "launch":
        launch(dev)
    elif step == "devices":
        device_properties()
    elif step == "streams":
        streams()


def memory(d: ctypes.c_uint64) -> None:
    call("cuMemAlloc_v2", ctypes.byref(d), ctypes.c_size_t(64))
    call("cuMemsetD32_v2", d, ctypes.c_uint(0xDEADBEEF), ctypes.c_size_t(16))
    call("cuMemsetD16_v2", ctypes.c_uint64(d.value + 8), ctypes.c_ushort(0x1234), ctypes.c_size_t(5))
    call("cuMemsetD8_v2", ctypes.c_uint64(d.value + 30), ctypes.c_ubyte(0xA5), ctypes.c_size_t(3))
    host = ctypes.create_string_buffer(64)
    call("cuMemcpyDtoH_v2", host, d, ctypes.c_size_t(64))
    out["after_sets"] = host.raw.hex()
    # host -> device from pinned memory, device -> device, then back
    pinned = ctypes.c_void_p()
    call("cuMemAllocHost_v2", ctypes.byref(pinned), ctypes.c_size_t(16))
    ctypes.memmove(pinned, bytes(range(16)), 16)
    call("cuMemcpyHtoD_v2", d, pinned, ctypes.c_size_t(16))
    call("cuMemcpyDtoD_v2", ctypes.c_uint64(d.value + 48), d, ctypes.c_size_t(16))
    call("cuMemcpyDtoH_v2", host, d, ctypes.c_size_t(64))
    out["after_copies"] = host.raw.hex()
    call("cuMemFreeHost", pinned)
    managed = ctypes.c_uint64()
    call("cuMemAllocManaged", ctypes.byref(managed), ctypes.c_size_t(32), 1)
    call("cuMemFree_v2", managed)
    registered = ctypes.create_string_buffer(4096)
    call("cuMemHostRegister_v2", registered, ctypes.c_size_t(4096), 0)
    call("cuMemHostUnregister", registered)
    call("cuMemFree_v2", d)
    call("cuMemFree_v2", d)  # a second free: CUDA_ERROR_INVALID_VALUE
    huge = ctypes.c_uint64()  # more than the fake's $FAKE_HIP_MEMORY: hipErrorOutOfMemory
    call("cuMemAlloc_v2", ctypes.byref(huge), ctypes.c_size_t(1 << 20))


def device_properties() -> None:
    count = ctypes.c_int()
    call("cuDeviceGetCount", ctypes.byref(count))
    out["count"] = count.value
    for dev in range(count.value):
        name = ctypes.create_string_buffer(64)
        call("cuDeviceGetName", name, 64, dev)
        total = ctypes.c_size_t()
        call("cuDeviceTotalMem_v2", ctypes.byref(total), dev)
        attributes = {}
        for number in (16, 10, 75, 111):  # SM count, warp size, CC major, reserved shared memory
            v = ctypes.c_int()
            call("cuDeviceGetAttribute", ctypes.byref(v), number, dev)
            attributes[number] = v.value
        out.setdefault("devices", []).append([name.value.decode(), total.value, attributes])
    for dev in range(count.value):  # contexts: work runs on device 0 only, so others are refused
        ctx = ctypes.c_void_p()
        out.setdefault("retain", []).append(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
        out.setdefault("create", []).append(cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev))


def streams() -> None:
    """A kernel and a copy back on each of two non-blocking streams, then one on the legacy
    stream; kernel n (its argument) stores n * 2.5."""
    module, fn = ctypes.c_void_p(), ctypes.c_void_p()
    call("cuModuleLoadData", ctypes.byref(module), ctypes.c_char_p(PTX))
    call("cuModuleGetFunction", ctypes.byref(fn), module, b"scale")
    handles = [ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()]  # the third stays NULL: the legacy stream
    for h in handles[:2]:
        call("cuStreamCreate", ctypes.byref(h), 1)  # CU_STREAM_NON_BLOCKING
    pinned = ctypes.c_void_p()
    call("cuMemAllocHost_v2", ctypes.byref(pinned), ctypes.c_size_t(24))
    keep = []
    for n, h in enumerate(handles, start=1):
        d = ctypes.c_uint64()
        call("cuMemAlloc_v2", ctypes.byref(d), ctypes.c_size_t(16))
        count, x = ctypes.c_uint32(n), ctypes.c_double(2.5)
        params = (ctypes.c_void_p * 3)(ctypes.addressof(d), ctypes.addressof(count), ctypes.addressof(x))
        keep += [d, count, x, params]
        call("cuLaunchKernel", fn, 1, 1, 1, 32, 1, 1, 0, h, params, None)
        # kernels do not run in the fake: store what this one would, then copy it back on the stream
        # (16 bytes, so that the log tells it from the 8-byte copies back)
        call("cuMemcpyHtoD_v2", d, (ctypes.c_double * 2)(n * 2.5), ctypes.c_size_t(16))
        call("cuMemcpyDtoHAsync_v2", ctypes.c_void_p(pinned.value + 8 * (n - 1)), d, ctypes.c_size_t(8), h)
    for h in handles:
        call("cuStreamSynchronize", h)
    out["results"] = list((ctypes.c_double * 3).from_address(pinned.value))


def launch(d: ctypes.c_uint64) -> None:
    module, fn = ctypes.c_void_p(), ctypes.c_void_p()
    call("cuModuleLoadData", ctypes.byref(module), ctypes.c_char_p(PTX))
    call("cuModuleGetFunction", ctypes.byref(fn), module, b"scale")
    call("cuModuleGetFunction", ctypes.byref(ctypes.c_void_p()), module, b"missing")
    call("cuMemAlloc_v2", ctypes.byref(d), ctypes.c_size_t(8))
    n, x = ctypes.c_uint32(3), ctypes.c_double(2.5)
    params = (ctypes.c_void_p * 3)(ctypes.addressof(d), ctypes.addressof(n), ctypes.addressof(x))
    call("cuLaunchKernel", fn, 4, 2, 1, 32, 2, 1, 128, None, params, None)
    call("cuCtxSynchronize")
    out["device_pointer"] = d.value
    where, size = ctypes.c_uint64(), ctypes.c_size_t()
    call("cuModuleGetGlobal_v2", ctypes.byref(where), ctypes.byref(size), module, b"counter")
    value = ctypes.c_uint32()
    call("cuMemcpyDtoH_v2", ctypes.byref(value), where, ctypes.c_size_t(4))
    out["counter"] = [size.value, value.value]
    # a second load is a module of its own, with its own variables; unloading it keeps the first's
    second = ctypes.c_void_p()
    call("cuModuleLoadData", ctypes.byref(second), ctypes.c_char_p(PTX))
    other = ctypes.c_uint64()
    call("cuModuleGetGlobal_v2", ctypes.byref(other), None, second, b"counter")
    out["distinct_globals"] = other.value != where.value
    call("cuModuleUnload", second)
    call("cuMemcpyDtoH_v2", ctypes.byref(value), where, ctypes.c_size_t(4))
    # the fake reports hipErrorIllegalAddress for this kernel at the next synchronize
    call("cuModuleGetFunction", ctypes.byref(fn), module, b"fault")
    call("cuLaunchKernel", fn, 1, 1, 1, 1, 1, 1, 0, None, None, None)
    call("cuCtxSynchronize")


if __name__ == "__main__":
    main(sys.argv[1])
    print(json.dumps(out))
