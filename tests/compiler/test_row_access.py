"""Accesses of 2-D blocks whose rows are not whole warps (cpu/memory.py): with 16-wide rows
each half-warp is one contiguous row (the `halves` path: two vector loads/stores), narrower
rows take the per-lane path, inline when the lanes lie in the site's cached range. Values must
match numpy, the upper half's stores must win where the rows overlap (lane order), and a row
outside its allocation must fault with 700 like the per-lane checks, a misaligned one with 716
naming the first misaligned lane."""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler import LaunchError, compile, register_memory, unregister_memory

HEAD = ".version 7.8\n.target sm_80\n.address_size 64\n"

PTX = HEAD + r"""
// out[y*w + x] = in[y*w + x] + 1 with (x, y) = %tid; rows of `w` u32 elements
.visible .entry rows(.param .u64 in, .param .u64 out, .param .u32 w)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [w];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %tid.y;
    mad.lo.s32 %r4, %r3, %r1, %r2;
    mul.wide.s32 %rd3, %r4, 4;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd5, %rd2, %rd3;
    ld.global.u32 %r5, [%rd4];
    add.s32 %r6, %r5, 1;
    st.global.u32 [%rd5], %r6;
    ret;
}

// the same with .v2 elements: out[i] = {in[i].y, in[i].x}
.visible .entry rows2(.param .u64 in, .param .u64 out, .param .u32 w)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [w];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %tid.y;
    mad.lo.s32 %r4, %r3, %r1, %r2;
    mul.wide.s32 %rd3, %r4, 8;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd5, %rd2, %rd3;
    ld.global.v2.u32 {%r5, %r6}, [%rd4];
    st.global.v2.u32 [%rd5], {%r6, %r5};
    ret;
}

// out[x] = y: every row stores to the same place, so the highest thread's value stays
.visible .entry overlap(.param .u64 out)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %tid.y;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    ret;
}

// rows 2 bytes apart: r = *(u32*)(in + 4*x + 2*y); out[16*y + x] = r
.visible .entry rows_skew(.param .u64 in, .param .u64 out)
{
    .reg .b32 %r<5>;
    .reg .b64 %rd<9>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %tid.y;
    mul.wide.u32 %rd3, %r1, 4;
    mul.wide.u32 %rd4, %r2, 2;
    add.s64 %rd5, %rd3, %rd4;
    add.s64 %rd6, %rd1, %rd5;
    ld.global.u32 %r3, [%rd6];
    mad.lo.s32 %r4, %r2, 16, %r1;
    mul.wide.u32 %rd7, %r4, 4;
    add.s64 %rd8, %rd2, %rd7;
    st.global.u32 [%rd8], %r3;
    ret;
}

// the rows through shared memory: s[y][x] = in[i]; out[i] = s[y][x] * 2
.visible .entry shared_rows(.param .u64 in, .param .u64 out, .param .u32 w)
{
    .shared .align 4 .b8 s[4096];
    .reg .b32 %r<10>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [w];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %tid.y;
    mad.lo.s32 %r4, %r3, %r1, %r2;
    mul.wide.s32 %rd3, %r4, 4;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd5, %rd2, %rd3;
    mov.u32 %r7, s;
    shl.b32 %r8, %r4, 2;
    add.s32 %r9, %r7, %r8;
    ld.global.u32 %r5, [%rd4];
    st.shared.u32 [%r9], %r5;
    ld.shared.u32 %r6, [%r9];
    shl.b32 %r6, %r6, 1;
    st.global.u32 [%rd5], %r6;
    ret;
}
"""


@pytest.fixture(scope="module")
def mod():
    return compile(PTX)


def _index(bx: int, by: int, w: int) -> np.ndarray:
    y, x = np.mgrid[0:by, 0:bx]
    return (y * w + x).ravel()


@pytest.mark.parametrize("bx,by,w", [(16, 2, 16), (16, 4, 40), (16, 2, 17), (8, 4, 8), (8, 8, 33), (16, 3, 20)])
def test_rows(mod, bx, by, w):
    """16-wide rows (halves; an odd count leaves a half-empty warp), 8-wide rows (per lane), padded pitch."""
    n = by * w + bx
    src = np.arange(n, dtype=np.uint32) * 7 + 3
    out = np.zeros(n, np.uint32)
    mod.launch("rows", (1,), (bx, by), [src, out, np.uint32(w)])
    idx = _index(bx, by, w)
    expect = np.zeros(n, np.uint32)
    expect[idx] = src[idx] + 1
    np.testing.assert_array_equal(out, expect)


