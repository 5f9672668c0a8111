"""Accesses of 2-D blocks whose rows are not whole warps (cpu/memory.py): with 16-wide rows
each half-warp is one contiguous row (the `halves` path: two vector loads/stores), narrower
rows take the per-lane path, inline when the lanes lie in the site's cached range. Values must
match numpy, the upper half's stores must win where the rows overlap (lane order), and a row
outside its allocation must fault with 700 like the per-lane checks, a misaligned one with 716
naming the first misaligned lane."""

from __future__ import annotations

import mmap
import re

import numpy as np
import pytest

from zluda_py import reference
from zluda_py.compiler import LaunchError, compile, register_memory, unregister_memory
from zluda_py.compiler.cpu import memory
from zluda_py.compiler.cpu.target import CPU
from zluda_py.compiler.linker import link
from zluda_py.ptx import parse

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

// the suite's stencil without its border test, i = (y+1)*w + x + 1 from (x, y) = global ids:
// out[i] = in[i-1] + in[i] + in[i+1] + in[i-w] + in[i+w] (nvcc's forms: [%rd+-4], [%rd+4],
// i-w from the 64-bit index truncated back, i+w as a uniform 64-bit offset)
.visible .entry stencil(.param .u32 w, .param .u64 in, .param .u64 out)
{
    .reg .b32 %r<16>;
    .reg .b64 %rd<16>;
    ld.param.u32 %r1, [w];
    ld.param.u64 %rd5, [in];
    ld.param.u64 %rd4, [out];
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r3, %r2, %r4;
    mov.u32 %r6, %ntid.y;
    mov.u32 %r7, %ctaid.y;
    mov.u32 %r8, %tid.y;
    mad.lo.s32 %r9, %r7, %r6, %r8;
    add.s32 %r9, %r9, 1;
    add.s32 %r5, %r5, 1;
    mad.lo.s32 %r10, %r9, %r1, %r5;
    cvt.s64.s32 %rd1, %r10;
    cvta.to.global.u64 %rd2, %rd5;
    mul.wide.s32 %rd6, %r10, 4;
    add.s64 %rd3, %rd2, %rd6;
    ld.global.u32 %r11, [%rd3];
    ld.global.u32 %r12, [%rd3+-4];
    add.s32 %r11, %r11, %r12;
    ld.global.u32 %r12, [%rd3+4];
    add.s32 %r11, %r11, %r12;
    cvt.u32.u64 %r13, %rd1;
    sub.s32 %r14, %r13, %r1;
    mul.wide.s32 %rd7, %r14, 4;
    add.s64 %rd8, %rd2, %rd7;
    ld.global.u32 %r12, [%rd8];
    add.s32 %r11, %r11, %r12;
    mul.wide.s32 %rd9, %r1, 4;
    add.s64 %rd10, %rd3, %rd9;
    ld.global.u32 %r12, [%rd10];
    add.s32 %r11, %r11, %r12;
    cvta.to.global.u64 %rd11, %rd4;
    shl.b64 %rd12, %rd1, 2;
    add.s64 %rd13, %rd11, %rd12;
    st.global.u32 [%rd13], %r11;
    ret;
}

// sgemm's sa[ty][k]: one address per row of the block. out[y*16 + x] = in[y*w + k]
.visible .entry row_uniform(.param .u64 in, .param .u64 out, .param .u32 w, .param .u32 k)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [w];
    ld.param.u32 %r2, [k];
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %tid.y;
    mad.lo.s32 %r5, %r4, %r1, %r2;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r6, [%rd4];
    shl.b32 %r7, %r4, 4;
    add.s32 %r7, %r7, %r3;
    mul.wide.u32 %rd5, %r7, 4;
    add.s64 %rd6, %rd2, %rd5;
    st.global.u32 [%rd6], %r6;
    ret;
}

