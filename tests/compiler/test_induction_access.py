"""Memory accesses through loop induction registers (cpu/affine.py `_inductions`): a register
set before a loop and stepped by a uniform amount in its one latch has, inside the loop, the
form of its start (grid-stride loops: contiguous; a uniform counter: uniform), because lanes
running a block of the loop are at the same iteration. After the loop lanes may have left at
different iterations: there neither the register nor anything computed from it inside the loop
may keep that form. Values must match numpy; out-of-range lanes fault with 700."""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler import LaunchError, compile, register_memory, unregister_memory
from tests.compiler.conftest import compile_recording_plans

HEAD = ".version 7.8\n.target sm_80\n.address_size 64\n"

PTX = HEAD + r"""
// nvcc's grid-stride saxpy: for (i = ctaid*ntid + tid; i < n; i += ntid*nctaid) y[i] += 2*x[i]
.visible .entry grid_stride(.param .u32 n, .param .u64 x, .param .u64 y)
{
    .reg .pred %p<3>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<8>;
    ld.param.u32 %r6, [n];
    ld.param.u64 %rd3, [x];
    ld.param.u64 %rd4, [y];
    mov.u32 %r1, %ntid.x;
    mov.u32 %r7, %ctaid.x;
    mov.u32 %r8, %tid.x;
    mad.lo.s32 %r10, %r7, %r1, %r8;
    setp.ge.s32 %p1, %r10, %r6;
    @%p1 bra DONE;
    mov.u32 %r9, %nctaid.x;
    mul.lo.s32 %r3, %r1, %r9;
    cvta.to.global.u64 %rd1, %rd3;
    cvta.to.global.u64 %rd2, %rd4;
LOOP:
    mul.wide.s32 %rd5, %r10, 4;
    add.s64 %rd6, %rd1, %rd5;
    ld.global.u32 %r4, [%rd6];
    add.s64 %rd7, %rd2, %rd5;
    ld.global.u32 %r5, [%rd7];
    shl.b32 %r4, %r4, 1;
    add.s32 %r5, %r5, %r4;
    st.global.u32 [%rd7], %r5;
    add.s32 %r10, %r10, %r3;
    setp.lt.s32 %p2, %r10, %r6;
    @%p2 bra LOOP;
DONE:
    ret;
}

// i = tid; do { acc += in[i]; p = in + 4*i; i += 32 } while (i < lim[tid]);
// out[tid] = acc + in[i] + *p: lanes leave the loop at different iterations, so after it
// neither i nor p (computed in the loop) is lane-consecutive any more
.visible .entry leave_apart(.param .u64 in, .param .u64 lim, .param .u64 out)
{
    .reg .pred %p;
    .reg .b32 %r<10>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [lim];
    ld.param.u64 %rd3, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 4;
    add.s64 %rd5, %rd2, %rd4;
    ld.global.u32 %r2, [%rd5];
    mov.u32 %r3, %r1;
    mov.u32 %r4, 0;
LOOP:
    mul.wide.u32 %rd6, %r3, 4;
    add.s64 %rd7, %rd1, %rd6;
    ld.global.u32 %r5, [%rd7];
    add.s32 %r4, %r4, %r5;
    add.s32 %r3, %r3, 32;
    setp.lt.u32 %p, %r3, %r2;
    @%p bra LOOP;
    mul.wide.u32 %rd8, %r3, 4;
    add.s64 %rd9, %rd1, %rd8;
    ld.global.u32 %r6, [%rd9];
    ld.global.u32 %r7, [%rd7];
    add.s32 %r4, %r4, %r6;
    add.s32 %r4, %r4, %r7;
    add.s64 %rd10, %rd3, %rd4;
    st.global.u32 [%rd10], %r4;
    ret;
}

// a uniform counter with a per-lane trip count: for (k = 0; k < lim[tid]; k++) acc += in[k];
// out[tid] = acc * 1000 + in[k] (k differs between lanes after the loop)
.visible .entry uniform_counter(.param .u64 in, .param .u64 lim, .param .u64 out)
{
    .reg .pred %p<3>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [lim];
    ld.param.u64 %rd3, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 4;
    add.s64 %rd5, %rd2, %rd4;
    ld.global.u32 %r2, [%rd5];
    mov.u32 %r3, 0;
    mov.u32 %r4, 0;
    setp.eq.u32 %p1, %r2, 0;
    @%p1 bra AFTER;
LOOP:
    mul.wide.u32 %rd6, %r3, 4;
    add.s64 %rd7, %rd1, %rd6;
    ld.global.u32 %r5, [%rd7];
    add.s32 %r4, %r4, %r5;
    add.s32 %r3, %r3, 1;
    setp.lt.u32 %p2, %r3, %r2;
    @%p2 bra LOOP;
AFTER:
    mul.wide.u32 %rd8, %r3, 4;
    add.s64 %rd9, %rd1, %rd8;
    ld.global.u32 %r6, [%rd9];
    mul.lo.s32 %r4, %r4, 1000;
    add.s32 %r4, %r4, %r6;
    add.s64 %rd10, %rd3, %rd4;
    st.global.u32 [%rd10], %r4;
    ret;
}

// not inductions: the step is taken on one side of a branch in the loop (not in its latch),
// or per lane (i += tid + 1)
.visible .entry not_stepped(.param .u64 in, .param .u64 out, .param .u32 n)
{
    .reg .pred %p<3>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %r2;
    mov.u32 %r4, 0;
    mov.u32 %r8, 0;
LOOP:
    mul.wide.u32 %rd3, %r3, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r5, [%rd4];
    add.s32 %r4, %r4, %r5;
    and.b32 %r6, %r5, 1;
    setp.eq.u32 %p1, %r6, 0;
    @%p1 bra SKIP;
    add.s32 %r3, %r3, 32;
SKIP:
    add.s32 %r8, %r8, 1;
    setp.lt.u32 %p2, %r8, %r1;
    @%p2 bra LOOP;
    mov.u32 %r7, %r2;
LOOP2:
    mul.wide.u32 %rd5, %r7, 4;
    add.s64 %rd6, %rd1, %rd5;
    ld.global.u32 %r5, [%rd6];
    add.s32 %r4, %r4, %r5;
    add.s32 %r9, %r2, 1;
    add.s32 %r7, %r7, %r9;
    setp.lt.u32 %p2, %r7, %r1;
    @%p2 bra LOOP2;
    mul.wide.u32 %rd7, %r2, 4;
    add.s64 %rd8, %rd2, %rd7;
    st.global.u32 [%rd8], %r4;
    ret;
}
"""


