"""Stream attributes, context-wide events and the module/function queries of CUDA 12-13,
through libcuda.so.1. Expected values are cuda.h's: stream attribute values are
CUlaunchAttributeValue members (CU_SYNC_POLICY_* 1-4, an access policy window no larger than
CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE), cuCtxRecordEvent captures all the context's
work at the call and cuCtxWaitEvent makes all later work wait for it; parameter counts are
those of the PTX declarations below."""

from __future__ import annotations

import ctypes
import struct
import time
from ctypes import POINTER, byref, c_int, c_size_t, c_uint, c_ulonglong, c_void_p

from zluda_py import backends

INVALID_VALUE, INVALID_HANDLE, NOT_FOUND, NOT_READY = 1, 400, 500, 600
CAPTURE_UNSUPPORTED, CAPTURE_INVALIDATED = 900, 901
ACCESS_POLICY_WINDOW, COOPERATIVE, SYNC_POLICY, PRIORITY = 1, 2, 3, 8
EQ = 1

PTX = b""".version 7.0
.target sm_52
.address_size 64
.visible .entry three(.param .u64 a, .param .u32 b, .param .f32 c)
{
  ret;
}
.visible .entry none()
{
  ret;
}
\0"""


def _value(*fields: tuple[str, object]) -> ctypes.Array:
    raw = b"".join(struct.pack(fmt, v) for fmt, v in fields)
    return (ctypes.c_char * 64).from_buffer_copy(raw.ljust(64, b"\0"))


def _get(cu, stream, attr: int) -> bytes:
    out = (ctypes.c_char * 64)()
    cu.ok(cu.cuStreamGetAttribute(stream, attr, out))
    return bytes(out)


def test_stream_attributes(cu):
    s, t = c_void_p(), c_void_p()
    cu.ok(cu.cuStreamCreateWithPriority(byref(s), 1, -2))
    cu.ok(cu.cuStreamCreate(byref(t), 1))
    assert struct.unpack_from("<i", _get(cu, s, PRIORITY))[0] == -2
    cu.ok(cu.cuStreamSetAttribute(s, SYNC_POLICY, _value(("<i", 4))))  # CU_SYNC_POLICY_BLOCKING_SYNC
    assert struct.unpack_from("<i", _get(cu, s, SYNC_POLICY))[0] == 4
    assert cu.cuStreamSetAttribute(s, SYNC_POLICY, _value(("<i", 5))) == INVALID_VALUE
    limit = c_int()
    cu.ok(cu.cuDeviceGetAttribute(byref(limit), 109, 0))  # MAX_ACCESS_POLICY_WINDOW_SIZE
    window = _value(("<Q", 0x1000), ("<Q", limit.value), ("<f", 0.5), ("<i", 2), ("<i", 1))
    cu.ok(cu.cuStreamSetAttribute(s, ACCESS_POLICY_WINDOW, window))
    assert _get(cu, s, ACCESS_POLICY_WINDOW)[:32] == bytes(window)[:32]
    too_big = _value(("<Q", 0x1000), ("<Q", limit.value + 1), ("<f", 0.5), ("<i", 2), ("<i", 1))
    assert cu.cuStreamSetAttribute(s, ACCESS_POLICY_WINDOW, too_big) == INVALID_VALUE
    bad_ratio = _value(("<Q", 0), ("<Q", 0), ("<f", 1.5), ("<i", 0), ("<i", 0))
    assert cu.cuStreamSetAttribute(s, ACCESS_POLICY_WINDOW, bad_ratio) == INVALID_VALUE
    persisting_miss = _value(("<Q", 0), ("<Q", 0), ("<f", 1.0), ("<i", 0), ("<i", 2))  # miss: NORMAL or STREAMING
    assert cu.cuStreamSetAttribute(s, ACCESS_POLICY_WINDOW, persisting_miss) == INVALID_VALUE
    assert cu.cuStreamGetAttribute(s, COOPERATIVE, (ctypes.c_char * 64)()) == INVALID_VALUE  # launches only
    assert cu.cuStreamGetAttribute(s, PRIORITY, None) == INVALID_VALUE
    assert cu.cuStreamGetAttribute(c_void_p(0x1234), PRIORITY, (ctypes.c_char * 64)()) == INVALID_HANDLE
    cu.ok(cu.cuStreamCopyAttributes(t, s))
    assert struct.unpack_from("<i", _get(cu, t, SYNC_POLICY))[0] == 4
    assert struct.unpack_from("<i", _get(cu, t, PRIORITY))[0] == -2
    cu.ok(cu.cuStreamSetAttribute(t, PRIORITY, _value(("<i", -1))))
    assert struct.unpack_from("<i", _get(cu, t, PRIORITY))[0] == -1
    p = c_int()
    cu.ok(cu.cuStreamGetPriority(t, byref(p)))
    assert p.value == -1
    cu.ok(cu.cuStreamGetAttribute_ptsz(None, PRIORITY, (ctypes.c_char * 64)()))
    for h in (s, t):
        cu.ok(cu.cuStreamDestroy_v2(h))


