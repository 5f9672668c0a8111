"""Entry points: allocation, pointer queries, memcpy and memset in every form.

The backend's `memory` obtains the memory and moves the bytes (`copy`, `fill`: memmove and
memset on the CPU backend, where a device pointer is a host pointer); what the driver adds is
CUDA's checking (device ranges must lie inside an allocation) and ordering (copies and sets
run on a stream, the synchronous ones on the default stream, then wait)."""

from __future__ import annotations

import struct
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator

from . import capture, context as ctxs, textures, trace
from .api import entry
from ..cdata import addr, ffi, store, store_ptr
from ..curesult import (CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
                     CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_FOUND, CUDA_ERROR_OUT_OF_MEMORY,
                     CudaError)
from .init_device import require
from .. import backends, hostmem

if TYPE_CHECKING:
    from ..backends.tracking import Allocation, Memory


def _memory() -> Memory:
    """The selected backend's allocation tracker, which also copies and fills."""
    return backends.select().memory


@contextmanager
def _backend_errors() -> Iterator[None]:
    """A backend failure (e.g. a HIP error) becomes the CUresult it carries."""
    try:
        yield
    except CudaError:
        raise
    except Exception as e:
        code = getattr(e, "cu_result", None)
        if code is None:
            raise
        raise CudaError(code, str(e)) from e

CU_MEMORYTYPE_HOST, CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_ARRAY, CU_MEMORYTYPE_UNIFIED = 1, 2, 3, 4
CU_MEMHOSTALLOC_FLAGS = 0x7  # PORTABLE | DEVICEMAP | WRITECOMBINED
CU_MEMHOSTREGISTER_FLAGS = 0xF  # PORTABLE | DEVICEMAP | IOMEMORY | READ_ONLY
CU_MEMHOSTREGISTER_READ_ONLY = 0x8
CU_MEM_ATTACH_GLOBAL, CU_MEM_ATTACH_HOST = 0x1, 0x2


# ---- allocation ----
def _allocate(size: int, kind: str, flags: int) -> Allocation:
    ctx = ctxs.current()
    capture.check_unsafe("a synchronous allocation")
    if size == 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "allocation of 0 bytes")
    try:
        with _backend_errors():
            return _memory().allocate(size, kind, flags, ctx)
    except (MemoryError, OverflowError):  # OverflowError: more than the backend can even ask for
        raise CudaError(CUDA_ERROR_OUT_OF_MEMORY, f"cannot allocate {size} bytes") from None


@entry("cuMemAlloc_v2")
def cuMemAlloc(dptr, size):
    require(dptr)
    store(dptr, _allocate(size, "device", 0).base)


@entry("cuMemAllocPitch_v2")
def cuMemAllocPitch(dptr, ppitch, width, height, element_size):
    require(dptr, ppitch)
    if element_size not in (4, 8, 16) or width == 0 or height == 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"pitched allocation {width}x{height}, element size {element_size}")
    pitch = (width + 511) // 512 * 512
    store(dptr, _allocate(pitch * height, "device", 0).base)
    store(ppitch, pitch)


@entry("cuMemAllocManaged")
def cuMemAllocManaged(dptr, size, flags):
    require(dptr)
    if flags not in (CU_MEM_ATTACH_GLOBAL, CU_MEM_ATTACH_HOST):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"managed memory flags {flags:#x}")
    store(dptr, _allocate(size, "managed", flags).base)


# base -> what gives back the address space of device memory the driver mapped itself
# (external memory buffers, external.py), once cuMemFree or its context's end releases it
unmappers: dict[int, Callable[[], None]] = {}


def _release(base: int) -> None:
    with _backend_errors():
        _memory().release(base)
        unmap = unmappers.pop(base, None)
        if unmap is not None:
            unmap()


