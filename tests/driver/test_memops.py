"""Stream memory operations (cuStreamWaitValue32/64, cuStreamWriteValue32/64,
cuStreamBatchMemOp, their graph nodes) through libcuda.so.1. Conditions are cuda.h's
CUstreamWaitValue_flags, checked here with numpy's fixed-width integers: GEQ is
(intN_t)(*addr - value) >= 0, EQ *addr == value, AND (*addr & value) != 0, NOR ~(*addr | value) != 0.
The waiting streams are non-blocking ones, so that a wait left pending never holds up the
legacy stream the other tests use."""

from __future__ import annotations

import ctypes
import subprocess
import sys
import textwrap
import time
from ctypes import POINTER, byref, c_int, c_uint, c_ulonglong, c_void_p

import numpy as np
import pytest

from tests.conftest import as_from_a_terminal
from zluda_py.driver.memops import satisfied

INVALID_VALUE, NOT_READY = 1, 600
GEQ, EQ, AND, NOR, FLUSH = 0, 1, 2, 3, 1 << 30
WAIT32, WRITE32, FLUSH_REMOTE, WAIT64, WRITE64, BARRIER = 1, 2, 3, 4, 5, 6
NON_BLOCKING = 1

PUT_PTX = b""".version 7.0
.target sm_52
.address_size 64
.visible .entry put(.param .u64 p, .param .u64 v)
{
  .reg .b64 %rd<3>; .reg .b32 %r<2>;
  ld.param.u64 %rd1, [p];
  ld.param.u64 %rd2, [v];
  cvt.u32.u64 %r1, %rd2;
  st.volatile.global.u32 [%rd1], %r1;
  ret;
}
\0"""


class MemOpParams(ctypes.Structure):
    """CUstreamBatchMemOpParams as its wait/write member (the union is 48 bytes)."""
    _fields_ = [("operation", c_int), ("address", c_ulonglong), ("value64", c_ulonglong), ("flags", c_uint),
                ("alias", c_ulonglong), ("pad", c_ulonglong)]


class BatchNodeParams(ctypes.Structure):
    _fields_ = [("ctx", c_void_p), ("count", c_uint), ("paramArray", POINTER(MemOpParams)), ("flags", c_uint)]


def _argtypes(cu) -> None:
    for bits, value in ((32, c_uint), (64, c_ulonglong)):
        for v in ("", "_v2", "_v2_ptsz"):
            for op in ("Wait", "Write"):
                getattr(cu, f"cuStream{op}Value{bits}{v}").argtypes = [c_void_p, c_ulonglong, value, c_uint]


@pytest.fixture
def mcu(cu):
    _argtypes(cu)
    return cu


def _stream(cu) -> c_void_p:
    s = c_void_p()
    cu.ok(cu.cuStreamCreate(byref(s), NON_BLOCKING))
    return s


def _alloc(cu, size: int = 64) -> int:
    p = c_ulonglong()
    cu.ok(cu.cuMemAlloc_v2(byref(p), ctypes.c_size_t(size)))
    cu.ok(cu.cuMemsetD8_v2(p, 0, ctypes.c_size_t(size)))
    return p.value


def _read(cu, ptr: int, ctype=c_ulonglong) -> int:
    out = ctype()
    cu.ok(cu.cuMemcpyDtoH_v2(byref(out), c_ulonglong(ptr), ctypes.c_size_t(ctypes.sizeof(ctype))))
    return out.value


def _reference(current: int, value: int, condition: int, bits: int) -> bool:
    signed, unsigned = (np.int32, np.uint32) if bits == 32 else (np.int64, np.uint64)
    c, v = unsigned(current), unsigned(value)
    with np.errstate(over="ignore"):
        return {GEQ: bool((c - v).astype(signed) >= 0), EQ: bool(c == v), AND: bool(c & v != 0),
                NOR: bool(~(c | v) != 0)}[condition]


@pytest.mark.parametrize("bits", [32, 64])
def test_conditions_match_cuda_h(bits):
    top = (1 << bits) - 1
    words = [0, 1, 2, 5, 0x7F, top >> 1, (top >> 1) + 1, top - 1, top]
    for condition in (GEQ, EQ, AND, NOR):
        for current in words:
            for value in words:
                assert satisfied(current, value, condition, bits) == _reference(current, value, condition, bits), \
                    (condition, hex(current), hex(value))