@pytest.mark.parametrize("bx,by,w", [(16, 2, 16), (16, 4, 24), (8, 4, 9)])
def test_rows_v2(mod, bx, by, w):
    n = by * w + bx
    src = np.arange(2 * n, dtype=np.uint32).reshape(n, 2) + 100
    out = np.zeros((n, 2), np.uint32)
    mod.launch("rows2", (1,), (bx, by), [src, out, np.uint32(w)])
    idx = _index(bx, by, w)
    expect = np.zeros((n, 2), np.uint32)
    expect[idx] = src[idx][:, ::-1]
    np.testing.assert_array_equal(out, expect)


@pytest.mark.parametrize("by", [2, 4])
def test_overlapping_rows_keep_lane_order(mod, by):
    out = np.full(16, 99, np.uint32)
    mod.launch("overlap", (1,), (16, by), [out])
    np.testing.assert_array_equal(out, np.full(16, by - 1, np.uint32))


@pytest.mark.parametrize("bx,by,w", [(16, 2, 16), (16, 2, 64), (8, 4, 8)])
def test_shared_rows(mod, bx, by, w):
    n = by * w + bx
    src = np.arange(n, dtype=np.uint32)
    out = np.zeros(n, np.uint32)
    mod.launch("shared_rows", (1,), (bx, by), [src, out, np.uint32(w)])
    idx = _index(bx, by, w)
    expect = np.zeros(n, np.uint32)
    expect[idx] = src[idx] * 2
    np.testing.assert_array_equal(out, expect)


@pytest.mark.parametrize("bx", [16, 8])
def test_row_outside_allocation_faults(mod, bx):
    """The second row lies far past the arrays: 700, not a wild access (halves and per-lane paths)."""
    src = np.arange(64, dtype=np.uint32)
    out = np.zeros(64, np.uint32)
    with pytest.raises(LaunchError) as e:
        mod.launch("rows", (1,), (bx, 2), [src, out, np.uint32(1 << 28)])
    assert e.value.cu_result == 700


def test_shared_row_outside_window_faults(mod):
    """s[y*w + x] past the 4 KiB arena for the second row."""
    src = np.zeros(1 << 12, np.uint32)
    out = np.zeros(1 << 12, np.uint32)
    with pytest.raises(LaunchError) as e:
        mod.launch("shared_rows", (1,), (16, 2), [src, out, np.uint32(1500)])
    assert e.value.cu_result == 700


def test_second_warp_outside_cached_range_faults(mod):
    """8-wide rows: warp 0 fills the site's cached range, warp 1's rows end past the array, so
    the inline per-lane path must not take the cached range for them."""
    w = 64
    src = np.arange(4 * w + 8, dtype=np.uint32)
    out = np.zeros(8 * w + 8, np.uint32)
    with pytest.raises(LaunchError) as e:
        mod.launch("rows", (1,), (8, 8), [src, out, np.uint32(w)])
    assert e.value.cu_result == 700
    assert "warp 1" in str(e.value)


@pytest.mark.parametrize("skew,lane", [(0, 16), (2, 0)])
def test_misaligned_row_faults_naming_its_first_lane(mod, skew, lane):
    """Each half-warp contiguous, one of them (or both) 2 bytes off a u32 boundary: 716 for the
    first misaligned lane, with its address, before anything is read."""
    src = np.zeros(64, np.uint32)
    out = np.zeros(32, np.uint32)
    register_memory(src.ctypes.data, src.nbytes)
    try:
        with pytest.raises(LaunchError) as e:
            mod.launch("rows_skew", (1,), (16, 2), [src.ctypes.data + skew, out])
    finally:
        unregister_memory(src.ctypes.data)
    assert e.value.cu_result == 716
    address = src.ctypes.data + skew + 2 * (lane // 16)
    assert str(e.value).endswith(f"lane {lane} (thread ({lane % 16},{lane // 16},0)), address 0x{address:x}"), str(e.value)
