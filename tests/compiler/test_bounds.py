"""Bounds checks: an access outside every valid range stops the launch with 700
(CUDA_ERROR_ILLEGAL_ADDRESS) before it touches memory, and the module keeps working.

Memory registered with `register_memory` (numpy arrays here: the host program's) is checked
exactly in every mode. Device memory from the CPU backend sits in mapped regions
(backends/regions.py): by default an access a little outside an allocation but inside its
region works, as on the GPU; `exact` mode (ZLUDA_CHECK_BOUNDS=exact) checks allocations only."""

from __future__ import annotations

import os

import numpy as np
import pytest

from zluda_py.backends import regions
from zluda_py.backends.cpu import memory as device_memory
from zluda_py.compiler import LaunchError, compile, register_memory, unregister_memory
from zluda_py.compiler.cpu.bounds import RANGES

PTX = r"""
.version 7.8
.target sm_80
.address_size 64
.extern .func (.param .b64 ret) malloc (.param .b64 size);
.extern .func free (.param .b64 ptr);

// p[base + tid] = val
.visible .entry store_at(.param .u64 p, .param .u32 base, .param .u32 val)
{
    .reg .b32 %r<5>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u32 %r1, [base];
    mov.u32 %r2, %tid.x;
    add.s32 %r3, %r1, %r2;
    mul.wide.u32 %rd2, %r3, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.param.u32 %r4, [val];
    st.global.u32 [%rd3], %r4;
    ret;
}

// out[tid] = p[base + tid], a generic load
.visible .entry load_at(.param .u64 p, .param .u32 base, .param .u64 out)
{
    .reg .b32 %r<5>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [base];
    mov.u32 %r2, %tid.x;
    add.s32 %r3, %r1, %r2;
    mul.wide.u32 %rd2, %r3, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.u32 %r4, [%rd3];
    ld.param.u64 %rd4, [out];
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd5, %rd4, %rd2;
    st.global.u32 [%rd5], %r4;
    ret;
}

// buf[off/4 + tid] = tid through a .shared address and through the generic one; out[tid] = buf[tid]
.visible .entry shared_at(.param .u32 off, .param .u32 generic, .param .u64 out)
{
    .shared .align 4 .b8 buf[128];
    .reg .pred %p;
    .reg .b32 %r<6>;
    .reg .b64 %rd<5>;
    mov.u32 %r1, buf;
    ld.param.u32 %r2, [off];
    mov.u32 %r3, %tid.x;
    shl.b32 %r4, %r3, 2;
    add.s32 %r1, %r1, %r2;
    add.s32 %r1, %r1, %r4;
    ld.param.u32 %r5, [generic];
    setp.ne.u32 %p, %r5, 0;
    @%p bra GEN;
    st.shared.u32 [%r1], %r3;
    bra.uni DONE;
GEN:
    cvt.u64.u32 %rd1, %r1;
    cvta.shared.u64 %rd2, %rd1;
    st.u32 [%rd2], %r3;
DONE:
    bar.sync 0;
    mov.u32 %r1, buf;
    add.s32 %r1, %r1, %r4;
    ld.shared.u32 %r2, [%r1];
    ld.param.u64 %rd3, [out];
    cvt.u64.u32 %rd1, %r4;
    add.s64 %rd4, %rd3, %rd1;
    st.global.u32 [%rd4], %r2;
    ret;
}

// out[tid] = p[tid - back]: a signed index (srad_v2 reads the row before its first one)
.visible .entry load_back(.param .u64 p, .param .u32 back, .param .u64 out)
{
    .reg .b32 %r<5>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [back];
    mov.u32 %r2, %tid.x;
    sub.s32 %r3, %r2, %r1;
    mul.wide.s32 %rd2, %r3, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.u32 %r4, [%rd3];
    ld.param.u64 %rd4, [out];
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd5, %rd4, %rd2;
    st.global.u32 [%rd5], %r4;
    ret;
}

// a .local access at a register offset
.visible .entry local_at(.param .u64 off, .param .u64 out)
{
    .local .align 4 .b8 frame[16];
    .reg .b32 %r<2>;
    .reg .b64 %rd<4>;
    mov.u64 %rd1, frame;
    ld.param.u64 %rd2, [off];
    add.s64 %rd1, %rd1, %rd2;
    mov.u32 %r1, 7;
    st.local.u32 [%rd1], %r1;
    ld.local.u32 %r1, [%rd1];
    ld.param.u64 %rd3, [out];
    st.global.u32 [%rd3], %r1;
    ret;
}

// each thread mallocs 16 bytes, writes and reads them, frees them: out[tid] = 3*tid
// (use_after_free != 0: read once more after the free)
.visible .entry heap(.param .u64 out, .param .u32 use_after_free)
{
    .reg .pred %p;
    .reg .b32 %r<4>;
    .reg .b64 %rd<5>;
    {
    .param .b64 size;
    st.param.b64 [size], 16;
    .param .b64 ret;
    call.uni (ret), malloc, (size);
    ld.param.b64 %rd1, [ret];
    }
    mov.u32 %r1, %tid.x;
    mul.lo.s32 %r2, %r1, 3;
    st.u32 [%rd1+12], %r2;
    ld.u32 %r3, [%rd1+12];
    {
    .param .b64 ptr;
    st.param.b64 [ptr], %rd1;
    call.uni free, (ptr);
    }
    ld.param.u32 %r2, [use_after_free];
    setp.ne.u32 %p, %r2, 0;
    @%p ld.u32 %r3, [%rd1];
    ld.param.u64 %rd2, [out];
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.u32 [%rd4], %r3;
    ret;
}
"""