// the same with .v2 elements: out[y*16 + x] = {in[y*w + k].y, in[y*w + k].x}, then
// in[y*w + k + 1] = {x, y}: one .v2 store per row, its last lane's
.visible .entry row_uniform2(.param .u64 in, .param .u64 out, .param .u32 w, .param .u32 k)
{
    .reg .b32 %r<10>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [w];
    ld.param.u32 %r2, [k];
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %tid.y;
    mad.lo.s32 %r5, %r4, %r1, %r2;
    mul.wide.u32 %rd3, %r5, 8;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.v2.u32 {%r6, %r7}, [%rd4];
    shl.b32 %r8, %r4, 4;
    add.s32 %r8, %r8, %r3;
    mul.wide.u32 %rd5, %r8, 8;
    add.s64 %rd6, %rd2, %rd5;
    st.global.v2.u32 [%rd6], {%r7, %r6};
    st.global.v2.u32 [%rd4+8], {%r3, %r4};
    ret;
}

// out[y / 2] = 16*y + x: the lanes of a row store to one place, two rows to the same one
.visible .entry row_uniform_store(.param .u64 out)
{
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %tid.y;
    shr.u32 %r3, %r2, 1;
    mul.wide.u32 %rd2, %r3, 4;
    add.s64 %rd3, %rd1, %rd2;
    mad.lo.s32 %r4, %r2, 16, %r1;
    st.global.u32 [%rd3], %r4;
    ret;
}

// out[16*y + x] = *(u32*)(in + (base + 4*(16*y + x)) mod 2**32): the byte offset in 32 bits
// (it may wrap inside a row), zero-extended
.visible .entry wrap_rows(.param .u64 in, .param .u32 base, .param .u64 out)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [in];
    ld.param.u32 %r1, [base];
    ld.param.u64 %rd2, [out];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %tid.y;
    mad.lo.s32 %r4, %r3, 16, %r2;
    shl.b32 %r5, %r4, 2;
    add.s32 %r5, %r5, %r1;
    cvt.u64.u32 %rd3, %r5;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r6, [%rd4];
    mul.wide.u32 %rd5, %r4, 4;
    add.s64 %rd6, %rd2, %rd5;
    st.global.u32 [%rd6], %r6;
    ret;
}
"""


@pytest.fixture(scope="module")
def mod():
    return compile(PTX)


@pytest.fixture
def guarded():
    """1024 u32 of host memory of which only the first 256 are registered device memory."""
    mem = np.full(1024, 0xDEAD, np.uint32)
    register_memory(mem.ctypes.data, 256 * 4)
    yield mem
    unregister_memory(mem.ctypes.data)


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


def test_rows_known_from_the_analysis(monkeypatch):
    """Addresses built from %tid.x/%tid.y have per-row forms (affine.Form.halves): stride 4 with
    each row's ends tested where an index was widened, stride 0 for one address per row."""
    seen: dict[tuple[str, str, int], set] = {}
    original = memory.MemoryMixin._rows

    def spy(self, inst, addr, space, nbytes):
        rows = original(self, inst, addr, space, nbytes)
        seen.setdefault((self.fn.name, addr.base.name, addr.offset), set()).add(rows)
        return rows

    monkeypatch.setattr(memory.MemoryMixin, "_rows", spy)
    compile(PTX)
    for reg, offset in (("%rd3", 0), ("%rd3", -4), ("%rd3", 4), ("%rd8", 0), ("%rd10", 0), ("%rd13", 0)):
        assert seen[("stencil", reg, offset)] == {(4, True)}, (reg, offset)
    assert seen[("row_uniform", "%rd4", 0)] == {(0, False)}
    assert seen[("row_uniform_store", "%rd3", 0)] == {(0, False)}
    assert seen[("shared_rows", "%r9", 0)] == {(4, True)}  # a 32-bit offset may wrap inside a row too


def _stencil_expect(src: np.ndarray, w: int, gx: int, gy: int) -> np.ndarray:
    grid = src.reshape(-1, w).astype(np.uint64)
    out = np.zeros_like(grid)
    inner = (slice(1, gy + 1), slice(1, gx + 1))
    out[inner] = (grid[1:gy + 1, 1:gx + 1] + grid[1:gy + 1, 0:gx] + grid[1:gy + 1, 2:gx + 2]
                  + grid[0:gy, 1:gx + 1] + grid[2:gy + 2, 1:gx + 1])
    return (out % (1 << 32)).astype(np.uint32).ravel()


