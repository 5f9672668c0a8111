"""External memory from an opaque file descriptor through libcuda.so.1, checked against cuda.h:
cuImportExternalMemory (CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD) takes a memory object's fd,
cuExternalMemoryGetMappedBuffer maps [offset, offset+size) of it as device memory that cuMemFree
frees, cuDestroyExternalMemory destroys the object; the buffer shows the object's bytes and
writes to it reach the object. Out-of-range sizes and reserved flags are CUDA_ERROR_INVALID_VALUE,
a destroyed object CUDA_ERROR_INVALID_HANDLE."""

from __future__ import annotations

import ctypes
import mmap
import os
from ctypes import byref, c_size_t, c_uint, c_ulonglong, c_void_p

INVALID_VALUE, INVALID_HANDLE = 1, 400
OPAQUE_FD = 1
PAGE = mmap.PAGESIZE


class HandleDesc(ctypes.Structure):  # CUDA_EXTERNAL_MEMORY_HANDLE_DESC
    class Handle(ctypes.Union):
        _fields_ = [("fd", ctypes.c_int), ("win32", c_void_p * 2), ("nvSciBufObject", c_void_p)]

    _fields_ = [("type", ctypes.c_int), ("handle", Handle), ("size", c_ulonglong), ("flags", c_uint),
                ("reserved", c_uint * 16)]


class BufferDesc(ctypes.Structure):  # CUDA_EXTERNAL_MEMORY_BUFFER_DESC
    _fields_ = [("offset", c_ulonglong), ("size", c_ulonglong), ("flags", c_uint), ("reserved", c_uint * 16)]


def _object(data: bytes) -> int:
    fd = os.memfd_create("external")
    os.write(fd, data)
    return fd


def _import(cu, fd: int, size: int, flags: int = 0) -> tuple[int, c_void_p]:
    desc = HandleDesc(type=OPAQUE_FD, size=size, flags=flags)
    desc.handle.fd = fd
    ext = c_void_p()
    return cu.cuImportExternalMemory(byref(ext), byref(desc)), ext


def _buffer(cu, ext: c_void_p, offset: int, size: int, flags: int = 0) -> tuple[int, c_ulonglong]:
    ptr = c_ulonglong()
    return cu.cuExternalMemoryGetMappedBuffer(byref(ptr), ext, byref(BufferDesc(offset, size, flags))), ptr


def test_a_mapped_buffer_is_the_objects_memory(cu):
    data = bytes(range(256)) * (3 * PAGE // 256)
    fd = _object(data)
    ours = os.dup(fd)  # the imported descriptor is the driver's now; this one is the test's
    rc, ext = _import(cu, fd, 3 * PAGE, flags=1)  # CUDA_EXTERNAL_MEMORY_DEDICATED
    cu.ok(rc)
    rc, buf = _buffer(cu, ext, 100, 2 * PAGE)
    cu.ok(rc)
    got = ctypes.create_string_buffer(2 * PAGE)
    cu.ok(cu.cuMemcpyDtoH_v2(got, buf, c_size_t(2 * PAGE)))
    assert got.raw == data[100:100 + 2 * PAGE]
    cu.ok(cu.cuMemsetD8_v2(c_ulonglong(buf.value + 8), 0xAB, c_size_t(4)))
    cu.ok(cu.cuCtxSynchronize())
    assert os.pread(ours, 16, 100) == data[100:108] + b"\xab" * 4 + data[112:116]
    # a second buffer over the same bytes sees the write
    rc, whole = _buffer(cu, ext, 0, 3 * PAGE)
    cu.ok(rc)
    cu.ok(cu.cuMemcpyDtoH_v2(got, c_ulonglong(whole.value + 108), c_size_t(4)))
    assert got.raw[:4] == b"\xab" * 4
    # buffers outlive the object's handle until cuMemFree (cuda.h)
    cu.ok(cu.cuDestroyExternalMemory(ext))
    cu.ok(cu.cuMemcpyDtoH_v2(got, buf, c_size_t(4)))
    assert got.raw[:4] == data[100:104]
    cu.ok(cu.cuMemFree_v2(buf))
    cu.ok(cu.cuMemFree_v2(whole))
    assert cu.cuMemFree_v2(buf) == INVALID_VALUE
    assert cu.cuDestroyExternalMemory(ext) == INVALID_HANDLE
    os.close(ours)


def test_import_and_mapping_errors(cu):
    fd = _object(bytes(PAGE))
    assert _import(cu, fd, 2 * PAGE)[0] == INVALID_VALUE  # larger than the object
    assert _import(cu, fd, PAGE, flags=2)[0] == INVALID_VALUE  # a reserved flag
    assert _import(cu, fd, 0)[0] == INVALID_VALUE
    r, w = os.pipe()
    assert _import(cu, r, PAGE)[0] == INVALID_VALUE  # no memory object
    os.close(r)
    os.close(w)
    assert _import(cu, -1, PAGE)[0] == INVALID_VALUE  # not a descriptor
    assert cu.cuImportExternalMemory(byref(c_void_p()), None) == INVALID_VALUE
    rc, ext = _import(cu, fd, PAGE)
    cu.ok(rc)
    assert _buffer(cu, ext, 1, PAGE)[0] == INVALID_VALUE  # past the end
    assert _buffer(cu, ext, 0, 0)[0] == INVALID_VALUE
    assert _buffer(cu, ext, 0, PAGE, flags=1)[0] == INVALID_VALUE  # flags must be zero
    cu.ok(cu.cuDestroyExternalMemory(ext))
    assert _buffer(cu, ext, 0, PAGE)[0] == INVALID_HANDLE
