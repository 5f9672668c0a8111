"""The reference interpreter against expectations computed in plain Python/numpy, and against
the CPU target on nvcc-built programs."""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.reference import ReferenceFault, Undefined, run

HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n"
TID = """
 .reg .b32 %r<40>; .reg .b64 %rd<10>; .reg .pred %p<8>;
 ld.param.u64 %rd1, [out];
 mov.u32 %r1, %tid.x;
 mul.wide.u32 %rd2, %r1, 4;
 add.s64 %rd3, %rd1, %rd2;
"""


def kernel(body: str, params: str = ".param .u64 out", pre: str = "") -> str:
    return HEAD + pre + f".visible .entry k({params})\n{{{TID}{body}\n ret;\n}}\n"


def test_divergent_loops_and_early_exit():
    # thread i: exits at once when i % 5 == 0, else sums 0..i-1 in a loop of its own length
    ptx = kernel("""
 rem.u32 %r2, %r1, 5;
 setp.eq.u32 %p1, %r2, 0;
 @%p1 exit;
 mov.u32 %r5, 0;
 mov.u32 %r6, 0;
L1:
 setp.ge.u32 %p2, %r6, %r1;
 @%p2 bra L2;
 add.s32 %r5, %r5, %r6;
 add.s32 %r6, %r6, 1;
 bra.uni L1;
L2:
 st.global.u32 [%rd3], %r5;""")
    out = np.full(100, 7, np.uint32)
    run(ptx, "k", (1,), (100,), [out])
    expect = np.array([7 if i % 5 == 0 else i * (i - 1) // 2 for i in range(100)], np.uint32)
    np.testing.assert_array_equal(out, expect)


def test_barriers_in_a_loop_with_shared_memory():
    # 4 rounds: each thread adds its right neighbour's value (shared, across warps); barriers
    # between the read and the write of every round; a partial last warp (80 threads)
    ptx = kernel("""
 mov.u32 %r2, buf;
 shl.b32 %r3, %r1, 2;
 add.u32 %r4, %r2, %r3;
 st.shared.u32 [%r4], %r1;
 mov.u32 %r10, 0;
L1:
 bar.sync 0;
 add.u32 %r11, %r1, 1;
 rem.u32 %r11, %r11, 80;
 shl.b32 %r11, %r11, 2;
 add.u32 %r11, %r2, %r11;
 ld.shared.u32 %r12, [%r11];
 ld.shared.u32 %r13, [%r4];
 barrier.sync 0;
 add.u32 %r13, %r13, %r12;
 st.shared.u32 [%r4], %r13;
 add.u32 %r10, %r10, 1;
 setp.lt.u32 %p1, %r10, 4;
 @%p1 bra L1;
 st.global.u32 [%rd3], %r13;""", pre=".shared .align 4 .b8 buf[320];\n")
    out = np.zeros(80, np.uint32)
    run(ptx, "k", (1,), (80,), [out])
    v = np.arange(80, dtype=np.uint64)
    for _ in range(4):
        v = v + np.roll(v, -1)
    np.testing.assert_array_equal(out, v.astype(np.uint32))


def test_bar_red_and_named_barrier_with_count():
    ptx = kernel("""
 and.b32 %r2, %r1, 3;
 setp.eq.u32 %p1, %r2, 0;
 bar.red.popc.u32 %r3, 1, %p1;
 bar.red.and.pred %p2, 2, %p1;
 bar.red.or.pred %p3, 3, %p1;
 selp.u32 %r4, 1000, 0, %p2;
 selp.u32 %r5, 100, 0, %p3;
 add.u32 %r3, %r3, %r4;
 add.u32 %r3, %r3, %r5;
 setp.lt.u32 %p4, %r1, 64;
 @!%p4 bra L9;
 bar.sync 4, 64;
 add.u32 %r3, %r3, 10000;
L9:
 st.global.u32 [%rd3], %r3;""")
    out = np.zeros(96, np.uint32)
    run(ptx, "k", (1,), (96,), [out])
    expect = [24 + 100 + (10000 if i < 64 else 0) for i in range(96)]
    np.testing.assert_array_equal(out, expect)


def test_barrier_after_exits_and_deadlock():
    # exited threads do not count for bar.sync without a count
    ptx = kernel("""
 setp.ge.u32 %p1, %r1, 40;
 @%p1 exit;
 bar.sync 0;
 st.global.u32 [%rd3], %r1;""")
    out = np.zeros(64, np.uint32)
    run(ptx, "k", (1,), (64,), [out])
    np.testing.assert_array_equal(out, [i if i < 40 else 0 for i in range(64)])
    # a barrier for 64 threads that only 32 reach never opens
    stuck = kernel("""
 setp.ge.u32 %p1, %r1, 32;
 @%p1 bra L9;
 bar.sync 1, 64;
L9:
 ld.global.u32 %r2, [%rd3];
L8:
 bra L8;""")
    with pytest.raises(ReferenceFault) as e:
        run(stuck, "k", (1,), (64,), [out], max_steps=100_000)
    assert e.value.cu_result == 702


WARP_OPS = """
 mul.lo.u32 %r2, %r1, 7;
 shfl.sync.down.b32 %r3|%p1, %r2, 3, {down}, {mask};
 shfl.sync.bfly.b32 %r4, %r2, 5, {bfly}, {mask};
 shfl.sync.idx.b32 %r5, %r2, 2, {idx}, {mask};
 shfl.sync.up.b32 %r6|%p2, %r2, 1, {up}, {mask};
 and.b32 %r7, %r1, 1;
 setp.eq.u32 %p3, %r7, 1;
 vote.sync.ballot.b32 %r8, %p3, {mask};
 vote.sync.any.pred %p4, %p3, {mask};
 vote.sync.all.pred %p5, %p3, {mask};
 shr.u32 %r9, %r1, 2;
 match.any.sync.b32 %r10, %r9, {mask};
 redux.sync.add.u32 %r11, %r1, {mask};
 redux.sync.max.s32 %r12, %r2, {mask};
 activemask.b32 %r13;
 selp.u32 %r14, 1, 0, %p1;
 selp.u32 %r15, 1, 0, %p4;
 selp.u32 %r16, 1, 0, %p5;
 selp.u32 %r17, 1, 0, %p2;
 mul.wide.u32 %rd4, %r1, 64;
 ld.param.u64 %rd5, [out];
 add.s64 %rd5, %rd5, %rd4;
 st.global.v4.u32 [%rd5], {{%r3, %r4, %r5, %r6}};
 st.global.v4.u32 [%rd5+16], {{%r8, %r10, %r11, %r12}};
 st.global.v4.u32 [%rd5+32], {{%r13, %r14, %r15, %r16}};
 st.global.u32 [%rd5+48], %r17;"""
WHOLE_WARP = {"down": 31, "bfly": 31, "idx": 0x101F, "up": 0}
HALF_WARP = {"down": 0x100F, "bfly": 0x100F, "idx": 0x100F, "up": 0x1000}  # 16-lane segments


def shfl_model(mode: str, lane: int, b: int, c: int) -> tuple[int, bool]:
    """The ISA's pseudocode for the source lane (written out again here, on purpose)."""
    seg, clamp = (c >> 8) & 31, c & 31
    max_lane = (lane & seg) | (clamp & ~seg & 31)
    min_lane = lane & seg
    if mode == "up":
        j, ok = lane - b, lane - b >= max_lane
    elif mode == "down":
        j, ok = lane + b, lane + b <= max_lane
    elif mode == "bfly":
        j, ok = lane ^ b, (lane ^ b) <= max_lane
    else:
        j = min_lane | (b & ~seg & 31)
        ok = j <= max_lane
    return (j if ok else lane), ok


def warp_expect(lanes: list[int], c: dict[str, int]) -> np.ndarray:
    """The 13 words each lane of the group `lanes` stores in WARP_OPS."""
    out = np.zeros((len(lanes), 13), np.uint32)
    odd = [j for j in lanes if j & 1]
    for row, i in enumerate(lanes):
        down, up = shfl_model("down", i, 3, c["down"]), shfl_model("up", i, 1, c["up"])
        out[row] = [down[0] * 7, shfl_model("bfly", i, 5, c["bfly"])[0] * 7, shfl_model("idx", i, 2, c["idx"])[0] * 7,
                    up[0] * 7, sum(1 << j for j in odd), sum(1 << j for j in lanes if j >> 2 == i >> 2),
                    sum(lanes), max(j * 7 for j in lanes), sum(1 << j for j in lanes), int(down[1]),
                    int(bool(odd)), int(len(odd) == len(lanes)), int(up[1])]
    return out


def test_warp_collectives_full_mask_and_partial_warp():
    ptx = kernel(WARP_OPS.format(mask="-1", **WHOLE_WARP))
    out = np.zeros((32, 16), np.uint32)
    run(ptx, "k", (1,), (32,), [out])
    np.testing.assert_array_equal(out[:, :13], warp_expect(list(range(32)), WHOLE_WARP))
    # a partial warp (24 lanes): the lanes that do not exist leave the group; the down/bfly
    # shuffles would read them, so PTX gives no result
    with pytest.raises(Undefined):
        run(ptx, "k", (1,), (24,), [np.zeros((24, 16), np.uint32)])


def test_warp_collectives_divergent_halves_with_partial_masks():
    # lanes 0-15 and 16-31 take different branches and synchronise separately, each with its
    # own membermask; in a block of 24 threads the upper group has 8 lanes
    body = "\n setp.lt.u32 %p7, %r1, 16;\n @%p7 bra LO;" + WARP_OPS.format(mask="0xffff0000", **HALF_WARP) \
        + "\n ret;\nLO:" + WARP_OPS.format(mask="0xffff", **HALF_WARP)
    out = np.zeros((32, 16), np.uint32)
    run(kernel(body), "k", (1,), (32,), [out])
    for half in (list(range(16)), list(range(16, 32))):
        np.testing.assert_array_equal(out[half, :13], warp_expect(half, HALF_WARP))
    # idx 2 and up 1 only read existing lanes of the 8-lane group; ballots and reductions shrink
    ops = WARP_OPS.replace("shfl.sync.down", "// shfl.sync.down").replace("shfl.sync.bfly", "// shfl.sync.bfly")
    out = np.zeros((24, 16), np.uint32)
    run(kernel(ops.format(mask="-1", **HALF_WARP)), "k", (1,), (24,), [out])
    lanes = list(range(24))
    full = warp_expect(lanes, HALF_WARP)
    for col in (2, 3, 4, 5, 6, 7, 8, 10, 11, 12):
        np.testing.assert_array_equal(out[:, col], full[:, col])


def test_legacy_vote_and_activemask_over_converged_lanes():
    ptx = kernel("""
 and.b32 %r2, %r1, 3;
 setp.eq.u32 %p1, %r2, 0;
 @%p1 bra A;
 activemask.b32 %r3;
 vote.ballot.b32 %r4, %p1;
 bra J;
A:
 activemask.b32 %r3;
 vote.any.pred %p2, %p1;
 selp.u32 %r4, 5, 6, %p2;
J:
 st.global.u32 [%rd3], %r3;
 st.global.u32 [%rd3+128], %r4;""")
    out = np.zeros(64, np.uint32)
    run(ptx, "k", (1,), (32,), [out])
    taken = sum(1 << i for i in range(0, 32, 4))
    assert all(out[i] == (taken if i % 4 == 0 else 0xFFFFFFFF ^ taken) for i in range(32))
    assert all(out[32 + i] == (5 if i % 4 == 0 else 0) for i in range(32))


def test_elect_and_bar_warp_sync():
    ptx = kernel("""
 setp.ge.u32 %p1, %r1, 3;
 @!%p1 exit;
 bar.warp.sync 0xfffffff8;
 elect.sync %r2|%p2, 0xfffffff8;
 selp.u32 %r3, 100, 0, %p2;
 add.u32 %r2, %r2, %r3;
 st.global.u32 [%rd3], %r2;""")
    out = np.zeros(32, np.uint32)
    run(ptx, "k", (1,), (32,), [out])
    np.testing.assert_array_equal(out, [0, 0, 0, 103] + [3] * 28)


def test_shared_negative_32bit_base_wraps():
    # base - 4*tid is negative (as s32) for most threads; only the 32-bit sum with +K is in range
    ptx = kernel("""
 mov.u32 %r2, buf;
 shl.b32 %r3, %r1, 2;
 add.u32 %r4, %r2, %r3;
 st.shared.u32 [%r4], %r3;
 bar.sync 0;
 neg.s32 %r5, %r1;
 mad.lo.s32 %r6, %r5, 4, %r2;
 ld.shared.u32 %r7, [%r6+252];
 st.global.u32 [%rd3], %r7;""", pre=".shared .align 4 .b8 buf[256];\n")
    out = np.zeros(64, np.uint32)
    run(ptx, "k", (1,), (64,), [out])
    np.testing.assert_array_equal(out, [4 * (63 - i) for i in range(64)])


def test_out_of_bounds_faults_name_the_thread():
    ptx = kernel("""
 ld.global.u32 %r2, [%rd3+64];
 st.global.u32 [%rd3], %r2;""")
    with pytest.raises(ReferenceFault) as e:
        run(ptx, "k", (1,), (32,), [np.zeros(32, np.uint32)])
    assert e.value.cu_result == 700 and "thread (16,0,0)" in str(e.value)
    shared = kernel("""
 mov.u32 %r2, buf;
 ld.shared.u32 %r3, [%r2+16];""", pre=".shared .align 4 .b8 buf[16];\n")
    with pytest.raises(ReferenceFault) as e:
        run(shared, "k", (1,), (1,), [np.zeros(1, np.uint32)])
    assert e.value.cu_result == 700
    trap = kernel("@%p0 trap;\n setp.eq.u32 %p1, %r1, 3;\n @%p1 trap;")
    with pytest.raises(ReferenceFault) as e:
        run(trap, "k", (1,), (8,), [np.zeros(8, np.uint32)])
    assert e.value.cu_result == 719
    spin = kernel("L1:\n bra L1;")
    with pytest.raises(ReferenceFault) as e:
        run(spin, "k", (1,), (2,), [np.zeros(2, np.uint32)], max_steps=10_000)
    assert e.value.cu_result == 702


FIB = HEAD + """
.func (.param .b32 ret) fib(.param .b32 n)
{
 .reg .b32 %r<8>; .reg .pred %p<2>; .local .align 4 .b8 slot[8];
 ld.param.b32 %r1, [n];
 setp.lt.s32 %p1, %r1, 2;
 @%p1 bra BASE;
 st.local.u32 [slot], %r1;
 add.s32 %r2, %r1, -1;
 { .param .b32 a; .param .b32 r;
   st.param.b32 [a], %r2;
   call.uni (r), fib, (a);
   ld.param.b32 %r3, [r]; }
 st.local.u32 [slot+4], %r3;
 ld.local.u32 %r1, [slot];
 add.s32 %r2, %r1, -2;
 { .param .b32 a; .param .b32 r;
   st.param.b32 [a], %r2;
   call.uni (r), fib, (a);
   ld.param.b32 %r4, [r]; }
 ld.local.u32 %r3, [slot+4];
 add.s32 %r1, %r3, %r4;
BASE:
 st.param.b32 [ret], %r1;
 ret;
}
.func (.reg .b32 d) twice(.reg .b32 x) { add.s32 d, x, x; ret; }
.visible .entry k(.param .u64 out)
{""" + TID + """
 { .param .b32 a; .param .b32 r;
   st.param.b32 [a], %r1;
   call.uni (r), fib, (a);
   ld.param.b32 %r5, [r]; }
 call.uni (%r6), twice, (%r5);
 st.global.u32 [%rd3], %r6;
 ret;
}
"""


def test_recursive_calls_with_local_frames():
    out = np.zeros(16, np.uint32)
    run(FIB, "k", (1,), (16,), [out])
    fib = [0, 1]
    while len(fib) < 16:
        fib.append(fib[-1] + fib[-2])
    np.testing.assert_array_equal(out, [2 * f for f in fib])
    with pytest.raises(ReferenceFault) as e:  # 16 bytes per frame: fib(15) nests 15 deep
        run(FIB, "k", (1,), (16,), [out], stack_size=128)
    assert e.value.cu_result == 719 and "stack overflow" in str(e.value)


def test_a_call_chain_larger_than_the_stack_limit_runs():
    """The driver grows the stack to a kernel's frame plus its deepest non-recursive chain of
    calls (cuCtxSetLimit: "automatically increases the per-thread stack size ... as needed"):
    a 64-byte kernel frame calling a 96-byte function runs with a 32-byte limit."""
    ptx = """.version 7.0
.target sm_80
.address_size 64
.func (.reg .b32 d) deep(.reg .b32 x)
{
 .local .align 4 .b8 buf[96];
 st.local.u32 [buf+92], x;
 ld.local.u32 d, [buf+92];
 add.s32 d, d, 5;
 ret;
}
.visible .entry k(.param .u64 out)
{""" + TID + """
 .local .align 4 .b8 mine[64];
 st.local.u32 [mine+60], %r1;
 ld.local.u32 %r2, [mine+60];
 call.uni (%r3), deep, (%r2);
 st.global.u32 [%rd3], %r3;
 ret;
}
"""
    out = np.zeros(8, np.uint32)
    run(ptx, "k", (1,), (8,), [out], stack_size=32)
    np.testing.assert_array_equal(out, np.arange(8) + 5)

def test_atomics_global_and_shared():
    ptx = kernel("""
 ld.param.u64 %rd6, [cnt];
 atom.global.add.u32 %r2, [%rd6], 1;
 atom.global.max.s32 %r3, [%rd6+4], %r1;
 neg.s32 %r4, %r1;
 atom.global.min.s32 %r3, [%rd6+8], %r4;
 atom.global.inc.u32 %r3, [%rd6+12], 9;
 atom.global.exch.b32 %r3, [%rd6+16], %r1;
 atom.global.add.f32 %r3, [%rd6+20], 0f3F000000;
 red.global.add.u64 [%rd6+24], 3;
 atom.global.cas.b32 %r5, [%rd6+32], %r1, 1000;
 mov.u32 %r7, sh;
 atom.shared.or.b32 %r8, [%r7], %r1;
 atom.shared.xor.b32 %r8, [%r7+4], %r1;
 bar.sync 0;
 ld.shared.v2.u32 {%r9, %r10}, [sh];
 st.global.u32 [%rd3], %r2;
 setp.eq.u32 %p1, %r1, 0;
 @!%p1 bra L9;
 st.global.v2.u32 [%rd6+40], {%r9, %r10};
L9:""", params=".param .u64 out, .param .u64 cnt", pre=".shared .align 8 .b8 sh[8];\n")
    out = np.zeros(50, np.uint32)
    cnt = np.zeros(12, np.uint32)
    cnt[1] = 0x80000000
    cnt[2] = 5
    cnt[8] = 7
    run(ptx, "k", (1,), (50,), [out, cnt])
    np.testing.assert_array_equal(np.sort(out), np.arange(50))
    assert cnt[0] == 50 and cnt[1] == 49 and cnt[2] == (-49) & 0xFFFFFFFF
    assert cnt[3] == 50 % 10 and cnt[4] == 49 and cnt[5].view(np.float32) == 25.0
    assert cnt[6] == 150 and cnt[7] == 0 and cnt[8] == 1000
    ors, xors = 0, 0
    for i in range(50):
        ors, xors = ors | i, xors ^ i
    assert cnt[10] == ors and cnt[11] == xors


def test_generic_addressing_and_isspacep():
    ptx = kernel("""
 .local .align 4 .b8 loc[8];
 mov.u64 %rd4, loc;
 cvta.local.u64 %rd4, %rd4;
 st.u32 [%rd4], %r1;
 mov.u64 %rd5, sh;
 cvta.shared.u64 %rd5, %rd5;
 shl.b32 %r2, %r1, 2;
 cvt.u64.u32 %rd6, %r2;
 add.s64 %rd7, %rd5, %rd6;
 st.u32 [%rd7], %r2;
 bar.sync 0;
 isspacep.shared %p1, %rd7;
 isspacep.local %p2, %rd4;
 isspacep.global %p3, %rd3;
 isspacep.global %p4, %rd7;
 ld.u32 %r3, [%rd4];
 cvta.to.shared.u64 %rd8, %rd7;
 cvt.u32.u64 %r4, %rd8;
 ld.shared.u32 %r5, [%r4];
 add.u32 %r3, %r3, %r5;
 selp.u32 %r6, 1, 0, %p1;
 selp.u32 %r7, 2, 0, %p2;
 selp.u32 %r8, 4, 0, %p3;
 selp.u32 %r9, 8, 0, %p4;
 add.u32 %r6, %r6, %r7;
 add.u32 %r6, %r6, %r8;
 add.u32 %r6, %r6, %r9;
 shl.b32 %r6, %r6, 16;
 add.u32 %r3, %r3, %r6;
 st.global.u32 [%rd3], %r3;""", pre=".shared .align 4 .b8 sh[128];\n")
    out = np.zeros(32, np.uint32)
    run(ptx, "k", (1,), (32,), [out])
    np.testing.assert_array_equal(out, [(7 << 16) + 5 * i for i in range(32)])


def test_module_variables_brx_and_indirect_call():
    ptx = HEAD + """
.global .align 4 .u32 table[4] = {10, 20, 30, 40};
.global .align 8 .u64 where = table;
.func (.param .b32 r) plus(.param .b32 x) { .reg .b32 %a; ld.param.b32 %a, [x]; add.s32 %a, %a, 1;
  st.param.b32 [r], %a; ret; }
.func (.param .b32 r) minus(.param .b32 x) { .reg .b32 %a; ld.param.b32 %a, [x]; sub.s32 %a, %a, 1;
  st.param.b32 [r], %a; ret; }
.visible .entry k(.param .u64 out)
{""" + TID + """
 ld.global.u64 %rd4, [where];
 and.b32 %r2, %r1, 3;
 mul.wide.u32 %rd5, %r2, 4;
 add.s64 %rd5, %rd4, %rd5;
 ld.u32 %r3, [%rd5];
 and.b32 %r4, %r1, 1;
 brx.idx %r4, T;
 T: .branchtargets P, M;
P:
 mov.u64 %rd6, plus;
 bra J;
M:
 mov.u64 %rd6, minus;
J:
 { .param .b32 a; .param .b32 r;
   st.param.b32 [a], %r3;
   proto: .callprototype (.param .b32 _) _ (.param .b32 _);
   call (r), %rd6, (a), proto;
   ld.param.b32 %r5, [r]; }
 st.global.u32 [%rd3], %r5;
 ret;
}
"""
    out = np.zeros(8, np.uint32)
    run(ptx, "k", (1,), (8,), [out])
    np.testing.assert_array_equal(out, [10 * (i % 4 + 1) + (1 if i % 2 == 0 else -1) for i in range(8)])


def test_unsupported_forms_are_named():
    tex = " tex.1d.v4.f32.s32 {%r2, %r3, %r4, %r5}, [tx, {%r1}];"
    for body, pre, name in [(tex, ".global .texref tx;\n", "texref"),
                            (" mov.u32 %r2, sh;\n mbarrier.init.shared.b64 [%r2], 32;", ".shared .b8 sh[8];\n",
                             "mbarrier.init.shared.b64")]:
        with pytest.raises(NotImplementedError, match=name):
            run(kernel(body, pre=pre), "k", (1,), (1,), [np.zeros(1, np.uint32)])


def test_small_fuzz_sized_kernel_is_fast():
    import time
    ptx = kernel("""
 mov.u32 %r5, 0;
 mov.u32 %r6, 0;
L1:
 setp.ge.u32 %p2, %r6, 1000;
 @%p2 bra L2;
 mad.lo.s32 %r5, %r5, 3, %r6;
 add.s32 %r6, %r6, 1;
 bra L1;
L2:
 st.global.u32 [%rd3], %r5;""")
    out = np.zeros(128, np.uint32)
    run(ptx, "k", (1,), (128,), [out])  # compile the forms
    start = time.perf_counter()
    run(ptx, "k", (1,), (128,), [out])
    assert time.perf_counter() - start < 2.0  # 128 threads x 4000 instructions
    v = 0
    for i in range(1000):
        v = (v * 3 + i) & 0xFFFFFFFF
    assert (out == v).all()


def test_activemask_after_an_if_whose_other_side_holds_one_sees_the_reconverged_warp():
    """Fuzz seed 1706: lanes 29-31 take the short side of an if and reach the activemask after
    it while lanes 0-28 wait at an activemask inside the other side. Completing both groups at
    once split the warp; the earlier one completes first and the lanes behind catch up."""
    ptx = kernel("""
 mov.u32 %r2, %laneid;
 setp.ge.u32 %p1, %r2, 29;
 @!%p1 bra ELSE;
 bra.uni END;
ELSE:
 activemask.b32 %r3;
END:
 activemask.b32 %r4;
 st.global.u32 [%rd3], %r4;""")
    out = np.zeros(64, np.uint32)
    run(ptx, "k", (1,), (64,), [out])
    np.testing.assert_array_equal(out, np.full(64, 0xFFFFFFFF, np.uint32))