def _free_device(ptr: int) -> None:
    a = _memory().find(ptr)
    if a is None or a.base != ptr or a.kind not in ("device", "managed", "external"):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{ptr:#x} is not a device allocation")
    _release(ptr)


@entry("cuMemFree_v2")
def cuMemFree(ptr):
    if ptr == 0:
        return
    capture.check_unsafe("cuMemFree")
    ctxs.current().synchronize()  # cuMemFree synchronizes: kernels may still use the memory
    from .graphs import free_graph_memory  # graphs imports this module
    if not free_graph_memory(ptr):
        _free_device(ptr)


@entry("cuMemGetInfo_v2")
def cuMemGetInfo(free, total):
    require(free, total)
    dev = ctxs.current().device
    used = sum(a.size for a in _memory().owned_by(ctxs.current()) if a.kind in ("device", "managed"))
    store(total, dev.total_mem)
    store(free, max(dev.total_mem - used, 0))


@entry("cuMemGetAddressRange_v2")
def cuMemGetAddressRange(pbase, psize, ptr):
    ctxs.current()
    a = _memory().find(ptr)
    if a is None:
        raise CudaError(CUDA_ERROR_NOT_FOUND, f"{ptr:#x} is not inside an allocation")
    if pbase:
        store(pbase, a.base)
    if psize:
        store(psize, a.size)


@entry("cuMemAllocHost_v2")
def cuMemAllocHost(pp, size):
    require(pp)
    store_ptr(pp, _allocate(size, "host", 0).base)


@entry("cuMemHostAlloc")
def cuMemHostAlloc(pp, size, flags):
    require(pp)
    if flags & ~CU_MEMHOSTALLOC_FLAGS:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"host allocation flags {flags:#x}")
    store_ptr(pp, _allocate(size, "host", flags).base)


@entry("cuMemFreeHost")
def cuMemFreeHost(p):
    ptr = addr(p)
    if ptr == 0:
        return  # free(NULL), as NVIDIA's driver (cudart's cudaFreeHost(NULL) of a 0-byte cudaMallocHost reaches it)
    a = _memory().find(ptr)
    if a is None or a.base != ptr or a.kind != "host":
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{ptr:#x} was not allocated by cuMemHostAlloc")
    capture.check_unsafe("cuMemFreeHost")
    ctxs.current().synchronize()
    with _backend_errors():
        _memory().release(ptr)


@entry("cuMemHostGetDevicePointer_v2")
def cuMemHostGetDevicePointer(pdptr, p, flags):
    require(pdptr)
    if flags != 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "flags must be 0")
    ptr = addr(p)
    a = _memory().find(ptr)
    if a is None or a.kind not in ("host", "registered"):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{ptr:#x} is not page-locked host memory")
    store(pdptr, ptr)


@entry("cuMemHostGetFlags")
def cuMemHostGetFlags(pflags, p):
    require(pflags)
    a = _memory().find(addr(p))
    if a is None or a.kind not in ("host", "registered"):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{addr(p):#x} is not page-locked host memory")
    store(pflags, a.flags)


@entry("cuMemHostRegister_v2")
def cuMemHostRegister(p, size, flags):
    ptr = addr(p)
    if not ptr or not size or flags & ~CU_MEMHOSTREGISTER_FLAGS:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"register {ptr:#x}+{size} flags {flags:#x}")
    check_host_range(ptr, size, "registered")
    if _memory().overlapping(ptr, size):
        raise CudaError(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, f"{ptr:#x}+{size}")
    with _backend_errors():
        _memory().register(ptr, size, flags, ctxs.current())


@entry("cuMemHostUnregister")
def cuMemHostUnregister(p):
    ptr = addr(p)
    if ptr == 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "NULL host pointer")
    a = _memory().find(ptr)
    if a is None or a.base != ptr or a.kind != "registered":
        raise CudaError(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, f"{ptr:#x}")
    with _backend_errors():
        _memory().release(ptr)


def free_context(ctx) -> None:
    """A destroyed context's allocations go with it."""
    for a in _memory().owned_by(ctx):
        _release(a.base)


# ---- pointer attributes ----
def _bool(value: bool) -> bytes:
    """Boolean attributes are written as 32-bit integers: cudart reads IS_MANAGED as one."""
    return struct.pack("I", int(value))


