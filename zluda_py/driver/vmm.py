"""Entry points: virtual memory management (cuMemAddressReserve, cuMemCreate, cuMemMap,
cuMemSetAccess, ...). The backend's `vmm` does the mappings (backends/hostshare.py on the CPU
backend: host pages over memfds; backends/hip.py: HIP's equivalents); this module checks the
arguments and keeps the reservations, mappings and physical allocations. Runs of adjacent
accessible mappings are tracked as one device allocation each, so copies and kernels may span
the chunks a buffer grew by. A physical allocation lives until it is released and unmapped
everywhere; it can be exported as a POSIX file descriptor and imported in another process."""

from __future__ import annotations

import os
import threading

from . import context as ctxs, device as devices
from .api import entry
from .. import backends
from ..cdata import addr, ffi, store
from ..curesult import CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_SUPPORTED, CudaError
from .handles import HandleTable
from .init_device import require
from .memory import _backend_errors, _memory

ffi.cdef("""
typedef struct {
    int type; int requestedHandleTypes; CUmemLocation_ location; void *win32HandleMetaData;
    struct { unsigned char compressionType, gpuDirectRDMACapable; unsigned short usage; unsigned char reserved[4]; } allocFlags;
} CUmemAllocationProp;
""")

GRANULARITY = 2 << 20  # NVIDIA's minimum and recommended granularity for device memory
ACCESS_NONE, ACCESS_READ, ACCESS_READ_WRITE = 0, 1, 3
ALLOCATION_TYPE_PINNED, LOCATION_TYPE_DEVICE = 1, 1
HANDLE_TYPE_NONE, HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0, 1
_lock = threading.RLock()


def _vmm():
    """The backend's mappings (backends/hostshare.py HostVmm's interface)."""
    return backends.select().vmm


class Physical:
    """cuMemCreate's memory: the backend's physical allocation."""

    def __init__(self, token: int, size: int, device: int, handle_types: int) -> None:
        self.token, self.size, self.device, self.handle_types = token, size, device, handle_types
        self.refs = 1  # the handle; each mapping adds one
        self.handle = 0

    def drop(self) -> None:
        self.refs -= 1
        if self.refs == 0:
            with _backend_errors():
                _vmm().release(self.token)


class Mapping:
    def __init__(self, base: int, size: int, physical: Physical, offset: int) -> None:
        self.base, self.size, self.physical, self.offset = base, size, physical, offset
        self.access = ACCESS_NONE


class Reservation:
    def __init__(self, base: int, size: int) -> None:
        self.base, self.size = base, size
        self.mappings: dict[int, Mapping] = {}
        self.tracked: list[int] = []  # bases of the runs registered with the backend's tracker


physicals: HandleTable[Physical] = HandleTable("allocation handle", CUDA_ERROR_INVALID_VALUE)
_reservations: dict[int, Reservation] = {}