def test_attributes_report_the_operations(mcu):
    # CAN_USE_STREAM_MEM_OPS_V1, 64_BIT_V1, WAIT_VALUE_NOR_V1, CAN_FLUSH_REMOTE_WRITES, 64_BIT, WAIT_VALUE_NOR
    for attribute in (92, 93, 94, 98, 122, 123):
        v = c_int(-1)
        mcu.ok(mcu.cuDeviceGetAttribute(byref(v), attribute, 0))
        assert v.value == 1, attribute


def test_writes_and_satisfied_waits(mcu):
    cu, s, buf = mcu, _stream(mcu), _alloc(mcu)
    cu.ok(cu.cuStreamWriteValue32_v2(s, buf, 0xDEADBEEF, 0))
    cu.ok(cu.cuStreamWriteValue64_v2(s, buf + 8, 0x0123456789ABCDEF, 0))
    cu.ok(cu.cuStreamWriteValue32(s, buf + 16, 7, 1))  # v1 takes NO_MEMORY_BARRIER
    cu.ok(cu.cuStreamWaitValue32_v2(s, buf, 0xDEADBEEF, EQ))
    cu.ok(cu.cuStreamWaitValue32_v2(s, buf + 16, 0xFFFFFFFF, GEQ | FLUSH))  # cyclic: 7 - (-1) >= 0
    cu.ok(cu.cuStreamWaitValue64_v2(s, buf + 8, 0x1, AND))
    cu.ok(cu.cuStreamWaitValue64(s, buf + 8, 0x10, NOR))  # ~(x | y) has bits left
    cu.ok(cu.cuStreamWriteValue32_v2(s, buf + 20, 1, 0))
    cu.ok(cu.cuStreamSynchronize(s))
    assert _read(cu, buf, c_uint) == 0xDEADBEEF
    assert _read(cu, buf + 8) == 0x0123456789ABCDEF
    assert _read(cu, buf + 16) == 7 | 1 << 32
    cu.ok(cu.cuMemFree_v2(c_ulonglong(buf)))
    cu.ok(cu.cuStreamDestroy_v2(s))


def test_the_per_thread_default_stream_form(mcu):
    buf = _alloc(mcu)
    mcu.ok(mcu.cuStreamWriteValue32_v2_ptsz(None, buf, 42, 0))
    mcu.ok(mcu.cuStreamSynchronize_ptsz(None))
    assert _read(mcu, buf, c_uint) == 42
    mcu.ok(mcu.cuMemFree_v2(c_ulonglong(buf)))


def test_a_wait_blocks_its_stream_until_the_host_writes(mcu):
    cu, s, other = mcu, _stream(mcu), _stream(mcu)
    host = c_void_p()
    cu.ok(cu.cuMemHostAlloc(byref(host), ctypes.c_size_t(64), 0x2))  # DEVICEMAP
    word = ctypes.cast(host, POINTER(c_uint))
    word[0], word[1] = 0, 0
    dptr = c_ulonglong()
    cu.ok(cu.cuMemHostGetDevicePointer_v2(byref(dptr), host, 0))
    cu.ok(cu.cuStreamWaitValue32_v2(s, dptr.value, 3, EQ))
    cu.ok(cu.cuStreamWriteValue32_v2(s, dptr.value + 4, 99, 0))
    buf = _alloc(cu)
    cu.ok(cu.cuStreamWriteValue32_v2(other, buf, 5, 0))  # another stream is not held up
    cu.ok(cu.cuStreamSynchronize(other))
    time.sleep(0.05)
    assert cu.cuStreamQuery(s) == NOT_READY
    assert word[1] == 0
    word[0] = 2  # not yet equal
    time.sleep(0.05)
    assert cu.cuStreamQuery(s) == NOT_READY
    word[0] = 3
    cu.ok(cu.cuStreamSynchronize(s))
    assert word[1] == 99
    cu.ok(cu.cuMemFreeHost(host))
    cu.ok(cu.cuMemFree_v2(c_ulonglong(buf)))