def _attribute(number: int, a: Allocation | None, ptr: int, strict: bool) -> bytes:
    """The bytes cuPointerGetAttribute writes for attribute `number` (sizes per cuda.h).
    `strict` (the singular call): an attribute the pointer has no value for is
    CUDA_ERROR_INVALID_VALUE; cuPointerGetAttributes writes its NULL value instead."""
    if a is None:
        return {1: struct.pack("Q", 0), 2: struct.pack("I", 0), 3: struct.pack("Q", 0), 4: struct.pack("Q", 0),
                8: _bool(False), 9: struct.pack("i", -2), 13: _bool(False)}.get(number, b"")
    mem_type = CU_MEMORYTYPE_HOST if a.kind in ("host", "registered") else CU_MEMORYTYPE_DEVICE
    host_accessible = a.kind in ("host", "registered", "managed")
    if number == 4 and not host_accessible and strict:  # cuda.h: no host pointer -> INVALID_VALUE
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{ptr:#x} is device memory: it has no host pointer")
    # a module's variable has no owner: it is the current context's (a library loads in every one)
    owner = a.owner if a.owner is not None else ctxs.current()
    values = {
        1: struct.pack("Q", owner.handle),  # CONTEXT
        2: struct.pack("I", mem_type),  # MEMORY_TYPE
        3: struct.pack("Q", ptr),  # DEVICE_POINTER
        4: struct.pack("Q", ptr if host_accessible else 0),  # HOST_POINTER
        5: struct.pack("QI4x", 0, 0),  # P2P_TOKENS
        6: _bool(getattr(a, "sync_memops", True)),  # SYNC_MEMOPS (pointer_attrs.py sets it)
        7: struct.pack("Q", a.buffer_id),  # BUFFER_ID
        8: _bool(a.kind == "managed"),  # IS_MANAGED
        9: struct.pack("i", owner.device.ordinal),  # DEVICE_ORDINAL
        10: _bool(False),  # IS_LEGACY_CUDA_IPC_CAPABLE
        11: struct.pack("Q", a.base),  # RANGE_START_ADDR
        12: struct.pack("Q", a.size),  # RANGE_SIZE
        13: _bool(True),  # MAPPED
        14: struct.pack("Q", 0),  # ALLOWED_HANDLE_TYPES
        15: _bool(False),  # IS_GPU_DIRECT_RDMA_CAPABLE
        16: struct.pack("I", 1 if a.flags & CU_MEMHOSTREGISTER_READ_ONLY and a.kind == "registered" else 3),  # ACCESS_FLAGS: READ or READWRITE
        17: struct.pack("Q", a.pool),  # MEMPOOL_HANDLE
        18: struct.pack("Q", a.size),  # MAPPING_SIZE
        19: struct.pack("Q", a.base),  # MAPPING_BASE_ADDR
        20: struct.pack("Q", a.buffer_id),  # MEMORY_BLOCK_ID
        21: _bool(False),  # IS_HW_DECOMPRESS_CAPABLE
    }
    if number not in values:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"pointer attribute {number}")
    return values[number]


@entry("cuPointerGetAttribute")
def cuPointerGetAttribute(data, attribute, ptr):
    require(data)
    a = _memory().find(ptr)
    if a is None:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{ptr:#x} is not a CUDA pointer")
    value = _attribute(attribute, a, ptr, strict=True)
    ffi.memmove(data, value, len(value))


@entry("cuPointerGetAttributes")
def cuPointerGetAttributes(count, attributes, data, ptr):
    require(attributes, data)
    a = _memory().find(ptr)
    if trace.enabled():
        trace.note("cuPointerGetAttributes", f"attributes {[attributes[i] for i in range(count)]} of {a}")
    for i in range(count):
        value = _attribute(attributes[i], a, ptr, strict=False)
        if data[i] != ffi.NULL:
            ffi.memmove(data[i], value, len(value))


# ---- copies ----
def check_device_range(ptr: int, size: int) -> None:
    """A device-side range must lie inside one allocation (or a module's global); an empty one
    is not checked (numba copies 0-byte arrays, whose pointer is NULL, as NVIDIA's driver allows)."""
    if size == 0:
        return
    a = _memory().find(ptr)
    if a is None or ptr + size > a.base + a.size:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"device range {ptr:#x}+{size} is outside every allocation")
    if a.kind == "registered":
        check_host_range(ptr, size, "registered")


def check_host_range(ptr: int, size: int, what: str, writable: bool = False) -> None:
    """A host range the program passed must be mapped memory (NULL, unmapped or protected
    memory is CUDA_ERROR_INVALID_VALUE, never a segfault of the host). Our own allocations
    need no probe; registered memory does, being the program's to munmap while registered
    (NVIDIA's driver then answers errors). An empty range is not checked."""
    if size == 0:
        return
    a = _memory().find(ptr)
    if a is not None and a.kind != "registered" and ptr + size <= a.base + a.size:
        return
    if not hostmem.valid(ptr, size, writable):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{what} host range {ptr:#x}+{size} is not "
                        f"{'writable' if writable else 'readable'} memory of this process")


