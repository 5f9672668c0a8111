"""Driver entry points without kernels, called through libcuda.so.1 with ctypes; expected
values come from the CUDA documentation and numpy, never from the driver itself."""

from __future__ import annotations

import ctypes
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from zluda_py import curesult as errors

c_void_p, byref, c_int, c_size_t, c_ulonglong = ctypes.c_void_p, ctypes.byref, ctypes.c_int, ctypes.c_size_t, ctypes.c_ulonglong

CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_DEVICE, CUDA_ERROR_INVALID_HANDLE = 1, 101, 400
CUDA_ERROR_NOT_READY, CUDA_ERROR_NOT_FOUND, CUDA_ERROR_NOT_SUPPORTED = 600, 500, 801


def alloc(cu, size: int) -> int:
    p = c_ulonglong()
    cu.ok(cu.cuMemAlloc_v2(byref(p), c_size_t(size)))
    return p.value


def test_versions_and_device(cu):
    v = c_int()
    cu.ok(cu.cuDriverGetVersion(byref(v)))
    assert v.value >= 13000
    n = c_int()
    cu.ok(cu.cuDeviceGetCount(byref(n)))
    assert n.value == 1
    name = ctypes.create_string_buffer(256)
    cu.ok(cu.cuDeviceGetName(name, 256, 0))
    assert name.value.startswith(b"zluda-py CPU")
    attr = c_int()
    for number, expected in ((10, 32), (75, 8), (76, 6), (1, 1024), (2, 1024), (4, 64), (8, 48 * 1024)):
        cu.ok(cu.cuDeviceGetAttribute(byref(attr), number, 0))
        assert attr.value == expected, number
    assert cu.cuDeviceGetAttribute(byref(attr), 100000, 0) == CUDA_ERROR_INVALID_VALUE
    assert cu.cuDeviceGetName(name, 256, 7) == CUDA_ERROR_INVALID_DEVICE
    dev = c_int()
    assert cu.cuDeviceGet(byref(dev), 1) == CUDA_ERROR_INVALID_DEVICE


@pytest.mark.parametrize("code", errors.all_codes())
def test_every_error_has_name_and_string(cu, code):
    s = ctypes.c_char_p()
    cu.ok(cu.cuGetErrorName(code, byref(s)))
    assert s.value.decode() == errors.error_name(code) and s.value.startswith(b"CUDA_")
    cu.ok(cu.cuGetErrorString(code, byref(s)))
    assert s.value


def test_unknown_error_code_is_invalid_value(cu):
    s = ctypes.c_char_p()
    assert cu.cuGetErrorName(12345, byref(s)) == CUDA_ERROR_INVALID_VALUE


def test_get_proc_address_versions_and_per_thread_variants(cu):
    fn, status = c_void_p(), c_int()

    def look(name, version, flags=0):
        rc = cu.cuGetProcAddress_v2(name, byref(fn), version, c_ulonglong(flags), byref(status))
        return rc, status.value, fn.value

    sym = lambda s: ctypes.cast(getattr(cu.lib, s), c_void_p).value
    assert look(b"cuCtxGetDevice", 13000)[2] == sym("cuCtxGetDevice_v2")
    assert look(b"cuCtxGetDevice", 12000)[2] == sym("cuCtxGetDevice")
    assert look(b"cuMemcpyHtoD", 3020)[2] == sym("cuMemcpyHtoD_v2")
    assert look(b"cuMemcpyHtoD", 7000, 2)[2] == sym("cuMemcpyHtoD_v2_ptds")
    assert look(b"cuLaunchKernel", 7000, 2)[2] == sym("cuLaunchKernel_ptsz")
    assert look(b"cuMemAlloc", 2000)[1] == 2  # VERSION_NOT_SUFFICIENT: the 32-bit ABI is gone
    assert look(b"cuNoSuchFunction", 13000)[:2] == (CUDA_ERROR_NOT_FOUND, 1)


# What cudart 13 asked cuGetProcAddress for, logged on NVIDIA's stack (the project's shared/ folder
# sits beside the repository)
CUDART_REQUESTS = Path(__file__).resolve().parents[3] / "shared" / "reference" / "cudart13_getprocaddress_requests.txt"


