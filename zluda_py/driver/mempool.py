"""Entry points: stream-ordered memory pools (cuMemAllocAsync, cuMemFreeAsync, cuMemPool*).

A pool hands out device allocations of the backend and keeps freed ones for reuse: a free is
an op of its stream, so the block returns to the pool only once the work queued before the free
has run, and a later allocation of the same rounded size takes it back. Above the release
threshold the pool gives cached blocks back to the system as frees complete; cuMemPoolTrimTo
gives back what it is told. In a stream capture the calls become memory allocation and free
nodes (graphs.MemAlloc, graphs.MemFree)."""

from __future__ import annotations

import threading

from . import capture, context as ctxs, device as devices
from .api import entry
from ..cdata import addr, ffi, read_bytes, store, store_ptr
from ..curesult import (CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_SUPPORTED, CUDA_ERROR_OUT_OF_MEMORY, CudaError)
from .graphs import MemAlloc, MemFree, free_graph_memory
from .handles import HandleTable
from .init_device import require
from .memory import _free_device, _memory

GRANULE = 512  # allocations are rounded to NVIDIA's cuMemAlloc alignment
ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, ATTR_REUSE_ALLOW_OPPORTUNISTIC, ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES = 1, 2, 3
ATTR_RELEASE_THRESHOLD, ATTR_RESERVED_MEM_CURRENT, ATTR_RESERVED_MEM_HIGH = 4, 5, 6
ATTR_USED_MEM_CURRENT, ATTR_USED_MEM_HIGH = 7, 8
ALLOCATION_TYPE_PINNED, LOCATION_TYPE_DEVICE = 1, 1
HANDLE_TYPE_NONE, HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0, 1
ACCESS_PROT_READWRITE = 3