@pytest.fixture(scope="module")
def compiled():
    """(module, {(kernel, opcode, address register): plans})."""
    return compile_recording_plans(PTX)


@pytest.fixture
def m(compiled):
    return compiled[0]


def test_plans(compiled):
    seen = compiled[1]
    assert seen[("grid_stride", "ld", "%rd6")] == {"ends"}  # the start's form: %tid.x, widened
    assert seen[("grid_stride", "st", "%rd7")] == {"ends"}
    assert seen[("leave_apart", "ld", "%rd7")] == {"check", "ends"}  # in the loop / after it
    assert seen[("leave_apart", "ld", "%rd9")] == {"check"}
    assert seen[("uniform_counter", "ld", "%rd7")] == {"uniform"}
    assert seen[("uniform_counter", "ld", "%rd9")] == {"check"}
    assert seen[("not_stepped", "ld", "%rd4")] == {"check"}
    assert seen[("not_stepped", "ld", "%rd6")] == {"check"}


@pytest.mark.parametrize("n,grid,block", [(1 << 14, 8, 256), (1000, 3, 96), (4099, 5, 40), (31, 1, 64), (70, 2, 33)])
def test_grid_stride(m, n, grid, block):
    rng = np.random.default_rng(n)
    x = rng.integers(0, 1 << 20, n, dtype=np.uint32)
    y = rng.integers(0, 1 << 20, n, dtype=np.uint32)
    want = y + 2 * x
    m.launch("grid_stride", grid, block, [np.int32(n), x, y])
    np.testing.assert_array_equal(y, want)


def test_grid_stride_past_the_end_faults():
    """n one element beyond the 200 registered: thread 8's third iteration reads element 200,
    700 naming it, although its warp's first two iterations passed."""
    mem = np.zeros(256, np.uint32)
    p = mem.ctypes.data
    register_memory(p, 200 * 4)
    try:
        y = np.zeros(201, np.uint32)
        with pytest.raises(LaunchError) as e:
            compile(PTX).launch("grid_stride", 2, 48, [np.int32(201), p, y])
    finally:
        unregister_memory(p)
    assert e.value.cu_result == 700
    assert str(e.value).endswith(f"lane 8 (thread (8,0,0)), address 0x{p + 200 * 4:x}"), str(e.value)


def test_lanes_leaving_a_loop_apart(m):
    """Lane 5 runs two more iterations than the others, lane 0 and 31 the same number: a test
    of the first and last lane would find the lanes on one line after the loop."""
    src = np.arange(200, dtype=np.uint32) * 3 + 1
    lim = np.full(32, 64, np.uint32)
    lim[5] = 128
    lim[9] = 0  # one iteration (a do-while)
    out = np.zeros(32, np.uint32)
    m.launch("leave_apart", 1, 32, [src, lim, out])
    want = np.zeros(32, np.uint64)
    for lane in range(32):
        i, acc = lane, 0
        while True:
            acc += int(src[i])
            last = i
            i += 32
            if i >= lim[lane]:
                break
        want[lane] = acc + int(src[i]) + int(src[last])
    np.testing.assert_array_equal(out, (want % (1 << 32)).astype(np.uint32))


