"""Entry points: batched copies and prefetches (cuMemcpyBatchAsync, cuMemcpy3DBatchAsync, both
in their CUDA 12.8 form with `failIdx` and the CUDA 13 `_v2` without, cuMemPrefetchBatchAsync),
single copies with a batch copy's attributes (cuMemcpyWithAttributesAsync,
cuMemcpy3DWithAttributesAsync) and the peer 3-D copies (cuMemcpy3DPeer, cuMemcpy3DPeerAsync).

Every copy of a batch is checked before any is queued; then each is an ordinary copy of the
stream (`memory.Memcpy`: a memcpy node when captured), queued in array order, which is one of
the orders cuda.h allows (copies within a batch have none). A copy whose attributes say
CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL, or that touches pageable host memory, has finished
when the call returns. There is one device, and a CUDA_MEMCPY3D_PEER is a CUDA_MEMCPY3D whose
two reserved pointers name the contexts."""

from __future__ import annotations

from . import context as ctxs
from .api import entry
from ..cdata import addr, ffi, store
from ..curesult import CUDA_ERROR_INVALID_VALUE, CudaError
from .init_device import require
from .managed import check_managed, memory_location, prefetch
from .memory import (CU_MEMORYTYPE_ARRAY, CU_MEMORYTYPE_UNIFIED, Memcpy, _check_any_range,
                     _copy_3d_async, _pageable, run)
from .textures import arrays

ffi.cdef("""
typedef struct { int type; int id; } ZlMemLocation;
typedef struct { int srcAccessOrder; ZlMemLocation srcLocHint; ZlMemLocation dstLocHint; unsigned int flags; }
    CUmemcpyAttributes;
typedef struct {
    int type;
    union {
        struct { unsigned long long ptr; size_t rowLength, layerHeight; ZlMemLocation locHint; } ptr;
        struct { void *array; size_t x, y, z; } array;
    } op;
} CUmemcpy3DOperand;
typedef struct {
    CUmemcpy3DOperand src, dst; size_t width, height, depth; int srcAccessOrder; unsigned int flags;
} CUDA_MEMCPY3D_BATCH_OP;
""")

ORDER_STREAM, ORDER_DURING_API_CALL, ORDER_ANY = 1, 2, 3
FLAG_PREFER_OVERLAP_WITH_COMPUTE = 0x1
OPERAND_POINTER, OPERAND_ARRAY = 1, 2
NO_COPY = 2**64 - 1  # failIdx when the error concerns no single copy


class _Failed(CudaError):
    """A check failed for copy `index` of the batch (the v1 forms report it in failIdx)."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(CUDA_ERROR_INVALID_VALUE, f"copy {index}: {message}")
        self.index = index


def _batch_stream(stream, batch: bool = True) -> int:
    """cuda.h: a batch's stream 'must not be legacy NULL stream' (the per-thread one is fine)."""
    if ctxs.resolve_stream(addr(stream)).kind == "legacy" and batch:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "batched operations cannot go to the legacy NULL stream")
    return addr(stream)


def _groups(count: int, indices, num: int, what: str) -> list[int]:
    """For each of `count` operations, which of the `num` entries applies: entry k from
    indices[k] on; indices start at 0, increase, stay below count, and num <= count."""
    if count == 0 or num == 0 or num > count or indices == ffi.NULL:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{count} operations with {num} {what}")
    starts = [indices[k] for k in range(num)]
    if starts[0] != 0 or any(b <= a for a, b in zip(starts, starts[1:])) or starts[-1] >= count:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{what} indices {starts} for {count} operations")
    bounds = starts[1:] + [count]
    return [k for k in range(num) for _ in range(starts[k], bounds[k])]


def _check_order(index: int, order: int, flags: int) -> None:
    if order not in (ORDER_STREAM, ORDER_DURING_API_CALL, ORDER_ANY):
        raise _Failed(index, f"source access order {order}")
    if flags & ~FLAG_PREFER_OVERLAP_WITH_COMPUTE:
        raise _Failed(index, f"copy flags {flags:#x}")


