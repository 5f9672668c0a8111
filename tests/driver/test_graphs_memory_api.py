"""Graphs, stream capture, memory pools, VMM and IPC at the driver level: the CUresults of
their misuse (the cudart programs tests/cuda/e2e_graphs.cu and e2e_memory_api.cu cover the
working paths under `zluda run`)."""

from __future__ import annotations

import ctypes
import subprocess
import sys
from ctypes import byref, c_int, c_size_t, c_uint, c_ulonglong, c_void_p

from zluda_py.cli.api_cmd import classify

INVALID_VALUE, NOT_SUPPORTED, ILLEGAL_STATE, INVALID_HANDLE = 1, 801, 401, 400
CAPTURE_UNSUPPORTED, CAPTURE_INVALIDATED, CAPTURE_UNMATCHED, CAPTURE_IMPLICIT = 900, 901, 903, 906
CAPTURED_EVENT, GRAPH_EXEC_UPDATE_FAILURE = 907, 910


def _stream(cu, flags=0) -> c_void_p:
    s = c_void_p()
    cu.ok(cu.cuStreamCreate(byref(s), flags))
    return s


def test_capture_of_the_legacy_stream_and_double_begin(cu):
    s = _stream(cu)
    assert cu.cuStreamBeginCapture_v2(None, 0) == CAPTURE_UNSUPPORTED
    cu.ok(cu.cuStreamBeginCapture_v2(s, 0))
    assert cu.cuStreamBeginCapture_v2(s, 0) == ILLEGAL_STATE
    status = c_int()
    cu.ok(cu.cuStreamIsCapturing(s, byref(status)))
    assert status.value == 1
    g = c_void_p()
    cu.ok(cu.cuStreamEndCapture(s, byref(g)))
    assert g.value  # an empty graph
    assert cu.cuStreamEndCapture(s, byref(c_void_p())) == ILLEGAL_STATE
    cu.ok(cu.cuGraphDestroy(g))
    cu.ok(cu.cuStreamDestroy_v2(s))


def test_legacy_stream_work_during_a_blocking_capture_invalidates_it(cu):
    s = _stream(cu)  # blocking: ordered with the legacy stream
    buf = c_ulonglong()
    cu.ok(cu.cuMemAlloc_v2(byref(buf), 64))
    cu.ok(cu.cuStreamBeginCapture_v2(s, 2))  # relaxed: only the implicit ordering is at stake
    assert cu.cuMemsetD8Async(buf, 0, 64, None) == CAPTURE_IMPLICIT
    g = c_void_p()
    assert cu.cuStreamEndCapture(s, byref(g)) == CAPTURE_INVALIDATED
    assert g.value is None
    cu.ok(cu.cuMemFree_v2(buf))


def test_unsafe_calls_follow_the_capture_mode(cu):
    s = _stream(cu, 1)
    buf, g = c_ulonglong(), c_void_p()
    cu.ok(cu.cuStreamBeginCapture_v2(s, 1))  # thread-local
    assert cu.cuCtxSynchronize() == CAPTURE_UNSUPPORTED
    assert cu.cuStreamEndCapture(s, byref(g)) == CAPTURE_INVALIDATED
    cu.ok(cu.cuStreamBeginCapture_v2(s, 0))
    mode = c_int(2)  # this thread relaxed: its synchronous calls are its own business
    cu.ok(cu.cuThreadExchangeStreamCaptureMode(byref(mode)))
    assert mode.value == 0
    cu.ok(cu.cuMemAlloc_v2(byref(buf), 64))
    cu.ok(cu.cuThreadExchangeStreamCaptureMode(byref(mode)))
    cu.ok(cu.cuStreamEndCapture(s, byref(g)))
    cu.ok(cu.cuGraphDestroy(g))
    cu.ok(cu.cuMemFree_v2(buf))


def test_captured_events_and_ending_elsewhere(cu):
    s, other = _stream(cu, 1), _stream(cu, 1)
    ev = c_void_p()
    cu.ok(cu.cuEventCreate(byref(ev), 0))
    cu.ok(cu.cuStreamBeginCapture_v2(s, 2))
    cu.ok(cu.cuEventRecord(ev, s))
    assert cu.cuEventQuery(ev) == CAPTURED_EVENT
    assert cu.cuEventSynchronize(ev) == CAPTURED_EVENT
    cu.ok(cu.cuStreamWaitEvent(other, ev, 0))  # other joins
    g = c_void_p()
    assert cu.cuStreamEndCapture(other, byref(g)) == CAPTURE_UNMATCHED
    assert cu.cuStreamEndCapture(s, byref(g)) == CAPTURE_INVALIDATED