@pytest.fixture(scope="module")
def m():
    return compile(PTX)


@pytest.fixture
def guarded():
    """128 u32 of host memory of which only the first 64 are registered device memory."""
    mem = np.full(128, 0xDEAD, np.uint32)
    register_memory(mem.ctypes.data, 64 * 4)
    yield mem
    unregister_memory(mem.ctypes.data)


def illegal(fn, *args, **kw) -> str:
    with pytest.raises(LaunchError) as e:
        fn(*args, **kw)
    assert e.value.cu_result == 700, e.value
    return str(e.value)


def test_store_one_past_the_end_faults_without_writing(m, guarded):
    p = guarded.ctypes.data
    m.launch("store_at", 1, 32, [p, 32, 5])  # elements 32..63: the last ones inside
    assert (guarded[32:64] == 5).all() and (guarded[64:] == 0xDEAD).all()
    message = illegal(m.launch, "store_at", 1, 32, [p, 33, 6])  # lane 31 writes element 64
    assert f"0x{p + 64 * 4:x}" in message
    assert (guarded[64:] == 0xDEAD).all()  # host memory past the allocation is untouched
    m.launch("store_at", 1, 32, [p, 0, 9])  # the module still works
    assert (guarded[:32] == 9).all()


def test_partial_warp_at_the_end_does_not_fault(m, guarded):
    m.launch("store_at", 1, 20, [guarded.ctypes.data, 44, 4])  # 20 lanes: elements 44..63
    assert (guarded[44:64] == 4).all() and (guarded[64:] == 0xDEAD).all()


@pytest.mark.parametrize("address", [0, 8, 0xDEAD0000, (1 << 64) - 4])
def test_null_and_wild_pointers_fault(m, address):
    out = np.zeros(32, np.uint32)
    illegal(m.launch, "load_at", 1, 32, [address, 0, out])
    illegal(m.launch, "store_at", 1, 1, [address, 0, 1])
    src = np.arange(32, dtype=np.uint32)
    m.launch("load_at", 1, 32, [src, 0, out])
    np.testing.assert_array_equal(out, src)


def test_registered_numpy_arrays_and_unregistering(m):
    src = np.arange(40, dtype=np.uint32) * 7
    out = np.zeros(32, np.uint32)
    register_memory(src.ctypes.data, src.nbytes)
    try:
        m.launch("load_at", 1, 32, [src.ctypes.data, 8, out])  # a raw pointer into registered memory
    finally:
        unregister_memory(src.ctypes.data)
    np.testing.assert_array_equal(out, src[8:40])
    illegal(m.launch, "load_at", 1, 32, [src.ctypes.data, 8, out])  # no longer registered


@pytest.mark.parametrize("generic", [0, 1])
def test_shared_memory_overflow(m, generic):
    out = np.zeros(32, np.uint32)
    m.launch("shared_at", 1, 32, [0, generic, out])  # buf[0..31]: exactly the 128 static bytes
    np.testing.assert_array_equal(out, np.arange(32))
    illegal(m.launch, "shared_at", 1, 32, [4, generic, out])  # lane 31 writes bytes 128..131
    m.launch("shared_at", 1, 32, [4, generic, out], shared_mem=4)  # ... which dynamic smem makes valid
    np.testing.assert_array_equal(out[1:], np.arange(31))


def test_local_memory_outside_the_stack_window(m):
    out = np.zeros(1, np.uint32)
    m.launch("local_at", 1, 1, [12, out])
    assert out[0] == 7
    illegal(m.launch, "local_at", 1, 1, [1024, out])  # past the 1 KiB per-thread stack
    illegal(m.launch, "local_at", 1, 1, [-8 & (2**64 - 1), out])