class MemPool:
    def __init__(self, device: int, props: bytes) -> None:
        # props' maxSize is kept in `props` only: an H200 let an 8 MiB allocation through a pool
        # created with maxSize 4 MiB (tests/hardware/golden/api_probe.txt), so it limits nothing here
        self.device, self.props = device, props
        self.handle = 0
        self.lock = threading.Lock()
        self.reuse = {ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: 1, ATTR_REUSE_ALLOW_OPPORTUNISTIC: 1,
                      ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: 1}
        self.threshold = 0
        self.cached: dict[int, list] = {}  # rounded size -> free blocks (backend allocations)
        self.live: dict[int, object] = {}  # base -> block handed out
        self.reserved_high = self.used_high = 0

    def _live(self) -> list:
        """Blocks handed out and not freed elsewhere (cuMemFree of pool memory frees it at once)."""
        memory = _memory()
        for base, a in list(self.live.items()):
            if memory.find(base) is not a:
                del self.live[base]
        return list(self.live.values())

    def used(self) -> int:
        return sum(a.size for a in self._live())

    def reserved(self) -> int:
        return self.used() + sum(a.size for blocks in self.cached.values() for a in blocks)

    def allocate(self, size: int):
        if size == 0:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, "allocation of 0 bytes")
        size = -(-size // GRANULE) * GRANULE
        with self.lock:
            blocks = self.cached.get(size)
            if blocks:
                a = blocks.pop()
            else:
                try:
                    a = _memory().allocate(size, "device", 0, ctxs.current())
                except MemoryError:
                    raise CudaError(CUDA_ERROR_OUT_OF_MEMORY, f"cannot allocate {size} bytes") from None
                a.pool = self.handle
            self.live[a.base] = a
            self.used_high = max(self.used_high, self.used())
            self.reserved_high = max(self.reserved_high, self.reserved())
            return a

    def give_back(self, base: int) -> None:
        """The stream reached the free: the block is the pool's again."""
        with self.lock:
            a = self.live.pop(base, None)
            if a is None or _memory().find(base) is not a:
                return
            self.cached.setdefault(a.size, []).append(a)
            self._trim(self.threshold)

    def _trim(self, keep: int) -> None:
        reserved = self.reserved()
        for size in sorted(self.cached, reverse=True):
            blocks = self.cached[size]
            while blocks and reserved > keep:
                _memory().release(blocks.pop().base)
                reserved -= size
        self.cached = {s: b for s, b in self.cached.items() if b}

    def trim(self, keep: int) -> None:
        with self.lock:
            self._trim(keep)

    def owns(self, base: int) -> bool:
        return base in self.live


pools: HandleTable[MemPool] = HandleTable("memory pool", CUDA_ERROR_INVALID_VALUE)
_default: dict[int, MemPool] = {}
_current: dict[int, MemPool] = {}
_lock = threading.Lock()


def _props(device: int, handle_types: int = HANDLE_TYPE_NONE) -> bytes:
    p = ffi.new("CUmemPoolProps *")
    p.allocType, p.handleTypes, p.location.type, p.location.id = ALLOCATION_TYPE_PINNED, handle_types, LOCATION_TYPE_DEVICE, device
    return read_bytes(addr(p), ffi.sizeof("CUmemPoolProps"))


def default_pool(device: int) -> MemPool:
    devices.get(device)
    with _lock:
        pool = _default.get(device)
        if pool is None:
            pool = _default[device] = MemPool(device, _props(device))
            pools.add(pool)
        return pool


def current_pool(device: int) -> MemPool:
    return _current.get(device) or default_pool(device)


def _pool(h) -> MemPool:
    return pools.get(addr(h))


def _alloc_async(dptr, size: int, pool: MemPool, stream) -> None:
    require(dptr)
    s = ctxs.resolve_stream(addr(stream))
    if s.capture is not None:
        # a recapture's allocation node keeps the memory its graph holds
        store(dptr, capture.record_node(s, MemAlloc(size, pool.props)).work.allocation.base)
        return
    store(dptr, pool.allocate(size).base)


@entry("cuMemAllocAsync")
def cuMemAllocAsync(dptr, size, stream):
    _alloc_async(dptr, size, current_pool(ctxs.current().device.ordinal), stream)


@entry("cuMemAllocFromPoolAsync")
def cuMemAllocFromPoolAsync(dptr, size, hpool, stream):
    _alloc_async(dptr, size, _pool(hpool), stream)


@entry("cuMemFreeAsync")
def cuMemFreeAsync(ptr, stream):
    s = ctxs.resolve_stream(addr(stream))
    if s.capture is not None:
        capture.record_node(s, MemFree(ptr))
        return
    if free_graph_memory(ptr):
        return  # its address stays the graph's, for the next launch (graphs.MemAlloc)
    pool = next((p for p in pools.values() if p.owns(ptr)), None)
    if pool is not None:
        s.ctx.submit(s, lambda: pool.give_back(ptr))
        return
    a = _memory().find(ptr)  # cuMemAlloc'd memory may be freed stream-ordered too
    if a is None or a.base != ptr:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{ptr:#x} is not a device allocation")
    s.ctx.submit(s, lambda: _free_device(ptr))


# ---- pools ----
@entry("cuMemPoolCreate")
def cuMemPoolCreate(ppool, pprops):
    require(ppool, pprops)
    p = ffi.cast("CUmemPoolProps *", pprops)
    if p.allocType != ALLOCATION_TYPE_PINNED or p.location.type != LOCATION_TYPE_DEVICE:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "pools of pinned device memory only")
    devices.get(p.location.id)
    if p.handleTypes not in (HANDLE_TYPE_NONE, HANDLE_TYPE_POSIX_FILE_DESCRIPTOR):
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, f"shareable handle types {p.handleTypes:#x}")
    props = read_bytes(addr(p), ffi.sizeof("CUmemPoolProps"))
    store_ptr(ppool, pools.add(MemPool(p.location.id, props)))


@entry("cuMemPoolDestroy")
def cuMemPoolDestroy(hpool):
    pool = _pool(hpool)
    if pool in _default.values():
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "a device's default pool cannot be destroyed")
    pools.remove(pool.handle)
    for device, p in list(_current.items()):
        if p is pool:
            del _current[device]
    pool.trim(0)  # memory still handed out stays valid until it is freed


@entry("cuMemPoolTrimTo")
def cuMemPoolTrimTo(hpool, keep):
    _pool(hpool).trim(keep)