@pytest.mark.skipif(not CUDART_REQUESTS.exists(), reason=f"{CUDART_REQUESTS} (the shared reference logs) is not here")
def test_every_name_cudart_requests_resolves(cu):
    lines = [l.split() for l in CUDART_REQUESTS.read_text().splitlines() if l and not l.startswith("#")]
    assert len(lines) > 100
    fn, status = c_void_p(), c_int()
    for name, version, flags in ((l[0], int(l[1]), int(l[2])) for l in lines):
        assert cu.cuGetProcAddress_v2(name.encode(), byref(fn), version, c_ulonglong(flags), byref(status)) == 0, name
        assert fn.value, name


def test_stubs_say_not_supported(cu):
    fn, status = c_void_p(), c_int()
    cu.ok(cu.cuGetProcAddress_v2(b"cuImportExternalSemaphore", byref(fn), 12000, c_ulonglong(0), byref(status)))
    assert ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p)(fn.value)(None, None) == CUDA_ERROR_NOT_SUPPORTED


def test_export_tables(cu):
    table = c_void_p()
    uuid = bytes.fromhex("d4082055bde6704b8d34ba123c66e1f2")
    cu.ok(cu.cuGetExportTable(byref(table), uuid))
    slots = ctypes.cast(table, ctypes.POINTER(c_void_p))
    out = (ctypes.c_ubyte * 16)()
    check = ctypes.CFUNCTYPE(c_int, ctypes.c_uint, c_ulonglong, ctypes.c_void_p)(slots[1])
    cu.ok(check(13000, 0, out))
    assert bytes(out) == bytes.fromhex("5c67cb031c184133e8d14c1faa83d38e")
    assert cu.cuGetExportTable(byref(table), b"\0" * 16) == CUDA_ERROR_NOT_FOUND


def test_context_local_storage_get_fails_until_put(cu):
    table = c_void_p()
    cu.ok(cu.cuGetExportTable(byref(table), bytes.fromhex("c693336e1121df11a8c368f355d89593")))
    slots = ctypes.cast(table, ctypes.POINTER(c_void_p))
    put = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, c_void_p, c_void_p)(slots[0])
    delete = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p)(slots[1])
    get = ctypes.CFUNCTYPE(c_int, ctypes.POINTER(c_void_p), c_void_p, c_void_p)(slots[2])
    value, key = c_void_p(), c_void_p(0x1234)
    assert get(byref(value), None, key) != 0
    cu.ok(put(None, key, c_void_p(0xBEEF), None))
    cu.ok(get(byref(value), None, key))
    assert value.value == 0xBEEF
    cu.ok(delete(None, key))
    assert get(byref(value), None, key) != 0


def test_memcpy_memset_roundtrip(cu):
    n = 1000
    d = alloc(cu, n * 4)
    host = np.arange(n, dtype=np.uint32)
    cu.ok(cu.cuMemcpyHtoD_v2(c_ulonglong(d), host.ctypes.data_as(c_void_p), c_size_t(host.nbytes)))
    cu.ok(cu.cuMemsetD32_v2(c_ulonglong(d + 40), ctypes.c_uint(0xDEADBEEF), c_size_t(10)))
    cu.ok(cu.cuMemsetD16_v2(c_ulonglong(d + 400), ctypes.c_ushort(0xABCD), c_size_t(4)))
    out = np.zeros(n, dtype=np.uint32)
    cu.ok(cu.cuMemcpyDtoH_v2(out.ctypes.data_as(c_void_p), c_ulonglong(d), c_size_t(out.nbytes)))
    expected = host.copy()
    expected[10:20] = 0xDEADBEEF
    expected[100:102] = 0xABCDABCD
    np.testing.assert_array_equal(out, expected)
    base, size = c_ulonglong(), c_size_t()
    cu.ok(cu.cuMemGetAddressRange_v2(byref(base), byref(size), c_ulonglong(d + 123)))
    assert (base.value, size.value) == (d, n * 4)
    cu.ok(cu.cuMemFree_v2(c_ulonglong(d)))


