"""Entry points: cuPointerSetAttribute and cuMemRangeGetAttributes (the plural of
cuMemRangeGetAttribute, managed.py).

CU_POINTER_ATTRIBUTE_SYNC_MEMOPS is the one attribute cuda.h lets a program set. Synchronous
copies and sets here always wait for their work, so memory with the attribute unset behaves as
memory with it set (cuda.h allows that: unset only permits asynchronous behaviour); the value is
kept for cuPointerGetAttribute. cuda.h has setting it wait for pending synchronous operations;
ours finish before they return, so none is ever pending."""

from __future__ import annotations

from .api import entry
from ..cdata import ffi
from ..curesult import CUDA_ERROR_INVALID_VALUE, CudaError
from .init_device import require
from .managed import cuMemRangeGetAttribute
from .memory import _memory

CU_POINTER_ATTRIBUTE_SYNC_MEMOPS = 6


@entry("cuPointerSetAttribute")
def cuPointerSetAttribute(value, attribute, ptr):
    require(value)
    if attribute != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"pointer attribute {attribute} cannot be set")
    a = _memory().find(ptr)
    if a is None:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{ptr:#x} is not a CUDA pointer")
    flag = ffi.cast("unsigned int *", value)[0]
    if flag not in (0, 1):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"SYNC_MEMOPS value {flag} (0 or 1)")
    a.sync_memops = bool(flag)  # read by memory._attribute


@entry("cuMemRangeGetAttributes")
def cuMemRangeGetAttributes(data, data_sizes, attributes, count, ptr, size):
    require(data, data_sizes, attributes)
    if count == 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "no attributes asked for")
    for i in range(count):
        cuMemRangeGetAttribute(data[i], data_sizes[i], attributes[i], ptr, size)
