"""Memory accesses planned from the uniform/affine analysis (cpu/affine.py, cpu/memory.py):
contiguous vector loads/stores for lane-consecutive addresses, one load for uniform ones, the
per-lane path otherwise. Values must match numpy for partial warps, divergent masks, wrapped
indices and registers redefined in loops or on two paths; masked-off lanes never fault, active
lanes out of bounds fault with 700."""

from __future__ import annotations

import re

import numpy as np
import pytest

from zluda_py.compiler import LaunchError, pipeline, register_memory, unregister_memory
from tests.compiler.conftest import compile_recording_plans
from zluda_py.compiler.cpu.module import helpers_ir
from zluda_py.compiler.cpu.runtime import target_machine
from zluda_py.compiler.linker import link
from zluda_py.ptx import parse

HEAD = ".version 7.8\n.target sm_80\n.address_size 64\n"

PTX = HEAD + r"""
// if (i < n) out[i] = 3 * in[i], i = ctaid.x * ntid.x + tid.x
.visible .entry triple(.param .u64 in, .param .u64 out, .param .u32 n)
{
    .reg .pred %p;
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p, %r5, %r1;
    @%p bra DONE;
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mul.wide.s32 %rd3, %r5, 4;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd5, %rd2, %rd3;
    ld.global.u32 %r6, [%rd4];
    mul.lo.u32 %r7, %r6, 3;
    st.global.u32 [%rd5], %r7;
DONE:
    ret;
}

// if (i < n) out[i] = {in[i].y, in[i].x} (8-byte elements)
.visible .entry swap2(.param .u64 in, .param .u64 out, .param .u32 n)
{
    .reg .pred %p;
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r4, %tid.x;
    setp.ge.u32 %p, %r4, %r1;
    @%p bra DONE;
    mul.wide.u32 %rd3, %r4, 8;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd5, %rd2, %rd3;
    ld.global.v2.u32 {%r5, %r6}, [%rd4];
    st.global.v2.u32 [%rd5], {%r6, %r5};
DONE:
    ret;
}

// odd lanes only: out[tid] = in[tid] + 1
.visible .entry odd(.param .u64 in, .param .u64 out)
{
    .reg .pred %p;
    .reg .b32 %r<6>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 1;
    setp.eq.u32 %p, %r2, 0;
    @%p bra DONE;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd5, %rd2, %rd3;
    ld.global.u32 %r3, [%rd4];
    add.u32 %r4, %r3, 1;
    st.global.u32 [%rd5], %r4;
DONE:
    ret;
}

// i = tid, q = in; repeat (tid & 3) times: i += 37, q += 5; out[tid] = in[i] + *q
// (i and q are redefined in a loop: q starts uniform, but is not after it; the lanes leave
// the loop at different times and wait for each other at AFTER, numbered after the loop)
.visible .entry loop_index(.param .u64 in, .param .u64 out)
{
    .reg .pred %p;
    .reg .b32 %r<6>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    mov.u64 %rd6, %rd1;
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 3;
    setp.eq.u32 %p, %r2, 0;
    @%p bra AFTER;
LOOP:
    add.u32 %r1, %r1, 37;
    add.s64 %rd6, %rd6, 20;
    sub.u32 %r2, %r2, 1;
    setp.ne.u32 %p, %r2, 0;
    @%p bra LOOP;
AFTER:
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r3, [%rd4];
    ld.global.u32 %r5, [%rd6];
    add.u32 %r3, %r3, %r5;
    mov.u32 %r4, %tid.x;
    mul.wide.u32 %rd3, %r4, 4;
    add.s64 %rd5, %rd2, %rd3;
    st.global.u32 [%rd5], %r3;
    ret;
}

// q = tid < 16 ? a : b, p = q + tid (two definitions reach the loads); out[tid] = *p + *q
.visible .entry two_paths(.param .u64 a, .param .u64 b, .param .u64 out)
{
    .reg .pred %p;
    .reg .b32 %r<4>;
    .reg .b64 %rd<6>;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd1, %r1, 4;
    setp.lt.u32 %p, %r1, 16;
    @%p bra A;
    ld.param.u64 %rd2, [b];
    bra JOIN;
A:
    ld.param.u64 %rd2, [a];
JOIN:
    add.s64 %rd3, %rd2, %rd1;
    ld.global.u32 %r2, [%rd3];
    ld.global.u32 %r3, [%rd2];
    add.u32 %r2, %r2, %r3;
    ld.param.u64 %rd4, [out];
    add.s64 %rd5, %rd4, %rd1;
    st.global.u32 [%rd5], %r2;
    ret;
}

// out[tid] = in[2 * tid]
.visible .entry strided(.param .u64 in, .param .u64 out)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 8;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r2, [%rd4];
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd5, %rd2, %rd3;
    st.global.u32 [%rd5], %r2;
    ret;
}

// out[tid] = in[0] + tid; lane 5 alone stores its tid to *one; no lane loads from *bad
.visible .entry uniform(.param .u64 in, .param .u64 out, .param .u64 one, .param .u64 bad)
{
    .reg .pred %p<3>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u64 %rd6, [one];
    ld.param.u64 %rd7, [bad];
    mov.u32 %r1, %tid.x;
    ld.global.u32 %r2, [%rd1];
    add.u32 %r3, %r2, %r1;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r3;
    setp.eq.u32 %p1, %r1, 5;
    @%p1 st.global.u32 [%rd6], %r1;
    setp.gt.u32 %p2, %r1, 1000;
    @%p2 ld.global.u32 %r4, [%rd7];
    @%p2 st.global.u32 [%rd6], %r4;
    ret;
}

// 2-D block: out[tid.y * ntid.x + tid.x] = in[tid.x] + tid.y  (tid.x wraps inside a warp
// when ntid.x is not a multiple of 32)
.visible .entry tid2d(.param .u64 in, .param .u64 out)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %tid.y;
    mov.u32 %r3, %ntid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r4, [%rd4];
    add.u32 %r5, %r4, %r2;
    mad.lo.u32 %r6, %r2, %r3, %r1;
    mul.wide.u32 %rd3, %r6, 4;
    add.s64 %rd5, %rd2, %rd3;
    st.global.u32 [%rd5], %r5;
    ret;
}

// if (tid < lanes) out[tid] = p[base + tid] with a 32-bit index widened after the addition
.visible .entry wrap32(.param .u64 p, .param .u32 base, .param .u32 lanes, .param .u64 out)
{
    .reg .pred %q;
    .reg .b32 %r<6>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [base];
    ld.param.u32 %r2, [lanes];
    mov.u32 %r3, %tid.x;
    setp.ge.u32 %q, %r3, %r2;
    @%q bra DONE;
    add.u32 %r4, %r1, %r3;
    mul.wide.u32 %rd2, %r4, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.u32 %r5, [%rd3];
    ld.param.u64 %rd4, [out];
    mul.wide.u32 %rd2, %r3, 4;
    add.s64 %rd5, %rd4, %rd2;
    st.global.u32 [%rd5], %r5;
DONE:
    ret;
}

// out[tid] = p[(u16)(base + tid)]: a 16-bit index that wraps inside the warp
.visible .entry wrap16(.param .u64 p, .param .u16 base, .param .u64 out)
{
    .reg .b16 %h<4>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [p];
    ld.param.u16 %h1, [base];
    mov.u32 %r1, %tid.x;
    cvt.u16.u32 %h2, %r1;
    add.u16 %h3, %h1, %h2;
    cvt.u64.u16 %rd2, %h3;
    shl.b64 %rd2, %rd2, 2;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.u32 %r2, [%rd3];
    ld.param.u64 %rd4, [out];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd5, %rd4, %rd2;
    st.global.u32 [%rd5], %r2;
    ret;
}

// buf[off/4 + tid] = 2 * tid in .shared (32-bit addresses); out[tid] = buf[tid ^ 1]
.visible .entry shared_pairs(.param .u32 off, .param .u64 out)
{
    .shared .align 4 .b8 buf[256];
    .reg .b32 %r<10>;
    .reg .b64 %rd<4>;
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 2;
    mov.u32 %r3, buf;
    ld.param.u32 %r4, [off];
    add.u32 %r5, %r3, %r4;
    add.u32 %r5, %r5, %r2;
    shl.b32 %r6, %r1, 1;
    st.shared.u32 [%r5], %r6;
    bar.sync 0;
    xor.b32 %r7, %r1, 1;
    shl.b32 %r7, %r7, 2;
    add.u32 %r8, %r3, %r7;
    ld.shared.u32 %r9, [%r8];
    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r9;
    ret;
}
"""