def test_memcpy2d_with_pitches(cu):
    class MEMCPY2D(ctypes.Structure):
        _fields_ = [("srcXInBytes", c_size_t), ("srcY", c_size_t), ("srcMemoryType", c_int), ("srcHost", c_void_p),
                    ("srcDevice", c_ulonglong), ("srcArray", c_void_p), ("srcPitch", c_size_t),
                    ("dstXInBytes", c_size_t), ("dstY", c_size_t), ("dstMemoryType", c_int), ("dstHost", c_void_p),
                    ("dstDevice", c_ulonglong), ("dstArray", c_void_p), ("dstPitch", c_size_t),
                    ("WidthInBytes", c_size_t), ("Height", c_size_t)]
    src = np.arange(8 * 10, dtype=np.uint8).reshape(8, 10)
    pitch = c_size_t()
    dptr = c_ulonglong()
    cu.ok(cu.cuMemAllocPitch_v2(byref(dptr), byref(pitch), c_size_t(6), c_size_t(8), 4))
    p = MEMCPY2D(srcXInBytes=2, srcMemoryType=1, srcHost=src.ctypes.data, srcPitch=10,
                 dstMemoryType=2, dstDevice=dptr.value, dstPitch=pitch.value, WidthInBytes=6, Height=8)
    cu.ok(cu.cuMemcpy2D_v2(byref(p)))
    out = np.zeros((8, 6), dtype=np.uint8)
    back = MEMCPY2D(srcMemoryType=2, srcDevice=dptr.value, srcPitch=pitch.value, dstMemoryType=1,
                    dstHost=out.ctypes.data, dstPitch=6, WidthInBytes=6, Height=8)
    cu.ok(cu.cuMemcpy2D_v2(byref(back)))
    np.testing.assert_array_equal(out, src[:, 2:8])


def test_error_paths_leave_context_usable(cu):
    d = alloc(cu, 256)
    host = np.zeros(128, dtype=np.uint8)
    assert cu.cuMemcpyHtoD_v2(c_ulonglong(d + 200), host.ctypes.data_as(c_void_p), c_size_t(128)) == CUDA_ERROR_INVALID_VALUE
    assert cu.cuMemFree_v2(c_ulonglong(d + 8)) == CUDA_ERROR_INVALID_VALUE
    assert cu.cuMemFree_v2(c_ulonglong(0xDEAD0000)) == CUDA_ERROR_INVALID_VALUE
    assert cu.cuStreamSynchronize(c_void_p(0x12345)) == CUDA_ERROR_INVALID_HANDLE
    assert cu.cuEventRecord(c_void_p(0x12345), None) == CUDA_ERROR_INVALID_HANDLE
    cu.ok(cu.cuMemsetD8_v2(c_ulonglong(d), ctypes.c_ubyte(7), c_size_t(256)))
    cu.ok(cu.cuCtxSynchronize())
    cu.ok(cu.cuMemFree_v2(c_ulonglong(d)))


def test_null_frees_as_nvidia_answers_them(cu):
    # NVIDIA's driver (590.48.01, RTX 4090, probed side by side with an interposer in
    # lupinemachines/lupine PR 858): free(NULL) semantics
    # for cuMemFree and cuMemFreeHost, while unregistering NULL is an invalid value
    cu.ok(cu.cuMemFree_v2(c_ulonglong(0)))
    cu.ok(cu.cuMemFreeHost(None))
    assert cu.cuMemHostUnregister(None) == CUDA_ERROR_INVALID_VALUE