def _check_any_range(ptr: int, size: int, what: str, writable: bool = False) -> None:
    """A unified pointer: if it points into an allocation the whole range must fit, else it is
    host memory."""
    a = _memory().find(ptr)
    if a is not None and ptr + size > a.base + a.size:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"range {ptr:#x}+{size} overruns its allocation")
    if a is None or a.kind == "registered":
        check_host_range(ptr, size, what, writable)


def run(stream_handle: int, fn: Callable[[], None], sync: bool) -> None:
    """Queue fn on the stream; a synchronous call also waits for it, and runs it itself when
    the stream has nothing else to do."""
    s = ctxs.resolve_stream(stream_handle)
    if sync and s.kind == "legacy":  # a synchronous call: potentially unsafe during a capture
        capture.check_unsafe("a synchronous copy or set")
    op = s.ctx.submit(s, fn, inline=sync)
    if sync and op is not None:  # None: recorded into a stream capture
        if op.claimed:
            s.run_claimed(op)
        else:
            op.done.wait()
        s.raise_error()


class Memcpy:
    """A checked copy described by a CUDA_MEMCPY3D (kept, for graph nodes' GetParams): a
    stream op, and what a graph's memcpy node holds."""

    node_type = 1  # CU_GRAPH_NODE_TYPE_MEMCPY

    def __init__(self, desc) -> None:
        self.desc = ffi.new("CUDA_MEMCPY3D *", desc[0])
        self._copy = _copy_3d(self.desc, None)

    @classmethod
    def linear(cls, dst: int, src: int, size: int) -> Memcpy:
        """A 1D copy between unified addresses (the caller checked both ranges)."""
        d = ffi.new("CUDA_MEMCPY3D *")
        d.srcMemoryType = d.dstMemoryType = CU_MEMORYTYPE_UNIFIED
        d.srcDevice, d.dstDevice, d.WidthInBytes, d.Height, d.Depth = src, dst, size, 1, 1
        return cls(d)

    @classmethod
    def planar(cls, p) -> Memcpy:
        """A CUDA_MEMCPY2D as the equivalent CUDA_MEMCPY3D."""
        d = ffi.new("CUDA_MEMCPY3D *")
        for side in ("src", "dst"):
            for field in ("XInBytes", "Y", "MemoryType", "Host", "Device", "Array", "Pitch"):
                setattr(d, side + field, getattr(p, side + field))
            setattr(d, side + "Height", p.Height)
        d.WidthInBytes, d.Height, d.Depth = p.WidthInBytes, p.Height, 1
        return cls(d)

    def __call__(self) -> None:
        self._copy()


def _copy(dst: int, src: int, size: int, stream: int, sync: bool) -> None:
    run(stream, Memcpy.linear(dst, src, size), sync)


def _pageable(*ptrs: int) -> bool:
    """Whether any of these host pointers is pageable memory (none of our allocations: not
    pinned, registered, device or managed). NVIDIA's async copies to or from pageable memory
    finish with respect to the host before they return (programs free or reuse a source buffer
    right after cuMemcpyHtoDAsync: Warp's arrays made from numpy temporaries), so ours run as
    synchronous copies on their stream."""
    return any(_memory().find(p) is None for p in ptrs)


@entry("cuMemcpy")
def cuMemcpy(dst, src, size):
    _check_any_range(dst, size, "destination", writable=True)
    _check_any_range(src, size, "source")
    _copy(dst, src, size, 0, True)


@entry("cuMemcpyAsync")
def cuMemcpyAsync(dst, src, size, stream):
    _check_any_range(dst, size, "destination", writable=True)
    _check_any_range(src, size, "source")
    _copy(dst, src, size, addr(stream), _pageable(dst, src))


@entry("cuMemcpyHtoD_v2")
def cuMemcpyHtoD(dst, src, size):
    check_device_range(dst, size)
    check_host_range(addr(src), size, "source")
    _copy(dst, addr(src), size, 0, True)


@entry("cuMemcpyHtoDAsync_v2")
def cuMemcpyHtoDAsync(dst, src, size, stream):
    check_device_range(dst, size)
    check_host_range(addr(src), size, "source")
    _copy(dst, addr(src), size, addr(stream), _pageable(addr(src)))


@entry("cuMemcpyDtoH_v2")
def cuMemcpyDtoH(dst, src, size):
    check_device_range(src, size)
    check_host_range(addr(dst), size, "destination", writable=True)
    _copy(addr(dst), src, size, 0, True)


@entry("cuMemcpyDtoHAsync_v2")
def cuMemcpyDtoHAsync(dst, src, size, stream):
    check_device_range(src, size)
    check_host_range(addr(dst), size, "destination", writable=True)
    _copy(addr(dst), src, size, addr(stream), _pageable(addr(dst)))