@pytest.fixture(scope="module")
def plans():
    """{(kernel, opcode, address register): set of plans} chosen while compiling PTX."""
    return compile_recording_plans(PTX)


@pytest.fixture(scope="module")
def m(plans):
    return plans[0]


@pytest.fixture
def guarded():
    """256 u32 of host memory of which only the first 128 are registered device memory."""
    mem = np.full(256, 0xDEAD, np.uint32)
    register_memory(mem.ctypes.data, 128 * 4)
    yield mem
    unregister_memory(mem.ctypes.data)


def illegal(fn, *args) -> str:
    with pytest.raises(LaunchError) as e:
        fn(*args)
    assert e.value.cu_result == 700, e.value
    return str(e.value)


def rand(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 1 << 30, n, dtype=np.uint32)


def test_plans_follow_the_analysis(plans):
    seen = plans[1]
    assert seen[("triple", "ld", "%rd4")] == {"ends"}  # %tid.x and a widened index: two-lane test
    assert seen[("triple", "st", "%rd5")] == {"ends"}
    assert seen[("swap2", "ld", "%rd4")] == {"ends"}  # stride 8 = the .v2.u32 access
    assert seen[("loop_index", "ld", "%rd4")] == {"check"}  # %r1 is redefined in the loop
    assert seen[("loop_index", "ld", "%rd6")] == {"check"}
    assert seen[("two_paths", "ld", "%rd3")] == {"check"}  # %rd2 comes from two paths
    assert seen[("two_paths", "ld", "%rd2")] == {"check"}
    assert seen[("strided", "ld", "%rd4")] == {"gather"}  # stride 8 for 4-byte elements
    assert seen[("uniform", "ld", "%rd1")] == {"uniform"}
    assert seen[("uniform", "st", "%rd6")] == {"uniform"}
    assert seen[("wrap16", "ld", "%rd3")] == {"check"}  # a 16-bit index may wrap often: full test
    assert seen[("shared_pairs", "st", "%r5")] == {"ends"}


