"""Entry points: external memory imported from an opaque file descriptor (cuImportExternalMemory
with CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD, cuExternalMemoryGetMappedBuffer,
cuDestroyExternalMemory).

An opaque fd names a memory object; here it is one the process can map: a memfd (what
cuMemExportToShareableHandle hands out, backends/hostshare.py), shared memory, a file. The
import takes the descriptor over (cuda.h: ownership passes to the driver on success) as a
physical allocation of the backend's `vmm`, as cuMemImportFromShareableHandle does; a mapped
buffer is that object mapped over fresh address space, device memory that cuMemFree gives back.
The Win32, D3D, NvSci and dma-buf handle types name objects of other stacks: NOT_SUPPORTED."""

from __future__ import annotations

import mmap
import os

from . import context as ctxs, memory
from .api import entry
from ..cdata import addr, ffi, store, store_ptr
from ..curesult import CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_SUPPORTED, CudaError
from .handles import HandleTable
from .init_device import require
from .memory import _backend_errors, _memory
from .vmm import ACCESS_READ_WRITE, _vmm

ffi.cdef("""
typedef struct {
    int type;
    union { int fd; struct { void *handle; const void *name; } win32; const void *nvSciBufObject; } handle;
    unsigned long long size; unsigned int flags; unsigned int reserved[16];
} CUDA_EXTERNAL_MEMORY_HANDLE_DESC;
typedef struct { unsigned long long offset; unsigned long long size; unsigned int flags; unsigned int reserved[16]; }
    CUDA_EXTERNAL_MEMORY_BUFFER_DESC;
""")

PAGE = mmap.PAGESIZE
HANDLE_TYPE_OPAQUE_FD = 1  # CUexternalMemoryHandleType
CUDA_EXTERNAL_MEMORY_DEDICATED = 0x1


class ExternalMemory:
    def __init__(self, token: int, size: int) -> None:
        self.token, self.size = token, size  # the backend's physical allocation, the size imported
        self.handle = 0


external_memories: HandleTable[ExternalMemory] = HandleTable("external memory", CUDA_ERROR_INVALID_HANDLE)


@entry("cuImportExternalMemory")
def cuImportExternalMemory(out, desc):
    require(out, desc)
    ctxs.current()
    d = ffi.cast("CUDA_EXTERNAL_MEMORY_HANDLE_DESC *", desc)
    if d.type != HANDLE_TYPE_OPAQUE_FD:
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, f"external memory handle type {d.type}: opaque fds (1) only")
    if d.size == 0 or d.flags & ~CUDA_EXTERNAL_MEMORY_DEDICATED:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"external memory of {d.size} bytes, flags {d.flags:#x}")
    fd = d.handle.fd
    try:
        with _backend_errors():
            token, object_size = _vmm().import_fd(fd)
    except OSError as e:  # not open, or no memory object (a pipe cannot be sized)
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"fd {fd}: {e.strerror}") from None
    if d.size > object_size:  # touching past the object's end would be SIGBUS
        _vmm().release(token)
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{d.size} bytes asked of an object of {object_size}")
    os.close(fd)  # the driver owns it now (the backend keeps its own duplicate)
    store_ptr(out, external_memories.add(ExternalMemory(token, d.size)))


@entry("cuExternalMemoryGetMappedBuffer")
def cuExternalMemoryGetMappedBuffer(dptr, ext, desc):
    require(dptr, desc)
    m = external_memories.get(addr(ext))
    d = ffi.cast("CUDA_EXTERNAL_MEMORY_BUFFER_DESC *", desc)
    if d.size == 0 or d.flags or d.offset + d.size > m.size:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"buffer {d.offset}+{d.size} flags {d.flags:#x} of "
                                                  f"external memory of {m.size} bytes")
    ctx = ctxs.current()
    start = d.offset - d.offset % PAGE  # mappings start at a page of the object
    length = -(-(d.offset + d.size - start) // PAGE) * PAGE
    vmm = _vmm()
    with _backend_errors():
        base = vmm.reserve(length, PAGE, 0)
        try:
            vmm.map(base, length, start, m.token)
            vmm.set_access(base, length, ctx.device.ordinal, ACCESS_READ_WRITE)  # fails for a read-only object
        except Exception:
            vmm.free(base, length)
            raise
    buffer = _memory().add(base + d.offset - start, d.size, "external", 0, ctx)
    memory.unmappers[buffer.base] = lambda: (vmm.unmap(base, length), vmm.free(base, length))
    store(dptr, buffer.base)


@entry("cuDestroyExternalMemory")
def cuDestroyExternalMemory(ext):
    m = external_memories.remove(addr(ext))
    with _backend_errors():
        _vmm().release(m.token)  # mapped buffers keep their pages until cuMemFree (cuda.h)