@entry("cuMemcpyDtoD_v2")
def cuMemcpyDtoD(dst, src, size):
    check_device_range(dst, size)
    check_device_range(src, size)
    _copy(dst, src, size, 0, True)


@entry("cuMemcpyDtoDAsync_v2")
def cuMemcpyDtoDAsync(dst, src, size, stream):
    check_device_range(dst, size)
    check_device_range(src, size)
    _copy(dst, src, size, addr(stream), False)


def _peer(dst, dst_ctx, src, src_ctx, size, stream, sync) -> None:
    ctxs.contexts.get(addr(dst_ctx))
    ctxs.contexts.get(addr(src_ctx))
    check_device_range(dst, size)
    check_device_range(src, size)
    _copy(dst, src, size, stream, sync)


@entry("cuMemcpyPeer")
def cuMemcpyPeer(dst, dst_ctx, src, src_ctx, size):
    _peer(dst, dst_ctx, src, src_ctx, size, 0, True)


@entry("cuMemcpyPeerAsync")
def cuMemcpyPeerAsync(dst, dst_ctx, src, src_ctx, size, stream):
    _peer(dst, dst_ctx, src, src_ctx, size, addr(stream), False)


def _endpoint(mem_type: int, host, device: int, array) -> int:
    if mem_type == CU_MEMORYTYPE_HOST:
        return addr(host)
    if mem_type in (CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_UNIFIED):
        return device
    if mem_type == CU_MEMORYTYPE_ARRAY:
        return textures.array_layout(addr(array))[0]
    raise CudaError(CUDA_ERROR_INVALID_VALUE, f"memory type {mem_type}")


def _layout(mem_type: int, array, pitch: int, rows: int) -> tuple[int, int]:
    """(pitch, rows per slice) of a copy's side: a CUDA array's own, else what the copy says."""
    if mem_type == CU_MEMORYTYPE_ARRAY:
        return textures.array_layout(addr(array))[1:3]
    return pitch, rows


def _copy_3d(p, depth: int) -> Callable[[], None]:
    """A strided copy of width x height x depth; 2D copies have depth 1 and no z."""
    has_z = depth is None
    depth = p.Depth if has_z else depth
    width, height = p.WidthInBytes, p.Height
    src = _endpoint(p.srcMemoryType, p.srcHost, p.srcDevice, p.srcArray)
    dst = _endpoint(p.dstMemoryType, p.dstHost, p.dstDevice, p.dstArray)
    src_pitch, src_rows = _layout(p.srcMemoryType, p.srcArray, p.srcPitch or width, p.srcHeight if has_z else height)
    dst_pitch, dst_rows = _layout(p.dstMemoryType, p.dstArray, p.dstPitch or width, p.dstHeight if has_z else height)
    if src_pitch < width or dst_pitch < width:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"pitch smaller than width {width}")
    src_slice = src_pitch * src_rows
    dst_slice = dst_pitch * dst_rows
    src_z, dst_z = (p.srcZ, p.dstZ) if has_z else (0, 0)
    src0 = src + p.srcXInBytes + p.srcY * src_pitch + src_z * src_slice
    dst0 = dst + p.dstXInBytes + p.dstY * dst_pitch + dst_z * dst_slice
    if width and height and depth:
        span = lambda pitch, slice_: (depth - 1) * slice_ + (height - 1) * pitch + width
        if p.srcMemoryType == CU_MEMORYTYPE_DEVICE:
            check_device_range(src0, span(src_pitch, src_slice))
        elif p.srcMemoryType == CU_MEMORYTYPE_HOST:
            check_host_range(src0, span(src_pitch, src_slice), "source")
        if p.dstMemoryType == CU_MEMORYTYPE_DEVICE:
            check_device_range(dst0, span(dst_pitch, dst_slice))
        elif p.dstMemoryType == CU_MEMORYTYPE_HOST:
            check_host_range(dst0, span(dst_pitch, dst_slice), "destination", writable=True)
        for side, x, y, pitch, rows, start in (("source", p.srcXInBytes, p.srcY, src_pitch, src_rows, src0),
                                              ("destination", p.dstXInBytes, p.dstY, dst_pitch, dst_rows, dst0)):
            memory_type, array = (p.srcMemoryType, p.srcArray) if side == "source" else (p.dstMemoryType, p.dstArray)
            if memory_type == CU_MEMORYTYPE_ARRAY:  # the region must lie inside the array, row by row
                base, _, _, size = textures.array_layout(addr(array))
                if x + width > pitch or y + height > rows or start + span(pitch, pitch * rows) > base + size:
                    raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{side} region outside the CUDA array")

    def copy() -> None:
        memory = _memory()
        for z in range(depth):
            for y in range(height):
                memory.copy(dst0 + z * dst_slice + y * dst_pitch, src0 + z * src_slice + y * src_pitch, width)
    return copy