@pytest.mark.parametrize("block,grid", [((16, 16), (2, 2)), ((16, 2), (3, 4)), ((32, 2), (1, 3)), ((48, 2), (1, 2)),
                                        ((8, 4), (2, 2)), ((24, 2), (1, 2)), ((16, 1), (2, 3))])
def test_stencil_in_every_block_shape(mod, block, grid):
    """16-wide rows take the per-row path, others (8, 24: rows splitting half-warps; 16x1: half
    warps) the others; all must equal numpy."""
    gx, gy = block[0] * grid[0], block[1] * grid[1]
    w = gx + 2
    src = np.random.default_rng(gx * gy).integers(0, 1 << 30, w * (gy + 2), dtype=np.uint32)
    out = np.zeros_like(src)
    mod.launch("stencil", grid, block, [np.uint32(w), src, out])
    np.testing.assert_array_equal(out, _stencil_expect(src, w, gx, gy))


def test_stencil_right_neighbour_past_the_end_faults(mod):
    """in[i+1] of the block's last thread is the first element past the allocation: 700 naming
    that lane, although in[i] through the same register is valid (the row test of one access
    must not stand for another's bounds)."""
    w = 18  # a 16x14 block: the last thread (15,13) has i = 14*18 + 16 = 268
    n = 269
    mem = np.ones(1024, np.uint32)
    p = mem.ctypes.data
    register_memory(p, n * 4)
    try:
        out = np.zeros(16 * w, np.uint32)
        with pytest.raises(LaunchError) as e:
            mod.launch("stencil", (1, 1), (16, 14), [np.uint32(w), p, out])
    finally:
        unregister_memory(p)
    assert e.value.cu_result == 700
    assert str(e.value).endswith(f"warp 6, lane 31 (thread (15,13,0)), address 0x{p + n * 4:x}"), str(e.value)


def test_row_crossing_the_end_of_an_allocation_faults(mod, guarded):
    """The second row of a 16x2 block runs past the registered 256 elements from its 9th lane."""
    p = guarded.ctypes.data
    out = np.zeros(64, np.uint32)
    guarded[:256] = np.arange(256, dtype=np.uint32)
    mod.launch("rows", (1,), (16, 2), [p + 4 * (256 - 32), out, np.uint32(16)])  # both rows inside
    np.testing.assert_array_equal(out[:32], np.arange(225, 257, dtype=np.uint32))
    with pytest.raises(LaunchError) as e:
        mod.launch("rows", (1,), (16, 2), [p + 4 * (256 - 24), out, np.uint32(16)])
    assert e.value.cu_result == 700
    assert str(e.value).endswith(f"lane 24 (thread (8,1,0)), address 0x{p + 4 * 256:x}"), str(e.value)


@pytest.mark.parametrize("block", [(16, 4), (32, 2), (8, 4), (16, 3)])
def test_row_uniform_loads(mod, block):
    w, k = 40, 7
    src = np.arange(w * block[1], dtype=np.uint32) * 5 + 1
    out = np.full(16 * block[1] + 32, 77, np.uint32)
    mod.launch("row_uniform", (1,), block, [src, out, np.uint32(w), np.uint32(k)])
    y, x = np.mgrid[0:block[1], 0:block[0]]
    expect = np.full_like(out, 77)
    expect[(16 * y + x).ravel()] = src[(y * w + k).ravel()]
    np.testing.assert_array_equal(out, expect)


@pytest.mark.parametrize("block", [(16, 4), (8, 2)])
def test_row_uniform_v2(mod, block):
    w, k = 10, 3
    src = np.arange(2 * w * block[1] + 2, dtype=np.uint32).reshape(-1, 2) * 3 + 1
    out = np.zeros((16 * block[1], 2), np.uint32)
    before = src.copy()
    mod.launch("row_uniform2", (1,), block, [src, out, np.uint32(w), np.uint32(k)])
    want_src, want_out = before.copy(), np.zeros_like(out)
    for y in range(block[1]):
        want_out[16 * y:16 * y + block[0]] = before[y * w + k][::-1]
        want_src[y * w + k + 1] = (block[0] - 1, y)
    np.testing.assert_array_equal(out, want_out)
    np.testing.assert_array_equal(src, want_src)


