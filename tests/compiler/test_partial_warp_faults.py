"""Faults of a consecutive (or one-address) access by a partial warp whose first active lane is
not lane 0 (cpu/memory.py `_check_range`): 716 names the first active lane and its address,
700 the first lane outside, and nothing is written. Expected lanes and addresses come from the
layout arithmetic, not from our output."""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler import LaunchError, compile, register_memory, unregister_memory

PTX = r"""
.version 7.8
.target sm_80
.address_size 64

// lanes tid >= from: *(u32 *)(p + off + 4 * tid * contiguous) = tid
.visible .entry store_from(.param .u64 p, .param .u32 off, .param .u32 from, .param .u32 contiguous)
{
    .reg .pred %p1;
    .reg .b32 %r<5>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [off];
    ld.param.u32 %r3, [from];
    ld.param.u32 %r4, [contiguous];
    mov.u32 %r2, %tid.x;
    setp.ge.u32 %p1, %r2, %r3;
    cvt.u64.u32 %rd2, %r1;
    mul.lo.u32 %r4, %r4, %r2;
    mul.wide.u32 %rd3, %r4, 4;
    add.s64 %rd4, %rd1, %rd2;
    add.s64 %rd4, %rd4, %rd3;
    @%p1 st.global.u32 [%rd4], %r2;
    ret;
}

// lanes tid >= from: out[tid] = *(u64 *)(p + off + 8 * tid)
.visible .entry load_from(.param .u64 p, .param .u32 off, .param .u32 from, .param .u64 out)
{
    .reg .pred %p1;
    .reg .b32 %r<4>;
    .reg .b64 %rd<9>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [off];
    ld.param.u32 %r3, [from];
    mov.u32 %r2, %tid.x;
    setp.lt.u32 %p1, %r2, %r3;
    @%p1 bra DONE;
    cvt.u64.u32 %rd2, %r1;
    mul.wide.u32 %rd3, %r2, 8;
    add.s64 %rd4, %rd1, %rd2;
    add.s64 %rd4, %rd4, %rd3;
    ld.global.u64 %rd5, [%rd4];
    ld.param.u64 %rd6, [out];
    add.s64 %rd7, %rd6, %rd3;
    st.global.u64 [%rd7], %rd5;
DONE:
    ret;
}
"""


@pytest.fixture(scope="module")
def m():
    return compile(PTX)


def fault(code: int, fn, *args) -> str:
    with pytest.raises(LaunchError) as e:
        fn(*args)
    assert e.value.cu_result == code, e.value
    return str(e.value)


@pytest.mark.parametrize("first", [0, 5, 31])
@pytest.mark.parametrize("contiguous", [1, 0], ids=["consecutive", "one-address"])
def test_a_misaligned_partial_warp_names_its_first_active_lane(m, first: int, contiguous: int) -> None:
    mem = np.zeros(80, np.uint32)
    p = mem.ctypes.data
    message = fault(716, m.launch, "store_from", 1, 32, [mem, 2, first, contiguous])
    address = p + 2 + 4 * first * contiguous
    assert f"lane {first} " in message and f"address 0x{address:x}" in message, message
    assert not mem.any()
    m.launch("store_from", 1, 32, [mem, 8, first, contiguous])  # aligned: runs, the module still works
    if contiguous:
        np.testing.assert_array_equal(mem[2 + first:34], np.arange(first, 32))
        assert not mem[:2 + first].any() and not mem[34:].any()
    else:  # every active lane writes element 2: the highest lane's value stays
        assert mem[2] == 31 and mem.sum() == 31


@pytest.fixture
def guarded():
    """64 u64 of host memory of which only the first 40 are registered device memory."""
    mem = np.full(64, 0xDEAD, np.uint64)
    register_memory(mem.ctypes.data, 40 * 8)
    yield mem
    unregister_memory(mem.ctypes.data)


@pytest.mark.parametrize("first", [3, 17])
def test_a_partial_warp_past_the_end_names_its_first_lane_outside(m, guarded, first: int) -> None:
    p = guarded.ctypes.data
    out = np.zeros(32, np.uint64)
    # lane k reads element 20 + k: lanes 20..31 are outside the 40 registered elements
    message = fault(700, m.launch, "load_from", 1, 32, [p, 20 * 8, first, out])
    assert "lane 20 " in message and f"address 0x{p + 40 * 8:x}" in message, message
    assert not out.any()
    guarded[:40] = np.arange(40, dtype=np.uint64) * 3
    m.launch("load_from", 1, 32, [p, 8 * 8, first, out])  # elements 8..39: inside
    np.testing.assert_array_equal(out[first:], guarded[8 + first:40])
    assert not out[:first].any()

