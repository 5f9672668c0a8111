"""Entry points: IPC memory and event handles (cuIpc*), between processes of one machine.

Memory handles are the backend's (`backend.ipc`: backends/hostshare.py on the CPU backend, the
allocation's pages shared in place through a memfd; HIP's on the HIP backend); this module
checks the arguments and counts the openings of each handle. Event handles name a shared page
of two counters, records made and records completed: an opened event is complete when the count
completed reaches the count recorded when it was asked."""

from __future__ import annotations

import mmap
import os
import struct
import threading
import time

from . import context as ctxs
from .api import entry
from .. import backends
from ..backends.hostshare import open_fd
from ..cdata import addr, ffi, store
from ..curesult import CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_VALUE, CudaError
from .init_device import require
from .memory import _backend_errors, _memory
from .stream_api import CU_EVENT_INTERPROCESS, Event, events

PAGE = mmap.PAGESIZE
_EVENT_MAGIC = b"ZLIPCEVT"
_EVENT_LAYOUT = struct.Struct("<8sII")  # magic, pid, fd
CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1
_lock = threading.Lock()
_opened: dict[bytes, list] = {}  # handle -> [base, references]


@entry("cuIpcGetMemHandle")
def cuIpcGetMemHandle(phandle, dptr):
    require(phandle)
    ctxs.current()
    a = _memory().find(dptr)
    if a is None or a.kind != "device":
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{dptr:#x} is not device memory of cuMemAlloc")
    ctxs.current().synchronize()  # nothing may write the pages while the backend shares them
    with _lock, _backend_errors():
        handle = backends.select().ipc.get_handle(a.base, a.size, a.buffer_id)
    ffi.memmove(phandle, handle, 64)


@entry("cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle")
def cuIpcOpenMemHandle(pdptr, handle, flags):
    require(pdptr)
    ctx = ctxs.current()
    raw = bytes(ffi.buffer(ffi.addressof(handle), 64))
    if flags & ~CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"flags {flags:#x}")
    with _lock:
        known = _opened.get(raw)
        if known is not None:  # opened already: the same address, one more reference
            known[1] += 1
            store(pdptr, known[0])
            return
        with _backend_errors():
            base, size = backends.select().ipc.open(raw)
        _memory().add(base, size, "ipc", 0, ctx)
        _opened[raw] = [base, 1]
    store(pdptr, base)


@entry("cuIpcCloseMemHandle")
def cuIpcCloseMemHandle(dptr):
    with _lock:
        raw, entry_ = next(((k, v) for k, v in _opened.items() if v[0] == dptr), (None, None))
        if entry_ is None:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{dptr:#x} is not an opened IPC memory handle")
        entry_[1] -= 1
        if entry_[1]:
            return
        del _opened[raw]
    ctxs.current().synchronize()  # work queued before may still use it
    _memory().release(dptr)
    with _backend_errors():
        backends.select().ipc.close(dptr)


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
    ev = OpenedEvent(CU_EVENT_INTERPROCESS | 0x2, SharedCounters(open_fd(pid, fd)))
    events.add(ev)
    ffi.cast("void **", pevent)[0] = ffi.cast("void *", ev.handle)
