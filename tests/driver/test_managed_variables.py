"""Module variables declared `.global .attribute(.managed)` (CUDA's __managed__) are managed
memory (ctypes on libcuda.so.1, hand-written PTX): host-accessible at the address
cuModuleGetGlobal gives, CU_POINTER_ATTRIBUTE_IS_MANAGED 1, taken by cuMemAdvise,
cuMemPrefetchAsync and cuMemRangeGetAttribute; an ordinary .global variable is device memory
(IS_MANAGED 0, MEMORY_TYPE DEVICE) that managed advice refuses with CUDA_ERROR_INVALID_VALUE
(cuda.h: the range must be managed memory). PTX ISA 5.4.8 allows the attribute on .global
variables only."""

from __future__ import annotations

import ctypes
from ctypes import byref, c_int, c_size_t, c_uint, c_ulonglong, c_void_p

import numpy as np
import pytest

INVALID_VALUE, INVALID_PTX = 1, 218
IS_MANAGED, MEMORY_TYPE = 8, 2  # CUpointer_attribute
CU_MEMORYTYPE_DEVICE = 2
SET_READ_MOSTLY, READ_MOSTLY, LAST_PREFETCH_LOCATION = 1, 1, 4
CU_DEVICE_CPU = -1
N = 1024

PTX = f"""
.version 7.0
.target sm_80
.address_size 64
.global .attribute(.managed) .align 4 .u32 counts[{N}];
.global .align 4 .u32 plain[4];
.visible .entry bump(.param .u32 add)
{{
  .reg .u32 %r<4>;
  .reg .u64 %rd<3>;
  ld.param.u32 %r1, [add];
  mov.u32 %r2, %tid.x;
  mul.wide.u32 %rd1, %r2, 4;
  mov.u64 %rd2, counts;
  add.u64 %rd1, %rd1, %rd2;
  ld.global.u32 %r3, [%rd1];
  mad.lo.u32 %r3, %r3, 3, %r1;
  st.global.u32 [%rd1], %r3;
  ret;
}}
"""


@pytest.fixture(scope="module")
def module(cu):
    cu.cuMemAdvise.argtypes = [c_ulonglong, c_size_t, c_int, c_int]
    cu.cuMemPrefetchAsync.argtypes = [c_ulonglong, c_size_t, c_int, c_void_p]
    cu.cuMemRangeGetAttribute.argtypes = [c_void_p, c_size_t, c_int, c_ulonglong, c_size_t]
    cu.cuPointerGetAttribute.argtypes = [c_void_p, c_int, c_ulonglong]
    m = c_void_p()
    cu.ok(cu.cuModuleLoadData(byref(m), PTX.encode() + b"\0"))
    yield m
    cu.ok(cu.cuModuleUnload(m))


def _global(cu, module, name: bytes) -> tuple[int, int]:
    ptr, size = c_ulonglong(), c_size_t()
    cu.ok(cu.cuModuleGetGlobal_v2(byref(ptr), byref(size), module, name))
    return ptr.value, size.value


def _pointer_attribute(cu, attribute: int, ptr: int) -> int:
    value = c_uint(12345)
    cu.ok(cu.cuPointerGetAttribute(byref(value), attribute, ptr))
    return value.value


def _range_attribute(cu, attribute: int, ptr: int, size: int) -> int:
    value = c_int(12345)
    cu.ok(cu.cuMemRangeGetAttribute(byref(value), 4, attribute, ptr, size))
    return value.value


def test_host_and_kernel_share_the_variable(cu, module):
    ptr, size = _global(cu, module, b"counts")
    assert size == 4 * N
    host = np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_uint32)), (N,))
    host[:] = np.arange(N, dtype=np.uint32)  # no copy: the host writes managed memory directly
    fn = c_void_p()
    cu.ok(cu.cuModuleGetFunction(byref(fn), module, b"bump"))
    add = c_uint(7)
    params = (c_void_p * 1)(ctypes.cast(byref(add), c_void_p))
    cu.ok(cu.cuLaunchKernel(fn, 1, 1, 1, N, 1, 1, 0, None, params, None))
    cu.ok(cu.cuCtxSynchronize())
    assert (host == np.arange(N, dtype=np.uint32) * 3 + 7).all()


def test_pointer_attributes(cu, module):
    counts, _ = _global(cu, module, b"counts")
    plain, _ = _global(cu, module, b"plain")
    assert _pointer_attribute(cu, IS_MANAGED, counts + 40) == 1
    assert _pointer_attribute(cu, IS_MANAGED, plain) == 0
    assert _pointer_attribute(cu, MEMORY_TYPE, plain) == CU_MEMORYTYPE_DEVICE


def test_advice_and_prefetches(cu, module):
    counts, size = _global(cu, module, b"counts")
    assert _range_attribute(cu, READ_MOSTLY, counts, size) == 0
    cu.ok(cu.cuMemAdvise(counts, size, SET_READ_MOSTLY, 0))
    assert _range_attribute(cu, READ_MOSTLY, counts, size) == 1
    cu.ok(cu.cuMemPrefetchAsync(counts, size, CU_DEVICE_CPU, None))
    cu.ok(cu.cuCtxSynchronize())
    assert _range_attribute(cu, LAST_PREFETCH_LOCATION, counts, size) == CU_DEVICE_CPU
    plain, plain_size = _global(cu, module, b"plain")
    assert cu.cuMemAdvise(plain, plain_size, SET_READ_MOSTLY, 0) == INVALID_VALUE
    assert cu.cuMemPrefetchAsync(plain, plain_size, 0, None) == INVALID_VALUE
    assert cu.cuMemRangeGetAttribute(byref(c_int()), 4, READ_MOSTLY, plain, plain_size) == INVALID_VALUE
    assert cu.cuMemAdvise(counts, size + 4, SET_READ_MOSTLY, 0) == INVALID_VALUE  # past the variable


@pytest.mark.parametrize("declaration", [".shared .attribute(.managed) .u32 s[4];",
                                         ".const .attribute(.managed) .u32 c[4];",
                                         ".global .attribute(.unified(1, 2)) .u32 u;"])
def test_attributes_refused(cu, declaration):
    m = c_void_p()
    ptx = f".version 7.0\n.target sm_80\n.address_size 64\n{declaration}\n"
    assert cu.cuModuleLoadData(byref(m), ptx.encode() + b"\0") == INVALID_PTX
