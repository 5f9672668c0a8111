"""The 1-D CUDA array copies (cuMemcpyAtoH/HtoA/AtoD/DtoA/AtoA and the Async forms) and the
per-thread-default-stream forms of the memsets, cuMemcpy2D and cuStreamGetCtx, through
libcuda.so.1. Expected contents are numpy slices of the data copied in: cuda.h's offsets and
counts are in bytes; cuMemcpyAtoA needs one element size and a count divisible by it."""

from __future__ import annotations

import ctypes
from ctypes import byref, c_size_t, c_ulonglong, c_void_p

import numpy as np

from texture_abi import ARRAY_DESCRIPTOR, CU_AD_FORMAT_FLOAT

INVALID_VALUE = 1
CU_AD_FORMAT_UNSIGNED_INT8, CU_AD_FORMAT_UNSIGNED_INT16 = 0x01, 0x02


def _array(cu, width: int, fmt: int = CU_AD_FORMAT_FLOAT, channels: int = 1) -> c_void_p:
    a = c_void_p()
    cu.ok(cu.cuArrayCreate_v2(byref(a), byref(ARRAY_DESCRIPTOR(width, 0, fmt, channels))))
    return a


def _ptr(data: np.ndarray) -> c_void_p:
    return c_void_p(data.ctypes.data)


def test_host_array_round_trips(cu):
    data = np.arange(64, dtype=np.float32) * 1.5
    a = _array(cu, 64)
    cu.ok(cu.cuMemcpyHtoA_v2(a, c_size_t(0), _ptr(data), c_size_t(data.nbytes)))
    part = np.array([-1, -2, -3, -4], dtype=np.float32)
    cu.ok(cu.cuMemcpyHtoA_v2_ptds(a, c_size_t(40), _ptr(part), c_size_t(part.nbytes)))  # elements 10-13
    expected = data.copy()
    expected[10:14] = part
    out = np.zeros_like(data)
    cu.ok(cu.cuMemcpyAtoH_v2(_ptr(out), a, c_size_t(0), c_size_t(out.nbytes)))
    assert np.array_equal(out, expected)
    tail = np.zeros(6, dtype=np.float32)
    cu.ok(cu.cuMemcpyAtoH_v2_ptds(_ptr(tail), a, c_size_t(8 * 4), c_size_t(tail.nbytes)))
    assert np.array_equal(tail, expected[8:14])
    cu.ok(cu.cuArrayDestroy(a))


def test_async_forms_with_pinned_memory(cu):
    s = c_void_p()
    cu.ok(cu.cuStreamCreate(byref(s), 0))
    host = c_void_p()
    cu.ok(cu.cuMemAllocHost_v2(byref(host), c_size_t(256)))
    pinned = np.ctypeslib.as_array(ctypes.cast(host, ctypes.POINTER(ctypes.c_uint16)), (128,))
    pinned[:] = np.arange(128, dtype=np.uint16) * 3
    data = pinned.copy()
    a = _array(cu, 64, CU_AD_FORMAT_UNSIGNED_INT16, 2)  # 4-byte elements, 256 bytes
    cu.ok(cu.cuMemcpyHtoAAsync_v2(a, c_size_t(0), host, c_size_t(256), s))
    out = np.zeros(32, dtype=np.uint16)
    cu.ok(cu.cuMemcpyAtoHAsync_v2_ptsz(_ptr(out), a, c_size_t(64), c_size_t(64), s))  # pageable: done on return
    assert np.array_equal(out, data[32:64])
    pinned[:] = 0
    cu.ok(cu.cuMemcpyAtoHAsync_v2(host, a, c_size_t(0), c_size_t(256), s))
    cu.ok(cu.cuStreamSynchronize(s))
    assert np.array_equal(pinned, data)
    cu.ok(cu.cuArrayDestroy(a))
    cu.ok(cu.cuMemFreeHost(host))
    cu.ok(cu.cuStreamDestroy_v2(s))


def test_device_and_array_to_array(cu):
    data = np.arange(32, dtype=np.float32) + 0.25
    d = c_ulonglong()
    cu.ok(cu.cuMemAlloc_v2(byref(d), c_size_t(data.nbytes)))
    cu.ok(cu.cuMemcpyHtoD_v2(d, _ptr(data), c_size_t(data.nbytes)))
    src, dst = _array(cu, 32), _array(cu, 32, CU_AD_FORMAT_UNSIGNED_INT8, 4)  # both 4-byte elements
    cu.ok(cu.cuMemcpyDtoA_v2(src, c_size_t(0), d, c_size_t(data.nbytes)))
    cu.ok(cu.cuMemcpyHtoA_v2(dst, c_size_t(0), _ptr(np.zeros(32, np.float32)), c_size_t(128)))
    cu.ok(cu.cuMemcpyAtoA_v2(dst, c_size_t(4), src, c_size_t(8), c_size_t(40)))  # elements 2-11 -> 1-10
    expected = np.zeros(32, dtype=np.float32)
    expected[1:11] = data[2:12]
    cu.ok(cu.cuMemsetD8_v2(d, 0, c_size_t(data.nbytes)))
    cu.ok(cu.cuMemcpyAtoD_v2_ptds(d, dst, c_size_t(0), c_size_t(128)))
    out = np.zeros_like(data)
    cu.ok(cu.cuMemcpyDtoH_v2(_ptr(out), d, c_size_t(out.nbytes)))
    assert np.array_equal(out, expected)
    # errors: cuda.h lists CUDA_ERROR_INVALID_VALUE
    assert cu.cuMemcpyAtoA_v2(dst, c_size_t(0), src, c_size_t(0), c_size_t(6)) == INVALID_VALUE  # not whole elements
    bytes_array = _array(cu, 32, CU_AD_FORMAT_UNSIGNED_INT8, 1)
    assert cu.cuMemcpyAtoA_v2(bytes_array, c_size_t(0), src, c_size_t(0), c_size_t(8)) == INVALID_VALUE  # sizes differ
    assert cu.cuMemcpyAtoH_v2(_ptr(out), src, c_size_t(8), c_size_t(128)) == INVALID_VALUE  # past the end
    assert cu.cuMemcpyHtoA_v2(dst, c_size_t(0), None, c_size_t(4)) == INVALID_VALUE  # NULL host
    assert cu.cuMemcpyAtoD_v2(c_ulonglong(0x10), src, c_size_t(0), c_size_t(4)) == INVALID_VALUE  # not device memory
    assert cu.cuMemcpyAtoH_v2(_ptr(out), c_void_p(0x1234), c_size_t(0), c_size_t(4)) == INVALID_VALUE  # not an array
    for a in (src, dst, bytes_array):
        cu.ok(cu.cuArrayDestroy(a))
    cu.ok(cu.cuMemFree_v2(d))