def test_uniform_counter_with_per_lane_trip_counts(m):
    src = np.arange(64, dtype=np.uint32) + 10
    lim = (np.arange(32, dtype=np.uint32) * 7) % 40
    out = np.zeros(32, np.uint32)
    m.launch("uniform_counter", 1, 32, [src, lim, out])
    want = [sum(int(v) for v in src[:k]) * 1000 + int(src[k]) for k in lim]
    np.testing.assert_array_equal(out, np.array(want, np.uint32))


def test_steps_that_are_not_inductions(m):
    n = 4
    src = np.arange(400, dtype=np.uint32) * 5 + 2
    out = np.zeros(32, np.uint32)
    m.launch("not_stepped", 1, 32, [src, out, np.uint32(n)])
    want = []
    for lane in range(32):
        i, acc = lane, 0
        for _ in range(n):
            v = int(src[i])
            acc += v
            if v & 1:
                i += 32
        j = lane
        while True:
            acc += int(src[j])
            j += lane + 1
            if j >= n:
                break
        want.append(acc % (1 << 32))
    np.testing.assert_array_equal(out, np.array(want, np.uint32))


# Registers updated by another pure instruction in the latch: a tree reduction's stride (nvcc:
# `shr.u32 %r14, %r14, 1` after the barrier). Its start is uniform, so each iteration's value is
# the same in every lane running it, and `s[t + stride]` is contiguous like `s[t]`.
TREE = HEAD + r"""
// s[t] = i < n ? in[i] : 0; for (stride = first; stride > 0; stride >>= 1)
// { if (t < stride) s[t] += s[t + stride]; __syncthreads(); } if (t == 0) out[ctaid] = s[0]
.visible .entry tree(.param .u32 n, .param .u64 in, .param .u64 out, .param .u32 first)
{
    .reg .pred %p<6>;
    .reg .f32 %f<9>;
    .reg .b32 %r<15>;
    .reg .b64 %rd<9>;
    .shared .align 4 .b8 s[4096];
    ld.param.u32 %r9, [n];
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r14, [first];
    mov.u32 %r1, %ntid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %tid.x;
    mad.lo.s32 %r4, %r2, %r1, %r3;
    setp.ge.s32 %p1, %r4, %r9;
    mov.f32 %f8, 0f00000000;
    @%p1 bra STORE;
    cvta.to.global.u64 %rd3, %rd1;
    mul.wide.s32 %rd4, %r4, 4;
    add.s64 %rd5, %rd3, %rd4;
    ld.global.f32 %f8, [%rd5];
STORE:
    shl.b32 %r10, %r3, 2;
    mov.u32 %r11, s;
    add.s32 %r5, %r11, %r10;
    st.shared.f32 [%r5], %f8;
    bar.sync 0;
    setp.eq.s32 %p2, %r14, 0;
    @%p2 bra TAIL;
LOOP:
    setp.ge.s32 %p3, %r3, %r14;
    @%p3 bra SYNC;
    shl.b32 %r12, %r14, 2;
    add.s32 %r13, %r5, %r12;
    ld.shared.f32 %f4, [%r5];
    ld.shared.f32 %f5, [%r13];
    add.f32 %f6, %f5, %f4;
    st.shared.f32 [%r5], %f6;
SYNC:
    bar.sync 0;
    shr.u32 %r14, %r14, 1;
    setp.ne.s32 %p4, %r14, 0;
    @%p4 bra LOOP;
TAIL:
    setp.ne.s32 %p5, %r3, 0;
    @%p5 bra DONE;
    ld.shared.f32 %f7, [s];
    cvta.to.global.u64 %rd6, %rd2;
    mul.wide.u32 %rd7, %r2, 4;
    add.s64 %rd8, %rd6, %rd7;
    st.global.f32 [%rd8], %f7;
DONE:
    ret;
}

// k = first; do { acc += in[k]; k >>= 1; } while (k > tid); out[tid] = acc * 1000 + in[k]:
// lanes leave at different iterations, so after the loop k is not uniform
.visible .entry halving(.param .u64 in, .param .u64 out, .param .u32 first)
{
    .reg .pred %p1;
    .reg .b32 %r<8>;
    .reg .b64 %rd<9>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [first];
    mov.u32 %r2, %tid.x;
    mov.u32 %r4, 0;
LOOP:
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r5, [%rd4];
    add.s32 %r4, %r4, %r5;
    shr.u32 %r1, %r1, 1;
    setp.gt.u32 %p1, %r1, %r2;
    @%p1 bra LOOP;
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd6, %rd1, %rd5;
    ld.global.u32 %r6, [%rd6];
    mul.lo.s32 %r4, %r4, 1000;
    add.s32 %r4, %r4, %r6;
    mul.wide.u32 %rd7, %r2, 4;
    add.s64 %rd8, %rd2, %rd7;
    st.global.u32 [%rd8], %r4;
    ret;
}

// the same with a per-lane shift (k >>= 1 + (tid & 1)): not one value per iteration
.visible .entry halving_by_lane(.param .u64 in, .param .u64 out, .param .u32 first)
{
    .reg .pred %p1;
    .reg .b32 %r<8>;
    .reg .b64 %rd<9>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [first];
    mov.u32 %r2, %tid.x;
    and.b32 %r7, %r2, 1;
    add.s32 %r7, %r7, 1;
    mov.u32 %r4, 0;
LOOP:
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r5, [%rd4];
    add.s32 %r4, %r4, %r5;
    shr.u32 %r1, %r1, %r7;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra LOOP;
    mul.wide.u32 %rd7, %r2, 4;
    add.s64 %rd8, %rd2, %rd7;
    st.global.u32 [%rd8], %r4;
    ret;
}
"""