def test_device_malloc_memory_is_valid_until_freed(m):
    out = np.zeros(64, np.uint32)
    m.launch("heap", 2, 32, [out, 0])  # both blocks write out[0..31]
    np.testing.assert_array_equal(out[:32], np.arange(32) * 3)
    illegal(m.launch, "heap", 1, 32, [out, 1])


@pytest.fixture(params=["mapped", "exact"])
def mode(request, monkeypatch):
    """Run in the default (GPU-like) mode and in the sanitizer mode."""
    monkeypatch.setattr(RANGES, "mode", request.param)
    return request.param


@pytest.fixture(params=[(4096, "device"), (8 << 20, "device"), (4096, "managed"), (4096, "host")])
def allocation(request):
    """Device memory from the CPU backend (what cuMemAlloc & co. return), holding 0, 1, 2, ..."""
    size, kind = request.param
    a = device_memory.allocate(size, kind, 0, None)
    data = np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint32 * (size // 4)).from_address(a.base))
    data[:] = np.arange(size // 4)
    yield a
    device_memory.release(a.base)


@pytest.mark.parametrize("back", [1, 2048])
def test_reading_before_an_allocation(m, allocation, mode, back):
    """srad_v2 reads up to a row before its array: the GPU does not fault, the sanitizer does."""
    out = np.zeros(32, np.uint32)
    args = [allocation.base, back, out]
    if mode == "exact":
        message = illegal(m.launch, "load_back", 1, 32, args)
        assert message.endswith(f"lane 0 (thread (0,0,0)), address 0x{allocation.base - 4 * back:x}"), message
    else:
        m.launch("load_back", 1, 32, args)  # whatever lies there: another allocation, or zeros
        np.testing.assert_array_equal(out[back:], np.arange(32 - back))


def test_reading_past_the_end_of_an_allocation(m, allocation, mode):
    out = np.zeros(32, np.uint32)
    n = allocation.size // 4
    args = [allocation.base, n - 24, out]  # elements n-24 .. n+7
    if mode == "exact":
        message = illegal(m.launch, "load_at", 1, 32, args)
        assert message.endswith(f"lane 24 (thread (24,0,0)), address 0x{allocation.base + 4 * n:x}"), message
    else:
        m.launch("load_at", 1, 32, args)
        np.testing.assert_array_equal(out[:24], np.arange(n - 24, n))


def test_writes_outside_everything_mapped_fault_in_every_mode(m, allocation, mode):
    """The first byte after the mapped memory around an allocation (its region, merged with any
    adjacent ones): a write there would land in the host's memory, so it always faults."""
    table = RANGES.table()
    row = int(np.searchsorted(table[:, 0], np.uint64(allocation.base), side="right")) - 1
    end = int(table[row, 1])
    assert mode == "exact" or end >= allocation.base + allocation.size + regions.GRANULE
    illegal(m.launch, "store_at", 1, 1, [end, 0, 7])
    illegal(m.launch, "store_at", 1, 32, [allocation.base, 1 << 28, 7])  # 1 GiB past its start
    illegal(m.launch, "store_at", 1, 1, [0xDEAD0000, 0, 7])
    m.launch("store_at", 1, 32, [allocation.base, 0, 7])  # its own elements: fine in both modes


def test_freed_regions_are_unmapped_for_the_check(m, monkeypatch):
    monkeypatch.setattr(RANGES, "mode", "mapped")
    a = device_memory.allocate(8 << 20, "device", 0, None)
    m.launch("store_at", 1, 32, [a.base - 64, 0, 1])  # inside the region's guard
    device_memory.release(a.base)
    illegal(m.launch, "store_at", 1, 32, [a.base, 0, 1])


@pytest.mark.parametrize("size", [4096, 3 << 20])
def test_payloads_are_granule_aligned_and_advised_as_huge_pages(size):
    """NVIDIA maps device memory in 2 MiB pages; the regions' payloads start on a granule and
    carry MADV_HUGEPAGE (the "hg" flag of their mapping in smaps) wherever the kernel has THP."""
    a = device_memory.allocate(size, "device", 0, None)
    try:
        if size > regions.SMALL:
            assert a.base % regions.GRANULE == 0
        flags = _vm_flags(a.base)
        assert ("hg" in flags) == os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled"), flags
        assert "hg" not in _vm_flags(a.base - regions.GRANULE)  # the guard below: never populated, not advised
    finally:
        device_memory.release(a.base)


def _vm_flags(address: int) -> list[str]:
    """VmFlags of the mapping holding `address` in /proc/self/smaps."""
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= address < hi
            elif inside and head == "VmFlags:":
                return line.split()[1:]
    raise AssertionError(f"0x{address:x} is not mapped")