def test_a_kernel_on_another_stream_releases_the_wait(mcu):
    cu, waiting, writer = mcu, _stream(mcu), _stream(mcu)
    buf = _alloc(cu)
    module, fn = c_void_p(), c_void_p()
    cu.ok(cu.cuModuleLoadData(byref(module), PUT_PTX))
    cu.ok(cu.cuModuleGetFunction(byref(fn), module, b"put"))
    cu.ok(cu.cuStreamWaitValue32_v2(waiting, buf, 5, GEQ))
    cu.ok(cu.cuStreamWriteValue64_v2(waiting, buf + 8, 1 << 40, 0))
    time.sleep(0.05)
    assert cu.cuStreamQuery(waiting) == NOT_READY
    args = [c_ulonglong(buf), c_ulonglong(6)]
    params = (c_void_p * 2)(*[ctypes.cast(byref(a), c_void_p) for a in args])
    cu.ok(cu.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, writer, params, None))
    cu.ok(cu.cuStreamSynchronize(waiting))
    assert _read(cu, buf + 8) == 1 << 40
    cu.ok(cu.cuModuleUnload(module))
    cu.ok(cu.cuMemFree_v2(c_ulonglong(buf)))


def _batch(*ops: tuple[int, int, int, int]):
    array = (MemOpParams * len(ops))()
    for p, (operation, address, value, flags) in zip(array, ops):
        p.operation, p.address, p.value64, p.flags = operation, address, value, flags
    return array


def test_batches(mcu):
    cu, s, buf = mcu, _stream(mcu), _alloc(mcu)
    ops = _batch((WRITE32, buf, 11, 0), (WAIT32, buf, 11, EQ), (WRITE64, buf + 8, 1 << 33, 0),
                 (BARRIER, 0, 0, 0), (FLUSH_REMOTE, 0, 0, 0), (WAIT64, buf + 8, 1 << 33, EQ))
    cu.ok(cu.cuStreamBatchMemOp_v2(s, 6, ops, 0))
    cu.ok(cu.cuStreamSynchronize(s))
    assert (_read(cu, buf, c_uint), _read(cu, buf + 8)) == (11, 1 << 33)
    assert cu.cuStreamBatchMemOp(s, 1, _batch((BARRIER, 0, 0, 0)), 0) == INVALID_VALUE  # _v2 only
    assert cu.cuStreamBatchMemOp_v2(s, 1, ops, 1) == INVALID_VALUE  # flags must be 0
    assert cu.cuStreamBatchMemOp_v2(s, 256, (MemOpParams * 256)(), 0) == INVALID_VALUE  # fewer than 256
    assert cu.cuStreamBatchMemOp_v2(s, 1, None, 0) == INVALID_VALUE
    assert cu.cuStreamBatchMemOp_v2(s, 1, _batch((9, buf, 0, 0)), 0) == INVALID_VALUE
    cu.ok(cu.cuStreamBatchMemOp_v2(s, 0, None, 0))
    cu.ok(cu.cuMemFree_v2(c_ulonglong(buf)))


def test_invalid_arguments(mcu):
    cu, s, buf = mcu, _stream(mcu), _alloc(mcu)
    managed = c_ulonglong()
    cu.ok(cu.cuMemAllocManaged(byref(managed), ctypes.c_size_t(64), 1))
    assert cu.cuStreamWaitValue32_v2(s, buf, 0, 4) == INVALID_VALUE  # no such condition
    assert cu.cuStreamWriteValue32_v2(s, buf, 0, 1) == INVALID_VALUE  # NO_MEMORY_BARRIER is v1 only
    assert cu.cuStreamWriteValue32_v2(s, buf + 2, 0, 0) == INVALID_VALUE  # misaligned
    assert cu.cuStreamWriteValue64_v2(s, buf + 4, 0, 0) == INVALID_VALUE
    assert cu.cuStreamWriteValue64_v2(s, buf + 64, 0, 0) == INVALID_VALUE  # past the allocation
    assert cu.cuStreamWriteValue32_v2(s, managed.value, 0, 0) == INVALID_VALUE  # not managed memory
    assert cu.cuStreamWriteValue32_v2(c_void_p(0x1234), buf, 0, 0) == 400  # CUDA_ERROR_INVALID_HANDLE
    cu.ok(cu.cuStreamSynchronize(s))
    assert _read(cu, buf) == 0
    cu.ok(cu.cuMemFree_v2(managed))
    cu.ok(cu.cuMemFree_v2(c_ulonglong(buf)))