def test_pointer_attributes(cu):
    d = alloc(cu, 64)
    mem_type = ctypes.c_uint()
    cu.ok(cu.cuPointerGetAttribute(byref(mem_type), 2, c_ulonglong(d + 4)))
    assert mem_type.value == 2  # CU_MEMORYTYPE_DEVICE
    host = c_void_p()
    cu.ok(cu.cuMemHostAlloc(byref(host), c_size_t(64), 0))
    cu.ok(cu.cuPointerGetAttribute(byref(mem_type), 2, c_ulonglong(host.value)))
    assert mem_type.value == 1  # CU_MEMORYTYPE_HOST
    stack_var = c_int()
    assert cu.cuPointerGetAttribute(byref(mem_type), 2, c_ulonglong(ctypes.addressof(stack_var))) == CUDA_ERROR_INVALID_VALUE
    cu.ok(cu.cuMemFreeHost(host))
    cu.ok(cu.cuMemFree_v2(c_ulonglong(d)))


HOSTFN = ctypes.CFUNCTYPE(None, c_void_p)


def test_stream_order_host_functions_and_events(cu):
    stream = c_void_p()
    cu.ok(cu.cuStreamCreate(byref(stream), 1))
    seen: list[int] = []
    gate = threading.Event()

    @HOSTFN
    def slow(_):
        gate.wait(5)
        seen.append(1)

    @HOSTFN
    def fast(_):
        seen.append(2)

    start, end = c_void_p(), c_void_p()
    cu.ok(cu.cuEventCreate(byref(start), 0))
    cu.ok(cu.cuEventCreate(byref(end), 0))
    cu.ok(cu.cuEventRecord(start, stream))
    cu.ok(cu.cuLaunchHostFunc(stream, slow, None))
    cu.ok(cu.cuLaunchHostFunc(stream, fast, None))
    cu.ok(cu.cuEventRecord(end, stream))
    assert cu.cuStreamQuery(stream) == CUDA_ERROR_NOT_READY  # asynchronous: still blocked
    assert cu.cuEventQuery(end) == CUDA_ERROR_NOT_READY
    time.sleep(0.05)
    gate.set()
    cu.ok(cu.cuStreamSynchronize(stream))
    assert seen == [1, 2]
    ms = ctypes.c_float()
    cu.ok(cu.cuEventElapsedTime_v2(byref(ms), start, end))
    assert ms.value >= 40.0
    cu.ok(cu.cuEventDestroy_v2(start))
    cu.ok(cu.cuEventDestroy_v2(end))
    cu.ok(cu.cuStreamDestroy_v2(stream))
    assert cu.cuStreamQuery(stream) == CUDA_ERROR_INVALID_HANDLE


def test_async_copies_with_pageable_memory_finish_before_they_return(cu):
    """As NVIDIA's: a pageable source may be reused, and a pageable destination read, as soon
    as cuMemcpy*Async returns (Warp frees the numpy temporary it copied from); with pinned
    memory the copy stays queued behind the stream's work."""
    stream = c_void_p()
    cu.ok(cu.cuStreamCreate(byref(stream), 1))
    gate = threading.Event()

    @HOSTFN
    def held(_):
        gate.wait(5)

    n = 256
    d = alloc(cu, n * 4)
    host = np.arange(n, dtype=np.uint32)
    cu.ok(cu.cuLaunchHostFunc(stream, held, None))
    threading.Timer(0.1, gate.set).start()
    cu.ok(cu.cuMemcpyHtoDAsync_v2(c_ulonglong(d), host.ctypes.data_as(c_void_p), c_size_t(host.nbytes), stream))
    host[:] = 0  # reused at once: the copy has read it already
    out = np.zeros(n, dtype=np.uint32)
    cu.ok(cu.cuMemcpyDtoHAsync_v2(out.ctypes.data_as(c_void_p), c_ulonglong(d), c_size_t(out.nbytes), stream))
    np.testing.assert_array_equal(out, np.arange(n, dtype=np.uint32))  # no synchronize needed

    pinned = c_void_p()
    cu.ok(cu.cuMemAllocHost_v2(byref(pinned), c_size_t(n * 4)))
    gate.clear()
    cu.ok(cu.cuLaunchHostFunc(stream, held, None))
    cu.ok(cu.cuMemcpyHtoDAsync_v2(c_ulonglong(d), pinned, c_size_t(n * 4), stream))
    assert cu.cuStreamQuery(stream) == CUDA_ERROR_NOT_READY  # still queued behind `held`
    gate.set()
    cu.ok(cu.cuStreamSynchronize(stream))
    cu.ok(cu.cuMemFreeHost(pinned))
    cu.ok(cu.cuMemFree_v2(c_ulonglong(d)))
    cu.ok(cu.cuStreamDestroy_v2(stream))


