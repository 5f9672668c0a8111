"""Entry points: IPC memory and event handles (cuIpc*), between processes of one machine.

Device memory on the CPU target is private anonymous memory; cuIpcGetMemHandle turns the pages
of the allocation into shared memory in place (after the context's work is done: a memfd gets
their contents and is mapped over them with MAP_FIXED, so the address and the bytes stay). The
64-byte handle names the owner's pid, the memfd's descriptor number and where the allocation
lies in it; another process opens the memfd through /proc/<pid>/fd and maps it. Event handles
name a shared page of two counters, records made and records completed: an opened event is
complete when the count completed reaches the count recorded when it was asked."""

from __future__ import annotations

import mmap
import os
import struct
import threading
import time

from . import context as ctxs
from .api import entry
from ..cdata import addr, ffi, libc, store
from ..curesult import (CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_VALUE,
                     CUDA_ERROR_MAP_FAILED, CudaError)
from .init_device import require
from .memory import host_backed_memory
from .stream_api import CU_EVENT_INTERPROCESS, Event, events

PAGE = mmap.PAGESIZE
_MEM_MAGIC, _EVENT_MAGIC = b"ZLIPCMEM", b"ZLIPCEVT"
# magic, pid, fd, offset of the allocation in the memfd, its size, the allocation's buffer id
_MEM_LAYOUT = struct.Struct("<8sIIQQQ")
_EVENT_LAYOUT = struct.Struct("<8sII")  # magic, pid, fd
CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1
_PROT_READ_WRITE, _MAP_SHARED, _MAP_FIXED = 0x3, 0x1, 0x10
_MAP_FAILED = (1 << 64) - 1
_lock = threading.Lock()
_exported: dict[int, tuple[object, int, int]] = {}  # allocation base -> (allocation, memfd, offset)
_opened: dict[bytes, list] = {}  # handle -> [base, mapping base, mapping length, references]


