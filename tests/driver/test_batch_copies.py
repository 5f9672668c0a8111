"""Batched copies and prefetches (cuMemcpyBatchAsync, cuMemcpy3DBatchAsync, v1 with failIdx and
_v2, cuMemPrefetchBatchAsync) and cuMemcpy3DPeer, through libcuda.so.1. Expected bytes are numpy
slices of the sources; the rules checked are cuda.h's: attribute index arrays start at 0 and
increase, a valid srcAccessOrder for every copy, no legacy NULL stream, non-zero extents,
rowLength/layerHeight 0 or at least the extent, equal element sizes between two arrays."""

from __future__ import annotations

import ctypes
from ctypes import byref, c_int, c_size_t, c_uint, c_ulonglong, c_void_p

import numpy as np

from texture_abi import ARRAY3D_DESCRIPTOR, CU_AD_FORMAT_FLOAT, MEMCPY3D, device_buffer as _device, \
    from_device as _host

INVALID_VALUE, INVALID_CONTEXT = 1, 201
STREAM, DURING_API_CALL = 1, 2
POINTER_OPERAND, ARRAY_OPERAND = 1, 2
SIZE_MAX = 2**64 - 1

class Attributes(ctypes.Structure):
    _fields_ = [("srcAccessOrder", c_int), ("srcLoc", c_int * 2), ("dstLoc", c_int * 2), ("flags", c_uint)]

class _Ptr(ctypes.Structure):
    _fields_ = [("ptr", c_ulonglong), ("rowLength", c_size_t), ("layerHeight", c_size_t), ("loc", c_int * 2)]

class _Arr(ctypes.Structure):
    _fields_ = [("array", c_void_p), ("x", c_size_t), ("y", c_size_t), ("z", c_size_t)]

class _Op(ctypes.Union):
    _fields_ = [("ptr", _Ptr), ("array", _Arr)]

class Operand(ctypes.Structure):
    _fields_ = [("type", c_int), ("op", _Op)]

class BatchOp(ctypes.Structure):
    _fields_ = [("src", Operand), ("dst", Operand), ("width", c_size_t), ("height", c_size_t), ("depth", c_size_t),
                ("srcAccessOrder", c_int), ("flags", c_uint)]

def _stream(cu) -> c_void_p:
    s = c_void_p()
    cu.ok(cu.cuStreamCreate(byref(s), 1))
    return s

def _arrays(*values: int, ctype=c_ulonglong):
    return (ctype * len(values))(*values)

def test_pointer_batches(cu):
    s = _stream(cu)
    a = np.arange(64, dtype=np.uint8)
    b = np.arange(64, dtype=np.uint8)[::-1].copy()
    da, db, dc = _device(cu, a), _device(cu, np.zeros(64, np.uint8)), _device(cu, np.zeros(64, np.uint8))
    out = np.zeros(16, dtype=np.uint8)
    dsts = _arrays(db, dc, out.ctypes.data)
    srcs = _arrays(b.ctypes.data, da + 8, da + 32)
    sizes = _arrays(64, 16, 16, ctype=c_size_t)
    attrs = (Attributes * 2)(Attributes(STREAM), Attributes(DURING_API_CALL))
    idxs = _arrays(0, 2, ctype=c_size_t)
    cu.ok(cu.cuMemcpyBatchAsync_v2(dsts, srcs, sizes, c_size_t(3), attrs, idxs, c_size_t(2), s))
    assert np.array_equal(out, a[32:48])  # DURING_API_CALL: done when the call returns
    cu.ok(cu.cuStreamSynchronize(s))
    assert np.array_equal(_host(cu, db, b), b)
    assert np.array_equal(_host(cu, dc, a)[:16], a[8:24])
    cu.ok(cu.cuMemcpyBatchAsync_v2_ptsz(dsts, srcs, sizes, c_size_t(3), attrs, idxs, c_size_t(2), None))
    cu.ok(cu.cuStreamSynchronize_ptsz(None))
    # errors
    assert cu.cuMemcpyBatchAsync_v2(dsts, srcs, sizes, c_size_t(3), attrs, idxs, c_size_t(2), None) == INVALID_VALUE
    assert cu.cuMemcpyBatchAsync_v2(dsts, srcs, sizes, c_size_t(3), attrs, _arrays(1, 2, ctype=c_size_t),
                                    c_size_t(2), s) == INVALID_VALUE  # must start at 0
    assert cu.cuMemcpyBatchAsync_v2(dsts, srcs, sizes, c_size_t(3), attrs, _arrays(0, 3, ctype=c_size_t),
                                    c_size_t(2), s) == INVALID_VALUE  # last below count
    bad_order = (Attributes * 1)(Attributes(0))
    assert cu.cuMemcpyBatchAsync_v2(dsts, srcs, sizes, c_size_t(3), bad_order, _arrays(0, ctype=c_size_t),
                                    c_size_t(1), s) == INVALID_VALUE
    fail = c_size_t(7)
    too_big = _arrays(64, 64, 16, ctype=c_size_t)  # copy 1 reads past da's allocation end from da + 8
    assert cu.cuMemcpyBatchAsync(dsts, srcs, too_big, c_size_t(3), attrs, idxs, c_size_t(2), byref(fail), s) \
        == INVALID_VALUE
    assert fail.value == 1
    assert cu.cuMemcpyBatchAsync(dsts, srcs, sizes, c_size_t(3), attrs, idxs, c_size_t(4), byref(fail), s) \
        == INVALID_VALUE  # numAttrs above count: no single copy is at fault
    assert fail.value == SIZE_MAX
    cu.ok(cu.cuMemcpyBatchAsync(dsts, srcs, sizes, c_size_t(3), attrs, idxs, c_size_t(2), byref(fail), s))
    cu.ok(cu.cuStreamSynchronize(s))
    for p in (da, db, dc):
        cu.ok(cu.cuMemFree_v2(c_ulonglong(p)))