@pytest.mark.parametrize("n,block", [(100, 64), (77, 96), (32, 32), (5, 128)])
def test_contiguous_partial_warps_and_tails(m, n, block):
    x = rand(n + 40)
    out = np.full(n + 40, 7, np.uint32)
    grid = -(-n // block)
    m.launch("triple", grid, block, [x, out, np.uint32(n)])
    assert (out[:n] == x[:n] * np.uint32(3)).all()
    assert (out[n:] == 7).all()  # lanes past n (and past the block) wrote nothing


def test_vector_v2_contiguous(m):
    x = rand(2 * 64, 1)
    out = np.zeros(2 * 64, np.uint32)
    m.launch("swap2", 1, 64, [x, out, np.uint32(45)])
    want = np.zeros_like(out)
    want[0:90:2], want[1:90:2] = x[1:90:2], x[0:90:2]
    assert (out == want).all()


def test_divergent_mask(m):
    x = rand(96, 2)
    out = np.full(96, 5, np.uint32)
    m.launch("odd", 1, 96, [x, out])
    want = np.full(96, 5, np.uint32)
    want[1::2] = x[1::2] + np.uint32(1)
    assert (out == want).all()


def test_masked_off_lanes_past_the_end_do_not_fault(m, guarded):
    out = np.zeros(128, np.uint32)
    guarded[:128] = np.arange(128, dtype=np.uint32)
    p = guarded.ctypes.data
    # 160 threads, only the first 128 in range: lanes 128..159 would read unregistered memory
    m.launch("triple", 5, 32, [p, out, np.uint32(128)])
    assert (out == np.arange(128, dtype=np.uint32) * 3).all()
    m.launch("wrap32", 1, 32, [p, np.uint32(112), np.uint32(16), out])  # lanes 16.. would read 128..
    assert (out[:16] == np.arange(112, 128, dtype=np.uint32)).all()


def test_active_lane_out_of_bounds_faults(m, guarded):
    p = guarded.ctypes.data
    out = np.zeros(160, np.uint32)
    message = illegal(m.launch, "triple", 5, 32, [p, out, np.uint32(129)])  # thread 128 reads element 128
    assert f"0x{p + 128 * 4:x}" in message
    # a store whose last lane is one element past the end writes nothing there
    zeros = np.zeros(32, np.uint32)
    illegal(m.launch, "triple", 1, 32, [zeros, p + 97 * 4, np.uint32(32)])
    assert (guarded[97:] == 0xDEAD).all()  # the fault comes before any lane stores
    m.launch("triple", 1, 32, [zeros, p, np.uint32(32)])  # the module still works
    assert (guarded[:32] == 0).all()


def test_index_wrapping_between_lanes_faults_like_per_lane_accesses(m, guarded):
    p = guarded.ctypes.data
    out = np.zeros(32, np.uint32)
    guarded[:16] = np.arange(100, 116, dtype=np.uint32)
    base = (1 << 32) - 16  # lanes 0..15 index 2**32-16.., lanes 16..31 wrap to 0..15
    shifted = (p - base * 4) % (1 << 64)  # so that lanes 0..15 land on p[0..15]
    m.launch("wrap32", 1, 32, [np.uint64(shifted), np.uint32(base), np.uint32(16), out])
    assert (out[:16] == np.arange(100, 116, dtype=np.uint32)).all()
    # with all 32 lanes, lanes 16..31 are 16 GiB below p: not contiguous, and out of bounds
    illegal(m.launch, "wrap32", 1, 32, [np.uint64(shifted), np.uint32(base), np.uint32(32), out])


def test_sixteen_bit_index_wraps(m):
    x = rand(1 << 16, 3)
    out = np.zeros(64, np.uint32)
    m.launch("wrap16", 1, 64, [x, np.uint16(0xFFF0), out])
    assert (out == x[(0xFFF0 + np.arange(64)) & 0xFFFF]).all()


def test_loop_redefined_index(m):
    x = rand(256, 4)
    out = np.zeros(64, np.uint32)
    m.launch("loop_index", 1, 64, [x, out])
    t = np.arange(64)
    assert (out == x[t + 37 * (t & 3)] + x[5 * (t & 3)]).all()


def test_two_paths(m):
    a, b = rand(64, 5), rand(64, 6)
    out = np.zeros(64, np.uint32)
    m.launch("two_paths", 1, 64, [a, b, out])
    t = np.arange(64)
    assert (out == np.where(t < 16, a + a[0], b + b[0])).all()


def test_strided(m):
    x = rand(128, 7)
    out = np.zeros(64, np.uint32)
    m.launch("strided", 1, 64, [x, out])
    assert (out == x[::2]).all()


def test_uniform_load_store_and_empty_mask(m):
    x = np.array([1000], np.uint32)
    out = np.zeros(70, np.uint32)
    one = np.zeros(1, np.uint32)
    bad = 1 << 40  # never valid: only a guarded-off load reads it
    m.launch("uniform", 1, 70, [x, out, one, np.uint64(bad)])
    assert (out == 1000 + np.arange(70, dtype=np.uint32)).all()
    assert one[0] == 5


def test_tid_x_wrapping_in_a_2d_block(m):
    x = rand(16, 8)
    out = np.zeros(64, np.uint32)
    m.launch("tid2d", 1, (16, 4), [x, out])
    assert (out == (x[None, :] + np.arange(4, dtype=np.uint32)[:, None]).ravel()).all()
    out2 = np.zeros(128, np.uint32)
    x2 = rand(64, 9)
    m.launch("tid2d", 1, (64, 2), [x2, out2])  # ntid.x a multiple of 32: lane-linear again
    assert (out2 == (x2[None, :] + np.arange(2, dtype=np.uint32)[:, None]).ravel()).all()


def test_shared_contiguous_and_out_of_bounds(m):
    out = np.zeros(64, np.uint32)
    m.launch("shared_pairs", 1, 64, [np.uint32(0), out])
    assert (out == 2 * (np.arange(64) ^ 1)).all()
    illegal(m.launch, "shared_pairs", 1, 64, [np.uint32(4), out])  # lane 63 writes buf[64]


def test_ir_uses_a_vector_load_not_a_gather():
    """The warp function of the affine kernel loads with llvm.masked.load (its rare per-lane
    path calls the out-of-line helper); the strided kernel only gathers, through the helper,
    which the kernels' module declares and the shared helpers' module defines."""
    kernels = {name: _entry(name) for name in ("triple", "strided")}
    ir_text, _ = pipeline.lower(link([parse(HEAD + "\n".join(kernels.values()))]))
    warp = {name: _function(ir_text, f"{name}.warp") for name in kernels}
    assert "llvm.masked.load.v32i32" in warp["triple"] and "llvm.masked.store.v32i32" in warp["triple"]
    assert "llvm.masked.load" not in warp["strided"] and "zluda.gather.i32.x1" in warp["strided"]
    assert "llvm.masked.gather.v32i32" not in warp["strided"]
    assert re.search(r'^declare [^\n]*@"zluda\.gather\.i32\.x1"', ir_text, re.M)
    tm = target_machine()
    assert "llvm.masked.gather.v32i32" in _function(helpers_ir(tm.triple, str(tm.target_data)), "zluda.gather.i32.x1")


def _entry(name: str) -> str:
    """One .entry of PTX, by name."""
    start = PTX.index(f".visible .entry {name}(")
    return PTX[start:PTX.index("\n}\n", start) + 3]


def _function(ir_text: str, name: str) -> str:
    """The body of LLVM function `name` in IR text."""
    found = re.search(rf'^define [^\n]*@"{re.escape(name)}"\(', ir_text, re.M)
    assert found, name
    return ir_text[found.start():ir_text.index("\n}\n", found.start())]