def _aligned(value: int, what: str) -> None:
    if value == 0 or value % GRANULARITY:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{what} {value:#x} is not a nonzero multiple of {GRANULARITY:#x}")


def _reservation_of(ptr: int, size: int) -> Reservation:
    for r in _reservations.values():
        if r.base <= ptr and ptr + size <= r.base + r.size:
            return r
    raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{ptr:#x}+{size:#x} is not inside a reserved range")


def _mappings_in(r: Reservation, ptr: int, size: int) -> list[Mapping]:
    """The mappings exactly covering [ptr, ptr+size)."""
    found, at = [], ptr
    while at < ptr + size:
        m = r.mappings.get(at)
        if m is None:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{at:#x} does not start a mapping")
        found.append(m)
        at += m.size
    if at != ptr + size:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "the range ends inside a mapping")
    return found


def _retrack(r: Reservation) -> None:
    """Track each run of adjacent accessible mappings as one device allocation. VMM memory is
    the device's, not a context's (owner None, as a module's variables): the calls need no
    current context and destroying one leaves the mappings (cuda-samples' memMapIPCDrv unmaps
    after cuCtxDestroy)."""
    memory = _memory()
    for base in r.tracked:
        memory.release(base)
    r.tracked = []
    run_base = run_end = None
    for base in sorted(r.mappings):
        m = r.mappings[base]
        if m.access != ACCESS_NONE and run_end == base:
            run_end += m.size
            continue
        if run_base is not None:
            r.tracked.append(memory.add(run_base, run_end - run_base, "vmm", 0, None).base)
        run_base, run_end = (base, base + m.size) if m.access != ACCESS_NONE else (None, None)
    if run_base is not None:
        r.tracked.append(memory.add(run_base, run_end - run_base, "vmm", 0, None).base)


def _prop(p) -> tuple[int, int]:
    """(device, handle types) of a CUmemAllocationProp."""
    if p.type != ALLOCATION_TYPE_PINNED or p.location.type != LOCATION_TYPE_DEVICE:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pinned device memory only")
    devices.get(p.location.id)
    if p.requestedHandleTypes not in (HANDLE_TYPE_NONE, HANDLE_TYPE_POSIX_FILE_DESCRIPTOR):
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, f"shareable handle types {p.requestedHandleTypes:#x}")
    return p.location.id, p.requestedHandleTypes


@entry("cuMemGetAllocationGranularity")
def cuMemGetAllocationGranularity(pgranularity, prop, option):
    require(pgranularity, prop)
    _prop(ffi.cast("CUmemAllocationProp *", prop))
    if option not in (0, 1):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"granularity option {option}")
    store(pgranularity, GRANULARITY)


@entry("cuMemAddressReserve")
def cuMemAddressReserve(pptr, size, alignment, hint, flags):
    require(pptr)
    _aligned(size, "size")
    if flags or alignment & (alignment - 1):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"alignment {alignment:#x}, flags {flags:#x}")
    with _backend_errors():
        base = _vmm().reserve(size, max(alignment, GRANULARITY), hint)
    with _lock:
        _reservations[base] = Reservation(base, size)
    store(pptr, base)


@entry("cuMemAddressFree")
def cuMemAddressFree(ptr, size):
    with _lock:
        r = _reservations.get(ptr)
        if r is None or r.size != size:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{ptr:#x}+{size:#x} is not a reservation")
        if r.mappings:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, "the range still has mappings")
        del _reservations[ptr]
    with _backend_errors():
        _vmm().free(ptr, size)


@entry("cuMemCreate")
def cuMemCreate(phandle, size, prop, flags):
    require(phandle, prop)
    _aligned(size, "size")
    if flags:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"flags {flags:#x}")
    device, handle_types = _prop(ffi.cast("CUmemAllocationProp *", prop))
    with _backend_errors():
        token = _vmm().create(size, device)
    store(phandle, physicals.add(Physical(token, size, device, handle_types)))


@entry("cuMemRelease")
def cuMemRelease(handle):
    physicals.remove(handle).drop()  # the memory stays while mapped


@entry("cuMemMap")
def cuMemMap(ptr, size, offset, handle, flags):
    physical = physicals.get(handle)
    _aligned(size, "size")
    if flags or offset % GRANULARITY or offset + size > physical.size:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"offset {offset:#x}, size {size:#x}, flags {flags:#x}")
    with _lock:
        r = _reservation_of(ptr, size)
        if any(m.base < ptr + size and ptr < m.base + m.size for m in r.mappings.values()):
            raise CudaError(CUDA_ERROR_INVALID_VALUE, "the range is mapped already")
        with _backend_errors():
            _vmm().map(ptr, size, offset, physical.token)
        physical.refs += 1
        r.mappings[ptr] = Mapping(ptr, size, physical, offset)


@entry("cuMemUnmap")
def cuMemUnmap(ptr, size):
    with _lock:
        r = _reservation_of(ptr, size)
        gone = _mappings_in(r, ptr, size)
        for ctx in ctxs.contexts.values():  # work queued before, in any context, may still use it
            ctx.synchronize()
        with _backend_errors():
            _vmm().unmap(ptr, size)
        for m in gone:
            del r.mappings[m.base]
            m.physical.drop()
        _retrack(r)