def test_3d_batches_with_arrays(cu):
    s = _stream(cu)
    image = np.arange(8 * 4, dtype=np.float32).reshape(4, 8)
    array = c_void_p()
    cu.ok(cu.cuArray3DCreate_v2(byref(array), byref(ARRAY3D_DESCRIPTOR(8, 4, 0, CU_AD_FORMAT_FLOAT, 1, 0))))
    src = _device(cu, image)
    back = _device(cu, np.zeros((4, 10), np.float32))  # rows of 10 floats
    to_array = BatchOp()
    to_array.src.type, to_array.src.op.ptr.ptr = POINTER_OPERAND, src
    to_array.dst.type, to_array.dst.op.array.array = ARRAY_OPERAND, array
    to_array.width, to_array.height, to_array.depth, to_array.srcAccessOrder = 8, 4, 1, STREAM
    from_array = BatchOp()
    from_array.src.type, from_array.src.op.array.array = ARRAY_OPERAND, array
    from_array.src.op.array.x, from_array.src.op.array.y = 2, 1  # elements (2, 1) on
    from_array.dst.type, from_array.dst.op.ptr.ptr, from_array.dst.op.ptr.rowLength = POINTER_OPERAND, back, 10
    from_array.width, from_array.height, from_array.depth, from_array.srcAccessOrder = 5, 3, 1, STREAM
    cu.ok(cu.cuMemcpy3DBatchAsync_v2(c_size_t(1), byref(to_array), c_ulonglong(0), s))
    cu.ok(cu.cuMemcpy3DBatchAsync_v2(c_size_t(1), byref(from_array), c_ulonglong(0), s))
    cu.ok(cu.cuStreamSynchronize(s))
    expected = np.zeros((4, 10), np.float32)
    expected[:3, :5] = image[1:4, 2:7]
    assert np.array_equal(_host(cu, back, expected), expected)
    # errors
    assert cu.cuMemcpy3DBatchAsync_v2(c_size_t(1), byref(to_array), c_ulonglong(1), s) == INVALID_VALUE
    assert cu.cuMemcpy3DBatchAsync_v2(c_size_t(1), byref(to_array), c_ulonglong(0), None) == INVALID_VALUE
    narrow = BatchOp.from_buffer_copy(from_array)
    narrow.dst.op.ptr.rowLength = 4  # below the width of 5
    fail = c_size_t()
    pair = (BatchOp * 2)(to_array, narrow)
    assert cu.cuMemcpy3DBatchAsync(c_size_t(2), pair, byref(fail), c_ulonglong(0), s) == INVALID_VALUE
    assert fail.value == 1
    empty = BatchOp.from_buffer_copy(to_array)
    empty.depth = 0
    assert cu.cuMemcpy3DBatchAsync_v2(c_size_t(1), byref(empty), c_ulonglong(0), s) == INVALID_VALUE
    bytes_array = c_void_p()
    cu.ok(cu.cuArray3DCreate_v2(byref(bytes_array), byref(ARRAY3D_DESCRIPTOR(8, 4, 0, 0x01, 1, 0))))
    mixed = BatchOp.from_buffer_copy(from_array)
    mixed.dst.type, mixed.dst.op.array.array = ARRAY_OPERAND, bytes_array
    assert cu.cuMemcpy3DBatchAsync_v2(c_size_t(1), byref(mixed), c_ulonglong(0), s) == INVALID_VALUE
    for a in (array, bytes_array):
        cu.ok(cu.cuArrayDestroy(a))
    for p in (src, back):
        cu.ok(cu.cuMemFree_v2(c_ulonglong(p)))