@pytest.fixture(scope="module")
def tree_compiled():
    return compile_recording_plans(TREE)


def test_tree_plans(tree_compiled):
    seen = tree_compiled[1]
    assert seen[("tree", "ld", "%r13")] == seen[("tree", "ld", "%r5")] == {"ends"}  # s[t + stride] as s[t]
    assert seen[("halving", "ld", "%rd4")] == {"uniform"}  # in the loop
    assert seen[("halving", "ld", "%rd6")] == {"check"}  # after it
    assert seen[("halving_by_lane", "ld", "%rd4")] == {"check"}


def _tree_reference(x: np.ndarray, n: int, block: int, first: int) -> np.ndarray:
    blocks = -(-n // block)
    s = np.zeros((blocks, block), np.float32)
    s.ravel()[:n] = x[:n]
    stride = first
    while stride:
        s[:, :stride] += s[:, stride:2 * stride]
        stride >>= 1
    return s[:, 0]


@pytest.mark.parametrize("n,block", [(1 << 14, 256), (1000, 96), (4099, 1024), (77, 64), (31, 32), (700, 160)])
def test_tree_reduction(tree_compiled, n, block):
    """Odd sizes and partial last blocks; blocks of 96 and 160 threads halve to odd strides
    (48, 24, 12, 6, 3, 1), which leave elements out as on the GPU."""
    x = np.random.default_rng(n).integers(-8, 9, n).astype(np.float32)
    blocks = -(-n // block)
    out = np.full(blocks, -1, np.float32)
    tree_compiled[0].launch("tree", blocks, block, [np.int32(n), x, out, np.uint32(block // 2)])
    np.testing.assert_array_equal(out, _tree_reference(x, n, block, block // 2))


@pytest.mark.parametrize("first, lane, thread", [(1000, 24, 24), (800, 0, 224)])
def test_tree_stride_past_the_arena_faults(tree_compiled, first, lane, thread):
    """s[t + first] past the 4096-byte arena for t >= 1024 - first: the lowest such thread is named (700)."""
    x = np.zeros(1024, np.float32)
    with pytest.raises(LaunchError) as e:
        tree_compiled[0].launch("tree", 1, 1024, [np.int32(1024), x, np.zeros(1, np.float32), np.uint32(first)])
    assert e.value.cu_result == 700
    assert f"lane {lane} (thread ({thread},0,0))" in str(e.value), str(e.value)


@pytest.mark.parametrize("kernel", ["halving", "halving_by_lane"])
def test_halving_counters(tree_compiled, kernel):
    src = np.arange(1024, dtype=np.uint32) * 3 + 1
    out = np.zeros(64, np.uint32)
    tree_compiled[0].launch(kernel, 1, 64, [src, out, np.uint32(1000)])
    want = []
    for t in range(64):
        k, acc = 1000, 0
        while True:
            acc += int(src[k])
            k >>= 1 + (t & 1) if kernel == "halving_by_lane" else 1
            if (k <= t) if kernel == "halving" else k == 0:
                break
        want.append((acc * 1000 + int(src[k])) % (1 << 32) if kernel == "halving" else acc % (1 << 32))
    np.testing.assert_array_equal(out, np.array(want, np.uint32))