def _share(a) -> tuple[int, int]:
    """(memfd, offset of a.base in it): the allocation's pages made shared, in place."""
    lo = a.base // PAGE * PAGE
    length = -(-(a.base + a.size) // PAGE) * PAGE - lo
    ctxs.current().synchronize()  # nothing may write these pages while they are copied
    fd = os.memfd_create("zluda-ipc", 0)
    os.ftruncate(fd, length)
    os.pwrite(fd, ffi.buffer(ffi.cast("char *", lo), length), 0)
    got = addr(libc.mmap(ffi.cast("void *", lo), length, _PROT_READ_WRITE, _MAP_SHARED | _MAP_FIXED, fd, 0))
    if got != lo:
        os.close(fd)
        raise CudaError(CUDA_ERROR_MAP_FAILED, "cannot remap the allocation as shared memory")
    return fd, a.base - lo


@entry("cuIpcGetMemHandle")
def cuIpcGetMemHandle(phandle, dptr):
    require(phandle)
    ctxs.current()
    a = host_backed_memory("IPC memory handles (cuIpcGetMemHandle)").find(dptr)
    if a is None or a.kind != "device":
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{dptr:#x} is not device memory of cuMemAlloc")
    with _lock:
        known = _exported.get(a.base)
        if known is None or known[0] is not a:  # new, or the address was freed and reused
            if known is not None:
                os.close(known[1])
            known = _exported[a.base] = (a, *_share(a))
    _, fd, offset = known
    ffi.memmove(phandle, _MEM_LAYOUT.pack(_MEM_MAGIC, os.getpid(), fd, offset, a.size, a.buffer_id).ljust(64, b"\0"), 64)


def _open_fd(pid: int, fd: int) -> int:
    try:
        return os.open(f"/proc/{pid}/fd/{fd}", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        raise CudaError(CUDA_ERROR_INVALID_HANDLE, f"process {pid} no longer shares that memory") from None


@entry("cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle")
def cuIpcOpenMemHandle(pdptr, handle, flags):
    require(pdptr)
    ctx = ctxs.current()
    memory = host_backed_memory("IPC memory handles (cuIpcOpenMemHandle)")
    raw = bytes(ffi.buffer(ffi.addressof(handle), 64))
    magic, pid, fd, offset, size, _ = _MEM_LAYOUT.unpack_from(raw)
    if magic != _MEM_MAGIC or flags & ~CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "not a memory handle of cuIpcGetMemHandle, or bad flags")
    if pid == os.getpid():
        raise CudaError(CUDA_ERROR_INVALID_CONTEXT, "a memory handle cannot be opened in the process that made it")
    with _lock:
        known = _opened.get(raw)
        if known is not None:  # opened already: the same address, one more reference
            known[3] += 1
            store(pdptr, known[0])
            return
        local = _open_fd(pid, fd)
        try:
            length = -(-(offset + size) // PAGE) * PAGE
            base = addr(libc.mmap(ffi.NULL, length, _PROT_READ_WRITE, _MAP_SHARED, local, 0))
        finally:
            os.close(local)
        if base == _MAP_FAILED:
            raise CudaError(CUDA_ERROR_MAP_FAILED, f"cannot map {length} bytes")
        memory.add(base + offset, size, "ipc", 0, ctx)
        _opened[raw] = [base + offset, base, length, 1]
    store(pdptr, base + offset)


@entry("cuIpcCloseMemHandle")
def cuIpcCloseMemHandle(dptr):
    with _lock:
        raw, entry_ = next(((k, v) for k, v in _opened.items() if v[0] == dptr), (None, None))
        if entry_ is None:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{dptr:#x} is not an opened IPC memory handle")
        entry_[3] -= 1
        if entry_[3]:
            return
        del _opened[raw]
    ctxs.current().synchronize()  # work queued before may still use it
    host_backed_memory("IPC memory handles (cuIpcCloseMemHandle)").release(dptr)
    libc.munmap(ffi.cast("void *", entry_[1]), entry_[2])


# ---- events ----
class SharedCounters:
    """Two u64 on a shared page: records made, records completed."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.map = mmap.mmap(fd, PAGE)

    def get(self) -> tuple[int, int]:
        return struct.unpack_from("<QQ", self.map)

    def bump(self, index: int) -> None:
        struct.pack_into("<Q", self.map, 8 * index, self.get()[index] + 1)


class RemoteDone:
    """The `done` of an opened event's pseudo-op: it is set once the owner completed every
    record it had made when the op was taken."""

    def __init__(self, counters: SharedCounters) -> None:
        self.counters, self.target = counters, counters.get()[0]

    def is_set(self) -> bool:
        return self.counters.get()[1] >= self.target

    def wait(self, timeout: float | None = None) -> bool:
        while not self.is_set():
            time.sleep(0.0005)
        return True


class RemoteOp:
    def __init__(self, counters: SharedCounters) -> None:
        self.done, self.finished_at = RemoteDone(counters), 0.0


class OpenedEvent(Event):
    """An event of another process: its last record is whatever the owner recorded last."""

    def __init__(self, flags: int, counters: SharedCounters) -> None:
        super().__init__(flags)
        self.counters = counters

    @property
    def op(self):
        return RemoteOp(self.counters)

    @op.setter
    def op(self, value) -> None:
        pass  # recording an opened event here is not shared back (NVIDIA: undefined)


def counters_of(ev: Event) -> SharedCounters:
    """An interprocess event's shared counters, made at its first export."""
    counters = getattr(ev, "counters", None)
    if counters is None:
        fd = os.memfd_create("zluda-ipc-event", 0)
        os.ftruncate(fd, PAGE)
        counters = ev.counters = SharedCounters(fd)
    return counters


@entry("cuIpcGetEventHandle")
def cuIpcGetEventHandle(phandle, hevent):
    require(phandle)
    ev = events.get(addr(hevent))
    if not ev.flags & CU_EVENT_INTERPROCESS:
        # CUDA_ERROR_INVALID_HANDLE, as an H200 answers (tests/hardware/golden/api_probe.txt)
        raise CudaError(CUDA_ERROR_INVALID_HANDLE, "the event was not created with CU_EVENT_INTERPROCESS")
    counters = counters_of(ev)
    ffi.memmove(phandle, _EVENT_LAYOUT.pack(_EVENT_MAGIC, os.getpid(), counters.fd).ljust(64, b"\0"), 64)


@entry("cuIpcOpenEventHandle")
def cuIpcOpenEventHandle(pevent, handle):
    require(pevent)
    ctxs.current()
    magic, pid, fd = _EVENT_LAYOUT.unpack_from(bytes(ffi.buffer(ffi.addressof(handle), 64)))
    if magic != _EVENT_MAGIC:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "not an event handle of cuIpcGetEventHandle")
    if pid == os.getpid():
        raise CudaError(CUDA_ERROR_INVALID_CONTEXT, "an event handle cannot be opened in the process that made it")
    ev = OpenedEvent(CU_EVENT_INTERPROCESS | 0x2, SharedCounters(_open_fd(pid, fd)))
    events.add(ev)
    ffi.cast("void **", pevent)[0] = ffi.cast("void *", ev.handle)