def _host_word(cu):
    host, dptr = c_void_p(), c_ulonglong()
    cu.ok(cu.cuMemHostAlloc(byref(host), c_size_t(64), 0x2))
    cu.ok(cu.cuMemHostGetDevicePointer_v2(byref(dptr), host, 0))
    word = ctypes.cast(host, POINTER(c_uint))
    word[0] = word[1] = 0
    return host, dptr.value, word


def test_context_events(cu):
    cu.cuStreamWaitValue32_v2.argtypes = [c_void_p, c_ulonglong, c_uint, c_uint]
    cu.cuStreamWriteValue32_v2.argtypes = [c_void_p, c_ulonglong, c_uint, c_uint]
    s, later, ev = c_void_p(), c_void_p(), c_void_p()
    cu.ok(cu.cuStreamCreate(byref(s), 1))
    cu.ok(cu.cuStreamCreate(byref(later), 1))
    cu.ok(cu.cuEventCreate(byref(ev), 0))
    host, dptr, word = _host_word(cu)
    cu.ok(cu.cuStreamWaitValue32_v2(s, dptr, 1, EQ))  # s holds until the host writes 1
    cu.ok(cu.cuCtxRecordEvent(cu.ctx, ev))
    time.sleep(0.05)
    assert cu.cuEventQuery(ev) == NOT_READY
    cu.ok(cu.cuCtxWaitEvent(cu.ctx, ev))
    cu.ok(cu.cuStreamWriteValue32_v2(later, dptr + 4, 7, 0))  # work of another stream, submitted after
    time.sleep(0.05)
    assert word[1] == 0
    word[0] = 1
    cu.ok(cu.cuEventSynchronize(ev))
    cu.ok(cu.cuStreamSynchronize(later))
    assert word[1] == 7
    cu.ok(cu.cuEventQuery(ev))
    assert cu.cuCtxRecordEvent(cu.ctx, c_void_p(0x1234)) == INVALID_HANDLE
    assert cu.cuCtxRecordEvent(c_void_p(0x1234), ev) == 201  # CUDA_ERROR_INVALID_CONTEXT
    cu.ok(cu.cuStreamBeginCapture_v2(s, 2))
    assert cu.cuCtxRecordEvent(cu.ctx, ev) == CAPTURE_UNSUPPORTED
    g = c_void_p()
    assert cu.cuStreamEndCapture(s, byref(g)) == CAPTURE_INVALIDATED
    cu.ok(cu.cuMemFreeHost(host))
    cu.ok(cu.cuEventDestroy_v2(ev))
    for h in (s, later):
        cu.ok(cu.cuStreamDestroy_v2(h))


