"""Entry points: the 1-D CUDA array copies (cuMemcpyAtoH/HtoA/AtoD/DtoA/AtoA, AtoH/HtoA Async).

A CUDA array here is device memory holding its elements packed row after row (textures.py), so
an array and a byte offset name a linear range, and each copy is an ordinary 1-D copy
(`memory.Memcpy`: a stream op, a graph node when captured). cuda.h describes them for 1-D
arrays; over a 2-D or 3-D array the offset counts in that packed order, the order cuMemcpy2D/3D
use for it too. The range must lie inside the array (CUDA_ERROR_INVALID_VALUE), host ranges
are checked as for every copy, and cuMemcpyAtoA takes arrays of one element size and a count
divisible by it, as cuda.h requires."""

from __future__ import annotations

from .api import entry
from ..cdata import addr
from ..curesult import CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_VALUE, CudaError
from .memory import Memcpy, _pageable, check_device_range, check_host_range, run
from .textures import Array, arrays


def _array(handle) -> Array:
    """cuda.h lists CUDA_ERROR_INVALID_VALUE, not INVALID_HANDLE, among these copies' errors."""
    try:
        return arrays.get(addr(handle))
    except CudaError as e:
        if e.code != CUDA_ERROR_INVALID_HANDLE:
            raise
        raise CudaError(CUDA_ERROR_INVALID_VALUE, e.message or "not a CUDA array") from None


def _array_range(handle, offset: int, count: int, side: str) -> int:
    """The address of `count` bytes at `offset` in the array, checked to lie inside it."""
    a = _array(handle)
    if offset + count > a.size:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{side} range {offset}+{count} is outside the "
                                                  f"{a.size}-byte CUDA array")
    return a.base + offset


def _copy(dst: int, src: int, count: int, stream: int, sync: bool) -> None:
    run(stream, Memcpy.linear(dst, src, count), sync)


@entry("cuMemcpyAtoH_v2")
def cuMemcpyAtoH(dst_host, src_array, src_offset, count):
    src = _array_range(src_array, src_offset, count, "source")
    check_host_range(addr(dst_host), count, "destination", writable=True)
    _copy(addr(dst_host), src, count, 0, True)


@entry("cuMemcpyAtoHAsync_v2")
def cuMemcpyAtoHAsync(dst_host, src_array, src_offset, count, stream):
    src = _array_range(src_array, src_offset, count, "source")
    check_host_range(addr(dst_host), count, "destination", writable=True)
    _copy(addr(dst_host), src, count, addr(stream), _pageable(addr(dst_host)))


@entry("cuMemcpyHtoA_v2")
def cuMemcpyHtoA(dst_array, dst_offset, src_host, count):
    dst = _array_range(dst_array, dst_offset, count, "destination")
    check_host_range(addr(src_host), count, "source")
    _copy(dst, addr(src_host), count, 0, True)


@entry("cuMemcpyHtoAAsync_v2")
def cuMemcpyHtoAAsync(dst_array, dst_offset, src_host, count, stream):
    dst = _array_range(dst_array, dst_offset, count, "destination")
    check_host_range(addr(src_host), count, "source")
    _copy(dst, addr(src_host), count, addr(stream), _pageable(addr(src_host)))


@entry("cuMemcpyAtoD_v2")
def cuMemcpyAtoD(dst_device, src_array, src_offset, count):
    src = _array_range(src_array, src_offset, count, "source")
    check_device_range(dst_device, count)
    _copy(dst_device, src, count, 0, True)


@entry("cuMemcpyDtoA_v2")
def cuMemcpyDtoA(dst_array, dst_offset, src_device, count):
    dst = _array_range(dst_array, dst_offset, count, "destination")
    check_device_range(src_device, count)
    _copy(dst, src_device, count, 0, True)


@entry("cuMemcpyAtoA_v2")
def cuMemcpyAtoA(dst_array, dst_offset, src_array, src_offset, count):
    element = _array(dst_array).element
    if _array(src_array).element != element or count % element:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"array-to-array copies need arrays of one element size "
                                                  f"and a count divisible by it ({count} bytes)")
    dst = _array_range(dst_array, dst_offset, count, "destination")
    src = _array_range(src_array, src_offset, count, "source")
    _copy(dst, src, count, 0, True)