def test_per_thread_memsets_copies_and_stream_context(cu):
    d = c_ulonglong()
    cu.ok(cu.cuMemAlloc_v2(byref(d), c_size_t(256)))
    base = d.value
    cu.ok(cu.cuMemsetD8_v2(d, 0, c_size_t(256)))
    cu.ok(cu.cuMemsetD16_v2_ptds(c_ulonglong(base), ctypes.c_ushort(0xABCD), c_size_t(4)))  # bytes 0-7
    cu.ok(cu.cuMemsetD32Async_ptsz(c_ulonglong(base + 8), ctypes.c_uint(0x01020304), c_size_t(2), None))  # 8-15
    cu.ok(cu.cuMemsetD2D16_v2_ptds(c_ulonglong(base + 64), c_size_t(16), ctypes.c_ushort(7), c_size_t(2), c_size_t(2)))
    cu.ok(cu.cuMemsetD2D32Async_ptsz(c_ulonglong(base + 128), c_size_t(32), ctypes.c_uint(9), c_size_t(1), c_size_t(3),
                                      None))
    cu.ok(cu.cuMemsetD32_v2_ptds(c_ulonglong(base + 192), ctypes.c_uint(5), c_size_t(1)))
    cu.ok(cu.cuMemsetD16Async_ptsz(c_ulonglong(base + 196), ctypes.c_ushort(6), c_size_t(1), None))
    cu.ok(cu.cuMemsetD2D16Async_ptsz(c_ulonglong(base + 200), c_size_t(4), ctypes.c_ushort(8), c_size_t(1), c_size_t(2),
                                      None))
    cu.ok(cu.cuMemsetD2D32_v2_ptds(c_ulonglong(base + 224), c_size_t(8), ctypes.c_uint(10), c_size_t(1), c_size_t(2)))
    cu.ok(cu.cuStreamSynchronize_ptsz(None))
    out = np.zeros(256, dtype=np.uint8)
    cu.ok(cu.cuMemcpyDtoH_v2(_ptr(out), d, c_size_t(256)))
    expected = np.zeros(256, dtype=np.uint8)
    expected[0:8].view(np.uint16)[:] = 0xABCD
    expected[8:16].view(np.uint32)[:] = 0x01020304
    for row in range(2):
        expected[64 + 16 * row:68 + 16 * row].view(np.uint16)[:] = 7
    for row in range(3):
        expected[128 + 32 * row:132 + 32 * row].view(np.uint32)[:] = 9
    expected[192:196].view(np.uint32)[:] = 5
    expected[196:198].view(np.uint16)[:] = 6
    expected[200:202].view(np.uint16)[:] = 8
    expected[204:206].view(np.uint16)[:] = 8
    expected[224:228].view(np.uint32)[:] = 10
    expected[232:236].view(np.uint32)[:] = 10
    assert np.array_equal(out, expected)
    # cuMemcpy2D_v2_ptds: two rows of 4 bytes out of a host image with an 8-byte pitch
    host = np.arange(16, dtype=np.uint8)
    c = MEMCPY2D()
    c.srcMemoryType, c.srcHost, c.srcPitch = 1, host.ctypes.data, 8
    c.dstMemoryType, c.dstDevice, c.dstPitch = 2, base, 4
    c.WidthInBytes, c.Height = 4, 2
    cu.ok(cu.cuMemcpy2D_v2_ptds(byref(c)))
    cu.ok(cu.cuMemcpyDtoH_v2(_ptr(out), d, c_size_t(8)))
    assert np.array_equal(out[:8], np.r_[host[0:4], host[8:12]])
    ctx = c_void_p()
    cu.ok(cu.cuStreamGetCtx_ptsz(None, byref(ctx)))
    assert ctx.value == cu.ctx.value
    cu.ok(cu.cuStreamGetCtx_v2_ptsz(None, byref(ctx), None))
    assert ctx.value == cu.ctx.value
    cu.ok(cu.cuMemFree_v2(d))


class MEMCPY2D(ctypes.Structure):
    _fields_ = [(f"{side}{name}", t) for side in ("src", "dst") for name, t in
                (("XInBytes", c_size_t), ("Y", c_size_t), ("MemoryType", ctypes.c_int), ("Host", c_void_p),
                 ("Device", c_ulonglong), ("Array", c_void_p), ("Pitch", c_size_t))] + \
               [("WidthInBytes", c_size_t), ("Height", c_size_t)]