def _queue(stream: int, copies: list[tuple[Memcpy, bool]]) -> None:
    for copy, sync in copies:
        run(stream, copy, sync)


def _with_fail_index(pfail, body) -> None:
    """Run body; a failure stores the failing copy's index (or SIZE_MAX) in *failIdx."""
    try:
        body()
    except CudaError as e:
        if pfail != ffi.NULL:
            store(pfail, getattr(e, "index", NO_COPY))
        raise


def _batch(dsts, srcs, sizes, count: int, attrs, attr_idxs, num_attrs: int, stream, batch: bool = True) -> None:
    stream = _batch_stream(stream, batch)
    require(dsts, srcs, sizes, attrs)
    which = _groups(count, attr_idxs, num_attrs, "attribute sets")
    attributes = ffi.cast("CUmemcpyAttributes *", attrs)
    copies = []
    for i in range(count):
        a = attributes[which[i]]
        _check_order(i, a.srcAccessOrder, a.flags)
        dst, src, size = dsts[i], srcs[i], sizes[i]
        try:
            _check_any_range(dst, size, "destination", writable=True)
            _check_any_range(src, size, "source")
        except CudaError as e:
            raise _Failed(i, str(e)) from None
        copies.append((Memcpy.linear(dst, src, size), a.srcAccessOrder == ORDER_DURING_API_CALL or _pageable(dst, src)))
    _queue(stream, copies)


@entry("cuMemcpyBatchAsync_v2")
def cuMemcpyBatchAsync_v2(dsts, srcs, sizes, count, attrs, attr_idxs, num_attrs, stream):
    _batch(dsts, srcs, sizes, count, attrs, attr_idxs, num_attrs, stream)


@entry("cuMemcpyBatchAsync")
def cuMemcpyBatchAsync(dsts, srcs, sizes, count, attrs, attr_idxs, num_attrs, pfail, stream):
    _with_fail_index(pfail, lambda: _batch(dsts, srcs, sizes, count, attrs, attr_idxs, num_attrs, stream))


def _operand(index: int, d, side: str, o, element: int, width: int, height: int) -> None:
    """Fill one side of the CUDA_MEMCPY3D d from a CUmemcpy3DOperand."""
    if o.type == OPERAND_POINTER:
        p = o.op.ptr
        if p.rowLength and p.rowLength < width or p.layerHeight and p.layerHeight < height:
            raise _Failed(index, f"{side} rowLength {p.rowLength} / layerHeight {p.layerHeight} below the extent")
        setattr(d, side + "MemoryType", CU_MEMORYTYPE_UNIFIED)
        setattr(d, side + "Device", p.ptr)
        setattr(d, side + "Pitch", (p.rowLength or width) * element)
        setattr(d, side + "Height", p.layerHeight or height)
    elif o.type == OPERAND_ARRAY:
        a = o.op.array
        setattr(d, side + "MemoryType", CU_MEMORYTYPE_ARRAY)
        setattr(d, side + "Array", a.array)
        setattr(d, side + "XInBytes", a.x * element)
        setattr(d, side + "Y", a.y)
        setattr(d, side + "Z", a.z)
    else:
        raise _Failed(index, f"{side} operand type {o.type}")


def _element(index: int, op) -> int:
    """Bytes per element: 1 between pointers, else the array's (equal for two arrays)."""
    sizes = set()
    for o in (op.src, op.dst):
        if o.type == OPERAND_ARRAY:
            try:
                sizes.add(arrays.get(addr(o.op.array.array)).element)
            except CudaError as e:
                raise _Failed(index, str(e)) from None
    if len(sizes) > 1:
        raise _Failed(index, f"CUDA arrays of element sizes {sorted(sizes)}")
    return sizes.pop() if sizes else 1