def test_prefetch_batches(cu):
    s = _stream(cu)
    managed, device = c_ulonglong(), c_ulonglong()
    cu.ok(cu.cuMemAllocManaged(byref(managed), c_size_t(4096), 1))
    cu.ok(cu.cuMemAlloc_v2(byref(device), c_size_t(4096)))
    locations = (c_int * 2)(1, 0)  # CU_MEM_LOCATION_TYPE_DEVICE, device 0
    idx = _arrays(0, ctype=c_size_t)
    cu.ok(cu.cuMemPrefetchBatchAsync(_arrays(managed.value, managed.value + 1024), _arrays(1024, 2048, ctype=c_size_t),
                                     c_size_t(2), locations, idx, c_size_t(1), c_ulonglong(0), s))
    assert cu.cuMemPrefetchBatchAsync(_arrays(device.value), _arrays(64, ctype=c_size_t), c_size_t(1), locations, idx,
                                      c_size_t(1), c_ulonglong(0), s) == INVALID_VALUE  # not managed memory
    assert cu.cuMemPrefetchBatchAsync(_arrays(managed.value), _arrays(64, ctype=c_size_t), c_size_t(1), locations, idx,
                                      c_size_t(1), c_ulonglong(1), s) == INVALID_VALUE  # flags must be 0
    cu.ok(cu.cuMemFree_v2(managed))
    cu.ok(cu.cuMemFree_v2(device))

def test_3d_peer_copies(cu):
    data = np.arange(2 * 3 * 16, dtype=np.uint8).reshape(2, 3, 16)
    src = _device(cu, data)
    out = np.zeros((2, 3, 8), np.uint8)
    c = MEMCPY3D()  # a CUDA_MEMCPY3D_PEER: srcContext and dstContext where MEMCPY3D has reserved pointers
    c.srcMemoryType, c.srcDevice, c.srcPitch, c.srcHeight, c.srcXInBytes = 2, src, 16, 3, 4
    c.dstMemoryType, c.dstHost, c.dstPitch, c.dstHeight = 1, out.ctypes.data, 8, 3
    c.reserved_src = c.reserved_dst = cu.ctx.value
    c.WidthInBytes, c.Height, c.Depth = 8, 3, 2
    cu.ok(cu.cuMemcpy3DPeer(byref(c)))
    assert np.array_equal(out, data[:, :, 4:12])
    out[:] = 0
    s = _stream(cu)
    cu.ok(cu.cuMemcpy3DPeerAsync(byref(c), s))
    cu.ok(cu.cuStreamSynchronize(s))
    assert np.array_equal(out, data[:, :, 4:12])
    cu.ok(cu.cuMemcpy3DPeer_ptds(byref(c)))
    c.reserved_dst = 0x1234
    assert cu.cuMemcpy3DPeer(byref(c)) == INVALID_CONTEXT
    assert cu.cuMemcpy3DPeer(None) == INVALID_VALUE
    cu.ok(cu.cuMemFree_v2(c_ulonglong(src)))


def test_single_copies_with_attributes(cu):
    """A batch of one (CUDA 13.2); cuda.h's legacy-stream rule is for batches, these take any stream."""
    cu.cuMemcpyWithAttributesAsync.argtypes = [c_ulonglong, c_ulonglong, c_size_t, c_void_p, c_void_p]
    data = np.arange(32, dtype=np.uint16)
    src = _device(cu, data)
    out = np.zeros_like(data)
    cu.ok(cu.cuMemcpyWithAttributesAsync(out.ctypes.data, src + 8, 16, byref(Attributes(DURING_API_CALL)), None))
    assert np.array_equal(out[:8], data[4:12])
    assert cu.cuMemcpyWithAttributesAsync(out.ctypes.data, src, 16, byref(Attributes(7)), None) == INVALID_VALUE
    assert cu.cuMemcpyWithAttributesAsync(out.ctypes.data, src, 16, None, None) == INVALID_VALUE
    op = BatchOp()
    op.src.type, op.src.op.ptr.ptr = POINTER_OPERAND, src
    op.dst.type, op.dst.op.ptr.ptr = POINTER_OPERAND, out.ctypes.data
    op.width, op.height, op.depth, op.srcAccessOrder = 64, 1, 1, STREAM
    out[:] = 0
    cu.ok(cu.cuMemcpy3DWithAttributesAsync(byref(op), c_ulonglong(0), None))
    cu.ok(cu.cuCtxSynchronize())
    assert np.array_equal(out, data)
    assert cu.cuMemcpy3DWithAttributesAsync(byref(op), c_ulonglong(2), None) == INVALID_VALUE
    cu.ok(cu.cuMemFree_v2(c_ulonglong(src)))