def test_row_uniform_load_outside_the_allocation_faults(mod, guarded):
    """Row 1's one address is past the registered memory: 700 for lane 16, its first lane."""
    p = guarded.ctypes.data
    out = np.zeros(64, np.uint32)
    with pytest.raises(LaunchError) as e:
        mod.launch("row_uniform", (1,), (16, 2), [p, out, np.uint32(256), np.uint32(0)])
    assert e.value.cu_result == 700
    assert str(e.value).endswith(f"lane 16 (thread (0,1,0)), address 0x{p + 4 * 256:x}"), str(e.value)


@pytest.mark.parametrize("by", [2, 4, 6])
def test_row_uniform_stores_keep_lane_order(mod, by):
    """Each row's last thread wins, and of two rows storing to one place the later one."""
    out = np.full(4, 99, np.uint32)
    mod.launch("row_uniform_store", (1,), (16, by), [out])
    expect = np.full(4, 99, np.uint32)
    for y in range(by):
        expect[y // 2] = 16 * y + 15
    np.testing.assert_array_equal(out, expect)


def test_offset_wrapping_inside_a_row_is_not_contiguous():
    """Row 0's 32-bit byte offset wraps at lane 8, so lanes 8..15 read the start of a 4 GiB
    mapping and lanes 0..7 its end: each row's two ends are tested, else one vector load from
    lane 0 would read the 32 bytes past 4 GiB instead (valid memory here, so no fault to
    tell)."""
    size = (1 << 32) + 4096
    area = mmap.mmap(-1, size)  # anonymous: only the touched pages are backed
    mem = np.frombuffer(area, np.uint32)
    p = mem.ctypes.data
    mem[:32] = np.arange(32, dtype=np.uint32) + 500
    mem[(1 << 30) - 8:(1 << 30) + 8] = np.arange(16, dtype=np.uint32) + 900
    register_memory(p, size)
    try:
        out = np.zeros(32, np.uint32)
        compile(PTX).launch("wrap_rows", (1,), (16, 2), [p, np.uint32((1 << 32) - 32), out])
    finally:
        unregister_memory(p)
        del mem
        area.close()
    np.testing.assert_array_equal(out, np.r_[np.arange(900, 908), np.arange(500, 524)].astype(np.uint32))


def test_offset_wrapping_inside_a_row_faults_like_per_lane_accesses(mod, guarded):
    """The same wrap into unregistered memory: 700 for lane 8, the first one outside."""
    p = guarded.ctypes.data
    guarded[:32] = np.arange(32, dtype=np.uint32) + 500
    out = np.zeros(32, np.uint32)
    mod.launch("wrap_rows", (1,), (16, 2), [p - 400, np.uint32(400), out])
    np.testing.assert_array_equal(out, guarded[:32])
    base = (1 << 32) - 32
    with pytest.raises(LaunchError) as e:
        mod.launch("wrap_rows", (1,), (16, 2), [np.uint64((p - base) % (1 << 64)), np.uint32(base), out])
    assert e.value.cu_result == 700
    assert "lane 8 (thread (8,0,0))" in str(e.value), str(e.value)


def test_stencil_rows_decided_once_for_a_widened_index():
    """in[i], in[i-1], in[i+1], in[i+w] and out[i] are one widened index plus uniform terms
    (affine.Form.root): each half-warp spans the same distance in all of them, so the block
    tests the spans once (`rows.group`) and lowers its rest twice; only in[i-w] (another index,
    which may cross its sign boundary elsewhere) tests its own rows in each tail. In the other
    tail (the group's test failed: a block not in 16-wide rows) the group's accesses go per lane."""
    ir = CPU.lower_part(link([parse(PTX)]), "stencil").text
    assert len(re.findall(r"^rows\.group:", ir, re.M)) == 1
    assert len(re.findall(r"^mem\.rows[.\d]*:", ir, re.M)) == 1 + 1


def test_stencil_rows_decided_once_still_checks_each_access(mod):
    """Where the group's test holds, each access still checks its own rows: values as numpy's,
    and in[i+w] of the last thread, one past the registered elements, faults with 700 naming
    that lane and address although in[i] and in[i+1] of that lane are inside."""
    w, gx, gy = 34, 32, 32
    src = np.random.default_rng(7).integers(0, 1 << 30, w * (gy + 2), dtype=np.uint32)
    out = np.zeros_like(src)
    mod.launch("stencil", (2, 2), (16, 16), [np.uint32(w), src, out])
    np.testing.assert_array_equal(out, _stencil_expect(src, w, gx, gy))
    w, n = 18, 286  # 16x14 block: thread (15,13) has i = 268, i + w = 286
    mem = np.ones(1024, np.uint32)
    p = mem.ctypes.data
    register_memory(p, n * 4)
    try:
        with pytest.raises(LaunchError) as e:
            mod.launch("stencil", (1, 1), (16, 14), [np.uint32(w), p, np.zeros(16 * w, np.uint32)])
    finally:
        unregister_memory(p)
    assert e.value.cu_result == 700
    assert str(e.value).endswith(f"warp 6, lane 31 (thread (15,13,0)), address 0x{p + n * 4:x}"), str(e.value)


# nvcc's stencil (bench/cuda/suite.cu): edge cells copied; in[i] before the branch, four loads
# of the interior and the store after the join share one widened index
BRANCHY = HEAD + r"""
.visible .entry branchy(
	.param .u32 p0,
	.param .u64 p1,
	.param .u64 p2
)
{
	.reg .pred 	%p<8>;
	.reg .f32 	%f<13>;
	.reg .b32 	%r<14>;
	.reg .b64 	%rd<14>;


	ld.param.u32 	%r1, [p0];
	ld.param.u64 	%rd5, [p1];
	ld.param.u64 	%rd4, [p2];
	mov.u32 	%r2, %ntid.x;
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %tid.x;
	mad.lo.s32 	%r5, %r3, %r2, %r4;
	mov.u32 	%r6, %ntid.y;
	mov.u32 	%r7, %ctaid.y;
	mov.u32 	%r8, %tid.y;
	mad.lo.s32 	%r9, %r7, %r6, %r8;
	mad.lo.s32 	%r10, %r9, %r1, %r5;
	setp.eq.s32 	%p1, %r5, 0;
	setp.eq.s32 	%p2, %r9, 0;
	or.pred  	%p3, %p1, %p2;
	add.s32 	%r11, %r1, -1;
	setp.eq.s32 	%p4, %r5, %r11;
	or.pred  	%p5, %p3, %p4;
	setp.eq.s32 	%p6, %r9, %r11;
	or.pred  	%p7, %p6, %p5;
	cvt.s64.s32 	%rd1, %r10;
	cvta.to.global.u64 	%rd2, %rd5;
	mul.wide.s32 	%rd6, %r10, 4;
	add.s64 	%rd3, %rd2, %rd6;
	ld.global.f32 	%f12, [%rd3];
	@%p7 bra 	$L__BB0_2;

	cvt.u32.u64 	%r12, %rd1;
	ld.global.f32 	%f4, [%rd3+-4];
	add.f32 	%f5, %f12, %f4;
	ld.global.f32 	%f6, [%rd3+4];
	add.f32 	%f7, %f5, %f6;
	sub.s32 	%r13, %r12, %r1;
	mul.wide.s32 	%rd7, %r13, 4;
	add.s64 	%rd8, %rd2, %rd7;
	ld.global.f32 	%f8, [%rd8];
	add.f32 	%f9, %f7, %f8;
	mul.wide.s32 	%rd9, %r1, 4;
	add.s64 	%rd10, %rd3, %rd9;
	ld.global.f32 	%f10, [%rd10];
	add.f32 	%f11, %f9, %f10;
	mul.f32 	%f12, %f11, 0f3E4CCCCD;

$L__BB0_2:
	cvta.to.global.u64 	%rd11, %rd4;
	shl.b64 	%rd12, %rd1, 2;
	add.s64 	%rd13, %rd11, %rd12;
	st.global.f32 	[%rd13], %f12;
	ret;

}
"""


def test_rows_decided_before_a_branch_carry_into_cloned_blocks():
    """The first access of the group tests the spans; the interior and the join are lowered again
    for warps where the test held (`rows.allN`), only in[i-w] testing its own there."""
    ir = CPU.lower_part(link([parse(BRANCHY)]), "branchy").text
    assert re.findall(r"^(rows\.all\d+):", ir, re.M) == ["rows.all1", "rows.all2"]


def test_rows_decided_before_a_branch_values_and_faults():
    """Values as numpy's (float32, the kernel's order of additions); in[i+w] of thread (5,15) of
    block (1,0), a converged interior warp in a cloned block, is the first element past the
    registered ones: 700 naming that lane and address."""
    mod = compile(BRANCHY)
    w = 48
    src = np.random.default_rng(3).standard_normal(w * w).astype(np.float32)
    out = np.zeros_like(src)
    mod.launch("branchy", (3, 3), (16, 16), [np.int32(w), src, out])
    g = src.reshape(w, w)
    want = g.copy()
    want[1:-1, 1:-1] = np.float32(0.2) * ((((g[1:-1, 1:-1] + g[1:-1, :-2]) + g[1:-1, 2:]) + g[:-2, 1:-1]) + g[2:, 1:-1])
    np.testing.assert_array_equal(out, want.ravel())
    n = 16 * w + 21  # row 16, x = 21
    mem = np.ones(w * w, np.float32)
    p = mem.ctypes.data
    register_memory(p, n * 4)
    try:
        with pytest.raises(LaunchError) as e:
            mod.launch("branchy", (2, 1), (16, 16), [np.int32(w), p, np.zeros(w * w, np.float32)])
    finally:
        unregister_memory(p)
    assert e.value.cu_result == 700
    assert "block (1,0,0)" in str(e.value), str(e.value)
    assert str(e.value).endswith(f"warp 7, lane 21 (thread (5,15,0)), address 0x{p + n * 4:x}"), str(e.value)



# a tiled matmul's inner loop as nvcc unrolls it (bench/cuda/suite.cu sgemm): one 32-bit .shared
# column base plus immediate offsets and a row base with one address per half-warp (16-wide
# rows), after a barrier; `pre` moves the column base (0: [%r10+-8] wraps); s[i] = i * 2654435761
# for the block's threads i
TILE = HEAD + r"""
.visible .entry tile(.param .u64 out, .param .u32 pre)
{
    .shared .align 4 .b8 s[4096];
    .reg .b32 %r<24>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r20, [pre];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %tid.y;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    mul.wide.u32 %rd3, %r4, 4;
    add.s64 %rd5, %rd2, %rd3;
    mul.lo.s32 %r5, %r4, -1640531535;
    mov.u32 %r6, s;
    shl.b32 %r7, %r4, 2;
    add.s32 %r8, %r6, %r7;
    st.shared.u32 [%r8], %r5;
    bar.sync 0;
    shl.b32 %r9, %r1, 2;
    add.s32 %r21, %r6, %r20;
    add.s32 %r10, %r21, %r9;
    shl.b32 %r22, %r2, 3;
    add.s32 %r23, %r6, %r22;
    ld.shared.u32 %r11, [%r10];
    ld.shared.u32 %r19, [%r23+4];
    ld.shared.u32 %r12, [%r10+64];
    ld.shared.u32 %r13, [%r10+128];
    ld.shared.u32 %r14, [%r10+-8];
    shl.b32 %r15, %r12, 1;
    add.s32 %r16, %r11, %r15;
    mad.lo.s32 %r17, %r13, 3, %r16;
    mad.lo.s32 %r18, %r14, 5, %r17;
    mad.lo.s32 %r18, %r19, 7, %r18;
    st.global.u32 [%rd5], %r18;
    ret;
}
"""


def _tile_ir(monkeypatch, vouched: bool) -> str:
    if not vouched:
        monkeypatch.setattr(memory.MemoryMixin, "group_window", lambda self, insts, group: (set(), None))
    return CPU.lower_part(link([parse(TILE)]), "tile").text


def test_offsets_from_one_shared_base_decided_once(monkeypatch):
    """[%r10], [%r10+64], [%r10+128] and [%r10+-8] are one group (`MemoryMixin.row_group`): the
    block tests the base's spans once (`rows.group`), and with them whether every .shared row
    access of the rest of the block lies inside the window (`group_window`); where both held the
    four and [%r23+4] move their halves with no test of their own (the group's four window
    tests, the row-uniform load's %ntid.x test and the window tests of its two paths fewer), and
    in the other tail the group's go per lane."""
    ir, each = _tile_ir(monkeypatch, True), _tile_ir(monkeypatch, False)
    for text in (ir, each):
        assert len(re.findall(r"^rows\.group:", text, re.M)) == 1
    window_tests = [t.count('call i32 @"zluda.window_fault"') for t in (ir, each)]
    assert window_tests[1] - window_tests[0] == 4 + 2, window_tests
    row_tests = [len(re.findall(r"^mem\.rows[.\d]*:", t, re.M)) for t in (ir, each)]
    assert row_tests[1] - row_tests[0] == 1, row_tests


@pytest.mark.parametrize("block", [(16, 4), (16, 16), (32, 4), (8, 8), (24, 3), (17, 5)])
def test_offsets_from_one_shared_base_values(block):
    """16-wide rows (the decided tail) and other widths (the per-lane tail) against the
    reference interpreter."""
    n = block[0] * block[1]
    want = np.zeros(n, np.uint32)
    reference.run(TILE, "tile", (1,), block, [want, np.uint32(8)])
    out = np.zeros(n, np.uint32)
    compile(TILE).launch("tile", (1,), block, [out, np.uint32(8)])
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("pre", [0, 4, 8, 12, 16, 4032, 4064, (1 << 32) - 64, (1 << 32) - 16, (1 << 32) - 4])
@pytest.mark.parametrize("block", [(16, 4), (32, 4), (8, 8)])
def test_column_bases_against_the_reference(block, pre):
    """Column bases inside the array, with [%r10+-8] wrapping (0, 4), past its end for a later
    load (4032) or the first (4064), and wrapping within the first load's lanes (the last three):
    the same status as the reference interpreter, and its values where none faults."""
    n = block[0] * block[1]
    want, out = np.zeros(n, np.uint32), np.zeros(n, np.uint32)
    try:
        reference.run(TILE, "tile", (1,), block, [want, np.uint32(pre)])
        expect = 0
    except reference.ReferenceFault as e:
        expect = e.cu_result
    try:
        compile(TILE).launch("tile", (1,), block, [out, np.uint32(pre)])
        status = 0
    except LaunchError as e:
        status = e.cu_result
    assert status == expect
    if not status:  # (after a fault the reference's threads have run in another order)
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("block", [(16, 4), (8, 8)])
def test_an_offset_wrapping_in_a_decided_group_faults(block):
    """With the base at 0, [%r10+-8] wraps around 2**32 for lanes 0 and 1 while the base's own
    spans held: the block's window test fails, so each access tests its own in order: 700 (as the
    reference), naming lane 0 and its offset, nothing stored."""
    n = block[0] * block[1]
    with pytest.raises(reference.ReferenceFault) as ref:
        reference.run(TILE, "tile", (1,), block, [np.zeros(n, np.uint32), np.uint32(0)])
    out = np.full(n, 7, np.uint32)
    with pytest.raises(LaunchError) as e:
        compile(TILE).launch("tile", (1,), block, [out, np.uint32(0)])
    assert e.value.cu_result == ref.value.cu_result == 700
    assert str(e.value).endswith("lane 0 (thread (0,0,0)), address 0xfffffff8"), str(e.value)
    assert (out == 7).all()


@pytest.mark.parametrize("pre,lane", [(64, 0), (32, 8)])
def test_a_later_access_past_the_window_faults_in_order(pre, lane):
    """The window is the 4 KiB array: with the column base `pre` bytes below its end, [%r10] fits
    (pre 64) or its lanes 8.. do not (pre 32); [%r10+64] is past it. The first access that leaves
    the window faults, naming its first lane outside, whose offset is the window's end."""
    window = 4096
    out = np.full(64, 7, np.uint32)
    with pytest.raises(LaunchError) as e:
        compile(TILE).launch("tile", (1,), (16, 4), [out, np.uint32(window - pre)])
    assert e.value.cu_result == 700
    assert str(e.value).endswith(f"lane {lane} (thread ({lane},0,0)), address 0x{window:x}"), str(e.value)
    assert (out == 7).all()