def _batch_3d(num_ops: int, op_list, flags: int, stream, batch: bool = True) -> None:
    stream = _batch_stream(stream, batch)
    if flags:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"batch flags {flags:#x} (must be 0)")
    if num_ops == 0 or op_list == ffi.NULL:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{num_ops} operations")
    ops = ffi.cast("CUDA_MEMCPY3D_BATCH_OP *", op_list)
    copies = []
    for i in range(num_ops):
        op = ops[i]
        _check_order(i, op.srcAccessOrder, op.flags)
        if not (op.width and op.height and op.depth):
            raise _Failed(i, f"extent {op.width}x{op.height}x{op.depth} (none may be 0)")
        element = _element(i, op)
        d = ffi.new("CUDA_MEMCPY3D *")
        _operand(i, d, "src", op.src, element, op.width, op.height)
        _operand(i, d, "dst", op.dst, element, op.width, op.height)
        d.WidthInBytes, d.Height, d.Depth = op.width * element, op.height, op.depth
        hosts = []
        try:
            for side, writable in (("src", False), ("dst", True)):
                if getattr(d, side + "MemoryType") == CU_MEMORYTYPE_UNIFIED:
                    pitch, rows = getattr(d, side + "Pitch"), getattr(d, side + "Height")
                    start = getattr(d, side + "Device")
                    span = (op.depth - 1) * pitch * rows + (op.height - 1) * pitch + d.WidthInBytes
                    _check_any_range(start, span, "destination" if writable else "source", writable)
                    hosts.append(start)
            copy = Memcpy(d)  # checks array regions
        except CudaError as e:
            raise _Failed(i, str(e)) from None
        copies.append((copy, op.srcAccessOrder == ORDER_DURING_API_CALL or _pageable(*hosts)))
    _queue(stream, copies)


@entry("cuMemcpy3DBatchAsync_v2")
def cuMemcpy3DBatchAsync_v2(num_ops, op_list, flags, stream):
    _batch_3d(num_ops, op_list, flags, stream)


@entry("cuMemcpy3DBatchAsync")
def cuMemcpy3DBatchAsync(num_ops, op_list, pfail, flags, stream):
    _with_fail_index(pfail, lambda: _batch_3d(num_ops, op_list, flags, stream))


@entry("cuMemcpyWithAttributesAsync")
def cuMemcpyWithAttributesAsync(dst, src, size, attr, stream):
    """One copy with the attributes of a batch's copies (CUDA 13.2)."""
    require(attr)
    _batch([dst], [src], [size], 1, attr, [0], 1, stream, batch=False)


@entry("cuMemcpy3DWithAttributesAsync")
def cuMemcpy3DWithAttributesAsync(op, flags, stream):
    """One CUDA_MEMCPY3D_BATCH_OP (CUDA 13.2)."""
    _batch_3d(1, op, flags, stream, batch=False)


@entry("cuMemPrefetchBatchAsync")
def cuMemPrefetchBatchAsync(dptrs, sizes, count, locations, location_idxs, num_locations, flags, stream):
    """Each range must be managed memory and each location valid (cuMemPrefetchAsync's rules),
    all checked before any range records its prefetch; where host and device memory are one
    there is nothing to move."""
    _batch_stream(stream)
    if flags:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"prefetch flags {flags:#x} (must be 0)")
    require(dptrs, sizes, locations)
    groups = _groups(count, location_idxs, num_locations, "prefetch locations")
    locs = ffi.cast("ZlMemLocation *", locations)
    wheres = [memory_location(locs[k].type, locs[k].id) for k in range(num_locations)]
    for i in range(count):
        check_managed(dptrs[i], sizes[i])
    for i in range(count):
        prefetch(dptrs[i], sizes[i], wheres[groups[i]])


def _peer_desc(p):
    """The CUDA_MEMCPY3D_PEER as a CUDA_MEMCPY3D, its contexts checked."""
    require(p)
    d = ffi.cast("CUDA_MEMCPY3D *", p)
    for ctx in (d.reserved0, d.reserved1):  # srcContext, dstContext
        ctxs.contexts.get(addr(ctx))
    return d


@entry("cuMemcpy3DPeer")
def cuMemcpy3DPeer(p):
    run(0, Memcpy(_peer_desc(p)), True)


@entry("cuMemcpy3DPeerAsync")
def cuMemcpy3DPeerAsync(p, stream):
    _copy_3d_async(_peer_desc(p), None, stream)