def test_graph_structure_and_update_errors(cu):
    g, g2 = c_void_p(), c_void_p()
    cu.ok(cu.cuGraphCreate(byref(g), 0))
    assert cu.cuGraphCreate(byref(g2), 1) == INVALID_VALUE
    a, b = c_void_p(), c_void_p()
    cu.ok(cu.cuGraphAddEmptyNode(byref(a), g, None, 0))
    cu.ok(cu.cuGraphAddEmptyNode(byref(b), g, byref(a), 1))
    assert cu.cuGraphAddDependencies(g, byref(a), byref(b), 1) == INVALID_VALUE  # exists already
    cu.ok(cu.cuGraphAddDependencies(g, byref(b), byref(a), 1))  # a cycle: refused at instantiation
    exe = c_void_p()
    assert cu.cuGraphInstantiateWithFlags(byref(exe), g, c_ulonglong(0)) == INVALID_VALUE
    cu.ok(cu.cuGraphRemoveDependencies(g, byref(b), byref(a), 1))
    cu.ok(cu.cuGraphInstantiateWithFlags(byref(exe), g, c_ulonglong(0)))
    assert cu.cuGraphInstantiateWithFlags(byref(c_void_p()), g, c_ulonglong(4)) == NOT_SUPPORTED  # device launch
    cu.ok(cu.cuGraphCreate(byref(g2), 0))
    info = (ctypes.c_byte * 24)()
    assert cu.cuGraphExecUpdate_v2(exe, g2, info) == GRAPH_EXEC_UPDATE_FAILURE
    assert ctypes.cast(info, ctypes.POINTER(c_int))[0] == 2  # CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED
    count = c_size_t()
    cu.ok(cu.cuGraphGetEdges_v2(g, None, None, None, byref(count)))
    assert count.value == 1
    cu.ok(cu.cuGraphConditionalHandleCreate(byref(c_ulonglong()), g, cu.ctx, 0, 1))
    assert cu.cuGraphConditionalHandleCreate(byref(c_ulonglong()), g, cu.ctx, 0, 2) == INVALID_VALUE  # flags
    s = _stream(cu, 1)
    cu.ok(cu.cuGraphLaunch(exe, s))
    cu.ok(cu.cuStreamSynchronize(s))
    for destroy, h in ((cu.cuGraphExecDestroy, exe), (cu.cuGraphDestroy, g), (cu.cuGraphDestroy, g2)):
        cu.ok(destroy(h))
    assert cu.cuGraphDestroy(g) == INVALID_VALUE


def test_device_reports_pools_vmm_and_fd_handles(cu):
    """What is implemented is reported (cuda-samples' vectorAddMMAP, memMapIPCDrv,
    streamOrderedAllocation and graphMemoryNodes check these first and were waived); pools
    cannot be shared between processes, so streamOrderedAllocationIPC is waived."""
    # VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, MEMORY_POOLS_SUPPORTED,
    # MEMPOOL_SUPPORTED_HANDLE_TYPES (none: cuMemPoolExportToShareableHandle is NOT_SUPPORTED)
    for attribute, expected in ((102, 1), (103, 1), (115, 1), (119, 0)):
        v = c_int(-1)
        cu.ok(cu.cuDeviceGetAttribute(byref(v), attribute, 0))
        assert v.value == expected, attribute


def test_pool_and_vmm_errors(cu):
    pool = c_void_p()
    cu.ok(cu.cuDeviceGetDefaultMemPool(byref(pool), 0))
    assert cu.cuMemPoolDestroy(pool) == INVALID_VALUE
    value = c_ulonglong(5)
    assert cu.cuMemPoolSetAttribute(pool, 8, byref(value)) == INVALID_VALUE  # high watermark: only 0
    assert cu.cuMemPoolSetAttribute(pool, 5, byref(value)) == INVALID_VALUE  # read-only
    ptr = c_ulonglong()
    assert cu.cuMemAddressReserve(byref(ptr), c_size_t(4096), c_size_t(0), c_ulonglong(0), c_ulonglong(0)) == INVALID_VALUE
    cu.ok(cu.cuMemAddressReserve(byref(ptr), c_size_t(2 << 20), c_size_t(0), c_ulonglong(0), c_ulonglong(0)))
    assert cu.cuMemUnmap(ptr, c_size_t(2 << 20)) == INVALID_VALUE  # nothing mapped there
    cu.ok(cu.cuMemAddressFree(ptr, c_size_t(2 << 20)))


def test_ipc_errors(cu):
    handle = (ctypes.c_char * 64)()
    ev = c_void_p()
    cu.ok(cu.cuEventCreate(byref(ev), 2))  # not interprocess
    assert cu.cuIpcGetEventHandle(handle, ev) == INVALID_HANDLE  # as an H200 answers
    host = ctypes.create_string_buffer(64)
    assert cu.cuIpcGetMemHandle(handle, c_ulonglong(ctypes.addressof(host))) == INVALID_VALUE
    assert cu.cuIpcCloseMemHandle(c_ulonglong(ctypes.addressof(host))) == INVALID_VALUE


def test_coverage_lists_every_entry_point():
    assert classify("cuGLInit", False)[0] == "n/a"
    assert classify("cuGraphLaunch", True) == ("implemented", "")
    assert classify("cuImportExternalSemaphore", False) == ("refused", "external semaphores (Vulkan/D3D/NvSci sync objects)")
    out = subprocess.run([sys.executable, "-m", "zluda_py.cli", "api", "coverage"], capture_output=True, text=True, check=True).stdout
    names = {line.split()[0] for line in out.splitlines()[:-1]}
    assert {"cuGraphInstantiateWithFlags", "cuStreamBeginCapture_v2", "cuMemPoolCreate", "cuMemMap", "cuIpcOpenMemHandle_v2"} <= names
    assert out.splitlines()[-1].startswith("total ")
