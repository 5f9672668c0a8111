"""Virtual memory management and IPC memory handles where device memory is this process's host
memory: the CPU backend's, and the emulator's libamdhip64 stand-in's (hip_emulator.py).

VMM (`HostVmm`): a reservation is an inaccessible anonymous mapping (PROT_NONE, MAP_NORESERVE);
a physical allocation is a memfd of its size; mapping puts the memfd over part of a reservation
with MAP_FIXED (still inaccessible) and setting access makes it readable/writable. A physical
allocation is exported as a POSIX file descriptor (a dup of the memfd) and imported from one.

IPC (`HostIpc`): the allocation's pages become shared memory in place (a memfd gets their
contents and is mapped over them with MAP_FIXED, so the address and the bytes stay). The
64-byte handle names the owner's pid, the memfd's descriptor number and where the allocation
lies in it; another process opens the memfd through /proc/<pid>/fd and maps it. The caller
makes sure nothing writes the pages while they are shared (the driver synchronizes first).
"""

from __future__ import annotations

import mmap
import os
import struct
import threading

from ..cdata import addr, ffi, libc
from ..curesult import (CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_VALUE,
                        CUDA_ERROR_MAP_FAILED, CUDA_ERROR_OUT_OF_MEMORY, CudaError)

ffi.cdef("int mprotect(void *addr, size_t len, int prot);")

PAGE = mmap.PAGESIZE
ACCESS_NONE, ACCESS_READ, ACCESS_READ_WRITE = 0, 1, 3  # CUmemAccess_flags (and hipMemAccessFlags)
_PROT = {ACCESS_NONE: 0, ACCESS_READ: 1, ACCESS_READ_WRITE: 3}
_PROT_READ_WRITE = 3
_MAP_SHARED, _MAP_PRIVATE, _MAP_FIXED, _MAP_ANONYMOUS, _MAP_NORESERVE = 0x1, 0x2, 0x10, 0x20, 0x4000
_MAP_FAILED = (1 << 64) - 1
_MEM_MAGIC = b"ZLIPCMEM"
_MEM_LAYOUT = struct.Struct("<8sIIQQQ")  # magic, pid, fd, offset of the allocation in the memfd, its size, a key


def _mmap(base: int, size: int, prot: int, flags: int, fd: int = -1, offset: int = 0) -> int:
    got = addr(libc.mmap(ffi.cast("void *", base), size, prot, flags, fd, offset))
    if got == _MAP_FAILED:
        raise CudaError(CUDA_ERROR_OUT_OF_MEMORY, f"mmap of {size} bytes failed")
    return got