@entry("cuMemSetAccess")
def cuMemSetAccess(ptr, size, descs, count):
    if count == 0 or descs == ffi.NULL:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "no access descriptors")
    d = ffi.cast("CUmemAccessDesc *", descs)
    access, device = ACCESS_NONE, 0
    for i in range(count):
        if d[i].location.type != LOCATION_TYPE_DEVICE or d[i].flags not in (ACCESS_NONE, ACCESS_READ, ACCESS_READ_WRITE):
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"access descriptor {i}")
        devices.get(d[i].location.id)
        access, device = d[i].flags, d[i].location.id
    with _lock:
        r = _reservation_of(ptr, size)
        targets = _mappings_in(r, ptr, size)
        with _backend_errors():
            _vmm().set_access(ptr, size, device, access)
        for m in targets:
            m.access = access
        _retrack(r)


@entry("cuMemGetAccess")
def cuMemGetAccess(pflags, location, ptr):
    require(pflags, location)
    loc = ffi.cast("CUmemLocation_ *", location)
    if loc.type != LOCATION_TYPE_DEVICE:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"location type {loc.type}")
    devices.get(loc.id)
    with _lock:
        r = _reservation_of(ptr, 1)
        m = next((m for m in r.mappings.values() if m.base <= ptr < m.base + m.size), None)
    if m is None:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{ptr:#x} is not mapped")
    store(pflags, m.access)


@entry("cuMemRetainAllocationHandle")
def cuMemRetainAllocationHandle(phandle, ptr):
    require(phandle)
    p = addr(ptr)
    with _lock:
        r = _reservation_of(p, 1)
        m = next((m for m in r.mappings.values() if m.base <= p < m.base + m.size), None)
        if m is None:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{p:#x} is not mapped")
        if physicals.find(m.physical.handle) is not m.physical:  # released already: a new handle
            physicals.add(m.physical)
        m.physical.refs += 1
    store(phandle, m.physical.handle)


@entry("cuMemGetAllocationPropertiesFromHandle")
def cuMemGetAllocationPropertiesFromHandle(prop, handle):
    require(prop)
    physical = physicals.get(handle)
    p = ffi.cast("CUmemAllocationProp *", prop)
    ffi.memmove(p, b"\0" * ffi.sizeof("CUmemAllocationProp"), ffi.sizeof("CUmemAllocationProp"))
    p.type, p.requestedHandleTypes = ALLOCATION_TYPE_PINNED, physical.handle_types
    p.location.type, p.location.id = LOCATION_TYPE_DEVICE, physical.device


@entry("cuMemExportToShareableHandle")
def cuMemExportToShareableHandle(out, handle, handle_type, flags):
    require(out)
    physical = physicals.get(handle)
    if handle_type != HANDLE_TYPE_POSIX_FILE_DESCRIPTOR or not physical.handle_types & HANDLE_TYPE_POSIX_FILE_DESCRIPTOR:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "the allocation was not made exportable as a POSIX file descriptor")
    with _backend_errors():
        ffi.cast("int *", out)[0] = _vmm().export_fd(physical.token)


@entry("cuMemImportFromShareableHandle")
def cuMemImportFromShareableHandle(phandle, os_handle, handle_type):
    require(phandle)
    if handle_type != HANDLE_TYPE_POSIX_FILE_DESCRIPTOR:
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, f"handle type {handle_type:#x}")
    fd = addr(os_handle)  # the descriptor itself, cast to a pointer
    try:
        os.fstat(fd)
    except OSError:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{fd} is not an open file descriptor") from None
    with _backend_errors():
        token, size = _vmm().import_fd(fd)
    store(phandle, physicals.add(Physical(token, size, ctxs.current().device.ordinal, HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)))


@entry("cuMemMapArrayAsync")
def cuMemMapArrayAsync(infos, count, stream):
    raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "sparse CUDA arrays are not implemented")