@entry("cuMemPoolSetAttribute")
def cuMemPoolSetAttribute(hpool, attr, value):
    require(value)
    pool = _pool(hpool)
    if attr in pool.reuse:
        pool.reuse[attr] = ffi.cast("int *", value)[0]
    elif attr == ATTR_RELEASE_THRESHOLD:
        pool.threshold = ffi.cast("unsigned long long *", value)[0]
    elif attr in (ATTR_RESERVED_MEM_HIGH, ATTR_USED_MEM_HIGH):
        if ffi.cast("unsigned long long *", value)[0] != 0:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, "a high watermark can only be reset to 0")
        with pool.lock:
            if attr == ATTR_RESERVED_MEM_HIGH:
                pool.reserved_high = pool.reserved()
            else:
                pool.used_high = pool.used()
    else:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"pool attribute {attr} cannot be set")


@entry("cuMemPoolGetAttribute")
def cuMemPoolGetAttribute(hpool, attr, value):
    require(value)
    pool = _pool(hpool)
    if attr in pool.reuse:
        ffi.cast("int *", value)[0] = pool.reuse[attr]
        return
    with pool.lock:
        values = {ATTR_RELEASE_THRESHOLD: pool.threshold, ATTR_RESERVED_MEM_CURRENT: pool.reserved(),
                  ATTR_RESERVED_MEM_HIGH: pool.reserved_high, ATTR_USED_MEM_CURRENT: pool.used(),
                  ATTR_USED_MEM_HIGH: pool.used_high}
    if attr not in values:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"pool attribute {attr}")
    ffi.cast("unsigned long long *", value)[0] = values[attr]


def _check_location(location) -> None:
    if location.type != LOCATION_TYPE_DEVICE:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"location type {location.type}")
    devices.get(location.id)


@entry("cuMemPoolSetAccess")
def cuMemPoolSetAccess(hpool, descs, count):
    _pool(hpool)
    if count and descs == ffi.NULL:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "NULL access descriptors")
    d = ffi.cast("CUmemAccessDesc *", descs)
    for i in range(count):
        _check_location(d[i].location)
        if d[i].flags != ACCESS_PROT_READWRITE:  # the pool's own device always has read-write access
            raise CudaError(CUDA_ERROR_INVALID_VALUE, "the pool's device keeps read-write access")


@entry("cuMemPoolGetAccess")
def cuMemPoolGetAccess(pflags, hpool, location):
    require(pflags, location)
    _pool(hpool)
    _check_location(ffi.cast("CUmemLocation_ *", location))
    store(pflags, ACCESS_PROT_READWRITE)


@entry("cuMemPoolExportToShareableHandle", "cuMemPoolImportFromShareableHandle")
def cuMemPoolShareable(out, pool_or_handle, handle_type, flags):
    raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "sharing memory pools between processes is not implemented (cuIpc* shares allocations)")


@entry("cuMemPoolExportPointer", "cuMemPoolImportPointer")
def cuMemPoolPointer(out, pool_or_ptr, data):
    raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "sharing memory pools between processes is not implemented (cuIpc* shares allocations)")


# ---- a device's pools ----
@entry("cuDeviceGetDefaultMemPool")
def cuDeviceGetDefaultMemPool(ppool, dev):
    require(ppool)
    store_ptr(ppool, default_pool(dev).handle)


@entry("cuDeviceGetMemPool")
def cuDeviceGetMemPool(ppool, dev):
    require(ppool)
    store_ptr(ppool, current_pool(dev).handle)


@entry("cuDeviceSetMemPool")
def cuDeviceSetMemPool(dev, hpool):
    devices.get(dev)
    pool = _pool(hpool)
    if pool.device != dev:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"the pool belongs to device {pool.device}")
    _current[dev] = pool


def _device_of(location, alloc_type: int) -> int:
    require(location)
    loc = ffi.cast("CUmemLocation_ *", location)
    if alloc_type != ALLOCATION_TYPE_PINNED or loc.type != LOCATION_TYPE_DEVICE:
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "pools of pinned device memory only")
    devices.get(loc.id)
    return loc.id


@entry("cuMemGetDefaultMemPool")
def cuMemGetDefaultMemPool(ppool, location, alloc_type):
    require(ppool)
    store_ptr(ppool, default_pool(_device_of(location, alloc_type)).handle)


@entry("cuMemGetMemPool")
def cuMemGetMemPool(ppool, location, alloc_type):
    require(ppool)
    store_ptr(ppool, current_pool(_device_of(location, alloc_type)).handle)


@entry("cuMemSetMemPool")
def cuMemSetMemPool(location, alloc_type, hpool):
    cuDeviceSetMemPool(_device_of(location, alloc_type), hpool)