def test_legacy_default_stream_waits_for_blocking_streams(cu):
    blocking = c_void_p()
    cu.ok(cu.cuStreamCreate(byref(blocking), 0))
    gate = threading.Event()
    order: list[str] = []

    @HOSTFN
    def first(_):
        gate.wait(5)
        order.append("blocking stream")

    @HOSTFN
    def second(_):
        order.append("legacy stream")

    cu.ok(cu.cuLaunchHostFunc(blocking, first, None))
    cu.ok(cu.cuLaunchHostFunc(None, second, None))  # NULL = legacy default stream
    time.sleep(0.05)
    assert order == []
    gate.set()
    cu.ok(cu.cuCtxSynchronize())
    assert order == ["blocking stream", "legacy stream"]
    cu.ok(cu.cuStreamDestroy_v2(blocking))


def test_calls_before_cuinit_fail_with_not_initialized(tmp_path):
    from tests.driver.conftest import shim_path

    code = f"""
import ctypes
lib = ctypes.CDLL({str(shim_path())!r})
n = ctypes.c_int()
print(lib.cuDeviceGetCount(ctypes.byref(n)), lib.cuInit(1), lib.cuInit(0), lib.cuDeviceGetCount(ctypes.byref(n)), n.value)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["3", "1", "0", "0", "1"], out.stderr


def test_error_names_while_a_python_host_finalises():
    """While a Python host's interpreter finalises the driver's Python cannot run: releases
    (CuPy frees its modules and memory then) succeed, as NVIDIA's driver answers them (a failure
    became CuPy's "Error in sys.excepthook" at exit), other calls get CUDA_ERROR_DEINITIALIZED,
    and cuGetErrorName/String still answer, from C (an unset pointer there crashed CuPy)."""
    from tests.driver.conftest import shim_path

    code = f"""
import ctypes, os
lib = ctypes.CDLL({str(shim_path())!r})
assert lib.cuInit(0) == 0

class Late:  # collected during finalisation
    def __del__(self, lib=lib, write=os.write, byref=ctypes.byref, c_char_p=ctypes.c_char_p):
        name, text, unknown = c_char_p(), c_char_p(), c_char_p(b"unset")
        released = (lib.cuModuleUnload(None), lib.cuMemFree_v2(ctypes.c_uint64(1 << 40)), lib.cuStreamDestroy_v2(None))
        rc = lib.cuCtxSynchronize()
        got = released + (rc, lib.cuGetErrorName(rc, byref(name)), name.value, lib.cuGetErrorString(rc, byref(text)), text.value,
               lib.cuGetErrorName(12345, byref(unknown)), unknown.value, lib.cuGetErrorString(rc, None))
        write(1, repr(got).encode())

late = Late()
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == repr((0, 0, 0, 4, 0, b"CUDA_ERROR_DEINITIALIZED", 0, errors.error_string(4).encode(), 1, None, 1))


def test_empty_copies_with_null_pointers_succeed(cu):
    """numba copies a 0-byte array, whose device pointer is NULL (numba's test_array_reshape);
    an empty range is not checked."""
    host = np.zeros(4, dtype=np.uint8)
    hp, null, zero = host.ctypes.data_as(c_void_p), c_ulonglong(0), c_size_t(0)
    cu.ok(cu.cuMemcpyHtoD_v2(null, hp, zero))
    cu.ok(cu.cuMemcpyHtoDAsync_v2(null, hp, zero, None))
    cu.ok(cu.cuMemcpyDtoH_v2(hp, null, zero))
    cu.ok(cu.cuMemcpyDtoHAsync_v2(None, null, zero, None))
    cu.ok(cu.cuMemcpyDtoD_v2(null, null, zero))
    cu.ok(cu.cuMemcpy(null, null, zero))
    cu.ok(cu.cuCtxSynchronize())
