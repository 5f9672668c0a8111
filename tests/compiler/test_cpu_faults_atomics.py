"""brkpt stops the launch (719, like trap, as with no debugger attached); atom.add.noftz on bf16 and
bf16x2 rounds to nearest even and is atomic across lanes and worker threads."""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler import LaunchError, compile

PTX = r"""
.version 7.8
.target sm_90
.address_size 64

.visible .entry stop_at(.param .u32 which)
{
    .reg .pred %p;
    .reg .b32 %r<3>;
    ld.param.u32 %r1, [which];
    mov.u32 %r2, %tid.x;
    setp.eq.u32 %p, %r1, %r2;
    @%p brkpt;
    ret;
}

// olds[i] = atom.add(p, v) for every thread i (p: one bf16 and one bf16x2 word)
.visible .entry bf16_add(.param .u64 p16, .param .u64 p32, .param .u64 olds16, .param .u64 olds32,
                         .param .b16 v16, .param .b32 v32)
{
    .reg .b16 %h<3>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<9>;
    ld.param.u64 %rd1, [p16];
    ld.param.u64 %rd2, [p32];
    ld.param.u64 %rd3, [olds16];
    ld.param.u64 %rd4, [olds32];
    ld.param.b16 %h1, [v16];
    ld.param.b32 %r1, [v32];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    atom.global.add.noftz.bf16 %h2, [%rd1], %h1;
    atom.global.add.noftz.bf16x2 %r1, [%rd2], %r1;
    mul.wide.u32 %rd5, %r5, 2;
    add.s64 %rd6, %rd3, %rd5;
    st.global.b16 [%rd6], %h2;
    mul.wide.u32 %rd7, %r5, 4;
    add.s64 %rd8, %rd4, %rd7;
    st.global.b32 [%rd8], %r1;
    ret;
}
"""
ONE, TWO_M8 = 0x3F80, 0x3B80  # bf16 1.0, 2^-8


@pytest.fixture(scope="module")
def m():
    return compile(PTX)


def test_brkpt_stops_the_launch_like_trap(m):
    with pytest.raises(LaunchError) as e:
        m.launch("stop_at", 2, 64, [37])
    assert e.value.cu_result == 719 and "brkpt" in str(e.value)
    m.launch("stop_at", 2, 64, [1000])  # no thread reaches brkpt; the module still works


def test_bf16_atomic_add_sums_exactly_across_threads(m):
    blocks, threads = 8, 96
    n = blocks * threads  # 768 additions of 2^-8 (low word) and 1.0 (high half of the bf16x2 word)
    p16, p32 = np.zeros(1, np.uint16), np.zeros(1, np.uint32)
    o16, o32 = np.zeros(n, np.uint16), np.zeros(n, np.uint32)
    m.launch("bf16_add", blocks, threads, [p16, p32, o16, o32, np.uint16(TWO_M8), np.uint32(ONE << 16 | TWO_M8)])
    # k * 2^-8 is exact in bf16 (8 significant bits) for k <= 256; 1 + 2^-8 is a tie that rounds
    # back to 1, so the sum sticks at 1.0: the olds are 0, 2^-8, ..., 255 * 2^-8 once each, then 1.0
    olds = o16.astype(np.uint32) << 16
    seen = np.sort(olds.view(np.float32).astype(np.float64) * 256)
    assert list(seen[:256]) == list(range(256)) and (seen[256:] == 256).all() and int(p16[0]) == ONE
    hi = np.sort((o32 >> 16).astype(np.uint32) << 16).view(np.float32)
    assert list(hi[:256]) == list(range(256)) and (hi[256:] == 256).all()  # 256 + 1 rounds to 256


@pytest.mark.parametrize("start,add,expect", [
    (ONE, TWO_M8, ONE),  # 1 + 2^-8 is halfway between 1 and 1+2^-7: to the even one, 1
    (ONE + 1, TWO_M8, ONE + 2),  # 1+2^-7 + 2^-8: halfway, to the even 1+2^-6
    (0x7F7F, 0x7F7F, 0x7F80),  # max finite + max finite overflows to +inf
    (0x8001, 0x0001, 0x0000),  # denormals are kept (.noftz): -d + d = +0
    (0x0001, 0x0001, 0x0002),  # the sum of two smallest denormals
])
def test_bf16_atomic_add_rounding(m, start, add, expect):
    p16, p32 = np.array([start], np.uint16), np.array([start << 16 | start], np.uint32)
    o16, o32 = np.zeros(1, np.uint16), np.zeros(1, np.uint32)
    m.launch("bf16_add", 1, 1, [p16, p32, o16, o32, np.uint16(add), np.uint32(add << 16 | add)])
    assert int(o16[0]) == start and int(o32[0]) == start << 16 | start
    assert int(p16[0]) == expect and int(p32[0]) == expect << 16 | expect