def test_graph_nodes_and_capture(mcu):
    cu, s, buf = mcu, _stream(mcu), _alloc(mcu)
    graph, node, exe = c_void_p(), c_void_p(), c_void_p()
    cu.ok(cu.cuGraphCreate(byref(graph), 0))
    ops = _batch((WRITE32, buf, 21, 0), (WAIT32, buf, 21, EQ))
    p = BatchNodeParams(mcu.ctx, 2, ctypes.cast(ops, POINTER(MemOpParams)), 0)
    cu.ok(cu.cuGraphAddBatchMemOpNode(byref(node), graph, None, 0, byref(p)))
    got = BatchNodeParams()
    cu.ok(cu.cuGraphBatchMemOpNodeGetParams(node, byref(got)))
    assert (got.count, got.paramArray[0].operation, got.paramArray[0].address, got.paramArray[0].value64,
            got.paramArray[1].flags) == (2, WRITE32, buf, 21, EQ)
    cu.ok(cu.cuGraphInstantiateWithFlags(byref(exe), graph, 0))
    cu.ok(cu.cuGraphLaunch(exe, s))
    cu.ok(cu.cuStreamSynchronize(s))
    assert _read(cu, buf, c_uint) == 21
    later = _batch((WRITE32, buf, 22, 0))
    cu.ok(cu.cuGraphExecBatchMemOpNodeSetParams(exe, node, byref(BatchNodeParams(mcu.ctx, 1, later, 0))))
    cu.ok(cu.cuGraphLaunch(exe, s))
    cu.ok(cu.cuStreamSynchronize(s))
    assert _read(cu, buf, c_uint) == 22
    cu.ok(cu.cuGraphBatchMemOpNodeSetParams(node, byref(BatchNodeParams(mcu.ctx, 1, _batch((WRITE32, buf, 23, 0)), 0))))
    cu.ok(cu.cuGraphBatchMemOpNodeGetParams(node, byref(got)))
    assert (got.count, got.paramArray[0].value64) == (1, 23)
    cu.ok(cu.cuGraphExecDestroy(exe))
    cu.ok(cu.cuGraphDestroy(graph))
    # captured: the write becomes a node, run by the launch and not before
    cu.ok(cu.cuStreamBeginCapture_v2(s, 2))
    cu.ok(cu.cuStreamWriteValue64_v2(s, buf + 8, 77, 0))
    cu.ok(cu.cuStreamEndCapture(s, byref(graph)))
    assert _read(cu, buf + 8) == 0
    cu.ok(cu.cuGraphInstantiateWithFlags(byref(exe), graph, 0))
    cu.ok(cu.cuGraphLaunch(exe, s))
    cu.ok(cu.cuStreamSynchronize(s))
    assert _read(cu, buf + 8) == 77
    cu.ok(cu.cuGraphExecDestroy(exe))
    cu.ok(cu.cuGraphDestroy(graph))
    cu.ok(cu.cuMemFree_v2(c_ulonglong(buf)))


def test_a_wait_never_satisfied_stays_interruptible(tmp_path):
    """A Python host blocked in cuStreamSynchronize behind a wait that never ends gets its
    KeyboardInterrupt (the driver returns from the call, docs/driver.md "Signals")."""
    from tests.driver.conftest import shim_path
    script = tmp_path / "hang.py"
    script.write_text(textwrap.dedent(f"""
        import ctypes, sys
        from ctypes import byref, c_void_p, c_ulonglong, c_uint
        cu = ctypes.CDLL({str(shim_path())!r})
        cu.cuStreamWaitValue32_v2.argtypes = [c_void_p, c_ulonglong, c_uint, c_uint]
        ctx, s, p = c_void_p(), c_void_p(), c_ulonglong()
        assert cu.cuInit(0) == 0 and cu.cuDevicePrimaryCtxRetain(byref(ctx), 0) == 0 and cu.cuCtxSetCurrent(ctx) == 0
        assert cu.cuStreamCreate(byref(s), 1) == 0 and cu.cuMemAlloc_v2(byref(p), 8) == 0
        assert cu.cuMemsetD8_v2(p, 0, 8) == 0
        assert cu.cuStreamWaitValue32_v2(s, p.value, 1, 1) == 0
        print("waiting", flush=True)
        try:
            cu.cuStreamSynchronize(s)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(3)
    """))
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                             preexec_fn=as_from_a_terminal)  # Ctrl-C reaches it as from a shell
    try:
        assert child.stdout.readline().strip() == "waiting"
        time.sleep(0.3)
        child.send_signal(2)
        assert child.wait(timeout=30) == 3
        assert child.stdout.read().strip() == "interrupted"
    finally:
        if child.poll() is None:
            child.kill()