def test_module_and_library_queries(cu):
    module, fns = c_void_p(), (c_void_p * 2)()
    cu.ok(cu.cuModuleLoadData(byref(module), PTX))
    built_at_load = int(backends.select().__name__.endswith(".hip"))  # HIP builds modules whole (docs/driver.md)
    count = c_uint()
    cu.ok(cu.cuModuleGetFunctionCount(byref(count), module))
    assert count.value == 2
    cu.ok(cu.cuModuleEnumerateFunctions(fns, 1, module))  # at most numFunctions
    assert fns[0] and not fns[1]
    cu.ok(cu.cuModuleEnumerateFunctions(fns, 2, module))
    names = set()
    for f in fns:
        name = ctypes.c_char_p()
        cu.ok(cu.cuFuncGetName(byref(name), c_void_p(f)))
        names.add(name.value)
        n, state = c_size_t(), c_int(-1)
        cu.ok(cu.cuFuncGetParamCount(c_void_p(f), byref(n)))
        assert n.value == {b"three": 3, b"none": 0}[name.value]
        cu.ok(cu.cuFuncIsLoaded(byref(state), c_void_p(f)))
        assert state.value == built_at_load  # lazy loading: nothing built yet
        cu.ok(cu.cuFuncLoad(c_void_p(f)))
        cu.ok(cu.cuFuncIsLoaded(byref(state), c_void_p(f)))
        assert state.value == 1
    assert names == {b"three", b"none"}
    assert cu.cuFuncGetParamCount(c_void_p(fns[0]), None) == INVALID_VALUE
    assert cu.cuFuncIsLoaded(byref(c_int()), c_void_p(0x1234)) == INVALID_HANDLE
    lib, kernel, got = c_void_p(), c_void_p(), c_void_p()
    assert cu.cuKernelGetLibrary(byref(got), c_void_p(fns[0])) == NOT_FOUND  # a module's function
    cu.ok(cu.cuLibraryLoadData(byref(lib), PTX, None, None, 0, None, None, 0))
    cu.ok(cu.cuLibraryGetKernel(byref(kernel), lib, b"three"))
    cu.ok(cu.cuKernelGetLibrary(byref(got), kernel))
    assert got.value == lib.value
    n = c_size_t()
    cu.ok(cu.cuKernelGetParamCount(kernel, byref(n)))
    assert n.value == 3
    fptr = c_void_p()
    assert cu.cuLibraryGetUnifiedFunction(byref(fptr), lib, b"three") == NOT_FOUND  # no unified function pointers
    assert cu.cuLibraryGetUnifiedFunction(byref(fptr), lib, None) == INVALID_VALUE
    cu.ok(cu.cuLibraryUnload(lib))
    cu.ok(cu.cuModuleUnload(module))


def test_context_usage_count(cu):
    """cuCtxAttach counts a use of the current context, cuCtxDetach gives one back and destroys
    the context with its last (cuCtxCreate's); a primary context is never destroyed so."""
    ctx, attached = c_void_p(), c_void_p()
    cu.ok(cu.cuCtxCreate_v2(byref(ctx), 0, 0))
    cu.ok(cu.cuCtxAttach(byref(attached), 0))
    assert attached.value == ctx.value
    assert cu.cuCtxAttach(byref(attached), 1) == INVALID_VALUE
    cu.ok(cu.cuCtxDetach(ctx))  # the attachment
    version = c_uint()
    cu.ok(cu.cuCtxGetApiVersion(ctx, byref(version)))  # still alive
    cu.ok(cu.cuCtxDetach(ctx))  # cuCtxCreate's count: destroyed
    assert cu.cuCtxGetApiVersion(ctx, byref(version)) == 201  # CUDA_ERROR_INVALID_CONTEXT
    current = c_void_p()
    cu.ok(cu.cuCtxGetCurrent(byref(current)))
    assert current.value == cu.ctx.value  # the destroyed context left the stack
    assert cu.cuCtxDetach(cu.ctx) == 201  # the primary context
    other = c_void_p()
    cu.ok(cu.cuCtxCreate_v2(byref(other), 0, 0))  # pushed: current now
    cu.ok(cu.cuCtxPopCurrent_v2(byref(current)))
    assert cu.cuCtxDetach(other) == 201  # not current to this thread
    cu.ok(cu.cuCtxDestroy_v2(other))
