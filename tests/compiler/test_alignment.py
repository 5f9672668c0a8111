"""Misaligned accesses stop the launch with 716 (CUDA_ERROR_MISALIGNED_ADDRESS), as on the GPU,
naming the first misaligned lane and its address, before anything is written; naturally
aligned accesses (vectors aligned to their whole size) run."""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler import LaunchError, compile

PTX = r"""
.version 7.8
.target sm_80
.address_size 64

// *(u32 *)(p + off + 4 * tid) = tid: lanes contiguous
.visible .entry store_u32(.param .u64 p, .param .u32 off)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [off];
    mov.u32 %r2, %tid.x;
    cvt.u64.u32 %rd2, %r1;
    mul.wide.u32 %rd3, %r2, 4;
    add.s64 %rd4, %rd1, %rd2;
    add.s64 %rd4, %rd4, %rd3;
    st.global.u32 [%rd4], %r2;
    ret;
}

// out[tid] = *(f64 *)(p + off + stride * tid): one address for all lanes (stride 0) or a gather
.visible .entry load_f64(.param .u64 p, .param .u32 off, .param .u32 stride, .param .u64 out)
{
    .reg .b32 %r<4>;
    .reg .f64 %fd1;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [off];
    ld.param.u32 %r2, [stride];
    mov.u32 %r3, %tid.x;
    cvt.u64.u32 %rd2, %r1;
    mul.wide.u32 %rd3, %r3, %r2;
    add.s64 %rd4, %rd1, %rd2;
    add.s64 %rd4, %rd4, %rd3;
    ld.global.f64 %fd1, [%rd4];
    ld.param.u64 %rd5, [out];
    mul.wide.u32 %rd6, %r3, 8;
    add.s64 %rd7, %rd5, %rd6;
    st.global.f64 [%rd7], %fd1;
    ret;
}

// *(v4.f32 *)(p + off + 16 * tid) += 1
.visible .entry add_v4(.param .u64 p, .param .u32 off)
{
    .reg .b32 %r<3>;
    .reg .f32 %f<5>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [off];
    mov.u32 %r2, %tid.x;
    cvt.u64.u32 %rd2, %r1;
    mul.wide.u32 %rd3, %r2, 16;
    add.s64 %rd4, %rd1, %rd2;
    add.s64 %rd4, %rd4, %rd3;
    ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd4];
    add.f32 %f1, %f1, 0f3F800000;
    add.f32 %f2, %f2, 0f3F800000;
    add.f32 %f3, %f3, 0f3F800000;
    add.f32 %f4, %f4, 0f3F800000;
    st.global.v4.f32 [%rd4], {%f1, %f2, %f3, %f4};
    ret;
}

// atomicAdd((u32 *)(p + off), 1) in every lane
.visible .entry atomic_u32(.param .u64 p, .param .u32 off)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [off];
    cvt.u64.u32 %rd2, %r1;
    add.s64 %rd1, %rd1, %rd2;
    atom.global.add.u32 %r2, [%rd1], 1;
    ret;
}

// buf[off + 4 * tid] = tid in shared memory
.visible .entry shared_u32(.param .u32 off)
{
    .shared .align 16 .b8 buf[256];
    .reg .b32 %r<5>;
    mov.u32 %r1, buf;
    ld.param.u32 %r2, [off];
    mov.u32 %r3, %tid.x;
    shl.b32 %r4, %r3, 2;
    add.s32 %r1, %r1, %r2;
    add.s32 %r1, %r1, %r4;
    st.shared.u32 [%r1], %r3;
    ret;
}
"""


@pytest.fixture(scope="module")
def m():
    return compile(PTX)


def misaligned(fn, *args) -> str:
    with pytest.raises(LaunchError) as e:
        fn(*args)
    assert e.value.cu_result == 716, e.value
    assert "misaligned address" in str(e.value), e.value
    return str(e.value)


def test_misaligned_u32_store_faults_naming_lane_and_address_without_writing(m):
    mem = np.zeros(64, np.uint32)
    p = mem.ctypes.data
    message = misaligned(m.launch, "store_u32", 1, 32, [mem, 2])
    assert "lane 0 " in message and f"address 0x{p + 2:x}" in message, message
    assert not mem.any()
    m.launch("store_u32", 1, 32, [mem, 4])  # aligned: runs, and the module still works
    np.testing.assert_array_equal(mem[1:33], np.arange(32))


@pytest.mark.parametrize("stride", [0, 8, 24])
def test_misaligned_f64_load_faults(m, stride):
    src = np.arange(32 * 4, dtype=np.float64)
    out = np.zeros(32)
    p = src.ctypes.data
    message = misaligned(m.launch, "load_f64", 1, 32, [src, 4, stride, out])
    assert f"address 0x{p + 4:x}" in message, message
    m.launch("load_f64", 1, 32, [src, 8, stride, out])
    np.testing.assert_array_equal(out, src[1 + np.arange(32) * stride // 8])


def test_only_the_misaligned_lane_of_a_gather_is_named(m):
    src = np.arange(32 * 4, dtype=np.float64)
    out = np.zeros(32)
    # lane i at p + 8 + 12 * i: lanes 0, 2, 4... are 8-aligned, lane 1 (p + 20) is the first that is not
    message = misaligned(m.launch, "load_f64", 1, 32, [src, 8, 12, out])
    assert "lane 1 " in message and f"address 0x{src.ctypes.data + 20:x}" in message, message


def test_aligned_v4_runs_and_misaligned_v4_faults(m):
    mem = np.zeros(32 * 4 + 4, np.float32)
    assert mem.ctypes.data % 16 == 0
    m.launch("add_v4", 1, 32, [mem, 16])  # 16-byte aligned vectors: no fault
    assert (mem[4:] == 1).all() and (mem[:4] == 0).all()
    misaligned(m.launch, "add_v4", 1, 32, [mem, 8])  # 8-aligned is not enough for .v4.f32
    assert (mem[4:] == 1).all() and (mem[:4] == 0).all()


def test_misaligned_atomic_and_shared_store_fault(m):
    mem = np.zeros(4, np.uint32)
    misaligned(m.launch, "atomic_u32", 1, 32, [mem, 1])
    assert not mem.any()
    m.launch("atomic_u32", 1, 32, [mem, 4])
    assert mem[1] == 32
    misaligned(m.launch, "shared_u32", 1, 32, [2])
    m.launch("shared_u32", 1, 32, [0])