def _desc(p, kind: str):
    require(p)
    return ffi.cast(f"{kind} *", p)


def _copy_3d_async(p, depth: int, stream) -> None:
    """A 2D/3D copy queued on the stream; synchronous with pageable host memory (_pageable)."""
    copy = Memcpy.planar(p) if depth == 1 else Memcpy(p)
    hosts = [_endpoint(t, h, d, None) for t, h, d in ((p.srcMemoryType, p.srcHost, p.srcDevice),
                                                     (p.dstMemoryType, p.dstHost, p.dstDevice))
             if t in (CU_MEMORYTYPE_HOST, CU_MEMORYTYPE_UNIFIED)]
    run(addr(stream), copy, _pageable(*hosts))


@entry("cuMemcpy2D_v2", "cuMemcpy2DUnaligned_v2")
def cuMemcpy2D(p):
    run(0, _copy_3d(_desc(p, "CUDA_MEMCPY2D"), 1), True)


@entry("cuMemcpy2DAsync_v2")
def cuMemcpy2DAsync(p, stream):
    _copy_3d_async(_desc(p, "CUDA_MEMCPY2D"), 1, stream)


@entry("cuMemcpy3D_v2")
def cuMemcpy3D(p):
    run(0, _copy_3d(_desc(p, "CUDA_MEMCPY3D"), None), True)


@entry("cuMemcpy3DAsync_v2")
def cuMemcpy3DAsync(p, stream):
    _copy_3d_async(_desc(p, "CUDA_MEMCPY3D"), None, stream)


# ---- sets ----
class Memset:
    """A checked 2D fill: a stream op, and what a graph's memset node holds."""

    node_type = 2  # CU_GRAPH_NODE_TYPE_MEMSET

    def __init__(self, dst: int, pitch: int, value: int, elem: int, width: int, height: int) -> None:
        if elem not in (1, 2, 4):
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"memset element size {elem}")
        self.dst, self.pitch, self.value, self.elem, self.width, self.height = dst, pitch, value, elem, width, height
        self._fill = _set_2d(dst, pitch, value, elem, width, height)

    def __call__(self) -> None:
        self._fill()


def _set_2d(dst: int, pitch: int, value: int, elem: int, width: int, height: int) -> Callable[[], None]:
    """Fill `height` rows of `width` elements of `elem` bytes, rows `pitch` bytes apart."""
    if dst % elem or pitch % elem:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{dst:#x} / pitch {pitch} not aligned to {elem} bytes")
    if width and height:
        if pitch < width * elem:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"pitch {pitch} < row of {width * elem} bytes")
        check_device_range(dst, (height - 1) * pitch + width * elem)

    def fill() -> None:
        memory = _memory()
        if pitch == width * elem:  # contiguous rows: one fill
            memory.fill(dst, value, elem, width * height)
            return
        for y in range(height):
            memory.fill(dst + y * pitch, value, elem, width)
    return fill


def _define_sets() -> None:
    for elem, bits in ((1, 8), (2, 16), (4, 32)):
        def sync_1d(dst, value, n, elem=elem):
            run(0, Memset(dst, n * elem, value, elem, n, 1), True)

        def async_1d(dst, value, n, stream, elem=elem):
            run(addr(stream), Memset(dst, n * elem, value, elem, n, 1), False)

        def sync_2d(dst, pitch, value, width, height, elem=elem):
            run(0, Memset(dst, pitch, value, elem, width, height), True)

        def async_2d(dst, pitch, value, width, height, stream, elem=elem):
            run(addr(stream), Memset(dst, pitch, value, elem, width, height), False)

        entry(f"cuMemsetD{bits}_v2")(sync_1d)
        entry(f"cuMemsetD{bits}Async")(async_1d)
        entry(f"cuMemsetD2D{bits}_v2")(sync_2d)
        entry(f"cuMemsetD2D{bits}Async")(async_2d)


_define_sets()