class HostVmm:
    """The mappings behind cuMemAddressReserve/cuMemCreate/cuMemMap/cuMemSetAccess... The
    driver checks sizes, alignment and ranges; a physical allocation is its memfd's number."""

    def reserve(self, size: int, align: int, hint: int) -> int:
        """`size` bytes at a multiple of `align`: over-reserve, then give back the ends."""
        raw = _mmap(hint, size + align, 0, _MAP_PRIVATE | _MAP_ANONYMOUS | _MAP_NORESERVE)
        base = -(-raw // align) * align
        if base > raw:
            libc.munmap(ffi.cast("void *", raw), base - raw)
        if raw + size + align > base + size:
            libc.munmap(ffi.cast("void *", base + size), raw + size + align - base - size)
        return base

    def free(self, base: int, size: int) -> None:
        libc.munmap(ffi.cast("void *", base), size)

    def create(self, size: int, device: int) -> int:
        fd = os.memfd_create("zluda-vmm", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, size)
        except OSError:
            os.close(fd)
            raise CudaError(CUDA_ERROR_OUT_OF_MEMORY, f"cannot allocate {size} bytes") from None
        return fd

    def release(self, physical: int) -> None:
        os.close(physical)

    def map(self, ptr: int, size: int, offset: int, physical: int) -> None:
        _mmap(ptr, size, 0, _MAP_SHARED | _MAP_FIXED, physical, offset)

    def unmap(self, ptr: int, size: int) -> None:
        _mmap(ptr, size, 0, _MAP_PRIVATE | _MAP_ANONYMOUS | _MAP_NORESERVE | _MAP_FIXED)

    def set_access(self, ptr: int, size: int, device: int, access: int) -> None:
        if libc.mprotect(ffi.cast("void *", ptr), size, _PROT[access]):
            raise CudaError(CUDA_ERROR_INVALID_VALUE, "mprotect failed")

    def export_fd(self, physical: int) -> int:
        return os.dup(physical)

    def import_fd(self, fd: int) -> tuple[int, int]:
        """(physical allocation, its size) from an open file descriptor of an export."""
        size = os.lseek(fd, 0, os.SEEK_END)  # first: a pipe (ESPIPE) leaves no duplicate behind
        return os.dup(fd), size


class HostIpc:
    """IPC memory handles over shared pages. `get_handle` is called with the allocation's
    identity (`key`), so that an address freed and reused is shared anew."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._exported: dict[int, tuple[int, int, int]] = {}  # base -> (key, memfd, offset)
        self._opened: dict[int, tuple[int, int]] = {}  # opened base -> (mapping base, mapping length)

    def get_handle(self, base: int, size: int, key: int) -> bytes:
        with self._lock:
            known = self._exported.get(base)
            if known is None or known[0] != key:
                if known is not None:
                    os.close(known[1])
                known = self._exported[base] = (key, *self._share(base, size))
        _, fd, offset = known
        return _MEM_LAYOUT.pack(_MEM_MAGIC, os.getpid(), fd, offset, size, key).ljust(64, b"\0")

    @staticmethod
    def _share(base: int, size: int) -> tuple[int, int]:
        """(memfd, offset of base in it): the pages holding [base, base + size) made shared, in place."""
        lo = base // PAGE * PAGE
        length = -(-(base + size) // PAGE) * PAGE - lo
        fd = os.memfd_create("zluda-ipc", 0)
        os.ftruncate(fd, length)
        os.pwrite(fd, ffi.buffer(ffi.cast("char *", lo), length), 0)
        got = addr(libc.mmap(ffi.cast("void *", lo), length, _PROT_READ_WRITE, _MAP_SHARED | _MAP_FIXED, fd, 0))
        if got != lo:
            os.close(fd)
            raise CudaError(CUDA_ERROR_MAP_FAILED, "cannot remap the allocation as shared memory")
        return fd, base - lo

    def open(self, handle: bytes) -> tuple[int, int]:
        """(base, size) of another process's allocation, mapped here."""
        magic, pid, fd, offset, size, _ = _MEM_LAYOUT.unpack_from(handle)
        if magic != _MEM_MAGIC:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, "not a memory handle of cuIpcGetMemHandle")
        if pid == os.getpid():
            raise CudaError(CUDA_ERROR_INVALID_CONTEXT, "a memory handle cannot be opened in the process that made it")
        local = open_fd(pid, fd)
        try:
            length = -(-(offset + size) // PAGE) * PAGE
            base = addr(libc.mmap(ffi.NULL, length, _PROT_READ_WRITE, _MAP_SHARED, local, 0))
        finally:
            os.close(local)
        if base == _MAP_FAILED:
            raise CudaError(CUDA_ERROR_MAP_FAILED, f"cannot map {length} bytes")
        with self._lock:
            self._opened[base + offset] = (base, length)
        return base + offset, size

    def close(self, base: int) -> None:
        with self._lock:
            mapping, length = self._opened.pop(base)
        libc.munmap(ffi.cast("void *", mapping), length)


def open_fd(pid: int, fd: int) -> int:
    """Descriptor `fd` of process `pid`, opened here."""
    try:
        return os.open(f"/proc/{pid}/fd/{fd}", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        raise CudaError(CUDA_ERROR_INVALID_HANDLE, f"process {pid} no longer shares that memory") from None
